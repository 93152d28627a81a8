"""Opening a store decodes none of its index shards; a command decodes the shards it needs, and a
damaged shard is refused when a command first needs it, with the error an open that decoded every
shard raised, changing nothing (docs/format.md §8, *Lazy decoding*)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic.lib.tools._beta_functions import ToolError

import memvault
from conftest import PASSPHRASE, make_store, rewrite_packed_object
from memvault.errors import IntegrityError
from memvault.format import records
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.store.transaction import Transaction

#: Files in one directory: their tokens fall in nearly every one of the 256 shards.
FILES = 600
DIRECTORY = "/memories/notes"


def _path(i: int) -> str:
    return f"{DIRECTORY}/n{i:04d}.md"


def _seed(path: Path) -> None:
    store = make_store(path, StoreSettings(durability="none"))

    def fill(txn: Transaction) -> None:
        for i in range(FILES):
            txn.write_file(parse_path(_path(i)), b"note %d\n" % i)

    store.transact(fill, command="import", paths=(DIRECTORY,), actor="test", session="")
    store.close()


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """The shard names of every index shard blob authenticated and decoded, in order (the work
    itself, counted where the record format decodes a shard)."""
    seen: list[bytes] = []
    real = records.decode_shard

    def counting(key: bytes, store_id: bytes, shard: bytes, blob: bytes) -> list[tuple[bytes, bytes, bytes]]:
        seen.append(shard)
        return real(key, store_id, shard, blob)

    monkeypatch.setattr(records, "decode_shard", counting)
    yield seen


def _open(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE)


def _store_files(root: Path) -> dict[str, str]:
    """SHA-256 of every file of a store directory but the advisory lock file."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            if p != root / "lock":
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_opening_a_large_store_and_reading_one_file_decodes_only_its_shards(
    store_path: Path, decodes: list[bytes]
) -> None:
    _seed(store_path)
    with _open(store_path) as store:
        assert decodes == [] and store.shards_decoded == 0  # open: the head is authenticated, no shard read
        assert store.read_text(_path(7)) == "note 7\n"
        # The file's shard and its directory's (/memories/notes): at most two, each once.
        assert 1 <= len(decodes) <= 2 and len(set(decodes)) == len(decodes)
        assert store.shards_decoded == len(decodes)
        first = len(decodes)
        assert store.read_text(_path(7)) == "note 7\n"
        assert store.exists(_path(7)) and not store.exists(f"{DIRECTORY}/absent.md")
        assert len(decodes) <= first + 1  # the absent path's shard at most
        # The memory tool's view of a file: its shard and the directory's, nothing else.
        before = len(decodes)
        out = memvault.MemoryTool(store).call({"command": "view", "path": _path(11)})
        assert isinstance(out, str) and "note 11" in out
        assert len(decodes) <= before + 1
        # A listing needs every name: every shard of the head is decoded, each once.
        tree = store.commit(store.head[0])[1]
        shards = store.index_blobs(tree)
        assert len(shards) > 200
        listed = store.list(DIRECTORY)
        assert len(listed) == FILES
        assert sorted(decodes) == sorted(shards) and len(set(decodes)) == len(decodes)


def test_a_delete_and_an_edit_that_does_not_grow_decode_what_they_touch(store_path: Path, decodes: list[bytes]) -> None:
    _seed(store_path)
    with _open(store_path) as store:
        store.put_file(_path(3), "n3\n")  # smaller than before: no store-wide byte count needed
        touched = len(decodes)
        assert 1 <= touched <= 2
        memvault.MemoryTool(store).call({"command": "delete", "path": _path(4)})
        assert len(decodes) <= touched + 2
        assert store.read_text(_path(3)) == "n3\n"
        assert not store.exists(_path(4))
    with _open(store_path) as store:  # what those commits wrote holds every other entry of their shards
        assert len(store.list(DIRECTORY)) == FILES - 1
        assert store.read_text(_path(5)) == "note 5\n"


def _victim(store: memvault.MemoryStore) -> tuple[str, str, bytes]:
    """``(a file whose shard is not its directory's, a file in neither shard, that shard's blob id)``."""
    tree = store.commit(store.head[0])[1]
    blobs = store.index_blobs(tree)
    digits = len(next(iter(blobs)))  # a shard is named by this many hex digits of the token (2, 3 or 4)

    def shard(path: str) -> bytes:
        return store.token(path).hex()[:digits].encode()

    directory = shard(DIRECTORY)
    target = next(_path(i) for i in range(FILES) if shard(_path(i)) != directory)
    bad = shard(target)
    other = next(_path(i) for i in range(FILES) if shard(_path(i)) not in (directory, bad))
    return target, other, blobs[bad]


