"""A host's replica of a store kept in object storage: a complete store directory in the host's
cache, brought up to the log's tip before each command (pull) and extended by this host's commits
only once their log record is created in the bucket (publish). docs/format.md §12."""

from __future__ import annotations

import hashlib
import os
import random
import re
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from ..errors import (
    IntegrityError,
    InvalidInputError,
    LogBlockedError,
    RollbackDetectedError,
    ServiceError,
    StoreExistsError,
)
from ..fsutil import cache_root
from ..git.repo import GitStore
from ..hoststate import HighWaterMark
from ..keys.keyring import Keyring
from ..storage.base import ObjectInfo, ObjectStore
from .catchup import checkpoint_mark, checkpoint_to_read, fetch_checkpoint, pack_holding
from .checkpoint import Checkpoint
from .follow import POSITION_FILE, Follower
from .layout import (
    CONFIG,
    LOG,
    MAX_LOG_BYTES,
    PACKS,
    LogRecord,
    VoidRecord,
    decode_log,
    dek_key,
    encode_log,
    encode_void,
    is_dek_object,
    log_key,
    log_segments,
    pack_keys,
    split_append,
    void_key,
    wait_key,
)
from .logstate import (
    LogFinding,
    LogListing,
    Slot,
    Voids,
    check_seen,
    committed,
    findings,
    junk_error,
    mark_tag,
    obstacle,
    void_targets,
)
from .lostkeys import LostKeys
from .packmap import PackMap
from .uploads import Uploads

__all__ = ["Replica", "RaceLost", "PACKMAP_FILE", "LOST_FILE", "POSITION_FILE", "CACHE_BYTES", "cache_dir_for"]

#: Requests a replica makes at once (uploads of a commit, downloads of a pull).
WORKERS = 16
#: The map of which remote pack holds which object, in the replica directory.
PACKMAP_FILE = "remote-packs"
#: The data keys a pull found missing from object storage (fetched again at each pull), in the
#: replica directory.
LOST_FILE = "remote-lost-keys"
#: Bytes of packs a replica keeps before it evicts the least recently written ones (fetched again
#: when read); ``$MEMVAULT_CACHE_BYTES`` overrides it.
CACHE_BYTES = 4 * 1024**3
#: Log records a pull fetches and applies at a time.
PULL_BATCH = 256
#: Longest a writer gives way to a host waiting to commit after a lost race (seconds).
COURTESY_SECONDS = 1.0
#: Longest a writer takes from its uploads to its log record (seconds; else it uploads again):
#: a gc's grace period must exceed it (docs/format.md §12.8, invariant 7).
COMMIT_WINDOW = 120.0
#: Rounds of :meth:`Replica.void` (each voids what stops commits at the number, then reads again).
MAX_VOID_ROUNDS = 1000
_PACK_NAME = re.compile(r"\A[0-9a-f]{40}\Z")
T = TypeVar("T")
K = TypeVar("K")


class RaceLost(Exception):
    """Another host created the log record of this sequence number first: nothing of this
    commit counts; bring the replica up to date and run the command again."""


