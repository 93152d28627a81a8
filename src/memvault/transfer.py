"""Moving memories in and out of a store: import a plain directory, export a tree, export history.

- :func:`import_dir` reads a plain directory of memory files (a ``BetaLocalFilesystemMemoryTool``
  base folder, a folder that *is* the memories root, or a Claude Code ``memory/`` folder) and
  writes it as **one** commit. Every path goes through :func:`memvault.paths.parse_path`, the
  same validator the memory tool uses; symbolic links are never followed.
- :func:`export_tree` writes the tree at a revision to a plain directory (files 0600,
  directories 0700, whatever the umask), through directory file descriptors and ``O_NOFOLLOW``
  so nothing is ever written through a symbolic link, not even one planted during the export.
- :func:`export_plaintext_git` replays the whole history into a new git repository of
  **plaintext** files for an auditor who wants ordinary git tools; it refuses to run unless the
  caller says explicitly that it may write plaintext.

Exports are plaintext copies: the store's encryption, redaction and access rules do not reach
them. Delete them when they are no longer needed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import (
    ExitStatus,
    IntegrityError,
    InternalError,
    InvalidInputError,
    InvalidPathError,
    LimitExceededError,
    MemvaultError,
    PathExistsError,
    SensitiveDataError,
)
from .format.records import Node
from .fsutil import DIR_MODE, FILE_MODE, write_all
from .git.objects import MODE_BLOB, MODE_TREE
from .git.repo import GitStore
from .history import resolve
from .paths import ROOT, MemoryPath, display, parse_path
from .scrub import guard
from .store import MemoryStore, StoreState, Transaction

__all__ = [
    "Scrubber",
    "SkippedEntry",
    "ImportResult",
    "ExportResult",
    "ImportRefusedError",
    "import_dir",
    "export_tree",
    "export_plaintext_git",
    "IMAGE_SUFFIXES",
]

#: The scrubber hook: ``scrub(field, value) -> value``. ``field`` names what ``value`` is, as in
#: the memory tool's ``create`` command: ``"path"`` (a canonical memory path) or ``"file_text"``
#: (the UTF-8 text of one file). It returns the text to keep (possibly redacted) or raises a
#: :class:`~memvault.errors.MemvaultError` (``SensitiveDataError``) to refuse the whole import.
Scrubber = Callable[[str, str], str]
#: ``progress(done, total)``, called as work advances (the CLI draws a bar on a terminal).
Progress = Callable[[int, int], None]

#: Files kept as binary (images the memory tool can show); everything else must be UTF-8 text.
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg"})
#: Temporary files ``BetaLocalFilesystemMemoryTool`` leaves behind if it dies mid-write.
_SDK_TEMP_RE = re.compile(r"\A\.tmp-\d+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC
_O_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC
#: How many problems an error message lists before "and N more".
_SHOWN_PROBLEMS = 10
_NOT_A_DIR = "Error: The export target exists and is not a directory (or is a symbolic link)."
_IDENT_BAD = re.compile(r"[<>\x00-\x1f\x7f]")
_EMAIL_BAD = re.compile(r"[^A-Za-z0-9._+-]")


@dataclass(frozen=True)
class SkippedEntry:
    """An entry of the source directory that was not imported, and why.

    ``source`` is its path relative to the source directory, made safe to show (control and
    format characters escaped, see :func:`memvault.paths.display`).
    """

    source: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason}


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_dir` did. Paths are canonical memory paths, sorted."""

    commit_id: str | None  #: hex id of the import commit; None when there was nothing to import
    seq: int | None
    layout: Literal["sdk-base", "root"]  #: whether ``<source>/memories`` or ``<source>`` was imported
    imported: tuple[str, ...]  #: files written
    directories: tuple[str, ...]  #: directories of the source (empty ones included)
    overwritten: tuple[str, ...]  #: files that existed and were replaced (``overwrite=True``)
    hidden: tuple[str, ...]  #: imported names starting with "." (the tool's ``view`` does not list them)
    skipped: tuple[SkippedEntry, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit_id,
            "seq": self.seq,
            "layout": self.layout,
            "imported": list(self.imported),
            "directories": list(self.directories),
            "overwritten": list(self.overwritten),
            "hidden": list(self.hidden),
            "skipped": [s.to_json() for s in self.skipped],
        }


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


