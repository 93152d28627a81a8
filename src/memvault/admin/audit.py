"""A linter for a store's memory (``memvault audit``), centred on the index a session starts with.

:func:`audit` reads the head (one snapshot, no commit, no recorded read) and reports typed
:class:`Finding` objects, in this order of kinds:

- ``index-missing``: no index file (or a directory at its path); the link checks are skipped and
  every file is an orphan.
- ``index-over-window``: the index is longer than what a session loads of it (200 lines, at most
  25,000 bytes: :func:`memvault.protocol.context.index_head`), and one ``outside-window`` per index entry (a
  line with a memory link) that lies, wholly or partly, past that head.
- ``dangling-link``: an index link to nothing (one finding per target, with its lines). Links are
  Markdown links ``[text](target)`` (relative targets resolve against the index's directory;
  URLs with a scheme and ``#anchors`` are ignored, ``?query``/``#fragment`` parts dropped) and bare
  paths starting with ``/memories/`` elsewhere on a line (ending at white space, one of
  ``:*?"<>|()[]{}`',;`` or a trailing ``.``/``!``).
- ``orphan``: a file no index entry reaches (a link to a directory reaches every file below it);
  the index itself never is one.
- ``stale``: a file neither read nor written for ``stale_after`` seconds (the rule of
  :func:`memvault.erasure.expiry.stale_files`); when the access-time file is missing, damaged or not the
  one recorded last, reads are unknown and only the last write counts (a ``reads-unknown`` note).
- ``near-size-limit``: a file over 90 % of the store's ``max_file_bytes``.
- ``duplicate``: files with the same non-empty content, one finding per group (the first path;
  the detail lists them all); ``near-duplicate``: pairs of different text files under 64 KiB at
  least 90 % similar (:class:`difflib.SequenceMatcher`), compared only when there are at most 200
  such files (otherwise a ``near-duplicate-skipped`` note).
- ``scrubber-findings``: a file whose path a commit with scrubber findings named (the commit
  metadata's ``paths`` and ``findings``; exact path, renames not followed).

Redacted files (name and content gone) are left out (a ``redacted-skipped`` note).
"""

from __future__ import annotations

import difflib
import posixpath
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

from ..erasure.expiry import stale_files
from ..errors import IntegrityError, InvalidInputError, InvalidPathError, RedactedError
from ..history import walk
from ..paths import MemoryPath, display, parse_path
from ..protocol.context import INDEX_MAX_BYTES, INDEX_MAX_LINES, INDEX_PATH, index_head
from ..store import Transaction

if TYPE_CHECKING:
    from ..format.records import Node
    from ..settings import StoreSettings
    from ..store import AnyBranch

__all__ = ["KINDS", "Finding", "AuditReport", "IndexLink", "audit", "index_links"]

#: Every finding kind, in report order.
KINDS: Final = (
    "index-missing",
    "index-over-window",
    "outside-window",
    "dangling-link",
    "orphan",
    "stale",
    "near-size-limit",
    "duplicate",
    "near-duplicate",
    "scrubber-findings",
)
DEFAULT_STALE_AFTER: Final = 90 * 86400.0
#: A file over this fraction of ``max_file_bytes`` is near the limit.
NEAR_LIMIT: Final = 0.9
#: Near-duplicates: similarity at least this, files under this size, at most this many compared.
SIMILAR: Final = 0.9
SIMILAR_MAX_BYTES: Final = 64 * 1024
SIMILAR_MAX_FILES: Final = 200
#: Commits listed in a ``scrubber-findings`` detail.
_SHOWN_COMMITS: Final = 5

