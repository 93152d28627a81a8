"""The host's anchor of a store directory: an older copy of the whole store put back (repository
and keyring together, which the keyring's own high-water mark cannot see) is detected on a host
that saw the newer state, reported by verify, and accepted only on purpose."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, make_store
from memvault.errors import IntegrityError, RollbackDetectedError, StorageError
from memvault.protocol.commands import run_command
from memvault.verify import verify

SECRET = "Patient Jane Roe, MRN 4417-22, allergic to penicillin"
PATH = "/memories/clinic/roe_jane.md"


def _open(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE)


def _cmd(store: memvault.MemoryStore, **command: object) -> str:
    return str(run_command(store, command, actor="tester", session="s"))


def _put_back(copy: Path, store_path: Path) -> None:
    """What a writer of the store's directory (no key) or a restore from a backup does: the whole
    store replaced by an older copy of it."""
    shutil.rmtree(store_path)
    shutil.copytree(copy, store_path)


@pytest.fixture
def redacted(tmp_path: Path, store_path: Path) -> Path:
    """A store whose secret was redacted, and (returned) a copy of it from before the redaction."""
    from memvault.erasure.redact import shred_file

    store = make_store(store_path)
    _cmd(store, command="create", path=PATH, file_text=SECRET + "\n")
    copy = tmp_path / "backup"
    shutil.copytree(store_path, copy)
    shred_file(store, PATH, actor="dpo", reason="erasure request")
    store.close()
    return copy


def test_a_whole_store_put_back_from_before_a_redaction_is_detected(redacted: Path, store_path: Path) -> None:
    _put_back(redacted, store_path)
    try:
        store = _open(store_path)
    except RollbackDetectedError as err:
        assert "this host saw commit #2" in str(err) and "memvault anchor reset" in str(err)
    else:
        shown = _cmd(store, command="view", path=PATH)
        store.close()
        pytest.fail(f"the older copy was accepted; the redacted text reads again: {SECRET in shown}")


def test_a_running_process_notices_the_store_put_back(redacted: Path, store_path: Path) -> None:
    store = _open(store_path)
    _put_back(redacted, store_path)
    with pytest.raises(RollbackDetectedError):
        _cmd(store, command="view", path=PATH)
    with pytest.raises(RollbackDetectedError):
        _cmd(store, command="create", path="/memories/new.md", file_text="new\n")
    store.close()


def test_a_running_process_notices_a_keyring_put_back_in_place(redacted: Path, store_path: Path) -> None:
    """The older copy's keyring written over the file in place (or a new file given the number of
    the one just deleted, as file systems do): the same inode, fewer bytes. A running process
    reads it again from the start and sees the store went back."""
    store = _open(store_path)
    keyring = store_path / "keyring"
    older = (redacted / "keyring").read_bytes()
    inode = keyring.stat().st_ino
    shutil.rmtree(store_path / "repo")
    shutil.copytree(redacted / "repo", store_path / "repo")
    with open(keyring, "r+b") as f:
        f.write(older)
        f.truncate()
    assert keyring.stat().st_ino == inode
    with pytest.raises(RollbackDetectedError):
        _cmd(store, command="view", path=PATH)
    store.close()


def test_verify_reports_the_store_put_back(redacted: Path, store_path: Path) -> None:
    _put_back(redacted, store_path)
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, check_head=False) as store:
        report = verify(store)
    assert [p.code for p in report.errors] == ["rollback"]
    assert "this host saw commit #2" in report.errors[0].message


def test_a_store_put_back_that_went_on_past_the_anchor_is_a_fork(
    redacted: Path, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The older copy put back, then moved past the anchor's sequence number where this host's
    anchor did not see it (another host, or host state off): still not the history this host saw."""
    _put_back(redacted, store_path)
    with monkeypatch.context() as m:
        m.setenv("MEMVAULT_ANCHOR_DIR", "off")
        with _open(store_path) as elsewhere:
            for i in range(3):
                _cmd(elsewhere, command="create", path=f"/memories/{i}.md", file_text=f"{i}\n")
    with pytest.raises(RollbackDetectedError, match="Fork detected"):
        _open(store_path)


