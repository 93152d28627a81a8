"""Commits written as packs, packing loose objects (stores written before that), merging packs
geometrically: every object readable by memvault, git and dulwich, nothing lost at any point."""

from __future__ import annotations

import errno
import math
import os
import random
from pathlib import Path

import pytest

import memvault
from conftest import PASSPHRASE, make_store, unpack_to_loose
from memvault import history
from memvault.cli import main
from memvault.errors import StorageError
from memvault.git import packdir
from memvault.git import repo as gitrepo
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.store import memorystore as store_module
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


def _pack_files(store_path: Path) -> list[Path]:
    return sorted((store_path / "repo" / "objects" / "pack").iterdir())


def test_maintain_packs_everything_and_keeps_history(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _edits(store, 12)
    unpack_to_loose(store)  # as a store written before commits were packs
    before, log_before = _files(store), [c.commit_id for c in history.log(store)]
    assert store.git.loose_count() > 12 * 5 and store.git.pack_count() == 0  # 6 objects per commit
    packed, _merged = store.maintain()
    assert packed > 12 * 5
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
        packs = again.git.pack_count()
        _edits(again, 2, start=100)  # writes go on, as packs
        assert again.git.loose_count() == 0 and again.git.pack_count() == packs + 2


def test_a_reader_opened_before_packing_still_reads(tmp_path: Path) -> None:
    writer = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(writer, 5)
    unpack_to_loose(writer)
    reader = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    expected = _files(reader)
    reader.forget_cached_plaintext()
    writer.maintain()
    assert writer.git.loose_count() == 0
    assert _files(reader) == expected  # its cached repository handle finds the objects in the pack
    _edits(writer, 1, start=50)
    assert "/memories/n050.md" in _files(reader)


def _geometric(sizes: list[int]) -> bool:
    """Every pack at least twice as large as all smaller ones together."""
    sizes = sorted(sizes)
    return all(size >= 2 * sum(sizes[:i]) for i, size in enumerate(sizes) if i)


def _pack_sizes(store_path: Path) -> list[int]:
    return [p.stat().st_size for p in _pack_files(store_path) if p.suffix == ".pack"]


def test_maintain_merges_packs_geometrically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    monkeypatch.setattr(packdir, "MERGE_AT", 10**6)  # no merge in the commands
    _edits(store, 12)
    assert store.git.pack_count() == 13  # the first commit's and one per edit
    before = _files(store)
    packed, merged = store.maintain()
    assert packed == 0 and merged >= 2
    assert _geometric(_pack_sizes(tmp_path / "s")) and store.git.pack_count() <= 3
    assert _files(store) == before
    store.forget_cached_plaintext()
    assert _files(store) == before
    assert verify(store).ok
    assert store.maintain() == (0, 0)  # already geometric
    for f in _pack_files(tmp_path / "s"):  # the merged pack is owner-only and read-only too
        assert f.stat().st_mode & 0o777 == 0o400


def test_commands_keep_the_pack_count_logarithmic(tmp_path: Path) -> None:
    """Each commit is one pack; a command merges the smallest packs once :data:`MERGE_AT` of them
    break the geometric progression, so the count stays below that plus a logarithmic tail."""
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    counts = []
    for i in range(60):
        _edits(store, 1, start=i)
        counts.append(store.git.pack_count())
    assert max(counts) <= packdir.MERGE_AT + 4, counts
    assert min(counts[20:]) < max(counts)  # merges did happen
    assert store.git.loose_count() == 0
    assert len(_files(store)) == 60
    assert verify(store).ok


def test_one_command_per_store_object_keeps_the_pack_count_bounded(tmp_path: Path) -> None:
    """A process may write a single commit (the CLI does): each store object's first commit
    looks for a merge, so the packs do not pile up."""
    make_store(tmp_path / "s", StoreSettings(durability="none")).close()
    counts = []
    for i in range(30):
        with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as store:
            _edits(store, 1, start=i)
            counts.append(store.git.pack_count())
    assert max(counts) <= packdir.MERGE_AT + 4, counts
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as store:
        assert len(_files(store)) == 30 and verify(store).ok


@pytest.mark.parametrize("seed", range(5))
def test_geometric_merge_bounds_packs_and_rewrites(seed: int) -> None:
    """Simulated: packs of random sizes arrive one at a time and are merged as the commands
    and maintain merge them; the invariant holds after each merge, and no object is rewritten
    more than log1.5 of the total size times."""
    rng = random.Random(seed)
    packs: list[tuple[int, list[int]]] = []  # (size, ids of unit objects)
    rewrites: dict[int, int] = {}
    next_id = 0
    for _ in range(2000):
        size = rng.randint(1, 8)
        packs.append((size, list(range(next_id, next_id + size))))
        next_id += size
        packs.sort(key=lambda p: p[0])
        k = packdir.geometric_merge([p[0] for p in packs])
        if k:
            merged = [obj for _size, objs in packs[:k] for obj in objs]
            for obj in merged:
                rewrites[obj] = rewrites.get(obj, 0) + 1
            packs = [(len(merged), merged), *packs[k:]]
        assert _geometric([p[0] for p in packs])
    total = sum(p[0] for p in packs)
    assert len(packs) <= 2 + math.log(total, 3)
    assert max(rewrites.values()) <= 2 + math.log(total, 1.5)


def test_close_packs_what_a_busy_session_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "PACK_AFTER_OBJECTS", 40)
    monkeypatch.setattr(packdir, "MERGE_AT", 10**6)  # no merge in the commands
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(store, 3)  # about 27 objects: not yet
    unpack_to_loose(store)  # as a store written before commits were packs
    store.close()
    again = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert again.git.loose_count() > 0 and again.git.pack_count() == 0
    _edits(again, 8, start=10)  # 6 objects each: 48 >= PACK_AFTER_OBJECTS
    assert again.git.pack_count() == 8
    again.close()
    assert _geometric(_pack_sizes(tmp_path / "s")) and len(_pack_sizes(tmp_path / "s")) < 8
    # close keeps the emptied fan-out directories for the next session's objects
    assert len(_fanout_dirs(tmp_path / "s")) > 5
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as third:
        assert third.git.loose_count() == 0
        assert len(_files(third)) == 11
        third.maintain()  # what `memvault gc` runs: removes them
    assert _fanout_dirs(tmp_path / "s") == []


