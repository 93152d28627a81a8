"""What a host keeps about a store in object storage lives where no writer of the bucket (nor of
a cache others can write) reaches it: a bucket that names another store is refused instead of
making the host forget its high-water mark and read times; a replica in a directory another user
could change is refused; a deleted cache loses nothing the host must remember."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE
from memvault.errors import IntegrityError, MemvaultError, RollbackDetectedError, StorageError, StoreExistsError
from memvault.protocol.commands import run_command
from memvault.store import memorystore, transaction

SECRET_TEXT = "Patient Jane Roe, MRN 4417-22, allergic to penicillin"
SECRET_PATH = "/memories/clinic/roe_jane.md"


def _create(url: str, cache: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=cache)


def _open(url: str, cache: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache)


def _cmd(store: memvault.MemoryStore, **command: object) -> str:
    return str(run_command(store, command, actor="tester", session="s"))


def _put(s3_env, key: str, data: bytes) -> None:
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=key, Body=data)


def _get(s3_env, key: str) -> bytes:
    return bytes(s3_env.client.get_object(Bucket=s3_env.bucket, Key=key)["Body"].read())


def _other_config(s3_env, tmp_path: Path) -> tuple[bytes, bytes]:
    """``(memvault.json, store id)`` of another store, made in the same bucket under ``other``."""
    other = _create(s3_env.url("other"), tmp_path / "other-cache")
    store_id = other.store_id
    other.close()
    return _get(s3_env, "other/memvault.json"), store_id


# -- finding: a bucket writer makes a host forget its high-water mark ---------------------------------


def test_another_store_id_in_the_bucket_is_refused_and_an_older_copy_stays_detected(s3_env, tmp_path: Path) -> None:
    """The attack: memvault.json naming another store made the host delete its replica, mark and
    read times included; an older copy of the prefix put back afterwards brought a redacted
    version back. Now the other id is refused (both ids named, the accepting command named,
    nothing touched), and the older copy is still a rollback."""
    from memvault.erasure.redact import shred_file

    url = s3_env.url("t")
    host = _create(url, tmp_path / "a")
    _cmd(host, command="create", path=SECRET_PATH, file_text=SECRET_TEXT + "\n")
    before_redaction = s3_env.copy_prefix("t")
    shred_file(host, SECRET_PATH, actor="dpo", reason="erasure request")
    real_id = host.store_id
    host.close()
    replica = sorted(p.name for p in (tmp_path / "a").iterdir())

    forged_config, forged_id = _other_config(s3_env, tmp_path)
    _put(s3_env, "t/memvault.json", forged_config)
    with pytest.raises(MemvaultError) as info:
        _open(url, tmp_path / "a")
    refused = info.value

    s3_env.put_back_prefix("t", before_redaction)  # the older copy of the whole prefix, put back
    try:
        reopened = _open(url, tmp_path / "a")
    except RollbackDetectedError:
        pass
    else:
        shown = _cmd(reopened, command="view", path=SECRET_PATH)
        reopened.close()
        pytest.fail(f"the older copy was accepted; the redacted text reads again: {SECRET_TEXT in shown}")

    assert isinstance(refused, IntegrityError)
    assert real_id.hex() in str(refused) and forged_id.hex() in str(refused)
    assert f"memvault --store {url} anchor reset" in str(refused)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == replica  # nothing of the replica went


def test_a_substituted_store_is_not_served(s3_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone who may write the bucket and wrap keys for the store's key (here: the same
    passphrase) puts up a whole new store at the prefix: this host refuses it rather than
    serving its contents, until an operator accepts it on purpose."""
    url = s3_env.url("t")
    host = _create(url, tmp_path / "a")
    _cmd(host, command="create", path="/memories/plan.md", file_text="the real plan\n")
    real_id = host.store_id
    host.close()

    for key in [k for k in s3_env.keys() if k.startswith("t/")]:
        s3_env.client.delete_object(Bucket=s3_env.bucket, Key=key)
    with monkeypatch.context() as m:  # the attacker's own machine
        m.setenv("MEMVAULT_ANCHOR_DIR", str(tmp_path / "attacker-state"))
        forged = _create(url, tmp_path / "attacker-cache")
        _cmd(forged, command="create", path="/memories/plan.md", file_text="wire the money to the attacker\n")
        forged_id = forged.store_id
        forged.close()

    with pytest.raises(IntegrityError, match=f"now store {forged_id.hex()}, but this host used store {real_id.hex()}"):
        _open(url, tmp_path / "a")

    # The operator accepts the new store on purpose: this host forgets the old one, then opens it.
    from memvault.store.replicated import forget_at_url

    assert forget_at_url(url, tmp_path / "a", 5.0) == (real_id, forged_id)
    with _open(url, tmp_path / "a") as accepted:
        assert "wire the money to the attacker" in _cmd(accepted, command="view", path="/memories/plan.md")


