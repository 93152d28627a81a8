"""Memory and version ids (docs/format.md "Memory-stores ids").

A memory's id names its lineage: the random 16-byte file id a file keeps across edits and
renames (kept in the encrypted index). A version's id names the lineage and the commit:
``file_id || seq`` (8 bytes, big-endian). Both are lower-case hexadecimal behind a type prefix, so
they are stable across restarts and hosts and need no side file.
"""

from __future__ import annotations

import struct

__all__ = ["MEMORY", "VERSION", "memory_id", "parse_memory_id", "version_id", "parse_version_id"]

MEMORY = "mem_"
VERSION = "memver_"
_SEQ = struct.Struct(">Q")
_FILE_ID_BYTES = 16


_HEX = frozenset("0123456789abcdef")


def _decode(text: str, size: int) -> bytes | None:
    """The ``size`` bytes a canonical (lower-case) hex text spells, else None."""
    if len(text) != 2 * size or not _HEX.issuperset(text):
        return None
    return bytes.fromhex(text)


def memory_id(file_id: bytes) -> str:
    """The id of the memory whose lineage is ``file_id`` (16 bytes)."""
    return MEMORY + file_id.hex()


def parse_memory_id(text: str) -> bytes | None:
    """The file id a memory id names, or None when ``text`` is no memory id."""
    if not isinstance(text, str) or not text.startswith(MEMORY):
        return None
    return _decode(text[len(MEMORY) :], _FILE_ID_BYTES)


def version_id(seq: int, file_id: bytes) -> str:
    """The id of the version commit ``seq`` made of lineage ``file_id``."""
    return VERSION + file_id.hex() + _SEQ.pack(seq).hex()


def parse_version_id(text: str) -> tuple[int, bytes] | None:
    """``(seq, file_id)`` of a version id, or None when ``text`` is no version id."""
    if not isinstance(text, str) or not text.startswith(VERSION):
        return None
    raw = _decode(text[len(VERSION) :], _SEQ.size + _FILE_ID_BYTES)
    if raw is None:
        return None
    return _SEQ.unpack(raw[_FILE_ID_BYTES:])[0], raw[:_FILE_ID_BYTES]
