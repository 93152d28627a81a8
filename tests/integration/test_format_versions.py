"""Format versions 1 and 2 (docs/format.md): which node records a store writes, what opens, upgrades."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memvault.store.opening
from conftest import FAST_KDF, PASSPHRASE, keyring_records
from memvault import MemoryStore, MemoryTool, crypto, history
from memvault.cli import main
from memvault.errors import IntegrityError, MemvaultError
from memvault.settings import StoreSettings
from memvault.store import config as store_config
from memvault.store import memorystore as store_mod
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
        m.setattr(memvault.store.opening, "FORMAT_VERSION", version)
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


def test_new_store_is_version_6_with_compact_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert store_mod.FORMAT_VERSION == 6
    _create(tmp_path / "s", monkeypatch, store_mod.FORMAT_VERSION)
    assert _config(tmp_path / "s")["version"] == 6
    with _open(tmp_path / "s") as store:
        assert store.format_version == 6
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
        assert store.upgrade_format() == (1, 6)
        assert store.format_version == 6
        store.put_file("/memories/b.md", "two\n")
        assert _record(store, NOTE)[:1] == b"{" and _record(store, "/memories/b.md")[:2] == b"N2"
        assert store.upgrade_format() == (6, 6)
    after = _config(root)
    assert after["version"] == 6 and after["settings"] == before["settings"]
    assert after["settings_mac"] != before["settings_mac"]  # the MAC covers the version
    with _open(root) as store:  # the new MAC verifies, and both encodings read
        assert store.format_version == 6
        assert _text(store, NOTE) == "version one\n" and _text(store, "/memories/b.md") == "two\n"
        assert verify(store).ok


def test_upgrade_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    assert main(["--store", str(root), "upgrade", "--json", "--actor", "ops"]) == 0
    assert json.loads(capsys.readouterr().out) == {"old_version": 1, "version": 6, "changed": True, "commit": True}
    with _open(root) as store:
        (info,) = history.log(store, limit=1)
        assert (info.command, info.actor) == ("upgrade", "ops")
    assert main(["--store", str(root), "upgrade"]) == 0
    assert "already at format version 6" in capsys.readouterr().out
    assert _config(root)["version"] == 6


@pytest.mark.parametrize("version", [7, 0, True, "2", 2.0, None])
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
        tool = MemoryTool(store)
        assert tool.call({"command": "delete", "path": "/memories/notes"}).startswith("Successfully deleted")
        assert _root(store) == {}  # the emptied shard tree and its <h0> tree went with the last node
        assert verify(store).ok


def test_upgrade_refiles_a_layout_1_tree_in_one_commit_and_history_reads_across(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    with _open(root) as store:
        store.put_file("/memories/b.md", "two\n")
        first, seq = store.head
        files_before = {p: _text(store, p) for p in (NOTE, "/memories/b.md")}
        assert b"i" in _root(store)
        assert store.upgrade_format() == (1, 6)
        assert store.head[1] == seq + 1  # one commit: the same files, filed in layout 2
        assert _root(store) and b"i" not in _root(store)
        (info,) = history.log(store, limit=1)
        assert (info.command, info.paths) == ("upgrade", ())
        assert history.changes(store, "HEAD") == ()  # no file changed
        assert history.diff(store, first, "HEAD") == []
        assert {p: _text(store, p) for p in files_before} == files_before
        tool = MemoryTool(store)
        tool.call({"command": "str_replace", "path": NOTE, "old_str": "one", "new_str": "after"})
        assert b"i" not in _root(store)
        (d,) = history.diff(store, first, "HEAD")  # across both layouts
        assert (d.path, d.old, d.new) == (NOTE, b"version one\n", b"version after\n")
        assert [(c.op, c.path) for c in history.changes(store, "HEAD")] == [("modified", NOTE)]
        assert verify(store).ok  # every commit, in either layout
        assert store.upgrade_format() == (6, 6) and store.head[1] == seq + 2  # nothing more to do
    with _open(root) as store:
        assert _text(store, NOTE) == "version after\n" and _text(store, "/memories/b.md") == "two\n"


def test_upgrade_interrupted_before_its_commit_is_finished_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    with _open(root) as store:
        seq = store.head[1]

        def crash(*args: object, **kwargs: object) -> None:
            raise OSError(5, "Input/output error")

        with monkeypatch.context() as m:
            m.setattr(store, "_commit", crash)
            with pytest.raises(MemvaultError):
                store.upgrade_format()
    assert _config(root)["version"] == 6  # the configuration went first
    with _open(root) as store:
        assert store.head[1] == seq and b"i" in _root(store)  # a version 3 store, still in layout 1
        assert _text(store, NOTE) == "version one\n"
        store.put_file("/memories/b.md", "two\n")  # a commit keeps its parent's layout
        assert b"i" in _root(store) and _record(store, "/memories/b.md")[:2] == b"N2"
        assert store.upgrade_format() == (6, 6)
        assert b"i" not in _root(store) and store.head[1] == seq + 2
        assert verify(store).ok


def test_empty_version_1_store_upgrades_without_a_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        m.setattr(store_mod, "FORMAT_VERSION", 1)
        m.setattr(memvault.store.opening, "FORMAT_VERSION", 1)
        MemoryStore.create(tmp_path / "s", passphrase=PASSPHRASE, kdf=FAST_KDF).close()
    with _open(tmp_path / "s") as store:
        assert store.upgrade_format() == (1, 6) and store.head[1] == 0
        store.put_file(NOTE, "x")
        assert b"i" not in _root(store)


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
        assert store.head[1] == 4 and _text(store, "/memories/c.md") == "three\n"  # + the upgrade commit


def test_upgrade_rereads_the_configuration_under_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handle opened before another process upgraded (or before a newer release moved the store
    further) neither rewrites the configuration nor downgrades it; the write is durable."""
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    early = _open(root)
    with _open(root) as other:
        assert other.upgrade_format() == (1, 6)
    synced: list[bool] = []
    real = store_config.atomic_write
    monkeypatch.setattr(store_config, "atomic_write", lambda *a, **k: (synced.append(k["durable"]), real(*a, **k)))
    assert early.upgrade_format() == (6, 6) and synced == []  # already version 6: not written again
    early.close()
    # A version this release does not know is refused, not overwritten.
    config = _config(root)
    with _open(root) as store:
        config["version"] = 7
        (root / "memvault.json").write_text(json.dumps(config))
        with pytest.raises(IntegrityError, match="Unsupported"):
            store.upgrade_format()
    assert _config(root)["version"] == 7
    # durability "none" still writes the upgraded configuration durably
    _create(tmp_path / "n", monkeypatch, 1)
    synced.clear()  # (creating it wrote its configuration as durability "none" stores do)
    with _open(tmp_path / "n") as store:
        store.upgrade_format()
    assert synced == [True]


