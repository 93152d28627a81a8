"""Crash consistency with real process death.

A child process (``_child.py``) runs one memory command with a crash point armed at one write
step and dies there with ``os._exit(137)``. The parent then checks that the store opens at
exactly the old or the new state (which one is fixed by the crash point), that no rollback
alarm is raised, and that further commands work and are visible from a fresh open.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _child import EXIT_COMMAND_FAILED, EXIT_CRASHED, EXIT_NOT_REACHED, PASSPHRASE_ENV, POINTS

import memvault
from conftest import PASSPHRASE, make_store, seed_files
from memvault.errors import LockedError, StoreNotFoundError
from memvault.paths import MemoryPath
from memvault.protocol.commands import run_command
from memvault.store.lock import StoreLock

CHILD = Path(__file__).with_name("_child.py")
ENV = {**os.environ, PASSPHRASE_ENV: PASSPHRASE}

INITIAL = {
    "/memories/notes.txt": "alpha\nbeta\n",
    "/memories/proj/a.txt": "a\n",
    "/memories/proj/c.md": "c\n",
    "/memories/proj/sub/b.txt": "b\n",
}
COMMANDS: dict[str, dict[str, Any]] = {
    "create": {"command": "create", "path": "/memories/new.txt", "file_text": "fresh\n"},
    "str_replace": {"command": "str_replace", "path": "/memories/notes.txt", "old_str": "beta", "new_str": "gamma"},
    "delete_dir": {"command": "delete", "path": "/memories/proj"},
    "rename_dir": {"command": "rename", "old_path": "/memories/proj", "new_path": "/memories/archive/proj"},
}
NEXT = {"command": "create", "path": "/memories/next.txt", "file_text": "next\n"}

State = dict[str, "bytes | None"]


def run(store: memvault.MemoryStore, command: dict[str, Any]) -> Any:
    return run_command(store, command, actor="parent", session="crash-test")


def open_store(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE)


def read_state(store: memvault.MemoryStore) -> State:
    """Every path of the head: directories map to None, files to their decrypted content."""
    snap = store.snapshot()
    return {p.text: None if snap.is_dir(p) else snap.read(p) for p in snap.descendants(MemoryPath(()))}


def chain_length(store: memvault.MemoryStore) -> int:
    """Commits reachable from the head, each authenticated, with seq falling by one per step."""
    commit_id, seq = store.head
    n = 0
    while True:
        assert store.commit_meta(commit_id).seq == seq - n
        n += 1
        _tree, parents, _msg = store.git.read_commit(commit_id)
        if not parents:
            return n
        commit_id = parents[0]


def orphan_packs(pack_dir: Path) -> list[Path]:
    """Packs without their index."""
    return [p for p in pack_dir.glob("*.pack") if not p.with_suffix(".idx").exists()]


def with_next(state: State) -> State:
    return {**state, "/memories/next.txt": b"next\n"}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, State, int, dict[str, State]]:
    """A store holding ``INITIAL`` (one commit), its state and seq, and each command's after-state."""
    base = tmp_path_factory.mktemp("template")
    path = base / "store"
    store = make_store(path)
    seed_files(store, INITIAL, actor="parent", session="crash-test")
    before, seq = read_state(store), store.head[1]
    store.close()
    afters: dict[str, State] = {}
    for name, command in COMMANDS.items():
        copy = base / name
        shutil.copytree(path, copy)
        with open_store(copy) as s:
            run(s, command)
            afters[name] = read_state(s)
        assert afters[name] != before
    return path, before, seq, afters


@pytest.fixture
def prepared(template: tuple[Path, State, int, dict[str, State]], tmp_path: Path) -> tuple[Path, State, int]:
    path = tmp_path / "store"
    shutil.copytree(template[0], path)
    return path, template[1], template[2]


def expected_after(template: tuple[Path, State, int, dict[str, State]], name: str) -> State:
    return template[3][name]


def child_args(*args: str) -> list[str]:
    return [sys.executable, str(CHILD), *args]


