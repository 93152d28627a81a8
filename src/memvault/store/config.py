"""The store's configuration file ``memvault.json``: format version, store id, MAC'd settings,
and the settings' place in history: which file the head records as in force, the wait of an open
for a settings change in progress, the error when they disagree (docs/format.md §1.1)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import crypto
from ..errors import (
    IntegrityError,
    MemvaultError,
    SettingsMismatchError,
    StoreExistsError,
    StoreNotFoundError,
    read_failure,
)
from ..fsutil import DIR_MODE, atomic_write, make_private_dir, read_bounded
from ..keys.slots import Subkeys
from ..settings import StoreSettings
from .lock import StoreLock

__all__ = [
    "STORE_FILE",
    "parse_config",
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "journals_commits",
    "StoreConfig",
    "read_config",
    "authentic_config",
    "write_config",
    "encode_config",
    "config_key",
    "SettingsRecord",
    "settings_record",
    "settings_digest",
    "settings_mismatch",
    "settle",
    "SETTLE_ATTEMPTS",
    "SETTLE_SECONDS",
    "record_encoding",
    "chains_key_changes",
    "extends_object_log",
    "prepare_store_dir",
    "check_new_store_dir",
    "STORE_ENTRIES",
]

#: Marker and public configuration of a store directory.
STORE_FILE = "memvault.json"
#: The entries of a store directory that creating a store makes (``memvault.json`` last).
STORE_ENTRIES = ("keys", "keyring", "repo", "access", "lock", STORE_FILE)
#: Format version of new stores (docs/format.md): 2 writes compact binary node records, 3 also
#: records redactions and rotations in the keyring's MAC chain, each with a commit; 4 lets the log
#: of a store in object storage hold the commits of side branches (dreams); 5 makes a durable commit
#: of a store directory through the commit journal (one flush); 6 also files a new tree in the
#: fan-out layout its ``max_files`` calls for (docs/format.md §5.3: layouts 2 to 4).
FORMAT_VERSION = 6
#: Format versions this code opens: 1 (JSON node records) to 6; a store keeps being written in its
#: own version (so that older memvault releases keep reading it) until it is upgraded.
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
#: Largest ``memvault.json`` read (settings with a full allowlist and custom rules stay far below).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
_STORE_FORMAT = "memvault-store"
_CONFIG_MAC = b"memvault/v1/config"
_SETTINGS_DIGEST = b"memvault/v1/settings"
#: A store directory: how many times an open reads ``memvault.json`` and the head (each time after
#: waiting for the writer lock, which a settings change holds across its two writes) before it
#: reports that they disagree.
SETTLE_ATTEMPTS = 3
#: A store in object storage: how long, in all, an open waits for another host's settings change
#: to finish (its ``memvault.json`` and its ``config`` commit are two writes) before it reports.
SETTLE_SECONDS = 5.0


@dataclass(frozen=True)
class StoreConfig:
    """The content of ``memvault.json``; :meth:`verify` checks its settings MAC."""

    version: int
    store_id: bytes
    settings: StoreSettings
    settings_mac: bytes
    raw: dict[str, Any]

    def verify(self, config_key: bytes) -> None:
        """Check the settings MAC under the store's config key.

        Raises:
            IntegrityError: the MAC does not match (the file was changed or belongs elsewhere).
        """
        crypto.mac_verify(config_key, _config_message(self.store_id, self.raw), self.settings_mac)

    @property
    def settings_digest(self) -> bytes:
        """The digest of the settings in this file (:func:`settings_digest`)."""
        return settings_digest(self.raw["settings"])

    def bound_to(self, recorded: bytes) -> bool:
        """Whether this file holds the settings a head that records the settings digest
        ``recorded`` has in force (b"": the head records none, a commit of a release from before
        the record: any file is)."""
        return not recorded or crypto.consteq(recorded, self.settings_digest)

    def upgraded(
        self, root: Path, config_key: bytes, recorded: bytes, *, publish: Callable[[bytes, bytes], None] | None = None
    ) -> SettingsRecord | None:
        """For ``memvault upgrade``: rewrite this ``memvault.json`` of the store directory ``root``
        in format version :data:`FORMAT_VERSION` if it is older (the same settings), durably.

        Args:
            recorded: the settings digest the head records (b"": none yet).
            publish: called with the file's bytes and the new bytes before the file is rewritten
                (a store in object storage replaces the bucket's copy; what it raises stops the
                upgrade with nothing changed here).

        Returns:
            What the upgrade commit must record when the history records no settings yet (so that
            it does from now on): the file as written; else None (the settings did not change).

        Raises:
            SettingsMismatchError: the file does not hold the settings the head records.
            OSError: the file could not be written (the old one stays).
        """
        if not self.bound_to(recorded):
            raise settings_mismatch()
        record = self.record()
        if self.version < FORMAT_VERSION:
            data, record = encode_config(self.store_id, {**record.file, "version": FORMAT_VERSION}, config_key)
            if publish is not None:
                publish((root / STORE_FILE).read_bytes(), data)
            atomic_write(root / STORE_FILE, data, durable=True)
        return None if recorded else record

    def record(self) -> SettingsRecord:
        """What a commit that puts this file's settings in force records of them."""
        return SettingsRecord(self.settings_digest, {"version": self.version, "settings": self.raw["settings"]})


