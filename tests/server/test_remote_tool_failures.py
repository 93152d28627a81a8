"""RemoteMemoryTool when the memory server refuses, fails, is slow or is gone.

Against the real server (``tests/serversupport.py``): a revoked key, an unknown store, a key for
another store, a stopped server. Against :class:`ScriptedServer`, a tiny HTTP server on 127.0.0.1
that answers each request with the next scripted reply (a status and headers, a delay, or a
dropped connection) and records every request: what is retried (429 and 503 with ``retry-after``,
a ``view`` whose connection broke), what never is (a mutating command after a timeout, a broken
connection or a 5xx: exactly one request reaches the server), the error texts, and that the API
key appears in no error and no log line, nor any ``ANTHROPIC_*`` credential on the wire.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError

from conftest import FAST_KDF, PASSPHRASE
from memvault import AsyncRemoteMemoryTool, RemoteMemoryTool
from memvault.agent.remote import API_KEY_ENV, DEFAULT_MAX_RETRY_WAIT, SERVER_URL_ENV
from memvault.errors import ServiceError

if TYPE_CHECKING:  # the server's tests need memvault[server]; the served fixture skips without it
    from serversupport import Served

KEY = "mvk_test-secret-key-0123456789abcdefghijklmnopqrstuv"
STORE = "memstore_scripted"
VIEW = {"command": "view", "path": "/memories"}
CREATE = {"command": "create", "path": "/memories/a.md", "file_text": "a\n"}
OK_VIEW = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4.0K\t/memories"
UNREACHABLE = "Error: The memory server could not be reached."
UNKNOWN = "The command may or may not have been applied: view the memory before trying again."


# -- a scripted HTTP server -----------------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=lambda: {"type": "tool_result", "is_error": False, "content": OK_VIEW})
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    drop: bool = False  # close the connection without an answer
    raw: bytes | None = None  # the body as is (else ``body`` as JSON)


def error_reply(status: int, kind: str, message: str, **headers: str) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}, headers)


@dataclass
class Seen:
    target: str
    headers: dict[str, str]
    body: Any
    at: float


class ScriptedServer:
    """Answers request N with ``replies[N]`` (the last one again once they run out)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.requests: list[Seen] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                with outer.lock:
                    index = len(outer.requests)
                    outer.requests.append(
                        Seen(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            json.loads(raw) if raw else None,
                            time.monotonic(),
                        )
                    )
                    reply = outer.replies[min(index, len(outer.replies) - 1)]
                time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                body = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (a timeout)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def server_bind(self) -> None:
                import socketserver

                socketserver.TCPServer.server_bind(self)  # no reverse DNS lookup

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def start(*replies: Reply) -> ScriptedServer:
        server = ScriptedServer(list(replies)).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__()


def run(kind: str, command: Any = None, *, clear: bool = False, **options: Any) -> Any:
    """``command`` (or clear_all_memory) through a new sync or async tool; returns the result."""
    options.setdefault("memory_store_id", STORE)
    options.setdefault("api_key", KEY)
    store_id = options.pop("memory_store_id")
    if kind == "sync":
        with RemoteMemoryTool(store_id, **options) as tool:
            return tool.clear_all_memory() if clear else tool.call(command)

    async def go() -> Any:
        async with AsyncRemoteMemoryTool(store_id, **options) as tool:
            return await (tool.clear_all_memory() if clear else tool.call(command))

    return asyncio.run(go())


def tool_error(kind: str, command: Any, **options: Any) -> str:
    with pytest.raises(ToolError) as caught:
        run(kind, command, **options)
    content = caught.value.content
    assert isinstance(content, str)
    return content


KINDS = pytest.mark.parametrize("kind", ["sync", "async"])


# -- the real server -----------------------------------------------------------------------------------


def store_of(served: Served) -> tuple[str, str, str]:
    """A new memory store of ``served`` and a key limited to it: ``(store id, key id, secret)``."""
    store_id = served.root.create_store("worker memory").id
    record, secret = served.root.create_key("worker", stores=(store_id,))
    return store_id, record.id, secret


@KINDS
def test_revoked_key(kind: str, served: Served, caplog: pytest.LogCaptureFixture) -> None:
    store_id, key_id, secret = store_of(served)
    options = {"memory_store_id": store_id, "base_url": served.url, "api_key": secret}
    assert run(kind, CREATE, **options) == "File created successfully at: /memories/a.md"
    served.root.revoke_key(key_id)
    caplog.set_level(logging.DEBUG)
    expected = "Error: The memory server refused the request (401 authentication_error): Invalid or revoked API key."
    assert tool_error(kind, VIEW, **options) == expected
    assert tool_error(kind, CREATE, **options) == expected
    with pytest.raises(ServiceError) as caught:
        run(kind, clear=True, **options)
    assert str(caught.value) == (
        "The memory server failed to clear the memory: refused the request (401 authentication_error): "
        "Invalid or revoked API key."
    )
    assert not caught.value.outcome_unknown
    warnings = [r for r in caplog.records if r.name == "memvault" and r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "memvault: the memory server answered HTTP 401 (AuthenticationError)"
    ] * 3
    assert secret not in caplog.text
    with served.root.memories(store_id) as memories:  # nothing was cleared
        assert memories.store.read_text("/memories/a.md") == "a\n"


