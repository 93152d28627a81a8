"""What ties a store object to this host: for a store in object storage, the replica it works on
(attached at open, pulled before every command) and what the host keeps about that store outside
the replica, in the host state (its high-water mark of the log, its read times); for a store
directory, the host's anchor (docs/format.md §12, §14).

:class:`Hosting` is a mixin of :class:`~memvault.store.MemoryStore`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..hoststate import Anchor, HighWaterMark, UrlState
from ..remote.replica import Replica
from .replicated import Placement, run_racing

if TYPE_CHECKING:
    from ..git.repo import GitStore
    from ..keys.keyring import Keyring
    from ..keys.slots import Subkeys
    from .atimes import AccessTimes
    from .commit import CommitWriter
    from .head import Head

__all__ = ["Hosting"]

T = TypeVar("T")


class Hosting:
    """A store object's replica and host state (a mixin of the store)."""

    #: For a store in object storage: what this host keeps about it (:mod:`memvault.hoststate`).
    host: UrlState | None = None

    if TYPE_CHECKING:  # what the store provides (its own definitions are checked against these)
        root: Path
        store_id: bytes
        keyring: Keyring
        git: GitStore
        remote: Replica | None
        anchor: Anchor | None
        access_times: AccessTimes
        _keys: Subkeys
        _durable: bool
        _head: Head
        _writer_of_commits: CommitWriter
        _state_lock: threading.RLock
        _writer: Callable[[], AbstractContextManager[None]]

    def attach_replica(self, placed: Placement) -> None:
        """Make this store object a replica of the store ``placed`` names (commits go there first),
        its high-water mark and read times kept where the host state says (no anchor: the mark
        guards a replica). :meth:`MemoryStore.open` and ``create`` call it; nothing else should."""
        mark = HighWaterMark(placed.host.mark_path, self._keys.keyring, self.store_id)
        self.remote = Replica(placed.objects, self.root, self.store_id, self.keyring, self.git, mark,
                              durable=self._durable)  # fmt: skip
        self._writer_of_commits.publish = self.remote.publish
        self.anchor = self._head.anchor = None
        self.host = placed.host
        self.access_times.move_to(placed.host.access_path)
        if not self.access_times.recorded() and self.root.joinpath("repo").is_dir():
            self.access_times.create(durable=self._durable)  # the host's own (docs/format.md §12)

    def pull(self) -> None:
        """Take in the commits other hosts made (a store in object storage; nothing for a store
        directory), under the writer lock, before the state lock. Every read and write does this
        first.

        Raises:
            RollbackDetectedError, IntegrityError, ServiceError: see :meth:`Replica.pull`.
        """
        if self.remote is not None:
            with self._writer(), self._state_lock:
                self.remote.pull()

    def racing(self, body: Callable[[], T]) -> T:
        """Run ``body``, one command making one commit (the caller holds the writer lock): in a
        store in object storage, after taking in other hosts' commits, and again on the newer head
        each time another host committed first (:func:`~memvault.store.replicated.run_racing`);
        in a store directory, once."""
        if self.remote is None:
            return body()
        remote = self.remote

        def once() -> T:
            remote.pull(courtesy=True)
            return body()

        return run_racing(once, remote)

    def release_host(self) -> None:
        """Stop the replica's request threads (its background requests finish first) and close
        the anchor file (:meth:`MemoryStore.close`)."""
        if self.remote is not None:
            self.remote.close()
        if self.anchor is not None:
            self.anchor.close()
