"""The git layer: the only module that imports ``dulwich``. It sees ciphertext bytes only.

A bare repository with one branch, ``refs/heads/main``. memvault serialises the objects it
writes itself (:class:`GitObject`: each id hashed once). A commit's objects are one git pack and
its index (:meth:`GitStore.write_pack`, built by :func:`build_pack`), each written under a
temporary name with its final mode and renamed into place, the index last, made durable in
``full`` durability (one ``syncfs`` on Linux 5.8+, else an fsync per file and directory) before
the branch moves; the branch moves by compare-and-swap, overwritten in place after its first
value. Packs are merged geometrically (:func:`geometric_merge`: a few small ones by commands,
bigger ones by :meth:`GitStore.consolidate_packs`), so there are logarithmically many. Loose objects (stores
written before commits were packs; :meth:`GitStore.write` still writes them, for the plaintext
export) are read, and packed by :meth:`GitStore.pack_loose`. Loose and packed objects are read by
memvault itself (packed ones by :class:`~memvault.packread.PackReader`), and every one read is
checked against its id (dulwich does not check packed objects). Every tree read back is
checked against the one shape memvault writes, so a hostile repository (``..`` names, symlinks,
gitlinks) is refused rather than interpreted:

- a tree is parsed here from its raw bytes, strictly: only modes ``100644`` and ``40000`` as git
  writes them, names ``[0-9a-z]{1,64}``, entries in git's order without duplicates; the error
  names the kind of entry found (never the entry's bytes);
- a commit must be byte for byte the commit :meth:`GitStore.commit` writes for its tree, parent
  and message (constant identity and time, no other header, at most one parent);
- :meth:`GitStore.layout_problem` checks a whole tree against the layout of docs/format.md 5.3;
- a repository that redirects git to objects or a directory outside it (``objects/info/
  alternates``, ``commondir``, a ``.git`` file) or uses another object format is not opened;
- reads are bounded: loose and packed objects (deltas and their bases included) inflate to at
  most :data:`MAX_OBJECT_BYTES`, the branch file is read up to 4 KiB and only if it is a
  regular file.
"""

from __future__ import annotations

import binascii
import bisect
import hashlib
import itertools
import mmap
import os
import re
import secrets
import stat
import struct
import time
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path

from dulwich.errors import ChecksumMismatch, ObjectFormatException
from dulwich.objects import Commit, ObjectID, ShaFile
from dulwich.refs import Ref
from dulwich.repo import Repo

from .errors import IntegrityError
from .fsutil import (
    DIR_MODE,
    fsync_dir,
    install_file,
    private_dir,
    pwrite_all,
    read_bounded,
    sync_filesystem,
    syncfs_available,
    write_all,
)
from .packread import PackReader, checked_pack_entries

__all__ = [
    "GitStore",
    "GitObject",
    "serialize_tree",
    "BRANCH",
    "MODE_BLOB",
    "MODE_TREE",
    "IDENTITY",
    "MAX_OBJECT_BYTES",
    "LAYOUT_ROLES",
    "root_roles",
]

BRANCH = Ref(b"refs/heads/main")
MODE_BLOB = 0o100644
MODE_TREE = 0o040000
#: Constant author/committer: who did what lives only in the encrypted commit metadata.
IDENTITY = b"memvault <memvault@invalid>"
_NAME_OK = re.compile(rb"\A[0-9a-z]{1,64}\Z")
_HEX40 = re.compile(rb"\A[0-9a-f]{40}\Z")
#: Largest object memvault reads (inflated). A content blob is at most about 75 MiB (the
#: largest ``max_file_bytes``, padded); anything larger is refused before it is inflated.
MAX_OBJECT_BYTES = 256 * 1024 * 1024
_MAX_REF_BYTES = 4096
_MODE_TEXT = {b"100644": MODE_BLOB, b"40000": MODE_TREE}
_HEX1 = re.compile(rb"\A[0-9a-f]\Z")
_HEX62 = re.compile(rb"\A[0-9a-f]{62}\Z")
_PACK_NAME = re.compile(r"\Apack-[0-9a-f]{40}\.pack\Z")
#: Names in a shard tree of layout 2: content blobs (``h[2:]``) and the shard's index blob ``i``.
_LEAF2 = re.compile(rb"\A(?:[0-9a-f]{62}|i)\Z")
#: The tree layouts of docs/format.md 5.3 by role: (name pattern, mode, child role or None).
#: Every tree but the root is non-empty. Layout 1's root holds ``c`` and/or ``i`` (:func:`root_roles`).
LAYOUT_ROLES: dict[str, tuple[re.Pattern[bytes], int, str | None]] = {
    "i": (_HEX1, MODE_TREE, "i1"),  # layout 1: i/<h0>
    "i1": (_HEX1, MODE_BLOB, None),  # layout 1: i/<h0>/<h1>: index shard blobs
    "c": (_HEX1, MODE_TREE, "c1"),  # layout 1: c/<h0>
    "c1": (_HEX1, MODE_TREE, "c2"),  # layout 1: c/<h0>/<h1>
    "c2": (_HEX62, MODE_BLOB, None),  # layout 1: c/<h0>/<h1>/<h[2:]>: content blobs
    "s1": (_HEX1, MODE_TREE, "s2"),  # layout 2: <h0>
    "s2": (_LEAF2, MODE_BLOB, None),  # layout 2: <h0>/<h1>/<h[2:]> content blobs and <h0>/<h1>/i
}


def root_roles(entries: dict[bytes, tuple[int, bytes]]) -> dict[bytes, str] | None:
    """The role of each entry of a root tree (docs/format.md 5.3), or None if it has neither layout.

    A root holding ``i`` has layout 1 (only the subtrees ``c`` and ``i``); any other root has
    layout 2 (one subtree per first hex digit of the tokens, role ``s1``). The empty tree is both.
    """
    if b"i" in entries:
        if all(name in (b"c", b"i") and mode == MODE_TREE for name, (mode, _id) in entries.items()):
            return {name: name.decode() for name in entries}
        return None
    if all(_HEX1.match(name) and mode == MODE_TREE for name, (mode, _id) in entries.items()):
        return dict.fromkeys(entries, "s1")
    return None


