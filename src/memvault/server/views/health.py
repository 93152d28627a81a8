"""``/healthz`` (the process answers), ``/readyz`` (the catalog is readable: storage and key
work), ``/metrics`` (Prometheus text). None needs an API key and none shows anything of a store;
keep ``/metrics`` behind the proxy (docs/server.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...errors import MemvaultError

if TYPE_CHECKING:
    from ..app import ServerApp

__all__ = ["HealthViews"]

_log = logging.getLogger("memvault.server")
_HEADERS = {"cache-control": "no-store"}


class HealthViews:
    """The operational endpoints of ``app``."""

    def __init__(self, app: ServerApp) -> None:
        self.app = app

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"}, headers=_HEADERS)

    async def readyz(self, request: Request) -> Response:
        try:
            await run_in_threadpool(self.app.root.registry)
        except MemvaultError as err:
            _log.warning("not ready: %s", type(err).__name__)
            return JSONResponse({"status": "unavailable"}, status_code=503, headers={**_HEADERS, "retry-after": "5"})
        return JSONResponse({"status": "ready"}, headers=_HEADERS)

    async def metrics(self, request: Request) -> Response:
        self.app.metrics.open_stores.set(self.app.root.open_count())
        return Response(self.app.metrics.render(), media_type=CONTENT_TYPE_LATEST, headers=_HEADERS)
