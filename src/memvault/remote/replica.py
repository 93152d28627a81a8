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

from ..errors import IntegrityError, InvalidInputError, RollbackDetectedError, ServiceError, StoreExistsError
from ..fsutil import atomic_write, cache_root, wipe_file
from ..git.repo import GitStore
from ..hoststate import HighWaterMark
from ..keys.framing import frame_records, is_dek_record, record_seq
from ..keys.keyring import Keyring
from ..storage.base import ObjectInfo, ObjectStore
from .layout import (
    CONFIG,
    KEYS,
    LOG,
    PACKS,
    decode_log,
    dek_key,
    encode_log,
    log_key,
    log_seq,
    pack_keys,
    slot_id_of,
    slot_key,
    split_append,
    wait_key,
    wait_of,
)
from .packmap import PackMap

__all__ = ["Replica", "RaceLost", "PACKMAP_FILE", "CACHE_BYTES", "cache_dir_for"]

#: Requests a replica makes at once (uploads of a commit, downloads of a pull).
WORKERS = 16
#: The map of which remote pack holds which object, in the replica directory.
PACKMAP_FILE = "remote-packs"
#: Bytes of packs a replica keeps before it evicts the least recently written ones (fetched again
#: when read); ``$MEMVAULT_CACHE_BYTES`` overrides it.
CACHE_BYTES = 4 * 1024**3
#: Log records a pull fetches and applies at a time.
PULL_BATCH = 256
#: Longest a writer gives way to a host waiting to commit after a lost race (seconds).
COURTESY_SECONDS = 1.0
_PACK_NAME = re.compile(r"\A[0-9a-f]{40}\Z")
T = TypeVar("T")
K = TypeVar("K")


class RaceLost(Exception):
    """Another host created the log record of this sequence number first: nothing of this
    commit counts; bring the replica up to date and run the command again."""


