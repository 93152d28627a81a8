"""A side branch of a store (``dream/<id>``): a memory of its own, forked from ``main``.

A side branch starts with a ``fork`` commit on top of a commit of ``main`` (the fork point) and
takes commits like ``main`` does: the same path grammar, transactions and limits, one commit per
command, each sealed with fresh data keys. Its commits are authenticated in their own domain,
bound to the branch's name (docs/format.md §5.8), so none of them is ever accepted on ``main``
or on another branch. ``main`` never moves here: a branch is brought into it by a merge commit
(:mod:`memvault.dream.review`). In a store in object storage each commit of a branch is a log
record of the store's one log, as a commit of ``main`` is (docs/format.md §12.2), and a branch
is ended by an ``end`` commit instead of removing its ref.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import ConflictError, IntegrityError, InvalidInputError, RollbackDetectedError
from ..format.records import CommitMeta, Node
from ..git.refs import Branch
from ..git.repo import GitStore
from ..keys.keyring import HighWater, freshness_problem
from ..settings import StoreSettings
from .atimes import AccessTimes
from .commit import CommitWriter
from .config import chains_key_changes
from .state import OpenedCommit, StateReader, StoreState
from .transaction import Committed, Transaction

if TYPE_CHECKING:
    from ..keys.keyring import Keyring
    from ..remote.replica import Replica


T = TypeVar("T")


class MainStore(Protocol):
    """What a side branch needs of the store whose ``main`` it forks from (``MemoryStore``)."""

    format_version: int
    access_times: AccessTimes

    @property
    def settings(self) -> StoreSettings: ...

    @property
    def keyring(self) -> Keyring: ...

    @property
    def git(self) -> GitStore: ...

    @property
    def head(self) -> tuple[bytes, int]: ...

    def writing(self) -> AbstractContextManager[None]: ...

    def opened_commit(self, commit_id: bytes) -> OpenedCommit: ...

    def state_at(self, commit_id: bytes) -> StoreState: ...

    def index_blobs(self, tree_id: bytes) -> dict[bytes, bytes]: ...

    def shard_nodes(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]: ...

    def read_node(self, node: Node) -> bytes: ...

    def token(self, path: str) -> bytes: ...

    def is_recorded_access_file(self, digest: bytes) -> bool: ...

    @property
    def remote(self) -> Replica | None: ...

    def pull(self) -> None: ...

    def racing(self, body: Callable[[], T]) -> T: ...


__all__ = [
    "BranchStore", "MainStore", "BRANCH_PREFIX", "FORK_COMMAND", "END_COMMAND", "TRACKED", "TRACKED_VALUE",
    "branch_id", "branch_name", "check_branch_name", "is_branch_name",
]  # fmt: skip

#: Side branches live under ``refs/heads/dream/``.
BRANCH_PREFIX = "dream"
#: The command of a side branch's first commit.
FORK_COMMAND = "fork"
#: The command of the commit that ends a side branch of a store in object storage (its discard):
#: the branch is no longer listed and takes no more commits (docs/format.md §5.8).
END_COMMAND = "end"
_NAME = re.compile(r"dream/[0-9a-f]{16}")
#: Commits walked from a side branch's head before its fork commit must have been found.
MAX_BRANCH_COMMITS = 100_000
#: The key and value of a fork commit's ``extra`` saying that the keyring records the branch.
TRACKED, TRACKED_VALUE = "keyring", "recorded"


def is_branch_name(name: str) -> bool:
    """Whether ``name`` names a side branch (``dream/`` and 16 lowercase hex digits)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def branch_id(name: str) -> bytes:
    """The 8 bytes that name side branch ``name`` (``dream/<16 hex>``, checked) in the keyring."""
    return bytes.fromhex(check_branch_name(name)[len(BRANCH_PREFIX) + 1 :])


def branch_name(branch: bytes) -> str:
    """The side branch an 8-byte keyring id names (``dream/<16 hex>``)."""
    return f"{BRANCH_PREFIX}/{branch.hex()}"


