"""The encrypted, git-versioned memory store: open/create, the head state, transactions.

Every successful :meth:`MemoryStore.transact` is exactly one commit; a failed one leaves the
branch, the keyring and the cached state as they were. Writers are serialised by a ``flock`` on
``<store>/lock`` and re-read the branch under it, so no update is lost; readers never wait. The
write order and crash recovery are in docs/format.md §7, the freshness checks in §8.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from .. import crypto
from ..errors import InvalidInputError, MemvaultError, PathExistsError, StorageError
from ..format import records
from ..format.records import CommitMeta, Node
from ..git.repo import GitStore
from ..hoststate import anchor_for
from ..keys.keyring import Keyring
from ..keys.slots import (
    Subkeys,
    Unlock,
)
from ..paths import parse_path, sibling_key
from ..remote.replica import Replica
from ..settings import KdfParams, StoreSettings
from . import config as cfg
from . import opening, transaction, upkeep
from .access import AccessLog
from .atimes import FILE_NAME as ATIMES_FILE
from .atimes import AccessTimes
from .branch import BRANCH_PREFIX, BranchStore, check_branch_name, is_branch_name
from .commit import CommitWriter
from .config import FORMAT_VERSION, chains_key_changes, extends_object_log
from .head import Head
from .hosting import Hosting
from .journal import Journal, journal_available
from .keychanges import KeyChanges
from .lock import DEFAULT_LOCK_TIMEOUT, StoreLock
from .reads import FileReads
from .replicated import publish_config, run_racing
from .state import PLAINTEXT_CACHE_BYTES, OpenedCommit, StateReader, StoreState
from .transaction import Committed, Transaction, commit_meta_after

__all__ = ["MemoryStore"]

#: :meth:`MemoryStore.close` merges packs (and packs loose objects, for at most ``CLOSE_PACK_SECONDS``)
#: once this store object has written this many objects (about 100 commits).
PACK_AFTER_OBJECTS = 1000
CLOSE_PACK_SECONDS = 3.0
#: ... and merges packs holding at most this many bytes together (``memvault gc`` merges any).
CLOSE_MERGE_BYTES = 64 * 1024 * 1024
T = TypeVar("T")


class _LiveTokens:
    """The path tokens of the head's files, for pruning read times: exact for the tokens in
    ``exact`` (the reads this store object records: their shards are decoded if need be) and
    for those whose shard is decoded; any other token counts as live (so closing a store that
    read one file does not decode every shard; its read time is pruned by a store object that
    decoded its shard)."""

    def __init__(self, state: StoreState, exact: frozenset[bytes]) -> None:
        self._state = state
        self._exact = exact

    def __contains__(self, token: object) -> bool:
        if not isinstance(token, bytes) or not token:
            return False
        shard = self._state.shard_name(token)
        nodes = self._state.decoded(shard)
        if nodes is None:
            if token not in self._exact:
                return True
            nodes = self._state.shard(shard)
        return token in nodes


class MemoryStore(FileReads, Hosting, KeyChanges):
    """An encrypted memory store in a directory. Thread-safe; many processes may share one.

    Use :meth:`create` or :meth:`open`; both take exactly one of ``passphrase`` or
    ``key_file`` (a file holding a raw 32-byte key). Applications read files with
    :meth:`read_text`, :meth:`read_bytes`, :meth:`list` and :meth:`exists` (:mod:`.reads`).
    """

    def __init__(  # fmt: skip
        self,
        root: Path,
        store_id: bytes,
        settings: StoreSettings,
        master_keys: dict[int, bytes],
        git: GitStore,
        *,
        _token: object,
    ) -> None:
        if _token is not opening.TOKEN:
            raise TypeError("use MemoryStore.create() or MemoryStore.open()")
        self.root = root
        self.store_id = store_id
        self.settings = settings
        self.git = git
        #: The store's format version (``memvault.json``); it picks the node record encoding.
        self.format_version = FORMAT_VERSION
        self._epoch = max(master_keys)
        self._master_keys = dict(master_keys)
        #: Id of the key slot that unlocked this store object.
        self.unlocked_slot = b""
        self._subkeys = {e: Subkeys(k, store_id, e) for e, k in master_keys.items()}
        #: The first epoch's subkeys serve for good (a rotation changes only the wrap key).
        self._keys = self._subkeys[min(master_keys)]
        self._token_mac = crypto.mac_function(self._keys.name)
        self._durable = settings.durability == "full"
        wraps = {e: s.wrap for e, s in self._subkeys.items()}
        self.keyring = Keyring(root / "keyring", store_id, wraps, self._keys.keyring, tombstone_key=self._keys.meta)
        self._lock = StoreLock(root / "lock")
        #: The thread holding the writer lock through this store object, if any.
        self._writer_thread: int | None = None
        self._swept = False
        #: Objects written by this store object since it last packed (see :meth:`close`).
        self._objects_written = 0
        self._state_lock = threading.RLock()
        #: Last-read times of files (for expiry), merged into ``access`` now and then.
        self.access_times = AccessTimes(root / ATIMES_FILE, self._keys.access, store_id)
        self.access_log = AccessLog(
            self.access_times, self.keyring, self._lock, self._state_lock, durable=self._durable,
            chained=lambda: chains_key_changes(self.format_version) and self.remote is None,
            live=lambda: _LiveTokens(self._sync(writer=False), self.access_times.pending()),
        )  # fmt: skip
        self._reader = StateReader(git, self.keyring, self._keys, store_id, self._token_mac, lock=self._state_lock)
        self._reader.fold, self._reader.max_files = sibling_key(settings), lambda: self.settings.max_files
        #: This host's anchor of the store directory (docs/format.md §14.2); None for a replica.
        self.anchor = anchor_for(root, store_id, self._keys.keyring, self.keyring.recorded_commits)
        self._head = Head(self._reader, self.keyring, durable=self._durable, anchor=self.anchor)
        self._writer_of_commits = CommitWriter(
            self._reader, self.keyring, self._keys, store_id, durable=self._durable, on_objects=self._wrote_objects,
            on_stale=self._drop_state, on_published=self._head.committed,
        )  # fmt: skip
        if self._durable and journal_available():  # used from format version 5 (docs/format.md §7.1)
            self._writer_of_commits.journal = journal = Journal(root, store_id, self._keys.keyring)
            journal.after_checkpoint = git.packs.retire_synced
            self.keyring.before_rewrite = lambda: journal.checkpoint(wipe=True)
        #: For a store in object storage: the replica (``root`` is the host's cache of it), else None.
        self.remote: Replica | None = None

    def is_recorded_access_file(self, digest: bytes) -> bool:
        """Whether ``digest`` names the access-time file the keyring recorded last."""
        return self.access_log.is_recorded(digest)

    def _wrote_objects(self, n: int) -> None:
        self._objects_written += n

    def _drop_state(self) -> None:  # the branch moved but the cached state could not follow: reload lazily
        self._head.state = None

    # -- construction (store/opening.py) ---------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        passphrase: str | None = None,
        key_file: str | os.PathLike[str] | None = None,
        settings: StoreSettings | None = None,
        kdf: KdfParams | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        plaintext_cache_bytes: int = PLAINTEXT_CACHE_BYTES,
        allow_weak_passphrase: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        key: str | None = None,
        unlock: Unlock | None = None,
    ) -> MemoryStore:
        """Create a new store in directory ``path`` (created if missing; must be empty), or at an
        empty ``s3://bucket/prefix`` or ``file:///path`` URL (object storage). A failure or an
        interruption leaves no half-made store directory (:mod:`.building`).

        ``lock_timeout``, ``plaintext_cache_bytes``, ``cache_dir``, ``key``: see :meth:`open`;
        ``unlock``: instead of ``passphrase``/``key_file``/``key``. A passphrase shorter than 12
        characters is refused unless ``allow_weak_passphrase``.
        """
        return opening.create_store(
            cls, path, unlock if unlock is not None else Unlock.of(passphrase, key_file, key), settings=settings,
            kdf=kdf, lock_timeout=lock_timeout, plaintext_cache_bytes=plaintext_cache_bytes,
            allow_weak_passphrase=allow_weak_passphrase, cache_dir=cache_dir,
        )  # fmt: skip

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        passphrase: str | None = None,
        key_file: str | os.PathLike[str] | None = None,
        check_head: bool = True,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        plaintext_cache_bytes: int = PLAINTEXT_CACHE_BYTES,
        cache_dir: str | os.PathLike[str] | None = None,
        key: str | None = None,
        unlock: Unlock | None = None,
    ) -> MemoryStore:
        """Open an existing store (a directory, or an ``s3://`` / ``file://`` URL of object
        storage) with exactly one of ``passphrase``, ``key_file``, ``key`` (a key provider's URI:
        ``aws-kms:alias/name``, ``command:program args``) or ``unlock``.

        Args:
            check_head: False only unlocks the keys and skips loading (and checking) the head, for
                tools that inspect a damaged store (``verify``); later state accesses still check.
            lock_timeout: seconds a write waits for the writer lock before
                :class:`~memvault.errors.LockedError` (readers never wait); also :attr:`lock_timeout`.
            plaintext_cache_bytes: decrypted contents kept for repeated views (least recently used
                out first; 0 keeps none); also :attr:`plaintext_cache_bytes`.
            cache_dir: for a URL, the host's replica of the store (default: under
                ``$MEMVAULT_CACHE_DIR``, else ``~/.cache/memvault``).

        Raises:
            WrongKeyError: the secret opens no key slot. ProviderError: the key provider failed.
            StoreNotFoundError, IntegrityError, StorageError: no store, a damaged one, or a refused one.
            SettingsMismatchError: memvault.json is not the file the head records as in force (a
                settings change in progress is waited for; docs/format.md §1.1).
        """
        return opening.open_store(
            cls, path, unlock if unlock is not None else Unlock.of(passphrase, key_file, key),
            check_head=check_head, lock_timeout=lock_timeout, plaintext_cache_bytes=plaintext_cache_bytes,
            cache_dir=cache_dir,
        )  # fmt: skip

    def write_first_commit(self, settings: StoreSettings) -> None:
        """Write commit #0 of a new store (store construction only, :mod:`.opening`)."""
        self._head.state = self._writer_of_commits.write_initial(
            self.format_version, transaction.commit_time(), settings
        )

    @property
    def config_key(self) -> bytes:
        """The key that authenticates ``memvault.json`` (store construction and settings)."""
        return self._keys.config

    def settings_in_force(self) -> bytes:
        """The settings digest the head records (b"": none; docs/format.md §1.1)."""
        with self._state_lock:
            return self._head.settings_in_force()

    @contextmanager
    def state_locked(self) -> Iterator[None]:
        """Hold the state lock (no command of this object changes the cached state meanwhile)."""
        with self._state_lock:
            yield

    @property
    def plaintext_cache_bytes(self) -> int:
        """Budget of decrypted file contents kept in memory (bytes; 0: none). Lowering it drops
        the least recently used contents at once; a content over an eighth of it is never kept."""
        return self._reader.plaintext_budget

    @plaintext_cache_bytes.setter
    def plaintext_cache_bytes(self, size: int) -> None:
        if type(size) is not int or size < 0:
            raise ValueError("plaintext_cache_bytes must be an integer number of bytes >= 0")
        with self._state_lock:
            self._reader.plaintext_budget = size

    @property
    def lock_timeout(self) -> float:
        """Seconds a write waits for the writer lock before :class:`~memvault.errors.LockedError`."""
        return self._lock.timeout

    @lock_timeout.setter
    def lock_timeout(self, seconds: float) -> None:
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds >= 0:
            raise ValueError("lock_timeout must be a number of seconds >= 0")
        self._lock.timeout = float(seconds)

    @contextmanager
    def _writer(self) -> Iterator[None]:
        """Hold the writer lock; finish leftovers of interrupted writers once per store object;
        turn a filesystem error of the body into :class:`~memvault.errors.StorageError`. The
        thread that holds it may enter it again (an operator change made of several commits)."""
        me = threading.get_ident()
        if self._writer_thread == me:
            yield
            return
        with self._lock.hold():
            self._writer_thread = me
            try:
                if not self._swept:
                    self._sweep_leftovers()
                    self._swept = True
                yield
            except OSError as err:
                raise StorageError.from_os_error(err) from None
            finally:
                self._writer_thread = None

    def _sweep_leftovers(self) -> None:  # caller holds the writer lock
        upkeep.sweep_leftovers(self.root, self.git, self.keyring, self._state_lock)

    def upgrade_format(self, *, actor: str = "memvault", session: str = "") -> tuple[int, int]:
        """Move the store to format version :data:`~memvault.store.config.FORMAT_VERSION`
        (``memvault.json``, then one ``upgrade`` commit; idempotent; docs/cli.md, `upgrade`).
        Returns ``(old version, new version)``. Raises IntegrityError: ``memvault.json`` is
        damaged, belongs to another store, or names a version this release does not know."""
        with self._writer(), self._state_lock:
            config = cfg.authentic_config(self.root, self.store_id, self._keys.config)
            state, old = self._sync(writer=True), config.version
            publish = partial(publish_config, self.remote) if self.remote is not None else None
            record = config.upgraded(self.root, self._keys.config, self._head.settings_in_force(), publish=publish)
            self.format_version = FORMAT_VERSION
            # The layout follows max_files as memvault.json has it now (raised since this object
            # opened the store, maybe by another process).
            relayout = self._reader.relayout_target(state.tree_id, self.format_version, config.settings.max_files)
            # Redactions made before version 3 are chained now (DESTROY records), the access file named.
            tombstoned = self.keyring.unchained_destructions()
            if relayout or tombstoned or record:
                meta = commit_meta_after(state, actor, session, "upgrade")
                self._commit(state, Transaction(self, state), meta, relayout=relayout, destroy=tombstoned,
                             settings=record)  # fmt: skip
            digest = self.access_times.digest()
            if digest is not None and digest != self.keyring.atimes_digest:
                self.access_log.record(digest)
        return old, FORMAT_VERSION

    def close(self) -> None:
        """Merge recorded reads into the access-time file (waiting at most 5 s for the lock), run
        :meth:`maintain` if this store object wrote many objects (:data:`CLOSE_MERGE_BYTES`,
        :data:`CLOSE_PACK_SECONDS`), release the repository. Do not use the object afterwards."""
        try:
            self.flush_access_times(wait=min(self.lock_timeout, 5.0), prune=True)
            if self._objects_written >= PACK_AFTER_OBJECTS:
                try:
                    self.maintain(seconds=CLOSE_PACK_SECONDS, wait=0.0, keep_dirs=True, merge_bytes=CLOSE_MERGE_BYTES)
                except MemvaultError:
                    pass  # everything stays readable; the next close or `memvault gc` does it
        finally:
            self.release_host()  # a replica's background requests finish first
            self.git.close()

    def maintain(
        self,
        *,
        seconds: float | None = None,
        wait: float | None = None,
        keep_dirs: bool = False,
        merge_bytes: int | None = None,
    ) -> tuple[int, int]:
        """Store upkeep (``memvault gc``, and :meth:`close` after many writes): pack loose objects
        and merge packs, under the writer lock (waiting at most ``wait`` s, default
        :attr:`lock_timeout`); :func:`memvault.store.upkeep.maintain` says how. Returns
        ``(objects packed, packs merged)``."""
        result = upkeep.maintain(self._lock, self.git, self.keyring, self._state_lock, seconds=seconds,
                                 wait=wait, keep_dirs=keep_dirs, merge_bytes=merge_bytes)  # fmt: skip
        self._objects_written = 0
        return result

    def note_read(self, node: Node) -> None:
        """Record that the memory tool read ``node`` (for ``expire``; :meth:`AccessLog.note_read`)."""
        self.access_log.note_read(node.token)

    def flush_access_times(self, *, wait: float | None = None, prune: bool = False) -> bool:
        """Merge recorded reads into the access-time file (:meth:`AccessLog.flush`)."""
        return self.access_log.flush(wait=wait, prune=prune)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore(store_id={self.store_id.hex()!r})"

    # -- identity and content -------------------------------------------------------------------

    def token(self, path: str) -> bytes:
        """Opaque identity of a path: HMAC(K_name, path)."""
        return self._token_mac(path.encode("utf-8"))

    def read_node(self, node: Node) -> bytes:
        """Decrypted content of a file node, authenticated against its node record."""
        with self._state_lock:  # the LRU is shared by every thread using this store object
            return self._reader.read_node(node)

    # -- state ------------------------------------------------------------------------------------

    def snapshot(self) -> Transaction:
        """An isolated read-only view of the head, which later commits do not change (a copy of
        the path index, O(files); the memory tool uses :meth:`reading`)."""
        self.pull()
        with self._state_lock:
            return Transaction(self, self.state_at(self._sync(writer=False).commit_id))

    @contextmanager
    def reading(self, *, pull: bool = True) -> Iterator[Transaction]:
        """A view of the current head, valid inside the ``with`` block (no copy).

        Holds the state lock, so a commit of this process cannot change the state mid-read.

        Args:
            pull: take in other hosts' commits first (a store in object storage). False reads the
                replica as this host has it, with no request: only for a read that prepares a
                command which reads the head again in :meth:`transact`.
        """
        if pull:
            self.pull()
        with self._state_lock:
            yield Transaction(self, self._sync(writer=False))

    @property
    def head(self) -> tuple[bytes, int]:
        """``(commit_id, seq)`` of the head (a store in object storage: its newest commit)."""
        self.pull()
        with self._state_lock:
            state = self._sync(writer=False)
            return state.commit_id, state.seq

    def _sync(self, *, writer: bool) -> StoreState:
        if writer and self.remote is not None:
            self.remote.pull(courtesy=True)
        return self._head.sync(writer=writer)

    def opened_commit(self, commit_id: bytes) -> OpenedCommit:
        """An authentic commit: its metadata, tree and parent (each commit is opened once).

        Raises:
            IntegrityError: the commit is missing or not authentic.
        """
        with self._state_lock:
            opened = self._reader.open_commit(commit_id)
        # The cached record stays as authenticated: callers get their own findings dict.
        return replace(opened, meta=replace(opened.meta, findings=dict(opened.meta.findings)))

    def commit_meta(self, commit_id: bytes) -> CommitMeta:
        """The decrypted metadata of an authentic commit."""
        return self.opened_commit(commit_id).meta

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's writer lock (for operator changes outside commits, e.g. key slots, or
        several steps that must see no other writer between them). :meth:`transact` and
        :meth:`destroy_keys` may be called inside the block by the same thread.

        A filesystem error inside the block becomes :class:`~memvault.errors.StorageError`.
        """
        with self._writer():
            yield

    def trim_caches(self) -> None:
        """Drop the caches of history reads (commits, index shards, trees, unwrapped data keys),
        keeping the head's state and decrypted contents: for a store object that walked its whole
        history once (an index built) and now mostly serves the head."""
        with self._state_lock:
            self._reader.forget_history()
            self.git.forget_trees()
            self.keyring.forget_keys()

    def forget_cached_plaintext(self) -> None:
        """Drop every decrypted content and node kept in memory (after a redaction)."""
        with self._state_lock:
            self._reader.forget_plaintext()

    # -- history access (authenticated; used by memvault.history) -------------------------------

    def commit(self, commit_id: bytes) -> tuple[CommitMeta, bytes, bytes | None]:
        """``(metadata, tree_id, parent_id)`` of an authentic commit."""
        opened = self.opened_commit(commit_id)
        return opened.meta, opened.tree_id, opened.parent_id

    def index_blobs(self, tree_id: bytes) -> dict[bytes, bytes]:
        """``shard -> index blob id`` of a commit's tree."""
        with self._state_lock:
            return self._reader.shard_blobs(tree_id)

    def shard_nodes(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]:
        """The decrypted nodes of one index shard blob (``token -> node``); cached by blob id."""
        with self._state_lock:
            return self._reader.shard_nodes(shard, blob_id)

    def shard_entries(self, shard: bytes, blob: bytes) -> list[tuple[bytes, bytes, bytes]]:
        """``(token, dek_id, sealed node record)`` of each entry of an index shard blob, the
        records left sealed (for ``verify``). Raises IntegrityError: it does not authenticate."""
        return records.decode_shard(self._keys.index, self.store_id, shard, blob)

    def state_at(self, commit_id: bytes) -> StoreState:
        """The decrypted state of an authentic commit (does not touch the head cache; for the
        head, a copy that later commits do not change). Its index shards are decoded when first
        needed (:class:`~memvault.store.state.StoreState`)."""
        with self._state_lock:
            head = self._sync(writer=False)
            if commit_id == head.commit_id:
                return head.copy()
            opened = self._reader.open_commit(commit_id)
            return self._reader.load_state(commit_id, opened.seq, opened.tree_id, None)

    @property
    def shards_decoded(self) -> int:
        """How many index shards this store object has decoded (authenticated and opened) so
        far: what its commands cost in index work (an open decodes none; a read, the shards of
        the path and its parents)."""
        return self._reader.shards_decoded

    # -- writing ----------------------------------------------------------------------------------

    def transact(
        self,
        fn: Callable[[Transaction], T],
        *,
        command: str,
        paths: tuple[str, ...],
        actor: str,
        session: str,
        findings: dict[str, int] | None = None,
        extra: dict[str, str] | None = None,
        settings: cfg.SettingsRecord | None = None,
    ) -> Committed[T]:
        """Run ``fn`` on a fresh view of the head and commit what it changed, as one commit.

        The writer lock is held throughout, so ``fn`` always sees the latest head (no lost
        updates).

        Args:
            fn: builds the change on the :class:`Transaction` it is given; its return value is
                handed back.
            command, paths, actor, session, findings, extra, settings: recorded in the commit's
                (encrypted) metadata (``settings``: the memvault.json the commit puts in force).

        Returns:
            :class:`Committed`: ``fn``'s value, the new commit's id and sequence number.

        Raises:
            Whatever ``fn`` raises (nothing is written); StorageError, ConflictError, LockedError
            from the commit (the store is left at the old commit unless the error says the
            outcome is unknown).
        """

        def once() -> tuple[T, bytes, CommitMeta]:
            state = self._sync(writer=True)
            txn = Transaction(self, state)
            result = fn(txn)
            meta = commit_meta_after(state, actor, session, command, paths, findings, dict(extra or {}))
            return result, self._commit(state, txn, meta, settings=settings), meta

        with self._writer(), self._state_lock:
            result, commit_id, meta = run_racing(once, self.remote)
            if self.access_times.due():
                try:
                    self.access_times.flush(durable=self._durable)
                except (MemvaultError, OSError):
                    pass  # advisory; the reads stay pending for the next try
            return Committed(result, commit_id, meta.seq, meta.time)

    def _commit(self, state: StoreState, txn: Transaction, meta: CommitMeta, **options: Any) -> bytes:
        """Write ``txn`` as one commit (``options``: see :meth:`CommitWriter.write`)."""
        limit = self.settings.max_stored_bytes
        return self._writer_of_commits.write(
            state, txn, meta, epoch=self._epoch, version=self.format_version, stored_limit=limit, **options
        )

    # -- side branches (docs/format.md §5.8) -----------------------------------------------------

    def branch(self, name: str) -> BranchStore:
        """Side branch ``name`` (``dream/<16 hex>``), existing or to :meth:`BranchStore.create`.

        Raises:
            InvalidInputError: a bad name, or a store in object storage of a format version before
            4 (its hosts may run a release that would take the branch's records for junk).
        """
        if self.remote is not None and not extends_object_log(self.format_version):
            raise InvalidInputError(
                f"Error: Dreams in a store in object storage need format version 4 (this store has "
                f"version {self.format_version}): once every host of the store runs this release, run "
                "`memvault upgrade` (an older release would misread a dream's records in the log)."
            )
        ref = self.git.side_branch(check_branch_name(name))
        return BranchStore(
            self, name, ref, self._reader, self._writer_of_commits, self._state_lock, lambda: self._epoch
        )

    def branches(self) -> list[str]:
        """The names of the store's side branches (``dream/<id>``), sorted. A store in object
        storage takes in other hosts' commits first; a branch ended there (discarded: its head is
        an ``end`` commit, docs/format.md §5.8) is not listed."""
        self.pull()
        names = [n for n in self.git.side_branches(BRANCH_PREFIX) if is_branch_name(n)]
        if self.remote is None:
            return names
        return [n for n in names if not self.branch(n).ended]

    def put_file(
        self, path: str, data: bytes | str, *, actor: str = "library", session: str = "", overwrite: bool = True
    ) -> None:
        """Write a file through the library API (bytes are kept as binary, e.g. images)."""
        vpath = parse_path(path, self.settings)
        binary = isinstance(data, bytes)
        raw = data if isinstance(data, bytes) else data.encode("utf-8")

        def apply(txn: Transaction) -> None:
            if not overwrite and txn.get(vpath) is not None:
                raise PathExistsError(f"Error: File {vpath.text} already exists")
            txn.write_file(vpath, raw, binary=binary)

        self.transact(apply, command="put", paths=(vpath.text,), actor=actor, session=session)
