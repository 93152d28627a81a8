"""What a store's prefix in S3 holds (moto's server on loopback): ``memvault status`` counts its
objects and bytes by kind and the replica's bytes; ``memvault verify --remote`` lists the objects
no commit needs (a lost race's pack, a destroyed or unknown key's data key object) and deletes
nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import memvault
from conftest import FAST_KDF, PASSPHRASE
from memvault.protocol.commands import run_command
from memvault.remote.replica import cache_dir_for
from s3support import cli_as_host, create_as_host, open_as_host


def _cmd(store: memvault.MemoryStore, **command: object) -> str:
    return str(run_command(store, command, actor="tester", session="s"))


def _bucket(s3_env, prefix: str) -> dict[str, int]:
    """Every object under ``prefix/`` and its size, straight from moto (key relative to the prefix)."""
    pages = s3_env.client.get_paginator("list_objects_v2").paginate(Bucket=s3_env.bucket, Prefix=prefix + "/")
    return {item["Key"][len(prefix) + 1 :]: item["Size"] for page in pages for item in page.get("Contents", [])}


# -- status --------------------------------------------------------------------------------------------


def test_status_counts_the_objects_under_the_prefix_by_kind_and_the_replica(
    s3_env, tmp_path: Path, monkeypatch
) -> None:
    url = s3_env.url("st")
    cache = cache_dir_for(url, tmp_path / "caches")
    store = create_as_host(url, cache)
    _cmd(store, command="create", path="/memories/a.md", file_text="alpha\n")
    _cmd(store, command="create", path="/memories/notes/b.md", file_text="beta\n" * 500)
    _cmd(store, command="delete", path="/memories/a.md")
    store.close()
    s3_env.client.put_object(Bucket=s3_env.bucket, Key="st/stray.txt", Body=b"not memvault's")
    s3_env.client.put_object(Bucket=s3_env.bucket, Key="elsewhere/x", Body=b"another prefix")  # not counted
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "status", "--json")
    assert status == 0, err
    remote = json.loads(out)["remote"]
    objects = _bucket(s3_env, "st")
    expected: dict[str, dict[str, int]] = {k: {"objects": 0, "bytes": 0} for k in ("packs", "log", "deks", "other")}
    for key, size in objects.items():
        top = key.split("/", 1)[0]
        kind = expected[top if top in ("packs", "log", "deks") else "other"]
        kind["objects"] += 1
        kind["bytes"] += size
    # init and three commands: four log records, four packs with their indexes; memvault.json, one
    # key slot and the stray object are "other".
    assert expected["log"]["objects"] == 4 and expected["packs"]["objects"] == 8
    assert expected["other"]["objects"] == 3 and expected["deks"]["objects"] >= 3
    assert remote["bucket"] == {
        "objects": len(objects),
        "bytes": sum(objects.values()),
        "kinds": expected,
    }
    assert remote["history_bytes"] == sum(s for k, s in objects.items() if k.endswith(".pack"))
    on_disk = 0
    for top, _dirs, files in os.walk(cache):
        on_disk += sum(os.lstat(os.path.join(top, name)).st_size for name in files)
    assert remote["replica_bytes"] == on_disk > remote["cache_bytes"] > 0
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "status")
    assert status == 0, err
    lines = {line.split(":", 1)[0]: line for line in out.splitlines()}
    assert f": {len(objects)} objects, " in lines["Objects"]
    assert "packs and indexes 8 (" in lines["By kind"] and ", log 4 (" in lines["By kind"]
    assert ", other 3 (" in lines["By kind"]


# -- verify --remote -------------------------------------------------------------------------------------


def test_a_lost_race_leaves_an_orphan_pack_that_verify_remote_lists(s3_env, tmp_path: Path, monkeypatch) -> None:
    url = s3_env.url("race")
    cache = cache_dir_for(url, tmp_path / "caches")
    a = create_as_host(url, cache)
    _cmd(a, command="create", path="/memories/x.md", file_text="x\n")
    b = open_as_host(url, tmp_path / "b")
    replica = a.remote
    assert replica is not None
    pull, create = replica.pull, replica.objects.create
    created: list[str] = []

    def pull_then_b_commits(**options: bool) -> int:
        n = pull(**options)
        if options.get("courtesy") and not created:  # a's pull before its commit
            _cmd(b, command="create", path="/memories/b.md", file_text="b won\n")
        return n

    def recording_create(key: str, data: bytes) -> str | None:
        created.append(key)
        return create(key, data)

    replica.pull = pull_then_b_commits  # type: ignore[method-assign]
    replica.objects.create = recording_create  # type: ignore[method-assign]
    _cmd(a, command="create", path="/memories/a.md", file_text="a, run again\n")
    replica.pull, replica.objects.create = pull, create  # type: ignore[method-assign]
    assert replica.stats["races_lost"] == 1
    packs = [key for key in created if key.endswith(".pack")]
    assert len(packs) == 2  # the lost attempt's, then the one committed
    lost = {packs[0], packs[0][: -len(".pack")] + ".idx"}
    a.close()  # its background deletions (its lost attempt's data keys) finish
    b.close()
    before = _bucket(s3_env, "race")
    assert lost <= set(before) and packs[1] in before

    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "verify", "--remote", "--json")
    assert status == 0, err
    report = json.loads(out)
    assert {(o["key"], o["kind"], o["reason"], o["bytes"]) for o in report["list"]} == {
        (key, "packs", "unreferenced", before[key]) for key in lost
    }
    assert report["orphans"] == 2 and report["bytes"] == sum(before[key] for key in lost)
    assert report["kinds"] == {"packs": {"objects": 2, "bytes": report["bytes"]}, "deks": {"objects": 0, "bytes": 0}}
    assert report["listed"] == len(before) and report["log_records"] == 4  # init, x, b, a
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "verify", "--remote")
    assert status == 0, err
    lines = out.splitlines()
    assert sorted(line.split("  ")[1] for line in lines[:-2]) == sorted(lost)
    assert all("no committed log record names it" in line for line in lines[:-2])
    assert lines[-2].startswith("2 orphaned objects, ") and lines[-2].endswith("nothing was deleted")
    # The orphans are younger than gc's grace period (default: an hour): it would delete them later.
    assert (
        lines[-1] == "memvault gc would delete 0 object(s) now (none) and 2 once its grace period has passed (orphan 2)"
    )
    assert _bucket(s3_env, "race") == before  # nothing deleted


def test_verify_remote_lists_a_redacted_versions_data_key_object_and_an_unknown_one(
    s3_env, tmp_path: Path, monkeypatch
) -> None:
    from memvault.erasure.redact import shred_file

    url = s3_env.url("red")
    cache = cache_dir_for(url, tmp_path / "caches")
    a = create_as_host(url, cache)
    _cmd(a, command="create", path="/memories/secret.md", file_text="the secret\n")
    _cmd(a, command="create", path="/memories/keep.md", file_text="kept\n")
    kept = {key: s3_env.client.get_object(Bucket=s3_env.bucket, Key=f"red/{key}")["Body"].read()
            for key in _bucket(s3_env, "red") if key.startswith("deks/")}  # fmt: skip
    result = shred_file(a, "/memories/secret.md", actor="dpo", reason="erasure")
    destroyed = {f"deks/{v.dek_id}" for v in result.versions}
    assert destroyed and destroyed <= set(kept) and not destroyed & set(_bucket(s3_env, "red"))
    # The objects come back, as they would from a bucket's old versions or a deletion that failed.
    for key in destroyed:
        s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"red/{key}", Body=kept[key])
    unknown = "deks/" + "ab" * 16  # a data key no commit wrapped
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"red/{unknown}", Body=b"\x01" * 80)
    a.close()
    before = _bucket(s3_env, "red")

    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "verify", "--remote", "--json")
    assert status == 0, err
    listed = {(o["key"], o["kind"], o["reason"], o["bytes"]) for o in json.loads(out)["list"]}
    assert listed == {(key, "deks", "destroyed", before[key]) for key in destroyed} | {(unknown, "deks", "unknown", 80)}
    status, out, err = cli_as_host(monkeypatch, cache, "--store", url, "verify", "--remote")
    assert status == 0, err
    for key in destroyed:
        assert any(line.startswith(f"orphan  {key}  ") and "redaction destroyed" in line for line in out.splitlines())
    assert _bucket(s3_env, "red") == before  # nothing deleted


def test_verify_remote_is_a_usage_error_for_a_store_directory(tmp_path: Path, monkeypatch) -> None:
    memvault.MemoryStore.create(tmp_path / "store", passphrase=PASSPHRASE, kdf=FAST_KDF).close()
    status, out, err = cli_as_host(monkeypatch, tmp_path / "caches" / "x", "--store", str(tmp_path / "store"), "verify",
                            "--remote")  # fmt: skip
    assert status == 2 and out == ""
    assert "--remote" in err and "object storage" in err
