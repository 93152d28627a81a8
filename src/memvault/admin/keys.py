"""Key slot administration: list, add and remove ways to unlock a store, change a passphrase.

Each key slot wraps the store's master key(s) under one secret (a passphrase through Argon2id,
or a raw 32-byte key file). Adding or removing a slot rewrites only that slot file: no blob,
commit or keyring record changes. Removing a slot makes its secret useless for this store
*from now on*; anyone who copied the store directory (with that slot) or saw the master key
before keeps access to what existed then — see SECURITY.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import crypto
from ..errors import InvalidInputError, PathNotFoundError, WrongKeyError
from ..fsutil import wipe_file
from ..keys.slots import (
    KeySlot,
    Unlock,
    check_new_passphrase,
    load_slots,
    new_slot,
    unlock_master_keys,
    write_slot,
)
from ..remote.keyslots import pull_slots
from ..settings import KdfParams
from ..store import MemoryStore
from ..store.config import chains_key_changes

__all__ = ["SlotInfo", "RotationResult", "list_slots", "add_slot", "remove_slot", "change_passphrase", "rotate"]


@dataclass(frozen=True)
class SlotInfo:
    """One key slot (no secret in it)."""

    slot_id: str
    kind: str
    kdf: dict[str, int] | None
    in_use: bool  #: the slot this store object was opened with
    label: str = ""  #: a name for people ("" for slots written before labels)
    created: int | None = None  #: creation time, seconds since the epoch (None: not recorded)
    provider: str = ""  #: the key provider's URI (kind "provider")

    def to_json(self) -> dict[str, Any]:
        return {
            "slot_id": self.slot_id,
            "kind": self.kind,
            "kdf": self.kdf,
            "in_use": self.in_use,
            "label": self.label,
            "created": self.created,
            "provider": self.provider or None,
        }


def _info(slot: KeySlot, in_use: bool) -> SlotInfo:
    kdf = None if slot.kdf is None else slot.kdf.model_dump()
    return SlotInfo(slot.slot_id.hex(), slot.kind, kdf, in_use, slot.label, slot.created, slot.provider)


def _slot_meta(store: MemoryStore, label: str) -> dict[str, Any]:
    """``label``/``created`` for a new slot: format 2 slots in format version 3 stores."""
    if not chains_key_changes(store.format_version):
        return {}
    return {"label": label, "created": int(time.time())}


def _keys_dir(store: MemoryStore) -> Path:
    return store.root / "keys"


def _publish_slot(store: MemoryStore, slot: KeySlot) -> None:
    """Write a new slot file (and, for a store in object storage, upload it)."""
    write_slot(_keys_dir(store), slot, durable=True)
    if store.remote is not None:
        path = _keys_dir(store) / f"{slot.slot_id.hex()}.json"
        store.remote.push_slot(slot.slot_id.hex(), path.read_bytes())


def _current_slots(store: MemoryStore) -> list[KeySlot]:
    """The store's slots as they are now (object storage: fetched again; caller holds the lock)."""
    if store.remote is not None:
        pull_slots(store.remote.objects, _keys_dir(store), durable=True)
    return load_slots(_keys_dir(store))


def list_slots(store: MemoryStore) -> list[SlotInfo]:
    """Every key slot of the store."""
    return [_info(s, s.slot_id == store.unlocked_slot) for s in load_slots(_keys_dir(store))]


def add_slot(
    store: MemoryStore,
    *,
    passphrase: str | None = None,
    key_file: str | os.PathLike[str] | None = None,
    kdf: KdfParams | None = None,
    allow_weak_passphrase: bool = False,
    label: str = "",
    key: str | None = None,
) -> SlotInfo:
    """Add a slot for a new passphrase (Argon2id, default parameters; at least 12 characters
    unless ``allow_weak_passphrase``), key file, or key provider (``key``: its URI; the provider
    wraps the slot's key, bound to this store and slot)."""
    if [passphrase, key_file, key].count(None) < 2:
        raise InvalidInputError("Error: Give one of a passphrase, a key file or a key provider, not several.")
    unlock = Unlock.of(passphrase, key_file, key)
    if passphrase is not None:
        check_new_passphrase(passphrase, allow_weak=allow_weak_passphrase)
    slot = new_slot(store.store_id, unlock, store.master_keys(), kdf, **_slot_meta(store, label))
    with store.writing():
        _publish_slot(store, slot)
    return _info(slot, False)


