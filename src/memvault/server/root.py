"""A server root: the catalog and the memory stores, in a directory or under an ``s3://`` prefix.

Layout (docs/format.md "Server root"): ``catalog`` is a memvault store unlocked by the operator's
key source (``MEMVAULT_KEY``, ``MEMVAULT_KEY_FILE``, ``MEMVAULT_PASSPHRASE``, like any store); it
holds the registry (:mod:`.catalog`). ``stores/<memstore id>`` is one memvault store per memory
store, with its own id and data keys, unlocked by a key derived from the catalog's master key:
``HKDF(master, salt=catalog id, info="memvault/v1/server/store-key/" || memstore id)``. So the
server process alone unlocks the stores, one key source opens the whole root, and each store is
still a store: ``memvault --store ROOT/stores/<id> log`` works with the root's key source.

Several processes may serve one root: every change of the registry is a catalog commit (the
catalog's writer lock or conditional writes order them), and each request reads the catalog's
head first, so a revoked key stops working at the next request in every process.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import crypto
from ..errors import InvalidInputError, NotFoundError, StoreExistsError, StoreNotFoundError
from ..keys.slots import Unlock
from ..memories import Memories
from ..paths import parse_path
from ..remote.replica import cache_dir_for
from ..settings import KdfParams, StoreSettings
from ..storage.base import ObjectStore
from ..storage.url import is_remote, open_backend, parse_url
from ..store import MemoryStore, Transaction
from ..store.lock import DEFAULT_LOCK_TIMEOUT
from .catalog import (
    KEYS_DIR,
    STORES_DIR,
    ApiKeyRecord,
    Registry,
    StoreRecord,
    check_name,
    parse_key,
    parse_store,
    record_bytes,
)
from .compaction import STOP_SECONDS, BackgroundGc, GcPolicy
from .openstores import OpenStores
from .replicas import DEFAULT_REPLICAS, ReplicaCache

__all__ = [
    "ServerRoot",
    "API_STORE_SETTINGS",
    "store_location",
    "served_root_of",
    "open_served_store",
    "new_id",
    "CATALOG",
]

CATALOG = "catalog"
STORES = "stores"
#: Settings of every store the API creates: the API's path grammar and limits.
API_STORE_SETTINGS = StoreSettings(
    path_grammar="api", max_file_bytes=102_400, max_path_bytes=1024 + len("/memories"), max_depth=20,
    max_segment_bytes=1024,
)  # fmt: skip
#: Open memory stores kept per process (least recently used closed first).
DEFAULT_OPEN_STORES = 64
#: Requests one memory store may have in progress in a process at once; more are refused (503) at
#: once, so requests waiting on one slow or locked store never take every thread of the server's
#: pool (40) from the others.
DEFAULT_STORE_REQUESTS = 16
_SERVER_ACTOR = "memvault-server"
_STORE_ID = re.compile(r"memstore_[0-9a-f]{32}")


def _join(root: str, *parts: str) -> str:
    if is_remote(root):
        return "/".join([root.rstrip("/"), *parts])
    return os.path.join(root, *parts)


def store_location(root: str, store_id: str) -> str:
    """Where the memory store ``store_id`` of ``root`` lives."""
    return _join(root, STORES, store_id)


def served_root_of(address: str | os.PathLike[str]) -> str | None:
    """The server root a store location lies in (``ROOT/stores/memstore_...``), or None."""
    text = str(address).rstrip("/")
    if is_remote(text):
        head, _, name = text.rpartition("/")
        parent, _, stores = head.rpartition("/")
        return parent if stores == STORES and _STORE_ID.fullmatch(name) else None
    path = Path(text)
    if path.parent.name == STORES and _STORE_ID.fullmatch(path.name) and (path.parent.parent / CATALOG).is_dir():
        return str(path.parent.parent)
    return None


def open_served_store(address: str | os.PathLike[str], unlock: Unlock, **options: Any) -> MemoryStore:
    """Open a memory store of a server root with the root's key source (``unlock`` opens the
    catalog; the store's own key is derived from it). ``options`` go to ``MemoryStore.open``.

    Raises:
        StoreNotFoundError: ``address`` is no store of a server root. And what opening raises.
    """
    root_location = served_root_of(address)
    if root_location is None:
        raise StoreNotFoundError("Error: This is not a memory store of a memvault server root.")
    root = ServerRoot.open(root_location, unlock)
    try:
        store_unlock = root.store_unlock(str(address).rstrip("/").rpartition("/")[2])
    finally:
        root.close()
    return MemoryStore.open(address, unlock=store_unlock, **options)


def new_id(prefix: str) -> str:
    """A new random id: ``prefix`` and 32 hexadecimal digits (128 bits)."""
    return prefix + crypto.random_bytes(16).hex()


class ServerRoot:
    """An open server root. Thread-safe. Use :meth:`init` or :meth:`open`.

    Args:
        location: the root (a directory, ``s3://bucket/prefix`` or ``file:///path``).
        catalog: the open catalog store.
        cache_dir: where replicas of stores in object storage live (default: the cache root).
        open_stores: how many memory stores stay open at once.
        lock_timeout: how long a store's writer lock is waited for.
        store_requests: how many requests one memory store may have in progress at once (more:
            :class:`LockedError` at once).
        cache_replicas, cache_bytes: for a root in object storage, how many replicas of its stores
            this host keeps in its cache, and how many bytes in them (0: no bound); the least
            recently used closed ones beyond are deleted (:mod:`.replicas`).
        gc: for a root in object storage, when this process compacts its stores in the background
            (:mod:`.compaction`; default: never; nothing for a local root).
    """

    def __init__(
        self, location: str, catalog: MemoryStore, *, cache_dir: str | None = None,
        open_stores: int = DEFAULT_OPEN_STORES, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        store_requests: int = DEFAULT_STORE_REQUESTS, cache_replicas: int = DEFAULT_REPLICAS, cache_bytes: int = 0,
        gc: GcPolicy | None = None,
    ) -> None:  # fmt: skip
        self.location = location
        self.catalog = catalog
        self._remote = is_remote(location)
        self._cache_dir = cache_dir
        self._lock_timeout = lock_timeout
        master = catalog.master_keys()[min(catalog.master_keys())]
        self._secret = crypto.hkdf(master, salt=catalog.store_id, info=b"memvault/v1/server")
        self._registry = Registry()
        #: One read of the catalog's head at a time; callers that arrive meanwhile wait for the next.
        self._head_cond = threading.Condition()
        self._head_reading = False
        self._head_read_at = float("-inf")
        self._open_lock = threading.Lock()
        self._stores = OpenStores(self._open_store, limit=open_stores, per_store=store_requests, closed=self._closed)
        bounds = (cache_replicas, cache_bytes) if self._remote else (0, 0)
        self.replicas = ReplicaCache(self._replica_dir, max_count=bounds[0], max_bytes=bounds[1],
                                     is_open=self._stores.is_open)  # fmt: skip
        #: The replica in-use marks of open stores in object storage (:meth:`ReplicaCache.hold`).
        self._held: dict[int, int] = {}
        #: The background compaction of this process (a local root: never any).
        self.gc = BackgroundGc(self, gc if gc is not None and self._remote else GcPolicy())

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def init(
        cls, location: str | os.PathLike[str], unlock: Unlock, *, durability: str = "full",
        kdf: KdfParams | None = None, cache_dir: str | None = None,
    ) -> ServerRoot:  # fmt: skip
        """Make a new server root at ``location`` (an empty or missing directory, or an empty
        prefix in object storage) whose catalog ``unlock`` opens.

        Raises:
            StoreExistsError: something is there already. And what ``MemoryStore.create`` raises.
        """
        root = str(location)
        if not is_remote(root):
            path = Path(root)
            if path.exists() and (not path.is_dir() or any(path.iterdir())):
                raise StoreExistsError("Error: The server root must be a new or empty directory.")
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            (path / STORES).mkdir(mode=0o700, exist_ok=True)
        settings = StoreSettings.model_validate(
            {"durability": durability, "scrub": {"enabled": False}, "max_file_bytes": 64 * 1024}
        )
        catalog = MemoryStore.create(_join(root, CATALOG), unlock=unlock, settings=settings, kdf=kdf,
                                     cache_dir=cache_dir)  # fmt: skip
        return cls(root, catalog, cache_dir=cache_dir)

    @classmethod
    def open(
        cls, location: str | os.PathLike[str], unlock: Unlock, *, cache_dir: str | None = None,
        open_stores: int = DEFAULT_OPEN_STORES, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        store_requests: int = DEFAULT_STORE_REQUESTS, cache_replicas: int = DEFAULT_REPLICAS, cache_bytes: int = 0,
        gc: GcPolicy | None = None,
    ) -> ServerRoot:  # fmt: skip
        """Open the server root at ``location`` with the catalog's key (the options as for the class).

        Raises:
            StoreNotFoundError: no server root there. WrongKeyError, ProviderError, IntegrityError,
            StorageError: as ``MemoryStore.open``.
        """
        root = str(location)
        if not is_remote(root) and not Path(root, CATALOG).is_dir():
            raise StoreNotFoundError("Error: No memvault server root here (run `memvault server init` first).")
        catalog = MemoryStore.open(_join(root, CATALOG), unlock=unlock, cache_dir=cache_dir,
                                   lock_timeout=lock_timeout)  # fmt: skip
        return cls(root, catalog, cache_dir=cache_dir, open_stores=open_stores, lock_timeout=lock_timeout,
                   store_requests=store_requests, cache_replicas=cache_replicas, cache_bytes=cache_bytes,
                   gc=gc)  # fmt: skip

    def derive(self, purpose: str) -> bytes:
        """A 32-byte key of this root for ``purpose`` (cursor keys, key digests, store keys)."""
        return crypto.hkdf(self._secret, salt=b"", info=b"memvault/v1/server/" + purpose.encode("utf-8"))

    @functools.cached_property
    def _digest_key(self) -> bytes:
        return self.derive("apikey-digest")

    def store_unlock(self, store_id: str) -> Unlock:
        """How memory store ``store_id`` of this root is unlocked."""
        return Unlock(raw_key=self.derive("store-key/" + store_id))

    def close(self) -> None:
        """Stop the background gc (waiting at most :data:`~.compaction.STOP_SECONDS` for a run in
        progress), close every open store and the catalog."""
        self.gc.stop(STOP_SECONDS)
        self._stores.close()
        self.catalog.close()

    # -- the registry ------------------------------------------------------------------------------

    def registry(self) -> Registry:
        """The registry at the catalog's head as it is now (records parsed again only when their
        file changed). Concurrent callers share one read of the head when it began after they
        called (in object storage, one listing serves every request that waits for it)."""
        arrived = time.monotonic()
        with self._head_cond:
            while True:
                if self._head_read_at >= arrived:
                    return self._registry
                if not self._head_reading:
                    break
                self._head_cond.wait()
            self._head_reading = True
        started = time.monotonic()
        fresh: Registry | None = None
        try:
            commit_id, _seq = self.catalog.head
            fresh = self._registry if self._registry.commit_id == commit_id else self._load_registry(commit_id)
        finally:
            with self._head_cond:
                self._head_reading = False
                if fresh is not None:
                    self._registry, self._head_read_at = fresh, started
                self._head_cond.notify_all()
        return fresh

    def _load_registry(self, commit_id: bytes) -> Registry:
        old = self._registry
        fresh = Registry(commit_id)
        with self.catalog.reading() as txn:
            for directory, parse in ((STORES_DIR, parse_store), (KEYS_DIR, parse_key)):
                parent = parse_path(directory)
                for name in txn.child_names(parent):
                    path = parent.child(name)
                    node = txn.get(path)
                    if node is None or node.is_dir:
                        continue
                    cached = old.parsed.get(path.text)
                    record = cached[1] if cached is not None and cached[0] == node.sha256 else parse(txn.read(path))
                    fresh.parsed[path.text] = (node.sha256, record)
                    if isinstance(record, StoreRecord):
                        fresh.stores[record.id] = record
                    else:
                        fresh.keys[record.id] = record
                        if record.revoked_at is None:
                            fresh.by_digest[record.digest] = record
        return fresh

    def _write(self, record: StoreRecord | ApiKeyRecord, *, actor: str, command: str) -> None:
        directory = STORES_DIR if isinstance(record, StoreRecord) else KEYS_DIR
        path = parse_path(f"{directory}/{record.id}.json")
        data = record_bytes(record)

        def apply(txn: Transaction) -> None:
            txn.write_file(path, data)

        self.catalog.transact(apply, command=command, paths=(path.text,), actor=actor, session="")

    def _remove(self, record: StoreRecord, *, actor: str) -> None:
        path = parse_path(f"{STORES_DIR}/{record.id}.json")

        def apply(txn: Transaction) -> None:
            if txn.get(path) is not None:
                txn.delete(path)

        self.catalog.transact(apply, command="store-delete", paths=(path.text,), actor=actor, session="")

    # -- memory stores -----------------------------------------------------------------------------

    def store(self, store_id: str, registry: Registry | None = None) -> StoreRecord:
        """The live store ``store_id`` in ``registry`` (default: the catalog's head); NotFoundError
        if there is none."""
        record = (registry or self.registry()).stores.get(store_id) if isinstance(store_id, str) else None
        if record is None or record.deleting:
            raise NotFoundError("Error: No memory store has this id.")
        return record

    def create_store(
        self, name: str, *, description: str = "", metadata: dict[str, str] | None = None, actor: str = _SERVER_ACTOR
    ) -> StoreRecord:
        """A new memory store: its own memvault store under ``stores/``, then its catalog record."""
        store_id = new_id("memstore_")
        now = time.time()
        record = StoreRecord(store_id, check_name(name), description, dict(metadata or {}), now, now)
        location = store_location(self.location, store_id)
        settings = API_STORE_SETTINGS.model_copy(update={"durability": self.catalog.settings.durability})
        MemoryStore.create(location, unlock=self.store_unlock(store_id), settings=settings,
                           cache_dir=self._cache_for(store_id)).close()  # fmt: skip
        try:
            self._write(record, actor=actor, command="store-create")
        except BaseException:
            self._destroy(store_id)
            raise
        return record

    def change_store(
        self, store_id: str, change: Callable[[StoreRecord], StoreRecord], *, actor: str = _SERVER_ACTOR,
        command: str = "store-update",
    ) -> StoreRecord:  # fmt: skip
        """Apply ``change`` to the store's record as it is at the catalog's head, under the catalog's
        writer lock (two concurrent changes both land), and record the result; nothing is written
        when ``change`` returns the record unchanged. Returns the record as it now is.

        Raises:
            NotFoundError: no live store has this id. Whatever ``change`` raises (nothing written).
        """
        path = parse_path(f"{STORES_DIR}/{store_id}.json")

        class _Same(Exception):
            pass

        def apply(txn: Transaction) -> StoreRecord:
            if txn.get(path) is None:
                raise NotFoundError("Error: No memory store has this id.")
            current = parse_store(txn.read(path))
            if current.deleting:
                raise NotFoundError("Error: No memory store has this id.")
            changed = change(current)
            if changed == current:
                raise _Same(current)
            txn.write_file(path, record_bytes(changed))
            return changed

        try:
            return self.catalog.transact(apply, command=command, paths=(path.text,), actor=actor, session="").value
        except _Same as same:
            return same.args[0]  # type: ignore[no-any-return]

    def delete_store(self, store_id: str, *, actor: str = _SERVER_ACTOR) -> None:
        """Delete a memory store for good: hidden first (one catalog commit), then its keys and
        every file or object destroyed (``shred-store``), then its record removed."""
        record = self.store(store_id)
        self._write(replace(record, deleting=True), actor=actor, command="store-delete")
        self.gc.forget(store_id)  # this process's gc of it has finished (no checkpoint after the shredding)
        self._evict(store_id)
        self._destroy(store_id)
        self._remove(record, actor=actor)

    def finish_deletions(self) -> int:
        """Finish the deletions a stopped process left half done; returns how many."""
        done = 0
        for record in list(self.registry().stores.values()):
            if record.deleting:
                self._destroy(record.id)
                self._remove(record, actor=_SERVER_ACTOR)
                done += 1
        return done

    def _cache_for(self, store_id: str) -> str | None:
        return None if self._cache_dir is None else os.path.join(self._cache_dir, store_id)

    def _destroy(self, store_id: str) -> None:
        from ..erasure.destroy import shred_store

        held = self.replicas.hold(store_id) if self._remote else None  # no trim deletes its replica meanwhile
        try:
            try:
                store = MemoryStore.open(store_location(self.location, store_id), unlock=self.store_unlock(store_id),
                                         check_head=False, cache_dir=self._cache_for(store_id))  # fmt: skip
            except StoreNotFoundError:
                return  # destroyed already
            shred_store(store)
        finally:
            if held is not None:
                self.replicas.release(held)
                self.replicas.forget(store_id)

    # -- open stores -------------------------------------------------------------------------------

    @contextmanager
    def memories(self, store_id: str, registry: Registry | None = None) -> Iterator[Memories]:
        """The operations on live store ``store_id`` (checked in ``registry``, default: the
        catalog's head), opened once and kept open (LRU). Opening a store waits only for another
        opening of the same store, never for other stores.

        Raises:
            NotFoundError: no live store has this id. LockedError: the store has ``store_requests``
            requests in progress already. And what opening a store raises.
        """
        self.store(store_id, registry)
        with self._stores.use(store_id) as memories:
            yield memories
            remote = memories.store.remote
            if remote is not None:
                self.gc.note(store_id, remote.next_commit)

    def _evict(self, store_id: str) -> None:
        self._stores.evict(store_id)

    def _open_store(self, store_id: str) -> Memories:
        held = self.replicas.hold(store_id) if self._remote else None  # its replica stays while open
        try:
            store = MemoryStore.open(store_location(self.location, store_id), unlock=self.store_unlock(store_id),
                                     cache_dir=self._cache_for(store_id), lock_timeout=self._lock_timeout)  # fmt: skip
        except BaseException:
            if held is not None:
                self.replicas.release(held)
            raise
        if held is not None:
            with self._open_lock:
                self._held[id(store)] = held
        return Memories(store, store_id, cursor_key=self.derive("cursor"))

    def _closed(self, memories: Memories) -> None:
        with self._open_lock:
            held = self._held.pop(id(memories.store), None)
        if held is not None:
            self.replicas.release(held)
            self.replicas.trim_soon(list(self.last_registry().stores))

    def _replica_dir(self, store_id: str) -> Path:
        if self._cache_dir is not None:
            return Path(os.path.abspath(self._cache_dir), store_id)
        return cache_dir_for(str(parse_url(store_location(self.location, store_id))))

    # -- what the background gc needs (:class:`.compaction.GcHost`) ---------------------------------

    def gc_cache_dir(self, store_id: str) -> Path:
        """The replica a background gc of ``store_id`` uses: beside the serving replicas, in ``gc/``."""
        serving = self._replica_dir(store_id)
        return serving.parent / "gc" / serving.name

    def open_for_gc(self, store_id: str, cache_dir: Path) -> MemoryStore:
        """Store ``store_id`` opened with its replica in ``cache_dir`` (not the serving one)."""
        return MemoryStore.open(store_location(self.location, store_id), unlock=self.store_unlock(store_id),
                                cache_dir=cache_dir, lock_timeout=self._lock_timeout)  # fmt: skip

    def store_objects(self, store_id: str) -> ObjectStore:
        """The objects of store ``store_id`` in object storage."""
        return open_backend(parse_url(store_location(self.location, store_id)))

    def is_live(self, store_id: str) -> bool:
        """Whether ``store_id`` is a store of the root, not being deleted, as the last catalog read found."""
        record = self.last_registry().stores.get(store_id)
        return record is not None and not record.deleting

    @property
    def remote(self) -> bool:
        """Whether the root is in object storage."""
        return self._remote

    def last_registry(self) -> Registry:
        """The registry as this process last read it (no read of the catalog's head)."""
        with self._head_cond:
            return self._registry

    def is_warm(self, store_id: str | None) -> bool:
        """Whether a read needs no slow step: the root is a local directory and the store (if any)
        is open in this process with its lineage index built (reads then cost file reads only)."""
        if self._remote:
            return False
        if store_id is None:
            return True
        return self._stores.indexed(store_id)

    def open_count(self) -> int:
        """How many memory stores are open now (kept for requests, or being closed)."""
        return self._stores.count()

    # -- API keys ----------------------------------------------------------------------------------

    def create_key(
        self, name: str, *, admin: bool = False, stores: tuple[str, ...] = (), actor: str = _SERVER_ACTOR
    ) -> tuple[ApiKeyRecord, str]:
        """A new API key: its record and its secret (``mvk_`` and 256 random bits, shown once)."""
        registry = self.registry()
        for store_id in stores:
            if store_id not in registry.stores or registry.stores[store_id].deleting:
                raise InvalidInputError(f"Error: No memory store has the id {store_id!r}.")
        secret = "mvk_" + base64.urlsafe_b64encode(crypto.random_bytes(32)).decode("ascii").rstrip("=")
        record = ApiKeyRecord(new_id("apikey_"), check_name(name), self.key_digest(secret), admin,
                              tuple(stores), time.time())  # fmt: skip
        self._write(record, actor=actor, command="apikey-create")
        return record, secret

    def key_digest(self, secret: str) -> str:
        """The digest the catalog keeps of an API key's secret (HMAC-SHA256 under a root key)."""
        return crypto.mac(self._digest_key, secret.encode("utf-8")).hex()

    def revoke_key(self, key_id: str, *, actor: str = _SERVER_ACTOR) -> ApiKeyRecord:
        """Revoke an API key (NotFoundError if there is none; revoking twice changes nothing)."""
        record = self.registry().keys.get(key_id)
        if record is None:
            raise NotFoundError("Error: No API key has this id.")
        if record.revoked_at is not None:
            return record
        revoked = replace(record, revoked_at=time.time())
        self._write(revoked, actor=actor, command="apikey-revoke")
        return revoked

    def authenticate(self, secret: str, registry: Registry | None = None) -> ApiKeyRecord | None:
        """The live key whose secret this is, else None (in ``registry``, default: the catalog's head)."""
        if not isinstance(secret, str) or not secret.startswith("mvk_") or len(secret) > 128:
            return None
        return (registry or self.registry()).by_digest.get(self.key_digest(secret))
