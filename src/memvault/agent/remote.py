"""The memory tool over a memvault server: ``RemoteMemoryTool`` / ``AsyncRemoteMemoryTool``.

An agent worker that holds an API key of a memvault server (``memvault server apikey create``),
and no store key, gives Claude the same ``memory_20250818`` tool as :class:`memvault.MemoryTool`:
each command is one ``POST /v1/memory_stores/{id}/memvault/tool`` request, which the server runs
with ``protocol.run_command`` on the store exactly as the local tool runs it (one commit per
mutating command, whose actor is the API key's id and whose session is this tool's). Results and
error texts are the local tool's, byte for byte.

The requests go through the ``anthropic`` SDK's own client (``client.post``), so authentication
(``Authorization: Bearer``), the base URL's path prefix, timeouts and typed HTTP errors are the
SDK's; the SDK's own retries are off. This module retries only what cannot apply a command twice:
an answer that says nothing was done (429, 503; ``retry-after`` / ``retry-after-ms`` honoured), a
connection that could not be opened, and a ``view`` whose connection failed. A mutating command
whose outcome is unknown (a timeout, a connection that broke after the request went out, a 5xx)
is never sent again: the model is told it may or may not have been applied.

Failures that are not the tool's own errors (the server refused the key, no such store, the
server is down) reach the model as a ``ToolError`` naming the memory server and the reason, and
are logged at warning by type; ``clear_all_memory()`` raises :class:`~memvault.errors.ServiceError`
for the application instead. The API key is never logged nor put in an error.
"""

from __future__ import annotations

import logging
import os
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import anthropic
import anyio
import httpx2
from anthropic.lib.tools import (
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    BetaFunctionToolResultType,
    ToolError,
)
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from ..errors import CommandError, ServiceError

__all__ = [
    "RemoteMemoryTool",
    "AsyncRemoteMemoryTool",
    "SERVER_URL_ENV",
    "API_KEY_ENV",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_WAIT",
]

_log = logging.getLogger("memvault")

#: Where the server's base URL is read from when neither ``base_url`` nor ``client`` is given.
SERVER_URL_ENV = "MEMVAULT_SERVER_URL"
#: Where the API key is read from when neither ``api_key`` nor ``client`` is given.
API_KEY_ENV = "MEMVAULT_API_KEY"
#: Seconds one request may take (the server's writer waits up to 30 s for a busy store).
DEFAULT_TIMEOUT = 60.0
#: Requests sent again at most, after the first, when the answer says nothing was done.
DEFAULT_MAX_RETRIES = 3
#: Seconds spent waiting between tries at most, over all the retries of one command.
DEFAULT_MAX_RETRY_WAIT = 10.0

_SERVER = "The memory server"
_MAX_SESSION = 255
_MAX_MESSAGE = 500
#: Answers that say the server did nothing: it was rate limited or not ready.
_NOTHING_DONE = frozenset({429, 503})
_FIRST_BACKOFF = 0.25
_MAX_BACKOFF = 4.0
#: Said after a failure that may come after the command was applied.
_UNKNOWN = "The command may or may not have been applied: view the memory before trying again."


def _as_input(command: Any) -> object:
    """A command model (or dict) as the plain dict the server validates."""
    if isinstance(command, Mapping):
        return dict(command)
    dump = getattr(command, "to_dict", None) or getattr(command, "model_dump", None)
    return dump() if dump is not None else command


def _is_mutating(command: object) -> bool:
    return not (isinstance(command, Mapping) and command.get("command") == "view")


# -- what went wrong ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Failure:
    """A failure of the memory server, in the words the model and the application get.

    ``tool_text``: the ToolError's text. ``reason``: the ServiceError's reason (no final period).
    ``outcome_unknown``: the command may have been applied all the same."""

    tool_text: str
    reason: str
    outcome_unknown: bool


