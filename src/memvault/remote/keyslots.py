"""A store's key slots between object storage (``keys/<slot_id>.json``, docs/format.md §12.2) and a
replica directory's ``keys/``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..fsutil import atomic_write, wipe_file
from ..storage.base import ObjectStore
from .layout import KEYS, slot_id_of, slot_key

__all__ = ["pull_slots"]

#: Slots fetched at once.
WORKERS = 16


def pull_slots(objects: ObjectStore, keys_dir: Path, *, durable: bool) -> None:
    """Make the key slots in ``keys_dir`` those in ``objects`` (added, changed or removed); the
    caller holds the replica's writer lock.

    Raises:
        ServiceError: the object store failed. OSError: a slot file could not be written.
    """
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
