"""``pull`` against the fake managed API (tests/fake_memory_stores.py): history replayed as commits
with the original authors and times, redacted and deleted versions, re-runs that import only what
is new, the scrubber on pulled content, conflicts with changes made in the store, retries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import all_store_bytes, make_store
from fake_memory_stores import FakeMemoryStores, sha
from memvault import history
from memvault.errors import IntegrityError, NotFoundError, ServiceError
from memvault.settings import ScrubSettings, StoreSettings
from memvault.transfer.migrate import ApiRefusedError, load_state, pull, push
from migratesupport import client, files, imported

AWS_ID = "AKIAQ7VXK2JD4NRP3W6T"
SESSION = {"type": "session_actor", "session_id": "sesn_0123"}
API = {"type": "api_actor", "api_key_id": "apikey_0456"}


@pytest.fixture
def fake() -> Iterator[FakeMemoryStores]:
    with FakeMemoryStores() as served:
        yield served


def test_history_becomes_one_commit_per_version_with_the_original_author_and_time(
    fake: FakeMemoryStores, tmp_path: Path
) -> None:
    sid = fake.create_store()
    fake.write(sid, "/notes/a.md", "first", actor=API)
    fake.write(sid, "/notes/a.md", "second", actor=SESSION)
    fake.write(sid, "/gone.md", "last words", actor=API)
    fake.delete(sid, "/gone.md", actor=SESSION)
    secret = fake.write(sid, "/secret.md", "leaked", actor=API)
    first_secret = secret.version
    fake.write(sid, "/secret.md", "cleaned", actor=API)
    fake.redact(sid, first_secret)
    remote = fake.versions(sid)
    store = make_store(tmp_path / "s")

    done = pull(store, client(fake.url), sid, history=True)

    assert done.ok and done.versions == 6 and done.commits == 6
    assert files(store) == {"/notes/a.md": "second", "/secret.md": "cleaned"}
    commits = [e for e in reversed(history.log(store)) if e.command == "migrate-pull"]
    assert [e.extra["version"] for e in commits] == [v.id for v in remote]
    assert [e.extra["op"] for e in commits] == [v.operation for v in remote]
    for entry, version in zip(commits, remote, strict=True):
        assert json.loads(entry.extra["actor"]) == version.actor
        assert entry.extra["time"] == version.to_json("basic")["created_at"]
        assert entry.extra["migrate"] == sid and entry.extra["memory"] == version.memory_id
    assert [(e.actor, e.session) for e in commits[:2]] == [("api:apikey_0456", ""), ("session", "sesn_0123")]
    # the deleted memory: its last state, then its deletion
    assert [e.paths for e in commits[2:4]] == [("/memories/gone.md",), ("/memories/gone.md",)]
    assert history.read_at(store, "/memories/gone.md", commits[2].commit_id) == b"last words"
    assert [c.op for c in commits[3].changes] == ["deleted"]
    # the redacted version: recorded, no content written; the file appears with the next version
    assert commits[4].extra.get("redacted") == "true" and commits[4].changes == ()
    assert commits[4].extra["sha"] == "" and "leaked" not in json.dumps([e.to_json() for e in commits])
    assert [c.op for c in commits[5].changes] == ["created"]


def test_a_second_pull_imports_only_new_versions(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/a.md", "one")
    store = make_store(tmp_path / "s")
    api = client(fake.url)
    pull(store, api, sid, history=True)
    head = store.head

    again = pull(store, api, sid, history=True)
    assert again.ok and again.commits == 0 and again.unchanged == 1 and store.head == head

    fake.write(sid, "/a.md", "two", actor=SESSION)
    fake.write(sid, "/b.md", "bee")
    third = pull(store, api, sid, history=True)
    assert third.versions == 2 and sorted(third.updated + third.created) == ["/a.md", "/b.md"]
    assert imported(store) == [v.id for v in fake.versions(sid)]
    assert files(store) == {"/a.md": "two", "/b.md": "bee"}


def test_without_history_one_commit_per_memory_of_its_current_state(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/a.md", "old")
    head = fake.write(sid, "/a.md", "new", actor=SESSION)
    old = fake.write(sid, "/b.md", "kept long")
    fake.expire(sid, old.version)  # past the service's retention: only the memory itself is left
    store = make_store(tmp_path / "s")

    done = pull(store, client(fake.url), sid)

    assert done.versions == 2 and files(store) == {"/a.md": "new", "/b.md": "kept long"}
    by_path = {e.paths[0]: e for e in history.log(store) if e.command == "migrate-pull"}
    assert by_path["/memories/a.md"].extra["version"] == head.version
    assert (by_path["/memories/a.md"].actor, by_path["/memories/a.md"].session) == ("session", "sesn_0123")
    assert by_path["/memories/b.md"].extra["op"] == "current"  # its version is gone: author unknown
    assert by_path["/memories/b.md"].actor == "unknown"

    fake.delete(sid, "/a.md", actor=SESSION)
    later = pull(store, client(fake.url), sid)
    assert later.deleted == ["/a.md"] and files(store) == {"/b.md": "kept long"}
    last = history.log(store, limit=1)[0]
    assert last.extra["op"] == "deleted" and (last.actor, last.session) == ("session", "sesn_0123")
    # and a pull with history afterwards finds nothing older to replay
    assert pull(store, client(fake.url), sid, history=True).commits == 0


def test_pulled_content_passes_the_stores_scrubber(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/keys.md", f"aws id {AWS_ID} here")
    fake.write(sid, f"/{AWS_ID}.md", "a secret in the name")
    fake.write(sid, "/plain.md", "nothing to see")
    store = make_store(tmp_path / "s")

    done = pull(store, client(fake.url), sid)

    text = files(store)
    assert AWS_ID not in text["/keys.md"] and text["/keys.md"].startswith("aws id ")
    assert done.masked == {"/keys.md": {"aws_access_key_id": 1}}
    assert [(r.path, r.reason) for r in done.refused] == [
        (f"/{AWS_ID}.md", "sensitive data in the path (aws_access_key_id)")
    ]
    assert f"/{AWS_ID}.md" not in text and not done.ok
    # the summary names kinds, never values: only the refused path itself holds the id
    assert AWS_ID not in json.dumps({k: v for k, v in done.to_json().items() if k != "refused"})

    rejecting = make_store(tmp_path / "r", StoreSettings(scrub=ScrubSettings(policy={"aws_access_key_id": "reject"})))
    refused = pull(rejecting, client(fake.url), sid)
    reasons = {r.path: r.reason for r in refused.refused}
    assert reasons["/keys.md"] == "sensitive data (aws_access_key_id)" and "/keys.md" not in files(rejecting)
    assert AWS_ID not in json.dumps(refused.to_json()["masked"])
    # recorded as refused: the next pull does not try it again
    assert pull(rejecting, client(fake.url), sid).commits == 0


def test_paths_the_store_refuses_are_listed(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/a:b.md", "a colon is reserved in memvault's grammar")
    fake.write(sid, "/" + "/".join("d" * 17) + ".md", "deeper than 16 levels")
    fake.write(sid, "/fine.md", "ok")
    store = make_store(tmp_path / "s")

    done = pull(store, client(fake.url), sid)

    assert files(store) == {"/fine.md": "ok"}
    reasons = sorted(r.reason for r in done.refused)
    assert reasons == ["path: it contains a reserved character", "path: it is nested deeper than 16 levels"]


def test_a_file_changed_in_the_store_is_a_conflict_and_force_takes_the_remote(
    fake: FakeMemoryStores, tmp_path: Path
) -> None:
    sid = fake.create_store()
    fake.write(sid, "/a.md", "v1")
    fake.write(sid, "/b.md", "b1")
    store = make_store(tmp_path / "s")
    api = client(fake.url)
    pull(store, api, sid)
    store.put_file("/memories/a.md", "local edit", actor="me")
    fake.write(sid, "/a.md", "v2")
    fake.write(sid, "/b.md", "b2")
    fake.write(sid, "/new.md", "n")
    store.put_file("/memories/new.md", "a local file of the same name", actor="me")

    done = pull(store, api, sid)

    assert not done.ok
    assert sorted((c.path, c.reason) for c in done.conflicts) == [
        ("/a.md", "changed in the store since the last sync"),
        ("/new.md", "a file of the store that was not synced is at this path"),
    ]
    assert files(store) == {"/a.md": "local edit", "/b.md": "b2", "/new.md": "a local file of the same name"}
    assert pull(store, api, sid).conflicts == done.conflicts  # still there, still not overwritten

    forced = pull(store, api, sid, force=True)
    assert forced.ok and files(store) == {"/a.md": "v2", "/b.md": "b2", "/new.md": "n"}
    assert b"local edit" in [history.read_at(store, "/memories/a.md", e.commit_id)
                             for e in history.log(store) if e.command == "put"]  # fmt: skip


def test_a_dry_run_writes_nothing(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/a.md", "one")
    fake.write(sid, "/a.md", "two")
    store = make_store(tmp_path / "s")
    head = store.head

    done = pull(store, client(fake.url), sid, history=True, dry_run=True)

    assert done.dry_run and done.versions == 2 and done.created == ["/a.md"] and done.updated == ["/a.md"]
    assert store.head == head and files(store) == {}
    assert fake.count("create_memory") == fake.count("update_memory") == fake.count("delete_memory") == 0


def test_rate_limits_and_server_errors_are_retried_and_counted(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    for i in range(24):
        fake.write(sid, f"/m{i:02}.md", str(i))
    fake.fail("list_memories", 429, headers={"retry-after": "2"})
    fake.fail("retrieve_version", 500, after=3, times=2)
    fake.fail("retrieve_version", 0, after=10)  # a dropped connection
    store = make_store(tmp_path / "s")
    api = client(fake.url)

    done = pull(store, api, sid)

    assert done.ok and len(files(store)) == 24 and done.retries == 4
    assert api.waits[0] == 2.0  # type: ignore[attr-defined]  # retry-after honoured
    assert done.waited == pytest.approx(sum(api.waits))  # type: ignore[attr-defined]


def test_retries_run_out_and_what_was_imported_stays(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    for i in range(5):
        fake.write(sid, f"/m{i}.md", str(i))
    fake.fail("retrieve_version", 503, after=2, times=3)
    store = make_store(tmp_path / "s")

    with pytest.raises(ServiceError) as caught:
        pull(store, client(fake.url, max_retries=2), sid)
    assert "HTTP 503, 2 retries made" in str(caught.value)
    assert len(files(store)) == 2

    done = pull(store, client(fake.url), sid)
    assert done.versions == 3 and len(files(store)) == 5 and len(set(imported(store))) == len(imported(store)) == 5


def test_unknown_store_wrong_key(fake: FakeMemoryStores, tmp_path: Path) -> None:
    store = make_store(tmp_path / "s")
    with pytest.raises(NotFoundError):
        pull(store, client(fake.url), "memstore_nothing")
    sid = fake.create_store()
    with pytest.raises(ApiRefusedError) as caught:
        pull(store, client(fake.url, key="sk-wrong"), sid)
    assert caught.value.status == 401 and "sk-wrong" not in str(caught.value)
    assert store.head[1] == 0


def test_a_memory_a_listing_missed_is_not_taken_for_deleted(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    moving = fake.write(sid, "/z.md", "z")
    store = make_store(tmp_path / "s")
    api = client(fake.url)
    pull(store, api, sid)
    listing = api.list_memories
    # a listing that misses it (a rename under the cursor of a paged listing does that)
    api.list_memories = lambda store_id: [m for m in listing(store_id) if m.id != moving.id]  # type: ignore[method-assign]

    assert pull(store, api, sid).deleted == [] and files(store) == {"/z.md": "z"}
    fake.delete(sid, "/z.md")
    assert pull(store, api, sid).deleted == ["/z.md"] and files(store) == {}


def test_the_state_is_in_the_history_and_survives_reopening(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    memory = fake.write(sid, "/a.md", "text")
    store = make_store(tmp_path / "s")
    pull(store, client(fake.url), sid)
    state = load_state(store, sid)
    assert state.entries[memory.id].path == "/a.md" and state.entries[memory.id].remote_sha == sha("text")
    assert list(load_state(store, "memstore_other").entries) == []
    # a record only a holder of the key could have written, and malformed: refused loudly
    store.transact(lambda txn: None, command="migrate-push", paths=(), actor="x", session="",
                   extra={"migrate": sid, "state": "{not json"})  # fmt: skip
    with pytest.raises(IntegrityError):
        load_state(store, sid)


def test_no_plaintext_beside_the_store(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    memory = fake.write(sid, "/canary-path-5b1e.md", "canary content 9d4c70aa", actor=SESSION)
    store = make_store(tmp_path / "s")
    pull(store, client(fake.url), sid, history=True)
    store.put_file("/memories/pushed-canary-2f8e.md", "pushed canary 61be0c", actor="me")
    push(store, client(fake.url), sid)
    store.close()

    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no side file
    secrets = [b"canary content 9d4c70aa", b"canary-path-5b1e", b"pushed-canary-2f8e", b"pushed canary 61be0c",
               memory.id.encode(), memory.version.encode(), sid.encode(), b"sesn_0123"]  # fmt: skip
    for name, data in all_store_bytes(tmp_path / "s"):
        for secret in secrets:
            assert secret not in data, (name, secret)


def test_a_rename_on_the_api_moves_the_file_and_keeps_its_lineage(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    notes = fake.write(sid, "/notes", "a file named like a directory")
    fake.write(sid, "/other.md", "other")
    store = make_store(tmp_path / "s")
    api = client(fake.url)
    pull(store, api, sid)
    with store.reading() as txn:
        lineage = txn.get("/memories/notes").file_id  # type: ignore[union-attr]
    fake.rename(sid, notes.id, "/notes/todo.md")  # below its own old path
    store.put_file("/memories/x/y.md", "a file of the store only", actor="me")
    fake.write(sid, "/x", "a memory where the store has a directory")

    done = pull(store, api, sid, history=True)

    assert done.updated == ["/notes/todo.md"]
    assert [(c.path, c.reason) for c in done.conflicts] == [
        ("/x", "the store has a directory here, holding /memories/x/y.md")
    ]
    assert files(store) == {"/notes/todo.md": "a file named like a directory", "/other.md": "other",
                            "/x/y.md": "a file of the store only"}  # fmt: skip
    with store.reading() as txn:
        assert txn.get("/memories/notes/todo.md").file_id == lineage  # type: ignore[union-attr]
    (moved,) = [e for e in history.log(store) if e.extra.get("op") == "modified"]
    assert moved.paths == ("/memories/notes", "/memories/notes/todo.md")
    record = history.log(store, limit=1)[0]  # the last version conflicted: the full record has a commit of its own
    assert record.command == "migrate-pull" and record.changes == () and "state" in record.extra
