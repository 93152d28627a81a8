"""Key slots: change the passphrase, add and remove slots, without rewriting any blob or keyring
record; the CLI `memvault passwd` and `memvault key list|add|remove`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, make_store
from memvault.admin.keys import add_slot, change_passphrase, list_slots, remove_slot
from memvault.cli import main
from memvault.errors import InvalidInputError, KeyUnavailableError, PathNotFoundError, WrongKeyError

NEW = "a brand new passphrase"


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``repo/objects`` plus the keyring, by relative path."""
    out = {str(p.relative_to(root)): p.read_bytes() for p in (root / "repo" / "objects").rglob("*") if p.is_file()}
    out["keyring"] = (root / "keyring").read_bytes()
    return out


def _slot_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "keys").iterdir())


@pytest.fixture
def filled(store: memvault.MemoryStore) -> memvault.MemoryStore:
    tool = memvault.MemoryTool(store, actor="agent", session="s-1")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"})
    tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "beta"})
    store.put_file("/memories/img.bin", b"\x00\x01binary")
    return store


@pytest.fixture
def key_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "k.key"
    assert main(["keygen", str(path)]) == 0
    capsys.readouterr()
    return path


def test_change_passphrase_rewrites_only_the_slot(filled: memvault.MemoryStore, store_path: Path) -> None:
    before = _files(store_path)
    assert len(before) >= 4 * 2 + 1  # four commits' packs and indexes, and the keyring
    assert sum(name.endswith(".pack") for name in before) >= 4
    head = filled.head
    (old_slot,) = list_slots(filled)
    assert old_slot.in_use and old_slot.kind == "passphrase"

    new = change_passphrase(filled, NEW, kdf=FAST_KDF)
    assert new.kind == "passphrase" and new.kdf == FAST_KDF.model_dump() and new.slot_id != old_slot.slot_id
    assert _files(store_path) == before  # same objects (same ids, same bytes), same keyring
    assert _slot_files(store_path) == [f"{new.slot_id}.json"]  # the old slot file is gone

    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    reopened = memvault.MemoryStore.open(store_path, passphrase=NEW)
    assert reopened.head == head
    assert memvault.MemoryTool(reopened).call({"command": "view", "path": "/memories/a.md"}).endswith("beta")
    assert [(s.slot_id, s.in_use) for s in list_slots(reopened)] == [(new.slot_id, True)]
    # Writing with the new passphrase keeps working, and verify passes.
    reopened.put_file("/memories/b.md", "after the change")
    from memvault.verify import verify

    assert verify(memvault.MemoryStore.open(store_path, passphrase=NEW, check_head=False)).ok


def test_change_passphrase_twice_on_one_store_object(store: memvault.MemoryStore) -> None:
    new = change_passphrase(store, NEW, kdf=FAST_KDF)
    assert [(s.slot_id, s.in_use) for s in list_slots(store)] == [(new.slot_id, True)]
    change_passphrase(store, "and another one", kdf=FAST_KDF)


def test_change_passphrase_needs_a_passphrase_slot(
    filled: memvault.MemoryStore, store_path: Path, key_file: Path
) -> None:
    add_slot(filled, key_file=key_file)
    by_key = memvault.MemoryStore.open(store_path, key_file=key_file)
    before = _slot_files(store_path)
    with pytest.raises(InvalidInputError, match="not opened with a passphrase"):
        change_passphrase(by_key, NEW, kdf=FAST_KDF)
    assert _slot_files(store_path) == before


