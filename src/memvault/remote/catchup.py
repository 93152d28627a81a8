"""A replica catching up from a checkpoint (docs/format.md §12.8): which checkpoint a pull needs
(the replica is empty, or the records after its position are gone), fetched and authenticated
with its data key bundle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..errors import IntegrityError
from ..storage.base import ObjectInfo, ObjectStore
from .checkpoint import MAX_CHECKPOINT_BYTES, Checkpoint, bundle_key, checkpoint_of, decode_bundle, decode_checkpoint
from .layout import LOG, pack_keys
from .logstate import LogListing, Voids, mark_tag
from .packmap import PackMap

__all__ = ["needed_checkpoint", "checkpoint_to_read", "fetch_checkpoint", "checkpoint_mark", "pack_holding"]


def needed_checkpoint(listing: LogListing, voids: Voids, local: int) -> ObjectInfo | None:
    """The newest checkpoint listed when a pull from log position ``local`` (the replica's newest;
    -1: empty) should read from it: it covers positions after ``local``, and the replica is empty or
    no record is listed at ``local + 1``. None otherwise."""
    if not listing.checkpoints:
        return None
    position = max(listing.checkpoints)
    if position <= local:
        return None
    if local >= 0 and voids.resolve(listing, local + 1)[1] is not None:
        return None
    return listing.checkpoints[position]


def checkpoint_to_read(
    listing: LogListing, voids: Voids, local: int, mark: tuple[int, str] | None
) -> tuple[ObjectInfo | None, int]:
    """Which checkpoint a pull from ``local`` with high-water mark ``mark`` must fetch and verify:
    the newest listed, when the pull reads from it (:func:`needed_checkpoint`) or when the record of
    ``local`` or of the mark is gone and the checkpoint covers it; none when the mark names that very
    checkpoint object (this host verified it). Returns ``(it or None, the position the mark vouches
    for without a fetch, else -1)``."""
    if not listing.checkpoints:
        return None, -1
    position = max(listing.checkpoints)
    info = listing.checkpoints[position]
    if needed_checkpoint(listing, voids, local) is not None:
        return info, -1
    if mark is not None and mark[0] == position and mark[1] == f"c/{info.tag}":
        return None, position
    seen = (local, mark[0] if mark is not None else -1)
    gone = [n for n in seen if 0 <= n <= position and voids.resolve(listing, n)[1] is None]
    return (info, -1) if gone else (None, -1)


def fetch_checkpoint(
    get_all: Callable[[list[str]], list[bytes | None]], info: ObjectInfo, key: bytes, store_id: bytes, where: str
) -> tuple[Checkpoint, dict[bytes, bytes]]:
    """The checkpoint ``info`` names, authenticated with ``key`` (the store's K_keyring), and the DEK
    records of its bundle by data key id, fetched together (one round).

    Raises:
        IntegrityError: it is too big, gone, or does not verify; or its bundle is damaged.
    """
    position = checkpoint_of(info.key)
    if position is None or info.size > MAX_CHECKPOINT_BYTES:
        raise IntegrityError(f"The checkpoint {info.key} in {where} does not verify.")
    data, bundle = get_all([info.key, bundle_key(position)])
    if data is None:
        raise IntegrityError(f"{where} no longer holds the checkpoint {info.key} it listed.")
    checkpoint = decode_checkpoint(data, key, store_id, position)
    return checkpoint, decode_bundle(bundle) if bundle is not None else {}


def checkpoint_mark(listing: LogListing, voids: Voids, info: ObjectInfo | None, position: int) -> str:
    """The tag a high-water mark records at ``position`` after a pull took it in from the checkpoint
    ``info``: the record's (:func:`~memvault.remote.logstate.mark_tag`) while one is listed there,
    else ``c/`` and the checkpoint's version tag (never a record's: a record put back later fails
    the check, and the checkpoint covers the position, §12.8)."""
    attempt, record = voids.resolve(listing, position)
    if record is None and info is None:
        raise ValueError("no record and no checkpoint at the position")
    return mark_tag(attempt, record.tag) if record is not None else f"c/{info.tag if info else ''}"


class _Source(Protocol):
    objects: ObjectStore

    def read_checkpoint(self, info: ObjectInfo) -> tuple[Checkpoint, dict[bytes, bytes]]: ...

    def get_many(self, keys: list[str]) -> list[bytes | None]: ...


def pack_holding(replica: _Source, obj_id: bytes) -> tuple[str, list[bytes | None]] | None:
    """The name and ``[pack, index]`` bytes of the newest checkpoint's pack that holds the object
    ``obj_id`` (hex), for a replica whose pack map names a pack a gc has deleted; None if none does.

    Raises:
        IntegrityError: the checkpoint does not verify. ServiceError: the object store failed.
    """
    checkpoints = LogListing.of(replica.objects.list(LOG)).checkpoints
    if not checkpoints:
        return None
    raw_id = bytes.fromhex(obj_id.decode())
    for name in replica.read_checkpoint(checkpoints[max(checkpoints)])[0].packs:
        got = replica.get_many(list(pack_keys(name)))
        if got[1] is not None and raw_id in PackMap.ids_of(got[1]):
            return name, got
    return None
