"""The memory stores a server process keeps open: at most ``limit`` at once (the least recently
used closed first), each opened by one request while the others for it wait, and at most
``per_store`` requests in progress per store.

Why each bound (docs/server.md, "Many stores"): the server answers requests from a pool of 40
threads, so requests waiting on one slow store (its writer lock held by another process, an open
that hangs) must never take every thread; a store's open waits only for another open of the same
store; and an evicted store whose writer lock is busy (closing merges the recorded reads under
it) is closed by a thread of its own, never in the request of another store.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..errors import LockedError, MemvaultError
from ..memories import Memories
from ..store import MemoryStore

__all__ = ["OpenStores", "close_quietly"]


def close_quietly(store: MemoryStore) -> None:
    """Close ``store``; a store that fails to close keeps its leftovers for the next writer."""
    try:
        store.close()
    except MemvaultError:
        pass


class _Open:
    """An open memory store and how many requests use it now."""

    def __init__(self, memories: Memories) -> None:
        self.memories = memories
        self.users = 0


class _Closer:
    """Closes, in a thread of its own, the stores handed to it (started at the first)."""

    def __init__(self, closed: Callable[[Memories], None]) -> None:
        self._queue: list[tuple[str, Memories]] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy: list[str] = []
        self._closed = closed

    def close_later(self, store_id: str, memories: Memories) -> None:
        with self._cond:
            self._queue.append((store_id, memories))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memvault-closer", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._queue) + len(self._busy)

    def holds(self, store_id: str) -> bool:
        with self._cond:
            return store_id in self._busy or any(queued == store_id for queued, _store in self._queue)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                store_id, memories = self._queue.pop(0)
                self._busy.append(store_id)
            try:
                close_quietly(memories.store)
            finally:
                self._closed(memories)
                with self._cond:
                    self._busy.remove(store_id)
                    self._cond.notify_all()

    def drain(self) -> None:
        """Wait until every store handed over is closed."""
        with self._cond:
            while self._queue or self._busy:
                self._cond.wait()


class OpenStores:
    """The open memory stores of one process. Thread-safe.

    Args:
        opener: opens the store of an id (its :class:`Memories`); called by one thread per store at once.
        limit: how many stores stay open when no request uses them.
        per_store: how many requests one store may have in progress at once.
        closed: called with a store's operations once the store is closed (however it is closed).
    """

    def __init__(
        self, opener: Callable[[str], Memories], *, limit: int, per_store: int,
        closed: Callable[[Memories], None] = lambda _memories: None,
    ) -> None:  # fmt: skip
        self._opener = opener
        self._limit = max(1, limit)
        self._per_store = max(1, per_store)
        self._closed = closed
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._lock = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}
        self._in_progress: dict[str, int] = {}
        self._closer = _Closer(closed)

    @contextmanager
    def use(self, store_id: str) -> Iterator[Memories]:
        """The operations on store ``store_id``, opened if it is not (waiting only for another
        open of the same store), kept open after.

        Raises:
            LockedError: the store has ``per_store`` requests in progress already (nothing waited).
            And what opening the store raises.
        """
        with self._lock:
            count = self._in_progress.get(store_id, 0)
            if count >= self._per_store:
                raise LockedError("Error: The memory store is busy: too many requests wait for it; retry shortly.")
            self._in_progress[store_id] = count + 1
        try:
            entry = self._take(store_id)
            try:
                yield entry.memories
            finally:
                with self._lock:
                    entry.users -= 1
        finally:
            with self._lock:
                count = self._in_progress.pop(store_id) - 1
                if count:
                    self._in_progress[store_id] = count
            self._trim()

    def _take(self, store_id: str) -> _Open:
        with self._lock:
            entry = self._open.get(store_id)
            if entry is not None:
                self._open.move_to_end(store_id)
                entry.users += 1
                return entry
            gate = self._opening.setdefault(store_id, threading.Lock())
        with gate:
            with self._lock:
                entry = self._open.get(store_id)
                if entry is not None:
                    entry.users += 1
                    return entry
            try:
                fresh = _Open(self._opener(store_id))
            finally:
                with self._lock:
                    if self._opening.get(store_id) is gate:
                        del self._opening[store_id]  # no gate stays behind, opened or not
            with self._lock:
                entry = self._open.setdefault(store_id, fresh)  # another gate's open may have won
                entry.users += 1
            if entry is not fresh:
                self._close(fresh.memories)
            return entry

    def _trim(self) -> None:
        closing: list[tuple[str, _Open]] = []
        with self._lock:
            for store_id in list(self._open):
                if len(self._open) - len(closing) <= self._limit:
                    break
                if self._open[store_id].users == 0:
                    closing.append((store_id, self._open.pop(store_id)))
        for store_id, entry in closing:
            # Recorded reads are merged under the store's writer lock: if it is busy, the store is
            # closed in the background (waiting there), never in this request.
            if entry.memories.store.flush_access_times(wait=0.0, prune=True):
                self._close(entry.memories)
            else:
                self._closer.close_later(store_id, entry.memories)

    def _close(self, memories: Memories, *, quietly: bool = True) -> None:
        try:
            if quietly:
                close_quietly(memories.store)
            else:
                memories.store.close()
        finally:
            self._closed(memories)

    def evict(self, store_id: str) -> None:
        """Close store ``store_id`` now if it is open (its deletion follows)."""
        with self._lock:
            entry = self._open.pop(store_id, None)
        if entry is not None:
            self._close(entry.memories, quietly=False)

    def indexed(self, store_id: str) -> bool:
        """Whether store ``store_id`` is open with its lineage index built."""
        with self._lock:
            entry = self._open.get(store_id)
        return entry is not None and entry.memories.index.seq >= 0

    def is_open(self, store_id: str) -> bool:
        """Whether store ``store_id`` is open, being opened or being closed in this process."""
        with self._lock:
            if store_id in self._open or store_id in self._opening or store_id in self._in_progress:
                return True
        return self._closer.holds(store_id)

    def count(self) -> int:
        """How many stores are open now (kept for requests, or being closed)."""
        with self._lock:
            return len(self._open) + self._closer.pending()

    def close(self) -> None:
        """Close every open store (after those being closed in the background)."""
        with self._lock:
            entries = list(self._open.values())
            self._open.clear()
        self._closer.drain()
        for entry in entries:
            self._close(entry.memories, quietly=False)
