"""Background compaction (gc) of a server root's stores in object storage (docs/server.md,
"Compaction in the background"; docs/format.md §12.8).

A server process notes, after each request on a store, where the store's log stands
(:meth:`BackgroundGc.note`); once a store has had ``every`` commits since its newest checkpoint
this process knows of, or on an ``interval``, one worker thread of the process compacts it with
:func:`~memvault.admin.remote_gc.compact_remote`, through a replica of its own that is opened for
the run and deleted after: the replica the process serves from is never locked by a gc. At most
one gc runs per process at a time; across processes and hosts the store's ``gc-lease`` decides
(a run that finds it held is skipped), and on one host a lock file beside the gc replica keeps
two processes from using it at once. A failed run is logged by error type and counted; serving
never sees it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..admin.remote_gc import compact_remote
from ..errors import ConflictError, InvalidInputError
from ..remote.checkpoint import checkpoint_of
from ..remote.compact import grace_seconds
from ..remote.layout import LOG, log_key
from ..storage.base import ObjectStore
from ..store import MemoryStore

__all__ = ["GcPolicy", "GcHost", "GcRun", "BackgroundGc", "GC_EVERY_ENV", "GC_INTERVAL_ENV", "STOP_SECONDS"]

_log = logging.getLogger("memvault.server")

#: The variables that set ``memvault serve --gc-every`` and ``--gc-interval``.
GC_EVERY_ENV = "MEMVAULT_GC_EVERY"
GC_INTERVAL_ENV = "MEMVAULT_GC_INTERVAL"
#: Longest a stopping server waits for a gc in progress (seconds); the run is then left to the
#: process's exit, which the format tolerates (docs/format.md §12.8: a stopped run leaves orphans).
STOP_SECONDS = 30.0
#: Seconds before a store whose check or run failed is tried again on its commits.
RETRY_SECONDS = 60.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class GcPolicy:
    """When a server compacts its stores in object storage.

    Attributes:
        every: commits since a store's newest checkpoint that start a gc of it (0: never by count).
        interval: seconds between passes that compact every store with a commit since its newest
            checkpoint, or deletions due (0: no passes).
        grace: the grace period of the runs (None: ``$MEMVAULT_GC_GRACE``, else one hour).
    """

    every: int = 0
    interval: float = 0.0
    grace: float | None = None

    def __post_init__(self) -> None:
        if self.every < 0 or not self.interval >= 0:
            raise InvalidInputError("Error: --gc-every and --gc-interval must be 0 (off) or more.")

    @property
    def enabled(self) -> bool:
        """Whether any gc runs in the background."""
        return self.every > 0 or self.interval > 0


class GcHost(Protocol):
    """What the background gc needs of a server root in object storage."""

    def gc_cache_dir(self, store_id: str) -> Path:
        """The directory of the replica a gc of ``store_id`` uses (not the one requests use)."""
        ...

    def open_for_gc(self, store_id: str, cache_dir: Path) -> MemoryStore:
        """Store ``store_id`` opened with its replica in ``cache_dir``."""
        ...

    def store_objects(self, store_id: str) -> ObjectStore:
        """The objects of store ``store_id`` (for listing its log)."""
        ...

    def is_live(self, store_id: str) -> bool:
        """Whether ``store_id`` is a store of the root that is not being deleted."""
        ...


@dataclass(frozen=True)
class GcRun:
    """What one background step did.

    Attributes:
        store_id: the store.
        outcome: ``compacted`` (a new checkpoint), ``current`` (no new checkpoint was due; deletions
            only), ``not_due`` (a listing found a recent enough checkpoint: no run), ``busy``
            (another host or process holds the lease or the gc replica), ``failed``.
        seconds: how long it took.
        deleted: objects deleted from the bucket.
    """

    store_id: str
    outcome: str
    seconds: float
    deleted: int = 0


class BackgroundGc:
    """The background gc of one server process (thread-safe; the worker starts at the first need).

    Args:
        host: the root.
        policy: when to compact.
        clock: monotonic seconds (tests).
    """

    def __init__(self, host: GcHost, policy: GcPolicy, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        #: Called with each :class:`GcRun` (metrics, tests); an observer must not raise.
        self.observers: list[Callable[[GcRun], None]] = []
        self._host = host
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, int] = OrderedDict()  # store id -> commits since a checkpoint that make it due
        self._known: dict[str, int] = {}  # newest checkpoint position known (-1: none)
        self._seen: dict[str, int] = {}  # newest log position noted
        self._due: dict[str, float] = {}  # when deletions a run left waiting become due
        self._retry: dict[str, float] = {}  # not before this after a failure
        self._running: str | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._next_pass = clock() + policy.interval

    # -- what the server calls ---------------------------------------------------------------------

    def note(self, store_id: str, next_commit: int) -> None:
        """A request on ``store_id`` left its replica at log position ``next_commit`` (the next
        commit's place): queue a gc if ``every`` commits have been made since the newest checkpoint
        known. Never blocks on a gc."""
        if not self.policy.enabled:
            return
        position = next_commit - 1
        with self._cond:
            if self._stopping:
                return
            self._seen[store_id] = max(position, self._seen.get(store_id, -1))
            every = self.policy.every
            due = every > 0 and position - self._known.get(store_id, -1) >= every
            if due and self._retry.get(store_id, 0.0) <= self._clock() and store_id not in self._queue:
                self._queue[store_id] = every
                self._cond.notify_all()
            self._start()

    def forget(self, store_id: str, timeout: float = STOP_SECONDS) -> None:
        """Drop ``store_id`` (it is being deleted), waiting up to ``timeout`` s for its run in progress."""
        deadline = self._clock() + timeout
        with self._cond:
            self._queue.pop(store_id, None)
            for table in (self._known, self._seen, self._due, self._retry):
                table.pop(store_id, None)
            while self._running == store_id and self._clock() < deadline:
                self._cond.wait(max(0.0, deadline - self._clock()))

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        """Stop the worker: no new run starts; wait up to ``timeout`` s for the one in progress.
        Returns whether the worker has stopped."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        if thread.is_alive():
            _log.warning("a background gc is still running at shutdown; it is left to the process's exit")
            return False
        return True

    def running(self) -> str | None:
        """The store a gc runs on now, or None."""
        with self._cond:
            return self._running

    def idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until nothing is queued or running; returns whether it is so."""
        deadline = self._clock() + timeout
        with self._cond:
            while (self._queue or self._running is not None) and self._clock() < deadline:
                self._cond.wait(max(0.0, min(0.1, deadline - self._clock())))
            return not self._queue and self._running is None

    # -- the worker ----------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="memvault-gc", daemon=True)
            self._thread.start()

    def _take(self) -> tuple[str, int] | None:
        """The next store to look at and its threshold (0: run without a listing first)."""
        with self._cond:
            while not self._stopping:
                if self.policy.interval > 0 and self._clock() >= self._next_pass:
                    self._pass()
                if self._queue:
                    store_id, threshold = self._queue.popitem(last=False)
                    self._running = store_id
                    return store_id, threshold
                wait = self._next_pass - self._clock() if self.policy.interval > 0 else None
                self._cond.wait(None if wait is None else max(0.01, wait))
            return None

    def _pass(self) -> None:
        """Queue every store with a commit since its newest checkpoint known, or deletions due (the
        caller holds the condition)."""
        now = self._clock()
        self._next_pass = now + self.policy.interval
        for store_id, position in self._seen.items():
            if self._retry.get(store_id, 0.0) > now or store_id in self._queue:
                continue
            if self._due.get(store_id, float("inf")) <= now:
                self._queue[store_id] = 0
            elif position > self._known.get(store_id, -1):
                self._queue[store_id] = 1

    def _work(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            store_id, threshold = taken
            try:
                self._step(store_id, threshold)
            except Exception as err:  # the worker never dies: the next note tries again
                _log.warning("background gc of %s failed: %s", store_id, type(err).__name__)
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def _step(self, store_id: str, threshold: int) -> None:
        started = self._clock()
        if not self._host.is_live(store_id):
            return
        with self._cond:
            position = self._seen.get(store_id, -1)
            if threshold > 0 and position - self._known.get(store_id, -1) < threshold:
                return  # a run since it was queued has compacted it
        try:
            if threshold > 0:
                newest = self._newest_checkpoint(store_id, position - threshold)
                if newest is not None:  # another process or host compacted it meanwhile
                    with self._cond:
                        self._known[store_id] = max(newest, self._known.get(store_id, -1))
                    self._report(GcRun(store_id, "not_due", self._clock() - started))
                    return
            run = self._compact(store_id, started)
        except Exception as err:
            with self._cond:
                self._retry[store_id] = self._clock() + RETRY_SECONDS
            _log.warning("background gc of %s failed: %s", store_id, type(err).__name__)
            self._report(GcRun(store_id, "failed", self._clock() - started))
            return
        self._report(run)

    def _newest_checkpoint(self, store_id: str, after: int) -> int | None:
        """The position of the newest checkpoint of ``store_id`` past ``after``, or None (one
        listing of the log from ``after`` on)."""
        objects = self._host.store_objects(store_id)
        keys = objects.list(LOG, start_after=log_key(after) if after >= 0 else "")
        found = [p for info in keys if (p := checkpoint_of(info.key)) is not None and p > after]
        return max(found, default=None)

    def _compact(self, store_id: str, started: float) -> GcRun:
        cache = self._host.gc_cache_dir(store_id)
        cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(cache.with_name(cache.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return GcRun(store_id, "busy", self._clock() - started)  # another process of this host runs it
            try:
                store = self._host.open_for_gc(store_id, cache)
                try:
                    report = compact_remote(store, self.policy.grace)
                    remote = store.remote
                    position = remote.next_commit - 1 if remote is not None else -1
                finally:
                    store.close()
            except ConflictError:
                return GcRun(store_id, "busy", self._clock() - started)  # another host holds the lease
            finally:
                shutil.rmtree(cache, ignore_errors=True)  # a cache: the next run makes a new one
        finally:
            os.close(fd)
        with self._cond:
            self._known[store_id] = max(position, self._known.get(store_id, -1))
            if sum(report.waiting.values()):
                self._due[store_id] = self._clock() + grace_seconds(self.policy.grace)
            else:
                self._due.pop(store_id, None)
        deleted = sum(report.deleted.values())
        outcome = "compacted" if report.checkpoint is not None else "current"
        seconds = self._clock() - started
        _log.info("background gc of %s: %s at log position %d, %d objects deleted, %d waiting, %.1f s", store_id,
                  outcome, position, deleted, sum(report.waiting.values()), seconds)  # fmt: skip
        return GcRun(store_id, outcome, seconds, deleted)

    def _report(self, run: GcRun) -> None:
        for observer in list(self.observers):
            try:
                observer(run)
            except Exception as err:  # an observer never stops the worker
                _log.warning("a background gc observer failed: %s", type(err).__name__)
