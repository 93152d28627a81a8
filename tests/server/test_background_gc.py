"""A server on a root in object storage compacts its stores in the background (``--gc-every``):
through a replica of its own, so writes through the server never wait for a gc; a failing gc is
logged and counted and serving goes on; the store's gc lease keeps two roots (as two processes
or hosts would) from compacting one store at once; a local root runs none."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

import anthropic  # noqa: E402

from conftest import FAST_KDF, PASSPHRASE  # noqa: E402
from memvault.cli import main  # noqa: E402
from memvault.keys.slots import Unlock  # noqa: E402
from memvault.remote import lease as lease_module  # noqa: E402
from memvault.server import compaction  # noqa: E402
from memvault.server.app import ServerApp  # noqa: E402
from memvault.server.compaction import GcPolicy, GcRun  # noqa: E402
from memvault.server.root import ServerRoot  # noqa: E402
from serversupport import serve_root, stop_server  # noqa: E402

UNLOCK = Unlock(passphrase=PASSPHRASE)
CHECKPOINT = re.compile(r"/log/([0-9]{20})\.ckpt$")
RECORD = re.compile(r"/log/([0-9]{20})$")


def make_root(s3: Any, tmp_path: Path) -> tuple[str, str]:
    """A new root in the bucket with one store: ``(admin key, store id)``."""
    made = ServerRoot.init(s3.url("root"), UNLOCK, kdf=FAST_KDF, durability="none", cache_dir=str(tmp_path / "init"))
    _record, key = made.create_key("admin", admin=True)
    store_id = made.create_store("s").id
    made.close()
    return key, store_id


@contextmanager
def serving(s3: Any, cache: Path, policy: GcPolicy) -> Iterator[tuple[ServerRoot, ServerApp, str, list[GcRun]]]:
    """The root served on a free loopback port with ``policy``: root, app, URL and the gc steps seen."""
    root = ServerRoot.open(s3.url("root"), UNLOCK, cache_dir=str(cache), gc=policy)
    runs: list[GcRun] = []
    root.gc.observers.append(runs.append)
    server, thread, port, app = serve_root(root)  # the app closes the root at shutdown
    try:
        yield root, app, f"http://127.0.0.1:{port}", runs
    finally:
        stop_server(server, thread)


def client(url: str, key: str) -> Any:
    return anthropic.Anthropic(api_key=key, base_url=url, max_retries=0).beta.memory_stores.memories


def store_keys(s3: Any, store_id: str) -> list[str]:
    return [k for k in s3.keys() if k.startswith(f"root/stores/{store_id}/")]


def wait_for(predicate: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def metric(app: ServerApp, name: str, outcome: str) -> float:
    text = app.metrics.render().decode()
    found = re.search(rf'^{name}\{{outcome="{outcome}"\}} ([0-9.e+]+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_enough_commits_compact_the_store_and_its_objects_drop(s3_env: Any, tmp_path: Path) -> None:
    key, store_id = make_root(s3_env, tmp_path)
    with serving(s3_env, tmp_path / "cache", GcPolicy(every=4, grace=0.0)) as (root, app, url, runs):
        memories = client(url, key)
        counts = []
        for n in range(8):
            counts.append(len(store_keys(s3_env, store_id)))
            memories.create(store_id, path=f"/m{n}.md", content=f"memory {n}")
            assert root.gc.idle(30)
            if runs:
                break
        assert [r.outcome for r in runs] == ["compacted"]
        assert 2 <= n <= 4  # the store's own first commits count: the fourth commit at the latest
        after = store_keys(s3_env, store_id)
        checkpoints = [int(m.group(1)) for k in after if (m := CHECKPOINT.search(k))]
        assert len(checkpoints) == 1
        records = [int(m.group(1)) for k in after if (m := RECORD.search(k))]
        assert all(r > checkpoints[0] for r in records)  # grace 0: what the checkpoint holds is gone
        assert len(after) < counts[-1]  # fewer objects than before the last commit, though it added some
        assert runs[0].deleted >= counts[-1] - len(after)
        assert metric(app, "memvault_gc_runs_total", "compacted") == 1.0
        # Serving goes on: every memory is there, from the serving replica and from a fresh one.
        paths = sorted(f"/m{i}.md" for i in range(n + 1))
        assert sorted(m.path for m in memories.list(store_id)) == paths
        assert not (tmp_path / "cache" / "gc" / store_id).exists()  # the gc's own replica is gone
    with serving(s3_env, tmp_path / "cold", GcPolicy()) as (_root, _app, url, _runs):
        assert sorted(m.path for m in client(url, key).list(store_id)) == paths
        cold = client(url, key)
        first = cold.list(store_id).data[0]
        assert cold.retrieve(first.id, memory_store_id=store_id).content == "memory 0"  # read from the checkpoint


def test_a_write_completes_while_a_background_gc_holds_its_replica(
    s3_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, store_id = make_root(s3_env, tmp_path)
    inside, release = threading.Event(), threading.Event()
    real = compaction.compact_remote

    def slow(store: Any, grace: float | None = None) -> Any:
        with store.writing():  # the gc replica's writer lock, held as a long gc holds it
            inside.set()
            release.wait(30)
        return real(store, grace)

    monkeypatch.setattr(compaction, "compact_remote", slow)
    with serving(s3_env, tmp_path / "cache", GcPolicy(every=2, grace=0.0)) as (root, app, url, runs):
        memories = client(url, key)
        for n in range(4):
            memories.create(store_id, path=f"/m{n}.md", content="x")
            if inside.wait(0.5):
                break
        assert inside.is_set() and root.gc.running() == store_id
        started = time.monotonic()
        memories.create(store_id, path="/during.md", content="written while the gc runs")
        memories.update(memories.list(store_id).data[0].id, memory_store_id=store_id, content="changed too")
        took = time.monotonic() - started
        assert root.gc.running() == store_id and not runs  # the gc had not finished
        assert took < 10.0
        release.set()
        assert root.gc.idle(30)
        assert [r.outcome for r in runs] == ["compacted"]
        assert "/during.md" in [m.path for m in memories.list(store_id)]


def test_a_failing_gc_is_counted_and_serving_goes_on(
    s3_faulty: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key, store_id = make_root(s3_faulty, tmp_path)
    s3_faulty.proxy.add_fault("500", key_regex=r"/gc-lease$", times=10_000)  # only a gc asks for the lease
    caplog.set_level(logging.INFO, logger="memvault.server")
    with serving(s3_faulty, tmp_path / "cache", GcPolicy(every=2, grace=0.0)) as (root, app, url, runs):
        memories = client(url, key)
        for n in range(4):
            memories.create(store_id, path=f"/secret-{n}.md", content=f"the content {n}")
            assert root.gc.idle(30)
        assert [r.outcome for r in runs] == ["failed"]  # and not tried again at once on every commit
        assert metric(app, "memvault_gc_runs_total", "failed") == 1.0
        assert s3_faulty.proxy.requests(key_regex=r"/gc-lease$")  # it did reach the bucket
        assert sorted(m.path for m in memories.list(store_id)) == [f"/secret-{n}.md" for n in range(4)]
        assert not [k for k in s3_faulty.keys() if CHECKPOINT.search(k)]
    logged = [r.getMessage() for r in caplog.records if "gc" in r.getMessage()]
    assert logged and all("secret" not in line and "content" not in line for line in logged)
    assert any("failed: ServiceError" in line for line in logged)


def test_the_lease_keeps_two_roots_from_compacting_one_store_at_once(
    s3_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, store_id = make_root(s3_env, tmp_path)
    holding, release = threading.Event(), threading.Event()
    real = lease_module.Lease.acquire

    def held(self: Any) -> None:
        real(self)
        if not holding.is_set():  # the first gc to take the lease keeps it, before compacting, until let go
            holding.set()
            release.wait(30)

    monkeypatch.setattr(lease_module.Lease, "acquire", held)
    policy = GcPolicy(every=2, grace=0.0)
    with (
        serving(s3_env, tmp_path / "host-a", policy) as (root_a, _app_a, url_a, runs_a),
        serving(s3_env, tmp_path / "host-b", policy) as (root_b, app_b, url_b, runs_b),
    ):
        for n in range(4):
            client(url_a, key).create(store_id, path=f"/a{n}.md", content="x")
            if holding.wait(0.5):
                break
        assert holding.is_set() and root_a.gc.running() == store_id
        for n in range(4):  # B's commits make it due as well, while A holds the lease
            client(url_b, key).create(store_id, path=f"/b{n}.md", content="x")
            assert root_b.gc.idle(30)
            if runs_b:
                break
        assert [r.outcome for r in runs_b] == ["busy"] and metric(app_b, "memvault_gc_runs_total", "busy") == 1.0
        assert not runs_a
        release.set()
        assert root_a.gc.idle(30)
        assert [r.outcome for r in runs_a] == ["compacted"]
        checkpoints = [k for k in s3_env.keys() if CHECKPOINT.search(k)]
        assert len(checkpoints) == 1


def test_two_processes_of_one_host_share_no_gc_replica(s3_env: Any, tmp_path: Path) -> None:
    key, store_id = make_root(s3_env, tmp_path)
    cache = tmp_path / "cache"
    root = ServerRoot.open(s3_env.url("root"), UNLOCK, cache_dir=str(cache), gc=GcPolicy(every=1, grace=0.0))
    try:
        import fcntl
        import os

        gc_dir = root.gc_cache_dir(store_id)
        assert gc_dir.parent == cache / "gc" and gc_dir != cache / store_id
        gc_dir.parent.mkdir(parents=True)
        fd = os.open(gc_dir.with_name(gc_dir.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process of this host is compacting the store
        try:
            runs: list[GcRun] = []
            root.gc.observers.append(runs.append)
            with root.memories(store_id) as memories:
                memories.create("/m.md", "x", actor="test")
            assert root.gc.idle(30)
            assert [r.outcome for r in runs] == ["busy"]
        finally:
            os.close(fd)
    finally:
        root.close()


def test_a_local_root_runs_no_gc_and_serve_documents_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = ServerRoot.init(tmp_path / "root", UNLOCK, kdf=FAST_KDF)
    root.close()
    root = ServerRoot.open(tmp_path / "root", UNLOCK, gc=GcPolicy(every=1, interval=1.0))
    try:
        assert not root.gc.policy.enabled
    finally:
        root.close()
    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in ("--gc-every", "--gc-interval", "--gc-grace", "MEMVAULT_GC_EVERY", "MEMVAULT_GC_INTERVAL"):
        assert needle in text


def test_the_interval_compacts_a_quiet_store_and_deletes_once_the_grace_period_has_passed(
    s3_env: Any, tmp_path: Path
) -> None:
    key, store_id = make_root(s3_env, tmp_path)
    with serving(s3_env, tmp_path / "writer", GcPolicy()) as (_root, _app, url, _runs):
        for n in range(3):
            client(url, key).create(store_id, path=f"/m{n}.md", content="x")
    with serving(s3_env, tmp_path / "cache", GcPolicy(interval=0.3, grace=1.5)) as (_root, _app, url, runs):
        assert len(client(url, key).list(store_id).data) == 3  # a read: the process knows the store now
        wait_for(lambda: bool(runs))  # no count given: the interval's pass
        assert runs[0].outcome == "compacted" and runs[0].deleted == 0  # within the grace period nothing goes
        keys = store_keys(s3_env, store_id)
        (position,) = [int(m.group(1)) for k in keys if (m := CHECKPOINT.search(k))]
        assert [k for k in keys if (m := RECORD.search(k)) and int(m.group(1)) <= position]
        wait_for(lambda: len(runs) >= 2, seconds=20)  # once the grace period has passed, a pass deletes
        assert runs[1].outcome == "current" and runs[1].deleted > 0
        keys = store_keys(s3_env, store_id)
        assert not [k for k in keys if (m := RECORD.search(k)) and int(m.group(1)) <= position]
        time.sleep(0.7)
        assert all(r.outcome == "current" for r in runs[1:])  # nothing new: no other checkpoint
        assert len([k for k in store_keys(s3_env, store_id) if CHECKPOINT.search(k)]) == 1


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--gc-every", "-1"], {}, "--gc-every"),
        ([], {"MEMVAULT_GC_EVERY": "often"}, "MEMVAULT_GC_EVERY"),
        ([], {"MEMVAULT_GC_INTERVAL": "-5"}, "--gc-interval"),
        (["--gc-every", "10", "--gc-grace", "-1"], {}, "grace"),
    ],
)
def test_serve_refuses_bad_gc_options_before_asking_for_a_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    env: dict[str, str],
    said: str,
) -> None:
    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY", "MEMVAULT_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", str(tmp_path / "root"), "--port", "0", *args]) != 0
    assert said in capsys.readouterr().err
