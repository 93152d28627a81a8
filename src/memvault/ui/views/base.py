"""The base of every page of the review UI: login, CSRF, errors and headers, once.

A view subclass names its handlers per HTTP method (``get``, ``post``); each is a plain function
run in the thread pool with a :class:`Ctx` (the session, the query, the form, the store and its
:class:`Links`) and returns a :class:`Page` (a template and its values), a :class:`Redirect`,
or a Starlette response. Everything else is here:

- the ``Host`` header (``memvault ui``: only ``127.0.0.1:PORT`` and ``localhost:PORT``, against
  DNS rebinding);
- the session cookie; without a live session a page shows a login page and nothing of the store;
  under ``serve`` the session's API key is read again from the catalog at every request;
- on every POST: a form body (bounded, URL-encoded), an ``Origin`` (if sent) naming this host,
  no cross-site ``Sec-Fetch-Site``, and the session's CSRF token (else 403, nothing done);
- rights: a view that writes needs a session that may write (403 otherwise);
- time: a store's page is prepared beside its request; one not ready within :data:`PAGE_WAIT`
  seconds is answered by a page that says so and reloads itself until it is (the work goes on);
- errors as pages: a memvault error's message (safe to show), anything else a generic 500 whose
  type only is logged;
- on every answer: the Content-Security-Policy, ``Cache-Control: no-store``, ``nosniff``,
  ``Referrer-Policy: no-referrer``, framing refused, and ``Server-Timing`` (the server's time).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ... import errors
from ...errors import MemvaultError
from ...history import resolve
from ..backend import LOCAL_STORE, Access, Identity
from ..jobs import Job
from ..sessions import Session, same

if TYPE_CHECKING:
    from ...store import AnyBranch
    from ..app import ReviewApp

__all__ = ["Ctx", "Page", "done", "Redirect", "UiError", "View", "Links", "commit_of", "SECURITY_HEADERS"]

_log = logging.getLogger("memvault.ui")

#: Sent with every answer of the UI.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
#: Largest form body read (a redaction's text to match fits many times over).
MAX_FORM_BYTES = 64 * 1024
#: Longest query or form value accepted.
MAX_VALUE = 4096
#: Seconds a request waits for its page before answering that it is being prepared.
PAGE_WAIT = 0.15
_FULL_ID = re.compile(r"[0-9a-f]{40}")
_STATUS: tuple[tuple[type[MemvaultError], int], ...] = (
    (errors.NotFoundError, 404),
    (errors.PathNotFoundError, 404),
    (errors.StoreNotFoundError, 404),
    (errors.InvalidInputError, 400),
    (errors.InvalidPathError, 400),
    (errors.ConflictError, 409),
    (errors.PathConflictError, 409),
    (errors.LockedError, 503),
    (errors.SensitiveDataError, 422),
    (errors.RedactedError, 422),
    (errors.LimitExceededError, 422),
    (errors.PathExistsError, 422),
    (errors.EditError, 422),
)


class UiError(Exception):
    """An answer other than the page: its HTTP status and a message for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Page:
    """A template to render with ``values`` (``refresh``: reload after that many seconds)."""

    template: str
    values: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    refresh: int | None = None


def done(ctx: Ctx, nav: str, what: str, commit: str | None, paths: list[str], *, detail: str = "",
         remaining: tuple[str, ...] = ()) -> Page:  # fmt: skip
    """The page that reports a write: what was done, its commit (None: nothing had to change),
    the paths it changed, who it is attributed to, and a detail."""
    return Page("done.html", {"nav": nav, "what": what, "commit": commit, "paths": paths, "detail": detail,
                              "remaining": remaining, "actor": ctx.store.actor})  # fmt: skip


@dataclass
class Redirect:
    """A 303 to ``location`` (after a POST, or to drop a token from the address bar)."""

    location: str


Reply = Page | Redirect | Response


