"""Work a page starts and shows when done: verify, audit, a dream's review, a redaction's dry run,
an undo's preview, building the lineage index of a large history.

A page asks for a job by key (what it computes, on which store, at which head) and waits a
short while for it; if it is not done by then the page says so and reloads itself, so no request
holds a connection for the length of a full check. A finished job's result is kept (the newest
:data:`KEEP` jobs) and served to the next request with the same key. Jobs only read: every write
of the UI runs in the request that confirmed it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from ..errors import MemvaultError

__all__ = ["Job", "Jobs", "KEEP"]

_log = logging.getLogger("memvault.ui")
#: Jobs (running or done) remembered.
KEEP = 64
#: Jobs running at once; a job beyond waits for a slot.
WORKERS = 2


@dataclass
class Job:
    """One computation and what came of it."""

    key: Hashable
    label: str
    started: float = field(default_factory=time.time)
    finished: float | None = None
    result: Any = None
    #: A memvault error's message (safe to show), or a generic one for anything else.
    error: str = ""
    #: ``(done, total)`` when the work reports it.
    progress: tuple[int, int] | None = None
    #: What the work raised (for a caller that raises it again), if anything.
    raised: Exception | None = None
    done_event: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def done(self) -> bool:
        return self.done_event.is_set()

    @property
    def seconds(self) -> float:
        """How long it ran (so far)."""
        return (self.finished or time.time()) - self.started


class Jobs:
    """The jobs of one UI process; thread-safe. Each job runs in a daemon thread (a job only
    reads, so stopping the process mid-job loses nothing), at most ``workers`` at once."""

    def __init__(self, workers: int = WORKERS, *, expected: tuple[type[Exception], ...] = (MemvaultError,)) -> None:
        self._lock = threading.Lock()
        self._jobs: OrderedDict[Hashable, Job] = OrderedDict()
        self._slots = threading.BoundedSemaphore(workers)
        #: Errors a job may raise that are answers, not faults (not logged).
        self._expected = expected

    def get(self, key: Hashable) -> Job | None:
        """The job with this key, if remembered."""
        with self._lock:
            return self._jobs.get(key)

    def run(self, key: Hashable, label: str, work: Callable[[Job], Any], *, wait: float = 0.0,
            again: bool = True) -> Job:  # fmt: skip
        """The job with this key: the remembered one (unless it failed and ``again``), else a new
        one running ``work(job)``. Waits up to ``wait`` seconds for it to finish."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and not (again and job.done and job.error):
                self._jobs.move_to_end(key)
                fresh = False
            else:
                job = Job(key, label)
                self._jobs[key] = job
                while len(self._jobs) > KEEP:
                    self._jobs.popitem(last=False)
                fresh = True
        if fresh:
            threading.Thread(target=self._run, args=(job, work), name="memvault-ui-job", daemon=True).start()
        if wait > 0:
            job.done_event.wait(wait)
        return job

    def _run(self, job: Job, work: Callable[[Job], Any]) -> None:
        with self._slots:
            try:
                job.result = work(job)
            except Exception as err:
                job.raised = err
                if isinstance(err, MemvaultError):
                    job.error = str(err)
                else:  # never the message: it may hold content or host paths
                    if not isinstance(err, self._expected):
                        _log.error("review UI job %s failed: %s", job.label, type(err).__name__)
                    job.error = "The job failed with an internal error."
            finally:
                job.finished = time.time()
                job.done_event.set()

    def forget(self, key: Hashable) -> None:
        """Drop a job (its result is stale)."""
        with self._lock:
            self._jobs.pop(key, None)
