"""git's object formats as memvault writes and reads them: trees, commits, loose objects.

Pure bytes, no I/O. Every tree and commit read back is parsed strictly against the one shape
memvault writes (docs/format.md §5.6, §9.1), so a hostile repository is refused rather than interpreted.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import zlib
from collections.abc import Mapping

from ..errors import IntegrityError

__all__ = [
    "MODE_BLOB",
    "MODE_TREE",
    "IDENTITY",
    "MAX_OBJECT_BYTES",
    "PACK_TYPES",
    "TYPE_NAMES",
    "GitObject",
    "is_hex_id",
    "parse_tree_strict",
    "serialize_tree",
    "tree_sort_key",
    "tree_entry",
    "tree_parts",
    "make_commit",
    "loose_object",
    "parse_loose_object",
]

MODE_BLOB = 0o100644
MODE_TREE = 0o040000
#: Constant author/committer: who did what lives only in the encrypted commit metadata.
IDENTITY = b"memvault <memvault@invalid>"
#: Largest object memvault reads (inflated). A content blob is at most about 75 MiB (the
#: largest ``max_file_bytes``, padded); anything larger is refused before it is inflated.
MAX_OBJECT_BYTES = 256 * 1024 * 1024
#: git's object type numbers (in packs).
PACK_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
TYPE_NAMES = {v: k for k, v in PACK_TYPES.items()}
_NAME_OK = re.compile(rb"\A[0-9a-z]{1,64}\Z")
_HEX40 = re.compile(rb"\A[0-9a-f]{40}\Z")
_MODE_TEXT = {b"100644": MODE_BLOB, b"40000": MODE_TREE}


def is_hex_id(value: bytes) -> bool:
    """Whether ``value`` is a git object id as memvault writes it: 40 lower-case hex digits."""
    return _HEX40.match(value) is not None


def tree_sort_key(name: bytes, mode: int) -> bytes:
    """git's sort key of a tree entry (a tree sorts as if its name ended in ``/``)."""
    return name + b"/" if mode == MODE_TREE else name


def _mode_problem(text: bytes) -> str:
    if text == b"120000":
        return "a symbolic link (mode 120000)"
    if text == b"160000":
        return "a gitlink, i.e. a submodule (mode 160000)"
    if text in (b"040000", b"0100644"):
        return "a zero-padded mode"
    if 1 <= len(text) <= 7 and text.isdigit():
        return f"mode {text.decode()}, which memvault never writes"
    return "a malformed mode"


def _name_problem(name: bytes) -> str:
    if name in (b".", b".."):
        return "an entry named '.' or '..'"
    if name.rstrip(b". ").lower() in (b".git", b"git~1"):
        return "an entry named '.git'"
    if b"/" in name or b"\\" in name:
        return "a name containing a path separator"
    if not name:
        return "an entry with an empty name"
    return "a name memvault never writes"


def parse_tree_strict(
    raw: bytes, parts: tuple[list[bytes], list[bytes]] | None = None
) -> tuple[dict[bytes, tuple[int, bytes]], str | None]:
    """Entries of a raw (SHA-1) tree and, if it holds anything memvault never writes, what
    (``None`` when it is clean). The description names a kind of entry, never its bytes.
    ``parts``, if given, receives each entry's sort key and raw bytes (for
    :meth:`GitStore.tree_update`; complete only for a clean tree)."""
    out: dict[bytes, tuple[int, bytes]] = {}
    pos, last = 0, b""
    while pos < len(raw):
        start = pos
        space = raw.find(b" ", pos, pos + 8)
        if space < 0:
            return out, "a malformed entry"
        mode_text = raw[pos:space]
        nul = raw.find(b"\0", space + 1, space + 2 + 1024)
        if nul < 0 or nul + 21 > len(raw):
            return out, "a malformed entry"
        name, sha = raw[space + 1 : nul], raw[nul + 1 : nul + 21]
        pos = nul + 21
        mode = _MODE_TEXT.get(mode_text)
        if not _NAME_OK.match(name):
            return out, _name_problem(name)
        if mode is None:
            return out, _mode_problem(mode_text)
        if name in out:
            return out, "duplicate entries"
        key = tree_sort_key(name, mode)
        if out and key <= last:
            return out, "entries out of git's order"
        last = key
        out[name] = (mode, sha.hex().encode())
        if parts is not None:
            parts[0].append(key)
            parts[1].append(raw[start:pos])
    return out, None


def _header(type_name: bytes, size: int) -> bytes:
    return type_name + b" " + str(size).encode() + b"\0"


