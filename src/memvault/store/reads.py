"""The typed read API a store offers applications: :meth:`~FileReads.read_text`,
:meth:`~FileReads.read_bytes`, :meth:`~FileReads.list` and :meth:`~FileReads.exists`, at the
head or at a revision in the grammar of :mod:`memvault.store.revisions` (the CLI's: ``HEAD~2``,
``#3``, ``3f2a9c``, ``@{2026-11-01 14:30}``; also a sequence number as an ``int``).

:class:`FileReads` is a mixin of :class:`~memvault.store.MemoryStore`: it reads through the
store's public, authenticated methods (``head``, ``commit``, ``state_at``, ``read_node``,
``token``), so every content it returns was authenticated as the memory tool's reads are. Reads
made here are not recorded as uses of a file (``memvault expire`` counts the memory tool's).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import InvalidInputError, InvalidPathError, PathNotFoundError
from ..format.records import Node
from ..paths import ROOT, parse_path
from .revisions import Revision, resolve

if TYPE_CHECKING:
    from ..format.records import CommitMeta
    from ..settings import StoreSettings
    from .state import StoreState

__all__ = ["FileReads", "MemoryEntry", "Revision"]


@dataclass(frozen=True)
class MemoryEntry:
    """A file or directory the read API lists: its canonical path, kind and size (bytes of a
    file's content; 0 for a directory)."""

    path: str
    kind: Literal["file", "dir"]
    size: int


class FileReads:
    """Reading files and directories at the head or at a revision (a mixin of the store)."""

    if TYPE_CHECKING:  # what the store provides (its own definitions are checked against these)
        settings: StoreSettings

        @property
        def head(self) -> tuple[bytes, int]: ...

        def commit(self, commit_id: bytes) -> tuple[CommitMeta, bytes, bytes | None]: ...

        def state_at(self, commit_id: bytes) -> StoreState: ...

        def read_node(self, node: Node) -> bytes: ...

        def token(self, path: str) -> bytes: ...

    def read_bytes(self, path: str, rev: Revision = None) -> bytes:
        """The content of the file ``path`` at ``rev`` (default: the head), as stored.

        Raises:
            InvalidPathError: ``path`` breaks the path grammar, or names a directory.
            PathNotFoundError: no file at ``path`` at that revision.
            RedactedError: that version was redacted (the message says by whom and when).
            InvalidInputError: ``rev`` names no commit of the store.
        """
        return self.read_node(self._file_node(path, rev))

    def read_text(self, path: str, rev: Revision = None) -> str:
        """The content of the text file ``path`` at ``rev`` (default: the head).

        Raises:
            InvalidInputError: the file was put in as binary (an image): use :meth:`read_bytes`.
            And as :meth:`read_bytes`.
        """
        node = self._file_node(path, rev)
        if node.binary:
            raise InvalidInputError(f"Error: {node.path} is a binary file; read it with read_bytes().")
        return self.read_node(node).decode("utf-8")

    def _file_node(self, path: str, rev: Revision) -> Node:
        vpath = parse_path(path, self.settings).text
        state = self.state_at(self.commit_of(rev))
        node = state.nodes.get(vpath) or _redacted(state, self.token(vpath))
        if vpath == ROOT or (node is not None and node.is_dir):
            raise InvalidPathError(f"Error: {vpath} is a directory, not a file; list it with list().")
        if node is None:
            raise PathNotFoundError(f"Error: The file {vpath} does not exist at that revision.")
        return node

    def list(self, path: str = ROOT, rev: Revision = None, *, recursive: bool = False) -> builtins.list[MemoryEntry]:
        """The files and directories directly in directory ``path`` at ``rev`` (default: the
        head), or everything below it with ``recursive``; sorted by path. Redacted versions are
        not listed (their names went with their keys).

        Raises:
            InvalidPathError: ``path`` breaks the path grammar, or names a file.
            PathNotFoundError: no directory at ``path`` at that revision.
            InvalidInputError: ``rev`` names no commit of the store.
        """
        vpath = parse_path(path, self.settings).text
        state = self.state_at(self.commit_of(rev))
        node = state.nodes.get(vpath)
        if vpath != ROOT and node is None:
            raise PathNotFoundError(f"Error: The directory {vpath} does not exist at that revision.")
        if node is not None and not node.is_dir:
            raise InvalidPathError(f"Error: {vpath} is a file, not a directory; read it with read_text().")
        prefix = vpath + "/"
        return [
            MemoryEntry(n.path, n.kind, n.size)
            for p, n in sorted(state.nodes.items())
            if p.startswith(prefix) and not n.redacted and (recursive or "/" not in p[len(prefix) :])
        ]

    def exists(self, path: str, rev: Revision = None) -> bool:
        """Whether a file or directory is at ``path`` at ``rev`` (default: the head); True for
        a redacted version too (reading it raises RedactedError).

        Raises:
            InvalidPathError: ``path`` breaks the path grammar.
            InvalidInputError: ``rev`` names no commit of the store.
        """
        vpath = parse_path(path, self.settings).text
        state = self.state_at(self.commit_of(rev))
        return vpath == ROOT or vpath in state.nodes or _redacted(state, self.token(vpath)) is not None

    def commit_of(self, rev: Revision) -> bytes:
        """The commit id (40 hex bytes) ``rev`` names (see :mod:`memvault.store.revisions`).

        Raises:
            InvalidInputError: it names no commit of the store.
            TypeError: ``rev`` is not a :data:`~memvault.store.revisions.Revision`.
        """
        return resolve(self, rev)


def _redacted(state: StoreState, token: bytes) -> Node | None:
    """The redacted version whose path has ``token`` (its path went with its key; the token stays)."""
    return state.redacted(token)
