"""The encrypted, git-versioned memory store: open/create, head-state cache, transactions.

Guarantees (details in ``docs/format.md`` and ``SECURITY.md``):

- Every successful :meth:`MemoryStore.transact` is exactly one commit; a failed one writes no
  commit and leaves the branch, the keyring and the cached state as they were.
- Write order: git objects (fsynced) -> keyring append of data keys and the high-water record
  (fdatasync) -> branch compare-and-swap (fsynced). A crash at any point leaves the store at the
  old or the new commit; a writer that finds a recorded-but-unpublished commit publishes it.
- Writers are serialised by a ``flock`` on ``<store>/lock`` (released by the kernel if a writer
  dies, never taken from a live holder) and always re-read the branch under the lock, so no
  update is lost. A writer waits at most ``lock_timeout`` seconds (``open``/``create``
  parameter, default 30) and then gets :class:`~memvault.errors.LockedError` saying how long it
  waited; nothing is written.
- A filesystem error (no space, read-only store, I/O error) at any write step is a
  :class:`~memvault.errors.StorageError` (its message names the OS reason only); the store is
  left at the old commit, or, if undoing the half-done step failed too, the error says that the
  command may still take effect.
- Files memvault or dulwich create in the store are made owner-only (files 0600 or 0400,
  directories 0700) whatever the umask.
- The decrypted head state (paths, kinds, sizes) is cached and refreshed only when the branch
  moves; a command's cost depends on the shards it touches, not on the number of files.
"""

from __future__ import annotations

import gc
import json
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from . import crypto, records
from .access import FILE_NAME as ACCESS_FILE
from .access import AccessTimes
from .errors import (
    ConflictError,
    IntegrityError,
    InternalError,
    LimitExceededError,
    MemvaultError,
    PathExistsError,
    RedactedError,
    RollbackDetectedError,
    StorageError,
    StoreExistsError,
    StoreNotFoundError,
)
from .fsutil import (
    DEFAULT_LOCK_TIMEOUT,
    DIR_MODE,
    StoreLock,
    atomic_write,
    make_private_dir,
    read_bounded,
    restrict_modes,
    wipe_leftovers,
)
from .gitstore import MODE_BLOB, MODE_TREE, GitObject, GitStore, root_roles
from .keyring import ZERO_ID, HighWater, Keyring
from .keys import Subkeys, Unlock, b64decode, b64encode, load_slots, new_slot, read_key_file, unlock_master_keys
from .paths import ROOT, MemoryPath, fold_key
from .records import CommitMeta, Node
from .settings import KdfParams, StoreSettings

if TYPE_CHECKING:
    from .scrub import Scrubber

__all__ = ["MemoryStore", "Transaction", "StoreState", "STORE_FILE"]

#: Marker and public configuration of a store directory.
STORE_FILE = "memvault.json"
#: :meth:`MemoryStore.close` merges packs (and packs loose objects of older stores) once this store
#: object has written this many objects (about 100 commits), packing for at most
#: ``CLOSE_PACK_SECONDS``.
PACK_AFTER_OBJECTS = 1000
CLOSE_PACK_SECONDS = 3.0
#: ... and merges packs holding at most this many bytes together (``memvault gc`` merges any).
CLOSE_MERGE_BYTES = 64 * 1024 * 1024
#: Largest ``memvault.json`` read (settings with a full allowlist and custom rules stay far below).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
_STORE_FORMAT = "memvault-store"
#: Format version of new stores (docs/format.md): 2 writes compact binary node records.
FORMAT_VERSION = 2
#: Format versions this code opens: 1 (JSON node records, still written to a version 1 store
#: so that older memvault releases keep reading it) and 2.
_READABLE_VERSIONS = (1, 2)
_CONFIG_MAC = b"memvault/v1/config"
_MESSAGE_RE = re.compile(rb"\Amemvault\n\nMemvault-Meta: ([A-Za-z0-9+/=]+)\nMemvault-Tag: ([0-9a-f]{64})\n\Z")
#: Default budget of decrypted file contents kept in memory for repeated views (bytes); see
#: :attr:`MemoryStore.plaintext_cache_bytes`.
PLAINTEXT_CACHE_BYTES = 8 * 1024 * 1024
#: Decoded index shards kept by blob id (history walks reuse unchanged shards).
_SHARD_CACHE_ENTRIES = 1024
T = TypeVar("T")


def _now() -> float:
    return time.time()


@dataclass
class StoreState:
    """The decrypted state at one commit. Mutated only by the store, under its state lock."""

    commit_id: bytes
    seq: int
    tree_id: bytes
    shard_blobs: dict[bytes, bytes] = field(default_factory=dict)  #: shard -> index blob id
    shards: dict[bytes, dict[bytes, Node]] = field(default_factory=dict)  #: shard -> token -> node
    nodes: dict[str, Node] = field(default_factory=dict)  #: canonical path -> node
    children: dict[str, dict[str, str]] = field(default_factory=dict)  #: dir -> fold(name) -> name
    file_count: int = 0
    total_bytes: int = 0  #: plaintext bytes of all files

    def add(self, node: Node) -> None:
        self.nodes[node.path] = node
        self.shards.setdefault(_shard_of(node.token), {})[node.token] = node
        parent, name = _split(node.path)
        self.children.setdefault(parent, {})[fold_key(name)] = name
        if node.is_dir:
            self.children.setdefault(node.path, {})
        else:
            self.file_count += 1
            self.total_bytes += node.size

    def remove(self, node: Node) -> None:
        """Forget one node. A directory's child list survives while it still has children:
        an incremental reload removes and re-adds a directory whose shard changed while its
        children, in other shards, stay."""
        del self.nodes[node.path]
        shard = self.shards[_shard_of(node.token)]
        del shard[node.token]
        parent, name = _split(node.path)
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.pop(fold_key(name), None)
            if not siblings and parent != ROOT and parent not in self.nodes:
                del self.children[parent]
        if node.is_dir:
            if not self.children.get(node.path):
                self.children.pop(node.path, None)
        else:
            self.file_count -= 1
            self.total_bytes -= node.size


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a state is decoded (and resume it after).

    Decoding keeps almost every object it makes (nodes, index entries) and makes no cycles, yet
    the collector would run dozens of times meanwhile; in a process with a large heap (one that
    imported the ``anthropic`` SDK: ~175,000 objects) one full collection triggered by the load
    walks all of them. Nothing is lost: the collector resumes with the new objects in its
    youngest generation. If it was already disabled (by the application), it is left alone.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent, name


#: Shard name of each first token byte (two lowercase hex digits).
_SHARD_NAMES = tuple(b"%02x" % i for i in range(256))


def _shard_of(token: bytes) -> bytes:
    return _SHARD_NAMES[token[0]] if token else b""


