"""Master-key rotation: future data keys and every existing one are wrapped under the new
epoch; history still reads and verifies; the old master key no longer unwraps anything on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, make_store
from memvault import history
from memvault.admin import keys as keymgmt
from memvault.cli import main
from memvault.errors import IntegrityError, InvalidInputError, WrongKeyError
from memvault.verify import verify


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_rotate_rewraps_every_data_key_and_keeps_history(store_path: Path) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/d/a.md", "file_text": "before\n"})
    tool.call({"command": "str_replace", "path": "/memories/d/a.md", "old_str": "before", "new_str": "edited"})
    old_master = store.master_keys()[1]
    objects_before = sorted(p.name for p in (store_path / "repo" / "objects").rglob("*") if p.is_file())
    result = keymgmt.rotate(store, passphrase=PASSPHRASE)
    assert result.epoch == 2
    assert result.rewrapped == 3  # directory /memories/d, a.md v1, a.md v2
    # One commit records the rotation (the new epoch, in the keyring's MAC chain); nothing else moves.
    assert history.log(store, limit=1)[0].command == "key-rotate" and store.head[1] == 3
    after = sorted(p.name for p in (store_path / "repo" / "objects").rglob("*") if p.is_file())
    assert set(objects_before) <= set(after) and len(after) == len(objects_before) + 2  # one pack, its index
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "after\n"})
    reopened = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    assert history.read_at(reopened, "/memories/d/a.md", "#1") == b"before\n"
    assert history.read_at(reopened, "/memories/d/a.md") == b"edited\n"
    assert history.read_at(reopened, "/memories/b.md") == b"after\n"
    assert verify(memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, check_head=False)).ok
    # Every data-key record on disk now names epoch 2.
    data = (store_path / "keyring").read_bytes()
    pos, epochs = 21, []
    while pos < len(data):
        rtype, length = data[pos], int.from_bytes(data[pos + 1 : pos + 3], "big")
        if rtype == 1:
            epochs.append(int.from_bytes(data[pos + 3 + 16 : pos + 3 + 20], "big"))
        pos += 3 + length
    assert epochs and set(epochs) == {2}
    assert old_master not in _all_bytes(store_path)
    assert reopened.master_keys()[2] != old_master


def test_rotate_needs_the_opening_secret_and_explicit_drop_of_other_slots(store_path: Path, tmp_path: Path) -> None:
    store = make_store(store_path)
    with pytest.raises(WrongKeyError):
        keymgmt.rotate(store, passphrase="not the passphrase")
    keymgmt.add_slot(store, passphrase="second passphrase", kdf=FAST_KDF)
    with pytest.raises(InvalidInputError) as info:
        keymgmt.rotate(store, passphrase=PASSPHRASE)
    assert "1 other key slot(s)" in str(info.value)
    assert len(keymgmt.list_slots(store)) == 2  # nothing changed
    result = keymgmt.rotate(store, passphrase=PASSPHRASE, drop_other_slots=True)
    assert len(result.removed_slots) == 2
    assert [s.slot_id for s in keymgmt.list_slots(store)] == [result.slot.slot_id]
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(store_path, passphrase="second passphrase")


def test_a_store_opened_before_the_rotation_must_reopen(store_path: Path) -> None:
    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    stale = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    keymgmt.rotate(store, passphrase=PASSPHRASE)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/b.md", "file_text": "b"})
    with pytest.raises(IntegrityError) as info:
        history.read_at(stale, "/memories/b.md")
    assert "open it again" in str(info.value)


def test_cli_key_rotate(store_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    make_store(store_path).close()
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(store_path))
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    assert main(["key", "rotate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epoch"] == 2 and out["slot"]["in_use"] is True
    assert os.listdir(store_path / "keys") == [out["slot"]["slot_id"] + ".json"]
    assert main(["key", "rotate"]) == 0
    assert capsys.readouterr().out.startswith("Rotated the master key to epoch 3: ")


def test_a_handle_opened_before_a_rotation_cannot_write_under_the_retired_key(store_path: Path) -> None:
    """A long-running agent beside an operator who rotates: its next command must not wrap a new
    data key under the retired master key (which would read content written after the rotation).
    It fails cleanly, nothing written; once opened again it writes under the new epoch. A record
    under a retired epoch (as the agent used to write) is reported by verify."""
    from memvault.errors import KeyRotatedError

    store = make_store(store_path)
    store.put_file("/memories/a.md", "before\n")
    agent = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    agent_tool = memvault.MemoryTool(agent, actor="agent")
    assert "created" in agent_tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
    keymgmt.rotate(store, passphrase=PASSPHRASE, kdf=FAST_KDF)
    head = store.head
    keyring_before = (store_path / "keyring").read_bytes()
    with pytest.raises(KeyRotatedError):
        agent.put_file("/memories/c.md", "after the rotation\n")
    with pytest.raises(Exception, match="rotated"):
        agent_tool.call({"command": "create", "path": "/memories/c.md", "file_text": "after\n"})
    assert store.head == head and (store_path / "keyring").read_bytes() == keyring_before
    agent.close()
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE) as again:
        again.put_file("/memories/c.md", "after the rotation\n")
        assert again.keyring.newest_epoch == 2
        assert verify(again).ok
        # What an unaware writer used to leave: a data key wrapped under epoch 1 after the rotation
        # (this handle holds every epoch's key, as the rotated slot does).
        again.keyring.append(again.keyring.dek_record(os.urandom(16), os.urandom(32), 1), durable=False)
        report = verify(again)
    assert "stale-epoch-key" in {p.code for p in report.problems} and not report.ok


def test_a_keyring_from_before_a_rotation_cannot_be_put_back(store_path: Path) -> None:
    """The rotation is recorded in the keyring's MAC chain with a commit: a keyless writer who puts
    back the keyring from before it (every data key wrapped under the retired master key) is
    detected, on open and by verify, instead of making the retired key read the store again."""
    store = make_store(store_path)
    store.put_file("/memories/a.md", "a\n")
    saved = (store_path / "keyring").read_bytes()
    keymgmt.rotate(store, passphrase=PASSPHRASE, kdf=FAST_KDF)
    assert store.keyring.announced_epoch == 2
    store.close()
    (store_path / "keyring").write_bytes(saved)
    with pytest.raises(IntegrityError, match="older than its history"):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, check_head=False) as checker:
        assert "rollback" in {p.code for p in verify(checker).errors}


def test_a_rotation_reaches_older_handles_even_before_any_file_exists(store_path: Path) -> None:
    """With no data key in the keyring yet, only the rotation's own record tells an older handle
    that its master key was retired."""
    from memvault.errors import KeyRotatedError

    store = make_store(store_path)
    agent = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    keymgmt.rotate(store, passphrase=PASSPHRASE, kdf=FAST_KDF)
    with pytest.raises(KeyRotatedError):
        agent.put_file("/memories/first.md", "written under which key?\n")
    agent.close()
    store.put_file("/memories/first.md", "under the new key\n")
    assert store.keyring.newest_epoch == 2


def test_a_forged_data_key_record_of_an_unknown_epoch_does_not_block_writes(store_path: Path) -> None:
    """Version 3 trusts only the authenticated EPOCH records to tell a rotation: one forged DEK
    record naming a huge epoch (a keyless writer can append it) does not stop every write; verify
    reports it."""
    import struct

    store = make_store(store_path)
    store.put_file("/memories/a.md", "a\n")
    body = os.urandom(16) + struct.pack(">I", 0xFFFFFFFF) + os.urandom(60)
    with open(store_path / "keyring", "ab") as f:
        f.write(bytes([1]) + struct.pack(">H", len(body)) + body)
    store.put_file("/memories/b.md", "still writes\n")
    assert "bad-key" in {p.code for p in verify(store).errors}
