"""What a store's prefix in object storage holds, read from listings and log records only (no
content, no key): its objects and bytes by kind (``memvault status``), and the objects no commit
needs (``memvault verify --remote``): packs and indexes that no committed log record names (a host
uploaded them and then lost the race for its commit number), and data key objects of destroyed
keys or of keys the store does not know (a host that lost a race could not delete its own). Nothing
here deletes anything. docs/format.md §12.7."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import IntegrityError
from ..storage.base import ObjectInfo, ObjectStore
from .checkpoint import bundle_of, checkpoint_of
from .follow import ChainedRuns
from .layout import (
    DEKS,
    LOG,
    OBJECT_KINDS,
    decode_log,
    dek_id_of,
    log_slot,
    object_kind,
    pack_name_of,
    void_of,
    wait_of,
)
from .logstate import LogListing
from .replica import PULL_BATCH, WORKERS, Replica

__all__ = [
    "Usage",
    "BucketUsage",
    "Orphan",
    "OrphanReport",
    "bucket_usage",
    "usage_of",
    "superseded_usage",
    "find_orphans",
]


@dataclass(frozen=True)
class Usage:
    """How many objects, and how many bytes they hold."""

    objects: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return {"objects": self.objects, "bytes": self.bytes}


@dataclass(frozen=True)
class BucketUsage:
    """The objects under a store's prefix by kind (:data:`~memvault.remote.layout.OBJECT_KINDS`:
    ``packs``, ``log``, ``deks``, ``other``), every kind present."""

    kinds: dict[str, Usage]

    @property
    def objects(self) -> int:
        return sum(u.objects for u in self.kinds.values())

    @property
    def bytes(self) -> int:
        return sum(u.bytes for u in self.kinds.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "bytes": self.bytes,
            "kinds": {kind: usage.to_json() for kind, usage in self.kinds.items()},
        }


def usage_of(listed: Iterable[ObjectInfo]) -> BucketUsage:
    """:class:`BucketUsage` of a listing of a store's prefix."""
    counts = dict.fromkeys(OBJECT_KINDS, (0, 0))
    for info in listed:
        n, size = counts[object_kind(info.key)]
        counts[object_kind(info.key)] = (n + 1, size + info.size)
    return BucketUsage({kind: Usage(n, size) for kind, (n, size) in counts.items()})


def superseded_usage(listed: Iterable[ObjectInfo]) -> Usage:
    """The objects of a listing of a store's prefix that the newest checkpoint listed supersedes
    (docs/format.md §12.8): log records, voids and waiting markers at its position or before, older
    checkpoints and their bundles; ``memvault gc`` deletes them once its grace period has passed.
    From the listing alone (nothing is fetched or authenticated)."""
    items = list(listed)
    newest = max((p for i in items if (p := checkpoint_of(i.key)) is not None), default=-1)
    n = size = 0
    for info in items:
        slot = log_slot(info.key) or void_of(info.key)
        wait = wait_of(info.key)
        seq = slot[0] if slot is not None else (wait[0] if wait is not None else None)
        older = checkpoint_of(info.key)
        bundle = bundle_of(info.key)
        if (seq is not None and seq <= newest) or any(x is not None and x < newest for x in (older, bundle)):
            n, size = n + 1, size + info.size
    return Usage(n, size)


def bucket_usage(objects: ObjectStore) -> BucketUsage:
    """:class:`BucketUsage` of every object under the prefix of ``objects`` (one listing).

    Raises:
        ServiceError: the object store failed.
    """
    return usage_of(objects.list(""))


#: Why an object is listed as orphaned: ``unreferenced`` (a pack or index no committed log record
#: names), ``destroyed`` (the data key object of a key a redaction destroyed), ``unknown`` (a data
#: key object of a key no committed log record names and the keyring does not hold).
OrphanReason = Literal["unreferenced", "destroyed", "unknown"]


@dataclass(frozen=True)
class Orphan:
    """An object under the prefix that no commit needs: its key (relative to the prefix), its
    kind (``packs`` or ``deks``), why, and its size."""

    key: str
    kind: str
    reason: OrphanReason
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "reason": self.reason, "bytes": self.size}


