"""The keyring's temporary files: a keyring that shares its inode with a snapshot (``cp -al``) is
copied to a file of its own before an append, and a redaction writes a new keyring; both are made
beside the keyring under a temporary name. Whatever someone put at such a name beforehand, a file
or a symbolic link, is never written through, truncated, reused or renamed into place."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault.erasure.redact import shred_file
from memvault.keys import keyfile as keyring_mod
from memvault.paths import parse_path
from memvault.settings import StoreSettings

PLANTED = b"planted by someone else\n"


def _write(store: memvault.MemoryStore, name: str) -> None:
    store.put_file(f"/memories/{name}", f"{name}\n")


def _read(store: memvault.MemoryStore, name: str) -> bytes:
    with store.reading() as txn:
        return txn.read(parse_path(f"/memories/{name}"))


def _plant_on_first_name(monkeypatch: pytest.MonkeyPatch, root: Path, plant: Callable[[Path], None]) -> list[Path]:
    """Make the first temporary keyring name memvault picks one where ``plant`` has just put
    something (as if someone raced it there); later names are random as usual. Returns the
    planted paths."""
    planted: list[Path] = []
    real = getattr(keyring_mod, "_temp_suffix", None)

    def suffix() -> str:
        if planted or real is None:
            return real() if real is not None else os.urandom(8).hex()
        path = root / f".keyring.rewrite-{os.getpid()}-planted"
        plant(path)
        planted.append(path)
        return "planted"

    monkeypatch.setattr(keyring_mod, "_temp_suffix", suffix, raising=False)
    return planted


def _plant_file(path: Path) -> None:
    path.write_bytes(PLANTED)


def test_an_unshared_keyring_never_reuses_a_planted_file_or_follows_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    store = make_store(root, StoreSettings(durability="full"))
    _write(store, "a.md")
    snapshot = tmp_path / "snapshot-keyring"
    os.link(root / "keyring", snapshot)  # a `cp -al` snapshot shares the keyring's inode
    before = snapshot.read_bytes()
    target = tmp_path / "target"
    target.write_bytes(b"outside the store\n")
    # At the name a writer without a random part would use, and at the first random one.
    fixed = root / f".keyring.rewrite-{os.getpid()}"
    fixed.write_bytes(PLANTED)
    planted = _plant_on_first_name(monkeypatch, root, lambda p: os.symlink(target, p))
    _write(store, "b.md")  # the append first gives the keyring a file of its own
    assert snapshot.read_bytes() == before  # the snapshot is as it was
    assert fixed.read_bytes() == PLANTED and os.stat(fixed).st_ino != os.stat(root / "keyring").st_ino
    assert target.read_bytes() == b"outside the store\n"
    assert [p.is_symlink() for p in planted] == [True]
    assert not (root / "keyring").is_symlink() and os.stat(root / "keyring").st_nlink == 1
    store.close()
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert _read(again, "b.md") == b"b.md\n"


def test_a_redaction_never_reuses_a_planted_file_or_follows_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    store = make_store(root, StoreSettings(durability="full"))
    _write(store, "a.md")
    _write(store, "b.md")
    target = tmp_path / "target"
    target.write_bytes(b"outside the store\n")
    # A link left at a temporary keyring's name (cleared without being followed) ...
    os.symlink(target, root / f".keyring.rewrite-{os.getpid()}")
    # ... and a file put at the name the rewrite picks, after that clearing.
    planted = _plant_on_first_name(monkeypatch, root, _plant_file)
    shred_file(store, "/memories/a.md", actor="operator", reason="test")
    assert target.read_bytes() == b"outside the store\n"
    assert not (root / f".keyring.rewrite-{os.getpid()}").is_symlink()
    assert [p.read_bytes() for p in planted] == [PLANTED]  # neither truncated nor renamed into place
    assert os.stat(planted[0]).st_ino != os.stat(root / "keyring").st_ino
    assert not (root / "keyring").is_symlink()
    store.close()
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert _read(again, "b.md") == b"b.md\n"
        destroyed = again.keyring.destroyed_ids
        assert destroyed  # and their records are gone from the file: the rewrite was not stopped
        assert not destroyed & set(again.keyring.scan(parsed_only=True).deks)
