"""Dream side branches of a store in S3 (moto's server on loopback): a commit of a branch is a log
record of the store's one log, so another host sees the branch, its commits, its merge and its
discard; writers on a branch and on ``main`` race safely; a branch rolled back or tampered with in
the bucket is detected; ``dream`` on such a store reaches the (fake) Messages API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anthropic
import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE
from fake_messages_http import FakeMessagesServer
from memvault.admin.status import store_status
from memvault.dream.review import discard_dream, dream_diff, list_dreams, merge_dream, open_dream
from memvault.dream.runner import run_dream
from memvault.errors import (
    IntegrityError,
    InvalidInputError,
    LogBlockedError,
    PathNotFoundError,
    RedactedError,
    RollbackDetectedError,
    StorageError,
)
from memvault.git.refs import Branch as GitBranch
from memvault.history import read_at
from memvault.keys import framing
from memvault.keys.framing import BRANCH, BRANCH_BODY, BRANCH_KEYS, COMMIT_RAW, COMMIT_RAW_BODY, DESTROY, RECORD
from memvault.keys.marks import BranchMarks
from memvault.paths import parse_path
from memvault.protocol.commands import run_command
from memvault.remote.follow import ChainedRuns, Follower
from memvault.remote.inventory import find_orphans
from memvault.remote.layout import decode_log, encode_log, pack_keys
from memvault.store import Transaction
from memvault.transfer.copier import copy_store
from memvault.verify import verify
from s3support import S3Env, create_as_host, open_as_host, sequential_round_trips

MODEL = "claude-sonnet-4-6"
NOTES = "/memories/notes.md"
NOTES_TEXT = "# Notes\n- The deploy goes out on Tuesdays.\n"
DREAMT = "/memories/summary.md"
DREAMT_TEXT = "# Summary\n- Deploys: Tuesdays.\n"
FINAL = "Wrote a summary and removed the notes it replaces."


def _cmd(store: Any, **command: object) -> str:
    return str(run_command(store, command, actor="tester", session="s"))


def _seeded(s3_env: S3Env, tmp_path: Path, prefix: str = "t") -> memvault.MemoryStore:
    store = create_as_host(s3_env.url(prefix), tmp_path / "host-a")
    _cmd(store, command="create", path=NOTES, file_text=NOTES_TEXT)
    return store


def _log_keys(s3_env: S3Env, prefix: str) -> list[str]:
    return sorted(k for k in s3_env.keys() if k.startswith(f"{prefix}/log/"))


def _branch_with_commits(store: memvault.MemoryStore, dream_id: str) -> memvault.store.BranchStore:
    """A branch ``dream/<dream_id>`` forked from ``main`` with two commits: a new file, the notes deleted."""
    branch = store.branch(f"dream/{dream_id}")
    branch.create(actor="dream", session=dream_id, extra={"model": MODEL})

    def write(txn: Transaction) -> None:
        txn.write_file(parse_path(DREAMT, txn.settings), DREAMT_TEXT.encode())

    def delete(txn: Transaction) -> None:
        txn.delete(parse_path(NOTES, txn.settings))

    branch.transact(write, command="create", paths=(DREAMT,), actor="dream", session=dream_id)
    branch.transact(delete, command="delete", paths=(NOTES,), actor="dream", session=dream_id)
    return branch


def test_a_branch_and_its_commits_are_published_through_the_bucket(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    before = _log_keys(s3_env, "t")
    assert len(before) == 2  # the first commit, the notes
    _branch_with_commits(a, "00000000000000a1")
    after = _log_keys(s3_env, "t")
    assert len(after) == 5  # three more log records: the fork commit and two commits, on the branch
    store_id = a.store_id
    records = [
        decode_log(s3_env.client.get_object(Bucket=s3_env.bucket, Key=k)["Body"].read(), store_id, i)
        for i, k in enumerate(after)
    ]
    assert [r.branch for r in records] == [None, None] + [bytes.fromhex("00000000000000a1")] * 3
    assert [r.seq for r in records] == [0, 1, 2, 3, 4]  # main 0, 1; the branch forks at 1: 2, 3, 4

    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert b.branches() == ["dream/00000000000000a1"]
    branch = open_dream(b, "00000000000000a1")
    commands = [branch.commit_meta(c).command for c in reversed(branch.branch_commits())]
    assert commands == ["fork", "create", "delete"]
    assert read_at(branch, DREAMT) == DREAMT_TEXT.encode()
    # main did not move, on either host
    assert read_at(b, NOTES) == NOTES_TEXT.encode()
    assert b.head == a.head and b.head[1] == 1
    [info] = list_dreams(b)
    assert (info.status, info.commits, info.model) == ("open", 2, MODEL)
    diff = dream_diff(b, "00000000000000a1")
    assert sorted(f.path for f in diff.files) == [NOTES, DREAMT]

    # b commits on main, then on the branch: a sees both, and main's commit is #2 though at position 5
    _cmd(b, command="create", path="/memories/b.md", file_text="from b\n")
    branch.transact(
        lambda txn: txn.write_file(parse_path("/memories/c.md", txn.settings), b"on the branch\n"),
        command="create", paths=("/memories/c.md",), actor="dream", session="x",
    )  # fmt: skip
    assert len(_log_keys(s3_env, "t")) == 7
    assert read_at(a, "/memories/b.md") == b"from b\n"
    assert a.head[1] == 2
    on_a = open_dream(a, "00000000000000a1")
    assert read_at(on_a, "/memories/c.md") == b"on the branch\n"
    assert on_a.head == branch.head
    a.close()
    b.close()


def test_merge_and_discard_on_one_host_are_seen_on_the_other(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    _branch_with_commits(a, "00000000000000b1")
    _branch_with_commits(a, "00000000000000b2")
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert b.branches() == ["dream/00000000000000b1", "dream/00000000000000b2"]

    merged = merge_dream(b, "00000000000000b1", actor="reviewer")
    assert sorted(merged.changed) == [NOTES, DREAMT]
    assert read_at(a, DREAMT) == DREAMT_TEXT.encode()  # a pulls b's merge commit
    assert {d.id: d.status for d in list_dreams(a)} == {"00000000000000b1": "merged", "00000000000000b2": "open"}

    keys_before = {k for k in s3_env.keys() if k.startswith("t/deks/")}
    dreamt_version = open_dream(a, "00000000000000b2")
    result = discard_dream(b, "00000000000000b2", actor="reviewer")
    assert result.keys_destroyed == 1 and result.complete  # the one version the dream wrote
    assert len(keys_before - {k for k in s3_env.keys() if k.startswith("t/deks/")}) == 1
    # a sees the discard: the dream is gone from its list, and its version is redacted
    assert a.branches() == ["dream/00000000000000b1"]
    assert [d.id for d in list_dreams(a)] == ["00000000000000b1"]
    with pytest.raises(InvalidInputError, match="No dream"):
        open_dream(a, "00000000000000b2")
    with pytest.raises(RedactedError):
        read_at(dreamt_version, DREAMT)
    with pytest.raises(InvalidInputError, match="No dream"):
        discard_dream(a, "00000000000000b2")
    # a third host, starting cold, takes the same view from the log alone
    c = open_as_host(s3_env.url("t"), tmp_path / "host-c")
    assert [(d.id, d.status) for d in list_dreams(c)] == [("00000000000000b1", "merged")]
    assert store_status(c).branches == ("dream/00000000000000b1",)
    for store in (a, c):  # verify walks the branches of a replica too
        report = verify(store)
        assert report.errors == [] and report.warnings == [], store
    for store in (a, b, c):
        store.close()


def test_writers_on_a_branch_and_on_main_race_safely(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    a.branch("dream/00000000000000c1").create(actor="dream")
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    branch = b.branch("dream/00000000000000c1")
    errors: list[BaseException] = []
    count = 8

    def on_main() -> None:
        try:
            for i in range(count):
                _cmd(a, command="create", path=f"/memories/main-{i}.md", file_text=f"main {i}\n")
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    def on_branch() -> None:
        try:
            for i in range(count):
                _cmd(branch, command="create", path=f"/memories/side-{i}.md", file_text=f"side {i}\n")
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    c = open_as_host(s3_env.url("t"), tmp_path / "host-c")
    also = c.branch("dream/00000000000000c1")

    def on_branch_too() -> None:  # a second host writing on the same branch
        try:
            for i in range(count):
                _cmd(also, command="create", path=f"/memories/also-{i}.md", file_text=f"also {i}\n")
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=f) for f in (on_main, on_branch, on_branch_too)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # the three writers did race: some commit lost its log position and was made again
    assert sum(store.remote.stats["races_lost"] for store in (a, b, c) if store.remote is not None) > 0
    assert len(_log_keys(s3_env, "t")) == 3 + 3 * count  # one record per commit, none lost or forked
    d = open_as_host(s3_env.url("t"), tmp_path / "host-d")
    assert d.head[1] == 1 + count
    side = open_dream(d, "00000000000000c1")
    assert side.head[1] == 2 + 2 * count  # fork commit at 2, then one per write of either host
    assert [read_at(side, f"/memories/side-{i}.md") for i in range(count)] == [
        f"side {i}\n".encode() for i in range(count)
    ]
    assert [read_at(side, f"/memories/also-{i}.md") for i in range(count)] == [
        f"also {i}\n".encode() for i in range(count)
    ]
    assert [read_at(d, f"/memories/main-{i}.md") for i in range(count)] == [
        f"main {i}\n".encode() for i in range(count)
    ]
    for store in (a, b, c, d):
        store.close()


def test_a_branch_rolled_back_in_the_bucket_is_detected(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    branch = a.branch("dream/00000000000000d1")
    branch.create(actor="dream")
    old = s3_env.copy_prefix("t")
    branch.transact(
        lambda txn: txn.write_file(parse_path(DREAMT, txn.settings), DREAMT_TEXT.encode()),
        command="create", paths=(DREAMT,), actor="dream", session="",
    )  # fmt: skip
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert read_at(open_dream(b, "00000000000000d1"), DREAMT) == DREAMT_TEXT.encode()
    s3_env.put_back_prefix("t", old)  # the branch's newest commit is gone from the bucket
    for host in (a, b):
        with pytest.raises(RollbackDetectedError):
            host.branches()
        with pytest.raises(RollbackDetectedError):
            _cmd(host, command="view", path="/memories")
    a.close()
    b.close()


def test_a_branch_record_replaced_in_the_bucket_is_detected(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    _branch_with_commits(a, "00000000000000d2")
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert b.branches() == ["dream/00000000000000d2"]
    newest = _log_keys(s3_env, "t")[-1]
    body = bytearray(s3_env.client.get_object(Bucket=s3_env.bucket, Key=newest)["Body"].read())
    body[-1] ^= 1  # the branch's BRANCH record's mac
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=newest, Body=bytes(body))
    with pytest.raises(RollbackDetectedError, match="Tampering detected"):
        b.branches()
    with pytest.raises(RollbackDetectedError, match="Tampering detected"):
        a.branches()
    b.close()
    a.close()


def test_a_lost_position_hint_is_found_again_from_the_log(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    _branch_with_commits(a, "00000000000000e1")
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert b.branches() == ["dream/00000000000000e1"]
    b.close()
    (tmp_path / "host-b" / "remote-position").unlink()
    _cmd(a, command="create", path="/memories/later.md", file_text="later\n")
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")  # from main's newest commit on, past the branch's records
    assert read_at(b, "/memories/later.md") == b"later\n"
    _cmd(b, command="create", path="/memories/from-b.md", file_text="b\n")
    assert read_at(a, "/memories/from-b.md") == b"b\n"
    assert (tmp_path / "host-b" / "remote-position").exists()
    a.close()
    b.close()


def test_dream_on_a_store_in_s3_reaches_the_model_and_publishes_its_branch(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    script: list[list[dict[str, Any]]] = [
        [{"type": "tool_use", "id": "toolu_01", "name": "memory", "input": {"command": "view", "path": NOTES}}],
        [
            {
                "type": "tool_use",
                "id": "toolu_02",
                "name": "memory",
                "input": {"command": "create", "path": DREAMT, "file_text": DREAMT_TEXT},
            }
        ],
        [{"type": "tool_use", "id": "toolu_03", "name": "memory", "input": {"command": "delete", "path": NOTES}}],
        [{"type": "text", "text": FINAL}],
    ]
    with FakeMessagesServer(script) as server:
        client = anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)
        result = run_dream(a, client=client, model=MODEL)
    assert server.errors == [] and server.exhausted
    assert len(server.requests) == 4
    view = server.tool_results_of(1)[0]
    assert not view.get("is_error") and "The deploy goes out on Tuesdays." in view["content"]
    assert (result.commits, result.changed_files, result.summary) == (2, [NOTES, DREAMT], FINAL)

    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    [info] = list_dreams(b)
    assert (info.id, info.status, info.commits, info.model) == (result.dream_id, "open", 2, MODEL)
    merge_dream(b, result.dream_id, actor="reviewer")
    assert read_at(a, DREAMT) == DREAMT_TEXT.encode()
    with pytest.raises(PathNotFoundError):
        read_at(a, NOTES)
    a.close()
    b.close()


def test_the_dream_cli_on_s3_and_a_discard_from_another_host(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    url = s3_env.url("t")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(s3_env.env)
    env.update(
        MEMVAULT_STORE=url,
        MEMVAULT_PASSPHRASE=PASSPHRASE,
        MEMVAULT_CACHE_DIR=str(tmp_path / "cli-cache"),
        MEMVAULT_ANCHOR_DIR=str(tmp_path / "cli-state"),
    )

    def cli(*args: str, environ: dict[str, str] = env) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", "import sys; from memvault.cli import main; sys.exit(main())", *args]
        return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=180, check=False)

    script: list[list[dict[str, Any]]] = [
        [{"type": "tool_use", "id": "t1", "name": "memory", "input": {"command": "delete", "path": NOTES}}],
        [{"type": "text", "text": FINAL}],
    ]
    with FakeMessagesServer(script) as server:
        run = cli("dream", "--model", MODEL, "--json", environ=server.env(env))
        assert server.errors == [] and server.exhausted
        assert server.requests[0]["model"] == MODEL
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert (result["commits"], result["changed_files"], result["stopped"]) == (1, [NOTES], "done")

    listed = cli("dream", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(d["id"], d["status"], d["commits"]) for d in json.loads(listed.stdout)] == [
        (result["dream_id"], "open", 1)
    ]
    # host a, another cache and host state, sees the CLI host's dream and discards it
    [info] = list_dreams(a)
    assert info.id == result["dream_id"]
    discard_dream(a, result["dream_id"], actor="reviewer")
    listed = cli("dream", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    assert cli("verify").returncode == 0
    assert read_at(a, NOTES) == NOTES_TEXT.encode()  # main never moved
    a.close()


def test_a_pull_stopped_before_its_ref_moves_is_finished_by_the_next(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _seeded(s3_env, tmp_path)
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    _branch_with_commits(a, "00000000000000e3")
    head = open_dream(a, "00000000000000e3").head

    def stop(*_args: object, **_kwargs: object) -> None:
        raise OSError("stopped")

    # a pull that stops after its keyring append, before its ref moves: the keyring holds the
    # branch's records, the ref is not made, the note of the refs to move is there
    with monkeypatch.context() as patch:
        patch.setattr(Follower, "catch_up_side", stop)
        with pytest.raises(StorageError):
            b.pull()
    b.close()
    ref = tmp_path / "host-b" / "repo" / "refs" / "heads" / "dream" / "00000000000000e3"
    assert not ref.exists() and (tmp_path / "host-b" / "remote-sides").exists()
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert b.branches() == ["dream/00000000000000e3"]
    assert open_dream(b, "00000000000000e3").head == head
    assert not (tmp_path / "host-b" / "remote-sides").exists()
    b.close()
    # without the note a missing ref is not made again (a copied store's records name branches
    # whose refs were removed on purpose): the dream is listed as damaged, its keys live. Nor by
    # a note that does not verify, nor by records a lagging position steps over.
    ref.unlink()
    (tmp_path / "host-b" / "remote-position").unlink()
    (tmp_path / "host-b" / "remote-sides").write_text('{"branches": ["00000000000000e3"], "mac": "AAAA"}\n')
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert b.branches() == []
    assert [(d.id, d.status) for d in list_dreams(b)] == [("00000000000000e3", "damaged")]
    assert not (tmp_path / "host-b" / "remote-sides").exists()
    (tmp_path / "host-b" / "remote-sides").write_text('["00000000000000e3"]\n')  # the unsigned form
    _cmd(a, command="create", path="/memories/later.md", file_text="later\n")
    assert read_at(b, "/memories/later.md") == b"later\n"
    assert b.branches() == []
    a.close()
    b.close()


def test_a_copy_of_the_newest_record_at_the_next_position_adds_nothing(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    _branch_with_commits(a, "00000000000000e2")
    keys = _log_keys(s3_env, "t")
    newest = s3_env.client.get_object(Bucket=s3_env.bucket, Key=keys[-1])["Body"].read()
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"t/log/{len(keys):020d}", Body=newest)
    # the copy chains to nothing new: every host steps over it, and commits go on after it
    _cmd(a, command="create", path="/memories/after.md", file_text="after\n")
    assert len(_log_keys(s3_env, "t")) == len(keys) + 2
    c = open_as_host(s3_env.url("t"), tmp_path / "host-c")
    assert read_at(c, "/memories/after.md") == b"after\n"
    assert read_at(open_dream(c, "00000000000000e2"), DREAMT) == DREAMT_TEXT.encode()
    assert c.head == a.head
    a.close()
    c.close()


def test_a_command_on_a_branch_costs_what_one_on_main_does(s3_faulty: S3Env, tmp_path: Path) -> None:
    """A write on a branch: the log's listing, the pack, its index and data keys together, the log
    record (3 round trips); a view: the listing."""
    store = _seeded(s3_faulty, tmp_path)
    branch = store.branch("dream/00000000000000f2")
    branch.create(actor="dream")
    _cmd(branch, command="view", path=NOTES)
    proxy = s3_faulty.proxy
    assert proxy is not None
    proxy.latency = 0.1  # requests sent together overlap: round trips counted from the timestamps
    try:
        costs = {}
        for name, command in (
            ("create", {"command": "create", "path": "/memories/b.md", "file_text": "b\n"}),
            ("view", {"command": "view", "path": "/memories/b.md"}),
            ("delete", {"command": "delete", "path": NOTES}),
        ):
            first = len(proxy.log)
            _cmd(branch, **command)
            made = proxy.log[first:]
            lists = sum(1 for method, path, _status in made if method == "GET" and "list-type=2" in path)
            costs[name] = (len(made), lists, sequential_round_trips(proxy.timings[first:]))
    finally:
        proxy.latency = 0.0
        store.close()
    assert costs == {"create": (1 + 2 + 1 + 1, 1, 3), "view": (1, 1, 1), "delete": (1 + 2 + 1, 1, 3)}


def test_a_store_with_a_dream_copied_to_s3_opens_on_a_new_host(s3_env: S3Env, tmp_path: Path) -> None:
    """The copy's log folds the dream's keyring records into a record of main; a host taking them
    in tries them first without changing its keyring (a trial that kept the branch's record made
    the real append refuse the keyring as damaged)."""
    local = tmp_path / "local"
    with memvault.MemoryStore.create(local, passphrase=PASSPHRASE, kdf=FAST_KDF) as s:
        s.put_file(NOTES, NOTES_TEXT)
        _branch_with_commits(s, "00000000000000aa")
        s.put_file("/memories/later.md", "later\n")
    copy_store(local, s3_env.url("copy"), passphrase=PASSPHRASE, cache_dir=tmp_path / "uploader")
    host = open_as_host(s3_env.url("copy"), tmp_path / "host-b")
    assert read_at(host, "/memories/later.md") == b"later\n"
    assert host.head[1] == 2
    # the refs are not copied: the dream is known from the keyring alone, its keys live
    [info] = list_dreams(host)
    assert (info.id, info.status) == ("00000000000000aa", "damaged")
    assert "ref is gone" in info.problem
    host.close()


STORE_ID = bytes(range(16))
COMMIT = bytes.fromhex("11" * 20)
PARENT = bytes.fromhex("22" * 20)
MAC = b"\x33" * 32


def _commit_record(seq: int) -> bytes:
    body = COMMIT_RAW_BODY.pack(seq, COMMIT, PARENT, MAC)
    return RECORD.pack(COMMIT_RAW, len(body)) + body


def _branch_record(seq: int) -> bytes:
    body = BRANCH_BODY.pack(bytes.fromhex("00000000000000f1"), 0, seq, COMMIT, PARENT, MAC)
    return RECORD.pack(BRANCH, len(body)) + body


def test_a_log_record_carries_a_commit_of_main_or_of_a_branch() -> None:
    main = decode_log(encode_log(STORE_ID, ("ab" * 20,), (), _commit_record(7)), STORE_ID, 7)
    assert (main.seq, main.commit_id, main.branch, main.packs) == (7, b"11" * 20, None, ("ab" * 20,))
    # after records of branches, main's number is below the position; never above it
    assert decode_log(encode_log(STORE_ID, (), (), _commit_record(7)), STORE_ID, 9).seq == 7
    with pytest.raises(IntegrityError):
        decode_log(encode_log(STORE_ID, (), (), _commit_record(8)), STORE_ID, 7)
    side = decode_log(encode_log(STORE_ID, (), (b"\x44" * 16,), _branch_record(3)), STORE_ID, 8)
    assert (side.seq, side.commit_id, side.branch, side.dek_ids) == (
        3, b"11" * 20, bytes.fromhex("00000000000000f1"), (b"\x44" * 16,),
    )  # fmt: skip
    # a record whose last chained record is neither is no log record
    with pytest.raises(IntegrityError):
        decode_log(encode_log(STORE_ID, (), (), _branch_record(3) + b"\x07\x00\x24" + b"\x00" * 36), STORE_ID, 8)


@pytest.mark.parametrize("dream", [False, True])
def test_an_edited_position_hint_is_ignored(s3_env: S3Env, tmp_path: Path, dream: bool) -> None:
    a = _seeded(s3_env, tmp_path)
    if dream:
        a.branch("dream/00000000000000f1").create(actor="dream")
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    commit, seq = b.head
    b.close()
    hint_path = tmp_path / "host-b" / "remote-position"
    assert hint_path.exists() == dream  # a main-only store keeps no hint
    _cmd(a, command="create", path="/memories/x.md", file_text="x\n")
    _cmd(a, command="create", path="/memories/y.md", file_text="y\n")
    # the hint moved to the log's end, past a's two commits b never took in (for the main-only
    # store: a hint made up, naming b's newest commit)
    hint = json.loads(hint_path.read_text()) if dream else {"branch": "", "commit": commit.decode()}
    hint["position"] = len(_log_keys(s3_env, "t")) - 1
    hint_path.write_text(json.dumps(hint))
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    assert read_at(b, "/memories/y.md") == b"y\n"  # b read on from its real position
    _cmd(b, command="create", path="/memories/from-b.md", file_text="b\n")
    _cmd(a, command="create", path="/memories/z.md", file_text="z\n")  # no fork: a is not blocked
    assert read_at(a, "/memories/from-b.md") == b"b\n"
    c = open_as_host(s3_env.url("t"), tmp_path / "host-c")
    assert read_at(c, "/memories/from-b.md") == b"b\n"
    assert read_at(c, "/memories/z.md") == b"z\n"
    assert c.head[1] == seq + 4
    assert len(_log_keys(s3_env, "t")) == (3 if dream else 2) + 4
    for store in (a, b, c):
        store.close()


def _dek_ids(s3_env: S3Env, prefix: str) -> set[bytes]:
    return {bytes.fromhex(k.rsplit("/", 1)[1]) for k in s3_env.keys() if k.startswith(f"{prefix}/deks/")}


@pytest.mark.parametrize("when", ["before-end", "after-end"])
def test_a_discard_racing_a_write_on_the_dream_destroys_every_key_of_it(
    s3_env: S3Env, tmp_path: Path, when: str
) -> None:
    a = _seeded(s3_env, tmp_path)
    name = "dream/00000000000000f2"
    a.branch(name).create(actor="dream")
    seeded = _dek_ids(s3_env, "t")
    _cmd(a.branch(name), command="create", path="/memories/d1.md", file_text="secret one\n")
    first = _dek_ids(s3_env, "t") - seeded
    assert len(first) == 1
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    on_b = b.branch(name)
    written: set[bytes] = set()
    refused: list[InvalidInputError] = []

    def b_writes() -> None:
        if written or refused:
            return  # once
        before = _dek_ids(s3_env, "t")
        try:
            _cmd(on_b, command="create", path="/memories/d2.md", file_text="secret two\n")
        except InvalidInputError as err:  # the dream ended
            refused.append(err)
        written.update(_dek_ids(s3_env, "t") - before)

    if when == "before-end":  # b commits after a's pull, before a creates the end's record
        racing = a.racing

        def racing_with_b(body: Any) -> Any:
            return racing(lambda: (b_writes(), body())[1])

        a.racing = racing_with_b  # type: ignore[method-assign]
    else:  # b tries once a's discard has ended the dream, before a destroys its keys
        destroy = a.destroy_keys

        def b_then_destroy(*args: Any, **kwargs: Any) -> Any:
            b_writes()
            return destroy(*args, **kwargs)

        a.destroy_keys = b_then_destroy  # type: ignore[method-assign]
    result = discard_dream(a, "00000000000000f2", actor="reviewer")
    if when == "before-end":
        assert len(written) == 1 and not refused  # b's commit went in before the end
        assert a.remote is not None and a.remote.stats["races_lost"] > 0  # a's end lost its place to it
        assert result.keys_destroyed == 2
    else:
        assert written == set() and len(refused) == 1  # the log holds the end: b's write is refused
        assert result.keys_destroyed == 1
    assert result.complete
    c = open_as_host(s3_env.url("t"), tmp_path / "host-c")
    assert c.branches() == [] and list_dreams(c) == []
    assert all(c.keyring.is_destroyed(k) for k in first | written)
    assert not (first | written) & _dek_ids(s3_env, "t")  # their objects left the bucket
    assert _dek_ids(s3_env, "t") == seeded
    for store in (a, b, c):
        store.close()


def test_a_fragment_of_old_records_at_the_next_position_is_not_stepped_over(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    _branch_with_commits(a, "00000000000000f3")
    keys = _log_keys(s3_env, "t")
    write = decode_log(
        s3_env.client.get_object(Bucket=s3_env.bucket, Key=keys[-2])["Body"].read(), a.store_id, len(keys) - 2
    )
    assert write.dek_ids  # the branch's write: its BRANCH_KEYS record, then its BRANCH record
    fragment = write.chained[-(RECORD.size + BRANCH_BODY.size) :]  # the BRANCH record alone
    assert fragment != write.chained
    s3_env.client.put_object(
        Bucket=s3_env.bucket, Key=f"t/log/{len(keys):020d}", Body=encode_log(a.store_id, (), (), fragment)
    )
    # not whole records the keyring took in as one run: junk, which stops writers until a void
    with pytest.raises(LogBlockedError, match=f"--void {len(keys)}"):
        _cmd(a, command="create", path="/memories/after.md", file_text="after\n")
    c = open_as_host(s3_env.url("t"), tmp_path / "host-c")
    assert read_at(open_dream(c, "00000000000000f3"), DREAMT) == DREAMT_TEXT.encode()
    a.close()
    c.close()


def test_a_stepped_over_copy_names_no_object_for_the_inventory(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    _branch_with_commits(a, "00000000000000f4")
    keys = _log_keys(s3_env, "t")
    newest = decode_log(
        s3_env.client.get_object(Bucket=s3_env.bucket, Key=keys[-1])["Body"].read(), a.store_id, len(keys) - 1
    )
    stray = "ab" * 20  # a pack no commit wrote
    for key in pack_keys(stray):
        s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"t/{key}", Body=b"not a pack")
    # a copy of the newest record's chained records, its header naming the stray pack
    copy = encode_log(a.store_id, (stray,), (), newest.chained)
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"t/log/{len(keys):020d}", Body=copy)
    _cmd(a, command="create", path="/memories/after.md", file_text="after\n")  # steps over the copy
    replica = a.remote
    assert replica is not None
    report = find_orphans(replica, replica.objects.list(""))
    assert report.records == len(keys) + 2
    assert sorted((o.key, o.reason) for o in report.orphans) == sorted(
        (key, "unreferenced") for key in pack_keys(stray)
    )
    a.close()


def test_an_ended_branch_takes_no_commit_on_any_host(s3_env: S3Env, tmp_path: Path) -> None:
    a = _seeded(s3_env, tmp_path)
    _branch_with_commits(a, "00000000000000f5")
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    on_b = b.branch("dream/00000000000000f5")  # b's branch object, made before the end
    assert on_b.head[1] == 4
    discard_dream(a, "00000000000000f5", actor="reviewer")
    records = len(_log_keys(s3_env, "t"))
    with pytest.raises(InvalidInputError, match="No dream branch dream/00000000000000f5"):
        _cmd(on_b, command="create", path="/memories/late.md", file_text="late\n")
    with pytest.raises(InvalidInputError, match="No dream branch dream/00000000000000f5"):
        _cmd(a.branch("dream/00000000000000f5"), command="create", path="/memories/late.md", file_text="late\n")
    assert len(_log_keys(s3_env, "t")) == records  # nothing published
    assert on_b.ended
    a.close()
    b.close()


def test_a_branch_commit_the_keyring_would_refuse_never_becomes_a_log_record(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _seeded(s3_env, tmp_path)
    branch = a.branch("dream/00000000000000f6")
    branch.create(actor="dream")
    records = len(_log_keys(s3_env, "t"))
    encode = BranchMarks.encode

    def skipping(self: BranchMarks, *args: Any, **kwargs: Any) -> tuple[bytes, bytes]:
        kwargs["seq"] += 1  # a BRANCH record that skips a number: authentic, but out of sequence
        return encode(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(BranchMarks, "encode", skipping)
        with pytest.raises(IntegrityError, match="does not follow the keyring's record of it"):
            _cmd(branch, command="create", path="/memories/side.md", file_text="side\n")
    assert len(_log_keys(s3_env, "t")) == records  # no record that would stop every writer
    b = open_as_host(s3_env.url("t"), tmp_path / "host-b")
    _cmd(b, command="create", path="/memories/main.md", file_text="main\n")
    _cmd(a.branch("dream/00000000000000f6"), command="create", path="/memories/side.md", file_text="side\n")
    assert read_at(open_dream(b, "00000000000000f6"), "/memories/side.md") == b"side\n"
    a.close()
    b.close()


def test_a_branch_made_whose_ref_could_not_be_written_gets_it_at_the_next_pull(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _seeded(s3_env, tmp_path)
    swap = GitBranch.compare_and_swap

    def refused_when_new(self: GitBranch, old: bytes | None, new: bytes) -> bool:
        return False if old is None else swap(self, old, new)  # the fork commit's ref is not made

    with monkeypatch.context() as patch:
        patch.setattr(GitBranch, "compare_and_swap", refused_when_new)
        a.branch("dream/00000000000000f7").create(actor="dream")  # published, recorded; no ref
    ref = tmp_path / "host-a" / "repo" / "refs" / "heads" / "dream" / "00000000000000f7"
    assert not ref.exists()
    assert a.branches() == ["dream/00000000000000f7"]  # the pull made it, from the writer's note
    assert ref.exists()
    a.close()


def test_chained_runs_match_whole_runs_of_records_only() -> None:
    def record(rtype: int, body: bytes) -> bytes:
        return RECORD.pack(rtype, len(body)) + body

    redact = record(DESTROY, b"d" * 40) + record(framing.COMMIT, b"c" * 60)  # a commit of main
    write = record(BRANCH_KEYS, b"k" * 40) + record(BRANCH, b"b" * 40)  # a commit of a branch
    runs = ChainedRuns(redact)
    assert runs.holds(redact) and not runs.holds(write)
    runs.add(write)
    assert runs.holds(write) and runs.holds(redact + write)  # one run, or two in a row
    assert not runs.holds(record(framing.COMMIT, b"c" * 60))  # a commit's closing record without its DESTROY
    assert not runs.holds(record(BRANCH, b"b" * 40))
    assert not runs.holds(redact[:-1]) and not runs.holds(redact[1:]) and not runs.holds(b"")


def test_a_new_host_opens_a_compacted_store_with_a_branch_from_its_checkpoint(s3_env: S3Env, tmp_path: Path) -> None:
    from memvault.admin.remote_gc import compact_remote

    a = _seeded(s3_env, tmp_path, "ck")
    _branch_with_commits(a, "00000000000000b2")  # positions 2..4 on the branch
    report = compact_remote(a, grace=0)
    assert report.checkpoint == 4
    assert _log_keys(s3_env, "ck") == ["ck/log/00000000000000000004.ckpt"]
    b = open_as_host(s3_env.url("ck"), tmp_path / "host-b")
    assert b.branches() == ["dream/00000000000000b2"]
    branch = open_dream(b, "00000000000000b2")
    assert read_at(branch, DREAMT) == DREAMT_TEXT.encode()
    assert read_at(b, NOTES) == NOTES_TEXT.encode() and b.head == a.head
    # After the checkpoint, commits on main and on the branch go on as log records.
    _cmd(b, command="create", path="/memories/b.md", file_text="from b\n")
    branch.transact(
        lambda txn: txn.write_file(parse_path("/memories/c.md", txn.settings), b"on the branch\n"),
        command="create", paths=("/memories/c.md",), actor="dream", session="x",
    )  # fmt: skip
    assert read_at(a, "/memories/b.md") == b"from b\n"
    assert read_at(open_dream(a, "00000000000000b2"), "/memories/c.md") == b"on the branch\n"
    a.close()
    b.close()
