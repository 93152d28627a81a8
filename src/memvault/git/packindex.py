"""One git pack and its version 2 index, checked before use and searched by id.

Every byte of a pack and its index is treated as hostile: an index is used only if it is a
well-formed version 2 index (:func:`read_pack_index`: its own checksum, every table inside the
file), its fan-out is monotonic and agrees with the ids, the ids ascend strictly, and its offsets
are distinct and inside the pack; the pack must be a regular file that starts with git's
signature, holds as many entries as the index and ends with the checksum the index records. An
index this process built itself is compared byte for byte instead of parsed again.

A pack file and its index are held open (read with ``pread``, never mapped: a file truncated
under the reader cannot fault it); of the index only the fan-out stays in memory, and a lookup
reads the ids of one fan-out bucket (an index changed after it was checked can only mislead a
lookup into finding nothing: the reader checks what it reads at an offset against the id).
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import os
import re
import stat
import struct
import weakref

from ..errors import IntegrityError
from ..fsutil import close_soon

__all__ = ["IndexedPack", "StalePack", "file_signature", "read_pack_index", "checked_pack_entries"]

_PACK_SIGNATURES = (b"PACK\0\0\0\2", b"PACK\0\0\0\3")
_O_READ = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_IDS_AT = 1032  # 8-byte header + 256 fan-out words
_ID = re.compile(rb"(?s).{20}")
#: Ids compared per slice when an index is checked (a list of every id costs ~3x the index).
_ID_CHUNK = 65536


def _index_tables(data: bytes) -> tuple[int, list[int]] | None:
    """``(object count, offset of every entry in index order)`` of a version 2 pack index whose
    checksum is right and whose tables lie inside it (large offsets resolved), else None."""
    if len(data) < 1072 or data[:8] != b"\377tOc\0\0\0\2":
        return None
    if hashlib.sha1(data[:-20], usedforsecurity=False).digest() != data[-20:]:
        return None
    n = struct.unpack_from(">I", data, 8 + 255 * 4)[0]
    offsets_at = _IDS_AT + 24 * n
    large_at = offsets_at + 4 * n
    if large_at + 40 > len(data):
        return None
    offsets = list(struct.unpack_from(f">{n}I", data, offsets_at))
    if not n or max(offsets) < 0x80000000:
        return n, offsets  # no large offset (a pack under 2 GiB)
    large_count = (len(data) - 40 - large_at) // 8
    for i, offset in enumerate(offsets):
        if offset & 0x80000000:
            j = offset & 0x7FFFFFFF
            if j >= large_count:
                return None
            offsets[i] = struct.unpack_from(">Q", data, large_at + 8 * j)[0]
    return n, offsets


def read_pack_index(data: bytes) -> list[tuple[int, bytes, int]] | None:
    """``(offset, 20-byte id, crc32)`` of every entry of a version 2 pack index, sorted by
    offset; None if ``data`` is not a well-formed version 2 index (its own checksum included)."""
    tables = _index_tables(data)
    if tables is None:
        return None
    n, offsets = tables
    crcs = struct.unpack_from(f">{n}I", data, _IDS_AT + 20 * n)
    entries = [(offsets[i], data[_IDS_AT + 20 * i : _IDS_AT + 20 * i + 20], crcs[i]) for i in range(n)]
    entries.sort()
    return entries


def checked_pack_entries(base: str, max_index_bytes: int) -> tuple[list[tuple[int, bytes, int]], int]:
    """``(entries, pack size)`` of the pack ``base`` (``.idx`` and ``.pack``) once it passes every
    check :class:`PackReader` makes before it uses a pack (see the module docstring), entries as
    :func:`read_pack_index` gives them; IntegrityError or OSError otherwise. For the pack merge,
    which copies entries by offset."""
    pack = IndexedPack(base, max_index_bytes, keep_index=True)
    try:
        entries = read_pack_index(pack.idx)
        if entries is None:
            raise IntegrityError()
        return entries, pack.size
    finally:
        pack.close()


def _read_open_file(fd: int, limit: int) -> bytes:
    """The bytes of the open regular file ``fd`` of at most ``limit`` bytes (OSError otherwise)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        raise OSError("not a regular file of bounded size")
    data = os.pread(fd, st.st_size, 0)
    if len(data) != st.st_size:
        raise OSError("the file changed while it was read")
    return data


def file_signature(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_nlink)


class StalePack(Exception):
    """The pack file is gone or is not the file the index was checked against."""