_MD_LINK: Final = re.compile(r"!?\[[^\]\n]*\]\(\s*(<[^<>\n]*>|[^\s()]*)(?:\s+[^)\n]*)?\)")
_BARE: Final = re.compile(r"(?<![\w.~/-])/memories/[^\s:*?\"<>|()\[\]{}`',;]+")
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: its ``kind`` (one of :data:`KINDS`), the memory ``path`` it is about and a
    ``detail`` for a person."""

    kind: str
    path: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "detail": self.detail}


@dataclass(frozen=True)
class AuditReport:
    """What :func:`audit` found: ``findings`` in :data:`KINDS` order, and ``notes`` on what it
    could not check (each ``code: message``)."""

    index: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: int = 0  #: files checked (redacted ones not counted)

    @property
    def ok(self) -> bool:
        """True when there is no finding (notes do not count)."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "index": self.index,
            "findings": [f.to_json() for f in self.findings],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class IndexLink:
    """One memory link of an index."""

    line: int  #: 1-based line of the index
    target: str  #: the link as written
    path: MemoryPath | None  #: where it resolves, or None when that is not a memory path
    reason: str = ""  #: why it is not one


def index_links(text: str, index: str = INDEX_PATH, settings: StoreSettings | None = None) -> list[IndexLink]:
    """The memory links of an index, in order (see the module docstring for what counts); paths
    are checked against ``settings`` (default: the default settings)."""
    base = posixpath.dirname(index) or "/"
    out: list[IndexLink] = []
    for number, line in enumerate(text.split("\n"), 1):
        rest = line
        for m in _MD_LINK.finditer(line):
            link = _md_target(m.group(1), base, number, settings)
            if link is not None:
                out.append(link)
            rest = rest[: m.start()] + " " * (m.end() - m.start()) + rest[m.end() :]
        for m in _BARE.finditer(rest):
            raw = m.group(0).rstrip(".!")
            if raw != "/memories/":
                out.append(_resolve(raw, raw, number, settings))
    return out


def _md_target(raw: str, base: str, line: int, settings: StoreSettings | None) -> IndexLink | None:
    target = raw[1:-1].strip() if raw.startswith("<") else raw
    if not target or target.startswith(("#", "//")) or _SCHEME.match(target):
        return None
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not path:
        return None
    return _resolve(target, path if path.startswith("/") else posixpath.join(base, path), line, settings)


def _resolve(target: str, path: str, line: int, settings: StoreSettings | None) -> IndexLink:
    try:
        return IndexLink(line, target, parse_path(posixpath.normpath(path), settings))
    except InvalidPathError as err:
        reason = str(err).rsplit(": ", 1)[-1]
        return IndexLink(line, target, None, reason)


def audit(
    store: AnyBranch,
    *,
    index: str = INDEX_PATH,
    stale_after: float = DEFAULT_STALE_AFTER,
    now: float | None = None,
    at: bytes | None = None,
) -> AuditReport:
    """Lint the memory at the head of ``store`` (read-only: no commit, no recorded read).

    Args:
        index: the index file (default ``/memories/MEMORY.md``).
        stale_after: seconds without a read or write after which a file is stale (default 90 days).
        now: the time to judge staleness at (default: now).
        at: lint this commit instead of the head.

    Raises:
        InvalidPathError: ``index`` is not a memory path.
        InvalidInputError: ``stale_after`` is not positive.
        IntegrityError, StorageError, ...: as any read of the store.
    """
    if not stale_after > 0:
        raise InvalidInputError("The stale-after duration must be positive.")
    index_path = parse_path(index, store.settings)
    now = time.time() if now is None else now
    snap = store.snapshot() if at is None else Transaction(store, store.state_at(at))
    notes: list[str] = []
    files: dict[str, Node] = {}
    redacted = 0
    for node in _file_nodes(snap):
        if node.redacted:
            redacted += 1
        else:
            files[node.path] = node
    if redacted:
        notes.append(f"redacted-skipped: {redacted} redacted file(s) (name and content gone) not checked")

    findings: list[Finding] = []
    reached: set[str] = set()
    index_node = snap.get(index_path)
    if index_node is None or index_node.is_dir or index_node.redacted:
        what = "is a directory" if index_node is not None and index_node.is_dir else "does not exist"
        findings.append(Finding("index-missing", index_path.text, f"the index {what}; link checks skipped"))
    else:
        reached.add(index_path.text)
        findings += _check_index(store, snap, index_node, index_path, reached)
    for path in sorted(files):
        if path not in reached:
            findings.append(Finding("orphan", path, "no index entry links to it or to a directory above it"))
    findings += _stale(store, snap, files, stale_after, now, notes)
    findings += _near_limit(store, files)
    findings += _duplicates(store, files, notes)
    findings += _scrubbed(store, snap.base_commit, files)
    return AuditReport(index_path.text, findings, notes, len(files))