def remove_slot(store: MemoryStore, slot_id: str) -> None:
    """Remove a slot; the last slot can never be removed (the store would be lost)."""
    with store.writing():
        slots = _current_slots(store)
        match = [s for s in slots if s.slot_id.hex() == slot_id.strip().lower()]
        if not match:
            raise PathNotFoundError(f"Error: There is no key slot {slot_id!r}.")
        if len(slots) == 1:
            raise InvalidInputError("Error: This is the store's only key slot; add another before removing it.")
        _wipe_slot(store, match[0].slot_id.hex())


def _wipe_slot(store: MemoryStore, slot_id: str) -> None:
    if store.remote is not None:
        store.remote.push_slot(slot_id, None)
    wipe_file(_keys_dir(store) / f"{slot_id}.json")


def change_passphrase(
    store: MemoryStore, new_passphrase: str, *, kdf: KdfParams | None = None, allow_weak_passphrase: bool = False
) -> SlotInfo:
    """Replace the passphrase slot this store was opened with by one for ``new_passphrase``
    (Argon2id with the current default parameters unless ``kdf``; see :func:`add_slot`)."""
    old = store.unlocked_slot
    if not any(s.slot_id == old.hex() and s.kind == "passphrase" for s in list_slots(store)):
        raise InvalidInputError("Error: The store was not opened with a passphrase; use `key add` instead.")
    label = next((s.label for s in list_slots(store) if s.slot_id == old.hex()), "")
    added = add_slot(
        store, passphrase=new_passphrase, kdf=kdf, allow_weak_passphrase=allow_weak_passphrase, label=label
    )
    remove_slot(store, old.hex())
    store.unlocked_slot = bytes.fromhex(added.slot_id)
    return replace(added, in_use=True)


@dataclass(frozen=True)
class RotationResult:
    """A master-key rotation: the new epoch, the data keys re-wrapped, the slots replaced."""

    epoch: int
    rewrapped: int
    slot: SlotInfo
    removed_slots: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "rewrapped": self.rewrapped,
            "slot": self.slot.to_json(),
            "removed_slots": list(self.removed_slots),
        }


def rotate(
    store: MemoryStore,
    *,
    passphrase: str | None = None,
    key_file: str | os.PathLike[str] | None = None,
    key: str | None = None,
    drop_other_slots: bool = False,
    kdf: KdfParams | None = None,
    progress: Callable[[int, int], None] | None = None,
    actor: str = "operator",
    session: str = "",
) -> RotationResult:
    """Rotate the master key for future writes, and re-wrap every existing data key under it.

    The secret given (the one that opened the store) gets a new slot holding every epoch's
    master key; its old slot is removed. Other slots cannot be rewritten without their
    secrets, so they must be dropped explicitly (``drop_other_slots``) and added again.
    Order, so a crash at any step leaves an openable store: new slot, then old slots removed,
    then the keyring re-wrapped (one atomic file swap). Other processes that have the store
    open must open it again.
    """
    unlock = Unlock.of(passphrase, key_file, key)
    with store.writing():
        if store.remote is not None:  # its last step is a commit: refuse a log none can extend first
            store.remote.check_writable()
        slots = _current_slots(store)
        opened, _keys = unlock_master_keys(store.store_id, slots, unlock)  # proves the secret
        if opened.slot_id != store.unlocked_slot:
            raise WrongKeyError("Give the secret this store was opened with.")
        others = [s.slot_id.hex() for s in slots if s.slot_id != opened.slot_id]
        if others and not drop_other_slots:
            raise InvalidInputError(
                f"Error: {len(others)} other key slot(s) cannot be re-wrapped without their secrets; "
                "drop them (and add them again afterwards) to rotate."
            )
        master = store.master_keys()
        epoch = max(master) + 1
        master[epoch] = crypto.new_key()
        # today's default KDF, not the old slot's; the old slot's label
        slot = new_slot(store.store_id, unlock, master, kdf, **_slot_meta(store, opened.label))
        _publish_slot(store, slot)
        removed = tuple([opened.slot_id.hex(), *others])
        for slot_id in removed:
            _wipe_slot(store, slot_id)
        store.adopt_master_key(epoch, master[epoch])
        store.unlocked_slot = slot.slot_id
        rewrapped = store.keyring.rewrap(epoch, progress)
        if store.remote is not None:
            store.remote.push_rewrapped()
        store.record_rotation(actor=actor, session=session)
    return RotationResult(epoch, rewrapped, _info(slot, True), removed)
