"""How the branch moves: in place after its first value, by git's lock protocol otherwise.

A later move overwrites ``refs/heads/main``'s 41 bytes in place (no new file, no rename); the
first value, and a branch file that is not a plain singly-linked 41-byte regular file, go through
``main.lock`` and a rename. A reader without the store lock may read a value being overwritten
half old, half new; it then reads the branch again. Crash points and faults of both paths are in
tests/crash (``ref_in_place_written``, ``ref_lock_left``, the fault sweeps).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault.errors import IntegrityError
from memvault.git.repo import GitStore
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.verify import verify


def _put(store: memvault.MemoryStore, name: str, text: str) -> None:
    memvault.MemoryTool(store).call({"command": "create", "path": f"/memories/{name}", "file_text": text})


def _read(store: memvault.MemoryStore, name: str) -> bytes:
    with store.reading() as txn:
        return txn.read(parse_path(f"/memories/{name}"))


def _branch_read_torn_once(monkeypatch: pytest.MonkeyPatch, torn: bytes) -> list[bytes | None]:
    """Make the first branch read return ``torn`` (a value read mid-write), the later ones the
    file; returns the values read, in order."""
    real_head = GitStore.head
    calls: list[bytes | None] = []

    def head_torn_once(self: GitStore) -> bytes | None:
        value = torn if not calls else real_head(self)
        calls.append(value)
        return value

    monkeypatch.setattr(GitStore, "head", head_torn_once)
    return calls


def _ref(path: Path) -> Path:
    return path / "repo" / "refs" / "heads" / "main"


@pytest.mark.parametrize("durability", ["full", "none"])
def test_later_moves_overwrite_the_branch_file_in_place(tmp_path: Path, durability: str) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability=durability))
    ref = _ref(tmp_path / "s")
    inode = ref.stat().st_ino
    values = {ref.read_bytes()}
    for i in range(3):
        _put(store, f"n{i}.md", f"note {i}\n")
        assert ref.stat().st_ino == inode  # the same file, not a renamed new one
        values.add(ref.read_bytes())
        assert ref.read_bytes() == store.head[0] + b"\n"
    assert len(values) == 4
    assert not (ref.parent / "main.lock").exists()
    store.close()
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        assert again.head == store.head


def test_a_hard_linked_branch_file_is_never_written_through(tmp_path: Path) -> None:
    """Someone hard-links the branch file to a file of theirs: the move replaces the branch by a
    rename, and the other name keeps its bytes."""
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    ref = _ref(tmp_path / "s")
    other = tmp_path / "elsewhere"
    os.link(ref, other)
    before = other.read_bytes()
    _put(store, "a.md", "a\n")
    assert other.read_bytes() == before
    assert ref.read_bytes() == store.head[0] + b"\n" != before
    assert ref.stat().st_ino != other.stat().st_ino
    _put(store, "b.md", "b\n")  # the branch file has one link again: in place from now on
    inode = ref.stat().st_ino
    _put(store, "c.md", "c\n")
    assert ref.stat().st_ino == inode


@pytest.mark.parametrize("content", [b"{id}\r\n", b"{id}\n\n", b"{id}"])
def test_a_branch_file_of_another_size_is_replaced_by_the_lock_protocol(tmp_path: Path, content: bytes) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    ref = _ref(tmp_path / "s")
    ref.write_bytes(content.replace(b"{id}", store.head[0]))
    inode = ref.stat().st_ino
    _put(store, "a.md", "a\n")
    assert ref.read_bytes() == store.head[0] + b"\n"
    assert ref.stat().st_ino != inode


def test_a_stale_ref_lock_is_removed_by_the_first_move_in_place(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    store.close()
    lock = _ref(tmp_path / "s").parent / "main.lock"
    lock.write_bytes(b"0" * 40 + b"\n")  # a crashed writer's (or git client's) leftover
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as store:
        _put(store, "a.md", "a\n")
        assert not lock.exists()


def test_a_reader_that_reads_a_half_written_branch_reads_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _put(writer, "a.md", "a\n")
    reader = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert _read(reader, "a.md") == b"a\n"
    old = writer.head[0]
    _put(writer, "b.md", "b\n")
    new = writer.head[0]
    torn = new[:20] + old[20:]
    assert torn not in (old, new)
    calls = _branch_read_torn_once(monkeypatch, torn)
    assert _read(reader, "b.md") == b"b\n"
    assert calls[0] == torn and new in calls
    assert reader.head[0] == new


def test_a_branch_that_stays_on_a_missing_commit_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _put(store, "a.md", "a\n")
    reader = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    head = reader.head[0]
    _put(store, "b.md", "b\n")
    bogus = b"0123456789abcdef" * 2 + head[32:]
    monkeypatch.setattr(GitStore, "head", lambda self: bogus)
    with pytest.raises(IntegrityError):
        _read(reader, "a.md")


def test_a_packed_branch_gets_an_owner_only_loose_ref_whatever_the_umask(tmp_path: Path) -> None:
    """After ``git pack-refs`` and the removal of ``refs/heads``, the next move recreates
    ``refs/heads`` owner-only (0700) even under a permissive umask, and the loose ref takes over."""
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _put(store, "a.md", "a\n")
    store.close()
    repo = tmp_path / "s" / "repo"
    head = _ref(tmp_path / "s").read_bytes()
    (repo / "packed-refs").write_bytes(
        b"# pack-refs with: peeled fully-peeled sorted \n" + head[:40] + b" refs/heads/main\n"
    )
    _ref(tmp_path / "s").unlink()
    (repo / "refs" / "heads").rmdir()  # dulwich needs refs/ itself to see a repository
    old = os.umask(0o002)
    try:
        with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
            _put(again, "b.md", "b\n")
            assert _ref(tmp_path / "s").read_bytes() == again.head[0] + b"\n"
    finally:
        os.umask(old)
    assert stat.S_IMODE((repo / "refs" / "heads").stat().st_mode) == 0o700


def test_verify_that_reads_a_half_written_branch_reads_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _put(store, "a.md", "a\n")
    old = store.head[0]
    _put(store, "b.md", "b\n")
    new = store.head[0]
    torn = new[:20] + old[20:]
    calls = _branch_read_torn_once(monkeypatch, torn)
    report = verify(store)
    assert calls[0] == torn
    assert report.ok, [p.code for p in report.problems]
    assert report.head == new.decode()
