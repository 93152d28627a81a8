"""``memvault dream`` end to end, as an operator runs it: the CLI in a subprocess builds its own SDK
client from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` and talks to a scripted fake of the
Messages API over HTTP on loopback; then ``dream diff`` and ``dream merge`` review and land it.
``examples/dream.py`` is run the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memvault
from fake_messages_http import FakeMessagesServer
from memvault.history import read_at
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.store import Transaction

ROOT = Path(__file__).resolve().parents[2]
INDEX = "/memories/MEMORY.md"
SEED = {
    INDEX: "# Memory\n- [Tea](tea.md)\n- [Tea again](tea-2.md)\n- [Style](style.md)\n",
    "/memories/tea.md": "The user prefers green tea.\n",
    "/memories/tea-2.md": "The user prefers green tea.\n",
}
MERGED_INDEX = "# Memory\n- [Tea](tea.md)\n"


def _use(tid: str, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "memory", "input": command}


SCRIPT = [
    [_use("t1", command="view", path="/memories")],
    [_use("t2", command="delete", path="/memories/tea-2.md")],
    [
        _use(
            "t3",
            command="str_replace",
            path=INDEX,
            old_str="- [Tea again](tea-2.md)\n- [Style](style.md)\n",
            new_str="",
        )
    ],
    [{"type": "text", "text": "Removed a duplicate tea note and the dangling style link."}],
]


@pytest.fixture
def store_env(tmp_path: Path) -> dict[str, str]:
    key = tmp_path / "store.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    with memvault.MemoryStore.create(tmp_path / "store", key_file=key, settings=StoreSettings(durability="none")) as s:

        def apply(txn: Transaction) -> None:
            for path, text in SEED.items():
                txn.write_file(parse_path(path, txn.settings), text.encode())

        s.transact(apply, command="put", paths=tuple(SEED), actor="test", session="")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(MEMVAULT_STORE=str(tmp_path / "store"), MEMVAULT_KEY_FILE=str(key))
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from memvault.cli import main; sys.exit(main())", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _main_files(env: dict[str, str]) -> dict[str, str]:
    with memvault.MemoryStore.open(env["MEMVAULT_STORE"], key_file=env["MEMVAULT_KEY_FILE"]) as s:
        snap = s.snapshot()
        out = {}
        for path in snap.descendants(parse_path("/memories", snap.settings)):
            node = snap.get(path)
            if node is not None and not node.is_dir:
                out[path.text] = read_at(s, path.text).decode()
        return out


def test_dream_run_diff_merge_from_the_shell(store_env: dict[str, str]) -> None:
    with FakeMessagesServer(SCRIPT) as server:
        run = _cli(server.env(store_env), "dream", "--model", "claude-test", "--json")
        assert server.errors == [] and server.exhausted
        assert server.requests[0]["model"] == "claude-test"
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    dream_id = result["dream_id"]
    assert (result["commits"], result["stopped"], result["refused"]) == (2, "done", 0)
    assert result["changed_files"] == [INDEX, "/memories/tea-2.md"]
    assert result["summary"] == "Removed a duplicate tea note and the dangling style link."
    assert _main_files(store_env) == SEED  # main untouched until the merge

    diff = _cli(store_env, "dream", "diff", dream_id)
    assert diff.returncode == 0, diff.stderr
    assert "  ! deleted   /memories/tea-2.md\n" in diff.stdout
    assert "  fixed  dangling-link  /memories/style.md\n" in diff.stdout
    assert "-- [Tea again](tea-2.md)\n" in diff.stdout

    merge = _cli(store_env, "dream", "merge", dream_id, "--actor", "alice", "--json")
    assert merge.returncode == 0, merge.stderr
    doc = json.loads(merge.stdout)
    assert doc["merged"] is True and doc["changed"] == [INDEX, "/memories/tea-2.md"]
    assert _main_files(store_env) == {INDEX: MERGED_INDEX, "/memories/tea.md": SEED["/memories/tea.md"]}
    log = _cli(store_env, "log", "--json", "-n", "1")
    [top] = json.loads(log.stdout)
    assert (top["command"], top["actor"], top["extra"]["dream"]) == ("dream-merge", "alice", dream_id)


def test_dream_api_failure_names_the_service(store_env: dict[str, str]) -> None:
    with FakeMessagesServer([]) as server:
        run = _cli(server.env(store_env), "dream")
    assert run.returncode == 1
    assert run.stderr.startswith("memvault: The Anthropic API failed to answer the consolidation pass on dream/")
    assert "Traceback" not in run.stderr


def test_examples_dream_merges_with_yes(store_env: dict[str, str]) -> None:
    with FakeMessagesServer(SCRIPT) as server:
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "dream.py"), "--yes"],
            env=server.env(store_env), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert server.errors == []
    assert run.returncode == 0, run.stderr
    assert "audit of main: 2 finding(s)\n" in run.stdout
    assert "  ! deleted   /memories/tea-2.md\n" in run.stdout
    assert "Merged as commit #2 " in run.stdout
    assert _main_files(store_env) == {INDEX: MERGED_INDEX, "/memories/tea.md": SEED["/memories/tea.md"]}
