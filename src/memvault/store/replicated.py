"""Stores in object storage: the host's replica directory of a store at a URL, prepared for
opening (configuration and key slots fetched, the store the same one this host used there) or for
creating (object storage empty), each only in a cache no other user can change; forgetting a
store on purpose (``memvault anchor reset``)."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..errors import ConflictError, IntegrityError, InvalidInputError, StoreExistsError, StoreNotFoundError
from ..fsutil import (
    atomic_write,
    cache_root,
    check_parent_dir,
    check_private_dir,
    make_private_dir,
    restrict_modes,
)
from ..git.repo import GitStore
from ..hoststate import ACCESS_FILE, RESET_HINT, UrlState, url_state
from ..keys.keyring import Keyring
from ..remote.keyslots import pull_slots
from ..remote.layout import CONFIG
from ..remote.replica import RaceLost, Replica, cache_dir_for
from ..storage.base import ObjectStore
from ..storage.url import open_backend, parse_url
from .config import STORE_FILE, parse_config, read_config
from .lock import StoreLock

__all__ = [
    "Placement",
    "publish_config",
    "replica_for_open",
    "replica_for_create",
    "forget_at_url",
    "recorded_at_url",
    "run_racing",
    "RACE_SECONDS",
]

#: Seconds a command keeps running again on a newer head while other hosts commit first.
RACE_SECONDS = 60.0
T = TypeVar("T")


def publish_config(remote: Replica, old: bytes, new: bytes) -> None:
    """Replace the bucket's ``memvault.json``, which must still be ``old``, by ``new`` (a format
    upgrade). Raises ConflictError: it changed meanwhile (nothing was replaced)."""
    current = remote.objects.get_tagged(CONFIG)
    if current is None or current[0] != old or remote.objects.swap(CONFIG, new, current[1]) is None:
        raise ConflictError(
            "Error: The store's memvault.json in object storage changed meanwhile; nothing was changed. "
            "Run the command again."
        )


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


#: The variable that places the cache, for messages about it.
_CACHE_ENV = "MEMVAULT_CACHE_DIR"


def _checked_replica(url: str, cache_dir: str | os.PathLike[str] | None) -> Path:
    """The replica directory of the store at ``url`` (``cache_dir``, else under the cache root),
    made if missing, refused unless no other user can change or move it: the replica and the
    cache root private to this user (not a symbolic link, owned by this user, not writable by
    group or others), the directory holding them writable by nobody else but with the sticky bit.

    Raises:
        StorageError: one of them is not.
    """
    if cache_dir is not None:
        root = Path(os.path.abspath(cache_dir))
        private, holder = [root], root.parent
    else:
        base = Path(os.path.abspath(cache_root()))
        root = cache_dir_for(url, base)
        private, holder = [base, root], base.parent
    _ensure_dir(root)
    check_parent_dir(holder, "The directory holding the cache of stores in object storage", _CACHE_ENV)
    for path in private:
        check_private_dir(path, "The cache directory of this store in object storage", _CACHE_ENV)
    return root


def _changed(url: str, old: bytes, new: bytes) -> IntegrityError:
    return IntegrityError(
        f"The store at {url} is now store {new.hex()}, but this host used store {old.hex()} there: the store was "
        "replaced, or a writer of the bucket put another store's memvault.json there. Nothing was changed. If the "
        f"store was replaced on purpose, run 'memvault --store {url} anchor reset' (this host then forgets store "
        f"{old.hex()}: its cache of it, its high-water mark and its read times)."
    )


def _seen_here(root: Path, host: UrlState) -> bytes | None:
    """The id of the store this host used at the URL: as the host state records it, else as the
    replica's ``memvault.json`` says (a replica made before the host state, or with it off).

    Raises:
        IntegrityError: the two disagree, or the record is damaged.
    """
    seen = host.store_id()
    if (root / STORE_FILE).exists():
        local = read_config(root).store_id
        if seen is not None and local != seen:
            raise IntegrityError(
                f"This host's cache of the store holds store {local.hex()}, but it recorded store {seen.hex()} at this "
                f"URL. {RESET_HINT}"
            )
        seen = local
    return seen


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


@dataclass(frozen=True)
class Placement:
    """Where a store in object storage sits for this host: its objects, its replica directory,
    and what the host keeps about it (its high-water mark, its read times, the store id seen)."""

    objects: ObjectStore
    root: Path
    host: UrlState


def replica_for_create(address: str, cache_dir: str | os.PathLike[str] | None) -> Placement:
    """The backend of ``address`` and an empty replica directory for a new store there.

    Raises:
        StoreExistsError: object storage already holds objects at that prefix, or this host
            keeps a replica or a high-water mark of a store it used there (nothing is removed:
            ``memvault anchor reset`` forgets them on purpose).
        InvalidInputError: a malformed URL, or boto3 missing for ``s3://``.
        ServiceError: the object store failed.
        StorageError: the cache or the host state is not private to this user.
    """
    url = parse_url(address)
    objects = open_backend(url)
    if objects.list(""):
        raise StoreExistsError(f"{objects.description} already holds objects at this prefix; choose an empty one.")
    _probe_conditional_writes(objects)
    root = _checked_replica(str(url), cache_dir)
    host = url_state(str(url), root)
    names = set(os.listdir(root))
    if names == {"lock"}:  # left by an open that found no store, or by `anchor reset`
        (root / "lock").unlink()
        names = set()
    seen = host.store_id() if not names else _seen_here(root, host)
    if seen is not None or (host.kept and os.path.lexists(host.mark_path)):
        old = f"store {seen.hex()}" if seen is not None else "a store"
        raise StoreExistsError(
            f"This host used {old} at {url}, which is empty now (the store was destroyed, or a writer of the bucket "
            "deleted it), and still keeps its cache and its high-water mark: nothing was changed. Copy out what you "
            f"need, then run 'memvault --store {url} anchor reset' to make a new store there on purpose."
        )
    if names:
        raise StoreExistsError("The cache directory for this store exists and is not a memvault replica.")
    return Placement(objects, root, host)


def replica_for_open(address: str, cache_dir: str | os.PathLike[str] | None, lock_timeout: float) -> Placement:
    """The backend of ``address`` and the host's replica directory of the store there, with the
    store's current ``memvault.json`` and key slots, fetched under the replica's writer lock
    (waiting at most ``lock_timeout`` s). Nothing of what the host kept is touched before that
    lock is held, and nothing at all when the bucket names another store than the one this host
    used at that URL.

    Raises:
        StoreNotFoundError: object storage holds no store at that prefix.
        IntegrityError: it holds another store than the one this host used there.
        InvalidInputError, ServiceError, StorageError: as for :func:`replica_for_create`.
    """
    url = parse_url(address)
    objects = open_backend(url)
    config = objects.get(CONFIG)
    if config is None:
        raise StoreNotFoundError(f"No memory store exists at this prefix of {objects.description}.")
    store_id = parse_config(config).store_id
    root = _checked_replica(str(url), cache_dir)
    host = url_state(str(url), root)
    with StoreLock(root / "lock", lock_timeout).hold():
        seen = _seen_here(root, host)
        if seen is not None and seen != store_id:
            raise _changed(str(url), seen, store_id)
        host.adopt(root)
        host.bind(store_id, str(url))
        if not (root / "repo").is_dir():  # a new replica (or one a crash left half made)
            _ensure_dir(root / "keys")
            if not (root / "keyring").exists():
                Keyring.create(root / "keyring", store_id, durable=False)
            GitStore.init(root / "repo", durable=False).close()
            restrict_modes(root / "repo")
        atomic_write(root / STORE_FILE, config, durable=False)
        pull_slots(objects, root / "keys", durable=False)
    return Placement(objects, root, host)


def forget_at_url(
    address: str, cache_dir: str | os.PathLike[str] | None, lock_timeout: float
) -> tuple[bytes | None, bytes | None]:
    """Make this host forget the store it used at ``address`` (``memvault anchor reset``): its
    replica and its high-water mark, and, unless the bucket still holds that same store (an
    older copy of it accepted on purpose), its read times and the store id it saw there. Under
    the replica's writer lock; stop other processes using the store on this host first.

    Returns:
        ``(the id of the store this host had used there or None, the id of the store there now
        or None)``.

    Raises:
        InvalidInputError, ServiceError, StorageError: as for :func:`replica_for_create`.
    """
    url = parse_url(address)
    objects = open_backend(url)
    config = objects.get(CONFIG)
    current = parse_config(config).store_id if config is not None else None
    root = _checked_replica(str(url), cache_dir)
    host = url_state(str(url), root)
    with StoreLock(root / "lock", lock_timeout).hold():
        try:
            seen = _seen_here(root, host)
        except IntegrityError:
            seen = host.store_id() if host.kept else None
        same = seen is not None and seen == current
        host.forget(read_times=not same)
        keep = {"lock", ACCESS_FILE} if same and not host.kept else {"lock"}
        for entry in os.listdir(root):
            if entry not in keep:
                path = root / entry
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
    return seen, current


def recorded_at_url(address: str, cache_dir: str | os.PathLike[str] | None) -> tuple[bytes | None, int | None]:
    """What this host keeps about the store at ``address``, for an operator (``memvault anchor``):
    the id of the store it used there and the sequence number of the newest log record it saw
    (not verified: read without the store's key; -1 if the mark is damaged), each None if none.

    Raises:
        InvalidInputError, StorageError: as for :func:`replica_for_create`; IntegrityError: the
        record of the store id is damaged.
    """
    url = parse_url(address)
    root = _checked_replica(str(url), cache_dir)
    host = url_state(str(url), root)
    try:
        seen = _seen_here(root, host)
    except IntegrityError:
        seen = host.store_id()
    return seen, host.seen_seq()
