"""History retention (``retain_history_days``, ``memvault expire --history``, ``memvault gc``):
with a clock moved forward, versions that left the head long enough ago become unreadable and
their keys leave the keyring; newer versions and the head stay byte-exact; an interrupted run is
finished by the next."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, keyring_records
from memvault.erasure.retention import apply_retention, expired_versions
from memvault.errors import InvalidInputError, RedactedError
from memvault.history import log, read_at
from memvault.settings import StoreSettings
from memvault.verify import verify

DAY = 86400.0


def _store(path: Path, days: int | None = 30) -> memvault.MemoryStore:
    return memvault.MemoryStore.create(
        path, passphrase=PASSPHRASE, kdf=FAST_KDF, settings=StoreSettings(retain_history_days=days)
    )


def _dek_records(root: Path) -> set[bytes]:
    data = (root / "keyring").read_bytes()
    return {data[s + 3 : s + 19] for rtype, s, _e in keyring_records(data) if rtype == 1}


def test_old_versions_go_new_ones_and_the_head_stay(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    store.put_file("/memories/plan.md", "v1 old secret\n")
    store.put_file("/memories/plan.md", "v2 still recent\n")
    store.put_file("/memories/gone/old.md", "deleted long ago\n")
    with store.reading() as txn:
        dir_dek = txn.get("/memories/gone").dek_id  # type: ignore[union-attr]
    from memvault.protocol.commands import run_command

    run_command(store, {"command": "delete", "path": "/memories/gone"}, actor="t", session="s")
    first, second = [e.commit_id.encode() for e in reversed(log(store)) if e.command == "put"][:2]
    t_last = log(store)[0].time
    # Nothing left the head more than 30 days ago yet.
    assert apply_retention(store, now=t_last + 29 * DAY).dek_ids == ()
    # 31 days on: v1 (replaced), old.md and its directory (deleted) go; v2 and the head stay.
    result = apply_retention(store, now=t_last + 31 * DAY)
    assert len(result.dek_ids) == 3 and result.commit_id is not None
    assert dir_dek.hex() in result.dek_ids
    with pytest.raises(RedactedError):
        read_at(store, "/memories/plan.md", first)
    assert read_at(store, "/memories/plan.md", second) == b"v2 still recent\n"
    assert store.read_node(store.snapshot().get("/memories/plan.md")) == b"v2 still recent\n"  # type: ignore[arg-type]
    present = _dek_records(tmp_path / "s")
    assert not {bytes.fromhex(d) for d in result.dek_ids} & present
    assert log(store)[0].command == "redact"
    report = verify(store)
    assert report.ok, report.problems
    # A second run finds nothing more.
    assert apply_retention(store, now=t_last + 31 * DAY).dek_ids == ()
    store.close()


def test_zero_days_keeps_nothing_but_the_head(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", days=0)
    for i in range(4):
        store.put_file("/memories/n.md", f"version {i}\n")
    result = apply_retention(store, now=time.time() + 1)
    assert len(result.dek_ids) == 3
    assert store.read_node(store.snapshot().get("/memories/n.md")) == b"version 3\n"  # type: ignore[arg-type]
    store.close()


def test_an_interrupted_run_is_finished_by_the_next(tmp_path: Path, monkeypatch) -> None:
    store = _store(tmp_path / "s", days=1)
    store.put_file("/memories/a.md", "a1\n")
    store.put_file("/memories/a.md", "a2\n")
    store.put_file("/memories/b.md", "b1\n")
    store.put_file("/memories/b.md", "b2\n")
    now = time.time() + 2 * DAY
    wanted = expired_versions(store, now - DAY)
    assert len(wanted) == 2

    # The run dies after its commit, before the keyring purge: the keys are destroyed (chained)
    # but their records are still in the file.
    def die() -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(store.keyring, "purge", die)
    with pytest.raises(KeyboardInterrupt):
        apply_retention(store, now=now)
    monkeypatch.undo()
    assert wanted <= _dek_records(tmp_path / "s")  # records still there
    again = apply_retention(store, now=now)  # nothing left to choose: the keys are destroyed
    assert again.dek_ids == ()
    store.maintain()  # the purge the interrupted run did not make
    assert not wanted & _dek_records(tmp_path / "s")
    assert sorted(store.snapshot().child_names("/memories")) == ["a.md", "b.md"]
    assert verify(store).ok
    store.close()


def test_settings_and_cli(tmp_path: Path, monkeypatch, capsys) -> None:
    from memvault.cli import main

    with pytest.raises(InvalidInputError, match="no retention period"):
        apply_retention(_store(tmp_path / "none", days=None))
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "a long cli passphrase")
    store = str(tmp_path / "cli")
    assert main(["--store", store, "init", "--retain-history-days", "0"]) == 0
    with memvault.MemoryStore.open(store, passphrase="a long cli passphrase") as s:
        assert s.settings.retain_history_days == 0
        s.put_file("/memories/x.md", "1\n")
        s.put_file("/memories/x.md", "2\n")
    capsys.readouterr()
    assert main(["--store", store, "expire", "--history", "--dry-run", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["versions"] == 1 and out["dry_run"] and out["commit"] is None
    assert main(["--store", store, "gc", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shredded_versions"] == 1
    assert main(["--store", store, "expire", "--history", "--older-than", "1d", "--unused-for", "1d"]) == 2


def test_expire_history_without_a_retention_period_names_older_than(tmp_path: Path, monkeypatch, capsys) -> None:
    from memvault.cli import main

    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "a long cli passphrase")
    store = str(tmp_path / "cli")
    assert main(["--store", store, "init"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "expire", "--history", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        "memvault: The store sets no retention period (retain_history_days): give one with --older-than DURATION "
        "(--older-than 90d), or set the store's: memvault config set retain_history_days 90.\n"
    )
    assert main(["--store", store, "expire", "--history", "--older-than", "90d", "--dry-run"]) == 0
