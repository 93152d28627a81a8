"""``memvault migrate pull|push`` killed with SIGKILL at chosen and at random points (several seeds),
then run again: nothing imported twice, no memory created twice on the API, nothing lost."""

from __future__ import annotations

import random
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import memvault
from fake_memory_stores import FakeMemoryStores
from memvault.transfer.migrate import load_state, pull, push
from memvault.verify import verify
from migratesupport import cli_args, cli_env, client, files, imported, key_file, opened, run_cli, summary

ACTORS = [{"type": "api_actor", "api_key_id": "apikey_1"}, {"type": "session_actor", "session_id": "sesn_1"}, None]


def _remote_history(fake: FakeMemoryStores, rng: random.Random) -> str:
    sid = fake.create_store()
    for round_ in range(3):
        for i in range(8):
            fake.write(sid, f"/notes/n{i}.md", f"note {i}, round {round_}", actor=rng.choice(ACTORS))
    fake.delete(sid, "/notes/n3.md")
    fake.delete(sid, "/notes/n5.md")
    fake.redact(sid, fake.versions(sid)[1].id)
    return sid


def _kill_later(proc: subprocess.Popen[str], delay: float) -> None:
    def run() -> None:
        time.sleep(delay)
        proc.kill()

    threading.Thread(target=run, daemon=True).start()


def _run_killed(args: list[str], env: dict[str, str], fake: FakeMemoryStores, how: str, rng: random.Random) -> bool:
    """Run ``args``, killing the process as ``how`` says; whether it was killed before it ended."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    op, _, when = how.partition(":")
    if op == "time":  # some time after its first call: anywhere in its commits
        fake.after(
            "retrieve_store", fake.count("retrieve_store") + 1, lambda: _kill_later(proc, rng.uniform(0.02, 0.35))
        )
    elif when == "after":  # the change was made on the API, its answer never arrives
        fake.after(op, fake.count(op) + rng.randint(1, 4), proc.kill)
    else:
        fake.before(op, fake.count(op) + rng.randint(1, 6), proc.kill)
    proc.communicate(timeout=60)
    return proc.returncode == -9


@pytest.mark.parametrize(("seed", "how", "history"), [
    (1, "time", True), (2, "time", True), (3, "retrieve_version", False), (4, "time", False),
])  # fmt: skip
def test_a_pull_killed_anywhere_converges(seed: int, how: str, history: bool, tmp_path: Path) -> None:
    rng = random.Random(seed)
    with FakeMemoryStores() as fake:
        sid = _remote_history(fake, rng)
        key = key_file(tmp_path)
        memvault.MemoryStore.create(tmp_path / "s", key_file=key).close()
        env = cli_env(key)
        args = ["migrate", "pull", "--api-url", fake.url, "--memory-store", sid] + (["--history"] if history else [])

        killed = _run_killed(cli_args(tmp_path / "s", *args), env, fake, how, rng)
        if how != "time":
            assert killed
        fake.write(sid, "/notes/n0.md", "written between the runs")
        done = run_cli(tmp_path / "s", env, *args, "--json")
        assert done.returncode == 0, done.stderr
        assert summary(done)["conflicts"] == []

        with opened(tmp_path / "s", key) as store:
            assert verify(store).ok
            versions = imported(store)
            assert len(versions) == len(set(versions))  # no version imported twice
            if history:
                assert versions == [v.id for v in fake.versions(sid)]
            assert files(store) == fake.files(sid)  # nothing lost
            state = load_state(store, sid)
            assert {e.path for e in state.entries.values() if e.path} == set(fake.files(sid))
            assert pull(store, client(fake.url), sid, history=history).commits == 0


@pytest.mark.parametrize(("seed", "how"), [(5, "create_memory"), (6, "update_memory:after"), (7, "time")])
def test_a_push_killed_anywhere_converges(seed: int, how: str, tmp_path: Path) -> None:
    rng = random.Random(seed)
    with FakeMemoryStores() as fake:
        sid = fake.create_store()
        key = key_file(tmp_path)
        with memvault.MemoryStore.create(tmp_path / "s", key_file=key) as store:
            for i in range(10):
                store.put_file(f"/memories/m{i}.md", f"first {i}", actor="me")
            assert push(store, client(fake.url), sid).created
            for i in range(0, 10, 2):
                store.put_file(f"/memories/m{i}.md", f"second {i}", actor="me")
            for i in range(10, 20):
                store.put_file(f"/memories/m{i}.md", f"first {i}", actor="me")
        env = cli_env(key)
        args = ["migrate", "push", "--api-url", fake.url, "--memory-store", sid]

        killed = _run_killed(cli_args(tmp_path / "s", *args), env, fake, how, rng)
        if how != "time":
            assert killed
        done = run_cli(tmp_path / "s", env, *args, "--json")
        assert done.returncode == 0, done.stderr

        created = Counter(v.memory_id for v in fake.versions(sid) if v.operation == "created")
        assert len(created) == 20 and set(created.values()) == {1}  # no memory created twice
        modified = Counter(v.memory_id for v in fake.versions(sid) if v.operation == "modified")
        assert len(modified) == 5 and set(modified.values()) == {1}
        with opened(tmp_path / "s", key) as store:
            assert fake.files(sid) == files(store)  # nothing lost
            assert verify(store).ok
            again = push(store, client(fake.url), sid)
            assert (again.unchanged, again.commits, again.created, again.updated) == (20, 0, [], [])
