"""The settings in force are bound to history (docs/format.md §1.1): an older ``memvault.json`` put
back (its MAC is genuine) no longer turns the scrubber, retention or limits back off. Open refuses
it, ``config set`` will not build on it, ``verify`` reports ``settings-mismatch`` and ``config
repair`` writes the recorded file back; in a store directory and in object storage (moto S3).
Also ``verify``'s ``destroyed-key-at-head``."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import memvault
from conftest import all_store_bytes
from memvault import MemoryStore, MemoryTool, crypto, history
from memvault.cli import main
from memvault.errors import IntegrityError, InvalidInputError, MemvaultError
from memvault.format import records
from memvault.settings import ScrubSettings, StoreSettings
from memvault.store import config as store_config
from memvault.verify import verify

AWS_ID = "AKIAQ7VXK2JD4NRP3W6T"  # fake, of the real shape
NOTE = "/memories/ops.md"
REFUSED = r"settings file memvault\.json.* is not the one its history records.*memvault config repair"
SCRUB_OFF = StoreSettings(scrub=ScrubSettings(enabled=False))


@pytest.fixture
def key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "key"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY", "MEMVAULT_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(path))
    return path


def _open(where: Path | str, key: Path, **kwargs: Any) -> MemoryStore:
    return MemoryStore.open(where, key_file=key, **kwargs)


def _set(where: Path | str, key: Path, updates: dict[str, Any], **kwargs: Any) -> None:
    from memvault.admin.config import change_settings

    with _open(where, key, **kwargs) as store:
        change_settings(store, updates)


def _codes(store: MemoryStore) -> dict[str, str]:
    return {p.code: p.severity for p in verify(store).problems}


def _scrubs_a_secret(store: MemoryStore) -> None:
    """The memory tool's write of a credential is redacted: nothing of it reaches the disk."""
    out = MemoryTool(store).call({"command": "create", "path": NOTE, "file_text": f"aws key {AWS_ID}\n"})
    assert isinstance(out, str) and "sensitive data was removed" in out
    for _name, data in all_store_bytes(store.root):
        assert AWS_ID.encode() not in data


# -- a store directory ---------------------------------------------------------------------------


def test_an_older_settings_file_put_back_is_refused_until_repaired(tmp_path: Path, key: Path) -> None:
    """The attack: the store was made with the scrubber off (the first settings, bound by ``init``),
    an operator turned it on; someone puts the first memvault.json back (its MAC is genuine)."""
    root = tmp_path / "s"
    MemoryStore.create(root, key_file=key, settings=SCRUB_OFF).close()
    first = (root / "memvault.json").read_bytes()
    _set(root, key, {"scrub.enabled": True})
    current = (root / "memvault.json").read_bytes()
    (root / "memvault.json").write_bytes(first)

    with pytest.raises(IntegrityError, match=REFUSED):  # before: it opened, and secrets went in clear
        _open(root, key)
    with _open(root, key, check_head=False) as store:
        assert _codes(store)["settings-mismatch"] == "error"
        from memvault.admin.config import change_settings, repair_settings

        with pytest.raises(IntegrityError, match=REFUSED):  # a change would make the old file current
            change_settings(store, {"max_files": 50})
        assert (root / "memvault.json").read_bytes() == first
        result = repair_settings(store)
    assert [(c.key, c.old, c.new) for c in result.changes] == [("scrub.enabled", False, True)]
    assert result.seq == 1 and result.version is None  # the config commit's settings
    assert (root / "memvault.json").read_bytes() == current
    with _open(root, key) as store:
        assert store.settings.scrub.enabled
        assert "settings-mismatch" not in _codes(store)
        _scrubs_a_secret(store)


def test_a_replayed_limit_or_retention_is_refused_too(tmp_path: Path, key: Path) -> None:
    root = tmp_path / "s"
    MemoryStore.create(root, key_file=key).close()
    _set(root, key, {"max_file_bytes": 4096})
    small = (root / "memvault.json").read_bytes()
    _set(root, key, {"retain_history_days": 30})
    retained = (root / "memvault.json").read_bytes()
    _set(root, key, {"max_file_bytes": 100_000})  # a later change: the older files are all stale
    for stale in (small, retained):
        (root / "memvault.json").write_bytes(stale)
        with pytest.raises(IntegrityError, match=REFUSED):
            _open(root, key)


def test_settings_set_back_to_an_earlier_value_open_with_either_file(tmp_path: Path, key: Path) -> None:
    """The digest is of the settings, not of the file's place: equal settings are the same file."""
    root = tmp_path / "s"
    MemoryStore.create(root, key_file=key).close()
    first = (root / "memvault.json").read_bytes()
    _set(root, key, {"max_files": 10})
    _set(root, key, {"max_files": 100_000})
    assert (root / "memvault.json").read_bytes() == first
    _open(root, key).close()


