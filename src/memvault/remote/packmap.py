"""Which pack in object storage holds each object, for a replica whose cache evicted packs: the
object ids of every pack it has pulled or published, in an append-only file of its own."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ..fsutil import FILE_MODE, write_all
from ..git.packindex import read_pack_index

__all__ = ["PackMap"]

_HEAD = struct.Struct(">20sI")


class PackMap:
    """The file ``path``: per pack, ``name(20) || u32 n || n * object id(20)``. A cache: a wrong
    entry costs a fetch of a pack that lacks the object (objects are checked against their ids).

    Args:
        path: the file (created on the first :meth:`add`, mode 0600).
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._index: dict[bytes, str] | None = None
        self._loaded_size = -1

    def add(self, name: str, idx: bytes) -> None:
        """Record the objects of the pack ``name`` (40 hex) from its index bytes (ignored if the
        index does not parse)."""
        entries = read_pack_index(idx)
        if entries is None:
            return
        ids = [raw_id for _offset, raw_id, _crc in entries]
        record = _HEAD.pack(bytes.fromhex(name), len(ids)) + b"".join(ids)
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        try:
            write_all(fd, record)
        finally:
            os.close(fd)
        if self._index is not None:
            self._index.update(dict.fromkeys(ids, name))

    @staticmethod
    def ids_of(idx: bytes) -> set[bytes]:
        """The object ids (20 bytes) a pack's index lists (none if it does not parse)."""
        entries = read_pack_index(idx)
        return {raw_id for _offset, raw_id, _crc in entries} if entries is not None else set()

    def find(self, raw_id: bytes) -> str | None:
        """The name of a pack holding the object ``raw_id``, or None if none is recorded (the file
        is read again when another process of the host sharing the cache has added to it)."""
        if self._index is None:
            self._index = self._load()
        found = self._index.get(raw_id)
        if found is None and self._size() != self._loaded_size:
            self._index = self._load()
            found = self._index.get(raw_id)
        return found

    def _size(self) -> int:
        try:
            return self._path.stat().st_size
        except FileNotFoundError:
            return 0

    def firsts(self) -> dict[str, bytes]:
        """One object id of every recorded pack, by pack name."""
        if self._index is None:
            self._index = self._load()
        out: dict[str, bytes] = {}
        for raw_id, name in self._index.items():
            out.setdefault(name, raw_id)
        return out

    def _load(self) -> dict[bytes, str]:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            self._loaded_size = 0
            return {}
        self._loaded_size = len(data)
        index: dict[bytes, str] = {}
        pos = 0
        while pos + _HEAD.size <= len(data):
            raw_name, count = _HEAD.unpack_from(data, pos)
            pos += _HEAD.size
            if pos + 20 * count > len(data):
                break  # a torn append
            name = raw_name.hex()
            for i in range(count):
                index[data[pos + 20 * i : pos + 20 * (i + 1)]] = name
            pos += 20 * count
        return index