@KINDS
def test_unknown_store_and_a_store_the_key_may_not_use(kind: str, served: Served) -> None:
    expected = "Error: The memory server refused the request (404 not_found_error): No memory store has this id."
    options = {"base_url": served.url, "api_key": served.admin_key}
    assert tool_error(kind, VIEW, memory_store_id="memstore_doesnotexist", **options) == expected
    store_id, _key_id, _secret = store_of(served)
    _other_id, _other_key, secret = store_of(served)
    options = {"memory_store_id": store_id, "base_url": served.url, "api_key": secret}
    assert tool_error(kind, CREATE, **options) == expected
    with pytest.raises(ServiceError, match="404 not_found_error"):
        run(kind, clear=True, **options)


@KINDS
def test_stopped_server(kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("starlette", reason="the server needs memvault[server]")
    from memvault.keys.slots import Unlock
    from memvault.server.root import ServerRoot
    from serversupport import serve_root

    root = ServerRoot.init(tmp_path / "root", Unlock(passphrase=PASSPHRASE), kdf=FAST_KDF)
    _record, secret = root.create_key("worker")
    store_id = root.create_store("s").id
    server, thread, port, _app = serve_root(root)
    options = {"memory_store_id": store_id, "base_url": f"http://127.0.0.1:{port}", "api_key": secret}
    assert run(kind, VIEW, **options) == OK_VIEW
    server.should_exit = True
    thread.join(timeout=30)
    caplog.set_level(logging.WARNING, logger="memvault")
    started = time.monotonic()
    assert tool_error(kind, VIEW, **options) == UNREACHABLE
    # Connections that could not be opened are retried, within the default bound.
    assert 0.25 * 0.75 * 7 <= time.monotonic() - started < DEFAULT_MAX_RETRY_WAIT + 2
    # Nothing was sent: a mutating command is not in doubt.
    assert tool_error(kind, CREATE, max_retries=0, **options) == UNREACHABLE
    with pytest.raises(ServiceError) as caught:
        run(kind, clear=True, max_retries=0, **options)
    assert str(caught.value) == "The memory server failed to clear the memory: could not be reached."
    assert not caught.value.outcome_unknown
    assert "APIConnectionError" in caplog.text
    assert secret not in caplog.text


# -- retries ---------------------------------------------------------------------------------------------


@KINDS
@pytest.mark.parametrize("command", [VIEW, CREATE], ids=["view", "create"])
@pytest.mark.parametrize(
    "first",
    [
        error_reply(429, "rate_limit_error", "Slow down.", **{"retry-after": "0"}),
        error_reply(503, "overloaded_error", "The memory store is busy; retry shortly.", **{"retry-after-ms": "150"}),
        error_reply(503, "overloaded_error", "busy"),  # no retry-after: a short backoff
    ],
    ids=["429", "503-retry-after-ms", "503-backoff"],
)
def test_answers_that_did_nothing_are_retried(kind: str, command: Any, first: Reply, scripted: Any) -> None:
    server = scripted(first, Reply())
    assert run(kind, command, base_url=server.url) == OK_VIEW
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    waited = server.requests[1].at - server.requests[0].at
    if "retry-after-ms" in first.headers:
        assert waited >= 0.15


@KINDS
def test_retries_are_bounded_in_number(kind: str, scripted: Any) -> None:
    server = scripted(error_reply(503, "overloaded_error", "busy", **{"retry-after-ms": "10"}))
    expected = "Error: The memory server failed (503 overloaded_error): busy."
    assert tool_error(kind, CREATE, base_url=server.url, max_retries=2) == expected
    assert len(server.requests) == 3


@KINDS
def test_retries_are_bounded_in_time(kind: str, scripted: Any) -> None:
    server = scripted(error_reply(429, "rate_limit_error", "Slow down.", **{"retry-after": "3600"}))
    started = time.monotonic()
    text = tool_error(kind, VIEW, base_url=server.url)
    assert text == "Error: The memory server refused the request (429 rate_limit_error): Slow down."
    assert len(server.requests) == 1  # an hour is over the budget: no wait, no retry
    assert time.monotonic() - started < 5


@KINDS
def test_a_mutating_command_is_never_sent_again_after_a_timeout(kind: str, scripted: Any) -> None:
    server = scripted(Reply(delay=1.5))
    text = tool_error(kind, CREATE, base_url=server.url, timeout=0.3)
    assert text == f"Error: The memory server did not answer in time. {UNKNOWN}"
    time.sleep(1.5)  # any retry would have arrived by now
    assert len(server.requests) == 1


@KINDS
def test_a_view_that_timed_out_is_not_retried_either(kind: str, scripted: Any) -> None:
    server = scripted(Reply(delay=1.5))
    assert (
        tool_error(kind, VIEW, base_url=server.url, timeout=0.3) == "Error: The memory server did not answer in time."
    )
    time.sleep(1.5)
    assert len(server.requests) == 1


@KINDS
def test_clear_all_memory_after_a_timeout_is_in_doubt(kind: str, scripted: Any) -> None:
    server = scripted(Reply(delay=1.5))
    with pytest.raises(ServiceError) as caught:
        run(kind, clear=True, base_url=server.url, timeout=0.3)
    assert caught.value.outcome_unknown
    assert "did not answer in time" in str(caught.value)
    time.sleep(1.5)
    assert len(server.requests) == 1
    assert server.requests[0].body == {"session": server.requests[0].body["session"], "clear_all_memory": True}


@KINDS
def test_a_dropped_connection_retries_a_view_only(kind: str, scripted: Any) -> None:
    server = scripted(Reply(drop=True), Reply())
    assert run(kind, VIEW, base_url=server.url) == OK_VIEW
    assert len(server.requests) == 2

    server = scripted(Reply(drop=True), Reply())
    assert (
        tool_error(kind, CREATE, base_url=server.url) == f"Error: The memory server dropped the connection. {UNKNOWN}"
    )
    assert len(server.requests) == 1


@KINDS
@pytest.mark.parametrize(
    ("reply", "text"),
    [
        (
            error_reply(500, "api_error", "Internal server error."),
            "Error: The memory server failed (500 api_error): Internal server error.",
        ),
        (Reply(502, raw=b"<html>Bad Gateway</html>"), "Error: The memory server failed (HTTP 502)."),
        (Reply(504, raw=b""), "Error: The memory server failed (HTTP 504)."),
    ],
    ids=["500", "502-html", "504-empty"],
)
def test_server_errors_are_not_retried(kind: str, reply: Reply, text: str, scripted: Any) -> None:
    server = scripted(reply)
    assert tool_error(kind, VIEW, base_url=server.url) == text
    assert tool_error(kind, CREATE, base_url=server.url) == f"{text} {UNKNOWN}"
    assert len(server.requests) == 2  # one each


@KINDS
@pytest.mark.parametrize(
    "reply",
    [
        Reply(body={"content": "no type"}),
        Reply(body={"type": "tool_result", "is_error": "yes", "content": "x"}),
        Reply(body={"type": "tool_result", "is_error": False, "content": 7}),
        Reply(raw=b"{not json"),
        Reply(raw=b"plain text", headers={"content-type": "text/plain"}),
    ],
    ids=["no-type", "bad-flag", "bad-content", "broken-json", "text"],
)
def test_an_answer_that_is_not_a_tool_result(kind: str, reply: Reply, scripted: Any) -> None:
    server = scripted(reply)
    assert (
        tool_error(kind, VIEW, base_url=server.url)
        == "Error: The memory server gave an answer that is not a tool result."
    )
    assert tool_error(kind, CREATE, base_url=server.url) == (
        f"Error: The memory server gave an answer that is not a tool result. {UNKNOWN}"
    )


# -- what goes on the wire, and what never comes back ---------------------------------------------------


@KINDS
def test_the_request(kind: str, scripted: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One POST to the tool route under the URL's prefix, the key as a Bearer token, and no
    credential or custom header meant for the Anthropic API."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-must-not-leak")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "auth-token-must-not-leak")
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Gateway-Auth: gateway-secret-must-not-leak\nX-Other: 1")
    server = scripted(Reply())
    run(kind, CREATE, base_url=server.url + "/memory/", session="s-1", memory_store_id="memstore_../x?y#z")
    (seen,) = server.requests
    assert seen.target == "/memory/v1/memory_stores/memstore_..%2Fx%3Fy%23z/memvault/tool"
    assert seen.body == {"session": "s-1", "command": CREATE}
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in seen.headers
    assert "x-gateway-auth" not in seen.headers and "x-other" not in seen.headers
    assert "must-not-leak" not in json.dumps(seen.headers)


