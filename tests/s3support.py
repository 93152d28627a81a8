"""Test support for the S3 backend: moto's S3 server on loopback, a fresh bucket per test with the
AWS environment pointing at it, and :class:`FaultProxy`, an HTTP proxy in front of moto that fails
chosen requests the ways a network and S3 do.

The pytest fixtures built on these (``s3_endpoint``, ``s3_env``, ``s3_faulty``) are in
``tests/conftest.py``. moto and boto3 are imported only when a fixture first needs them, so the rest
of the suite does not pay for them.

Usage::

    def test_x(s3_env):
        objects = s3_env.objects("store")  # an S3Objects from the environment, like production
        s3_env.client.put_object(Bucket=s3_env.bucket, Key="store/a", Body=b"x")  # straight to moto
        subprocess.run(["memvault", "--store", s3_env.url("store"), ...])  # os.environ is already set

    def test_y(s3_faulty):
        s3_faulty.proxy.add_fault("503", method="PUT", times=2)
        assert s3_faulty.objects("p").create("k", b"v")
        assert s3_faulty.proxy.counts["PUT"] == 3
"""

from __future__ import annotations

import collections
import http.client
import logging
import os
import re
import secrets
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

import memvault

__all__ = [
    "S3Env",
    "FaultProxy",
    "moto_server",
    "make_s3_env",
    "s3_client",
    "as_host",
    "aws_environment",
    "sequential_round_trips",
]

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"
REGION = "us-east-1"

#: AWS variables cleared for a test, so a developer's profile, session or endpoint cannot leak in.
_CLEARED = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_REGION",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
)


# --- moto -------------------------------------------------------------------------------------


