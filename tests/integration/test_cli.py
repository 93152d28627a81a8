"""The CLI: exit codes from one table, one-line errors (JSON with --json), no secret in argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memvault
from memvault.cli import main


def test_init_log_and_errors(env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["init"]) == 0
    assert capsys.readouterr().out == f"Created an empty memory store in {env}\n"
    assert main(["init"]) == 4
    assert capsys.readouterr().err == "memvault: A memory store already exists at this location.\n"

    store = memvault.MemoryStore.open(env, passphrase="cli passphrase")
    tool = memvault.MemoryTool(store, actor="agent-7", session="s-42")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    tool.call({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"})

    assert main(["log", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [(e["seq"], e["actor"], e["session"], e["command"], e["paths"]) for e in entries] == [
        (2, "agent-7", "s-42", "rename", ["/memories/a.md", "/memories/b.md"]),
        (1, "agent-7", "s-42", "create", ["/memories/a.md"]),
        (0, "memvault", "", "init", []),
    ]
    assert main(["log", "-n", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].split()[1:2] == ["#2"]
    assert lines[0].endswith("agent-7    rename      /memories/a.md -> /memories/b.md")

    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "wrong")
    assert main(["log"]) == 12
    assert capsys.readouterr().err == "memvault: The passphrase or key does not unlock this memory store.\n"
    assert main(["log", "--json"]) == 12
    assert json.loads(capsys.readouterr().err) == {
        "error": "The passphrase or key does not unlock this memory store.",
        "exit_status": 12,
        "kind": "NO_KEY",
    }


def test_missing_store_missing_key_and_usage(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert main(["--store", str(tmp_path / "nowhere"), "log"]) == 10
    assert capsys.readouterr().err == (
        f"memvault: No memory store exists at {tmp_path / 'nowhere'} (--store).\n"
        "hint: create a store there with 'memvault init', or name an existing one with --store or $MEMVAULT_STORE\n"
    )
    monkeypatch.delenv("MEMVAULT_PASSPHRASE")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["log"]) == 12
    assert "No key: set MEMVAULT_KEY, MEMVAULT_PASSPHRASE or MEMVAULT_KEY_FILE" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert capsys.readouterr().err.startswith("memvault: argument cmd: invalid choice")
    assert main(["log", "--passphrase", "secret"]) == 2  # secrets are never arguments


def test_keygen_and_key_file(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = tmp_path / "k.bin"
    assert main(["keygen", str(key)]) == 0
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    assert main(["keygen", str(key)]) == 4  # never overwrites a key
    monkeypatch.delenv("MEMVAULT_PASSPHRASE")
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key))
    assert main(["init"]) == 0
    assert memvault.MemoryStore.open(env, key_file=key).head[1] == 0
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "both")
    assert main(["log"]) == 12
    assert "Set only one of MEMVAULT_KEY, MEMVAULT_PASSPHRASE and MEMVAULT_KEY_FILE." in capsys.readouterr().err


def test_demo_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "demo"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["input"]["command"] for s in out["steps"]] == ["view", "view", "create", "str_replace", "insert", "view"]
    assert not any(s["is_error"] for s in out["steps"])
    from memvault.agent.demo import GUIDELINES, REFUND_POLICIES

    assert out["steps"][0]["output"].splitlines()[1:] == [
        "4.0K\t/memories",
        f"{len(GUIDELINES.encode())}B\t/memories/customer_service_guidelines.xml",
        f"{len(REFUND_POLICIES.encode())}B\t/memories/refund_policies.xml",
    ]
    assert [(h["actor"], h["command"], h["paths"]) for h in out["history"]] == [
        ("claude", "insert", ["/memories/customers/acme_corp.md"]),
        ("claude", "str_replace", ["/memories/customers/acme_corp.md"]),
        ("claude", "create", ["/memories/customers/acme_corp.md"]),
        ("operator", "put", ["/memories/refund_policies.xml"]),
        ("operator", "put", ["/memories/customer_service_guidelines.xml"]),
        ("memvault", "init", []),
    ]
    store = memvault.MemoryStore.open(out["store"], key_file=out["key_file"])
    text = memvault.MemoryTool(store).call({"command": "view", "path": "/memories/customers/acme_corp.md"})
    assert "Prefers email follow-ups" in text  # type: ignore[operator]


def test_demo_plain_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"memvault demo: an encrypted memory store in {tmp_path / 'd' / 'store'}\n")
    history = out.split("History (newest first): commit, seq, time, actor, command, path\n")[1].splitlines()
    assert [line.split()[1] for line in history[:6]] == ["#5", "#4", "#3", "#2", "#1", "#0"]
    assert history[0].endswith("claude     insert      /memories/customers/acme_corp.md")
