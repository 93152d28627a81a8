"""Dreams and remote compaction in a store in object storage need format version 4: a release that
knows only older versions refuses such a store ("Unsupported memory store format") instead of
taking the records of a dream in the log for junk or finding no log in a compacted store. A
version 3 store refuses a dream and a remote gc until ``memvault upgrade``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memvault
import memvault.store.memorystore as store_mod
import memvault.store.opening as opening_mod
from conftest import FAST_KDF, PASSPHRASE
from memvault.admin.remote_gc import compact_remote
from memvault.errors import ConflictError, IntegrityError, InvalidInputError
from s3support import S3Env, as_host

NAME = "dream/00112233aabbccdd"


def _version_3_store(url: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> memvault.MemoryStore:
    """A new store at ``url`` in format version 3, as the release before made them."""
    with as_host(cache), monkeypatch.context() as m:
        m.setattr(store_mod, "FORMAT_VERSION", 3)
        m.setattr(opening_mod, "FORMAT_VERSION", 3)
        return memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=cache)


def test_a_version_3_store_refuses_a_dream_until_it_is_upgraded(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cache = s3_env.url("gate"), tmp_path / "host-a"
    store = _version_3_store(url, cache, monkeypatch)
    assert store.format_version == 3
    store.put_file("/memories/a.md", "one\n")
    with pytest.raises(InvalidInputError, match="need format version 4.*memvault upgrade"):
        store.branch(NAME)
    assert store.upgrade_format() == (3, 6)
    branch = store.branch(NAME)
    branch.create(actor="dream")
    assert store.branches() == [NAME]
    store.close()
    with as_host(tmp_path / "host-b"):  # a new host reads the upgraded configuration from the bucket
        other = memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=tmp_path / "host-b")
    assert other.format_version == 6
    assert other.branches() == [NAME]
    other.close()


def test_a_release_that_knows_only_version_3_refuses_a_store_that_may_log_dreams(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = s3_env.url("old")
    with as_host(tmp_path / "host-a"):
        memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=tmp_path / "host-a").close()
    monkeypatch.setattr("memvault.store.config.READABLE_VERSIONS", (1, 2, 3))  # as the release before
    with as_host(tmp_path / "host-b"), pytest.raises(IntegrityError, match="Unsupported memory store format"):
        memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=tmp_path / "host-b")


def test_an_upgrade_whose_bucket_configuration_changed_meanwhile_changes_nothing(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cache = s3_env.url("race"), tmp_path / "host-a"
    store = _version_3_store(url, cache, monkeypatch)
    key = "race/memvault.json"
    before = s3_env.client.get_object(Bucket=s3_env.bucket, Key=key)["Body"].read()
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=key, Body=before + b" ")  # another writer, meanwhile
    with pytest.raises(ConflictError, match="changed meanwhile"):
        store.upgrade_format()
    assert store.format_version == 3
    assert s3_env.client.get_object(Bucket=s3_env.bucket, Key=key)["Body"].read() == before + b" "
    assert json.loads((cache / "memvault.json").read_bytes())["version"] == 3  # the replica's copy too
    store.close()


def test_a_version_3_store_refuses_a_remote_gc_until_it_is_upgraded(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cache = s3_env.url("gc3"), tmp_path / "host-a"
    store = _version_3_store(url, cache, monkeypatch)
    store.put_file("/memories/a.md", "one\n")
    log_before = sorted(k for k in s3_env.keys() if k.startswith("gc3/log/"))
    with pytest.raises(InvalidInputError, match="needs format version 4.*memvault upgrade"):
        compact_remote(store, grace=0)
    assert sorted(k for k in s3_env.keys() if k.startswith("gc3/log/")) == log_before  # no checkpoint
    store.upgrade_format()
    compact_remote(store, grace=0)
    assert any(k.endswith(".ckpt") for k in s3_env.keys() if k.startswith("gc3/log/"))
    store.close()
