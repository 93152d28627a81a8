"""git's pack format as memvault writes it: one pack per commit, its version 2 index.

Pure bytes, no I/O (the files are written by :mod:`memvault.git.packdir`; read by
:mod:`memvault.git.packread`).
"""

from __future__ import annotations

import binascii
import hashlib
import itertools
import struct
import zlib
from collections.abc import Iterable

from .objects import PACK_TYPES, GitObject

__all__ = ["COMMIT_LEVEL", "build_pack", "entry_header", "pack_index", "zlib_stored"]

#: zlib level of commit objects in a pack when the repository's level is 0 (stored): their
#: headers and base64 metadata shrink by a quarter (≈ 670 -> 510 bytes), unlike the ciphertext
#: blobs and the trees of random ids, which stay stored.
COMMIT_LEVEL = 6
#: ... with a 4 KiB window and a small hash table (a commit is well under 4 KiB): zlib's default
#: 32 KiB window and memLevel 8 cost ≈ 85 µs per commit to set up, these ≈ 15 µs, same output size.
_COMMIT_WBITS = 12
_COMMIT_MEMLEVEL = 6


#: Below this size :func:`zlib_stored` gives the very bytes of ``zlib.compress(data, 0)`` (one
#: stored block; zlib splits larger inputs its own way): :func:`build_pack` uses it there only,
#: so its packs stay byte for byte what dulwich writes.
_STORED_AS_ZLIB = 32 * 1024


def entry_header(type_num: int, size: int) -> bytes:
    """A pack entry's header: type and inflated size, git's little-endian base-128 varint."""
    byte = (type_num << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def pack_index(entries: list[tuple[bytes, int, int]], pack_checksum: bytes) -> bytes:
    """The version 2 ``.idx`` of a pack: ``entries`` are ``(20-byte id, crc32, offset)`` (any
    order, no duplicate ids), ``pack_checksum`` the pack's trailing SHA-1."""
    entries = sorted(entries)
    counts = [0] * 256
    for raw_id, _crc, _offset in entries:
        counts[raw_id[0]] += 1
    fanout = list(itertools.accumulate(counts))
    offsets: list[int] = []
    large: list[int] = []
    for _raw_id, _crc, offset in entries:
        if offset < 0x80000000:
            offsets.append(offset)
        else:
            offsets.append(0x80000000 | len(large))
            large.append(offset)
    n = len(entries)
    body = b"".join(
        (
            b"\377tOc\0\0\0\2",
            struct.pack(">256I", *fanout),
            b"".join(e[0] for e in entries),
            struct.pack(f">{n}I", *(e[1] for e in entries)),
            struct.pack(f">{n}I", *offsets),
            struct.pack(f">{len(large)}Q", *large),
            pack_checksum,
        )
    )
    return body + hashlib.sha1(body, usedforsecurity=False).digest()


def zlib_stored(data: bytes) -> bytes:
    """``data`` as a zlib stream of stored (level 0, uncompressed) deflate blocks, RFC 1950/1951,
    without setting up a compressor (``zlib.compress(data, 0)`` costs ~9 us per object for that)."""
    out = [b"\x78\x01"]
    pos, n = 0, len(data)
    while True:
        chunk = data[pos : pos + 0xFFFF]
        pos += len(chunk)
        final = pos >= n
        out.append(struct.pack("<BHH", final, len(chunk), len(chunk) ^ 0xFFFF))
        out.append(chunk)
        if final:
            break
    out.append(struct.pack(">I", zlib.adler32(data)))
    return b"".join(out)


def build_pack(objects: Iterable[GitObject], level: int) -> tuple[bytes, bytes, str]:
    """``(pack, idx, name)`` of one git pack (version 2) holding ``objects`` undeltified, each
    zlib stream at ``level`` (commits at :data:`COMMIT_LEVEL` when ``level`` is 0; a duplicate
    id is stored once), its version 2 index, and the pack's name: the hex SHA-1 trailer of the
    pack, as git names packs."""
    seen: set[bytes] = set()
    parts: list[bytes] = [b""]
    entries: list[tuple[bytes, int, int]] = []
    offset = 12
    for obj in objects:
        raw_id = binascii.a2b_hex(obj.id)
        if raw_id in seen:
            continue
        seen.add(raw_id)
        body = obj.as_raw_string()
        if obj.type_name == b"commit" and level == 0 and COMMIT_LEVEL:
            deflate = zlib.compressobj(COMMIT_LEVEL, zlib.DEFLATED, _COMMIT_WBITS, _COMMIT_MEMLEVEL)
            stream = deflate.compress(body) + deflate.flush()
        elif level == 0 and len(body) < _STORED_AS_ZLIB:
            stream = zlib_stored(body)
        else:
            stream = zlib.compress(body, level)
        entry = entry_header(PACK_TYPES[obj.type_name], len(body)) + stream
        entries.append((raw_id, zlib.crc32(entry), offset))
        parts.append(entry)
        offset += len(entry)
    parts[0] = b"PACK" + struct.pack(">II", 2, len(entries))
    data = b"".join(parts)
    checksum = hashlib.sha1(data, usedforsecurity=False).digest()
    return data + checksum, pack_index(entries, checksum), checksum.hex()
