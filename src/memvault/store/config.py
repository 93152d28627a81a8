"""The store's configuration file ``memvault.json``: format version, store id, MAC'd settings
(docs/format.md §1.1)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import crypto
from ..errors import IntegrityError, MemvaultError, StoreExistsError, StoreNotFoundError, read_failure
from ..fsutil import DIR_MODE, atomic_write, make_private_dir, read_bounded
from ..settings import StoreSettings

__all__ = [
    "STORE_FILE",
    "parse_config",
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "StoreConfig",
    "read_config",
    "write_config",
    "record_encoding",
    "chains_key_changes",
    "prepare_store_dir",
    "check_new_store_dir",
    "STORE_ENTRIES",
]

#: Marker and public configuration of a store directory.
STORE_FILE = "memvault.json"
#: The entries of a store directory that creating a store makes (``memvault.json`` last).
STORE_ENTRIES = ("keys", "keyring", "repo", "access", "lock", STORE_FILE)
#: Format version of new stores (docs/format.md): 2 writes compact binary node records, 3 also
#: records redactions and rotations in the keyring's MAC chain, each with a commit.
FORMAT_VERSION = 3
#: Format versions this code opens: 1 (JSON node records), 2 and 3; a store keeps being written
#: in its own version (so that older memvault releases keep reading it) until it is upgraded.
READABLE_VERSIONS = (1, 2, 3)
#: Largest ``memvault.json`` read (settings with a full allowlist and custom rules stay far below).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
_STORE_FORMAT = "memvault-store"
_CONFIG_MAC = b"memvault/v1/config"


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


def write_config(
    root: Path, store_id: bytes, settings: StoreSettings, version: int, config_key: bytes, *, durable: bool
) -> None:
    """Write ``memvault.json`` for format ``version`` and ``settings``, atomically.

    Raises:
        OSError: the file could not be written (the old one stays).
    """
    config: dict[str, Any] = {
        "format": _STORE_FORMAT,
        "version": version,
        "store_id": store_id.hex(),
        "settings": settings.model_dump(),
    }
    config["settings_mac"] = crypto.b64encode(crypto.mac(config_key, _config_message(store_id, config)))
    data = json.dumps(config, indent=2, sort_keys=True).encode() + b"\n"
    atomic_write(root / STORE_FILE, data, durable=durable)
