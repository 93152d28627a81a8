"""The memory-stores model over a store (:class:`memvault.memories.Memories`), in-process: ids that
survive renames and restarts, versions of changes made by any route (the API, the memory tool, an
operator), redaction remembered after a restart, and a random sequence of operations checked against
a plain model of what the API promises."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memvault
from conftest import PASSPHRASE, make_store
from memvault.erasure import redact as shred
from memvault.errors import NotFoundError, PathConflictError, PreconditionFailedError
from memvault.memories import Memories
from memvault.memories.ids import memory_id, parse_memory_id, parse_version_id, version_id
from memvault.settings import StoreSettings

API = StoreSettings(path_grammar="api", max_path_bytes=1033, max_depth=20, max_segment_bytes=1024)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def store(tmp_path: Path) -> memvault.MemoryStore:
    return make_store(tmp_path / "s", API)


def test_ids_round_trip_and_refuse_other_spellings() -> None:
    fid = bytes(range(16))
    assert parse_memory_id(memory_id(fid)) == fid
    assert parse_version_id(version_id(7, fid)) == (7, fid)
    for bad in (
        memory_id(fid).upper(),
        memory_id(fid)[:-1],
        memory_id(fid) + "0",
        "mem_" + "g" * 32,
        "memver_x",
        "",
        5,
    ):
        assert parse_memory_id(bad) is None or bad == memory_id(fid)  # type: ignore[arg-type]
    assert parse_version_id(version_id(7, fid).replace("memver_", "mem_")) is None


def test_ids_survive_renames_and_a_new_process(store: memvault.MemoryStore, tmp_path: Path) -> None:
    memories = Memories(store)
    m = memories.create("/a/one.md", "1", actor="k")
    moved = memories.update(m.id, path="/b/two.md", actor="k")
    assert moved.id == m.id
    store.close()
    again = Memories(memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE))
    found = again.retrieve(m.id)
    assert (found.id, found.path, found.content) == (m.id, "/b/two.md", "1")
    assert found.memory_version_id == moved.memory_version_id
    assert [v.id for v in again.versions(memory_id=m.id).data] == [moved.memory_version_id, m.memory_version_id]


def test_versions_of_the_memory_tool_and_an_operator(store: memvault.MemoryStore) -> None:
    tool = memvault.MemoryTool(store, actor="agent", session="sess-1")
    tool.call({"command": "create", "path": "/memories/dir/a.md", "file_text": "a\n"})
    tool.call({"command": "create", "path": "/memories/dir/b.md", "file_text": "b\n"})
    tool.call({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/moved"})
    store.put_file("/memories/op.md", "by an operator", actor="ops")
    memories = Memories(store)
    listed = memories.versions().data
    pairs = [(v.operation, v.path) for v in listed]
    # Newest first; the versions of one commit (the directory's rename) in the order of their ids.
    assert pairs[0] == ("created", "/op.md")
    assert set(pairs[1:3]) == {("modified", "/moved/a.md"), ("modified", "/moved/b.md")}
    assert set(pairs[3:5]) == {("created", "/dir/a.md"), ("created", "/dir/b.md")}
    assert listed[1].created_at == listed[2].created_at and listed[1].id != listed[2].id
    assert listed[0].created_by.to_json() == {"type": "user_actor", "user_id": "ops"}
    assert listed[1].created_by.to_json() == {"type": "session_actor", "session_id": "sess-1"}
    a = [m for m in memories.list().data if m.path == "/moved/a.md"][0]
    assert [v.path for v in memories.versions(memory_id=a.id).data] == ["/moved/a.md", "/dir/a.md"]


def test_a_redaction_by_the_api_is_remembered_after_a_restart(store: memvault.MemoryStore, tmp_path: Path) -> None:
    memories = Memories(store)
    m = memories.create("/leak.md", "secret one", actor="k")
    memories.update(m.id, content="clean", actor="k")
    memories.update(m.id, path="/renamed.md", actor="k")
    memories.redact(m.memory_version_id, actor="admin")
    store.close()
    fresh = Memories(memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE))
    versions = fresh.versions(memory_id=m.id).data
    assert [v.operation for v in versions] == ["modified", "modified", "created"]
    assert versions[-1].id == m.memory_version_id and versions[-1].redacted_by is not None
    assert versions[-1].path is None and versions[-1].content_sha256 is None
    assert fresh.retrieve(m.id).content == "clean"


def test_a_redaction_by_path_keeps_the_lineage_through_a_rename(store: memvault.MemoryStore, tmp_path: Path) -> None:
    memories = Memories(store)
    m = memories.create("/a.md", "v1", actor="k")
    memories.update(m.id, content="v2", actor="k")
    memories.update(m.id, content="v3", path="/b.md", actor="k")
    result = shred.shred_version(store, "/memories/a.md", "#2", actor="ops")  # the operator's redact of v2
    assert result.data_keys == 1
    (version,) = result.versions
    assert store.keyring.tombstone(bytes.fromhex(version.dek_id))["file"] == m.id.removeprefix("mem_")
    store.close()
    fresh = Memories(memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE))
    versions = fresh.versions().data
    assert {v.memory_id for v in versions} == {m.id}
    assert [(v.operation, v.path) for v in versions] == [
        ("modified", "/b.md"),
        ("modified", None),
        ("created", "/a.md"),
    ]
    assert versions[1].redacted_by is not None and versions[1].redacted_by.to_json()["type"] == "user_actor"


def test_preconditions_and_conflicts(store: memvault.MemoryStore) -> None:
    memories = Memories(store)
    a = memories.create("/a.md", "one", actor="k")
    with pytest.raises(PreconditionFailedError):
        memories.update(a.id, content="two", expected_sha256=sha("other"), actor="k")
    assert memories.update(a.id, content="one", expected_sha256=sha("other"), actor="k").memory_version_id == (
        a.memory_version_id
    )  # already as asked: no version
    with pytest.raises(PathConflictError) as err:
        memories.create("/a.md/b", "x", actor="k")
    assert (err.value.memory_id, err.value.path) == (a.id, "/a.md")
    with pytest.raises(NotFoundError):
        memories.retrieve("mem_" + "0" * 32)


# -- a random sequence against a model --------------------------------------------------------------

_PATHS = ["/a.md", "/b.md", "/d/x.md", "/d/y.md", "/d/e/z.md", "/d", "/e"]
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["create", "update", "rename", "delete"]),
        st.integers(0, 6),
        st.integers(0, 6),
        st.sampled_from(["", "one", "two", "three"]),
    ),  # fmt: skip
    max_size=25,
)


def _conflicts(paths: dict[str, str], path: str, moving: str | None) -> bool:
    """The API's file/directory rule: taken, or a file above or below it."""
    for other in paths:
        if other == moving:
            continue
        if other == path or path.startswith(other + "/") or other.startswith(path + "/"):
            return True
    return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_random_operations_match_the_model(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:
    store = make_store(tmp_path_factory.mktemp("m") / "s", API)
    memories = Memories(store)
    model: dict[str, str] = {}  # path -> content
    ids: dict[str, str] = {}  # path -> memory id
    for op, i, j, text in ops:
        path, other = _PATHS[i], _PATHS[j]
        if op == "create":
            if _conflicts(model, path, None):
                with pytest.raises(PathConflictError):
                    memories.create(path, text, actor="t")
            else:
                ids[path] = memories.create(path, text, actor="t").id
                model[path] = text
        elif path in model:
            mid = ids[path]
            if op == "update":
                memories.update(mid, content=text, actor="t")
                model[path] = text
            elif op == "rename":
                if other != path and _conflicts(model, other, path):
                    with pytest.raises(PathConflictError):
                        memories.update(mid, path=other, actor="t")
                else:
                    memories.update(mid, path=other, actor="t")
                    model[other] = model.pop(path)
                    ids[other] = ids.pop(path)
            else:
                memories.delete(mid, actor="t")
                del model[path], ids[path]
    listed = {m.path: m for m in memories.list(limit=100, view="full").data}
    assert {p: m.content for p, m in listed.items()} == model
    assert {p: m.id for p, m in listed.items()} == ids
    assert {p: m.content_sha256 for p, m in listed.items()} == {p: sha(t) for p, t in model.items()}
    store.close()
