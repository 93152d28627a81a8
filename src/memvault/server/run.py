"""Serving a server root over HTTP with uvicorn: the socket, the workers, signals, the ready line.

One process (``workers=1``) serves in the calling thread. With ``workers`` > 1 the caller binds
the socket and forks that many workers, each opening the root for itself (no key crosses a
process boundary except by ``fork``); the parent restarts a worker that dies and, on SIGINT or
SIGTERM, stops them all. A worker that is told to stop finishes the requests in flight (their
commits included) before it exits. Plain HTTP: bind a non-loopback address only behind a proxy
that terminates TLS (``allow_remote``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..keys.slots import Unlock
from ..storage.url import is_remote

if TYPE_CHECKING:
    from .compaction import GcPolicy

__all__ = ["ServeOptions", "is_loopback", "check_bind", "serve", "bind", "quiet_server_class"]

_log = logging.getLogger("memvault.server")
#: Seconds a stopping worker waits for requests in flight.
GRACEFUL_SECONDS = 30


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost`` or a loopback address (any spelling)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless ``allow_remote`` (InvalidInputError)."""
    if not allow_remote and not is_loopback(host):
        raise InvalidInputError(
            f"Error: Refusing to serve on {host}, which is not a loopback address: the server speaks plain HTTP. "
            "Put a reverse proxy that terminates TLS in front of it (docs/server.md) and pass --allow-remote."
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0: a free one).

    Made with protocol ``IPPROTO_TCP`` explicitly: asyncio sets ``TCP_NODELAY`` only on accepted
    sockets whose protocol says TCP, and without it every answer (head and body written apart)
    waits for the client's delayed acknowledgement, about 40 ms."""
    name = host.strip("[]")
    family = socket.AF_INET6 if ":" in name else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((name, port))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class ServeOptions:
    """What ``memvault serve`` was asked for."""

    def __init__(
        self, location: str, unlock: Unlock, *, host: str = "127.0.0.1", port: int = 8080, workers: int = 1,
        allow_remote: bool = False, rate: float = 0.0, burst: int = 0, open_stores: int = 64,
        cache_dir: str | None = None, log_level: str = "info", store_requests: int = 16, cache_replicas: int = 256,
        cache_bytes: int = 0, gc: GcPolicy | None = None,
    ) -> None:  # fmt: skip
        self.location = location
        self.unlock = unlock
        self.host = host
        self.port = port
        self.workers = workers
        self.allow_remote = allow_remote
        self.rate = rate
        self.burst = burst
        self.open_stores = open_stores
        self.store_requests = store_requests
        self.cache_replicas = cache_replicas
        self.cache_bytes = cache_bytes
        self.cache_dir = cache_dir
        self.log_level = log_level
        #: When each worker compacts the root's stores in the background (a root in object storage).
        self.gc = gc


def _url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    name = host.strip("[]")
    return f"http://[{name}]:{port}" if ":" in name else f"http://{name}:{port}"


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in ("memvault.server", "memvault.server.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False


def quiet_server_class() -> type[Any]:
    """uvicorn's ``Server`` class, changed so that a stop signal ends it with status 0 (for `serve` and `ui`)."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        """uvicorn's server, but a stop signal ends it with status 0: uvicorn raises the signal again
        after its graceful shutdown, which would end the process by SIGTERM (or KeyboardInterrupt)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return QuietServer


def _watch_parent(parent: int, server: Any) -> None:
    """Stop ``server`` when the process that forked this worker is gone (killed without a chance to
    stop its workers): a worker never outlives its supervisor."""
    while not server.should_exit:
        if os.getppid() != parent:
            server.should_exit = True
            return
        time.sleep(0.5)


def _run_worker(
    options: ServeOptions, sock: socket.socket, ready: Callable[[], None] | None, *, parent: int | None = None
) -> None:
    """Open the root and serve on ``sock`` until told to stop (in this process); a forked worker
    also stops when its ``parent`` is gone."""
    import uvicorn

    from .app import ServerApp
    from .root import ServerRoot

    root = ServerRoot.open(options.location, options.unlock, cache_dir=options.cache_dir,
                           open_stores=options.open_stores, store_requests=options.store_requests,
                           cache_replicas=options.cache_replicas, cache_bytes=options.cache_bytes,
                           gc=options.gc)  # fmt: skip
    if options.gc is not None and options.gc.enabled and not is_remote(options.location):
        _log.info("--gc-every and --gc-interval do nothing for a local root (its stores need no compaction)")
    try:
        root.finish_deletions()
    except Exception as err:  # the next worker or start tries again
        _log.warning("could not finish a store deletion: %s", type(err).__name__)
    app = ServerApp(root, rate=options.rate, burst=options.burst)
    config = uvicorn.Config(app.asgi, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=GRACEFUL_SECONDS, server_header=False)  # fmt: skip
    server = quiet_server_class()(config)

    if ready is not None:
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets=sockets)
            ready()

        server.startup = startup
    if parent is not None:
        threading.Thread(target=_watch_parent, args=(parent, server), daemon=True).start()
    server.run(sockets=[sock])


def serve(options: ServeOptions, *, announce: Callable[[str], None]) -> int:
    """Serve until SIGINT or SIGTERM; ``announce`` gets the URL once every worker is ready.
    Returns the exit status (0 after a clean stop).

    Raises:
        InvalidInputError: a non-loopback address without ``allow_remote``. And what opening the
        root raises (checked once before any worker starts).
    """
    check_bind(options.host, options.allow_remote)
    _configure_logging(options.log_level)
    sock = bind(options.host, options.port)
    url = _url(sock, options.host)
    if options.workers <= 1:
        _run_worker(options, sock, lambda: announce(url))
        return 0
    metrics_dir = tempfile.mkdtemp(prefix="memvault-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # before prometheus_client is imported
    try:
        return _supervise(options, sock, url, announce)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _notify(fd: int) -> None:
    os.write(fd, b"r")


def _check_root(options: ServeOptions) -> None:
    from .root import ServerRoot

    ServerRoot.open(options.location, options.unlock, cache_dir=options.cache_dir).close()


def _supervise(options: ServeOptions, sock: socket.socket, url: str, announce: Callable[[str], None]) -> int:
    _check_root(options)  # a wrong key or a missing root fails here, once, before any fork
    read_end, write_end = os.pipe()
    children: dict[int, int] = {}
    stopping = False

    supervisor = os.getpid()

    def start(slot: int, *, notify: bool) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(read_end)
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _run_worker(options, sock, (lambda: _notify(write_end)) if notify else None, parent=supervisor)
            except BaseException as err:  # a worker reports and exits, never unwinds into the parent
                _log.error("worker %d stopped: %s", slot, type(err).__name__)
                code = 1
            finally:
                os._exit(code)
        children[pid] = slot

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        for slot in range(options.workers):
            start(slot, notify=True)
        ready = 0
        while ready < options.workers and not stopping:
            if select.select([read_end], [], [], 0.2)[0]:
                ready += len(os.read(read_end, 64))
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid:  # a worker died while starting: stop them all
                children.pop(pid, None)
                _log.error("a worker failed to start; stopping")
                status = 1
                stop(signal.SIGTERM, None)
        if not stopping:
            announce(url)
        while children:
            try:
                pid, code = os.wait()
            except ChildProcessError:
                break
            slot = children.pop(pid, -1)
            if not stopping and slot >= 0:
                _log.warning("worker %d exited (status %d); starting it again", slot, code)
                time.sleep(0.5)
                start(slot, notify=False)
        return status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(read_end)
        os.close(write_end)
        sock.close()