class ImportRefusedError(MemvaultError):
    """Some entries of the source cannot be imported, so nothing was (see ``problems``)."""

    exit_status = ExitStatus.REFUSED

    def __init__(self, problems: tuple[SkippedEntry, ...]) -> None:
        shown = "; ".join(f"{p.source}: {p.reason}" for p in problems[:_SHOWN_PROBLEMS])
        more = f"; and {len(problems) - _SHOWN_PROBLEMS} more" if len(problems) > _SHOWN_PROBLEMS else ""
        super().__init__(
            f"Error: Nothing was imported: {len(problems)} entr{'y' if len(problems) == 1 else 'ies'} cannot be "
            f"imported ({shown}{more}). Fix or remove them, or skip them with skip_invalid (--skip-invalid)."
        )
        self.problems = problems


# -- import ------------------------------------------------------------------------------------------


@dataclass
class _Scan:
    files: dict[str, tuple[bytes, bool, str]] = field(default_factory=dict)  #: path -> (data, binary, source)
    directories: list[MemoryPath] = field(default_factory=list)
    problems: list[SkippedEntry] = field(default_factory=list)  #: refuse unless skip_invalid
    skipped: list[SkippedEntry] = field(default_factory=list)  #: always skipped (links, specials, temp)
    hidden: list[str] = field(default_factory=list)


