"""A mutating command's working copy (copy-on-write over the head state) and what it committed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from .. import crypto
from ..errors import LimitExceededError, PathExistsError
from ..format.records import CommitMeta, Node
from ..paths import MemoryPath, exact_key
from ..settings import StoreSettings
from .state import StoreState, split_path

__all__ = ["Transaction", "Committed", "StoreView", "commit_meta_after", "commit_time"]


def commit_time() -> float:
    """Seconds since the epoch that a new commit records (tests move this clock)."""
    return time.time()


def commit_meta_after(state: StoreState, actor: str, session: str, command: str, paths: Any = (),
                      findings: Any = None, extra: Any = None) -> CommitMeta:  # fmt: skip
    """The metadata of the commit after ``state``, made now."""
    return CommitMeta(state.seq + 1, commit_time(), actor, session, command, paths, dict(findings or {}),
                      extra=extra or {})  # fmt: skip


class StoreView(Protocol):
    """What a transaction needs of its store: settings, path tokens, decrypted contents."""

    @property
    def settings(self) -> StoreSettings: ...

    def token(self, path: str) -> bytes: ...

    def read_node(self, node: Node) -> bytes: ...


T = TypeVar("T")


@dataclass(frozen=True)
class Committed(Generic[T]):
    """What :meth:`MemoryStore.transact <memvault.store.MemoryStore.transact>` committed: the
    callback's return ``value``, the new commit's id (40 hex bytes), sequence number and time
    (seconds since the epoch, as its metadata records it)."""

    value: T
    commit_id: bytes
    seq: int
    time: float = 0.0


class Transaction:
    """The working copy of one mutating command, over the head state (copy-on-write overlay).

    Nothing here touches storage: the store turns the overlay into objects at commit time.
    """

    def __init__(self, store: StoreView, state: StoreState) -> None:
        self._store = store
        self._base = state
        self.changes: dict[str, Node | None] = {}
        self.contents: dict[str, bytes] = {}
        self._child_overlay: dict[str, dict[str, str | None]] = {}
        self._file_delta = 0
        self._bytes_delta = 0

    @property
    def settings(self) -> StoreSettings:
        return self._store.settings

    @property
    def base_commit(self) -> bytes:
        """The id of the commit this transaction works on."""
        return self._base.commit_id

    @property
    def base_seq(self) -> int:
        """The sequence number of the commit this transaction works on."""
        return self._base.seq

    # -- reading ------------------------------------------------------------------------------

    def get(self, path: MemoryPath | str) -> Node | None:
        """The node at ``path`` as this transaction sees it (None if absent). Root is a dir."""
        key = str(path)
        if key in self.changes:
            return self.changes[key]
        return self._base.node(key)

    @property
    def total_bytes(self) -> int:
        """Plaintext bytes of all files as this transaction sees them."""
        return self._base.total_bytes + self._bytes_delta

    def is_dir(self, path: MemoryPath) -> bool:
        if path.is_root:
            return True
        node = self.get(path)
        return node is not None and node.is_dir

    def exists(self, path: MemoryPath) -> bool:
        return path.is_root or self.get(path) is not None

    def child_names(self, path: MemoryPath | str) -> list[str]:
        key = str(path)
        names = dict(self._base.children.get(key, {}))
        for folded, name in self._child_overlay.get(key, {}).items():
            if name is None:
                names.pop(folded, None)
            else:
                names[folded] = name
        return sorted(names.values())

    def read(self, path: MemoryPath) -> bytes:
        key = str(path)
        if key in self.contents:
            return self.contents[key]
        node = self._base.nodes[key]
        return self._store.read_node(node)

    def descendants(self, path: MemoryPath) -> Iterator[MemoryPath]:
        """All nodes strictly below ``path``, parents before children."""
        for name in self.child_names(path):
            child = path.child(name)
            yield child
            if self.is_dir(child):
                yield from self.descendants(child)

    # -- writing ------------------------------------------------------------------------------

    def _set(self, path: MemoryPath, node: Node | None) -> None:
        old = self.get(path)
        key = path.text
        self.changes[key] = node
        parent, name = split_path(key)
        overlay = self._child_overlay.setdefault(parent, {})
        overlay[self._base.fold(name)] = None if node is None else name
        if old is not None and not old.is_dir:
            self._file_delta -= 1
            self._bytes_delta -= old.size
        if node is not None and not node.is_dir:
            self._file_delta += 1
            self._bytes_delta += node.size

    def _check_new_name(self, path: MemoryPath) -> None:
        """Refuse a name whose case-folded form collides with a different existing sibling."""
        if self._base.fold is exact_key:
            return  # siblings collide only when equal: the same path, never another one
        parent, folded = path.parent.text, self._base.fold(path.name)
        overlay = self._child_overlay.get(parent, {})
        # The parent's child list needs every shard decoded (siblings' tokens are spread over all).
        existing = overlay[folded] if folded in overlay else self._base.children.get(parent, {}).get(folded)
        if existing is not None and existing != path.name:
            raise PathExistsError(
                f"Error: The path {path.text} collides with the existing "
                f"{path.parent.child(existing).text} (names differ only in case or form)"
            )

    def _lineage(self, old: Node | None) -> tuple[bytes, int]:
        if old is None:
            return crypto.random_bytes(16), 1
        return old.file_id, old.version + 1

    def make_dirs(self, path: MemoryPath, *, for_path: MemoryPath | None = None) -> None:
        """Create ``path`` and its missing ancestors as directories (a file in the way refuses).

        ``for_path`` is what the caller is creating, for the error message.
        """
        missing: list[MemoryPath] = []
        current = path
        while not current.is_root:
            node = self.get(current)
            if node is not None:
                if not node.is_dir:
                    raise PathExistsError(
                        f"Error: Cannot create {(for_path or path).text}: {current.text} is a file, not a directory"
                    )
                break
            missing.append(current)
            current = current.parent
        if len(path.parts) > self.settings.max_depth:
            raise LimitExceededError(f"Error: {path.text} is nested deeper than {self.settings.max_depth} levels")
        for d in reversed(missing):
            self._check_new_name(d)
            file_id, version = self._lineage(None)
            self._set(d, Node(d.text, "dir", self._store.token(d.text), file_id, version, b""))

    def write_file(self, path: MemoryPath, data: bytes, *, binary: bool = False, lineage: Node | None = None) -> None:
        """Create or replace the file at ``path`` (parents are created)."""
        if len(data) > self.settings.max_file_bytes:
            raise LimitExceededError(
                f"Error: The content for {path.text} is {len(data)} bytes, over the limit of "
                f"{self.settings.max_file_bytes} bytes per file"
            )
        old = self.get(path)
        if old is not None and old.is_dir:
            raise PathExistsError(f"Error: {path.text} is a directory")
        self.make_dirs(path.parent, for_path=path)
        if old is None:
            self._check_new_name(path)
            if self._base.file_count + self._file_delta + 1 > self.settings.max_files:
                raise LimitExceededError(
                    f"Error: The memory store is full: it holds at most {self.settings.max_files} files"
                )
        grown = len(data) - (old.size if old is not None else 0)
        if grown > 0 and self.total_bytes + grown > self.settings.max_total_bytes:
            raise LimitExceededError(
                f"Error: The memory store is full: it holds at most {self.settings.max_total_bytes} bytes of "
                f"content in all, and this would make {self.total_bytes + grown}"
            )
        file_id, version = self._lineage(lineage if lineage is not None else old)
        node = Node(path.text, "file", self._store.token(path.text), file_id, version, b"", size=len(data),
                    sha256=crypto.sha256(data), binary=binary)  # fmt: skip
        self._set(path, node)
        self.contents[path.text] = data

    def delete(self, path: MemoryPath) -> None:
        """Delete a file, or a directory with everything below it."""
        if self.is_dir(path):
            for child in reversed(list(self.descendants(path))):
                self._set(child, None)
        self._set(path, None)

    def rename(self, old: MemoryPath, new: MemoryPath) -> None:
        """Move a file or directory tree from ``old`` to ``new`` (which must not exist).

        Every moved file becomes a new version of its lineage, re-encrypted because the path
        is part of each blob's associated data.
        """
        moves: list[tuple[MemoryPath, MemoryPath, Node, bytes | None]] = []
        for src in [old, *self.descendants(old)]:
            node = self.get(src)
            assert node is not None
            dst = _rebase(src, old, new)
            if len(dst.text.encode()) > self.settings.max_path_bytes or len(dst.parts) > self.settings.max_depth:
                raise LimitExceededError(f"Error: Renaming to {new.text} would make a path too long or too deep")
            moves.append((src, dst, node, None if node.is_dir else self.read(src)))
        for src, _dst, _node, _data in reversed(moves):
            self._set(src, None)
        self.make_dirs(new.parent, for_path=new)
        self._check_new_name(new)
        for _src, dst, node, data in moves:
            if data is None:
                file_id, version = self._lineage(node)
                self._set(dst, Node(dst.text, "dir", self._store.token(dst.text), file_id, version, b""))
            else:
                self.write_file(dst, data, binary=node.binary, lineage=node)


def _rebase(path: MemoryPath, old: MemoryPath, new: MemoryPath) -> MemoryPath:
    return MemoryPath(new.parts + path.parts[len(old.parts) :])
