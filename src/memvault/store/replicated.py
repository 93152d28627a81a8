"""Stores in object storage: the host's replica directory of a store at a URL, prepared for
opening (configuration and key slots fetched) or for creating (object storage empty)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import StoreExistsError, StoreNotFoundError
from ..fsutil import atomic_write, make_private_dir, restrict_modes
from ..git.repo import GitStore
from ..keys.keyring import Keyring
from ..remote.layout import CONFIG
from ..remote.replica import MARK_FILE, cache_dir_for
from ..storage.base import ObjectStore
from ..storage.url import open_backend, parse_url
from .config import STORE_FILE, parse_config, read_config

__all__ = ["replica_for_open", "replica_for_create"]


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
    root = Path(cache_dir) if cache_dir is not None else cache_dir_for(str(url))
    _clear_old_replica(root)
    return objects, root


def replica_for_open(address: str, cache_dir: str | os.PathLike[str] | None) -> tuple[ObjectStore, Path]:
    """The backend of ``address`` and the host's replica directory of the store there, with the
    store's current ``memvault.json`` (a replica of another store at that URL is replaced).
    Key slots are fetched by the replica's first pull of them.

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
    if (root / STORE_FILE).exists():
        if (root / STORE_FILE).read_bytes() == config:
            return objects, root
        old, new = read_config(root), parse_config(config).store_id
        if old.store_id != new:
            _clear_old_replica(root)
    if not (root / "repo").is_dir():
        _clear_old_replica(root)
        make_private_dir(root, parents=True)
        make_private_dir(root / "keys")
        store_id = parse_config(config).store_id
        Keyring.create(root / "keyring", store_id, durable=False)
        GitStore.init(root / "repo", durable=False).close()
        restrict_modes(root / "repo")
        (root / MARK_FILE).unlink(missing_ok=True)
    atomic_write(root / STORE_FILE, config, durable=False)
    return objects, root