@contextmanager
def _opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _read_limited(fd: int, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``fd``; None if it holds more."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            return None


class _Importer:
    def __init__(self, store: MemoryStore, prefix: MemoryPath, scrub: Scrubber | None) -> None:
        self.store = store
        self.settings = store.settings
        self.prefix = prefix
        self.scrub = scrub
        self.scan = _Scan()
        self.file_count = 0

    def _path(self, rel: tuple[str, ...], source: str, kind: str) -> MemoryPath | None:
        """The validated memory path of a source entry (scrubbed); None after noting a problem."""
        raw = "/".join((self.prefix.text, *rel))
        try:
            vpath = parse_path(raw, self.settings)
            if self.scrub is not None:
                vpath = parse_path(self.scrub("path", vpath.text), self.settings)
        except (InvalidPathError, SensitiveDataError) as err:
            reason = str(err).removeprefix("Error: ")
            if kind == "directory":
                reason += " (the directory and everything in it were not imported)"
            self.scan.problems.append(SkippedEntry(source, reason))
            return None
        return vpath

    def walk(self, dir_fd: int, rel: tuple[str, ...]) -> None:
        with os.scandir(dir_fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            name = entry.name
            child_rel = (*rel, name)
            source = display("/".join(child_rel))
            if entry.is_symlink():
                self.scan.skipped.append(SkippedEntry(source, "a symbolic link (never followed)"))
                continue
            if _SDK_TEMP_RE.match(name):
                self.scan.skipped.append(SkippedEntry(source, "a temporary file of the SDK memory tool"))
                continue
            if entry.is_dir(follow_symlinks=False):
                vpath = self._path(child_rel, source, "directory")
                if vpath is None:
                    continue
                try:
                    sub = os.open(name, _O_DIR, dir_fd=dir_fd)
                except OSError:
                    self.scan.skipped.append(SkippedEntry(source, "changed while importing (not a directory now)"))
                    continue
                with _opened(sub):
                    self.scan.directories.append(vpath)
                    if name.startswith("."):
                        self.scan.hidden.append(vpath.text)
                    self.walk(sub, child_rel)
            elif entry.is_file(follow_symlinks=False):
                self._file(dir_fd, name, child_rel, source)
            else:
                self.scan.skipped.append(SkippedEntry(source, "not a regular file or directory"))

    def _file(self, dir_fd: int, name: str, rel: tuple[str, ...], source: str) -> None:
        vpath = self._path(rel, source, "file")
        if vpath is None:
            return
        self.file_count += 1
        if self.file_count > self.settings.max_files:
            raise LimitExceededError(
                f"Error: The source holds more than {self.settings.max_files} files, the most this store holds."
            )
        try:
            fd = os.open(name, _O_READ, dir_fd=dir_fd)
        except OSError:
            self.scan.skipped.append(SkippedEntry(source, "changed while importing (not a regular file now)"))
            return
        with _opened(fd):
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.scan.skipped.append(SkippedEntry(source, "not a regular file"))
                return
            limit = self.settings.max_file_bytes
            data = None if st.st_size > limit else _read_limited(fd, limit)
        if data is None:
            self.scan.problems.append(SkippedEntry(source, f"it is larger than the limit of {limit} bytes per file"))
            return
        binary = "." in vpath.name and "." + vpath.name.rpartition(".")[2].lower() in IMAGE_SUFFIXES
        if not binary:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self.scan.problems.append(
                    SkippedEntry(source, "it is not UTF-8 text (only .png, .jpg and .jpeg files may be binary)")
                )
                return
            if self.scrub is not None:
                try:
                    data = self.scrub("file_text", text).encode("utf-8")
                except SensitiveDataError as err:
                    self.scan.problems.append(SkippedEntry(source, str(err).removeprefix("Error: ")))
                    return
                if len(data) > limit:
                    self.scan.problems.append(SkippedEntry(source, f"it is larger than the limit of {limit} bytes"))
                    return
        if vpath.text in self.scan.files:
            self.scan.problems.append(SkippedEntry(source, f"the scrubber mapped it onto {vpath.text} twice"))
            return
        if name.startswith("."):
            self.scan.hidden.append(vpath.text)
        self.scan.files[vpath.text] = (data, binary, source)


def _source_root(source: Path) -> tuple[int, Literal["sdk-base", "root"]]:
    """Open the directory to import: ``<source>/memories`` of an SDK base folder, else ``source``."""
    try:
        fd = os.open(source, _O_DIR)
    except FileNotFoundError:
        raise InvalidInputError("Error: The directory to import does not exist.") from None
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidInputError("Error: The source to import is not a directory (or is a symbolic link).") from None
        raise InvalidInputError(f"Error: The directory to import cannot be read ({err.strerror}).") from None
    try:
        names = os.listdir(fd)
        if names == ["memories"]:
            st = os.stat("memories", dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                sub = os.open("memories", _O_DIR, dir_fd=fd)
                os.close(fd)
                return sub, "sdk-base"
    except BaseException:
        os.close(fd)
        raise
    return fd, "root"


def import_dir(
    store: MemoryStore,
    source: str | os.PathLike[str],
    *,
    actor: str = "operator",
    session: str = "",
    prefix: str = ROOT,
    skip_invalid: bool = False,
    overwrite: bool = False,
    scrub: Scrubber | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Import a plain directory of memory files into ``store`` as one commit (command ``import``).

    ``source`` is a ``BetaLocalFilesystemMemoryTool`` base folder (exactly one entry, a
    ``memories`` directory, whose content is imported), or any other folder whose content is
    imported as is (a folder that is the memories root, a Claude Code ``memory/`` folder).
    ``<source-relative path>`` becomes ``<prefix>/<source-relative path>``.

    - Every path goes through :func:`~memvault.paths.parse_path` (with the store's limits). An
      invalid name, a file over the size limit, or a non-UTF-8 file that is not ``.png``,
      ``.jpg`` or ``.jpeg`` is a *problem*: the import is refused as a whole
      (:class:`ImportRefusedError`, nothing written) unless ``skip_invalid`` is true, which
      skips those entries and lists them in :attr:`ImportResult.skipped`. A directory with an
      invalid name is skipped with everything in it.
    - Always skipped and listed: symbolic links (never followed), sockets, FIFOs and devices,
      and the SDK tool's temporary ``.tmp-<pid>-<uuid>`` files. Other names starting with "."
      are imported and listed in :attr:`ImportResult.hidden`.
    - Images are stored as binary files, everything else as UTF-8 text.
    - More files than the store may hold raises :class:`~memvault.errors.LimitExceededError`.
    - A file that exists in the store refuses the import (:class:`~memvault.errors.PathExistsError`
      naming them) unless ``overwrite`` is true; a directory in the way of a file always refuses.
    - ``scrub`` is the hook for the scrubber (see :data:`Scrubber`): it is called with
      ``("path", path)`` for every path and ``("file_text", text)`` for every text file, before
      anything is written, and its result is what gets validated and stored. It is not applied to
      binary files. It may raise (for example ``SensitiveDataError``) to refuse the import.

    The source is read before the store lock is taken; the commit records ``paths=(prefix,)``
    and per-file changes are in the log. An empty source writes no commit (``commit_id`` None).
    """
    prefix_path = parse_path(prefix, store.settings)
    root_fd, layout = _source_root(Path(source))
    findings: dict[str, int] = {}
    if scrub is None:  # the store's own scrubber, as for the memory tool
        scrub = guard.hook(store, findings)
    importer = _Importer(store, prefix_path, scrub)
    with _opened(root_fd):
        importer.walk(root_fd, ())
    scan = importer.scan
    if scan.problems and not skip_invalid:
        raise ImportRefusedError(tuple(scan.problems))
    files = scan.files
    if not files and not scan.directories:
        return ImportResult(
            None, None, layout, (), (), (), tuple(sorted(scan.hidden)), tuple(scan.skipped + scan.problems)
        )
    overwritten: list[str] = []

    def apply(txn: Transaction) -> None:
        existing = [p for p in files if (node := txn.get(p)) is not None and not node.is_dir]
        if existing and not overwrite:
            shown = ", ".join(sorted(existing)[:_SHOWN_PROBLEMS])
            more = f" and {len(existing) - _SHOWN_PROBLEMS} more" if len(existing) > _SHOWN_PROBLEMS else ""
            raise PathExistsError(
                f"Error: Nothing was imported: {len(existing)} file(s) already exist in the store ({shown}{more}). "
                "Use overwrite (--overwrite) to replace them."
            )
        overwritten.extend(sorted(existing))
        for d in scan.directories:
            txn.make_dirs(d)
        for done, (path_text, (data, binary, _source)) in enumerate(sorted(files.items()), start=1):
            txn.write_file(parse_path(path_text, store.settings), data, binary=binary)
            if progress is not None:
                progress(done, len(files))

    done = store.transact(
        apply, command="import", paths=(prefix_path.text,), actor=actor, session=session, findings=findings
    )
    return ImportResult(
        commit_id=done.commit_id.decode(),
        seq=done.seq,
        layout=layout,
        imported=tuple(sorted(files)),
        directories=tuple(sorted(d.text for d in scan.directories)),
        overwritten=tuple(overwritten),
        hidden=tuple(sorted(scan.hidden)),
        skipped=tuple(scan.skipped + scan.problems),
    )


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
        fd = os.open(target, _O_DIR)
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


def _layout(store: MemoryStore, state: StoreState) -> dict[tuple[str, ...], list[tuple[str, Node]]]:
    """``directory parts -> [(name, node)]`` of a state, every path re-validated."""
    children: dict[tuple[str, ...], list[tuple[str, Node]]] = {(): []}
    for path, node in sorted(state.nodes.items()):
        if node.redacted:
            continue  # erased: no name, no content; exports leave it out
        try:
            vpath = parse_path(path, store.settings)
        except InvalidPathError:
            raise IntegrityError("The store holds a path that is not valid; nothing more was exported.") from None
        if vpath.text != path or vpath.is_root or node.path != path:
            raise IntegrityError("The store holds a path that is not valid; nothing more was exported.")
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
                sub = os.open(name, _O_DIR, dir_fd=dir_fd)
            else:
                data = store.read_node(node)
                sub = os.open(name, _O_NEW_FILE, FILE_MODE, dir_fd=dir_fd)
        except OSError as err:
            raise _os_error(err, shown) from None
        with _opened(sub):
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
    with _opened(_open_target(Path(target))) as fd:
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
        fd = os.open(entry.name, _O_DIR if is_dir else _O_READ, dir_fd=dir_fd)
        with _opened(fd):
            os.fchmod(fd, DIR_MODE if is_dir else FILE_MODE)
            if is_dir:
                _chmod_tree(fd)


#: The configuration of the exported repository: a plain bare repository (the store's own git
#: settings, such as fsync and uncompressed objects, are not carried over).
_GIT_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"


def _write_git_config(root_fd: int) -> None:
    fd = os.open("config", os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | _O_CLOEXEC, dir_fd=root_fd)
    with _opened(fd):
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
        with _opened(os.open(target_path, _O_DIR)) as root_fd:
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
