"""The review UI's application object: the route table, the Jinja2 environment (autoescape on for
every template), the static files, the sessions, the jobs, and the states it keeps warm.

``ReviewApp.local(store, ...)`` is ``memvault ui``'s application (one store, a one-time login
token, pages at ``/``); ``ReviewApp.served(root)`` is ``/ui/`` of ``memvault serve`` (the memory
stores of a server root, an API key to log in, store pages at ``/ui/stores/<id>/``). ``.asgi`` is
the ASGI application (Starlette).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..errors import MemvaultError
from ..store import StoreState
from .backend import Access, Backend, LocalBackend, ServedBackend
from .jobs import Jobs
from .sessions import LoginToken, Session, Sessions
from .textview import show
from .views import checks, commit, dreams, erase, file, history, login, tree, undo
from .views.base import SECURITY_HEADERS, Ctx, Links, Page, Redirect, Reply, UiError, View

if TYPE_CHECKING:
    from ..server.root import ServerRoot
    from ..store import MemoryStore

__all__ = ["ReviewApp", "COOKIE"]

COOKIE = "memvault_ui"
_HERE = Path(__file__).parent
#: Decrypted states of past revisions kept warm (a tree page of another directory at the same
#: revision costs no decryption).
_STATES = 4
_PAGES: tuple[type[View], ...] = (
    *login.VIEWS, *tree.VIEWS, *file.VIEWS, *history.VIEWS, *commit.VIEWS, *checks.VIEWS, *dreams.VIEWS,
    *erase.VIEWS, *undo.VIEWS,
)  # fmt: skip


def _when(t: float | None) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if t is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _iso(t: float | None) -> str:
    if t is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class ReviewApp:
    """The review UI over ``backend``.

    Args:
        backend: which stores a session reaches (:class:`LocalBackend` or :class:`ServedBackend`).
        prefix: where the UI is mounted ("" or ``/ui``).
        token: ``memvault ui``'s one-time login token (None under ``serve``).
    """

    def __init__(self, backend: Backend, *, prefix: str = "", token: LoginToken | None = None) -> None:
        self.backend = backend
        self.prefix = prefix.rstrip("/")
        self.token = token
        self.cookie_name = COOKIE
        self.sessions = Sessions()
        self.jobs = Jobs()
        #: Store pages being prepared (:data:`views.base.PAGE_WAIT`), apart from the long jobs.
        self.pages = Jobs(workers=8, expected=(MemvaultError, UiError))
        #: ``host:port`` values a request may name (None: any; ``memvault ui`` sets them).
        self.allowed_hosts: set[str] | None = None
        self._states: OrderedDict[tuple[str, bytes, bytes], StoreState] = OrderedDict()
        self._states_lock = threading.Lock()
        self.env = Environment(
            loader=FileSystemLoader(_HERE / "templates"), autoescape=True, undefined=StrictUndefined,
            trim_blocks=True, lstrip_blocks=True,
        )  # fmt: skip
        self.env.globals.update(show=show, when=_when, iso=_iso, static=self.static_url, ui_root=self.prefix + "/")
        routes: list[BaseRoute] = []
        for view_class in _PAGES:
            view = view_class(self)
            path = view.path
            if view.store_page and backend.served:
                path = "/stores/{store_id}" + path
            elif view_class is tree.StoreHome and not backend.served:
                continue  # ``memvault ui``'s / is the login landing
            if view_class in (login.Landing,) and backend.served:
                continue
            if view_class in (login.StoreList, login.KeyLogin) and not backend.served:
                continue
            routes.append(Route(path, view.handle, methods=view.methods()))
        self.asgi = Starlette(routes=routes, exception_handlers={404: self._not_found, 405: self._not_allowed})

    @classmethod
    def local(cls, store: MemoryStore, *, actor: str, name: str) -> ReviewApp:
        """``memvault ui``'s application for ``store`` (writes attributed to ``actor``)."""
        return cls(LocalBackend(store, actor=actor, name=name), token=LoginToken())

    @classmethod
    def served(cls, root: ServerRoot, prefix: str = "/ui") -> ReviewApp:
        """``/ui/`` of ``memvault serve`` over ``root``."""
        return cls(ServedBackend(root), prefix=prefix)

    # -- requests --------------------------------------------------------------------------------

    def allow_port(self, port: int) -> None:
        """Accept only ``127.0.0.1:port`` and ``localhost:port`` as the Host (DNS rebinding)."""
        self.allowed_hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}

    def host_allowed(self, host: str) -> bool:
        return self.allowed_hosts is None or host.lower() in self.allowed_hosts

    def logged_in(self, session: Session) -> bool:
        """Whether a session is a login (under ``serve`` a session may only be waiting for one)."""
        return not self.backend.served or bool(session.key_id)

    def links(self, store_id: str) -> Links:
        """The links of a store's pages."""
        return Links(f"{self.prefix}/stores/{store_id}" if self.backend.served else self.prefix)

    def static_url(self, name: str) -> str:
        return f"{self.prefix}/static/{name}"

    def state_at(self, access: Access, commit_id: bytes) -> StoreState:
        """The decrypted state of ``commit_id`` of ``access``'s store, kept warm per head."""
        head = access.store.head[0]
        if commit_id == head:
            return access.store.state_at(head)
        key = (access.store_id, commit_id, head)
        with self._states_lock:
            found = self._states.get(key)
            if found is not None:
                self._states.move_to_end(key)
                return found
        state = access.store.state_at(commit_id)
        with self._states_lock:
            self._states[key] = state
            while len(self._states) > _STATES:
                self._states.popitem(last=False)
        return state

    # -- answers ---------------------------------------------------------------------------------

    def render(self, ctx: Ctx | None, page: Page) -> HTMLResponse:
        """``page``'s template with the values every page has."""
        access = ctx.access if ctx is not None else None
        session = ctx.session if ctx is not None else None
        values: dict[str, Any] = {
            "links": ctx.links if ctx is not None else Links(self.prefix),
            "csrf": session.csrf if session is not None else "",
            "store": access,
            "identity": ctx.identity if ctx is not None else None,
            "served": self.backend.served,
            "may_write": access.may_write if access is not None else False,
            "refresh": page.refresh,
            "logged_in": ctx is not None and ctx.identity is not None,
            "logout_url": self.prefix + "/logout",
            "nav": "",
        }
        values.update(page.values)
        text = self.env.get_template(page.template).render(values)
        return HTMLResponse(text, status_code=page.status)

    def respond(self, ctx: Ctx, reply: Reply) -> Response:
        """The response of a handler's reply, with the cookie it set."""
        if isinstance(reply, Page):
            response: Response = self.render(ctx, reply)
        elif isinstance(reply, Redirect):
            response = RedirectResponse(reply.location, status_code=303)
        else:
            response = reply
        if ctx.cookie is not None:  # a session cookie (no expiry: the browser forgets it when it quits)
            secure = ctx.request.url.scheme == "https"
            path = self.prefix + "/" if self.prefix else "/"
            if ctx.cookie:
                response.set_cookie(self.cookie_name, ctx.cookie, path=path, secure=secure, httponly=True,
                                    samesite="strict")  # fmt: skip
            else:
                response.delete_cookie(self.cookie_name, path=path, secure=secure, httponly=True, samesite="strict")
        return response

    def error_page(self, status: int, message: str) -> Response:
        """A page with ``message`` and nothing else of any store."""
        return self.render(None, Page("error.html", {"status": status, "message": message}, status=status))

    def login_required(self, request: Request) -> Response:
        """What a request without a live session gets: nothing of the store. ``memvault ui``: how
        to log in; under ``serve``: the API key form (with a session waiting for the login, for
        its CSRF token)."""
        if not self.backend.served:
            return self.render(None, Page("login_required.html", status=401))
        session = self.sessions.get(request.cookies.get(self.cookie_name))
        ctx = Ctx(request, self, session, None, request.query_params, {}, {})
        if session is None or session.key_id:  # none yet, or a login the catalog no longer knows
            ctx.session = session = self.sessions.new(waiting=True)
            ctx.cookie = session.id
        return self.respond(ctx, Page("login.html", {"failed": False}, status=401))

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        return self._secure(self.error_page(404, "No such page."))

    async def _not_allowed(self, request: Request, exc: Exception) -> Response:
        return self._secure(self.error_page(405, "This page does not take that method."))

    @staticmethod
    def _secure(response: Response) -> Response:
        for name, value in SECURITY_HEADERS.items():
            response.headers[name] = value
        return response
