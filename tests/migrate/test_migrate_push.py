"""``push`` against the fake managed API: creates and preconditioned updates, conflicts with changes
made on the API (never overwritten), refusals of what the API cannot take, ``delete``, 409 path
conflicts, ``new_store``, dry runs, retries of writes whose answer was lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_store
from fake_memory_stores import FakeMemoryStores, sha
from memvault import history
from memvault.edits.files import remove
from memvault.settings import StoreSettings
from memvault.transfer.migrate import load_state, pull, push
from memvault.transfer.migrate.push import STORE_TAG, store_tag
from memvault.transfer.migrate.rules import content_problem, overlap, path_problem
from migratesupport import client, files


@pytest.fixture
def fake() -> Iterator[FakeMemoryStores]:
    with FakeMemoryStores() as served:
        yield served


def _store(tmp_path: Path, name: str = "s", settings: StoreSettings | None = None, **texts: str):  # type: ignore[no-untyped-def]
    store = make_store(tmp_path / name, settings)
    for path, text in texts.items():
        store.put_file(f"/memories/{path.replace('__', '/')}.md", text, actor="me")
    return store


def test_push_creates_then_updates_with_a_precondition_and_records_the_mapping(
    fake: FakeMemoryStores, tmp_path: Path
) -> None:
    sid = fake.create_store()
    store = _store(tmp_path, a="alpha", notes__b="beta")
    api = client(fake.url)

    first = push(store, api, sid)

    assert first.ok and sorted(first.created) == ["/a.md", "/notes/b.md"] and first.commits == 1
    assert fake.files(sid) == {"/a.md": "alpha", "/notes/b.md": "beta"}
    assert not [
        target for _m, target, _h in fake.requests if "a.md" in target or "notes" in target
    ]  # paths: bodies only
    record = history.log(store, limit=1)[0]
    assert record.command == "migrate-push" and record.changes == () and record.extra["migrate"] == sid
    assert sorted(record.paths) == ["/memories/a.md", "/memories/notes/b.md"]
    state = load_state(store, sid)
    assert {e.path: e.remote_sha for e in state.entries.values()} == {"/a.md": sha("alpha"), "/notes/b.md": sha("beta")}

    head = store.head
    again = push(store, api, sid)
    assert again.ok and again.unchanged == 2 and again.commits == 0 and store.head == head  # nothing to record

    store.put_file("/memories/a.md", "alpha 2", actor="me")
    third = push(store, api, sid)
    assert third.updated == ["/a.md"] and fake.files(sid)["/a.md"] == "alpha 2"
    assert fake.bodies[-1]["precondition"] == {"type": "content_sha256", "content_sha256": sha("alpha")}
    assert [v.operation for v in fake.versions(sid)] == ["created", "created", "modified"]


def test_a_change_made_on_the_api_since_the_last_sync_is_never_overwritten(
    fake: FakeMemoryStores, tmp_path: Path
) -> None:
    sid = fake.create_store()
    store = _store(tmp_path, a="a0", b="b0", c="c0")
    api = client(fake.url)
    push(store, api, sid)
    fake.write(sid, "/a.md", "changed by an agent", actor={"type": "session_actor", "session_id": "sesn_1"})
    fake.delete(sid, "/c.md")
    for name in "abc":
        store.put_file(f"/memories/{name}.md", f"{name}1", actor="me")

    done = push(store, api, sid)

    assert not done.ok and done.updated == ["/b.md"]
    assert sorted((c.path, c.reason) for c in done.conflicts) == [
        ("/a.md", "changed on the API since the last sync"),
        ("/c.md", "deleted on the API since the last sync"),
    ]
    assert fake.files(sid) == {"/a.md": "changed by an agent", "/b.md": "b1"}

    # the way out: pull (the API's version comes in), then push is clean again
    pull(store, api, sid, force=True)
    assert files(store)["/a.md"] == "changed by an agent"
    assert push(store, api, sid).conflicts == []


def test_a_writer_between_the_listing_and_the_update_loses_nothing(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    store = _store(tmp_path, a="a0", b="b0")
    api = client(fake.url)
    push(store, api, sid)
    store.put_file("/memories/a.md", "mine", actor="me")
    store.put_file("/memories/b.md", "mine too", actor="me")
    fake.before("update_memory", 1, lambda: fake.write(sid, "/a.md", "theirs"))

    done = push(store, api, sid)

    assert [(c.path, c.reason) for c in done.conflicts] == [("/a.md", "changed on the API meanwhile")]
    assert fake.files(sid) == {"/a.md": "theirs", "/b.md": "mine too"}


def test_what_the_api_cannot_take_is_refused_with_the_reason(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    roomy = StoreSettings(max_file_bytes=200_000, max_depth=30, max_path_bytes=2048)
    store = _store(tmp_path, settings=roomy, fine="ok")
    store.put_file("/memories/big.md", "x" * 102_401, actor="me")
    store.put_file("/memories/edge.md", "y" * 102_400, actor="me")
    store.put_file("/memories/image.png", b"\x89PNG\r\n\x1a\n" + bytes(8), actor="me")
    deep = "/memories/" + "/".join("d" * 21) + ".md"
    store.put_file(deep, "deep", actor="me")
    long = "/memories/" + "/".join(["n" * 200] * 6) + ".md"
    store.put_file(long, "long", actor="me")

    done = push(store, client(fake.url), sid)

    assert sorted(fake.files(sid)) == ["/edge.md", "/fine.md"]
    reasons = {r.path: r.reason for r in done.refused}
    assert reasons == {
        "/big.md": "102,401 bytes, over the API's limit of 102,400 bytes per memory",
        "/image.png": "binary file (the API stores UTF-8 text only)",
        deep[len("/memories") :]: "the path has 21 segments, over the API's limit of 20",
        long[len("/memories") :]: "the path is 1,209 bytes, over the API's limit of 1,024",
    }
    assert not done.ok


def test_deletions_only_with_delete_each_guarded_by_its_hash(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    store = _store(tmp_path, a="a", b="b", notes="a file that becomes a directory")
    api = client(fake.url)
    push(store, api, sid)
    for name in ("a", "b", "notes"):
        remove(store, f"/memories/{name}.md")
    store.put_file("/memories/notes.md/todo.md", "below a path kept on the API", actor="me")

    kept = push(store, api, sid)
    assert sorted(kept.kept) == ["/a.md", "/b.md", "/notes.md"] and kept.deleted == []
    assert [(r.path, r.reason) for r in kept.refused] == [
        ("/notes.md/todo.md", "the path overlaps /notes.md on the API (a path is a file or a directory, not both)")
    ]
    assert sorted(fake.files(sid)) == ["/a.md", "/b.md", "/notes.md"]

    fake.write(sid, "/b.md", "changed on the API")
    done = push(store, api, sid, delete=True)
    assert sorted(done.deleted) == ["/a.md", "/notes.md"] and done.created == ["/notes.md/todo.md"]
    assert [(c.path, c.reason) for c in done.conflicts] == [
        ("/b.md", "changed on the API since the last sync; not deleted")
    ]
    assert fake.files(sid) == {"/b.md": "changed on the API", "/notes.md/todo.md": "below a path kept on the API"}
    deletes = [r[1] for r in fake.requests if r[0] == "DELETE"]
    assert all(f"expected_content_sha256={sha('a')}" in t or f"expected_content_sha256={sha('a file that becomes a directory')}" in t
               for t in deletes) and len(deletes) == 2  # fmt: skip


def test_a_path_taken_on_the_api_is_adopted_only_with_the_same_content(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/same.md", "equal")
    fake.write(sid, "/other.md", "theirs")
    store = _store(tmp_path, same="equal", other="mine", late="mine late", clash="mine clash")
    # writers that create the same path between the listing and the create
    fake.before("create_memory", 1, lambda: fake.write(sid, "/clash.md", "theirs, concurrently"))
    fake.before("create_memory", 2, lambda: fake.write(sid, "/late.md", "mine late"))

    done = push(store, client(fake.url), sid)

    assert sorted(done.adopted) == ["/late.md", "/same.md"]
    assert sorted((c.path, c.reason) for c in done.conflicts) == [
        ("/clash.md", "the API has another memory at this path"),
        ("/other.md", "the API has another memory at this path"),
    ]
    assert fake.files(sid)["/other.md"] == "theirs" and fake.files(sid)["/clash.md"] == "theirs, concurrently"
    assert {e.path for e in load_state(store, sid).entries.values()} == {"/late.md", "/same.md"}


def test_a_write_whose_answer_was_lost_is_sent_again_without_a_duplicate(
    fake: FakeMemoryStores, tmp_path: Path
) -> None:
    sid = fake.create_store()
    store = _store(tmp_path, a="a0", b="b0")
    api = client(fake.url)
    push(store, api, sid)
    store.put_file("/memories/a.md", "a1", actor="me")
    store.put_file("/memories/c.md", "c0", actor="me")
    fake.fail("create_memory", 500, applied=True)
    fake.fail("update_memory", 0, applied=True)
    fake.fail("list_memories", 429, headers={"retry-after-ms": "250"})

    done = push(store, api, sid)

    assert done.ok and done.updated == ["/a.md"] and done.adopted == ["/c.md"] and done.retries == 3
    assert api.waits[0] == 0.25  # type: ignore[attr-defined]
    assert fake.files(sid) == {"/a.md": "a1", "/b.md": "b0", "/c.md": "c0"}
    assert [v.operation for v in fake.versions(sid)].count("created") == 3


def test_new_store_is_made_once(fake: FakeMemoryStores, tmp_path: Path) -> None:
    store = _store(tmp_path, a="alpha")
    api = client(fake.url)

    dry = push(store, api, new_store="Team", dry_run=True)
    assert dry.new_store == {"name": "Team", "id": "", "created": "true"} and dry.created == ["/a.md"]
    assert fake.stores == {}

    first = push(store, api, new_store="Team")
    (sid,) = fake.stores
    assert first.new_store == {"name": "Team", "id": sid, "created": "true"} and first.created == ["/a.md"]
    assert fake.stores[sid].metadata == {STORE_TAG: store_tag(store)}
    assert store_tag(store) != store.store_id.hex()[:32]

    again = push(store, api, new_store="Team")
    assert again.new_store == {"name": "Team", "id": sid, "created": "false"} and again.unchanged == 1
    assert list(fake.stores) == [sid] and again.commits == 0

    # killed after the store was made, before its record: found again by its name and tag
    other = _store(tmp_path, "o", b="beta")
    made = fake.create_store("Other", {STORE_TAG: store_tag(other)})
    fake.create_store("Other")  # same name, not ours
    found = push(other, api, new_store="Other")
    assert found.new_store == {"name": "Other", "id": made, "created": "false"} and fake.files(made) == {
        "/b.md": "beta"
    }


def test_a_dry_run_changes_nothing_on_either_side(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    store = _store(tmp_path, a="a", b="b", c="c")
    api = client(fake.url)
    push(store, api, sid)
    store.put_file("/memories/a.md", "a2", actor="me")
    store.put_file("/memories/d.md", "d", actor="me")
    remove(store, "/memories/b.md")
    before_api, before_versions, head = fake.files(sid), len(fake.versions(sid)), store.head
    sent = len(fake.requests)

    done = push(store, api, sid, delete=True, dry_run=True)

    assert done.dry_run and (done.updated, done.created, done.deleted, done.unchanged) == (
        ["/a.md"],
        ["/d.md"],
        ["/b.md"],
        1,
    )
    assert fake.files(sid) == before_api and len(fake.versions(sid)) == before_versions and store.head == head
    assert {r[0] for r in fake.requests[sent:]} == {"GET"}


def test_the_apis_path_and_content_rules() -> None:
    assert path_problem("/notes/a.md") is None and path_problem("/" + "é" * 511) is None  # 1,023 bytes
    assert path_problem("/cafe\u0301.md") == "the path: it is not in Unicode normalization form NFC"
    assert path_problem("/a\u202eb.md") == "the path: it contains a control, format, invisible or unassigned character"
    assert path_problem("/a/../b.md") == "the path: it contains a '.' or '..' segment"
    assert path_problem("/" + "/".join("a" * 20)) is None
    assert path_problem("/" + "/".join("a" * 21)) == "the path has 21 segments, over the API's limit of 20"
    assert path_problem("/" + "x" * 1023) is None
    assert path_problem("/" + "x" * 1024) == "the path is 1,025 bytes, over the API's limit of 1,024"
    assert content_problem("é".encode() * 51_200, binary=False) is None
    assert content_problem(b"\xff", binary=False) == "not UTF-8 text"
    assert overlap("/a", "/a/b") and overlap("/a/b", "/a") and not overlap("/a", "/ab") and not overlap("/a", "/a")
