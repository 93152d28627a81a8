"""Reviewing a dream: list the dream branches, show one's decrypted diff and its audit before and
after, merge it into ``main`` as one commit, or discard it by destroying its data keys.

A merge never lets the dream win a conflict: when ``main`` moved since the fork, each file is
merged three ways (:mod:`memvault.dream.merge`) and any conflict blocks the whole merge.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, field
from typing import Any

from ..admin.audit import AuditReport, audit
from ..errors import ConflictError, IntegrityError, InvalidInputError, PathExistsError, RedactedError
from ..format.records import Node
from ..history import FileDiff, diff
from ..paths import parse_path
from ..scrub.guard import check_path, scrub_text
from ..store import BranchStore, MemoryStore, StoreState, Transaction
from ..store.branch import BRANCH_PREFIX, FORK_COMMAND, branch_id, branch_name, is_branch_name
from .merge import FileConflict, three_way

__all__ = [
    "DreamInfo",
    "DreamDiff",
    "MergeResult",
    "DiscardResult",
    "DreamConflictError",
    "MERGE_COMMAND",
    "list_dreams",
    "open_dream",
    "dream_diff",
    "merge_dream",
    "discard_dream",
]

#: The command of the commit a merge adds on ``main``.
MERGE_COMMAND = "dream-merge"
#: Commits of ``main`` after a dream's fork point looked at to tell whether it was merged.
MAX_MERGE_SEARCH = 100_000
#: A changed file keeping less than this share of its lines is flagged as rewritten.
REWRITE_SIMILARITY = 0.5


@dataclass(frozen=True)
class DreamInfo:
    """One dream branch as :func:`list_dreams` sees it."""

    id: str  #: 16 hex digits
    branch: str  #: ``dream/<id>``
    status: str  #: ``open``, ``merged`` or ``damaged``
    fork_point: str = ""  #: hex id of the main commit it forked from
    head: str = ""  #: hex id of the branch's newest commit
    created: float = 0.0  #: time of the fork commit
    actor: str = ""  #: who ran it
    model: str = ""
    commits: int = 0  #: commits after the fork commit
    merge_commit: str = ""  #: for a merged dream: the commit of ``main`` that merged it
    problem: str = ""  #: for a damaged one: why

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "branch": self.branch, "status": self.status, "fork_point": self.fork_point,
            "head": self.head, "created": self.created, "actor": self.actor, "model": self.model,
            "commits": self.commits, "merge_commit": self.merge_commit, "problem": self.problem,
        }  # fmt: skip


def _name(dream_id: str) -> str:
    name = dream_id if dream_id.startswith(BRANCH_PREFIX + "/") else f"{BRANCH_PREFIX}/{dream_id}"
    if not is_branch_name(name):
        raise InvalidInputError("A dream id is 16 hex digits (see `memvault dream list`).")
    return name


def open_dream(store: MemoryStore, dream_id: str) -> BranchStore:
    """The branch of dream ``dream_id`` (16 hex digits, or ``dream/<id>``).

    Raises:
        InvalidInputError: a bad id, or no such dream.
        IntegrityError: its branch does not authenticate.
    """
    name = _name(dream_id)
    if name not in store.branches():
        raise InvalidInputError(f"No dream {name.split('/', 1)[1]} (see `memvault dream list`).")
    branch = store.branch(name)
    branch.check_fork()  # authenticates the branch down to its fork commit, and that on main
    return branch


def _info(store: MemoryStore, name: str) -> DreamInfo:
    dream_id = name.split("/", 1)[1]
    try:
        branch = store.branch(name)
        branch.check_fork()
        commits = branch.branch_commits()
        fork = branch.fork_meta
    except IntegrityError as err:
        return DreamInfo(dream_id, name, "damaged", problem=str(err))
    merge = _merge_commit(store, dream_id, fork.seq - 1)
    return DreamInfo(
        dream_id, name, "merged" if merge else "open", fork_point=fork.extra.get("fork", ""),
        head=commits[0].decode("ascii"), created=fork.time, actor=fork.actor, model=fork.extra.get("model", ""),
        commits=len(commits) - 1, merge_commit=merge,
    )  # fmt: skip


def _merge_commit(store: MemoryStore, dream_id: str, fork_seq: int) -> str:
    """The commit of ``main`` (after the fork point, of sequence number ``fork_seq``) that merged
    the dream, as hex, or ""."""
    current: bytes | None = store.head[0]
    for _ in range(MAX_MERGE_SEARCH):
        if current is None:
            break
        meta, _tree, parent = store.commit(current)
        if meta.seq <= fork_seq:
            break
        if meta.command == MERGE_COMMAND and meta.extra.get("dream") == dream_id:
            return current.decode("ascii")
        current = parent
    return ""


def list_dreams(store: MemoryStore) -> list[DreamInfo]:
    """Every dream branch of ``store``, oldest first (a damaged one is listed as such; so is one
    whose ref is gone while the keyring still holds data keys written for it)."""
    names = store.branches()
    dreams = [_info(store, name) for name in names]
    dreams += [
        DreamInfo(name.split("/", 1)[1], name, "damaged", problem=_GONE.format(id=name.split("/", 1)[1]))
        for name in _lost_branches(store, names)
    ]
    return sorted(dreams, key=lambda d: (d.created, d.id))


#: A dream whose ref is gone while data keys written for it are not destroyed.
_GONE = (
    "Its branch's ref is gone (removed by something other than memvault), but the data keys of the versions it "
    "wrote are still in the keyring: `memvault dream discard {id}` destroys them."
)


def _lost_branches(store: MemoryStore, names: list[str]) -> list[str]:
    """The side branches the keyring holds live data keys of and whose ref is not in ``names``."""
    store.keyring.refresh()
    marks = store.keyring.branches
    out = []
    for bid in marks.recorded():
        name = branch_name(bid)
        if name not in names and any(not store.keyring.is_destroyed(k) for k in marks.keys(bid)):
            out.append(name)
    return out


@dataclass(frozen=True)
class DreamDiff:
    """What a dream changed, from its fork point to its head, decrypted."""

    info: DreamInfo
    files: list[FileDiff]
    #: ``path -> flag`` for changes a reviewer should look at first: ``deleted``, ``rewritten``
    #: (a changed file keeping less than half its lines), ``renamed``.
    flags: dict[str, str]
    audit_before: AuditReport
    audit_after: AuditReport
    #: Whether ``main`` has commits after the fork point (a merge is then three-way).
    main_moved: bool

    def to_json(self, *, content: bool = True) -> dict[str, Any]:
        """JSON of the diff; with ``content`` each file's old and new text (UTF-8, replaced)."""
        files = []
        for f in self.files:
            entry: dict[str, Any] = {"path": f.path, "old_path": f.old_path, "status": f.status}
            entry["flag"] = self.flags.get(f.path, "")
            counts = f.line_counts()
            entry["added"], entry["removed"] = counts if counts is not None else (None, None)
            if content:
                entry["old"] = None if f.old is None else f.old.decode("utf-8", "replace")
                entry["new"] = None if f.new is None else f.new.decode("utf-8", "replace")
            files.append(entry)
        return {
            "dream": self.info.to_json(), "main_moved": self.main_moved, "files": files,
            "audit_before": self.audit_before.to_json(), "audit_after": self.audit_after.to_json(),
        }  # fmt: skip


