"""Format versions 1 and 2 (docs/format.md): which node records a store writes, what opens, upgrades."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FAST_KDF, PASSPHRASE, keyring_records
from memvault import MemoryStore, MemoryTool, crypto, history
from memvault import store as store_mod
from memvault.cli import main
from memvault.errors import IntegrityError
from memvault.settings import StoreSettings
from memvault.verify import verify

NOTE = "/memories/notes/a.md"


def _config(root: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((root / "memvault.json").read_text())
    return data


def _record(store: MemoryStore, path: str) -> bytes:
    """The decrypted, unpadded node record of ``path`` at the head, as stored in its shard."""
    with store.reading() as view:
        node = view.get(path)
    assert node is not None
    aad = b"memvault/v1/node" + store.store_id + node.token + node.dek_id
    return crypto.unpad(crypto.open_sealed(store.keyring.dek(node.dek_id), node.sealed, aad))


def _create(root: Path, monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    with monkeypatch.context() as m:
        m.setattr(store_mod, "FORMAT_VERSION", version)
        with MemoryStore.create(root, passphrase=PASSPHRASE, kdf=FAST_KDF,
                                settings=StoreSettings(durability="none")) as store:  # fmt: skip
            store.put_file(NOTE, "version one\n")


def _text(store: MemoryStore, path: str) -> str:
    with store.reading() as view:
        node = view.get(path)
    assert node is not None
    return store.read_node(node).decode()


def _open(root: Path) -> MemoryStore:
    return MemoryStore.open(root, passphrase=PASSPHRASE)


def test_new_store_is_version_2_with_compact_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _create(tmp_path / "s", monkeypatch, store_mod.FORMAT_VERSION)
    assert _config(tmp_path / "s")["version"] == 2
    with _open(tmp_path / "s") as store:
        assert store.format_version == 2
        store.put_file("/memories/b.md", "two\n")
        for path in (NOTE, "/memories/notes", "/memories/b.md"):
            assert _record(store, path)[:2] == b"N2"
        assert _text(store, NOTE) == "version one\n"
        assert verify(store).ok


def test_version_1_store_keeps_json_records_and_stays_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    assert _config(root)["version"] == 1
    with _open(root) as store:
        assert store.format_version == 1
        store.put_file("/memories/b.md", "two\n")  # written by this release into a version 1 store
        for path in (NOTE, "/memories/notes", "/memories/b.md"):
            assert _record(store, path)[:1] == b"{"
        assert json.loads(_record(store, "/memories/b.md"))["p"] == "/memories/b.md"
        assert verify(store).ok
    assert _config(root)["version"] == 1


def test_upgrade_keeps_old_records_and_writes_compact_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    before = _config(root)
    with _open(root) as store:
        assert store.upgrade_format() == (1, 2)
        assert store.format_version == 2
        store.put_file("/memories/b.md", "two\n")
        assert _record(store, NOTE)[:1] == b"{" and _record(store, "/memories/b.md")[:2] == b"N2"
        assert store.upgrade_format() == (2, 2)
    after = _config(root)
    assert after["version"] == 2 and after["settings"] == before["settings"]
    assert after["settings_mac"] != before["settings_mac"]  # the MAC covers the version
    with _open(root) as store:  # the new MAC verifies, and both encodings read
        assert store.format_version == 2
        assert _text(store, NOTE) == "version one\n" and _text(store, "/memories/b.md") == "two\n"
        assert verify(store).ok


def test_upgrade_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    assert main(["--store", str(root), "upgrade", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"old_version": 1, "version": 2, "changed": True}
    assert main(["--store", str(root), "upgrade"]) == 0
    assert "already at format version 2" in capsys.readouterr().out
    assert _config(root)["version"] == 2


@pytest.mark.parametrize("version", [3, 0, True, "2", 2.0, None])
def test_unknown_versions_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: object) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 2)
    config = _config(root)
    config["version"] = version
    (root / "memvault.json").write_text(json.dumps(config))
    with pytest.raises(IntegrityError, match="Unsupported memory store format"):
        _open(root)


def test_version_is_authenticated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing the version to another readable one (a downgrade) fails the settings MAC."""
    root = tmp_path / "s"
    _create(root, monkeypatch, 2)
    config = _config(root)
    config["version"] = 1
    (root / "memvault.json").write_text(json.dumps(config))
    with pytest.raises(IntegrityError):
        _open(root)


