"""``memvault.verify`` and ``memvault verify``: a healthy store passes with exact counts; each kind of
damage (flipped byte in a blob object, missing object, forged commit, rolled-back branch, damaged
keyring records) is reported with its own code, path and commit where known, all at once."""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from dulwich.objects import Commit
from dulwich.repo import Repo

import memvault
from conftest import PASSPHRASE, keyring_records, make_store, rewrite_packed_object
from memvault.cli import main
from memvault.format import records
from memvault.verify import Problem, VerifyReport, verify

CANARY = "canary-4f7c1e plaintext that must never appear in a report"


@dataclass
class Seeded:
    path: Path
    commits: list[bytes]  #: commit id by seq (index 0 = init)
    nodes: dict[tuple[str, int], records.Node]  #: (path, seq of the commit that wrote it) -> node
    keyring_sizes: list[int]  #: keyring file size after each commit


def _seed(path: Path) -> Seeded:
    """Ten commits: creates, edits, an insert, a file rename, a directory rename, a delete."""
    store = make_store(path)
    tool = memvault.MemoryTool(store, actor="agent", session="s-1")
    steps: list[tuple[dict[str, object], str | None]] = [
        ({"command": "create", "path": "/memories/a.md", "file_text": f"alpha {CANARY}\n"}, "/memories/a.md"),
        ({"command": "create", "path": "/memories/notes/b.md", "file_text": "bravo\n"}, "/memories/notes/b.md"),
        (
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "ALPHA"},
            "/memories/a.md",
        ),
        (
            {"command": "insert", "path": "/memories/notes/b.md", "insert_line": 1, "insert_text": "more"},
            "/memories/notes/b.md",
        ),
        ({"command": "create", "path": "/memories/notes/c.md", "file_text": "charlie\n"}, "/memories/notes/c.md"),
        ({"command": "rename", "old_path": "/memories/notes/c.md", "new_path": "/memories/c2.md"}, "/memories/c2.md"),
        (
            {"command": "rename", "old_path": "/memories/notes", "new_path": "/memories/archive"},
            "/memories/archive/b.md",
        ),
        ({"command": "delete", "path": "/memories/c2.md"}, None),
        ({"command": "create", "path": "/memories/d.md", "file_text": "delta\n"}, "/memories/d.md"),
        (
            {"command": "str_replace", "path": "/memories/d.md", "old_str": "delta", "new_str": "DELTA"},
            "/memories/d.md",
        ),
    ]
    commits = [store.head[0]]
    nodes: dict[tuple[str, int], records.Node] = {}
    sizes = [(path / "keyring").stat().st_size]
    for seq, (call, written) in enumerate(steps, 1):
        tool.call(call)
        commits.append(store.head[0])
        assert store.head[1] == seq
        sizes.append((path / "keyring").stat().st_size)
        if written is not None:
            node = store.snapshot().get(written)
            assert node is not None
            nodes[(written, seq)] = node
    store.close()
    return Seeded(path, commits, nodes, sizes)


@pytest.fixture
def seeded(store_path: Path) -> Seeded:
    return _seed(store_path)


def _open(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE, check_head=False)


def _verify(path: Path) -> VerifyReport:
    with _open(path) as store:
        return verify(store)


def _loose(path: Path, obj_id: bytes) -> Path:
    h = obj_id.decode()
    return path / "repo" / "objects" / h[:2] / h[2:]