def _flag(f: FileDiff) -> str:
    if f.status == "deleted":
        return "deleted"
    if f.status == "renamed":
        return "renamed"
    if f.status == "modified" and not f.binary:
        old = (f.old or b"").decode("utf-8").splitlines()
        new = (f.new or b"").decode("utf-8").splitlines()
        kept = sum(size for _a, _b, size in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_matching_blocks())
        if old and kept / len(old) < REWRITE_SIMILARITY:
            return "rewritten"
    return ""


def dream_diff(store: MemoryStore, dream_id: str, *, now: float | None = None) -> DreamDiff:
    """The decrypted diff of a dream from its fork point, flagged, with the audit of the fork
    point's memory (``audit_before``: ``main`` as the dream saw it) and of the dream's result.

    Raises:
        InvalidInputError: no such dream. IntegrityError: its branch does not authenticate.
    """
    branch = open_dream(store, dream_id)
    info = _info(store, branch.name)
    fork = branch.fork_point
    files = diff(branch, fork, "HEAD")
    flags = {f.path: flag for f in files if (flag := _flag(f))}
    after = audit(branch, now=now)
    before = audit(branch, now=now, at=fork)
    return DreamDiff(info, files, flags, before, after, store.head[0] != fork)


class DreamConflictError(ConflictError):
    """A merge is blocked: ``conflicts`` says which files both sides changed incompatibly
    (their rendering shows content: only for the operator who asked)."""

    def __init__(self, message: str, conflicts: list[FileConflict]) -> None:
        super().__init__(message)
        self.conflicts = conflicts