def test_a_cached_shard_is_not_served_under_another_shard_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _create(tmp_path / "s", monkeypatch, 2)
    with _open(tmp_path / "s") as store:
        blobs = store.index_blobs(store.git.read_commit(store.head[0])[0])
        shard, blob_id = next(iter(blobs.items()))
        assert store.shard_nodes(shard, blob_id)  # decoded and cached
        other = next(bytes(f"{i:02x}", "ascii") for i in range(256) if bytes(f"{i:02x}", "ascii") not in blobs)
        with pytest.raises(IntegrityError):
            store.shard_nodes(other, blob_id)


def test_a_handle_opened_before_the_upgrade_keeps_writing_readable_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that opened the store at version 1 and goes on after another one upgraded it
    writes version 1 encodings into the layout 2 tree (its parent's layout): every commit reads."""
    root = tmp_path / "s"
    _create(root, monkeypatch, 1)
    early = _open(root)
    with _open(root) as other:
        other.upgrade_format()
        other.put_file("/memories/b.md", "from the upgraded handle\n")
    early.put_file("/memories/c.md", "from the early handle\n")
    assert early.format_version == 1 and _record(early, "/memories/c.md")[:1] == b"{"
    assert b"i" not in _root(early)  # the parent tree's layout 2 is kept
    assert _commit_record_types(root) == {2, 5}
    early.close()
    with _open(root) as store:
        assert store.format_version == 6
        assert _text(store, "/memories/b.md") == "from the upgraded handle\n"
        assert _text(store, "/memories/c.md") == "from the early handle\n"
        assert verify(store).ok


def test_upgrade_chains_earlier_redactions_and_names_the_access_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version 2 store's redactions are tombstones outside the MAC chain: the upgrade to version 3
    chains them (DESTROY records with its commit), so removing the tombstone and putting the old key
    record back no longer makes the version readable; and it names the existing access-time file,
    so expire keeps working."""
    from memvault.erasure import expiry
    from memvault.erasure.redact import shred_version
    from memvault.errors import RedactedError

    root = tmp_path / "s"
    _create(root, monkeypatch, 2)
    with _open(root) as store:
        store.put_file(NOTE, "secret words\n")
        store.put_file(NOTE, "clean\n")
        dek_id = store.state_at(history.resolve(store, "#2")).nodes[NOTE].dek_id
        saved = (root / "keyring").read_bytes()
        shred_version(store, NOTE, "#2")
        seq = store.head[1]
        assert store.upgrade_format() == (2, 6)
        assert store.head[1] == seq + 1 and history.log(store, limit=1)[0].command == "upgrade"
        assert expiry.expire(store, 1.0, actor="ops", dry_run=True).cutoff > 0  # the access file is named
        assert verify(store).ok
    data = (root / "keyring").read_bytes()
    old_dek = next(saved[s:e] for t, s, e in keyring_records(saved) if t == 1 and saved[s + 3 : s + 19] == dek_id)
    without_tombstones = b"".join([data[:21], *(data[s:e] for t, s, e in keyring_records(data) if t != 4), old_dek])
    (root / "keyring").write_bytes(without_tombstones)
    with _open(root) as store:
        node = next(n for n in store.state_at(history.resolve(store, "#2")).nodes.values() if n.dek_id == dek_id)
        assert node.redacted
        with pytest.raises(RedactedError):
            store.read_node(node)