def test_a_failure_while_packing_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _edits(store, 4)
    unpack_to_loose(store)
    before, loose = _files(store), store.git.loose_count()
    real = os.replace

    def full_disk(src: object, dst: object) -> None:
        if str(dst).endswith(".idx"):  # the pack is in place, its index cannot be
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(StorageError) as info:
        store.maintain()
    assert "No space left on device" in str(info.value) and str(tmp_path) not in str(info.value)
    assert store.git.loose_count() == loose  # nothing deleted before a pack holds it
    assert store.git.pack_count() == 0
    monkeypatch.setattr(os, "replace", real)
    store.forget_cached_plaintext()
    assert _files(store) == before
    store.maintain()
    assert store.git.loose_count() == 0 and _files(store) == before
    assert not [p for p in _pack_files(tmp_path / "s") if p.name.startswith("tmp_")]


def _damage_loose_blob(store: memvault.MemoryStore, path: str) -> tuple[bytes, Path]:
    """Flip a bit in the loose content blob of ``path``; return its id and file."""
    node = store.snapshot().get(parse_path(path, store.settings))
    assert node is not None
    obj = store.root / "repo" / "objects" / node.blob_id[:2].decode() / node.blob_id[2:].decode()
    obj.chmod(0o600)
    raw = bytearray(obj.read_bytes())
    raw[-5] ^= 0x01
    obj.write_bytes(bytes(raw))
    return node.blob_id, obj


def test_damaged_loose_object_stays_loose_and_is_reported(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(store, 2)
    unpack_to_loose(store)
    _, obj = _damage_loose_blob(store, "/memories/n000.md")
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
    assert doc == {"packed": 0, "merged_packs": 0, "loose_objects": 0, "packs": 1, "shredded_versions": 0}


def test_a_batch_of_damaged_loose_objects_does_not_stop_packing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Damaged loose objects listed first fill whole batches: they are skipped (and not read
    again), and every good object after them is still packed."""
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _edits(store, 3)
    unpack_to_loose(store)
    total = store.git.loose_count()
    damaged = [_damage_loose_blob(store, name)[0] for name in ("/memories/n000.md", "/memories/n001.md")]
    object_store = store.git._repo.object_store
    real_iter = type(object_store)._iter_loose_objects
    reads: list[bytes] = []
    real_read = gitrepo.GitStore._read_loose_any

    def damaged_first(self: object) -> object:
        ids = list(real_iter(self))  # type: ignore[arg-type]
        return iter(sorted(ids, key=lambda i: bytes(i) not in damaged))

    def counting_read(self: gitrepo.GitStore, obj_id: bytes) -> tuple[bytes, bytes] | None:
        reads.append(bytes(obj_id))
        return real_read(self, obj_id)

    monkeypatch.setattr(type(object_store), "_iter_loose_objects", damaged_first)
    monkeypatch.setattr(gitrepo.GitStore, "_read_loose_any", counting_read)
    assert store.git.pack_loose(batch=1) == total - 2
    assert store.git.loose_count() == 2
    assert sorted(r for r in reads if r in damaged) == sorted(damaged)  # each damaged one read once
