"""The store's bare git repository: the only importer of ``dulwich``; it sees ciphertext only.

:class:`GitStore` reads objects (loose ones here, packed ones through
:class:`~memvault.git.packread.PackReader`), checking each against its id and every tree and
commit against the shape memvault writes; it writes a commit's objects as one pack
(:class:`~memvault.git.packdir.PackDirectory`) and moves the branch
(:class:`~memvault.git.refs.Branch`). A repository that redirects git outside it (alternates,
``commondir``, a ``.git`` file) or uses another object format is not opened.
"""

from __future__ import annotations

import binascii
import bisect
import hashlib
import os
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from dulwich.errors import ChecksumMismatch, ObjectFormatException
from dulwich.objects import Commit, ObjectID, ShaFile
from dulwich.refs import Ref
from dulwich.repo import Repo

from ..errors import IntegrityError
from ..fsutil import (
    DIR_MODE,
    O_NEW_FILE,
    fsync_dir,
    install_file,
    private_dir,
    read_bounded,
    sync_filesystem,
    syncfs_available,
)
from .objects import (
    MAX_OBJECT_BYTES,
    PACK_TYPES,
    TYPE_NAMES,
    GitObject,
    is_hex_id,
    loose_object,
    make_commit,
    parse_loose_object,
    parse_tree_strict,
    serialize_tree,
    tree_entry,
    tree_parts,
    tree_sort_key,
)
from .pack import build_pack
from .packdir import PackDirectory
from .packread import PackReader
from .refs import BRANCH_NAME, Branch

__all__ = ["GitStore", "PACK_BATCH"]

BRANCH = Ref(BRANCH_NAME)
#: Trees whose parsed entries :meth:`GitStore.tree_entries` keeps: every tree of one state in tree
#: layouts 1 to 3 (layout 3: 4,369 = 1 + 16 + 256 + 4,096 shard trees; layout 1: 291), with room
#: for those the commits around it changed (a layout 4 state has up to 69,905: the recent stay).
_TREE_CACHE_ENTRIES = 8192
#: Trees whose serialised entries :meth:`GitStore.tree_update` keeps: every tree of one state up
#: to layout 3 (see above), so a commit rebuilds only the entries it changes (at 100,000 files
#: about 18 MB more than the 320 of layouts 1 and 2 took).
_TREE_PARTS_ENTRIES = 4608
#: Loose objects per pack written by :meth:`GitStore.pack_loose` (bounds its memory).
PACK_BATCH = 4096


def _sha256_checked(body: bytes, sha256: bytes | None) -> bytes:
    """``body`` if ``sha256`` is None or its SHA-256; IntegrityError otherwise."""
    if sha256 is not None and hashlib.sha256(body).digest() != sha256:
        raise IntegrityError()
    return body


def _open_loose_lock(directory: str, lock: str) -> int:
    """Create ``lock`` (mode 0400, exclusive), making the fan-out ``directory`` (0700) if it is
    missing and replacing a ``lock`` a crashed writer left."""
    try:
        return os.open(lock, O_NEW_FILE, 0o400)
    except FileNotFoundError:
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            pass
        else:
            private_dir(directory)  # mkdir honours the umask, which may take owner bits
    except FileExistsError:
        os.unlink(lock)  # the caller holds the writer lock: no live writer owns it
    return os.open(lock, O_NEW_FILE, 0o400)


