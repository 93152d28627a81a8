"""The git layer: the only module that imports ``dulwich``. It sees ciphertext bytes only.

A bare repository with one branch, ``refs/heads/main``. Objects are written loose (fsynced in
``full`` durability, together with their directories) before the branch moves; the branch moves
by compare-and-swap. Every tree read back is checked against the one shape memvault writes, so a
hostile repository (``..`` names, symlinks, gitlinks) is refused rather than interpreted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from dulwich.errors import ChecksumMismatch, ObjectFormatException
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from .errors import IntegrityError
from .fsutil import fsync_dir

__all__ = ["GitStore", "BRANCH", "MODE_BLOB", "MODE_TREE", "IDENTITY"]

BRANCH = Ref(b"refs/heads/main")
MODE_BLOB = 0o100644
MODE_TREE = 0o040000
#: Constant author/committer: who did what lives only in the encrypted commit metadata.
IDENTITY = b"memvault <memvault@invalid>"
_NAME_OK = re.compile(rb"\A[0-9a-z]{1,64}\Z")
_HEX40 = re.compile(rb"\A[0-9a-f]{40}\Z")


class GitStore:
    """A bare dulwich repository used as an object store plus one compare-and-swap ref."""

    def __init__(self, path: Path, *, durable: bool) -> None:
        self.path = path
        self._durable = durable
        try:
            self._repo = Repo(str(path))
        except Exception:
            raise IntegrityError("The store's git repository cannot be opened.") from None
        self._repo.object_store.fsync_object_files = durable
        self._objects_dir = path / "objects"
        self._ref_file = path / "refs" / "heads" / "main"

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
        self._repo.close()

    # -- refs ---------------------------------------------------------------------------------

    def head(self) -> bytes | None:
        """The branch's commit id (40 hex bytes), or None before the first commit."""
        try:
            data = self._ref_file.read_bytes().strip()
        except FileNotFoundError:
            # `git pack-refs` (run by `git gc`) moves the branch into packed-refs.
            packed = self._repo.refs.get_packed_refs().get(BRANCH)
            if packed is None:
                return None
            data = bytes(packed)
        if not _HEX40.match(data):
            raise IntegrityError("The store's branch is damaged.")
        return data

    def compare_and_swap(self, old: bytes | None, new: bytes) -> bool:
        """Move the branch from ``old`` to ``new``; False if it no longer points at ``old``.

        The caller holds the store lock, which makes read-compare-write atomic among memvault
        writers. The new value goes through ``main.lock`` (git's own lock protocol, so a git
        client never sees a half-written ref); a ``main.lock`` found here was left by a crashed
        writer and is removed. fsync follows the store's durability setting.
        """
        if self.head() != old:
            return False
        lock = self._ref_file.with_name("main.lock")
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
        self._ref_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, new + b"\n")
            if self._durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(lock, self._ref_file)
        if self._durable:
            fsync_dir(self._ref_file.parent)
        return True

    # -- objects ------------------------------------------------------------------------------

    @staticmethod
    def blob(data: bytes) -> Blob:
        return Blob.from_string(data)

    @staticmethod
    def tree(entries: Mapping[bytes, tuple[int, bytes]]) -> Tree:
        """A tree from ``name -> (mode, id)``."""
        tree = Tree()
        for name, (mode, obj_id) in entries.items():
            tree.add(name, mode, ObjectID(obj_id))
        return tree

    @staticmethod
    def commit(tree_id: bytes, parent: bytes | None, message: bytes) -> Commit:
        c = Commit()
        c.tree = ObjectID(tree_id)
        c.parents = [ObjectID(parent)] if parent is not None else []
        c.author = c.committer = IDENTITY
        c.author_time = c.commit_time = 0
        c.author_timezone = c.commit_timezone = 0
        c.encoding = None
        c.message = message
        return c

    def write(self, objects: Iterable[ShaFile]) -> None:
        """Write objects loose; in durable mode fsync them and their fan-out directories."""
        store = self._repo.object_store
        dirs: set[str] = set()
        for obj in objects:
            store.add_object(obj)  # an object already present is only touched, not rewritten
            dirs.add(obj.id[:2].decode())
        if self._durable:
            for d in dirs:
                fsync_dir(self._objects_dir / d)
            fsync_dir(self._objects_dir)

    def _get(self, obj_id: bytes) -> ShaFile:
        try:
            return self._repo.object_store[ObjectID(obj_id)]
        except KeyError:
            raise IntegrityError("An object of the store is missing.") from None
        except (ChecksumMismatch, ObjectFormatException, ValueError, OSError):
            raise IntegrityError() from None
        except Exception:
            raise IntegrityError() from None

    def contains(self, obj_id: bytes) -> bool:
        return ObjectID(obj_id) in self._repo.object_store

    def read_blob(self, obj_id: bytes) -> bytes:
        obj = self._get(obj_id)
        if not isinstance(obj, Blob):
            raise IntegrityError()
        return obj.as_raw_string()

    def read_tree(self, obj_id: bytes) -> dict[bytes, tuple[int, bytes]]:
        """Entries of a tree, refusing any name or mode memvault never writes."""
        obj = self._get(obj_id)
        if not isinstance(obj, Tree):
            raise IntegrityError()
        try:
            obj.check()
        except Exception:
            raise IntegrityError() from None
        out: dict[bytes, tuple[int, bytes]] = {}
        for entry in obj.iteritems():
            name, mode, sha = entry.path, entry.mode, entry.sha
            if not _NAME_OK.match(name) or mode not in (MODE_BLOB, MODE_TREE) or name in out:
                raise IntegrityError()
            out[name] = (mode, sha)
        return out

    def read_commit(self, obj_id: bytes) -> tuple[bytes, list[bytes], bytes]:
        """``(tree_id, parents, message)`` of a commit."""
        obj = self._get(obj_id)
        if not isinstance(obj, Commit):
            raise IntegrityError()
        return obj.tree, list(obj.parents), obj.message