def test_an_operator_accepts_a_restored_backup_on_purpose(redacted: Path, store_path: Path) -> None:
    _put_back(redacted, store_path)
    env = {**os.environ, "MEMVAULT_PASSPHRASE": PASSPHRASE}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memvault.cli", "--store", str(store_path), *args],
                              capture_output=True, text=True, env=env, timeout=120)  # fmt: skip

    refused = cli("ls", "/memories")
    assert refused.returncode == 3 and "memvault anchor reset" in refused.stderr
    assert json.loads(cli("--json", "anchor", "show").stdout)["seen_seq"] == 2
    assert cli("anchor", "reset").returncode == 2  # no terminal and no --yes: nothing changed
    assert cli("ls", "/memories").returncode == 3
    reset = cli("--json", "anchor", "reset", "--yes")
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout)["forgotten_seq"] == 2
    with _open(store_path) as store:  # accepted: the store as it was, and anchored from now on
        assert SECRET in _cmd(store, command="view", path=PATH)
        _cmd(store, command="create", path="/memories/after.md", file_text="after\n")
    assert json.loads(cli("--json", "anchor", "show").stdout)["seen_seq"] == 2


def test_a_copy_elsewhere_is_a_store_of_its_own_for_the_anchor(tmp_path: Path, store_path: Path) -> None:
    from memvault.transfer import copy_store

    store = make_store(store_path)
    _cmd(store, command="create", path="/memories/a.md", file_text="a\n")
    store.close()
    assert copy_store(store_path, tmp_path / "copy", passphrase=PASSPHRASE).report.ok
    with _open(store_path) as source:
        _cmd(source, command="create", path="/memories/b.md", file_text="b\n")
    with _open(tmp_path / "copy") as copy:  # behind the source, and that is no rollback
        assert copy.head[1] == 1
        _cmd(copy, command="create", path="/memories/c.md", file_text="c\n")
    with _open(store_path) as source:
        assert source.head[1] == 2


def test_host_state_off_turns_the_anchor_off(redacted: Path, store_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", "off")
    _put_back(redacted, store_path)
    with _open(store_path) as store:  # documented: nothing outside the store remembers
        assert store.anchor is None
        assert SECRET in _cmd(store, command="view", path=PATH)


def test_the_anchor_is_authenticated(tmp_path: Path, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An anchor not written with this store's key (forged, or another store's) is refused."""
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", str(tmp_path / "state"))
    store = make_store(store_path)
    _cmd(store, command="create", path="/memories/a.md", file_text="a\n")
    assert store.anchor is not None
    anchor = store.anchor.path
    store.close()
    data = bytearray(anchor.read_bytes())
    assert len(data) == 69 and data[:8] == b"MVANCHOR"
    data[9 + 7] ^= 1  # the sequence number, its MAC left as it was
    anchor.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="anchor of the store does not verify"):
        _open(store_path)
    other = make_store(tmp_path / "other")
    _cmd(other, command="create", path="/memories/a.md", file_text="a\n")
    assert other.anchor is not None
    anchor.write_bytes(other.anchor.path.read_bytes())
    other.close()
    with pytest.raises(IntegrityError, match="anchor of the store does not verify"):
        _open(store_path)


def test_host_state_others_could_change_is_refused(tmp_path: Path, store_path: Path, monkeypatch) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", str(state))
    make_store(store_path).close()
    os.chmod(state, 0o777)
    with pytest.raises(StorageError, match="not private to this user"):
        _open(store_path)
    os.chmod(state, 0o700)
    os.chmod(tmp_path, 0o777)  # its parent: another user could rename it away
    try:
        with pytest.raises(StorageError, match="not private to this user"):
            _open(store_path)
    finally:
        os.chmod(tmp_path, 0o700)


def test_no_host_state_where_none_can_be_made_leaves_stores_usable(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", str(tmp_path / "a-file" / "state"))
    store = memvault.MemoryStore.create(tmp_path / "store", passphrase=PASSPHRASE, kdf=FAST_KDF)
    assert store.anchor is None
    _cmd(store, command="create", path="/memories/a.md", file_text="a\n")
    store.close()


def test_tests_keep_host_state_out_of_the_home_directory() -> None:
    chosen = Path(os.environ["MEMVAULT_ANCHOR_DIR"])
    assert chosen.is_absolute() and not chosen.is_relative_to(Path.home())


def test_the_anchor_follows_every_commit(store_path: Path) -> None:
    """Each commit moves the anchor at once (not only the next open): putting back the copy from
    just before the last commit is detected too."""
    store = make_store(store_path)
    _cmd(store, command="create", path="/memories/a.md", file_text="a\n")
    copy = store_path.parent / "copy"
    shutil.copytree(store_path, copy)
    _cmd(store, command="str_replace", path="/memories/a.md", old_str="a", new_str="b")
    store.close()
    _put_back(copy, store_path)
    with pytest.raises(RollbackDetectedError, match="saw commit #2"):
        _open(store_path)