def without_secret(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` (a server that echoes the key must not put it in an error)."""
    return text.replace(secret, "[API key]") if secret else text


def error_envelope(body: object) -> tuple[str, str]:
    """The ``(type, message)`` of an API error body ``{"type": "error", "error": {...}}``, else
    ``("", "")``. The message is cut to a bounded length and kept to one printable line."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return "", ""
    kind, message = error.get("type"), error.get("message")
    kind = kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 64 else ""
    if not isinstance(message, str):
        return kind, ""
    message = "".join(c if c.isprintable() else " " for c in message[:_MAX_MESSAGE]).strip()
    return kind, message


def _status_failure(err: anthropic.APIStatusError, *, mutating: bool, secret: str | None) -> _Failure:
    status = err.status_code
    kind, message = error_envelope(err.body)
    label = f"{status} {kind}" if kind else f"HTTP {status}"
    verb = "refused the request" if status < 500 else "failed"
    reason = f"{verb} ({label})" + (f": {message.rstrip('.')}" if message else "")
    reason = without_secret(reason, secret)
    # A 5xx other than 503 may come after the command was applied (a proxy's 502 or 504 too).
    unknown = mutating and status >= 500 and status not in _NOTHING_DONE
    text = f"Error: {_SERVER} {reason}." + (f" {_UNKNOWN}" if unknown else "")
    return _Failure(text, reason, unknown)


def _sent_nothing(err: anthropic.APIConnectionError) -> bool:
    """Whether the connection could not even be opened (so the request never went out)."""
    return isinstance(err.__cause__, (httpx2.ConnectError, httpx2.ConnectTimeout))


def _describe(err: Exception, *, mutating: bool, secret: str | None) -> _Failure:
    """The failure ``err`` (raised by the SDK's ``post``) means, for a command that is
    ``mutating`` or not."""
    if isinstance(err, anthropic.APIStatusError):
        return _status_failure(err, mutating=mutating, secret=secret)
    if isinstance(err, anthropic.APIConnectionError) and _sent_nothing(err):
        return _Failure(f"Error: {_SERVER} could not be reached.", "could not be reached", False)
    if isinstance(err, anthropic.APITimeoutError):
        reason = "did not answer in time"
    elif isinstance(err, anthropic.APIConnectionError):
        reason = "dropped the connection"
    else:
        reason = "gave an answer that is not a tool result"
    text = f"Error: {_SERVER} {reason}." + (f" {_UNKNOWN}" if mutating else "")
    return _Failure(text, reason, mutating)


def _log_failure(err: Exception) -> None:
    """Log a failure by type and status only: no URL, key, message or content."""
    status = getattr(err, "status_code", None)
    if isinstance(status, int):
        _log.warning("memvault: the memory server answered HTTP %d (%s)", status, type(err).__name__)
    else:
        _log.warning("memvault: a request to the memory server failed (%s)", type(err).__name__)


# -- retries ------------------------------------------------------------------------------------------


def retry_after(err: anthropic.APIStatusError) -> float | None:
    """The wait the answer asks for (``retry-after-ms``, else ``retry-after`` in seconds), if any."""
    headers = err.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except ValueError:
            continue
        if 0 <= value < float("inf"):
            return value
    return None


@dataclass(frozen=True)
class _Retries:
    """How many times, and how long in all, a command may be tried again."""

    max_retries: int
    max_wait: float

    def delay(self, err: Exception, *, mutating: bool, tries: int, waited: float) -> float | None:
        """Seconds to wait before sending the request again after ``err``, or None: give up.
        ``tries``: retries made so far; ``waited``: seconds waited so far."""
        if tries >= self.max_retries:
            return None
        asked: float | None = None
        if isinstance(err, anthropic.APIStatusError):
            if err.status_code not in _NOTHING_DONE:
                return None
            asked = retry_after(err)
        elif isinstance(err, anthropic.APIConnectionError):
            if isinstance(err, anthropic.APITimeoutError) and not _sent_nothing(err):
                return None  # a slow server: trying again would only wait longer
            if mutating and not _sent_nothing(err):
                return None  # the request may have been applied
        else:
            return None
        if asked is None:
            asked = min(_FIRST_BACKOFF * 2**tries, _MAX_BACKOFF) * random.uniform(0.75, 1.0)  # noqa: S311 - jitter
        if waited + asked > self.max_wait:
            return None  # waiting longer than allowed: give up now rather than after the wait
        return asked


# -- the answer -------------------------------------------------------------------------------------


class _NotAToolResult(Exception):
    """A 2xx answer that is not ``{"type": "tool_result", "is_error": bool, "content": ...}``."""


def _content(answer: object) -> tuple[bool, BetaFunctionToolResultType]:
    """``(is_error, content)`` of the server's answer (_NotAToolResult if it is not one)."""
    if not isinstance(answer, Mapping) or answer.get("type") != "tool_result":
        raise _NotAToolResult
    is_error, content = answer.get("is_error"), answer.get("content")
    if not isinstance(is_error, bool):
        raise _NotAToolResult
    if isinstance(content, str):
        return is_error, content
    if isinstance(content, list) and all(isinstance(block, Mapping) for block in content):
        return is_error, cast(BetaFunctionToolResultType, content)
    raise _NotAToolResult


def _tool_result(answer: object, *, mutating: bool) -> BetaFunctionToolResultType:
    """The command's result, or ToolError with its error text (as the local tool raises it)."""
    try:
        is_error, content = _content(answer)
    except _NotAToolResult as err:
        _log_failure(err)
        raise ToolError(_describe(err, mutating=mutating, secret=None).tool_text) from None
    if is_error:
        raise ToolError(content)
    return content


def _cleared(answer: object) -> str:
    """What ``clear_all_memory`` returns for ``answer``; ServiceError for an error or a malformed one."""
    try:
        is_error, content = _content(answer)
    except _NotAToolResult as err:
        _log_failure(err)
        raise ServiceError(_SERVER, "clear the memory", "it gave an answer that is not a tool result",
                           outcome_unknown=True) from None  # fmt: skip
    if is_error or not isinstance(content, str):
        text = content if isinstance(content, str) else "an error"
        text = text[len("Error: ") :] if text.startswith("Error: ") else text
        raise ServiceError(_SERVER, "clear the memory", text.rstrip("."))
    return content


# -- construction -------------------------------------------------------------------------------------


def _custom_header_names() -> list[str]:
    """The header names ``ANTHROPIC_CUSTOM_HEADERS`` adds to every request of an SDK client (as the
    SDK reads it): meant for the Anthropic API, so a client built here leaves them out."""
    names = []
    for line in os.environ.get("ANTHROPIC_CUSTOM_HEADERS", "").split("\n"):
        name, colon, _ = line.partition(":")
        if colon and name.strip():
            names.append(name.strip())
    return names


def _settings(base_url: str | None, api_key: str | None) -> tuple[str, str]:
    base_url = base_url if base_url is not None else os.environ.get(SERVER_URL_ENV) or None
    api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
    if not base_url:
        raise ValueError(f"No memory server URL: pass base_url= or set {SERVER_URL_ENV}.")
    if not api_key:
        raise ValueError(f"No memory server API key: pass api_key= or set {API_KEY_ENV}.")
    return base_url, api_key


def client_options(base_url: str, api_key: str, timeout: float | None) -> dict[str, Any]:
    """Arguments of an SDK client built for the server at ``base_url`` (the memory server here, a
    memory-stores API for ``memvault migrate``): its URL and key only (explicit credentials: the SDK
    then reads no other ``ANTHROPIC_*`` credential), no SDK retries, and none of the custom headers
    of ``ANTHROPIC_CUSTOM_HEADERS``."""
    return {
        "base_url": base_url,
        "api_key": api_key,
        "max_retries": 0,
        "timeout": DEFAULT_TIMEOUT if timeout is None else timeout,
        "default_headers": {name: anthropic.omit for name in _custom_header_names()},
    }


def _session(session: str | None) -> str:
    """``session``, checked (the server takes 1 to 255 characters), or a new random id."""
    session = session if session is not None else uuid.uuid4().hex
    if not isinstance(session, str) or not 1 <= len(session) <= _MAX_SESSION:
        raise ValueError(f"session must be a string of 1 to {_MAX_SESSION} characters.")
    return session


class _Remote:
    """What both tools share: the request path, the options, the retry policy."""

    def __init__(self, memory_store_id: str, *, timeout: float | None, max_retries: int, max_retry_wait: float) -> None:
        if not isinstance(memory_store_id, str) or not memory_store_id:
            raise ValueError("memory_store_id must be a non-empty string.")
        # Quoted whole: an id cannot reach another route ("../", "?", "#").
        self.path = f"/v1/memory_stores/{quote(memory_store_id, safe='')}/memvault/tool"
        self.retries = _Retries(max(0, max_retries), max(0.0, max_retry_wait))
        self.options: anthropic.RequestOptions = {"max_retries": 0}
        if timeout is not None:
            self.options["timeout"] = timeout


def _secret_of(client: anthropic.Anthropic | anthropic.AsyncAnthropic) -> str | None:
    return client.api_key or client.auth_token or None


# -- the tools ----------------------------------------------------------------------------------------


class RemoteMemoryTool(BetaAbstractMemoryTool):
    """memvault on a memvault server as a synchronous ``memory_20250818`` tool.

    Each command is one request, and each mutating command one commit on the server, attributed
    to the API key's id and to ``session``.

    Args:
        memory_store_id: the memory store (``memstore_...``) the model works on.
        base_url: the server's URL (a path prefix is kept); default ``$MEMVAULT_SERVER_URL``.
        api_key: an API key of the server (``mvk_...``); default ``$MEMVAULT_API_KEY``.
        client: an ``anthropic.Anthropic`` client already pointed at the server, instead of
            ``base_url``/``api_key`` (its retries are not used; this tool's are).
        session: recorded verbatim with each commit (1 to 255 characters); default: a new random
            id per tool object. The attribute ``session`` may be changed between commands.
        cache_control: the prompt-caching breakpoint of the tool definition, passed to the SDK.
        timeout: seconds one request may take; default :data:`DEFAULT_TIMEOUT` (for a ``client``:
            the client's own).
        max_retries: requests sent again at most when nothing was done (429, 503, no connection).
        max_retry_wait: seconds waited between tries at most, in all, for one command.

    Raises:
        ValueError: no URL or no API key (neither given nor in the environment), both a ``client``
            and ``base_url``/``api_key``, an empty store id or a bad session.
    """

    def __init__(
        self,
        memory_store_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: anthropic.Anthropic | None = None,
        session: str | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        timeout: float | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._remote = _Remote(memory_store_id, timeout=timeout, max_retries=max_retries, max_retry_wait=max_retry_wait)
        self.memory_store_id = memory_store_id
        self.session = _session(session)
        if client is not None:
            if base_url is not None or api_key is not None:
                raise ValueError("Pass either client= or base_url=/api_key=, not both.")
            self._owns_client = False
        else:
            url, key = _settings(base_url, api_key)
            client = anthropic.Anthropic(**client_options(url, key, timeout))
            self._owns_client = True
        self.client = client

    def _post(self, body: dict[str, object], *, mutating: bool) -> object:
        """The server's answer to ``body``, retried as :class:`_Retries` allows."""
        tries, waited = 0, 0.0
        while True:
            try:
                return self.client.post(self._remote.path, cast_to=object, body=body, options=self._remote.options)
            except anthropic.APIError as err:
                delay = self._remote.retries.delay(err, mutating=mutating, tries=tries, waited=waited)
                if delay is None:
                    _log_failure(err)
                    raise
            except ValueError as err:  # a 2xx whose JSON is broken: nothing to retry
                _log_failure(err)
                raise
            _log.info("memvault: the memory server did nothing; trying again in %.2f s", delay)
            time.sleep(delay)
            tries, waited = tries + 1, waited + delay

    def _send(self, command: object, session: str | None = None) -> BetaFunctionToolResultType:
        mutating = _is_mutating(command)
        body = {"session": self.session if session is None else _session(session), "command": command}
        try:
            answer = self._post(body, mutating=mutating)
        except (anthropic.APIError, ValueError) as err:
            failure = _describe(err, mutating=mutating, secret=_secret_of(self.client))
            raise ToolError(failure.tool_text) from None
        return _tool_result(answer, mutating=mutating)

    def run(self, command: object, *, session: str | None = None) -> BetaFunctionToolResultType:
        """Run one memory command (the tool input as a dict) on the server, attributed to
        ``session`` (default: :attr:`session`); for callers that are not the SDK's tool runner
        (``memvault mcp --server``). Safe to call from several threads with their own sessions.

        Raises:
            CommandError: the command failed; its message is the tool's error text.
        """
        try:
            return self._send(command, session)
        except ToolError as err:
            raise CommandError(str(err)) from None

    def call(self, input: object) -> BetaFunctionToolResultType:
        return self._send(input)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> BetaFunctionToolResultType:
        return self._send(_as_input(command))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> BetaFunctionToolResultType:
        return self._send(_as_input(command))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> BetaFunctionToolResultType:
        return self._send(_as_input(command))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> BetaFunctionToolResultType:
        return self._send(_as_input(command))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> BetaFunctionToolResultType:
        return self._send(_as_input(command))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> BetaFunctionToolResultType:
        return self._send(_as_input(command))

    def clear_all_memory(self) -> str:
        """Delete everything under ``/memories`` in one ``clear`` commit on the server (none when it
        is empty), as :meth:`memvault.MemoryTool.clear_all_memory` does. Returns ``"All memory
        cleared"``.

        Raises:
            ServiceError: the server refused or failed (the reason, never the key), or could not be
                reached; ``outcome_unknown`` when the memory may have been cleared all the same.
        """
        try:
            answer = self._post({"session": self.session, "clear_all_memory": True}, mutating=True)
        except (anthropic.APIError, ValueError) as err:
            failure = _describe(err, mutating=True, secret=_secret_of(self.client))
            raise ServiceError(_SERVER, "clear the memory", failure.reason,
                               outcome_unknown=failure.outcome_unknown) from None  # fmt: skip
        return _cleared(answer)

    def close(self) -> None:
        """Close the HTTP client if this tool made it (a ``client`` given stays open)."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> RemoteMemoryTool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncRemoteMemoryTool(BetaAsyncAbstractMemoryTool):
    """memvault on a memvault server as an asynchronous ``memory_20250818`` tool.

    Arguments as for :class:`RemoteMemoryTool`; ``client`` is an ``anthropic.AsyncAnthropic``.
    """

    def __init__(
        self,
        memory_store_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        session: str | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        timeout: float | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._remote = _Remote(memory_store_id, timeout=timeout, max_retries=max_retries, max_retry_wait=max_retry_wait)
        self.memory_store_id = memory_store_id
        self.session = _session(session)
        if client is not None:
            if base_url is not None or api_key is not None:
                raise ValueError("Pass either client= or base_url=/api_key=, not both.")
            self._owns_client = False
        else:
            url, key = _settings(base_url, api_key)
            client = anthropic.AsyncAnthropic(**client_options(url, key, timeout))
            self._owns_client = True
        self.client = client

    async def _post(self, body: dict[str, object], *, mutating: bool) -> object:
        """As :meth:`RemoteMemoryTool._post`, without blocking the event loop."""
        tries, waited = 0, 0.0
        while True:
            try:
                return await self.client.post(self._remote.path, cast_to=object, body=body,
                                              options=self._remote.options)  # fmt: skip
            except anthropic.APIError as err:
                delay = self._remote.retries.delay(err, mutating=mutating, tries=tries, waited=waited)
                if delay is None:
                    _log_failure(err)
                    raise
            except ValueError as err:
                _log_failure(err)
                raise
            _log.info("memvault: the memory server did nothing; trying again in %.2f s", delay)
            await anyio.sleep(delay)
            tries, waited = tries + 1, waited + delay

    async def _send(self, command: object) -> BetaFunctionToolResultType:
        mutating = _is_mutating(command)
        try:
            answer = await self._post({"session": self.session, "command": command}, mutating=mutating)
        except (anthropic.APIError, ValueError) as err:
            failure = _describe(err, mutating=mutating, secret=_secret_of(self.client))
            raise ToolError(failure.tool_text) from None
        return _tool_result(answer, mutating=mutating)

    async def call(self, input: object) -> BetaFunctionToolResultType:
        return await self._send(input)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> BetaFunctionToolResultType:
        return await self._send(_as_input(command))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> BetaFunctionToolResultType:
        return await self._send(_as_input(command))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> BetaFunctionToolResultType:
        return await self._send(_as_input(command))

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> BetaFunctionToolResultType:
        return await self._send(_as_input(command))

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> BetaFunctionToolResultType:
        return await self._send(_as_input(command))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> BetaFunctionToolResultType:
        return await self._send(_as_input(command))

    async def clear_all_memory(self) -> str:
        """As :meth:`RemoteMemoryTool.clear_all_memory`."""
        try:
            answer = await self._post({"session": self.session, "clear_all_memory": True}, mutating=True)
        except (anthropic.APIError, ValueError) as err:
            failure = _describe(err, mutating=True, secret=_secret_of(self.client))
            raise ServiceError(_SERVER, "clear the memory", failure.reason,
                               outcome_unknown=failure.outcome_unknown) from None  # fmt: skip
        return _cleared(answer)

    async def aclose(self) -> None:
        """Close the HTTP client if this tool made it (a ``client`` given stays open)."""
        if self._owns_client:
            await self.client.close()

    async def __aenter__(self) -> AsyncRemoteMemoryTool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
