"""Concurrent writers on one file: threads sharing a store, threads with their own stores, processes.

Every worker alternates ``insert`` of a unique line at line 0 and a read-modify-write increment
of a ``[count: N]`` line (view, then ``str_replace`` of ``[count: N]`` by ``[count: N+1]``,
re-viewed and retried when another writer got there first). Afterwards: no lost update, one
commit per successful mutating command (and none for a lost race), and a fresh open works.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _child import COUNTER_RE, PASSPHRASE_ENV, hammer

import memvault
from conftest import PASSPHRASE, make_store
from memvault.paths import parse_path
from memvault.store import StoreState

CHILD = Path(__file__).with_name("_child.py")
FILE = "/memories/shared.txt"
INITIAL = "[count: 0]\nheader line\n"


def open_store(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE)


def prepare(path: Path) -> int:
    """Create the store with the shared file; return the seq of the head."""
    with make_store(path) as store:
        memvault.MemoryTool(store).call({"command": "create", "path": FILE, "file_text": INITIAL})
        return store.head[1]


def commands_since(store: memvault.MemoryStore, seq0: int) -> tuple[int, collections.Counter[str]]:
    """Walk the whole chain from the head (every commit authenticated, seq falling by one per
    parent); return its length and the commands of the commits after ``seq0``."""
    commit_id, seq = store.head
    length = 0
    commands: collections.Counter[str] = collections.Counter()
    while True:
        meta = store.commit_meta(commit_id)
        assert meta.seq == seq - length
        if meta.seq > seq0:
            commands[meta.command] += 1
        length += 1
        parents = store.git.read_commit(commit_id)[1]
        if not parents:
            return length, commands
        commit_id = parents[0]


def check_final(path: Path, seq0: int, results: dict[int, dict[str, int]], n_ops: int) -> None:
    inserts = sum(r["inserts"] for r in results.values())
    increments = sum(r["increments"] for r in results.values())
    assert inserts == len(results) * ((n_ops + 1) // 2)
    assert increments == len(results) * (n_ops // 2)

    store = open_store(path)
    text = store.snapshot().read(parse_path(FILE)).decode()
    lines = text.splitlines()
    # The counter: exactly one line, equal to the number of successful increments.
    assert COUNTER_RE.findall(text) == [str(increments)]
    # Every unique inserted line exactly once, nothing lost, nothing extra.
    expected = {f"w{w}-{i}" for w in results for i in range(0, n_ops, 2)}
    counts = collections.Counter(lines)
    assert {line for line in counts if line.startswith("w")} == expected
    assert all(counts[line] == 1 for line in expected)
    assert sorted(lines) == sorted([*expected, f"[count: {increments}]", "header line"])
    # One commit per successful mutating command; a lost race wrote none.
    seq = store.head[1]
    assert seq - seq0 == inserts + increments
    length, commands = commands_since(store, seq0)
    assert length == seq + 1
    assert commands == collections.Counter({"insert": inserts, "str_replace": increments})
    # The store is still writable and a fresh open sees the write.
    memvault.MemoryTool(store).call({"command": "insert", "path": FILE, "insert_line": 0, "insert_text": "tail"})
    assert open_store(path).snapshot().read(parse_path(FILE)).decode().startswith("tail\n")
    store.close()


def run_threads(n: int, work: Any) -> dict[int, dict[str, int]]:
    """Run ``work(worker)`` in ``n`` threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    results: dict[int, dict[str, int]] = {}
    errors: list[BaseException] = []

    def target(worker: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[worker] = work(worker)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=target, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]
    return results


def test_threads_sharing_one_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    seq0 = prepare(path)
    n_ops = 16
    store = open_store(path)

    def work(worker: int) -> dict[str, int]:
        tool = memvault.MemoryTool(store, actor=f"thread-{worker}", session="shared")
        return hammer(tool.call, worker, n_ops, FILE)

    results = run_threads(8, work)
    check_final(path, seq0, results, n_ops)
    store.close()


def test_threads_with_their_own_stores(tmp_path: Path) -> None:
    path = tmp_path / "store"
    seq0 = prepare(path)
    n_ops = 20

    def work(worker: int) -> dict[str, int]:
        store = open_store(path)
        try:
            tool = memvault.MemoryTool(store, actor=f"thread-{worker}", session="own")
            return hammer(tool.call, worker, n_ops, FILE)
        finally:
            store.close()

    results = run_threads(4, work)
    check_final(path, seq0, results, n_ops)