def _flip(raw: bytes) -> bytes:
    out = bytearray(raw)
    out[len(out) // 2] ^= 0x01
    return bytes(out)


def _flip_object_byte(path: Path, obj_id: bytes) -> None:
    """Flip one byte of the object's content (re-deflated, so only git's checksum can tell):
    in its pack, or in its loose file (stores written before commits were packs)."""
    loose = _loose(path, obj_id)
    if not loose.exists():
        rewrite_packed_object(path, obj_id, _flip)
        return
    raw = zlib.decompress(loose.read_bytes())
    os.chmod(loose, 0o600)
    loose.write_bytes(zlib.compress(_flip(raw)))


def _remove_object(path: Path, obj_id: bytes) -> None:
    """Remove an object from the store (from its pack, or its loose file)."""
    loose = _loose(path, obj_id)
    if loose.exists():
        loose.unlink()
    else:
        rewrite_packed_object(path, obj_id, None)


def _set_branch(path: Path, commit_id: bytes) -> None:
    (path / "repo" / "refs" / "heads" / "main").write_bytes(commit_id + b"\n")


def _forge_on_top(path: Path) -> bytes:
    """A commit on top of the head: the head's tree and message with one tag digit changed."""
    repo = Repo(str(path / "repo"))
    head = repo.refs[b"refs/heads/main"]
    real = repo[head]
    assert isinstance(real, Commit)
    c = Commit()
    c.tree, c.parents = real.tree, [head]
    c.author = c.committer = b"memvault <memvault@invalid>"
    c.author_time = c.commit_time = 0
    c.author_timezone = c.commit_timezone = 0
    last = real.message[-2:-1]
    c.message = real.message[:-2] + (b"0" if last != b"0" else b"1") + b"\n"
    repo.object_store.add_object(c)
    _set_branch(path, c.id)
    return c.id


def _dek_record(data: bytes, dek_id: bytes) -> tuple[int, int]:
    (start, end) = next((s, e) for t, s, e in keyring_records(data) if t == 1 and data[s + 3 : s + 19] == dek_id)
    return start, end


def _reachable(path: Path) -> tuple[int, set[bytes], set[bytes], set[bytes]]:
    """Independently of memvault: (commits, every object, content blobs under c/, shard blobs under i/)."""
    repo = Repo(str(path / "repo"))
    seen: set[bytes] = set()
    content: set[bytes] = set()
    shards: set[bytes] = set()
    commits = 0
    commit_id: bytes | None = repo.refs[b"refs/heads/main"]
    while commit_id is not None:
        commit = repo[commit_id]
        assert isinstance(commit, Commit)
        seen.add(commit_id)
        commits += 1
        stack: list[tuple[bytes, bytes]] = [(commit.tree, b"")]
        while stack:
            tree_id, top = stack.pop()
            if tree_id in seen:
                continue
            seen.add(tree_id)
            for entry in repo[tree_id].iteritems():  # type: ignore[attr-defined]
                if entry.mode == 0o040000:
                    stack.append((entry.sha, top or entry.path))
                else:
                    seen.add(entry.sha)
                    # content blobs are named h[d:] (64 - d hex, d = 2, 3 or 4 by layout); shards "i"
                    # or one hex digit
                    (content if len(entry.path) in (60, 61, 62) else shards).add(entry.sha)
        commit_id = commit.parents[0] if commit.parents else None
    return commits, seen, content, shards


def _codes(report: VerifyReport) -> list[tuple[str, str]]:
    return [(p.severity, p.code) for p in report.problems]


def _no_plaintext(report: VerifyReport) -> None:
    text = json.dumps(report.to_json())
    assert CANARY not in text and "alpha" not in text and "bravo" not in text


# -- healthy -------------------------------------------------------------------------------------


def test_healthy_store_passes_with_exact_counts(seeded: Seeded) -> None:
    commits, objects, content, shards = _reachable(seeded.path)
    data = (seeded.path / "keyring").read_bytes()
    dek_records = sum(1 for t, _s, _e in keyring_records(data) if t == 1)
    calls: list[tuple[int, int]] = []
    with _open(seeded.path) as store:
        report = verify(store, progress=lambda done, total: calls.append((done, total)))
    assert report.problems == []
    assert report.ok
    assert (report.commits, report.objects, report.versions, report.keys, report.key_slots) == (
        11, len(objects), 9, dek_records, 1,
    )  # fmt: skip
    assert commits == 11 and len(content) == 9  # nine file versions, one content blob each
    assert report.head == seeded.commits[-1].decode() and report.head_seq == 10
    assert calls == [(i, 11) for i in range(12)]
    assert report.to_json() == {
        "ok": True, "head": seeded.commits[-1].decode(), "head_seq": 10, "commits": 11,
        "objects": len(objects), "versions": 9, "keys": dek_records, "key_slots": 1, "errors": 0,
        "warnings": 0, "problems": [],
    }  # fmt: skip


def test_each_distinct_shard_and_version_is_decoded_once(seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    _commits, _objects, content, shards = _reachable(seeded.path)
    counts = {"shard": 0, "blob": 0}
    decode_shard, decode_blob = records.decode_shard, records.decode_blob

    def count_shard(*args: object, **kwargs: object) -> object:
        counts["shard"] += 1
        return decode_shard(*args, **kwargs)  # type: ignore[arg-type]

    def count_blob(*args: object, **kwargs: object) -> object:
        counts["blob"] += 1
        return decode_blob(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(records, "decode_shard", count_shard)
    monkeypatch.setattr(records, "decode_blob", count_blob)
    assert _verify(seeded.path).ok
    assert counts == {"shard": len(shards), "blob": len(content)}


def test_live_writer_store_is_verified_from_disk_not_from_its_caches(store_path: Path) -> None:
    """The writer's own store object caches decrypted contents; verify must still read the disk."""
    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": CANARY})
    node = store.snapshot().get("/memories/a.md")
    assert node is not None
    assert verify(store).ok
    _flip_object_byte(store_path, node.blob_id)
    report = verify(store)
    assert _codes(report) == [("error", "bad-blob")]
    store.close()


# -- one kind of damage at a time ----------------------------------------------------------------


def test_flipped_byte_in_a_content_blob_object(seeded: Seeded) -> None:
    node = seeded.nodes[("/memories/a.md", 1)]  # the first version, replaced at #3
    _flip_object_byte(seeded.path, node.blob_id)
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "bad-blob",
            f"Content blob {node.blob_id.decode()} of /memories/a.md (version 1) is damaged: the object does not "
            "match its id.",
            "/memories/a.md", seeded.commits[1].decode(), 1,
        )
    ]  # fmt: skip
    assert not report.ok and report.commits == 11 and report.versions == 9
    _no_plaintext(report)


def test_missing_objects(seeded: Seeded) -> None:
    node = seeded.nodes[("/memories/notes/b.md", 2)]
    _remove_object(seeded.path, node.blob_id)
    # And the index shard blob holding d.md's first version (replaced by #10).
    with _open(seeded.path) as store:
        _meta, tree9, _parent = store.commit(seeded.commits[9])
        d1 = seeded.nodes[("/memories/d.md", 9)]
        blobs9 = store.index_blobs(tree9)
        shard = next(d1.token.hex()[:d].encode() for d in (2, 3, 4) if d1.token.hex()[:d].encode() in blobs9)
        shard_blob = blobs9[shard]
        _meta, tree10, _parent = store.commit(seeded.commits[10])
        assert store.index_blobs(tree10)[shard] != shard_blob
    _remove_object(seeded.path, shard_blob)
    report = _verify(seeded.path)
    assert report.errors == [
        Problem(
            "error", "missing-object",
            f"Content blob {node.blob_id.decode()} of /memories/notes/b.md (version 1) is missing.",
            "/memories/notes/b.md", seeded.commits[2].decode(), 2,
        ),
        Problem(
            "error", "missing-object", f"Index shard {shard.decode()} (blob {shard_blob.decode()}) is missing.",
            None, seeded.commits[9].decode(), 9,
        ),
    ]  # fmt: skip
    # The data key of d.md's first version, listed only by that shard, is now used by nothing
    # verify could see (its content blob is still checked as an object, not called stray).
    assert [(p.code, p.path, p.seq) for p in report.warnings] == [("orphan-key", None, None)]
    assert report.warnings[0].message.startswith(f"Data key {d1.dek_id.hex()} is used by no version")
    assert report.versions == 8


def test_missing_commit_object(seeded: Seeded) -> None:
    _remove_object(seeded.path, seeded.commits[4])
    report = _verify(seeded.path)
    # The keyring's authenticated high-water records name #4's parent: the walk goes on.
    assert report.problems == [
        Problem(
            "error",
            "missing-object",
            f"Commit #4 {seeded.commits[4].decode()} is missing; the walk goes on from the parent the keyring "
            "records for it.",
            None,
            seeded.commits[4].decode(),
            4,
        )
    ]
    assert report.commits == 10 and report.versions == 9
    # Without the keyring's record of it (the keyring damaged too), the walk stops there, and no
    # data key is called an orphan for lack of the history that would use it.
    keyring = seeded.path / "keyring"
    data = bytearray(keyring.read_bytes())
    _start, end = [(s, e) for t, s, e in keyring_records(bytes(data)) if t in (2, 5)][4]
    data[end - 1] ^= 0x01
    keyring.write_bytes(bytes(data))
    report = _verify(seeded.path)
    assert [(p.code, p.seq) for p in report.problems] == [("bad-keyring", None), ("missing-object", 4)]
    assert report.problems[1].message == (
        f"Commit #4 {seeded.commits[4].decode()} is missing; the history before it cannot be checked."
    )
    assert report.commits == 6


def test_forged_commit_on_top_of_the_branch(seeded: Seeded) -> None:
    forged = _forge_on_top(seeded.path)
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "forged-commit",
            f"Commit #11 {forged.decode()} does not authenticate (forged or altered: its Memvault-Tag, metadata "
            "or parents do not verify).",
            None, forged.decode(), 11,
        )
    ]  # fmt: skip
    assert report.commits == 12 and report.head == forged.decode() and report.head_seq is None


