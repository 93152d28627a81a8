"""Test support for the review UI: a store seeded with hostile content, a dream and a history; the
UI served by uvicorn in a thread on a free port of 127.0.0.1; raw HTTP with a cookie; and the
browser (Debian's Chromium driven by Playwright, no browser download).

Fixtures (imported by the test modules that use them): ``review`` (``memvault ui``'s application
over a seeded store, served on loopback), ``browser`` (Chromium, one per test module) and ``page``
(a fresh browser context per test, which records every request the browser makes, every dialog
and every console error; the test fails if a request went anywhere but 127.0.0.1, a dialog
opened, or a console error (a CSP violation among them) was logged).

Browser tests skip with a visible reason when Chromium or Playwright is missing, unless
``MEMVAULT_TEST_REQUIRE`` (a comma-separated list, set by ``.ci/run``) names ``chromium``: then
they fail.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

import memvault
import needs
from conftest import make_store
from memvault.history import resolve
from memvault.protocol.commands import run_command
from memvault.settings import StoreSettings
from serversupport import serve_asgi, stop_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

DREAM = "0123456789abcdef"
INDEX = "/memories/MEMORY.md"
NOTES = "/memories/notes.md"
SCRIPT = "/memories/hostile/script.md"
IMG = "/memories/hostile/img.md"
BIDI = "/memories/hostile/bidi.md"
LONG = "/memories/hostile/long.md"
ODD_NAME = "/memories/hostile/'on x&amp;y.md"
HOSTILE_ACTOR = "<script>window.__pwned=1</script>agent"
SCRIPT_TEXT = "<script>window.__pwned=1;alert(1)</script>\n"
IMG_TEXT = '<img src=x onerror="window.__pwned=1;alert(2)">\n[click me](javascript:window.__pwned=1)\n'
BIDI_TEXT = "safe \u202eevil\u202c text \u2066iso\u2069 \x1b[31mred\x1b[0m nul\x00 zero\u200bwidth\n"
LONG_LINE = "L" * 100_000


def missing(what: str, reason: str) -> None:
    """Skip (or, where ``MEMVAULT_TEST_REQUIRE`` requires ``what``, fail) with ``reason`` (tests/needs.py)."""
    if what in needs.required():
        pytest.fail(f"{reason} ({needs.ENV} requires {what})", pytrace=False)
    pytest.skip(f"{reason}; {needs.NEEDS[what]}")


def run(store: Any, actor: str = "agent", session: str = "s1", **command: str) -> str:
    return str(run_command(store, command, actor=actor, session=session))


def seed(store: memvault.MemoryStore) -> None:
    """An index, notes edited by two actors, hostile content, a dream that consolidates."""
    run(store, command="create", path=INDEX, file_text="# Index\n- [notes](notes.md)\n- [hostile](hostile/)\n")
    run(store, command="create", path=NOTES, file_text="the user likes tea\nmeeting on monday\nowner: sam\n")
    run(store, actor="reviewer", session="s2", command="str_replace", path=NOTES, old_str="tea",
        new_str="green tea")  # fmt: skip
    run(store, actor=HOSTILE_ACTOR, session="s\u202e3", command="create", path=SCRIPT, file_text=SCRIPT_TEXT)
    run(store, command="create", path=IMG, file_text=IMG_TEXT)
    run(store, command="create", path=BIDI, file_text=BIDI_TEXT)
    run(store, command="create", path=LONG, file_text=LONG_LINE + "\nshort\n")
    run(store, command="create", path=ODD_NAME, file_text="odd name\n")
    run(store, command="create", path="/memories/scratch.md", file_text="temporary\n")
    run(store, command="str_replace", path=NOTES, old_str="monday", new_str="tuesday")
    branch = store.branch(f"dream/{DREAM}")
    branch.create(actor="dream", session=DREAM, extra={"model": "test-model"})
    run(branch, actor="dream", session=DREAM, command="delete", path="/memories/scratch.md")
    run(branch, actor="dream", session=DREAM, command="str_replace", path=NOTES, old_str="owner: sam",
        new_str="owner: sam (confirmed)")  # fmt: skip


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str
    cookies: list[str] = field(default_factory=list)


class Client:
    """Raw HTTP to one server on loopback, keeping the session cookie it is given."""

    def __init__(self, port: int, host: str | None = None) -> None:
        self.port = port
        self.host = host or f"127.0.0.1:{port}"
        self.cookie = ""

    def request(self, method: str, path: str, form: dict[str, str] | None = None, *,
                headers: dict[str, str] | None = None) -> Reply:  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = {"Host": self.host, **(headers or {})}
        if self.cookie:
            sent.setdefault("Cookie", self.cookie)
        body = None
        if form is not None:
            body = urlencode(form).encode()
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        text = response.read().decode("utf-8", "replace")
        conn.close()
        cookies = [v for k, v in response.getheaders() if k.lower() == "set-cookie"]
        for c in cookies:
            name_value = c.split(";")[0]
            self.cookie = "" if name_value.endswith("=") or "Max-Age=0" in c or "max-age=0" in c.lower() else name_value
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, text, cookies)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, form: dict[str, str], **kw: Any) -> Reply:
        return self.request("POST", path, form, **kw)

    def csrf(self, path: str) -> str:
        """The CSRF token on the page at ``path``."""
        page = self.get(path)
        found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
        assert found, f"no CSRF token on {path} ({page.status})"
        return found.group(1)


@dataclass
class Review:
    """``memvault ui``'s application over a seeded store, served on loopback."""

    store: memvault.MemoryStore
    app: Any
    port: int
    token: str
    #: Set by a test that used the token (it works once).
    token_used: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, *, login: bool = True) -> Client:
        """A client, logged in with a session of its own unless ``login`` is False (the login
        token works once: later clients get a session made directly)."""
        client = Client(self.port)
        if login:
            session = self.app.sessions.new()
            client.cookie = f"{self.app.cookie_name}={session.id}"
        return client