class Links:
    """The URLs of one store's pages (``base``: the store's prefix, "" for ``memvault ui``)."""

    def __init__(self, base: str) -> None:
        self.base = base

    def _url(self, where: str, **query: str | int | None) -> str:
        kept = {k: v for k, v in query.items() if v is not None and v != ""}
        return self.base + where + ("?" + urlencode(kept) if kept else "")

    def home(self) -> str:
        return self.base + "/"

    def tree(self, rev: str | None = None, path: str | None = None, start: int | None = None) -> str:
        return self._url("/tree", rev=rev, path=None if path == "/memories" else path, **{"from": start})

    def file(self, path: str, rev: str | None = None) -> str:
        return self._url("/file", path=path, rev=rev)

    def versions(self, path: str, rev: str | None = None, before: int | None = None) -> str:
        return self._url("/file/versions", path=path, rev=rev, before=before)

    def blame(self, path: str, rev: str | None = None) -> str:
        return self._url("/file/blame", path=path, rev=rev)

    def history(self, **filters: str | int | None) -> str:
        return self._url("/history", **filters)

    def commit(self, commit_id: str, mode: str | None = None, path: str | None = None, start: int | None = None) -> str:
        return self._url(f"/commit/{commit_id}", mode=None if mode == "split" else mode, path=path,
                         **{"from": start})  # fmt: skip

    def checks(self) -> str:
        return self.base + "/checks"

    def dreams(self) -> str:
        return self.base + "/dreams"

    def dream(self, dream_id: str, mode: str | None = None) -> str:
        return self._url(f"/dreams/{dream_id}", mode=mode)

    def merge(self, dream_id: str) -> str:
        return self.base + f"/dreams/{dream_id}/merge"

    def discard(self, dream_id: str) -> str:
        return self.base + f"/dreams/{dream_id}/discard"

    def redact(self, **query: str | int | None) -> str:
        return self._url("/redact", **query)

    def redaction(self, plan_id: str) -> str:
        return self.base + f"/redact/{plan_id}"

    def revert(self, commit_id: str) -> str:
        return self.base + f"/revert/{commit_id}"

    def restore(self, path: str | None = None, rev: str | None = None) -> str:
        return self._url("/restore", path=path, rev=rev)


@dataclass
class Ctx:
    """One request as a handler sees it."""

    request: Request
    app: ReviewApp
    session: Session | None
    identity: Identity | None
    query: Mapping[str, str]
    form: dict[str, str]
    params: dict[str, str]
    access: Access | None = None
    links: Links = field(default_factory=lambda: Links(""))
    #: Set by a handler: the session cookie's new value ("": remove it).
    cookie: str | None = None

    def arg(self, name: str, default: str = "") -> str:
        """A query parameter (at most :data:`MAX_VALUE` characters, else 400)."""
        value = self.query.get(name, default)
        if len(value) > MAX_VALUE:
            raise UiError(400, f"The parameter {name!r} is too long.")
        return value

    @property
    def store(self) -> Access:
        """The request's store (the view is a store's page)."""
        if self.access is None:  # pragma: no cover - only store pages ask
            raise UiError(404, "No store.")
        return self.access


def commit_of(store: AnyBranch, rev: str) -> bytes:
    """The commit a revision names: a full id is authenticated directly (no walk of the history),
    anything else goes through :func:`memvault.history.resolve`.

    Raises:
        UiError: 404 for a full id the store has no authentic commit for. InvalidInputError: as
        ``resolve`` (an unknown or malformed revision).
    """
    text = rev.strip()
    if text in ("", "HEAD"):
        return store.head[0]
    if _FULL_ID.fullmatch(text):
        try:
            store.commit(text.encode("ascii"))
        except errors.IntegrityError:
            raise UiError(404, "No authentic commit of this store has this id.") from None
        return text.encode("ascii")
    if len(text) > 200:
        raise UiError(400, "That revision is too long.")
    return resolve(store, text)


