"""Compaction of a store in object storage (``memvault gc``, docs/format.md §12.8): the log up to
the replica's position compacted into one authenticated checkpoint, the commits' objects into one
pack (without the content blobs of destroyed data keys), their data keys into one bundle, and what
that supersedes deleted once the grace period has passed, under the compaction lease."""

from __future__ import annotations

import os
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import IntegrityError, InvalidInputError
from ..git.objects import TYPE_NAMES, GitObject
from ..git.pack import build_pack
from ..git.packindex import read_pack_index
from ..storage.base import ObjectInfo
from .checkpoint import (
    Checkpoint,
    bundle_key,
    bundle_of,
    checkpoint_key,
    checkpoint_of,
    decode_bundle,
    encode_bundle,
    encode_checkpoint,
)
from .layout import (
    DEKS,
    LOG,
    PACKS,
    LogRecord,
    decode_log,
    dek_id_of,
    log_key,
    log_slot,
    pack_keys,
    pack_name_of,
    split_append,
    void_of,
    wait_of,
)
from .lease import Lease
from .logstate import LogListing
from .replica import WORKERS, Replica
from .uploads import drop_from_bundle

__all__ = ["GcReport", "GRACE_ENV", "GRACE_SECONDS", "grace_seconds", "compact", "plan_deletions"]

#: The grace period (seconds) before what a checkpoint supersedes, and orphans, are deleted.
GRACE_SECONDS = 3600.0
#: The variable that sets the grace period (``memvault gc --grace`` wins).
GRACE_ENV = "MEMVAULT_GC_GRACE"
_BLOB_MAGIC = b"MVB1"
_BLOB_DEK = slice(44, 60)  #: the data key id in a content blob's header (docs/format.md §5.1)
T = TypeVar("T")
K = TypeVar("K")


def grace_seconds(option: float | None) -> float:
    """The grace period: ``option`` if given, else ``$MEMVAULT_GC_GRACE``, else :data:`GRACE_SECONDS`.

    Raises:
        InvalidInputError: a negative or malformed value.
    """
    raw = os.environ.get(GRACE_ENV, "").strip()
    try:
        value = option if option is not None else (float(raw) if raw else GRACE_SECONDS)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise InvalidInputError(
            f"Error: the grace period ({GRACE_ENV}, --grace) must be a number of seconds, 0 or more."
        )
    return value


@dataclass
class GcReport:
    """What a remote gc run did (or, from :func:`plan_deletions`, would do).

    Attributes:
        checkpoint: the position of the checkpoint published (None: none was needed).
        packs_merged: how many packs its new pack holds the objects of.
        deleted: objects deleted (a plan: deletable now) by reason: ``superseded`` (held by the
            newest checkpoint), ``orphan`` (named by no record or checkpoint), ``destroyed``
            (data key objects of destroyed keys).
        waiting: objects deletable only once the grace period has passed, by reason.
        keys: the keys of ``deleted``, sorted.
    """

    checkpoint: int | None = None
    packs_merged: int = 0
    deleted: Counter[str] = field(default_factory=Counter)
    waiting: Counter[str] = field(default_factory=Counter)
    keys: list[str] = field(default_factory=list)


def _map(fn: Callable[[K], T], items: Iterable[K]) -> list[T]:
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="memvault-gc") as pool:
        return list(pool.map(fn, list(items)))


def compact(replica: Replica, *, grace: float, clock: Callable[[], float] = time.time) -> GcReport:
    """Compact the store of ``replica`` (docs/format.md §12.8): under the lease, publish a
    checkpoint at the replica's position when it is past the newest one, then delete what the
    newest checkpoint supersedes and the orphans, each once ``grace`` seconds have passed. The
    caller holds the replica's writer lock and has just pulled.

    Args:
        replica: the store's replica, up to date.
        grace: seconds (see :func:`grace_seconds`).
        clock: the wall clock (Unix seconds).

    Raises:
        ConflictError: another host holds the compaction lease.
        IntegrityError: a record, pack or checkpoint does not verify (nothing is published).
        ServiceError: the object store failed.
    """
    lease = Lease(replica.objects, replica.host, clock)
    lease.acquire()
    try:
        snapshot = replica.objects.list("")
        listing = LogListing.of(i for i in snapshot if i.key.startswith(LOG))
        report = GcReport()
        position = replica.next_commit - 1
        newest = _newest(replica, listing)
        if position > (newest.position if newest is not None else -1):
            newest, report.packs_merged = _publish(replica, newest, position, clock)
            report.checkpoint = position
            lease.renew()
        if newest is not None and (stale := replica.keyring.destroyed_ids & set(newest.dek_ids())):
            drop_from_bundle(replica.objects, newest.position, set(stale))  # a redaction that stopped early
        keys, lease.orphans = _plan(replica, snapshot, newest, grace, clock(), lease.orphans, report)
        _map(replica.objects.delete, keys)
        report.keys = keys
    finally:
        lease.release()
    return report