def test_every_commit_carries_the_settings_in_force(tmp_path: Path, key: Path) -> None:
    """A writer opened before a settings change commits after it: its commit keeps the new settings
    in force (it carries its parent's record on, not the settings it opened with)."""
    root = tmp_path / "s"
    MemoryStore.create(root, key_file=key).close()
    with _open(root, key) as early:
        _set(root, key, {"max_files": 10})
        early.put_file("/memories/a.md", "one\n")
        metas = [early.commit_meta(c.commit_id.encode()) for c in history.log(early)]
    assert [m.command for m in metas] == ["put", "config", "init"]
    assert metas[0].settings_digest == metas[1].settings_digest != metas[2].settings_digest
    assert metas[0].settings_file is None and metas[1].settings_file is not None
    assert metas[1].settings_file["settings"]["max_files"] == 10
    with _open(root, key) as store:
        assert store.settings.max_files == 10
        digest = store_config.read_config(root).settings_digest
        assert metas[0].settings_digest == digest
        canonical = json.dumps(json.loads((root / "memvault.json").read_text())["settings"], sort_keys=True,
                               separators=(",", ":"))  # fmt: skip
        assert digest == crypto.sha256(b"memvault/v1/settings" + canonical.encode())  # docs/format.md §1.1


def test_an_open_waits_for_a_settings_change_in_progress(tmp_path: Path, key: Path) -> None:
    """memvault.json and the config commit are two writes under the writer lock: an open that reads
    between them waits for the lock and reads again, rather than reporting a mismatch."""
    from memvault.admin.config import change_settings

    root = tmp_path / "s"
    MemoryStore.create(root, key_file=key).close()
    changer = _open(root, key)
    between, go_on = threading.Event(), threading.Event()
    transact = changer.transact

    def slow(*args: Any, **kwargs: Any) -> Any:
        between.set()  # the new memvault.json is written, its commit is not
        go_on.wait(10)
        return transact(*args, **kwargs)

    changer.transact = slow  # type: ignore[method-assign]
    worker = threading.Thread(target=change_settings, args=(changer, {"max_files": 10}))
    worker.start()
    try:
        assert between.wait(10)
        assert json.loads((root / "memvault.json").read_text())["settings"]["max_files"] == 10
        threading.Timer(0.3, go_on.set).start()
        with _open(root, key) as store:
            assert store.settings.max_files == 10
    finally:
        go_on.set()
        worker.join()
        changer.close()


