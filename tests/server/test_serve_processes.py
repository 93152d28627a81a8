"""``memvault server`` and ``memvault serve`` as processes: the commands a new user runs, the ready
line, clean stops, several server processes over one root (a local directory and moto's S3),
racing writers, revocation seen by every process, and a process killed mid-commit."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

import anthropic  # noqa: E402

from conftest import PASSPHRASE  # noqa: E402

MEMVAULT = [sys.executable, "-m", "memvault.cli"]


def run(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*MEMVAULT, *args], env=env, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = dict(os.environ)
    out["MEMVAULT_PASSPHRASE"] = PASSPHRASE
    out["MEMVAULT_CACHE_DIR"] = str(tmp_path / "cache")
    out.pop("MEMVAULT_KEY", None)
    out.pop("MEMVAULT_KEY_FILE", None)
    return out


class Server:
    """A ``memvault serve`` process and its URL."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


@contextmanager
def serving(root: str, env: dict[str, str], *extra: str) -> Iterator[Server]:
    proc = subprocess.Popen([*MEMVAULT, "serve", root, "--port", "0", "--log-level", "warning", *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"(http://127\.0\.0\.1:\d+)", line)
    if match is None:
        proc.kill()
        raise AssertionError(f"no ready line: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    server = Server(proc, match.group(1))
    try:
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def make_root(root: str, env: dict[str, str]) -> tuple[str, str]:
    """A new root with an admin key; returns ``(key id, secret)``."""
    run("server", "init", root, env=env)
    made = json.loads(run("server", "apikey", "create", root, "--name", "admin", "--admin", "--json", env=env).stdout)
    return made["id"], made["key"]


def client(server: Server, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key, base_url=server.url, max_retries=0)


# -- the commands ----------------------------------------------------------------------------------


def test_init_apikey_and_serve_as_a_new_user_runs_them(tmp_path: Path, env: dict[str, str]) -> None:
    root = str(tmp_path / "root")
    assert "Made a memvault server root" in run("server", "init", root, env=env).stdout
    made = run("server", "apikey", "create", root, "--name", "ci agents", env=env)
    secret = made.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"mvk_[A-Za-z0-9_-]{43}", secret)
    assert "not shown again" in made.stderr
    listed = run("server", "apikey", "list", root, env=env).stdout
    assert "ci agents" in listed and secret not in listed
    as_json = json.loads(run("server", "apikey", "list", root, "--json", env=env).stdout)
    assert [k["name"] for k in as_json] == ["ci agents"] and "digest" not in as_json[0]
    # Only a digest of the secret is kept anywhere under the root.
    for path in Path(root).rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()
    admin = json.loads(run("server", "apikey", "create", root, "--name", "ops", "--admin", "--json", env=env).stdout)
    assert set(admin) >= {"id", "name", "key"} and admin["id"].startswith("apikey_")
    with serving(root, env) as server:
        store = client(server, admin["key"]).beta.memory_stores.create(name="first")
        worker = client(server, secret)
        worker.beta.memory_stores.memories.create(store.id, path="/hello.md", content="hi")
        assert [m.path for m in worker.beta.memory_stores.memories.list(store.id)] == ["/hello.md"]
        assert server.stop(signal.SIGTERM) == 0
    stores = json.loads(run("server", "stores", root, "--json", env=env).stdout)
    assert [s["name"] for s in stores] == ["first"]
    log = run("--store", stores[0]["location"], "log", "--json", env=env).stdout
    assert [c["command"] for c in json.loads(log)][:1] == ["create"]
    run("server", "apikey", "revoke", root, admin["id"], env=env)
    assert "revoked" in run("server", "apikey", "list", root, env=env).stdout


def test_workers_do_not_outlive_a_killed_supervisor(tmp_path: Path, env: dict[str, str]) -> None:
    root = str(tmp_path / "root")
    make_root(root, env)
    with serving(root, env, "--workers", "2") as server:
        children = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 2
        server.proc.kill()  # SIGKILL: the supervisor cannot stop its workers
        server.proc.wait()
    deadline = time.monotonic() + 10
    alive = children
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in children if Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)]
        time.sleep(0.1)
    assert alive == []