def test_branch_reset_to_an_older_commit(seeded: Seeded) -> None:
    _set_branch(seeded.path, seeded.commits[6])
    report = _verify(seeded.path)
    assert report.errors == [
        Problem(
            "error", "rollback",
            "Rollback detected: the branch is at commit #6 but this store has recorded commit #10. Someone "
            "reset or replaced the history.",
            None, seeded.commits[6].decode(), 6,
        )
    ]  # fmt: skip
    # Every data key written after #6 is now referenced by nothing on the branch: warnings only.
    data = (seeded.path / "keyring").read_bytes()
    later = [s for t, s, _e in keyring_records(data) if t == 1 and s >= seeded.keyring_sizes[6]]
    assert len(later) > 0
    assert _codes(report)[1:] == [("warning", "orphan-key")] * len(later)
    assert report.commits == 7 and report.head_seq == 6


def test_recorded_commit_on_top_of_the_branch_is_the_head(seeded: Seeded) -> None:
    """A writer that recorded #10 but died before moving the branch: #10 is the head (a warning);
    with full durability its objects gone is a rollback."""
    _set_branch(seeded.path, seeded.commits[9])
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "warning",
            "unpublished-commit",
            f"Commit #10 {seeded.commits[10].decode()} is recorded but the branch still points at its parent (a "
            "writer stopped before moving it); the next write publishes it.",
            None,
            seeded.commits[10].decode(),
            10,
        )
    ]
    assert report.ok and report.commits == 11 and report.versions == 9 and report.head_seq == 10
    _remove_object(seeded.path, seeded.commits[10])
    report = _verify(seeded.path)
    assert [(p.severity, p.code, p.seq) for p in report.errors] == [("error", "rollback", 10)]
    assert report.errors[0].message.startswith("Rollback detected: the store recorded commit #10")
    assert report.commits == 10 and report.head == seeded.commits[9].decode()


