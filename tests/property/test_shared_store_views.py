"""Two store objects on one directory, taking turns at random commands: after every command,
each one's cached (incrementally refreshed) state equals a freshly opened store's state."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from anthropic.tools import ToolError

import memvault
from conftest import PASSPHRASE, make_store
from memvault.settings import StoreSettings

NAMES = ["a", "b", "c.md", "d.txt"]


def _random_path(rng: random.Random) -> str:
    return "/memories/" + "/".join(rng.choice(NAMES) for _ in range(rng.randint(1, 3)))


def _command(rng: random.Random) -> dict[str, object]:
    kind = rng.choice(["create", "create", "str_replace", "insert", "delete", "rename"])
    path = _random_path(rng)
    if kind == "create":
        return {"command": "create", "path": path, "file_text": rng.choice(["x\n", "y\nz\n", ""])}
    if kind == "str_replace":
        return {"command": "str_replace", "path": path, "old_str": rng.choice(["x", "y"]), "new_str": "w"}
    if kind == "insert":
        return {"command": "insert", "path": path, "insert_line": 0, "insert_text": "i"}
    if kind == "delete":
        return {"command": "delete", "path": path}
    return {"command": "rename", "old_path": path, "new_path": _random_path(rng)}


def _state(store: memvault.MemoryStore) -> dict[str, bytes | None]:
    snap = store.snapshot()
    out: dict[str, bytes | None] = {}

    def walk(path: str) -> None:
        for name in snap.child_names(path):
            child = f"{path}/{name}"
            node = snap.get(child)
            assert node is not None, child
            if node.is_dir:
                out[child] = None
                walk(child)
            else:
                out[child] = store.read_node(node)

    walk("/memories")
    assert len([v for v in out.values() if v is not None]) == snap._base.file_count
    return out


@pytest.mark.parametrize("seed", range(12))
def test_two_store_objects_stay_consistent(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "store"
    make_store(path, StoreSettings(durability="none")).close()
    stores = [memvault.MemoryStore.open(path, passphrase=PASSPHRASE) for _ in range(2)]
    tools = [memvault.MemoryTool(s) for s in stores]
    for step in range(40):
        i = rng.randrange(2)
        try:
            tools[i].call(_command(rng))
        except ToolError:
            pass
        fresh = _state(memvault.MemoryStore.open(path, passphrase=PASSPHRASE))
        for s in stores:
            assert _state(s) == fresh, (seed, step)