def pages(r: Review) -> list[str]:
    """Every kind of page of the seeded store (a write's page: its confirmation)."""
    head = r.store.head[0].decode()
    first_edit = resolve(r.store, "#3").decode()
    return [
        "/tree", "/tree?path=/memories/hostile", f"/tree?rev={first_edit}",
        f"/file?path={NOTES}", f"/file?path={NOTES}&rev=%233", f"/file/versions?path={NOTES}",
        f"/file/blame?path={NOTES}", f"/file?path={SCRIPT}", f"/file?path={IMG}", f"/file?path={BIDI}",
        f"/file?path={LONG}", "/history", "/history?actor=reviewer", "/history?command=create",
        f"/history?path={NOTES}", "/history?op=modified&since=2000-01-01", f"/commit/{head}",
        f"/commit/{first_edit}?mode=unified", "/checks", "/dreams", f"/dreams/{DREAM}",
        f"/dreams/{DREAM}?mode=unified", f"/dreams/{DREAM}/merge", f"/dreams/{DREAM}/discard",
        f"/redact?path={NOTES}", f"/revert/{head}", f"/restore?path={NOTES}&rev=%233",
    ]  # fmt: skip


def wait_done(fetch: Any, *, seconds: float = 60) -> Reply:
    """``fetch()`` again while the page says a job is still working (status 202)."""
    deadline = time.monotonic() + seconds
    while True:
        reply = fetch()
        if reply.status != 202 or time.monotonic() > deadline:
            return reply
        time.sleep(0.2)


def chromium_ready() -> None:
    """Skip or fail when the browser tests cannot run here."""
    if shutil.which(CHROMIUM) is None and not os.path.exists(CHROMIUM):
        missing("chromium", f"Chromium is not installed at {CHROMIUM} (apt-get install chromium chromium-driver)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing("chromium", "the Python package playwright is not installed (pip install 'memvault[test]')")


# -- fixtures (a test module imports the ones it uses) ------------------------------------------


@pytest.fixture
def review(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Review]:
    """(A page waits for itself up to 30 s here, not 0.15 s: on a busy test machine a page then
    never answers "being prepared"; ``test_a_slow_page_is_prepared_beside_its_request`` tests that.)"""
    from memvault.ui.app import ReviewApp
    from memvault.ui.views import base

    monkeypatch.setattr(base, "PAGE_WAIT", 30.0)

    store = make_store(tmp_path / "store", StoreSettings(durability="none"))
    seed(store)
    app = ReviewApp.local(store, actor="ui:tester", name="review-test")
    token = app.token.value
    server, thread, port = serve_asgi(app.asgi)
    app.allow_port(port)
    try:
        yield Review(store, app, port, token)
    finally:
        stop_server(server, thread)
        store.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium, for one test module: Playwright's synchronous API keeps its event loop running in
    this thread while it is open, which later tests' ``asyncio.run`` could not share."""
    chromium_ready()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=CHROMIUM_ARGS)  # fmt: skip
        except Exception as err:  # a broken install: say why
            missing("chromium", f"Chromium did not start: {type(err).__name__}: {str(err)[:200]}")
        try:
            yield launched
        finally:
            launched.close()


class Watched:
    """A Playwright page and what it did."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("dialog", self._dialog)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def pwned(self) -> bool:
        """Whether a script from the store ran (it sets ``window.__pwned``)."""
        return self.page.evaluate("typeof window.__pwned") != "undefined"

    def check(self) -> None:
        foreign = [u for u in self.requests if urlsplit(u).scheme not in ("data", "about")
                   and urlsplit(u).hostname != "127.0.0.1"]  # fmt: skip
        assert not foreign, f"requests left 127.0.0.1: {foreign}"
        assert not self.dialogs, f"dialogs opened: {self.dialogs}"
        relevant = [e for e in self.errors if "status of 4" not in e and "status of 5" not in e]
        assert not relevant, f"console errors: {relevant}"


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    watched = Watched(context.new_page())
    try:
        yield watched
        watched.check()
    finally:
        context.close()
