"""The decrypted-content cache stays within its byte budget, whatever path fills it; loading a
state pauses the garbage collector only while it runs."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault.errors import IntegrityError
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.store import state as store_module


def test_content_cache_is_bounded_after_a_bulk_transaction(tmp_path: Path) -> None:
    s = make_store(tmp_path / "s", StoreSettings(durability="none", max_file_bytes=1024 * 1024))
    budget = store_module.PLAINTEXT_CACHE_BYTES
    chunk = b"x" * (budget // 16)

    def bulk(txn: memvault.store.Transaction) -> None:
        for i in range(64):  # 4x the budget in one commit
            txn.write_file(parse_path(f"/memories/f{i}.bin"), chunk + bytes([i]))

    s.transact(bulk, command="put", paths=(), actor="t", session="")
    assert s._reader._contents_size <= budget
    assert s._reader._contents_size == sum(len(v) for v in s._reader._contents.values())
    assert len(s._reader._contents) == budget // len(chunk + b"0")
    # Reads still return the right bytes, cached or not.
    snap = s.snapshot()
    assert snap.read(parse_path("/memories/f0.bin")) == chunk + b"\x00"
    assert snap.read(parse_path("/memories/f63.bin")) == chunk + bytes([63])


def test_loading_a_state_pauses_the_garbage_collector_and_resumes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = make_store(tmp_path / "s", StoreSettings(durability="none"))
    s.put_file("/memories/a.md", "alpha\n")
    s.close()
    seen: list[bool] = []
    real = store_module.StoreState._load_all_unpaused

    def spy(self: store_module.StoreState) -> None:
        seen.append(gc.isenabled())
        real(self)

    monkeypatch.setattr(store_module.StoreState, "_load_all_unpaused", spy)
    opened = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert opened.snapshot().read(parse_path("/memories/a.md")) == b"alpha\n"
    assert seen == []  # an open and a read decode no whole state
    assert [e.path for e in opened.list()] == ["/memories/a.md"]  # a listing does
    assert seen == [False] and gc.isenabled()
    # An application that disabled the collector keeps it disabled.
    gc.disable()
    try:
        memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE).list()
        assert not gc.isenabled()
    finally:
        gc.enable()

    # A load that fails resumes it too.
    def broken(self: store_module.StoreState) -> None:
        raise IntegrityError("damaged")

    monkeypatch.setattr(store_module.StoreState, "_load_all_unpaused", broken)
    with pytest.raises(IntegrityError):
        memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE).list()
    assert gc.isenabled()


def test_plaintext_cache_budget_is_settable_and_zero_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = make_store(tmp_path / "s", StoreSettings(durability="none"))
    assert s.plaintext_cache_bytes == store_module.PLAINTEXT_CACHE_BYTES
    for i in range(8):
        s.put_file(f"/memories/f{i}.md", f"{i}" * 1000)
    assert s._reader._contents_size == 8 * 1000  # writes fill the cache
    s.plaintext_cache_bytes = 3000  # lowering it drops the least recently used at once
    assert s._reader._contents_size == 3000 and sorted(s._reader._contents.values()) == [
        b"5" * 1000,
        b"6" * 1000,
        b"7" * 1000,
    ]
    s.plaintext_cache_bytes = 16000
    decrypted: list[bytes] = []
    real = memvault.format.records.decode_blob
    monkeypatch.setattr(memvault.format.records, "decode_blob", lambda *a, **k: decrypted.append(b"") or real(*a, **k))
    snap = s.snapshot()
    assert snap.read(parse_path("/memories/f1.md")) == b"1" * 1000
    assert snap.read(parse_path("/memories/f1.md")) == b"1" * 1000
    assert len(decrypted) == 1  # the second view came from the cache
    s.plaintext_cache_bytes = 0  # none: every view decrypts again
    assert s._reader._contents_size == 0 and not s._reader._contents
    assert snap.read(parse_path("/memories/f1.md")) == b"1" * 1000
    assert snap.read(parse_path("/memories/f1.md")) == b"1" * 1000
    assert len(decrypted) == 3 and not s._reader._contents
    s.put_file("/memories/g.md", "new")  # nor does a write leave its plaintext behind
    assert not s._reader._contents
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(ValueError):
            s.plaintext_cache_bytes = bad  # type: ignore[assignment]
    s.close()
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE, plaintext_cache_bytes=0) as again:
        assert again.plaintext_cache_bytes == 0


def test_log_authenticates_each_commit_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log (with what each commit changed, and the parent each diff needs) opens and checks the
    metadata and chain tag of each commit once, however often history code asks for it."""
    from memvault import history
    from memvault.format import records

    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    for i in range(6):
        store.put_file(f"/memories/n{i}.md", f"note {i}\n")
    store.close()
    fresh = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    calls: dict[str, int] = {"open_meta": 0, "commit_tag": 0}
    for name in calls:
        real = getattr(records, name)

        def counting(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(records, name, counting)
    infos = history.log(fresh)
    history.log(fresh, operations=["created"])  # a second walk, with diffs against each parent
    assert [i.seq for i in infos] == [6, 5, 4, 3, 2, 1, 0]
    assert all(info.changes for info in infos[:-1])
    # the head was authenticated at open; every other commit exactly once
    assert calls == {"open_meta": 6, "commit_tag": 6}


def test_cached_commit_metadata_cannot_be_changed_by_a_caller(tmp_path: Path) -> None:
    from memvault import history

    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    memvault.MemoryTool(store).call(
        {"command": "create", "path": "/memories/k.md", "file_text": "AKIAQ7VXK2JD4NRP3W6T\n"}
    )
    first = history.log(store, limit=1)[0]
    assert first.findings == {"aws_access_key_id": 1}
    first.findings["aws_access_key_id"] = 99
    store.commit_meta(store.head[0]).findings.clear()
    assert history.log(store, limit=1)[0].findings == {"aws_access_key_id": 1}
    assert store.commit_meta(store.head[0]).findings == {"aws_access_key_id": 1}


def test_shard_lookup_reads_only_the_subtrees_a_commit_changed(tmp_path: Path) -> None:
    """Walking history asks each commit's tree for its index shards; subtrees an earlier walk
    read are remembered (by id, role and position), so a commit that changed one file costs a
    few tree reads, not the whole tree's, and every answer is what a walk without memory gives."""
    from memvault import history
    from memvault.format import layout

    s = make_store(tmp_path / "s", StoreSettings(durability="none"))

    def fill(txn: memvault.store.Transaction) -> None:
        for i in range(600):
            txn.write_file(parse_path(f"/memories/d{i % 7}/f{i}.md"), f"note {i}\n".encode())

    s.transact(fill, command="setup", paths=(), actor="t", session="")
    for k in range(30):
        s.put_file(f"/memories/d{k % 7}/f{k * 13}.md", f"note {k} changed\n")
    reads: list[bytes] = []
    real = s.git.tree_entries

    def counting(tree_id: bytes) -> Any:
        reads.append(tree_id)
        return real(tree_id)

    s.git.tree_entries = counting  # type: ignore[method-assign]
    s.index_blobs(s.commit(history.resolve(s, "HEAD~30"))[1])  # the oldest tree walked: read whole once
    whole = len(reads)
    assert whole > 200  # the root, its 16 fan-out trees and at least ~200 trees below them
    digits = len(next(iter(s.index_blobs(s.commit(s.head[0])[1]))))  # the layout's depth (2 to 4)
    reads.clear()
    infos = history.log(s, limit=30)
    assert len(infos) == 30 and all(info.changes for info in infos)
    # Per commit: its root (twice: once to find the layout's depth), the trees on the way to the
    # shard it changed (one per level), and a few more; never the whole tree.
    assert len(reads) <= 30 * (digits + 6), len(reads)

    def plain(tree_id: bytes, role: str, _prefix: bytes) -> layout.Entries:
        return real(tree_id)

    for info in infos:
        tree_id = s.commit(info.commit_id.encode())[1]
        assert s.index_blobs(tree_id) == layout.walk(tree_id, plain, content=False, depth=digits)[0]
