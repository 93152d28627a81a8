"""A store object's record of reads for ``expire``: reads noted in memory, merged into the
access-time file under the writer lock, the file named in the keyring's MAC chain (docs/format.md
§1.2)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Container

from ..errors import MemvaultError
from ..keys.keyring import Keyring
from .atimes import AccessTimes
from .lock import StoreLock

__all__ = ["AccessLog"]


class AccessLog:
    """Reads of one store object and the access-time file they go to.

    Args:
        times: the access-time file.
        keyring: the store's keyring (names each new file, where ``chained()``).
        lock: the store's writer lock.
        state_lock: the store object's state lock (the keyring is read under it).
        chained: whether new files are named in the keyring (format version 3, a store of its
            own directory; a replica's file is the host's own).
        live: the path tokens of the head's files (read under the state lock); a token it
            does not contain loses its read time at a pruning flush.
        durable: sync the file (durability ``full``).
    """

    def __init__(
        self,
        times: AccessTimes,
        keyring: Keyring,
        lock: StoreLock,
        state_lock: threading.RLock,
        *,
        chained: Callable[[], bool],
        live: Callable[[], Container[bytes]],
        durable: bool,
    ) -> None:
        self.times = times
        self._keyring = keyring
        self._lock = lock
        self._state_lock = state_lock
        self._chained = chained
        self._live = live
        self._durable = durable
        times.record = self.record

    def record(self, digest: bytes) -> None:
        """Name a new access-time file in the keyring's MAC chain before it is written (the
        caller holds the writer lock)."""
        if self._chained():
            with self._state_lock:
                self._keyring.refresh()
                self._keyring.append(self._keyring.atimes_record(digest), durable=self._durable)

    def is_recorded(self, digest: bytes) -> bool:
        """Whether ``digest`` is the SHA-256 of the file the keyring names last (always true where
        files are not named)."""
        if not self._chained():
            return True
        with self._state_lock:
            self._keyring.refresh()
            return digest == self._keyring.atimes_digest

    def note_read(self, token: bytes) -> None:
        """Record a read of the file ``token`` in memory; merge now if a merge is due and the lock
        is free."""
        self.times.touch(token)
        if self.times.due():
            self.flush(wait=0.0)

    def flush(self, *, wait: float | None = None, prune: bool = False) -> bool:
        """Merge recorded reads into the file under the writer lock, waiting at most ``wait``
        seconds for it (default: the lock's timeout); ``prune`` drops files no longer in the store,
        judged on the head read again under the lock (files another process created since are
        kept). False if the lock stayed busy or the file could not be written (the reads stay
        pending)."""
        if not self.times.dirty:
            return True
        try:
            with self._lock.hold(timeout=wait):
                live = None
                if prune:
                    try:
                        with self._state_lock:
                            live = self._live()
                    except MemvaultError:
                        live = None  # the head cannot be read now: keep every read time
                self.times.flush(live, durable=self._durable)
        except (MemvaultError, OSError):
            return False
        return True
