""":class:`MemoryStoresClient`: the calls of a migration through the ``anthropic`` SDK's
``client.beta.memory_stores``, against any API of that shape (a base URL of your choosing).

The SDK client is built as :mod:`memvault.agent.remote` builds its own (``client_options``): the
URL and key given, so no other ``ANTHROPIC_*`` credential is read, and none of the custom headers
of ``ANTHROPIC_CUSTOM_HEADERS`` are sent. The SDK's retries are off; this module retries, so the
count and the waits are its own and reach the summary (:class:`~.model.CallStats`):

- an answer of 408, 429 or 5xx, and a connection that failed or timed out, are tried again, after
  the wait the answer asks for (``retry-after-ms``, else ``retry-after``) or an exponential
  backoff with jitter; every call of a migration may be sent twice without harm (a write carries
  a ``content_sha256`` precondition, a create meets its own earlier success as a path conflict);
- any other error answer is :class:`~.model.ApiRefusedError` at once; retries that run out are
  :class:`~memvault.errors.ServiceError`.

Errors and log lines name the call, the HTTP status and the API's error type and message (bounded,
printable, with the key cut out if a server echoed it), never the key, the URL or content.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import anthropic

from ...agent.remote import client_options, error_envelope, retry_after, without_secret
from ...errors import ServiceError
from .model import (
    ACTOR_ID_FIELDS,
    ApiRefusedError,
    CallStats,
    RemoteMemory,
    RemoteStore,
    RemoteVersion,
    clean_actor,
)
from .state import parse_time, rfc3339

__all__ = ["MemoryStoresClient", "DEFAULT_TIMEOUT", "DEFAULT_MAX_RETRIES", "DEFAULT_MAX_WAIT"]

_log = logging.getLogger("memvault")
T = TypeVar("T")

#: Seconds one request may take.
DEFAULT_TIMEOUT = 60.0
#: Times one call is sent again at most.
DEFAULT_MAX_RETRIES = 6
#: Seconds waited before the retries of one call, in all, at most.
DEFAULT_MAX_WAIT = 120.0
_SERVICE = "The memory-stores API"
_FIRST_BACKOFF = 0.5
_MAX_BACKOFF = 16.0
#: A listing that goes on longer than this is a server looping on its cursor.
_MAX_PAGES = 100_000
#: Statuses tried again: a timeout, a rate limit, a server error.
_RETRIED = frozenset({408, 429})


class _Malformed(Exception):
    """An answer that is not the object asked for."""


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise _Malformed(what)
    return value


def _opt_str(value: object, what: str) -> str | None:
    return None if value is None else _str(value, what)


def _seconds(value: object) -> tuple[float, str]:
    """A time the SDK parsed (a datetime) or left as text, as seconds and RFC 3339 UTC."""
    if isinstance(value, datetime):
        seconds = value.timestamp()
    elif isinstance(value, str):
        try:
            seconds = parse_time(value)
        except ValueError:
            raise _Malformed("time") from None
    else:
        raise _Malformed("time")
    return seconds, rfc3339(seconds)


def _actor(value: object) -> dict[str, str] | None:
    if value is None:
        return None
    kind = getattr(value, "type", None)
    field = ACTOR_ID_FIELDS.get(kind) if isinstance(kind, str) else None
    return clean_actor(kind, getattr(value, field, None) if field else None)


def _store(obj: Any) -> RemoteStore:
    metadata = getattr(obj, "metadata", None) or {}
    if not isinstance(metadata, dict):
        metadata = {}
    clean = {k: v for k, v in metadata.items() if isinstance(k, str) and isinstance(v, str)}
    return RemoteStore(_str(obj.id, "id"), _str(getattr(obj, "name", ""), "name"), clean,
                       getattr(obj, "archived_at", None) is not None)  # fmt: skip


def _memory(obj: Any) -> RemoteMemory:
    updated, _ = _seconds(getattr(obj, "updated_at", None))
    return RemoteMemory(
        _str(obj.id, "id"), _str(obj.path, "path"), _str(obj.content_sha256, "content_sha256"),
        _str(obj.memory_version_id, "memory_version_id"), updated, _opt_str(getattr(obj, "content", None), "content"),
    )  # fmt: skip


def _version(obj: Any) -> RemoteVersion:
    at, text = _seconds(getattr(obj, "created_at", None))
    redacted = getattr(obj, "redacted_at", None) is not None
    return RemoteVersion(
        _str(obj.id, "id"), _str(obj.memory_id, "memory_id"), _str(obj.operation, "operation"), at, text,
        _actor(getattr(obj, "created_by", None)), _opt_str(getattr(obj, "path", None), "path"),
        _opt_str(getattr(obj, "content", None), "content"),
        _opt_str(getattr(obj, "content_sha256", None), "content_sha256"), redacted,
    )  # fmt: skip


class MemoryStoresClient:
    """The calls of a migration against the memory-stores API at ``base_url``.

    Args:
        base_url: the API's URL (a path prefix is kept), e.g. ``https://api.anthropic.com``.
        api_key: its API key (sent as ``Authorization: Bearer``; never logged nor in an error).
        timeout: seconds one request may take.
        max_retries: times one call is sent again at most.
        max_wait: seconds waited before the retries of one call, in all, at most.
        sleep: how to wait (tests give their own).

    Raises:
        ValueError: an empty URL or key.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_wait: float = DEFAULT_MAX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url:
            raise ValueError("No API URL given.")
        if not api_key:
            raise ValueError("No API key given.")
        self._secret = api_key
        self._sdk = anthropic.Anthropic(**client_options(base_url, api_key, timeout))
        self._api = self._sdk.beta.memory_stores
        self._max_retries = max(0, max_retries)
        self._max_wait = max(0.0, max_wait)
        self._sleep = sleep
        self.stats = CallStats()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._sdk.close()

    def __enter__(self) -> MemoryStoresClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStoresClient({str(self._sdk.base_url)!r})"

    # -- calling -----------------------------------------------------------------------------------

    def _refused(self, action: str, err: anthropic.APIStatusError) -> ApiRefusedError:
        kind, message = error_envelope(err.body)
        error = err.body.get("error") if isinstance(err.body, dict) else None
        fields = error if isinstance(error, dict) else {}
        conflicting = fields.get("conflicting_memory_id")
        conflicting_path = fields.get("conflicting_path")
        label = f"{err.status_code} {kind}" if kind else f"HTTP {err.status_code}"
        text = f"Error: {_SERVICE} refused to {action} ({label})" + (f": {message.rstrip('.')}" if message else "")
        return ApiRefusedError(
            without_secret(text, self._secret) + ".", status=err.status_code, type_=kind,
            conflicting_memory_id=conflicting if isinstance(conflicting, str) else "",
            conflicting_path=conflicting_path if isinstance(conflicting_path, str) else "",
        )  # fmt: skip

    def _call(self, action: str, fn: Callable[[], T]) -> T:
        """``fn()`` (one SDK call), tried again as the module docstring says."""
        tries, waited = 0, 0.0
        while True:
            self.stats.requests += 1
            asked: float | None = None
            try:
                return fn()
            except anthropic.APIStatusError as err:
                if err.status_code not in _RETRIED and err.status_code < 500:
                    raise self._refused(action, err) from None
                asked = retry_after(err)
                reason = f"HTTP {err.status_code}"
                _log.info("memvault: the memory-stores API answered HTTP %d to %s", err.status_code, action)
            except anthropic.APIConnectionError as err:
                reason = "no answer in time" if isinstance(err, anthropic.APITimeoutError) else "could not be reached"
                _log.info("memvault: the memory-stores API %s (%s)", reason, action)
            except (_Malformed, ValueError, AttributeError, TypeError):
                raise ServiceError(_SERVICE, action, "it gave an answer of another shape") from None
            backoff = min(_FIRST_BACKOFF * 2**tries, _MAX_BACKOFF) * random.uniform(0.75, 1.0)  # noqa: S311 - jitter
            delay = asked if asked is not None else backoff
            if tries >= self._max_retries or waited + delay > self._max_wait:
                raise ServiceError(_SERVICE, action, f"{reason}, {tries} retr{'y' if tries == 1 else 'ies'} made")
            self._sleep(delay)
            tries, waited = tries + 1, waited + delay
            self.stats.retries += 1
            self.stats.waited += delay

    def _pages(self, action: str, fetch: Callable[[str | None], Any]) -> list[Any]:
        """Every item of a listing, a page (one call) at a time."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = self._call(action, lambda at=cursor: fetch(at))  # type: ignore[misc]
            items.extend(page.data or [])
            following = page.next_page
            if not following:
                return items
            if not isinstance(following, str) or following == cursor:
                raise ServiceError(_SERVICE, action, "its page cursor does not move on")
            cursor = following
        raise ServiceError(_SERVICE, action, "its listing does not end")

    def _convert(self, action: str, convert: Callable[[Any], T], obj: Any) -> T:
        try:
            return convert(obj)
        except (_Malformed, AttributeError, TypeError, ValueError):
            raise ServiceError(_SERVICE, action, "it gave an answer of another shape") from None

    # -- stores ------------------------------------------------------------------------------------

    def retrieve_store(self, store: str) -> RemoteStore:
        """The memory store ``store`` (ApiRefusedError 404 if there is none)."""
        action = "read the memory store"
        return self._convert(action, _store, self._call(action, lambda: self._api.retrieve(store)))

    def list_stores(self) -> list[RemoteStore]:
        """Every memory store the key sees (archived ones left out)."""
        action = "list the memory stores"
        found = self._pages(action, lambda page: self._api.list(limit=100, page=page or anthropic.omit))
        return [self._convert(action, _store, s) for s in found]

    def create_store(self, name: str, metadata: dict[str, str]) -> RemoteStore:
        """A new memory store named ``name`` with ``metadata``."""
        action = "create a memory store"
        return self._convert(action, _store, self._call(action, lambda: self._api.create(name=name, metadata=metadata)))

    # -- memories ----------------------------------------------------------------------------------

    def list_memories(self, store: str) -> list[RemoteMemory]:
        """Every memory of ``store`` (view basic: digests, no content), in path order."""
        action = "list the memories"
        found = self._pages(action, lambda page: self._api.memories.list(
            store, limit=100, view="basic", page=page or anthropic.omit))  # fmt: skip
        return [self._convert(action, _memory, m) for m in found if getattr(m, "type", "memory") == "memory"]

    def retrieve_memory(self, store: str, memory: str) -> RemoteMemory | None:
        """The memory ``memory`` with its content, or None if there is none (404)."""
        action = "read a memory"
        try:
            found = self._call(action, lambda: self._api.memories.retrieve(memory, memory_store_id=store, view="full"))
        except ApiRefusedError as err:
            if err.status == 404:
                return None
            raise
        return self._convert(action, _memory, found)

    def create_memory(self, store: str, path: str, content: str) -> RemoteMemory:
        """A new memory at ``path``."""
        action = "create a memory"
        found = self._call(action, lambda: self._api.memories.create(store, path=path, content=content, view="basic"))
        return self._convert(action, _memory, found)

    def update_memory(self, store: str, memory: str, content: str, expected_sha256: str) -> RemoteMemory:
        """Replace the content of ``memory`` if it still is the content whose digest is
        ``expected_sha256`` (ApiRefusedError 409 ``memory_precondition_failed_error`` if not)."""
        action = "update a memory"
        precondition: Any = {"type": "content_sha256", "content_sha256": expected_sha256}
        found = self._call(action, lambda: self._api.memories.update(
            memory, memory_store_id=store, content=content, precondition=precondition, view="basic"))  # fmt: skip
        return self._convert(action, _memory, found)

    def delete_memory(self, store: str, memory: str, expected_sha256: str) -> None:
        """Delete ``memory`` if its content still has digest ``expected_sha256``."""
        action = "delete a memory"
        self._call(action, lambda: self._api.memories.delete(
            memory, memory_store_id=store, expected_content_sha256=expected_sha256))  # fmt: skip

    # -- versions ----------------------------------------------------------------------------------

    def list_versions(self, store: str, *, memory: str | None = None, limit: int | None = None) -> list[RemoteVersion]:
        """The versions of ``store`` (of one ``memory``), newest first, with their content (view
        full, 20 a page); only the first ``limit`` when given."""
        action = "list the memory versions"
        memory_id = memory if memory is not None else anthropic.omit
        if limit is not None:
            first = self._call(action, lambda: self._api.memory_versions.list(
                store, view="full", limit=min(limit, 20), memory_id=memory_id))  # fmt: skip
            found = list(first.data or [])[:limit]
        else:
            found = self._pages(action, lambda page: self._api.memory_versions.list(
                store, view="full", limit=20, memory_id=memory_id, page=page or anthropic.omit))  # fmt: skip
        return [self._convert(action, _version, v) for v in found]

    def retrieve_version(self, store: str, version: str) -> RemoteVersion | None:
        """One version with its content, or None if there is none (404)."""
        action = "read a memory version"
        try:
            found = self._call(action, lambda: self._api.memory_versions.retrieve(
                version, memory_store_id=store, view="full"))  # fmt: skip
        except ApiRefusedError as err:
            if err.status == 404:
                return None
            raise
        return self._convert(action, _version, found)