def test_fork_is_a_rollback_error(seeded: Seeded, tmp_path: Path) -> None:
    import shutil

    twin = tmp_path / "twin"
    shutil.copytree(seeded.path, twin)
    with memvault.MemoryStore.open(twin, passphrase=PASSPHRASE) as other:
        memvault.MemoryTool(other).call({"command": "delete", "path": "/memories/d.md"})
        sibling = other.head[0]
    # The twin's commit #11 dropped into the original, whose own #10 stays the newest recorded.
    shutil.copytree(twin / "repo" / "objects", seeded.path / "repo" / "objects", dirs_exist_ok=True)
    with memvault.MemoryStore.open(seeded.path, passphrase=PASSPHRASE) as store:
        memvault.MemoryTool(store).call({"command": "delete", "path": "/memories/a.md"})
        assert store.head[1] == 11
    _set_branch(seeded.path, sibling)
    report = _verify(seeded.path)
    assert [(p.code, p.message, p.seq) for p in report.errors] == [
        ("rollback", "Fork detected: the branch points at a commit this store never recorded.", 11)
    ]


def test_damaged_commit_record_in_the_keyring(seeded: Seeded) -> None:
    keyring = seeded.path / "keyring"
    data = bytearray(keyring.read_bytes())
    commit_records = [(s, e) for t, s, e in keyring_records(bytes(data)) if t in (2, 5)]
    _start, end = commit_records[5]  # the record of #5
    data[end - 1] ^= 0x01  # its MAC
    keyring.write_bytes(bytes(data))
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "bad-keyring",
            "The store's keyring is damaged. Its high-water records after the damage cannot be trusted, so "
            "freshness (rollback) was not checked.",
        )
    ]  # fmt: skip
    # The data keys recorded after the damage were still used: every version was checked.
    assert report.versions == 9


