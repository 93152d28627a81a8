"""Packing loose objects and merging packs: outside tool calls, nothing lost at any point."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault import gitstore, history
from memvault import store as store_module
from memvault.cli import main
from memvault.errors import StorageError
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.verify import verify


def _files(store: memvault.MemoryStore) -> dict[str, bytes]:
    snap = store.snapshot()
    root = parse_path("/memories", store.settings)
    return {p.text: snap.read(p) for p in snap.descendants(root) if not snap.is_dir(p)}


def _fanout_dirs(store_path: Path) -> list[str]:
    return [d.name for d in (store_path / "repo" / "objects").iterdir() if len(d.name) == 2 and d.is_dir()]


def _edits(store: memvault.MemoryStore, n: int, start: int = 0) -> None:
    tool = memvault.MemoryTool(store)
    for i in range(start, start + n):
        tool.call({"command": "create", "path": f"/memories/n{i:03}.md", "file_text": f"note {i}\n"})


def test_maintain_packs_everything_and_keeps_history(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _edits(store, 12)
    before, log_before = _files(store), [c.commit_id for c in history.log(store)]
    assert store.git.loose_count() > 12 * 8
    packed, _merged = store.maintain()
    assert packed > 12 * 8
    assert store.git.loose_count() == 0 and store.git.pack_count() >= 1
    assert _fanout_dirs(tmp_path / "s") == []  # emptied fan-out directories removed
    # every pack file owner-only, read-only
    for f in (tmp_path / "s" / "repo" / "objects" / "pack").iterdir():
        assert f.stat().st_mode & 0o077 == 0
    assert _files(store) == before
    store.close()
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        assert _files(again) == before
        assert [c.commit_id for c in history.log(again)] == log_before
        assert history.read_at(again, "/memories/n000.md", "#1") == b"note 0\n"
        report = verify(again)
        assert report.ok, report.problems
        _edits(again, 2, start=100)  # writes go on (loose again)
        assert again.git.loose_count() > 0


def test_a_reader_opened_before_packing_still_reads(tmp_path: Path) -> None:
    writer = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(writer, 5)
    reader = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    expected = _files(reader)
    reader.forget_cached_plaintext()
    writer.maintain()
    assert writer.git.loose_count() == 0
    assert _files(reader) == expected  # its cached repository handle finds the objects in the pack
    _edits(writer, 1, start=50)
    assert "/memories/n050.md" in _files(reader)


def test_packs_are_merged_beyond_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    monkeypatch.setattr(gitstore, "MAX_PACKS", 3)
    for round_ in range(6):
        _edits(store, 2, start=10 * round_)
        store.git.pack_loose()  # one pack per round, no merging
    assert store.git.pack_count() == 6
    before = _files(store)
    assert store.git.consolidate_packs(max_packs=3) == 5
    assert store.git.pack_count() == 2  # the merged one and the largest
    assert _files(store) == before
    store.forget_cached_plaintext()
    assert _files(store) == before
    assert verify(store).ok


def test_close_packs_what_a_busy_session_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "PACK_AFTER_OBJECTS", 40)
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(store, 3)  # about 27 objects: not yet
    store.close()
    again = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert again.git.loose_count() > 0 and again.git.pack_count() == 0
    _edits(again, 6, start=10)
    again.close()
    # close keeps the emptied fan-out directories for the next session's objects
    assert len(_fanout_dirs(tmp_path / "s")) > 5
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as third:
        assert third.git.loose_count() == 0
        assert len(_files(third)) == 9
        third.maintain()  # what `memvault gc` runs: removes them
    assert _fanout_dirs(tmp_path / "s") == []


def test_a_failure_while_packing_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _edits(store, 4)
    before, loose = _files(store), store.git.loose_count()
    real = store.git._repo.object_store.add_objects

    def full_disk(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store.git._repo.object_store, "add_objects", full_disk)
    with pytest.raises(StorageError) as info:
        store.maintain()
    assert "No space left on device" in str(info.value) and str(tmp_path) not in str(info.value)
    assert store.git.loose_count() == loose  # nothing deleted before a pack holds it
    monkeypatch.setattr(store.git._repo.object_store, "add_objects", real)
    store.forget_cached_plaintext()
    assert _files(store) == before
    store.maintain()
    assert store.git.loose_count() == 0 and _files(store) == before


def test_damaged_loose_object_stays_loose_and_is_reported(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(store, 2)
    node = store.snapshot().get(parse_path("/memories/n000.md", store.settings))
    assert node is not None
    obj = tmp_path / "s" / "repo" / "objects" / node.blob_id[:2].decode() / node.blob_id[2:].decode()
    obj.chmod(0o600)
    raw = bytearray(obj.read_bytes())
    raw[-5] ^= 0x01
    obj.write_bytes(bytes(raw))
    store.maintain()
    assert store.git.loose_count() == 1 and obj.exists()  # not packed under another id
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE, check_head=False) as again:
        assert "bad-blob" in {p.code for p in verify(again).problems}


def test_cli_gc(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(store, 3)
    store.close()
    assert main(["--store", str(tmp_path / "s"), "gc"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Packed ") and "Now 0 loose objects and 1 packs." in out
    assert main(["--store", str(tmp_path / "s"), "gc", "--json"]) == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert doc == {"packed": 0, "merged_packs": 0, "loose_objects": 0, "packs": 1}