class Transaction:
    """The working copy of one mutating command, over the head state (copy-on-write overlay).

    Nothing here touches storage: the store turns the overlay into objects at commit time.
    """

    def __init__(self, store: MemoryStore, state: StoreState) -> None:
        self._store = store
        self._base = state
        self.changes: dict[str, Node | None] = {}
        self.contents: dict[str, bytes] = {}
        self._child_overlay: dict[str, dict[str, str | None]] = {}
        self._file_delta = 0
        self._bytes_delta = 0

    @property
    def settings(self) -> StoreSettings:
        return self._store.settings

    # -- reading ------------------------------------------------------------------------------

    def get(self, path: MemoryPath | str) -> Node | None:
        """The node at ``path`` as this transaction sees it (None if absent). Root is a dir."""
        key = str(path)
        if key in self.changes:
            return self.changes[key]
        return self._base.nodes.get(key)

    @property
    def total_bytes(self) -> int:
        """Plaintext bytes of all files as this transaction sees them."""
        return self._base.total_bytes + self._bytes_delta

    def is_dir(self, path: MemoryPath) -> bool:
        if path.is_root:
            return True
        node = self.get(path)
        return node is not None and node.is_dir

    def exists(self, path: MemoryPath) -> bool:
        return path.is_root or self.get(path) is not None

    def child_names(self, path: MemoryPath | str) -> list[str]:
        key = str(path)
        names = dict(self._base.children.get(key, {}))
        for folded, name in self._child_overlay.get(key, {}).items():
            if name is None:
                names.pop(folded, None)
            else:
                names[folded] = name
        return sorted(names.values())

    def read(self, path: MemoryPath) -> bytes:
        key = str(path)
        if key in self.contents:
            return self.contents[key]
        node = self._base.nodes[key]
        return self._store.read_node(node)

    def descendants(self, path: MemoryPath) -> Iterator[MemoryPath]:
        """All nodes strictly below ``path``, parents before children."""
        for name in self.child_names(path):
            child = path.child(name)
            yield child
            if self.is_dir(child):
                yield from self.descendants(child)

    # -- writing ------------------------------------------------------------------------------

    def _set(self, path: MemoryPath, node: Node | None) -> None:
        old = self.get(path)
        key = path.text
        self.changes[key] = node
        parent, name = _split(key)
        overlay = self._child_overlay.setdefault(parent, {})
        overlay[fold_key(name)] = None if node is None else name
        if old is not None and not old.is_dir:
            self._file_delta -= 1
            self._bytes_delta -= old.size
        if node is not None and not node.is_dir:
            self._file_delta += 1
            self._bytes_delta += node.size

    def _check_new_name(self, path: MemoryPath) -> None:
        """Refuse a name whose case-folded form collides with a different existing sibling."""
        parent, folded = path.parent.text, fold_key(path.name)
        overlay = self._child_overlay.get(parent, {})
        existing = overlay[folded] if folded in overlay else self._base.children.get(parent, {}).get(folded)
        if existing is not None and existing != path.name:
            raise PathExistsError(
                f"Error: The path {path.text} collides with the existing "
                f"{path.parent.child(existing).text} (names differ only in case or form)"
            )

    def _lineage(self, old: Node | None) -> tuple[bytes, int]:
        if old is None:
            return crypto.random_bytes(16), 1
        return old.file_id, old.version + 1

    def make_dirs(self, path: MemoryPath, *, for_path: MemoryPath | None = None) -> None:
        """Create ``path`` and its missing ancestors as directories (a file in the way refuses).

        ``for_path`` is what the caller is creating, for the error message.
        """
        missing: list[MemoryPath] = []
        current = path
        while not current.is_root:
            node = self.get(current)
            if node is not None:
                if not node.is_dir:
                    raise PathExistsError(
                        f"Error: Cannot create {(for_path or path).text}: {current.text} is a file, not a directory"
                    )
                break
            missing.append(current)
            current = current.parent
        if len(path.parts) > self.settings.max_depth:
            raise LimitExceededError(f"Error: {path.text} is nested deeper than {self.settings.max_depth} levels")
        for d in reversed(missing):
            self._check_new_name(d)
            file_id, version = self._lineage(None)
            self._set(d, Node(d.text, "dir", self._store.token(d.text), file_id, version, b""))

    def write_file(self, path: MemoryPath, data: bytes, *, binary: bool = False, lineage: Node | None = None) -> None:
        """Create or replace the file at ``path`` (parents are created)."""
        if len(data) > self.settings.max_file_bytes:
            raise LimitExceededError(
                f"Error: The content for {path.text} is {len(data)} bytes, over the limit of "
                f"{self.settings.max_file_bytes} bytes per file"
            )
        old = self.get(path)
        if old is not None and old.is_dir:
            raise PathExistsError(f"Error: {path.text} is a directory")
        self.make_dirs(path.parent, for_path=path)
        if old is None:
            self._check_new_name(path)
            if self._base.file_count + self._file_delta + 1 > self.settings.max_files:
                raise LimitExceededError(
                    f"Error: The memory store is full: it holds at most {self.settings.max_files} files"
                )
        grown = len(data) - (old.size if old is not None else 0)
        if grown > 0 and self.total_bytes + grown > self.settings.max_total_bytes:
            raise LimitExceededError(
                f"Error: The memory store is full: it holds at most {self.settings.max_total_bytes} bytes of "
                f"content in all, and this would make {self.total_bytes + grown}"
            )
        file_id, version = self._lineage(lineage if lineage is not None else old)
        node = Node(path.text, "file", self._store.token(path.text), file_id, version, b"", size=len(data),
                    sha256=crypto.sha256(data), binary=binary)  # fmt: skip
        self._set(path, node)
        self.contents[path.text] = data

    def delete(self, path: MemoryPath) -> None:
        """Delete a file, or a directory with everything below it."""
        if self.is_dir(path):
            for child in reversed(list(self.descendants(path))):
                self._set(child, None)
        self._set(path, None)

    def rename(self, old: MemoryPath, new: MemoryPath) -> None:
        """Move a file or directory tree from ``old`` to ``new`` (which must not exist).

        Every moved file becomes a new version of its lineage, re-encrypted because the path
        is part of each blob's associated data.
        """
        moves: list[tuple[MemoryPath, MemoryPath, Node, bytes | None]] = []
        for src in [old, *self.descendants(old)]:
            node = self.get(src)
            assert node is not None
            dst = _rebase(src, old, new)
            if len(dst.text.encode()) > self.settings.max_path_bytes or len(dst.parts) > self.settings.max_depth:
                raise LimitExceededError(f"Error: Renaming to {new.text} would make a path too long or too deep")
            moves.append((src, dst, node, None if node.is_dir else self.read(src)))
        for src, _dst, _node, _data in reversed(moves):
            self._set(src, None)
        self.make_dirs(new.parent, for_path=new)
        self._check_new_name(new)
        for _src, dst, node, data in moves:
            if data is None:
                file_id, version = self._lineage(node)
                self._set(dst, Node(dst.text, "dir", self._store.token(dst.text), file_id, version, b""))
            else:
                self.write_file(dst, data, binary=node.binary, lineage=node)


def _rebase(path: MemoryPath, old: MemoryPath, new: MemoryPath) -> MemoryPath:
    return MemoryPath(new.parts + path.parts[len(old.parts) :])