@dataclass(frozen=True)
class SettingsRecord:
    """What a commit that puts the settings of a ``memvault.json`` in force records (commit
    metadata ``settings`` and ``settings_file``, docs/format.md §1.1): their digest, and the
    file's ``{"version", "settings"}`` as written (from which it can be written again)."""

    digest: bytes
    file: dict[str, Any]


def settings_digest(settings: dict[str, Any]) -> bytes:
    """``SHA256("memvault/v1/settings" || canonical JSON of settings)``: the ``settings`` object of a
    ``memvault.json`` as read (its format version is not part of it, docs/format.md §1.1)."""
    return crypto.sha256(_SETTINGS_DIGEST + json.dumps(settings, sort_keys=True, separators=(",", ":")).encode())


def config_key(master_keys: dict[int, bytes], store_id: bytes) -> bytes:
    """``K_config``: the config subkey of the first epoch's master key (docs/format.md §2.2)."""
    first = min(master_keys)
    return Subkeys(master_keys[first], store_id, first).config


def settings_mismatch(where: str = STORE_FILE) -> SettingsMismatchError:
    """The error of a store whose settings file is not the one its history records as in force.

    Args:
        where: how to name the file (default ``memvault.json``; for object storage, the bucket's).
    """
    return SettingsMismatchError(
        f"The store's settings file {where} is not the one its history records as in force (its newest "
        "settings change): an older copy was put back, or a settings change stopped before its commit. "
        "Nothing was read or written. A key holder can write the recorded settings back with "
        "`memvault config repair` (then check them with `memvault config get`)."
    )


def settle(lock: Path | None, timeout: float) -> Iterator[int]:
    """The attempts of an open to find ``memvault.json`` and its head in agreement: yields 0, then
    the next attempt's number after waiting for a settings change in progress to finish, and
    raises once the attempts are spent.

    Args:
        lock: a store directory's writer lock file (waiting takes it once, at most ``timeout``
            seconds, :data:`SETTLE_ATTEMPTS` attempts in all); None for object storage (growing
            pauses, :data:`SETTLE_SECONDS` in all).

    Raises:
        SettingsMismatchError: every attempt disagreed (or the lock could not be taken).
    """
    yield 0
    if lock is not None:
        for attempt in range(1, SETTLE_ATTEMPTS):
            try:
                with StoreLock(lock, timeout).hold():
                    pass
            except MemvaultError:
                break
            yield attempt
        raise settings_mismatch()
    attempt, pause, deadline = 1, 0.05, time.monotonic() + SETTLE_SECONDS
    while time.monotonic() + pause < deadline:
        time.sleep(pause)
        pause *= 2
        yield attempt
        attempt += 1
    raise settings_mismatch(f"{STORE_FILE} in object storage")


def prepare_store_dir(root: Path) -> None:
    """Make ``root`` an empty directory private to its owner for a new store (missing parents
    are made 0700 too).

    Raises:
        StoreExistsError: ``root`` is a symbolic link, not a directory, a store, or not empty.
    """
    if check_new_store_dir(root):
        os.chmod(root, DIR_MODE)
    else:
        make_private_dir(root, parents=True)


def check_new_store_dir(root: Path) -> bool:
    """Check that a new store may be made at ``root``: absent (False) or an empty directory (True).

    Raises:
        StoreExistsError: ``root`` is a symbolic link, not a directory, a store, or not empty.
    """
    if root.is_symlink():
        raise StoreExistsError("Refusing to create a memory store at a symbolic link.")
    if not root.exists():
        return False
    if not root.is_dir():
        raise StoreExistsError("The store location exists and is not a directory.")
    if (root / STORE_FILE).exists():
        raise StoreExistsError("A memory store already exists at this location.")
    names = set(os.listdir(root))
    if names & set(STORE_ENTRIES) and all(n in STORE_ENTRIES or n.startswith(".") for n in names):
        raise StoreExistsError(
            "The store directory is not empty: it holds what looks like an interrupted store creation "
            f"(no {STORE_FILE}). If no store was ever made there, empty it and create the store again."
        )
    if names:
        raise StoreExistsError("The store directory is not empty.")
    return True


def record_encoding(version: int) -> int:
    """The node record and index shard encoding a store of format ``version`` writes (1 or 2)."""
    return 1 if version == 1 else 2


def extends_object_log(version: int) -> bool:
    """Whether the log of a store of format ``version`` in object storage may hold the commits of
    side branches and be compacted into checkpoints (version 4: a release that knows only older
    versions refuses such a store instead of taking those records for junk or finding no log)."""
    return version >= 4


