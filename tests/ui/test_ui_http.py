"""The review UI over real HTTP on loopback (``memvault ui``'s application): login and its refusal,
the Host check, the headers of every answer, every page, hostile content escaped in the HTML,
CSRF and cross-site refusals that change nothing, and the confirmations of every write."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette", reason="the review UI needs memvault[server]")
pytest.importorskip("jinja2", reason="the review UI needs memvault[server]")
pytest.register_assert_rewrite("uisupport")

import uisupport  # noqa: E402
from uisupport import (  # noqa: E402
    BIDI,
    DREAM,
    IMG,
    LONG,
    NOTES,
    SCRIPT,
    Review,
    pages,
    wait_done,
)

from memvault import history  # noqa: E402

pytest_plugins = ["uisupport"]  # the fixtures: review

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; "
    "form-action 'self'; base-uri 'none'"
)
#: Text of the store that a page without a session must never show.
STORE_WORDS = ("green tea", "notes.md", "MEMORY.md", "reviewer", "hostile")


def _text(html: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities as written)."""
    return re.sub(r"<[^>]+>", "", html)


def test_login_needs_the_token_once(review: Review) -> None:
    client = review.client(login=False)
    for path in ("/", "/tree", f"/file?path={NOTES}", "/history", "/?token=" + "0" * 64):
        reply = client.get(path)
        assert reply.status == 401, path
        assert not any(word in reply.text for word in STORE_WORDS), path
        assert not reply.cookies
    logged = client.get("/?token=" + review.token)
    assert logged.status == 303 and logged.headers["location"] == "/"
    (cookie,) = logged.cookies
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    assert not any(a.startswith("secure") or a.startswith("max-age") for a in attributes)
    assert re.match(r"memvault_ui=[0-9a-f]{64}$", cookie.split(";")[0])
    home = client.get("/")
    assert home.status == 303 and home.headers["location"] == "/tree"
    assert "green tea" not in client.get("/tree").text and "notes.md" in client.get("/tree").text
    # The token is spent: another browser cannot use it.
    other = review.client(login=False)
    again = other.get("/?token=" + review.token)
    assert again.status == 401 and not again.cookies and "notes.md" not in again.text
    assert other.get("/tree").status == 401


def test_a_foreign_host_header_sees_nothing(review: Review) -> None:
    for host in (
        f"evil.example:{review.port}",
        "127.0.0.1",
        f"127.0.0.1:{review.port + 1}",
        f"attacker.localhost:{review.port}",
    ):
        client = uisupport.Client(review.port, host=host)
        session = review.app.sessions.new()
        client.cookie = f"memvault_ui={session.id}"
        for path in ("/tree", "/?token=" + review.token, f"/file?path={NOTES}"):
            reply = client.get(path)
            assert reply.status == 400, (host, path)
            assert not any(word in reply.text for word in STORE_WORDS)
    # The token was not spent by those requests, and localhost:PORT is this UI too.
    local = uisupport.Client(review.port, host=f"localhost:{review.port}")
    assert local.get("/?token=" + review.token).status == 303
    assert local.get("/tree").status == 200


def test_every_answer_has_the_security_headers(review: Review) -> None:
    client = review.client()
    paths = [*pages(review), "/static/ui.css", "/static/ui.js", "/nowhere", "/static/secret.txt"]
    answers = [client.get(p) for p in paths]
    answers.append(review.client(login=False).get("/tree"))
    answers.append(client.post("/checks", {"action": "audit"}))  # refused: no CSRF token
    for reply in answers:
        h = reply.headers
        assert h["content-security-policy"] == CSP
        assert h["cache-control"] == "no-store"
        assert h["x-content-type-options"] == "nosniff"
        assert h["referrer-policy"] == "no-referrer"
        assert h["x-frame-options"] == "DENY"
        assert reply.status == 404 or re.fullmatch(r"app;dur=[0-9.]+", h["server-timing"])


def test_every_page_answers(review: Review) -> None:
    client = review.client()
    for path in pages(review):
        reply = wait_done(lambda path=path: client.get(path))
        assert reply.status == 200, (path, reply.status, _text(reply.text)[-300:])
        assert "<h1>" in reply.text or '<nav class="crumbs"' in reply.text, path