def _root(store: MemoryStore) -> dict[bytes, tuple[int, bytes]]:
    return store.git.tree_entries(store.git.read_commit(store.head[0])[0])


def test_layout_2_files_each_shard_beside_its_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _create(tmp_path / "s", monkeypatch, 2)
    with _open(tmp_path / "s") as store:
        root = _root(store)
        assert root and all(len(name) == 1 and name in b"0123456789abcdef" for name in root)
        with store.reading() as view:
            node = view.get(NOTE)
        assert node is not None
        h = node.token.hex().encode()
        leaf = store.git.tree_entries(store.git.tree_entries(root[h[:1]][1])[h[1:2]][1])
        assert leaf[h[2:]][1] == node.blob_id  # content blob <h0>/<h1>/<h[2:]>
        assert leaf[b"i"][1] == store.index_blobs(store.git.read_commit(store.head[0])[0])[h[:2]]  # its shard


def test_upgraded_store_keeps_layout_1_until_empty_and_history_reads_across(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    with _open(root) as store:
        first = store.head[0]
        assert b"i" in _root(store)
        store.upgrade_format()
        store.put_file("/memories/b.md", "two\n")
        assert b"i" in _root(store)  # a non-empty layout 1 tree keeps its layout
        tool = MemoryTool(store)
        assert tool.call({"command": "delete", "path": "/memories/notes"}).startswith("Successfully deleted")
        assert tool.call({"command": "delete", "path": "/memories/b.md"}).startswith("Successfully deleted")
        assert _root(store) == {}
        emptied = store.head[0]
        tool.call({"command": "create", "path": NOTE, "file_text": "after\n"})
        assert _root(store) and b"i" not in _root(store)  # an empty head starts layout 2
        # history across the two layouts
        assert [(c.op, c.path) for c in history.changes(store, "HEAD")] == [("created", "/memories/notes"),
                                                                            ("created", NOTE)]  # fmt: skip
        assert [(c.op, c.path) for c in history.changes(store, emptied)] == [("deleted", "/memories/b.md")]
        (d,) = history.diff(store, first, "HEAD")
        assert (d.path, d.old, d.new) == (NOTE, b"version one\n", b"after\n")
        assert verify(store).ok  # every commit, in either layout
    with _open(root) as store:
        assert _text(store, NOTE) == "after\n"


def _commit_record_types(root: Path) -> set[int]:
    return {t for t, _s, _e in keyring_records((root / "keyring").read_bytes()) if t in (2, 5)}


def test_keyring_commit_records_follow_the_format_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _create(tmp_path / "v2", monkeypatch, 2)
    assert _commit_record_types(tmp_path / "v2") == {5}  # raw ids, 80-byte bodies
    _create(tmp_path / "v1", monkeypatch, 1)
    assert _commit_record_types(tmp_path / "v1") == {2}  # what older releases read
    with _open(tmp_path / "v1") as store:
        store.put_file("/memories/b.md", "two\n")
        assert _commit_record_types(tmp_path / "v1") == {2}
        store.upgrade_format()
        store.put_file("/memories/c.md", "three\n")
        assert _commit_record_types(tmp_path / "v1") == {2, 5}
        assert verify(store).ok
    with _open(tmp_path / "v1") as store:  # one mac chain across both record types
        assert store.head[1] == 3 and _text(store, "/memories/c.md") == "three\n"
