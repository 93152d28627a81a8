"""The base of every API view: authentication, rights, rate limits, bodies, errors and headers.

A view subclass names its handlers per HTTP method (``get``, ``post``, ``patch``, ``delete``);
each is a plain function run in the server's thread pool with a :class:`Call` (the request's
path parameters, query, parsed JSON body, API key and id) and returns ``(status, JSON)``.
Everything else is here, once:

- the API key from ``Authorization: Bearer`` or ``x-api-key`` (401 ``authentication_error``);
- the key's rights (403 ``permission_error``) and its rate limit (429 ``rate_limit_error``);
- bodies bounded before they are read whole (413 ``request_too_large``), JSON objects only;
- every error as the API's envelope ``{"type": "error", "error": {...}, "request_id"}``, with a
  ``request-id`` header, ``x-should-retry: false`` on the deterministic ones and ``retry-after``
  on the ones worth retrying; a memvault error's message is safe to show, anything else becomes
  a generic 500 whose type only is logged;
- ``Cache-Control: no-store`` on every answer; one access-log line and the metrics per request.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from ...errors import MemvaultError
from ...memories.model import micros_of
from ...memories.ops import View
from ..catalog import ApiKeyRecord, Registry
from ..errors import ApiError, bad_request, error_response, from_memvault
from ..root import new_id

if TYPE_CHECKING:
    from ..app import ServerApp

__all__ = ["Call", "ApiView"]

_log = logging.getLogger("memvault.server")


@dataclass
class Call:
    """One request as a handler sees it."""

    request_id: str
    key: ApiKeyRecord
    params: dict[str, str]
    query: Mapping[str, str]
    body: dict[str, Any] = field(default_factory=dict)
    #: The catalog's records as the request was authenticated (one read of the catalog per request).
    registry: Registry = field(default_factory=Registry)
    #: Set by a handler: the memory store the request acted on (for the access log).
    store_id: str = ""
    #: Set by a handler that writes to ``store_id`` (checked again when the key is confirmed).
    writing: bool = False
    #: For a root in object storage: the catalog's head being read while the request's work starts
    #: with the key as the last read knew it (:meth:`confirm` waits for it).
    pending: Future[tuple[ApiKeyRecord, Registry]] | None = None

    def confirm(self) -> None:
        """Wait for the key's check at the catalog's head if it is still running, and check the
        request's rights again with what it found (401, 403, 404 or 400 as when checked first).
        Every answer and every write goes through here first."""
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        key, registry = pending.result()
        if key.id != self.key.id or key.admin < self.key.admin or set(key.stores) - set(self.key.stores):
            raise ApiError(401, "authentication_error", "The API key's rights changed; send the request again.")
        self.key, self.registry = key, registry
        if self.store_id:
            self.require_store(self.store_id)
            record = registry.stores.get(self.store_id)
            if record is None or record.deleting:
                raise ApiError(404, "not_found_error", "No memory store has this id.")
            if self.writing and record.archived_at is not None:
                raise bad_request("This memory store is archived; its memories cannot be created or updated.")

    def require_admin(self) -> None:
        """PermissionDeniedError unless the key is an admin key (confirmed first)."""
        self.confirm()
        if not self.key.admin:
            raise ApiError(403, "permission_error", "This API key may not do this; it needs an admin key.")

    def require_store(self, store_id: str) -> None:
        """404 unless the key may reach store ``store_id`` (other stores look absent to it)."""
        self.store_id = store_id
        if not self.key.may_use(store_id):
            raise ApiError(404, "not_found_error", "No memory store has this id.")

    def fields(self, allowed: set[str], required: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
        """The body, refused if it has a field not in ``allowed`` or lacks one of ``required``."""
        unknown = sorted(set(self.body) - allowed)
        if unknown:
            raise bad_request(f"Unknown field(s) in the request body: {', '.join(unknown)}.")
        missing = sorted(required - set(self.body))
        if missing:
            raise bad_request(f"Missing field(s) in the request body: {', '.join(missing)}.")
        return self.body

    def view(self, default: View) -> View:
        """The ``view`` query parameter (``basic`` or ``full``)."""
        value = self.query.get("view", default)
        if value == "basic":
            return "basic"
        if value == "full":
            return "full"
        raise bad_request("`view` must be `basic` or `full`.")

    def limit(self, view: str) -> int:
        """The ``limit`` query parameter: 1-100 (default 20), at most 20 with ``view=full``."""
        raw = self.query.get("limit", "20")
        cap = 20 if view == "full" else 100
        try:
            value = int(raw)
        except ValueError:
            raise bad_request("`limit` must be an integer.") from None
        if not 1 <= value <= cap:
            raise bad_request(f"`limit` must be between 1 and {cap}" + (" with view=full." if cap == 20 else "."))
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        """A ``true``/``false`` query parameter."""
        raw = self.query.get(name)
        if raw is None:
            return default
        if raw not in ("true", "false"):
            raise bad_request(f"`{name}` must be true or false.")
        return raw == "true"

    def time(self, name: str) -> int | None:
        """An RFC 3339 time query parameter (``Z`` or an offset) in microseconds since the epoch."""
        raw = self.query.get(name)
        if raw is None:
            return None
        try:
            when = datetime.fromisoformat(raw.replace("Z", "+00:00").replace(" ", "+"))
        except ValueError:
            raise bad_request(f"`{name}` must be an RFC 3339 time.") from None
        if when.tzinfo is None:
            raise bad_request(f"`{name}` must carry a time zone (Z or an offset).")
        return micros_of(when)


Handler = Callable[[Call], tuple[int, Any]]


class ApiView:
    """A kind of endpoint. Subclasses define ``get``/``post``/``patch``/``delete`` handlers;
    ``patch`` defaults to ``post`` where the API accepts both."""

    #: Route name for logs and metrics (the path template).
    route = ""

    def __init__(self, app: ServerApp) -> None:
        self.app = app

    def _handler(self, method: str) -> Handler | None:
        handler = getattr(self, method.lower(), None)
        if handler is None and method == "PATCH":
            handler = getattr(self, "post", None)
        return handler

    async def handle(self, request: Request) -> Response:
        """Answer one request (the route's endpoint)."""
        started = time.monotonic()
        request_id = new_id("req_")
        call: Call | None = None
        status = 500
        try:
            handler = self._handler(request.method)
            if handler is None:
                raise ApiError(405, "invalid_request_error", f"{request.method} is not allowed here.")
            body = await self._body(request) if request.method in ("POST", "PATCH") else {}
            # One hop to the thread pool: authentication (the catalog's head) and the handler.
            if request.method == "GET" and self.app.root.is_warm(request.path_params.get("memory_store_id")):
                # A read of a local store already open and indexed takes a few file reads: answered
                # here, without the thread pool's two hand-overs. Anything that may wait goes there.
                call, status, payload = self._serve(handler, request, request_id, body)
            else:
                call, status, payload = await run_in_threadpool(self._serve, handler, request, request_id, body)
            response: Response = JSONResponse(payload, status_code=status)
        except ApiError as err:
            response = error_response(err, request_id)
        except ClientDisconnect:  # the body never arrived whole: nothing was done
            response = error_response(bad_request("The client went away before the body arrived."), request_id)
        except MemvaultError as err:
            response = error_response(from_memvault(err), request_id)
        except Exception as err:  # never the message: it may hold content or host paths
            _log.error("unexpected %s answering %s %s", type(err).__name__, request.method, self.route)
            response = error_response(ApiError(500, "api_error", "Internal server error."), request_id)
        status = response.status_code
        response.headers["request-id"] = request_id
        response.headers["cache-control"] = "no-store"
        response.headers["x-content-type-options"] = "nosniff"
        self.app.observe(
            request_id=request_id, route=self.route, method=request.method, status=status,
            seconds=time.monotonic() - started, key_id=call.key.id if call else "",
            store_id=call.store_id if call else "",
        )  # fmt: skip
        return response

    def _serve(
        self, handler: Handler, request: Request, request_id: str, body: dict[str, Any]
    ) -> tuple[Call, int, Any]:
        early = self.app.provisional(request.headers)
        pending = None
        if early is None:
            key, registry = self.app.authenticate(request.headers)
        else:  # object storage: the catalog's head is read meanwhile (one round trip saved)
            key, registry = early
            pending = self.app.auth_pool.submit(self.app.authenticate, request.headers)
        self.app.limiter.take(key.id)
        call = Call(request_id, key, dict(request.path_params), request.query_params, body, registry=registry,
                    pending=pending)  # fmt: skip
        try:
            status, payload = handler(call)
            call.confirm()  # no answer leaves before the key is confirmed
        finally:
            if call.pending is not None:
                call.pending.cancel()
        return call, status, payload

    async def _body(self, request: Request) -> dict[str, Any]:
        limit = self.app.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > limit:
                    raise ApiError(413, "request_too_large", f"The request body is over {limit} bytes.")
            except ValueError:
                raise bad_request("Malformed Content-Length header.") from None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "request_too_large", f"The request body is over {limit} bytes.")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise bad_request("The request body is not valid JSON.") from None
        if not isinstance(body, dict):
            raise bad_request("The request body must be a JSON object.")
        return body
