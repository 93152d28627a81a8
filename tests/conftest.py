"""Shared fixtures. Stores made here use cheap Argon2id parameters (tests only; the
production default is m=64 MiB, t=3, p=4)."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault.settings import KdfParams, StoreSettings

#: Tests that need something the machine may lack skip, or fail where MEMVAULT_TEST_REQUIRE says
#: so (tests/needs.py).
pytest_plugins = ["needs"]

#: Cheap KDF for tests only.
FAST_KDF = KdfParams(memory_kib=8, iterations=1, lanes=1)
PASSPHRASE = "correct horse battery staple"

# Tests never write the scrubber's cache into the user's home; its own tests turn it on in a
# temporary directory (tests/unit/test_scrub_cache.py).
os.environ.setdefault("MEMVAULT_NO_SCRUB_CACHE", "1")

# Nor the host state (anchors of store directories, what the host keeps about stores in object
# storage): one temporary directory for the test session, whatever the environment says (tests of
# the host state itself point MEMVAULT_ANCHOR_DIR elsewhere). Subprocesses inherit it.
_HOST_STATE = tempfile.mkdtemp(prefix="memvault-test-state-")
os.environ["MEMVAULT_ANCHOR_DIR"] = _HOST_STATE
atexit.register(shutil.rmtree, _HOST_STATE, ignore_errors=True)


def make_store(path: Path, settings: StoreSettings | None = None) -> memvault.MemoryStore:
    return memvault.MemoryStore.create(path, passphrase=PASSPHRASE, kdf=FAST_KDF, settings=settings)


def all_store_bytes(root: Path) -> list[tuple[str, bytes]]:
    """Every file under root, plus every zlib stream inflated (git loose objects, and each object
    of a pack): what someone holding a copy of the store directory has, for canary scans."""
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
            if name.endswith(".pack"):
                for i, (_type, _start, _end, body) in enumerate(pack_entries(data)):
                    out.append((f"{p} (object {i}, inflated)", body))
    return out


def pack_entries(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """``(type, start, end, inflated data)`` of every entry of a git pack, in pack order (a
    delta's data is the delta itself)."""
    count = struct.unpack(">I", data[8:12])[0]
    out = []
    pos = 12
    for _ in range(count):
        start = pos
        byte = data[pos]
        type_num = (byte >> 4) & 7
        pos += 1
        while byte & 0x80:
            byte = data[pos]
            pos += 1
        if type_num == 6:  # ofs-delta: base offset varint
            while data[pos] & 0x80:
                pos += 1
            pos += 1
        elif type_num == 7:  # ref-delta: base id
            pos += 20
        inflater = zlib.decompressobj()
        body = inflater.decompress(data[pos:])
        pos = len(data) - len(inflater.unused_data)
        out.append((type_num, start, pos, body))
    return out


def object_views(key: str, data: bytes) -> list[tuple[int | None, bytes]]:
    """What an object in a bucket could reveal, as ``(pack entry type or None, bytes)``: its bytes,
    their zlib inflation when they inflate, and the inflated data of every entry of a ``.pack``."""
    views: list[tuple[int | None, bytes]] = [(None, data)]
    try:
        views.append((None, zlib.decompress(data)))
    except zlib.error:
        pass
    if key.endswith(".pack"):
        views += [(kind, body) for kind, _s, _e, body in pack_entries(data)]
    return views


def rewrite_packed_object(store_path: Path, obj_id: bytes, body: bytes | Callable[[bytes], bytes] | None) -> None:
    """Damage the store's packs holding ``obj_id`` as a disk or an attacker could: its entry
    holds ``body`` (or ``body(old data)``) instead (a well-formed zlib stream: only the id check
    can tell), or with ``body=None`` the object is gone from the packs and their indexes (every
    other object stays)."""
    from dulwich.object_format import SHA1
    from dulwich.pack import load_pack_index

    from memvault.git.pack import entry_header as _entry_header
    from memvault.git.pack import pack_index

    raw_id = bytes.fromhex(obj_id.decode())
    found = False
    for idx_path in (store_path / "repo" / "objects" / "pack").glob("*.idx"):
        index = load_pack_index(str(idx_path), SHA1)
        try:
            ids = {offset: bytes(sha) for sha, offset, _crc in index.iterentries()}
        finally:
            index.close()
        if raw_id not in ids.values():
            continue
        pack_path = idx_path.with_suffix(".pack")
        parts, entries, offset = [], [], 12
        old = pack_path.read_bytes()
        for type_num, start, end, data in pack_entries(old):
            sha = ids[start]
            entry = old[start:end]  # every other entry byte for byte (the offsets of a live reader's index stay)
            if sha == raw_id:
                if body is None:
                    continue
                data = body(data) if callable(body) else body
                entry = _entry_header(type_num, len(data)) + zlib.compress(data, 0)
            entries.append((sha, zlib.crc32(entry), offset))
            parts.append(entry)
            offset += len(entry)
        pack = b"PACK" + struct.pack(">II", 2, len(entries)) + b"".join(parts)
        checksum = hashlib.sha1(pack).digest()
        for path, new in ((pack_path, pack + checksum), (idx_path, pack_index(entries, checksum))):
            os.chmod(path, 0o600)
            path.write_bytes(new)
        found = True
    assert found, "the object is in no pack"


def unpack_to_loose(store: memvault.MemoryStore) -> None:
    """Turn every packed object of ``store`` into a loose object and remove the packs: the
    layout of stores written before commits were packs (memvault reads both)."""
    from dulwich.object_format import SHA1
    from dulwich.pack import Pack

    from memvault.git.objects import GitObject

    pack_dir = store.root / "repo" / "objects" / "pack"
    for idx_path in list(pack_dir.glob("*.idx")):
        pack = Pack(str(idx_path.with_suffix("")), object_format=SHA1)
        try:
            objects = [GitObject(obj.type_name, obj.as_raw_string()) for obj in pack.iterobjects()]
        finally:
            pack.close()
        store.git.write(objects)
        idx_path.unlink()
        idx_path.with_suffix(".pack").unlink()
    store.git._repo.object_store._update_pack_cache()


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


# --- S3: moto's S3 server on loopback, a fresh bucket per test, a fault-injecting proxy (tests/s3support.py) ---

import s3support  # noqa: E402 - moto and boto3 are imported only when one of these fixtures runs


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server on 127.0.0.1 (one per test session)."""
    with s3support.moto_server() as url:
        yield url


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> s3support.S3Env:
    """A fresh bucket on the moto server, with ``os.environ`` (AWS_ENDPOINT_URL, credentials, region)
    pointing at it for this test: ``S3Objects``, ``open_backend`` and subprocesses find it."""
    return s3support.make_s3_env(s3_endpoint, monkeypatch)


@pytest.fixture
def s3_faulty(s3_env: s3support.S3Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[s3support.S3Env]:
    """``s3_env`` with AWS_ENDPOINT_URL pointing at a :class:`s3support.FaultProxy` in front of moto
    (``.proxy``); ``.client`` still goes straight to moto."""
    with s3support.FaultProxy(s3_env.endpoint) as proxy:
        yield s3support.through_proxy(s3_env, proxy, monkeypatch)


# --- the server: a root served by uvicorn on 127.0.0.1 (tests/serversupport.py) ---


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    """A new server root (an admin key, a plain key) served on 127.0.0.1 for this test
    (tests/serversupport.py); skipped without memvault[server]."""
    pytest.importorskip("starlette", reason="the server needs memvault[server]")
    pytest.importorskip("prometheus_client", reason="the server needs memvault[server]")
    from memvault.keys.slots import Unlock
    from memvault.server.root import ServerRoot
    from serversupport import Served, serve_root

    location = tmp_path / "root"
    root = ServerRoot.init(location, Unlock(passphrase=PASSPHRASE), kdf=FAST_KDF)
    admin, admin_key = root.create_key("admin", admin=True)
    plain, plain_key = root.create_key("worker")
    server, thread, port, app = serve_root(root)
    try:
        yield Served(f"http://127.0.0.1:{port}", port, location, root, app, admin_key, plain_key, admin.id, plain.id,
                     server, thread)  # fmt: skip
    finally:
        server.should_exit = True
        thread.join(timeout=30)
