"""Reading the history of a store: revisions, log with filters, files and trees at a revision,
diff and blame. Typed results, never printed here.

Every commit used has been authenticated (HMAC chain tag) and its metadata decrypted; what a
commit changed is computed by comparing the encrypted index shards of the commit and its parent
(only shards whose blob id differs are opened), so walking history does not decrypt every file.

Revisions (:func:`resolve`: ``HEAD~2``, ``#12``, ``3f2a9c``, ``@{2026-11-01 14:30}``) and ranges
``A..B`` (:func:`split_range`) are :mod:`memvault.store.revisions`' grammar, the read API's too;
this module re-exports them. ``iter_log(start=B, exclude=A)`` walks a range.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any, Literal

from .errors import IntegrityError, InvalidInputError, InvalidPathError, PathNotFoundError
from .format.records import CommitMeta, Node
from .paths import ROOT, parse_path
from .store import AnyBranch, StoreState
from .store.revisions import ancestors, looks_like_revision, parse_time, resolve, split_range

__all__ = [
    "Operation",
    "Change",
    "CommitInfo",
    "TreeEntry",
    "FileDiff",
    "BlameLine",
    "resolve",
    "split_range",
    "looks_like_revision",
    "iter_log",
    "log",
    "LogPage",
    "log_page",
    "commit_diff",
    "attribute_lines",
    "changes",
    "tree_at",
    "read_at",
    "diff",
    "format_diff",
    "blame",
    "parse_time",
    "walk",
    "shard_diff",
]

Operation = Literal["created", "modified", "deleted", "renamed"]
OPERATIONS: tuple[Operation, ...] = ("created", "modified", "deleted", "renamed")
_META_FIELDS = tuple(f.name for f in fields(CommitMeta))


@dataclass(frozen=True)
class Change:
    """One node a commit created, modified, deleted or renamed (``old_path`` for renames)."""

    op: Operation
    path: str
    kind: Literal["file", "dir"]
    old_path: str | None = None
    #: For a redacted version: ``{"time", "actor", "reason"}`` of the redaction (its path is a
    #: placeholder: the real one went with the key).
    redacted: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "path": self.path, "kind": self.kind}
        if self.old_path is not None:
            out["old_path"] = self.old_path
        if self.redacted is not None:
            out["redacted"] = self.redacted
        return out


@dataclass(frozen=True, slots=True)
class CommitInfo(CommitMeta):
    """One authenticated commit: its git id (hex), its decrypted metadata and what it changed."""

    commit_id: str = ""
    changes: tuple[Change, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit_id,
            **CommitMeta.to_json(self),
            "changes": [c.to_json() for c in self.changes],
        }


@dataclass(frozen=True)
class TreeEntry:
    """A file or directory of the tree at some revision."""

    path: str
    kind: Literal["file", "dir"]
    size: int
    sha256: str
    version: int
    mtime: float

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "size": self.size,
            "sha256": self.sha256,
            "version": self.version,
            "mtime": self.mtime,
        }


@dataclass(frozen=True)
class FileDiff:
    """How one file differs between two revisions (``None`` content: absent on that side)."""

    path: str
    old_path: str | None
    old: bytes | None
    new: bytes | None

    @property
    def status(self) -> Operation:
        if self.old is None:
            return "created"
        if self.new is None:
            return "deleted"
        if self.old_path is not None and self.old_path != self.path:
            return "renamed"
        return "modified"

    @property
    def binary(self) -> bool:
        """Whether either side is not UTF-8 text (no line diff then)."""
        try:
            (self.old or b"").decode("utf-8")
            (self.new or b"").decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    def line_counts(self) -> tuple[int, int] | None:
        """``(added, removed)`` lines, or ``None`` for a binary file."""
        if self.binary:
            return None
        old_lines = (self.old or b"").decode("utf-8").splitlines()
        new_lines = (self.new or b"").decode("utf-8").splitlines()
        added = removed = 0
        matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                removed += i2 - i1
                added += j2 - j1
        return added, removed

    def to_json(self) -> dict[str, Any]:
        """Status, line counts and the unified diff text (never raw content)."""
        counts = self.line_counts()
        return {
            "path": self.path,
            "old_path": self.old_path,
            "status": self.status,
            "binary": counts is None,
            "added": counts[0] if counts is not None else None,
            "removed": counts[1] if counts is not None else None,
            "patch": format_diff([self]),
        }


@dataclass(frozen=True)
class BlameLine:
    """One line of a file and the commit that last changed it."""

    line: int
    text: str
    commit_id: str
    seq: int
    time: float
    actor: str

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "text": self.text,
            "commit": self.commit_id,
            "seq": self.seq,
            "time": self.time,
            "actor": self.actor,
        }


# -- revisions (memvault.store.revisions) ---------------------------------------------------------


def walk(store: AnyBranch, start: bytes | None = None) -> Iterator[tuple[bytes, CommitMeta, bytes, bytes | None]]:
    """``(commit_id, meta, tree_id, parent_id)`` from ``start`` (default head) back to the first."""
    return ancestors(store, start)


# -- what a commit changed ------------------------------------------------------------------------


def shard_diff(
    store: AnyBranch, tree_id: bytes, parent_tree: bytes | None
) -> tuple[list[Node], list[Node], list[Node]]:
    """Nodes created, deleted and modified between ``parent_tree`` and ``tree_id``."""
    created: list[Node] = []
    deleted: list[Node] = []
    modified: list[Node] = []
    for before, node in _node_pairs(store, tree_id, parent_tree):
        if node is None:
            deleted.extend((before,) if before is not None else ())
        elif before is None:
            created.append(node)
        else:
            modified.append(node)
    return created, deleted, modified


def _node_pairs(store: AnyBranch, tree_id: bytes, parent_tree: bytes | None) -> list[tuple[Node | None, Node | None]]:
    """``(node in parent_tree, node in tree_id)`` of each token that differs (None: absent)."""
    new_blobs = store.index_blobs(tree_id)
    old_blobs = store.index_blobs(parent_tree) if parent_tree is not None else {}
    out: list[tuple[Node | None, Node | None]] = []
    for shard in sorted(set(new_blobs) | set(old_blobs)):
        if new_blobs.get(shard) == old_blobs.get(shard):
            continue
        new = store.shard_nodes(shard, new_blobs[shard]) if shard in new_blobs else {}
        old = store.shard_nodes(shard, old_blobs[shard]) if shard in old_blobs else {}
        for token, node in new.items():
            before = old.get(token)
            if before is None or (before.version, before.dek_id) != (node.version, node.dek_id):
                out.append((before, node))
        out.extend((node, None) for token, node in old.items() if token not in new)
    return out


def _changes(store: AnyBranch, meta: CommitMeta, tree_id: bytes, parent: bytes | None) -> tuple[Change, ...]:
    parent_tree = store.commit(parent)[1] if parent is not None else None
    created, deleted, modified = shard_diff(store, tree_id, parent_tree)
    out: list[Change] = []
    renamed_from: dict[str, str] = {}
    if meta.command == "rename" and len(meta.paths) == 2:
        old_root, new_root = meta.paths
        for node in created:
            if node.path == new_root or node.path.startswith(new_root + "/"):
                renamed_from[node.path] = old_root + node.path[len(new_root) :]
    gone = {n.path for n in deleted}

    def tomb(node: Node) -> dict[str, Any] | None:
        return (store.keyring.tombstone(node.dek_id) or {}) if node.redacted else None

    for node in created:
        source = renamed_from.get(node.path)
        if source is not None and source in gone:
            out.append(Change("renamed", node.path, node.kind, source, tomb(node)))
        else:
            out.append(Change("created", node.path, node.kind, None, tomb(node)))
    moved = {c.old_path for c in out if c.op == "renamed"}
    out.extend(Change("deleted", n.path, n.kind, None, tomb(n)) for n in deleted if n.path not in moved)
    out.extend(Change("modified", n.path, n.kind, None, tomb(n)) for n in modified)
    return tuple(sorted(out, key=lambda c: (c.path, c.op)))


def changes(store: AnyBranch, rev: str | bytes = "HEAD") -> tuple[Change, ...]:
    """What the commit ``rev`` changed, node by node."""
    commit_id = rev if isinstance(rev, bytes) else resolve(store, rev)
    meta, tree_id, parent = store.commit(commit_id)
    return _changes(store, meta, tree_id, parent)


def _under(path: str, root: str) -> bool:
    return root == ROOT or path == root or path.startswith(root + "/")


def iter_log(
    store: AnyBranch,
    *,
    start: str | bytes = "HEAD",
    path: str | None = None,
    follow: bool = True,
    actor: str | None = None,
    session: str | None = None,
    command: str | None = None,
    operations: Iterable[str] | None = None,
    since: float | None = None,
    until: float | None = None,
    exclude: str | bytes | None = None,
) -> Iterator[CommitInfo]:
    """Commits newest first, with what each changed, filtered.

    With ``exclude`` (a revision), the commits reachable from it are left out: ``start=B,
    exclude=A`` is the range ``A..B``, empty when B is A or one of its ancestors.

    ``path`` keeps commits that changed that file or anything below that directory; with
    ``follow`` the path is followed back across renames. ``actor``, ``session`` and ``command``
    keep commits whose metadata says exactly that. ``operations`` keeps commits with a change
    of one of those kinds (created, modified, deleted, renamed). ``since``/``until`` are
    seconds since the epoch (inclusive).
    """
    for _commit_id, info, _tracked in _scan(store, start, path, follow, actor, session, command, operations,
                                            since, until, exclude):  # fmt: skip
        if info is not None:
            yield info


def _scan(
    store: AnyBranch, start: str | bytes, path: str | None, follow: bool, actor: str | None, session: str | None,
    command: str | None, operations: Iterable[str] | None, since: float | None, until: float | None,
    exclude: str | bytes | None,
) -> Iterator[tuple[bytes, CommitInfo | None, str | None]]:  # fmt: skip
    """Every commit :func:`iter_log` walks: its id, its :class:`CommitInfo` if it matches (else
    None), and the path followed so far (for a walk continued from the next commit)."""
    ops = set(operations) if operations is not None else None
    if ops is not None and not ops <= set(OPERATIONS):
        raise InvalidInputError(f"Error: Unknown operation; use one of {', '.join(OPERATIONS)}.")
    tracked = parse_path(path).text if path is not None else None
    start_id = start if isinstance(start, bytes) else resolve(store, start)
    # One linear history: the commits reachable from ``exclude`` are it and those with lower numbers.
    stop = None
    if exclude is not None:
        stop = store.commit(exclude if isinstance(exclude, bytes) else resolve(store, exclude))[0].seq
    for commit_id, meta, tree_id, parent in walk(store, start_id):
        if stop is not None and meta.seq <= stop:
            break
        if (
            (until is not None and meta.time > until)
            or (since is not None and meta.time < since)  # no "break": a clock set back makes times non-monotonic
            or (actor is not None and meta.actor != actor)
            or (session is not None and meta.session != session)
            or (command is not None and meta.command != command)
        ):
            yield commit_id, None, tracked
            continue
        need_changes = tracked is not None or ops is not None
        commit_changes = _changes(store, meta, tree_id, parent) if need_changes else ()
        if tracked is not None:
            touched = [
                c for c in commit_changes if _under(c.path, tracked) or (c.old_path and _under(c.old_path, tracked))
            ]
            if not touched:
                yield commit_id, None, tracked
                continue
            if follow:
                for c in touched:
                    if c.op == "renamed" and c.old_path is not None and c.path == tracked:
                        tracked = c.old_path
                        break
        if ops is not None and not any(c.op in ops for c in commit_changes):
            yield commit_id, None, tracked
            continue
        if not need_changes:
            commit_changes = _changes(store, meta, tree_id, parent)
        fields_ = {f: getattr(meta, f) for f in _META_FIELDS}
        yield commit_id, CommitInfo(**fields_, commit_id=commit_id.decode(), changes=commit_changes), tracked


def log(store: AnyBranch, *, limit: int | None = None, offset: int = 0, **filters: Any) -> list[CommitInfo]:
    """A page of :func:`iter_log`: skip ``offset`` matching commits, then at most ``limit``."""
    out: list[CommitInfo] = []
    for i, info in enumerate(iter_log(store, **filters)):
        if i < offset:
            continue
        if limit is not None and len(out) >= limit:
            break
        out.append(info)
    return out


@dataclass(frozen=True)
class LogPage:
    """One page of :func:`log_page`: the matching ``commits``; where the next page starts
    (``next_start``: the hex id of the next commit to look at, None when the history is
    exhausted) and the path followed there (``next_path``); how many commits were looked at."""

    commits: list[CommitInfo]
    next_start: str | None
    next_path: str | None
    scanned: int


def log_page(
    store: AnyBranch, *, start: str | bytes = "HEAD", limit: int = 50, scan: int | None = None,
    path: str | None = None, **filters: Any,
) -> LogPage:  # fmt: skip
    """At most ``limit`` commits of :func:`iter_log` (same filters) from ``start``, looking at no
    more than ``scan`` commits (None: no bound), so a page over a long history costs the same
    wherever it starts: a page is continued with ``start=next_start, path=next_path``, never by
    walking again from the head to an offset. A rare filter can fill a page only partly (or not
    at all) before ``scan`` commits: ``next_start`` then says where to look on.
    """
    out: list[CommitInfo] = []
    scanned = 0
    tracked = parse_path(path).text if path is not None else None
    follow = filters.pop("follow", True)
    keys = ("actor", "session", "command", "operations", "since", "until", "exclude")
    unknown = set(filters) - set(keys)
    if unknown:
        raise TypeError(f"log_page() got unexpected filters: {', '.join(sorted(unknown))}")
    args = [filters.get(k) for k in keys]
    for commit_id, info, followed in _scan(store, start, tracked, follow, *args):
        if len(out) >= limit or (scan is not None and scanned >= scan):
            return LogPage(out, commit_id.decode(), tracked, scanned)
        scanned += 1
        tracked = followed
        if info is not None:
            out.append(info)
    return LogPage(out, None, tracked, scanned)


# -- trees and files at a revision ----------------------------------------------------------------


def _state(store: AnyBranch, rev: str | bytes) -> StoreState:
    return store.state_at(rev if isinstance(rev, bytes) else resolve(store, rev))


def tree_at(store: AnyBranch, rev: str | bytes = "HEAD", path: str = ROOT) -> list[TreeEntry]:
    """Every file and directory at ``rev`` (below ``path``), sorted by path."""
    root = parse_path(path).text
    state = _state(store, rev)
    if root != ROOT and root not in state.nodes:
        raise PathNotFoundError(f"Error: The path {root} does not exist at that revision.")
    return [
        TreeEntry(n.path, n.kind, n.size, n.sha256.hex(), n.version, n.mtime)
        for p, n in sorted(state.nodes.items())
        if _under(p, root)
    ]


def read_at(store: AnyBranch, path: str, rev: str | bytes = "HEAD") -> bytes:
    """The content of the file ``path`` at ``rev``."""
    vpath = parse_path(path).text
    state = _state(store, rev)
    node = state.nodes.get(vpath)
    if node is None:
        # A redacted version keeps only its opaque token, which the path still determines.
        token = store.token(vpath)
        node = next((n for n in state.nodes.values() if n.redacted and n.token == token), None)
    if vpath == ROOT or (node is not None and node.is_dir):
        raise InvalidPathError(f"Error: {vpath} is a directory, not a file.")
    if node is None:
        raise PathNotFoundError(f"Error: The file {vpath} does not exist at that revision.")
    return store.read_node(node)


# -- diff -------------------------------------------------------------------------------------------


def diff(
    store: AnyBranch, old: str | bytes | None, new: str | bytes = "HEAD", path: str | None = None
) -> list[FileDiff]:
    """Files that differ between two revisions (whole store, or below ``path``), sorted by path.

    ``old=None`` compares with an empty store (what the first commit added). A file moved by a
    rename between the two revisions is paired with its old path when its content is unchanged
    or when the lineage (file id) matches.
    """
    root = parse_path(path).text if path is not None else ROOT
    a_nodes = _state(store, old).nodes if old is not None else {}
    b = _state(store, new)
    a_files = {p: n for p, n in a_nodes.items() if not n.is_dir and not n.redacted and _under(p, root)}
    b_files = {p: n for p, n in b.nodes.items() if not n.is_dir and not n.redacted and _under(p, root)}
    return _pair(store, a_files, b_files)


def commit_diff(store: AnyBranch, rev: str | bytes = "HEAD", path: str | None = None) -> list[FileDiff]:
    """Files commit ``rev`` changed (below ``path``), against its parent: what :func:`diff`
    gives for the parent and ``rev``, read from the index shards the commit changed only (its
    cost is the change's, not the store's). Redacted versions are left out, as in :func:`diff`."""
    commit_id = rev if isinstance(rev, bytes) else resolve(store, rev)
    root = parse_path(path).text if path is not None else ROOT
    _meta, tree_id, parent = store.commit(commit_id)
    a_files: dict[str, Node] = {}
    b_files: dict[str, Node] = {}
    for before, after in _node_pairs(store, tree_id, store.commit(parent)[1] if parent is not None else None):
        for node, side in ((before, a_files), (after, b_files)):
            if node is not None and not node.is_dir and not node.redacted and _under(node.path, root):
                side[node.path] = node
    return _pair(store, a_files, b_files)


def _pair(store: AnyBranch, a_files: dict[str, Node], b_files: dict[str, Node]) -> list[FileDiff]:
    """The files that differ between two sets of file nodes (``path -> node``), a file moved
    paired with its old path when its lineage matches; sorted by path."""
    by_lineage = {n.file_id: p for p, n in a_files.items() if p not in b_files}
    out: list[FileDiff] = []
    paired: set[str] = set()
    for p, node in sorted(b_files.items()):
        before = a_files.get(p)
        if before is not None:
            if before.sha256 != node.sha256:
                out.append(FileDiff(p, p, store.read_node(before), store.read_node(node)))
            continue
        source = by_lineage.get(node.file_id)
        if source is not None:
            paired.add(source)
            out.append(FileDiff(p, source, store.read_node(a_files[source]), store.read_node(node)))
        else:
            out.append(FileDiff(p, None, None, store.read_node(node)))
    for p, node in sorted(a_files.items()):
        if p not in b_files and p not in paired:
            out.append(FileDiff(p, p, store.read_node(node), None))
    return sorted(out, key=lambda d: d.path)


def format_diff(diffs: Iterable[FileDiff]) -> str:
    """Unified diff text (git style ``a/`` and ``b/`` prefixes) of :func:`diff` results."""
    chunks: list[str] = []
    for d in diffs:
        old_name = "/dev/null" if d.old is None else "a" + (d.old_path or d.path)
        new_name = "/dev/null" if d.new is None else "b" + d.path
        header = f"diff --memvault a{d.old_path or d.path} b{d.path}\n"
        if d.status == "renamed":
            header += f"rename from {d.old_path}\nrename to {d.path}\n"
        try:
            old_text = (d.old or b"").decode("utf-8")
            new_text = (d.new or b"").decode("utf-8")
        except UnicodeDecodeError:
            chunks.append(header + f"Binary files {old_name} and {new_name} differ\n")
            continue
        body = "".join(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                new_text.splitlines(keepends=True),
                fromfile=old_name,
                tofile=new_name,
            )
        )
        if body and not body.endswith("\n"):
            body += "\n\\ No newline at end of file\n"
        chunks.append(header + body)
    return "".join(chunks)


# -- blame ------------------------------------------------------------------------------------------


def blame(store: AnyBranch, path: str, rev: str | bytes = "HEAD") -> list[BlameLine]:
    """For each line of ``path`` at ``rev``, the commit that last changed it (following renames)."""
    vpath = parse_path(path).text
    start = rev if isinstance(rev, bytes) else resolve(store, rev)
    content = read_at(store, vpath, start)
    versions: list[tuple[CommitInfo, bytes]] = []
    tracked = vpath
    for info in iter_log(store, start=start, path=vpath, follow=True):
        hit = next((c for c in info.changes if c.path == tracked and c.kind == "file"), None)
        if hit is None:
            continue
        if hit.op == "deleted":
            break
        versions.append((info, read_at(store, tracked, info.commit_id.encode())))
        if hit.op == "renamed" and hit.old_path is not None:
            tracked = hit.old_path
        elif hit.op == "created":
            break
    versions.reverse()  # oldest first
    out = attribute_lines([(info.commit_id, info, data) for info, data in versions])
    if versions and versions[-1][1] != content:
        raise IntegrityError("The store's history does not lead to the file's content.")
    return out


def attribute_lines(versions: Iterable[tuple[str, CommitMeta, bytes]]) -> list[BlameLine]:
    """Blame's core: given versions of one file oldest first, each as ``(commit id in hex, that
    commit's metadata, the content it wrote)``, the lines of the newest, each with the commit
    that last changed it (lines the oldest version given already had are its own)."""
    lines: list[str] = []
    owners: list[tuple[str, CommitMeta]] = []
    for commit_id, meta, data in versions:
        new_lines = data.decode("utf-8", errors="replace").split("\n")
        if new_lines and new_lines[-1] == "":
            new_lines.pop()
        matcher = difflib.SequenceMatcher(a=lines, b=new_lines, autojunk=False)
        new_owners = [(commit_id, meta)] * len(new_lines)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                new_owners[block.b + k] = owners[block.a + k]
        lines, owners = new_lines, new_owners
    return [
        BlameLine(i + 1, text, commit_id, meta.seq, meta.time, meta.actor)
        for i, (text, (commit_id, meta)) in enumerate(zip(lines, owners, strict=True))
    ]
