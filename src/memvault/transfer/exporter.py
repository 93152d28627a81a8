"""Export from a store: the tree at a revision to a plain directory (:func:`export_tree`), or the
whole history replayed into a plaintext git repository for an auditor (:func:`export_plaintext_git`).

Files are written 0600 and directories 0700 through directory descriptors and ``O_NOFOLLOW``, so
nothing is written through a symbolic link. Exports are plaintext copies: the store's encryption,
redaction and access rules do not reach them; delete them when they are no longer needed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import (
    IntegrityError,
    InternalError,
    InvalidInputError,
    InvalidPathError,
    MemvaultError,
    PathExistsError,
)
from ..format.records import Node
from ..fsutil import DIR_MODE, FILE_MODE, O_DIR, O_NEW_FILE, O_READ, opened, write_all
from ..git.objects import MODE_BLOB, MODE_TREE
from ..git.repo import GitStore
from ..history import resolve
from ..paths import display, fold_key, parse_path
from ..settings import StoreSettings
from ..store import MemoryStore, StoreState
from .importer import Progress

__all__ = ["ExportResult", "export_tree", "export_plaintext_git"]

_NOT_A_DIR = "Error: The export target exists and is not a directory (or is a symbolic link)."
_IDENT_BAD = re.compile(r"[<>\x00-\x1f\x7f]")
_EMAIL_BAD = re.compile(r"[^A-Za-z0-9._+-]")


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote. ``files``/``directories`` are memory paths at the exported revision."""

    kind: Literal["tree", "plaintext-git"]
    commit_id: str  #: the memvault commit exported (the newest one for a history export)
    files: tuple[str, ...]
    directories: tuple[str, ...]
    git_commits: tuple[str, ...] = field(default=())  #: ids of the git commits written, oldest first

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "commit": self.commit_id,
            "files": list(self.files),
            "directories": list(self.directories),
            "git_commits": list(self.git_commits),
        }


# -- export of one tree ------------------------------------------------------------------------------


