"""Nothing a client sent is readable under a server root: store names, descriptions, metadata,
API key names and secrets, memory paths and contents appear in no file (git objects and packs
inflated), and the access log names routes and ids only."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

from conftest import all_store_bytes  # noqa: E402
from serversupport import Served  # noqa: E402

CANARIES = {
    "name": "Canary store name 7f3a",
    "description": "Canary description 91bc",
    "metadata key": "canary-meta-key-55d2",
    "metadata value": "canary meta value 0e41",
    "key name": "canary key name 3c8e",
    "path": "/canary-dir-a1b2/canary-file-c3d4.md",
    "content": "canary content e5f6 that the agent learned",
    "renamed path": "/canary-moved-9a8b.md",
}


def test_nothing_readable_under_the_root(served: Served, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memvault.server.access")
    _record, secret = served.root.create_key(CANARIES["key name"])
    client = served.client()
    store = client.beta.memory_stores.create(
        name=CANARIES["name"], description=CANARIES["description"],
        metadata={CANARIES["metadata key"]: CANARIES["metadata value"]},
    )  # fmt: skip
    worker = served.client(secret)
    memory = worker.beta.memory_stores.memories.create(store.id, path=CANARIES["path"], content=CANARIES["content"])
    worker.beta.memory_stores.memories.update(memory.id, memory_store_id=store.id, path=CANARIES["renamed path"])
    list(worker.beta.memory_stores.memories.list(store.id, path_prefix="/", view="full"))
    assert served.root.registry().stores[store.id].name == CANARIES["name"]  # the control: it is there
    needles = [v.encode() for v in CANARIES.values()] + [secret.encode()]
    needles += [
        segment.encode() for v in (CANARIES["path"], CANARIES["renamed path"]) for segment in v.split("/") if segment
    ]
    found = [(path, n) for path, data in all_store_bytes(served.location) for n in needles if n in data]
    assert found == []
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert '"route": "/v1/memory_stores/{memory_store_id}/memories"' in logged  # the control: lines were logged
    assert all(n.decode() not in logged for n in needles)
