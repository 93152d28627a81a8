"""Import a plain directory of memory files into a store, as one commit.

:func:`import_dir` reads a ``BetaLocalFilesystemMemoryTool`` base folder, a folder that *is* the
memories root, or a Claude Code ``memory/`` folder. Every path goes through
:func:`memvault.paths.parse_path`, the same validator the memory tool uses, and every text through
the store's scrubber; symbolic links are never followed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import (
    ExitStatus,
    InvalidInputError,
    InvalidPathError,
    LimitExceededError,
    MemvaultError,
    PathExistsError,
    SensitiveDataError,
)
from ..fsutil import O_DIR, O_READ, opened
from ..paths import ROOT, MemoryPath, display, parse_path
from ..protocol.commands import IMAGE_SUFFIXES
from ..scrub import guard
from ..store import MemoryStore, Transaction

__all__ = [
    "Scrubber",
    "SkippedEntry",
    "ImportResult",
    "ImportRefusedError",
    "import_dir",
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
#: The first bytes every PNG and JPEG file starts with: a file named as an image must be one, so
#: text cannot pass the scrubber by a name.
_IMAGE_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")
#: Temporary files ``BetaLocalFilesystemMemoryTool`` leaves behind if it dies mid-write.
_SDK_TEMP_RE = re.compile(r"\A\.tmp-\d+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
#: How many problems an error message lists before "and N more".
_SHOWN_PROBLEMS = 10


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
    #: images stored without passing the scrubber (it reads text only; it cannot see into pixels)
    unscanned: tuple[str, ...] = ()
    #: what the store's scrubber masked in each imported file: ``{path: {kind: count}}`` (files with
    #: findings only; kinds and counts, never values). Empty when a ``scrub`` hook was given.
    findings: dict[str, dict[str, int]] = field(default_factory=dict)

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
            "unscanned": list(self.unscanned),
            "findings": {path: dict(sorted(kinds.items())) for path, kinds in sorted(self.findings.items())},
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
    def __init__(
        self, store: MemoryStore, prefix: MemoryPath, scrub: Scrubber | None, counts: dict[str, int] | None = None
    ) -> None:
        self.store = store
        self.settings = store.settings
        self.prefix = prefix
        self.scrub = scrub
        #: with the store's own scrubber: what it masked, per file (``counts`` is what the last text
        #: scrubbed added to, read and cleared after each file)
        self.counts = counts
        self.findings: dict[str, dict[str, int]] = {}
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
                    sub = os.open(name, O_DIR, dir_fd=dir_fd)
                except OSError:
                    self.scan.skipped.append(SkippedEntry(source, "changed while importing (not a directory now)"))
                    continue
                with opened(sub):
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
            fd = os.open(name, O_READ, dir_fd=dir_fd)
        except OSError:
            self.scan.skipped.append(SkippedEntry(source, "changed while importing (not a regular file now)"))
            return
        with opened(fd):
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
        if binary and not data.startswith(_IMAGE_SIGNATURES):
            self.scan.problems.append(SkippedEntry(source, "it is named as an image but is not a PNG or JPEG file"))
            return
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
                finally:
                    masked = dict(self.counts or {})
                    if self.counts:
                        self.counts.clear()
                if masked:
                    self.findings[vpath.text] = masked
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
        fd = os.open(source, O_DIR)
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
                sub = os.open("memories", O_DIR, dir_fd=fd)
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
    - Images (``.png``, ``.jpg``, ``.jpeg`` files that start with a PNG or JPEG signature; one
      that does not is a *problem*) are stored as binary files without passing the scrubber, and
      listed in :attr:`ImportResult.unscanned`; everything else as UTF-8 text.
    - More files than the store may hold raises :class:`~memvault.errors.LimitExceededError`.
    - A file that exists in the store refuses the import (:class:`~memvault.errors.PathExistsError`
      naming them) unless ``overwrite`` is true; a directory in the way of a file always refuses.
    - ``scrub`` is the hook for the scrubber (see :data:`Scrubber`): it is called with
      ``("path", path)`` for every path and ``("file_text", text)`` for every text file, before
      anything is written, and its result is what gets validated and stored. It is not applied to
      binary files. It may raise (for example ``SensitiveDataError``) to refuse the import.
      Without a hook the store's own scrubber runs, and :attr:`ImportResult.findings` says what it
      masked in each file (kinds and counts).

    The source is read before the store lock is taken; the commit records ``paths=(prefix,)``
    and per-file changes are in the log. An empty source writes no commit (``commit_id`` None).
    """
    prefix_path = parse_path(prefix, store.settings)
    root_fd, layout = _source_root(Path(source))
    counts: dict[str, int] | None = None
    if scrub is None:  # the store's own scrubber, as for the memory tool
        counts = {}
        scrub = guard.hook(store, counts)
    importer = _Importer(store, prefix_path, scrub, counts)
    with opened(root_fd):
        importer.walk(root_fd, ())
    scan = importer.scan
    if scan.problems and not skip_invalid:
        raise ImportRefusedError(tuple(scan.problems))
    files = scan.files
    file_findings = {path: kinds for path, kinds in importer.findings.items() if path in files}
    findings: dict[str, int] = {}  # the commit records the totals
    for kinds in file_findings.values():
        for kind, n in kinds.items():
            findings[kind] = findings.get(kind, 0) + n
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
        unscanned=tuple(sorted(p for p, (_data, binary, _source) in files.items() if binary)),
        findings=file_findings,
    )
