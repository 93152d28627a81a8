"""Every hostile path is refused by every command before any storage call, and nothing is ever
created outside the store directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from anthropic.lib.tools._beta_functions import ToolError

import memvault

VECTORS = json.loads((Path(__file__).parent.parent / "vectors" / "hostile_paths.json").read_text())
HOSTILE = [v["path"] for v in VECTORS]


def _commands(path: str) -> list[dict[str, object]]:
    return [
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/ok.md"},
        {"command": "rename", "old_path": "/memories/ok.md", "new_path": path},
    ]


def test_there_are_at_least_60_hostile_paths() -> None:
    assert len(set(HOSTILE)) >= 60


@pytest.mark.parametrize("path", HOSTILE, ids=[v["desc"][:60] for v in VECTORS])
def test_hostile_path_refused_before_storage(
    store: memvault.MemoryStore, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    calls: list[str] = []

    def spy(name: str):  # type: ignore[no-untyped-def]
        def record(*args: object, **kwargs: object) -> None:
            calls.append(name)
            raise AssertionError(f"storage touched by {name}")

        return record

    for name in ("snapshot", "reading", "transact", "read_node", "state_at", "commit"):
        monkeypatch.setattr(store, name, spy(name))
    for name in ("head", "read_blob", "read_tree", "read_commit", "write", "compare_and_swap"):
        monkeypatch.setattr(store.git, name, spy(f"git.{name}"))
    for name in ("refresh", "append", "dek"):
        monkeypatch.setattr(store.keyring, name, spy(f"keyring.{name}"))
    tool = memvault.MemoryTool(store)
    for command in _commands(path):
        with pytest.raises(ToolError) as info:
            tool.call(command)
        message = str(info.value)
        assert message.startswith("Error: Invalid path"), (command, message)
        assert "\x00" not in message and "\u202e" not in message and "\n" not in message
        assert str(store.root) not in message
    assert calls == []


def test_nothing_created_outside_the_store(tmp_path: Path) -> None:
    from conftest import make_store

    store = make_store(tmp_path / "inside" / "store")
    tool = memvault.MemoryTool(store)

    def snapshot_outside() -> set[str]:
        out = set()
        for dirpath, dirnames, filenames in os.walk(tmp_path):
            rel = os.path.relpath(dirpath, tmp_path)
            if rel == "inside/store" or rel.startswith("inside/store/"):
                continue
            out.update(os.path.join(rel, n) for n in dirnames + filenames)
        return out

    before = snapshot_outside()
    for path in HOSTILE + ["/memories/ok.md", "/memories/a/b/c.md"]:
        for command in _commands(path):
            try:
                tool.call(command)
            except ToolError:
                pass
    assert snapshot_outside() == before
    assert not (tmp_path / "etc").exists() and not Path("/memories").exists()