class GitStore:
    """A bare git repository used as an object store plus one compare-and-swap branch.

    Args:
        path: the repository directory.
        durable: make writes durable (durability ``full``).

    Raises:
        IntegrityError: the repository cannot be opened, points outside itself, or is not SHA-1.
    """

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
        self._compression = self._repo.object_store.loose_compression_level
        self.branch = Branch(path, self._packed_branch, durable=durable, syncfs=self._syncfs)
        #: Closes the repository (its packs' files and maps) at :meth:`close`, or when this object
        #: is collected or the interpreter exits, whichever comes first.
        self._closer = weakref.finalize(self, self._repo.close)
        #: Packed objects are read by memvault (bounded, checked), not through dulwich.
        self._pack_reader = PackReader(os.fspath(self._objects_dir / "pack"), MAX_OBJECT_BYTES)
        self._pack_closer = weakref.finalize(self, self._pack_reader.close)
        self.packs = PackDirectory(
            self._objects_dir,
            self._pack_reader,
            durable=durable,
            syncfs=self._syncfs,
            compression=self._compression,
            sync=self._sync_new_files,
            on_retired=self._forget_retired_packs,
        )
        #: For a cache of objects kept elsewhere: installs a pack holding a missing object (given
        #: its hex id); True if it did.
        self.fetch_missing: Callable[[bytes], bool] | None = None
        self._trees: OrderedDict[bytes, dict[bytes, tuple[int, bytes]]] = OrderedDict()
        #: ``(sort keys, serialised entries)`` of the trees :meth:`tree_update` built lately.
        self._tree_parts: OrderedDict[bytes, tuple[list[bytes], list[bytes]]] = OrderedDict()

    def forget_trees(self) -> None:
        """Drop the parsed trees kept for reads and tree updates (read again on demand)."""
        self._trees.clear()
        self._tree_parts.clear()

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
        """Release the repository's files (also done when this object is collected)."""
        self._closer()
        self._pack_closer()

    # -- the branch -----------------------------------------------------------------------------

    def _packed_branch(self, name: bytes = BRANCH_NAME) -> bytes | None:
        try:
            packed = self._repo.refs.get_packed_refs().get(Ref(name))
        except Exception:  # a damaged packed-refs file
            raise IntegrityError("The store's branch is damaged.") from None
        return None if packed is None else bytes(packed)

    def side_branch(self, name: str) -> Branch:
        """The side branch ``refs/heads/<name>`` (``name`` already checked: ``dream/<hex>``)."""
        ref = b"refs/heads/" + name.encode("ascii")
        return Branch(self.path, lambda: self._packed_branch(ref), durable=self._durable, syncfs=self._syncfs, name=ref)

    def delete_side_branch(self, name: str, old: bytes) -> bool:
        """Remove the side branch ``refs/heads/<name>`` (loose and packed) if it points at ``old``;
        False if it does not. The caller holds the writer lock.

        Raises:
            OSError: the ref or ``packed-refs`` could not be changed.
        """
        try:
            return bool(self._repo.refs.remove_if_equals(Ref(b"refs/heads/" + name.encode("ascii")), ObjectID(old)))
        except OSError:
            raise
        except Exception:  # a damaged packed-refs file
            raise IntegrityError("The store's packed-refs file is damaged.") from None

    def side_branches(self, prefix: str) -> list[str]:
        """Names of the loose and packed side branches ``refs/heads/<prefix>/<name>``, sorted
        (``<name>`` as found: the caller checks it)."""
        names: set[str] = set()
        directory = self.path.joinpath("refs", "heads", *prefix.split("/"))
        try:
            for entry in os.scandir(directory):
                if entry.is_file(follow_symlinks=False) and not entry.name.endswith(".lock"):
                    names.add(f"{prefix}/{entry.name}")
        except (FileNotFoundError, NotADirectoryError):
            pass
        try:
            packed = self._repo.refs.get_packed_refs()
        except Exception:
            raise IntegrityError("The store's packed-refs file is damaged.") from None
        start = f"refs/heads/{prefix}/".encode()
        for ref in packed:
            if bytes(ref).startswith(start) and b"/" not in bytes(ref)[len(start) :]:
                names.add(bytes(ref)[len(b"refs/heads/") :].decode("ascii", "replace"))
        return sorted(names)

    def head(self) -> bytes | None:
        """The branch's commit id (40 hex bytes), or None before the first commit."""
        return self.branch.head()

    def compare_and_swap(self, old: bytes | None, new: bytes) -> bool:
        """Move the branch from ``old`` to ``new``; False if it no longer points at ``old``
        (see :meth:`Branch.compare_and_swap <memvault.git.refs.Branch.compare_and_swap>`)."""
        return self.branch.compare_and_swap(old, new)

    # -- objects --------------------------------------------------------------------------------

    @staticmethod
    def blob(data: bytes) -> GitObject:
        """A blob object holding ``data``."""
        return GitObject(b"blob", data)

    @staticmethod
    def tree(entries: Mapping[bytes, tuple[int, bytes]]) -> GitObject:
        """A tree from ``name -> (mode, hex id)``, serialised as git does."""
        return GitObject(b"tree", serialize_tree(entries))

    @staticmethod
    def commit(
        tree_id: bytes, parent: bytes | None, message: bytes, *, author: bytes | None = None, time: int = 0
    ) -> GitObject:
        """The commit memvault writes (:func:`~memvault.git.objects.make_commit`)."""
        if author is None:
            return make_commit(tree_id, parent, message, time=time)
        return make_commit(tree_id, parent, message, author=author, time=time)

    def tree_update(
        self, base_id: bytes | None, entries: Mapping[bytes, tuple[int, bytes]], changed: Iterable[bytes]
    ) -> GitObject:
        """The tree ``entries`` (byte for byte :meth:`tree`), which differs from the tree
        ``base_id`` at most in the names ``changed``. When this object built or read ``base_id``
        lately, only those entries are serialised again (a tree of 256 entries costs what one of
        a few does); otherwise the whole tree is."""
        cached = self._tree_parts.get(base_id) if base_id is not None else None
        if cached is None:
            keys, parts = tree_parts(entries)
        else:
            keys, parts = list(cached[0]), list(cached[1])
            for name in changed:
                for key in (name, name + b"/"):  # its entry as a blob, or as a tree
                    i = bisect.bisect_left(keys, key)
                    if i < len(keys) and keys[i] == key:
                        del keys[i], parts[i]
                new = entries.get(name)
                if new is not None:
                    key = tree_sort_key(name, new[0])
                    i = bisect.bisect_left(keys, key)
                    keys.insert(i, key)
                    parts.insert(i, tree_entry(name, *new))
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

    def write(self, objects: Iterable[GitObject]) -> None:
        """Write objects loose (for the repository of ``memvault export``, and for tests of stores
        written before commits were packs); in durable mode make them durable, and with them the
        previous branch move. Each object appears whole or not at all (docs/format.md §7).

        Raises:
            OSError: an object could not be written (those written before it stay, unreferenced).
        """
        fsync_each = self._durable and not self._syncfs
        dirs: set[str] = set()
        level = self._compression
        for obj in objects:
            obj_id = obj.id.decode()
            directory = f"{self._objects_base}/{obj_id[:2]}"
            final = f"{directory}/{obj_id[2:]}"
            lock = final + ".lock"
            install_file(_open_loose_lock(directory, lock), lock, final, loose_object(obj, level), fsync=fsync_each)
            dirs.add(directory)
        if self._durable:
            self._sync_new_files([*dirs, self._objects_base])

    def write_pack(
        self, objects: Iterable[GitObject], *, merge: bool = False, sync: bool = True
    ) -> tuple[str, bytes, bytes]:
        """Write a commit's objects as one pack; return its name, bytes and index bytes
        (:meth:`PackDirectory.write <memvault.git.packdir.PackDirectory.write>`)."""
        return self.packs.write(objects, merge=merge, sync=sync)

    def _sync_new_files(self, dirs: list[str]) -> None:
        """Make files just renamed into ``dirs`` durable, and with them the previous branch move:
        one syncfs, or without it an fsync of each of ``dirs`` (the files were fsynced before
        their renames) and of ``refs/heads``."""
        if self._syncfs:
            sync_filesystem(self._objects_dir)  # also the previous commit's branch move
            return
        for d in dirs:
            fsync_dir(Path(d))
        try:
            fsync_dir(self.branch.directory)  # a branch move a writer with syncfs left unsynced
        except FileNotFoundError:
            pass  # the branch is packed (git pack-refs): compare_and_swap makes the directory

    def _forget_retired_packs(self) -> None:
        try:
            self._repo.object_store._update_pack_cache()
        except OSError:
            pass

    # -- maintenance ----------------------------------------------------------------------------

    def sweep_pack_leftovers(self) -> int:
        """Remove what a crashed pack writer left (:meth:`PackDirectory.sweep_leftovers
        <memvault.git.packdir.PackDirectory.sweep_leftovers>`); return how many files."""
        return self.packs.sweep_leftovers()

    def consolidate_packs(self, *, max_bytes: int | None = None) -> int:
        """Merge the smallest packs (:meth:`PackDirectory.consolidate
        <memvault.git.packdir.PackDirectory.consolidate>`); return how many were merged."""
        return self.packs.consolidate(max_bytes=max_bytes)

    def pack_count(self) -> int:
        """How many packs (with their index) the repository holds."""
        return self.packs.count()

    def loose_count(self) -> int:
        """How many loose objects the repository holds (one directory listing per fan-out)."""
        n = 0
        for d in self._objects_dir.iterdir():
            if len(d.name) == 2 and d.is_dir():
                n += sum(1 for f in os.scandir(d) if len(f.name) == 38)
        return n

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
            self.packs.install(data, idx, name)
            if self._durable:
                self.packs.sync()
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

    # -- reading --------------------------------------------------------------------------------

    def _get(self, obj_id: bytes) -> ShaFile:
        """An object parsed by dulwich (tests inspect commits with it); memvault's own reads go
        through :meth:`_raw`, bounded."""
        if not is_hex_id(obj_id):
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
        if not is_hex_id(obj_id):
            return False
        raw_id = binascii.a2b_hex(obj_id)
        packs = self._pack_reader
        if packs.contains(raw_id):
            return True
        if os.path.lexists(f"{self._objects_base}/{obj_id[:2].decode()}/{obj_id[2:].decode()}"):
            return True
        if packs.rescan() and packs.contains(raw_id):
            return True
        return self._fetched(obj_id) and packs.contains(raw_id)

    def _fetched(self, obj_id: bytes) -> bool:
        """Ask :attr:`fetch_missing` for an object the repository lacks; True if it installed a
        pack (the reader then lists the pack directory again)."""
        if self.fetch_missing is None or not self.fetch_missing(obj_id):
            return False
        self._pack_reader.rescan()
        return True

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
        its id. Packed objects are read by :class:`~memvault.git.packread.PackReader` (bounded to
        :data:`MAX_OBJECT_BYTES`, deltas resolved, a removed pack never read); the packs it
        knows are asked first, then the loose file, and only then is ``objects/pack`` listed
        again for packs another writer added since."""
        if not is_hex_id(obj_id):
            raise IntegrityError()
        raw_id = binascii.a2b_hex(obj_id)
        packs = self._pack_reader
        want_type = PACK_TYPES[kind]
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
            if found is None and self._fetched(obj_id):  # a cache that evicted it fetches it again
                found = packs.get(raw_id, sha256, want_type)
            if found is None:
                raise IntegrityError("An object of the store is missing.")
        type_num, raw = found
        if TYPE_NAMES.get(type_num) != kind:
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
        if not is_hex_id(obj_id):
            raise IntegrityError()
        path = self._objects_dir / obj_id[:2].decode() / obj_id[2:].decode()
        try:
            compressed = read_bounded(path, MAX_OBJECT_BYTES)
        except FileNotFoundError:
            return None
        except OSError:
            raise IntegrityError() from None
        return parse_loose_object(obj_id, compressed)

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
        :meth:`remember_tree` was told about are not
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

    def read_commit(self, obj_id: bytes) -> tuple[bytes, list[bytes], bytes]:
        """``(tree_id, parents, message)`` of a commit written by :meth:`commit` (byte for byte)."""
        raw = self._raw(obj_id, b"commit")
        try:
            obj = Commit.from_raw_string(PACK_TYPES[b"commit"], raw, sha=ObjectID(obj_id))
        except Exception:  # dulwich raises assorted errors on a malformed commit
            raise IntegrityError("A commit of the store is not in the format memvault writes.") from None
        if not isinstance(obj, Commit):
            raise IntegrityError()
        tree, parents, message = obj.tree, [bytes(p) for p in obj.parents], obj.message
        if (
            not isinstance(message, bytes)
            or not isinstance(tree, bytes)
            or not is_hex_id(tree)
            or len(parents) > 1
            or not all(isinstance(p, bytes) and is_hex_id(p) for p in parents)
            or self.commit(tree, parents[0] if parents else None, message).id != obj.id
        ):
            raise IntegrityError("A commit of the store is not in the format memvault writes.")
        return tree, parents, message
