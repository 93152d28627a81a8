"""Memory and version ids (docs/format.md "Memory-stores ids").

A memory's id names its lineage: the random 16-byte file id a file keeps across edits and
renames (kept in the encrypted index). A version's id names the lineage and the commit:
``file_id || seq`` (8 bytes, big-endian). Both are lower-case base32 without padding behind a type prefix, so they are
stable across restarts and hosts and need no side file.
"""

from __future__ import annotations

import base64
import binascii
import struct

__all__ = ["MEMORY", "VERSION", "memory_id", "parse_memory_id", "version_id", "parse_version_id"]

MEMORY = "mem_"
VERSION = "memver_"
_SEQ = struct.Struct(">Q")
_FILE_ID_BYTES = 16


def _encode(raw: bytes) -> str:
    return base64.b32encode(raw).decode("ascii").rstrip("=").lower()


def _decode(text: str, size: int) -> bytes | None:
    if not text.isascii() or not text.isalnum():
        return None
    padded = text.upper() + "=" * (-len(text) % 8)
    try:
        raw = base64.b32decode(padded)
    except (binascii.Error, ValueError):
        return None
    # Only the canonical spelling of ``size`` bytes (no trailing bits set, no other length).
    return raw if len(raw) == size and _encode(raw) == text else None


def memory_id(file_id: bytes) -> str:
    """The id of the memory whose lineage is ``file_id`` (16 bytes)."""
    return MEMORY + _encode(file_id)


def parse_memory_id(text: str) -> bytes | None:
    """The file id a memory id names, or None when ``text`` is no memory id."""
    if not isinstance(text, str) or not text.startswith(MEMORY):
        return None
    return _decode(text[len(MEMORY) :], _FILE_ID_BYTES)


def version_id(seq: int, file_id: bytes) -> str:
    """The id of the version commit ``seq`` made of lineage ``file_id``."""
    return VERSION + _encode(file_id + _SEQ.pack(seq))


def parse_version_id(text: str) -> tuple[int, bytes] | None:
    """``(seq, file_id)`` of a version id, or None when ``text`` is no version id."""
    if not isinstance(text, str) or not text.startswith(VERSION):
        return None
    raw = _decode(text[len(VERSION) :], _SEQ.size + _FILE_ID_BYTES)
    if raw is None:
        return None
    return _SEQ.unpack(raw[_FILE_ID_BYTES:])[0], raw[:_FILE_ID_BYTES]
