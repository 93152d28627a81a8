"""The replicas a host keeps of a root's stores in object storage, bounded across stores.

Each store of a root in object storage has a replica directory in the host's cache (docs/format.md
§12), which only grows as the host serves more stores. :class:`ReplicaCache` keeps at most
``max_count`` replicas of the root's stores and at most ``max_bytes`` bytes in them, deleting the
replicas of the least recently used stores that no process of the host has open.

What makes deleting a closed replica safe (docs/format.md §12, §14.3): the bucket is the store and
a replica is a cache of it; what the host must not forget (the store id seen at the URL, the
high-water mark that detects a rollback, the read times) lives in the host state, outside the
replica. So a replica is deleted only when the host state is on, and never one that still holds
a mark or read times (made by an older release, moved to the host state at its next open). The
next open of the store makes a new replica and pulls the history again, checked against the mark.

No process deletes a replica another opens or has open: every open holds a shared ``flock`` on a
file beside the replica (``<replica>.use``, whose time is the store's last use) until the store
is closed, and a deletion takes it exclusively without waiting, then the replica's writer lock,
renames the replica aside and removes it.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import MemvaultError
from ..hoststate import ACCESS_FILE, MARK_FILE, host_state
from ..store.lock import StoreLock

__all__ = ["ReplicaCache", "DEFAULT_REPLICAS", "USE_SUFFIX"]

#: Replicas kept in the cache per root and host by default (open ones included).
DEFAULT_REPLICAS = 256
#: The file beside a replica that its users lock (shared) and a deletion locks (exclusive).
USE_SUFFIX = ".use"
_ASIDE = ".evicting-"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _size(path: Path) -> int:
    total = 0
    for directory, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                pass  # gone meanwhile
    return total


class ReplicaCache:
    """The replicas of one root's stores on this host, bounded.

    Args:
        replica_of: the replica directory of a store id.
        max_count: replicas kept at most (0: no bound on their number).
        max_bytes: bytes kept at most in them (0: no bound on their size).
        is_open: whether this process has a store open (its replica is never deleted).
        interval: seconds between two background passes at least.
    """

    def __init__(
        self, replica_of: Callable[[str], Path], *, max_count: int, max_bytes: int, is_open: Callable[[str], bool],
        interval: float = 5.0,
    ) -> None:  # fmt: skip
        self._replica_of = replica_of
        self.max_count = max(0, max_count)
        self.max_bytes = max(0, max_bytes)
        self._is_open = is_open
        self._interval = interval
        self._cond = threading.Condition()
        self._wanted: Iterable[str] | None = None
        self._thread: threading.Thread | None = None
        self._trimming = threading.Lock()

    @property
    def bounded(self) -> bool:
        """Whether a bound is set."""
        return bool(self.max_count or self.max_bytes)

    # -- users -----------------------------------------------------------------------------------

    def hold(self, store_id: str) -> int:
        """Mark store ``store_id``'s replica in use (waiting while a deletion of it runs); returns
        the descriptor to give to :meth:`release` once the store is closed."""
        use = self._use_file(store_id)
        use.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(use, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            os.utime(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @staticmethod
    def release(fd: int) -> None:
        """The store is closed: its last use is now, and its replica may go."""
        try:
            os.utime(fd)
        finally:
            os.close(fd)

    # -- the bound --------------------------------------------------------------------------------

    def trim_soon(self, store_ids: Iterable[str]) -> None:
        """Run :meth:`trim` over ``store_ids`` in a background thread (at most once per interval)."""
        if not self.bounded:
            return
        with self._cond:
            self._wanted = store_ids
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memvault-replicas", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._wanted is None:
                    self._cond.wait()
                wanted, self._wanted = self._wanted, None
            try:
                self.trim(wanted)
            except (OSError, MemvaultError):
                pass  # the next pass tries again; a replica is only ever a cache
            time.sleep(self._interval)

    def trim(self, store_ids: Iterable[str]) -> list[str]:
        """Delete the replicas of the least recently used closed stores among ``store_ids`` until
        the rest is within the bounds (open stores' replicas count, and stay). Nothing when the
        host state is off: the replicas then keep the high-water marks. Returns the ids deleted."""
        if not self.bounded or host_state() is None:
            return []
        with self._trimming:
            present: list[tuple[float, str, Path, int]] = []
            for store_id in store_ids:
                replica = self._replica_of(store_id)
                for leftover in replica.parent.glob(replica.name + _ASIDE + "*"):
                    shutil.rmtree(leftover, ignore_errors=True)  # a deletion a crash stopped
                if not replica.is_dir():
                    continue
                try:
                    used = os.stat(self._use_file(store_id)).st_mtime
                except FileNotFoundError:
                    used = replica.stat().st_mtime
                present.append((used, store_id, replica, _size(replica) if self.max_bytes else 0))
            present.sort()
            count, total = len(present), sum(size for *_rest, size in present)
            deleted = []
            for _used, store_id, replica, size in present:
                if not ((self.max_count and count > self.max_count) or (self.max_bytes and total > self.max_bytes)):
                    break
                if self._delete(store_id, replica):
                    deleted.append(store_id)
                    count, total = count - 1, total - size
            return deleted

    def forget(self, store_id: str) -> None:
        """Remove the in-use file of a store destroyed for good."""
        try:
            os.unlink(self._use_file(store_id))
        except FileNotFoundError:
            pass

    def _use_file(self, store_id: str) -> Path:
        replica = self._replica_of(store_id)
        return replica.with_name(replica.name + USE_SUFFIX)

    def _delete(self, store_id: str, replica: Path) -> bool:
        if self._is_open(store_id) or any((replica / name).exists() for name in (MARK_FILE, ACCESS_FILE)):
            return False  # open here, or a replica that still keeps what the host must not forget
        fd = os.open(self._use_file(store_id), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW, 0o600)
        aside = replica.with_name(replica.name + _ASIDE + secrets.token_hex(4))
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another process (or an open in this one) uses it
            if self._is_open(store_id):
                return False
            try:
                with StoreLock(replica / "lock", 0.0).hold():  # no command of another process runs in it
                    os.rename(replica, aside)
            except MemvaultError:
                return False
        finally:
            os.close(fd)  # the next open waits no longer: it makes a new replica
        shutil.rmtree(aside, ignore_errors=True)
        return True
