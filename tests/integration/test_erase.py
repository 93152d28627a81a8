"""``memvault shred-store``: afterwards no key material is left in the store directory (every key
slot, wrapped data key and master-key seal that existed is looked for), a copy taken before still
opens (out of reach, as SECURITY.md says), a copy taken after the keys went does not; on S3 every
object goes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, all_store_bytes, keyring_records
from memvault.crypto import b64decode
from memvault.erasure.destroy import shred_store
from memvault.errors import StoreNotFoundError


def _store(path: Path) -> memvault.MemoryStore:
    store = memvault.MemoryStore.create(path, passphrase=PASSPHRASE, kdf=FAST_KDF)
    for i in range(3):
        store.put_file(f"/memories/n{i}.md", f"note {i}\n")
    return store


def _key_material(root: Path) -> list[bytes]:
    """Every wrapped data key record and every key slot's sealed master keys of a store."""
    data = (root / "keyring").read_bytes()
    out = [data[s + 3 : e] for rtype, s, e in keyring_records(data) if rtype == 1]
    out += [b64decode(json.loads(p.read_text())["wrapped"]) for p in (root / "keys").glob("*.json")]
    return out


def test_shredding_destroys_the_keys_before_anything_else(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    shutil.copytree(tmp_path / "s", tmp_path / "before")
    material = _key_material(tmp_path / "s")
    assert len(material) >= 4
    held = {p: os.open(p, os.O_RDONLY) for p in [tmp_path / "s" / "keyring", *(tmp_path / "s" / "keys").glob("*")]}
    seen_after_keys: list[list[tuple[str, bytes]]] = []

    def copy_now() -> None:
        shutil.copytree(tmp_path / "s", tmp_path / "after")
        seen_after_keys.append(all_store_bytes(tmp_path / "after"))

    receipt = shred_store(store, after_keys=copy_now)
    assert receipt.store_id == store.store_id.hex() and receipt.key_slots == 1 and receipt.data_keys >= 3
    assert receipt.commits == 4 and receipt.files_overwritten >= 3
    assert not (tmp_path / "s").exists()
    # Overwritten in place: the old inodes hold zeros now.
    for path, fd in held.items():
        assert not any(os.pread(fd, 1 << 20, 0)), path
        os.close(fd)
    # A copy taken once the keys went holds none of them, and does not open.
    (after,) = seen_after_keys
    for piece in material:
        assert not any(piece in data for _name, data in after), "key material survived"
    with pytest.raises(StoreNotFoundError):
        memvault.MemoryStore.open(tmp_path / "after", passphrase=PASSPHRASE)
    # A copy taken before is out of reach: it still opens.
    with memvault.MemoryStore.open(tmp_path / "before", passphrase=PASSPHRASE) as old:
        assert old.snapshot().child_names("/memories") == ["n0.md", "n1.md", "n2.md"]


def test_cli_asks_before_destroying(tmp_path: Path, monkeypatch, capsys) -> None:
    from memvault.cli import main

    _store(tmp_path / "s").close()
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    assert main(["--store", str(tmp_path / "s"), "shred-store"]) == 2  # no terminal, no --yes
    assert (tmp_path / "s" / "keyring").exists()
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "s"), "shred-store", "--yes", "--json"]) == 0
    receipt = json.loads(capsys.readouterr().out)
    assert receipt["key_slots"] == 1 and receipt["commits"] == 4 and receipt["remaining_copies"]
    assert not (tmp_path / "s").exists()


def test_shredding_a_store_in_s3(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("tenant")
    store = memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=tmp_path / "cache")
    store.put_file("/memories/a.md", "a\n")
    assert any(k.startswith("tenant/deks/") for k in s3_env.keys())
    receipt = shred_store(store)
    assert receipt.objects_deleted >= 6
    assert [k for k in s3_env.keys() if k.startswith("tenant/")] == []
    assert not (tmp_path / "cache").exists()
    with pytest.raises(StoreNotFoundError):
        memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=tmp_path / "other")