#: Cache of tree ids whose whole subtree passed :meth:`GitStore.layout_problem` (per role).
_LAYOUT_CACHE_ENTRIES = 65536
#: Trees whose parsed entries :meth:`GitStore.tree_entries` keeps (every tree of one state is
#: at most 291: root, ``c``, 16 + 256 below it, ``i`` and 16 below it).
_TREE_CACHE_ENTRIES = 4096
#: Trees whose serialised entries :meth:`GitStore.tree_update` keeps: every tree of one state
#: (at most 291, see above), so a commit rebuilds only the entries it changes. Their size is
#: about that of the head's trees (~100 bytes per file).
_TREE_PARTS_ENTRIES = 320
#: Loose objects per pack written by :meth:`GitStore.pack_loose` (bounds its memory).
PACK_BATCH = 4096
#: A command merges the smallest packs (:meth:`GitStore.write_pack`) once this many of them break
#: the geometric progression (:func:`geometric_merge`), so the fixed cost of a merge (two files,
#: removals) is paid about once per this many commits.
MERGE_AT = 8
#: ... and only packs that together hold at most this many bytes: bigger merges wait for
#: ``close``/``memvault gc`` (:meth:`GitStore.consolidate_packs`), so a command's merge stays small.
MERGE_BYTES = 2 * 1024 * 1024
#: git's pack type numbers.
_PACK_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_TYPE_NAMES = {v: k for k, v in _PACK_TYPES.items()}
_PACK_PREFIX = "pack-"
#: memvault's temporary names of packs and indexes being written (git's prefixes, 16 random hex
#: digits where git uses 6 characters).
_TMP_NAME = re.compile(r"\Atmp_(pack|idx)_[0-9a-f]{16}\Z")
#: A pack without its index is removed once it is this old (:meth:`GitStore.sweep_pack_leftovers`).
ORPHAN_PACK_SECONDS = 600.0
#: Files that belong to a pack ``pack-<id>`` besides ``.pack`` and ``.idx`` (written by git).
_PACK_EXTRAS = (".rev", ".bitmap", ".mtimes")
_MERGE_CHUNK = 1024 * 1024
#: First bytes an undeltified entry can start with (type 1-4 in bits 4-6, the size's low bits).
_PLAIN_TYPE_BYTES = frozenset(b for b in range(256) if (b >> 4) & 7 in (1, 2, 3, 4))


def _tree_sort_key(name: bytes, mode: int) -> bytes:
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
        key = _tree_sort_key(name, mode)
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
    """The raw body of the tree ``name -> (mode, hex id)``: entries in git's order (a tree
    sorts as if its name ended in ``/``), each ``<octal mode> <name>\\0<20-byte id>``."""
    return b"".join(_tree_parts(entries)[1])


def _tree_entry(name: bytes, mode: int, obj_id: bytes) -> bytes:
    """One serialised tree entry: ``<octal mode> <name>\\0<20-byte id>``."""
    return (b"40000 " if mode == MODE_TREE else b"%o " % mode) + name + b"\0" + binascii.a2b_hex(obj_id)


def _tree_parts(entries: Mapping[bytes, tuple[int, bytes]]) -> tuple[list[bytes], list[bytes]]:
    """``(sort keys, serialised entries)`` of a tree, both in git's order."""
    items = sorted((_tree_sort_key(name, mode), name, mode, obj_id) for name, (mode, obj_id) in entries.items())
    return [item[0] for item in items], [_tree_entry(name, mode, obj_id) for _key, name, mode, obj_id in items]


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


#: Size of a loose ref file as git and memvault write it: 40 hex digits and a newline.
_REF_SIZE = 41
_O_REF_WRITE = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_O_LOOSE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_loose_lock(directory: str, lock: str) -> int:
    """Create ``lock`` (mode 0400, exclusive), making the fan-out ``directory`` (0700) if it is
    missing and replacing a ``lock`` a crashed writer left."""
    try:
        return os.open(lock, _O_LOOSE, 0o400)
    except FileNotFoundError:
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            pass
        else:
            private_dir(directory)  # mkdir honours the umask, which may take owner bits
    except FileExistsError:
        os.unlink(lock)  # the caller holds the writer lock: no live writer owns it
    return os.open(lock, _O_LOOSE, 0o400)


def _write_loose_file(directory: str, final: str, data: bytes, *, fsync: bool) -> None:
    """Write ``data`` to ``final`` atomically: ``<final>.lock``, optionally fsynced, renamed."""
    lock = final + ".lock"
    install_file(_open_loose_lock(directory, lock), lock, final, data, fsync=fsync)


def _entry_header(type_num: int, size: int) -> bytes:
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


def _sha256_checked(body: bytes, sha256: bytes | None) -> bytes:
    """``body`` if ``sha256`` is None or its SHA-256; IntegrityError otherwise."""
    if sha256 is not None and hashlib.sha256(body).digest() != sha256:
        raise IntegrityError()
    return body


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
        entry = _entry_header(_PACK_TYPES[obj.type_name], len(body)) + stream
        entries.append((raw_id, zlib.crc32(entry), offset))
        parts.append(entry)
        offset += len(entry)
    parts[0] = b"PACK" + struct.pack(">II", 2, len(entries))
    data = b"".join(parts)
    checksum = hashlib.sha1(data, usedforsecurity=False).digest()
    return data + checksum, pack_index(entries, checksum), checksum.hex()


def geometric_merge(sizes: list[int]) -> int:
    """How many of the smallest packs (``sizes`` sorted ascending) to merge into one so that every
    pack is at least twice as large as all smaller ones together; 0 for none.

    That invariant keeps the number of packs logarithmic in the number of objects, and an object
    is rewritten only into a pack at least 1.5 times as large as the one it leaves, so at most
    logarithmically often in all. Merging the smallest ``k`` (the last index where the invariant
    fails, plus one) restores it in one step."""
    k, total = 0, 0
    for i, size in enumerate(sizes):
        if i and size < 2 * total:
            k = i + 1
        total += size
    return k