def plan_deletions(replica: Replica, grace: float, clock: Callable[[], float] = time.time) -> GcReport:
    """What a gc run would delete now (``keys``, ``deleted``) and only after the grace period
    (``waiting``), without taking the lease or deleting anything (``verify --remote``). The caller
    holds the replica's writer lock and has just pulled.

    Raises:
        IntegrityError: the newest checkpoint does not verify. ServiceError: the object store failed.
    """
    lease = Lease(replica.objects, replica.host, clock)
    lease.peek()
    snapshot = replica.objects.list("")
    listing = LogListing.of(i for i in snapshot if i.key.startswith(LOG))
    report = GcReport()
    report.keys, _orphans = _plan(replica, snapshot, _newest(replica, listing), grace, clock(), lease.orphans, report)
    return report


def _newest(replica: Replica, listing: LogListing) -> Checkpoint | None:
    if not listing.checkpoints:
        return None
    return replica.read_checkpoint(listing.checkpoints[max(listing.checkpoints)])[0]


def _publish(
    replica: Replica, previous: Checkpoint | None, position: int, clock: Callable[[], float]
) -> tuple[Checkpoint, int]:
    """Build and publish the checkpoint of positions ``0..position`` (the replica's newest):
    entries from ``previous`` and the log records after it, checked against the keyring; one pack
    of their objects; the bundle; the checkpoint last. Return it and how many packs it merged."""
    where = replica.objects.description
    base = list(previous.records) if previous is not None else []
    infos = replica.committed_records()
    if len(base) + len(infos) != position + 1:
        raise IntegrityError(f"The log in {where} changed while it was being compacted; run gc again.")
    datas = _map(replica.objects.get, [info.key for info in infos])
    fresh: list[LogRecord] = []
    for i, (info, data) in enumerate(zip(infos, datas, strict=True)):
        if data is None:
            raise IntegrityError(f"{where} is missing the object {info.key} of this store.")
        fresh.append(decode_log(data, replica.store_id, len(base) + i))
    entries = base + [LogRecord(r.seq, r.commit_id, (), r.dek_ids, r.chained, r.branch) for r in fresh]
    replica.keyring.refresh()
    deks, chained = split_append(replica.keyring.records())
    if chained != b"".join(entry.chained for entry in entries):  # invariant 2: exactly what this host took in
        raise IntegrityError(f"The log in {where} does not match this host's keyring; nothing was compacted.")
    names = list(
        dict.fromkeys((previous.packs if previous is not None else ()) + tuple(n for r in fresh for n in r.packs))
    )
    destroyed = replica.keyring.destroyed_ids
    data, idx, name = _merge(replica, names, destroyed)
    if replica.mac_key is None:
        raise ValueError("a replica made for an upload cannot compact")
    checkpoint = Checkpoint(position, int(clock()), (name,), tuple(entries))
    bundle = encode_bundle({d: deks[d] for e in entries for d in e.dek_ids if d in deks and d not in destroyed})
    pack_key, idx_key = pack_keys(name)
    _map(lambda item: replica.objects.create(*item), [(pack_key, data), (idx_key, idx)])
    current = replica.objects.get_tagged(bundle_key(position))  # left by a run that stopped before its checkpoint
    if current is None:
        replica.objects.create(bundle_key(position), bundle)
    elif current[0] != bundle:
        replica.objects.swap(bundle_key(position), bundle, current[1])
    replica.objects.create(checkpoint_key(position), encode_checkpoint(replica.mac_key, replica.store_id, checkpoint))
    replica.packmap.add(name, idx)
    return checkpoint, len(names)


def _merge(replica: Replica, names: list[str], destroyed: frozenset[bytes]) -> tuple[bytes, bytes, str]:
    """One pack of every object of the packs ``names`` (fetched, each object's id checked), without
    the content blobs of destroyed data keys (invariant 4)."""
    where = replica.objects.description
    keys = [key for name in names for key in pack_keys(name)]
    fetched = _map(replica.objects.get, keys)
    objects: dict[bytes, GitObject] = {}
    for i, name in enumerate(names):
        data, idx = fetched[2 * i], fetched[2 * i + 1]
        entries = read_pack_index(idx) if idx is not None else None
        if data is None or entries is None or len(data) < 32 or data[-20:].hex() != name:
            raise IntegrityError(f"The pack {name} in {where} is missing or damaged.")
        for n, (offset, raw_id, _crc) in enumerate(entries):
            end = entries[n + 1][0] if n + 1 < len(entries) else len(data) - 20
            obj = _entry(data[offset:end], raw_id, name, where)
            if obj.type_name == b"blob" and _destroyed_blob(obj.as_raw_string(), destroyed):
                continue
            objects[raw_id] = obj
    return build_pack(objects.values(), 0)