def test_processes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    seq0 = prepare(path)
    n_ops = 20
    go = tmp_path / "go"
    env = {**os.environ, PASSPHRASE_ENV: PASSPHRASE}
    procs = {
        w: subprocess.Popen(
            [
                sys.executable,
                str(CHILD),
                "worker",
                str(path),
                str(w),
                str(n_ops),
                FILE,
                str(tmp_path / f"ready{w}"),
                str(go),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for w in range(3)
    }
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready{w}").exists() for w in procs):
            assert all(p.poll() is None for p in procs.values()), [p.communicate() for p in procs.values()]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        go.touch()
        results = {}
        for w, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results[w] = json.loads(out)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    check_final(path, seq0, results, n_ops)


def test_view_overlapping_a_commit_on_a_shared_store(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A race made deterministic: the reader pauses inside its view while a writer of the same
    store object commits. The view holds the state lock, so the writer's fold into the cached
    state waits; the view sees v1 whole, and the edit lands afterwards."""
    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": FILE, "file_text": "v1\n"})
    in_view, writer_started = threading.Event(), threading.Event()
    real_reading = store.reading
    folds: list[str] = []
    real_fold = StoreState.fold_commit

    @contextlib.contextmanager
    def reading(*, pull: bool = True) -> Any:
        if threading.current_thread().name != "reader":  # the writer's own read before its lock
            with real_reading(pull=pull) as snap:
                yield snap
            return
        with real_reading(pull=pull) as snap:
            in_view.set()
            writer_started.wait(5)
            time.sleep(0.2)  # the writer is now blocked on the state lock, not folding
            folds.append(f"view saw {len(fold_log)} folds")
            yield snap

    fold_log: list[int] = []

    def fold_commit(self: StoreState, *args: Any) -> None:
        fold_log.append(1)
        real_fold(self, *args)

    monkeypatch.setattr(store, "reading", reading)
    monkeypatch.setattr(StoreState, "fold_commit", fold_commit)
    outcome: dict[str, Any] = {}

    def reader() -> None:
        outcome["view"] = memvault.MemoryTool(store).call({"command": "view", "path": FILE})

    def writer() -> None:
        in_view.wait(5)
        writer_started.set()
        edit = {"command": "str_replace", "path": FILE, "old_str": "v1", "new_str": "v2"}
        outcome["edit"] = memvault.MemoryTool(store).call(edit)

    threads = [threading.Thread(target=reader, name="reader"), threading.Thread(target=writer, name="writer")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert folds == ["view saw 0 folds"]  # nothing was folded while the view was open
    assert outcome["view"].endswith("     1\tv1")
    assert outcome["edit"].startswith("The memory file has been edited.")
    assert fold_log  # the commit did fold into the cached state afterwards
    assert memvault.MemoryTool(store).call({"command": "view", "path": FILE}).endswith("     1\tv2")


def test_snapshot_is_isolated_from_later_commits(store: memvault.MemoryStore) -> None:
    memvault.MemoryTool(store).call({"command": "create", "path": FILE, "file_text": "v1\n"})
    snap = store.snapshot()
    memvault.MemoryTool(store).call({"command": "delete", "path": FILE})
    assert snap.get(FILE) is not None and snap.read(parse_path(FILE)) == b"v1\n"
    assert store.snapshot().get(FILE) is None


def test_refresh_keeps_children_when_only_the_parent_shard_changes(store_path: Path) -> None:
    """Another store object writes a file that shares the index shard of a directory but not
    of its children; the first store's incremental reload must keep the directory's children."""
    first = make_store(store_path)
    tool = memvault.MemoryTool(first)

    def shard(path: str) -> str:
        return first.token(path).hex()[:2]

    child = next(
        f"/memories/proj/c{i}.txt"
        for i in range(100_000)
        if shard(f"/memories/proj/c{i}.txt") != shard("/memories/proj")
    )
    tool.call({"command": "create", "path": child, "file_text": "a"})
    name = next(f"/memories/x{i}.md" for i in range(100_000) if shard(f"/memories/x{i}.md") == shard("/memories/proj"))
    second = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    memvault.MemoryTool(second).call({"command": "create", "path": name, "file_text": "x"})
    listing = tool.call({"command": "view", "path": "/memories/proj"})
    assert listing.splitlines()[1:] == ["4.0K\t/memories/proj", f"1B\t{child}"]
    assert first.snapshot().child_names("/memories/proj") == [child.rsplit("/", 1)[1]]
