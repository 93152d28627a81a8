"""The server's application object: it owns the route table, the open server root and what every
view shares (authentication, the rate limiter, metrics, the access log, cursors).

``ServerApp(root).asgi`` is the ASGI application (Starlette). Tests drive it in-process with
``starlette.testclient`` or over real HTTP with ``memvault serve``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from ..memories.cursor import CursorSealer
from ..ui.app import ReviewApp
from .catalog import ApiKeyRecord, Registry
from .errors import ApiError, error_response
from .ops import AccessLog, Metrics, RateLimiter
from .root import ServerRoot, new_id
from .views.base import ApiView
from .views.health import HealthViews
from .views.memories import MemoriesView, MemoryView
from .views.stores import ArchiveView, StoresView, StoreView
from .views.tool import ToolView
from .views.versions import RedactView, VersionsView, VersionView

__all__ = ["ServerApp", "MAX_BODY_BYTES"]

#: Largest request body read (a 100 KiB memory as JSON, escaped, fits with room to spare).
MAX_BODY_BYTES = 1024 * 1024
_ANY_METHOD = ("GET", "POST", "PATCH", "DELETE", "PUT")
_METHODS = {
    StoresView: ["GET", "POST"],
    StoreView: ["GET", "POST", "PATCH", "DELETE"],
    ArchiveView: ["POST"],
    MemoriesView: ["GET", "POST"],
    MemoryView: ["GET", "POST", "PATCH", "DELETE"],
    VersionsView: ["GET"],
    VersionView: ["GET"],
    RedactView: ["POST"],
    ToolView: ["POST"],
}


class ServerApp:
    """The memory-stores API over ``root``.

    Args:
        root: the open server root (the app closes it on shutdown).
        rate: requests per second allowed per API key and process (0: unlimited); ``burst`` the
            bucket's size.
        max_body_bytes: largest request body accepted (413 beyond it, before it is read whole).
    """

    def __init__(self, root: ServerRoot, *, rate: float = 0.0, burst: int = 0,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:  # fmt: skip
        self.root = root
        self.max_body_bytes = max_body_bytes
        self.limiter = RateLimiter(rate, burst or max(1, int(rate * 2)))
        self.metrics = Metrics()
        root.gc.observers.append(self.metrics.gc_run)
        self.access_log = AccessLog()
        self.store_cursors = CursorSealer(root.derive("cursor"), b"catalog")
        #: Reads of the catalog's head that run beside a request's work (roots in object storage).
        self.auth_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="memvault-auth")
        health = HealthViews(self)
        routes: list[BaseRoute] = [
            Route("/healthz", health.healthz, methods=["GET"]),
            Route("/readyz", health.readyz, methods=["GET"]),
            Route("/metrics", health.metrics, methods=["GET"]),
        ]
        for view_class, methods in _METHODS.items():
            view: ApiView = view_class(self)
            # Every method reaches the view, which answers 405 itself in the API's envelope.
            routes.append(Route(view.route, view.handle, methods=sorted({*methods, *_ANY_METHOD})))
        routes.append(Mount("/ui", app=ReviewApp.served(root).asgi))  # the review UI (memvault.ui)
        self.asgi = Starlette(routes=routes, exception_handlers={404: self._not_found, 405: self._not_found},
                              lifespan=self._lifespan)  # fmt: skip

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        yield
        self.auth_pool.shutdown(wait=True)
        await run_in_threadpool(self.root.close)  # requests in flight have finished

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        response = error_response(ApiError(404, "not_found_error", "No such endpoint."), new_id("req_"))
        response.headers["cache-control"] = "no-store"
        return response

    @staticmethod
    def _secret(headers: Mapping[str, str]) -> str | None:
        secret = headers.get("x-api-key")
        header = headers.get("authorization")
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer":
                secret = value.strip()
        return secret or None

    def authenticate(self, headers: Mapping[str, str]) -> tuple[ApiKeyRecord, Registry]:
        """The live API key of a request (``Authorization: Bearer`` or ``x-api-key``) and the
        registry it was read in (the catalog's head); 401 otherwise."""
        secret = self._secret(headers)
        if not secret:
            raise ApiError(401, "authentication_error", "An API key is required (Authorization: Bearer or x-api-key).")
        registry = self.root.registry()
        key = self.root.authenticate(secret, registry)
        if key is None:
            raise ApiError(401, "authentication_error", "Invalid or revoked API key.")
        return key, registry

    def provisional(self, headers: Mapping[str, str]) -> tuple[ApiKeyRecord, Registry] | None:
        """For a root in object storage, the request's key as the last catalog read knew it (no
        request to the bucket), so its work can start while :meth:`authenticate` reads the head;
        None for a local root or a key the last read did not know (then it waits)."""
        if not self.root.remote:
            return None
        secret = self._secret(headers)
        registry = self.root.last_registry()
        if not secret or not registry.commit_id:
            return None
        key = self.root.authenticate(secret, registry)
        return (key, registry) if key is not None else None

    def observe(self, *, request_id: str, route: str, method: str, status: int, seconds: float, key_id: str,
                store_id: str) -> None:  # fmt: skip
        """Log and count one answered request."""
        self.metrics.observe(route, method, status, seconds)
        self.access_log.write(request_id=request_id, key_id=key_id, route=route, method=method, status=status,
                              ms=round(seconds * 1000, 2), store_id=store_id)  # fmt: skip