def run_child(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(child_args(*args), env=ENV, capture_output=True, text=True, timeout=timeout)


class Zygote:
    """A ``_child.py zygote`` process: forks one crashing child per job, in parallel."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            child_args("zygote"), env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def crash(self, jobs: list[tuple[Path, str, dict[str, Any]]]) -> list[int]:
        """Run ``(store, point, command)`` jobs, each in its own forked child; their exit codes."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([[str(p), point, cmd] for p, point, cmd in jobs]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the zygote died"
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    yield z
    z.close()


def final_candidates(outcome: str, before: State, after: State) -> list[State]:
    """States allowed after the crash and one more command (``NEXT``) by a freshly opened writer:
    a recorded (``pending``) commit is published, so it behaves like ``new``."""
    if outcome == "old":
        return [with_next(before)]
    return [with_next(after)]


@pytest.mark.parametrize("point", list(POINTS))
def test_crash_at_write_step(
    template: tuple[Path, State, int, dict[str, State]], zygote: Zygote, tmp_path: Path, point: str
) -> None:
    """Each command of ``COMMANDS`` dies at ``point`` (children run in parallel, one store each)."""
    _, before, seq0, afters = template
    paths = {name: tmp_path / name for name in COMMANDS}
    for path in paths.values():
        shutil.copytree(template[0], path)
    codes = zygote.crash([(paths[name], point, command) for name, command in COMMANDS.items()])
    assert codes == [EXIT_CRASHED] * len(COMMANDS)
    for name, command in COMMANDS.items():
        check_recovery(paths[name], point, command, before, afters[name], seq0)


def check_recovery(path: Path, point: str, command: dict[str, Any], before: State, after: State, seq0: int) -> None:
    outcome = POINTS[point]
    lock_file = path / "repo" / "refs" / "heads" / "main.lock"
    if point == "ref_lock_left":
        assert lock_file.exists()  # the crash really left dulwich's ref lock behind
    pack_dir = path / "repo" / "objects" / "pack"
    if point in ("pack_torn", "idx_torn", "merge_pack_torn"):
        assert list(pack_dir.glob("tmp_*"))  # a torn temporary pack or index was left
    if point in ("pack_before_idx", "merge_before_idx", "merge_retiring"):
        assert orphan_packs(pack_dir)  # a pack without its index was left (unused by git and dulwich)

    # A fresh open (a reader: it does not move the branch) never raises and shows old or new
    # exactly; a recorded commit counts as new even before the branch moves.
    reader = open_store(path)
    assert read_state(reader) == (before if outcome == "old" else after)
    assert reader.head[1] == (seq0 if outcome == "old" else seq0 + 1)

    # The next writer (a fresh open) succeeds, with no rollback alarm.
    writer = open_store(path)
    orphans = orphan_packs(pack_dir)
    run(writer, NEXT)
    assert not list(pack_dir.glob("tmp_*"))  # the writer swept the temporary files
    assert orphan_packs(pack_dir) == orphans  # a pack without index is left while young (git gc)
    for orphan in orphans:  # ... and swept by a writer once old
        os.utime(orphan, (time.time() - 3600, time.time() - 3600))
    if orphans:
        with open_store(path) as sweeper:
            sweeper.maintain(wait=5)  # what `memvault gc` runs
        assert not orphan_packs(pack_dir)
    state = read_state(writer)
    assert state in final_candidates(outcome, before, after)
    published = state == with_next(after)
    assert writer.head[1] == seq0 + (2 if published else 1)
    assert not lock_file.exists()

    # The reader opened before the recovery follows the branch without any alarm.
    assert read_state(reader) == state

    # A fresh open sees the same, over one unbroken authenticated chain ending in NEXT.
    fresh = open_store(path)
    assert read_state(fresh) == state
    assert chain_length(fresh) == fresh.head[1] + 1
    head_parent = fresh.git.read_commit(fresh.head[0])[1][0]
    assert fresh.commit_meta(head_parent).command == (command["command"] if published else "setup")
    for s in (reader, writer, fresh):
        s.close()


@pytest.mark.parametrize("point", ["keyring_torn_half", "cas_before", "cas_after"])
def test_crash_in_a_fresh_interpreter(template: Any, tmp_path: Path, point: str) -> None:
    """The same crash in a child started with ``sys.executable`` (no fork) recovers the same way."""
    _, before, seq0, afters = template
    path = tmp_path / "store"
    shutil.copytree(template[0], path)
    proc = run_child("crash", str(path), point, json.dumps(COMMANDS["rename_dir"]))
    assert proc.returncode == EXIT_CRASHED, proc.stderr
    check_recovery(path, point, COMMANDS["rename_dir"], before, afters["rename_dir"], seq0)


@pytest.mark.parametrize("point", ["keyring_after", "cas_before", "ref_lock_left"])
def test_next_writer_publishes_the_recorded_commit(template: Any, zygote: Zygote, tmp_path: Path, point: str) -> None:
    _, before, seq0, afters = template
    path = tmp_path / "store"
    shutil.copytree(template[0], path)
    assert zygote.crash([(path, point, COMMANDS["str_replace"])]) == [EXIT_CRASHED]
    store = open_store(path)
    run(store, NEXT)
    assert read_state(store) == with_next(afters["str_replace"])
    assert store.head[1] == seq0 + 2


def test_writer_with_a_stale_cache_publishes_the_recorded_commit(
    prepared: tuple[Path, State, int], zygote: Zygote
) -> None:
    """The publish path works when reached: here the writer's cache is behind the branch."""
    path, before, seq0 = prepared
    early = open_store(path)
    assert read_state(early) == before
    with open_store(path) as other:
        run(other, {"command": "create", "path": "/memories/x.txt", "file_text": "x\n"})
    assert zygote.crash([(path, "cas_before", COMMANDS["create"])]) == [EXIT_CRASHED]
    run(early, NEXT)
    want = with_next({**before, "/memories/x.txt": b"x\n", "/memories/new.txt": b"fresh\n"})
    assert read_state(early) == want
    assert read_state(open_store(path)) == want
    assert early.head[1] == seq0 + 3
    early.close()


def test_two_crashes_in_a_row(prepared: tuple[Path, State, int], template: Any, zygote: Zygote) -> None:
    """Crashes one after another (the second on top of a recorded, unpublished commit)."""
    path, before, seq0 = prepared
    afters = template[3]
    assert zygote.crash([(path, "cas_before", COMMANDS["str_replace"])]) == [EXIT_CRASHED]
    assert zygote.crash([(path, "cas_before", COMMANDS["create"])]) == [EXIT_CRASHED]
    # The second writer died in its first compare-and-swap: publishing the first writer's
    # recorded commit, before its own command ran. So only the str_replace is recorded.
    assert read_state(open_store(path)) == afters["str_replace"]
    assert zygote.crash([(path, "git_write_before", COMMANDS["delete_dir"])]) == [EXIT_CRASHED]
    store = open_store(path)
    assert read_state(store) == afters["str_replace"]
    run(store, NEXT)
    fresh = open_store(path)
    assert read_state(fresh) == with_next(afters["str_replace"])
    assert chain_length(fresh) == fresh.head[1] + 1 == seq0 + 3
    assert fresh.commit_meta(fresh.git.read_commit(fresh.head[0])[1][0]).command == "str_replace"


def test_stale_ref_lock_does_not_block_the_next_writer(prepared: tuple[Path, State, int]) -> None:
    path, before, seq0 = prepared
    lock_file = path / "repo" / "refs" / "heads" / "main.lock"
    lock_file.write_bytes(b"0123456789abcdef0123456789abcdef01234567\n")
    store = open_store(path)
    assert read_state(store) == before
    run(store, NEXT)
    assert not lock_file.exists()
    fresh = open_store(path)
    assert read_state(fresh) == with_next(before)
    assert fresh.head[1] == seq0 + 1


def test_killed_lock_holder_releases_the_lock(prepared: tuple[Path, State, int], template: Any, tmp_path: Path) -> None:
    path, before, seq0 = prepared
    command = COMMANDS["create"]
    after = expected_after(template, "create")
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "hang", str(path), json.dumps(command), str(ready)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # The hung child holds the store lock (it is inside its compare-and-swap).
        with pytest.raises(LockedError):
            with StoreLock(path / "lock", timeout=0.3).hold():
                pass
        # Readers do not need the lock and raise no alarm; the hung writer already recorded its
        # commit (durable, authentic), so they serve it.
        assert read_state(open_store(path)) == after
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -9
    with StoreLock(path / "lock", timeout=2).hold():
        pass
    store = open_store(path)
    start = time.monotonic()
    run(store, NEXT)
    assert time.monotonic() - start < 5
    # The killed writer had recorded its commit: the next writer published it first.
    assert read_state(open_store(path)) == with_next(after)
    assert store.head[1] == seq0 + 2


def test_tool_works_after_crash(prepared: tuple[Path, State, int], template: Any, zygote: Zygote) -> None:
    """The SDK tool (not just the protocol layer) runs normally over a recovered store."""
    path, before, _ = prepared
    after = expected_after(template, "delete_dir")
    assert zygote.crash([(path, "cas_after", COMMANDS["delete_dir"])]) == [EXIT_CRASHED]
    tool = memvault.MemoryTool(open_store(path), actor="agent", session="s")
    assert "proj" not in tool.call({"command": "view", "path": "/memories"})
    tool.call(NEXT)
    listing = tool.call({"command": "view", "path": "/memories"})
    assert "proj" not in listing and "next.txt" in listing
    assert read_state(open_store(path)) == with_next(after)


@pytest.mark.parametrize("when", ["before", "after"])
def test_crash_while_creating_a_store(tmp_path: Path, when: str) -> None:
    """Dying at the atomic write of ``memvault.json``, before or after it: a new store is built in
    a hidden sibling and renamed into place last, so either way there is no store at the path,
    and creating one there works (the sibling a killed process leaves is inert)."""
    path = tmp_path / "store"
    proc = run_child("create-crash", str(path), when)
    assert proc.returncode == EXIT_CRASHED, proc.stderr
    with pytest.raises(StoreNotFoundError):
        open_store(path)
    assert not path.exists()
    [left] = [p.name for p in tmp_path.iterdir()]
    assert left.startswith(".store.memvault-init-")
    store = make_store(path)
    assert read_state(store) == {}
    run(store, NEXT)
    assert read_state(open_store(path)) == with_next({})


def test_harness_reports_an_unreached_crash_point(prepared: tuple[Path, State, int], zygote: Zygote) -> None:
    """Guard for the harness: a child that never reaches its crash point does not pass as a crash."""
    path, before, _ = prepared
    failing = {"command": "delete", "path": "/memories/absent.txt"}
    view = {"command": "view", "path": "/memories/notes.txt"}
    codes = zygote.crash([(path, "keyring_before", failing), (path, "keyring_before", view)])
    assert codes == [EXIT_COMMAND_FAILED, EXIT_NOT_REACHED]
    assert read_state(open_store(path)) == before
