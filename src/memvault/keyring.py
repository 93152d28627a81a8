"""The keyring: wrapped per-version data keys and the freshness high-water mark.

It lives beside the git repository, outside history, because it must stay mutable: destroying
one data key (crypto-shredding) makes one version unreadable without rewriting any commit.

File ``keyring``: a header ``b"MVKR" || u8 version || store_id(16)`` followed by records
``u8 type || u16 length || body``. Records are appended by the writer holding the store lock;
a torn tail (a crash mid-append) is ignored by readers and cut off by the next writer.

- ``DEK`` (type 1): ``dek_id(16) || u32 epoch || seal(K_wrap, dek, aad)`` where
  ``aad = "memvault/v1/dek" || store_id || dek_id || epoch``.
- ``COMMIT`` (type 2): ``u64 seq || commit_id(40 hex) || parent_id(40 hex or 40 "0") || mac``
  with ``mac = HMAC(K_keyring, "memvault/v1/hw" || store_id || seq || commit_id || parent_id ||
  prev_mac)``, where ``prev_mac`` is the mac of the previous COMMIT or ABORT record (32 zero
  bytes for the first). The newest one is the high-water mark. Chaining the macs means an old
  record cannot be replayed at the end to lower the mark; seq must grow by one per record
  (or repeat the previous seq from the same parent, replacing a commit that was never published).
- ``ABORT`` (type 3): ``u64 seq || commit_id(40 hex) || mac`` with
  ``mac = HMAC(K_keyring, "memvault/v1/abort" || store_id || seq || commit_id || prev_mac)``:
  the writer recorded that commit but could not publish it; the mark goes back to the previous
  one. Records are never removed, so readers never see the file shrink except for a torn tail.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from . import crypto
from .errors import IntegrityError
from .fsutil import FILE_MODE, fsync_dir, write_all

__all__ = ["Keyring", "HighWater", "ZERO_ID"]

_MAGIC = b"MVKR"
_VERSION = 1
_HEADER = struct.Struct(">4sB16s")
_RECORD = struct.Struct(">BH")
_DEK = 1
_COMMIT = 2
_ABORT = 3
_DEK_HEAD = struct.Struct(">16sI")
_COMMIT_BODY = struct.Struct(">Q40s40s32s")
_ABORT_BODY = struct.Struct(">Q40s32s")
_DEK_AAD = b"memvault/v1/dek"
_HW_MAC = b"memvault/v1/hw"
_ABORT_MAC = b"memvault/v1/abort"
_NO_MAC = bytes(32)
#: Parent id of the first commit.
ZERO_ID = b"0" * 40


@dataclass(frozen=True)
class HighWater:
    """The newest commit this store has ever recorded: ``seq`` and its id."""

    seq: int
    commit_id: bytes
    parent_id: bytes


class Keyring:
    """Reader/appender of the keyring file. Not thread-safe by itself; the store serialises."""

    def __init__(self, path: Path, store_id: bytes, wrap_keys: dict[int, bytes], mac_key: bytes) -> None:
        self._path = path
        self._store_id = store_id
        self._wrap_keys = wrap_keys
        self._mac_key = mac_key
        self._sealed: dict[bytes, tuple[int, bytes]] = {}
        self._deks: dict[bytes, bytes] = {}
        self._offset = _HEADER.size
        self._chain = _NO_MAC
        self.high_water: HighWater | None = None
        self._previous: HighWater | None = None

    @staticmethod
    def create(path: Path, store_id: bytes, *, durable: bool) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        try:
            os.write(fd, _HEADER.pack(_MAGIC, _VERSION, store_id))
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if durable:
            fsync_dir(path.parent)

    @property
    def size(self) -> int:
        """Bytes of complete records read so far (the append position)."""
        return self._offset

    def refresh(self) -> None:
        """Read records appended since the last call (complete records only)."""
        try:
            with open(self._path, "rb") as f:
                if self._offset == _HEADER.size:
                    magic, version, store_id = _HEADER.unpack(f.read(_HEADER.size).ljust(_HEADER.size, b"\0"))
                    if magic != _MAGIC or version != _VERSION or store_id != self._store_id:
                        raise IntegrityError("The store's keyring is damaged or belongs to another store.")
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            raise IntegrityError("The store's keyring is missing.") from None
        pos = 0
        while pos + _RECORD.size <= len(data):
            rtype, length = _RECORD.unpack_from(data, pos)
            if rtype == 0 and not any(data[pos:]):
                break  # zeros after a power loss (delayed allocation): a torn tail, cut on next append
            end = pos + _RECORD.size + length
            if end > len(data):
                break  # torn or still-being-written tail
            self._parse(rtype, data[pos + _RECORD.size : end])
            pos = end
        self._offset += pos

    def _parse(self, rtype: int, body: bytes) -> None:
        if rtype == _DEK:
            if len(body) != _DEK_HEAD.size + crypto.KEY_SIZE + crypto.SEAL_OVERHEAD:
                raise IntegrityError("The store's keyring is damaged.")
            dek_id, epoch = _DEK_HEAD.unpack_from(body)
            self._sealed[dek_id] = (epoch, body[_DEK_HEAD.size :])
        elif rtype == _COMMIT:
            if len(body) != _COMMIT_BODY.size:
                raise IntegrityError("The store's keyring is damaged.")
            seq, commit_id, parent_id, tag = _COMMIT_BODY.unpack(body)
            crypto.mac_verify(self._mac_key, self._hw_message(seq, commit_id, parent_id), tag)
            hw = self.high_water
            if hw is not None and not (
                seq == hw.seq + 1 or (seq == hw.seq and parent_id == hw.parent_id and commit_id != hw.commit_id)
            ):
                raise IntegrityError("The store's keyring is damaged.")
            # A replacement (same seq) keeps the mark before the replaced one as "previous".
            previous = self._previous if hw is not None and seq == hw.seq else hw
            self._previous, self.high_water, self._chain = previous, HighWater(seq, commit_id, parent_id), tag
        elif rtype == _ABORT:
            if len(body) != _ABORT_BODY.size:
                raise IntegrityError("The store's keyring is damaged.")
            seq, commit_id, tag = _ABORT_BODY.unpack(body)
            crypto.mac_verify(self._mac_key, self._abort_message(seq, commit_id), tag)
            hw = self.high_water
            if hw is None or (hw.seq, hw.commit_id) != (seq, commit_id):
                raise IntegrityError("The store's keyring is damaged.")
            self.high_water, self._previous, self._chain = self._previous, None, tag
        else:
            raise IntegrityError("The store's keyring is damaged.")

    def _hw_message(self, seq: int, commit_id: bytes, parent_id: bytes) -> bytes:
        return _HW_MAC + self._store_id + struct.pack(">Q", seq) + commit_id + parent_id + self._chain

    def _abort_message(self, seq: int, commit_id: bytes) -> bytes:
        return _ABORT_MAC + self._store_id + struct.pack(">Q", seq) + commit_id + self._chain

    def _dek_aad(self, dek_id: bytes, epoch: int) -> bytes:
        return _DEK_AAD + self._store_id + dek_id + struct.pack(">I", epoch)

    def dek(self, dek_id: bytes) -> bytes:
        """The data key ``dek_id``; :class:`IntegrityError` if absent or not authentic."""
        key = self._deks.get(dek_id)
        if key is None:
            entry = self._sealed.get(dek_id)
            if entry is None:
                self.refresh()
                entry = self._sealed.get(dek_id)
                if entry is None:
                    raise IntegrityError()
            epoch, sealed = entry
            wrap_key = self._wrap_keys.get(epoch)
            if wrap_key is None:
                raise IntegrityError()
            key = crypto.open_sealed(wrap_key, sealed, self._dek_aad(dek_id, epoch))
            self._deks[dek_id] = key
        return key

    def has(self, dek_id: bytes) -> bool:
        return dek_id in self._sealed

    def dek_record(self, dek_id: bytes, dek: bytes, epoch: int) -> bytes:
        """Encode a DEK record for :meth:`append` (and remember the key)."""
        body = _DEK_HEAD.pack(dek_id, epoch) + crypto.seal(self._wrap_keys[epoch], dek, self._dek_aad(dek_id, epoch))
        self._deks[dek_id] = dek
        return _RECORD.pack(_DEK, len(body)) + body

    def commit_record(self, seq: int, commit_id: bytes, parent_id: bytes) -> bytes:
        """Encode a high-water record chained to the last record read (refresh first)."""
        tag = crypto.mac(self._mac_key, self._hw_message(seq, commit_id, parent_id))
        body = _COMMIT_BODY.pack(seq, commit_id, parent_id, tag)
        return _RECORD.pack(_COMMIT, len(body)) + body

    def abort_record(self, seq: int, commit_id: bytes) -> bytes:
        """Encode an abort of the newest high-water record (refresh first)."""
        tag = crypto.mac(self._mac_key, self._abort_message(seq, commit_id))
        body = _ABORT_BODY.pack(seq, commit_id, tag)
        return _RECORD.pack(_ABORT, len(body)) + body

    def append(self, records: bytes, *, durable: bool) -> int:
        """Append encoded records in one write (caller holds the store lock); return old size.

        Any torn tail left by a crashed writer is cut off first.
        """
        self.refresh()
        start = self._offset
        fd = os.open(self._path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
            write_all(fd, records)
            if durable:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        self.refresh()
        return start
