"""``memvault mcp --server URL --memory-store ID``: an MCP server whose six memory commands run on a
memory store of a memvault server (the API key from ``$MEMVAULT_API_KEY``), with the local tool's
exact texts, attributed to the MCP session; no history tools."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("starlette", reason="the server needs memvault[server]")

from anthropic.lib.tools._beta_functions import ToolError  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

import memvault  # noqa: E402
from conftest import make_store  # noqa: E402
from memvault.history import log  # noqa: E402
from memvault.server.root import API_STORE_SETTINGS  # noqa: E402
from serversupport import Served  # noqa: E402

COMMANDS: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes/todo.md", "file_text": "one\ntwo\n"},
    {"command": "create", "path": "/memories/notes/todo.md", "file_text": "again"},
    {"command": "str_replace", "path": "/memories/notes/todo.md", "old_str": "two", "new_str": "TWO"},
    {"command": "insert", "path": "/memories/notes/todo.md", "insert_line": 1, "insert_text": "1.5\n"},
    {"command": "view", "path": "/memories/notes/todo.md"},
    {"command": "rename", "old_path": "/memories/notes", "new_path": "/memories/archive"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "delete", "path": "/memories/archive/todo.md"},
    {"command": "view", "path": "/memories"},
]


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn)


def test_mcp_over_a_server_store_matches_the_local_tool(served: Served, tmp_path: Path) -> None:
    store_id = served.root.create_store("mcp").id
    env = dict(os.environ, MEMVAULT_API_KEY=served.plain_key, NO_COLOR="1")
    env.pop("MEMVAULT_PASSPHRASE", None)  # the worker holds no store key
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memvault.cli", "mcp", "--server", served.url, "--memory-store", store_id, "--session", "mcp-1"],
        env=env,
    )

    async def go() -> tuple[set[str], list[tuple[str, bool]]]:
        async with Client(params, read_timeout_seconds=30) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            out = []
            for data in COMMANDS:
                args = {k: v for k, v in data.items() if k != "command"}
                result = await client.call_tool(f"memory_{data['command']}", args)
                out.append((str(result.content[0].text), bool(result.is_error)))
            return names, out

    names, got = run(go)
    assert names == {f"memory_{c}" for c in ("view", "create", "str_replace", "insert", "delete", "rename")}
    twin = make_store(tmp_path / "twin", API_STORE_SETTINGS)
    tool = memvault.MemoryTool(twin, session="twin")
    want = []
    for data in COMMANDS:
        try:
            want.append((str(tool.call(data)), False))
        except ToolError as err:
            want.append((str(err.content), True))
    assert got == want
    assert [error for _text, error in got] == [False, False, True, False, False, False, False, True, False, False]
    with served.root.memories(store_id) as memories:
        commits = log(memories.store, limit=3)
    assert {(c.actor, c.session) for c in commits} == {(served.plain_id, "mcp-1")}


def test_mcp_server_mode_needs_a_key_and_a_store(served: Served) -> None:
    from memvault.cli import main

    env_key = os.environ.pop("MEMVAULT_API_KEY", None)
    try:
        assert main(["mcp", "--server", served.url]) != 0
        assert main(["mcp", "--server", served.url, "--memory-store", "memstore_x"]) == 12  # no key
    finally:
        if env_key is not None:
            os.environ["MEMVAULT_API_KEY"] = env_key