def test_a_settings_change_stopped_between_its_writes_is_repaired(
    tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed after writing memvault.json and before its commit leaves settings no commit
    records: the store refuses them (they were never in force), `config repair` puts the old back."""
    root = tmp_path / "s"
    MemoryStore.create(root, key_file=key).close()
    before = (root / "memvault.json").read_bytes()
    with _open(root, key) as store:
        config = store_config.read_config(root)
        store_config.write_config(root, store.store_id, SCRUB_OFF, config.version,
                                  store_config.config_key(store.master_keys(), store.store_id), durable=True)  # fmt: skip
    monkeypatch.setenv("MEMVAULT_STORE", str(root))
    capsys.readouterr()
    assert main(["config", "get", "scrub.enabled"]) == 3
    out, err = capsys.readouterr()
    assert out == "" and "memvault.json is not the one its history records" in err and "config repair" in err
    assert main(["verify", "--json"]) == 3
    problems = json.loads(capsys.readouterr().out)["problems"]
    (problem,) = [p for p in problems if p["code"] == "settings-mismatch"]
    assert (problem["severity"], problem["seq"]) == ("error", 0)  # the init commit set the settings in force
    assert main(["config", "repair"]) == 0
    assert capsys.readouterr().out == (
        f"scrub.enabled: false -> true\nWrote back the settings of commit {problem['commit'][:10]} (#0).\n"
    )
    assert (root / "memvault.json").read_bytes() == before
    assert main(["config", "repair", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"changes": [], "version": None, "commit": None, "seq": None}
    assert main(["config", "set", "scrub.enabled", "false"]) == 0  # the change, made whole this time
    assert main(["config", "get", "scrub.enabled"]) == 0 and capsys.readouterr().out.endswith("false\n")


# -- stores from before the record ---------------------------------------------------------------


@contextmanager
def _old_release() -> Iterator[None]:
    """Commits written as a release from before the settings record writes them (no ``settings``
    and ``settings_file`` keys in the metadata)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(records.CommitMeta, "record_json", records.CommitMeta.to_json)
        yield


def test_a_store_whose_history_records_no_settings_opens_and_config_set_records_them(tmp_path: Path, key: Path) -> None:
    root = tmp_path / "s"
    with _old_release():
        with MemoryStore.create(root, key_file=key, settings=SCRUB_OFF) as store:
            store.put_file("/memories/a.md", "one\n")
        first = (root / "memvault.json").read_bytes()
        _set(root, key, {"scrub.enabled": True})
    with _open(root, key) as store:
        assert store.commit_meta(store.head[0]).settings_digest == b""
        assert verify(store).ok
    (root / "memvault.json").write_bytes(first)
    _open(root, key).close()  # nothing records which settings are in force: any authentic file opens
    with _open(root, key, check_head=False) as store:
        from memvault.admin.config import repair_settings

        with pytest.raises(InvalidInputError, match="records no settings yet.*memvault upgrade"):
            repair_settings(store)
    _set(root, key, {"scrub.enabled": True})  # this release: the config commit records them
    (root / "memvault.json").write_bytes(first)
    with pytest.raises(IntegrityError, match=REFUSED):
        _open(root, key)


def test_upgrade_records_the_settings_of_a_store_from_before_the_record(
    tmp_path: Path, key: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s"
    with _old_release():
        MemoryStore.create(root, key_file=key, settings=SCRUB_OFF).close()
        first = (root / "memvault.json").read_bytes()
        _set(root, key, {"scrub.enabled": True})
    current = (root / "memvault.json").read_bytes()
    monkeypatch.setenv("MEMVAULT_STORE", str(root))
    capsys.readouterr()
    assert main(["upgrade", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"old_version": 6, "version": 6, "changed": True, "commit": True}
    with _open(root, key) as store:
        meta = store.commit_meta(store.head[0])
        assert (meta.command, meta.settings_file) == (
            "upgrade",
            {"version": 6, "settings": json.loads(current)["settings"]},
        )
    assert main(["upgrade"]) == 0
    assert "already at format version 6" in capsys.readouterr().out
    (root / "memvault.json").write_bytes(first)
    with pytest.raises(IntegrityError, match=REFUSED):
        _open(root, key)


# -- object storage ------------------------------------------------------------------------------


def _bucket_file(s3: Any, prefix: str) -> bytes:
    data: bytes = s3.client.get_object(Bucket=s3.bucket, Key=f"{prefix}/memvault.json")["Body"].read()
    return data


def test_an_older_settings_file_put_back_in_the_bucket_is_refused_on_every_host(
    s3_env: Any, tmp_path: Path, key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_config, "SETTLE_SECONDS", 0.5, raising=False)
    url = s3_env.url("store")
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    MemoryStore.create(url, key_file=key, settings=SCRUB_OFF, cache_dir=host_a).close()
    first = _bucket_file(s3_env, "store")
    _set(url, key, {"scrub.enabled": True}, cache_dir=host_a)
    current = _bucket_file(s3_env, "store")
    s3_env.client.put_object(Bucket=s3_env.bucket, Key="store/memvault.json", Body=first)

    for host in (host_a, host_b):  # one that saw the change, and a new one that pulls the whole log
        with pytest.raises(IntegrityError, match=r"settings file memvault\.json in object storage .*config repair"):
            _open(url, key, cache_dir=host)
    with _open(url, key, cache_dir=host_b, check_head=False) as store:
        assert _codes(store)["settings-mismatch"] == "error"
        from memvault.admin.config import repair_settings

        result = repair_settings(store)
    assert [(c.key, c.old, c.new) for c in result.changes] == [("scrub.enabled", False, True)]
    assert _bucket_file(s3_env, "store") == current
    with _open(url, key, cache_dir=host_a) as store:
        assert store.settings.scrub.enabled
        out = MemoryTool(store).call({"command": "create", "path": NOTE, "file_text": f"aws key {AWS_ID}\n"})
        assert isinstance(out, str) and "sensitive data was removed" in out
    assert not any(AWS_ID.encode() in s3_env.client.get_object(Bucket=s3_env.bucket, Key=k)["Body"].read()
                   for k in s3_env.keys())  # fmt: skip


def test_a_host_opens_with_the_settings_another_host_changed(
    s3_env: Any, tmp_path: Path, key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bucket's memvault.json is fetched and the newest config commit pulled at every open."""
    url = s3_env.url("store")
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    MemoryStore.create(url, key_file=key, cache_dir=host_a).close()
    _open(url, key, cache_dir=host_b).close()
    _set(url, key, {"max_files": 10}, cache_dir=host_a)
    monkeypatch.setattr(store_config, "SETTLE_SECONDS", 0.0, raising=False)  # no wait: it agrees at the first try
    with _open(url, key, cache_dir=host_b) as store:
        assert store.settings.max_files == 10


def test_an_open_waits_for_another_hosts_settings_change_in_progress(s3_env: Any, tmp_path: Path, key: Path) -> None:
    from memvault.admin.config import change_settings

    url = s3_env.url("store")
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    MemoryStore.create(url, key_file=key, cache_dir=host_a).close()
    changer = _open(url, key, cache_dir=host_a)
    between, go_on = threading.Event(), threading.Event()
    transact = changer.transact

    def slow(*args: Any, **kwargs: Any) -> Any:
        between.set()  # the bucket holds the new memvault.json, the log not its commit yet
        go_on.wait(10)
        return transact(*args, **kwargs)

    changer.transact = slow  # type: ignore[method-assign]
    worker = threading.Thread(target=change_settings, args=(changer, {"max_files": 10}))
    worker.start()
    try:
        assert between.wait(10)
        assert json.loads(_bucket_file(s3_env, "store"))["settings"]["max_files"] == 10
        threading.Timer(0.4, go_on.set).start()
        with _open(url, key, cache_dir=host_b) as store:
            assert store.settings.max_files == 10
    finally:
        go_on.set()
        worker.join()
        changer.close()


# -- verify: a head that refers to a destroyed key ------------------------------------------------


def test_verify_reports_a_head_that_refers_to_a_destroyed_key(tmp_path: Path, key: Path) -> None:
    """Redaction deletes a version from the head before destroying its key; a head that still holds
    one is refused as soon as that version's shard is needed (a read of it, a listing), and verify
    says why (before: no problem at all, or only a warning)."""
    root = tmp_path / "s"
    with MemoryStore.create(root, key_file=key) as store:
        store.put_file("/memories/a.md", "one\n")
        store.put_file("/memories/b.md", "two\n")
        store.put_file("/memories/a.md", "one, edited\n")  # the version at the head; #1 names the path
        with store.reading() as view:
            node = view.get("/memories/a.md")
        assert node is not None
        store.keyring.destroy({node.dek_id}, {"actor": "x", "reason": "test", "time": 1.0}, durable=True)
    with _open(root, key) as store:
        with pytest.raises(IntegrityError, match="destroyed data key"):
            store.read_text("/memories/a.md")
        with pytest.raises(IntegrityError, match="destroyed data key"):
            store.list()
    with _open(root, key, check_head=False) as store:
        report = verify(store)
        head = store.git.head()
    assert not report.ok
    (problem,) = [p for p in report.problems if p.code == "destroyed-key-at-head"]
    assert (problem.severity, problem.commit, problem.seq) == ("error", head.decode() if head else None, 3)
    assert node.dek_id.hex() in problem.message and "/memories/a.md" in problem.message


# -- the record's decoder ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"settings": "AAAA"},  # not 32 bytes
        {"settings": "not base64!"},
        {"settings": 7},
        {"settings_file": {"version": True, "settings": {}}},
        {"settings_file": {"version": 3}},
        {"settings_file": {"version": 3, "settings": []}},
        {"settings_file": {"version": 3, "settings": {}, "more": 1}},
        {"settings_file": "{}"},
    ],
)
def test_a_malformed_settings_record_is_refused(fields: dict[str, Any]) -> None:
    key, store_id = os.urandom(32), os.urandom(16)
    body = {"actor": "a", "command": "config", "findings": {}, "paths": [], "seq": 1, "session": "", "time": 1.0}
    sealed = crypto.seal(key, crypto.pad(json.dumps({**body, **fields}).encode()), b"memvault/v1/meta" + store_id)
    with pytest.raises(IntegrityError):
        records.open_meta(key, store_id, sealed)
    good = {"settings": crypto.b64encode(bytes(32)), "settings_file": {"version": 3, "settings": {"max_files": 1}}}
    sealed = crypto.seal(key, crypto.pad(json.dumps({**body, **good}).encode()), b"memvault/v1/meta" + store_id)
    meta = records.open_meta(key, store_id, sealed)
    assert (meta.settings_digest, meta.settings_file) == (bytes(32), good["settings_file"])


def test_memvault_errors_name_no_host_path(tmp_path: Path, key: Path) -> None:
    root = tmp_path / "s"
    MemoryStore.create(root, key_file=key).close()
    first = (root / "memvault.json").read_bytes()
    _set(root, key, {"max_files": 10})
    (root / "memvault.json").write_bytes(first)
    with pytest.raises(MemvaultError) as err:
        _open(root, key)
    assert str(tmp_path) not in str(err.value)
    assert memvault.errors.SettingsMismatchError is type(err.value)
