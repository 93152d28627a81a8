"""Durable commits make their objects durable with one syncfs (Linux), else an fsync per file.

The crash and fault tests cover each write step; these check which of the two ways a durable
store uses, that a failing syncfs fails the command cleanly (nothing published, the store as
before), and that the fallback still fsyncs every object and directory.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault import fsutil
from memvault.errors import StorageError
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.verify import verify


def _files(store: memvault.MemoryStore) -> dict[str, bytes]:
    snap = store.snapshot()
    root = parse_path("/memories", store.settings)
    return {p.text: snap.read(p) for p in snap.descendants(root) if not snap.is_dir(p)}


class Counter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.syncfs = 0
        self.fsync = 0
        real_fsync = os.fsync
        real_syncfs = fsutil._syncfs

        def fsync(fd: int) -> None:
            self.fsync += 1
            real_fsync(fd)

        def syncfs(fd: int) -> None:
            self.syncfs += 1
            real_syncfs(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(fsutil, "_syncfs", syncfs)


@pytest.mark.skipif(not fsutil.syncfs_available(), reason="syncfs needs Linux 5.8+ (the fallback is tested below)")
def test_durable_commit_uses_one_syncfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the commit journal (format version 4 and older, or ``MEMVAULT_NO_JOURNAL=1``):
    the pack, one syncfs, then the keyring's fdatasync (test_journal.py: one flush with it)."""
    monkeypatch.setenv("MEMVAULT_NO_JOURNAL", "1")
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    count = Counter(monkeypatch)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    assert count.syncfs == 1  # all 9 objects and their directories at once
    assert count.fsync == 0  # the keyring uses fdatasync; the branch move is synced by the next syncfs
    # ... which comes before that commit's keyring record: the branch on disk is then never more
    # than one commit behind the keyring (the recorded commit a fresh open serves).
    order: list[tuple[str, bytes | None]] = []
    real_syncfs, real_fdatasync = fsutil._syncfs, os.fdatasync
    monkeypatch.setattr(fsutil, "_syncfs", lambda fd: (order.append(("syncfs", store.git.head())), real_syncfs(fd)))
    monkeypatch.setattr(os, "fdatasync", lambda fd: (order.append(("fdatasync", None)), real_fdatasync(fd))[1])
    before = store.head[0]
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
    assert order == [("syncfs", before), ("fdatasync", None)]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names the synced files through /proc")
def test_the_first_branch_value_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating a store writes the branch for the first time: no earlier keyring record could
    stand in for it, so it is fsynced (file and directory) even where syncfs is used."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    make_store(tmp_path / "s", StoreSettings(durability="full"))
    # A new store is built in a hidden sibling and renamed into place: the branch is written there.
    assert any(p.endswith("/repo/refs/heads/main.lock") for p in synced)
    assert any(p.endswith("/repo/refs/heads") for p in synced)
    assert str(tmp_path) in synced  # and the rename into place is made durable


def test_fallback_fsyncs_every_object_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without syncfs a commit fsyncs its pack and its index (each before its rename), then the
    pack directory and ``refs/heads`` (for a move a writer with syncfs left unsynced), and
    fdatasyncs the keyring, then the branch file it overwrote in place."""
    monkeypatch.setattr(fsutil, "_LIBC_SYNCFS", None)
    assert not fsutil.syncfs_available()
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    count = Counter(monkeypatch)
    synced: list[str] = []
    counting_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.path.isdir("/proc/self/fd"):
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        counting_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    datasynced: list[str] = []
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        datasynced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else "?")
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    assert count.syncfs == 0
    assert count.fsync >= 3 + 1  # pack, index, pack directory, refs/heads
    assert len(datasynced) == 2  # the keyring record, then the branch
    if os.path.isdir("/proc/self/fd"):
        assert datasynced == [str(tmp_path / "s" / "keyring"), str(tmp_path / "s" / "repo" / "refs" / "heads" / "main")]
    if os.path.isdir("/proc/self/fd"):
        repo = str(tmp_path / "s" / "repo")
        names = [p[len(repo) + 1 :] for p in synced if p.startswith(repo)]
        assert any(n.startswith("objects/pack/tmp_pack_") for n in names), names
        assert any(n.startswith("objects/pack/tmp_idx_") for n in names), names
        assert "objects/pack" in names and "refs/heads" in names, names
        pack_at = names.index("objects/pack")
        assert all(names.index(n) < pack_at for n in names if n.startswith("objects/pack/tmp_")), names
    store.close()
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        assert _files(again) == {"/memories/a.md": b"a\n"}


def test_none_durability_never_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    count = Counter(monkeypatch)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    assert (count.syncfs, count.fsync) == (0, 0)


@pytest.mark.skipif(not fsutil.syncfs_available(), reason="syncfs needs Linux 5.8+")
def test_failing_syncfs_fails_the_command_and_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_NO_JOURNAL", "1")  # with it, a commit syncs no filesystem (test_journal.py)
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    before, seq = _files(store), store.head[1]

    def broken(_fd: int) -> Any:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(fsutil, "_syncfs", broken)
    with pytest.raises(StorageError) as info:
        store.transact(
            lambda txn: txn.write_file(parse_path("/memories/b.md", store.settings), b"b\n"),
            command="create", paths=("/memories/b.md",), actor="t", session="",
        )  # fmt: skip
    assert "Input/output error" in str(info.value) and str(tmp_path) not in str(info.value)
    assert not info.value.outcome_unknown
    monkeypatch.undo()
    assert (_files(store), store.head[1]) == (before, seq)
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE, check_head=False) as again:
        report = verify(again)
        assert report.ok, report.problems
        assert _files(again) == before
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})  # and the store goes on
    assert _files(store) == {**before, "/memories/b.md": b"b\n"}
