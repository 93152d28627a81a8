"""A scripted, in-process fake of the Anthropic Messages API for SDK integration tests.

The real API is not reachable from the test environment, so the SDK is pointed at an
``httpx2.MockTransport`` (this SDK release is built on ``httpx2``, and its client constructor
refuses plain ``httpx`` objects). Every ``POST /v1/messages`` is answered with the next scripted
assistant turn, either as one JSON body or, when the request has ``"stream": true``, as the
server-sent events the real API emits. Every request is recorded so a test can assert on exactly
what the SDK put on the wire (tool results, tool definitions, ``thread`` fields, beta headers).

Anything unexpected is answered with an error response whose message says what went wrong, and
the client built by :func:`sync_client` / :func:`async_client` does not retry, so a test fails at
once and with that message instead of hanging in the SDK's backoff.

The SDK's tool runner threads conversations by default (``thread: {"type": "create"}`` on the
first request, then ``{"type": "continue", "previous_message_id": <last reply id>}`` with only the
new messages and without ``tools``/``system``). The fake checks that continuity, so a runner that
skipped or repeated a reply is caught, and it never needs to reconstruct the conversation: the
tool results of a turn are always in the last user message of the request that follows it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import anthropic
import httpx2

__all__ = [
    "ContentBlock",
    "Turn",
    "ScriptedMessagesAPI",
    "tool_results",
    "last_user_message",
    "sync_client",
    "async_client",
]

ContentBlock = dict[str, Any]
Turn = list[ContentBlock]
Script = Sequence[Sequence[Mapping[str, Any]]]

MESSAGES_PATH = "/v1/messages"
BAD_REQUEST = "invalid_request_error"
DEFAULT_MODEL = "claude-sonnet-4-6"


class ScriptedMessagesAPI:
    """Answers each ``POST /v1/messages`` with the next assistant turn of ``script``.

    ``script`` is a list of assistant turns, each a list of content blocks as the API returns them,
    e.g. ``{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": {...}}`` or
    ``{"type": "text", "text": "..."}``. A turn with a ``tool_use`` block stops with
    ``stop_reason == "tool_use"``, any other with ``"end_turn"``.

    After a run, ``requests`` holds every request body (parsed JSON) in order, ``request_headers``
    the matching headers, and ``replies`` the message objects that were served.
    """

    def __init__(self, script: Script, *, check_threading: bool = True) -> None:
        self._script: list[Turn] = [[dict(block) for block in turn] for turn in script]
        for index, turn in enumerate(self._script):
            _validate_turn(index, turn)
        self._check_threading = check_threading
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.replies: list[dict[str, Any]] = []
        self.errors: list[str] = []

    # -- public helpers ---------------------------------------------------------------------------

    @property
    def exhausted(self) -> bool:
        """Whether every scripted turn has been served."""
        return len(self.replies) == len(self._script)

    def transport(self) -> httpx2.MockTransport:
        """A transport for a sync ``httpx2.Client``."""
        return httpx2.MockTransport(self.handle)

    def async_transport(self) -> httpx2.MockTransport:
        """A transport for an ``httpx2.AsyncClient`` (the handler itself never blocks)."""

        async def handle_async(request: httpx2.Request) -> httpx2.Response:
            return self.handle(request)

        return httpx2.MockTransport(handle_async)

    def tool_results_of(self, request_index: int) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the last user message of request number ``request_index``."""
        return tool_results(self.requests[request_index])

    # -- request handling -------------------------------------------------------------------------

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or request.url.path != MESSAGES_PATH:
            return self._error(404, "not_found_error", f"no route for {request.method} {request.url.path}")
        try:
            body = json.loads(request.content or b"null")
        except json.JSONDecodeError as exc:
            return self._error(400, BAD_REQUEST, f"request body is not JSON: {exc}")
        if not isinstance(body, dict):
            return self._error(400, BAD_REQUEST, "request body is not a JSON object")

        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        index = len(self.requests) - 1

        problem = self._check_request(body)
        if problem is not None:
            return self._error(400, BAD_REQUEST, f"request #{index}: {problem}")

        turn_index = len(self.replies)
        if turn_index >= len(self._script):
            return self._error(
                500,
                "api_error",
                f"request #{index} asked for assistant turn #{turn_index}, "
                f"but the script has only {len(self._script)} turn(s); "
                "the runner kept going after the last one",
            )

        message = self._message(turn_index, model=str(body.get("model", DEFAULT_MODEL)))
        self.replies.append(message)
        headers = {"request-id": f"req_fake_{index:03d}"}
        if body.get("stream") is True:
            return httpx2.Response(
                200,
                headers={**headers, "content-type": "text/event-stream"},
                content=b"".join(_sse_events(message)),
            )
        return httpx2.Response(200, headers=headers, json=message)

    def _check_request(self, body: dict[str, Any]) -> str | None:
        for field in ("model", "max_tokens", "messages"):
            if field not in body:
                return f"missing required field {field!r}"
        messages = body["messages"]
        if not isinstance(messages, list):
            return "'messages' is not a list"
        if not self._check_threading:
            return None
        thread = body.get("thread")
        previous = self.replies[-1]["id"] if self.replies else None
        if thread is None:
            return None
        if not isinstance(thread, dict):
            return f"'thread' is not an object: {thread!r}"
        if thread.get("type") == "create":
            if previous is not None:
                return f"thread 'create' after reply {previous}; a tool loop should continue its thread"
            return None
        if thread.get("type") == "continue":
            if thread.get("previous_message_id") != previous:
                continued = thread.get("previous_message_id")
                return f"thread continues from {continued!r}, but the last reply was {previous!r}"
            if "tools" in body or "system" in body:
                return "a thread 'continue' must not repeat the create-only fields 'tools'/'system'"
            return None
        return f"unknown thread type {thread.get('type')!r}"

    def _message(self, turn_index: int, *, model: str) -> dict[str, Any]:
        content = copy.deepcopy(self._script[turn_index])
        has_tool_use = any(block.get("type") == "tool_use" for block in content)
        return {
            "id": f"msg_fake_{turn_index:03d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if has_tool_use else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 100 + 10 * turn_index,
                "output_tokens": 20,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def _error(self, status: int, error_type: str, message: str) -> httpx2.Response:
        message = f"fake Messages API: {message}"
        self.errors.append(message)
        return httpx2.Response(
            status,
            headers={"x-should-retry": "false"},
            json={"type": "error", "error": {"type": error_type, "message": message}},
        )


def _validate_turn(index: int, turn: Turn) -> None:
    if not turn:
        raise ValueError(f"script turn #{index} has no content blocks")
    for block in turn:
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise ValueError(f"script turn #{index}: text block without a string 'text': {block!r}")
        elif kind == "tool_use":
            missing = [key for key in ("id", "name", "input") if key not in block]
            if missing or not isinstance(block["input"], dict):
                raise ValueError(f"script turn #{index}: malformed tool_use block {block!r}")
        else:
            raise ValueError(f"script turn #{index}: unsupported block type {kind!r}")


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _sse_events(message: Mapping[str, Any]) -> Iterator[bytes]:
    """The event stream the real API sends for ``message``."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse("ping", {"type": "ping"})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            text: str = block["text"]
            middle = len(text) // 2
            for piece in (text[:middle], text[middle:]):
                if piece:
                    yield _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
        else:
            shell = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            start_event = {"type": "content_block_start", "index": index, "content_block": shell}
            yield _sse("content_block_start", start_event)
            partial = json.dumps(block["input"])
            middle = len(partial) // 2
            for piece in (partial[:middle], partial[middle:]):
                yield _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def last_user_message(request_body: Mapping[str, Any]) -> dict[str, Any]:
    """The last ``user`` message of a request body."""
    for message in reversed(request_body.get("messages", [])):
        if message.get("role") == "user":
            return dict(message)
    raise AssertionError(f"request has no user message: {request_body!r}")


def tool_results(request_body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of the last user message of ``request_body``."""
    content = last_user_message(request_body).get("content")
    if isinstance(content, str):
        return []
    return [dict(block) for block in content or [] if block.get("type") == "tool_result"]


def sync_client(api: ScriptedMessagesAPI) -> anthropic.Anthropic:
    """An ``Anthropic`` client wired to ``api``, without retries, so a fake error fails the test at once."""
    return anthropic.Anthropic(
        api_key="test",
        base_url="https://fake-anthropic.invalid",
        max_retries=0,
        http_client=httpx2.Client(transport=api.transport()),
    )


def async_client(api: ScriptedMessagesAPI) -> anthropic.AsyncAnthropic:
    """An ``AsyncAnthropic`` client wired to ``api``, without retries."""
    return anthropic.AsyncAnthropic(
        api_key="test",
        base_url="https://fake-anthropic.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=api.async_transport()),
    )
