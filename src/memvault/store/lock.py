"""The store's writer lock: ``flock`` on the store's ``lock`` file, a thread lock beside it, and
the line in the file that names the holder (docs/format.md §1)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import LockedError, StorageError
from ..fsutil import FILE_MODE, O_READ, pwrite_all

__all__ = ["DEFAULT_LOCK_TIMEOUT", "LockHolder", "StoreLock", "set_lock_wait_notice"]

#: Seconds a writer waits for the store lock before :class:`~memvault.errors.LockedError`
#: (``MemoryStore.open(..., lock_timeout=...)`` overrides it per store object).
DEFAULT_LOCK_TIMEOUT = 30.0


@dataclass(frozen=True)
class LockHolder:
    """Who holds a store's writer lock, as its lock file says: a process id and a host name."""

    pid: int
    host: str

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"


#: Most bytes of a lock file that are read for its holder (one short JSON line).
_HOLDER_MAX_BYTES = 512

#: The line naming this process in a lock file, by process id.
_holder_lines: dict[int, bytes] = {}

#: ``(callback, after)`` of :func:`set_lock_wait_notice`, or None.
_wait_notice: tuple[Callable[[LockHolder | None, float], None], float] | None = None


def set_lock_wait_notice(callback: Callable[[LockHolder | None, float], None] | None, *, after: float = 1.0) -> None:
    """Have ``callback(holder, timeout)`` called once whenever a writer of this process has
    waited ``after`` seconds for a store's writer lock and still waits (``holder``: who the lock
    file names, or None; ``timeout``: seconds the writer waits in all). The library never prints:
    the command line installs one that tells the person at the terminal. None removes it. The
    callback runs on the waiting thread; an exception it raises ends the wait."""
    global _wait_notice
    _wait_notice = None if callback is None else (callback, after)


def _host_name() -> str:
    return os.uname().nodename


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


class StoreLock:
    """The store-wide writer lock: ``flock`` on a lock file, plus a thread lock.

    ``flock`` is released by the kernel when a process dies, so a crashed writer never leaves a
    stale lock behind, and a live holder is never overridden: there is no age or PID heuristic
    that could steal it. Separate ``open()`` calls get separate lock descriptions, so threads of
    one process exclude each other too; the thread lock keeps them from spinning.

    A writer that takes the lock makes the lock file name it, one line of JSON
    (``{"host": ..., "pid": ...}``) written only when the file names someone else, and left there
    after the lock is released: only to tell a waiting writer (:func:`set_lock_wait_notice`) and
    ``memvault status`` who holds it (:meth:`holder`, which first checks that someone does). The
    lock never depends on it; an empty file (older memvault versions) names nobody.

    Waiting is bounded by ``timeout`` seconds in all (thread lock and ``flock`` together); then
    :class:`~memvault.errors.LockedError` says how long the caller waited. A lock file that
    cannot be opened (read-only store, no space) is a :class:`~memvault.errors.StorageError`.
    """

    def __init__(self, path: Path, timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        self._path = path
        self.timeout = timeout
        self._thread_lock = threading.Lock()

    def _locked(self, start: float) -> LockedError:
        waited = time.monotonic() - start
        return LockedError(
            f"The memory store is locked by another writer (waited {waited:.1f} s); retry shortly.",
            waited=waited,
        )

    def held(self) -> bool:
        """Whether a writer holds the lock now, probed with a non-blocking shared ``flock`` taken
        and released at once (a writer trying to take the lock meanwhile tries once more).
        Advisory: it may be taken or released right after."""
        try:
            fd = os.open(self._path, O_READ)
        except OSError:
            return False
        try:
            return self._held(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _held(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def holder(self) -> LockHolder | None:
        """Who holds the lock, as the lock file names it: None if nobody holds it now
        (:meth:`held`), or the file names nobody (a file that does not parse, a writer of an older
        memvault version when no writer of this one held the lock before it) or a process of this
        host that no longer exists. Advisory: the holder may have finished meanwhile, and the file
        names a new holder only once it has taken the lock."""
        try:
            fd = os.open(self._path, O_READ)
        except OSError:
            return None
        try:
            if not self._held(fd):
                return None  # free: the file names the last holder
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = os.pread(fd, _HOLDER_MAX_BYTES + 1, 0)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > _HOLDER_MAX_BYTES:
            return None
        try:
            obj = json.loads(data)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        pid, host = obj.get("pid"), obj.get("host")
        if not (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and isinstance(host, str) and host):
            return None
        if host == _host_name() and not _alive(pid):
            return None
        return LockHolder(pid, host[:255])

    @contextmanager
    def hold(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock, waiting at most ``timeout`` seconds (default: the lock's timeout)."""
        start = time.monotonic()
        limit = self.timeout if timeout is None else timeout
        if not self._thread_lock.acquire(timeout=min(max(limit, 0.0), threading.TIMEOUT_MAX)):
            raise self._locked(start)
        try:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
            except OSError as err:
                raise StorageError.from_os_error(err) from None
            try:
                self._acquire(fd, start, limit)
                try:
                    self._name_holder(fd)
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        finally:
            self._thread_lock.release()

    @staticmethod
    def _name_holder(fd: int) -> None:
        """Write this process's pid and host into the lock file unless it names them already (best
        effort, never synced). The name stays after the lock is released: a file written at every
        acquire and release would be one more file for each durable commit's ``syncfs`` to flush."""
        pid = os.getpid()
        line = _holder_lines.get(pid)
        if line is None:  # (once per process: a forked child has another pid)
            line = json.dumps({"host": _host_name(), "pid": pid}, sort_keys=True).encode() + b"\n"
            _holder_lines[pid] = line
        try:
            if os.pread(fd, _HOLDER_MAX_BYTES, 0) == line:
                return
            os.ftruncate(fd, 0)
            pwrite_all(fd, line, 0)
        except OSError:
            pass  # no space, a read-only file: the lock itself holds

    def _acquire(self, fd: int, start: float, timeout: float) -> None:
        deadline = start + timeout
        delay = 0.0005
        notice = _wait_notice
        tries = 0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                tries += 1
                now = time.monotonic()
                if now >= deadline and tries > 1:
                    raise self._locked(start) from None
                if now >= deadline:  # (once more: a probe of :meth:`held` holds it for microseconds)
                    time.sleep(0.001)
                    continue
                if notice is not None and now - start >= notice[1]:
                    callback, notice = notice[0], None
                    callback(self.holder(), timeout)
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 0.02)
