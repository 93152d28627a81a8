"""``push`` and ``pull`` against ``memvault serve`` (the ``served`` fixture: a real server on
127.0.0.1): the same calls as against the managed API, the server's own scrubber on what is pushed,
writers of the server between a push's listing and its writes, and a pull of what was pushed."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_store
from memvault import history
from memvault.settings import ScrubSettings, StoreSettings
from memvault.transfer.migrate import pull, push
from migratesupport import client, files

pytest.importorskip("starlette", reason="the server needs memvault[server]")

from serversupport import Served  # noqa: E402

AWS_ID = "AKIAQ7VXK2JD4NRP3W6T"


def test_push_to_memvault_serve_and_pull_it_back(served: Served, tmp_path: Path) -> None:
    sdk = served.client()
    sid = sdk.beta.memory_stores.create(name="published").id
    source = make_store(tmp_path / "src")
    for name, text in {"a": "alpha", "b": "beta", "notes/c": "gamma"}.items():
        source.put_file(f"/memories/{name}.md", text, actor="me")
    api = client(served.url, served.admin_key)

    first = push(source, api, sid)
    assert first.ok and sorted(first.created) == ["/a.md", "/b.md", "/notes/c.md"]

    # a writer of the server between the push's listing and its update: not overwritten
    source.put_file("/memories/a.md", "alpha 2", actor="me")
    source.put_file("/memories/b.md", "beta 2", actor="me")
    mem_a = next(m for m in sdk.beta.memory_stores.memories.list(sid) if m.path == "/a.md")
    written: list[str] = []

    def concurrent(store_id: str, memory: str, content: str, expected_sha256: str):  # type: ignore[no-untyped-def]
        if not written:
            written.append(sdk.beta.memory_stores.memories.update(mem_a.id, memory_store_id=sid, content="theirs").id)
        return update(store_id, memory, content, expected_sha256)

    update = api.update_memory
    api.update_memory = concurrent  # type: ignore[method-assign]
    second = push(source, api, sid)
    assert [(c.path, c.reason) for c in second.conflicts if c.path == "/a.md"] == [
        ("/a.md", "changed on the API meanwhile")
    ]
    contents = {m.path: sdk.beta.memory_stores.memories.retrieve(m.id, memory_store_id=sid).content
                for m in sdk.beta.memory_stores.memories.list(sid)}  # fmt: skip
    assert contents == {"/a.md": "theirs", "/b.md": "beta 2", "/notes/c.md": "gamma"}

    copy = make_store(tmp_path / "copy")
    done = pull(copy, client(served.url, served.admin_key), sid, history=True)
    assert done.ok and files(copy) == contents
    authors = {e.actor for e in history.log(copy) if e.command == "migrate-pull"}
    assert authors == {f"api:{served.admin_id}"}


def test_the_servers_scrubber_masks_what_is_pushed_and_the_next_push_is_quiet(served: Served, tmp_path: Path) -> None:
    sid = served.client().beta.memory_stores.create(name="masked").id
    # a source store told not to mask it; the server's store masks it on arrival
    lenient = make_store(tmp_path / "lenient", StoreSettings(scrub=ScrubSettings(enabled=False)))
    lenient.put_file("/memories/keys.md", f"id {AWS_ID}", actor="me")
    api = client(served.url, served.admin_key)

    assert push(lenient, api, sid).created == ["/keys.md"]
    (memory,) = served.client().beta.memory_stores.memories.list(sid, view="full")
    assert AWS_ID not in (memory.content or "")
    again = push(lenient, api, sid)
    assert again.ok and again.unchanged == 1 and again.updated == []  # the masked copy is the baseline, not a change