def _state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def test_serve_refuses_a_public_address_without_allow_remote(tmp_path: Path, env: dict[str, str]) -> None:
    root = str(tmp_path / "root")
    make_root(root, env)
    done = run("serve", root, "--host", "0.0.0.0", "--port", "0", env=env, check=False)
    assert done.returncode != 0
    assert "not a loopback address" in done.stderr and "TLS" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_cleanly(tmp_path: Path, env: dict[str, str], sig: int) -> None:
    root = str(tmp_path / "root")
    _key_id, key = make_root(root, env)
    with serving(root, env, "--workers", "2") as server:
        client(server, key).beta.memory_stores.create(name="x")
        assert server.stop(sig) == 0
        err = server.proc.stderr.read() if server.proc.stderr else ""
        assert "Traceback" not in err


def test_requests_in_flight_finish_when_stopped(tmp_path: Path, env: dict[str, str]) -> None:
    root = str(tmp_path / "root")
    _key_id, key = make_root(root, env)
    with serving(root, env) as server:
        store_id = client(server, key).beta.memory_stores.create(name="x").id
        answers: list[tuple[int, str]] = []

        def write(i: int) -> None:
            try:
                m = client(server, key).beta.memory_stores.memories.create(store_id, path=f"/m{i}.md", content=f"{i}")
                answers.append((200, m.path))
            except anthropic.APIStatusError as err:
                answers.append((err.status_code, ""))
            except anthropic.APIConnectionError:
                answers.append((0, ""))

        threads = [threading.Thread(target=write, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        assert server.stop(signal.SIGTERM) == 0
        for t in threads:
            t.join()
    assert all(status in (200, 0) for status, _ in answers), answers  # finished or never accepted; no 5xx
    with serving(root, env) as server:
        paths = {m.path for m in client(server, key).beta.memory_stores.memories.list(store_id)}
    assert {p for status, p in answers if status == 200} <= paths
    stores = json.loads(run("server", "stores", root, "--json", env=env).stdout)
    assert "OK" in run("--store", stores[0]["location"], "verify", env=env).stdout


# -- several processes over one root --------------------------------------------------------------------


def race(servers: list[Server], key: str, store_id: str, memory_id: str, writers: int, each: int) -> list[str]:
    """``writers`` threads, round-robin over ``servers``, each adding ``each`` distinct lines to one
    memory by precondition-guarded read-modify-write (retrying conflicts); returns the lines acknowledged."""
    acked: list[str] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            c = client(servers[w % len(servers)], key)
            memories = c.beta.memory_stores.memories
            for i in range(each):
                line = f"writer {w} line {i}"
                while True:
                    current = memories.retrieve(memory_id, memory_store_id=store_id)
                    try:
                        memories.update(memory_id, memory_store_id=store_id, content=current.content + line + "\n",
                                        precondition={"type": "content_sha256",
                                                      "content_sha256": current.content_sha256})  # fmt: skip
                        break
                    except anthropic.ConflictError:
                        time.sleep(random.uniform(0, 0.01))
                with lock:
                    acked.append(line)
        except BaseException as err:  # noqa: BLE001 - reported by the test
            failures.append(err)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    return acked


def test_racing_writers_on_three_processes_lose_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    root = str(tmp_path / "root")
    key_id, key = make_root(root, env)
    with serving(root, env) as a, serving(root, env) as b, serving(root, env, "--workers", "2") as c:
        store_id = client(a, key).beta.memory_stores.create(name="shared").id
        memory = client(b, key).beta.memory_stores.memories.create(store_id, path="/log.md", content="")
        acked = race([a, b, c], key, store_id, memory.id, writers=8, each=6)
        final = client(c, key).beta.memory_stores.memories.retrieve(memory.id, memory_store_id=store_id).content
        assert sorted(final.splitlines()) == sorted(acked) and len(acked) == 48
        versions = list(client(a, key).beta.memory_stores.memory_versions.list(store_id, memory_id=memory.id))
        assert len(versions) == 49  # the create and one version per acknowledged line
        # Revocation reaches every process at its next request.
        _r, worker = (lambda d: (d["id"], d["key"]))(
            json.loads(run("server", "apikey", "create", root, "--name", "w", "--json", env=env).stdout)
        )
        for server in (a, b, c):
            client(server, worker).beta.memory_stores.list()
        run("server", "apikey", "revoke", root, _r, env=env)
        for server in (a, b, c, c):
            with pytest.raises(anthropic.AuthenticationError):
                client(server, worker).beta.memory_stores.list()
    stores = json.loads(run("server", "stores", root, "--json", env=env).stdout)
    assert "OK" in run("--store", stores[0]["location"], "verify", env=env).stdout


def test_a_process_killed_mid_commit_loses_no_acknowledged_write(tmp_path: Path, env: dict[str, str]) -> None:
    root = str(tmp_path / "root")
    _key_id, key = make_root(root, env)
    acked: list[str] = []
    with serving(root, env) as survivor:
        store_id = client(survivor, key).beta.memory_stores.create(name="k").id
        for round_ in range(3):
            with serving(root, env) as victim:
                stop = threading.Event()

                def hammer(server: Server = victim, r: int = round_) -> None:
                    c = client(server, key)
                    i = 0
                    while not stop.is_set():
                        try:
                            c.beta.memory_stores.memories.create(store_id, path=f"/r{r}/m{i}.md", content=f"{r} {i}")
                            acked.append(f"/r{r}/m{i}.md")
                        except (anthropic.APIConnectionError, anthropic.APIStatusError):
                            return
                        i += 1

                worker = threading.Thread(target=hammer)
                worker.start()
                time.sleep(random.uniform(0.2, 0.6))
                victim.proc.kill()  # SIGKILL: no chance to finish anything
                victim.proc.wait()
                stop.set()
                worker.join()
            # The other process goes on: its writes take the lock the dead one held.
            client(survivor, key).beta.memory_stores.memories.create(store_id, path=f"/after{round_}.md", content="x")
        paths = {m.path for m in client(survivor, key).beta.memory_stores.memories.list(store_id)}
    assert set(acked) <= paths and len(acked) > 0
    stores = json.loads(run("server", "stores", root, "--json", env=env).stdout)
    assert "OK" in run("--store", stores[0]["location"], "verify", env=env).stdout


def test_two_processes_over_an_s3_root(s3_env: Any, tmp_path: Path, env: dict[str, str]) -> None:
    env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    root = s3_env.url("root")
    _key_id, key = make_root(root, env)
    env_b = dict(env, MEMVAULT_CACHE_DIR=str(tmp_path / "cache-b"))  # another host: its own replicas
    with serving(root, env) as a, serving(root, env_b) as b:
        store_id = client(a, key).beta.memory_stores.create(name="on s3").id
        memory = client(b, key).beta.memory_stores.memories.create(store_id, path="/log.md", content="")
        acked = race([a, b], key, store_id, memory.id, writers=4, each=4)
        final = client(a, key).beta.memory_stores.memories.retrieve(memory.id, memory_store_id=store_id).content
        assert sorted(final.splitlines()) == sorted(acked) and len(acked) == 16
        # A key revoked by another process: its next read and write fail, and the write changes nothing,
        # although the server knew the key as valid when the request came in (it checks the catalog's
        # head beside the request's own work on S3, and confirms before anything is answered or written).
        for attempt in ("write", "read"):
            made = json.loads(run("server", "apikey", "create", root, "--name", attempt, "--json", env=env).stdout)
            worker = client(a, made["key"])
            worker.beta.memory_stores.memories.list(store_id)  # a knows the key now
            run("server", "apikey", "revoke", root, made["id"], env=env_b)
            with pytest.raises(anthropic.AuthenticationError):
                if attempt == "write":
                    worker.beta.memory_stores.memories.create(store_id, path="/revoked.md", content="must not land")
                else:
                    worker.beta.memory_stores.memories.retrieve(memory.id, memory_store_id=store_id)
        assert "/revoked.md" not in [m.path for m in client(b, key).beta.memory_stores.memories.list(store_id)]
    listed = s3_env.client.list_objects_v2(Bucket=s3_env.bucket, Prefix="root/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert any(k.startswith("root/catalog/") for k in keys) and any(
        k.startswith(f"root/stores/{store_id}/") for k in keys
    )
    for k in keys:
        body = s3_env.client.get_object(Bucket=s3_env.bucket, Key=k)["Body"].read()
        assert b"writer 0 line" not in body and b"on s3" not in body
