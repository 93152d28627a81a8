"""Stores of the memory-stores API grammar (``path_grammar: api``): names memvault's own grammar
refuses are valid, case-only siblings coexist, the memory tool works on them as on any store, and
``export`` to a directory refuses what a filesystem cannot hold safely, naming it, before it
writes anything."""

from __future__ import annotations

from pathlib import Path

import pytest

import memvault
from conftest import make_store
from memvault.errors import InvalidInputError, InvalidPathError
from memvault.memories import Memories
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.transfer import export_tree

API = StoreSettings(path_grammar="api", max_path_bytes=1033, max_depth=20, max_segment_bytes=1024)


@pytest.fixture
def api_store(tmp_path: Path) -> memvault.MemoryStore:
    return make_store(tmp_path / "api", API)


@pytest.mark.parametrize("name", ["a:b", "what?", "CON", "nul.txt", ".git", "end.", " lead", "trail ", "x|y", "50%41"])
def test_the_api_grammar_takes_names_memvault_refuses(name: str) -> None:
    with pytest.raises(InvalidPathError):
        parse_path(f"/memories/{name}")
    assert parse_path(f"/memories/{name}", API).name == name


@pytest.mark.parametrize("name", ["a\x00b", "a\u202eb", "a\u2028b", "a\u200bb", "cafe\u0301", "..", ".", ""])
def test_the_api_grammar_still_refuses_controls_formats_non_nfc_and_dots(name: str) -> None:
    with pytest.raises(InvalidPathError):
        parse_path(f"/memories/x/{name}/y", API)


def test_case_only_siblings_coexist_and_the_tool_sees_both(api_store: memvault.MemoryStore) -> None:
    tool = memvault.MemoryTool(api_store)
    tool.call({"command": "create", "path": "/memories/Notes.md", "file_text": "upper\n"})
    tool.call({"command": "create", "path": "/memories/notes.md", "file_text": "lower\n"})
    listing = tool.call({"command": "view", "path": "/memories"})
    assert "/memories/Notes.md" in listing and "/memories/notes.md" in listing
    assert api_store.read_text("/memories/Notes.md") == "upper\n"
    assert api_store.read_text("/memories/notes.md") == "lower\n"
    strict = make_store(api_store.root.parent / "strict")
    memvault.MemoryTool(strict).call({"command": "create", "path": "/memories/Notes.md", "file_text": "x"})
    with pytest.raises(Exception, match="collides"):
        memvault.MemoryTool(strict).call({"command": "create", "path": "/memories/notes.md", "file_text": "y"})


def test_export_refuses_a_dotgit_name_before_writing_anything(api_store: memvault.MemoryStore, tmp_path: Path) -> None:
    memories = Memories(api_store)
    memories.create("/fine.md", "ok", actor="t")
    memories.create("/.git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n", actor="t")
    target = tmp_path / "out"
    with pytest.raises(InvalidInputError, match=r"\.git.*cannot be exported"):
        export_tree(api_store, target)
    assert not target.exists() or list(target.iterdir()) == []


@pytest.mark.parametrize("path", ["/a:b.md", "/CON", "/sub/end."])
def test_export_refuses_names_a_filesystem_cannot_hold(api_store: memvault.MemoryStore, tmp_path: Path,
                                                       path: str) -> None:  # fmt: skip
    Memories(api_store).create(path, "x", actor="t")
    with pytest.raises(InvalidInputError, match="cannot be exported to a directory"):
        export_tree(api_store, tmp_path / "out")


def test_export_refuses_case_only_siblings(api_store: memvault.MemoryStore, tmp_path: Path) -> None:
    memories = Memories(api_store)
    memories.create("/Notes.md", "a", actor="t")
    memories.create("/notes.md", "b", actor="t")
    with pytest.raises(InvalidInputError, match="differ only in case"):
        export_tree(api_store, tmp_path / "out")


def test_export_of_portable_names_works(api_store: memvault.MemoryStore, tmp_path: Path) -> None:
    memories = Memories(api_store)
    memories.create("/notes/a.md", "a", actor="t")
    memories.create("/b.md", "b", actor="t")
    export_tree(api_store, tmp_path / "out")
    assert (tmp_path / "out" / "notes" / "a.md").read_text() == "a"
    assert (tmp_path / "out" / "b.md").read_text() == "b"


def test_the_grammar_cannot_be_changed_after_the_store_is_made(api_store: memvault.MemoryStore) -> None:
    from memvault.admin.config import change_settings

    with pytest.raises(InvalidInputError, match="path_grammar"):
        change_settings(api_store, {"path_grammar": "memvault"})
    assert api_store.settings.path_grammar == "api"