def _file_nodes(snap: Transaction) -> Iterator[Node]:
    for path in snap.descendants(parse_path("/memories", snap.settings)):
        node = snap.get(path)
        if node is not None and not node.is_dir:
            yield node


def _check_index(
    store: AnyBranch, snap: Transaction, node: Node, index_path: MemoryPath, reached: set[str]
) -> list[Finding]:
    """Window, outside-window and dangling-link findings; adds the files the links reach."""
    data = store.read_node(node)
    text = data.decode("utf-8", errors="replace")
    links = index_links(text, index_path.text, store.settings)
    out: list[Finding] = []
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    if lines > INDEX_MAX_LINES or len(data) > INDEX_MAX_BYTES:
        head = index_head(data)
        head_lines = head.count("\n") + (1 if head and not head.endswith("\n") else 0)
        out.append(
            Finding(
                "index-over-window",
                index_path.text,
                f"{lines} lines, {len(data):,} bytes: a session loads only the first {head_lines} lines "
                f"(at most {INDEX_MAX_LINES} lines within {INDEX_MAX_BYTES:,} bytes)",
            )
        )
        ends, offset = [], 0
        for line in text.split("\n"):
            offset += len(line)
            ends.append(offset)  # where the line's text ends (its newline is not needed)
            offset += 1
        by_line: dict[int, list[str]] = {}
        for link in links:
            by_line.setdefault(link.line, []).append(link.path.text if link.path is not None else display(link.target))
        for number, targets in sorted(by_line.items()):
            if ends[number - 1] > len(head):
                shown = ", ".join(dict.fromkeys(targets))
                out.append(Finding("outside-window", index_path.text, f"line {number} ({shown}) is not loaded"))
    dangling: dict[str, list[str]] = {}
    for link in links:
        if link.path is not None and link.path.is_root:  # a link to /memories itself reaches everything
            reached.update(p.text for p in snap.descendants(link.path))
            continue
        target = snap.get(link.path) if link.path is not None else None
        if target is None:
            key = link.path.text if link.path is not None else display(link.target)
            why = "" if link.path is not None else f" (not a memory path: {link.reason})"
            dangling.setdefault(key, []).append(f"{link.line}{why}")
        elif target.is_dir:
            reached.update(p.text for p in snap.descendants(parse_path(target.path, snap.settings)))
        else:
            reached.add(target.path)
    for key in sorted(dangling):
        where = ", ".join(dict.fromkeys(dangling[key]))
        out.append(Finding("dangling-link", key, f"linked from {index_path.text} line {where}: no such file"))
    return out