class GitStore:
    """A bare dulwich repository used as an object store plus one compare-and-swap ref."""

    def __init__(self, path: Path, *, durable: bool) -> None:
        self.path = path
        self._durable = durable
        for redirect in (".git", "commondir", "objects/info/alternates", "objects/info/http-alternates"):
            if os.path.lexists(path / redirect):
                raise IntegrityError(
                    "The store's git repository refers to objects or a directory outside it "
                    f"({redirect}); memvault does not open such a repository."
                )
        try:
            self._repo = Repo(str(path))
        except Exception:
            raise IntegrityError("The store's git repository cannot be opened.") from None
        if getattr(self._repo, "object_format", None) is not None and self._repo.object_format.name != "sha1":
            self._repo.close()
            raise IntegrityError("The store's git repository does not use the SHA-1 object format.")
        #: Durable writes make all of a commit's objects durable with one syncfs where possible,
        #: else fsync each object file and its directory.
        self._syncfs = durable and syncfs_available()
        self._repo.object_store.fsync_object_files = durable and not self._syncfs
        self._repo.object_store.loose_object_size_limit = MAX_OBJECT_BYTES
        self._objects_dir = path / "objects"
        self._objects_base = os.fspath(self._objects_dir)  # plain strings: pathlib costs per object
        self._pack_dir = self._objects_dir / "pack"
        self._pack_base = os.fspath(self._pack_dir)
        #: Sizes of packs seen, by file name (``pack-<checksum>.pack``: fixed for a name).
        self._pack_sizes: dict[str, int] = {}
        #: Commit packs this object wrote since its last merge (:meth:`write_pack`); its first
        #: commit looks for a merge (a process may write only one commit).
        self._packs_written = MERGE_AT
        self._compression = self._repo.object_store.loose_compression_level
        self._ref_file = path / "refs" / "heads" / "main"
        self._ref_path = os.fspath(self._ref_file)
        self._ref_lock = self._ref_path + ".lock"
        self._ref_lock_swept = False
        #: Closes the repository (its packs' files and maps) at :meth:`close`, or when this object
        #: is collected or the interpreter exits, whichever comes first.
        self._closer = weakref.finalize(self, self._repo.close)
        #: Packed objects are read by memvault (bounded, checked), not through dulwich.
        self._pack_reader = PackReader(self._pack_base, MAX_OBJECT_BYTES)
        self._pack_closer = weakref.finalize(self, self._pack_reader.close)
        self._layout_ok: dict[tuple[bytes, str], None] = {}
        self._trees: OrderedDict[bytes, dict[bytes, tuple[int, bytes]]] = OrderedDict()
        #: ``(sort keys, serialised entries)`` of the trees :meth:`tree_update` built lately.
        self._tree_parts: OrderedDict[bytes, tuple[list[bytes], list[bytes]]] = OrderedDict()

    @classmethod
    def init(cls, path: Path, *, durable: bool) -> GitStore:
        repo = Repo.init_bare(str(path), mkdir=True)
        repo.refs.set_symbolic_ref(Ref(b"HEAD"), BRANCH)
        config = repo.get_config()
        config.set((b"core",), b"fsyncObjectFiles", durable)
        config.set((b"core",), b"logAllRefUpdates", False)
        config.set((b"gc",), b"auto", b"0")
        # Loose objects are ciphertext (blobs) or hex names and ids (trees): zlib cannot shrink
        # them, so store them without spending CPU on deflate.
        config.set((b"core",), b"looseCompression", b"0")
        config.write_to_path()
        repo.close()
        return cls(path, durable=durable)

    def close(self) -> None:
        self._closer()
        self._pack_closer()

    # -- refs ---------------------------------------------------------------------------------

    def head(self) -> bytes | None:
        """The branch's commit id (40 hex bytes), or None before the first commit."""
        try:
            data = read_bounded(self._ref_path, _MAX_REF_BYTES).strip()
        except FileNotFoundError:
            # `git pack-refs` (run by `git gc`) moves the branch into packed-refs.
            try:
                packed = self._repo.refs.get_packed_refs().get(BRANCH)
            except Exception:  # a damaged packed-refs file
                raise IntegrityError("The store's branch is damaged.") from None
            if packed is None:
                return None
            data = bytes(packed)
        except OSError:  # a FIFO, a device, a directory or an oversized file
            raise IntegrityError("The store's branch is damaged.") from None
        if not _HEX40.match(data):
            raise IntegrityError("The store's branch is damaged.")
        return data

    def compare_and_swap(self, old: bytes | None, new: bytes) -> bool:
        """Move the branch from ``old`` to ``new``; False if it no longer points at ``old``.

        The caller holds the store lock, which makes read-compare-write atomic among memvault
        writers. A later move overwrites the branch file's 41 bytes in place
        (:meth:`_move_in_place`: no new file, no rename, no freed block; a process dies before
        or after one ``pwrite``, and a power loss finds one sector old or new). The first value,
        and any branch file that is not a plain singly-linked 41-byte regular file, goes through
        ``main.lock`` (git's own lock protocol), which also replaces a value an in-place write
        that failed may have left torn. A ``main.lock`` found here was left by a crashed writer
        and is removed. A reader without the store lock may read a value being overwritten half
        old, half new (no such commit): memvault's readers then read the branch again
        (docs/format.md §7).

        Durability ``full``: the branch's first value (``old`` is None) is always fsynced, file
        and directory. A later move is fsynced only where syncfs is unavailable: with syncfs it
        becomes durable with the next commit's :meth:`write` (whose syncfs covers it), and until
        then a power loss can only take the branch back to ``old``, the parent of the commit the
        keyring records as durable, which every open then serves and the next writer publishes
        (docs/format.md §7). In the fallback, :meth:`write` also fsyncs ``refs/heads``, so the
        same holds when writers with and without syncfs share a store.
        """
        if self.head() != old:
            return False
        if old is not None and self._move_in_place(old, new):
            return True
        sync = self._durable and (old is None or not self._syncfs)
        lock = self._ref_lock
        fd = self._create_ref_lock(lock)
        try:
            try:
                write_all(fd, new + b"\n")  # a short write (disk filling up) must not truncate the branch
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            try:
                os.unlink(lock)
            except OSError:
                pass
            raise
        os.replace(lock, self._ref_path)
        if sync:
            fsync_dir(self._ref_file.parent)
        return True

    def _move_in_place(self, old: bytes, new: bytes) -> bool:
        """Overwrite the loose branch file's one line in place (one ``pwrite`` of 41 bytes into a
        block the file already has): no new file, no rename, no block freed. False, with nothing
        written, unless the branch file is a regular file with one link (so no other name shares
        the write), exactly one ref line long, and writable; the caller then uses the lock
        protocol, which also replaces a value a failed write left torn (the old value is first
        written back, so that it stands if the lock protocol fails too)."""
        try:
            fd = os.open(self._ref_path, _O_REF_WRITE)
        except OSError:  # missing (a packed branch), read-only, a FIFO without reader, a symlink
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != _REF_SIZE:
                return False
            if not self._ref_lock_swept:
                # A ``main.lock`` a crashed writer left would stop git clients from moving the
                # branch; the lock protocol removes it, so does the first move in place.
                try:
                    os.unlink(self._ref_lock)
                except FileNotFoundError:
                    pass
                self._ref_lock_swept = True
            try:
                pwrite_all(fd, new + b"\n", 0)
                if self._durable and not self._syncfs:
                    os.fdatasync(fd)
            except OSError:
                try:  # put the old value back, so that a failing lock protocol leaves it too
                    pwrite_all(fd, old + b"\n", 0)
                except OSError:
                    pass  # the lock protocol replaces the file whole, or the command fails
                return False
        finally:
            os.close(fd)
        return True

    def _create_ref_lock(self, lock: str) -> int:
        """Create ``main.lock`` exclusively (mode 0600), first removing one a crashed writer left
        (the caller holds the store lock) or making ``refs/heads`` if it is missing."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            return os.open(lock, flags, 0o600)
        except FileExistsError:
            os.unlink(lock)
        except FileNotFoundError:
            for directory in (self._ref_file.parent.parent, self._ref_file.parent):  # refs, refs/heads
                try:
                    os.mkdir(directory, DIR_MODE)
                except FileExistsError:
                    continue
                private_dir(directory)  # mkdir honours the umask, which may take owner bits
        return os.open(lock, flags, 0o600)

    # -- objects ------------------------------------------------------------------------------

    @staticmethod
    def blob(data: bytes) -> GitObject:
        return GitObject(b"blob", data)

    @staticmethod
    def tree(entries: Mapping[bytes, tuple[int, bytes]]) -> GitObject:
        """A tree from ``name -> (mode, id)`` (modes :data:`MODE_BLOB` / :data:`MODE_TREE`,
        hex ids), serialised as git does: entries in git's order, mode in octal without padding."""
        return GitObject(b"tree", serialize_tree(entries))

    def tree_update(
        self, base_id: bytes | None, entries: Mapping[bytes, tuple[int, bytes]], changed: Iterable[bytes]
    ) -> GitObject:
        """The tree ``entries`` (byte for byte :meth:`tree`), which differs from the tree
        ``base_id`` at most in the names ``changed``. When this object built or read ``base_id``
        lately, only those entries are serialised again (a tree of 256 entries costs what one of
        a few does); otherwise the whole tree is."""
        cached = self._tree_parts.get(base_id) if base_id is not None else None
        if cached is None:
            keys, parts = _tree_parts(entries)
        else:
            keys, parts = list(cached[0]), list(cached[1])
            for name in changed:
                for key in (name, name + b"/"):  # its entry as a blob, or as a tree
                    i = bisect.bisect_left(keys, key)
                    if i < len(keys) and keys[i] == key:
                        del keys[i], parts[i]
                new = entries.get(name)
                if new is not None:
                    key = _tree_sort_key(name, new[0])
                    i = bisect.bisect_left(keys, key)
                    keys.insert(i, key)
                    parts.insert(i, _tree_entry(name, *new))
        tree = GitObject(b"tree", b"".join(parts))
        if base_id is not None and cached is not None and base_id != tree.id:
            # The new tree supersedes its base: keep the cache for the trees of the newest state
            # (a commit that then fails costs one whole rebuild of this tree, nothing else).
            del self._tree_parts[base_id]
        self._keep_parts(tree.id, (keys, parts))
        return tree

    def _keep_parts(self, tree_id: bytes, parts: tuple[list[bytes], list[bytes]]) -> None:
        self._tree_parts[tree_id] = parts
        self._tree_parts.move_to_end(tree_id)
        if len(self._tree_parts) > _TREE_PARTS_ENTRIES:
            self._tree_parts.popitem(last=False)

    @staticmethod
    def commit(
        tree_id: bytes, parent: bytes | None, message: bytes, *, author: bytes = IDENTITY, time: int = 0
    ) -> GitObject:
        """The commit memvault writes: ``tree``, at most one ``parent``, ``author`` and committer
        at ``time`` (UTC, ``+0000``; by default the constant :data:`IDENTITY` at time 0), no other
        header, then ``message``. Byte for byte what git (and dulwich) write for those fields."""
        if not _HEX40.match(tree_id) or (parent is not None and not _HEX40.match(parent)):
            raise ValueError("commit ids must be 40 lower-case hex digits")
        if b"\n" in author:
            raise ValueError("an identity is one line")
        stamp = author + b" " + str(time).encode() + b" +0000\n"
        head = b"tree " + tree_id + b"\n" + (b"parent " + parent + b"\n" if parent is not None else b"")
        return GitObject(b"commit", head + b"author " + stamp + b"committer " + stamp + b"\n" + message)

    def write(self, objects: Iterable[GitObject]) -> None:
        """Write objects loose (commits of a memvault store use :meth:`write_pack`; this is for
        the repository of ``memvault export``, and for tests of stores written before commits were
        packs); in durable mode make them and their fan-out directories durable, and with them the
        previous branch move (:meth:`compare_and_swap`): one syncfs on Linux, else an fsync per
        object file and directory, then ``objects/`` and ``refs/heads``.

        Each object is written to ``objects/xx/<rest>.lock`` (created ``O_EXCL`` with its final
        mode 0400, so no ``chmod`` follows) and renamed into place, so an object file appears
        whole or not at all; without syncfs the file is fsynced before the rename. The zlib
        stream uses the repository's ``core.looseCompression`` level (0, stored, for stores
        memvault creates: their objects are ciphertext). A new fan-out directory is created 0700.
        An object already present is written again (same bytes, renamed over it), which costs
        less than probing for it. The caller holds the store's writer lock, so a ``.lock`` file
        found is the leftover of a crashed writer and is replaced. On an error, the ``.lock``
        file of the object being written is removed (best effort) and the error propagates;
        objects written before it stay, unreferenced.
        """
        fsync_each = self._durable and not self._syncfs
        dirs: set[str] = set()
        level = self._compression
        for obj in objects:
            obj_id = obj.id.decode()
            directory = f"{self._objects_base}/{obj_id[:2]}"
            final = f"{directory}/{obj_id[2:]}"
            body = obj.as_raw_string()
            data = zlib.compress(_header(obj.type_name, len(body)) + body, level)
            _write_loose_file(directory, final, data, fsync=fsync_each)
            dirs.add(directory)
        if self._durable:
            self._sync_new_files([*dirs, self._objects_base])

    # -- packs ---------------------------------------------------------------------------------

    def write_pack(self, objects: Iterable[GitObject], *, merge: bool = False) -> None:
        """Write ``objects`` as one pack (a commit's objects: one ``.pack`` and its ``.idx``
        instead of a loose file each); in durable mode make it durable, and with it the previous
        branch move (:meth:`compare_and_swap`): one syncfs on Linux, else an fsync of each file and
        of ``objects/pack``, then ``refs/heads``.

        The pack (version 2, objects undeltified, zlib at the repository's loose-object level: 0,
        stored, for stores memvault creates) goes to ``objects/pack/tmp_pack_<random>`` (created
        ``O_EXCL``, mode 0400, fsynced there without syncfs) and is renamed to
        ``pack-<checksum>.pack``; then its index the same way (``tmp_idx_<random>`` to
        ``pack-<checksum>.idx``). git and dulwich use a pack only once its ``.idx`` exists, so a
        pack appears whole or not at all. The caller holds the store's writer lock.

        With ``merge`` (looked for at this object's first commit and then once it has written
        :data:`MERGE_AT` - 1 packs since its last merge, so most commits do not even list the pack
        directory) the smallest packs are
        first merged into one when at least :data:`MERGE_AT` of them break the geometric
        progression (:func:`geometric_merge`) and they hold at most :data:`MERGE_BYTES` together:
        the merged pack is written the same way before
        the commit's pack, made durable by the same sync, and only then are the packs it replaces
        removed. A failure of the merge leaves those packs in place (the commit goes on without
        it). On an error the error propagates after removing (best effort) the temporary file
        being written, the commit's pack if its index is not in place, and the merged pack (the
        packs it would have replaced stay): only a complete commit pack whose sync failed can be
        left, unreferenced.
        """
        fsync_each = self._durable and not self._syncfs
        data, idx, name = build_pack(objects, self._compression)
        merged: tuple[str, list[str]] | None = None
        if merge and self._packs_written >= MERGE_AT - 1:
            try:
                plan = self._merge_plan(MERGE_AT, MERGE_BYTES)
                merged = self._write_merged(plan, fsync=fsync_each) if plan else None
            except (OSError, IntegrityError, ValueError):
                merged = None  # optional: the packs stay as they are
        try:
            self._install_pack(data, idx, name, fsync=fsync_each)
            if self._durable:
                self._sync_packs()
        except BaseException:
            if merged is not None:
                self._remove_pack_files(merged[0])
            raise
        self._packs_written += 1
        if merged is not None:
            self._packs_written = 0
            self._retire(merged[1])

    def _install_pack(self, data: bytes, idx: bytes, name: str, *, fsync: bool) -> str:
        """Write a pack and then its index under their final names (each through a temporary
        file); return the pack's path without extension."""
        base = f"{self._pack_base}/{_PACK_PREFIX}{name}"
        self._write_pack_file(data, base + ".pack", "tmp_pack_", fsync=fsync)
        try:
            self._write_pack_file(idx, base + ".idx", "tmp_idx_", fsync=fsync)
        except BaseException:
            if not os.path.exists(base + ".idx"):  # else the same pack was already complete
                try:
                    os.unlink(base + ".pack")
                except OSError:
                    pass
            raise
        return base

    def _open_pack_tmp(self, prefix: str) -> tuple[int, str]:
        """Create ``objects/pack/<prefix><random>`` exclusively with mode 0400 (making the pack
        directory, 0700, if it is missing); return its descriptor and path."""
        tmp = f"{self._pack_base}/{prefix}{secrets.token_hex(8)}"
        try:
            return os.open(tmp, _O_LOOSE, 0o400), tmp
        except FileNotFoundError:
            try:
                os.mkdir(self._pack_base, DIR_MODE)
            except FileExistsError:
                pass
            else:
                private_dir(self._pack_base)
                if self._durable:
                    fsync_dir(self._objects_dir)
        return os.open(tmp, _O_LOOSE, 0o400), tmp

    def _write_pack_file(self, data: bytes, final: str, prefix: str, *, fsync: bool) -> None:
        fd, tmp = self._open_pack_tmp(prefix)
        install_file(fd, tmp, final, data, fsync=fsync)

    def _sync_packs(self) -> None:
        """Make the packs just renamed into place durable (durable mode only)."""
        self._sync_new_files([self._pack_base])

    def _sync_new_files(self, dirs: list[str]) -> None:
        """Make files just renamed into ``dirs`` durable, and with them the previous branch move
        (:meth:`compare_and_swap`): one syncfs, or without it an fsync of each of ``dirs`` (the
        files were fsynced before their renames) and of ``refs/heads``."""
        if self._syncfs:
            sync_filesystem(self._objects_dir)  # also the previous commit's branch move
            return
        for d in dirs:
            fsync_dir(Path(d))
        try:
            fsync_dir(self._ref_file.parent)  # a branch move a writer with syncfs left unsynced
        except FileNotFoundError:
            pass  # the branch is packed (git pack-refs): compare_and_swap makes the directory

    def _packs(self) -> list[tuple[int, str]]:
        """``(size, path without extension)`` of every pack with an index (a ``.keep`` file
        excludes one, as in git), smallest first."""
        try:
            names = set(os.listdir(self._pack_base))
        except FileNotFoundError:
            return []
        out = []
        sizes = self._pack_sizes
        for name in names:
            if name.endswith(".pack"):
                stem = name[:-5]
                if stem + ".idx" in names and stem + ".keep" not in names:
                    size = sizes.get(name)
                    if size is None:
                        try:
                            size = os.stat(f"{self._pack_base}/{name}").st_size
                        except FileNotFoundError:
                            continue
                        if _PACK_NAME.match(name):  # named by its checksum: its size is fixed
                            sizes[name] = size
                    out.append((size, f"{self._pack_base}/{stem}"))
        if len(sizes) > 4 * len(out) + 64:
            for name in [n for n in sizes if n not in names]:
                del sizes[name]
        out.sort()
        return out

    def _merge_plan(self, min_packs: int, max_bytes: int | None) -> list[str]:
        """The packs to merge now (smallest first): the :func:`geometric_merge` of the packs that
        together hold at most ``max_bytes``, if it names at least ``min_packs``."""
        packs = self._packs()
        if max_bytes is not None:
            total, n = 0, 0
            for size, _base in packs:
                if total + size > max_bytes:
                    break
                total, n = total + size, n + 1
            packs = packs[:n]
        k = geometric_merge([size for size, _base in packs])
        return [base for _size, base in packs[:k]] if k >= max(min_packs, 2) else []

    def _write_merged(self, bases: list[str], *, fsync: bool) -> tuple[str, list[str]] | None:
        """Write one pack holding every object of the packs ``bases`` (each id once) and its
        index; return its path and the packs it holds, or None when fewer than two could be read
        (a pack whose index or entries are not as git writes them is left out). Undeltified
        entries are copied as they are (with their index CRC); a delta (a pack ``git gc`` wrote)
        is resolved and stored whole. Not synced here (``fsync``: each file, no directory)."""
        sources: list[tuple[str, list[tuple[int, bytes, int]], int]] = []
        for base in bases:
            try:  # the checks the pack reader makes before it uses a pack
                entries, size = checked_pack_entries(base, MAX_OBJECT_BYTES)
            except (OSError, IntegrityError):
                continue  # gone, not a regular file, damaged or foreign (e.g. index version 1): left alone
            if entries:
                sources.append((base, entries, size))
        if len(sources) < 2:
            return None
        seen: set[bytes] = set()
        for _base, entries, _size in sources:
            seen.update(raw_id for _offset, raw_id, _crc in entries)
        count = len(seen)
        seen.clear()
        fd, tmp = self._open_pack_tmp("tmp_pack_")
        try:
            try:
                new_index, checksum = self._copy_entries(fd, sources, count, seen)
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            base = f"{self._pack_base}/{_PACK_PREFIX}{checksum.hex()}"
            if base in bases:  # the merge is one of the packs already (same bytes): nothing to do
                os.unlink(tmp)
                return None
            os.replace(tmp, base + ".pack")
        except BaseException as err:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(err, OSError) or not isinstance(err, Exception):
                raise
            return None  # an entry not as git writes it (a damaged pack): no merge
        try:
            self._write_pack_file(pack_index(new_index, checksum), base + ".idx", "tmp_idx_", fsync=fsync)
        except BaseException:
            self._remove_pack_files(base)
            raise
        return base, [b for b, _e, _s in sources]

    def _copy_entries(
        self, fd: int, sources: list[tuple[str, list[tuple[int, bytes, int]], int]], count: int, seen: set[bytes]
    ) -> tuple[list[tuple[bytes, int, int]], bytes]:
        """Stream the entries of ``sources`` into the pack open at ``fd``: header, entries (each
        id once), SHA-1 trailer. Returns the new index entries and the trailer."""
        digest = hashlib.sha1(usedforsecurity=False)
        chunks: list[bytes] = []
        pending = 0

        def emit(data: bytes) -> None:
            nonlocal pending
            digest.update(data)
            chunks.append(data)
            pending += len(data)
            if pending >= _MERGE_CHUNK:
                write_all(fd, b"".join(chunks))
                chunks.clear()
                pending = 0

        emit(b"PACK" + struct.pack(">II", 2, count))
        offset = 12
        index: list[tuple[bytes, int, int]] = []
        for base, entries, size in sources:
            with open(base + ".pack", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if len(data) != size or data[:4] != b"PACK":
                    raise IntegrityError()
                plain = _PLAIN_TYPE_BYTES
                if not any(raw_id in seen or data[start] not in plain for start, raw_id, _crc in entries):
                    # neither duplicates nor deltas: the entries as one block, offsets shifted
                    shift = offset - entries[0][0]
                    index.extend((raw_id, crc, start + shift) for start, raw_id, crc in entries)
                    seen.update(raw_id for _start, raw_id, _crc in entries)
                    block = data[entries[0][0] : size - 20]
                    emit(block)
                    offset += len(block)
                    continue
                for i, (start, raw_id, crc) in enumerate(entries):
                    if raw_id in seen:
                        continue
                    seen.add(raw_id)
                    end = entries[i + 1][0] if i + 1 < len(entries) else size - 20
                    entry = data[start:end]
                    if (entry[0] >> 4) & 7 not in _TYPE_NAMES:  # a delta: resolved (bounded, id-checked), stored whole
                        found = self._pack_reader.get(raw_id)
                        if found is None and self._pack_reader.rescan():
                            found = self._pack_reader.get(raw_id)
                        if found is None:
                            raise IntegrityError()
                        type_num, body = found
                        entry = _entry_header(type_num, len(body)) + zlib.compress(body, self._compression)
                        crc = zlib.crc32(entry)
                    index.append((raw_id, crc, offset))
                    emit(entry)
                    offset += len(entry)
        if len(index) != count:
            raise IntegrityError()
        if chunks:
            write_all(fd, b"".join(chunks))
        checksum = digest.digest()
        write_all(fd, checksum)
        return index, checksum

    def _remove_pack_files(self, base: str) -> None:
        """Remove a pack, its index first (so no reader starts using it), best effort."""
        for ext in (".idx", ".pack", *_PACK_EXTRAS):
            try:
                os.unlink(base + ext)
            except FileNotFoundError:
                continue
            except OSError:
                if ext == ".idx":
                    return  # still indexed: leave the pack whole

    def _retire(self, bases: list[str]) -> None:
        """Remove packs whose objects a durable merged pack now holds (best effort: a pack left
        behind only holds duplicates), and drop them from dulwich's cache."""
        for base in bases:
            self._remove_pack_files(base)
        self._pack_reader.forget(bases)
        try:
            self._repo.object_store._update_pack_cache()
        except OSError:
            pass

    def sweep_pack_leftovers(self) -> int:
        """Remove what a crashed or failed pack writer left in ``objects/pack``: memvault's
        temporary files (``tmp_pack_<16 hex>``, ``tmp_idx_<16 hex>``), and a ``.pack`` without its
        ``.idx`` (never used by git or dulwich; its objects are unreferenced, or also in a durable
        merged pack) once it is :data:`ORPHAN_PACK_SECONDS` old: a ``git gc`` run alongside may be
        between renaming its new pack and its index. git's own temporary files (6 random
        characters) are left to git. Returns how many files were removed. The caller holds the
        store's writer lock."""
        try:
            names = set(os.listdir(self._pack_base))
        except FileNotFoundError:
            return 0
        cutoff = time.time() - ORPHAN_PACK_SECONDS
        removed = 0
        for name in names:
            path = f"{self._pack_base}/{name}"
            if not _TMP_NAME.match(name):
                if not name.endswith(".pack") or name[:-5] + ".idx" in names:
                    continue
                try:
                    if os.lstat(path).st_mtime > cutoff:
                        continue
                except OSError:
                    continue
            try:
                os.unlink(path)
            except OSError:
                continue
            removed += 1
        return removed

    def loose_count(self) -> int:
        """How many loose objects the repository holds (one directory listing per fan-out)."""
        n = 0
        for d in self._objects_dir.iterdir():
            if len(d.name) == 2 and d.is_dir():
                n += sum(1 for f in os.scandir(d) if len(f.name) == 38)
        return n

    def pack_count(self) -> int:
        """How many packs (with their index) the repository holds."""
        return len(self._packs())

    def pack_loose(self, *, batch: int = PACK_BATCH, deadline: float | None = None, keep_dirs: bool = False) -> int:
        """Move loose objects into packs, ``batch`` objects per pack (bounded memory), until none
        is left or ``time.monotonic()`` passes ``deadline``; return how many were packed. The
        fan-out directories left empty are removed (4 KiB each) unless ``keep_dirs``: a store
        written before commits were packs would otherwise keep them.

        Each pack is written as :meth:`write_pack` writes a commit's and is durable (in
        durability ``full``) before the loose copies are deleted, so a crash or an error at any
        point leaves every object readable, at worst twice. The caller holds the store's writer
        lock.
        """
        store = self._repo.object_store
        packed = 0
        fsync_each = self._durable and not self._syncfs
        #: Damaged loose objects (or ones stored under another id): they stay loose, where verify
        #: reports them, and are not read again by later batches.
        skipped: set[ObjectID] = set()
        while deadline is None or time.monotonic() < deadline:
            ids: list[ObjectID] = []
            for obj_id in store._iter_loose_objects():
                if obj_id in skipped:
                    continue
                ids.append(obj_id)
                if len(ids) >= batch:
                    break
            if not ids:
                break
            objects: list[GitObject] = []
            good: list[ObjectID] = []
            for obj_id in ids:
                try:
                    found = self._read_loose_any(obj_id)  # bounded, checked against its id
                except IntegrityError:
                    found = None
                if found is None:  # damaged, or gone meanwhile
                    skipped.add(obj_id)
                    continue
                objects.append(GitObject(*found))
                good.append(obj_id)
            if not good:
                continue  # a batch of damaged objects only: the next batch starts after them
            data, idx, name = build_pack(objects, self._compression)
            self._install_pack(data, idx, name, fsync=fsync_each)
            if self._durable:
                self._sync_packs()
            for obj_id in good:
                store.delete_loose_object(obj_id)
            packed += len(good)
        if not keep_dirs:
            for d in self._objects_dir.iterdir():  # fan-out directories left empty (4 KiB each)
                if len(d.name) == 2:
                    try:
                        d.rmdir()
                    except OSError:
                        pass  # not empty
        return packed

    def consolidate_packs(self, *, max_bytes: int | None = None) -> int:
        """Merge the smallest packs into one where they break the geometric progression
        (:func:`geometric_merge`; only packs holding at most ``max_bytes`` together, if given);
        return how many packs were merged. The new pack is durable (in durability ``full``)
        before the old ones are removed. The caller holds the store's writer lock."""
        plan = self._merge_plan(2, max_bytes)
        if not plan:
            return 0
        merged = self._write_merged(plan, fsync=self._durable and not self._syncfs)
        if merged is None:
            return 0
        try:
            if self._durable:
                self._sync_packs()
        except BaseException:
            self._remove_pack_files(merged[0])
            raise
        self._retire(merged[1])
        return len(merged[1])

    def _get(self, obj_id: bytes) -> ShaFile:
        """An object parsed by dulwich (tests inspect commits with it); memvault's own reads go
        through :meth:`_raw`, bounded."""
        if not _HEX40.match(obj_id):
            raise IntegrityError()
        try:
            return self._repo.object_store[ObjectID(obj_id)]
        except KeyError:
            raise IntegrityError("An object of the store is missing.") from None
        except (ChecksumMismatch, ObjectFormatException, ValueError, OSError):
            raise IntegrityError() from None
        except Exception:  # dulwich raises assorted errors on hostile objects (zlib.error, ...)
            raise IntegrityError() from None

    def contains(self, obj_id: bytes) -> bool:
        """Whether the repository holds ``obj_id`` (a pack's index lists it, or a loose file
        is there; the object itself is not read)."""
        if not _HEX40.match(obj_id):
            return False
        raw_id = binascii.a2b_hex(obj_id)
        packs = self._pack_reader
        if packs.contains(raw_id):
            return True
        if os.path.lexists(f"{self._objects_base}/{obj_id[:2].decode()}/{obj_id[2:].decode()}"):
            return True
        return packs.rescan() and packs.contains(raw_id)

    def read_blob(self, obj_id: bytes, sha256: bytes | None = None) -> bytes:
        """The body of the blob ``obj_id``; with ``sha256`` (from an authenticated record), one
        whose SHA-256 is that: a packed copy is then checked against it instead of its id (one
        hash over the body, not two), a loose one against both. IntegrityError otherwise."""
        return self._raw(obj_id, b"blob", sha256)

    def _raw_tree(self, obj_id: bytes) -> bytes:
        """The raw bytes of a tree object whose content matches its id (loose or packed)."""
        return self._raw(obj_id, b"tree")

    def _raw(self, obj_id: bytes, kind: bytes, sha256: bytes | None = None) -> bytes:
        """The body of the object ``obj_id`` of type ``kind``, loose or packed, checked against
        its id. Packed objects are read by :class:`~memvault.packread.PackReader` (bounded to
        :data:`MAX_OBJECT_BYTES`, deltas resolved, a removed pack never read); the packs it
        knows are asked first, then the loose file, and only then is ``objects/pack`` listed
        again for packs another writer added since."""
        if not _HEX40.match(obj_id):
            raise IntegrityError()
        raw_id = binascii.a2b_hex(obj_id)
        packs = self._pack_reader
        want_type = _PACK_TYPES[kind]
        try:
            found = packs.get(raw_id, sha256, want_type)
        except IntegrityError:
            raw = self._read_loose(obj_id, kind)  # an intact loose copy (packing keeps it until the pack is durable)
            if raw is None:
                raise
            return _sha256_checked(raw, sha256)
        if found is None:
            raw = self._read_loose(obj_id, kind)
            if raw is not None:
                return _sha256_checked(raw, sha256)
            if packs.rescan():
                found = packs.get(raw_id, sha256, want_type)
            if found is None:
                raise IntegrityError("An object of the store is missing.")
        type_num, raw = found
        if _TYPE_NAMES.get(type_num) != kind:
            raise IntegrityError()
        return raw

    def _read_loose(self, obj_id: bytes, kind: bytes) -> bytes | None:
        """Inflate the loose object ``obj_id`` (bounded) and check its id; None if not loose.

        Read here rather than through dulwich so that a tree dulwich would refuse to parse
        (a NUL or slash in a name, a misplaced entry) can still be told from a damaged object.
        """
        found = self._read_loose_any(obj_id)
        if found is None:
            return None
        if found[0] != kind:
            raise IntegrityError()
        return found[1]

    def _read_loose_any(self, obj_id: bytes) -> tuple[bytes, bytes] | None:
        """``(type name, body)`` of the loose object ``obj_id``, inflated with the bound of
        :meth:`_read_loose` and checked against its id; None if not loose."""
        if not _HEX40.match(obj_id):
            raise IntegrityError()
        path = self._objects_dir / obj_id[:2].decode() / obj_id[2:].decode()
        try:
            compressed = read_bounded(path, MAX_OBJECT_BYTES)
        except FileNotFoundError:
            return None
        except OSError:
            raise IntegrityError() from None
        try:
            inflater = zlib.decompressobj()
            head = inflater.decompress(compressed, 64)  # "<type> <size>\0": the size comes first
            header, sep, rest = head.partition(b"\0")
            name, _, size_text = header.partition(b" ")
            if not sep or name not in _PACK_TYPES or not size_text.isdigit() or len(size_text) > 12:
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

    def read_tree(
        self, obj_id: bytes, parts: tuple[list[bytes], list[bytes]] | None = None
    ) -> dict[bytes, tuple[int, bytes]]:
        """Entries of a tree, refusing any name, mode or order memvault never writes (``parts``:
        see :func:`parse_tree_strict`)."""
        entries, problem = parse_tree_strict(self._raw_tree(obj_id), parts)
        if problem is not None:
            raise IntegrityError(f"The store's git repository holds a tree memvault did not write: {problem}.")
        return entries

    def tree_entries(self, obj_id: bytes) -> dict[bytes, tuple[int, bytes]]:
        """:meth:`read_tree`, remembered by id (a tree's content is fixed by its id): the trees
        :meth:`layout_problem` checked and those :meth:`remember_tree` was told about are not
        read again while they stay among the last :data:`_TREE_CACHE_ENTRIES`. The caller must
        not modify the result. (:meth:`read_tree` always reads, for ``verify``.)"""
        entries = self._trees.get(obj_id)
        if entries is None:
            parts: tuple[list[bytes], list[bytes]] = ([], [])
            entries = self.read_tree(obj_id, parts)
            self.remember_tree(obj_id, entries)
            self._keep_parts(obj_id, parts)  # so that a commit changing it patches it
        return entries

    def remember_tree(self, obj_id: bytes, entries: dict[bytes, tuple[int, bytes]]) -> None:
        """Keep the entries of a tree just written (or read) for :meth:`tree_entries`; the
        caller no longer modifies ``entries``."""
        self._trees[obj_id] = entries
        if len(self._trees) > _TREE_CACHE_ENTRIES:
            self._trees.popitem(last=False)

    def tree_problem(self, obj_id: bytes) -> str | None:
        """What a tree that is intact (matches its id) holds that memvault never writes, or None
        (clean, or not readable as a tree: :meth:`read_tree` raises for those)."""
        try:
            return parse_tree_strict(self._raw_tree(obj_id))[1]
        except IntegrityError:
            return None

    def layout_problem(self, tree_id: bytes, role: str = "root") -> str | None:
        """Check a whole tree against the layout of docs/format.md 5.3 (:data:`LAYOUT_ROLES`).

        Returns a description of the first problem, or None. Raises :class:`IntegrityError` if
        a tree in it cannot be read. Subtrees that passed are remembered by id, so checking the
        next commit's tree reads only the trees that changed.
        """
        key = (tree_id, role)
        if key in self._layout_ok:
            return None
        entries = self.tree_entries(tree_id)
        if role == "root":
            roles = root_roles(entries)
            if roles is None:
                return "a top-level entry that fits neither of memvault's layouts"
            children = [(entries[name][1], child_role) for name, child_role in roles.items()]
        else:
            pattern, mode_required, child = LAYOUT_ROLES[role]
            if not entries:
                return "an empty subtree"
            for name, (mode, _id) in entries.items():
                if not pattern.match(name) or mode != mode_required:
                    return "an entry out of place in memvault's layout"
            children = [(obj_id, child) for _mode, obj_id in entries.values()] if child is not None else []
        for obj_id, child_role in children:
            problem = self.layout_problem(obj_id, child_role)
            if problem is not None:
                return problem
        if len(self._layout_ok) >= _LAYOUT_CACHE_ENTRIES:
            self._layout_ok.clear()
        self._layout_ok[key] = None
        return None

    def read_commit(self, obj_id: bytes) -> tuple[bytes, list[bytes], bytes]:
        """``(tree_id, parents, message)`` of a commit written by :meth:`commit` (byte for byte)."""
        raw = self._raw(obj_id, b"commit")
        try:
            obj = Commit.from_raw_string(_PACK_TYPES[b"commit"], raw, sha=ObjectID(obj_id))
        except Exception:  # dulwich raises assorted errors on a malformed commit
            raise IntegrityError("A commit of the store is not in the format memvault writes.") from None
        if not isinstance(obj, Commit):
            raise IntegrityError()
        tree, parents, message = obj.tree, [bytes(p) for p in obj.parents], obj.message
        if (
            not isinstance(message, bytes)
            or not isinstance(tree, bytes)
            or not _HEX40.match(tree)
            or len(parents) > 1
            or not all(isinstance(p, bytes) and _HEX40.match(p) for p in parents)
            or self.commit(tree, parents[0] if parents else None, message).id != obj.id
        ):
            raise IntegrityError("A commit of the store is not in the format memvault writes.")
        return tree, parents, message
