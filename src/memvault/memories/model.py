"""The objects of the memory-stores API and their JSON shapes (one owner for each shape).

Times are RFC 3339 in UTC with microseconds (``2026-12-05T22:44:49.123456Z``). A commit's actor
becomes an API actor by :func:`actor_of`: commits made through the API record ``via: api`` in
their (encrypted) metadata and name the API key's id as their actor; commits of the memory tool
through the server record ``via: tool`` and the session given; any other commit (the local
memory tool, the command line) is a ``session_actor`` when it names a session, else a
``user_actor`` named by its actor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, Literal, TypeVar

from ..format.records import CommitMeta

__all__ = [
    "API_ROOT",
    "VIA",
    "VIA_API",
    "VIA_TOOL",
    "Operation",
    "Actor",
    "Memory",
    "MemoryPrefix",
    "MemoryVersion",
    "Page",
    "actor_of",
    "rfc3339",
    "micros",
    "micros_of",
    "api_path",
]

#: The key of a commit's ``extra`` saying how the change arrived.
VIA = "via"
VIA_API = "api"
VIA_TOOL = "tool"
#: Where the memories of the API live in the store: API path ``/a/b`` is store path ``/memories/a/b``.
API_ROOT = "/memories"

Operation = Literal["created", "modified", "deleted"]
T = TypeVar("T")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def rfc3339(seconds: float) -> str:
    """``seconds`` since the epoch as an RFC 3339 UTC time with microseconds."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def micros(seconds: float) -> int:
    """``seconds`` since the epoch in whole microseconds, rounded as :func:`rfc3339` shows them
    (so a time read back from an answer selects exactly what it was read from)."""
    return (datetime.fromtimestamp(seconds, timezone.utc) - _EPOCH) // timedelta(microseconds=1)


def micros_of(when: datetime) -> int:
    """A time-zone-aware time in whole microseconds since the epoch."""
    return (when - _EPOCH) // timedelta(microseconds=1)


def api_path(store_path: str) -> str:
    """The API path of a store path below ``/memories`` (``/memories/a`` -> ``/a``)."""
    return store_path[len(API_ROOT) :]


@dataclass(frozen=True)
class Actor:
    """Who made a change: ``type`` is ``api_actor``, ``session_actor`` or ``user_actor``; ``id``
    the API key id, session id or user name."""

    type: Literal["api_actor", "session_actor", "user_actor"]
    id: str

    def to_json(self) -> dict[str, str]:
        key = {"api_actor": "api_key_id", "session_actor": "session_id", "user_actor": "user_id"}[self.type]
        return {"type": self.type, key: self.id}


def actor_of(meta: CommitMeta) -> Actor:
    """The API actor of a commit (see the module docstring)."""
    via = meta.extra.get(VIA)
    if via == VIA_API:
        return Actor("api_actor", meta.actor)
    if via == VIA_TOOL or meta.session:
        return Actor("session_actor", meta.session)
    return Actor("user_actor", meta.actor)


def _actor_of_info(info: dict[str, object]) -> Actor | None:
    """The actor a redaction's tombstone names (``actor``, ``via``), if any."""
    actor = info.get("actor")
    if not isinstance(actor, str):
        return None
    return Actor("api_actor", actor) if info.get(VIA) == VIA_API else Actor("user_actor", actor)


@dataclass(frozen=True)
class Memory:
    """A memory at the head: ``content`` is None unless asked for (``view=full``)."""

    id: str
    memory_store_id: str
    path: str
    content: str | None
    content_sha256: str
    content_size_bytes: int
    memory_version_id: str
    created_at: float
    updated_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "memory",
            "id": self.id,
            "memory_store_id": self.memory_store_id,
            "path": self.path,
            "content": self.content,
            "content_sha256": self.content_sha256,
            "content_size_bytes": self.content_size_bytes,
            "memory_version_id": self.memory_version_id,
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
        }


@dataclass(frozen=True)
class MemoryPrefix:
    """A directory a depth-limited listing rolled deeper memories into (``/a/b/``)."""

    path: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "memory_prefix", "path": self.path}


@dataclass(frozen=True)
class MemoryVersion:
    """One change of one memory. A redacted version keeps its id, operation, time and actor;
    its path, content, digest and size are None and ``redacted_at``/``redacted_by`` say when and
    by whom. A ``deleted`` version has no content, digest or size."""

    id: str
    memory_id: str
    memory_store_id: str
    operation: Operation
    created_at: float
    created_by: Actor
    path: str | None
    content: str | None
    content_sha256: str | None
    content_size_bytes: int | None
    redacted_at: float | None = None
    redacted_by: Actor | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "memory_version",
            "id": self.id,
            "memory_id": self.memory_id,
            "memory_store_id": self.memory_store_id,
            "operation": self.operation,
            "created_at": rfc3339(self.created_at),
            "created_by": self.created_by.to_json(),
            "path": self.path,
            "content": self.content,
            "content_sha256": self.content_sha256,
            "content_size_bytes": self.content_size_bytes,
            "redacted_at": rfc3339(self.redacted_at) if self.redacted_at is not None else None,
            "redacted_by": self.redacted_by.to_json() if self.redacted_by is not None else None,
        }


@dataclass(frozen=True)
class Page(Generic[T]):
    """A page of a listing and the cursor of the next (None at the end). The cursor is opaque
    to the library's callers (:class:`~memvault.memories.ops.Memories` makes and reads it)."""

    data: list[T] = field(default_factory=list)
    next_page: str | None = None


def redaction_of(info: dict[str, object] | None) -> tuple[float | None, Actor | None]:
    """``(redacted_at, redacted_by)`` from a destroyed key's tombstone info (None, None if unknown)."""
    if info is None:
        return None, None
    when = info.get("time")
    return (float(when) if isinstance(when, (int, float)) else None), _actor_of_info(info)