def test_a_tampered_shard_not_read_at_open_is_refused_when_first_read_and_changes_nothing(store_path: Path) -> None:
    _seed(store_path)
    with _open(store_path) as store:
        target, other, blob_id = _victim(store)
        head = store.head

    def flip(data: bytes) -> bytes:
        return data[:100] + bytes([data[100] ^ 1]) + data[101:]

    rewrite_packed_object(store_path, blob_id, flip)
    files = _store_files(store_path)
    with _open(store_path) as store:  # opens: the damaged shard is not read
        assert store.head == head
        assert store.read_text(other) == f"note {int(other[-7:-3])}\n"
        with pytest.raises(IntegrityError) as first:
            store.read_text(target)
        # Nothing of it was taken in: refused again, the same way, by every command that needs it.
        with pytest.raises(IntegrityError) as again:
            store.read_text(target)
        with pytest.raises(IntegrityError) as listing:  # what an open that decoded every shard met
            store.list(DIRECTORY)
        with pytest.raises(IntegrityError) as write:
            store.put_file(target, "overwritten\n")
        with pytest.raises(ToolError) as tool:
            memvault.MemoryTool(store).call({"command": "delete", "path": target})
        for err in (first, again, listing, write):
            assert type(err.value) is type(listing.value) and str(err.value) == str(listing.value)
        assert str(tool.value) == str(listing.value)
        # What opening the store raised before shards were decoded lazily (the git layer's check).
        assert isinstance(first.value, IntegrityError) and str(first.value) == "Memory store integrity check failed."
        assert store.head == head  # nothing committed
        assert store.read_text(other) == f"note {int(other[-7:-3])}\n"
    assert _store_files(store_path) == files


def test_a_complete_state_follows_another_writer_and_stays_complete(store_path: Path, decodes: list[bytes]) -> None:
    """A process whose head state has every shard keeps it whole when another process commits:
    only the shards that commit changed are decoded again."""
    _seed(store_path)
    with _open(store_path) as reader, _open(store_path) as writer:
        assert len(reader.list(DIRECTORY)) == FILES
        listed = len(decodes)
        writer.put_file(_path(9), "changed\n")
        writer.put_file(f"{DIRECTORY}/new.md", "new\n")
        after_writer = len(decodes)
        entries = reader.list(DIRECTORY)
        assert len(entries) == FILES + 1
        assert reader.read_text(_path(9)) == "changed\n"
        assert len(decodes) - after_writer <= 2  # the changed shards only
        assert listed > 200


def test_closing_after_the_memory_tool_read_one_file_decodes_nothing_more(
    store_path: Path, decodes: list[bytes]
) -> None:
    """close() prunes the read times of files that are gone: it judges the reads it records (their
    shards are decoded already) and the shards it decoded, not the whole store."""
    _seed(store_path)
    store = _open(store_path)
    out = memvault.MemoryTool(store).call({"command": "view", "path": _path(21)})
    assert isinstance(out, str) and "note 21" in out
    viewed = len(decodes)
    assert store.access_times.dirty  # the read is recorded, to be merged at close
    store.close()
    assert len(decodes) == viewed <= 2
    with _open(store_path) as again:
        assert set(again.access_times.last_read()) == {again.token(_path(21))}


def test_a_commit_carries_a_damaged_shard_over_by_id_and_restoring_the_object_repairs_every_head(
    store_path: Path,
) -> None:
    """A commit carries over by id every object it does not change (content blobs always did; an
    index shard no command needed now too): damage in one such shard is refused wherever it is
    needed and reported by verify, at every head that carries it, and putting the object back
    repairs them all (docs/format.md §8, *Lazy decoding*)."""
    from memvault.verify import verify

    _seed(store_path)
    with _open(store_path) as store:
        target, other, blob_id = _victim(store)
        head = store.head
    pack_dir = store_path / "repo" / "objects" / "pack"
    original = {p.name: p.read_bytes() for p in pack_dir.iterdir()}
    rewrite_packed_object(store_path, blob_id, lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:])
    with _open(store_path) as store:
        store.put_file(other, "x\n")  # smaller: needs neither the damaged shard nor a count
        assert store.head[1] == head[1] + 1
        assert blob_id in store.index_blobs(store.commit(store.head[0])[1]).values()
        with pytest.raises(IntegrityError, match="integrity check failed"):
            store.read_text(target)
        report = verify(store)
        assert "bad-index" in [p.code for p in report.errors]
    for name, data in original.items():  # the damaged object put back from a copy
        (pack_dir / name).chmod(0o600)
        (pack_dir / name).write_bytes(data)
    with _open(store_path) as store:
        assert store.read_text(target) == f"note {int(target[-7:-3])}\n"
        assert store.read_text(other) == "x\n"
        assert verify(store).errors == []
