"""Making a :class:`~memvault.store.MemoryStore` object: a new store (directory or object storage,
built so that a failure leaves nothing half made), or an existing one opened with its key, waiting
out a settings change in progress. ``MemoryStore.create`` and ``MemoryStore.open`` call these."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .. import crypto
from ..errors import StorageError
from ..fsutil import make_private_dir, restrict_modes
from ..git.repo import GitStore
from ..keys.keyring import Keyring
from ..keys.slots import Subkeys, Unlock, check_new_passphrase, load_slots, new_slot, unlock_master_keys, write_slot
from ..settings import KdfParams, StoreSettings
from ..storage.url import is_remote
from . import config as cfg
from .atimes import AccessTimes
from .building import new_store_dir
from .config import FORMAT_VERSION, STORE_FILE, chains_key_changes, read_config, write_config
from .journal import recover_after_reboot
from .replicated import Placement, replica_for_create, replica_for_open

__all__ = ["TOKEN", "Made", "create_store", "open_store"]

#: What ``MemoryStore.__init__`` must be given: only this module makes store objects.
TOKEN = object()


class Made(Protocol):
    """What this module needs of the store objects it makes (``MemoryStore``)."""

    store_id: bytes
    format_version: int
    unlocked_slot: bytes
    lock_timeout: float
    plaintext_cache_bytes: int
    access_times: AccessTimes
    remote: Any

    @property
    def config_key(self) -> bytes: ...

    def writing(self) -> AbstractContextManager[None]: ...

    def state_locked(self) -> AbstractContextManager[None]: ...

    def attach_replica(self, at: Placement) -> None: ...

    def pull(self) -> None: ...

    def write_first_commit(self, settings: StoreSettings) -> None: ...

    def settings_in_force(self) -> bytes: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=Made)


def create_store(
    cls: Callable[..., S], path: str | os.PathLike[str], unlock: Unlock, *, settings: StoreSettings | None,
    kdf: KdfParams | None, lock_timeout: float, plaintext_cache_bytes: int, allow_weak_passphrase: bool,
    cache_dir: str | os.PathLike[str] | None,
) -> S:  # fmt: skip
    """``MemoryStore.create`` (see there)."""
    if unlock.passphrase is not None:
        check_new_passphrase(unlock.passphrase, allow_weak=allow_weak_passphrase)
    try:
        if is_remote(path):
            placed = replica_for_create(str(path), cache_dir)
            root = placed.root
            store = _build(cls, root, unlock, settings, kdf, placed)
            with store.writing(), store.state_locked():
                assert store.remote is not None
                store.remote.push_all((root / STORE_FILE).read_bytes(), root / "keys")
                placed.host.bind(store.store_id, str(path))
        else:
            store = _build(cls, Path(path), unlock, settings, kdf)
    except OSError as err:
        raise StorageError.from_os_error(err, what="The memory store") from None
    store.lock_timeout = lock_timeout
    store.plaintext_cache_bytes = plaintext_cache_bytes
    return store


def _build(
    cls: Callable[..., S], root: Path, unlock: Unlock, settings: StoreSettings | None, kdf: KdfParams | None,
    at: Placement | None = None,
) -> S:  # fmt: skip
    """A new store in ``root`` (or in a hidden sibling renamed into place, :mod:`.building`): its
    first key slot, keyring, repository, commit #0, access-time file and, last, ``memvault.json``."""
    settings = settings or StoreSettings()
    durable = settings.durability == "full"
    store_id = crypto.random_bytes(16)
    master_keys = {1: crypto.new_key()}
    fmt2 = chains_key_changes(FORMAT_VERSION)  # slot format 2: a label and a creation time
    first_slot = new_slot(store_id, unlock, master_keys, kdf, label="initial" if fmt2 else None,
                          created=int(time.time()) if fmt2 else None)  # fmt: skip
    # After the slot: a key provider that fails (or an interrupted key derivation) leaves nothing.
    with new_store_dir(root, durable=durable, own=at is not None) as work:
        make_private_dir(work / "keys")
        write_slot(work / "keys", first_slot, durable=durable)
        Keyring.create(work / "keyring", store_id, durable=durable)
        git = GitStore.init(work / "repo", durable=durable)
        try:
            store = cls(work, store_id, settings, master_keys, git, _token=TOKEN)
            if at is not None:
                store.attach_replica(at)  # before the first commit: a replica chains nothing outside commits
            store.write_first_commit(settings)
            store.access_times.create(durable=durable)
            # dulwich honours the umask (0 is common in containers): nothing may be group/other-readable.
            restrict_modes(work / "repo")
            # The marker file goes last: a crash before it leaves no half-made store that opens.
            write_config(work, store_id, settings, FORMAT_VERSION, store.config_key, durable=durable)
        except BaseException:
            git.close()
            raise
        if work != root:
            git.close()  # built in a sibling: opened again where it now is
    if work != root:
        store = cls(root, store_id, settings, master_keys, GitStore(root / "repo", durable=durable), _token=TOKEN)
    store.unlocked_slot = first_slot.slot_id
    return store


def open_store(
    cls: Callable[..., S], path: str | os.PathLike[str], unlock: Unlock, *, check_head: bool, lock_timeout: float,
    plaintext_cache_bytes: int, cache_dir: str | os.PathLike[str] | None,
) -> S:  # fmt: skip
    """``MemoryStore.open`` (see there)."""
    unlocked, remote = None, is_remote(path)
    for _attempt in cfg.settle(None if remote else Path(path) / "lock", lock_timeout):  # raises when spent
        placed = replica_for_open(str(path), cache_dir, lock_timeout) if remote else None
        root = Path(path) if placed is None else placed.root
        config = read_config(root)
        unlocked = unlocked or unlock_master_keys(config.store_id, load_slots(root / "keys"), unlock)
        config.verify(cfg.config_key(unlocked[1], config.store_id))
        git = GitStore(root / "repo", durable=config.settings.durability == "full")
        if placed is None:  # a replica's journal is object storage's log
            first = min(unlocked[1])
            recover_after_reboot(root, config.store_id, Subkeys(unlocked[1][first], config.store_id, first).keyring,
                                 git, lock_timeout)  # fmt: skip
        store = cls(root, config.store_id, config.settings, unlocked[1], git, _token=TOKEN)
        store.format_version, store.unlocked_slot = config.version, unlocked[0].slot_id
        store.lock_timeout, store.plaintext_cache_bytes = lock_timeout, plaintext_cache_bytes
        if placed is not None:
            store.attach_replica(placed)
            store.pull()
        if not check_head or config.bound_to(store.settings_in_force()):
            return store
        store.close()
    raise AssertionError("unreachable")
