"""Logging in and out, the store list of ``/ui/``, and the static files.

``memvault ui``: the printed URL ``/?token=...`` makes a session the first time (the token is
then spent) and redirects to the same address without the token. ``serve``: ``/ui/`` shows the
API key form until a key logs in, then the stores that key may use. A login starts a new
session (a session waiting for a login never becomes the logged-in one).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from starlette.responses import Response

from ..backend import LOCAL_STORE
from .base import Ctx, Page, Redirect, Reply, UiError, View

__all__ = ["Landing", "StoreList", "KeyLogin", "Logout", "Static", "VIEWS"]

_STATIC = Path(__file__).parent.parent / "static"
_TYPES = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


class Landing(View):
    """``memvault ui``'s ``/``: the login token's landing, then the store's tree."""

    path = "/"
    store_page = False
    public = True

    def get(self, ctx: Ctx) -> Reply:
        token = ctx.arg("token")
        if ctx.identity is not None:
            return Redirect(ctx.app.links(LOCAL_STORE).tree())  # logged in (a spent token in the URL is ignored)
        if not token:
            return ctx.app.login_required(ctx.request)
        if ctx.app.token is None or not ctx.app.token.spend(token):
            raise UiError(401, "This login link is not valid: its token is wrong or was used already. "
                          "Start `memvault ui` again for a new one.")  # fmt: skip
        session = ctx.app.sessions.new()
        ctx.cookie = session.id
        return Redirect(ctx.app.prefix + "/")


class StoreList(View):
    """``/ui/`` under ``serve``: the login form, or the stores the key may use."""

    path = "/"
    store_page = False

    def get(self, ctx: Ctx) -> Reply:
        assert ctx.identity is not None
        stores = ctx.app.backend.stores(ctx.identity)
        return Page("stores.html", {"stores": stores, "store_links": {s.id: ctx.app.links(s.id) for s in stores}})


class KeyLogin(View):
    """``POST /ui/login``: an API key (checked against the catalog) starts a session."""

    path = "/login"
    store_page = False
    public = True

    def post(self, ctx: Ctx) -> Reply:
        key_id = ctx.app.backend.login(ctx.form.get("key", ""))
        if key_id is None:
            return Page("login.html", {"failed": True}, status=401)
        if ctx.session is not None:
            ctx.app.sessions.drop(ctx.session.id)
        session = ctx.app.sessions.new(key_id)
        ctx.cookie = session.id
        return Redirect(ctx.app.prefix + "/")


class Logout(View):
    """``POST /logout``: the session ends."""

    path = "/logout"
    store_page = False
    public = True

    def post(self, ctx: Ctx) -> Reply:
        if ctx.session is not None:
            ctx.app.sessions.drop(ctx.session.id)
        ctx.cookie = ""
        ctx.session = None
        ctx.identity = None
        return Page("logged_out.html")


class Static(View):
    """The stylesheet and the script (nothing of any store)."""

    path = "/static/{name}"
    store_page = False
    public = True
    _cache: ClassVar[dict[str, bytes]] = {}

    def get(self, ctx: Ctx) -> Reply:
        name = ctx.params.get("name", "")
        kind = _TYPES.get(name)
        if kind is None:
            raise UiError(404, "No such file.")
        data = self._cache.get(name)
        if data is None:
            data = self._cache[name] = (_STATIC / name).read_bytes()
        return Response(data, media_type=kind)


VIEWS: tuple[type[View], ...] = (Landing, StoreList, KeyLogin, Logout, Static)