def _open_target(target: Path) -> int:
    """Create ``target`` (mode 0700) or take an existing empty directory; return its fd."""
    created = True
    try:
        os.mkdir(target, DIR_MODE)
    except FileExistsError:
        created = False
    except FileNotFoundError:
        raise InvalidInputError("Error: The parent directory of the export target does not exist.") from None
    try:
        fd = os.open(target, O_DIR)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathExistsError(
                "Error: The export target exists and is not a directory (or is a symbolic link)."
            ) from None
        raise InvalidInputError(f"Error: The export target cannot be opened ({err.strerror}).") from None
    try:
        if not created and os.listdir(fd):
            raise PathExistsError("Error: The export target is not empty; give a new or empty directory.")
        os.fchmod(fd, DIR_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _portable(settings: StoreSettings) -> StoreSettings | None:
    """The grammar exported names must also follow: memvault's own (every filesystem can hold its
    names) for a store of the API grammar, None for a store that follows it already."""
    if settings.path_grammar != "api":
        return None
    return StoreSettings(max_path_bytes=settings.max_path_bytes, max_depth=settings.max_depth)


def _check_portable(path: str, portable: StoreSettings) -> None:
    """Refuse a name of the API grammar that a directory cannot safely hold (``.git``, a device
    name, a reserved character, a segment over 255 bytes...), naming it."""
    try:
        parse_path(path, portable)
    except InvalidPathError as err:
        reason = err.message.rpartition(": ")[2]
        raise InvalidInputError(
            f"Error: {display(path)} cannot be exported to a directory ({reason}); rename it first, or export "
            "another subtree. Nothing more was exported."
        ) from None


def _layout(store: MemoryStore, state: StoreState) -> dict[tuple[str, ...], list[tuple[str, Node]]]:
    """``directory parts -> [(name, node)]`` of a state, every path re-validated (and, for a store
    of the API grammar, checked to be a name every filesystem can hold, siblings unique in case)."""
    children: dict[tuple[str, ...], list[tuple[str, Node]]] = {(): []}
    portable = _portable(store.settings)
    folded: dict[tuple[tuple[str, ...], str], str] = {}
    for path, node in sorted(state.nodes.items()):
        if node.redacted:
            continue  # erased: no name, no content; exports leave it out
        try:
            vpath = parse_path(path, store.settings)
        except InvalidPathError:
            raise IntegrityError("The store holds a path that is not valid; nothing more was exported.") from None
        if vpath.text != path or vpath.is_root or node.path != path:
            raise IntegrityError("The store holds a path that is not valid; nothing more was exported.")
        if portable is not None:
            _check_portable(path, portable)
            twin = folded.setdefault((vpath.parent.parts, fold_key(vpath.name)), path)
            if twin != path:
                raise InvalidInputError(
                    f"Error: {display(twin)} and {display(path)} differ only in case or form, which a "
                    "case-insensitive filesystem cannot hold apart; rename one first. Nothing more was exported."
                )
        children.setdefault(vpath.parent.parts, []).append((vpath.name, node))
        if node.is_dir:
            children.setdefault(vpath.parts, [])
    for parts in children:
        if parts and (parts[:-1] not in children):
            raise IntegrityError("The store's index is inconsistent.")
    return children


def _os_error(err: OSError, where: str) -> MemvaultError:
    if err.errno in (errno.EEXIST, errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
        return PathExistsError(
            f"Error: The export target changed while exporting ({where}: {err.strerror}); "
            "nothing was written through it. The partial export was left in place."
        )
    return InternalError(f"The export could not be written ({err.strerror or 'I/O error'}).")


def _write_dir(
    store: MemoryStore,
    dir_fd: int,
    parts: tuple[str, ...],
    children: dict[tuple[str, ...], list[tuple[str, Node]]],
    files: list[str],
    dirs: list[str],
    progress: Progress | None = None,
    total: int = 0,
) -> None:
    for name, node in children.get(parts, []):
        child = (*parts, name)
        shown = "/".join(child)
        try:
            if node.is_dir:
                os.mkdir(name, DIR_MODE, dir_fd=dir_fd)
                sub = os.open(name, O_DIR, dir_fd=dir_fd)
            else:
                data = store.read_node(node)
                sub = os.open(name, O_NEW_FILE, FILE_MODE, dir_fd=dir_fd)
        except OSError as err:
            raise _os_error(err, shown) from None
        with opened(sub):
            try:
                os.fchmod(sub, DIR_MODE if node.is_dir else FILE_MODE)
                if not node.is_dir:
                    write_all(sub, data)
            except OSError as err:
                raise _os_error(err, shown) from None
            if node.is_dir:
                dirs.append(node.path)
                _write_dir(store, sub, child, children, files, dirs, progress, total)
            else:
                files.append(node.path)
                if progress is not None:
                    progress(len(files), total)


def export_tree(
    store: MemoryStore, target: str | os.PathLike[str], *, rev: str = "HEAD", progress: Progress | None = None
) -> ExportResult:
    """Write the tree at ``rev`` to the plain directory ``target`` as **plaintext** files.

    ``target`` must not exist (it is created, mode 0700) or be an empty directory (its mode is
    set to 0700); a symbolic link is refused. ``/memories/a/b.md`` becomes ``<target>/a/b.md``.
    Every directory is 0700 and every file 0600 whatever the umask. Everything is created
    relative to directory file descriptors with ``O_NOFOLLOW``/``O_EXCL``, and every path is
    re-validated with :func:`~memvault.paths.parse_path` first, so nothing is written through a
    symbolic link or outside ``target``, even if one is planted or swapped in during the export
    (the export then stops with :class:`~memvault.errors.PathExistsError` and leaves what it
    wrote). No symbolic link is ever created. The copy is plaintext: protect or delete it.
    """
    commit_id = resolve(store, rev)
    state = store.state_at(commit_id)
    children = _layout(store, state)
    files: list[str] = []
    dirs: list[str] = []
    total = sum(1 for entries in children.values() for _name, node in entries if not node.is_dir)
    with opened(_open_target(Path(target))) as fd:
        _write_dir(store, fd, (), children, files, dirs, progress, total)
    return ExportResult("tree", commit_id.decode(), tuple(files), tuple(dirs))


# -- export of the history as a plaintext git repository ---------------------------------------------


def _identity(actor: str) -> bytes:
    name = _IDENT_BAD.sub("", actor).strip() or "unknown"
    local = _EMAIL_BAD.sub("-", actor).strip(".") or "unknown"
    return f"{name} <{local}@memvault.invalid>".encode()


def _history(store: MemoryStore) -> list[bytes]:
    """Commit ids from the first to the head (authenticated, contiguous)."""
    out: list[bytes] = []
    commit_id: bytes | None = store.head[0]
    expected: int | None = None
    while commit_id is not None:
        meta, _tree, parent = store.commit(commit_id)
        if expected is not None and meta.seq != expected:
            raise IntegrityError("The store's history is not contiguous.")
        out.append(commit_id)
        commit_id, expected = parent, meta.seq - 1
    out.reverse()
    return out


def _chmod_tree(dir_fd: int) -> None:
    """Mode 0700 on every directory and 0600 on every file below ``dir_fd`` (links untouched)."""
    with os.scandir(dir_fd) as it:
        entries = list(it)
    for entry in entries:
        if entry.is_symlink():
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        fd = os.open(entry.name, O_DIR if is_dir else O_READ, dir_fd=dir_fd)
        with opened(fd):
            os.fchmod(fd, DIR_MODE if is_dir else FILE_MODE)
            if is_dir:
                _chmod_tree(fd)


#: The configuration of the exported repository: a plain bare repository (the store's own git
#: settings, such as fsync and uncompressed objects, are not carried over).
_GIT_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"


def _write_git_config(root_fd: int) -> None:
    fd = os.open("config", os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=root_fd)
    with opened(fd):
        write_all(fd, _GIT_CONFIG)


def _prepare_git_target(target: Path) -> None:
    """``target`` must not exist or be an empty directory (removed so the repository is made there)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise InvalidInputError("Error: The parent directory of the export target does not exist.") from None
        return
    if not stat.S_ISDIR(st.st_mode):
        raise PathExistsError(_NOT_A_DIR)
    try:
        os.rmdir(target)
    except OSError:
        raise PathExistsError("Error: The export target is not empty; give a new or empty directory.") from None


def export_plaintext_git(
    store: MemoryStore,
    target: str | os.PathLike[str],
    *,
    i_understand_plaintext: bool,
    progress: Progress | None = None,
) -> ExportResult:
    """Replay the whole history into a new git repository of **plaintext** files at ``target``.

    This writes every version of every file, decrypted, including versions deleted or replaced
    since: anyone who can read ``target`` can read all of it, and nothing the store does later
    (redaction included) reaches this copy. It refuses (:class:`~memvault.errors.InvalidInputError`)
    unless ``i_understand_plaintext`` is ``True``.

    The repository is bare (``git log -p``, ``git show``, ``git blame`` work on it; ``git clone``
    it for a working tree), on branch ``main``, written with dulwich (no git binary). One git
    commit per memvault commit, oldest first: its tree holds the files of that revision under
    ``memories/`` (empty directories cannot be represented in git and are left out); author and
    committer are ``<actor> <<actor>@memvault.invalid>`` at the commit's time (UTC); the message is
    ``"<command> <paths>\\n\\nmemvault-commit: <id>\\nmemvault-seq: <seq>\\nmemvault-session: <session>\\n"``.
    ``target`` must not exist or be an empty directory; every directory of the repository is made
    0700 and every file 0600.
    """
    if i_understand_plaintext is not True:
        raise InvalidInputError(
            "Error: Exporting to a plaintext git repository writes every version of every memory, decrypted, "
            "to disk; pass i_understand_plaintext=True (--yes-write-plaintext) to do it."
        )
    target_path = Path(target)
    history = _history(store)
    _prepare_git_target(target_path)
    git = GitStore.init(target_path, durable=False)
    try:
        with opened(os.open(target_path, O_DIR)) as root_fd:
            os.fchmod(root_fd, DIR_MODE)  # before any plaintext object is written
            _write_git_config(root_fd)
            try:
                result = _replay(store, git, history, progress)
            finally:
                _chmod_tree(root_fd)
    finally:
        git.close()
    return result


class _Replay:
    """Builds the git objects of each revision, converting each file version once."""

    def __init__(self, store: MemoryStore, git: GitStore) -> None:
        self.store = store
        self.git = git
        self.blobs: dict[bytes, bytes] = {}  #: memvault blob id -> git blob id
        self.written: set[bytes] = set()
        self.objects: list[Any] = []

    def _add(self, obj: Any) -> bytes:
        obj_id = bytes(obj.id)
        if obj_id not in self.written:
            self.objects.append(obj)
            self.written.add(obj_id)
        return obj_id

    def tree(
        self,
        parts: tuple[str, ...],
        children: dict[tuple[str, ...], list[tuple[str, Node]]],
        files: list[str],
        dirs: list[str],
    ) -> bytes | None:
        entries: dict[bytes, tuple[int, bytes]] = {}
        for name, node in children.get(parts, []):
            if node.is_dir:
                dirs.append(node.path)
                sub = self.tree((*parts, name), children, files, dirs)
                if sub is not None:
                    entries[name.encode()] = (MODE_TREE, sub)
                continue
            blob_id = self.blobs.get(node.blob_id)
            if blob_id is None:
                blob_id = self.blobs[node.blob_id] = self._add(GitStore.blob(self.store.read_node(node)))
            entries[name.encode()] = (MODE_BLOB, blob_id)
            files.append(node.path)
        return self._add(GitStore.tree(entries)) if entries else None

    def commit(self, commit_id: bytes, parent: bytes | None) -> tuple[bytes, list[str], list[str]]:
        meta = self.store.commit_meta(commit_id)
        children = _layout(self.store, self.store.state_at(commit_id))
        files: list[str] = []
        dirs: list[str] = []
        memories = self.tree((), children, files, dirs)
        root = self._add(GitStore.tree({b"memories": (MODE_TREE, memories)} if memories is not None else {}))
        subject = " ".join((meta.command, *meta.paths))
        message = (
            f"{subject}\n\nmemvault-commit: {commit_id.decode()}\nmemvault-seq: {meta.seq}\n"
            f"memvault-session: {display(meta.session)}\n"
        )
        commit = GitStore.commit(
            root, parent, message.encode("utf-8"), author=_identity(meta.actor), time=int(meta.time)
        )
        git_id = self._add(commit)
        self.git.write(self.objects)
        self.objects = []
        return git_id, files, dirs


def _replay(store: MemoryStore, git: GitStore, history: list[bytes], progress: Progress | None = None) -> ExportResult:
    replay = _Replay(store, git)
    parent: bytes | None = None
    git_commits: list[str] = []
    files: list[str] = []
    dirs: list[str] = []
    for done, commit_id in enumerate(history, start=1):
        parent, files, dirs = replay.commit(commit_id, parent)
        git_commits.append(parent.decode())
        if progress is not None:
            progress(done, len(history))
    if parent is None or not git.compare_and_swap(None, parent):
        raise InternalError()
    return ExportResult("plaintext-git", history[-1].decode(), tuple(files), tuple(dirs), tuple(git_commits))