class MemoryStore:
    """An encrypted memory store in a directory. Thread-safe; many processes may share one.

    Use :meth:`create` or :meth:`open`; both take exactly one of ``passphrase`` or
    ``key_file`` (a file holding a raw 32-byte key).
    """

    def __init__(
        self, root: Path, store_id: bytes, settings: StoreSettings, master_keys: dict[int, bytes], *, _token: object
    ) -> None:
        if _token is not _PRIVATE:
            raise TypeError("use MemoryStore.create() or MemoryStore.open()")
        self.root = root
        self.store_id = store_id
        self.settings = settings
        #: The store's format version (``memvault.json``); it picks the node record encoding.
        self.format_version = FORMAT_VERSION
        self._epoch = max(master_keys)
        self._master_keys = dict(master_keys)
        #: Id of the key slot that unlocked this store object.
        self.unlocked_slot = b""
        self._subkeys = {e: Subkeys(k, store_id, e) for e, k in master_keys.items()}
        #: Index, metadata, chain, name, keyring and config keys come from the first epoch for
        #: the store's whole life (tokens and history stay verifiable); a rotation changes the
        #: key that wraps data keys (``_epoch``, the newest).
        self._keys = self._subkeys[min(master_keys)]
        self._token_mac = crypto.mac_function(self._keys.name)
        durable = settings.durability == "full"
        self._durable = durable
        self.keyring = Keyring(
            root / "keyring",
            store_id,
            {e: s.wrap for e, s in self._subkeys.items()},
            self._keys.keyring,
            tombstone_key=self._keys.meta,
        )
        self._lock = StoreLock(root / "lock")
        #: Last-read times of files (for expiry), merged into ``access`` now and then.
        self.access_times = AccessTimes(root / ACCESS_FILE, self._keys.access, store_id)
        self._swept = False
        #: Objects written by this store object since it last packed (see :meth:`close`).
        self._objects_written = 0
        self._state_lock = threading.RLock()
        self._state: StoreState | None = None
        #: The branch value that maps to ``_state`` (differs while a recorded commit is unpublished).
        self._served_ref: bytes | None = None
        self._scrubber: Scrubber | None = None
        self._content_cache: OrderedDict[bytes, bytes] = OrderedDict()
        self._content_cache_size = 0
        self._content_cache_budget = PLAINTEXT_CACHE_BYTES
        self._shard_cache: OrderedDict[bytes, dict[bytes, Node]] = OrderedDict()
        self.git: GitStore

    # -- construction ---------------------------------------------------------------------------

    @staticmethod
    def _unlock(passphrase: str | None, key_file: str | os.PathLike[str] | None) -> Unlock:
        if key_file is not None:
            if passphrase is not None:
                return Unlock(passphrase=passphrase, raw_key=b"")  # raises: exactly one
            return Unlock(raw_key=read_key_file(key_file))
        return Unlock(passphrase=passphrase)

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
    ) -> MemoryStore:
        """Create a new store in directory ``path`` (created if missing; must be empty).

        ``lock_timeout``, ``plaintext_cache_bytes``: see :meth:`open`.
        """
        unlock = cls._unlock(passphrase, key_file)
        try:
            store = cls._create(Path(path), unlock, settings, kdf)
        except OSError as err:
            raise StorageError.from_os_error(err, what="The memory store") from None
        store.lock_timeout = lock_timeout
        store.plaintext_cache_bytes = plaintext_cache_bytes
        return store

    @classmethod
    def _create(cls, root: Path, unlock: Unlock, settings: StoreSettings | None, kdf: KdfParams | None) -> MemoryStore:
        settings = settings or StoreSettings()
        if root.is_symlink():
            raise StoreExistsError("Refusing to create a memory store at a symbolic link.")
        if root.exists():
            if not root.is_dir():
                raise StoreExistsError("The store location exists and is not a directory.")
            if (root / STORE_FILE).exists():
                raise StoreExistsError("A memory store already exists at this location.")
            if any(root.iterdir()):
                raise StoreExistsError("The store directory is not empty.")
            os.chmod(root, DIR_MODE)
        else:
            root.parent.mkdir(parents=True, exist_ok=True)
            make_private_dir(root)
        durable = settings.durability == "full"
        store_id = crypto.random_bytes(16)
        master_keys = {1: crypto.new_key()}
        make_private_dir(root / "keys")
        from .keys import write_slot

        first_slot = new_slot(store_id, unlock, master_keys, kdf)
        write_slot(root / "keys", first_slot, durable=durable)
        Keyring.create(root / "keyring", store_id, durable=durable)
        store = cls(root, store_id, settings, master_keys, _token=_PRIVATE)
        store.unlocked_slot = first_slot.slot_id
        store.git = GitStore.init(root / "repo", durable=durable)
        store._write_initial_commit()
        # dulwich honours the umask; memory stores hold regulated data (and umask 0 is common in
        # containers): nothing in the store may be readable by group or others.
        restrict_modes(root / "repo")
        # The marker file goes last: a crash before it leaves no half-made store that opens.
        store._write_config(FORMAT_VERSION)
        return store

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
    ) -> MemoryStore:
        """Open an existing store; a wrong key raises :class:`~memvault.errors.WrongKeyError`.

        ``check_head=False`` only unlocks the keys and skips loading (and checking) the head, for
        tools that must inspect a damaged store, such as ``verify``; every later state access
        still checks.

        ``lock_timeout``: how many seconds a write (a mutating command, a key or redaction change)
        waits for the store's writer lock while another thread or process holds it, before it
        fails with :class:`~memvault.errors.LockedError` (whose message says how long it waited).
        Readers never wait. Also settable later as :attr:`lock_timeout`.

        ``plaintext_cache_bytes``: how many bytes of decrypted file contents this store object
        keeps in memory for repeated views (least recently used first out; default 8 MiB; 0 keeps
        none, so every view decrypts again). Also settable later as :attr:`plaintext_cache_bytes`.
        """
        unlock = cls._unlock(passphrase, key_file)
        root = Path(path)
        config, version, store_id, settings, settings_mac = cls._read_config(root)
        slot, master_keys = unlock_master_keys(store_id, load_slots(root / "keys"), unlock)
        store = cls(root, store_id, settings, master_keys, _token=_PRIVATE)
        store.format_version = version
        store.unlocked_slot = slot.slot_id
        crypto.mac_verify(store._keys.config, store._config_message(config), settings_mac)
        store.git = GitStore(root / "repo", durable=settings.durability == "full")
        store.lock_timeout = lock_timeout
        store.plaintext_cache_bytes = plaintext_cache_bytes
        if check_head:
            with store._state_lock:
                store._sync(writer=False)
        return store

    @staticmethod
    def _read_config(root: Path) -> tuple[dict[str, Any], int, bytes, StoreSettings, bytes]:
        """``(config, version, store_id, settings, settings_mac)`` of ``memvault.json``, checked
        for shape and a readable version (the MAC is the caller's to verify)."""
        try:
            config = json.loads(read_bounded(root / STORE_FILE, MAX_CONFIG_BYTES))
        except (FileNotFoundError, NotADirectoryError):
            raise StoreNotFoundError("No memory store exists at this location.") from None
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deep
            raise IntegrityError("The store's configuration file is damaged.") from None
        try:
            if set(config) != {"format", "version", "store_id", "settings", "settings_mac"}:
                raise ValueError
            version = config["version"]
            if config["format"] != _STORE_FORMAT or type(version) is not int or version not in _READABLE_VERSIONS:
                raise IntegrityError("Unsupported memory store format.")
            store_id = bytes.fromhex(config["store_id"])
            if len(store_id) != 16:
                raise ValueError
            settings = StoreSettings(**config["settings"])
            settings_mac = b64decode(config["settings_mac"])
        except MemvaultError:
            raise
        except Exception:
            raise IntegrityError("The store's configuration file is damaged.") from None
        return config, version, store_id, settings, settings_mac

    @property
    def plaintext_cache_bytes(self) -> int:
        """Budget of decrypted file contents kept in memory (bytes; 0: none). Lowering it drops
        the least recently used contents at once; a content over an eighth of it is never kept."""
        return self._content_cache_budget

    @plaintext_cache_bytes.setter
    def plaintext_cache_bytes(self, size: int) -> None:
        if type(size) is not int or size < 0:
            raise ValueError("plaintext_cache_bytes must be an integer number of bytes >= 0")
        with self._state_lock:
            self._content_cache_budget = size
            self._trim_content_cache()

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
        turn a filesystem error of the body into :class:`~memvault.errors.StorageError`."""
        with self._lock.hold():
            try:
                if not self._swept:
                    self._sweep_leftovers()
                    self._swept = True
                yield
            except OSError as err:
                raise StorageError.from_os_error(err) from None

    def _sweep_leftovers(self) -> None:
        """Wipe temporary files of atomic writes, key-slot removals and keyring rewrites that a
        crashed or failed writer left behind (they may hold wrapped key material). Caller holds
        the writer lock. Unfinished packs are removed too (:meth:`GitStore.sweep_pack_leftovers`:
        memvault's ``objects/pack/tmp_*`` files, and a ``.pack`` without its ``.idx`` once it is 10
        minutes old). Torn loose objects (``objects/xx/*.lock``, from writers before
        commits were packs) are never read and are left: finding them would cost a scan of every
        object directory."""
        wipe_leftovers(self.root / "keys", (".json.tmp-",))
        wipe_leftovers(self.root, (f"{STORE_FILE}.tmp-", ".keyring.rewrite-"))
        self.git.sweep_pack_leftovers()

    def _write_config(self, version: int, *, durable: bool | None = None) -> None:
        """Write ``memvault.json`` for format ``version`` and the current settings (atomically;
        ``durable`` defaults to the store's durability)."""
        config: dict[str, object] = {
            "format": _STORE_FORMAT,
            "version": version,
            "store_id": self.store_id.hex(),
            "settings": self.settings.model_dump(),
        }
        config["settings_mac"] = b64encode(crypto.mac(self._keys.config, self._config_message(config)))
        data = json.dumps(config, indent=2, sort_keys=True).encode() + b"\n"
        atomic_write(self.root / STORE_FILE, data, durable=self._durable if durable is None else durable)

    def upgrade_format(self, *, actor: str = "memvault", session: str = "") -> tuple[int, int]:
        """Move a store to format version :data:`FORMAT_VERSION`; return ``(old, new)`` versions.

        Under the writer lock: ``memvault.json`` is rewritten (atomically) with the new version,
        then, if the head's tree still has layout 1, one commit (command ``upgrade``, no paths)
        files the same content blobs and index shards in layout 2 (docs/format.md 5.3). Records
        and commits already written stay as they are and are read as before; records written
        from then on use the newer encodings. memvault releases that only know the older version
        refuse to open the store afterwards ("Unsupported memory store format") instead of
        misreading it. Idempotent; a crash between the two steps is finished by the next call.

        Processes that have the store open keep the encodings of the version they opened (still
        readable) until they open it again; processes of a release that only knows version 1 must
        be stopped first (they would report the new records as damage). ``memvault.json`` is read
        again under the lock (a newer version than this release knows is refused, not
        overwritten) and written durably whatever the store's durability setting."""
        with self._writer(), self._state_lock:
            config, old, store_id, _settings, settings_mac = self._read_config(self.root)
            if store_id != self.store_id:
                raise IntegrityError("The store's configuration file is damaged.")
            crypto.mac_verify(self._keys.config, self._config_message(config), settings_mac)
            if old < FORMAT_VERSION:
                self._write_config(FORMAT_VERSION, durable=True)
            self.format_version = FORMAT_VERSION
            state = self._sync(writer=True)
            if self._layout(state.tree_id) == 1:
                meta = CommitMeta(seq=state.seq + 1, time=_now(), actor=actor, session=session, command="upgrade",
                                  paths=(), findings={})  # fmt: skip
                self._commit(state, Transaction(self, state), meta, relayout=True)
        return old, FORMAT_VERSION

    def _config_message(self, config: dict[str, object]) -> bytes:
        body = json.dumps(
            {k: config[k] for k in ("format", "version", "store_id", "settings")}, sort_keys=True, separators=(",", ":")
        )
        return _CONFIG_MAC + self.store_id + body.encode()

    def close(self) -> None:
        """Merge recorded reads into the access-time file (waiting at most 5 s for the writer
        lock; they are advisory and dropped if it stays busy), run :meth:`maintain` if this store
        object wrote many objects (merging packs of up to :data:`CLOSE_MERGE_BYTES` together,
        packing loose objects for at most :data:`CLOSE_PACK_SECONDS`), and release the repository
        handle. The store object must not be used afterwards."""
        try:
            self.flush_access_times(wait=min(self.lock_timeout, 5.0), prune=True)
            if self._objects_written >= PACK_AFTER_OBJECTS:
                try:
                    self.maintain(seconds=CLOSE_PACK_SECONDS, wait=0.0, keep_dirs=True, merge_bytes=CLOSE_MERGE_BYTES)
                except MemvaultError:
                    pass  # everything stays readable; the next close or `memvault gc` does it
        finally:
            self.git.close()

    def maintain(
        self,
        *,
        seconds: float | None = None,
        wait: float | None = None,
        keep_dirs: bool = False,
        merge_bytes: int | None = None,
    ) -> tuple[int, int]:
        """Pack loose objects (in batches of :data:`~memvault.gitstore.PACK_BATCH`; stores
        written before commits were packs hold them) and merge the smallest packs where they break
        the geometric progression (:meth:`GitStore.consolidate_packs`, only packs holding at most
        ``merge_bytes`` together if given); return ``(objects packed, packs merged)``. Runs under
        the writer lock (waiting at most ``wait`` seconds, default :attr:`lock_timeout`); packing
        stops after about ``seconds`` (default: when done). Emptied fan-out directories are removed
        unless ``keep_dirs``, and so is what a crashed pack writer left
        (:meth:`GitStore.sweep_pack_leftovers`). Never part of a memory-tool command:
        :meth:`close` and ``memvault gc`` call it. Every object stays readable throughout, and a
        crash at any point loses nothing."""
        deadline = None if seconds is None else time.monotonic() + seconds
        with self._lock.hold(timeout=wait):
            try:
                self.git.sweep_pack_leftovers()
                packed = self.git.pack_loose(deadline=deadline, keep_dirs=keep_dirs)
                merged = self.git.consolidate_packs(max_bytes=merge_bytes)
            except OSError as err:
                raise StorageError.from_os_error(err) from None
        self._objects_written = 0
        return packed, merged

    def note_read(self, node: Node) -> None:
        """Record that ``node`` was read by the memory tool (for ``expire``): in memory; merged
        into the access-time file at close, and while the session runs at most every
        :data:`~memvault.access.FLUSH_SECONDS` (by a commit, or here if the lock is free)."""
        self.access_times.touch(node.token)
        if self.access_times.due():
            self.flush_access_times(wait=0.0)

    def flush_access_times(self, *, wait: float | None = None, prune: bool = False) -> bool:
        """Merge recorded reads into the access-time file under the writer lock, waiting at most
        ``wait`` seconds for it (default: :attr:`lock_timeout`); ``prune`` drops files no longer
        in the store, judged on the head (read again under the lock: the files another store
        object or process created since this one last looked are kept). False if the lock
        stayed busy or the file could not be written (the reads stay pending)."""
        if not self.access_times.dirty:
            return True
        try:
            with self._lock.hold(timeout=wait):
                live = None
                if prune:
                    try:
                        with self._state_lock:
                            live = {n.token for n in self._sync(writer=False).nodes.values()}
                    except MemvaultError:
                        live = None  # the head cannot be read now: keep every read time
                self.access_times.flush(live, durable=self._durable)
        except (MemvaultError, OSError):
            return False
        return True

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore(store_id={self.store_id.hex()!r})"

    # -- identity and content -------------------------------------------------------------------

    @property
    def scrubber(self) -> Scrubber:
        """The sensitive-data scrubber configured by ``settings.scrub`` (built once)."""
        if self._scrubber is None:
            from .scrub import Scrubber

            self._scrubber = Scrubber(self.settings.scrub)
        return self._scrubber

    def token(self, path: str) -> bytes:
        """Opaque identity of a path: HMAC(K_name, path)."""
        return self._token_mac(path.encode("utf-8"))

    def read_node(self, node: Node) -> bytes:
        """Decrypted content of a file node, authenticated against its node record."""
        with self._state_lock:  # the LRU is shared by every thread using this store object
            return self._read_node(node)

    def _follow_keyring(self) -> None:
        """If another store object or process rewrote the keyring (a redaction or rotation), drop
        every cached key and plaintext and read it again, so destroyed keys stop working here too."""
        if self.keyring.replaced_on_disk():
            self.keyring.refresh()
            self.forget_cached_plaintext()

    def _read_node(self, node: Node) -> bytes:
        self._follow_keyring()
        if node.redacted or self.keyring.is_destroyed(node.dek_id):
            info = self.keyring.tombstone(node.dek_id) or {}
            actor = info.get("actor")
            by = f" by {actor[:200]}" if isinstance(actor, str) and actor else ""
            raise RedactedError(f"This version was redacted{by}{_when(info.get('time'))}; its content is gone.")
        cached = self._content_cache.get(node.blob_id)
        if cached is not None:
            self._content_cache.move_to_end(node.blob_id)
            return cached
        try:
            # The ciphertext's SHA-256 (the node record's ``c``) is checked by the git layer,
            # in place of the git id's SHA-1 for a packed copy: one hash over the blob, not two.
            blob = self.git.read_blob(node.blob_id, node.ct_sha256)
            data = records.decode_blob(self.keyring.dek(node.dek_id), blob, store_id=self.store_id, node=node)
        except IntegrityError:
            raise IntegrityError(f"Memory store integrity check failed for {node.path}.") from None
        self._cache_content(node.blob_id, data)
        return data

    def _cache_content(self, blob_id: bytes, data: bytes) -> None:
        """Keep a decrypted content in the bounded LRU (never more than the byte budget)."""
        if (
            not self._content_cache_budget
            or len(data) > self._content_cache_budget // 8
            or blob_id in self._content_cache
        ):
            return
        self._content_cache[blob_id] = data
        self._content_cache_size += len(data)
        self._trim_content_cache()

    def _trim_content_cache(self) -> None:
        while self._content_cache_size > self._content_cache_budget:
            _, old = self._content_cache.popitem(last=False)
            self._content_cache_size -= len(old)

    # -- state ------------------------------------------------------------------------------------

    def snapshot(self) -> Transaction:
        """An isolated read-only view of the current head: later commits do not change it.

        Costs a copy of the path index (O(files)); the memory tool uses :meth:`reading`.
        """
        with self._state_lock:
            return Transaction(self, self.state_at(self._sync(writer=False).commit_id))

    @contextmanager
    def reading(self) -> Iterator[Transaction]:
        """A view of the current head, valid inside the ``with`` block (no copy).

        Holds the state lock, so a commit of this process cannot change the state mid-read.
        """
        with self._state_lock:
            yield Transaction(self, self._sync(writer=False))

    @property
    def head(self) -> tuple[bytes, int]:
        """``(commit_id, seq)`` of the state this store object last saw."""
        with self._state_lock:
            state = self._sync(writer=False)
            return state.commit_id, state.seq

    def _sync(self, *, writer: bool) -> StoreState:
        """Bring the cached state to the branch head, checking authenticity and freshness.

        A commit recorded in the keyring on top of the branch (its writer died before moving the
        branch, or someone moved the branch back by one) is authentic and durable, so it *is*
        the head: readers serve it, writers also publish it. Only if its objects are gone is the
        branch's own commit served, and only in ``durability="none"`` (where a power loss may
        drop unsynced objects); with ``full`` durability that is a rollback.
        """
        attempts = 8
        for attempt in range(attempts):
            ref = self.git.head()
            state = self._state
            if state is not None and ref in (state.commit_id, self._served_ref) and not writer:
                return state
            self.keyring.refresh()
            hw = self.keyring.high_water
            if ref is None or hw is None:
                raise IntegrityError("The store's history is missing.")
            head = ref
            if ref != hw.commit_id and ref == hw.parent_id:
                if self.git.contains(hw.commit_id):
                    self._load_commit(hw.commit_id)  # authenticate before serving or publishing
                    head = hw.commit_id
                    if writer and self.git.compare_and_swap(ref, head):
                        ref = head
                elif self._durable:
                    raise RollbackDetectedError(
                        f"Rollback detected: the store recorded commit #{hw.seq}, but it is missing and the "
                        "branch points at its parent."
                    )
            if state is not None and head == state.commit_id:
                self._served_ref = ref
                return state
            try:
                seq, tree_id = self._load_commit(head)
            except IntegrityError:
                # The branch moves in place (one pwrite), so a reader without the lock can read
                # a value half old, half new: no such commit. A branch that moved meanwhile is
                # read again; one that stays put is the error.
                if not writer and attempt < attempts - 1 and self.git.head() != ref:
                    continue
                raise
            problem = _freshness_problem(head, seq, hw)
            if problem is not None:
                # A reader without the lock may see the keyring of commits published after it
                # read the branch; only a branch that stays put is a real rollback.
                if not writer and attempt < attempts - 1 and self.git.head() != ref:
                    continue
                raise problem
            loaded = self._load_state(head, seq, tree_id, state)
            if any(n.redacted for n in loaded.nodes.values()):
                # Redaction removes a version from the head before destroying its key.
                self._state = None
                raise IntegrityError("The current state refers to a destroyed data key.")
            self._state = loaded
            self._served_ref = ref
            return self._state
        raise AssertionError("unreachable")

    def _load_commit(self, commit_id: bytes) -> tuple[int, bytes]:
        """Authenticate a commit; return ``(seq, tree_id)``."""
        tree_id, parents, message = self.git.read_commit(commit_id)
        m = _MESSAGE_RE.match(message)
        if m is None or len(parents) > 1:
            raise IntegrityError("A commit of the store is not authentic.")
        sealed = b64decode(m.group(1).decode())
        meta = self._open_meta(sealed)
        parent_id = parents[0] if parents else ZERO_ID
        expected = records.commit_tag(self._keys.chain, self.store_id, meta.seq, parent_id, tree_id, sealed)
        try:
            if not _consteq(expected, bytes.fromhex(m.group(2).decode())):
                raise IntegrityError()
        except (IntegrityError, ValueError):
            raise IntegrityError("A commit of the store is not authentic.") from None
        if (meta.seq == 0) != (not parents):
            raise IntegrityError("A commit of the store is not authentic.")
        return meta.seq, tree_id

    def _open_meta(self, sealed: bytes) -> CommitMeta:
        try:
            return records.open_meta(self._keys.meta, self.store_id, sealed)
        except IntegrityError:
            raise IntegrityError("A commit of the store is not authentic.") from None

    def commit_meta(self, commit_id: bytes) -> CommitMeta:
        """The decrypted metadata of an authentic commit."""
        return self.commit(commit_id)[0]

    def destroy_keys(self, dek_ids: set[bytes], info: dict[str, object]) -> int:
        """Destroy data keys (crypto-shredding, see :mod:`memvault.redact`); return how many.

        Refuses (ConflictError) if the head still uses one of them: remove those files first.
        """
        with self._writer(), self._state_lock:
            state = self._sync(writer=True)
            live = [n.path for n in state.nodes.values() if n.dek_id in dek_ids]
            if live:
                raise ConflictError(f"Error: {len(live)} version(s) to redact are still in the current state.")
            try:
                count = self.keyring.destroy(dek_ids, info, durable=True)
            except OSError as err:
                raise StorageError.from_os_error(err, what="The keyring") from None
            self.forget_cached_plaintext()
            return count

    def adopt_master_key(self, epoch: int, key: bytes) -> None:
        """Start wrapping new data keys under a new epoch's master key (see keymgmt.rotate)."""
        with self._state_lock:
            self._master_keys[epoch] = key
            self._subkeys[epoch] = Subkeys(key, self.store_id, epoch)
            self._epoch = max(self._master_keys)
            self.keyring.add_wrap_key(epoch, self._subkeys[epoch].wrap)

    def master_keys(self) -> dict[int, bytes]:
        """The master key of every epoch (for wrapping into a new key slot). Handle with care."""
        return dict(self._master_keys)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's writer lock (for operator changes outside commits, e.g. key slots).

        A filesystem error inside the block becomes :class:`~memvault.errors.StorageError`.
        """
        with self._writer():
            yield

    def forget_cached_plaintext(self) -> None:
        """Drop every decrypted content and node kept in memory (after a redaction)."""
        with self._state_lock:
            self._content_cache.clear()
            self._content_cache_size = 0
            self._shard_cache.clear()

    # -- history access (authenticated; used by memvault.history) -------------------------------

    def commit(self, commit_id: bytes) -> tuple[CommitMeta, bytes, bytes | None]:
        """``(metadata, tree_id, parent_id)`` of an authentic commit."""
        tree_id, parents, message = self.git.read_commit(commit_id)
        m = _MESSAGE_RE.match(message)
        if m is None:
            raise IntegrityError("A commit of the store is not authentic.")
        self._load_commit(commit_id)
        return self._open_meta(b64decode(m.group(1).decode())), tree_id, (parents[0] if parents else None)

    def index_blobs(self, tree_id: bytes) -> dict[bytes, bytes]:
        """``shard -> index blob id`` of a commit's tree."""
        return self._shard_blob_ids(tree_id)

    def shard_nodes(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]:
        """The decrypted nodes of one index shard blob (``token -> node``); cached by blob id."""
        return self._load_shard(shard, blob_id)

    def state_at(self, commit_id: bytes) -> StoreState:
        """The full decrypted state of an authentic commit (does not touch the head cache)."""
        with self._state_lock:
            head = self._sync(writer=False)
            if commit_id == head.commit_id:
                frozen = StoreState(head.commit_id, head.seq, head.tree_id)
                frozen.nodes = dict(head.nodes)
                frozen.children = {k: dict(v) for k, v in head.children.items()}
                frozen.file_count, frozen.total_bytes = head.file_count, head.total_bytes
                return frozen
            seq, tree_id = self._load_commit(commit_id)
            return self._load_state(commit_id, seq, tree_id, None)

    def _tree(self, tree_id: bytes) -> dict[bytes, tuple[int, bytes]]:
        """Entries of a tree (cached; never modify the result)."""
        return self.git.tree_entries(tree_id)

    def _shard_blob_ids(self, tree_id: bytes) -> dict[bytes, bytes]:
        """``shard -> index blob id`` for the tree ``tree_id`` (layout 1: ``i/<h0>/<h1>``;
        layout 2: ``<h0>/<h1>/i``; docs/format.md 5.3)."""
        out: dict[bytes, bytes] = {}
        root = self._tree(tree_id)
        if root_roles(root) is None:
            raise IntegrityError()
        if b"i" in root:
            for h0, (mode0, sub_id) in self._tree(root[b"i"][1]).items():
                if mode0 != MODE_TREE or len(h0) != 1:
                    raise IntegrityError()
                for h1, (mode1, blob_id) in self._tree(sub_id).items():
                    if mode1 != MODE_BLOB or len(h1) != 1:
                        raise IntegrityError()
                    out[h0 + h1] = blob_id
            return out
        for h0, (_mode0, sub_id) in root.items():
            for h1, (mode1, leaf_id) in self._tree(sub_id).items():
                if mode1 != MODE_TREE or len(h1) != 1:
                    raise IntegrityError()
                entry = self._tree(leaf_id).get(b"i")
                if entry is not None:
                    if entry[0] != MODE_BLOB:
                        raise IntegrityError()
                    out[h0 + h1] = entry[1]
        return out

    def _layout(self, tree_id: bytes) -> int:
        """The tree layout a commit on ``tree_id`` keeps: the base's own, and for an empty base
        the one of the store's format version (layout 2 from format version 2)."""
        root = self._tree(tree_id)
        if b"i" in root:
            return 1
        return 2 if root or self.format_version >= 2 else 1

    def _load_shard(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]:
        self._follow_keyring()
        # Keyed by name and blob: the same blob filed under another shard name must be decoded
        # (and refused: the name is in its associated data), not served from the cache.
        key = shard + blob_id
        cached = self._shard_cache.get(key)
        if cached is not None:
            self._shard_cache.move_to_end(key)
            return cached
        nodes = self._decode_shard(shard, blob_id)
        self._shard_cache[key] = nodes
        if len(self._shard_cache) > _SHARD_CACHE_ENTRIES:
            self._shard_cache.popitem(last=False)
        return nodes

    def _decode_shard(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]:
        blob = self.git.read_blob(blob_id)
        nodes: dict[bytes, Node] = {}
        keyring, store_id, token_of = self.keyring, self.store_id, self._token_mac
        for token, dek_id, sealed in records.decode_shard(self._keys.index, store_id, shard, blob):
            if keyring.is_destroyed(dek_id):
                # Redacted version: its name and content went with its key. The placeholder path
                # uses characters the path grammar refuses, so it can never collide.
                placeholder = f"{ROOT}/<redacted:{token.hex()[:16]}>"
                node = Node(placeholder, "file", token, b"", 0, dek_id, sealed=sealed, redacted=True)
                if _shard_of(token) != shard or token in nodes:
                    raise IntegrityError()
                nodes[token] = node
                continue
            node = records.open_node(keyring.dek(dek_id), store_id, token, dek_id, sealed)
            # The record names its path; the path's token (HMAC(K_name, path)) must be the entry's.
            if _shard_of(token) != shard or token in nodes or token_of(node.path.encode()) != token:
                raise IntegrityError()
            nodes[token] = node
        return nodes

    def _load_state(self, commit_id: bytes, seq: int, tree_id: bytes, old: StoreState | None) -> StoreState:
        with _gc_paused():
            return self._load_state_unpaused(commit_id, seq, tree_id, old)

    def _load_state_unpaused(self, commit_id: bytes, seq: int, tree_id: bytes, old: StoreState | None) -> StoreState:
        # The whole tree has memvault's layout (subtrees already checked are remembered by id).
        problem = self.git.layout_problem(tree_id)
        if problem is not None:
            raise IntegrityError(f"The store's git repository holds a tree memvault did not write: {problem}.")
        blob_ids = self._shard_blob_ids(tree_id)
        state = StoreState(commit_id, seq, tree_id)
        if old is not None:
            # Incremental: keep shards whose index blob did not change.
            state.nodes, state.children = old.nodes, old.children
            state.file_count, state.total_bytes = old.file_count, old.total_bytes
            state.shards, state.shard_blobs = old.shards, old.shard_blobs
            self._state = None  # the old object is being consumed
            for shard in list(state.shard_blobs):
                if blob_ids.get(shard) != state.shard_blobs[shard]:
                    for node in sorted(state.shards.get(shard, {}).values(), key=lambda n: -len(n.path)):
                        state.remove(node)
                    del state.shard_blobs[shard]
                    state.shards.pop(shard, None)
        added: list[Node] = []
        for shard, blob_id in blob_ids.items():
            if state.shard_blobs.get(shard) == blob_id:
                continue
            added.extend(self._load_shard(shard, blob_id).values())
            state.shard_blobs[shard] = blob_id
        for node in sorted(added, key=lambda n: n.path.count("/")):
            state.add(node)
        for node in added:
            parent = node.path.rpartition("/")[0]
            if parent != ROOT and (parent not in state.nodes or not state.nodes[parent].is_dir):
                raise IntegrityError("The store's index is inconsistent.")
        return state

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
    ) -> T:
        """Run ``fn`` on a fresh view of the head and commit what it changed, as one commit.

        ``fn`` raising leaves everything unchanged. The store lock is held throughout, so ``fn``
        always sees the latest head (no lost updates).
        """
        with self._writer(), self._state_lock:
            state = self._sync(writer=True)
            txn = Transaction(self, state)
            result = fn(txn)
            meta = CommitMeta(
                seq=state.seq + 1, time=_now(), actor=actor, session=session, command=command,
                paths=paths, findings=dict(findings or {}),
            )  # fmt: skip
            self._commit(state, txn, meta)
            if self.access_times.due():
                try:
                    self.access_times.flush(durable=self._durable)
                except (MemvaultError, OSError):
                    pass  # advisory; the reads stay pending for the next try
            return result

    def _commit(self, state: StoreState, txn: Transaction, meta: CommitMeta, *, relayout: bool = False) -> None:
        """Write ``txn`` as one commit (docs/format.md §7). ``relayout``: file every live content
        blob and shard of ``state`` anew in tree layout 2 (``upgrade_format``), not patch its tree."""
        objects: list[GitObject] = []
        dek_records: list[bytes] = []
        new_nodes: dict[str, Node | None] = {}
        touched_shards: set[bytes] = set()
        tree_changes: dict[tuple[bytes, ...], tuple[int, bytes] | None] = {}
        shard_nodes: dict[bytes, dict[bytes, Node]] = {}
        layout = self._layout(state.tree_id)
        base_tree: bytes | None = state.tree_id
        if relayout:
            layout, base_tree = 2, None
            for node in state.nodes.values():
                if not node.is_dir and not node.redacted:
                    tree_changes[_content_path(node.token, 2)] = (MODE_BLOB, node.blob_id)
            for shard, shard_blob in state.shard_blobs.items():
                tree_changes[_shard_path(shard, 2)] = (MODE_BLOB, shard_blob)

        def shard_view(shard: bytes) -> dict[bytes, Node]:
            if shard not in shard_nodes:
                shard_nodes[shard] = dict(state.shards.get(shard, {}))
            return shard_nodes[shard]

        for path, pending in txn.changes.items():
            old = state.nodes.get(path)
            if pending is None:
                if old is None:
                    continue
                touched_shards.add(_shard_of(old.token))
                shard_view(_shard_of(old.token)).pop(old.token, None)
                if not old.is_dir:
                    tree_changes[_content_path(old.token, layout)] = None
                new_nodes[path] = None
                continue
            dek_id, dek = crypto.random_bytes(16), crypto.new_key()
            dek_records.append(self.keyring.dek_record(dek_id, dek, self._epoch))
            node = replace(pending, dek_id=dek_id, mtime=meta.time)
            if not node.is_dir:
                data = txn.contents[path]
                blob_bytes = records.encode_blob(
                    dek, store_id=self.store_id, file_id=node.file_id, version=node.version, dek_id=dek_id,
                    path=node.path, data=data,
                )  # fmt: skip
                blob = GitStore.blob(blob_bytes)
                objects.append(blob)
                node = replace(node, blob_id=blob.id, ct_sha256=crypto.sha256(blob_bytes))
                tree_changes[_content_path(node.token, layout)] = (MODE_BLOB, blob.id)
            elif old is not None and not old.is_dir:
                tree_changes[_content_path(old.token, layout)] = None
            node = records.seal_node(dek, self.store_id, node, encoding=self.format_version)
            shard = _shard_of(node.token)
            touched_shards.add(shard)
            shard_view(shard)[node.token] = node
            new_nodes[path] = node
        new_shard_blobs: dict[bytes, bytes | None] = {}
        for shard in touched_shards:
            nodes = shard_nodes[shard]
            path_key = _shard_path(shard, layout)
            if nodes:
                shard_bytes = records.encode_shard(
                    self._keys.index, self.store_id, shard, list(nodes.values()), version=self.format_version
                )
                blob = GitStore.blob(shard_bytes)
                objects.append(blob)
                tree_changes[path_key] = (MODE_BLOB, blob.id)
                new_shard_blobs[shard] = blob.id
            else:
                tree_changes[path_key] = None
                new_shard_blobs[shard] = None
        tree_id = self._apply_tree(base_tree, tree_changes, objects)
        sealed = records.seal_meta(self._keys.meta, self.store_id, meta)
        tag = records.commit_tag(self._keys.chain, self.store_id, meta.seq, state.commit_id, tree_id, sealed)
        commit = GitStore.commit(tree_id, state.commit_id, _commit_message(sealed, tag))
        objects.append(commit)
        # Step 1: objects. A failure here leaves only unreferenced objects: the old state.
        try:
            self.git.write_pack(objects, merge=True)
            self._objects_written += len(objects)
        except Exception as err:
            raise _storage_error(err) from None
        # Step 2: the keyring records the commit (the point of no return once it is durable).
        # The keyring was read by _sync under this same lock: the chain is current.
        dek_records.append(
            self.keyring.commit_record(meta.seq, commit.id, state.commit_id, raw_ids=self.format_version >= 2)
        )
        try:
            self.keyring.append(b"".join(dek_records), durable=self._durable)
        except OSError as err:
            # The append cut its records off again; if that failed and the commit is still
            # recorded, withdraw it with an ABORT record.
            if not self._abort(meta.seq, commit.id):
                raise StorageError.from_os_error(err, outcome_unknown=True) from None
            raise StorageError.from_os_error(err) from None
        # Step 3: publish by moving the branch.
        failure: BaseException | None = None
        try:
            swapped = self.git.compare_and_swap(state.commit_id, commit.id)
        except BaseException as err:  # noqa: BLE001 - decided below by re-reading the branch
            failure = err
            try:
                swapped = self.git.head() == commit.id
            except (OSError, MemvaultError):
                # Cannot tell whether the branch moved: an ABORT now could contradict a moved
                # branch, so leave the recorded commit for the next writer to publish.
                raise _storage_error(err, outcome_unknown=True) from None
        if not swapped:
            self._remove_ref_lock()
            # Recorded but not published: say so in the keyring, so nobody publishes it later.
            if not self._abort(meta.seq, commit.id):
                raise _storage_error(failure or OSError(5, "I/O error"), outcome_unknown=True) from None
            if failure is not None:
                if isinstance(failure, MemvaultError) or not isinstance(failure, Exception):
                    raise failure
                raise _storage_error(failure) from None
            raise ConflictError("Error: The memory store changed concurrently; retry the command.")
        # Published. Fold the changes into the cached state.
        try:
            for path in sorted(new_nodes, key=lambda p: -p.count("/")):
                previous = state.nodes.get(path)
                if previous is not None:
                    state.remove(previous)
            for _path, added in sorted(new_nodes.items(), key=lambda kv: kv[0].count("/")):
                if added is not None:
                    state.add(added)
            for shard, blob_id in new_shard_blobs.items():
                if blob_id is None:
                    state.shard_blobs.pop(shard, None)
                    state.shards.pop(shard, None)
                else:
                    state.shard_blobs[shard] = blob_id
            for path, data in txn.contents.items():
                cached = state.nodes.get(path)
                if cached is not None:
                    self._cache_content(cached.blob_id, data)
            state.commit_id, state.seq, state.tree_id = commit.id, meta.seq, tree_id
        except Exception:
            # The commit stands (the branch moved): report success, rebuild the cache lazily.
            self._state = None
        if failure is not None and not isinstance(failure, Exception):
            raise failure  # e.g. KeyboardInterrupt after the branch moved: the commit stands

    def _abort(self, seq: int, commit_id: bytes) -> bool:
        """Withdraw the recorded commit ``commit_id`` with an ``ABORT`` record if the keyring
        still names it; False if that could not be written (the next writer would then publish
        it)."""
        try:
            self.keyring.refresh()
            hw = self.keyring.high_water
            if hw is None or hw.commit_id != commit_id:
                return hw is not None  # not (or no longer) recorded: nothing to withdraw
            self.keyring.append(self.keyring.abort_record(seq, commit_id), durable=self._durable)
        except (OSError, MemvaultError):
            hw = self.keyring.high_water
            return hw is not None and hw.commit_id != commit_id
        return True

    def _remove_ref_lock(self) -> None:
        try:
            os.unlink(self.root / "repo" / "refs" / "heads" / "main.lock")
        except OSError:
            pass

    def _apply_tree(
        self,
        tree_id: bytes | None,
        changes: dict[tuple[bytes, ...], tuple[int, bytes] | None],
        objects: list[GitObject],
    ) -> bytes:
        """Write the trees on the changed paths (bounded fan-out); return the new root id."""
        new_id = self._apply_subtree(tree_id, changes, objects)
        if new_id is None:
            empty = GitStore.tree({})
            objects.append(empty)
            return empty.id
        return new_id

    def _apply_subtree(
        self,
        tree_id: bytes | None,
        changes: dict[tuple[bytes, ...], tuple[int, bytes] | None],
        objects: list[GitObject],
    ) -> bytes | None:
        entries = dict(self._tree(tree_id)) if tree_id is not None else {}
        grouped: dict[bytes, dict[tuple[bytes, ...], tuple[int, bytes] | None]] = {}
        changed: list[bytes] = []
        for key, value in changes.items():
            if len(key) == 1:
                changed.append(key[0])
                if value is None:
                    entries.pop(key[0], None)
                else:
                    entries[key[0]] = value
            else:
                grouped.setdefault(key[0], {})[key[1:]] = value
        for name, sub in grouped.items():
            current = entries.get(name)
            sub_id = self._apply_subtree(current[1] if current else None, sub, objects)
            changed.append(name)
            if sub_id is None:
                entries.pop(name, None)
            else:
                entries[name] = (MODE_TREE, sub_id)
        if not entries:
            return None
        tree = self.git.tree_update(tree_id, entries, changed)
        objects.append(tree)
        self.git.remember_tree(tree.id, entries)
        return tree.id

    def _write_initial_commit(self) -> None:
        meta = CommitMeta(seq=0, time=_now(), actor="memvault", session="", command="init", paths=(), findings={})
        empty = GitStore.tree({})
        sealed = records.seal_meta(self._keys.meta, self.store_id, meta)
        tag = records.commit_tag(self._keys.chain, self.store_id, 0, ZERO_ID, empty.id, sealed)
        commit = GitStore.commit(empty.id, None, _commit_message(sealed, tag))
        self.git.write_pack([empty, commit])
        record = self.keyring.commit_record(0, commit.id, ZERO_ID, raw_ids=self.format_version >= 2)
        self.keyring.append(record, durable=self._durable)
        if not self.git.compare_and_swap(None, commit.id):
            raise InternalError()
        self._state = StoreState(commit.id, 0, empty.id)

    # -- library conveniences -----------------------------------------------------------------

    def put_file(
        self, path: str, data: bytes | str, *, actor: str = "library", session: str = "", overwrite: bool = True
    ) -> None:
        """Write a file through the library API (bytes are kept as binary, e.g. images)."""
        from .paths import parse_path

        vpath = parse_path(path, self.settings)
        binary = isinstance(data, bytes)
        raw = data if isinstance(data, bytes) else data.encode("utf-8")

        def apply(txn: Transaction) -> None:
            if not overwrite and txn.get(vpath) is not None:
                raise PathExistsError(f"Error: File {vpath.text} already exists")
            txn.write_file(vpath, raw, binary=binary)

        self.transact(apply, command="put", paths=(vpath.text,), actor=actor, session=session)


def _when(value: object) -> str:
    """`` at <UTC time>`` for a tombstone's time (a number, or its text), or "" if it is not one."""
    try:
        t = float(str(value))
    except ValueError:
        return ""
    if not 0 < t < 253402300800:  # also refuses NaN and infinities
        return ""
    return f" at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(t))}"


def _storage_error(err: BaseException, *, outcome_unknown: bool = False) -> StorageError:
    if isinstance(err, OSError):
        return StorageError.from_os_error(err, outcome_unknown=outcome_unknown)
    return StorageError.from_os_error(OSError(5, "I/O error"), outcome_unknown=outcome_unknown)


def _freshness_problem(head: bytes, seq: int, hw: HighWater) -> IntegrityError | None:
    """Compare the branch head with the keyring's high-water mark."""
    if head == hw.commit_id:
        return None
    if seq == hw.seq - 1 and head == hw.parent_id:
        return None  # the recorded commit on top was lost (durability "none" only; see _sync)
    if seq < hw.seq:
        return RollbackDetectedError(
            f"Rollback detected: the branch is at commit #{seq} but this store has recorded commit "
            f"#{hw.seq}. Someone reset or replaced the history."
        )
    if seq == hw.seq:
        return RollbackDetectedError("Fork detected: the branch points at a commit this store never recorded.")
    return IntegrityError("The store's keyring is older than its history (restored from a backup?).")


def _commit_message(sealed_meta: bytes, tag: bytes) -> bytes:
    """The commit message grammar (matched back by ``_MESSAGE_RE``)."""
    return (
        b"memvault\n\nMemvault-Meta: "
        + b64encode(sealed_meta).encode()
        + b"\nMemvault-Tag: "
        + tag.hex().encode()
        + b"\n"
    )


def _content_path(token: bytes, layout: int) -> tuple[bytes, ...]:
    """Where a file's content blob sits in the tree (docs/format.md 5.3)."""
    h = token.hex().encode()
    return (b"c", h[:1], h[1:2], h[2:]) if layout == 1 else (h[:1], h[1:2], h[2:])


def _shard_path(shard: bytes, layout: int) -> tuple[bytes, ...]:
    """Where the index blob of ``shard`` (two hex digits) sits in the tree (docs/format.md 5.3)."""
    return (b"i", shard[:1], shard[1:]) if layout == 1 else (shard[:1], shard[1:], b"i")


def _consteq(a: bytes, b: bytes) -> bool:
    import hmac

    return hmac.compare_digest(a, b)


_PRIVATE = object()
