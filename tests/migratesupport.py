"""Test support for ``memvault migrate``: a client of the fake API (tests/fake_memory_stores.py) that
waits for nothing, the store's files and imported versions as a test reads them, and the CLI run
as a subprocess with a key file (no passphrase, so no key derivation) and the API key in the
environment only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import memvault
from memvault import history
from memvault.paths import ROOT
from memvault.transfer.migrate import MemoryStoresClient

KEY = "sk-fake-key-0123456789abcdef"
SRC = str(Path(memvault.__file__).resolve().parent.parent)


def client(url: str, key: str = KEY, **kwargs: Any) -> MemoryStoresClient:
    """A client of the API at ``url`` whose waits are recorded in ``.waits`` instead of slept."""
    waits: list[float] = []
    kwargs.setdefault("sleep", waits.append)
    api = MemoryStoresClient(url, key, **kwargs)
    api.waits = waits  # type: ignore[attr-defined]
    return api


def files(store: memvault.MemoryStore) -> dict[str, str]:
    """``{API path: text}`` of every file below /memories at the head."""
    out: dict[str, str] = {}
    with store.reading() as txn:
        from memvault.paths import MemoryPath

        for vpath in txn.descendants(MemoryPath(())):
            node = txn.get(vpath)
            if node is not None and not node.is_dir:
                out[vpath.text[len(ROOT) :]] = txn.read(vpath).decode("utf-8")
    return out


def imported(store: memvault.MemoryStore) -> list[str]:
    """The remote version ids the store's pull commits name, oldest first (with repeats, if any)."""
    return [
        e.extra["version"] for e in reversed(history.log(store)) if e.command == "migrate-pull" and "version" in e.extra
    ]


def key_file(directory: Path) -> Path:
    """A new random store key in a private file."""
    path = directory / "store.key"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    return path


def cli_env(key_path: Path, api_key: str | None = KEY, **extra: str) -> dict[str, str]:
    """The CLI's environment: this checkout's memvault, the store key file, the API key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMVAULT_"))}
    env.update(PYTHONPATH=SRC, MEMVAULT_KEY_FILE=str(key_path), MEMVAULT_NO_SCRUB_CACHE="1")
    if api_key is not None:
        env["ANTHROPIC_API_KEY"] = api_key
    env.update(extra)
    return env


def cli_args(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "memvault.cli", "--store", str(store), *args]


def run_cli(
    store: Path, env: dict[str, str], *args: str, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """One CLI run (``input``: its standard input)."""
    return subprocess.run(cli_args(store, *args), env=env, input=input, capture_output=True, text=True, timeout=timeout)


def opened(store: Path, key_path: Path) -> memvault.MemoryStore:
    """The store a CLI run made, opened here with its key file."""
    return memvault.MemoryStore.open(store, key_file=key_path)


def summary(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``--json`` summary a run printed."""
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed
