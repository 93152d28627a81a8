"""``memvault status``: location, format, durability, files and bytes, history on disk, key slots
by kind, last commit, the lock and its holder, and for object storage the bucket and the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF
from memvault.admin import keys as keymgmt
from memvault.cli import main
from memvault.cli._common import fmt_time


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY", "MEMVAULT_CACHE_BYTES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key))
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "store"


def _open(where: str | Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(where, key_file=os.environ["MEMVAULT_KEY_FILE"])


def _pack_bytes(directory: Path) -> tuple[int, int]:
    """(bytes of the pack files, how many) under ``directory`` (indexes not counted)."""
    packs = list(directory.glob("*.pack"))
    return sum(p.stat().st_size for p in packs), len(packs)


def _size(n: int) -> str:
    from memvault.protocol.commands import format_size

    return f"{format_size(n)} ({n} bytes)"


def _short(n: int) -> str:
    from memvault.protocol.commands import format_size

    return format_size(n) if n >= 1024 else f"{n} bytes"


def test_status_of_a_local_store(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["init"]) == 0
    with _open(cli) as s:
        s.put_file("/memories/a.md", "0123456789", actor="agent-with-a-long-name")
        s.put_file("/memories/notes/b.md", "x" * 2000, actor="agent-with-a-long-name")
        keymgmt.add_slot(s, passphrase="a second passphrase here", kdf=FAST_KDF)
        head, _seq = s.head
        meta = s.commit_meta(head)
        store_id = s.store_id.hex()
    history, packs = _pack_bytes(cli / "repo" / "objects" / "pack")
    capsys.readouterr()
    assert main(["status"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"Store:       {cli}",
        f"Store id:    {store_id}",
        "Format:      version 6",
        "Durability:  full",
        "Head:        2 files, 2.0K (2010 bytes)",
        f"History:     {_size(history)} in {packs} packs",
        "Key slots:   2 (1 keyfile, 1 passphrase)",
        f"Last commit: {head.decode()[:10]}  #2  {fmt_time(meta.time)}  agent-with-a-long-name  put",
        "Lock:        free",
    ]
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "location": str(cli),
        "store_id": store_id,
        "format_version": 6,
        "durability": "full",
        "files": 2,
        "bytes": 2010,
        "history_bytes": history,
        "packs": packs,
        "loose_objects": 0,
        "key_slots": {"count": 2, "kinds": {"keyfile": 1, "passphrase": 1}},
        "last_commit": {
            "id": head.decode(),
            "seq": 2,
            "time": datetime.fromtimestamp(meta.time, timezone.utc).isoformat(timespec="seconds"),
            "timestamp": meta.time,
            "actor": "agent-with-a-long-name",
            "command": "put",
        },
        "lock": {"held": False, "pid": None, "host": None},
        "remote": None,
        "branches": [],
    }
    monkeypatch.delenv("MEMVAULT_STORE")
    monkeypatch.chdir(cli)  # the store is the current directory: shown by its absolute path
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["location"] == str(cli)


OLD_WRITER = """
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], "lock"), os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)  # as a writer of an older memvault: the lock file names nobody
print("HELD", flush=True)
sys.stdin.readline()
"""

HOLDER = """
import os, sys, time
import memvault
s = memvault.MemoryStore.open(sys.argv[1], key_file=os.environ["MEMVAULT_KEY_FILE"])
with s.writing():
    print("HELD", flush=True)
    sys.stdin.readline()
"""


def _lock_seen(cli: Path, capsys: pytest.CaptureFixture[str], program: str) -> tuple[int, list[str], dict[str, object]]:
    """(the holder's pid, status's Lock line, --json's lock) while ``program`` holds the lock."""
    holder = subprocess.Popen(
        [sys.executable, "-c", program, str(cli)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "HELD\n"
        capsys.readouterr()
        assert main(["status"]) == 0
        lock_line = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Lock:")]
        assert main(["status", "--json"]) == 0
        lock = json.loads(capsys.readouterr().out)["lock"]
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=10)
    return holder.pid, lock_line, lock


def test_status_names_the_lock_holder(cli: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init"]) == 0
    pid, line, lock = _lock_seen(cli, capsys, HOLDER)
    host = os.uname().nodename  # the lock file names its holder
    assert line == [f"Lock:        held by pid {pid} on {host}"]
    assert lock == {"held": True, "pid": pid, "host": host}
    pid, line, lock = _lock_seen(cli, capsys, OLD_WRITER)
    assert line == ["Lock:        held by another writer (holder unknown)"]
    assert lock == {"held": True, "pid": None, "host": None}
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lock"] == {"held": False, "pid": None, "host": None}


def test_status_of_a_store_in_object_storage(
    cli: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    url = f"file://{bucket}"
    monkeypatch.setenv("MEMVAULT_STORE", url)
    assert main(["init"]) == 0
    with _open(url) as s:
        s.put_file("/memories/a.md", "hello", actor="agent")
        cache = s.root
    capsys.readouterr()
    assert main(["status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    history, packs = _pack_bytes(cache / "repo" / "objects" / "pack")
    in_bucket = sum(p.stat().st_size for p in (bucket / "packs").glob("*.pack"))
    assert lines[0] == f"Store:       {url}"
    assert lines[4:6] == [
        "Head:        1 file, 5 bytes",
        f"History:     {_size(history)} in {packs} packs (this host's cache)",
    ]
    kinds = {"packs": [0, 0], "log": [0, 0], "deks": [0, 0], "other": [0, 0]}  # objects, bytes
    for path in bucket.rglob("*"):
        parts = path.relative_to(bucket).parts
        if path.is_file() and not any(part.startswith(".") for part in parts):  # not the backend's own files
            top = parts[0]
            kind = kinds[top if top in ("packs", "log", "deks") else "other"]
            kind[0], kind[1] = kind[0] + 1, kind[1] + path.stat().st_size
    replica = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and not p.is_symlink())
    assert kinds["packs"][0] == 2 * 2 and kinds["log"][0] == 2 and kinds["deks"][0] >= 1  # two commits
    objects, total = sum(k[0] for k in kinds.values()), sum(k[1] for k in kinds.values())
    assert lines[-3:] == [
        f"Objects:     directory {bucket}: {objects} objects, {_size(total)}; packs there: {_size(in_bucket)}",
        f"By kind:     packs and indexes {kinds['packs'][0]} ({_short(kinds['packs'][1])}), log {kinds['log'][0]} "
        f"({_short(kinds['log'][1])}), data keys {kinds['deks'][0]} ({_short(kinds['deks'][1])}), other "
        f"{kinds['other'][0]} ({_short(kinds['other'][1])})",
        f"Cache:       {cache} ({_size(history)} of packs; bound 4.0G (4294967296 bytes); {_short(replica)} in all)",
    ]
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["remote"] == {
        "objects": f"directory {bucket}",
        "history_bytes": in_bucket,
        "cache_dir": str(cache),
        "cache_bytes": history,
        "cache_limit_bytes": 4294967296,
        "bucket": {
            "objects": objects,
            "bytes": total,
            "kinds": {kind: {"objects": n, "bytes": size} for kind, (n, size) in kinds.items()},
        },
        "replica_bytes": replica,
        "superseded": {"objects": 0, "bytes": 0},  # never compacted: no checkpoint supersedes anything
    }