def serialize_tree(entries: Mapping[bytes, tuple[int, bytes]]) -> bytes:
    """The raw body of the tree ``name -> (mode, hex id)``: entries in git's order, each
    ``<octal mode> <name>\\0<20-byte id>``."""
    return b"".join(tree_parts(entries)[1])


def tree_entry(name: bytes, mode: int, obj_id: bytes) -> bytes:
    """One serialised tree entry: ``<octal mode> <name>\\0<20-byte id>``."""
    return (b"40000 " if mode == MODE_TREE else b"%o " % mode) + name + b"\0" + binascii.a2b_hex(obj_id)


def tree_parts(entries: Mapping[bytes, tuple[int, bytes]]) -> tuple[list[bytes], list[bytes]]:
    """``(sort keys, serialised entries)`` of a tree, both in git's order."""
    items = sorted((tree_sort_key(name, mode), name, mode, obj_id) for name, (mode, obj_id) in entries.items())
    return [item[0] for item in items], [tree_entry(name, mode, obj_id) for _key, name, mode, obj_id in items]


class GitObject:
    """A git object built by memvault: its type, raw body and hex id, the id computed once.

    ``id`` is the SHA-1 of ``<type> <size>\\0<body>`` as 40 lower-case hex bytes, the same
    value git and dulwich compute; :meth:`as_raw_string` returns the body (the names follow
    dulwich's ``ShaFile``)."""

    __slots__ = ("type_name", "_body", "id")

    def __init__(self, type_name: bytes, body: bytes) -> None:
        self.type_name = type_name
        self._body = body
        digest = hashlib.sha1(_header(type_name, len(body)), usedforsecurity=False)
        digest.update(body)
        self.id: bytes = digest.hexdigest().encode()

    def as_raw_string(self) -> bytes:
        return self._body


def make_commit(
    tree_id: bytes, parent: bytes | None, message: bytes, *, author: bytes = IDENTITY, time: int = 0
) -> GitObject:
    """The commit memvault writes: ``tree``, at most one ``parent``, ``author`` and committer
    at ``time`` (UTC, ``+0000``; by default the constant :data:`IDENTITY` at time 0), no other
    header, then ``message``. Byte for byte what git (and dulwich) write for those fields.

    Raises:
        ValueError: an id is not 40 lower-case hex digits, or ``author`` is not one line.
    """
    if not is_hex_id(tree_id) or (parent is not None and not is_hex_id(parent)):
        raise ValueError("commit ids must be 40 lower-case hex digits")
    if b"\n" in author:
        raise ValueError("an identity is one line")
    stamp = author + b" " + str(time).encode() + b" +0000\n"
    head = b"tree " + tree_id + b"\n" + (b"parent " + parent + b"\n" if parent is not None else b"")
    return GitObject(b"commit", head + b"author " + stamp + b"committer " + stamp + b"\n" + message)


def loose_object(obj: GitObject, level: int) -> bytes:
    """The bytes of ``obj``'s loose file: ``<type> <size>\\0<body>`` deflated at ``level``."""
    body = obj.as_raw_string()
    return zlib.compress(_header(obj.type_name, len(body)) + body, level)


def parse_loose_object(obj_id: bytes, compressed: bytes) -> tuple[bytes, bytes]:
    """``(type name, body)`` of a loose object file, inflated to at most
    :data:`MAX_OBJECT_BYTES` and checked against ``obj_id``.

    Raises:
        IntegrityError: malformed, oversized, truncated, trailing bytes, or not ``obj_id``.
    """
    try:
        inflater = zlib.decompressobj()
        head = inflater.decompress(compressed, 64)  # "<type> <size>\0": the size comes first
        header, sep, rest = head.partition(b"\0")
        name, _, size_text = header.partition(b" ")
        if not sep or name not in PACK_TYPES or not size_text.isdigit() or len(size_text) > 12:
            raise IntegrityError()
        size = int(size_text)
        if size > MAX_OBJECT_BYTES or len(rest) > size:
            raise IntegrityError()  # refused before inflating it (a zlib bomb, or not memvault's)
        body = rest + inflater.decompress(inflater.unconsumed_tail, size - len(rest) + 1)
        if len(body) != size or inflater.unconsumed_tail or not inflater.eof or inflater.unused_data:
            raise IntegrityError()  # truncated, longer than its header says, or trailing bytes
    except zlib.error:
        raise IntegrityError() from None
    if hashlib.sha1(header + b"\0" + body, usedforsecurity=False).hexdigest().encode() != obj_id:
        raise IntegrityError()  # damaged: the content does not match its id
    return name, body
