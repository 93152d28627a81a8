"""Expiry: reads are recorded without commits, stale files go in one attributed, undoable commit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault import history
from memvault.cli import main
from memvault.edits import undo
from memvault.erasure import expiry
from memvault.errors import IntegrityError, InvalidInputError
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.store import atimes as access
from memvault.verify import verify

DAY = 86400.0


def _store(tmp_path: Path) -> memvault.MemoryStore:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    for name in ("old.md", "read.md", "fresh.md"):
        store.put_file(f"/memories/{name}", f"{name}\n")
    return store


def _commits(store: memvault.MemoryStore) -> int:
    return store.head[1]


def _token(store: memvault.MemoryStore, path: str) -> bytes:
    node = store.snapshot().get(parse_path(path, store.settings))
    assert node is not None
    return node.token


def test_view_records_a_read_without_a_commit(tmp_path: Path) -> None:
    store = _store(tmp_path)
    tool = memvault.MemoryTool(store)
    seq = _commits(store)
    tool.call({"command": "view", "path": "/memories/read.md"})
    tool.call({"command": "view", "path": "/memories"})  # a directory listing reads no file
    assert _commits(store) == seq
    reads = store.access_times.last_read()
    assert set(reads) == {_token(store, "/memories/read.md")}
    assert abs(reads[_token(store, "/memories/read.md")] - time.time()) < 2 * access.RESOLUTION
    store.close()
    # merged into the sealed file at close: a new session sees it
    again = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert set(again.access_times.last_read()) == {_token(again, "/memories/read.md")}
    raw = (tmp_path / "s" / "access").read_bytes()
    assert b"read.md" not in raw and _token(again, "/memories/read.md") not in raw
    again.close()


def test_expire_deletes_unused_files_in_one_attributed_commit(tmp_path: Path) -> None:
    store = _store(tmp_path)
    written = store.snapshot().get(parse_path("/memories/old.md", store.settings))
    assert written is not None
    t_write = written.mtime
    # read.md was read 10 hours after the writes; fresh.md is rewritten "later" by faking its read
    store.access_times.touch(_token(store, "/memories/read.md"), t_write + 10 * 3600)
    store.access_times.touch(_token(store, "/memories/fresh.md"), t_write + 30 * DAY)
    now = t_write + 100 * DAY
    dry = expiry.expire(store, 95 * DAY, actor="ops", dry_run=True, now=now)  # cutoff: 5 days after the writes
    assert [f.path for f in dry.files] == ["/memories/old.md", "/memories/read.md"]
    assert dry.commit_id is None and dry.dry_run
    seq = _commits(store)
    assert _commits(store) == seq  # the dry run committed nothing
    cutoff_between = expiry.expire(store, (100 * DAY) - 5 * 3600, actor="ops", session="s1", now=now)
    # cutoff 5 h after the writes: read.md (read at +10 h) stays, old.md goes
    assert [f.path for f in cutoff_between.files] == ["/memories/old.md"]
    assert cutoff_between.files[0].last_read is None
    assert _commits(store) == seq + 1
    snap = store.snapshot()
    assert snap.get(parse_path("/memories/old.md", store.settings)) is None
    assert snap.get(parse_path("/memories/read.md", store.settings)) is not None
    info = history.log(store, limit=1)[0]
    assert (info.command, info.actor, info.session) == ("expire", "ops", "s1")
    assert info.paths == ("/memories/old.md",)
    assert cutoff_between.commit_id == info.commit_id and cutoff_between.seq == info.seq
    # recoverable from history
    undo.restore(store, "/memories/old.md", f"#{seq}", actor="ops", session="")
    assert store.snapshot().read(parse_path("/memories/old.md", store.settings)) == b"old.md\n"
    assert verify(store).ok


def test_nothing_stale_makes_no_commit(tmp_path: Path) -> None:
    store = _store(tmp_path)
    seq = _commits(store)
    result = expiry.expire(store, 90 * DAY, actor="ops")
    assert result.files == [] and result.commit_id is None
    assert _commits(store) == seq


def test_damaged_access_file_stops_expire_and_verify_warns(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.access_times.touch(_token(store, "/memories/read.md"))
    assert store.flush_access_times()
    path = tmp_path / "s" / "access"
    raw = path.read_bytes()
    path.write_bytes(raw[:-1] + bytes([raw[-1] ^ 0x40]))
    seq = _commits(store)
    with pytest.raises(IntegrityError):
        expiry.expire(store, 1.0, actor="ops", now=time.time() + 400 * DAY)
    assert _commits(store) == seq
    report = verify(store)
    assert [p.code for p in report.problems] == ["bad-access-times"]
    assert all(p.severity == "warning" for p in report.problems)


def test_a_removed_access_file_stops_expire_instead_of_meaning_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removing ``access`` needs no key. Taken for "never read", it would make expire delete files
    read every day: expire refuses unless told to go on (``--assume-unread``); verify warns."""
    store = _store(tmp_path)
    assert (tmp_path / "s" / "access").exists()  # created with the store
    store.access_times.touch(_token(store, "/memories/read.md"))
    assert store.flush_access_times()
    store.close()
    (tmp_path / "s" / "access").unlink()
    fresh = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    seq = _commits(fresh)
    later = time.time() + 400 * DAY
    with pytest.raises(IntegrityError, match="missing"):
        expiry.expire(fresh, 1.0, actor="ops", now=later)
    with pytest.raises(IntegrityError, match="missing"):
        expiry.expire(fresh, 1.0, actor="ops", now=later, dry_run=True)
    assert _commits(fresh) == seq
    assert [(p.code, p.severity) for p in verify(fresh).problems] == [("bad-access-times", "warning")]
    fresh.close()
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    cli = ["--store", str(tmp_path / "s"), "expire", "--unused-for", "1s", "--dry-run"]
    assert main(cli) == 3
    assert "missing" in capsys.readouterr().err
    assert main([*cli, "--assume-unread"]) == 0
    assert capsys.readouterr().err == ""
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        done = expiry.expire(again, 1.0, actor="ops", now=later, assume_unread=True)
        assert sorted(f.path for f in done.files) == ["/memories/fresh.md", "/memories/old.md", "/memories/read.md"]
        assert _commits(again) == seq + 1


