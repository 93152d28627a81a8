"""Every method of ``client.beta.memory_stores``, ``.memories`` and ``.memory_versions`` of the
real ``anthropic`` SDK against ``memvault serve`` over HTTP on loopback, with the shapes,
defaults and rules the memory-stores API documents."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

import anthropic
import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

from serversupport import Served  # noqa: E402


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def client(served: Served) -> anthropic.Anthropic:
    return served.client()


@pytest.fixture
def store_id(client: anthropic.Anthropic) -> str:
    return client.beta.memory_stores.create(name="Team preferences").id


# -- memory stores -------------------------------------------------------------------------------


def test_store_create_retrieve_list_shapes(client: anthropic.Anthropic) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    store = client.beta.memory_stores.create(name="Prefs", description="what users like", metadata={"team": "a"})
    assert store.type == "memory_store"
    assert store.id.startswith("memstore_")
    assert (store.name, store.description, store.metadata) == ("Prefs", "what users like", {"team": "a"})
    assert store.archived_at is None
    assert before <= store.created_at <= datetime.now(timezone.utc)
    assert store.updated_at == store.created_at
    again = client.beta.memory_stores.retrieve(store.id)
    assert again.model_dump() == store.model_dump()
    bare = client.beta.memory_stores.create(name="Bare")
    assert bare.description == "" and bare.metadata == {}
    assert [s.id for s in client.beta.memory_stores.list()] == [store.id, bare.id]


def test_store_update_patches_metadata_and_clears_description(client: anthropic.Anthropic) -> None:
    store = client.beta.memory_stores.create(name="A", description="d", metadata={"a": "1", "b": "2"})
    updated = client.beta.memory_stores.update(store.id, metadata={"a": None, "c": "3"}, description="")
    assert updated.metadata == {"b": "2", "c": "3"}
    assert updated.description == ""
    assert updated.name == "A"
    assert updated.updated_at > store.updated_at
    renamed = client.beta.memory_stores.update(store.id, name="B")
    assert renamed.name == "B" and renamed.metadata == {"b": "2", "c": "3"}


def test_store_metadata_limits_apply_after_the_merge(client: anthropic.Anthropic) -> None:
    store = client.beta.memory_stores.create(name="A", metadata={f"k{i}": "v" for i in range(16)})
    with pytest.raises(anthropic.BadRequestError) as err:
        client.beta.memory_stores.update(store.id, metadata={"one-more": "v"})
    assert "16" in err.value.message
    # Removing one while adding one stays within the limit.
    ok = client.beta.memory_stores.update(store.id, metadata={"k0": None, "one-more": "v"})
    assert len(ok.metadata) == 16 and "k0" not in ok.metadata
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.create(name="x" * 256)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.create(name="bad\x07name")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.create(name="A", description="d" * 1025)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.create(name="A", metadata={"k": "v" * 513})


def test_store_list_pages_filters_and_archived(client: anthropic.Anthropic) -> None:
    ids = [client.beta.memory_stores.create(name=f"s{i}").id for i in range(5)]
    first = client.beta.memory_stores.list(limit=2)
    assert [s.id for s in first.data] == ids[:2]
    assert first.next_page
    assert [s.id for s in client.beta.memory_stores.list(limit=2)] == ids  # the SDK follows next_page
    client.beta.memory_stores.archive(ids[1])
    assert ids[1] not in [s.id for s in client.beta.memory_stores.list()]
    assert ids[1] in [s.id for s in client.beta.memory_stores.list(include_archived=True)]
    created = [client.beta.memory_stores.retrieve(i).created_at for i in ids]
    window = client.beta.memory_stores.list(created_at_gte=created[2], created_at_lte=created[3])
    assert [s.id for s in window] == ids[2:4]
    as_text = client.beta.memory_stores.list(created_at_gte=created[2].strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    assert [s.id for s in as_text] == ids[2:]


def test_archive_is_idempotent_and_blocks_updates_not_reads_or_deletes(client: anthropic.Anthropic) -> None:
    store = client.beta.memory_stores.create(name="A")
    memory = client.beta.memory_stores.memories.create(store.id, path="/a.md", content="x")
    archived = client.beta.memory_stores.archive(store.id)
    assert archived.archived_at is not None
    assert client.beta.memory_stores.archive(store.id).archived_at == archived.archived_at
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.update(store.id, name="B")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.memories.create(store.id, path="/b.md", content="y")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.memories.update(memory.id, memory_store_id=store.id, content="z")
    assert client.beta.memory_stores.memories.retrieve(memory.id, memory_store_id=store.id).content == "x"
    client.beta.memory_stores.memories.delete(memory.id, memory_store_id=store.id)
    assert client.beta.memory_stores.delete(store.id).type == "memory_store_deleted"


def test_store_delete_removes_store_and_its_directory(served: Served, client: anthropic.Anthropic) -> None:
    store = client.beta.memory_stores.create(name="Gone")
    client.beta.memory_stores.memories.create(store.id, path="/a.md", content="secret plans")
    assert (served.location / "stores" / store.id).is_dir()
    deleted = client.beta.memory_stores.delete(store.id)
    assert (deleted.id, deleted.type) == (store.id, "memory_store_deleted")
    assert not (served.location / "stores" / store.id).exists()
    with pytest.raises(anthropic.NotFoundError):
        client.beta.memory_stores.retrieve(store.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.memory_stores.memories.list(store.id)
    assert store.id not in [s.id for s in client.beta.memory_stores.list(include_archived=True)]


def test_unknown_store_is_404(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as err:
        client.beta.memory_stores.retrieve("memstore_" + "a" * 26)
    assert err.value.type == "not_found_error" if hasattr(err.value, "type") else True
    with pytest.raises(anthropic.NotFoundError):
        client.beta.memory_stores.memories.list("not-a-store")


# -- memories --------------------------------------------------------------------------------------


def test_memory_create_defaults_to_basic_view_and_retrieve_to_full(client: anthropic.Anthropic, store_id: str) -> None:
    created = client.beta.memory_stores.memories.create(store_id, path="/prefs/lang.md", content="Python 3.13\n")
    assert created.type == "memory"
    assert created.id.startswith("mem_")
    assert created.memory_store_id == store_id
    assert created.path == "/prefs/lang.md"
    assert created.content is None
    assert created.content_sha256 == sha("Python 3.13\n")
    assert created.content_size_bytes == len(b"Python 3.13\n")
    assert created.memory_version_id.startswith("memver_")
    assert created.created_at == created.updated_at
    full = client.beta.memory_stores.memories.retrieve(created.id, memory_store_id=store_id)
    assert full.content == "Python 3.13\n"
    basic = client.beta.memory_stores.memories.retrieve(created.id, memory_store_id=store_id, view="basic")
    assert basic.content is None and basic.content_sha256 == created.content_sha256
    with_content = client.beta.memory_stores.memories.create(store_id, path="/b.md", content="b", view="full")
    assert with_content.content == "b"
    empty = client.beta.memory_stores.memories.create(store_id, path="/empty.md", content="")
    assert empty.content_size_bytes == 0 and empty.content_sha256 == sha("")


def test_sha256_is_of_the_exact_utf8_bytes(client: anthropic.Anthropic, store_id: str) -> None:
    text = "café ☕ — naïve\r\nline two"  # not normalised, CRLF kept
    created = client.beta.memory_stores.memories.create(store_id, path="/u.md", content=text)
    assert created.content_sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert created.content_size_bytes == len(text.encode("utf-8"))
    assert client.beta.memory_stores.memories.retrieve(created.id, memory_store_id=store_id).content == text


def test_update_content_path_and_id_stays(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    m = memories.create(store_id, path="/a/one.md", content="v1")
    updated = memories.update(m.id, memory_store_id=store_id, content="v2")
    assert updated.id == m.id and updated.content is None
    assert updated.memory_version_id != m.memory_version_id
    assert updated.created_at == m.created_at and updated.updated_at > m.updated_at
    moved = memories.update(m.id, memory_store_id=store_id, path="/b/two.md")
    assert (moved.id, moved.path, moved.content_sha256) == (m.id, "/b/two.md", sha("v2"))
    both = memories.update(m.id, memory_store_id=store_id, path="/c.md", content="v3", view="full")
    assert (both.path, both.content) == ("/c.md", "v3")
    assert [x.path for x in memories.list(store_id)] == ["/c.md"]
    with pytest.raises(anthropic.NotFoundError):
        memories.update("mem_" + "a" * 26, memory_store_id=store_id, content="x")


def test_noop_update_makes_no_version(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    m = memories.create(store_id, path="/a.md", content="same")
    again = memories.update(m.id, memory_store_id=store_id, content="same", path="/a.md")
    assert again.memory_version_id == m.memory_version_id
    versions = client.beta.memory_stores.memory_versions.list(store_id, memory_id=m.id)
    assert len(versions.data) == 1


def test_precondition_conflict_and_idempotent_retry(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    m = memories.create(store_id, path="/a.md", content="one")
    pre = {"type": "content_sha256", "content_sha256": m.content_sha256}
    won = memories.update(m.id, memory_store_id=store_id, content="two", precondition=pre)
    # The same write sent again (a retry): the state already matches, so 200 and no new version.
    retried = memories.update(m.id, memory_store_id=store_id, content="two", precondition=pre)
    assert retried.memory_version_id == won.memory_version_id
    with pytest.raises(anthropic.ConflictError) as err:
        memories.update(m.id, memory_store_id=store_id, content="three", precondition=pre)
    assert err.value.status_code == 409
    assert err.value.body["error"]["type"] == "memory_precondition_failed_error"
    assert err.value.response.headers["x-should-retry"] == "false"
    assert memories.retrieve(m.id, memory_store_id=store_id).content == "two"
    with pytest.raises(anthropic.BadRequestError):
        memories.update(m.id, memory_store_id=store_id, content="x",
                        precondition={"type": "content_sha256", "content_sha256": "ABC"})  # fmt: skip


def test_delete_with_expected_hash(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    m = memories.create(store_id, path="/a.md", content="one")
    with pytest.raises(anthropic.ConflictError) as err:
        memories.delete(m.id, memory_store_id=store_id, expected_content_sha256=sha("other"))
    assert err.value.body["error"]["type"] == "memory_precondition_failed_error"
    assert memories.retrieve(m.id, memory_store_id=store_id).content == "one"
    deleted = memories.delete(m.id, memory_store_id=store_id, expected_content_sha256=m.content_sha256)
    assert (deleted.id, deleted.type) == (m.id, "memory_deleted")
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(m.id, memory_store_id=store_id)
    with pytest.raises(anthropic.NotFoundError):
        memories.delete(m.id, memory_store_id=store_id)


def test_path_conflicts_name_the_memory_in_the_way(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    file = memories.create(store_id, path="/notes/todo.md", content="x")
    for path, conflicting in (("/notes/todo.md", "/notes/todo.md"), ("/notes", "/notes/todo.md"),
                              ("/notes/todo.md/sub", "/notes/todo.md")):  # fmt: skip
        with pytest.raises(anthropic.ConflictError) as err:
            memories.create(store_id, path=path, content="y")
        error = err.value.body["error"]
        assert error["type"] == "memory_path_conflict_error"
        assert (error["conflicting_memory_id"], error["conflicting_path"]) == (file.id, conflicting)
        assert err.value.response.headers["x-should-retry"] == "false"
    other = memories.create(store_id, path="/other.md", content="z")
    with pytest.raises(anthropic.ConflictError) as err:
        memories.update(other.id, memory_store_id=store_id, path="/notes/todo.md")
    assert err.value.body["error"]["conflicting_memory_id"] == file.id


def test_a_directory_exists_only_while_a_memory_lies_under_it(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    below = memories.create(store_id, path="/x/y.md", content="y")
    with pytest.raises(anthropic.ConflictError):
        memories.create(store_id, path="/x", content="file now?")
    memories.delete(below.id, memory_store_id=store_id)
    created = memories.create(store_id, path="/x", content="file now")
    assert created.path == "/x"
    assert [m.path for m in memories.list(store_id)] == ["/x"]


def test_api_grammar_accepts_what_memvault_files_refuse(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    for path in ("/a:b?.md", "/CON", "/Notes.md", "/notes.md", "/ trailing space ", "/.git/config", "/dot."):
        assert memories.create(store_id, path=path, content=path).path == path
    paths = [m.path for m in memories.list(store_id)]
    assert "/Notes.md" in paths and "/notes.md" in paths


@pytest.mark.parametrize(
    "path",
    ["notes.md", "/", "/a/", "//a", "/a/./b", "/a/../b", "/a\x00b", "/a\u202eb", "/a\u2028b", "/cafe\u0301",
     "/" + "/".join(["s"] * 21), "/" + "x" * 1024],
)  # fmt: skip
def test_bad_paths_are_400(client: anthropic.Anthropic, store_id: str, path: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        client.beta.memory_stores.memories.create(store_id, path=path, content="x")
    assert err.value.response.headers["x-should-retry"] == "false"
    assert client.beta.memory_stores.memories.list(store_id).data == []


def test_path_limits_at_their_bounds(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    deep = "/" + "/".join(["s"] * 20)
    assert memories.create(store_id, path=deep, content="x").path == deep
    long = "/" + "y" * 1023
    assert memories.create(store_id, path=long, content="x").path == long


def test_content_limit(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    assert memories.create(store_id, path="/max.md", content="a" * 102_400).content_size_bytes == 102_400
    with pytest.raises(anthropic.BadRequestError) as err:
        memories.create(store_id, path="/over.md", content="a" * 102_401)
    assert "102400" in err.value.message
    with pytest.raises(anthropic.BadRequestError):
        memories.create(store_id, path="/multibyte.md", content="é" * 51_201)


def test_list_depth_prefix_and_pages(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    for path in ("/a.md", "/notes/x.md", "/notes/deep/y.md", "/notes/deep/z.md", "/notes-archive/w.md", "/z.md"):
        memories.create(store_id, path=path, content=path)
    everything = [m.path for m in memories.list(store_id)]
    assert everything == sorted(everything) and len(everything) == 6
    top = memories.list(store_id, depth=1)
    assert [(i.type, i.path) for i in top.data] == [
        ("memory", "/a.md"), ("memory_prefix", "/notes-archive/"), ("memory_prefix", "/notes/"), ("memory", "/z.md"),
    ]  # fmt: skip
    under = memories.list(store_id, path_prefix="/notes/")
    assert [m.path for m in under] == ["/notes/deep/y.md", "/notes/deep/z.md", "/notes/x.md"]
    one_level = memories.list(store_id, path_prefix="/notes/", depth=1)
    assert [(i.type, i.path) for i in one_level.data] == [("memory_prefix", "/notes/deep/"), ("memory", "/notes/x.md")]
    paged = memories.list(store_id, limit=1, depth=1)
    assert len(paged.data) == 1 and paged.next_page
    assert [i.path for i in memories.list(store_id, limit=1, depth=1)] == [i.path for i in top.data]
    full = memories.list(store_id, view="full", path_prefix="/notes/deep/")
    assert [m.content for m in full] == ["/notes/deep/y.md", "/notes/deep/z.md"]
    with pytest.raises(anthropic.BadRequestError):
        memories.list(store_id, path_prefix="/notes")  # must end with /
    with pytest.raises(anthropic.BadRequestError):
        memories.list(store_id, limit=101)
    with pytest.raises(anthropic.BadRequestError):
        memories.list(store_id, limit=21, view="full")
    assert len(memories.list(store_id, limit=20, view="full").data) == 6


def test_scrubber_masks_writes_and_refuses_secret_paths(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    created = memories.create(store_id, path="/creds.md", content=f"aws key {key} for deploys\n", view="full")
    assert key not in created.content and "[REDACTED:aws_access_key_id]" in created.content
    assert created.content_sha256 == sha(created.content)
    stored = memories.retrieve(created.id, memory_store_id=store_id)
    assert stored.content == created.content
    with pytest.raises(anthropic.BadRequestError) as err:
        memories.create(store_id, path=f"/{key}.md", content="x")
    assert key not in str(err.value.body)


# -- versions ----------------------------------------------------------------------------------


def test_versions_newest_first_with_filters_after_delete(served: Served, client: anthropic.Anthropic,
                                                         store_id: str) -> None:  # fmt: skip
    memories = client.beta.memory_stores.memories
    versions = client.beta.memory_stores.memory_versions
    m = memories.create(store_id, path="/a.md", content="one")
    memories.update(m.id, memory_store_id=store_id, content="two")
    memories.update(m.id, memory_store_id=store_id, path="/b.md")
    other = memories.create(store_id, path="/other.md", content="o")
    memories.delete(m.id, memory_store_id=store_id)
    listed = list(versions.list(store_id, memory_id=m.id))
    assert [v.operation for v in listed] == ["deleted", "modified", "modified", "created"]
    assert [v.path for v in listed] == ["/b.md", "/b.md", "/a.md", "/a.md"]
    assert listed[0].content is None and listed[0].content_sha256 is None and listed[0].content_size_bytes is None
    assert listed[1].content is None and listed[1].content_sha256 == sha("two")  # basic view
    assert all(v.memory_id == m.id and v.memory_store_id == store_id for v in listed)
    assert all(v.created_by.type == "api_actor" and v.created_by.api_key_id == served.admin_id for v in listed)
    everything = list(versions.list(store_id))
    assert len(everything) == 5 and everything[1].memory_id == other.id
    created_only = list(versions.list(store_id, operation="created"))
    assert {v.memory_id for v in created_only} == {m.id, other.id}
    assert list(versions.list(store_id, api_key_id=served.plain_id)) == []
    assert len(list(versions.list(store_id, api_key_id=served.admin_id))) == 5
    assert list(versions.list(store_id, session_id="nobody")) == []
    assert list(versions.list(store_id, service_account_id="svac_x")) == []
    paged = list(versions.list(store_id, limit=2))
    assert [v.id for v in paged] == [v.id for v in everything]
    full = versions.retrieve(listed[2].id, memory_store_id=store_id)
    assert full.content == "two"
    window = list(versions.list(store_id, created_at_gte=listed[1].created_at, created_at_lte=listed[1].created_at))
    assert [v.id for v in window] == [listed[1].id]
    with pytest.raises(anthropic.BadRequestError):
        versions.list(store_id, operation="renamed")  # type: ignore[arg-type]
    with pytest.raises(anthropic.NotFoundError):
        versions.retrieve("memver_nope", memory_store_id=store_id)


def test_redaction_keeps_who_and_when_and_destroys_the_rest(served: Served, client: anthropic.Anthropic,
                                                            store_id: str) -> None:  # fmt: skip
    memories = client.beta.memory_stores.memories
    versions = client.beta.memory_stores.memory_versions
    m = memories.create(store_id, path="/leak.md", content="the secret was hunter2")
    memories.update(m.id, memory_store_id=store_id, content="cleaned")
    old = list(versions.list(store_id, memory_id=m.id))[-1]
    with pytest.raises(anthropic.PermissionDeniedError):
        served.client(served.plain_key).beta.memory_stores.memory_versions.redact(old.id, memory_store_id=store_id)
    redacted = versions.redact(old.id, memory_store_id=store_id)
    assert (redacted.id, redacted.operation, redacted.created_at) == (old.id, old.operation, old.created_at)
    assert redacted.created_by == old.created_by
    assert (redacted.path, redacted.content, redacted.content_sha256, redacted.content_size_bytes) == (None,) * 4
    assert redacted.redacted_at is not None
    assert redacted.redacted_by.type == "api_actor" and redacted.redacted_by.api_key_id == served.admin_id
    again = versions.retrieve(old.id, memory_store_id=store_id)
    assert again.content is None and again.redacted_at == redacted.redacted_at
    assert versions.redact(old.id, memory_store_id=store_id).redacted_at == redacted.redacted_at  # idempotent
    head = list(versions.list(store_id, memory_id=m.id))[0]
    with pytest.raises(anthropic.ConflictError) as err:
        versions.redact(head.id, memory_store_id=store_id)
    assert err.value.body["error"]["type"] == "conflict_error"
    # The text is gone from every file of the root, not just hidden by the API.
    for path in served.location.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes()


# -- keys and rights ---------------------------------------------------------------------------------


def test_plain_keys_read_and_write_memories_but_not_stores(served: Served, store_id: str) -> None:
    worker = served.client(served.plain_key)
    m = worker.beta.memory_stores.memories.create(store_id, path="/w.md", content="from a worker")
    assert worker.beta.memory_stores.memories.retrieve(m.id, memory_store_id=store_id).content == "from a worker"
    assert [v.operation for v in worker.beta.memory_stores.memory_versions.list(store_id)] == ["created"]
    for call in (
        lambda: worker.beta.memory_stores.create(name="x"),
        lambda: worker.beta.memory_stores.update(store_id, name="x"),
        lambda: worker.beta.memory_stores.archive(store_id),
        lambda: worker.beta.memory_stores.delete(store_id),
    ):
        with pytest.raises(anthropic.PermissionDeniedError) as err:
            call()
        assert err.value.body["error"]["type"] == "permission_error"


def test_a_key_limited_to_stores_sees_no_other(served: Served, client: anthropic.Anthropic) -> None:
    mine = client.beta.memory_stores.create(name="mine").id
    theirs = client.beta.memory_stores.create(name="theirs").id
    _record, secret = served.root.create_key("limited", stores=(mine,))
    limited = served.client(secret)
    assert [s.id for s in limited.beta.memory_stores.list()] == [mine]
    limited.beta.memory_stores.memories.create(mine, path="/ok.md", content="ok")
    with pytest.raises(anthropic.NotFoundError):
        limited.beta.memory_stores.retrieve(theirs)
    with pytest.raises(anthropic.NotFoundError):
        limited.beta.memory_stores.memories.create(theirs, path="/no.md", content="no")


def test_revoked_and_missing_keys_are_401(served: Served, store_id: str) -> None:
    worker = served.client(served.plain_key)
    worker.beta.memory_stores.memories.list(store_id)
    served.root.revoke_key(served.plain_id)
    with pytest.raises(anthropic.AuthenticationError) as err:
        worker.beta.memory_stores.memories.list(store_id)
    assert err.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.AuthenticationError):
        served.client("mvk_" + "A" * 43).beta.memory_stores.list()