def test_add_and_remove_slots(filled: memvault.MemoryStore, store_path: Path, key_file: Path) -> None:
    before = _files(store_path)
    (first,) = list_slots(filled)
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(store_path, key_file=key_file)

    added = add_slot(filled, key_file=key_file)
    assert (added.kind, added.kdf, added.in_use) == ("keyfile", None, False)
    assert _slot_files(store_path) == sorted([f"{first.slot_id}.json", f"{added.slot_id}.json"])
    assert _files(store_path) == before
    by_key = memvault.MemoryStore.open(store_path, key_file=key_file)
    assert by_key.head == filled.head
    assert memvault.MemoryTool(by_key).call({"command": "view", "path": "/memories/a.md"}).endswith("beta")
    # list_slots marks the slot each store object was opened with.
    assert {s.slot_id: s.in_use for s in list_slots(filled)} == {first.slot_id: True, added.slot_id: False}
    assert {s.slot_id: s.in_use for s in list_slots(by_key)} == {first.slot_id: False, added.slot_id: True}
    assert {s.slot_id: s.kind for s in list_slots(by_key)} == {first.slot_id: "passphrase", added.slot_id: "keyfile"}

    pw2 = add_slot(filled, passphrase="second passphrase", kdf=FAST_KDF)
    assert memvault.MemoryStore.open(store_path, passphrase="second passphrase").head == filled.head
    assert memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE).head == filled.head
    with pytest.raises(InvalidInputError):
        add_slot(filled, passphrase="x y z w", key_file=key_file)
    with pytest.raises(KeyUnavailableError):
        add_slot(filled)
    assert len(list_slots(filled)) == 3

    # Errors: an unknown slot id; nothing is removed.
    with pytest.raises(PathNotFoundError, match="no key slot"):
        remove_slot(filled, "0" * 32)
    with pytest.raises(PathNotFoundError):
        remove_slot(filled, "not-hex")
    assert len(_slot_files(store_path)) == 3

    remove_slot(filled, added.slot_id.upper())  # ids are case-insensitive
    assert f"{added.slot_id}.json" not in _slot_files(store_path)
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(store_path, key_file=key_file)
    remove_slot(filled, first.slot_id)  # even the slot in use, while another remains
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    assert _slot_files(store_path) == [f"{pw2.slot_id}.json"]

    # The last slot can never be removed.
    with pytest.raises(InvalidInputError, match="only key slot"):
        remove_slot(filled, pw2.slot_id)
    assert _slot_files(store_path) == [f"{pw2.slot_id}.json"]
    assert _files(store_path) == before
    assert memvault.MemoryStore.open(store_path, passphrase="second passphrase").head == filled.head


