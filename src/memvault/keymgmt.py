"""Key slot administration: list, add and remove ways to unlock a store, change a passphrase.

Each key slot wraps the store's master key(s) under one secret (a passphrase through Argon2id,
or a raw 32-byte key file). Adding or removing a slot rewrites only that slot file: no blob,
commit or keyring record changes. Removing a slot makes its secret useless for this store
*from now on*; anyone who copied the store directory (with that slot) or saw the master key
before keeps access to what existed then — see SECURITY.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidInputError, PathNotFoundError
from .fsutil import fsync_dir
from .keys import Unlock, load_slots, new_slot, read_key_file, write_slot
from .settings import KdfParams
from .store import MemoryStore

__all__ = ["SlotInfo", "list_slots", "add_slot", "remove_slot", "change_passphrase"]


@dataclass(frozen=True)
class SlotInfo:
    """One key slot (no secret in it)."""

    slot_id: str
    kind: str
    kdf: dict[str, int] | None
    in_use: bool  #: the slot this store object was opened with

    def to_json(self) -> dict[str, Any]:
        return {"slot_id": self.slot_id, "kind": self.kind, "kdf": self.kdf, "in_use": self.in_use}


def _keys_dir(store: MemoryStore) -> Path:
    return store.root / "keys"


def list_slots(store: MemoryStore) -> list[SlotInfo]:
    """Every key slot of the store."""
    return [
        SlotInfo(
            s.slot_id.hex(),
            s.kind,
            None if s.kdf is None else s.kdf.model_dump(),
            s.slot_id == store.unlocked_slot,
        )
        for s in load_slots(_keys_dir(store))
    ]


def add_slot(
    store: MemoryStore,
    *,
    passphrase: str | None = None,
    key_file: str | os.PathLike[str] | None = None,
    kdf: KdfParams | None = None,
) -> SlotInfo:
    """Add a slot for a new passphrase (Argon2id, default parameters) or key file."""
    unlock = Unlock(passphrase=passphrase) if key_file is None else Unlock(raw_key=read_key_file(key_file))
    if passphrase is not None and key_file is not None:
        raise InvalidInputError("Error: Give a passphrase or a key file, not both.")
    slot = new_slot(store.store_id, unlock, store.master_keys(), kdf)
    with store.writing():
        write_slot(_keys_dir(store), slot, durable=True)
    return SlotInfo(slot.slot_id.hex(), slot.kind, None if slot.kdf is None else slot.kdf.model_dump(), False)


def remove_slot(store: MemoryStore, slot_id: str) -> None:
    """Remove a slot; the last slot can never be removed (the store would be lost)."""
    with store.writing():
        slots = load_slots(_keys_dir(store))
        match = [s for s in slots if s.slot_id.hex() == slot_id.strip().lower()]
        if not match:
            raise PathNotFoundError(f"Error: There is no key slot {slot_id!r}.")
        if len(slots) == 1:
            raise InvalidInputError("Error: This is the store's only key slot; add another before removing it.")
        path = _keys_dir(store) / f"{match[0].slot_id.hex()}.json"
        # Overwrite before unlinking, so the wrapped key does not linger in the freed blocks of
        # filesystems that write in place.
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.pwrite(fd, bytes(os.fstat(fd).st_size), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(path)
        fsync_dir(_keys_dir(store))


def change_passphrase(store: MemoryStore, new_passphrase: str, *, kdf: KdfParams | None = None) -> SlotInfo:
    """Replace the passphrase slot this store was opened with by one for ``new_passphrase``."""
    old = store.unlocked_slot
    if not any(s.slot_id == old.hex() and s.kind == "passphrase" for s in list_slots(store)):
        raise InvalidInputError("Error: The store was not opened with a passphrase; use `key add` instead.")
    added = add_slot(store, passphrase=new_passphrase, kdf=kdf)
    remove_slot(store, old.hex())
    return added
