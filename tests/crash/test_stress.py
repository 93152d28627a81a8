"""Concurrency: a small run of ``benchmarks/bench_stress.py``, and the writer lock's guarantees.

The stress run checks, over processes x threads x random commands of all six memory-tool
commands: one commit per successful mutating command and none for a failed one, a linear
history, clear busy/conflict/protocol errors only, and a final tree equal to a serial replay of
the committed commands (see the script's docstring). The lock tests prove that a killed holder's
lock is free at once, that a live holder's lock is never taken (however old the lock file looks),
and that waiting is bounded by ``lock_timeout`` and reported.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from anthropic.lib.tools._beta_functions import ToolError

import memvault
from conftest import PASSPHRASE, make_store
from memvault.errors import LockedError
from memvault.protocol.commands import run_command

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stress.py"
WAITED = re.compile(r"^The memory store is locked by another writer \(waited (\d+\.\d) s\); retry shortly\.$")
HOLDER = """
import sys, time
from pathlib import Path
from memvault.store.lock import StoreLock
with StoreLock(Path(sys.argv[1]), timeout=5).hold():
    print("holding", flush=True)
    time.sleep(120)
"""


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_stress", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_stress"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench()


def test_stress_processes_and_threads(bench: ModuleType, tmp_path: Path) -> None:
    report = bench.run(2, 2, 25, seed=7, directory=str(tmp_path))
    assert report.ok, report.failures
    assert report.commands == 100 and report.views_checked > 5
    assert report.committed >= 10 and report.kinds.get("ok", 0) >= report.committed
    assert set(report.kinds) <= {"ok", "protocol", "busy", "conflict"}


def test_stress_with_a_tiny_lock_timeout(bench: ModuleType, tmp_path: Path) -> None:
    """Writers that give up waiting (busy) must have written nothing; the rest still replays."""
    report = bench.run(2, 2, 15, seed=3, lock_timeout=0.001, durability="none", directory=str(tmp_path))
    assert report.ok, report.failures
    assert report.commands == 60


def _first(records: list[dict[str, Any]], ok: bool, names: tuple[str, ...]) -> dict[str, Any]:
    return next(r for r in records if r["ok"] is ok and r["command"]["command"] in names)


LIES = {
    "success_not_committed": "succeeded but is in 0 commits",
    "failure_committed": "failed (conflict) but made a commit",
    "other_result": "replay of",
    "unclear_error": "unexpected error 'Error: Internal memory store error.'",
    "stale_view": "view showed no state committed while it ran",
}


@pytest.mark.parametrize("lie", list(LIES))
def test_the_checker_catches_what_it_must(bench: ModuleType, tmp_path: Path, lie: str) -> None:
    """The same run with one recorded outcome falsified must FAIL (the checker has teeth)."""
    mutating = ("create", "str_replace", "insert", "delete", "rename")

    def tamper(records: list[dict[str, Any]]) -> None:
        if lie == "success_not_committed":
            r = _first(records, False, mutating)
            r["ok"], r["result"] = True, "Successfully deleted /memories/x.md"
        elif lie == "failure_committed":
            r = _first(records, True, mutating)
            r["ok"], r["result"] = False, "Error: The memory store changed concurrently; retry the command."
        elif lie == "other_result":
            _first(records, True, mutating)["result"] = "The memory file has been edited."
        elif lie == "unclear_error":
            _first(records, False, mutating)["result"] = "Error: Internal memory store error."
        else:  # a view that saw a state that never existed while it ran
            view = next(r for r in records if r["ok"] and r["command"]["command"] == "view")
            view["result"] += "\n     9\tnever written"

    report = bench.run(1, 1, 30, seed=5, durability="none", directory=str(tmp_path), tamper=tamper)
    assert not report.ok
    assert any(LIES[lie] in f for f in report.failures), report.failures


def _start_holder(lock: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_live_holder_is_never_stolen_and_a_killed_one_is_recovered(store_path: Path) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    head = store.head
    holder = _start_holder(store_path / "lock")
    try:
        os.utime(store_path / "lock", (0, 0))  # the lock file looks ancient: still not stolen
        store.lock_timeout = 0.3
        with pytest.raises(ToolError) as info:
            tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
        m = WAITED.match(str(info.value))
        assert m is not None, str(info.value)
        assert float(m.group(1)) >= 0.3  # it waited its whole timeout, and said so
        with pytest.raises(LockedError) as err:
            run_command(store, {"command": "delete", "path": "/memories/a.md"}, actor="t", session="s")
        assert err.value.waited >= 0.3 and str(store_path) not in str(err.value)
        # A fresh store object in this process, and readers: readers never wait.
        other = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, lock_timeout=0.1)
        with pytest.raises(ToolError, match=r"locked by another writer \(waited"):
            memvault.MemoryTool(other).call({"command": "insert", "path": "/memories/a.md", "insert_line": 0,
                                             "insert_text": "x"})  # fmt: skip
        assert memvault.MemoryTool(other).call({"command": "view", "path": "/memories/a.md"}).endswith("1\ta")
        assert store.head == head == other.head
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    # The kernel released the dead holder's flock: the next write goes through.
    store.lock_timeout = 10
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
    assert store.head[1] == head[1] + 1
    assert memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE).snapshot().get("/memories/b.md") is not None


def test_lock_wait_is_bounded_between_threads(store_path: Path) -> None:
    """A thread of this process holding the lock: another thread on the same store object (the
    thread lock) and one on a second store object (flock) both give up after their timeout."""
    store = make_store(store_path)
    second = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, lock_timeout=0.2)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.writing():
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(30)
        store.lock_timeout = 0.2
        for s in (store, second):
            with pytest.raises(LockedError) as err:
                run_command(
                    s, {"command": "create", "path": "/memories/x.md", "file_text": "x"}, actor="a", session="s"
                )
            assert WAITED.match(str(err.value)) and err.value.waited >= 0.2
    finally:
        release.set()
        t.join(30)
    run_command(second, {"command": "create", "path": "/memories/x.md", "file_text": "x"}, actor="a", session="s")
    assert store.snapshot().get("/memories/x.md") is not None


def test_lock_timeout_setting(store_path: Path) -> None:
    store = make_store(store_path)
    assert store.lock_timeout == 30.0
    assert memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, lock_timeout=2.5).lock_timeout == 2.5
    store.lock_timeout = float("inf")  # wait as long as it takes
    run_command(store, {"command": "create", "path": "/memories/i.md", "file_text": "i"}, actor="a", session="s")
    for bad in (-1, float("nan"), True):
        with pytest.raises(ValueError):
            store.lock_timeout = bad  # type: ignore[assignment]
