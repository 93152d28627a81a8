"""Claude Code and the API around the memory tool: the ``SessionStart`` hook (``memvault hook
session-start``), the ``context_management`` block (``memvault.context_management``) and the starting
layouts of ``memvault init --template``.

The hook prints exactly the head of ``/memories/MEMORY.md`` that Claude Code loads of its own index:
the first 200 lines, cut to whole lines within 25,000 bytes. The block is checked against the SDK's
own request types (strictly: no unknown keys, no coercion) and against what the SDK puts on the wire.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.beta import BetaContextManagementConfigParam
from fake_messages_api import ScriptedMessagesAPI, sync_client
from pydantic import BaseModel, ConfigDict, ValidationError

import memvault
from conftest import PASSPHRASE, make_store
from memvault.cli import main
from memvault.edits.templates import TEMPLATES, apply_template, template_names
from memvault.errors import InvalidInputError, PathExistsError
from memvault.history import log, read_at
from memvault.protocol.context import CONTEXT_MANAGEMENT_BETA, INDEX_MAX_BYTES, INDEX_MAX_LINES, index_head

INDEX = "/memories/MEMORY.md"
MODEL = "claude-sonnet-4-6"
REPO = Path(__file__).resolve().parents[2]


# -- the SessionStart hook -------------------------------------------------------------------------


@pytest.fixture
def hook_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> memvault.MemoryStore:
    """A store (cheap KDF) the CLI finds through the environment, as a hook in Claude Code would."""
    store = make_store(tmp_path / "store")
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.delenv("MEMVAULT_KEY", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "store"))
    return store


def _hook(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    status = main(["hook", "session-start", *extra])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _context(out: str) -> str:
    """The additionalContext of the hook's output, after checking the output's exact shape."""
    assert out.endswith("\n") and out.count("\n") == 1, "one JSON line and nothing else"
    assert out.isascii()
    doc = json.loads(out)
    assert list(doc) == ["hookSpecificOutput"]
    assert list(doc["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    assert doc["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = doc["hookSpecificOutput"]["additionalContext"]
    assert isinstance(context, str)
    return context


def test_hook_line_cap_300_lines(hook_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f"- line {i:03d}: see /memories/topic-{i:03d}.md\n" for i in range(1, 301)]
    hook_store.put_file(INDEX, "".join(lines))
    assert len("".join(lines[:200]).encode()) < INDEX_MAX_BYTES  # only the line cap applies

    status, out, err = _hook(capsys)
    assert (status, err) == (0, "")
    context = _context(out)
    assert context == "".join(lines[:200])
    assert context.splitlines()[0] == "- line 001: see /memories/topic-001.md"
    assert context.splitlines()[-1] == "- line 200: see /memories/topic-200.md"
    assert "line 201" not in context

    status, out, err = _hook(capsys, "--plain")
    assert (status, out, err) == (0, "".join(lines[:200]), "")


def test_hook_byte_cap_counts_utf8_bytes(hook_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    # 151 bytes but 78 characters per line: 200 lines are 30,200 bytes (15,600 characters).
    lines = [f"{i:03d} " + "é" * 73 + "\n" for i in range(1, 301)]
    assert {len(line.encode()) for line in lines} == {151}
    hook_store.put_file(INDEX, "".join(lines))

    status, out, err = _hook(capsys)
    assert (status, err) == (0, "")
    context = _context(out)
    whole = INDEX_MAX_BYTES // 151  # 165 lines, 24,915 bytes
    assert whole == 165
    assert context == "".join(lines[:whole])
    assert len(context.encode()) == 24_915 <= INDEX_MAX_BYTES < len("".join(lines[: whole + 1]).encode())


def test_hook_long_line(hook_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    # A 30,000-byte third line: the head stops before it, at a line boundary.
    text = "# Index\n- short\n" + "x" * 29_999 + "\n- after the long line\n"
    hook_store.put_file(INDEX, text)
    status, out, err = _hook(capsys)
    assert (status, err) == (0, "")
    assert _context(out) == "# Index\n- short\n"

    # Not even the first line fits: its beginning, cut on a character boundary within 25,000 bytes.
    text = "a" + "é" * 20_000 + "\n- second\n"
    hook_store.put_file(INDEX, text)
    status, out, err = _hook(capsys)
    assert (status, err) == (0, "")
    context = _context(out)
    assert context == "a" + "é" * 12_499  # byte 25,000 is the middle of an "é": one byte less
    assert len(context.encode()) == 24_999


def test_hook_without_index_and_with_other_paths(
    hook_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    seq = hook_store.head[1]
    status, out, err = _hook(capsys)
    assert (status, err) == (0, "")
    assert json.loads(out) == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ""}}
    assert _hook(capsys, "--plain") == (0, "", "")

    hook_store.put_file("/memories/notes/index.md", "# Notes\n\x1b[2J\n")
    status, out, err = _hook(capsys, "--index", "/memories/notes/index.md")
    assert (status, err) == (0, "")
    assert "\\u001b" in out  # a control character from memory content reaches stdout escaped
    assert _context(out) == "# Notes\n\x1b[2J\n"

    status, out, err = _hook(capsys, "--index", "/memories/notes")
    assert (status, out) == (1, "")
    assert err == "memvault: /memories/notes is a directory, not an index file.\n"
    status, out, err = _hook(capsys, "--index", "/etc/passwd")
    assert (status, out) == (1, "")
    assert err.startswith("memvault: ") and err.count("\n") == 1

    reopened = memvault.MemoryStore.open(hook_store.root, passphrase=PASSPHRASE)
    assert reopened.head[1] == seq + 1  # only the put_file above: the hook never commits
    reopened.close()


def test_hook_errors_are_non_blocking(
    hook_store: memvault.MemoryStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    hook_store.put_file(INDEX, "# Index\n")
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "not the passphrase")
    assert _hook(capsys) == (1, "", "memvault: The passphrase or key does not unlock this memory store.\n")

    monkeypatch.delenv("MEMVAULT_PASSPHRASE")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    status, out, err = _hook(capsys)
    assert (status, out) == (1, "")  # not 12 (NO_KEY): any status but 2 is non-blocking for Claude Code
    assert err.startswith("memvault: No key: set MEMVAULT_KEY") and err.count("\n") == 1

    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "nowhere"))
    assert _hook(capsys) == (1, "", "memvault: No memory store exists at this location.\n")


def test_hook_as_claude_code_runs_it(hook_store: memvault.MemoryStore, tmp_path: Path) -> None:
    """A separate process, the hook's JSON input on stdin: stdout is the JSON and nothing else."""
    hook_store.put_file(INDEX, "# Memory index\n- /memories/progress.md: progress log\n")
    hook_input = {"session_id": "abc", "hook_event_name": "SessionStart", "source": "startup", "cwd": str(tmp_path)}
    environ = {**os.environ, "MEMVAULT_PASSPHRASE": PASSPHRASE, "MEMVAULT_STORE": str(hook_store.root)}
    done = subprocess.run(
        [sys.executable, "-m", "memvault.cli", "hook", "session-start"],
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert _context(done.stdout) == "# Memory index\n- /memories/progress.md: progress log\n"


def test_index_head_edges() -> None:
    two_hundred = "".join(f"{i}\n" for i in range(200))
    assert index_head(two_hundred.encode()) == two_hundred
    assert index_head((two_hundred + "last").encode()) == two_hundred
    assert index_head((two_hundred[:-1]).encode()) == two_hundred[:-1]  # no final newline: still whole
    assert index_head(b"") == ""
    assert index_head(b"a\nb\nc\n", max_lines=2) == "a\nb\n"
    assert index_head(b"abcd\nef\n", max_bytes=5) == "abcd\n"  # the newline counts: 5 bytes
    assert index_head(b"abcd\nef\n", max_bytes=4) == "abcd"  # no whole line fits: the first one's beginning
    assert index_head(b"ok\n\xff\xfe\n") == "ok\n\ufffd\ufffd\n"
    assert INDEX_MAX_LINES == 200 and INDEX_MAX_BYTES == 25_000
    with pytest.raises(ValueError):
        index_head(b"x", max_lines=0)


# -- the context_management block ------------------------------------------------------------------


class _Request(BaseModel):
    """The request field, typed as the SDK types it; strict, and unknown keys refused at every level
    (the SDK's TypedDicts alone would let a misspelt key through)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    context_management: BetaContextManagementConfigParam


def _sdk_valid(block: dict[str, Any]) -> list[dict[str, Any]]:
    validated = _Request.model_validate({"context_management": block}).context_management
    return [dict(edit) for edit in validated["edits"]]  # the SDK types `edits` as an Iterable: validated lazily


def test_context_management_defaults_and_options() -> None:
    assert memvault.context_management() == {
        "edits": [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 100_000},
                "keep": {"type": "tool_uses", "value": 3},
                "exclude_tools": ["memory"],
                "clear_tool_inputs": False,
            }
        ]
    }
    block = memvault.context_management(
        trigger=30_000, keep=5, clear_at_least=5_000, clear_tool_inputs=True, exclude_tools=["web_search", "memory"]
    )
    assert block == {
        "edits": [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 30_000},
                "keep": {"type": "tool_uses", "value": 5},
                "clear_at_least": {"type": "input_tokens", "value": 5_000},
                "exclude_tools": ["memory", "web_search"],
                "clear_tool_inputs": True,
            }
        ]
    }
    assert memvault.context_management() is not memvault.context_management()  # a fresh dict each time

    bad_values: list[dict[str, Any]] = [{"trigger": 0}, {"keep": -1}, {"clear_at_least": 0}, {"exclude_tools": [""]}]
    for bad_value in bad_values:
        with pytest.raises(ValueError):
            memvault.context_management(**bad_value)
    bad_types: list[dict[str, Any]] = [
        {"trigger": True},
        {"trigger": 1.5},
        {"keep": "3"},
        {"clear_tool_inputs": "yes"},
        {"exclude_tools": "memory"},
        {"exclude_tools": [None]},
    ]
    for bad_type in bad_types:
        with pytest.raises(TypeError):
            memvault.context_management(**bad_type)


def test_context_management_matches_the_sdk_request_types() -> None:
    for block in (
        memvault.context_management(),
        memvault.context_management(trigger=50_000, keep=1, clear_at_least=1, clear_tool_inputs=True),
    ):
        assert _sdk_valid(block) == block["edits"]
    # The check is strict enough to fail: a misspelt key, a wrong kind of trigger, a number as text.
    edit = memvault.context_management()["edits"][0]
    for broken in (
        {**edit, "exclude_tool": ["memory"]},
        {**edit, "trigger": {"type": "input_token", "value": 100_000}},
        {**edit, "keep": {"type": "tool_uses", "value": "3"}},
        {**edit, "trigger": {"type": "input_tokens", "value": 100_000, "unit": "tokens"}},
    ):
        with pytest.raises(ValidationError):
            _sdk_valid({"edits": [broken]})


def test_context_management_goes_on_the_wire_unchanged() -> None:
    api = ScriptedMessagesAPI([[{"type": "text", "text": "Nothing to remember."}]])
    block = memvault.context_management(clear_at_least=10_000)
    sent = copy.deepcopy(block)
    request: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 256,
        "tools": [{"type": "memory_20250818", "name": "memory"}],
        "messages": [{"role": "user", "content": "Hello"}],
        "context_management": block,  # a plain dict, as the library returns it
        "betas": [CONTEXT_MANAGEMENT_BETA],
    }
    reply = sync_client(api).beta.messages.create(**request)
    assert api.errors == []
    assert reply.content[0].type == "text"
    assert api.requests[0]["context_management"] == sent
    assert block == sent  # the SDK did not change the caller's dict
    assert CONTEXT_MANAGEMENT_BETA in api.request_headers[0]["anthropic-beta"].split(",")


def test_example_agent_sends_the_library_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("example_agent", REPO / "examples" / "agent.py")
    assert spec is not None and spec.loader is not None
    agent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent)

    api = ScriptedMessagesAPI(
        [
            [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "memory",
                    "input": {"command": "view", "path": "/memories"},
                }
            ],
            [{"type": "text", "text": "Done."}],
        ]
    )
    store = make_store(tmp_path / "store")
    try:
        tool = memvault.MemoryTool(store, actor="example-agent", session="s")
        answer = agent.run_agent(sync_client(api), tool, "What do you remember?", model=MODEL)
    finally:
        store.close()
    assert answer == "Done."
    assert api.errors == []
    assert api.requests[0]["context_management"] == memvault.context_management()
    assert CONTEXT_MANAGEMENT_BETA in api.request_headers[0]["anthropic-beta"].split(",")


# -- init --template ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["project", "support", "research"])
def test_template_is_one_operator_commit(tmp_path: Path, name: str) -> None:
    store = make_store(tmp_path / "store")
    try:
        done = apply_template(store, name)
        files = TEMPLATES[name]
        assert done.seq == 1 and set(done.value) == set(files)
        entries = log(store)
        assert [(e.seq, e.actor, e.command) for e in entries] == [(1, "operator", "template"), (0, "memvault", "init")]
        assert set(entries[0].paths) == set(files)
        for path, text in files.items():
            assert read_at(store, path).decode() == text
        expected = {
            "project": {"progress.md", "features.md", "init.md"},
            "support": {"progress.md", "guidelines.md", "customers/README.md"},
            "research": {"progress.md", "sources.md", "findings.md", "questions.md"},
        }[name]
        assert set(files) == {INDEX} | {f"/memories/{p}" for p in expected}

        index = files[INDEX]
        assert index.splitlines()[0] == f"# Memory index: {'customer support' if name == 'support' else name}"
        assert index_head(index.encode()) == index  # the whole index starts every session
        assert len(index.splitlines()) <= 20
        listed = {word.rstrip(":.,") for word in index.split() if word.startswith("/memories/")}
        assert listed == set(files) - {INDEX}  # the index names every other file, and only those
    finally:
        store.close()


def test_template_refusals_write_nothing(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store")
    try:
        with pytest.raises(InvalidInputError) as caught:
            apply_template(store, "projects")
        assert str(caught.value) == "Error: Unknown template 'projects'; use one of project, research, support."
        assert template_names() == ("project", "research", "support")
        assert store.head[1] == 0

        store.put_file("/memories/progress.md", "mine\n")
        with pytest.raises(PathExistsError):
            apply_template(store, "project")  # never overwrites what is there
        assert store.head[1] == 1
        assert read_at(store, "/memories/progress.md") == b"mine\n"
        assert [e.command for e in log(store)] == ["put", "init"]
    finally:
        store.close()


def test_init_template_cli_then_hook(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--template", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "memvault: Unknown template 'nope'; use one of project, research, support.\n"
    assert not env.exists()  # refused before the store was created

    assert main(["init", "--template", "project"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Created an empty memory store in {env}"
    assert out[1].startswith("Wrote the project template as commit #1: /memories/MEMORY.md, ")

    assert main(["log", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [(e["seq"], e["actor"], e["command"]) for e in entries] == [
        (1, "operator", "template"),
        (0, "memvault", "init"),
    ]
    assert set(entries[0]["paths"]) == set(TEMPLATES["project"])

    assert main(["hook", "session-start"]) == 0
    assert _context(capsys.readouterr().out) == TEMPLATES["project"][INDEX]