class _AtomicWrites:
    """WSGI middleware making each of moto's requests atomic: reads run together, a write alone.

    moto checks ``If-None-Match``/``If-Match`` and then stores the object in two steps without a
    lock, so two concurrent conditional PUTs can both succeed, and a listing that runs while an
    object is deleted fails inside moto (a dictionary changed during iteration); S3 does each
    request atomically. A readers-writer lock gives the fake S3 that guarantee.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        write = environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE")
        with self._cond:
            if write:
                self._writers_waiting += 1
                self._cond.wait_for(lambda: not self._writing and self._readers == 0)
                self._writers_waiting -= 1
                self._writing = True
            else:  # writers first: a stream of reads must not starve them
                self._cond.wait_for(lambda: not self._writing and self._writers_waiting == 0)
                self._readers += 1
        try:
            return list(self.app(environ, start_response))
        finally:
            with self._cond:
                if write:
                    self._writing = False
                else:
                    self._readers -= 1
                self._cond.notify_all()


@contextmanager
def moto_server() -> Iterator[str]:
    """Run moto's S3 (and every other moto service) on a free loopback port; yields its URL."""
    from moto.moto_server import threaded_moto_server as tms

    class Server(tms.ThreadedMotoServer):  # type: ignore[misc]
        # ThreadedMotoServer._server_entry with the app wrapped in _AtomicWrites.
        def _server_entry(self) -> None:
            app = _AtomicWrites(tms.DomainDispatcherApplication(tms.create_backend_app))
            self._server = tms.make_server(
                self._ip_address, self._port, app, True, request_handler=tms.MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    requests_log = logging.getLogger("werkzeug")  # one line on stderr per request otherwise
    level = requests_log.level
    requests_log.setLevel(logging.WARNING)
    server = Server(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        requests_log.setLevel(level)


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client for ``endpoint`` with the test credentials (not from the environment)."""
    import boto3
    import botocore.config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=botocore.config.Config(retries={"total_max_attempts": 1}),
    )


@dataclass
class S3Env:
    """A fresh bucket and the AWS environment pointing at it (already set in ``os.environ``).

    Attributes:
        endpoint: the URL clients use (the proxy's for ``s3_faulty``).
        bucket: the bucket's name (unique per test).
        client: a boto3 client straight to moto (never through the proxy), for setting up and
            inspecting the bucket.
        env: the variables set, for ``subprocess.run(..., env={**base, **s3_env.env})``; the
            fixture also removed the AWS variables in :data:`_CLEARED` from ``os.environ``.
        proxy: the :class:`FaultProxy` in front of moto (``s3_faulty`` only).
    """

    endpoint: str
    bucket: str
    client: Any
    env: dict[str, str]
    proxy: FaultProxy | None = field(default=None)

    def url(self, prefix: str = "") -> str:
        """The store URL ``s3://bucket/prefix``."""
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"

    def objects(self, prefix: str = "", **kwargs: Any) -> Any:
        """An ``S3Objects`` for ``prefix`` in the bucket, its client from the environment."""
        from memvault.storage.s3 import S3Objects

        return S3Objects(self.bucket, prefix, **kwargs)

    def keys(self) -> list[str]:
        """Every key in the bucket, read straight from moto."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def copy_prefix(self, prefix: str) -> dict[str, bytes]:
        """Every object under ``prefix/`` (key -> bytes), read straight from moto."""
        return {
            k: self.client.get_object(Bucket=self.bucket, Key=k)["Body"].read()
            for k in self.keys()
            if k.startswith(prefix + "/")
        }

    def put_back_prefix(self, prefix: str, copy: dict[str, bytes]) -> None:
        """Replace everything under ``prefix/`` with ``copy`` (from :meth:`copy_prefix`): what a
        writer of the bucket does when it serves an older copy of a store."""
        for k in self.keys():
            if k.startswith(prefix + "/"):
                self.client.delete_object(Bucket=self.bucket, Key=k)
        for k, v in copy.items():
            self.client.put_object(Bucket=self.bucket, Key=k, Body=v)


def aws_environment(endpoint: str) -> dict[str, str]:
    """The AWS variables pointing a process at ``endpoint`` with the test credentials."""
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }


def _apply(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _CLEARED:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def make_s3_env(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    """Create a uniquely named bucket on the moto server at ``endpoint`` and point the AWS
    environment at it (undone by ``monkeypatch`` at the end of the test)."""
    client = s3_client(endpoint)
    bucket = f"memvault-test-{secrets.token_hex(6)}"
    client.create_bucket(Bucket=bucket)
    env = aws_environment(endpoint)
    _apply(env, monkeypatch)
    return S3Env(endpoint, bucket, client, env)


def through_proxy(s3: S3Env, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    """``s3`` with clients from the environment going through ``proxy`` (``client`` still direct)."""
    env = {**s3.env, "AWS_ENDPOINT_URL": proxy.url}
    _apply(env, monkeypatch)
    return replace(s3, endpoint=proxy.url, env=env, proxy=proxy)


# --- the fault proxy --------------------------------------------------------------------------

#: What each injected error answers: status, S3 error code, message.
_ERRORS = {
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "SlowDown", "Please reduce your request rate."),
    "409": (409, "ConditionalRequestConflict", "A conflicting operation occurred. Please try again."),
}
_KINDS = (*_ERRORS, "reset_before", "reset_after")
#: Headers that belong to one hop, not to the request or answer.
_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "content-length",
}


@dataclass
class _Fault:
    kind: str
    method: str | None
    key_regex: re.Pattern[str] | None
    times: int

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.key_regex is None or self.key_regex.search(path) is not None
        )


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultProxy

    def shutdown_request(self, request: Any) -> None:
        if self.proxy.take_aborted(request):
            request.close()  # SO_LINGER 0: the close sends a reset, no orderly FIN first
            return
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # an idle keep-alive connection is dropped after this
    server: _ProxyServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, each answer with a body waits
        # for the client's delayed acknowledgement (about 40 ms).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.proxy.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.proxy.track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.proxy.serve(self)

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self, status: int, headers: list[tuple[str, str]], body: bytes, *, head: bool = False) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP and name.lower() not in ("date", "server"):
                self.send_header(name, value)
        if head:
            length = dict((k.lower(), v) for k, v in headers).get("content-length")
            if length is not None:
                self.send_header("Content-Length", length)
        elif status not in (204, 304):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head and status not in (204, 304):
            self.wfile.write(body)

    def abort(self) -> None:
        """End the connection with a reset, answering nothing."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.server.proxy.mark_aborted(self.connection)


class FaultProxy:
    """An HTTP/1.1 proxy on 127.0.0.1 forwarding every request to ``upstream`` (moto), failing the
    requests that match a programmed fault. Thread-safe; use as a context manager or call
    :meth:`stop`.

    Attributes:
        url: where clients connect.
        latency: seconds added before every request is handled (a round trip, for benchmarks).
        counts: requests received, by HTTP method (faulted ones included).
        log: ``(method, path, status)`` of every request received, in order: ``status`` is the
            HTTP status answered, or the fault kind (``"reset_before"``, ``"reset_after"``) when
            the connection was reset instead, or ``"slow"`` when a slow answer could not be sent.
        timings: ``(received, answered)`` of each entry of ``log`` (``time.perf_counter`` seconds):
            when the proxy had read the request, and when it was about to send the answer (a
            client's next request after that answer is received later than it was noted).
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.latency = 0.0
        self.counts: collections.Counter[str] = collections.Counter()
        self.log: list[tuple[str, str, int | str]] = []
        self.timings: list[tuple[float, float]] = []
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._aborted: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server = _ProxyServer(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fault-proxy", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_fault(self, kind: str, *, method: str | None = None, key_regex: str | None = None, times: int = 1) -> None:
        """Fail the next ``times`` requests matching ``method`` (``"PUT"``) and ``key_regex``
        (searched in the URL-decoded path, ``/bucket/prefix/key``), in the way ``kind`` says.

        Args:
            kind: ``"500"``, ``"503"``, ``"409"``: answer S3's InternalError, SlowDown or
                ConditionalRequestConflict without forwarding; ``"reset_before"``: reset the
                connection without forwarding (the request never reached S3); ``"reset_after"``:
                forward, then reset the connection instead of answering (the request took effect);
                ``"slow:<seconds>"``: forward, then wait before answering.
        """
        if kind not in _KINDS and not re.fullmatch(r"slow:[0-9.]+", kind):
            raise ValueError(f"unknown fault {kind!r}")
        with self._lock:
            self._faults.append(_Fault(kind, method, re.compile(key_regex) if key_regex else None, times))

    def clear(self) -> None:
        """Forget the faults not yet used, the counts and the log."""
        with self._lock:
            self._faults.clear()
            self.counts.clear()
            self.log.clear()
            self.timings.clear()

    def requests(self, method: str | None = None, key_regex: str | None = None) -> list[tuple[str, str, int | str]]:
        """The log entries of ``method`` whose path matches ``key_regex``."""
        with self._lock:
            entries = list(self.log)
        pattern = re.compile(key_regex) if key_regex else None
        return [e for e in entries if (method is None or e[0] == method) and (pattern is None or pattern.search(e[1]))]

    def stop(self) -> None:
        """Stop accepting, drop every open connection, and wait for the handler threads."""
        self._stopping.set()
        self._server.shutdown()
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        self._thread.join()

    # --- called by the handler ---

    def track(self, conn: socket.socket, opened: bool) -> None:
        with self._lock:
            (self._open.add if opened else self._open.discard)(conn)

    def mark_aborted(self, conn: socket.socket) -> None:
        with self._lock:
            self._aborted.add(conn)

    def take_aborted(self, conn: socket.socket) -> bool:
        with self._lock:
            if conn in self._aborted:
                self._aborted.discard(conn)
                return True
            return False

    def _record(self, method: str, path: str, status: int | str, received: float) -> None:
        with self._lock:
            self.log.append((method, path, status))
            self.timings.append((received, time.perf_counter()))

    def _take_fault(self, method: str, path: str) -> str | None:
        with self._lock:
            self.counts[method] += 1
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault.kind
        return None

    def serve(self, handler: _Handler) -> None:
        method, path = handler.command, handler.path
        body = handler.read_body()
        received = time.perf_counter()
        kind = self._take_fault(method, unquote(urlsplit(path).path))
        if self.latency:
            self._stopping.wait(self.latency)
        if kind in _ERRORS:
            status, code, message = _ERRORS[kind]
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                f"<Error><Code>{code}</Code><Message>{message}</Message>"
                "<RequestId>FAULTPROXY</RequestId><HostId>faultproxy</HostId></Error>"
            ).encode()
            self._record(method, path, status, received)
            handler.answer(status, [("Content-Type", "application/xml")], xml, head=method == "HEAD")
            return
        if kind == "reset_before":
            self._record(method, path, kind, received)
            handler.abort()
            return
        status, headers, data = self._forward(method, path, handler.headers.items(), body)
        if kind == "reset_after":
            self._record(method, path, kind, received)
            handler.abort()
            return
        if kind is None:
            self._record(method, path, status, received)  # before answering: the client may act on the answer at once
            handler.answer(status, headers, data, head=method == "HEAD")
            return
        self._stopping.wait(float(kind.partition(":")[2]))  # slow:<seconds>
        try:
            handler.answer(status, headers, data, head=method == "HEAD")
        except OSError:  # the client gave up waiting
            self._record(method, path, "slow", received)
            handler.close_connection = True
            return
        self._record(method, path, status, received)

    def _forward(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            sent = {name: value for name, value in headers if name.lower() not in _HOP}
            if body or method in ("PUT", "POST"):
                sent["Content-Length"] = str(len(body))
            conn.request(method, path, body=body or None, headers=sent)
            response = conn.getresponse()
            data = response.read()
            return response.status, response.getheaders(), data
        finally:
            conn.close()


@contextmanager
def as_host(cache: Any) -> Iterator[None]:
    """Act as the host whose replica cache is ``cache`` (a path): its own host state (marks, read
    times, recorded store ids) in a directory beside it, as another machine would have."""
    previous = os.environ.get("MEMVAULT_ANCHOR_DIR")
    os.environ["MEMVAULT_ANCHOR_DIR"] = str(cache.parent / f"{cache.name}-state")
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("MEMVAULT_ANCHOR_DIR", None)
        else:
            os.environ["MEMVAULT_ANCHOR_DIR"] = previous


def cli_as_host(monkeypatch: pytest.MonkeyPatch, cache: Path, *args: str) -> tuple[int, str, str]:
    """Run the CLI as the host whose cache of the store is ``cache`` (under ``cache.parent``):
    ``(exit status, stdout, stderr)``."""
    import contextlib
    import io

    from conftest import PASSPHRASE
    from memvault.cli import main

    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(cache.parent))
    out, err = io.StringIO(), io.StringIO()
    with as_host(cache), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def create_as_host(url: str, cache: Path) -> memvault.MemoryStore:
    """A new store at ``url``, created as the host whose replica cache is ``cache`` (:func:`as_host`)."""
    from conftest import FAST_KDF, PASSPHRASE

    with as_host(cache):
        return memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=cache)


def open_as_host(url: str, cache: Path) -> memvault.MemoryStore:
    """The store at ``url``, opened as the host whose replica cache is ``cache`` (:func:`as_host`)."""
    from conftest import PASSPHRASE

    with as_host(cache):
        return memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache)


def sequential_round_trips(spans: list[tuple[float, float]]) -> int:
    """The longest chain of requests each received after the answer to the one before it was
    sent (``FaultProxy.timings``): a command's sequential round trips, as ``benchmarks/bench_s3.py``
    counts them. Requests sent together overlap as long as the proxy's ``latency`` holds each."""
    count, last_end = 0, float("-inf")
    for start, end in sorted(spans, key=lambda s: s[1]):
        if start >= last_end:
            count += 1
            last_end = end
    return count
