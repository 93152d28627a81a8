"""``memvault copy``: one store, with its whole history and keys, from one backend to another
(a directory, ``s3://``, ``file://``), checked as it is read and verified where it lands."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError, StoreExistsError
from ..hoststate import MARK_FILE
from ..remote.follow import SIDES_FILE
from ..remote.replica import PACKMAP_FILE, POSITION_FILE, Replica
from ..storage.url import is_remote
from ..store import MemoryStore
from ..store.atimes import FILE_NAME as ATIMES_FILE
from ..store.config import STORE_FILE, chains_key_changes, prepare_store_dir
from ..store.replicated import replica_for_create
from ..verify import VerifyReport, verify

__all__ = ["CopyResult", "copy_store"]

#: Files of a store directory that belong to one host, not to the store.
_HOST_FILES = ("lock", MARK_FILE, PACKMAP_FILE, POSITION_FILE, SIDES_FILE)


@dataclass(frozen=True)
class CopyResult:
    """A finished copy: the store's id, its commits, and the verification of the copy."""

    store_id: str
    commits: int
    report: VerifyReport

    def to_json(self) -> dict[str, Any]:
        return {"store_id": self.store_id, "commits": self.commits, "verify": self.report.to_json()}


def copy_store(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    passphrase: str | None = None,
    key_file: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> CopyResult:
    """Copy the store at ``source`` to the empty ``destination`` (same store id, keys and
    history), then open the copy afresh and verify it.

    Args:
        source, destination: store directories or object-storage URLs.
        passphrase, key_file: the secret that opens the source (it opens the copy too).
        cache_dir: where the copy is opened for verification when it is in object storage
            (default: the host's cache for its URL).

    Raises:
        StoreExistsError: ``destination`` is not empty.
        InvalidInputError: the source is of format version 1 or 2 and the destination is object
            storage (run ``memvault upgrade`` first).
        IntegrityError: the source does not verify while it is read.
    """
    secret: dict[str, Any] = {"passphrase": passphrase} if key_file is None else {"key_file": key_file}
    with MemoryStore.open(source, **secret) as src, src.writing():
        if src.remote is not None:
            src.remote.fetch_all()  # every object, also those its cache evicted
        if is_remote(destination):
            if not chains_key_changes(src.format_version):
                raise InvalidInputError(
                    "Error: Only format version 3 stores go to object storage: run `memvault upgrade` first."
                )
            if src.git.loose_count():
                src.maintain(keep_dirs=True)  # every object in a pack
            placed = replica_for_create(str(destination), cache_dir)
            upload = Replica(placed.objects, src.root, src.store_id, src.keyring, src.git, None, durable=True)
            try:
                commits = upload.push_all((src.root / STORE_FILE).read_bytes(), src.root / "keys")
            finally:
                upload.close()
        else:
            # A replica's access-time file is its host's, not named in the keyring: not copied.
            skip = (*_HOST_FILES, ATIMES_FILE) if src.remote is not None else _HOST_FILES
            _copy_directory(src.root, Path(destination), skip)
            commits = src.head[1] + 1
        store_id = src.store_id.hex()
    with MemoryStore.open(destination, cache_dir=cache_dir, check_head=False, **secret) as copy:
        if not copy.access_times.recorded():
            with copy.writing():
                copy.access_times.create(durable=True)
        report = verify(copy)
    return CopyResult(store_id, commits, report)


def _copy_directory(root: Path, destination: Path, skip: tuple[str, ...]) -> None:
    """Copy a store directory's files but those named in ``skip``, ``memvault.json`` last."""
    prepare_store_dir(destination)
    if any(destination.iterdir()):
        raise StoreExistsError("The destination directory is not empty.")
    for entry in sorted(root.iterdir()):
        if entry.name in skip or entry.name == STORE_FILE:
            continue
        if entry.is_dir():
            shutil.copytree(entry, destination / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, destination / entry.name, follow_symlinks=False)
    shutil.copy2(root / STORE_FILE, destination / STORE_FILE)  # the marker last