def test_damaged_data_key_record(seeded: Seeded) -> None:
    node = seeded.nodes[("/memories/notes/b.md", 2)]
    keyring = seeded.path / "keyring"
    data = bytearray(keyring.read_bytes())
    _start, end = _dek_record(bytes(data), node.dek_id)
    data[end - 5] ^= 0x01  # inside the wrapped key
    keyring.write_bytes(bytes(data))
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "bad-key",
            f"The keyring record of data key {node.dek_id.hex()} of a version of /memories/notes/b.md does not "
            "authenticate (damaged).",
            "/memories/notes/b.md", seeded.commits[2].decode(), 2,
        )
    ]  # fmt: skip
    assert report.versions == 8  # the version whose key is damaged cannot be opened


def test_data_key_record_removed_from_the_keyring(seeded: Seeded) -> None:
    node = seeded.nodes[("/memories/a.md", 1)]
    keyring = seeded.path / "keyring"
    data = keyring.read_bytes()
    start, end = _dek_record(data, node.dek_id)
    keyring.write_bytes(data[:start] + data[end:])  # DEK records are not in the MAC chain
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "missing-key",
            f"The data key {node.dek_id.hex()} of a version of /memories/a.md is not in the keyring.",
            "/memories/a.md", seeded.commits[1].decode(), 1,
        )
    ]  # fmt: skip


def test_torn_keyring_tail_and_damaged_key_slot_are_reported(seeded: Seeded) -> None:
    keyring = seeded.path / "keyring"
    keyring.write_bytes(keyring.read_bytes() + b"\x01\x00\x50" + b"\x00" * 10)
    store = _open(seeded.path)
    # MemoryStore.open refuses a malformed slot file, so it can only be seen when damaged after open.
    (seeded.path / "keys" / ("0" * 32 + ".json")).write_text("{not json")
    report = verify(store)
    store.close()
    assert [(p.severity, p.code, p.message) for p in report.problems] == [
        ("error", "bad-key-slot", f"Key slot keys/{'0' * 32}.json is malformed."),
        ("warning", "torn-keyring",
         "The keyring ends in 13 bytes of a partial record (a crash during an append); the next write cuts them off."),
    ]  # fmt: skip
    assert report.key_slots == 1