def check_branch_name(name: str) -> str:
    """``name`` if it names a side branch (``dream/`` and 16 lowercase hex digits).

    Raises:
        InvalidInputError: it does not.
    """
    if not is_branch_name(name):
        raise InvalidInputError("A dream branch is named dream/ and 16 hex digits (see `memvault dream list`).")
    return name


class BranchStore:
    """One side branch of an open :class:`~memvault.store.MemoryStore`, with the reading and
    writing methods the memory tool, history, and audit use on a store.

    Made by :meth:`MemoryStore.branch <memvault.store.MemoryStore.branch>`, not directly; a new
    branch then needs :meth:`create`. Thread-safe
    (it shares the store's locks). Reads of files record no access time.

    In a store of format version 3 the keyring records each commit of the branch and the data
    keys it wrote (docs/format.md §5.8). Every read that finds the branch's ref moved compares
    the branch with that record, as ``main`` is compared with its high-water mark: a ref behind
    it, beside it (a fork) or ahead of it raises :class:`~memvault.errors.RollbackDetectedError`
    (an :class:`IntegrityError`), unless :attr:`check_mark` is off.

    Attributes:
        name: the branch (``dream/<id>``).
        guard: if set, called with each transaction after its command ran and before it is
            committed; what it raises fails the command with nothing written (quotas).
        check_mark: raise when the branch does not match the keyring's record of it (default);
            off, the branch is read as its ref has it and :attr:`mark_problem` says what is wrong
            (``verify``, and ``dream discard``, which must destroy a moved branch's keys).
        mark_problem: what the last walk found wrong with the branch against the keyring's
            record of it, or None.
        served_recorded: the last walk served the commit the keyring recorded on top of the
            ref (a writer stopped before it moved the ref); the next write moves the ref to it.
    """

    def __init__(
        self,
        store: MainStore,
        name: str,
        ref: Branch,
        reader: StateReader,
        writer: CommitWriter,
        state_lock: threading.RLock,
        epoch: Callable[[], int],
    ) -> None:
        self.store = store
        self.name = name
        self._ref = ref
        self._reader = reader
        self._writer = writer
        self._state_lock = state_lock
        self._epoch = epoch
        self._state: StoreState | None = None
        self._ids: dict[bytes, OpenedCommit] = {}
        self._fork_commit: bytes = b""
        self._on_main: set[bytes] = set()
        self._ref_value: bytes | None = None  #: the ref's value when the state was walked
        self.guard: Callable[[Transaction], None] | None = None
        self.check_mark = True
        self.mark_problem: IntegrityError | None = None
        self.served_recorded = False

    # -- what the store facade offers, for this branch ----------------------------------------------

    @property
    def settings(self) -> StoreSettings:
        return self.store.settings

    @property
    def keyring(self) -> Keyring:
        return self.store.keyring

    @property
    def access_times(self) -> AccessTimes:
        return self.store.access_times

    def is_recorded_access_file(self, digest: bytes) -> bool:
        return self.store.is_recorded_access_file(digest)

    def token(self, path: str) -> bytes:
        return self.store.token(path)

    def read_node(self, node: Node) -> bytes:
        return self.store.read_node(node)

    def note_read(self, node: Node) -> None:
        """Reads on a side branch are not recorded (access times describe ``main``)."""

    def index_blobs(self, tree_id: bytes) -> dict[bytes, bytes]:
        return self.store.index_blobs(tree_id)

    def shard_nodes(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]:
        return self.store.shard_nodes(shard, blob_id)

    # -- the branch's history ------------------------------------------------------------------------

    def _walk(self, *, writer: bool = False) -> StoreState:
        """Authenticate the branch from its head down to its fork commit, compare it with the
        keyring's record of the branch, load the head state. A ``writer`` first moves a ref that
        lags behind the commit the keyring recorded on top of it. The caller holds the state lock.
        """
        ref_head = self._ref.head()
        if ref_head is None:
            raise InvalidInputError(f"No dream branch {self.name} (see `memvault dream list`).")
        state = self._state
        if state is None or ref_head not in (state.commit_id, self._ref_value):
            state = self._walk_from(ref_head, state)
        if writer and ref_head != state.commit_id:  # publish the recorded commit first (§5.8)
            if not self._ref.compare_and_swap(ref_head, state.commit_id):
                self._ref.remove_lock()
                raise ConflictError("Error: The branch changed concurrently; retry the command.")
            self._ref_value, self.served_recorded = state.commit_id, False
        return state

    def _walk_from(self, ref_head: bytes, state: StoreState | None) -> StoreState:
        mark = self._mark()
        head, lost = ref_head, None
        if mark is not None and ref_head == mark.parent_id:
            if self.store.git.contains(mark.commit_id):
                head = mark.commit_id  # recorded by a writer stopped before it moved the ref
            elif self.settings.durability == "full":
                lost = RollbackDetectedError(
                    f"Rollback detected: the newest commit recorded for the dream branch {self.name} is gone."
                )
        ids: dict[bytes, OpenedCommit] = {}
        commit: bytes | None = head
        child: OpenedCommit | None = None
        while commit is not None and len(ids) < MAX_BRANCH_COMMITS:
            opened = self._reader.open_commit(commit, branch=self.name)
            if child is not None and opened.seq + 1 != child.seq:
                raise IntegrityError(f"The history of the dream branch {self.name} is not contiguous.")
            ids[commit] = child = opened
            if opened.meta.command == FORK_COMMAND:
                break
            commit = opened.parent_id
        else:
            raise IntegrityError(f"The dream branch {self.name} has no fork commit.")
        fork_commit, fork = commit, ids[commit]
        if fork.parent_id is None or fork.meta.extra.get("fork") != fork.parent_id.decode("ascii"):
            raise IntegrityError(f"The fork commit of the dream branch {self.name} is not authentic.")
        parent = self.store.opened_commit(fork.parent_id)  # a commit of main
        if fork.meta.seq != parent.seq + 1 or fork.tree_id != parent.tree_id:
            raise IntegrityError(f"The fork commit of the dream branch {self.name} is not authentic.")
        top = ids[head]
        self.mark_problem = lost or self._against_mark(head, top.seq, mark, fork.meta)
        if self.mark_problem is not None and self.check_mark:
            raise self.mark_problem
        self._state = None
        self._state = self._reader.load_state(head, top.seq, top.tree_id, state)
        self._ids, self._fork_commit, self._ref_value = ids, fork_commit, ref_head
        self.served_recorded = head != ref_head
        return self._state

    def _mark(self) -> HighWater | None:
        """The keyring's record of the branch's newest commit (read up to date), or None."""
        try:
            self.store.keyring.refresh()
        except IntegrityError:
            if self.check_mark:
                raise
        return self.store.keyring.branches.mark(branch_id(self.name))

    def _against_mark(self, head: bytes, seq: int, mark: HighWater | None, fork: CommitMeta) -> IntegrityError | None:
        """What is wrong with the branch at ``head`` (``seq``) given the keyring's ``mark``."""
        if mark is not None:
            return freshness_problem(head, seq, mark, branch=self.name)
        if fork.extra.get(TRACKED) == TRACKED_VALUE:
            return RollbackDetectedError(
                f"Rollback detected: the keyring has no record of the dream branch {self.name}, whose fork commit "
                "says it keeps one: its records were cut off, or the keyring was put back from an older copy."
            )
        return None  # made by an earlier release, or in a store of format version 1 or 2

    def check_fork(self) -> None:
        """Require the fork point in ``main``'s history (a key holder could fork from a commit of
        ``main``'s domain that ``main`` never pointed at): walk back from ``main``'s head to the
        fork point's sequence number; once per branch object. Review and merge call it.

        Raises:
            IntegrityError: it is not (or the branch does not authenticate).
        """
        commit_id = self.fork_point
        if commit_id in self._on_main:
            return
        seq = self.store.opened_commit(commit_id).seq
        current: bytes | None = self.store.head[0]
        while current is not None:
            opened = self.store.opened_commit(current)
            if opened.seq <= seq:
                break
            current = opened.parent_id
        if current != commit_id:
            raise IntegrityError(f"The dream branch {self.name} forks from a commit that is not in main's history.")
        self._on_main.add(commit_id)

    @property
    def head(self) -> tuple[bytes, int]:
        """``(commit_id, seq)`` of the branch's head."""
        with self._state_lock:
            state = self._walk()
            return state.commit_id, state.seq

    @property
    def fork_meta(self) -> CommitMeta:
        """The metadata of the branch's fork commit (``extra["fork"]``: the fork point on ``main``)."""
        with self._state_lock:
            self._walk()
            return self._ids[self._fork_commit].meta

    @property
    def fork_point(self) -> bytes:
        """The commit of ``main`` the branch was forked from."""
        return self.fork_meta.extra["fork"].encode("ascii")

    def branch_commits(self) -> list[bytes]:
        """The branch's own commits, newest first, down to its fork commit."""
        with self._state_lock:
            self._walk()
            return list(self._ids)

    def opened_commit(self, commit_id: bytes) -> OpenedCommit:
        """An authentic commit of this branch, or of ``main`` at or before the fork point."""
        with self._state_lock:
            self._walk()
            opened = self._ids.get(commit_id)
        if opened is None:
            return self.store.opened_commit(commit_id)
        return replace(opened, meta=replace(opened.meta, findings=dict(opened.meta.findings)))

    def commit(self, commit_id: bytes) -> tuple[CommitMeta, bytes, bytes | None]:
        """``(metadata, tree_id, parent_id)`` of an authentic commit (see :meth:`opened_commit`)."""
        opened = self.opened_commit(commit_id)
        return opened.meta, opened.tree_id, opened.parent_id

    def commit_meta(self, commit_id: bytes) -> CommitMeta:
        return self.opened_commit(commit_id).meta

    def state_at(self, commit_id: bytes) -> StoreState:
        """The decrypted state of a commit of this branch or of ``main`` (a copy)."""
        with self._state_lock:
            self._walk()
            opened = self._ids.get(commit_id)
            if opened is None:
                return self.store.state_at(commit_id)
            return self._reader.load_state(commit_id, opened.seq, opened.tree_id, None)

    def snapshot(self) -> Transaction:
        """An isolated read-only view of the branch's head."""
        with self._state_lock:
            return Transaction(self, self.state_at(self._walk().commit_id))

    @contextmanager
    def reading(self, *, pull: bool = True) -> Iterator[Transaction]:
        """A view of the branch's head, valid inside the ``with`` block (``pull``: as for
        :meth:`MemoryStore.reading`: a store in object storage takes in other hosts' commits
        first)."""
        if pull:
            self.store.pull()
        with self._state_lock:
            yield Transaction(self, self._walk())

    @property
    def ended(self) -> bool:
        """Whether the branch's head is an ``end`` commit (a branch discarded in a store in object
        storage); False for a branch whose head does not authenticate (readers report that)."""
        with self._state_lock:
            head = self._ref.head()
            if head is None:
                return False
            try:
                return self._reader.open_commit(head, branch=self.name).meta.command == END_COMMAND
            except IntegrityError:
                return False

    # -- writing -------------------------------------------------------------------------------------

    def transact(
        self,
        fn: Callable[[Transaction], T],
        *,
        command: str,
        paths: tuple[str, ...],
        actor: str,
        session: str,
        findings: dict[str, int] | None = None,
        extra: dict[str, str] | None = None,
    ) -> Committed[T]:
        """Run ``fn`` on the branch's head and commit what it changed as one commit of the branch
        (as :meth:`MemoryStore.transact <memvault.store.MemoryStore.transact>`; :attr:`guard`
        checks the transaction first)."""

        def once() -> Committed[T]:
            state = self._walk(writer=True)
            if self._ids[state.commit_id].meta.command == END_COMMAND:
                raise InvalidInputError(f"No dream branch {self.name} (see `memvault dream list`).")
            txn = Transaction(self, state)
            result = fn(txn)
            if self.guard is not None:
                self.guard(txn)
            meta = CommitMeta(
                state.seq + 1, time.time(), actor, session, command, paths, dict(findings or {}),
                branch=self.name, extra=dict(extra or {}),
            )  # fmt: skip
            commit_id = self.write(state, txn, meta)
            self._ids = {commit_id: self._reader.open_commit(commit_id, branch=self.name), **self._ids}
            self._ref_value = commit_id
            return Committed(result, commit_id, meta.seq, meta.time)

        with self.store.writing(), self._state_lock:
            return self.store.racing(once)

    def create(self, *, actor: str, session: str = "", extra: dict[str, str] | None = None) -> None:
        """Create the branch at the head of ``main`` with its ``fork`` commit (``extra`` recorded
        in its metadata besides the fork point).

        Raises:
            InvalidInputError: the branch exists already (or the keyring has records of a branch of
                that name: a name is used once).
        """

        def once() -> None:
            self.store.keyring.refresh()
            if self._ref.head() is not None or self.store.keyring.branches.mark(branch_id(self.name)) is not None:
                raise InvalidInputError(f"The dream branch {self.name} exists already.")
            commit_id, seq = self.store.head
            start = self._reader.load_state(commit_id, seq, self.store.opened_commit(commit_id).tree_id, None)
            meta = _fork_commit_meta(start, self.name, actor, session, extra or {}, tracked=self._tracked)
            self.write(start, Transaction(self, start), meta, first=True)

        with self.store.writing(), self._state_lock:
            self.store.racing(once)

    def delete(self, *, actor: str = "operator", session: str = "") -> bool:
        """Remove the branch's ref (its objects stay: :mod:`memvault.dream.review` destroys their
        keys first); in a store in object storage, end the branch instead with an ``end`` commit
        by ``actor`` (the ref of every host's replica follows the log, so a removed ref would come
        back). False if it does not exist (or has ended)."""
        with self.store.writing(), self._state_lock:
            if self.store.remote is not None:
                if self._ref.head() is None or self.ended:
                    return False
                try:
                    self.transact(lambda _txn: None, command=END_COMMAND, paths=(), actor=actor, session=session)
                except InvalidInputError:
                    if self.ended:  # another host ended it first
                        return False
                    raise
                return True
            head = self._ref.head()
            self._state, self._ids, self._ref_value = None, {}, None
            return head is not None and self.store.git.delete_side_branch(self.name, head)

    def write(self, state: StoreState, txn: Transaction, meta: CommitMeta, *, first: bool = False) -> bytes:
        """Write one commit on the branch on top of ``state`` (its head, or for the ``first``
        commit the fork point); the caller holds the writer and state locks."""
        self.store.keyring.refresh()  # a rotation by another process: no data key under a retired epoch
        return self._writer.write(
            state, txn, meta, epoch=self._epoch(), version=self.store.format_version,
            stored_limit=self.settings.max_stored_bytes, side=(self._ref, None if first else state.commit_id),
            tracked=branch_id(self.name) if self._tracked else None,
        )  # fmt: skip

    @property
    def _tracked(self) -> bool:
        """Whether the keyring records this branch's commits and keys (format version 3)."""
        return chains_key_changes(self.store.format_version)

    def __repr__(self) -> str:
        return f"BranchStore({self.name!r})"


def _fork_commit_meta(
    state: StoreState, name: str, actor: str, session: str, extra: dict[str, Any], *, tracked: bool
) -> CommitMeta:
    """The metadata of the fork commit of branch ``name`` on top of ``state`` (a state of ``main``);
    ``tracked``: the keyring records the branch (``extra[TRACKED]``)."""
    fields = {str(k): str(v) for k, v in extra.items() if k != TRACKED}
    fields["fork"] = state.commit_id.decode("ascii")
    if tracked:
        fields[TRACKED] = TRACKED_VALUE
    return CommitMeta(state.seq + 1, time.time(), actor, session, FORK_COMMAND, (), {}, branch=name, extra=fields)
