"""Shared fixtures. Stores made here use cheap Argon2id parameters (tests only; the
production default is m=64 MiB, t=3, p=4)."""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import memvault
from memvault.settings import KdfParams, StoreSettings

#: Cheap KDF for tests only.
FAST_KDF = KdfParams(memory_kib=8, iterations=1, lanes=1)
PASSPHRASE = "correct horse battery staple"


def make_store(path: Path, settings: StoreSettings | None = None) -> memvault.MemoryStore:
    return memvault.MemoryStore.create(path, passphrase=PASSPHRASE, kdf=FAST_KDF, settings=settings)


def all_store_bytes(root: Path) -> list[tuple[str, bytes]]:
    """Every file under root, plus every zlib stream (git loose objects) inflated: what someone
    holding a copy of the store directory has, for canary scans."""
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            data = p.read_bytes()
            out.append((str(p), data))
            try:
                out.append((str(p) + " (inflated)", zlib.decompress(data)))
            except zlib.error:
                pass
    return out


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_path: Path) -> Iterator[memvault.MemoryStore]:
    s = make_store(store_path)
    yield s
    s.close()


@pytest.fixture
def tool(store: memvault.MemoryStore) -> memvault.MemoryTool:
    return memvault.MemoryTool(store, actor="agent", session="session-1")


def make_odd_file(path: Path, kind: str, huge: bytes) -> None:
    """Put at ``path`` what a hostile store directory could hold instead of a small regular file:
    a FIFO (``fifo``), a link to ``/dev/zero`` (``dev-zero``), a directory, or ``huge`` bytes."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(huge)


def seed_files(store: memvault.MemoryStore, files: dict[str, str], *, actor: str, session: str) -> None:
    """Write ``path -> text`` into ``store`` as one commit (command ``setup``)."""
    from memvault.paths import parse_path

    def fill(txn: memvault.store.Transaction) -> None:
        for file, text in files.items():
            txn.write_file(parse_path(file), text.encode())

    store.transact(fill, command="setup", paths=(), actor=actor, session=session)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The CLI's environment: a passphrase and ``$MEMVAULT_STORE`` pointing at ``tmp_path/store``."""
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "cli passphrase")
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "store"))
    return tmp_path / "store"


def keyring_records(data: bytes) -> list[tuple[int, int, int]]:
    """(type, start, end) of every record of a keyring file, after its 21-byte header."""
    out, pos = [], 21
    while pos < len(data):
        rtype, length = struct.unpack_from(">BH", data, pos)
        out.append((rtype, pos, pos + 3 + length))
        pos += 3 + length
    return out