def test_a_keyring_replaced_by_a_fifo_is_reported_without_hanging(seeded: Seeded) -> None:
    import threading

    store = _open(seeded.path)
    keyring = seeded.path / "keyring"
    keyring.unlink()
    os.mkfifo(keyring)
    reports: list[VerifyReport] = []
    worker = threading.Thread(target=lambda: reports.append(verify(store)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "verify hung on a keyring that is a FIFO"
    store.close()
    codes = {p.code for p in reports[0].problems}
    assert "bad-keyring" in codes and not reports[0].ok


def test_several_problems_are_reported_together(seeded: Seeded) -> None:
    flipped = seeded.nodes[("/memories/a.md", 1)]
    missing = seeded.nodes[("/memories/notes/b.md", 2)]
    _flip_object_byte(seeded.path, flipped.blob_id)
    _remove_object(seeded.path, missing.blob_id)
    forged = _forge_on_top(seeded.path)
    report = _verify(seeded.path)
    assert [(p.code, p.path, p.seq) for p in report.problems] == [
        ("forged-commit", None, 11),
        ("bad-blob", "/memories/a.md", 1),
        ("missing-object", "/memories/notes/b.md", 2),
    ]
    assert report.problems[0].commit == forged.decode()
    assert len({p.message for p in report.problems}) == 3
    _no_plaintext(report)


# -- CLI -----------------------------------------------------------------------------------------


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> Seeded:
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(seeded.path))
    monkeypatch.setenv("NO_COLOR", "1")
    return seeded


def test_cli_verify_healthy(env: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    _commits, objects, _content, _shards = _reachable(env.path)
    assert main(["verify"]) == 0
    out = capsys.readouterr()
    assert out.out == f"verified 11 commits, {len(objects)} objects, 9 file versions: OK\n"
    assert out.err == ""  # no progress when stderr is not a terminal
    assert main(["verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["commits"], report["objects"], report["versions"], report["problems"]) == (
        True, 11, len(objects), 9, [],
    )  # fmt: skip


def test_cli_verify_progress_only_on_a_terminal(
    env: Seeded, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["verify"]) == 0
    out = capsys.readouterr()
    assert out.err.endswith("\rverifying commits [##############################] 11/11\n")
    assert out.err.startswith("\rverifying commits [..............................] 0/11")
    assert out.out.endswith(": OK\n")


def test_cli_verify_reports_problems_and_exit_status(env: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    forged = _forge_on_top(env.path)
    assert main(["verify"]) == 3
    lines = capsys.readouterr().out.splitlines()
    _commits, objects, _content, _shards = _reachable(env.path)
    assert lines == [
        f"error  forged-commit  #11 {forged.decode()[:7]}…  Commit #11 {forged.decode()} does not authenticate "
        "(forged or altered: its Memvault-Tag, metadata or parents do not verify).",
        f"verified 12 commits, {len(objects)} objects, 9 file versions: 1 error",
    ]
    assert main(["verify", "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["errors"] == 1
    assert [(p["code"], p["commit"], p["seq"]) for p in report["problems"]] == [("forged-commit", forged.decode(), 11)]


def test_cli_verify_warnings_only_is_ok(env: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    keyring = env.path / "keyring"
    keyring.write_bytes(keyring.read_bytes() + b"\x02\x00")
    assert main(["verify"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("warning  torn-keyring  The keyring ends in 2 bytes")
    assert lines[1].endswith(": OK (1 warning)")


def test_cli_verify_wrong_key(env: Seeded, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "not it")
    assert main(["verify"]) == 12
    assert capsys.readouterr().err == "memvault: The passphrase or key does not unlock this memory store.\n"
