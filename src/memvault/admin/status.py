"""``memvault status``: what a store is and holds, at a glance (no content, no secret).

:func:`store_status` gathers it into a :class:`StoreStatus`: where the store is, its format
version and durability, the files and bytes of the head, the bytes of history on disk, its key
slots, the last commit, whether a writer holds the lock, and for a store in object storage the
objects under its prefix by kind and its host's cache.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import StorageError
from ..keys.slots import load_slots
from ..remote.inventory import BucketUsage, Usage, superseded_usage, usage_of
from ..remote.layout import PACKS
from ..store import MemoryStore
from ..store.lock import StoreLock

__all__ = ["StoreStatus", "LastCommit", "LockStatus", "RemoteStatus", "store_status"]


@dataclass(frozen=True)
class LastCommit:
    """The head commit: id (hex), sequence number, time (seconds since the epoch), actor, command."""

    commit_id: str
    seq: int
    time: float
    actor: str
    command: str

    def to_json(self) -> dict[str, Any]:
        """The time as ISO 8601 in UTC with its offset, to the second; the exact seconds since
        the epoch as ``timestamp``."""
        when = datetime.fromtimestamp(self.time, timezone.utc).isoformat(timespec="seconds")
        return {
            "id": self.commit_id,
            "seq": self.seq,
            "time": when,
            "timestamp": self.time,
            "actor": self.actor,
            "command": self.command,
        }


@dataclass(frozen=True)
class LockStatus:
    """The writer lock of this directory: ``held`` by another writer or not; who holds it when
    the lock file names its holder (``pid``/``host``; None when unknown)."""

    held: bool
    pid: int | None = None
    host: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"held": self.held, "pid": self.pid, "host": self.host}


@dataclass(frozen=True)
class RemoteStatus:
    """A store in object storage: who holds its objects, the bytes of its packs there, the objects
    under its prefix by kind, and this host's cache of it (directory, bytes of packs in it, its
    bound, bytes of every file of the replica)."""

    description: str
    history_bytes: int
    cache_dir: str
    cache_bytes: int
    cache_limit_bytes: int
    bucket: BucketUsage
    replica_bytes: int
    #: Objects the newest checkpoint supersedes: ``memvault gc`` deletes them after its grace period.
    superseded: Usage = Usage()

    def to_json(self) -> dict[str, Any]:
        return {
            "objects": self.description,
            "history_bytes": self.history_bytes,
            "cache_dir": self.cache_dir,
            "cache_bytes": self.cache_bytes,
            "cache_limit_bytes": self.cache_limit_bytes,
            "bucket": self.bucket.to_json(),
            "replica_bytes": self.replica_bytes,
            "superseded": self.superseded.to_json(),
        }


@dataclass(frozen=True)
class StoreStatus:
    """A store at a glance (:func:`store_status`)."""

    location: str  #: the store directory, or the URL of a store in object storage
    store_id: str
    format_version: int
    durability: str
    files: int  #: files at the head (directories not counted)
    bytes: int  #: plaintext bytes of every file at the head
    history_bytes: (
        int  #: bytes of pack files on this host's disk, as max_stored_bytes counts them (object storage: its cache)
    )
    packs: int
    loose_objects: int
    key_slots: dict[str, int]  #: slot kind -> how many (passphrase, keyfile, provider)
    last_commit: LastCommit
    lock: LockStatus
    remote: RemoteStatus | None = None
    branches: tuple[str, ...] = field(default_factory=tuple)  #: dream branches (open or merged)

    @property
    def key_slot_count(self) -> int:
        return sum(self.key_slots.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "store_id": self.store_id,
            "format_version": self.format_version,
            "durability": self.durability,
            "files": self.files,
            "bytes": self.bytes,
            "history_bytes": self.history_bytes,
            "packs": self.packs,
            "loose_objects": self.loose_objects,
            "key_slots": {"count": self.key_slot_count, "kinds": dict(sorted(self.key_slots.items()))},
            "last_commit": self.last_commit.to_json(),
            "lock": self.lock.to_json(),
            "remote": None if self.remote is None else self.remote.to_json(),
            "branches": list(self.branches),
        }


def _lock_status(store: MemoryStore) -> LockStatus:
    """Whether another writer holds the store's lock now (probed without waiting), and who, as
    its lock file says (:meth:`~memvault.store.lock.StoreLock.holder`)."""
    probe = StoreLock(store.root / "lock", timeout=0.0)
    if not probe.held():
        return LockStatus(held=False)
    holder = probe.holder()
    return LockStatus(held=True) if holder is None else LockStatus(held=True, pid=holder.pid, host=holder.host)


def _tree_bytes(root: str | os.PathLike[str]) -> int:
    """Bytes of the regular files under ``root`` (symbolic links not followed; files that vanish
    meanwhile not counted)."""
    total = 0
    for top, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(top, name))
                total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def store_status(store: MemoryStore, location: str | None = None) -> StoreStatus:
    """The status of ``store``; ``location`` is what to call it (default: its directory).

    Reads the head (a store in object storage first takes in other hosts' commits), the key
    slot files and the pack directory; for a store in object storage lists every object under
    its prefix and sizes the replica directory. Decrypts no content.
    """
    commit_id, _seq = store.head
    state = store.state_at(commit_id)
    meta = store.commit_meta(commit_id)
    kinds: Counter[str] = Counter(slot.kind for slot in load_slots(store.root / "keys"))
    remote = None
    if store.remote is not None:
        objects = store.remote.objects
        listed = objects.list("")
        remote = RemoteStatus(
            description=objects.description,
            history_bytes=sum(i.size for i in listed if i.key.startswith(PACKS) and i.key.endswith(".pack")),
            cache_dir=str(store.root),
            cache_bytes=store.git.packs.total_bytes(),
            cache_limit_bytes=store.remote.cache_bytes,
            bucket=usage_of(listed),
            replica_bytes=_tree_bytes(store.root),
            superseded=superseded_usage(listed),
        )
    branches: tuple[str, ...] = ()
    with contextlib.suppress(StorageError):
        branches = tuple(store.branches())
    return StoreStatus(
        location=location if location is not None else str(store.root),
        store_id=store.store_id.hex(),
        format_version=store.format_version,
        durability=store.settings.durability,
        files=state.file_count,
        bytes=state.total_bytes,
        history_bytes=store.git.packs.total_bytes(),
        packs=store.git.pack_count(),
        loose_objects=store.git.loose_count(),
        key_slots=dict(kinds),
        last_commit=LastCommit(commit_id.decode(), meta.seq, meta.time, meta.actor, meta.command),
        lock=_lock_status(store),
        remote=remote,
        branches=branches,
    )
