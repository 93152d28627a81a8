"""``/ui/`` of ``memvault serve`` over real HTTP: login with an API key (CSRF-checked, a new
session), plain keys read and admin keys also write, a key's store scope, a revoked key logged
out at its next request, and the API beside it unchanged."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the review UI needs memvault[server]")
pytest.importorskip("jinja2", reason="the review UI needs memvault[server]")
pytest.register_assert_rewrite("uisupport")

from uisupport import Client, run, wait_done  # noqa: E402

from memvault import history  # noqa: E402

NOTE = "/memories/notes.md"


def _store(served: Any, name: str) -> str:
    record = served.root.create_store(name)
    with served.root.memories(record.id) as memories:
        run(memories.store, command="create", path=NOTE, file_text=f"{name}: the user likes tea\n")
        run(
            memories.store,
            actor="agent-2",
            command="str_replace",
            path=NOTE,
            old_str="likes tea",
            new_str="likes green tea",
        )
    return record.id


def _login(served: Any, secret: str) -> Client:
    client = Client(served.port)
    form = client.get("/ui/")
    assert form.status == 401 and 'name="key"' in form.text
    waiting = client.cookie
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', form.text).group(1)
    reply = client.post("/ui/login", {"csrf": csrf, "key": secret})
    assert reply.status == 303 and reply.headers["location"] == "/ui/", reply.text
    (cookie,) = reply.cookies
    assert {"httponly", "samesite=strict", "path=/ui/"} <= {p.strip().lower() for p in cookie.split(";")}
    assert client.cookie != waiting  # a login is a new session
    return client


def test_login_with_an_api_key(served: Any) -> None:
    sid = _store(served, "team-notes")
    client = Client(served.port)
    page = client.get("/ui/")
    assert page.status == 401 and "team-notes" not in page.text
    for path in (f"/ui/stores/{sid}/tree", f"/ui/stores/{sid}/history", f"/ui/stores/{sid}/file?path={NOTE}"):
        reply = client.get(path)
        assert reply.status == 401 and "green tea" not in reply.text and "notes.md" not in reply.text
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', client.get("/ui/").text).group(1)
    assert client.post("/ui/login", {"key": served.plain_key}).status == 403  # no CSRF token
    bad = client.post("/ui/login", {"csrf": csrf, "key": "mvk_" + "A" * 43})
    assert bad.status == 401 and "not valid" in bad.text
    logged = _login(served, served.plain_key)
    listing = logged.get("/ui/")
    assert listing.status == 200 and "team-notes" in listing.text and sid in listing.text
    assert served.plain_key not in listing.text


def test_a_plain_key_reads_and_an_admin_key_also_writes(served: Any) -> None:
    sid = _store(served, "team-notes")
    base = f"/ui/stores/{sid}"
    with served.root.memories(sid) as memories:
        store = memories.store
        first = history.resolve(store, "#1").decode()
        head = store.head
    reads = [f"{base}/", f"{base}/tree", f"{base}/file?path={NOTE}", f"{base}/file/versions?path={NOTE}",
             f"{base}/file/blame?path={NOTE}", f"{base}/history", f"{base}/commit/{first}", f"{base}/checks",
             f"{base}/dreams"]  # fmt: skip
    writes = [f"{base}/redact?path={NOTE}", f"{base}/revert/{head[0].decode()}", f"{base}/restore?path={NOTE}&rev=%231"]
    plain = _login(served, served.plain_key)
    for path in reads:
        reply = wait_done(lambda path=path: plain.get(path))
        assert reply.status in (200, 303), (path, reply.status)
    assert ">Redact<" not in plain.get(f"{base}/tree").text
    assert "Revert this commit" not in plain.get(f"{base}/commit/{first}").text
    for path in writes:
        reply = plain.get(path)
        assert reply.status == 403 and "admin" in reply.text, path
    csrf = plain.csrf(f"{base}/tree")
    for path, form in ((f"{base}/redact", {"scope": "file", "path": NOTE}), (f"{base}/restore", {"plan": "x"}),
                       (f"{base}/revert/{head[0].decode()}", {"plan": "x"})):  # fmt: skip
        assert plain.post(path, {"csrf": csrf, **form}).status == 403
    with served.root.memories(sid) as memories:
        assert memories.store.head == head
    admin = _login(served, served.admin_key)
    assert ">Redact<" in admin.get(f"{base}/tree").text
    preview = wait_done(lambda: admin.get(f"{base}/revert/{head[0].decode()}"))
    plan = re.search(r'name="plan" value="([0-9a-f]{32})"', preview.text).group(1)
    done = admin.post(f"{base}/revert/{head[0].decode()}", {"csrf": admin.csrf(f"{base}/tree"), "plan": plan})
    assert done.status == 200
    with served.root.memories(sid) as memories:
        meta = memories.store.commit_meta(memories.store.head[0])
        assert (meta.command, meta.actor) == ("revert", served.admin_id)
        assert history.read_at(memories.store, NOTE) == b"team-notes: the user likes tea\n"


def test_a_key_reaches_only_its_stores(served: Any) -> None:
    mine = _store(served, "mine")
    theirs = _store(served, "theirs")
    _record, secret = served.root.create_key("scoped", stores=(mine,))
    client = _login(served, secret)
    listing = client.get("/ui/").text
    assert "mine" in listing and "theirs" not in listing and theirs not in listing
    assert client.get(f"/ui/stores/{mine}/tree").status == 200
    for path in ("tree", "history", f"file?path={NOTE}"):
        reply = client.get(f"/ui/stores/{theirs}/{path}")
        assert reply.status == 404 and "green tea" not in reply.text
    assert client.get("/ui/stores/memstore_" + "0" * 32 + "/tree").status == 404


def test_a_revoked_key_is_logged_out_at_its_next_request(served: Any) -> None:
    sid = _store(served, "team-notes")
    client = _login(served, served.plain_key)
    assert client.get(f"/ui/stores/{sid}/history").status == 200
    served.root.revoke_key(served.plain_id)
    reply = client.get(f"/ui/stores/{sid}/history")
    assert reply.status == 401 and 'name="key"' in reply.text and "green tea" not in reply.text
    assert client.get(f"/ui/stores/{sid}/history").status == 401


def test_the_api_beside_the_ui_is_unchanged(served: Any) -> None:
    status, headers, body = served.http("GET", "/v1/memory_stores")
    assert status == 200 and body["data"] == []
    status, _headers, body = served.http("GET", "/ui/nowhere", key=False)
    assert status == 404
    status, _headers, body = served.http("GET", "/v1/nowhere")
    assert status == 404 and body["type"] == "error"
