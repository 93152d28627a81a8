"""Stores in object storage: the host's replica directory of a store at a URL, prepared for
opening (configuration and key slots fetched) or for creating (object storage empty)."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..errors import ConflictError, InvalidInputError, StoreExistsError, StoreNotFoundError
from ..fsutil import StoreLock, atomic_write, make_private_dir, restrict_modes
from ..git.repo import GitStore
from ..keys.keyring import Keyring
from ..remote.layout import CONFIG
from ..remote.replica import MARK_FILE, RaceLost, Replica, cache_dir_for
from ..storage.base import ObjectStore
from ..storage.url import open_backend, parse_url
from .config import STORE_FILE, parse_config, read_config

__all__ = ["replica_for_open", "replica_for_create", "run_racing", "RACE_SECONDS"]

#: Seconds a command keeps running again on a newer head while other hosts commit first.
RACE_SECONDS = 60.0
T = TypeVar("T")


def run_racing(body: Callable[[], T], replica: Replica | None = None) -> T:
    """Run ``body`` (one command making one commit, under the writer lock) again on the newer
    head each time another host committed first (:class:`~memvault.remote.replica.RaceLost`),
    after a random pause of up to 20 ms; ConflictError after :data:`RACE_SECONDS`. However the
    command ends, ``replica`` then stops waiting (its waiting marker goes)."""
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while True:
            try:
                return body()
            except RaceLost:
                if time.monotonic() > deadline:
                    break
                time.sleep(random.uniform(0, 0.02))  # noqa: S311 - jitter, not a secret
        raise ConflictError("Error: The memory store changed concurrently; retry the command.")
    finally:
        if replica is not None:
            replica.stop_waiting()


def _ensure_dir(path: Path) -> None:
    try:
        make_private_dir(path, parents=True)
    except FileExistsError:
        pass  # made meanwhile by another process of this host


def _clear_old_replica(root: Path) -> None:
    """Remove a replica of an earlier store at the same URL; refuse to touch anything else."""
    if not root.exists():
        return
    if (root / STORE_FILE).exists() and (root / "repo").is_dir():
        shutil.rmtree(root)
        return
    if root.is_dir() and not any(root.iterdir()):
        return
    raise StoreExistsError("The cache directory for this store exists and is not a memvault replica.")


def _probe_conditional_writes(objects: ObjectStore) -> None:
    """Refuse a service that ignores create-if-absent (it would let two hosts commit the same
    sequence number): create one probe object twice; the second must fail."""
    key = f"probe-{secrets.token_hex(8)}"
    try:
        if objects.create(key, b"first") is None or objects.create(key, b"second") is not None:
            raise InvalidInputError(
                f"Error: {objects.description} does not honour conditional writes (If-None-Match); memvault "
                "cannot keep one history there."
            )
    finally:
        objects.delete(key)


def replica_for_create(address: str, cache_dir: str | os.PathLike[str] | None) -> tuple[ObjectStore, Path]:
    """The backend of ``address`` and an empty replica directory for a new store there.

    Raises:
        StoreExistsError: object storage already holds objects at that prefix.
        InvalidInputError: a malformed URL, or boto3 missing for ``s3://``.
        ServiceError: the object store failed.
    """
    url = parse_url(address)
    objects = open_backend(url)
    if objects.list(""):
        raise StoreExistsError(f"{objects.description} already holds objects at this prefix; choose an empty one.")
    _probe_conditional_writes(objects)
    root = Path(cache_dir) if cache_dir is not None else cache_dir_for(str(url))
    _clear_old_replica(root)
    return objects, root


def replica_for_open(
    address: str, cache_dir: str | os.PathLike[str] | None, lock_timeout: float
) -> tuple[ObjectStore, Path]:
    """The backend of ``address`` and the host's replica directory of the store there, with the
    store's current ``memvault.json`` and key slots (a replica of another store at that URL is
    replaced), fetched under the replica's writer lock (waiting at most ``lock_timeout`` s).

    Raises:
        StoreNotFoundError: object storage holds no store at that prefix.
        InvalidInputError, ServiceError: as for :func:`replica_for_create`.
    """
    url = parse_url(address)
    objects = open_backend(url)
    config = objects.get(CONFIG)
    if config is None:
        raise StoreNotFoundError(f"No memory store exists at this prefix of {objects.description}.")
    root = Path(cache_dir) if cache_dir is not None else cache_dir_for(str(url))
    store_id = parse_config(config).store_id
    if (root / STORE_FILE).exists() and read_config(root).store_id != store_id:
        _clear_old_replica(root)
    if not root.is_dir():
        _ensure_dir(root)
    with StoreLock(root / "lock", lock_timeout).hold():
        if not (root / "repo").is_dir():  # a new replica (or one a crash left half made)
            (root / MARK_FILE).unlink(missing_ok=True)
            _ensure_dir(root / "keys")
            if not (root / "keyring").exists():
                Keyring.create(root / "keyring", store_id, durable=False)
            GitStore.init(root / "repo", durable=False).close()
            restrict_modes(root / "repo")
        atomic_write(root / STORE_FILE, config, durable=False)
        Replica.pull_slots_from(objects, root / "keys", durable=False)
    return objects, root