class Replica:
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

        With ``courtesy`` (a writer about to commit), first give way for up to
        :data:`COURTESY_SECONDS` while another host that lost a race waits to commit the next
        sequence number (its marker is listed), so a host that keeps winning cannot starve it.

        Raises:
            RollbackDetectedError: the bucket no longer holds a log record this host has seen, holds
                it replaced, or misses one between two it holds.
            IntegrityError: a record, pack or data key does not verify (nothing of it is applied).
            ServiceError: the object store failed.
        """
        if self._mark is None:
            raise ValueError("a replica made for an upload has no high-water mark to pull with")
        self.stats["pulls"] += 1
        self.keyring.refresh()
        hw = self.keyring.high_water
        local = hw.seq if hw is not None else -1
        self._catch_up_branch()
        mark = self._mark.read()
        first = local if mark is None else min(local, mark[0])
        listed = self._list_log(first, courtesy)
        tags = {seq: info.tag for info in listed if (seq := log_seq(info.key)) is not None}
        where = self.objects.description
        if mark is not None:
            if mark[0] not in tags:
                raise RollbackDetectedError(
                    f"Rollback detected: {where} no longer holds commit #{mark[0]}, which this host has seen "
                    "(the log was rolled back, or a record deleted)."
                )
            if tags[mark[0]] != mark[1]:
                raise RollbackDetectedError(
                    f"Tampering detected: the log record of commit #{mark[0]} in {where} was replaced."
                )
        if local >= 0 and local not in tags:
            raise RollbackDetectedError(
                f"Rollback detected: {where} no longer holds commit #{local}, which this host's cache holds."
            )
        newer = sorted(seq for seq in tags if seq > local)
        if newer != list(range(local + 1, local + 1 + len(newer))):
            raise RollbackDetectedError(f"Tampering detected: a log record is missing from {where}.")
        if not newer:
            if mark is None or mark[0] < local:
                self._mark.write(local, tags[local], durable=self._durable)
            return 0
        missing: set[bytes] = set()
        for at in range(0, len(newer), PULL_BATCH):  # bounded memory for a host that starts cold
            batch = newer[at : at + PULL_BATCH]
            missing |= self._apply(batch)
            self._mark.write(batch[-1], tags[batch[-1]], durable=self._durable)
        self.stats["pulled"] += len(newer)
        self.evict()
        lost = missing - self.keyring.destroyed_ids
        if lost:  # a redaction committed after this pull listed the log may have deleted them: look again
            self.pull()
            lost -= self.keyring.destroyed_ids
        if lost:
            raise IntegrityError(
                f"{where} lacks the data key objects of {len(lost)} version(s) that no redaction destroyed (deleted "
                "from the bucket?): those versions cannot be read; memvault verify lists them."
            )
        return len(newer)

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
        data, idx = self._all(self._get_required, pack_keys(name))
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

    def _apply(self, seqs: list[int]) -> set[bytes]:
        """Fetch the log records ``seqs`` (contiguous, after the replica's newest), their packs and
        data keys, and apply them to the replica (see :meth:`pull`); return the ids of the data keys
        whose objects were missing (a redaction later in the log destroyed them, or else they were
        lost)."""
        where = self.objects.description
        datas = self._all(self._get_required, [log_key(seq) for seq in seqs])
        logs = [decode_log(data, self.store_id, seq) for seq, data in zip(seqs, datas, strict=True)]
        packs = {name for log in logs if not self.git.contains(log.commit_id) for name in log.packs}
        if any(not _PACK_NAME.match(name) for name in packs):
            raise IntegrityError(f"A log record in {where} names a pack that cannot exist.")
        pack_keys_wanted = [key for name in sorted(packs) for key in pack_keys(name)]
        dek_ids = [d for log in logs for d in log.dek_ids]

        def fetch(key: str) -> bytes | None:  # packs must be there; a data key may be destroyed
            return self._get_required(key) if key.startswith(PACKS) else self.objects.get(key)

        fetched = self._all(fetch, pack_keys_wanted + [dek_key(d) for d in dek_ids])  # one round
        pack_files = fetched[: len(pack_keys_wanted)]
        deks = dict(zip(dek_ids, fetched[len(pack_keys_wanted) :], strict=True))
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
                if record is None:  # destroyed by a later redaction (its DESTROY record says so), or lost
                    missing.add(dek_id)
                else:
                    append.append(_checked_dek(record, dek_id, where))
            append.append(log.chained)
        destroyed = self.keyring.destroyed_ids
        self.keyring.append(b"".join(append), durable=self._durable)
        for i, name in enumerate(sorted(packs)):  # mapped only once the records verified
            idx_bytes = pack_files[2 * i + 1]
            assert idx_bytes is not None  # _get_required never gives None
            self.packmap.add(name, idx_bytes)
        self._catch_up_branch()
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

    def _list_log(self, first: int, courtesy: bool) -> list[ObjectInfo]:
        """The log's keys from ``log_key(first)`` on; with ``courtesy``, listed again (after short
        random pauses) while another host's waiting marker names the sequence number after the
        newest record, for at most :data:`COURTESY_SECONDS`. Markers of taken numbers are
        removed in the background."""
        deadline = time.monotonic() + COURTESY_SECONDS
        while True:
            listed = self.objects.list(LOG, start_after=log_key(first - 1) if first > 0 else "")
            seqs = [seq for info in listed if (seq := log_seq(info.key)) is not None]
            tip = max(seqs, default=first - 1)
            waits = [(info.key, w) for info in listed if (w := wait_of(info.key)) is not None]
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
                return listed
            self.stats["courtesy_waits"] += 1
            time.sleep(random.uniform(0.01, 0.05))  # noqa: S311 - jitter, not a secret

    def _get_required(self, key: str) -> bytes:
        data = self.objects.get(key)
        if data is None:
            raise IntegrityError(f"{self.objects.description} is missing the object {key} of this store.")
        return data

    # -- publish ----------------------------------------------------------------------------------

    def publish(self, seq: int, pack: tuple[str, bytes, bytes], append: bytes) -> None:
        """Make a commit: upload its pack and data keys, then create its log record (the commit
        point). The caller appends ``append`` to the replica's keyring afterwards.

        Args:
            seq: the commit's sequence number.
            pack: ``(name, pack bytes, index bytes)`` of the commit's pack.
            append: the keyring records of the commit (DEK records, then chained records).

        Raises:
            RaceLost: another host committed ``seq`` first (nothing of this commit counts).
            ServiceError: the object store failed (before the log record: nothing committed;
                ``outcome_unknown`` when even reading back could not tell).
        """
        name, data, idx = pack
        deks, chained = split_append(append)
        pack_key, idx_key = pack_keys(name)
        uploads: dict[str, bytes] = {pack_key: data, idx_key: idx}
        uploads.update({dek_key(dek_id): record for dek_id, record in deks.items()})
        self._all(lambda key: self.objects.create(key, uploads[key]), uploads)
        record = encode_log(self.store_id, (name,), tuple(deks), chained)
        tag = self.objects.create(log_key(seq), record)
        if tag is None:
            self.stats["races_lost"] += 1
            # Our data keys are nobody's: remove them (packs are named by content and harmless);
            # say that this host waits to commit the next number (others give way, see pull).
            if self._waiting is None:
                self._since = seq
            wait, self._waiting = self._waiting, wait_key(seq + 1, self._since, self.host)
            self._pool.submit(self.objects.create, self._waiting, b"")  # advice: alongside the next pull
            for key in [dek_key(dek_id) for dek_id in deks] + ([wait] if wait else []):
                self._pool.submit(self.objects.delete, key)
            raise RaceLost()
        self.stop_waiting()
        self.stats["published"] += 1
        self.packmap.add(name, idx)
        self.evict()
        if self._mark is not None:
            try:
                self._mark.write(seq, tag, durable=self._durable)
            except OSError:
                pass  # the next pull moves the mark

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
        segments = _segments(self.keyring.records())
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

    def versioning_warning(self) -> str | None:
        """What to tell an operator when the bucket keeps old versions of objects (a destroyed data
        key's object then survives its deletion), or None."""
        state = self.objects.versioning()
        if state is None:
            return None
        return (
            f"{self.objects.description} has versioning {state.lower()}: a data key that redaction deletes, a "
            "data key a rotation re-wrapped and a removed key slot stay in the bucket's old versions until they "
            "expire. Add a lifecycle rule that expires noncurrent versions under the store's deks/ and keys/ "
            "prefixes (NoncurrentVersionExpiration), or use a bucket without versioning (SECURITY.md, object "
            "storage)."
        )

    # -- other objects ------------------------------------------------------------------------------

    def destroyed(self, dek_ids: Iterable[bytes]) -> None:
        """Delete the objects of destroyed data keys (after the redaction's commit)."""
        self._all(self.objects.delete, [dek_key(dek_id) for dek_id in dek_ids])

    def delete_destroyed(self, dek_ids: Iterable[bytes]) -> None:
        """:meth:`destroyed` right after this host's redaction committed: a failure says that the
        redaction stands and who finishes the deletion.

        Raises:
            ServiceError: the object store failed (the keys are destroyed all the same).
        """
        try:
            self.destroyed(dek_ids)
        except ServiceError as err:
            raise ServiceError(
                err.service,
                err.action,
                f"{err.reason}. The redaction is committed and its keys are gone from this host's cache, but their "
                "objects are still in the bucket: the next host to open the store, or `memvault gc`, deletes them",
            ) from None

    def push_rewrapped(self) -> None:
        """Replace the data key objects with the replica's DEK records after a master-key rotation
        re-wrapped them (objects of keys destroyed meanwhile stay deleted)."""
        deks, _chained = split_append(self.keyring.records())

        def replace(dek_id: bytes) -> None:
            current = self.objects.get_tagged(dek_key(dek_id))
            if current is not None and current[0] != deks[dek_id]:
                self.objects.swap(dek_key(dek_id), deks[dek_id], current[1])

        self._all(replace, list(deks))

    def push_slot(self, slot_id: str, data: bytes | None) -> None:
        """Upload a new key slot (``data``) or delete one (None)."""
        if data is None:
            self.objects.delete(slot_key(slot_id))
        elif self.objects.create(slot_key(slot_id), data) is None:
            raise IntegrityError(f"{self.objects.description} already holds a different key slot {slot_id}.")

    def push_config(self, data: bytes) -> None:
        """Replace the store's ``memvault.json`` (after a format upgrade)."""
        current = self.objects.get_tagged(CONFIG)
        self.objects.swap(CONFIG, data, current[1] if current else None)

    @staticmethod
    def pull_slots_from(objects: ObjectStore, keys_dir: Path, *, durable: bool) -> None:
        """Make the key slots in ``keys_dir`` those in ``objects`` (added, changed or removed);
        the caller holds the replica's writer lock."""
        remote = [sid for info in objects.list(KEYS) if (sid := slot_id_of(info.key))]
        local = {p.name[:-5] for p in keys_dir.glob("*.json")}
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            datas = list(pool.map(objects.get, [slot_key(sid) for sid in remote]))
        for sid, data in zip(remote, datas, strict=True):
            path = keys_dir / f"{sid}.json"
            if data is not None and (sid not in local or path.read_bytes() != data):
                atomic_write(path, data, durable=durable)
        for sid in local - set(remote):
            wipe_file(keys_dir / f"{sid}.json")


def _segments(data: bytes) -> list[tuple[int, bytes]]:
    """Cut keyring records into one run per commit: everything up to the last record about
    sequence number ``n`` (its COMMIT, an ABORT of it, a replacement) before the first COMMIT of
    ``n + 1``. Records after the last commit's (a torn tail, an access-file record) are left."""
    out: list[tuple[int, bytes]] = []
    records, _ = frame_records(data)
    start = close = 0
    current: int | None = None
    for end, rtype, body in records:
        seq = record_seq(rtype, body)
        if seq is not None:
            if current is not None and seq == current + 1:
                out.append((current, data[start:close]))
                start = close
            if current is None or seq >= current:
                current = seq
            close = end
    if current is not None:
        out.append((current, data[start:close]))
    return out


def _cache_bytes() -> int:
    raw = os.environ.get("MEMVAULT_CACHE_BYTES", "").strip()
    try:
        size = int(raw) if raw else CACHE_BYTES
    except ValueError:
        size = -1
    if size < 0:
        raise InvalidInputError("MEMVAULT_CACHE_BYTES must be a whole number of bytes (0 or more).")
    return size


def _checked_dek(record: bytes, dek_id: bytes, where: str) -> bytes:
    """``record`` if it is exactly one DEK record of ``dek_id``."""
    records, end = frame_records(record)
    if end != len(record) or len(records) != 1 or not is_dek_record(records[0][1], records[0][2]):
        raise IntegrityError(f"A data key object in {where} is damaged.")
    if records[0][2][:16] != dek_id:
        raise IntegrityError(f"A data key object in {where} is damaged.")
    return record


def cache_dir_for(url: str, base: str | os.PathLike[str] | None = None) -> Path:
    """The default replica directory of the store at ``url``: ``$MEMVAULT_CACHE_DIR`` or
    ``$XDG_CACHE_HOME/memvault`` (``~/.cache/memvault``), then a digest of the URL."""
    root = Path(base) if base else cache_root()
    return root / hashlib.sha256(url.encode()).hexdigest()[:32]
