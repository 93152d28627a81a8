"""Destroying a whole store (``memvault shred-store``): every key slot and data key first,
overwritten in place, so that nothing in the store, or in any copy of it made afterwards, can be
decrypted; then everything else. What it cannot reach: SECURITY.md, "Destroying a store".
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..fsutil import wipe_file
from ..store import MemoryStore
from ..store.journal import FILE_NAME as JOURNAL_FILE

__all__ = ["ShredReceipt", "shred_store", "KEY_MATERIAL"]

#: The files of a store directory that hold or name keys, destroyed first: the keyring (every
#: wrapped data key), the commit journal (those of recent commits), the configuration, the
#: access-time file and a replica's own files.
KEY_MATERIAL = ("keyring", JOURNAL_FILE, "memvault.json", "access", "remote-mark", "remote-packs")


@dataclass(frozen=True)
class ShredReceipt:
    """What :func:`shred_store` destroyed, for an operator's records."""

    store_id: str
    time: float
    key_slots: int
    data_keys: int
    commits: int
    files_overwritten: int
    objects_deleted: int = 0
    #: Where copies may remain that this could not reach.
    remaining_copies: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "store_id": self.store_id,
            "time": self.time,
            "key_slots": self.key_slots,
            "data_keys": self.data_keys,
            "commits": self.commits,
            "files_overwritten": self.files_overwritten,
            "objects_deleted": self.objects_deleted,
            "remaining_copies": list(self.remaining_copies),
        }


#: Copies a store's destruction cannot reach.
REMAINING = (
    "copies and backups of the store made before (each still opens with its key slots' secrets)",
    "exports written with `memvault export`, and transcripts or logs that saw the content",
    "old disk blocks on copy-on-write filesystems, snapshots or SSDs, which may keep what was overwritten",
    "the keys a provider holds (a KMS key, an HSM key): disable or delete them if they served only this store",
)


def shred_store(store: MemoryStore, *, after_keys: Callable[[], None] | None = None) -> ShredReceipt:
    """Destroy the store ``store`` is open on: its key slots and keyring first (each overwritten
    with zeros in place, fsynced, removed), then every other file; for a store in object storage,
    every object under its prefix, then the host's cache; what the host state keeps of it (its
    anchor; a URL's high-water mark, read times and store id). ``store`` must not be used afterwards.

    Args:
        after_keys: called once the key material is destroyed, before the rest goes (tests).

    Returns:
        A receipt: store id, time, how many key slots, data keys and commits there were.
    """
    root = store.root
    with store.writing():
        store.keyring.refresh()
        data_keys = len(store.keyring.scan(parsed_only=True).deks)
        commits = store.head[1] + 1 if store.keyring.high_water is not None else 0
        slots = sorted((root / "keys").glob("*.json"))
        deleted = 0
        remaining: tuple[str, ...] = REMAINING
        if store.remote is not None:
            # The bucket before this host's cache: a run stopped midway can be run again from here.
            warning = store.remote.versioning_warning()
            remaining += (warning,) if warning else ()
            objects = store.remote.objects
            keys = [info.key for info in objects.list("")]
            # Key slots and data keys first, then the rest (the log last: a reader sees no store).
            keys.sort(key=lambda k: (not k.startswith(("keys/", "deks/", "memvault.json")), k.startswith("log/")))
            for key in keys:
                objects.delete(key)
                deleted += 1
        overwritten = 0
        for path in [*slots, *(root / name for name in KEY_MATERIAL)]:
            if path.exists():
                wipe_file(path)
                overwritten += 1
        if store.host is not None:  # this host's mark and read times of it, and the store id it saw there
            store.host.forget(read_times=True)
        if store.anchor is not None:
            store.anchor.forget()
        if after_keys is not None:
            after_keys()
        store.git.close()
        shutil.rmtree(root)
    return ShredReceipt(store.store_id.hex(), time.time(), len(slots), data_keys, commits, overwritten, deleted,
                        remaining)  # fmt: skip