def test_a_substituted_store_under_the_same_id_is_not_served_after_the_cache_went(
    s3_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same substitution under the real store's id, to a host whose cache was deleted: its
    high-water mark, kept outside the cache, does not verify under the substitute's keys."""
    from memvault import crypto

    url = s3_env.url("t")
    host = _create(url, tmp_path / "a")
    _cmd(host, command="create", path="/memories/plan.md", file_text="the real plan\n")
    real_id = host.store_id
    host.close()
    shutil.rmtree(tmp_path / "a")

    for key in [k for k in s3_env.keys() if k.startswith("t/")]:
        s3_env.client.delete_object(Bucket=s3_env.bucket, Key=key)
    chosen = iter([real_id])
    real_random = crypto.random_bytes
    with monkeypatch.context() as m:  # the attacker's own machine, a store made under the same id
        m.setenv("MEMVAULT_ANCHOR_DIR", str(tmp_path / "attacker-state"))
        m.setattr(memorystore.crypto, "random_bytes", lambda n: next(chosen, None) or real_random(n))
        forged = _create(url, tmp_path / "attacker-cache")
        assert forged.store_id == real_id
        _cmd(forged, command="create", path="/memories/plan.md", file_text="wire the money to the attacker\n")
        forged.close()

    try:
        reopened = _open(url, tmp_path / "a")
    except IntegrityError as err:
        assert "high-water mark" in str(err)
    else:
        shown = _cmd(reopened, command="view", path="/memories/plan.md")
        reopened.close()
        pytest.fail(f"the substitute was served: {'attacker' in shown}")


def test_read_times_survive_a_bucket_that_names_another_store(s3_env, tmp_path: Path, monkeypatch) -> None:
    """The attack on expire: the replica's read times went with the replica, so after the bucket's
    memvault.json was put back, expire took a file read today for unused. Now nothing is removed,
    and expire keeps the file."""
    from memvault.erasure.expiry import expire

    url = s3_env.url("t")
    days = 86400.0
    with monkeypatch.context() as m:  # written five days ago
        m.setattr(transaction, "commit_time", lambda: time.time() - 5 * days)
        host = _create(url, tmp_path / "a")
        _cmd(host, command="create", path="/memories/daily.md", file_text="read every day\n")
    assert "read every day" in _cmd(host, command="view", path="/memories/daily.md")  # read today
    assert host.flush_access_times()
    host.close()

    real_config = _get(s3_env, "t/memvault.json")
    _put(s3_env, "t/memvault.json", _other_config(s3_env, tmp_path)[0])
    with pytest.raises(MemvaultError):
        _open(url, tmp_path / "a")
    _put(s3_env, "t/memvault.json", real_config)

    with _open(url, tmp_path / "a") as host:
        assert list(expire(host, 2 * days, actor="ops", dry_run=True).files) == []  # read today: kept
        later = expire(host, 2 * days, actor="ops", dry_run=True, now=time.time() + 3 * days)
        assert [f.path for f in later.files] == ["/memories/daily.md"]  # (its last write is old)


def test_a_deleted_cache_keeps_the_high_water_mark(s3_env, tmp_path: Path) -> None:
    """The mark lives in the host state, not in the cache: a host whose cache was deleted (or
    renamed away by someone who could write the cache root) still detects an older copy."""
    url = s3_env.url("t")
    host = _create(url, tmp_path / "a")
    _cmd(host, command="create", path=SECRET_PATH, file_text=SECRET_TEXT + "\n")
    old = s3_env.copy_prefix("t")
    _cmd(host, command="delete", path=SECRET_PATH)
    host.close()
    shutil.rmtree(tmp_path / "a")
    s3_env.put_back_prefix("t", old)
    with pytest.raises(RollbackDetectedError):
        _open(url, tmp_path / "a")


def test_a_replica_of_an_older_release_moves_its_mark_and_read_times_into_the_host_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    with monkeypatch.context() as m:  # the layout before the host state: both files in the replica
        m.setenv("MEMVAULT_ANCHOR_DIR", "off")
        host = _create(url, tmp_path / "a")
        _cmd(host, command="create", path="/memories/x.md", file_text="x\n")
        _cmd(host, command="view", path="/memories/x.md")
        host.close()
    mark = (tmp_path / "a" / "remote-mark").read_bytes()
    assert (tmp_path / "a" / "access").exists()
    state = tmp_path / "state"
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", str(state))
    with _open(url, tmp_path / "a") as host:
        assert "x" in _cmd(host, command="view", path="/memories/x.md")
    assert not (tmp_path / "a" / "remote-mark").exists() and not (tmp_path / "a" / "access").exists()
    [entry] = (state / "urls").iterdir()
    assert json.loads((entry / "store").read_text())["store_id"] == host.store_id.hex()
    assert (entry / "access").exists()
    assert json.loads((entry / "remote-mark").read_text())["seq"] >= json.loads(mark)["seq"]


def test_create_keeps_what_this_host_used_at_an_emptied_url(s3_env, tmp_path: Path) -> None:
    """A prefix emptied behind this host's back is not taken for a new one: init refuses and
    removes nothing until an operator resets on purpose."""
    url = s3_env.url("t")
    host = _create(url, tmp_path / "a")
    host.close()
    for key in [k for k in s3_env.keys() if k.startswith("t/")]:
        s3_env.client.delete_object(Bucket=s3_env.bucket, Key=key)
    with pytest.raises(StoreExistsError, match="anchor reset"):
        _create(url, tmp_path / "a")
    assert (tmp_path / "a" / "keyring").exists()
    from memvault.store.replicated import forget_at_url

    forget_at_url(url, tmp_path / "a", 5.0)
    _create(url, tmp_path / "a").close()


def test_shred_store_forgets_the_host_state_of_its_url(tmp_path: Path) -> None:
    from memvault.erasure.destroy import shred_store

    url = f"file://{tmp_path / 'bucket'}"
    host = _create(url, tmp_path / "a")
    _cmd(host, command="create", path="/memories/x.md", file_text="x\n")
    assert host.host is not None and host.host.directory.is_dir()
    where = host.host.directory
    shred_store(host)
    assert not where.exists()
    _create(url, tmp_path / "a").close()  # a new store at the same URL: nothing of the old one refuses it


def test_cli_names_the_accepting_command_and_it_works(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    env = {**os.environ, "MEMVAULT_PASSPHRASE": PASSPHRASE, "MEMVAULT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MEMVAULT_KEY_FILE", None)
    env.pop("MEMVAULT_KEY", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memvault.cli", "--store", url, *args],
                              capture_output=True, text=True, env=env, timeout=120)  # fmt: skip

    assert cli("init").returncode == 0
    real = json.loads((tmp_path / "bucket" / "memvault.json").read_text())["store_id"]
    shutil.rmtree(tmp_path / "bucket")
    assert subprocess.run([sys.executable, "-m", "memvault.cli", "--store", url, "init"], capture_output=True,
                          text=True, env={**env, "MEMVAULT_ANCHOR_DIR": str(tmp_path / "elsewhere"),
                                          "MEMVAULT_CACHE_DIR": str(tmp_path / "other-cache")}).returncode == 0  # fmt: skip
    result = cli("ls", "/memories")
    assert result.returncode == 3, result.stderr
    assert real in result.stderr and f"memvault --store {url} anchor reset" in result.stderr
    assert cli("anchor", "reset").returncode == 2  # no terminal, no --yes: nothing changed
    assert cli("ls", "/memories").returncode == 3
    shown = json.loads(cli("--json", "anchor", "show").stdout)
    assert shown["store_id"] == real
    reset = cli("--json", "anchor", "reset", "--yes")
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout)["forgotten_store_id"] == real
    assert cli("ls", "/memories").returncode == 0


# -- finding: a replica directory is used whoever owns it ----------------------------------------------


@pytest.mark.parametrize("where", ["holder", "replica", "cache-root"])
def test_a_cache_others_could_change_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A cache root others may write (0777 without the sticky bit) let another user rename a
    replica away; a replica others may write let them change it. Each is refused."""
    url = f"file://{tmp_path / 'bucket'}"
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "shared" / "cache"))
    cache_dir = None if where == "cache-root" else tmp_path / "shared" / "replica"
    store = memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=cache_dir)
    store.close()
    target = {
        "holder": tmp_path / "shared",
        "replica": tmp_path / "shared" / "replica",
        "cache-root": tmp_path / "shared" / "cache",
    }[where]
    os.chmod(target, 0o777)
    with pytest.raises(StorageError, match="not private to this user"):
        memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache_dir)
    os.chmod(target, 0o700)
    memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache_dir).close()


def test_a_sticky_shared_holder_is_accepted_and_a_symlinked_replica_is_not(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp: others cannot rename what is ours
    _create(url, shared / "replica").close()
    _open(url, shared / "replica").close()
    (shared / "link").symlink_to(shared / "replica")
    with pytest.raises(StorageError, match="not private to this user"):
        _open(url, shared / "link")


def test_an_older_copy_of_the_same_store_is_accepted_on_purpose_and_its_read_times_kept(s3_env, tmp_path: Path) -> None:
    from memvault.store.replicated import forget_at_url

    url = s3_env.url("t")
    host = _create(url, tmp_path / "a")
    _cmd(host, command="create", path="/memories/a.md", file_text="a\n")
    old = s3_env.copy_prefix("t")
    _cmd(host, command="view", path="/memories/a.md")
    _cmd(host, command="create", path="/memories/b.md", file_text="b\n")
    assert host.host is not None
    access = host.host.access_path
    host.close()
    kept = access.read_bytes()
    s3_env.put_back_prefix("t", old)
    with pytest.raises(RollbackDetectedError):
        _open(url, tmp_path / "a")
    assert forget_at_url(url, tmp_path / "a", 5.0) == (host.store_id, host.store_id)
    assert access.read_bytes() == kept  # the same store: this host's read times stay
    with _open(url, tmp_path / "a") as accepted:
        assert accepted.head[1] == 1
        assert "a" in _cmd(accepted, command="view", path="/memories/a.md")
