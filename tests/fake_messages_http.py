"""The scripted fake Messages API of ``tests/integration/fake_messages_api.py``, served over real HTTP.

:class:`FakeMessagesServer` listens on ``127.0.0.1`` (a free port) in a background thread, so a
*subprocess* that builds its own ``anthropic.Anthropic()`` client from ``ANTHROPIC_API_KEY`` /
``ANTHROPIC_BASE_URL`` (the ``memvault dream`` CLI) can be driven by a scripted conversation::

    with FakeMessagesServer([[{"type": "text", "text": "done"}]]) as server:
        subprocess.run([...], env=server.env(), check=True)
    assert server.requests[0]["system"] == ...

Every HTTP request is turned into an ``httpx2.Request`` and answered by the very
:class:`ScriptedMessagesAPI` the in-process tests use (scripted turns, JSON or SSE replies, the
thread continuity check, request recording); its ``httpx2.Response`` is written back with an
explicit ``Content-Length`` over HTTP/1.1, so keep-alive connections work.

One difference: every error is answered with HTTP **400** ``invalid_request_error`` (the
in-process fake uses 404 for an unknown route and 500 when the script has run out), with
``x-should-retry: false`` and the fake's message. A client with the SDK's default retry policy (the
CLI's) therefore fails at once with ``anthropic.BadRequestError`` whose message says what went
wrong, instead of retrying with backoff. The server never drops a connection without an answer
(that would be an ``APIConnectionError``, which the SDK retries): a failure inside the handler
becomes such a 400 too.

What anthropic 2.15.0 sends (checked against the installed SDK): ``POST /v1/messages`` without a
query string (beta endpoints too: their ``beta=true`` qualifier is not put on the URL), the API key
as ``authorization: Bearer <key>`` (no ``x-api-key``), ``anthropic-version``, and, for the tool
runner, ``anthropic-beta: message-threads-2026-08-12``. The route check looks at the path only, so
a query string would be accepted; ``request_targets`` keeps the raw request lines for assertions.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import sys
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2

_INTEGRATION_DIR = str(Path(__file__).resolve().parent / "integration")
if _INTEGRATION_DIR not in sys.path:  # tests/integration is not a package; pytest only adds it for its own tests
    sys.path.append(_INTEGRATION_DIR)

from fake_messages_api import ScriptedMessagesAPI  # noqa: E402

__all__ = ["FakeMessagesServer"]

Script = Sequence[Sequence[Mapping[str, Any]]]  # as ScriptedMessagesAPI takes it

HOST = "127.0.0.1"
ERROR_STATUS = 400
ERROR_TYPE = "invalid_request_error"
_HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


class FakeMessagesServer:
    """A :class:`ScriptedMessagesAPI` behind a real HTTP server on ``127.0.0.1``.

    Use it as a context manager (or call :meth:`start` / :meth:`stop`). ``script`` and
    ``check_threading`` are passed to :class:`ScriptedMessagesAPI` unchanged: a list of assistant
    turns, each a list of content blocks (``{"type": "text", "text": ...}`` or
    ``{"type": "tool_use", "id": ..., "name": ..., "input": {...}}``); request N is answered with
    turn N.

    Assertion surface (all delegate to :attr:`api`, except ``request_targets`` and
    ``connections_accepted``):

    * ``requests`` — every parsed JSON body POSTed to ``/v1/messages``, in order (including ones the
      fake rejected, e.g. a broken thread continuation or one past the end of the script);
    * ``request_headers`` — the matching headers (lower-case names);
    * ``replies`` — the assistant messages served, in order;
    * ``errors`` — every error message the fake answered with (empty after a clean run);
    * ``exhausted`` — whether every scripted turn was served;
    * ``tool_results_of(i)`` — the ``tool_result`` blocks of the last user message of request ``i``;
    * ``request_targets`` — ``"METHOD /path?query"`` of every HTTP request received, whatever it was;
    * ``connections_accepted`` — TCP connections accepted so far (keep-alive reuses one).
    """

    def __init__(self, script: Script, *, check_threading: bool = True) -> None:
        self.api = ScriptedMessagesAPI(script, check_threading=check_threading)
        self.request_targets: list[str] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> FakeMessagesServer:
        if self._server is not None:
            raise RuntimeError("FakeMessagesServer is already running")
        server = _Server((HOST, 0), _Handler)
        server.fake = self
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-messages-http-{server.server_address[1]}",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()  # stops accepting; returns once serve_forever has returned
        server.close_open_connections()  # idle keep-alive connections would keep their threads alive
        server.server_close()  # joins the connection threads
        thread.join()
        self._server = self._thread = None

    def __enter__(self) -> FakeMessagesServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses and environment ----------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeMessagesServer is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash), for ``base_url=`` / ``ANTHROPIC_BASE_URL``."""
        return f"http://{HOST}:{self.port}"

    def env(self, base: Mapping[str, str] | None = None, *, api_key: str = "test") -> dict[str, str]:
        """An environment for a subprocess that talks to this server.

        A copy of ``base`` (default ``os.environ``) without any ``ANTHROPIC_*`` variable (so no
        profile, auth token or custom header of the developer's leaks in), plus
        ``ANTHROPIC_API_KEY=api_key`` and ``ANTHROPIC_BASE_URL=base_url``, with ``127.0.0.1`` added to
        ``NO_PROXY``/``no_proxy`` so an HTTP proxy in the environment is bypassed.
        """
        env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("ANTHROPIC_")}
        env["ANTHROPIC_API_KEY"] = api_key
        env["ANTHROPIC_BASE_URL"] = self.base_url
        for key in ("NO_PROXY", "no_proxy"):
            hosts = [h for h in env.get(key, "").split(",") if h.strip()]
            env[key] = ",".join([*hosts, HOST, "localhost"])
        return env

    # -- assertion surface (delegates to the in-process fake) -------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.api.requests

    @property
    def request_headers(self) -> list[dict[str, str]]:
        return self.api.request_headers

    @property
    def replies(self) -> list[dict[str, Any]]:
        return self.api.replies

    @property
    def errors(self) -> list[str]:
        return self.api.errors

    @property
    def exhausted(self) -> bool:
        return self.api.exhausted

    @property
    def connections_accepted(self) -> int:
        return 0 if self._server is None else self._server.connections_accepted

    def tool_results_of(self, request_index: int) -> list[dict[str, Any]]:
        return self.api.tool_results_of(request_index)

    # -- request handling (called from the connection threads) ------------------------------------

    def _answer(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> _Reply:
        with self._lock:
            self.request_targets.append(f"{method} {target}")
            try:
                request = httpx2.Request(method, f"{self.base_url}{target}", headers=headers, content=body)
                response = self.api.handle(request)
                content = response.read()
            except Exception as exc:  # a bug in the fake must still be answered, or the SDK retries
                message = f"fake Messages API: internal failure handling {method} {target}: {exc!r}"
                self.api.errors.append(message)
                return _error_reply(message)
        if response.status_code >= 400:
            return _error_reply(_error_message(content, response.status_code))
        reply_headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _HOP_BY_HOP]
        return _Reply(response.status_code, reply_headers, content)

    def _bad_request(self, method: str, target: str, problem: str) -> _Reply:
        message = f"fake Messages API: {problem}"
        with self._lock:
            self.request_targets.append(f"{method} {target}")
            self.api.errors.append(message)
        return _error_reply(message)


