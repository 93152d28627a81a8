"""The checks of :func:`~memvault.verify.verify` on keys: key slots, the keyring's records and
epochs, and the access-time file. Each reports through ``add(severity, code, message)``."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import IntegrityError, StorageError
from ..keys.keyring import KeyringScan
from ..keys.slots import read_slot_file, slot_file_names
from ..store import MemoryStore
from .report import Severity, printable

__all__ = ["check_access_times", "check_key_slots", "check_keys", "refresh_keyring", "scan_keyring"]

#: Reports one problem: ``add(severity, code, message)``.
Add = Callable[[Severity, str, str], None]


def check_access_times(store: MemoryStore, add: Add) -> None:
    """The access-time file exists and opens (``expire`` relies on it)."""
    if not store.access_times.recorded():
        add(
            "warning",
            "bad-access-times",
            "The access-time file 'access' is missing (removed, or a store older than the file); expire "
            "refuses to run without --assume-unread until a read recreates it.",
        )
        return
    try:
        digest = store.access_times.digest()
        current = digest is not None and store.is_recorded_access_file(digest)
    except (IntegrityError, StorageError):
        current = True  # reported below
    if not current:
        add(
            "warning",
            "bad-access-times",
            "The access-time file 'access' is not the one the keyring recorded last (an older copy put back?); "
            "expire refuses to run without --assume-unread until a read replaces it.",
        )
        return
    try:
        store.access_times.last_read()
    except StorageError as err:
        add("warning", "bad-access-times", f"{err} expire cannot run until it can.")
    except IntegrityError:
        add(
            "warning",
            "bad-access-times",
            "The access-time file 'access' is damaged; expire refuses to run until a read replaces it.",
        )


def check_key_slots(store: MemoryStore, add: Add) -> int:
    """Every key slot file parses; returns how many do (at least one must)."""
    keys_dir = store.root / "keys"
    try:
        names = slot_file_names(keys_dir)
    except IntegrityError:
        add("error", "bad-key-slot", "The key slot directory keys/ is missing or unreadable.")
        return 0
    except StorageError as err:
        add("error", "bad-key-slot", str(err))
        return 0
    good = 0
    for name in names:
        try:
            read_slot_file(keys_dir / name)
        except IntegrityError:
            add("error", "bad-key-slot", f"Key slot keys/{printable(name)} is malformed.")
            continue
        except StorageError as err:
            add("error", "bad-key-slot", str(err))
            continue
        good += 1
    if good == 0:
        add("error", "bad-key-slot", "The store has no usable key slot.")
    return good


def refresh_keyring(store: MemoryStore, add: Add) -> bool:
    """Read the keyring (framing, header, MAC chain); False, reported, if it does not parse."""
    try:
        store.keyring.refresh()
    except IntegrityError as err:
        reason = str(err) if str(err) != IntegrityError().message else "The store's keyring is damaged."
        add(
            "error",
            "bad-keyring",
            f"{reason} Its high-water records after the damage cannot be trusted, so freshness "
            "(rollback) was not checked.",
        )
        return False
    except (OSError, StorageError):
        add("error", "bad-keyring", "The store's keyring cannot be read; freshness was not checked.")
        return False
    return True


def scan_keyring(store: MemoryStore, keyring_ok: bool, add: Add) -> KeyringScan:
    """List the keyring's data key and commit records. When the keyring did not parse, the data
    key records after the damage are handed to the store's keyring (each is authenticated when
    used, as always) so that the versions they protect are still checked."""
    keyring = store.keyring
    scan = keyring.scan(parsed_only=keyring_ok)
    if scan.torn_bytes:
        add(
            "warning",
            "torn-keyring",
            f"The keyring ends in {scan.torn_bytes} bytes of a partial record (a crash during an append); "
            "the next write cuts them off.",
        )
    if not keyring_ok:
        keyring.adopt(scan.deks)
    return scan


def check_keys(
    store: MemoryStore,
    scan: KeyringScan,
    add: Add,
    *,
    bad_key: Callable[[bytes], None],
    orphans_known: bool,
    referenced: set[bytes],
) -> int:
    """Every data key record authenticates (else ``bad_key``); unreferenced ones (``referenced``:
    the keys of the versions on main and on its side branches) are orphans (when
    ``orphans_known``: the walks reached main's first commit and every side branch's fork
    commit). A rotation re-wraps every record under the new epoch, so an older-epoch record after
    a newest-epoch one was written by a process that did not know of the rotation (and the retired
    key reads it); older ones before any newest one are a rotation that did not finish
    re-wrapping. Returns how many records."""
    newest = max((epoch for epoch, _sealed in scan.deks.values()), default=0)
    seen_newest, unfinished = False, 0
    for dek_id, (epoch, _sealed) in scan.deks.items():  # file order
        seen_newest = seen_newest or epoch == newest
        if epoch < newest and seen_newest:
            add(
                "error",
                "stale-epoch-key",
                f"Data key {dek_id.hex()} is wrapped under key epoch {epoch}, which the rotation to epoch "
                f"{newest} retired: a process opened before the rotation wrote it, and the retired master key "
                "still reads it. Rotate again to re-wrap it.",
            )
        unfinished += epoch < newest and not seen_newest
    if unfinished:
        add(
            "warning",
            "rotation-unfinished",
            f"{unfinished} data key(s) are still wrapped under a retired key epoch: a key rotation did not "
            "finish re-wrapping them. Run `memvault key rotate` again.",
        )
    for dek_id in scan.deks:
        if store.keyring.is_destroyed(dek_id):
            add(
                "warning",
                "destroyed-key-present",
                f"The record of destroyed data key {dek_id.hex()} is still in the keyring (a redaction stopped "
                "before removing it, or it was copied back from an older keyring); memvault never uses it, and "
                "the next redaction or `memvault gc` removes it.",
            )
            continue
        try:
            store.keyring.dek(dek_id)
        except IntegrityError:
            bad_key(dek_id)
            continue
        if dek_id not in referenced and orphans_known:
            add(
                "warning",
                "orphan-key",
                f"Data key {dek_id.hex()} is used by no version on main or on a dream branch (left by an "
                "aborted or rolled-back commit).",
            )
    return len(scan.deks)