def _stale(
    store: AnyBranch, snap: Transaction, files: dict[str, Node], stale_after: float, now: float, notes: list[str]
) -> list[Finding]:
    last_read, unknown = _reads(store)
    if unknown:
        notes.append(f"reads-unknown: {unknown}, so reads are unknown: stale is judged by the last write only")
    out = []
    for f in sorted(stale_files(snap, last_read, now - stale_after), key=lambda f: f.path):
        if f.path not in files:  # redacted
            continue
        read = "unknown" if unknown else ("never" if f.last_read is None else _day(f.last_read))
        days = int((now - f.last_use) // 86400)
        out.append(Finding("stale", f.path, f"unused for {days} days: written {_day(f.last_write)}, read {read}"))
    return out


def _reads(store: AnyBranch) -> tuple[dict[bytes, float], str]:
    """``(token -> last read, "")``, or ``({}, why reads are unknown)``."""
    times = store.access_times
    try:
        return times.last_read(only=store.is_recorded_access_file), ""
    except IntegrityError:
        pass
    if not times.recorded():
        return {}, "the store's access-time file is missing"
    try:
        times.last_read()
    except IntegrityError:
        return {}, "the store's access-time file is damaged"
    return {}, "the store's access-time file is not the one the keyring recorded last"


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _near_limit(store: AnyBranch, files: dict[str, Node]) -> list[Finding]:
    limit = store.settings.max_file_bytes
    out = []
    for path, node in sorted(files.items()):
        if node.size > NEAR_LIMIT * limit:
            pct = int(100 * node.size / limit)
            detail = f"{node.size:,} bytes, {pct}% of the {limit:,}-byte limit (max_file_bytes)"
            out.append(Finding("near-size-limit", path, detail))
    return out


def _duplicates(store: AnyBranch, files: dict[str, Node], notes: list[str]) -> list[Finding]:
    groups: dict[bytes, list[str]] = {}
    for path, node in sorted(files.items()):
        if node.size:
            groups.setdefault(node.sha256, []).append(path)
    out = [
        Finding("duplicate", paths[0], f"{len(paths)} files with the same content: {', '.join(paths)}")
        for paths in sorted(groups.values())
        if len(paths) > 1
    ]
    small = [(p, n) for p, n in sorted(files.items()) if 0 < n.size < SIMILAR_MAX_BYTES and not n.binary]
    if len(small) > SIMILAR_MAX_FILES:
        notes.append(
            f"near-duplicate-skipped: {len(small)} text files under {SIMILAR_MAX_BYTES // 1024} KiB, more than "
            f"the {SIMILAR_MAX_FILES} compared pairwise; near-duplicates not checked"
        )
        return out
    texts: list[tuple[str, bytes, str]] = []
    for path, node in small:
        try:
            texts.append((path, node.sha256, store.read_node(node).decode("utf-8", errors="replace")))
        except RedactedError:  # its key went after the snapshot was taken
            continue
    pairs: list[tuple[str, str, float]] = []
    matcher = difflib.SequenceMatcher(None)
    for j, (path_b, sha_b, text_b) in enumerate(texts):
        matcher.set_seq2(text_b)
        for path_a, sha_a, text_a in texts[:j]:
            if sha_a == sha_b:
                continue  # a duplicate, reported above
            matcher.set_seq1(text_a)
            if matcher.real_quick_ratio() < SIMILAR or matcher.quick_ratio() < SIMILAR:
                continue
            ratio = matcher.ratio()
            if ratio >= SIMILAR:
                pairs.append((path_a, path_b, ratio))
    for path_a, path_b, ratio in sorted(pairs):
        out.append(Finding("near-duplicate", path_a, f"{int(ratio * 100)}% similar to {path_b}"))
    return out


def _scrubbed(store: AnyBranch, head: bytes, files: dict[str, Node]) -> list[Finding]:
    hits: dict[str, list[str]] = {}
    for _commit, meta, _tree, _parent in walk(store, head):
        if not meta.findings:
            continue
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(meta.findings.items()))
        for path in dict.fromkeys(meta.paths):
            if path in files:
                hits.setdefault(path, []).append(f"#{meta.seq} ({meta.command}: {kinds})")
    out = []
    for path in sorted(hits):
        commits = hits[path]  # newest first
        shown = "; ".join(commits[:_SHOWN_COMMITS]) + (
            f"; and {len(commits) - _SHOWN_COMMITS} more" if len(commits) > _SHOWN_COMMITS else ""
        )
        n = len(commits)
        out.append(Finding("scrubber-findings", path, f"{n} commit{'s' if n != 1 else ''} with findings: {shown}"))
    return out
