"""What each commit of a store changed, and the log: commits newest first with what each changed,
filtered by path (renames followed), actor, session, command, operation and time, and pages of it
from a commit id.

Every commit used has been authenticated (HMAC chain tag) and its metadata decrypted; what a
commit changed is computed by comparing the encrypted index shards of the commit and its parent
(only shards whose blob id differs are opened), so walking history does not decrypt every file.
``iter_log(start=B, exclude=A)`` walks a range ``A..B`` (:mod:`memvault.store.revisions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any, Literal

from ..errors import InvalidInputError
from ..format.records import CommitMeta, Node
from ..paths import ROOT, parse_path
from ..store import AnyBranch
from ..store.revisions import ancestors, resolve

__all__ = [
    "Operation", "OPERATIONS", "Change", "CommitInfo", "LogPage", "walk", "shard_diff", "node_pairs", "changes",
    "within", "iter_log", "log", "log_page",
]  # fmt: skip

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
    for before, node in node_pairs(store, tree_id, parent_tree):
        if node is None:
            deleted.extend((before,) if before is not None else ())
        elif before is None:
            created.append(node)
        else:
            modified.append(node)
    return created, deleted, modified


def node_pairs(store: AnyBranch, tree_id: bytes, parent_tree: bytes | None) -> list[tuple[Node | None, Node | None]]:
    """``(node in parent_tree, node in tree_id)`` of each token that differs (None: absent)."""
    new_blobs = store.index_blobs(tree_id)
    old_blobs = store.index_blobs(parent_tree) if parent_tree is not None else {}
    out: list[tuple[Node | None, Node | None]] = []
    pairs = [
        (store.shard_nodes(shard, new_blobs[shard]) if shard in new_blobs else {},
         store.shard_nodes(shard, old_blobs[shard]) if shard in old_blobs else {})
        for shard in sorted(set(new_blobs) | set(old_blobs))
        if new_blobs.get(shard) != old_blobs.get(shard)
    ]  # fmt: skip
    if {len(shard) for shard in new_blobs} != {len(shard) for shard in old_blobs} and new_blobs and old_blobs:
        # Trees of two layouts (an upgrade refiled the nodes in shards of other names): compare
        # every token of one with the other's.
        pairs = [({t: n for s in pairs for t, n in s[0].items()}, {t: n for s in pairs for t, n in s[1].items()})]
    for new, old in pairs:
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


def within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies below it (``/memories`` holds everything)."""
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
                c for c in commit_changes if within(c.path, tracked) or (c.old_path and within(c.old_path, tracked))
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