class View:
    """A kind of page. Subclasses set ``path`` (under the store's prefix, or the UI's root when
    ``store_page`` is False) and define ``get`` and/or ``post``."""

    path: ClassVar[str] = ""
    #: The page belongs to one store (its route has the store's prefix).
    store_page: ClassVar[bool] = True
    #: Reachable without logging in (the login pages and static files).
    public: ClassVar[bool] = False
    #: Every method of the view needs a session that may write.
    writes: ClassVar[bool] = False

    def __init__(self, app: ReviewApp) -> None:
        self.app = app

    @classmethod
    def methods(cls) -> list[str]:
        return [m for m in ("GET", "POST") if hasattr(cls, m.lower())]

    async def handle(self, request: Request) -> Response:
        """Answer one request (the route's endpoint)."""
        started = time.perf_counter()
        try:
            response = await self._answer(request)
        except UiError as err:
            response = self.app.error_page(err.status, err.message)
        except ClientDisconnect:
            response = self.app.error_page(400, "The form did not arrive whole; nothing was done.")
        except MemvaultError as err:
            response = self.app.error_page(_status_of(err), str(err).removeprefix("Error: "))
        except Exception as err:  # never the message: it may hold content or host paths
            _log.error("unexpected %s answering %s %s", type(err).__name__, request.method, self.path)
            _log.debug("its traceback (may name content; debug logging only)", exc_info=True)
            response = self.app.error_page(500, "Internal error; nothing more is shown here.")
        for name, value in SECURITY_HEADERS.items():
            response.headers[name] = value
        response.headers["server-timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
        return response

    async def _answer(self, request: Request) -> Response:
        app = self.app
        if not app.host_allowed(request.headers.get("host", "")):
            raise UiError(400, "This address is not the review UI's (Host header refused).")
        session = app.sessions.get(request.cookies.get(app.cookie_name))
        form: dict[str, str] = {}
        if request.method == "POST":
            form = await self._form(request)
            _check_origin(request)
            if session is None or not same(form.get("csrf", ""), session.csrf):
                raise UiError(403, "This form is not from a page of this session (CSRF check); nothing was done. "
                              "Reload the page and try again.")  # fmt: skip
        return await run_in_threadpool(self._serve, request, session, form)

    def _serve(self, request: Request, session: Session | None, form: dict[str, str]) -> Response:
        app = self.app
        identity = None
        if session is not None and app.logged_in(session):
            identity = app.backend.identity(session.key_id)
            if identity is None:  # the key was revoked: the session ends
                app.sessions.drop(session.id)
                session = None
        if identity is None and not self.public:
            return app.login_required(request)
        handler = getattr(self, request.method.lower())
        ctx = Ctx(request, app, session, identity, request.query_params, form, dict(request.path_params))
        if not self.store_page:
            return app.respond(ctx, handler(ctx))
        assert identity is not None and session is not None
        store_id = ctx.params.get("store_id", LOCAL_STORE)

        def answer(_job: Job | None = None) -> tuple[Ctx, Reply]:
            assert identity is not None
            with app.backend.open(identity, store_id) as access:
                mine = replace(ctx, access=access, links=app.links(store_id))
                if self.writes and not access.may_write:
                    raise UiError(403, "Only an admin API key may do this.")
                return mine, handler(mine)

        if request.method != "GET":
            return app.respond(*answer())
        # A page is prepared beside the request: if it is not ready within PAGE_WAIT seconds (a
        # state, a diff or a listing not decrypted yet), the answer says so and reloads itself
        # until it is; the prepared page is given once, to the request that finds it done.
        key = ("page", session.id, str(request.url))
        job = app.pages.run(key, "preparing the page", answer, wait=PAGE_WAIT, again=False)
        if not job.done:
            ctx.access, ctx.links = None, app.links(store_id)
            return app.respond(ctx, Page("working.html", {"job": job}, status=202, refresh=1))
        app.pages.forget(key)
        if job.raised is not None:
            raise job.raised
        return app.respond(*job.result)

    async def _form(self, request: Request) -> dict[str, str]:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            raise UiError(415, "Forms are sent URL-encoded; nothing was done.")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_FORM_BYTES:
                raise UiError(413, "The form is too large; nothing was done.")
            chunks.append(chunk)
        try:
            pairs = parse_qsl(b"".join(chunks).decode("utf-8"), keep_blank_values=True, max_num_fields=64)
        except (UnicodeDecodeError, ValueError):
            raise UiError(400, "The form is malformed; nothing was done.") from None
        if any(len(v) > MAX_VALUE for _k, v in pairs):
            raise UiError(400, "A form field is too long; nothing was done.")
        return dict(pairs)


def _check_origin(request: Request) -> None:
    """Refuse a POST a browser says came from another site. (Under ``Referrer-Policy:
    no-referrer`` a browser sends ``Origin: null`` with its own forms; ``Sec-Fetch-Site`` still
    tells, and the CSRF token decides.)"""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise UiError(403, "This form came from another site; nothing was done.")
    origin = request.headers.get("origin")
    if origin not in (None, "null") and urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower():
        raise UiError(403, "This form came from another origin; nothing was done.")


def _status_of(err: MemvaultError) -> int:
    for kind, status in _STATUS:
        if isinstance(err, kind):
            return status
    return 500