@dataclass(frozen=True)
class MergeResult:
    """A merged dream: the commit on ``main`` and what it changed."""

    dream_id: str
    commit: str  #: hex id of the merge commit on main
    seq: int
    changed: list[str] = field(default_factory=list)  #: paths written or deleted on main
    three_way: bool = False  #: main had moved since the fork

    def to_json(self) -> dict[str, Any]:
        return {"dream": self.dream_id, "commit": self.commit, "seq": self.seq, "changed": self.changed,
                "three_way": self.three_way}  # fmt: skip


def _files(store: MemoryStore | BranchStore, state: StoreState, paths: set[str], side: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path in paths:
        node = state.nodes.get(path)
        if node is None or node.is_dir:
            continue
        if node.redacted:
            raise RedactedError(f"A version the merge needs on {side} was redacted; the dream cannot be merged.")
        out[path] = store.read_node(node)
    return out


def _files_differ(a: Node | None, b: Node | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    if a.dek_id == b.dek_id:
        return False  # the very same version (also when a redaction on main destroyed it)
    return a.is_dir != b.is_dir or a.sha256 != b.sha256 or a.redacted or b.redacted


def _conflict(path: str, reason: str) -> FileConflict:
    return FileConflict(path, reason, None, None, None)


def merge_dream(
    store: MemoryStore, dream_id: str, *, actor: str = "operator", session: str = "", expect_head: str | None = None
) -> MergeResult:
    """Merge a dream into ``main`` as one commit attributed to ``actor``; its metadata records the
    dream id, the fork point, the model and the branch head merged. The merged contents go
    through the store's scrubber again (text that meets across the merge is checked whole); a
    file the dream renamed keeps its lineage. Nothing is written unless all of it is.

    Args:
        expect_head: the dream's head as reviewed (hex, a prefix of at least 7 digits): refuse
            the merge if the branch has moved on since.

    Raises:
        InvalidInputError: no such dream, or it was merged already.
        ConflictError: the branch moved past ``expect_head``.
        DreamConflictError: ``main`` changed a file the dream changed too, incompatibly.
        SensitiveDataError: the scrubber refuses a merged content. RedactedError: a version the
            merge needs was redacted. IntegrityError: a damaged branch.
    """
    branch = open_dream(store, dream_id)
    with store.writing():
        info = _info(store, branch.name)
        if info.status == "merged":
            raise InvalidInputError(f"The dream {info.id} was merged already (commit {info.merge_commit[:12]}).")
        if expect_head is not None and (len(expect_head) < 7 or not info.head.startswith(expect_head.lower())):
            raise ConflictError(
                f"Error: The dream {info.id} is at {info.head[:12]}, not at the reviewed {expect_head[:12]}: "
                "review it again (memvault dream diff)."
            )
        fork = branch.fork_point
        base, theirs = branch.state_at(fork), branch.state_at(info.head.encode("ascii"))
        ours = store.state_at(store.head[0])
        touched = {
            p for p in base.nodes.keys() | theirs.nodes.keys() if _files_differ(base.nodes.get(p), theirs.nodes.get(p))
        }
        binary = {p for s in (base, ours, theirs) for p in touched if (n := s.nodes.get(p)) is not None and n.binary}
        plan = three_way(
            _files(branch, base, touched, "the fork point"), _files(store, ours, touched, "main"),
            _files(branch, theirs, touched, "the dream"), binary=binary,
        )  # fmt: skip
        conflicts = list(plan.conflicts)
        for path, content in plan.changes.items():  # a file where main keeps a directory with files in it
            node = ours.nodes.get(path)
            if content is not None and node is not None and node.is_dir:
                below = (p for p, n in ours.nodes.items() if p.startswith(path + "/") and not n.is_dir)
                if any(plan.changes.get(p, b"") is not None for p in below):
                    conflicts.append(_conflict(path, "a directory on main, a file in the dream"))
        if conflicts:
            conflicts.sort(key=lambda c: c.path)
            paths = ", ".join(c.path for c in conflicts)
            raise DreamConflictError(
                f"Error: The dream {info.id} conflicts with changes made on main since it forked "
                f"({len(conflicts)} file(s): {paths}); nothing was merged.",
                conflicts,
            )
        findings: dict[str, int] = {}
        writes: dict[str, bytes] = {}
        for path, content in sorted(plan.changes.items()):
            check_path(store, parse_path(path, store.settings))
            if content is not None:
                writes[path] = content if path in binary else _scrubbed(store, content, findings)
        deletes = sorted((p for p, c in plan.changes.items() if c is None), key=lambda p: -p.count("/"))
        gone = set(deletes)
        lineage = {n.file_id: n for n in ours.nodes.values() if not n.is_dir and n.path in gone}
        dirs_gone = sorted((p for p in touched if (n := base.nodes.get(p)) is not None and n.is_dir
                            and not getattr(theirs.nodes.get(p), "is_dir", False)),
                           key=lambda p: -p.count("/"))  # fmt: skip

        def apply(txn: Transaction) -> None:
            for path in deletes:  # first, so a file may take a removed directory's name (or case)
                vpath = parse_path(path, store.settings)
                if txn.get(vpath) is not None:
                    txn.delete(vpath)
            for path in dirs_gone:  # directories the dream removed, if nothing is left in them
                vpath = parse_path(path, store.settings)
                node = txn.get(vpath)
                if node is not None and node.is_dir and next(iter(txn.descendants(vpath)), None) is None:
                    txn.delete(vpath)
            for path, content in writes.items():
                vpath = parse_path(path, store.settings)
                mine = theirs.nodes.get(path)
                moved = lineage.get(mine.file_id) if mine is not None and txn.get(vpath) is None else None
                txn.write_file(vpath, content, binary=path in binary, lineage=moved)

        extra = {"dream": info.id, "fork": fork.decode("ascii"), "model": info.model, "dream_head": info.head}
        changed = sorted(plan.changes)
        try:
            done = store.transact(apply, command=MERGE_COMMAND, paths=tuple(changed), actor=actor, session=session,
                                  findings=findings, extra=extra)  # fmt: skip
        except PathExistsError as err:  # a file and a directory meet at a path (nothing written)
            raise DreamConflictError(
                f"Error: The dream {info.id} cannot be merged: {str(err).removeprefix('Error: ')}; nothing was merged.",
                [],
            ) from None
    return MergeResult(info.id, done.commit_id.decode("ascii"), done.seq, changed, ours.commit_id != fork)


def _scrubbed(store: MemoryStore, content: bytes, findings: dict[str, int]) -> bytes:
    """``content`` through the store's scrubber (UTF-8 text; other bytes as they are)."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return content
    return scrub_text(store, text, findings).encode("utf-8")


@dataclass(frozen=True)
class DiscardResult:
    """A discarded dream: how many of its data keys were destroyed, by which ``redact`` commit,
    and whether those were every key it ever wrote."""

    dream_id: str
    keys_destroyed: int
    commit: str  #: hex id of the redaction commit on main ("" if there was nothing to destroy)
    #: The keyring recorded every data key the dream wrote (from its fork commit on), so all of
    #: them are destroyed, whatever its ref pointed at. False for a dream made by an earlier
    #: release or in a store of format version 1 or 2: its keys were found from its ref, and
    #: versions the ref no longer reached (``verify``: ``orphan-key``) are not destroyed.
    complete: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"dream": self.dream_id, "keys_destroyed": self.keys_destroyed, "commit": self.commit,
                "complete": self.complete}  # fmt: skip


def discard_dream(store: MemoryStore, dream_id: str, *, actor: str = "operator", session: str = "") -> DiscardResult:
    """Discard a dream: destroy the data keys of every version it wrote (one ``redact`` commit on
    ``main``, crypto-shredding: those versions' contents and the names in their node records are
    gone for good), then remove its branch. Versions it inherited from ``main`` are not touched.
    As with ``redact``, the paths each of its commits named stay in that commit's sealed metadata,
    readable to key holders while the commit objects exist.

    The keys are those the keyring recorded as written for the dream (every one since its fork
    commit, also those its ref no longer reaches: a ref moved back, a write that failed after its
    keys were recorded) and those of the versions its ref reaches. A dream whose ref is gone is
    discarded by its id while the keyring holds keys of it; one that does not match the keyring's
    record of it (moved back) is discarded all the same.

    Raises:
        InvalidInputError: no such dream. IntegrityError: a damaged branch the keyring has no
            record of (its keys cannot be told).
    """
    name = _name(dream_id)
    dream = name.split("/", 1)[1]
    with store.writing():
        store.keyring.refresh()
        marks, bid = store.keyring.branches, branch_id(name)
        recorded, complete = marks.keys(bid), marks.from_fork(bid)
        exists = name in store.branches()
        if not exists and all(store.keyring.is_destroyed(k) for k in recorded):
            raise InvalidInputError(f"No dream {dream} (see `memvault dream list`).")
        keys = set(recorded)
        branch = store.branch(name) if exists else None
        if branch is not None:
            branch.check_mark = False  # a branch moved back is discarded too: all of its keys
            try:
                keys |= _reachable_keys(branch)
            except IntegrityError:
                if marks.mark(bid) is None:
                    raise  # nothing else says which keys are the dream's
        if branch is not None and store.remote is not None:
            # Another host may commit on the branch until the log holds its end: end it first,
            # then destroy every key the keyring records for it by then (docs/format.md §5.8).
            branch.delete(actor=actor, session=session)
            store.pull()
            keys |= store.keyring.branches.keys(bid)
            branch = None
        keys = {k for k in keys if not store.keyring.is_destroyed(k)}
        commit_id: bytes | None = None
        if keys:
            info: dict[str, object] = {"time": time.time(), "actor": actor, "reason": f"dream {dream} discarded"}
            _count, _live, commit_id = store.destroy_keys(keys, info, actor=actor, session=session)
        if branch is not None:
            branch.delete(actor=actor, session=session)
        complete = complete and all(store.keyring.is_destroyed(k) for k in store.keyring.branches.keys(bid))
    return DiscardResult(dream, len(keys), commit_id.decode("ascii") if commit_id else "", complete)


def _reachable_keys(branch: BranchStore) -> set[bytes]:
    """The data keys of the versions the commits reachable from the branch's ref wrote (not
    those inherited from its fork point)."""
    commits = branch.branch_commits()
    inherited = {n.dek_id for n in branch.state_at(branch.fork_point).nodes.values()}
    keys: set[bytes] = set()
    for commit in commits:
        if branch.commit_meta(commit).command == FORK_COMMAND:
            continue
        keys |= {n.dek_id for n in branch.state_at(commit).nodes.values() if not n.redacted} - inherited
    return keys
