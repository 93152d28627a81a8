"""A store in S3 (moto's server on loopback, boto3 through the standard AWS environment): what a
directory store does, across hosts that each keep their own cache; races between processes;
faults at the HTTP level; rollback and tampering of the bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, keyring_records, object_views
from memvault.errors import (
    EditError,
    IntegrityError,
    LogBlockedError,
    PathNotFoundError,
    RedactedError,
    RollbackDetectedError,
    ServiceError,
    StoreExistsError,
    StoreNotFoundError,
)
from memvault.history import log, read_at
from memvault.protocol.commands import run_command
from memvault.verify import verify
from s3support import as_host

WORKER = Path(__file__).with_name("_worker.py")
SECRET_TEXT = "Patient Jane Roe, MRN 4417-22, allergic to penicillin"
SECRET_PATH = "/memories/clinic/roe_jane.md"


def _create(url: str, cache: Path) -> memvault.MemoryStore:
    with as_host(cache):  # each cache directory stands for a host of its own
        return memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=cache)


def _open(url: str, cache: Path) -> memvault.MemoryStore:
    with as_host(cache):
        return memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache)


def _cmd(store: memvault.MemoryStore, session: str = "s", **command: object) -> str:
    return str(run_command(store, command, actor="tester", session=session))


def _files(store: memvault.MemoryStore) -> dict[str, bytes]:
    """Every file at the head: path -> content."""
    snapshot = store.snapshot()
    out: dict[str, bytes] = {}
    stack = ["/memories"]
    while stack:
        path = stack.pop()
        for name in snapshot.child_names(path):
            child = f"{path}/{name}"
            node = snapshot.get(child)
            assert node is not None
            if node.is_dir:
                stack.append(child)
            else:
                out[child] = store.read_node(node)
    return out


def test_hosts_share_one_store_and_see_each_others_commits(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("team/memory")
    a = _create(url, tmp_path / "host-a")
    assert _cmd(a, command="create", path="/memories/a.md", file_text="from host a\n").startswith("File created")
    b = _open(url, tmp_path / "host-b")
    assert "from host a" in _cmd(b, command="view", path="/memories/a.md")
    _cmd(b, command="str_replace", path="/memories/a.md", old_str="host a", new_str="host b")
    # Read-your-writes across hosts: a's next command sees b's commit.
    assert "from host b" in _cmd(a, command="view", path="/memories/a.md")
    assert a.head == b.head
    assert [e.command for e in log(a)] == ["str_replace", "create", "init"]
    keys = s3_env.keys()
    assert "team/memory/memvault.json" in keys
    assert [k for k in keys if k.startswith("team/memory/log/")] == [f"team/memory/log/{seq:020d}" for seq in range(3)]
    assert any(k.startswith("team/memory/packs/pack-") for k in keys)
    assert any(k.startswith("team/memory/deks/") for k in keys)
    assert any(k.startswith("team/memory/keys/") and k.endswith(".json") for k in keys)
    a.close()
    b.close()
    # A third host with an empty cache builds the whole store from the bucket, and it verifies.
    c = _open(url, tmp_path / "host-c")
    assert _files(c) == {"/memories/a.md": b"from host b\n"}
    report = verify(c)
    assert report.ok, report.problems
    c.close()


def test_bucket_holds_no_plaintext(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("m")
    store = _create(url, tmp_path / "cache")
    _cmd(store, command="create", path=SECRET_PATH, file_text=SECRET_TEXT + "\n")
    _cmd(store, command="str_replace", path=SECRET_PATH, old_str="penicillin", new_str="penicillin and latex")
    store.close()
    canaries = [b"Jane Roe", b"4417-22", b"penicillin", b"roe_jane", b"clinic", b"tester"]
    seen = 0
    for key in s3_env.keys():
        assert not any(c.decode() in key for c in canaries), key
        data = s3_env.client.get_object(Bucket=s3_env.bucket, Key=key)["Body"].read()
        for _kind, view in object_views(key, data):
            for canary in canaries:
                assert canary not in view, (key, canary)
        seen += 1
    assert seen >= 8


def test_create_refuses_a_prefix_in_use_and_open_an_empty_one(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("p")
    _create(url, tmp_path / "a").close()
    with pytest.raises(StoreExistsError):
        _create(url, tmp_path / "b")
    with pytest.raises(StoreNotFoundError):
        _open(s3_env.url("nothing-here"), tmp_path / "c")


def test_a_lost_race_reruns_the_command_on_the_new_head(s3_env, tmp_path: Path) -> None:
    """Host b commits between a's pull and a's log-record create: a loses the create, pulls, and
    runs its str_replace again on the new text, so the model gets the documented error."""
    url = s3_env.url("race")
    a = _create(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/x.md", file_text="alpha\n")
    b = _open(url, tmp_path / "b")
    replica = a.remote
    assert replica is not None
    original = replica.pull
    calls = []

    def pull_then_b_commits(**options: bool) -> int:
        n = original(**options)
        if not calls:
            calls.append(1)
            _cmd(b, command="str_replace", path="/memories/x.md", old_str="alpha", new_str="beta")
        return n

    replica.pull = pull_then_b_commits  # type: ignore[method-assign]
    with pytest.raises(EditError, match="did not appear verbatim"):
        _cmd(a, command="str_replace", path="/memories/x.md", old_str="alpha", new_str="gamma")
    replica.pull = original  # type: ignore[method-assign]
    assert _files(a) == {"/memories/x.md": b"beta\n"}
    assert [e.command for e in log(a)] == ["str_replace", "create", "init"]
    a.close()
    b.close()


def _spawn(s3_env, url: str, cache: Path, worker: int, n: int, ready: Path, go: Path) -> subprocess.Popen[str]:
    env = {**os.environ, **s3_env.env, "MEMVAULT_TEST_PASSPHRASE": PASSPHRASE}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent.parent), env.get("PYTHONPATH")]))
    args = [sys.executable, str(WORKER), url, str(cache), str(worker), str(n), str(ready), str(go)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


#: Hosts and rounds of the race test (benchmarks/long_checks.py runs it at 8 x 40).
RACE_WORKERS = int(os.environ.get("MEMVAULT_S3_RACE_WORKERS", "4"))
RACE_ROUNDS = int(os.environ.get("MEMVAULT_S3_RACE_ROUNDS", "6"))


@pytest.mark.parametrize("workers,rounds", [(RACE_WORKERS, RACE_ROUNDS)])
def test_racing_processes_lose_nothing_and_history_is_linear(s3_env, tmp_path: Path, workers: int, rounds: int) -> None:
    url = s3_env.url("fleet")
    setup = _create(url, tmp_path / "setup")
    _cmd(setup, command="create", path="/memories/shared.md", file_text="start\n")
    setup.close()
    go = tmp_path / "go"
    procs = []
    for w in range(workers):
        ready = tmp_path / f"ready{w}"
        procs.append((ready, _spawn(s3_env, url, tmp_path / f"host{w}", w, rounds, ready, go)))
    for ready, proc in procs:
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    go.touch()
    acked: dict[str, dict[str, object]] = {}
    for _ready, proc in procs:
        out, err = proc.communicate(timeout=60 + 5 * rounds * workers)
        assert proc.returncode == 0, err
        for line in out.splitlines():
            entry = json.loads(line)
            acked[entry["session"]] = entry
    assert len(acked) == workers * rounds * 2
    check = _open(url, tmp_path / "check")
    history = list(reversed(log(check)))  # oldest first
    assert [e.seq for e in history] == list(range(len(history)))  # linear, no gaps, no forks
    sessions = [e.session for e in history[2:]]
    assert sorted(sessions) == sorted(acked)  # every acknowledged command exactly once, nothing else
    report = verify(check)
    assert report.ok, report.problems
    # A serial replay of the acknowledged commands, in the order the history took them, gives the
    # same tree.
    replay = memvault.MemoryStore.create(tmp_path / "replay", passphrase=PASSPHRASE, kdf=FAST_KDF)
    _cmd(replay, command="create", path="/memories/shared.md", file_text="start\n")
    for session in sessions:
        entry = acked[session]
        assert str(run_command(replay, entry["command"], actor="r", session=session)) == entry["result"]
    assert _files(replay) == _files(check)
    shared = _files(check)["/memories/shared.md"].decode().splitlines()
    assert len(shared) == workers * rounds + 1
    check.close()
    replay.close()


# -- faults at the HTTP level -------------------------------------------------------------------


def _log_records(s3_env, prefix: str) -> list[str]:
    return [k for k in s3_env.keys() if k.startswith(f"{prefix}/log/")]


@pytest.mark.parametrize("kind", ["500", "503", "409", "reset_before", "reset_after", "slow:0.5"])
def test_a_fault_on_the_commit_record_loses_nothing(s3_faulty, tmp_path: Path, kind: str) -> None:
    url = s3_faulty.url("f")
    store = _create(url, tmp_path / "a")
    s3_faulty.proxy.add_fault(kind, method="PUT", key_regex=r"/log/", times=1)
    assert _cmd(store, command="create", path="/memories/n.md", file_text="kept\n").startswith("File created")
    assert len(_log_records(s3_faulty, "f")) == 2  # #0 and this commit, once
    other = _open(url, tmp_path / "b")
    assert _files(other) == {"/memories/n.md": b"kept\n"}
    assert [e.command for e in log(other)] == ["create", "init"]
    assert verify(other).ok
    if kind == "reset_after":
        # The create reached S3 but its answer was lost: the client read the record back.
        assert any(m == "GET" and "/log/" in p for m, p, _s in s3_faulty.proxy.requests())
    store.close()
    other.close()


@pytest.mark.parametrize("target", [r"/packs/", r"/deks/", r"/log/"])
def test_a_lasting_outage_fails_clearly_and_leaves_the_store_as_it_was(s3_faulty, tmp_path: Path, target: str) -> None:
    url = s3_faulty.url("o")
    store = _create(url, tmp_path / "a")
    _cmd(store, command="create", path="/memories/before.md", file_text="before\n")
    head = store.head
    s3_faulty.proxy.add_fault("503", method="PUT", key_regex=target, times=1000)
    with pytest.raises(ServiceError) as info:
        _cmd(store, command="create", path="/memories/after.md", file_text="secret words\n")
    message = str(info.value)
    assert "S3 bucket" in message and "503" in message
    assert "secret words" not in message and "after.md" not in message
    s3_faulty.proxy.clear()
    assert store.head == head
    assert len(_log_records(s3_faulty, "o")) == 2
    other = _open(url, tmp_path / "b")
    assert _files(other) == {"/memories/before.md": b"before\n"}
    # The service is back: the next command works, on both hosts.
    _cmd(store, command="create", path="/memories/after.md", file_text="after\n")
    assert set(_files(other)) == {"/memories/before.md", "/memories/after.md"}
    store.close()
    other.close()


def test_a_view_of_an_unchanged_head_is_one_request(s3_faulty, tmp_path: Path) -> None:
    store = _create(s3_faulty.url("v"), tmp_path / "a")
    _cmd(store, command="create", path="/memories/v.md", file_text="v\n")
    _cmd(store, command="view", path="/memories/v.md")
    before = len(s3_faulty.proxy.requests())
    assert "v" in _cmd(store, command="view", path="/memories/v.md")
    assert len(s3_faulty.proxy.requests()) - before == 1
    before = len(s3_faulty.proxy.requests())
    _cmd(store, command="create", path="/memories/w.md", file_text="w\n")
    made = s3_faulty.proxy.requests()[before:]
    assert [m for m, _p, _s in made].count("GET") == 1  # the pull's list
    assert sum(1 for m, p, _s in made if m == "PUT" and "/log/" in p) == 1
    store.close()


# -- rollback and tampering -----------------------------------------------------------------------


def _store_with_history(s3_env, tmp_path: Path, prefix: str) -> memvault.MemoryStore:
    store = _create(s3_env.url(prefix), tmp_path / "a")
    for i in range(3):
        _cmd(store, command="create", path=f"/memories/{i}.md", file_text=f"{i}\n")
    return store


def test_deleting_the_newest_log_record_is_detected(s3_env, tmp_path: Path) -> None:
    store = _store_with_history(s3_env, tmp_path, "t")
    newest = _log_records(s3_env, "t")[-1]
    s3_env.client.delete_object(Bucket=s3_env.bucket, Key=newest)
    with pytest.raises(RollbackDetectedError, match="no longer holds commit #3"):
        _cmd(store, command="view", path="/memories")
    with pytest.raises(RollbackDetectedError):
        _cmd(store, command="create", path="/memories/x.md", file_text="x\n")
    store.close()


def test_replacing_the_newest_log_record_is_detected(s3_env, tmp_path: Path) -> None:
    store = _store_with_history(s3_env, tmp_path, "t")
    records = _log_records(s3_env, "t")
    older = s3_env.client.get_object(Bucket=s3_env.bucket, Key=records[-2])["Body"].read()
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=records[-1], Body=older)
    with pytest.raises(RollbackDetectedError, match="replaced"):
        _cmd(store, command="view", path="/memories")
    store.close()


def test_serving_an_old_copy_of_the_prefix_is_detected(s3_env, tmp_path: Path) -> None:
    store = _store_with_history(s3_env, tmp_path, "t")
    old = s3_env.copy_prefix("t")
    _cmd(store, command="create", path="/memories/later.md", file_text="later\n")
    s3_env.put_back_prefix("t", old)
    with pytest.raises(RollbackDetectedError):
        _cmd(store, command="view", path="/memories")
    store.close()


def test_a_forged_log_record_is_refused_and_nothing_of_it_applied(s3_env, tmp_path: Path) -> None:
    store = _store_with_history(s3_env, tmp_path, "t")
    other = _open(s3_env.url("t"), tmp_path / "b")
    _cmd(store, command="create", path="/memories/4.md", file_text="4\n")
    newest = _log_records(s3_env, "t")[-1]
    data = bytearray(s3_env.client.get_object(Bucket=s3_env.bucket, Key=newest)["Body"].read())
    data[-1] ^= 1  # the COMMIT record's mac
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=newest, Body=bytes(data))
    for _ in range(2):  # still refused: nothing of it was kept; what was committed before it reads
        assert set(_files(other)) == {f"/memories/{i}.md" for i in range(3)}
        assert other.head[1] == 3
        with pytest.raises(LogBlockedError, match="repair-log --void 4"):
            _cmd(other, command="create", path="/memories/x.md", file_text="x\n")
    with pytest.raises(RollbackDetectedError, match="replaced"):  # the host that saw it
        _cmd(store, command="view", path="/memories")
    store.close()
    other.close()


# -- redaction, keys, copy, CLI ----------------------------------------------------------------------


def test_redaction_deletes_the_data_key_object_and_other_hosts_drop_the_key(s3_env, tmp_path: Path) -> None:
    from memvault.erasure.redact import shred_file

    url = s3_env.url("r")
    a = _create(url, tmp_path / "a")
    _cmd(a, command="create", path=SECRET_PATH, file_text=SECRET_TEXT + "\n")
    b = _open(url, tmp_path / "b")
    assert SECRET_TEXT in _cmd(b, command="view", path=SECRET_PATH)
    deks_before = {k for k in s3_env.keys() if "/deks/" in k}
    result = shred_file(a, SECRET_PATH, actor="dpo", reason="erasure request")
    assert result.versions
    deks_after = {k for k in s3_env.keys() if "/deks/" in k}
    destroyed = {f"r/deks/{v.dek_id}" for v in result.versions}
    assert destroyed <= deks_before and not destroyed & deks_after
    assert any("versioning" in item or "bucket" in item for item in result.remaining_copies)
    # Host b's next command pulls the redaction: the key leaves its cache, the version is gone.
    with pytest.raises(PathNotFoundError):
        _cmd(b, command="view", path=SECRET_PATH)
    for v in result.versions:
        assert not b.keyring.has(bytes.fromhex(v.dek_id))
    first = [e for e in reversed(log(b)) if e.command == "create"][0]
    with pytest.raises(RedactedError):
        read_at(b, SECRET_PATH, first.commit_id.encode())
    keyring_bytes = (b.root / "keyring").read_bytes()
    dek_records = {
        keyring_bytes[start + 3 : start + 19] for rtype, start, _end in keyring_records(keyring_bytes) if rtype == 1
    }
    assert len(dek_records) >= 1  # the other versions' keys are still there
    for v in result.versions:
        assert bytes.fromhex(v.dek_id) not in dek_records
    a.close()
    b.close()


def test_key_slots_live_in_the_bucket(s3_env, tmp_path: Path) -> None:
    from memvault.admin.keys import add_slot, remove_slot
    from memvault.errors import WrongKeyError

    url = s3_env.url("k")
    a = _create(url, tmp_path / "a")
    info = add_slot(a, passphrase="a second long passphrase", kdf=FAST_KDF)
    b = memvault.MemoryStore.open(url, passphrase="a second long passphrase", cache_dir=tmp_path / "b")
    assert b.head == a.head
    b.close()
    remove_slot(a, info.slot_id)
    assert not any(info.slot_id in k for k in s3_env.keys())
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(url, passphrase="a second long passphrase", cache_dir=tmp_path / "b")
    a.close()


def test_rotation_reaches_other_hosts(s3_env, tmp_path: Path) -> None:
    from memvault.admin.keys import rotate
    from memvault.errors import KeyRotatedError

    url = s3_env.url("rot")
    a = _create(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/r.md", file_text="before rotation\n")
    b = _open(url, tmp_path / "b")
    result = rotate(a, passphrase=PASSPHRASE, kdf=FAST_KDF)
    assert result.epoch == 2 and result.rewrapped >= 1
    with pytest.raises(KeyRotatedError):
        _cmd(b, command="create", path="/memories/s.md", file_text="s\n")
    b.close()
    fresh = _open(url, tmp_path / "c")  # a new host: slots and re-wrapped keys from the bucket
    assert _files(fresh) == {"/memories/r.md": b"before rotation\n"}
    _cmd(fresh, command="create", path="/memories/s.md", file_text="after\n")
    assert verify(fresh).ok
    b = _open(url, tmp_path / "b")
    assert set(_files(b)) == {"/memories/r.md", "/memories/s.md"}
    for s in (a, b, fresh):
        s.close()


def test_copy_local_to_s3_and_back_keeps_history(s3_env, tmp_path: Path) -> None:
    from memvault.transfer import copy_store

    local = memvault.MemoryStore.create(tmp_path / "local", passphrase=PASSPHRASE, kdf=FAST_KDF)
    for i in range(4):
        _cmd(local, command="create", path=f"/memories/{i}.md", file_text=f"note {i}\n")
    _cmd(local, command="delete", path="/memories/2.md")
    expected_files, expected_log = _files(local), [(e.seq, e.command, e.commit_id) for e in log(local)]
    local.close()
    up = copy_store(tmp_path / "local", s3_env.url("copy"), passphrase=PASSPHRASE, cache_dir=tmp_path / "c1")
    assert up.report.ok and up.commits == 6
    down = copy_store(s3_env.url("copy"), tmp_path / "back", passphrase=PASSPHRASE, cache_dir=tmp_path / "c2")
    assert down.report.ok
    for where in (s3_env.url("copy"), tmp_path / "back"):
        with memvault.MemoryStore.open(where, passphrase=PASSPHRASE, cache_dir=tmp_path / "c3") as s:
            assert _files(s) == expected_files
            assert [(e.seq, e.command, e.commit_id) for e in log(s)] == expected_log
    with pytest.raises(StoreExistsError):
        copy_store(tmp_path / "local", s3_env.url("copy"), passphrase=PASSPHRASE)


def test_cli_on_s3(s3_env, tmp_path: Path) -> None:
    env = {
        **os.environ,
        **s3_env.env,
        "MEMVAULT_PASSPHRASE": "a long cli passphrase",
        "MEMVAULT_CACHE_DIR": str(tmp_path / "cache"),
    }

    def mv(*args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
        e = dict(env)
        if store:
            e["MEMVAULT_STORE"] = store
        return subprocess.run([sys.executable, "-m", "memvault.cli", *args], env=e, capture_output=True, text=True)

    url = s3_env.url("cli")
    made = mv("--store", url, "init")
    assert made.returncode == 0, made.stderr
    assert url in made.stdout and "warning" not in made.stderr
    assert mv("import", str(_notes(tmp_path)), store=url).returncode == 0
    out = mv("log", "--json", store=url)
    assert out.returncode == 0, out.stderr
    assert [e["command"] for e in json.loads(out.stdout)] == ["import", "init"]
    assert mv("verify", store=url).returncode == 0
    assert "hello from the cli" in mv("cat", "/memories/hello.md", store=url).stdout
    s3_env.client.put_bucket_versioning(Bucket=s3_env.bucket, VersioningConfiguration={"Status": "Enabled"})
    again = mv("--store", s3_env.url("cli2"), "init")
    assert again.returncode == 0 and "versioning enabled" in again.stderr


def _notes(tmp_path: Path) -> Path:
    d = tmp_path / "notes" / "memories"
    d.mkdir(parents=True)
    (d / "hello.md").write_text("hello from the cli\n")
    return d.parent


def test_a_bounded_cache_evicts_packs_and_fetches_them_again(s3_env, tmp_path: Path, monkeypatch) -> None:
    url = s3_env.url("bounded")
    a = _create(url, tmp_path / "a")
    for i in range(12):
        _cmd(a, command="create", path=f"/memories/n{i}.md", file_text=f"note {i} " * 200 + "\n")
    monkeypatch.setenv("MEMVAULT_CACHE_BYTES", "20000")
    b = _open(url, tmp_path / "b")
    assert b.remote is not None and b.remote.cache_bytes == 20000
    assert b.remote.stats["evicted"] > 0  # at the end of its first pull
    pack_dir = tmp_path / "b" / "repo" / "objects" / "pack"
    b.remote.evict()  # the bound holds between commands (a read may fetch packs back meanwhile)
    assert sum(p.stat().st_size for p in pack_dir.glob("*.pack")) <= 20000
    expected = {f"/memories/n{i}.md": (f"note {i} " * 200 + "\n").encode() for i in range(12)}
    assert _files(b) == expected  # evicted objects came back from the bucket
    assert b.remote.stats["fetched"] > 0
    assert verify(b).ok
    b.close()
    # A new process on the same host, same small cache: still everything, from the bucket.
    c = _open(url, tmp_path / "b")
    assert _files(c) == expected
    c.close()
    a.close()


def test_copy_out_of_a_bounded_cache_is_complete(s3_env, tmp_path: Path, monkeypatch) -> None:
    from memvault.transfer import copy_store

    url = s3_env.url("bounded-copy")
    a = _create(url, tmp_path / "a")
    for i in range(8):
        _cmd(a, command="create", path=f"/memories/n{i}.md", file_text=f"note {i} " * 200 + "\n")
    files = _files(a)
    a.close()
    monkeypatch.setenv("MEMVAULT_CACHE_BYTES", "15000")
    result = copy_store(url, tmp_path / "local", passphrase=PASSPHRASE, cache_dir=tmp_path / "small")
    assert result.report.ok and result.commits == 9
    monkeypatch.delenv("MEMVAULT_CACHE_BYTES")
    with memvault.MemoryStore.open(tmp_path / "local", passphrase=PASSPHRASE) as local:
        assert local.remote is None
        assert _files(local) == files


def test_history_undo_expire_and_export_work_on_s3(s3_env, tmp_path: Path) -> None:
    import time

    from memvault.edits.undo import revert
    from memvault.erasure.expiry import expire
    from memvault.history import blame, diff
    from memvault.transfer import export_tree

    url = s3_env.url("ops")
    a = _create(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/plan.md", file_text="one\ntwo\n")
    b = _open(url, tmp_path / "b")
    _cmd(b, session="b1", command="str_replace", path="/memories/plan.md", old_str="two", new_str="TWO")
    # diff and blame on host a see host b's commit.
    changed = diff(a, "HEAD~1", "HEAD")
    assert [d.path for d in changed] == ["/memories/plan.md"]
    lines = blame(a, "/memories/plan.md")
    assert [(line.text, line.seq) for line in lines] == [("one", 1), ("TWO", 2)]
    # revert on host a, seen by host b.
    revert(a, "HEAD", actor="op")
    assert _files(b) == {"/memories/plan.md": b"one\ntwo\n"}
    # export from host b.
    exported = export_tree(b, tmp_path / "out")
    assert exported.files == ("/memories/plan.md",)
    assert (tmp_path / "out" / "plan.md").read_text() == "one\ntwo\n"
    # expire judges by this host's reads: b read nothing since; a dry run 0 s ahead lists the file.
    result = expire(b, 1.0, actor="op", dry_run=True, now=time.time() + 3600)
    assert [f.path for f in result.files] == ["/memories/plan.md"]
    done = expire(b, 1.0, actor="op", now=time.time() + 3600)
    assert done.commit_id is not None
    assert _files(a) == {}
    assert [e.command for e in log(a)][:2] == ["expire", "revert"]
    a.close()
    b.close()


def test_the_cache_is_private_to_its_owner(s3_env, tmp_path: Path) -> None:
    store = _create(s3_env.url("modes"), tmp_path / "cache")
    _cmd(store, command="create", path="/memories/m.md", file_text="m\n")
    store.close()
    for path in [tmp_path / "cache", *(tmp_path / "cache").rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode & 0o077 == 0, (path, oct(mode))


def test_data_keys_a_redaction_could_not_delete_go_at_the_next_pull_or_gc(
    s3_faulty, tmp_path: Path, monkeypatch
) -> None:
    from memvault.cli import main
    from memvault.erasure.redact import shred_file
    from memvault.remote.replica import cache_dir_for

    url = s3_faulty.url("rd")
    a = _create(url, cache_dir_for(url, tmp_path / "caches"))  # where the CLI below finds it
    _cmd(a, command="create", path="/memories/one.md", file_text="first secret\n")
    _cmd(a, command="create", path="/memories/two.md", file_text="second secret\n")
    b = _open(url, tmp_path / "b")

    def deks() -> set[str]:
        return {k for k in s3_faulty.keys() if "/deks/" in k}

    s3_faulty.proxy.add_fault("503", method="DELETE", key_regex=r"/deks/", times=1000)
    before = deks()
    with pytest.raises(ServiceError, match="redaction is committed"):
        shred_file(a, "/memories/one.md", actor="dpo", reason="erasure")
    s3_faulty.proxy.clear()
    assert [e.command for e in log(a)][0] == "redact"
    assert deks() == before  # the bucket still holds them
    with pytest.raises(PathNotFoundError):
        _cmd(b, command="view", path="/memories/one.md")  # b pulls the redaction ...
    after_pull = deks()
    assert len(after_pull) == len(before) - 1  # ... and deletes the destroyed key's object
    # The same through `memvault gc` when no other host pulls.
    s3_faulty.proxy.add_fault("503", method="DELETE", key_regex=r"/deks/", times=1000)
    with pytest.raises(ServiceError):
        shred_file(a, "/memories/two.md", actor="dpo", reason="erasure")
    s3_faulty.proxy.clear()
    assert deks() == after_pull
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "caches"))
    assert main(["--store", url, "gc"]) == 0  # a's own cache: it pulls nothing new
    # gc deleted the destroyed key's object; it also compacted: the keys live on in its bundle.
    assert {k for k in deks() if "/deks/upto-" not in k} == set()
    assert len(after_pull) == 1 and {k for k in deks() if "/deks/upto-" in k} == {"rd/deks/upto-00000000000000000004"}
    a.close()
    b.close()


def test_a_host_that_lost_a_race_is_given_way(s3_env, tmp_path: Path) -> None:
    """A loser leaves a waiting marker for the next number; a writer that sees one for the next
    number gives way (bounded), and markers of taken numbers are removed."""
    from memvault.remote.layout import log_key, wait_key

    url = s3_env.url("fair")
    a = _create(url, tmp_path / "a")
    b = _open(url, tmp_path / "b")
    assert a.remote is not None and b.remote is not None
    original = a.remote.pull
    lost: list[int] = []

    def pull_then_b_commits(**options: bool) -> int:
        n = original(**options)
        if not lost:
            lost.append(1)
            _cmd(b, command="create", path="/memories/b.md", file_text="b\n")
        return n

    a.remote.pull = pull_then_b_commits  # type: ignore[method-assign]
    _cmd(a, command="create", path="/memories/a.md", file_text="a\n")
    a.remote.pull = original  # type: ignore[method-assign]
    assert a.remote.stats["races_lost"] == 1
    a.close()  # waits for its background requests: its marker is gone once it committed
    assert not [k for k in s3_env.keys() if ".wait-" in k]
    # Another host's marker for the next number: b gives way, for at most a second, then writes.
    tip = b.head[1]
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"fair/{wait_key(tip + 1, tip, 'f' * 16)}", Body=b"")
    _cmd(b, command="create", path="/memories/c.md", file_text="c\n")
    assert b.remote.stats["courtesy_waits"] > 0
    # Once a later number is taken too, any listing (a view here) removes the marker.
    _cmd(b, command="create", path="/memories/d.md", file_text="d\n")
    _cmd(b, command="view", path="/memories")
    b.close()
    assert not [k for k in s3_env.keys() if ".wait-" in k]
    assert f"fair/{log_key(tip + 2)}" in s3_env.keys()


def test_a_cold_host_pulls_a_long_log_in_batches(s3_env, tmp_path: Path, monkeypatch) -> None:
    import memvault.remote.replica as replica_module

    url = s3_env.url("batches")
    a = _create(url, tmp_path / "a")
    for i in range(7):
        _cmd(a, command="create", path=f"/memories/{i}.md", file_text=f"{i}\n")
    monkeypatch.setattr(replica_module, "PULL_BATCH", 3)
    b = _open(url, tmp_path / "b")
    assert b.remote is not None and b.remote.stats["pulled"] == 8
    assert _files(b) == _files(a)
    assert verify(b).ok
    a.close()
    b.close()


def test_a_store_in_a_shared_directory_works_like_one_in_s3(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'shared'}"
    a = _create(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/x.md", file_text="x\n")
    b = _open(url, tmp_path / "b")
    _cmd(b, command="str_replace", path="/memories/x.md", old_str="x", new_str="y")
    assert _files(a) == {"/memories/x.md": b"y\n"}
    assert sorted(p.name for p in (tmp_path / "shared" / "log").iterdir()) == [f"{i:020d}" for i in range(3)]
    for path in [tmp_path / "shared", *(tmp_path / "shared").rglob("*")]:
        assert path.stat().st_mode & 0o077 == 0, path
    (tmp_path / "shared" / "log" / f"{2:020d}").unlink()
    with pytest.raises(RollbackDetectedError):
        _cmd(a, command="view", path="/memories")
    a.close()
    b.close()


def test_create_refuses_a_service_that_ignores_conditional_writes(tmp_path: Path, monkeypatch) -> None:
    import memvault.store.replicated as replicated
    from memvault.errors import InvalidInputError
    from memvault.storage.local import DirectoryObjects

    class Overwriting(DirectoryObjects):
        """A service that takes If-None-Match and overwrites anyway."""

        def create(self, key: str, data: bytes) -> str | None:
            path = self.root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            return "tag"

    monkeypatch.setattr(replicated, "open_backend", lambda url: Overwriting(Path(url.location)))
    with pytest.raises(InvalidInputError, match="does not honour conditional writes"):
        _create(f"file://{tmp_path / 'bucket'}", tmp_path / "cache")
    assert not any((tmp_path / "bucket").rglob("*.json"))  # nothing of a store was written


def test_an_evicted_object_is_fetched_even_when_the_pack_directory_changed(s3_env, tmp_path: Path, monkeypatch) -> None:
    """A reader whose list of packs is stale (another process evicted or merged packs) lists the
    directory again and, if the object is still missing, fetches its pack."""
    url = s3_env.url("stale-list")
    a = _create(url, tmp_path / "a")
    for i in range(6):
        _cmd(a, command="create", path=f"/memories/n{i}.md", file_text=f"note {i} " * 200 + "\n")
    expected = _files(a)
    a.close()
    monkeypatch.setenv("MEMVAULT_CACHE_BYTES", "1")
    b = _open(url, tmp_path / "b")
    b.remote.evict()  # type: ignore[union-attr]
    b.forget_cached_plaintext()
    from memvault.git.packread import PackReader

    real_rescan = PackReader.rescan

    def changed(self: PackReader) -> bool:  # "the directory changed", yet the object is not there
        real_rescan(self)
        return True

    monkeypatch.setattr(PackReader, "rescan", changed)
    assert _files(b) == expected
    b.close()


def test_a_pull_stopped_before_its_branch_move_is_finished_not_taken_for_a_rollback(s3_env, tmp_path: Path) -> None:
    from memvault.git.repo import GitStore

    url = s3_env.url("stopped-pull")
    a = _create(url, tmp_path / "a")
    b = _open(url, tmp_path / "b")
    for i in range(3):
        _cmd(a, command="create", path=f"/memories/{i}.md", file_text=f"{i}\n")
    real = GitStore.compare_and_swap

    def dies(self: GitStore, old: bytes | None, new: bytes) -> bool:
        raise KeyboardInterrupt  # the process dies between the keyring append and the branch move

    GitStore.compare_and_swap = dies  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            _cmd(b, command="view", path="/memories")
    finally:
        GitStore.compare_and_swap = real  # type: ignore[method-assign]
    b.close()
    again = _open(url, tmp_path / "b")  # the keyring is 3 commits ahead of the branch
    assert _files(again) == {f"/memories/{i}.md": f"{i}\n".encode() for i in range(3)}
    assert verify(again).ok
    again.close()
    a.close()


def test_processes_sharing_a_cache_see_each_others_pack_map(tmp_path: Path, monkeypatch) -> None:
    """Two store objects on one host's cache (a CLI beside a long-lived server): packs one pulls
    and the cache evicts are found again by the other."""
    monkeypatch.setenv("MEMVAULT_CACHE_BYTES", "0")
    url = f"file://{tmp_path / 'bucket'}"
    a = _create(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/f0.md", file_text="zero")
    b1 = _open(url, tmp_path / "host")
    assert "zero" in _cmd(b1, command="view", path="/memories/f0.md")
    b2 = _open(url, tmp_path / "host")
    for i in (1, 2, 3):
        _cmd(a, command="create", path=f"/memories/f{i}.md", file_text=f"file {i}")
    assert "file 3" in _cmd(b2, command="view", path="/memories/f3.md")  # b2 pulls, records and evicts
    b1.forget_cached_plaintext()
    for i in (1, 2):
        assert f"file {i}" in _cmd(b1, command="view", path=f"/memories/f{i}.md")
    for s in (a, b1, b2):
        s.close()


def test_a_bad_provider_slot_does_not_hide_a_good_one(tmp_path: Path, monkeypatch) -> None:
    """Two slots of one provider: the first does not open (altered), the second does."""
    import json
    import sys

    from memvault.admin.keys import add_slot

    helper = Path(__file__).parents[2] / "examples" / "key_helper.py"
    key_file = tmp_path / "helper.key"
    key_file.write_bytes(os.urandom(32))
    key_file.chmod(0o600)
    monkeypatch.setenv("MEMVAULT_HELPER_KEY_FILE", str(key_file))
    uri = f"command:{sys.executable} {helper}"
    store = memvault.MemoryStore.create(tmp_path / "s", key=uri)
    second = add_slot(store, key=uri, label="second")
    store.close()
    for path in (tmp_path / "s" / "keys").glob("*.json"):
        if path.stem != second.slot_id:
            obj = json.loads(path.read_text())
            obj["slot_id"] = "0" * 32  # sorts first; its wrapped key no longer matches its context
            path.unlink()
            (path.parent / f"{'0' * 32}.json").write_text(json.dumps(obj))
    with memvault.MemoryStore.open(tmp_path / "s", key=uri) as opened:
        assert opened.unlocked_slot.hex() == second.slot_id


def test_a_data_key_object_deleted_from_the_bucket_is_reported_not_ignored(s3_env, tmp_path: Path) -> None:
    """A missing ``deks/`` object counts as destroyed only when a redaction in the log says so;
    otherwise the pull says the bucket lost it (a redacted one is fine, see the redaction tests)."""
    url = s3_env.url("lost-key")
    a = _create(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/x.md", file_text="x\n")
    (dek,) = [k for k in s3_env.keys() if "/deks/" in k][-1:]
    s3_env.client.delete_object(Bucket=s3_env.bucket, Key=dek)
    with pytest.raises(IntegrityError, match="lacks the data key objects of 1 version"):
        _open(url, tmp_path / "b")
    a.close()