def journals_commits(version: int) -> bool:
    """Whether a durable commit of a store directory of format ``version`` may go through the
    commit journal (version 5: a release that knows only older versions would not replay it after
    a power loss, and refuses the store instead)."""
    return version >= 5


def chains_key_changes(version: int) -> bool:
    """Whether a store of format ``version`` records key destruction and rotation in the keyring's
    MAC chain, each with a commit (version 3)."""
    return version >= 3


def _config_message(store_id: bytes, config: dict[str, Any]) -> bytes:
    body = json.dumps(
        {k: config[k] for k in ("format", "version", "store_id", "settings")}, sort_keys=True, separators=(",", ":")
    )
    return _CONFIG_MAC + store_id + body.encode()


def read_config(root: Path) -> StoreConfig:
    """Read ``memvault.json`` of the store directory ``root``, checked for shape and a readable
    version (the MAC is checked by :meth:`StoreConfig.verify`).

    Raises:
        StoreNotFoundError: there is no store at ``root``.
        IntegrityError: the file is damaged or of a format version this release cannot read.
        StorageError: the file could not be read (permission, I/O error).
    """
    try:
        config = json.loads(read_bounded(root / STORE_FILE, MAX_CONFIG_BYTES))
    except (FileNotFoundError, NotADirectoryError):
        raise StoreNotFoundError("No memory store exists at this location.") from None
    except OSError as err:  # permission, I/O error: not damage; a FIFO or a directory: damage
        raise read_failure(
            err,
            what="The store's configuration file (memvault.json)",
            damaged="The store's configuration file is damaged.",
        ) from None
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deep
        raise IntegrityError("The store's configuration file is damaged.") from None
    return _checked_config(config)


def authentic_config(root: Path, store_id: bytes, config_key: bytes) -> StoreConfig:
    """:func:`read_config`, then checked to be the store ``store_id``'s and authenticated.

    Raises:
        IntegrityError: damaged, another store's, or its MAC does not verify (and as :func:`read_config`).
    """
    config = read_config(root)
    if config.store_id != store_id:
        raise IntegrityError("The store's configuration file is damaged.")
    config.verify(config_key)
    return config


def parse_config(data: bytes) -> StoreConfig:
    """Parse the bytes of a ``memvault.json`` as :func:`read_config` does (the MAC unchecked).

    Raises:
        IntegrityError: damaged, or of a format version this release cannot read.
    """
    if len(data) > MAX_CONFIG_BYTES:
        raise IntegrityError("The store's configuration file is damaged.")
    try:
        config = json.loads(data)
    except (ValueError, RecursionError):
        raise IntegrityError("The store's configuration file is damaged.") from None
    return _checked_config(config)


def _checked_config(config: Any) -> StoreConfig:
    try:
        if not isinstance(config, dict):
            raise ValueError
        if set(config) != {"format", "version", "store_id", "settings", "settings_mac"}:
            raise ValueError
        version = config["version"]
        if config["format"] != _STORE_FORMAT or type(version) is not int or version not in READABLE_VERSIONS:
            raise IntegrityError("Unsupported memory store format.")
        store_id = bytes.fromhex(config["store_id"])
        if len(store_id) != 16:
            raise ValueError
        settings = StoreSettings(**config["settings"])
        settings_mac = crypto.b64decode(config["settings_mac"])
    except MemvaultError:
        raise
    except Exception:
        raise IntegrityError("The store's configuration file is damaged.") from None
    return StoreConfig(version, store_id, settings, settings_mac, config)


def encode_config(store_id: bytes, file: dict[str, Any], config_key: bytes) -> tuple[bytes, SettingsRecord]:
    """The bytes of ``memvault.json`` for ``file`` (``{"version", "settings"}``, the settings as
    JSON values), and what a commit records of it."""
    config: dict[str, Any] = {
        "format": _STORE_FORMAT,
        "version": file["version"],
        "store_id": store_id.hex(),
        "settings": file["settings"],
    }
    config["settings_mac"] = crypto.b64encode(crypto.mac(config_key, _config_message(store_id, config)))
    data = json.dumps(config, indent=2, sort_keys=True).encode() + b"\n"
    return data, SettingsRecord(
        settings_digest(file["settings"]), {"version": file["version"], "settings": file["settings"]}
    )


def settings_record(store_id: bytes, settings: StoreSettings, version: int, config_key: bytes) -> SettingsRecord:
    """What a commit records of the ``memvault.json`` :func:`write_config` writes for these arguments."""
    return encode_config(store_id, {"version": version, "settings": settings.model_dump()}, config_key)[1]


def write_config(
    root: Path, store_id: bytes, settings: StoreSettings, version: int, config_key: bytes, *, durable: bool
) -> SettingsRecord:
    """Write ``memvault.json`` for format ``version`` and ``settings``, atomically.

    Returns:
        What a commit that puts the file in force records of it.

    Raises:
        OSError: the file could not be written (the old one stays).
    """
    data, record = encode_config(store_id, {"version": version, "settings": settings.model_dump()}, config_key)
    atomic_write(root / STORE_FILE, data, durable=durable)
    return record
