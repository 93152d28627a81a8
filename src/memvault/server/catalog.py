"""The records a server root's catalog holds: memory stores and API keys.

Each record is one JSON file of the catalog store (``/memories/stores/<id>.json``,
``/memories/apikeys/<id>.json``), so it is encrypted, versioned and changed by commits like any
memory; :class:`Registry` is the parsed view of one catalog commit. Names, descriptions, metadata
and key names are validated here with the limits of the memory-stores API.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import IntegrityError, InvalidInputError
from ..memories.model import rfc3339

__all__ = [
    "STORES_DIR",
    "KEYS_DIR",
    "StoreRecord",
    "ApiKeyRecord",
    "Registry",
    "check_name",
    "check_description",
    "merge_metadata",
    "record_bytes",
]

STORES_DIR = "/memories/stores"
KEYS_DIR = "/memories/apikeys"
_MAX_NAME = 255
_MAX_DESCRIPTION = 1024
_MAX_PAIRS = 16
_MAX_KEY = 64
_MAX_VALUE = 512
_ID = re.compile(r"[a-z]+_[0-9a-f]{32}")


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cs") for c in text)


def check_name(value: object, what: str = "name") -> str:
    """A store or key name: 1-255 characters, no control characters (InvalidInputError)."""
    if not isinstance(value, str) or not 1 <= len(value) <= _MAX_NAME or _has_control(value):
        raise InvalidInputError(f"Error: `{what}` must be 1 to {_MAX_NAME} characters without control characters.")
    return value


def check_description(value: object) -> str:
    """A store description: at most 1,024 characters ("" clears it)."""
    if not isinstance(value, str) or len(value) > _MAX_DESCRIPTION or "\x00" in value:
        raise InvalidInputError(f"Error: `description` must be text of at most {_MAX_DESCRIPTION} characters.")
    return value


def merge_metadata(old: dict[str, str], patch: object) -> dict[str, str]:
    """``old`` patched: a string value sets its key, ``None`` removes it, absent keys stay; the
    limits (16 pairs, keys 1-64 characters, values at most 512) apply to the result."""
    if not isinstance(patch, dict):
        raise InvalidInputError("Error: `metadata` must be an object of string values.")
    out = dict(old)
    for key, value in patch.items():
        if not isinstance(key, str) or not 1 <= len(key) <= _MAX_KEY or _has_control(key):
            raise InvalidInputError(f"Error: A `metadata` key must be 1 to {_MAX_KEY} characters.")
        if value is None:
            out.pop(key, None)
        elif isinstance(value, str) and len(value) <= _MAX_VALUE and not _has_control(value):
            out[key] = value
        else:
            raise InvalidInputError(f"Error: A `metadata` value must be a string of at most {_MAX_VALUE} characters.")
    if len(out) > _MAX_PAIRS:
        raise InvalidInputError(f"Error: `metadata` holds at most {_MAX_PAIRS} pairs.")
    return out


@dataclass(frozen=True)
class StoreRecord:
    """A memory store of the root. ``deleting``: its deletion began (it is gone for the API)."""

    id: str
    name: str
    description: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    archived_at: float | None = None
    deleting: bool = False

    def to_json(self) -> dict[str, Any]:
        """The ``memory_store`` object of the API."""
        return {
            "type": "memory_store",
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "metadata": dict(self.metadata),
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
            "archived_at": rfc3339(self.archived_at) if self.archived_at is not None else None,
        }

    def stored(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "archived_at": self.archived_at,
            "deleting": self.deleting,
        }


@dataclass(frozen=True)
class ApiKeyRecord:
    """An API key: only the HMAC of its secret is kept. ``stores``: the memory stores it may use
    (empty: all); ``admin``: it may also create, change, archive and delete stores and redact."""

    id: str
    name: str
    digest: str
    admin: bool = False
    stores: tuple[str, ...] = ()
    created_at: float = 0.0
    revoked_at: float | None = None

    def may_use(self, store_id: str) -> bool:
        """Whether the key may reach the memory store ``store_id``."""
        return not self.stores or store_id in self.stores

    def to_json(self) -> dict[str, Any]:
        """The key as ``apikey list --json`` shows it (never the digest or the secret)."""
        return {
            "id": self.id,
            "name": self.name,
            "admin": self.admin,
            "stores": list(self.stores),
            "created_at": rfc3339(self.created_at),
            "revoked_at": rfc3339(self.revoked_at) if self.revoked_at is not None else None,
        }

    def stored(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "digest": self.digest,
            "admin": self.admin,
            "stores": list(self.stores),
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


def record_bytes(record: StoreRecord | ApiKeyRecord) -> bytes:
    """A record as the catalog keeps it (canonical JSON)."""
    return json.dumps(record.stored(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _number(value: object) -> float:
    if type(value) not in (int, float):
        raise ValueError
    return float(value)  # type: ignore[arg-type]


def parse_store(data: bytes) -> StoreRecord:
    """A store record from its catalog file (IntegrityError if malformed)."""
    try:
        obj = json.loads(data)
        record = StoreRecord(
            id=obj["id"], name=check_name(obj["name"]), description=check_description(obj["description"]),
            metadata=merge_metadata({}, obj["metadata"]), created_at=_number(obj["created_at"]),
            updated_at=_number(obj["updated_at"]),
            archived_at=None if obj["archived_at"] is None else _number(obj["archived_at"]),
            deleting=obj["deleting"] is True,
        )  # fmt: skip
        if not _ID.fullmatch(record.id):
            raise ValueError
        return record
    except (ValueError, KeyError, TypeError, InvalidInputError):
        raise IntegrityError("The server's catalog holds a malformed memory store record.") from None


def parse_key(data: bytes) -> ApiKeyRecord:
    """An API key record from its catalog file (IntegrityError if malformed)."""
    try:
        obj = json.loads(data)
        stores = obj["stores"]
        if not isinstance(stores, list) or not all(isinstance(s, str) and _ID.fullmatch(s) for s in stores):
            raise ValueError
        record = ApiKeyRecord(
            id=obj["id"], name=check_name(obj["name"]), digest=obj["digest"], admin=obj["admin"] is True,
            stores=tuple(stores), created_at=_number(obj["created_at"]),
            revoked_at=None if obj["revoked_at"] is None else _number(obj["revoked_at"]),
        )  # fmt: skip
        if not _ID.fullmatch(record.id) or not isinstance(record.digest, str) or len(record.digest) != 64:
            raise ValueError
        return record
    except (ValueError, KeyError, TypeError, InvalidInputError):
        raise IntegrityError("The server's catalog holds a malformed API key record.") from None


@dataclass
class Registry:
    """Every record of one catalog commit, parsed."""

    commit_id: bytes = b""
    stores: dict[str, StoreRecord] = field(default_factory=dict)
    keys: dict[str, ApiKeyRecord] = field(default_factory=dict)
    by_digest: dict[str, ApiKeyRecord] = field(default_factory=dict)
    #: path -> (content digest, record): records are parsed again only when their file changed.
    parsed: dict[str, tuple[bytes, StoreRecord | ApiKeyRecord]] = field(default_factory=dict)

    #: The live stores in listing order, sorted once per registry (a registry is never changed
    #: after it is made; :meth:`with_store` makes a copy without it).
    _live: tuple[StoreRecord, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _positions: list[tuple[float, str]] = field(default_factory=list, init=False, repr=False, compare=False)

    def live_stores(self) -> tuple[StoreRecord, ...]:
        """The stores the API shows (not being deleted), oldest first (sorted once per registry)."""
        live = self._live
        if live is None:
            alive = (s for s in self.stores.values() if not s.deleting)
            live = tuple(sorted(alive, key=lambda s: (s.created_at, s.id)))
            self._positions = [(s.created_at, s.id) for s in live]
            self._live = live
        return live

    def live_after(self, position: tuple[float, str] | None) -> Iterator[StoreRecord]:
        """The live stores after ``position`` (``(created_at, id)`` of the last one a page showed;
        None: from the first), oldest first: found by bisection, so a page costs what it shows."""
        live = self.live_stores()
        start = 0 if position is None else bisect.bisect_right(self._positions, position)
        return itertools.islice(live, start, None)

    def with_store(self, record: StoreRecord) -> Registry:
        """A copy with ``record`` added or replaced (for answers right after a commit)."""
        return replace(self, stores={**self.stores, record.id: record})
