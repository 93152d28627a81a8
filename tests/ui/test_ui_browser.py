"""The review UI in a real browser: Debian's Chromium driven by Playwright (no browser download).

Every test's page records each request the browser makes, each dialog and each console error
(a CSP violation is one): any request to another host than 127.0.0.1, any dialog, any console
error fails the test (``uisupport.Watched.check``). Skipped with the reason when Chromium or
Playwright is missing, unless ``MEMVAULT_TEST_REQUIRE`` names ``chromium`` (CI): then they fail.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("starlette", reason="the review UI needs memvault[server]")
pytest.importorskip("jinja2", reason="the review UI needs memvault[server]")
pytest.register_assert_rewrite("uisupport")

from uisupport import (  # noqa: E402
    BIDI,
    DREAM,
    IMG,
    LONG,
    NOTES,
    SCRIPT,
    SCRIPT_TEXT,
    Review,
    Watched,
    pages,
)

from memvault import history  # noqa: E402

pytest_plugins = ["uisupport"]  # the fixtures: review, browser, page


def _expect(target: Any) -> Any:
    """Playwright's assertions, which wait for the page to get there (a form's answer, a script's
    change), imported when used: without playwright the fixtures skip these tests first."""
    from playwright.sync_api import expect

    return expect(target)


def _login(page: Watched, review: Review) -> None:
    """Log the page's browser context in: with the printed address the first time, later (the
    token works once) with a session cookie made by the application."""
    if not review.token_used:
        review.token_used = True
        page.page.goto(f"{review.url}/?token={review.token}")
    else:
        session = review.app.sessions.new()
        page.page.context.add_cookies([{"name": "memvault_ui", "value": session.id, "url": review.url}])
        page.page.goto(f"{review.url}/")
    assert urlsplit(page.page.url).path == "/tree"


def _open(page: Watched, url: str) -> None:
    """Go to ``url`` and wait while the page says a job is still working."""
    deadline = time.monotonic() + 60
    page.page.goto(url)
    while page.page.locator("main h1", has_text="Working").count() and time.monotonic() < deadline:
        time.sleep(0.3)
        page.page.goto(url)


def _luminance(css: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", css)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_login_refusal_and_an_http_only_cookie(review: Review, page: Watched, browser: Any) -> None:
    p = page.page
    p.goto(f"{review.url}/tree")
    assert p.inner_text("h1") == "Login required" and "notes.md" not in p.content()
    p.goto(f"{review.url}/?token={'0' * 64}")
    assert "not valid" in p.inner_text("main")
    _login(page, review)
    assert review.token_used and "notes.md" in p.inner_text("main")
    assert p.evaluate("document.cookie") == ""  # out of reach of any script
    (cookie,) = p.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (
        "memvault_ui",
        True,
        "Strict",
        "/",
    )
    assert p.url == f"{review.url}/tree"  # the token left the address bar
    other = browser.new_context()
    try:
        q = other.new_page()
        q.goto(f"{review.url}/?token={review.token}")  # spent
        assert "not valid" in q.inner_text("main") and "notes.md" not in q.content()
    finally:
        other.close()


def test_every_page_runs_no_script_from_the_store(review: Review, page: Watched) -> None:
    _login(page, review)
    for path in pages(review):
        _open(page, review.url + path)
        assert page.page.locator("main").count() == 1, path
        assert not page.pwned(), path
    assert not page.dialogs
    loaded = {urlsplit(u).path for u in page.requests}
    assert {"/static/ui.css", "/static/ui.js"} <= loaded
    assert all(urlsplit(u).hostname == "127.0.0.1" for u in page.requests)


def test_hostile_content_is_shown_as_text(review: Review, page: Watched) -> None:
    p = page.page
    _login(page, review)
    p.goto(f"{review.url}/file?path={SCRIPT}")
    assert p.inner_text("table.content td.code") == SCRIPT_TEXT.rstrip("\n")
    p.goto(f"{review.url}/file?path={IMG}")
    text = p.inner_text("table.content")
    assert '<img src=x onerror="window.__pwned=1;alert(2)">' in text and "javascript:window.__pwned=1" in text
    assert p.locator("main img").count() == 0
    assert p.locator("a[href^='javascript:'], [onerror], [onclick], [onmouseover]").count() == 0
    p.goto(f"{review.url}/file?path={BIDI}")
    assert p.locator("span.ctl").count() == 8  # two escapes, NUL, 4 direction controls, a zero-width space
    shown = p.inner_text("table.content")
    assert "U+202E" in shown and not any(c in shown for c in "\u202e\u202c\u2066\u2069\x1b\u200b")
    p.goto(f"{review.url}/file?path={LONG}")
    assert "more characters not shown" in p.inner_text("main")
    assert p.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    p.goto(f"{review.url}/history")
    assert "<script>window.__pwned=1</script>agent" in p.inner_text("main")
    assert not page.pwned()


def test_a_tampered_csrf_token_is_refused_and_changes_nothing(review: Review, page: Watched) -> None:
    p = page.page
    _login(page, review)
    _open(page, f"{review.url}/dreams/{DREAM}/merge")
    head = review.store.head
    p.evaluate("document.querySelectorAll('input[name=csrf]').forEach(i => { i.value = '0'.repeat(64); })")
    p.click("form.confirm button[type=submit]")
    _expect(p.locator("h1")).to_have_text("Refused")
    assert "CSRF" in p.inner_text("main")
    assert review.store.head == head and review.store.branches() == [f"dream/{DREAM}"]


def test_dream_review_and_merge(review: Review, page: Watched) -> None:
    p = page.page
    _login(page, review)
    p.click("nav[aria-label='Store pages'] >> text=Dreams")
    p.click(f"text={DREAM}")
    while p.locator("main h1", has_text="Working").count():
        p.wait_for_timeout(300)
        p.reload()
    assert p.locator(".flag-deleted").count() >= 1 and "/memories/scratch.md" in p.inner_text("main")
    assert p.inner_text("ins") == " (confirmed)"
    p.click("text=Merge into main…")
    p.click("form.confirm button[type=submit]")
    _expect(p.locator("h1")).to_have_text(f"Merged dream {DREAM}")
    meta = review.store.commit_meta(review.store.head[0])
    assert (meta.command, meta.actor, meta.extra["dream"]) == ("dream-merge", "ui:tester", DREAM)
    assert history.read_at(review.store, NOTES).endswith(b"owner: sam (confirmed)\n")


def test_dream_discard_with_the_typed_word(review: Review, page: Watched) -> None:
    p = page.page
    _login(page, review)
    _open(page, f"{review.url}/dreams/{DREAM}")
    p.click("text=Discard…")
    button = p.locator("form.confirm button[type=submit]")
    word = p.get_attribute("input#word", "data-word")
    assert word
    _expect(button).to_be_disabled()
    p.fill("input#word", "discard")
    _expect(button).to_be_disabled()
    p.fill("input#word", word)
    _expect(button).to_be_enabled()
    button.click()
    _expect(p.locator("h1")).to_have_text(f"Discarded dream {DREAM}")
    assert review.store.branches() == []


def test_redaction_shows_the_dry_run_then_needs_the_word(review: Review, page: Watched) -> None:
    p = page.page
    _login(page, review)
    p.goto(f"{review.url}/file?path={NOTES}")
    p.click("nav.tabs >> text=Redact…")
    p.check("input#s-file")
    p.click("button:has-text('Dry run')")
    p.wait_for_selector("h1:has-text('Confirm the redaction')")
    rows = p.locator("table.listing tbody tr")
    assert rows.count() == 3  # created, edited twice
    head = review.store.head
    button = p.locator("form.confirm button[type=submit]")
    _expect(button).to_be_disabled()
    p.fill("input#word", p.get_attribute("input#word", "data-word") or "")
    button.click()
    _expect(p.locator("h1")).to_have_text("Redacted")
    assert review.store.head[1] == head[1] + 1
    p.goto(f"{review.url}/file/versions?path={NOTES}&rev=%233")
    assert "redacted by ui:tester" in p.inner_text("main")
    assert "green tea" not in p.content()


def test_revert_and_restore_from_their_previews(review: Review, page: Watched) -> None:
    p = page.page
    _login(page, review)
    p.click("nav[aria-label='Store pages'] >> text=History")
    p.click("table.history tbody tr:first-child td:first-child a")
    p.click("text=Revert this commit…")
    p.wait_for_selector("form.confirm")
    assert "modified" in p.inner_text("ul.changes")
    p.click("form.confirm button[type=submit]")
    _expect(p.locator("h1")).to_have_text("Reverted")
    assert b"monday" in history.read_at(review.store, NOTES)
    p.goto(f"{review.url}/file?path={NOTES}&rev=%232")
    p.click("text=Restore this version…")
    p.click("form.confirm button[type=submit]")
    _expect(p.locator("h1")).to_have_text("Restored")
    assert history.read_at(review.store, NOTES) == b"the user likes tea\nmeeting on monday\nowner: sam\n"


def test_the_main_controls_work_from_the_keyboard(review: Review, page: Watched) -> None:
    p = page.page
    _login(page, review)
    p.keyboard.press("Tab")
    assert p.evaluate("document.activeElement.textContent") == "Skip to content"
    p.keyboard.press("Enter")
    assert p.evaluate("document.activeElement.id") == "main"
    p.goto(f"{review.url}/tree")
    for _ in range(6):  # skip link, brand, Files, History
        p.keyboard.press("Tab")
        if p.evaluate("document.activeElement.textContent") == "History":
            break
    assert p.evaluate("document.activeElement.textContent") == "History"
    p.keyboard.press("Enter")
    p.wait_for_url("**/history")
    p.keyboard.press("/")
    assert p.evaluate("document.activeElement.id") == "f-actor"
    p.keyboard.type("reviewer")
    p.keyboard.press("Enter")
    p.wait_for_url("**/history?actor=reviewer**")
    assert set(p.locator("table.history tbody tr td:nth-child(3) a:first-child").all_inner_texts()) == {"reviewer"}
    p.locator("table.history tbody a").first.focus()
    p.keyboard.press("Enter")
    p.wait_for_url("**/commit/**")
    p.keyboard.press("u")
    p.wait_for_url("**mode=unified**")
    assert p.locator("table.diff.unified").count() >= 1


def test_a_narrow_window_has_no_horizontal_scroll(review: Review, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 375, "height": 740})
    watched = Watched(context.new_page())
    try:
        _login(watched, review)
        head = review.store.head[0].decode()
        for path in ("/tree", f"/file?path={NOTES}", f"/file?path={LONG}", f"/file/blame?path={NOTES}", "/history",
                     f"/commit/{head}", f"/dreams/{DREAM}", "/checks", f"/redact?path={NOTES}"):  # fmt: skip
            _open(watched, review.url + path)
            wide = watched.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert wide <= 0, (path, wide)
        watched.check()
    finally:
        context.close()


def test_dark_mode_is_readable(review: Review, browser: Any) -> None:
    colours = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme)
        watched = Watched(context.new_page())
        try:
            _login(watched, review)
            _open(watched, f"{review.url}/commit/{review.store.head[0].decode()}")
            style = "(s => [s.backgroundColor, s.color])(getComputedStyle(document.body))"
            background, text = watched.page.evaluate(style)
            added = watched.page.evaluate(
                "getComputedStyle(document.querySelector('tr.change td.new')).backgroundColor"
            )
            colours[scheme] = (_luminance(background), _luminance(text), _luminance(added))
            watched.check()
        finally:
            context.close()
    light, dark = colours["light"], colours["dark"]
    assert light[0] > 0.8 and light[1] < 0.3  # dark text on a light page
    assert dark[0] < 0.2 and dark[1] > 0.7  # light text on a dark page
    assert abs(dark[2] - dark[1]) > 0.4  # a changed line's background stays readable under its text
