"""The scrubber runs on every write path of the memory tool, fails closed, tells Claude what it
removed (kinds and counts, never values), and records the counts in the encrypted commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from anthropic.lib.tools._beta_functions import ToolError

import memvault
from conftest import all_store_bytes, make_store
from memvault import history
from memvault.settings import ScrubSettings, StoreSettings

# Fake, randomly generated credentials of the real shapes.
AWS_ID = "AKIAQ7VXK2JD4NRP3W6T"
GH = "ghp_" + "R8mKq2LvX9pT4wZb7NcY3hJf6sDg1aEo5uQi"
EMAIL = "dana.whitfield@example-clinic.org"


def _view(tool: memvault.MemoryTool, path: str) -> str:
    out = tool.call({"command": "view", "path": path})
    assert isinstance(out, str)
    return out


def test_create_redacts_and_tells_claude(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    out = tool.call({"command": "create", "path": "/memories/ops.md", "file_text": f"aws key {AWS_ID}\nmail {EMAIL}\n"})
    assert out == (
        "File created successfully at: /memories/ops.md\n\n"
        "Note: sensitive data was removed before storing (1 aws_access_key_id, 1 email); the file shows "
        "[REDACTED:<kind>] in its place. Do not try to restore it."
    )
    view = _view(tool, "/memories/ops.md")
    assert "[REDACTED:aws_access_key_id]" in view and "[REDACTED:email]" in view
    assert AWS_ID not in view and EMAIL not in view
    assert history.log(store, limit=1)[0].findings == {"aws_access_key_id": 1, "email": 1}
    for _name, data in all_store_bytes(store.root):
        assert AWS_ID.encode() not in data and EMAIL.encode() not in data


def test_secret_split_across_an_edit_is_caught(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    tool.call({"command": "create", "path": "/memories/t.md", "file_text": f"token {GH[:20]}XYZ\n"})
    assert GH not in _view(tool, "/memories/t.md")
    out = tool.call({"command": "str_replace", "path": "/memories/t.md", "old_str": "XYZ", "new_str": GH[20:]})
    assert isinstance(out, str) and "Note: sensitive data was removed before storing (1 github_token)" in out
    assert GH[20:] not in _view(tool, "/memories/t.md")
    out = tool.call({"command": "insert", "path": "/memories/t.md", "insert_line": 0, "insert_text": f"cc {EMAIL}"})
    assert out.endswith("(1 email); the file shows [REDACTED:<kind>] in its place. Do not try to restore it.")  # type: ignore[union-attr]
    assert [c.findings for c in history.log(store, limit=3)] == [{"email": 1}, {"github_token": 1}, {}]


def test_paths_with_sensitive_data_are_refused(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    before = store.head
    for command in (
        {"command": "create", "path": f"/memories/{EMAIL}.md", "file_text": "x"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": f"/memories/{AWS_ID}.md"},
    ):
        with pytest.raises(ToolError) as info:
            tool.call(command)
        assert str(info.value).startswith("Error: The path contains sensitive data (")
        assert EMAIL not in str(info.value) and AWS_ID not in str(info.value)
    assert store.head == before


def test_reject_policy_writes_nothing(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(scrub=ScrubSettings(policy={"aws_access_key_id": "reject"})))
    tool = memvault.MemoryTool(store)
    before = store.head
    with pytest.raises(ToolError) as info:
        tool.call({"command": "create", "path": "/memories/k.md", "file_text": f"key {AWS_ID}"})
    assert str(info.value) == (
        "Error: The text contains sensitive data (aws_access_key_id) that must not be stored in memory. "
        "Nothing was written; remove it and try again."
    )
    assert store.head == before


def test_scrubber_failure_fails_closed(
    store: memvault.MemoryStore, tool: memvault.MemoryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault.scrub import Scrubber

    def boom(self: Scrubber, text: str) -> object:
        raise RuntimeError(f"crash while scanning {text}")

    monkeypatch.setattr(Scrubber, "apply", boom)
    before = store.head
    with pytest.raises(ToolError) as info:
        tool.call({"command": "create", "path": "/memories/x.md", "file_text": "secret body"})
    assert str(info.value) == "The sensitive-data scrubber failed; nothing was written."
    assert store.head == before


def test_import_runs_the_scrubber(store: memvault.MemoryStore, tmp_path: Path) -> None:
    from memvault.transfer import import_dir

    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.md").write_text(f"contact {EMAIL}\n")
    (src / f"{EMAIL}.md").write_text("named after a person\n")
    result = import_dir(store, src, skip_invalid=True)
    assert [s.reason for s in result.skipped if EMAIL in s.source or "sensitive" in s.reason]
    assert history.read_at(store, "/memories/notes.md") == b"contact [REDACTED:email]\n"
    assert history.log(store, limit=1)[0].findings == {"email": 1}


def test_each_store_builds_its_scrubber_once(store: memvault.MemoryStore, tmp_path: Path) -> None:
    """The guard keeps one scrubber per store object, built from that store's settings."""
    from memvault.scrub import guard

    other = make_store(tmp_path / "other", StoreSettings(scrub=ScrubSettings(policy={"email": "allow"})))
    try:
        first = guard.scrubber_for(store)
        assert guard.scrubber_for(store) is first
        assert guard.scrubber_for(other) is not first
        assert guard.scrubber_for(other).policy("email") == "allow" and first.policy("email") == "redact"
        findings: dict[str, int] = {}
        assert guard.scrub_text(other, f"mail {EMAIL} key {AWS_ID}", findings) == (
            f"mail {EMAIL} key [REDACTED:aws_access_key_id]"
        )
        assert findings == {"aws_access_key_id": 1}
    finally:
        other.close()
