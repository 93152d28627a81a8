"""Quotas give clear tool errors and change nothing; big inputs and big files stay in bounded memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from anthropic.lib.tools._beta_functions import ToolError

import memvault
from conftest import make_store
from memvault.settings import StoreSettings

MiB = 1024 * 1024


def call(tool: memvault.MemoryTool, **command: object) -> object:
    return tool.call(command)


def err(tool: memvault.MemoryTool, **command: object) -> str:
    with pytest.raises(ToolError) as info:
        tool.call(command)
    return str(info.value)


def snapshot(store: memvault.MemoryStore) -> tuple[int, dict[str, bytes]]:
    snap = store.snapshot()
    root = memvault.paths.parse_path("/memories", store.settings)
    files = {p.text: snap.read(p) for p in snap.descendants(root) if not snap.is_dir(p)}
    return store.head[1], files


def test_total_bytes_quota(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none", max_total_bytes=1000))
    tool = memvault.MemoryTool(store)
    call(tool, command="create", path="/memories/a.md", file_text="a" * 600)
    call(tool, command="create", path="/memories/b.md", file_text="b" * 300)
    before = snapshot(store)
    assert err(tool, command="create", path="/memories/c.md", file_text="c" * 101) == (
        "Error: The memory store is full: it holds at most 1000 bytes of content in all, and this would make 1001"
    )
    assert err(tool, command="str_replace", path="/memories/b.md", old_str="b" * 300, new_str="B" * 401).startswith(
        "Error: The memory store is full: it holds at most 1000 bytes"
    )
    assert err(tool, command="insert", path="/memories/a.md", insert_line=0, insert_text="x" * 200).startswith(
        "Error: The memory store is full"
    )
    assert snapshot(store) == before  # nothing written by the refused commands
    # at the limit exactly, shrinking, renaming and deleting all work
    call(tool, command="create", path="/memories/c.md", file_text="c" * 100)
    call(tool, command="rename", old_path="/memories/a.md", new_path="/memories/d/a.md")
    call(tool, command="str_replace", path="/memories/b.md", old_str="b" * 300, new_str="b")
    call(tool, command="create", path="/memories/e.md", file_text="e" * 299)
    call(tool, command="delete", path="/memories/d")
    call(tool, command="create", path="/memories/f.md", file_text="f" * 600)
    assert sum(len(v) for v in snapshot(store)[1].values()) == 1000
    store.close()
    again = memvault.MemoryStore.open(tmp_path / "s", passphrase="correct horse battery staple")
    assert again.snapshot().total_bytes == 1000  # recomputed from the index on open
    assert err(memvault.MemoryTool(again), command="create", path="/memories/g.md", file_text="g").startswith(
        "Error: The memory store is full"
    )


def test_default_quota_keeps_existing_settings_byte_identical() -> None:
    """Stores created before the quota existed authenticate their settings as dumped then."""
    assert "max_total_bytes" not in StoreSettings().model_dump()
    assert StoreSettings(max_total_bytes=5).model_dump()["max_total_bytes"] == 5
    assert StoreSettings.model_validate(StoreSettings(max_total_bytes=5).model_dump()).max_total_bytes == 5


def _peak(fn: object) -> int:
    tracemalloc.start()
    try:
        fn()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_ten_mib_create_and_a_million_line_view_stay_bounded(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none", max_file_bytes=16 * MiB))
    tool = memvault.MemoryTool(store)
    big = "0123456789abcde\n" * (10 * MiB // 16)  # 10 MiB
    peak = _peak(lambda: call(tool, command="create", path="/memories/big.md", file_text=big))
    # a bounded number of copies: mostly the scrubber's candidate offsets (one per line here)
    assert peak < 16 * 10 * MiB
    lines = "x\n" * 999_999  # the most lines a view accepts (the SDK's limit)
    call(tool, command="create", path="/memories/lines.md", file_text=lines)
    out: list[object] = []
    peak = _peak(lambda: out.append(call(tool, command="view", path="/memories/lines.md")))
    text = str(out[0])
    assert len(text) < 20_000 and "x" in text  # the view budget, not a million numbered lines
    assert peak < 30 * len(lines)
    peak = _peak(lambda: out.append(call(tool, command="view", path="/memories/lines.md", view_range=[999_990, -1])))
    assert str(out[-1]).count("\n") <= 12 and "999999" in str(out[-1])
    assert peak < 30 * len(lines)
    call(tool, command="insert", path="/memories/lines.md", insert_line=0, insert_text="y")
    peak = _peak(lambda: out.append(err(tool, command="view", path="/memories/lines.md")))
    assert out[-1] == "File /memories/lines.md exceeds maximum line limit of 999,999 lines."
    assert peak < 30 * len(lines)


def test_over_limit_text_is_refused_before_any_work(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    tool = memvault.MemoryTool(store)
    huge = "y" * (64 * MiB)
    before = store.head[1]
    peak = _peak(lambda: err(tool, command="create", path="/memories/huge.md", file_text=huge))
    assert peak < 4 * MiB  # refused on its length: no encoding, scrubbing or copying of the 64 MiB
    assert store.head[1] == before


def test_history_churn_is_bounded_by_max_stored_bytes(tmp_path: Path) -> None:
    """Limits on the head alone let create/delete cycles grow the history without bound: a commit
    that writes content past ``max_stored_bytes`` is refused with a clear error, nothing written;
    a delete (as operator erasure) still goes through, and the setting persists."""
    kdf = memvault.KdfParams(memory_kib=8, iterations=1, lanes=1)
    settings = StoreSettings(durability="none", max_stored_bytes=400_000)
    store = memvault.MemoryStore.create(
        tmp_path / "s", passphrase="correct horse battery staple", kdf=kdf, settings=settings
    )
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"})
    refused = None
    for i in range(20):
        try:
            tool.call({"command": "create", "path": "/memories/big.md", "file_text": f"{i}" + "x" * 90_000})
        except ToolError as err:
            refused = str(err)
            break
        tool.call({"command": "delete", "path": "/memories/big.md"})
    assert refused is not None and "history takes" in refused and "at most 400000" in refused
    head = store.head
    assert store.git.packs.total_bytes() <= 400_000
    with pytest.raises(memvault.errors.LimitExceededError):
        store.put_file("/memories/other.md", "z" * 90_000)
    assert store.head == head  # nothing written
    assert tool.call({"command": "delete", "path": "/memories/keep.md"}) == "Successfully deleted /memories/keep.md"
    store.close()
    reopened = memvault.MemoryStore.open(tmp_path / "s", passphrase="correct horse battery staple")
    assert reopened.settings.max_stored_bytes == 400_000