@dataclass(frozen=True)
class OrphanReport:
    """What :func:`find_orphans` found: the orphans in key order, the objects listed, and the
    committed log records read."""

    description: str
    orphans: list[Orphan]
    objects: int
    records: int
    #: What ``memvault gc`` would delete now, by reason (docs/format.md §12.8), and only after
    #: its grace period; None when not looked at.
    gc_now: dict[str, int] | None = None
    gc_waiting: dict[str, int] | None = None

    @property
    def bytes(self) -> int:
        return sum(o.size for o in self.orphans)

    def by_kind(self) -> dict[str, Usage]:
        """The orphans' count and bytes per kind (``packs``, ``deks``), both always present."""
        out: dict[str, Usage] = {}
        for kind in ("packs", "deks"):
            sizes = [o.size for o in self.orphans if o.kind == kind]
            out[kind] = Usage(len(sizes), sum(sizes))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "objects": self.description,
            "listed": self.objects,
            "log_records": self.records,
            "orphans": len(self.orphans),
            "bytes": self.bytes,
            "kinds": {kind: usage.to_json() for kind, usage in self.by_kind().items()},
            "list": [o.to_json() for o in self.orphans],
            "gc": None if self.gc_now is None else {"now": self.gc_now, "after_grace": self.gc_waiting or {}},
        }


def find_orphans(replica: Replica, listed: list[ObjectInfo]) -> OrphanReport:
    """The objects of ``listed`` that no commit needs (see the module's docstring). The caller
    holds the replica's writer lock and pulled after listing: a commit whose log record appeared
    meanwhile is then taken in and names its objects. Objects a commit in progress on another host
    has uploaded before creating its log record are listed too (a listing made again tells).

    A pack counts as named when a committed log record names it or the replica took it in (its
    pack map): what is listed was in neither. A data key object is listed only if it is still
    there after the pull (which deletes those of keys a redaction it took in destroyed).

    Args:
        replica: the store's replica, just pulled.
        listed: every object under the store's prefix, listed before that pull.

    Raises:
        RollbackDetectedError: a committed log record is no longer listed.
        IntegrityError: a committed log record cannot be read.
        ServiceError: the object store failed.
    """
    objects = replica.objects
    records = replica.committed_records()
    packs = set(replica.packmap.firsts())
    deks: set[bytes] = set()
    log = LogListing.of(objects.list(LOG))
    if log.checkpoints:  # the newest holds the commits before the records (docs/format.md §12.8)
        checkpoint = replica.read_checkpoint(log.checkpoints[max(log.checkpoints)])[0]
        packs.update(checkpoint.packs)
        deks.update(checkpoint.dek_ids())
        # Records it holds that gc has not deleted yet (grace period): their packs are superseded, not orphans.
        records = [info for slot, info in sorted(log.slots.items()) if slot[0] <= checkpoint.position] + records
    checkpoint_position = max(log.checkpoints, default=-1)
    runs = ChainedRuns()  # the chained records of the records walked so far
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="memvault-inventory") as pool:
        for start in range(0, len(records), PULL_BATCH):  # bounded memory: records may be big
            batch = records[start : start + PULL_BATCH]
            for info, data in zip(batch, pool.map(objects.get, [i.key for i in batch]), strict=True):
                slot = log_slot(info.key)
                assert slot is not None  # committed() returns record objects only
                if data is None:
                    raise IntegrityError(f"{objects.description} is missing the object {info.key} of this store.")
                try:
                    record = decode_log(data, replica.store_id, slot[0])
                except IntegrityError:
                    if slot[0] > checkpoint_position:
                        raise
                    continue  # a superseded object of the log: the checkpoint counts
                if runs.holds(record.chained):
                    continue  # stepped over (records taken in already): its header names nothing
                runs.add(record.chained)
                packs.update(record.packs)
                deks.update(record.dek_ids)
    keyring = replica.keyring
    present = {info.key for info in objects.list(DEKS)}  # not those the pull deleted (destroyed keys)
    orphans: list[Orphan] = []
    for info in sorted(listed, key=lambda i: i.key):
        kind = object_kind(info.key)
        if kind == "packs":
            if pack_name_of(info.key) not in packs:
                orphans.append(Orphan(info.key, kind, "unreferenced", info.size))
        elif kind == "deks" and info.key in present and bundle_of(info.key) is None:
            dek_id = dek_id_of(info.key)
            if dek_id is not None and keyring.is_destroyed(dek_id):
                orphans.append(Orphan(info.key, kind, "destroyed", info.size))
            elif dek_id is None or (dek_id not in deks and not keyring.has(dek_id)):
                orphans.append(Orphan(info.key, kind, "unknown", info.size))
    return OrphanReport(objects.description, orphans, len(listed), len(records))
