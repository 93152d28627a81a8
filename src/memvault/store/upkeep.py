"""Store upkeep: finishing what crashed writers left, and packing (``memvault gc``, and
:meth:`MemoryStore.close <memvault.store.MemoryStore.close>` after many writes).

The store passes its collaborators in: its directory, repository, keyring, writer lock and state
lock (the keyring is read and rewritten under it).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..errors import StorageError
from ..fsutil import wipe_leftovers
from ..git.repo import GitStore
from ..keys.keyring import Keyring
from .config import STORE_FILE
from .lock import StoreLock

__all__ = ["sweep_leftovers", "maintain"]


def sweep_leftovers(root: Path, git: GitStore, keyring: Keyring, state_lock: threading.RLock) -> None:
    """Wipe what crashed writers left: temporary files of atomic writes, key-slot removals and
    keyring rewrites (they may hold wrapped keys), unfinished packs; purge the records of keys a
    redaction destroyed but could not purge. Caller holds the writer lock."""
    wipe_leftovers(root / "keys", (".json.tmp-",))
    wipe_leftovers(root, (f"{STORE_FILE}.tmp-", ".keyring.rewrite-"))
    git.sweep_pack_leftovers()
    with state_lock:
        keyring.purge()


def maintain(
    lock: StoreLock,
    git: GitStore,
    keyring: Keyring,
    state_lock: threading.RLock,
    *,
    seconds: float | None = None,
    wait: float | None = None,
    keep_dirs: bool = False,
    merge_bytes: int | None = None,
) -> tuple[int, int]:
    """Pack loose objects (for about ``seconds``; default: all), merge the smallest packs
    (holding at most ``merge_bytes`` together, if given), purge records of destroyed keys; every
    object stays readable throughout (docs/format.md §7). ``wait``: seconds to wait for the
    writer lock (default: the lock's timeout); ``keep_dirs``: keep emptied fan-out directories.
    Returns ``(objects packed, packs merged)``.

    Raises:
        LockedError: the lock was not free in time. StorageError: a filesystem error.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    with lock.hold(timeout=wait):
        try:
            git.sweep_pack_leftovers()
            with state_lock:  # records of destroyed keys an interrupted redaction left
                keyring.purge()
            packed = git.pack_loose(deadline=deadline, keep_dirs=keep_dirs)
            merged = git.consolidate_packs(max_bytes=merge_bytes)
        except OSError as err:
            raise StorageError.from_os_error(err) from None
    return packed, merged