class IndexedPack:
    """One validated pack: its index bytes, fan-out, and its pack file, open."""

    __slots__ = (
        "path",
        "idx",
        "idx_fd",
        "count",
        "fanout",
        "offsets_at",
        "large_at",
        "size",
        "sig",
        "fd",
        "close",
        "__weakref__",
    )

    def __init__(
        self, base: str, max_index_bytes: int, *, keep_index: bool = False, known_index: bytes | None = None
    ) -> None:
        """Read and validate ``base.idx`` against ``base.pack``; IntegrityError if either is
        not as git writes them, OSError if a file cannot be read. Both files stay open; only the
        fan-out of the index stays in memory (and the whole index with ``keep_index``). An index
        that is byte for byte ``known_index`` (one this process just built) is not parsed again:
        the pack is checked against it as always."""
        idx_fd = os.open(base + ".idx", _O_READ)
        try:
            idx = _read_open_file(idx_fd, max_index_bytes)
            if known_index is not None and idx == known_index:
                n = struct.unpack_from(">I", idx, 8 + 4 * 255)[0]
                self._open_pack(base, idx, n, None)
            else:
                self._check(base, idx)
        except BaseException:
            os.close(idx_fd)
            raise
        self.idx_fd = idx_fd
        self.idx = idx if keep_index else b""
        #: Closes both files (once, on a thread: :func:`~memvault.fsutil.close_soon`) when the
        #: reader drops the pack, or when it is collected.
        self.close = weakref.finalize(self, close_soon, self.fd, idx_fd)

    def _check(self, base: str, idx: bytes) -> None:
        """Validate the index bytes ``idx`` and open the pack file against them."""
        tables = _index_tables(idx)
        if tables is None:
            raise IntegrityError()
        n, offsets = tables
        fanout = struct.unpack_from(">256I", idx, 8)
        # Ids strictly ascending (else binary search would mislead), a slice at a time, so that
        # checking a large index holds a bounded number of id objects.
        previous, count, ids_end = b"", 0, _IDS_AT + 20 * n
        for start in range(_IDS_AT, ids_end, 20 * _ID_CHUNK):
            ids = _ID.findall(idx, start, min(start + 20 * _ID_CHUNK, ids_end))
            if not ids or previous >= ids[0] or not all(map(operator.lt, ids, itertools.islice(ids, 1, None))):
                raise IntegrityError()
            previous, count = ids[-1], count + len(ids)
        if count != n:
            raise IntegrityError()
        low = 0
        for first_byte, high in enumerate(fanout):
            if (
                high < low
                or high > n
                or (
                    high > low
                    and (idx[_IDS_AT + 20 * low] != first_byte or idx[_IDS_AT + 20 * (high - 1)] != first_byte)
                )
            ):
                raise IntegrityError()  # fan-out not monotonic, or a bucket holding other ids
            low = high
        self._open_pack(base, idx, n, offsets)

    def _open_pack(self, base: str, idx: bytes, n: int, offsets: list[int] | None) -> None:
        """Open ``base.pack`` and check it against the index ``idx`` of ``n`` entries: git's
        signature, the entry count, the trailer the index records, and (unless None, for an
        index this process built) the ``offsets`` inside the pack's entries and distinct."""
        fd = os.open(base + ".pack", _O_READ)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size < 32:
                raise IntegrityError()
            head = os.pread(fd, 12, 0)
            trailer = os.pread(fd, 20, st.st_size - 20)
            if head[:8] not in _PACK_SIGNATURES or head[8:] != n.to_bytes(4, "big") or trailer != idx[-40:-20]:
                raise IntegrityError()  # not the pack this index was written for
            if offsets is not None:
                offsets.sort()  # in place: only this check uses them
            if (
                n
                and offsets is not None
                and (
                    offsets[0] < 12
                    or offsets[-1] >= st.st_size - 20
                    or not all(map(operator.lt, offsets, itertools.islice(offsets, 1, None)))
                )
            ):
                raise IntegrityError()  # an offset outside the pack's entries, or two ids at one offset
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.path = base + ".pack"
        self.count = n
        self.fanout = struct.unpack_from(">256I", idx, 8)
        self.offsets_at = _IDS_AT + 24 * n
        self.large_at = _IDS_AT + 28 * n
        self.size = st.st_size
        self.sig = file_signature(st)

    def _index_bytes(self, at: int, size: int) -> bytes:
        """``size`` bytes of the index file at ``at``; StalePack if the file is shorter now."""
        data = os.pread(self.idx_fd, size, at)
        if len(data) != size:
            raise StalePack()
        return data

    def find(self, raw_id: bytes) -> int:
        """The offset of ``raw_id`` in the pack, or -1 (binary search in its fan-out bucket, read
        from the index file). Raises StalePack if the index file is shorter than it was, OSError if
        it cannot be read; a changed index misleads the search at worst (what is read at an
        offset is checked against the id asked for)."""
        first = raw_id[0]
        bucket = self.fanout[first - 1] if first else 0
        hi = self.fanout[first] - bucket
        if hi <= 0:
            return -1
        ids = self._index_bytes(_IDS_AT + 20 * bucket, 20 * hi)
        lo = 0
        while lo < hi:
            mid = (lo + hi) >> 1
            here = ids[20 * mid : 20 * mid + 20]
            if here < raw_id:
                lo = mid + 1
            elif here > raw_id:
                hi = mid
            else:
                i = bucket + mid
                offset: int = struct.unpack(">I", self._index_bytes(self.offsets_at + 4 * i, 4))[0]
                if offset & 0x80000000:
                    at = self.large_at + 8 * (offset & 0x7FFFFFFF)
                    offset = struct.unpack(">Q", self._index_bytes(at, 8))[0]
                return offset
        return -1