@KINDS
def test_the_key_never_reaches_an_error_or_a_log(kind: str, scripted: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A server that echoes the Authorization header in its error message."""
    server = scripted(error_reply(403, "permission_error", f"Key Bearer {KEY} may not do this."))
    caplog.set_level(logging.DEBUG)  # the SDK's and its transport's debug lines too
    text = tool_error(kind, CREATE, base_url=server.url)
    assert (
        text
        == "Error: The memory server refused the request (403 permission_error): Key Bearer [API key] may not do this."
    )
    with pytest.raises(ServiceError) as caught:
        run(kind, clear=True, base_url=server.url)
    assert KEY not in str(caught.value) and "[API key]" in str(caught.value)
    assert KEY not in caplog.text


def test_a_long_or_odd_error_message_is_cut_to_one_line(scripted: Any) -> None:
    server = scripted(error_reply(400, "invalid_request_error", "bad\nthing\x1b[31m" + "x" * 2000))
    text = tool_error("sync", VIEW, base_url=server.url)
    assert text.startswith(
        "Error: The memory server refused the request (400 invalid_request_error): bad thing [31mxxx"
    )
    assert "\n" not in text and "\x1b" not in text
    assert len(text) < 600


# -- construction ----------------------------------------------------------------------------------------


def test_url_and_key_from_the_environment(scripted: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = scripted(Reply())
    monkeypatch.setenv(SERVER_URL_ENV, server.url)
    monkeypatch.setenv(API_KEY_ENV, KEY)
    with RemoteMemoryTool(STORE) as tool:
        assert tool.call(VIEW) == OK_VIEW
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_missing_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SERVER_URL_ENV, raising=False)
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with pytest.raises(ValueError, match=SERVER_URL_ENV):
        RemoteMemoryTool(STORE, api_key=KEY)
    with pytest.raises(ValueError, match=API_KEY_ENV) as caught:
        AsyncRemoteMemoryTool(STORE, base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="either client"):
        RemoteMemoryTool(STORE, client=anthropic.Anthropic(api_key=KEY), api_key=KEY)
    with pytest.raises(ValueError, match="session"):
        RemoteMemoryTool(STORE, base_url="http://127.0.0.1:9", api_key=KEY, session="s" * 256)
    with pytest.raises(ValueError, match="session"):
        RemoteMemoryTool(STORE, base_url="http://127.0.0.1:9", api_key=KEY, session="")
    with pytest.raises(ValueError, match="memory_store_id"):
        RemoteMemoryTool("", base_url="http://127.0.0.1:9", api_key=KEY)
    assert KEY not in str(caught.value)


def test_a_client_given_keeps_its_settings_but_not_its_retries(scripted: Any) -> None:
    server = scripted(error_reply(500, "api_error", "Internal server error."), Reply())
    client = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=5)
    tool = RemoteMemoryTool(STORE, client=client)
    with pytest.raises(ToolError):
        tool.call(CREATE)
    assert len(server.requests) == 1
    tool.close()  # a client given stays open
    assert tool.call(VIEW) == OK_VIEW
    client.close()


def test_an_async_client_given(scripted: Any) -> None:
    server = scripted(Reply())

    async def go() -> Any:
        async with anthropic.AsyncAnthropic(base_url=server.url, auth_token=KEY) as client:
            return await AsyncRemoteMemoryTool(STORE, client=client, session="given").call(VIEW)

    assert asyncio.run(go()) == OK_VIEW
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert server.requests[0].body["session"] == "given"


def test_the_key_is_in_no_repr() -> None:
    for tool in (
        RemoteMemoryTool(STORE, base_url="http://127.0.0.1:9", api_key=KEY),
        AsyncRemoteMemoryTool(STORE, base_url="http://127.0.0.1:9", api_key=KEY),
    ):
        assert KEY not in repr(tool) and KEY not in repr(tool.client) and KEY not in str(tool.to_dict())


def test_a_worker_loads_no_store_code() -> None:
    """The remote tool needs the SDK and memvault's errors, nothing that opens a store."""
    code = (
        "import sys, memvault; memvault.RemoteMemoryTool, memvault.AsyncRemoteMemoryTool; "
        "print(sorted(m for m in sys.modules if m.startswith('memvault')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['memvault', 'memvault.agent', 'memvault.agent.remote', 'memvault.errors']"


@KINDS
def test_the_session_can_change_between_commands(kind: str, scripted: Any) -> None:
    server = scripted(Reply())
    if kind == "sync":
        tool = RemoteMemoryTool(STORE, base_url=server.url, api_key=KEY, session="first")
        tool.call(VIEW)
        tool.session = "second"
        tool.call(VIEW)
        tool.close()
    else:

        async def go() -> None:
            async with AsyncRemoteMemoryTool(STORE, base_url=server.url, api_key=KEY, session="first") as tool:
                await tool.call(VIEW)
                tool.session = "second"
                await tool.call(VIEW)

        asyncio.run(go())
    assert [seen.body["session"] for seen in server.requests] == ["first", "second"]
