"""A root in object storage keeps a bounded number of its stores' replicas in the host's cache:
the least recently used closed ones go, never an open one (in this process or another), never with
the host state off; and a deleted replica loses no rollback detection (the mark is in the host
state)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

from conftest import FAST_KDF, PASSPHRASE  # noqa: E402
from memvault.errors import RollbackDetectedError  # noqa: E402
from memvault.keys.slots import Unlock  # noqa: E402
from memvault.server.replicas import USE_SUFFIX  # noqa: E402
from memvault.server.root import ServerRoot  # noqa: E402

UNLOCK = Unlock(passphrase=PASSPHRASE)


def make_root(s3_env: Any, tmp_path: Path, stores: int, **options: Any) -> tuple[ServerRoot, list[str], Path]:
    cache = tmp_path / "cache"
    made = ServerRoot.init(s3_env.url("root"), UNLOCK, kdf=FAST_KDF, durability="none", cache_dir=str(cache))
    ids = [made.create_store(f"s{i}").id for i in range(stores)]
    made.close()
    return ServerRoot.open(s3_env.url("root"), UNLOCK, cache_dir=str(cache), **options), ids, cache


def write(root: ServerRoot, store_id: str, path: str) -> None:
    with root.memories(store_id) as memories:
        memories.create(path, "x", actor="test")


def replicas(cache: Path, ids: list[str]) -> set[str]:
    return {i for i in ids if (cache / i).is_dir()}


def test_closed_replicas_beyond_the_bound_go_least_recently_used_first(s3_env: Any, tmp_path: Path) -> None:
    root, ids, cache = make_root(s3_env, tmp_path, 6, open_stores=2, cache_replicas=3)
    try:
        for n, store_id in enumerate(ids):
            write(root, store_id, "/m.md")
            root.replicas.trim(ids)
            kept = replicas(cache, ids)
            assert len(kept) <= 3 and store_id in kept
            assert kept >= {i for i in ids[max(0, n - 1) : n + 1]}  # the two open stores stay
        assert replicas(cache, ids) == set(ids[-3:])  # the three used last
        for store_id in ids:  # a store whose replica went opens again with all its memories
            with root.memories(store_id) as memories:
                assert [m.path for m in memories.list().data] == ["/m.md"]  # type: ignore[union-attr]
    finally:
        root.close()


def test_a_replica_open_in_another_process_stays(s3_env: Any, tmp_path: Path) -> None:
    root, ids, cache = make_root(s3_env, tmp_path, 3, open_stores=1, cache_replicas=1)
    try:
        write(root, ids[0], "/m.md")
        # Another process of this host has the first store open: it holds the shared mark.
        use = cache / (ids[0] + USE_SUFFIX)
        holder = subprocess.Popen(
            [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_SH); "
             "print('held', flush=True); sys.stdin.read()", str(use)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            for store_id in ids[1:]:
                write(root, store_id, "/m.md")
            root.replicas.trim(ids)
            assert replicas(cache, ids) == {ids[0], ids[2]}  # the other process's and the open one
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(timeout=30)
        root.replicas.trim(ids)
        assert replicas(cache, ids) == {ids[2]}
        fd = os.open(use, os.O_RDONLY)
        try:  # nothing of the deletion stays locked
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        root.close()


def test_with_the_host_state_off_no_replica_is_deleted(
    s3_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", "off")  # the replicas then keep the high-water marks
    root, ids, cache = make_root(s3_env, tmp_path, 3, open_stores=1, cache_replicas=1)
    try:
        for store_id in ids:
            write(root, store_id, "/m.md")
        assert root.replicas.trim(ids) == []
        assert replicas(cache, ids) == set(ids)
    finally:
        root.close()


def test_a_rollback_of_a_store_whose_replica_went_is_still_detected(s3_env: Any, tmp_path: Path) -> None:
    root, ids, cache = make_root(s3_env, tmp_path, 2, open_stores=1, cache_replicas=1)
    target, other = ids
    prefix = f"root/stores/{target}"
    try:
        write(root, target, "/a.md")
        old = s3_env.copy_prefix(prefix)
        write(root, target, "/b.md")
        write(root, other, "/c.md")  # the target is closed
        root.replicas.trim(ids)  # (or the background pass the close started has done it already)
        assert not (cache / target).exists() and (cache / other).is_dir()
        s3_env.put_back_prefix(prefix, old)  # the bucket serves the old copy of the store
        with pytest.raises(RollbackDetectedError):
            with root.memories(target) as memories:
                memories.list()
    finally:
        root.close()