def _entry(entry: bytes, raw_id: bytes, name: str, where: str) -> GitObject:
    """The object of one undeltified pack entry, checked against its id."""
    bad = IntegrityError(f"The pack {name} in {where} holds an entry memvault cannot read.")
    if not entry:
        raise bad
    type_num, size, i, shift = (entry[0] >> 4) & 7, entry[0] & 15, 1, 4
    while entry[i - 1] & 0x80:
        if i >= len(entry) or shift > 56:
            raise bad
        size |= (entry[i] & 0x7F) << shift
        shift += 7
        i += 1
    if type_num not in TYPE_NAMES:
        raise bad  # a delta: memvault's commits never write one
    try:
        body = zlib.decompress(entry[i:])
    except zlib.error:
        raise bad from None
    obj = GitObject(TYPE_NAMES[type_num], body)
    if len(body) != size or obj.id != raw_id.hex().encode():
        raise bad
    return obj


def _destroyed_blob(body: bytes, destroyed: frozenset[bytes]) -> bool:
    return body[:4] == _BLOB_MAGIC and len(body) >= _BLOB_DEK.stop and body[_BLOB_DEK] in destroyed


def _plan(
    replica: Replica,
    snapshot: list[ObjectInfo],
    newest: Checkpoint | None,
    grace: float,
    now: float,
    seen: dict[str, float],
    report: GcReport,
) -> tuple[list[str], dict[str, float]]:
    """The keys of ``snapshot`` to delete now (invariants 6 and 7 of §12.8), counted into
    ``report``, and the orphan candidates to keep (key -> first seen)."""
    position = newest.position if newest is not None else -1
    due = newest is not None and newest.time + grace <= now
    live_packs = set(newest.packs) if newest is not None else set()
    live_deks: set[bytes] = set()
    later = [i for i in replica.objects.list(LOG, start_after=log_key(position) if position >= 0 else "")]
    records = [i for i in later if (slot := log_slot(i.key)) is not None and slot[0] > position]
    for info, data in zip(records, _map(replica.objects.get, [i.key for i in records]), strict=True):
        slot = log_slot(info.key)
        assert slot is not None
        try:  # every object at a later place, authentic or not: keeping too much is safe
            record = decode_log(data or b"", replica.store_id, slot[0])
        except IntegrityError:
            continue
        live_packs.update(record.packs)
        live_deks.update(record.dek_ids)
    # Only a key the bundle holds is superseded: a key this host lacks (lost to it) keeps its object.
    bundled = replica.objects.get(bundle_key(position)) if newest is not None else None
    named = set(newest.dek_ids()) if newest is not None else set()
    covered = set(decode_bundle(bundled)) & named if bundled is not None else set()
    destroyed = replica.keyring.destroyed_ids
    keys: list[str] = []
    orphans: dict[str, float] = {}

    def decide(info: ObjectInfo, reason: str) -> None:
        if reason == "orphan":
            first = seen.get(info.key, now)
            if now - first < grace:
                orphans[info.key] = first
                report.waiting[reason] += 1
                return
        elif reason == "superseded" and not due:
            report.waiting[reason] += 1
            return
        keys.append(info.key)
        report.deleted[reason] += 1

    for info in snapshot:
        key = info.key
        if key.startswith(LOG):
            slot = log_slot(key) or void_of(key)
            seq = slot[0] if slot is not None else (wait[0] if (wait := wait_of(key)) is not None else None)
            ckpt = checkpoint_of(key)
            if (seq is not None and seq <= position) or (ckpt is not None and ckpt < position):
                decide(info, "superseded")
        elif key.startswith(PACKS):
            if pack_name_of(key) not in live_packs:
                decide(info, "orphan")
        elif key.startswith(DEKS):
            bundle = bundle_of(key)
            dek_id = dek_id_of(key)
            if bundle is not None:
                if bundle < position:
                    decide(info, "superseded")
            elif dek_id is not None and dek_id in destroyed:
                decide(info, "destroyed")
            elif dek_id is not None and dek_id in covered and dek_id not in live_deks:
                decide(info, "superseded")
            elif dek_id is not None and dek_id in named:
                pass  # a key of the checkpoint its bundle lacks (lost to the host that compacted): kept
            elif dek_id is None or dek_id not in live_deks:
                decide(info, "orphan")
    return sorted(keys), orphans
