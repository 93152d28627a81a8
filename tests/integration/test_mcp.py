"""``memvault mcp``: the MCP server, driven by the ``mcp`` SDK's own client.

In process (memory transport): the tool list and its annotations; every memory command's
result (and error) text identical to MemoryTool's on a twin store; hostile paths refused alike;
actor and session recorded; history tools bounded. Then the real transports: a stdio subprocess
(``python -m memvault.cli mcp``), and streamable HTTP behind its bearer token.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import httpx2
from anthropic.lib.tools._beta_functions import ToolError
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import memvault
from conftest import FAST_KDF, PASSPHRASE, make_store
from memvault.admin.config import change_settings
from memvault.agent.mcp import TOOL_NAMES, build_server, host_guard, is_loopback
from memvault.cli import main
from memvault.errors import InternalError
from memvault.history import log, read_at, tree_at
from memvault.settings import ScrubSettings, StoreSettings

MEMORY_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
HOSTILE = ["/memories/../etc/passwd", "/etc/passwd", "memories/a.md", "/memories/a/../../x", "/memories//a", "/memories/a\x00b"]  # fmt: skip


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn)


def text_of(result: Any) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return str(result.content[0].text)


async def call(client: Client, data: dict[str, Any]) -> tuple[str, bool]:
    """A memory tool command (the API's dict) through its MCP tool: (text, is_error)."""
    args = {k: v for k, v in data.items() if k != "command"}
    result = await client.call_tool(f"memory_{data['command']}", args)
    return text_of(result), result.is_error


def memory_tool(tool: memvault.MemoryTool, data: dict[str, Any]) -> tuple[str, bool]:
    try:
        return str(tool.call(data)), False
    except ToolError as err:
        return str(err.content), True


# -- in process ------------------------------------------------------------------------------------


def test_tool_list_and_annotations(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s")

    async def go() -> Any:
        async with Client(build_server(store)) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go)}
    store.close()
    assert set(tools) == set(TOOL_NAMES)
    assert {f"memory_{c}" for c in MEMORY_COMMANDS} <= set(tools)
    assert not [n for n in tools if re.search(r"redact|key|expir|import|export|erase|shred", n)]
    for name in ("memory_view", "memory_log", "memory_show", "memory_diff", "memory_blame"):
        assert tools[name].annotations is not None and tools[name].annotations.read_only_hint is True, name
    for name in ("memory_create", "memory_str_replace", "memory_insert", "memory_delete", "memory_rename"):
        assert tools[name].annotations is not None and tools[name].annotations.read_only_hint is False, name
    revert = tools["memory_revert"].annotations
    assert revert is not None and revert.destructive_hint is True and revert.read_only_hint is False
    assert tools["memory_delete"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["memory_insert"].annotations.destructive_hint is False  # type: ignore[union-attr]
    view = tools["memory_view"].input_schema
    assert view["required"] == ["path"] and "view_range" in view["properties"]
    assert "description" in view["properties"]["path"]
    assert set(tools["memory_rename"].input_schema["required"]) == {"old_path", "new_path"}
    assert set(tools["memory_insert"].input_schema["required"]) == {"path", "insert_line", "insert_text"}
    assert tools["memory_str_replace"].input_schema["required"] == ["path", "old_str"]


def test_every_command_matches_memory_tool(tmp_path: Path) -> None:
    """Same commands on twin stores: the MCP text (and error flag) is MemoryTool's, byte for byte."""
    settings = StoreSettings(view_max_chars=300)
    served, twin = make_store(tmp_path / "a", settings), make_store(tmp_path / "b", settings)
    tool = memvault.MemoryTool(twin, actor="mcp", session="twin")
    long_text = "".join(f"line {i} " + "x" * 20 + "\n" for i in range(40))
    commands: list[dict[str, Any]] = [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/notes/todo.md", "file_text": "one\ntwo\nthree\n"},
        {"command": "create", "path": "/memories/notes/todo.md", "file_text": "again"},
        {"command": "view", "path": "/memories/notes/todo.md"},
        {"command": "view", "path": "/memories/notes/todo.md", "view_range": [2, 3]},
        {"command": "str_replace", "path": "/memories/notes/todo.md", "old_str": "two", "new_str": "TWO"},
        {"command": "str_replace", "path": "/memories/notes/todo.md", "old_str": "missing", "new_str": "x"},
        {"command": "create", "path": "/memories/dup.md", "file_text": "a\na\n"},
        {"command": "str_replace", "path": "/memories/dup.md", "old_str": "a"},
        {"command": "insert", "path": "/memories/notes/todo.md", "insert_line": 1, "insert_text": "one and a half\n"},
        {"command": "insert", "path": "/memories/notes/todo.md", "insert_line": 99, "insert_text": "x"},
        {"command": "create", "path": "/memories/long.md", "file_text": long_text},
        {"command": "view", "path": "/memories/long.md"},
        {"command": "view", "path": "/memories/long.md", "view_range": [30, -1]},
        {"command": "rename", "old_path": "/memories/dup.md", "new_path": "/memories/notes/todo.md"},
        {"command": "rename", "old_path": "/memories/dup.md", "new_path": "/memories/archive/dup.md"},
        {"command": "delete", "path": "/memories"},
        {"command": "delete", "path": "/memories/nope.md"},
        {"command": "delete", "path": "/memories/archive"},
        {"command": "view", "path": "/memories/nope.md"},
        {"command": "view", "path": "/memories"},
    ]
    for path in HOSTILE:
        commands.append({"command": "view", "path": path})
        commands.append({"command": "create", "path": path, "file_text": "pwned"})
    commands.append({"command": "rename", "old_path": "/memories/long.md", "new_path": "/etc/passwd"})

    async def go() -> list[tuple[str, bool]]:
        async with Client(build_server(served)) as client:
            return [await call(client, data) for data in commands]

    got = run(go)
    want = [memory_tool(tool, data) for data in commands]
    for data, mine, theirs in zip(commands, got, want, strict=True):
        assert mine == theirs, data
    assert [i for i, (_text, is_error) in enumerate(got) if is_error] == [2, 6, 8, 10, 14, 16, 17, 19, *range(21, 34)]
    assert "Use view_range to read on, e.g. view_range [" in got[12][0] and "     1\tline 0 " in got[12][0]
    assert got[13][0].splitlines()[1] == "    30\tline 29 " + "x" * 20
    assert got[20][0].endswith("\n29B\t/memories/notes/todo.md")  # the final listing
    assert got[21][0] == "Error: Invalid path /memories/../etc/passwd: it contains a '.' or '..' segment"
    assert got[23][0] == got[33][0] == "Error: Invalid path /etc/passwd: it must be /memories or start with /memories/"
    assert [e.path for e in tree_at(served)] == [e.path for e in tree_at(twin)]
    assert not any("passwd" in e.path or "pwned" in e.path for e in tree_at(served))
    served.close()
    twin.close()


def test_actor_and_session_recorded(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s")

    async def write(server: Any, name: str) -> str:
        async with Client(server) as client:
            text, is_error = await call(client, {"command": "create", "path": f"/memories/{name}", "file_text": "x"})
            assert not is_error, text
            await call(client, {"command": "str_replace", "path": f"/memories/{name}", "old_str": "x", "new_str": "y"})
            return text_of(await client.call_tool("memory_log", {"limit": 1}))

    async def go() -> list[str]:
        anonymous = build_server(store, actor="agent-9")
        named = build_server(store, actor="agent-9", session="s-42")
        return [await write(anonymous, "a.md"), await write(anonymous, "b.md"), await write(named, "c.md")]

    logs = run(go)
    entries = log(store, limit=6)
    store.close()
    assert [e.actor for e in entries] == ["agent-9"] * 6
    c, b, a = entries[0:2], entries[2:4], entries[4:6]
    assert [e.session for e in c] == ["s-42", "s-42"]
    for pair in (a, b):  # one random id per connection, the same for all its commands
        assert re.fullmatch(r"[0-9a-f]{32}", pair[0].session) and pair[0].session == pair[1].session
    assert a[0].session != b[0].session
    assert json.loads(logs[2])["commits"][0]["session"] == "s-42"
    assert json.loads(logs[0])["commits"][0]["actor"] == "agent-9"


def test_history_tools_and_bounds(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(view_max_chars=1000))

    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(build_server(store, session="h")) as client:

            async def tool(name: str, **args: Any) -> tuple[str, bool]:
                result = await client.call_tool(name, args)
                return text_of(result), result.is_error

            for i in range(12):
                await call(client, {"command": "create", "path": f"/memories/f{i}.md", "file_text": f"v{i}\n"})
            await call(client, {"command": "str_replace", "path": "/memories/f3.md", "old_str": "v3", "new_str": "w3"})
            out["log"] = await tool("memory_log")
            out["log_next"] = await tool("memory_log", skip=json.loads(out["log"][0])["next_skip"])
            out["log_path"] = await tool("memory_log", path="/memories/f3.md")
            out["log_bad"] = await tool("memory_log", limit=0)
            out["log_hostile"] = await tool("memory_log", path="/memories/../x")
            out["show"] = await tool("memory_show")
            out["diff"] = await tool("memory_diff", old="#4", path="/memories/f3.md")
            out["blame"] = await tool("memory_blame", path="/memories/f3.md")
            out["unknown"] = await tool("memory_show", rev="nope")
            out["revert"] = await tool("memory_revert", rev="HEAD")
            out["again"] = await tool("memory_revert", rev="#13")
            await call(client, {"command": "str_replace", "path": "/memories/f3.md", "old_str": "v3", "new_str": "z3"})
            out["conflict"] = await tool("memory_revert", rev="#13")
            out["view"] = await call(client, {"command": "view", "path": "/memories/f3.md"})
            out["revert_hostile"] = await tool("memory_revert", rev="../../etc")
            big = "".join(f"{i:02} " + '"quoted" ' * 8 + "\n" for i in range(60)) + "y" * 900 + "\n"
            await call(client, {"command": "create", "path": "/memories/big.md", "file_text": big})
            out["big_show"] = await tool("memory_show")
            out["big_blame"] = await tool("memory_blame", path="/memories/big.md", start_line=3)
            out["big_blame_end"] = await tool("memory_blame", path="/memories/big.md", start_line=61)
        return out

    out = run(go)
    page = json.loads(out["log"][0])
    assert len(out["log"][0]) <= 1000 and page["more"] is True
    assert 1 <= len(page["commits"]) < 14 and page["next_skip"] == len(page["commits"])
    assert "use skip to read on" in page["note"]
    following = json.loads(out["log_next"][0])["commits"]
    assert following[0]["seq"] == page["commits"][-1]["seq"] - 1
    assert [c["command"] for c in json.loads(out["log_path"][0])["commits"]] == ["str_replace", "create"]
    assert out["log_bad"] == ("Error: `limit` must be between 1 and 500.", True)
    assert out["log_hostile"] == ("Error: Invalid path /memories/../x: it contains a '.' or '..' segment", True)
    show = json.loads(out["show"][0])
    assert show["command"] == "str_replace" and show["session"] == "h" and "+w3\n" in show["patch"]
    diff = json.loads(out["diff"][0])
    assert [f["path"] for f in diff["files"]] == ["/memories/f3.md"] and "-v3\n+w3\n" in diff["patch"]
    blame = json.loads(out["blame"][0])
    assert blame["lines"] == [[1, 13, "w3"]] and blame["commits"]["13"]["actor"] == "mcp"
    assert out["unknown"] == ("Error: Unknown revision 'nope'.", True)
    reverted = json.loads(out["revert"][0])
    assert reverted["command"] == "revert" and reverted["target_seq"] == 13 and reverted["seq"] == 14
    again = json.loads(out["again"][0])
    assert again["commit"] is None and again["note"].startswith("Nothing to revert")
    assert out["conflict"][1] is True
    assert re.fullmatch(
        r"Error: Cannot revert commit \w+ \(#13\): changed after it: /memories/f3\.md\. .*", out["conflict"][0]
    )
    assert out["view"] == ("Here's the content of /memories/f3.md with line numbers:\n     1\tz3", False)
    assert out["revert_hostile"] == ("Error: Unknown revision '../../etc'.", True)
    for name in ("big_show", "big_blame", "big_blame_end"):
        assert len(out[name][0]) <= 1000 and not out[name][1], name
    big_show = json.loads(out["big_show"][0])
    assert big_show["patch"].startswith("diff --memvault a/memories/big.md b/memories/big.md\n--- /dev/null\n")
    assert big_show["note"].startswith("The patch has 5") and "Use memory_diff with a path" in big_show["note"]
    big_blame = json.loads(out["big_blame"][0])
    assert big_blame["lines"][0] == [3, 16, "02 " + '"quoted" ' * 8] and big_blame["total_lines"] == 61
    assert big_blame["note"] == f"Lines 3-{big_blame['lines'][-1][0]} of 61; use start_line to read on."
    last = json.loads(out["big_blame_end"][0])
    assert len(last["lines"]) == 1 and last["lines"][0][2] == "y" * 248 and "cut" in last  # 250 with its quotes
    reverts = log(store, limit=3)[2]
    assert (reverts.command, reverts.actor, reverts.session) == ("revert", "mcp", "h")
    store.close()


def test_history_times_are_iso_8601_as_in_log_json(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """memory_log, memory_show and memory_blame give times as ``memvault log --json`` does."""
    store = memvault.MemoryStore.create(env, passphrase="cli passphrase", kdf=FAST_KDF)

    async def go() -> dict[str, Any]:
        async with Client(build_server(store)) as client:
            await call(client, {"command": "create", "path": "/memories/t.md", "file_text": "one\n"})
            await call(client, {"command": "create", "path": "/memories/u.md", "file_text": "two\n"})
            return {
                name: json.loads(text_of(await client.call_tool(name, args)))
                for name, args in (
                    ("memory_log", {}),
                    ("memory_show", {}),
                    ("memory_blame", {"path": "/memories/t.md"}),
                )
            }

    out = run(go)
    assert main(["log", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    iso = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")
    mcp_log = out["memory_log"]["commits"]
    assert [(c["seq"], c["time"], c["timestamp"]) for c in mcp_log] == [
        (c["seq"], c["time"], c["timestamp"]) for c in cli
    ]
    assert all(iso.fullmatch(c["time"]) and isinstance(c["timestamp"], float) for c in mcp_log)
    assert (out["memory_show"]["time"], out["memory_show"]["timestamp"]) == (cli[0]["time"], cli[0]["timestamp"])
    blamed = out["memory_blame"]["commits"]["1"]
    assert (blamed["time"], blamed["timestamp"]) == (cli[1]["time"], cli[1]["timestamp"])
    store.close()


def test_memory_revert_puts_back_only_what_the_policy_accepts(tmp_path: Path) -> None:
    """History written under a laxer policy: memory_revert masks what the policy masks now, and
    refuses (naming the kind, never the value) a path or a text the tool's own writes refuse."""
    key, kind = "AKIA" + "Q3EGTX5RLW7NZ4PB", "aws_access_key_id"
    store = make_store(tmp_path / "s", StoreSettings(scrub=ScrubSettings(policy={kind: "allow"})))

    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(build_server(store)) as client:

            async def revert(seq: int) -> tuple[str, bool]:
                result = await client.call_tool("memory_revert", {"rev": f"#{seq}"})
                return text_of(result), result.is_error

            await call(client, {"command": "create", "path": "/memories/c.md", "file_text": f"id {key}\n"})  # 1
            await call(client, {"command": "delete", "path": "/memories/c.md"})  # 2
            await call(client, {"command": "create", "path": f"/memories/{key}.md", "file_text": "x\n"})  # 3
            await call(client, {"command": "rename", "old_path": f"/memories/{key}.md", "new_path": "/memories/n.md"})
            change_settings(store, {f"scrub.policy.{kind}": "redact"})  # 5
            out["rename_back"] = await call(
                client, {"command": "rename", "old_path": "/memories/n.md", "new_path": f"/memories/{key}.md"}
            )
            out["revert_rename"] = await revert(4)
            out["head_after_refusal"] = store.head[1]
            out["revert_delete"] = await revert(2)
            out["view"] = await call(client, {"command": "view", "path": "/memories/c.md"})
            await call(client, {"command": "delete", "path": "/memories/c.md"})  # 7
            change_settings(store, {f"scrub.policy.{kind}": "reject"})  # 8
            out["masked_back"] = await revert(7)  # what comes back is the masked text: accepted
            await call(client, {"command": "delete", "path": "/memories/c.md"})  # 10
            out["rejected"] = await revert(2)  # the text of #1 holds the key: refused
        return out

    out = run(go)
    assert out["rename_back"][1] is True and kind in out["rename_back"][0]
    text, is_error = out["revert_rename"]
    assert is_error and f"({kind})" in text and key not in text and "Nothing was written" in text
    assert out["head_after_refusal"] == 5
    reverted = json.loads(out["revert_delete"][0])
    assert reverted["seq"] == 6 and reverted["findings"] == {kind: 1}
    assert f"1 {kind}" in reverted["note"] and key not in out["revert_delete"][0]
    assert out["view"] == (
        f"Here's the content of /memories/c.md with line numbers:\n     1\tid [REDACTED:{kind}]",
        False,
    )
    text, is_error = out["rejected"]
    assert is_error and f"({kind})" in text and "/memories/c.md" in text and key not in text
    assert json.loads(out["masked_back"][0])["findings"] == {}
    assert store.head[1] == 10
    assert [e.path for e in tree_at(store)] == ["/memories/n.md"]
    store.close()


def test_unexpected_errors_are_generic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path / "s")

    def boom(*_args: Any, **_kwargs: Any) -> str:
        raise RuntimeError("secret content at /home/someone/.ssh")

    monkeypatch.setattr("memvault.agent.mcp.run_command", boom)

    async def go() -> tuple[str, bool]:
        async with Client(build_server(store)) as client:
            return await call(client, {"command": "view", "path": "/memories"})

    text, is_error = run(go)
    store.close()
    assert is_error and text == "Error: " + str(InternalError())
    assert "secret" not in text and "RuntimeError" not in text


# -- the command line ------------------------------------------------------------------------------


def test_non_loopback_refused(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for host in ("0.0.0.0", "192.168.1.10", "example.com"):  # noqa: S104 (refused, never bound)
        assert main(["mcp", "--http", "--host", host]) == 2
        err = capsys.readouterr().err
        assert f"Refusing to serve MCP on {host}" in err and "--allow-remote" in err and "TLS" in err
    assert all(map(is_loopback, ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "10.0.0.1", "::", "example.com", "localhost.evil.com")))  # noqa: S104


def test_token_file_must_be_private(env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # fmt: skip
    make_store(env).close()
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    loose = tmp_path / "token"
    loose.write_text("t" * 40)
    loose.chmod(0o644)
    assert main(["mcp", "--http", "--port", "0", "--token-file", str(loose)]) == 2
    assert "readable by you only (chmod 600)" in capsys.readouterr().err
    loose.chmod(0o600)
    loose.write_text("short")
    assert main(["mcp", "--http", "--port", "0", "--token-file", str(loose)]) == 2
    assert "holds no token" in capsys.readouterr().err


def test_missing_sdk_says_what_to_install(env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if the SDK were not installed
    monkeypatch.delitem(sys.modules, "memvault.agent.mcp", raising=False)
    import memvault.agent

    monkeypatch.delattr(memvault.agent, "mcp", raising=False)
    assert main(["mcp"]) == 2
    assert "install memvault[mcp]" in capsys.readouterr().err


# -- real transports -------------------------------------------------------------------------------


def _server_env(store: Path) -> dict[str, str]:
    return {"MEMVAULT_STORE": str(store), "MEMVAULT_PASSPHRASE": PASSPHRASE, "NO_COLOR": "1"}


def test_stdio_subprocess(tmp_path: Path) -> None:
    make_store(tmp_path / "s").close()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memvault.cli", "mcp", "--actor", "stdio-agent"],
        env=_server_env(tmp_path / "s"),
    )

    async def go() -> tuple[str, str, str]:
        async with Client(params, read_timeout_seconds=30) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(TOOL_NAMES)
            before, _ = await call(client, {"command": "view", "path": "/memories"})
            created, _ = await call(client, {"command": "create", "path": "/memories/s.md", "file_text": "hello\n"})
            refused, _ = await call(client, {"command": "view", "path": "/etc/passwd"})
            return before, created, refused

    before, created, refused = run(go)
    assert before.endswith("excluding hidden items and node_modules:\n4.0K\t/memories")
    assert created == "File created successfully at: /memories/s.md"
    assert refused.startswith("Error: ") and "/etc/passwd" in refused
    store = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert read_at(store, "/memories/s.md") == b"hello\n"
    head = log(store, limit=1)[0]
    store.close()
    assert (head.command, head.actor) == ("create", "stdio-agent") and re.fullmatch(r"[0-9a-f]{32}", head.session)


def _start_http(store: Path, token_file: Path, host: str = "127.0.0.1") -> tuple[subprocess.Popen[bytes], str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memvault.cli", "mcp", "--http", "--host", host, "--port", "0", "--token-file",
         str(token_file), "--actor", "http-agent"],
        env={**os.environ, **_server_env(store)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + 20
    while b"serving MCP at " not in seen:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the server did not start: {seen!r}")
        if select.select([proc.stderr], [], [], 0.2)[0]:
            seen += os.read(proc.stderr.fileno(), 4096)
    url = re.search(rb"serving MCP at (\S+)", seen).group(1).decode()  # type: ignore[union-attr]
    return proc, url, seen.decode()


def test_streamable_http_with_bearer_token(tmp_path: Path) -> None:
    make_store(tmp_path / "s").close()
    token_file = tmp_path / "config" / "mcp-token"
    proc, url, banner = _start_http(tmp_path / "s", token_file)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert f"made a new MCP bearer token in {token_file}" in banner
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 40 and token not in banner

        session_ids: list[str] = []

        async def remember(response: httpx2.Response) -> None:
            sid = response.headers.get("mcp-session-id")
            if sid and sid not in session_ids:
                session_ids.append(sid)

        async def go() -> dict[str, Any]:
            out: dict[str, Any] = {}
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            async with httpx2.AsyncClient(timeout=10) as raw:
                for name, headers in (
                    ("none", {}),
                    ("wrong", {"Authorization": "Bearer " + "x" * len(token)}),
                    ("prefix", {"Authorization": "Bearer " + token[:-1]}),
                    ("basic", {"Authorization": "Basic " + token}),
                ):
                    response = await raw.post(url, json=initialize, headers=headers)
                    out[name] = (response.status_code, response.headers.get("www-authenticate"))
            auth = {"Authorization": f"Bearer {token}"}
            async with httpx2.AsyncClient(headers=auth, timeout=30, event_hooks={"response": [remember]}) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                    out["create"] = await call(
                        client, {"command": "create", "path": "/memories/h.md", "file_text": "x"}
                    )
                    out["hostile"] = await call(client, {"command": "view", "path": "/memories/../etc/passwd"})
            async with httpx2.AsyncClient(headers=auth, timeout=30) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:  # newest protocol
                    out["view"] = await call(client, {"command": "view", "path": "/memories/h.md"})
            return out

        out = run(go)
        for name in ("none", "wrong", "prefix", "basic"):
            assert out[name] == (401, 'Bearer realm="memvault"'), name
        assert out["create"] == ("File created successfully at: /memories/h.md", False)
        assert out["hostile"] == ("Error: Invalid path /memories/../etc/passwd: it contains a '.' or '..' segment", True)  # fmt: skip
        assert out["view"] == ("Here's the content of /memories/h.md with line numbers:\n     1\tx", False)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
            assert proc.stderr is not None
            proc.stderr.close()
    assert status == 0
    assert len(session_ids) == 1
    store = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    head = log(store, limit=1)[0]
    store.close()
    assert (head.command, head.actor, head.session) == ("create", "http-agent", session_ids[0])


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
        assert proc.stderr is not None
        proc.stderr.close()


def _ipv6_loopback() -> bool:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        return False
    return True


#: Every spelling of a loopback bind: the SDK checks Host/Origin for the first three only.
LOOPBACK_BINDS = ["127.0.0.1", "localhost", "::1", "127.0.0.2", "127.1.2.3", "[::1]", "0:0:0:0:0:0:0:1"]


@pytest.mark.parametrize("bind", LOOPBACK_BINDS)
def test_http_host_and_origin_checked_for_every_loopback_bind(tmp_path: Path, bind: str) -> None:
    """DNS rebinding: a web page whose name now resolves to the loopback address sends its own
    name as Host (and its own Origin); whatever spelling the server was bound with, that request
    is refused, before the bearer token is even looked at."""
    if ":" in bind and not _ipv6_loopback():
        pytest.skip("this host has no IPv6 loopback")
    make_store(tmp_path / "s").close()
    token_file = tmp_path / "config" / "mcp-token"
    proc, url, _banner = _start_http(tmp_path / "s", token_file, bind)
    try:
        port = int(re.search(r":(\d+)/mcp$", url).group(1))  # type: ignore[union-attr]
        authority = url[len("http://") : -len("/mcp")]
        token = token_file.read_text().strip()
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        base = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        cases: dict[str, dict[str, str]] = {
            "as addressed": {},
            "localhost": {"Host": f"localhost:{port}"},
            "origin localhost": {"Origin": f"http://localhost:{port}"},
            "origin as addressed": {"Origin": f"http://{authority}"},
            "rebound name": {"Host": f"evil.example:{port}"},
            "rebound name, no token": {"Host": f"evil.example:{port}", "Authorization": ""},
            "other port": {"Host": f"{authority.rpartition(':')[0]}:{port + 1}"},
            "no port": {"Host": authority.rpartition(":")[0]},
            "name prefix": {"Host": f"localhost.evil.example:{port}"},
            "foreign origin": {"Origin": f"http://evil.example:{port}"},
            "origin other port": {"Origin": f"http://localhost:{port + 1}"},
            "null origin": {"Origin": "null"},
        }

        async def go() -> dict[str, int]:
            got: dict[str, int] = {}
            async with httpx2.AsyncClient(timeout=10) as http:
                for name, headers in cases.items():
                    response = await http.post(url, json=initialize, headers={**base, **headers})
                    got[name] = response.status_code
            return got

        got = run(go)
    finally:
        status = _stop(proc)
    assert status == 0
    allowed = ("as addressed", "localhost", "origin localhost", "origin as addressed")
    assert {name: got[name] for name in allowed} == dict.fromkeys(allowed, 200)
    misdirected = ("rebound name", "rebound name, no token", "other port", "no port", "name prefix")
    assert {name: got[name] for name in misdirected} == dict.fromkeys(misdirected, 421)
    forbidden = ("foreign origin", "origin other port", "null origin")
    assert {name: got[name] for name in forbidden} == dict.fromkeys(forbidden, 403)


def test_host_guard_header_forms() -> None:
    """The Host/Origin check on header forms a client library would not send: several Host
    headers, none, a bracketed IPv4 address, a zone id, a trailing dot, https or null origins."""
    reached: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope["type"])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    def status(guarded: Any, *headers: tuple[str, str]) -> int:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "headers": [(k.encode(), v.encode()) for k, v in headers]}
        run(lambda: guarded(scope, receive, send))
        return int(sent[0]["status"])

    v4 = host_guard(app, "127.0.0.2", 8000)
    v6 = host_guard(app, "::1", 8000)
    assert status(v4, ("host", "127.0.0.2:8000")) == 200
    assert status(v4, ("Host", "LOCALHOST:8000"), ("origin", "http://[::1]:8000")) == 200
    assert status(v6, ("host", "[0:0:0:0:0:0:0:1]:8000"), ("origin", "http://127.9.9.9:8000")) == 200
    for headers in (
        (),
        (("host", "127.0.0.2:8000"), ("host", "evil.example:8000")),
        (("host", "127.0.0.1:8000"),),  # another loopback address than the one bound
        (("host", "[127.0.0.2]:8000"),),
        (("host", "127.0.0.2:8000:1"),),
        (("host", "127.0.0.2:+8000"),),
        (("host", "localhost.:8000"),),
        (("host", "127.0.0.2:8000 "),),
    ):
        assert status(v4, *headers) == 421, headers
    for host in ("[::1%lo]:8000", "::1:8000", "[::1:8000", "[::2]:8000"):
        assert status(v6, ("host", host)) == 421, host
    for origin in ("https://localhost:8000", "null", "http://localhost", "http://evil.example:8000", "file://"):
        assert status(v4, ("host", "127.0.0.2:8000"), ("origin", origin)) == 403, origin
    two = (("host", "127.0.0.2:8000"), ("origin", "http://localhost:8000"), ("origin", "http://evil.example"))
    assert status(v4, *two) == 403
    assert reached == ["http"] * 3
    with pytest.raises(ValueError):
        host_guard(app, "10.0.0.1", 8000)
