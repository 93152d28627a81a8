"""The memory-stores API's objects as migrate uses them (plain values, no SDK types), the errors of
a call the API refused, and :class:`MemoryStoresApi`: the calls a pull or a push makes
(:class:`~memvault.transfer.migrate.client.MemoryStoresClient` makes them through the SDK; tests
may give anything with these methods)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ...errors import ExitStatus, MemvaultError

__all__ = [
    "View",
    "RemoteStore",
    "RemoteMemory",
    "RemoteVersion",
    "CallStats",
    "ApiRefusedError",
    "MemoryStoresApi",
    "ACTOR_ID_FIELDS",
    "actor_json",
    "actor_label",
    "clean_actor",
]

View = Literal["basic", "full"]
#: The id field of each actor type (an unknown type keeps its type only).
ACTOR_ID_FIELDS = {
    "api_actor": "api_key_id",
    "session_actor": "session_id",
    "user_actor": "user_id",
    "service_account_actor": "service_account_id",
}
_MAX_ID = 256


@dataclass(frozen=True)
class RemoteStore:
    """A memory store of the API: its id, name, metadata and whether it is archived."""

    id: str
    name: str
    metadata: dict[str, str] = field(default_factory=dict)
    archived: bool = False


@dataclass(frozen=True)
class RemoteMemory:
    """A memory at the API's head; ``content`` only when asked for (view ``full``)."""

    id: str
    path: str
    content_sha256: str
    memory_version_id: str
    updated_at: float
    content: str | None = None


@dataclass(frozen=True)
class RemoteVersion:
    """One version of one memory. ``redacted``: its content and path are gone (both None);
    a ``deleted`` version has no content either. ``actor`` is the ``created_by`` object (only
    its type and id), None when the API recorded none. ``created_at`` in seconds since the epoch,
    ``created_at_text`` as RFC 3339 UTC."""

    id: str
    memory_id: str
    operation: str
    created_at: float
    created_at_text: str
    actor: dict[str, str] | None
    path: str | None
    content: str | None
    content_sha256: str | None
    redacted: bool


@dataclass
class CallStats:
    """What the calls of one run cost: requests made, retries and the seconds waited before them."""

    requests: int = 0
    retries: int = 0
    waited: float = 0.0


class ApiRefusedError(MemvaultError):
    """The API answered a call with an error it will give again (a 4xx other than 408 and 429),
    or the retries ran out. ``status`` (0: no answer), ``type`` (the API's error type, "" if
    none), ``conflicting_memory_id``/``conflicting_path`` for a path conflict. The message names
    the call and the API's reason, never the API key or content."""

    exit_status = ExitStatus.ERROR

    def __init__(
        self, message: str, *, status: int, type_: str = "", conflicting_memory_id: str = "", conflicting_path: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.conflicting_memory_id = conflicting_memory_id
        self.conflicting_path = conflicting_path

    @property
    def reason(self) -> str:
        """The status and the API's error type, as listed in a summary (``409 conflict_error``)."""
        return f"{self.status} {self.type}".strip() if self.status else "no answer"


class MemoryStoresApi(Protocol):
    """The calls of a migration (ids are the API's; ``store`` a ``memstore_`` id). Each raises
    :class:`ApiRefusedError` when the API refuses, and :class:`~memvault.errors.ServiceError` when
    it cannot be reached or keeps failing."""

    stats: CallStats

    def retrieve_store(self, store: str) -> RemoteStore: ...

    def list_stores(self) -> list[RemoteStore]: ...

    def create_store(self, name: str, metadata: dict[str, str]) -> RemoteStore: ...

    def list_memories(self, store: str) -> list[RemoteMemory]: ...

    def retrieve_memory(self, store: str, memory: str) -> RemoteMemory | None: ...

    def list_versions(
        self, store: str, *, memory: str | None = None, limit: int | None = None
    ) -> list[RemoteVersion]: ...

    def retrieve_version(self, store: str, version: str) -> RemoteVersion | None: ...

    def create_memory(self, store: str, path: str, content: str) -> RemoteMemory: ...

    def update_memory(self, store: str, memory: str, content: str, expected_sha256: str) -> RemoteMemory: ...

    def delete_memory(self, store: str, memory: str, expected_sha256: str) -> None: ...


def actor_json(actor: dict[str, str] | None) -> str:
    """The actor as the compact JSON a pulled commit records (``null`` when unknown)."""
    return json.dumps(actor, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def actor_label(actor: dict[str, str] | None) -> tuple[str, str]:
    """``(actor, session)`` of the commit that imports a version by ``actor``: an API key, user or
    service account as ``api:<id>``, ``user:<id>``, ``service_account:<id>``; a session as
    ``session`` with its id as the commit's session; ``unknown`` when the API recorded none."""
    if not actor:
        return "unknown", ""
    kind = actor.get("type", "")
    ident = actor.get(ACTOR_ID_FIELDS.get(kind, ""), "")
    if kind == "session_actor":
        return "session", ident
    name = kind[: -len("_actor")] if kind.endswith("_actor") else kind or "unknown"
    return (f"{name}:{ident}" if ident else name), ""


def clean_actor(kind: object, ident: object) -> dict[str, str] | None:
    """An actor from the API's ``type`` and id, kept only if both are short strings."""
    if not isinstance(kind, str) or not kind or len(kind) > 64:
        return None
    out = {"type": kind}
    key = ACTOR_ID_FIELDS.get(kind)
    if key is not None and isinstance(ident, str) and ident and len(ident) <= _MAX_ID:
        out[key] = ident
    return out