def test_no_inline_script_style_or_event_handler_on_any_page(review: Review) -> None:
    client = review.client()
    for path in pages(review):
        html = wait_done(lambda path=path: client.get(path)).text
        tags = re.findall(r"<[a-zA-Z][^>]*>", html)
        for tag in tags:
            assert not re.search(r"\son[a-z]+\s*=", tag), (path, tag)
            assert not re.search(r"\sstyle\s*=", tag), (path, tag)
            assert not re.search(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", tag, re.I), (path, tag)
        scripts = re.findall(r"<script[^>]*>", html)
        assert scripts == ['<script src="/static/ui.js" defer>'], (path, scripts)


def test_hostile_content_is_text_in_the_html(review: Review) -> None:
    client = review.client()
    script = client.get(f"/file?path={SCRIPT}").text
    assert "&lt;script&gt;window.__pwned=1;alert(1)&lt;/script&gt;" in script
    img = client.get(f"/file?path={IMG}").text
    assert "&lt;img src=x onerror=&#34;window.__pwned=1;alert(2)&#34;&gt;" in img
    assert "<img src=x" not in img and 'href="javascript' not in img
    assert "[click me](javascript:window.__pwned=1)" in img  # shown as text, not a link
    bidi = client.get(f"/file?path={BIDI}").text
    for code in ("U+202E", "U+202C", "U+2066", "U+2069", "U+001B", "U+0000", "U+200B"):
        assert f'<span class="ctl" title="{code}">{code}</span>' in bidi
    assert not any(c in bidi for c in "\u202e\u202c\u2066\u2069\x1b\x00\u200b")
    long = client.get(f"/file?path={LONG}").text
    assert "L" * 5000 in long and "L" * 5001 not in long and "95000 more characters not shown" in long
    # An actor, a session and a file name from the store are text too, on every page naming them.
    log = client.get("/history").text
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;agent" in log and "<script>window" not in log
    assert 's<span class="ctl" title="U+202E">U+202E</span>3' in log
    listing = client.get("/tree?path=/memories/hostile").text
    assert "&#39;on x&amp;amp;y.md" in listing


def _head(r: Review) -> tuple[bytes, int]:
    return r.store.head


def test_csrf_and_cross_site_posts_change_nothing(review: Review) -> None:
    client = review.client()
    head = _head(review)
    csrf = client.csrf(f"/dreams/{DREAM}/merge")
    target = history.resolve(review.store, "HEAD").decode()
    attempts: list[tuple[str, dict[str, str], dict[str, str]]] = [
        (f"/dreams/{DREAM}/merge", {"head": ""}, {}),  # no token
        (f"/dreams/{DREAM}/merge", {"head": "", "csrf": "0" * 64}, {}),  # a wrong one
        (f"/dreams/{DREAM}/merge", {"head": "", "csrf": csrf}, {"Origin": "http://evil.example"}),
        (f"/dreams/{DREAM}/merge", {"head": "", "csrf": csrf}, {"Sec-Fetch-Site": "cross-site"}),
        (f"/revert/{target}", {"plan": "x"}, {}),
        ("/redact", {"scope": "file", "path": NOTES}, {}),
    ]
    for path, form, headers in attempts:
        reply = client.post(path, form, headers=headers)
        assert reply.status == 403, (path, headers, reply.status)
        assert "nothing was done" in reply.text
    # Another session's token is refused too.
    other = review.client()
    reply = other.post(f"/dreams/{DREAM}/merge", {"head": "", "csrf": csrf})
    assert reply.status == 403
    # Not a form at all.
    raw = client.request("POST", f"/dreams/{DREAM}/merge", headers={"Content-Type": "application/json"})
    assert raw.status == 415
    assert _head(review) == head
    assert review.store.branches() == [f"dream/{DREAM}"]


def test_dream_merge_is_one_commit_of_the_reviewed_head(review: Review) -> None:
    client = review.client()
    page = wait_done(lambda: client.get(f"/dreams/{DREAM}"))
    assert "flag flag-deleted" in page.text and "/memories/scratch.md" in page.text
    assert "<del>owner: sam</del>" not in page.text  # word marks: only the words that changed
    assert "<ins> (confirmed)</ins>" in page.text
    confirm = wait_done(lambda: client.get(f"/dreams/{DREAM}/merge"))
    head_of_dream = re.search(r'name="head" value="([0-9a-f]{40})"', confirm.text).group(1)
    csrf = client.csrf(f"/dreams/{DREAM}/merge")
    stale = client.post(f"/dreams/{DREAM}/merge", {"csrf": csrf, "head": "0" * 40})
    assert stale.status == 409 and review.store.head[1] == 10
    done = client.post(f"/dreams/{DREAM}/merge", {"csrf": csrf, "head": head_of_dream})
    assert done.status == 200, _text(done.text)
    meta = review.store.commit_meta(review.store.head[0])
    assert (meta.command, meta.actor, meta.extra["dream"]) == ("dream-merge", "ui:tester", DREAM)
    assert history.read_at(review.store, NOTES).decode().endswith("owner: sam (confirmed)\n")
    assert "/memories/scratch.md" not in {e.path for e in history.tree_at(review.store)}
    again = client.post(f"/dreams/{DREAM}/merge", {"csrf": csrf, "head": head_of_dream})
    assert again.status == 400 and "merged already" in again.text


def test_dream_discard_needs_the_typed_word(review: Review) -> None:
    client = review.client()
    page = wait_done(lambda: client.get(f"/dreams/{DREAM}/discard"))
    plan = re.search(r'name="plan" value="([0-9a-f]{32})"', page.text).group(1)
    word = re.search(r'data-word="(discard-[0-9a-f]{4})"', page.text).group(1)
    csrf = client.csrf(f"/dreams/{DREAM}")
    head = _head(review)
    wrong = client.post(f"/dreams/{DREAM}/discard", {"csrf": csrf, "plan": plan, "word": "discard"})
    assert wrong.status == 400 and "not the word shown" in wrong.text
    assert _head(review) == head and review.store.branches() == [f"dream/{DREAM}"]
    done = client.post(f"/dreams/{DREAM}/discard", {"csrf": csrf, "plan": plan, "word": word})
    assert done.status == 200 and "data key(s) destroyed" in done.text
    assert review.store.branches() == []
    meta = review.store.commit_meta(review.store.head[0])
    assert (meta.command, meta.actor) == ("redact", "ui:tester")
    used = client.post(f"/dreams/{DREAM}/discard", {"csrf": csrf, "plan": plan, "word": word})
    assert used.status == 409


def test_redaction_dry_run_then_typed_word_destroys_exactly_that(review: Review) -> None:
    client = review.client()
    csrf = client.csrf("/redact")
    old = history.resolve(review.store, "#3")  # the version of notes.md before the last edit
    made = client.post(
        "/redact", {"csrf": csrf, "scope": "version", "path": NOTES, "rev": old.decode(), "reason": "pii"}
    )
    assert made.status == 303
    plan_url = made.headers["location"]
    page = wait_done(lambda: client.get(plan_url))
    assert page.status == 200 and "Versions to destroy (dry run)" in page.text
    word = re.search(r'data-word="(redact-[0-9a-f]{4})"', page.text).group(1)
    head = _head(review)
    wrong = client.post(plan_url, {"csrf": csrf, "word": word.upper()})
    assert wrong.status == 400 and _head(review) == head
    assert history.read_at(review.store, NOTES, old)  # still readable
    done = client.post(plan_url, {"csrf": csrf, "word": word})
    assert done.status == 200 and "1 data key(s) destroyed" in done.text
    meta = review.store.commit_meta(review.store.head[0])
    assert (meta.command, meta.actor) == ("redact", "ui:tester")
    # The version shows who redacted it and when, never its content.
    shown = client.get(f"/file?path={NOTES}&rev={old.decode()}").text
    assert "redacted by ui:tester" in _text(shown) and "green tea\nmeeting on monday" not in shown
    versions = wait_done(lambda: client.get(f"/file/versions?path={NOTES}")).text
    assert "redacted by ui:tester" in _text(versions)
    assert client.post(plan_url, {"csrf": csrf, "word": word}).status == 404  # a plan works once


def test_redaction_refuses_when_the_history_changed_since_the_dry_run(review: Review) -> None:
    client = review.client()
    csrf = client.csrf("/redact")
    made = client.post("/redact", {"csrf": csrf, "scope": "file", "path": NOTES, "rev": ""})
    page = wait_done(lambda: client.get(made.headers["location"]))
    word = re.search(r'data-word="(redact-[0-9a-f]{4})"', page.text).group(1)
    uisupport.run(review.store, command="str_replace", path=NOTES, old_str="tuesday", new_str="wednesday")
    head = _head(review)
    reply = client.post(made.headers["location"], {"csrf": csrf, "word": word})
    assert reply.status == 409 and "nothing was redacted" in reply.text
    assert _head(review) == head


def test_revert_and_restore_make_the_previewed_changes(review: Review) -> None:
    client = review.client()
    last = review.store.head[0].decode()  # monday -> tuesday
    preview = wait_done(lambda: client.get(f"/revert/{last}"))
    assert "modified" in preview.text and NOTES in preview.text
    plan = re.search(r'name="plan" value="([0-9a-f]{32})"', preview.text).group(1)
    csrf = client.csrf("/history")
    done = client.post(f"/revert/{last}", {"csrf": csrf, "plan": plan})
    assert done.status == 200, _text(done.text)
    assert b"monday" in history.read_at(review.store, NOTES)
    assert review.store.commit_meta(review.store.head[0]).command == "revert"
    # Restore the file as it was before the reviewer's edit (#2).
    preview = wait_done(lambda: client.get(f"/restore?path={NOTES}&rev=%232"))
    plan = re.search(r'name="plan" value="([0-9a-f]{32})"', preview.text).group(1)
    uisupport.run(review.store, command="delete", path=NOTES)  # the restore would now create it, not modify it
    head = _head(review)
    stale = client.post("/restore", {"csrf": csrf, "plan": plan})
    assert stale.status == 409 and "previewed" in stale.text
    assert _head(review) == head  # nothing written
    preview = wait_done(lambda: client.get(f"/restore?path={NOTES}&rev=%232"))
    plan = re.search(r'name="plan" value="([0-9a-f]{32})"', preview.text).group(1)
    assert client.post("/restore", {"csrf": csrf, "plan": plan}).status == 200
    assert history.read_at(review.store, NOTES) == b"the user likes tea\nmeeting on monday\nowner: sam\n"


def test_logout_ends_the_session(review: Review) -> None:
    client = review.client()
    cookie = client.cookie
    csrf = client.csrf("/tree")
    out = client.post("/logout", {"csrf": csrf})
    assert out.status == 200 and any("memvault_ui=" in c for c in out.cookies)
    replay = uisupport.Client(review.port)
    replay.cookie = cookie
    assert replay.get("/tree").status == 401


def test_unknown_paths_revisions_and_long_parameters_are_refused_plainly(review: Review) -> None:
    client = review.client()
    cases: dict[str, int] = {
        "/file?path=/memories/nowhere.md": 404, "/tree?path=/memories/../etc": 400, f"/commit/{'0' * 40}": 404,
        "/tree?rev=%23999": 400, f"/file?path={'a' * 5000}": 400, "/history?op=exploded": 400,
        "/history?since=yesterday": 400, "/history?start=HEAD": 400, "/dreams/nothex": 400,
        "/redact/0123": 404,
    }  # fmt: skip
    for path, status in cases.items():
        reply = client.get(path)
        assert reply.status == status, (path, reply.status, _text(reply.text)[-200:])
        assert "Traceback" not in reply.text


def test_history_pages_with_a_cursor(review: Review, monkeypatch: pytest.MonkeyPatch) -> None:
    from memvault.ui.views import history as page

    monkeypatch.setattr(page, "PAGE", 4)
    client = review.client()
    seen: list[str] = []
    url: str | None = "/history"
    while url:
        html = client.get(url).text
        seen += re.findall(r'title="([0-9a-f]{40})">#', html)
        found = re.search(r'<a href="([^"]+)">Older commits</a>', html)
        url = found.group(1).replace("&amp;", "&") if found else None
    assert seen == [c.commit_id for c in history.iter_log(review.store)]
    monkeypatch.setattr(page, "SCAN_META", 3)
    html = client.get("/history?actor=reviewer").text
    assert "No match in the next 3 commits" in html and "Continue" in html


def test_a_slow_page_is_prepared_beside_its_request(review: Review, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from memvault.ui.views import base, file

    real = file.FileView.get

    def slow(self: file.FileView, ctx: base.Ctx) -> base.Reply:
        time.sleep(0.5)
        return real(self, ctx)

    monkeypatch.setattr(file.FileView, "get", slow)
    monkeypatch.setattr(base, "PAGE_WAIT", 0.05)
    client = review.client()
    first = client.get(f"/file?path={NOTES}")
    assert first.status == 202 and '<meta http-equiv="refresh" content="1">' in first.text
    assert "green tea" not in first.text
    page = wait_done(lambda: client.get(f"/file?path={NOTES}"))
    assert page.status == 200 and "green tea" in page.text
    # An error raised while the page was prepared is the answer of the request that finds it.
    missing = wait_done(lambda: client.get("/file?path=/memories/nowhere.md"))
    assert missing.status == 404 and "No file at this path" in missing.text
    # Another session does not get the page prepared for this one.
    other = review.client()
    assert other.get(f"/file?path={NOTES}").status == 202
