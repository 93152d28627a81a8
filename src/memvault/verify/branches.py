"""The side branches (``dream/<id>``) for :func:`~memvault.verify.verify`: list them, walk each
from its head down to its fork commit, authenticated in the branch's own domain (through
:class:`~memvault.store.BranchStore`, as every reader of a branch does), compare it with the
keyring's record of it (its high-water mark), and for a branch that does not open, follow its
commits down to ``main`` and say what is wrong with it; report the branches the keyring holds
keys of whose ref is gone, and what under ``refs/heads/dream/`` is not a ref. The checker then
checks each branch commit's tree, index shards and file versions as it checks ``main``'s.

Also the two types the checker's walks share: :class:`Where` a problem is, and a
:class:`ChainEntry` of a walk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import IntegrityError
from ..git.repo import GitStore
from ..store import MemoryStore
from ..store.branch import BRANCH_PREFIX, MAX_BRANCH_COMMITS, branch_name, is_branch_name
from .report import Severity, printable

__all__ = ["Add", "BranchWalk", "ChainEntry", "NOWHERE", "Where", "absent", "seq_text", "walk_branches"]


@dataclass(frozen=True)
class Where:
    """Where a problem was found: a commit (hex) and its seq, where known, and the side branch
    that commit is on ("": ``main``)."""

    commit: str | None
    seq: int | None
    branch: str = ""


NOWHERE = Where(None, None)


@dataclass(frozen=True)
class ChainEntry:
    """One commit of a walk: its tree (None: unreadable), and whether it authenticates (on
    ``main``, or on ``branch`` in that branch's domain)."""

    commit_id: bytes
    seq: int | None
    tree_id: bytes | None
    authentic: bool
    branch: str = ""


class Add(Protocol):
    """Reports one problem (the checker's ``add``)."""

    def __call__(self, severity: Severity, code: str, message: str, *, where: Where = NOWHERE) -> None: ...


@dataclass
class BranchWalk:
    """What :func:`walk_branches` found."""

    #: The commits of every branch, branches in name order, each branch's oldest (its fork
    #: commit) first: the order in which their trees are checked.
    entries: list[ChainEntry] = field(default_factory=list)
    #: Every branch was walked down to ``main`` (else the keys of the versions below a missing
    #: commit are not known, and no data key can be called an orphan).
    complete: bool = True
    #: Commit id -> the branch it authenticates on, for every branch that opens.
    owners: dict[bytes, str] = field(default_factory=dict)


def absent(git: GitStore, obj_id: bytes) -> bool:
    """Whether the repository lacks ``obj_id`` (a damaged object store: not absent, unreadable)."""
    try:
        return not git.contains(obj_id)
    except Exception:  # noqa: BLE001 - a damaged object store: treat as unreadable, not absent
        return False


def seq_text(seq: int | None) -> str:
    """``"#5 "``, or nothing when the seq is not known."""
    return f"#{seq} " if seq is not None else ""


def walk_branches(store: MemoryStore, add: Add, *, main: set[bytes], main_known: bool) -> BranchWalk:
    """Walk every side branch of ``store`` (problems reported through ``add``).

    Args:
        main: the commits met walking ``main`` from its head; a branch's walk stops at the first.
        main_known: the walk of ``main`` reached its first commit, so a commit not in ``main``
            is not one of ``main``'s.
    """
    walk = BranchWalk()
    try:
        names = store.git.side_branches(BRANCH_PREFIX)
    except IntegrityError:
        add("error", "bad-ref", "The file packed-refs is damaged: the dream branches in it cannot be listed.")
        walk.complete = False
        return walk
    for name in names:
        if not is_branch_name(name):
            add(
                "warning",
                "stray-ref",
                f"The ref refs/heads/{printable(name)} is not a dream branch (dream/ and 16 lowercase hex "
                "digits): memvault never writes it, and ignores it.",
            )
            continue
        _BranchWalker(store, add, name, main, main_known, walk).run()
    _stray_entries(store, add)
    _lost_branches(store, add, names)
    return walk


def _stray_entries(store: MemoryStore, add: Add) -> None:
    """Warn about what under ``refs/heads/dream/`` is not a regular file: memvault lists only
    files there, so a symbolic link or a directory would otherwise go unseen."""
    directory = store.git.path.joinpath("refs", "heads", BRANCH_PREFIX)
    kinds = {True: "a symbolic link", False: "a directory or another kind of file"}
    if directory.is_symlink():
        add("warning", "stray-ref", f"refs/heads/{BRANCH_PREFIX} is a symbolic link: memvault never makes it.")
        return
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError:
        add("warning", "stray-ref", f"refs/heads/{BRANCH_PREFIX} cannot be listed.")
        return
    for entry in entries:
        if not entry.is_file(follow_symlinks=False):
            add(
                "warning",
                "stray-ref",
                f"refs/heads/{BRANCH_PREFIX}/{printable(entry.name)} is {kinds[entry.is_symlink()]}, not a ref: "
                "memvault never writes it, and ignores it.",
            )


def _lost_branches(store: MemoryStore, add: Add, names: list[str]) -> None:
    """Warn about each side branch the keyring holds live data keys of and whose ref is gone."""
    keyring = store.keyring
    for bid in keyring.branches.recorded():
        name = branch_name(bid)
        live = sum(1 for k in keyring.branches.keys(bid) if not keyring.is_destroyed(k))
        if name not in names and live:
            add(
                "warning",
                "missing-branch",
                f"The dream branch {name} is recorded in the keyring with {live} data key(s) not destroyed, but its "
                f"ref refs/heads/{name} is gone (removed by something other than memvault): "
                f"`memvault dream discard {bid.hex()}` destroys them.",
                where=Where(None, None, name),
            )


class _BranchWalker:
    def __init__(
        self, store: MemoryStore, add: Add, name: str, main: set[bytes], main_known: bool, walk: BranchWalk
    ) -> None:
        self.store = store
        self.add = add
        self.name = name
        self.main = main
        self.main_known = main_known
        self.walk = walk

    def run(self) -> None:
        name = self.name
        try:
            head = self.store.git.side_branch(name).head()
        except IntegrityError:
            self.add(
                "error",
                "bad-ref",
                f"The dream branch {name} (refs/heads/{name}) is damaged: it does not hold a commit id.",
                where=Where(None, None, name),
            )
            self.walk.complete = False
            return
        if head is None:
            return  # removed since it was listed
        branch = self.store.branch(name)
        branch.check_mark = False  # reported below, and the branch's commits are checked all the same
        try:
            opened = [(commit_id, *branch.commit(commit_id)) for commit_id in branch.branch_commits()]
        except IntegrityError as err:
            self.diagnose(head, err)
            if branch.mark_problem is not None:  # found before what stopped the walk
                self.add("error", "rollback", str(branch.mark_problem), where=Where(head.decode(), None, name))
            return
        entries: list[ChainEntry] = []
        expected: int | None = None
        for commit_id, meta, tree_id, _parent in opened:  # newest first, down to the fork commit
            if expected is not None and meta.seq != expected:
                self.add(
                    "error",
                    "broken-chain",
                    f"Commit {commit_id.decode()} of the dream branch {name} is #{meta.seq} but its child expects "
                    f"#{expected}: the branch's history is not contiguous.",
                    where=Where(commit_id.decode(), meta.seq, name),
                )
            expected = meta.seq - 1
            entries.append(ChainEntry(commit_id, meta.seq, tree_id, True, name))
            self.walk.owners[commit_id] = name
        fork_commit, fork_meta, _tree, fork_point = opened[-1]
        if self.main_known and fork_point is not None and fork_point not in self.main:
            self.add(
                "error",
                "bad-branch",
                f"The dream branch {name} forks from commit {fork_point.decode()}, which is not in main's history.",
                where=Where(fork_commit.decode(), fork_meta.seq, name),
            )
        self.walk.entries.extend(reversed(entries))
        top, top_meta = opened[0][0].decode(), opened[0][1]
        if branch.mark_problem is not None:
            self.add("error", "rollback", str(branch.mark_problem), where=Where(top, top_meta.seq, name))
        elif branch.served_recorded:
            self.add(
                "warning",
                "unpublished-commit",
                f"Commit #{top_meta.seq} {top} of the dream branch {name} is recorded but the branch still points at "
                "its parent (a writer stopped before moving it); the next write on the branch publishes it.",
                where=Where(top, top_meta.seq, name),
            )

    def diagnose(self, head: bytes, err: IntegrityError) -> None:
        """The branch does not open: follow its commits down to ``main`` (their trees are still
        checked) and report what is wrong, as precisely as can be told."""
        name, git = self.name, self.store.git
        entries: list[ChainEntry] = []
        spliced: list[bytes] = []  # commits of main's domain above the fork
        seen: set[bytes] = set()
        commit_id: bytes | None = head
        while commit_id is not None and commit_id not in self.main and commit_id not in seen:
            if len(entries) >= MAX_BRANCH_COMMITS:
                self.walk.complete = False
                break
            seen.add(commit_id)
            try:
                tree_id, parents, _message = git.read_commit(commit_id)
            except IntegrityError:
                state = (
                    "is missing"
                    if absent(git, commit_id)
                    else "is damaged (the object does not match its id, is not a commit, or is not in the format "
                    "memvault writes)"
                )
                self.add(
                    "error",
                    "missing-object" if state == "is missing" else "bad-commit",
                    f"Commit {commit_id.decode()} of the dream branch {name} {state}; the branch before it cannot "
                    "be checked.",
                    where=Where(commit_id.decode(), None, name),
                )
                self.walk.complete = False
                break
            if self.on_main(commit_id):
                if not self.main_known:
                    break  # main's history is not known in full: this may be one of its commits
                spliced.append(commit_id)
            entries.append(ChainEntry(commit_id, None, tree_id, False, name))
            commit_id = parents[0] if parents else None
        where = Where(head.decode(), None, name)
        if not entries and head in self.main:
            message = (
                f"The dream branch {name} points at commit {head.decode()} of main: a branch's commits "
                "authenticate only on that branch, and it has no fork commit."
            )
        elif spliced:
            where = Where(spliced[0].decode(), None, name)
            message = (
                f"The dream branch {name} holds commit {spliced[0].decode()}, which authenticates as a commit of "
                "main, not of the branch: commits were put on the branch by something other than memvault."
            )
        else:
            reason = str(err) if str(err) != IntegrityError().message else "a commit on it does not authenticate."
            message = f"The dream branch {name} does not open: {reason}"
        self.add("error", "bad-branch", message, where=where)
        self.walk.entries.extend(reversed(entries))

    def on_main(self, commit_id: bytes) -> bool:
        """Whether ``commit_id`` authenticates as a commit of ``main``."""
        try:
            self.store.commit(commit_id)
        except IntegrityError:
            return False
        return True
