"""Test support for the server: :func:`serve_root` serves a server root with uvicorn in a thread on
a free port of 127.0.0.1; :class:`Served` is what a test needs to talk to it: the real
``anthropic`` SDK client pointed at it (no retries, so a test sees each answer) and raw HTTP for
what the SDK hides. The ``served`` fixture (tests/server/conftest.py) builds one per test.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import uvicorn

from memvault.server.app import ServerApp
from memvault.server.root import ServerRoot
from memvault.server.run import bind


@dataclass
class Served:
    """A running server and what a test needs to talk to it."""

    url: str
    port: int
    location: Path
    root: ServerRoot
    app: ServerApp
    admin_key: str
    plain_key: str
    admin_id: str
    plain_id: str
    _server: uvicorn.Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    def client(self, secret: str | None = None, **kwargs: Any) -> anthropic.Anthropic:
        """The SDK client with ``secret`` (default: the admin key), no retries."""
        kwargs.setdefault("max_retries", 0)
        return anthropic.Anthropic(api_key=secret or self.admin_key, base_url=self.url, **kwargs)

    def http(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        """One raw request: ``(status, headers, parsed JSON or text)``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = dict(headers or {})
        if key is not False:
            sent.setdefault("authorization", f"Bearer {key or self.admin_key}")
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            sent.setdefault("content-type", "application/json")
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        text = response.read()
        conn.close()
        answer_headers = {k.lower(): v for k, v in response.getheaders()}
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text.decode("utf-8", "replace")
        return response.status, answer_headers, parsed


def serve_asgi(asgi: Any, *, lifespan: str = "off") -> tuple[uvicorn.Server, threading.Thread, int]:
    """Serve ``asgi`` (uvicorn in a thread) on a free port of 127.0.0.1; returns the server, its
    thread and the port once it accepts connections. Stop it with :func:`stop_server`."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", access_log=False, lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    return server, thread, port


def stop_server(server: uvicorn.Server, thread: threading.Thread) -> None:
    """Stop a server :func:`serve_asgi` started and wait for its thread."""
    server.should_exit = True
    thread.join(timeout=30)


def serve_root(root: ServerRoot, **app_options: Any) -> tuple[uvicorn.Server, threading.Thread, int, ServerApp]:
    """Serve ``root`` in a thread on a free loopback port; returns the server, thread, port and app."""
    app = ServerApp(root, **app_options)
    server, thread, port = serve_asgi(app.asgi, lifespan="on")
    return server, thread, port, app