class Replica(Uploads):
    """Sync between the objects of a store (``objects``) and the host's replica directory
    ``root``. The caller holds the replica's writer lock around every method but :meth:`close`.

    Args:
        objects: the store's objects (S3 bucket and prefix, or a directory).
        root: the replica, a store directory in the host's cache.
        store_id: the store's id.
        keyring: the replica's keyring.
        git: the replica's repository.
        mark: the host's high-water mark of the store's log (None: a one-way upload, no mark).
        durable: sync the replica's own files (durability ``full``).
    """

    def __init__(
        self,
        objects: ObjectStore,
        root: Path,
        store_id: bytes,
        keyring: Keyring,
        git: GitStore,
        mark: HighWaterMark | None,
        *,
        durable: bool,
    ) -> None:
        self.objects = objects
        self.root = root
        self.store_id = store_id
        self.keyring = keyring
        self.git = git
        self._mark = mark
        self.packmap = PackMap(root / PACKMAP_FILE)
        self.lost_keys = LostKeys(root / LOST_FILE, durable=durable)
        #: The size bound of the replica's packs (bytes): beyond it the least recently written
        #: packs are removed, and fetched again from object storage when an object is read.
        self.cache_bytes = _cache_bytes()
        if mark is not None:
            git.fetch_missing = self.fetch
        self._durable = durable
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="memvault-remote")
        #: What this replica did: ``pulls``, ``pulled`` (commits taken in), ``published``,
        #: ``races_lost`` (log records another host created first).
        self.stats: Counter[str] = Counter()
        #: This host's id in waiting markers, and the key of its marker while it waits.
        self.host = secrets.token_hex(8)
        self._waiting: str | None = None
        self._since = 0
        #: Markers of others this host has already removed (each is removed once per host).
        self._swept: set[str] = set()
        #: The log as the last pull listed it, where it stopped (the next commit's place), and
        #: the object there when it is not an authentic record.
        self._listing: LogListing | None = None
        self._stop: Slot = (0, 0)
        self._junk: ObjectInfo | None = None
        self._void_key = mark.key if mark is not None else None
        self._voids = Voids(lambda keys: self._all(self.objects.get, keys), self._void_key or b"", store_id)
        self._follow = Follower(root, keyring, git, self._void_key, store_id)

    def close(self) -> None:
        """Stop the request threads."""
        self._pool.shutdown(wait=True)

    def _all(self, fn: Callable[[K], T], items: Iterable[K]) -> list[T]:
        """``fn`` of every item, run concurrently, in order; raises the first error."""
        return list(self._pool.map(fn, list(items)))

    # -- pull -------------------------------------------------------------------------------------

    def pull(self, *, courtesy: bool = False) -> int:
        """Bring the replica up to the newest commit in object storage: its log records, packs and
        data keys, checked against the host's high-water mark; return how many commits came in.
        The log is read up to the first place with no object or with an object that is not an
        authentic record (and no void of it): what is committed up to there is served.

        With ``courtesy`` (a writer about to commit), first give way for up to
        :data:`COURTESY_SECONDS` while another host that lost a race waits to commit the next
        sequence number (its marker is listed), so a host that keeps winning cannot starve it;
        then :meth:`check_writable`.

        Raises:
            RollbackDetectedError: the bucket no longer holds a log record this host has seen, or
                holds it replaced or voided.
            LogBlockedError: (``courtesy``) no commit can be made, see :meth:`check_writable`.
            IntegrityError: a pack does not verify, or data keys are missing (the records naming
                them are applied; the keys are fetched again at later pulls).
            ServiceError: the object store failed.
        """
        count = self._take_in(courtesy)
        if courtesy:
            self.check_writable()
        return count

    def check_writable(self) -> None:
        """Refuse to commit when the last pull stopped at an object that is not an authentic
        record, or listed an object beyond the next commit's place that no void steps over (the
        log is listed once more first: a listing made while another host commits can miss a
        record for a moment on some filesystems).

        Raises:
            LogBlockedError: naming the commit number a key holder voids (``memvault repair-log``).
        """
        problem = self._obstacle()
        if problem is not None and self._junk is None:
            self._take_in(False)
            problem = self._obstacle()
        if problem is not None:
            raise problem

    def _obstacle(self) -> LogBlockedError | None:
        if self._listing is None:
            return None
        return obstacle(self._listing, self._voids, self._stop, self._junk, self.objects.description)

    def _take_in(self, courtesy: bool) -> int:
        """:meth:`pull` but for the writer's check."""
        if self._mark is None:
            raise ValueError("a replica made for an upload has no high-water mark to pull with")
        self.stats["pulls"] += 1
        self.keyring.refresh()
        mark = self._mark.read()
        local = self._follow.position(None if mark is None else mark[0])
        self._catch_up_branch()
        self._follow.catch_up_sides(None)
        first = local if mark is None else min(local, mark[0])
        listing = self._listing = self._list_log(first, courtesy)
        where = self.objects.description
        info, covered = checkpoint_to_read(listing, self._voids, local, mark)  # docs/format.md §12.8
        checkpoint = None if info is None else self.read_checkpoint(info)
        covered = checkpoint[0].position if checkpoint is not None else covered
        check_seen(listing, self._voids, local, mark, where, covered)
        count = 0
        missing: set[bytes] = set()
        if checkpoint is not None and info is not None and covered > local:
            logs = list(checkpoint[0].records[local + 1 :])
            if self._follow.accepts([log.chained for log in logs]) != len(logs):
                raise IntegrityError(f"The checkpoint {info.key} in {where} does not extend this host's history.")
            missing |= self._apply(logs, checkpoint[0].packs, checkpoint[1])
            local = checkpoint[0].position
            self._follow.save(local, logs[-1])
            self._mark.write(local, checkpoint_mark(listing, self._voids, info, local), durable=self._durable)
            count += len(logs)
        seq = local + 1
        while True:  # in batches: bounded memory for a host that starts cold
            self._voids.load_seqs(listing, seq, min(listing.tip(seq) + 1, seq + PULL_BATCH))  # one round
            batch: list[tuple[Slot, ObjectInfo]] = []
            stop: Slot | None = None
            while stop is None and len(batch) < PULL_BATCH:
                attempt, info = self._voids.resolve(listing, seq + len(batch))
                if info is None:
                    stop = (seq + len(batch), attempt)
                else:
                    batch.append(((seq + len(batch), attempt), info))
            # The object the last pull found no record at this same point of the chain: not fetched again.
            known = bool(batch) and (batch[0][0], batch[0][1]) == (self._stop, self._junk)
            logs, junk, applied = self._authentic(batch) if not known else ([], batch[0], [])
            if applied:  # records the keyring holds already: the position hint lagged behind them
                (last, attempt), info = batch[len(applied) - 1]  # no ref follows them: they add nothing
                self._follow.save(last, applied[-1])
                self._mark.write(last, mark_tag(attempt, info.tag), durable=self._durable)
                seq += len(applied)
                local = seq - 1
                continue
            if logs:
                missing |= self._apply(logs)
                (last, attempt), info = batch[len(logs) - 1]
                self._follow.save(last, logs[-1])
                self._mark.write(last, mark_tag(attempt, info.tag), durable=self._durable)
                count += len(logs)
            seq += len(logs)
            if junk is not None and logs and self._follow.may_repeat():
                continue  # on its own, after the records just applied (it may be one of them again)
            if junk is not None:
                self._stop, self._junk = junk[0], junk[1]
                break
            if stop is not None:
                self._stop, self._junk = stop, None
                break
        if count == 0 and local >= 0 and (mark is None or mark[0] < local or (mark[0] == local <= covered)):
            tag = checkpoint_mark(listing, self._voids, listing.checkpoints.get(local), local)  # checked above
            if mark is None or (local, tag) != mark:
                self._mark.write(local, tag, durable=self._durable)
        if mark is not None and self._stop[0] <= mark[0]:
            raise RollbackDetectedError(f"Rollback detected: {where} no longer leads to commit #{mark[0]}, seen here.")
        self._refetch_lost()
        if count:
            self.stats["pulled"] += count
            self.evict()
        lost = missing - self.keyring.destroyed_ids
        if lost:  # a redaction committed after this pull listed the log may have deleted them: look again
            self._take_in(False)
            lost -= self.keyring.destroyed_ids
        if lost:
            self.lost_keys.update(add=lost)
            raise IntegrityError(
                f"{self.objects.description} lacks the data key objects of {len(lost)} version(s) that no redaction "
                "destroyed (deleted from the bucket, or damaged): those versions cannot be read until the bucket "
                "holds them again (each pull looks for them); memvault verify lists them."
            )
        return count

    def _authentic(
        self, batch: list[tuple[Slot, ObjectInfo]]
    ) -> tuple[list[LogRecord], tuple[Slot, ObjectInfo] | None, list[LogRecord]]:
        """Fetch the objects of ``batch`` (consecutive log positions) and return the log records
        of its authentic beginning (each extends the keyring's MAC chain), the first place whose
        object is not such a record (None if every one is), and, if the first does not extend it,
        those at the beginning the keyring holds already (to step over: the hint lagged)."""
        small = [i for i, (_slot, info) in enumerate(batch) if info.size <= MAX_LOG_BYTES]
        datas = dict(zip(small, self._all(self.objects.get, [batch[i][1].key for i in small]), strict=True))
        logs: list[LogRecord] = []
        for i, ((seq, _attempt), info) in enumerate(batch):
            if i not in datas:
                break  # bigger than any log record
            data = datas[i]
            if data is None:
                raise IntegrityError(f"{self.objects.description} is missing the object {info.key} of this store.")
            try:
                logs.append(decode_log(data, self.store_id, seq))
            except IntegrityError:
                break
        accepted = self._follow.accepts([log.chained for log in logs])
        if accepted == 0 and logs:
            applied = self._follow.already_applied(logs)
            if applied:
                return [], None, applied
        logs = logs[:accepted]
        return logs, batch[len(logs)] if len(logs) < len(batch) else None, []

    def evict(self) -> int:
        """Remove the least recently written packs while the replica's packs hold more than
        :attr:`cache_bytes` (down to three quarters of it); return how many were removed."""
        if self.git.packs.total_bytes() <= self.cache_bytes:
            return 0
        removed = self.git.packs.evict(self.cache_bytes * 3 // 4)
        self.stats["evicted"] += removed
        return removed

    def fetch(self, obj_id: bytes) -> bool:
        """Install the pack from object storage that holds the object ``obj_id`` (hex), which the
        replica lacks (evicted); False if no pack this replica knows of holds it.

        Raises:
            ServiceError: the object store failed.
            IntegrityError: the pack is damaged.
        """
        try:
            name = self.packmap.find(bytes.fromhex(obj_id.decode()))
        except (ValueError, OSError):
            return False
        if name is None:
            return False
        got = self._all(self.objects.get, pack_keys(name))
        if (got[0] is None or got[1] is None) and (newer := pack_holding(self, obj_id)) is not None:
            name, got = newer  # a gc merged the pack into a checkpoint's and deleted it (§12.8)
            self.packmap.add(name, got[1] or b"")
        data, idx = got
        if data is None or idx is None:
            raise IntegrityError(f"{self.objects.description} is missing the pack {name} of this store.")
        if len(data) < 32 or data[-20:].hex() != name:
            raise IntegrityError(f"The pack {name} in {self.objects.description} is damaged.")
        self.git.packs.install(data, idx, name)
        self.stats["fetched"] += 1
        return True

    def fetch_all(self) -> int:
        """Install again every pack the replica evicted (before copying the whole store out of
        it); return how many."""
        before = self.stats["fetched"]
        for raw_id in self.packmap.firsts().values():
            self.git.contains(raw_id.hex().encode())  # fetches the pack when it is missing
        return self.stats["fetched"] - before

    def _apply(
        self, logs: list[LogRecord], named: tuple[str, ...] | None = None, bundle: dict[bytes, bytes] | None = None
    ) -> set[bytes]:
        """Fetch the packs and data keys of authentic log records (consecutive, after the
        replica's newest) and apply them to the replica (see :meth:`pull`); return the ids of the
        data keys whose objects were missing or damaged (a redaction later in the log destroyed
        them, or else they were lost). From a checkpoint: its packs (``named``) and the DEK records
        of its bundle (``bundle``) instead of the records' own."""
        where = self.objects.description
        lacks = [log for log in logs if not self.git.contains(log.commit_id)]
        packs = {name for log in lacks for name in log.packs} if named is None else set(named if lacks else ())
        if any(not _PACK_NAME.match(name) for name in packs):
            raise IntegrityError(f"A log record in {where} names a pack that cannot exist.")
        pack_keys_wanted = [key for name in sorted(packs) for key in pack_keys(name)]
        dek_ids = [d for log in logs for d in log.dek_ids]

        def fetch(key: str) -> bytes | None:  # packs must be there; a data key may be destroyed
            return self._get_required(key) if key.startswith(PACKS) else self.objects.get(key)

        singles = [d for d in dek_ids if bundle is None or d not in bundle]  # a bundle may lack a key: its object
        fetched = self._all(fetch, pack_keys_wanted + [dek_key(d) for d in singles])  # one round
        pack_files = fetched[: len(pack_keys_wanted)]
        deks = {**(bundle or {}), **dict(zip(singles, fetched[len(pack_keys_wanted) :], strict=True))}
        for i, name in enumerate(sorted(packs)):
            data, idx = pack_files[2 * i], pack_files[2 * i + 1]
            assert data is not None and idx is not None  # _get_required never gives None
            if len(data) < 32 or data[-20:].hex() != name:
                raise IntegrityError(f"The pack {name} in {where} is damaged.")
            self.git.packs.install(data, idx, name)
        append = []
        missing: set[bytes] = set()
        for log in logs:
            for dek_id in log.dek_ids:
                record = deks[dek_id]
                if record is None or not is_dek_object(record, dek_id):  # destroyed by a later redaction, or lost
                    missing.add(dek_id)
                else:
                    append.append(record)
            append.append(log.chained)
        destroyed = self.keyring.destroyed_ids
        self._follow.expect_sides(logs)
        self.keyring.append(b"".join(append), durable=self._durable)
        for i, name in enumerate(sorted(packs)):  # mapped only once the records verified
            idx_bytes = pack_files[2 * i + 1]
            assert idx_bytes is not None  # _get_required never gives None
            self.packmap.add(name, idx_bytes)
        self._catch_up_branch()
        self._follow.catch_up_sides(logs)
        if self.keyring.destroyed_ids != destroyed:
            self.keyring.purge()  # keys another host destroyed leave this cache too
            # ... and the bucket, again: the redacting host may have stopped before deleting them.
            self.destroyed(self.keyring.destroyed_ids - destroyed)
        return missing

    def stop_waiting(self) -> None:
        """Withdraw this host's waiting marker, if it has one (its command committed or gave up)."""
        if self._waiting is not None:
            self._pool.submit(self.objects.delete, self._waiting)
            self._waiting = None

    def _catch_up_branch(self) -> None:
        """Move the replica's branch to the keyring's newest commit when its objects are here: a
        pull that stopped between its keyring append and its branch move (or a commit whose branch
        move failed) is finished, instead of reading as a rollback. The keyring's MAC chain vouches
        for the commit id; the head check that follows authenticates the commit itself."""
        hw = self.keyring.high_water
        if hw is None:
            return
        ref = self.git.head()
        if ref != hw.commit_id and self.git.contains(hw.commit_id):
            self.git.compare_and_swap(ref, hw.commit_id)

    def _list_log(self, first: int, courtesy: bool) -> LogListing:
        """The log's objects from ``log_key(first)`` on; with ``courtesy``, listed again (after short
        random pauses) while another host's waiting marker names the sequence number after the
        newest record, for at most :data:`COURTESY_SECONDS`. Markers of taken numbers are
        removed in the background."""
        deadline = time.monotonic() + COURTESY_SECONDS
        while True:
            listed = self.objects.list(LOG, start_after=log_key(first - 1) if first > 0 else "")
            sorted_out = LogListing.of(listed)
            tip, waits = sorted_out.tip(first), sorted_out.waits
            for key, (seq, _since, _host) in waits:
                if seq < tip and key not in self._swept:  # its host committed or gave up
                    if len(self._swept) > 10_000:
                        self._swept.clear()
                    self._swept.add(key)
                    self._pool.submit(self.objects.delete, key)
            # Hosts waiting for the next number (a marker for the newest: its host just lost it
            # and is about to wait for the next), longest waiting first: this one gives way to
            # those ahead of it, a host that is not waiting to all of them.
            mine = None if self._waiting is None else (self._since, self.host)
            ahead = [
                (since, host)
                for _key, (seq, since, host) in waits
                if seq in (tip, tip + 1) and host != self.host and (mine is None or (since, host) < mine)
            ]
            if not courtesy or not ahead or time.monotonic() > deadline:
                return sorted_out
            self.stats["courtesy_waits"] += 1
            time.sleep(random.uniform(0.01, 0.05))  # noqa: S311 - jitter, not a secret

    def get_many(self, keys: list[str]) -> list[bytes | None]:
        """The objects at ``keys`` (None for an absent one), fetched concurrently."""
        return self._all(self.objects.get, keys)

    @property
    def mac_key(self) -> bytes | None:
        """The store's keyring key (K_keyring), which authenticates voids and checkpoints; None
        for a replica made for an upload."""
        return self._void_key

    def read_checkpoint(self, info: ObjectInfo) -> tuple[Checkpoint, dict[bytes, bytes]]:
        """The checkpoint listed as ``info``, authenticated, and its bundle's DEK records (§12.8).

        Raises:
            IntegrityError: it does not verify, or is gone.
        """
        return fetch_checkpoint(self.get_many, info, self._void_key or b"", self.store_id, self.objects.description)

    def _get_required(self, key: str) -> bytes:
        data = self.objects.get(key)
        if data is None:
            raise IntegrityError(f"{self.objects.description} is missing the object {key} of this store.")
        return data

    # -- publish ----------------------------------------------------------------------------------

    def publish(self, pack: tuple[str, bytes, bytes], append: bytes) -> None:
        """Make a commit (of ``main`` or of a side branch): upload its pack and data keys, create its
        log record at the next log position (the commit point); the caller then appends ``append``.

        Args:
            pack: ``(name, pack bytes, index bytes)`` of the commit's pack.
            append: the keyring records of the commit (DEK records and chained records, the last
                its COMMIT record, or its BRANCH record for a commit of a side branch).

        Raises:
            RaceLost: another host took that log position first (nothing of this commit counts).
            LogBlockedError: the last pull stopped at an object that is not an authentic record.
            ServiceError: the object store failed (before the log record: nothing committed;
                ``outcome_unknown`` when even reading back could not tell).
        """
        name, data, idx = pack
        deks, chained = split_append(append)
        pack_key, idx_key = pack_keys(name)
        uploads: dict[str, bytes] = {pack_key: data, idx_key: idx}
        uploads.update({dek_key(dek_id): record for dek_id, record in deks.items()})
        position, attempt = self._stop  # past the voided objects
        if self._junk is not None:
            raise junk_error(self.objects.description, position, self._junk.key)
        record = encode_log(self.store_id, (name,), tuple(deks), chained)
        log = self._follow.publishable(record, self.store_id, position)
        started = time.monotonic()
        self._all(lambda key: self.objects.create(key, uploads[key]), uploads)
        if time.monotonic() - started > COMMIT_WINDOW:  # a gc may take an upload this old for an orphan
            raise RaceLost()
        tag = self.objects.create(log_key(position, attempt), record)
        if tag is None:
            self.stats["races_lost"] += 1
            # Our data keys are nobody's: remove them (packs are named by content and harmless);
            # say that this host waits to commit the next number (others give way, see pull).
            if self._waiting is None:
                self._since = position
            wait, self._waiting = self._waiting, wait_key(position + 1, self._since, self.host)
            self._pool.submit(self.objects.create, self._waiting, b"")  # advice: alongside the next pull
            for key in [dek_key(dek_id) for dek_id in deks] + ([wait] if wait else []):
                self._pool.submit(self.objects.delete, key)
            raise RaceLost()
        self.stop_waiting()
        self.stats["published"] += 1
        self.packmap.add(name, idx)
        self.evict()
        self._stop = (position + 1, 0)
        try:  # names the commit the keyring is about to record: a hint that holds only once it does
            self._follow.save(position, log)
            self._follow.expect_sides([log])
        except OSError:
            pass  # the next pull finds the record in the keyring and steps over it
        if self._mark is not None:
            try:
                self._mark.write(position, mark_tag(attempt, tag), durable=self._durable)
            except OSError:
                pass  # the next pull moves the mark

    # -- the log's repair ---------------------------------------------------------------------------

    def void(self, seq: int, *, beyond_gap: bool = False) -> list[str]:
        """Write a void of each object that stops commits at number ``seq`` (under the writer
        lock): the object at the next commit's place that is not an authentic record (and, in
        turn, each further one at that number), or, with ``beyond_gap``, every object of ``seq``
        beyond the next commit's place. A void names the object's version tag and size and is
        authenticated with the store's key; the objects stay. Return the keys of the objects voided.

        Raises:
            InvalidInputError: ``seq`` is committed, nothing stops commits there, or its objects lie
                beyond a gap and ``beyond_gap`` is False (nothing is written).
            ServiceError: the object store failed.
        """
        if self._void_key is None:
            raise ValueError("a replica made for an upload cannot void")
        where = self.objects.description
        voided: list[str] = []
        for _round in range(MAX_VOID_ROUNDS):
            self._take_in(False)
            assert self._listing is not None  # set by the pull
            try:
                targets = void_targets(self._listing, self._voids, self._stop, self._junk, seq, beyond_gap, where)
            except InvalidInputError:
                if voided:
                    return voided  # a writer reports what remains
                raise
            if not targets:
                if voided:
                    return voided
                raise InvalidInputError(f"Error: nothing in {where} stops commit #{seq}; there is nothing to void.")
            for slot in targets:
                info = self._listing.slots[slot]
                record = encode_void(self._void_key, self.store_id, VoidRecord(slot[0], slot[1], info.tag, info.size))
                if self.objects.create(void_key(slot[0], slot[1], secrets.token_hex(8)), record) is None:
                    raise ServiceError(where, "void", "a new void's key was taken")  # 64 random bits: never
                voided.append(info.key)
        return voided

    def log_findings(self) -> list[LogFinding]:
        """The objects of the whole log that are not simply commits' records, as the last pull
        left the log (see :class:`~memvault.remote.logstate.LogFinding`); for ``verify`` and
        ``repair-log``."""
        listing = LogListing.of(self.objects.list(LOG))
        return findings(listing, self._voids, self._stop, self._junk is not None)

    def committed_records(self) -> list[ObjectInfo]:
        """The object of each commit up to where the last pull stopped (voids followed) after the
        newest checkpoint, from a listing of the whole log made now; for ``verify --remote``.

        Raises:
            RollbackDetectedError: one is no longer listed.
        """
        listing = LogListing.of(self.objects.list(LOG))
        start = min(max(listing.checkpoints, default=-1) + 1, self._stop[0])  # the newest checkpoint holds the rest
        return committed(listing, self._voids, self._stop[0], self.objects.description, start)

    @property
    def next_commit(self) -> int:
        """The log position of the next commit (§12.2 of docs/format.md), as the last pull found it."""
        return self._stop[0]

    # -- lost data keys ------------------------------------------------------------------------------

    def _refetch_lost(self) -> None:
        """Fetch again the data keys a pull found missing, and take in those the bucket holds again
        (whole DEK records of their id; each is authenticated when used, as always)."""
        if not self.lost_keys.any():
            return
        lost = sorted(self.lost_keys.update() - self.keyring.destroyed_ids)
        records = self._all(self.objects.get, [dek_key(d) for d in lost]) if lost else []
        found = {d: r for d, r in zip(lost, records, strict=True) if r is not None and is_dek_object(r, d)}
        fresh = [record for dek_id, record in found.items() if not self.keyring.has(dek_id)]
        if fresh:
            self.keyring.append(b"".join(fresh), durable=self._durable)
            self.stats["refetched_keys"] += len(fresh)
        self.lost_keys.update(remove=set(found) | self.keyring.destroyed_ids)

    def push_all(self, config: bytes, keys_dir: Path) -> int:
        """Upload the whole store of the replica directory into empty object storage (``create``,
        ``copy``): packs, data keys, one log record per commit (the first naming every pack), key
        slots, ``memvault.json`` last (without it the objects are no store). Loose objects must
        have been packed (``MemoryStore.maintain``). Return the number of commits.

        Args:
            config: the bytes of the store's ``memvault.json``.
            keys_dir: the directory of its key slot files.

        Raises:
            StoreExistsError: object storage already holds a log record or ``memvault.json``.
            ServiceError: the object store failed.
        """
        self.keyring.refresh()
        segments = log_segments(self.keyring.records())
        packs = self.git.packs.pack_files()
        slots = {p.name[:-5]: p.read_bytes() for p in sorted(keys_dir.glob("*.json"))}
        uploads: dict[str, bytes] = {}
        for name, data, idx in packs:
            pack_key, idx_key = pack_keys(name)
            uploads[pack_key], uploads[idx_key] = data, idx
        logs: list[tuple[int, bytes]] = []
        for i, (seq, records) in enumerate(segments):
            deks, chained = split_append(records)
            uploads.update({dek_key(dek_id): record for dek_id, record in deks.items()})
            names = tuple(name for name, _, _ in packs) if i == 0 else ()
            logs.append((seq, encode_log(self.store_id, names, tuple(deks), chained)))
        self._all(lambda key: self.objects.create(key, uploads[key]), uploads)
        for name, _data, idx in packs:
            self.packmap.add(name, idx)
        for seq, record in logs:
            if self.objects.create(log_key(seq), record) is None:
                raise StoreExistsError(f"{self.objects.description} already holds a store's log at this prefix.")
        for slot_id, data in slots.items():
            self.push_slot(slot_id, data)
        if self.objects.create(CONFIG, config) is None:
            raise StoreExistsError(f"{self.objects.description} already holds a memory store at this prefix.")
        return len(logs)


def _cache_bytes() -> int:
    raw = os.environ.get("MEMVAULT_CACHE_BYTES", "").strip()
    try:
        size = int(raw) if raw else CACHE_BYTES
    except ValueError:
        size = -1
    if size < 0:
        raise InvalidInputError("MEMVAULT_CACHE_BYTES must be a whole number of bytes (0 or more).")
    return size


def cache_dir_for(url: str, base: str | os.PathLike[str] | None = None) -> Path:
    """The default replica directory of the store at ``url``: ``$MEMVAULT_CACHE_DIR`` or
    ``$XDG_CACHE_HOME/memvault`` (``~/.cache/memvault``), then a digest of the URL."""
    root = Path(base) if base else cache_root()
    return root / hashlib.sha256(url.encode()).hexdigest()[:32]
