"""The head a store object serves: its cached state, brought to the branch and checked for
authenticity and freshness whenever the branch moves (docs/format.md §8)."""

from __future__ import annotations

from ..errors import IntegrityError, MemvaultError, RollbackDetectedError
from ..hoststate import Anchor
from ..keys.keyring import HighWater, Keyring, freshness_problem
from .state import StateReader, StoreState

__all__ = ["Head"]

#: Reads of a branch that moved meanwhile before a reader gives up (a reader without the lock may
#: read a value being overwritten, or a keyring newer than the branch it read).
_ATTEMPTS = 8


class Head:
    """The cached head state of one store object. The caller holds the store's state lock.

    Args:
        reader: the store's state reader.
        keyring: the store's keyring (its high-water mark).
        durable: durability ``full`` (a recorded commit whose objects are gone is a rollback).
        anchor: this host's anchor of the store directory (checked against the keyring's mark
            whenever the head is accepted, moved with each published commit), or None.
    """

    def __init__(self, reader: StateReader, keyring: Keyring, *, durable: bool, anchor: Anchor | None = None) -> None:
        self._reader = reader
        self.git = reader.git
        self.keyring = keyring
        self._durable = durable
        self.anchor = anchor
        #: The decrypted head state, or None (loaded at the next :meth:`sync`).
        self.state: StoreState | None = None
        #: The branch value that maps to ``state`` (differs while a recorded commit is unpublished).
        self._served_ref: bytes | None = None

    def sync(self, *, writer: bool) -> StoreState:
        """Bring the cached state to the branch head, checking authenticity and freshness.

        A commit recorded in the keyring on top of the branch is the head: readers serve it,
        writers (``writer``, holding the writer lock) also publish it (docs/format.md §7, §8).

        Raises:
            IntegrityError: the head is not authentic, refers to a destroyed key, or its
                history is missing.
            RollbackDetectedError: the branch is behind, beside or ahead of the keyring's mark.
        """
        attempts = _ATTEMPTS
        for attempt in range(attempts):
            ref = self.git.head()
            state = self.state
            if state is not None and ref in (state.commit_id, self._served_ref) and not writer:
                return state
            self.keyring.refresh()
            hw = self.keyring.high_water
            if ref is None:
                raise IntegrityError("The store's branch refs/heads/main is missing: its history cannot be found.")
            if hw is None:
                raise IntegrityError("The store's keyring records no commit (truncated, or replaced by another file).")
            head = ref
            if ref != hw.commit_id and ref == hw.parent_id:
                if self.git.contains(hw.commit_id):
                    self._reader.open_commit(hw.commit_id)  # authenticate before serving or publishing
                    head = hw.commit_id
                    if writer and self.git.compare_and_swap(ref, head):
                        ref = head
                elif self._durable:
                    raise RollbackDetectedError(
                        f"Rollback detected: the store recorded commit #{hw.seq}, but it is missing and the "
                        "branch points at its parent."
                    )
            if state is not None and head == state.commit_id:
                if not self._anchored(hw, ref, retry=not writer and attempt < attempts - 1):
                    continue
                self._served_ref = ref
                return state
            try:
                opened = self._reader.open_commit(head)
                seq, tree_id = opened.seq, opened.tree_id
            except IntegrityError:
                # The branch moves in place (one pwrite), so a reader without the lock can read
                # a value half old, half new: no such commit. A branch that moved meanwhile is
                # read again; one that stays put is the error.
                if not writer and attempt < attempts - 1 and self.git.head() != ref:
                    continue
                raise
            problem = freshness_problem(head, seq, hw)
            if problem is not None:
                # A reader without the lock may see the keyring of commits published after it
                # read the branch; only a branch that stays put is a real rollback.
                if not writer and attempt < attempts - 1 and self.git.head() != ref:
                    continue
                raise problem
            if not self._anchored(hw, ref, retry=not writer and attempt < attempts - 1):
                continue
            self.state = None  # an incremental load consumes the old state
            # Shards are decoded when first needed; one whose node refers to a destroyed data
            # key is then refused (StoreState.current; docs/format.md §8 step 6).
            self.state = self._reader.load_state(head, seq, tree_id, state, current=True)
            self._served_ref = ref
            return self.state
        raise AssertionError("unreachable")

    def settings_in_force(self) -> bytes:
        """The settings MAC the head records (docs/format.md §1.1; b"": none, a commit of a release
        from before the record), the head brought up to date as by :meth:`sync` for a reader."""
        return self._reader.open_commit(self.sync(writer=False).commit_id).meta.settings_digest

    def _anchored(self, hw: HighWater, ref: bytes, *, retry: bool) -> bool:
        """Check the keyring's mark ``hw`` against the anchor, and move the anchor to it when the
        branch (``ref``) points at it (docs/format.md §14.2). False when the check failed and
        ``retry`` allows another attempt: a reader without the lock may have read the keyring
        before a writer published a commit and moved the anchor past it.

        Raises:
            RollbackDetectedError: the keyring is behind or beside the anchor (``retry`` False).
        """
        if self.anchor is None:
            return True
        try:
            self.anchor.observe(hw.seq, hw.commit_id, hw.parent_id, published=ref == hw.commit_id)
        except RollbackDetectedError:
            if retry:
                return False
            raise
        return True

    def committed(self, seq: int, commit_id: bytes, parent_id: bytes) -> None:
        """Move the anchor to the commit ``seq`` this store object just published. Best effort:
        the commit stands whatever happens here, and the next :meth:`sync` checks again."""
        if self.anchor is not None:
            try:
                self.anchor.observe(seq, commit_id, parent_id, published=True)
            except (MemvaultError, OSError):
                pass