@pytest.mark.parametrize("text", ["", "90", "d", "0d", "-5d", "5y", "1.5d", "9999999999d"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        expiry.parse_duration(text)


def test_durations() -> None:
    assert expiry.parse_duration("90d") == 90 * DAY
    assert expiry.parse_duration("2w") == 14 * DAY
    assert expiry.parse_duration("36h") == 36 * 3600
    assert expiry.parse_duration("15m") == 900
    assert expiry.parse_duration("45s") == 45


def _cli(store_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--store", str(store_dir), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_expire(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    store = _store(tmp_path)
    store.close()
    time.sleep(1.1)
    code, out, err = _cli(tmp_path / "s", capsys, "expire", "--unused-for", "1s", "--dry-run", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] and doc["commit"] is None
    assert sorted(f["path"] for f in doc["files"]) == ["/memories/fresh.md", "/memories/old.md", "/memories/read.md"]
    code, out, err = _cli(tmp_path / "s", capsys, "expire", "--unused-for", "1s", "--actor", "janitor")
    assert code == 0, err
    assert out.startswith("Expired 3 files unused since ")
    assert "/memories/old.md" in out and "never read" in out
    code, out, _ = _cli(tmp_path / "s", capsys, "expire", "--unused-for", "90d")
    assert code == 0 and "nothing to expire" in out
    code, _, err = _cli(tmp_path / "s", capsys, "expire", "--unused-for", "ninety days")
    assert code == 2 and "Not a duration" in err
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        assert history.log(again, limit=1)[0].actor == "janitor"
        assert again.snapshot().child_names(parse_path("/memories", again.settings)) == []


def test_closing_a_store_object_that_missed_new_files_keeps_their_read_times(tmp_path: Path) -> None:
    """close() prunes read times of files that are gone, judged on the head under the lock, not
    on what this store object last saw: a file another store object created (and read) since
    keeps its read time."""
    store = _store(tmp_path)
    stale = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    memvault.MemoryTool(stale).call({"command": "view", "path": "/memories/read.md"})  # stale's state: 3 files
    old_token = _token(store, "/memories/old.md")
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/new.md", "file_text": "new\n"})
    memvault.MemoryTool(store).call({"command": "view", "path": "/memories/new.md"})
    memvault.MemoryTool(store).call({"command": "delete", "path": "/memories/old.md"})
    store.access_times.touch(_token(store, "/memories/fresh.md"))
    stale.access_times.touch(old_token)  # read before it was deleted elsewhere
    store.close()
    stale.close()
    again = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    reads = again.access_times.last_read()
    assert set(reads) == {_token(again, p) for p in ("/memories/read.md", "/memories/new.md", "/memories/fresh.md")}
    assert old_token not in reads
    again.close()


def test_a_transient_fault_reading_the_access_file_loses_no_read_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMFILE/EIO while reading the access-time file is a StorageError, not damage: the merge
    keeps this session's reads pending instead of replacing the file (and every other session's
    read times), and succeeds once the fault is gone."""
    import errno
    import os

    from memvault.errors import StorageError

    store = _store(tmp_path)
    tool = memvault.MemoryTool(store)
    tool.call({"command": "view", "path": "/memories/read.md"})
    assert store.flush_access_times()
    tool.call({"command": "view", "path": "/memories/fresh.md"})
    real = access.read_bounded

    def emfile(path: object, limit: int) -> bytes:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(access, "read_bounded", emfile)
    with pytest.raises(StorageError):
        store.access_times.last_read()
    assert "bad-access-times" in {p.code for p in verify(store).problems}
    assert not store.flush_access_times()  # reads stay pending
    monkeypatch.setattr(access, "read_bounded", real)
    assert set(memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE).access_times.last_read()) == {
        _token(store, "/memories/read.md")
    }
    assert store.flush_access_times()
    store.close()
    again = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert set(again.access_times.last_read()) == {
        _token(again, p) for p in ("/memories/read.md", "/memories/fresh.md")
    }
    again.close()


def test_an_older_access_file_put_back_stops_expire(tmp_path: Path) -> None:
    """The keyring names each access-time file (format version 3): putting back an older copy,
    which drops the reads recorded since, is refused like a missing file; verify warns."""
    store = _store(tmp_path)
    path = tmp_path / "s" / "access"
    older = path.read_bytes()
    store.access_times.touch(_token(store, "/memories/read.md"))
    assert store.flush_access_times()
    later = time.time() + 400 * DAY
    assert expiry.expire(store, 1.0, actor="ops", now=later, dry_run=True).files  # the current file is accepted
    path.write_bytes(older)
    with pytest.raises(IntegrityError, match="not the one the keyring recorded last"):
        expiry.expire(store, 1.0, actor="ops", now=later, dry_run=True)
    assert [(p.code, p.severity) for p in verify(store).problems] == [("bad-access-times", "warning")]
    assert expiry.expire(store, 1.0, actor="ops", now=later, dry_run=True, assume_unread=True).files