# -- CLI -------------------------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, store_path: Path) -> Path:
    make_store(store_path).put_file("/memories/a.md", "alpha")
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.delenv("MEMVAULT_NEW_PASSPHRASE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(store_path))
    monkeypatch.setattr("memvault.keys.slots.DEFAULT_KDF", FAST_KDF)  # cheap Argon2id for new slots
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    return store_path


def _slots(path: Path, **creds: str) -> dict[str, str]:
    store = memvault.MemoryStore.open(path, **creds)  # type: ignore[arg-type]
    return {s.slot_id: s.kind for s in list_slots(store)}


def test_cli_passwd(cli: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    before = _files(cli)
    (old_id,) = _slots(cli, passphrase=PASSPHRASE)
    assert main(["passwd"]) == 12  # no new passphrase and no terminal
    assert capsys.readouterr().err == (
        "memvault: No new passphrase: set MEMVAULT_NEW_PASSPHRASE or run on a terminal.\n"
    )
    assert list(_slots(cli, passphrase=PASSPHRASE)) == [old_id]

    monkeypatch.setenv("MEMVAULT_NEW_PASSPHRASE", NEW)
    assert main(["passwd"]) == 0
    out = capsys.readouterr().out
    (new_id,) = _slots(cli, passphrase=NEW)
    assert new_id != old_id
    assert out == (f"Passphrase changed (new key slot {new_id}); the old passphrase no longer opens this store.\n")
    assert _files(cli) == before
    assert main(["log"]) == 12  # MEMVAULT_PASSPHRASE is still the old one
    assert capsys.readouterr().err == "memvault: The passphrase or key does not unlock this memory store.\n"

    monkeypatch.setenv("MEMVAULT_PASSPHRASE", NEW)
    monkeypatch.setenv("MEMVAULT_NEW_PASSPHRASE", "third passphrase")
    assert main(["passwd", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (third_id,) = _slots(cli, passphrase="third passphrase")
    assert out["slot"].pop("created") > 0
    assert out == {
        "slot": {
            "slot_id": third_id,
            "kind": "passphrase",
            "kdf": FAST_KDF.model_dump(),
            "in_use": True,
            "label": "initial",
            "provider": None,
        }
    }
    assert _files(cli) == before


def test_cli_key_list_add_remove(
    cli: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(cli)
    (pw_id,) = _slots(cli, passphrase=PASSPHRASE)
    assert main(["key", "list"]) == 0
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"  # each slot's creation time
    assert re.fullmatch(
        rf"{pw_id}  passphrase {when}  initial +argon2id m=8KiB t=1 p=1  \(in use\)\n", capsys.readouterr().out
    )

    assert main(["key", "add", "--key-file", str(key_file)]) == 0
    slots = _slots(cli, passphrase=PASSPHRASE)
    (kf_id,) = [s for s in slots if s != pw_id]
    assert capsys.readouterr().out == f"Added key slot {kf_id} (keyfile).\n"
    assert memvault.MemoryStore.open(cli, key_file=key_file).head[1] == 1

    monkeypatch.setenv("MEMVAULT_NEW_PASSPHRASE", "added passphrase")
    assert main(["key", "add", "--json"]) == 0
    added = json.loads(capsys.readouterr().out)
    assert added["kind"] == "passphrase" and added["kdf"] == FAST_KDF.model_dump() and added["in_use"] is False
    add_id = added["slot_id"]
    assert memvault.MemoryStore.open(cli, passphrase="added passphrase").head[1] == 1

    assert main(["key", "list"]) == 0
    lines = {
        pw_id: rf"{pw_id}  passphrase {when}  initial +argon2id m=8KiB t=1 p=1  \(in use\)",
        kf_id: rf"{kf_id}  keyfile    {when}  -",
        add_id: rf"{add_id}  passphrase {when}  - +argon2id m=8KiB t=1 p=1",
    }
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and all(re.fullmatch(lines[k], line) for k, line in zip(sorted(lines), out, strict=True))
    # Opened with the key file, that slot is the one in use.
    monkeypatch.delenv("MEMVAULT_PASSPHRASE")
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key_file))
    assert main(["key", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(s["slot_id"], s["kind"], s["in_use"]) for s in listed] == sorted(
        [(pw_id, "passphrase", False), (kf_id, "keyfile", True), (add_id, "passphrase", False)]
    )
    assert next(s for s in listed if s["slot_id"] == kf_id)["kdf"] is None
    monkeypatch.delenv("MEMVAULT_KEY_FILE")
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)

    # remove: a bad id, then real ones, then the last one.
    assert main(["key", "remove", "deadbeef"]) == 4
    assert capsys.readouterr().err.endswith("There is no key slot 'deadbeef'.\n")
    assert main(["key", "remove", "deadbeef", "--json"]) == 4
    assert json.loads(capsys.readouterr().err)["kind"] == "REFUSED"
    assert main(["key", "remove"]) == 2  # the id is required
    capsys.readouterr()
    assert main(["key", "remove", kf_id]) == 0
    assert capsys.readouterr().out == f"Removed key slot {kf_id}.\n"
    assert not (cli / "keys" / f"{kf_id}.json").exists()
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(cli, key_file=key_file)
    assert main(["key", "remove", add_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"removed": add_id}
    assert not (cli / "keys" / f"{add_id}.json").exists()
    assert main(["key", "remove", pw_id]) == 2
    assert "This is the store's only key slot; add another before removing it." in capsys.readouterr().err
    assert _slot_files(cli) == [f"{pw_id}.json"]
    assert _files(cli) == before
    assert main(["key", "add", "--passphrase", "x"]) == 2  # never a secret on the command line


def _snapshot_by_hard_links(src: Path, dst: Path) -> None:
    """What ``cp -al src dst`` makes: the same directories, every file a hard link."""
    import os

    for dirpath, _dirnames, filenames in os.walk(src):
        target = dst / Path(dirpath).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            os.link(Path(dirpath) / name, target / name)


def test_a_hard_linked_snapshot_survives_passwd_and_a_redaction(
    filled: memvault.MemoryStore, store_path: Path, tmp_path: Path
) -> None:
    """Removing a slot and rewriting the keyring zero only files nobody else links to, and the
    keyring is unshared before an append: a ``cp -al`` snapshot taken before keeps its key slot and
    its keyring as they were, and opens with the old passphrase."""
    from memvault.erasure.redact import shred_file

    snapshot = tmp_path / "snapshot"
    _snapshot_by_hard_links(store_path, snapshot)
    before = {p.name: p.read_bytes() for p in (snapshot / "keys").iterdir()}
    keyring_before = (snapshot / "keyring").read_bytes()
    change_passphrase(filled, "a brand new passphrase", kdf=FAST_KDF)
    filled.put_file("/memories/gone.md", "to be erased\n")
    filled.put_file("/memories/gone.md", "again\n")
    shred_file(filled, "/memories/gone.md")
    assert {p.name: p.read_bytes() for p in (snapshot / "keys").iterdir()} == before
    assert (snapshot / "keyring").read_bytes() == keyring_before
    with memvault.MemoryStore.open(snapshot, passphrase=PASSPHRASE) as old:
        assert memvault.history.read_at(old, "/memories/a.md") == b"beta\n"
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)


def test_a_key_file_others_can_read_is_refused(tmp_path: Path, store_path: Path) -> None:
    """As ssh refuses a private key others can read: the message says which permissions and what to do."""
    import os

    key = tmp_path / "shared.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    with pytest.raises(KeyUnavailableError, match="0644.*chmod 600"):
        memvault.MemoryStore.create(store_path, key_file=key)
    assert not store_path.exists()
    key.chmod(0o600)
    memvault.MemoryStore.create(store_path, key_file=key).close()
    key.chmod(0o640)
    with pytest.raises(KeyUnavailableError, match="chmod 600"):
        memvault.MemoryStore.open(store_path, key_file=key)


def test_a_short_new_passphrase_is_refused_unless_the_operator_insists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidInputError, match="at least 12 characters"):
        memvault.MemoryStore.create(tmp_path / "a", passphrase="hunter2", kdf=FAST_KDF)
    assert not (tmp_path / "a").exists()
    weak = memvault.MemoryStore.create(tmp_path / "a", passphrase="hunter2", kdf=FAST_KDF, allow_weak_passphrase=True)
    store = make_store(tmp_path / "b")
    with pytest.raises(InvalidInputError, match="at least 12 characters"):
        add_slot(store, passphrase="short", kdf=FAST_KDF)
    with pytest.raises(InvalidInputError, match="at least 12 characters"):
        change_passphrase(store, "short", kdf=FAST_KDF)
    assert len(list_slots(store)) == 1  # nothing was added or replaced
    weak.close()
    store.close()
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "hunter2")
    assert main(["--store", str(tmp_path / "c"), "init"]) == 2
    err = capsys.readouterr().err
    assert "12 characters" in err and "hunter2" not in err
    assert main(["--store", str(tmp_path / "c"), "init", "--allow-weak-passphrase"]) == 0


def test_rotate_uses_the_default_kdf_not_the_old_slots(store_path: Path) -> None:
    """A store whose slot was made with cheap Argon2id parameters gets today's defaults at rotate."""
    from memvault.admin import keys as keymgmt
    from memvault.settings import DEFAULT_KDF

    store = make_store(store_path)  # FAST_KDF
    assert list_slots(store)[0].kdf == FAST_KDF.model_dump()
    result = keymgmt.rotate(store, passphrase=PASSPHRASE)
    assert result.slot.kdf == DEFAULT_KDF.model_dump() != FAST_KDF.model_dump()


def test_key_slots_have_labels_and_creation_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slots of a format version 3 store carry a label and a creation time, in the wrap's
    associated data (edited, the slot no longer opens); key list shows them; passwd and rotate keep
    the label."""
    import json
    import time

    from memvault.admin import keys as keymgmt

    before = int(time.time())
    store = make_store(tmp_path / "s")
    added = add_slot(store, passphrase="second passphrase here", kdf=FAST_KDF, label="ops team")
    slots = {s.slot_id: s for s in list_slots(store)}
    assert [s.label for s in slots.values() if s.in_use] == ["initial"]
    assert slots[added.slot_id].label == "ops team" and before <= (slots[added.slot_id].created or 0) <= time.time()
    with pytest.raises(InvalidInputError, match="label"):
        add_slot(store, passphrase="third passphrase here", kdf=FAST_KDF, label="bad\x1b[2Jlabel")
    changed = change_passphrase(store, "a new passphrase for initial", kdf=FAST_KDF)
    assert changed.label == "initial" and changed.in_use
    store.close()
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "second passphrase here")
    assert main(["--store", str(tmp_path / "s"), "key", "list"]) == 0
    out = capsys.readouterr().out
    assert "ops team" in out and "initial" in out and "(in use)" in out
    assert main(["--store", str(tmp_path / "s"), "key", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(s["label"] for s in listed) == ["initial", "ops team"] and all(s["created"] for s in listed)
    # The label is authenticated: renamed in the file, the slot no longer opens.
    path = tmp_path / "s" / "keys" / f"{added.slot_id}.json"
    data = json.loads(path.read_text())
    data["label"] = "someone else"
    path.write_text(json.dumps(data))
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(tmp_path / "s", passphrase="second passphrase here")
    with memvault.MemoryStore.open(tmp_path / "s", passphrase="a new passphrase for initial") as again:
        rotated = keymgmt.rotate(again, passphrase="a new passphrase for initial", kdf=FAST_KDF, drop_other_slots=True)
        assert rotated.slot.label == "initial"
