"""The host's high-water mark of a store in object storage: the newest log record it has seen
and that record's version tag, authenticated, so a bucket served older or altered is noticed."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from .. import crypto
from ..errors import IntegrityError
from ..fsutil import atomic_write, read_bounded

__all__ = ["HighWaterMark"]

_MAC = b"memvault/v1/remote-mark"
_SEQ = struct.Struct(">Q")
_MAX_BYTES = 4096


class HighWaterMark:
    """The mark file ``path`` (JSON: ``seq``, ``tag``, ``mac``; mode 0600).

    Args:
        path: where the mark lives in the host's cache.
        key: the MAC key (the store's keyring key; the message is domain-separated).
        store_id: the store's id, bound into the MAC.
    """

    def __init__(self, path: Path, key: bytes, store_id: bytes) -> None:
        self._path = path
        self._key = key
        self._store_id = store_id

    def _message(self, seq: int, tag: str) -> bytes:
        return _MAC + self._store_id + _SEQ.pack(seq) + tag.encode("utf-8")

    def read(self) -> tuple[int, str] | None:
        """``(seq, tag)`` of the newest log record this host saw, or None before the first.

        Raises:
            IntegrityError: the mark file is damaged or was not written with this store's key.
        """
        try:
            obj = json.loads(read_bounded(self._path, _MAX_BYTES))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            raise IntegrityError("The host's high-water mark of the remote store is damaged.") from None
        try:
            seq, tag, mac = obj["seq"], obj["tag"], crypto.b64decode(obj["mac"])
            if type(seq) is not int or not 0 <= seq < 2**64 or not isinstance(tag, str) or len(obj) != 3:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise IntegrityError("The host's high-water mark of the remote store is damaged.") from None
        if not crypto.consteq(crypto.mac(self._key, self._message(seq, tag)), mac):
            raise IntegrityError("The host's high-water mark of the remote store does not verify.")
        return seq, tag

    def write(self, seq: int, tag: str, *, durable: bool) -> None:
        """Record that this host has seen the log record of ``seq`` with version tag ``tag``."""
        mac = crypto.b64encode(crypto.mac(self._key, self._message(seq, tag)))
        data = json.dumps({"seq": seq, "tag": tag, "mac": mac}, sort_keys=True).encode()
        atomic_write(self._path, data, durable=durable)
