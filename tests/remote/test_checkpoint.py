"""Compaction of a store in S3 (moto's server on loopback; docs/format.md §12.8): ``gc`` publishes an
authenticated checkpoint, one merged pack and one data key bundle, deletes what they supersede once
the grace period has passed; a new host opens from the checkpoint; a checkpoint tampered with,
deleted or replaced by an older one is detected; a host paused across a compaction catches up;
racing writers lose nothing; redaction stays crypto-shredding."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

import memvault
from conftest import pack_entries
from memvault.admin.remote_gc import compact_remote
from memvault.cli import main
from memvault.errors import ConflictError, IntegrityError, PathNotFoundError, RollbackDetectedError
from memvault.protocol.commands import run_command
from memvault.remote.compact import compact
from memvault.remote.lease import Lease
from memvault.remote.replica import cache_dir_for
from s3support import cli_as_host, create_as_host, open_as_host


def _cmd(store: memvault.MemoryStore, **command: object) -> str:
    return str(run_command(store, command, actor="tester", session="s"))


def _keys(s3_env, prefix: str) -> list[str]:
    return sorted(k[len(prefix) + 1 :] for k in s3_env.keys() if k.startswith(prefix + "/"))


def _get(s3_env, prefix: str, key: str) -> bytes:
    return bytes(s3_env.client.get_object(Bucket=s3_env.bucket, Key=f"{prefix}/{key}")["Body"].read())


def _put(s3_env, prefix: str, key: str, data: bytes) -> None:
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"{prefix}/{key}", Body=data)


def _delete(s3_env, prefix: str, key: str) -> None:
    s3_env.client.delete_object(Bucket=s3_env.bucket, Key=f"{prefix}/{key}")


def _files(store: memvault.MemoryStore, count: int, tag: str = "f") -> None:
    for i in range(count):
        _cmd(store, command="create", path=f"/memories/{tag}{i}.md", file_text=f"{tag} number {i}\n")


def test_gc_compacts_the_bucket_and_a_new_host_opens_from_the_checkpoint(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("c")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 6)  # init + 6 commits: log positions 0..6
    before = _keys(s3_env, "c")
    assert len([k for k in before if k.startswith("packs/")]) == 14
    report = compact_remote(a, grace=0)
    assert report.checkpoint == 6 and report.packs_merged == 7
    after = _keys(s3_env, "c")
    # One checkpoint, one merged pack and its index, one bundle; every record, old pack and data
    # key object gone.
    assert [k for k in after if k.startswith("log/")] == ["log/00000000000000000006.ckpt"]
    assert len([k for k in after if k.startswith("packs/")]) == 2
    assert [k for k in after if k.startswith("deks/")] == ["deks/upto-00000000000000000006"]
    assert report.deleted["superseded"] >= 7 and report.deleted["orphan"] == 14
    # The checkpoint is authenticated data, not names: no file name in it.
    assert b"f3.md" not in _get(s3_env, "c", "log/00000000000000000006.ckpt")
    b = open_as_host(url, tmp_path / "b")
    for i in range(6):
        assert f"f number {i}" in _cmd(b, command="view", path=f"/memories/f{i}.md")
    assert b.remote is not None and b.remote.next_commit == 7
    # Both go on committing after the checkpoint.
    _cmd(b, command="create", path="/memories/after.md", file_text="after gc\n")
    assert "after gc" in _cmd(a, command="view", path="/memories/after.md")
    assert "log/00000000000000000007" in _keys(s3_env, "c")
    a.close()
    b.close()


def test_a_second_gc_merges_the_previous_checkpoint_and_deletes_it(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("c2")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 3)
    compact_remote(a, grace=0)
    _files(a, 3, "g")
    report = compact_remote(a, grace=0)
    assert report.checkpoint == 6 and report.packs_merged == 4  # the old merged pack and three new ones
    after = _keys(s3_env, "c2")
    assert [k for k in after if k.startswith("log/")] == ["log/00000000000000000006.ckpt"]
    assert [k for k in after if k.startswith("deks/")] == ["deks/upto-00000000000000000006"]
    assert len([k for k in after if k.startswith("packs/")]) == 2
    b = open_as_host(url, tmp_path / "b")
    assert "f number 2" in _cmd(b, command="view", path="/memories/f2.md")
    assert "g number 2" in _cmd(b, command="view", path="/memories/g2.md")
    a.close()
    b.close()


def test_nothing_is_deleted_before_the_grace_period_has_passed(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("gr")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 3)
    before = set(_keys(s3_env, "gr"))
    report = compact_remote(a, grace=3600)
    after = set(_keys(s3_env, "gr"))
    assert before <= after  # only added: checkpoint, bundle, pack, index, lease
    assert after - before == {
        "log/00000000000000000003.ckpt",
        "deks/upto-00000000000000000003",
        "gc-lease",
        *[k for k in after - before if k.startswith("packs/")],
    }
    assert report.waiting["superseded"] >= 4 and report.waiting["orphan"] == 8 and not report.deleted
    # A host opening meanwhile reads from the checkpoint; a host with a replica reads on.
    b = open_as_host(url, tmp_path / "b")
    assert "f number 1" in _cmd(b, command="view", path="/memories/f1.md")
    # An hour later (the gc host's clock), the next run deletes them.
    assert a.remote is not None
    with a.writing():
        a.pull()
        later = compact(a.remote, grace=3600, clock=lambda: time.time() + 3601)
    assert later.deleted["superseded"] >= 4 and later.deleted["orphan"] == 8
    assert [k for k in _keys(s3_env, "gr") if k.startswith("log/")] == ["log/00000000000000000003.ckpt"]
    a.close()
    b.close()


def test_a_host_paused_across_a_compaction_catches_up_and_commits(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("p")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 2)
    b = open_as_host(url, tmp_path / "b")
    assert "f number 1" in _cmd(b, command="view", path="/memories/f1.md")  # b pulled up to position 2
    _files(a, 3, "g")  # positions 3..5, which b has not seen
    compact_remote(a, grace=0)  # records 0..5 and their packs deleted at once
    assert not [k for k in _keys(s3_env, "p") if k.startswith("log/0") and not k.endswith(".ckpt")]
    # b wakes up: its next command finds records 3..5 gone and reads them from the checkpoint.
    _cmd(b, command="create", path="/memories/from-b.md", file_text="b was paused\n")
    assert "g number 2" in _cmd(b, command="view", path="/memories/g2.md")
    c = open_as_host(url, tmp_path / "c")
    for path, text in [("/memories/f0.md", "f number 0"), ("/memories/g1.md", "g number 1"),
                       ("/memories/from-b.md", "b was paused")]:  # fmt: skip
        assert text in _cmd(c, command="view", path=path)
    a.close()
    b.close()
    c.close()


def test_a_tampered_checkpoint_is_refused_and_nothing_of_it_applied(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("t")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 3)
    compact_remote(a, grace=0)
    a.close()
    key = "log/00000000000000000003.ckpt"
    data = bytearray(_get(s3_env, "t", key))
    data[40] ^= 1
    _put(s3_env, "t", key, bytes(data))
    with pytest.raises(IntegrityError, match="checkpoint"):
        b = open_as_host(url, tmp_path / "b")
        _cmd(b, command="view", path="/memories/f0.md")
    repo = tmp_path / "b" / "repo" / "objects" / "pack"
    assert not list(repo.glob("*.pack")) if repo.exists() else True


def test_a_deleted_checkpoint_is_detected_by_a_host_that_saw_it(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("d")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 3)
    compact_remote(a, grace=0)
    _cmd(a, command="create", path="/memories/later.md", file_text="later\n")
    b = open_as_host(url, tmp_path / "b")
    assert "later" in _cmd(b, command="view", path="/memories/later.md")
    b.close()
    _delete(s3_env, "d", "log/00000000000000000003.ckpt")
    shutil.rmtree(tmp_path / "b")  # b's cache is gone; its host state (the mark) is not
    with pytest.raises(RollbackDetectedError):
        b = open_as_host(url, tmp_path / "b")
        _cmd(b, command="view", path="/memories/later.md")
    a.close()


def test_an_older_checkpoint_put_back_is_detected(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("o")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 2)
    compact_remote(a, grace=0)
    older = s3_env.copy_prefix("o")  # checkpoint 2 and its pack
    _files(a, 2, "g")
    compact_remote(a, grace=0)
    b = open_as_host(url, tmp_path / "b")
    assert "g number 1" in _cmd(b, command="view", path="/memories/g1.md")
    b.close()
    s3_env.put_back_prefix("o", older)
    assert "log/00000000000000000002.ckpt" in _keys(s3_env, "o")
    shutil.rmtree(tmp_path / "b")
    with pytest.raises(RollbackDetectedError):
        b = open_as_host(url, tmp_path / "b")
        _cmd(b, command="view", path="/memories/f0.md")
    a.close()


def test_racing_writers_lose_nothing_while_a_third_host_compacts(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("race")
    c = create_as_host(url, tmp_path / "c")
    _files(c, 2)
    a = open_as_host(url, tmp_path / "a")
    b = open_as_host(url, tmp_path / "b")
    errors: list[BaseException] = []

    def write(store: memvault.MemoryStore, tag: str) -> None:
        try:
            _files(store, 6, tag)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(a, "a")), threading.Thread(target=write, args=(b, "b"))]
    for t in threads:
        t.start()
    reports = []
    while any(t.is_alive() for t in threads):
        reports.append(compact_remote(c, grace=30))  # in-flight uploads are younger than 30 s: kept
    for t in threads:
        t.join()
    reports.append(compact_remote(c, grace=30))
    assert not errors
    assert any(r.checkpoint is not None for r in reports)
    d = open_as_host(url, tmp_path / "d")
    for tag in ("a", "b"):
        for i in range(6):
            assert f"{tag} number {i}" in _cmd(d, command="view", path=f"/memories/{tag}{i}.md")
    for store in (a, b, c, d):
        store.close()


def test_only_one_host_holds_the_lease(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("l")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 1)
    assert a.remote is not None
    other = Lease(a.remote.objects, "0123456789abcdef")
    other.acquire()
    with pytest.raises(ConflictError, match="another host"):
        compact_remote(a, grace=0)
    assert not [k for k in _keys(s3_env, "l") if k.endswith(".ckpt")]
    other.release()
    assert compact_remote(a, grace=0).checkpoint == 1
    a.close()


def test_compaction_never_copies_a_destroyed_keys_ciphertext_and_redaction_rewrites_the_bundle(
    s3_env, tmp_path: Path
) -> None:
    from memvault.erasure.redact import shred_file

    url = s3_env.url("r")
    a = create_as_host(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/secret.md", file_text="the secret\n")
    _cmd(a, command="create", path="/memories/kept.md", file_text="kept\n")
    _cmd(a, command="create", path="/memories/later.md", file_text="later secret\n")
    gone = shred_file(a, "/memories/secret.md", actor="dpo", reason="erasure")
    gone_ids = {bytes.fromhex(v.dek_id) for v in gone.versions}
    compact_remote(a, grace=0)
    packs = [k for k in _keys(s3_env, "r") if k.endswith(".pack")]
    assert len(packs) == 1
    blobs = [d for t, _s, _e, d in pack_entries(_get(s3_env, "r", packs[0])) if t == 3 and d[:4] == b"MVB1"]
    assert len(blobs) == 2  # kept.md and later.md
    assert not {blob[44:60] for blob in blobs} & gone_ids
    bundle = _get(s3_env, "r", "deks/upto-00000000000000000004")
    assert all(dek_id not in bundle for dek_id in gone_ids)
    # A redaction after the checkpoint takes its key out of the bundle.
    later = shred_file(a, "/memories/later.md", actor="dpo", reason="erasure")
    later_ids = {bytes.fromhex(v.dek_id) for v in later.versions}
    assert later_ids and all(dek_id in bundle for dek_id in later_ids)
    rewritten = _get(s3_env, "r", "deks/upto-00000000000000000004")
    assert all(dek_id not in rewritten for dek_id in later_ids)
    b = open_as_host(url, tmp_path / "b")
    assert "kept" in _cmd(b, command="view", path="/memories/kept.md")
    with pytest.raises(PathNotFoundError):
        _cmd(b, command="view", path="/memories/later.md")
    a.close()
    b.close()


def test_hosts_without_a_redacted_versions_ciphertext_verify_clean_after_gc_dropped_it(s3_env, tmp_path: Path) -> None:
    """A host that never fetched a redacted version's content blob before gc left it out of the
    merged pack (a new host, one behind) finds it absent: that is no problem, while the live
    versions are still read and authenticated."""
    from memvault.erasure.redact import shred_file
    from memvault.verify import verify

    url = s3_env.url("v")
    a = create_as_host(url, tmp_path / "a")
    behind = open_as_host(url, tmp_path / "behind")  # its last pull: before the secret
    _cmd(a, command="create", path="/memories/kept.md", file_text="kept\n")
    _cmd(a, command="create", path="/memories/secret.md", file_text="the secret\n")
    secret = a.snapshot().get("/memories/secret.md")
    assert secret is not None
    shred_file(a, "/memories/secret.md", actor="dpo", reason="erasure")
    _cmd(a, command="create", path="/memories/more.md", file_text="more\n")
    compact_remote(a, grace=0)
    assert verify(a).problems == []  # the compacting host still holds the ciphertext
    fresh = open_as_host(url, tmp_path / "fresh")
    for host in (fresh, behind):
        assert "more.md" in _cmd(host, command="view", path="/memories")  # a pull: up to the head
        report = verify(host)
        assert not host.git.contains(secret.blob_id)  # gc dropped it: this host never had it
        assert report.problems == [], [(p.code, p.message) for p in report.problems]
        assert report.ok and report.commits == 5 and report.versions == 2  # kept.md and more.md
        host.close()
    a.close()


def test_gc_help_names_the_grace_option_and_variable(capsys) -> None:
    assert main(["gc", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--grace" in out and "MEMVAULT_GC_GRACE" in out


def test_gc_cli_compacts_and_verify_remote_says_what_gc_would_delete(s3_env, tmp_path: Path, monkeypatch) -> None:
    url = s3_env.url("cli")
    cache = cache_dir_for(url, tmp_path / "caches")
    store = create_as_host(url, cache)
    _files(store, 3)
    store.close()
    deks = len([k for k in _keys(s3_env, "cli") if k.startswith("deks/")])
    assert deks >= 3  # one per file version at least
    monkeypatch.setenv("MEMVAULT_GC_GRACE", "3600")
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "gc", "--json")
    assert status == 0, err
    remote = json.loads(out)["remote"]
    assert remote["checkpoint"] == 3 and remote["deleted"] == {}
    assert remote["waiting"] == {"superseded": 4 + deks, "orphan": 8}  # records and deks, packs and indexes
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "status", "--json")
    assert status == 0, err
    superseded = json.loads(out)["remote"]["superseded"]
    assert superseded["objects"] == 4  # the log records 0..3, from the listing alone
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "status")
    assert "Superseded:" in out and "4 objects" in out
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "verify", "--remote", "--json")
    assert status == 0, err
    found = json.loads(out)
    assert found["orphans"] == 0, found["list"]  # the checkpoint names its pack; the bundle is no orphan
    assert found["gc"] == {"now": {}, "after_grace": {"superseded": 4 + deks, "orphan": 8}}
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "verify", "--remote")
    assert f"memvault gc would delete 0 object(s) now (none) and {12 + deks} once its grace period has passed" in out
    # The option wins over the variable: everything superseded goes now.
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "gc", "--grace", "0", "--json")
    assert status == 0, err
    assert json.loads(out)["remote"]["deleted"] == {"superseded": 4 + deks, "orphan": 8}
    assert [k for k in _keys(s3_env, "cli") if k.startswith("log/")] == ["log/00000000000000000003.ckpt"]


def test_a_host_whose_cache_evicted_packs_fetches_them_from_the_checkpoints_pack(
    s3_env, tmp_path: Path, monkeypatch
) -> None:
    url = s3_env.url("ev")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 3)
    monkeypatch.setenv("MEMVAULT_CACHE_BYTES", "0")  # b keeps no pack: every read fetches one
    b = open_as_host(url, tmp_path / "b")
    assert "f number 0" in _cmd(b, command="view", path="/memories/f0.md")
    compact_remote(a, grace=0)  # the packs b's map names are deleted
    assert b.remote is not None
    with b.writing():
        assert b.remote.evict() > 0  # nothing of the store is in b's cache now
    fetched = b.remote.stats["fetched"]
    assert "f number 2" in _cmd(b, command="view", path="/memories/f2.md")
    assert b.remote.stats["fetched"] > fetched
    merged = [k for k in _keys(s3_env, "ev") if k.endswith(".pack")]
    assert len(merged) == 1
    assert (tmp_path / "b" / "repo" / "objects" / "pack" / merged[0].removeprefix("packs/")).exists()
    a.close()
    b.close()


def test_an_orphan_is_deleted_only_once_the_grace_period_has_passed_since_gc_first_saw_it(
    s3_env, tmp_path: Path
) -> None:
    url = s3_env.url("or")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 1)
    stray = "packs/pack-" + "ab" * 20 + ".pack"  # an upload whose commit is not made yet, as gc sees it
    _put(s3_env, "or", stray, b"PACK in flight")
    assert a.remote is not None
    t0 = time.time()
    with a.writing():
        a.pull()
        first = compact(a.remote, grace=600, clock=lambda: t0)
    assert stray not in first.keys and stray in _keys(s3_env, "or")
    assert json.loads(_get(s3_env, "or", "gc-lease"))["orphans"][stray] == t0
    with a.writing():  # 599 s later: still kept
        compact(a.remote, grace=600, clock=lambda: t0 + 599)
    assert stray in _keys(s3_env, "or")
    with a.writing():
        later = compact(a.remote, grace=600, clock=lambda: t0 + 600)
    assert stray in later.keys and stray not in _keys(s3_env, "or")
    a.close()


def test_a_writer_whose_uploads_outlast_the_commit_window_uploads_again(s3_env, tmp_path: Path, monkeypatch) -> None:
    import memvault.remote.replica as replica_module

    url = s3_env.url("win")
    a = create_as_host(url, tmp_path / "a")
    assert a.remote is not None
    monkeypatch.setattr(replica_module, "COMMIT_WINDOW", 0.2)
    create = a.remote.objects.create
    packs: list[str] = []

    def slow_first_pack(key: str, data: bytes) -> str | None:
        if key.endswith(".pack"):
            packs.append(key)
            if len(packs) == 1:
                time.sleep(0.3)  # a host paused between its upload and its log record
        return create(key, data)

    a.remote.objects.create = slow_first_pack  # type: ignore[method-assign]
    _cmd(a, command="create", path="/memories/w.md", file_text="window\n")
    assert len(packs) == 2 and packs[0] != packs[1]  # the command ran again with a fresh upload
    b = open_as_host(url, tmp_path / "b")
    assert "window" in _cmd(b, command="view", path="/memories/w.md")
    records = [k for k in _keys(s3_env, "win") if k.startswith("log/")]
    assert records == ["log/00000000000000000000", "log/00000000000000000001"]  # one commit only
    a.close()
    b.close()


def test_gc_publishes_nothing_when_a_record_differs_from_what_its_host_took_in(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("x")
    a = create_as_host(url, tmp_path / "a")
    _files(a, 3)
    # A writer of the bucket swaps record 1 for a copy of record 0 (a valid record of commit #0).
    _put(s3_env, "x", "log/00000000000000000001", _get(s3_env, "x", "log/00000000000000000000"))
    before = _keys(s3_env, "x")
    with pytest.raises(IntegrityError, match="does not match this host's keyring"):
        compact_remote(a, grace=0)
    after = _keys(s3_env, "x")
    assert not [k for k in after if k.endswith(".ckpt") or "/upto-" in k]
    assert set(before) <= set(after)  # nothing deleted
    a.close()


def test_gc_keeps_the_data_key_object_of_a_key_its_host_lacks(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("lk")
    a = create_as_host(url, tmp_path / "a")
    _cmd(a, command="create", path="/memories/k.md", file_text="keep my key\n")
    deks = [k for k in _keys(s3_env, "lk") if k.startswith("deks/")]
    assert deks
    saved = {k: _get(s3_env, "lk", k) for k in deks}
    for k in deks:  # a's pull cannot fetch them: they are lost to a ...
        _delete(s3_env, "lk", k)
    with pytest.raises(IntegrityError, match="lacks the data key objects"):
        open_as_host(url, tmp_path / "b")
    b = open_as_host(url, tmp_path / "b")  # the records are in; the key is noted as lost
    for k, v in saved.items():  # ... then the bucket holds them again, but b's keyring does not yet
        _put(s3_env, "lk", k, v)
    assert b.remote is not None
    with b.writing():
        compact(b.remote, grace=0)
    assert set(deks) <= set(_keys(s3_env, "lk"))  # not in b's bundle: kept
    c = open_as_host(url, tmp_path / "c")
    assert "keep my key" in _cmd(c, command="view", path="/memories/k.md")
    a.close()
    b.close()
    c.close()