class _Reply:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


def _error_reply(message: str) -> _Reply:
    body = json.dumps({"type": "error", "error": {"type": ERROR_TYPE, "message": message}}).encode()
    headers = [("content-type", "application/json"), ("x-should-retry", "false")]
    return _Reply(ERROR_STATUS, headers, body)


def _error_message(content: bytes, status: int) -> str:
    """The message of an error body of the in-process fake (already recorded in its ``errors``)."""
    try:
        return str(json.loads(content)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"fake Messages API: HTTP {status}: {content[:200]!r}"


class _BodyError(Exception):
    pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeMessagesServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self.connections_accepted = 0
        super().__init__(address, handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would call socket.getfqdn(), a reverse DNS lookup that can stall.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
            self.connections_accepted += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_open_connections(self) -> None:
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Quiet: a client hanging up (or the shutdown closing its socket) is not worth a traceback.
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, OSError):
            self.fake.api.errors.append(f"fake Messages API server: {exc!r}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries a Content-Length
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self) -> None:
        fake = self.server.fake
        try:
            body = self._read_body()
        except _BodyError as exc:
            self.close_connection = True  # the rest of the stream cannot be trusted
            self._send(fake._bad_request(self.command, self.path, str(exc)))
            return
        self._send(fake._answer(self.command, self.path, list(self.headers.items()), body))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _dispatch

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return self._read_chunked()
        length = self.headers.get("content-length")
        if length is None:
            return b""
        try:
            size = int(length)
        except ValueError:
            raise _BodyError(f"bad Content-Length {length!r}") from None
        body = self.rfile.read(size)
        if len(body) != size:
            raise _BodyError(f"request body ended after {len(body)} of {size} bytes")
        return body

    def _read_chunked(self) -> bytes:
        parts = []
        while True:
            line = self.rfile.readline(65537)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BodyError(f"bad chunk size line {line!r}") from None
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            chunk = self.rfile.read(size)
            if len(chunk) != size:
                raise _BodyError("chunked request body ended early")
            parts.append(chunk)
            self.rfile.readline(65537)

    def _send(self, reply: _Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)
        self.wfile.flush()
