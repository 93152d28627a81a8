"""When each file was last read, kept without a commit per read and without plaintext on disk.

Reads are recorded in memory (:meth:`AccessTimes.touch`, one dictionary update) at a resolution of
one hour, and merged into the file ``access`` in the store directory by :meth:`AccessTimes.flush`,
which the store calls while it holds its writer lock (after a commit, at close, and at most every
:data:`FLUSH_SECONDS` on a read-only session). The merge keeps the later time of each file, so
concurrent readers in other processes lose nothing.

Format of ``access``: ``seal(K_access, pad(body), aad)`` (AES-256-GCM, PADMÉ padding; see
docs/format.md). ``body`` is ``MAGIC``, an unsigned 32-bit big-endian entry count, then per entry
the file's 32-byte path token (as in git trees and the index) and an unsigned 32-bit big-endian
hour number (seconds since the epoch // 3600). ``aad`` binds the file to its store. What leaks:
the padded size (about how many files have been read) and the file's modification time.

The file is advisory: only ``memvault expire`` relies on it, and it refuses to run when the file
is damaged (:class:`~memvault.errors.IntegrityError`) rather than treating every read as lost.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Container, Mapping
from pathlib import Path
from typing import Final

from .. import crypto
from ..errors import IntegrityError, read_failure
from ..fsutil import atomic_write, read_bounded

__all__ = ["AccessTimes", "FILE_NAME", "RESOLUTION", "FLUSH_SECONDS"]

FILE_NAME: Final = "access"
#: Seconds per recorded unit: reads within the same hour are one entry and cost no write.
RESOLUTION: Final = 3600
#: A session that only reads merges its reads into the file at most this often.
FLUSH_SECONDS: Final = 600.0
MAGIC: Final = b"MVACCESS1"
TOKEN_BYTES: Final = 32
_ENTRY: Final = struct.Struct(">32sI")
_COUNT: Final = struct.Struct(">I")
#: Largest number of entries read from the file; a bigger file is refused before it is read.
MAX_ENTRIES: Final = 2_000_000
_MAX_FILE_BYTES: Final = crypto.padded_size(len(MAGIC) + _COUNT.size + MAX_ENTRIES * _ENTRY.size) + 64


#: How a refused file continues a message: nothing read can be trusted, so ``expire`` stops.
_UNSURE = (
    ", so expire cannot tell which files were read; nothing was deleted. If the loss of the read times is "
    "accepted, run expire again with --assume-unread."
)


def _aad(store_id: bytes) -> bytes:
    return b"memvault/v1/access\0" + store_id


def encode(key: bytes, store_id: bytes, hours: Mapping[bytes, int]) -> bytes:
    """The sealed file content for ``token -> hour``."""
    parts = [MAGIC, _COUNT.pack(len(hours))]
    for token in sorted(hours):
        if len(token) != TOKEN_BYTES:
            raise ValueError("a path token is 32 bytes")
        parts.append(_ENTRY.pack(token, hours[token]))
    return crypto.seal(key, crypto.pad(b"".join(parts)), _aad(store_id))


def decode(key: bytes, store_id: bytes, sealed: bytes) -> dict[bytes, int]:
    """``token -> hour`` from a sealed file; :class:`IntegrityError` if it is damaged or foreign."""
    try:
        body = crypto.unpad(crypto.open_sealed(key, sealed, _aad(store_id)))
    except Exception:
        raise IntegrityError("The store's access-time file is damaged or belongs to another store.") from None
    if not body.startswith(MAGIC) or len(body) < len(MAGIC) + _COUNT.size:
        raise IntegrityError("The store's access-time file is not in a format memvault writes.")
    (count,) = _COUNT.unpack_from(body, len(MAGIC))
    start = len(MAGIC) + _COUNT.size
    if count > MAX_ENTRIES or len(body) != start + count * _ENTRY.size:
        raise IntegrityError("The store's access-time file is not in a format memvault writes.")
    return {token: hour for token, hour in _ENTRY.iter_unpack(body[start:])}


class AccessTimes:
    """The last-read hour of each file of one store: in memory, merged into ``access``."""

    __slots__ = ("_path", "_key", "_store_id", "_pending", "_lock", "_flushed_at", "record")

    def __init__(self, path: Path, key: bytes, store_id: bytes) -> None:
        self._path = path
        self._key = key
        self._store_id = store_id
        self._pending: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self._flushed_at = time.monotonic()
        #: Called with the SHA-256 of each new file before it is written (the store records it).
        self.record: Callable[[bytes], None] | None = None

    def move_to(self, path: Path) -> None:
        """Keep the file at ``path`` from now on (a replica's read times live in the host state,
        docs/format.md §14); reads already recorded stay pending."""
        self._path = path

    def touch(self, token: bytes, when: float | None = None) -> None:
        """Record a read of the file with path token ``token`` (memory only)."""
        hour = int((time.time() if when is None else when) // RESOLUTION)
        with self._lock:
            if self._pending.get(token, -1) < hour:
                self._pending[token] = hour

    @property
    def dirty(self) -> bool:
        return bool(self._pending)

    def pending(self) -> frozenset[bytes]:
        """The path tokens of the reads recorded and not yet merged into the file."""
        with self._lock:
            return frozenset(self._pending)

    def due(self) -> bool:
        """Whether reads are pending and the last flush was :data:`FLUSH_SECONDS` ago or more."""
        return bool(self._pending) and time.monotonic() - self._flushed_at >= FLUSH_SECONDS

    def create(self, *, durable: bool) -> None:
        """Write an empty file (at store creation: from then on a missing file means it was
        removed, which :func:`~memvault.erasure.expiry.expire` refuses to take for "never read")."""
        self._write(encode(self._key, self._store_id, {}), durable=durable)

    def _write(self, data: bytes, *, durable: bool) -> None:
        if self.record is not None:
            self.record(crypto.sha256(data))
        atomic_write(self._path, data, durable=durable)

    def digest(self) -> bytes | None:
        """SHA-256 of the file as it is on disk, or None if it is missing.

        Raises:
            IntegrityError, StorageError: as :meth:`last_read`.
        """
        sealed = self._read_file()
        return None if sealed is None else crypto.sha256(sealed)

    def _read_file(self) -> bytes | None:
        """The file's bytes, or None if it is missing."""
        try:
            return read_bounded(self._path, _MAX_FILE_BYTES)
        except FileNotFoundError:
            return None
        except OSError as err:
            # EIO, out of descriptors, permission: the disk's fault, not damage (which flush()
            # would answer by replacing the file, and every other session's read times).
            raise read_failure(
                err, what="The store's access-time file", damaged="The store's access-time file cannot be read."
            ) from None

    def recorded(self) -> bool:
        """Whether the file exists (it may still be damaged: :meth:`last_read` says)."""
        return os.path.lexists(self._path)

    def _read_disk(self, *, only: Callable[[bytes], bool] | None = None) -> dict[bytes, int]:
        sealed = self._read_file()
        if sealed is None:
            if only is not None:
                raise IntegrityError(f"The store's access-time file 'access' is missing{_UNSURE}")
            return {}
        if only is not None and not only(crypto.sha256(sealed)):
            raise IntegrityError(
                f"The store's access-time file 'access' is not the one the keyring recorded last (an older copy "
                f"put back?){_UNSURE}"
            )
        return decode(self._key, self._store_id, sealed)

    def last_read(self, *, only: Callable[[bytes], bool] | None = None) -> dict[bytes, float]:
        """``token -> time`` (seconds since the epoch, start of the hour) of the latest recorded
        read of each file, from the file and this session.

        Args:
            only: accept the file only if this says yes to its SHA-256 (the bytes decoded are the
                bytes checked); a missing file is then refused too.

        Raises:
            IntegrityError: the file is damaged, or refused by ``only``.
        """
        hours = self._read_disk(only=only)
        with self._lock:
            for token, hour in self._pending.items():
                if hours.get(token, -1) < hour:
                    hours[token] = hour
        return {token: float(hour * RESOLUTION) for token, hour in hours.items()}

    def flush(self, live: Container[bytes] | None = None, *, durable: bool = True) -> None:
        """Merge the pending reads into the file, dropping tokens not in ``live`` (when given).

        The caller holds the store's writer lock. A damaged file is replaced by this session's
        reads (it was advisory; ``verify`` reports the damage until then). OSError propagates
        and keeps the reads pending.
        """
        with self._lock:
            pending = dict(self._pending)
        if not pending:
            return
        try:
            hours = self._read_disk()
        except IntegrityError:
            hours = {}
        for token, hour in pending.items():
            if hours.get(token, -1) < hour:
                hours[token] = hour
        if live is not None:
            hours = {t: h for t, h in hours.items() if t in live}
        self._write(encode(self._key, self._store_id, hours), durable=durable)
        with self._lock:
            for token, hour in pending.items():
                if self._pending.get(token) == hour:
                    del self._pending[token]
            self._flushed_at = time.monotonic()
