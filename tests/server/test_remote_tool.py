"""RemoteMemoryTool against a real memvault server over HTTP, twinned with the local MemoryTool.

Twin stores: a local store made with the server's settings for API stores
(``API_STORE_SETTINGS``) driven by :class:`memvault.MemoryTool`, and a memory store of a live server
(``tests/serversupport.py``) driven by :class:`memvault.RemoteMemoryTool` with an API key. The same
commands go to both and every outcome (the result, or the ``ToolError`` text) must be equal, type
and bytes: fixed sequences through every error path, and random ones (hypothesis). Then the
commits on the server (one per mutating command; actor the API key's id, session verbatim),
``clear_all_memory`` on both, and whole sessions through the SDK's sync and async tool runners
against the scripted fake Messages API.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

sys.path.append(str(Path(__file__).resolve().parents[1] / "integration"))  # the fake Messages API

from anthropic.lib.tools import ToolError  # noqa: E402
from fake_messages_api import ScriptedMessagesAPI, async_client, sync_client  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_sdk_runner import (  # noqa: E402
    EXPECTED_COMMITS,
    FINAL_TEXT,
    MAX_TOKENS,
    MODEL,
    SCRIPT,
    USER_PROMPT,
    assert_session_on_the_wire,
    final_text,
)

from conftest import FAST_KDF, PASSPHRASE  # noqa: E402
from fake_messages_http import FakeMessagesServer  # noqa: E402
from memvault import AsyncRemoteMemoryTool, MemoryStore, MemoryTool, RemoteMemoryTool  # noqa: E402
from memvault.history import log  # noqa: E402
from memvault.keys.slots import Unlock  # noqa: E402
from memvault.server.root import API_STORE_SETTINGS, ServerRoot  # noqa: E402
from serversupport import serve_root  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
Outcome = tuple[str, Any]  # ("ok", result) or ("error", the ToolError's content)
SESSION = "worker-7 / conversation ü-42"


@dataclass
class Live:
    """A served root: its URL and the open root the server uses (keys, stores, histories)."""

    url: str
    root: ServerRoot

    @contextmanager
    def store(self, store_id: str) -> Iterator[MemoryStore]:
        """Memory store ``store_id`` as the server has it open."""
        with self.root.memories(store_id) as memories:
            yield memories.store


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One server for the module (tests/serversupport.py); each test makes its own memory stores on it."""
    root = ServerRoot.init(tmp_path_factory.mktemp("remote-tool") / "root", Unlock(passphrase=PASSPHRASE), kdf=FAST_KDF)
    uvicorn_server, thread, port, _app = serve_root(root)
    yield Live(f"http://127.0.0.1:{port}", root)
    uvicorn_server.should_exit = True
    thread.join(timeout=30)


class Twins:
    """A local store with a MemoryTool and a fresh memory store of the server with a
    RemoteMemoryTool whose key may use that store only."""

    def __init__(self, server: Live, local_path: Path, session: str = SESSION) -> None:
        self.local = MemoryStore.create(
            local_path, passphrase="pw long enough", kdf=FAST_KDF, settings=API_STORE_SETTINGS
        )
        self.store_id = server.root.create_store("twin").id
        record, secret = server.root.create_key("worker", stores=(self.store_id,))
        self.key_id, self.secret = record.id, secret
        self.local_tool = MemoryTool(self.local, actor="agent", session=session)
        self.remote_tool = RemoteMemoryTool(self.store_id, base_url=server.url, api_key=secret, session=session)

    def close(self) -> None:
        self.remote_tool.close()
        self.local.close()

    def both(self, command: Any) -> tuple[Outcome, Outcome]:
        return outcome(self.local_tool.call, command), outcome(self.remote_tool.call, command)

    def assert_same(self, commands: Sequence[Any]) -> list[Outcome]:
        outcomes = []
        for index, command in enumerate(commands):
            local, remote = self.both(command)
            assert remote == local, f"command #{index} {command!r}"
            assert type(remote[1]) is type(local[1])
            outcomes.append(local)
        return outcomes


def outcome(call: Any, command: Any) -> Outcome:
    try:
        return "ok", call(command)
    except ToolError as err:
        return "error", err.content


@pytest.fixture
def twins(server: Live, tmp_path: Path) -> Iterator[Twins]:
    pair = Twins(server, tmp_path / "local")
    yield pair
    pair.close()


def history(store: MemoryStore) -> list[tuple[str, tuple[str, ...]]]:
    return [(info.command, info.paths) for info in reversed(log(store)) if info.command != "init"]


Y = "/memories/x/y.md"
Z = "/memories/x/z.md"
DUP = "/memories/x/dup.md"
TEXT = "line one\nline two\nline three\n"

#: Every command and every error path the protocol has, in an order that reaches them all.
SEQUENCE: list[Any] = [
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": Y},  # missing file
    {"command": "create", "path": Y, "file_text": TEXT},
    {"command": "create", "path": Y, "file_text": "again\n"},  # exists
    {"command": "view", "path": Y},
    {"command": "view", "path": Y, "view_range": [2, 3]},
    {"command": "view", "path": Y, "view_range": [2, -1]},
    {"command": "view", "path": Y, "view_range": [5, 9]},  # out of range
    {"command": "view", "path": Y, "view_range": [3, 1]},
    {"command": "view", "path": Y, "view_range": ["a"]},  # mistyped
    {"command": "str_replace", "path": Y, "old_str": "line four", "new_str": "x"},  # no match
    {"command": "create", "path": DUP, "file_text": "same\nsame\n"},
    {"command": "str_replace", "path": DUP, "old_str": "same", "new_str": "other"},  # two matches
    {"command": "str_replace", "path": Y, "old_str": "line two", "new_str": "line 2"},
    {"command": "str_replace", "path": "/memories/x/none.md", "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": Y, "insert_line": 0, "insert_text": "first\n"},
    {"command": "insert", "path": Y, "insert_line": 4, "insert_text": "last"},
    {"command": "insert", "path": Y, "insert_line": 99, "insert_text": "far\n"},  # out of range
    {"command": "insert", "path": Y, "insert_line": -1, "insert_text": "neg\n"},
    {"command": "view", "path": Y},
    {"command": "rename", "old_path": Y, "new_path": Z},
    {"command": "create", "path": Y, "file_text": "new y\n"},
    {"command": "rename", "old_path": Z, "new_path": Y},  # onto an existing file
    {"command": "rename", "old_path": "/memories/x/gone.md", "new_path": "/memories/x/g2.md"},
    {"command": "rename", "old_path": "/memories/x", "new_path": "/memories/x/inner"},
    {"command": "view", "path": "/memories/x"},  # a directory view
    {"command": "view", "path": "/memories"},
    # Bad paths, traversal included.
    {"command": "view", "path": "/etc/passwd"},
    {"command": "view", "path": "memories/x"},
    {"command": "create", "path": "/memories/../x", "file_text": "escape\n"},
    {"command": "create", "path": "/memories/x/../../etc/passwd", "file_text": "escape\n"},
    {"command": "create", "path": "/memories/x/a\x00b.md", "file_text": "nul\n"},
    {"command": "create", "path": "/memories/x/", "file_text": "dir\n"},
    {"command": "create", "path": "/memories/n\u0303o.md", "file_text": "not NFC\n"},
    {"command": "create", "path": "/memories/\u00f1o.md", "file_text": "NFC\n"},
    # Secrets the scrubber masks, and one it leaves.
    {"command": "create", "path": "/memories/keys.md", "file_text": "key AKIAZ5GMHQWERTYUIOP1 here\n"},
    {"command": "create", "path": "/memories/pw.md", "file_text": "my password is hunter2hunter2\n"},
    {
        "command": "str_replace",
        "path": "/memories/pw.md",
        "old_str": "my",
        "new_str": "token ghp_R8d1Qm4ZpL7vN2xK9sT3wY6uB0cE5fH1jA2g",
    },
    {"command": "view", "path": "/memories/keys.md"},
    {"command": "view", "path": "/memories/pw.md"},
    # Limits and malformed input.
    {"command": "create", "path": "/memories/big.md", "file_text": "x" * (API_STORE_SETTINGS.max_file_bytes + 1)},
    {"command": "create", "path": "/memories/max.md", "file_text": "x" * API_STORE_SETTINGS.max_file_bytes},
    {"command": "insert", "path": "/memories/max.md", "insert_line": 1, "insert_text": "y"},
    {"command": "create", "path": "/memories/" + "d/" * 25 + "deep.md", "file_text": "deep\n"},
    {"command": "create", "path": "/memories/crlf.md", "file_text": "a\r\nb\r\n"},
    {"command": "view", "path": "/memories/crlf.md"},
    {"command": "create", "path": "/memories/nofield.md"},
    {"command": "frobnicate", "path": Y},
    {"path": Y},
    {"command": "view"},
    {"command": "view", "path": 7},
    {"command": "create", "path": "/memories/extra.md", "file_text": "", "unexpected": True},
    None,
    "view /memories",
    [1, 2],
    # Deletes last: a file, a missing one, a directory, the root.
    {"command": "delete", "path": DUP},
    {"command": "delete", "path": DUP},
    {"command": "delete", "path": "/memories/x"},
    {"command": "delete", "path": "/memories"},
    {"command": "view", "path": "/memories"},
]


def test_every_command_and_error_path_matches_the_local_tool(twins: Twins) -> None:
    outcomes = twins.assert_same(SEQUENCE)
    # The sequence reached both sides of every command (checked on the local tool's outcomes).
    kinds = {
        (command["command"], kind)
        for command, (kind, _) in zip(SEQUENCE, outcomes, strict=True)
        if isinstance(command, dict) and "command" in command
    }
    for name in ("view", "create", "str_replace", "insert", "delete", "rename"):
        assert {(name, "ok"), (name, "error")} <= kinds, name
    texts = [str(value) for _, value in outcomes]
    assert any("sensitive data was removed" in text for text in texts)
    assert any("[REDACTED:" in text for text in texts)
    assert any(text.startswith("Error: Invalid path /memories/../x") for text in texts), texts
    # One commit per successful mutating command, the same ones on both sides.
    with_history = [
        c
        for c, (kind, _) in zip(SEQUENCE, outcomes, strict=True)
        if kind == "ok" and isinstance(c, dict) and c.get("command") != "view"
    ]
    assert len(history(twins.local)) == len(with_history)


def test_history_on_the_server_matches_the_local_one(server: Live, twins: Twins) -> None:
    twins.assert_same(SEQUENCE[:30])
    local = history(twins.local)
    with server.store(twins.store_id) as store:
        commits = [info for info in reversed(log(store)) if info.command != "init"]
        assert [(info.command, info.paths) for info in commits] == local
        assert {(info.actor, info.session) for info in commits} == {(twins.key_id, SESSION)}


def test_the_default_session_is_a_new_random_id_per_tool(server: Live, twins: Twins) -> None:
    first = RemoteMemoryTool(twins.store_id, base_url=server.url, api_key=twins.secret)
    second = RemoteMemoryTool(twins.store_id, base_url=server.url, api_key=twins.secret)
    assert len(first.session) == 32 and int(first.session, 16) >= 0
    assert first.session != second.session
    first.call({"command": "create", "path": "/memories/default-session.md", "file_text": "s\n"})
    with server.store(twins.store_id) as store:
        newest = log(store)[0]
    assert (newest.command, newest.session, newest.actor) == ("create", first.session, twins.key_id)


def test_typed_command_methods_match_the_local_tool(twins: Twins) -> None:
    """The per-command methods (with the SDK's command models) go through the same road."""
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand, BetaMemoryTool20250818ViewCommand

    create = BetaMemoryTool20250818CreateCommand(command="create", path=Y, file_text=TEXT)
    view = BetaMemoryTool20250818ViewCommand(command="view", path=Y, view_range=[1, 2])
    assert twins.remote_tool.create(create) == twins.local_tool.create(create)
    assert twins.remote_tool.view(view) == twins.local_tool.view(view)
    with pytest.raises(ToolError) as remote:
        twins.remote_tool.create(create)
    with pytest.raises(ToolError) as local:
        twins.local_tool.create(create)
    assert remote.value.content == local.value.content == f"Error: File {Y} already exists"


def test_clear_all_memory_matches_the_local_tool(server: Live, twins: Twins) -> None:
    assert twins.remote_tool.clear_all_memory() == twins.local_tool.clear_all_memory() == "All memory cleared"
    twins.assert_same(SEQUENCE[:25])
    assert twins.remote_tool.clear_all_memory() == twins.local_tool.clear_all_memory() == "All memory cleared"
    twins.assert_same([{"command": "view", "path": "/memories"}, {"command": "view", "path": Y}])
    with server.store(twins.store_id) as store:
        newest = log(store)[0]
        assert (newest.command, newest.paths, newest.actor, newest.session) == (
            "clear",
            ("/memories",),
            twins.key_id,
            SESSION,
        )
        # An empty /memories makes no commit (the first clear above made none).
        assert [info.command for info in log(store)].count("clear") == 1
    assert history(twins.local)[-1] == ("clear", ("/memories",))


def test_async_tool_matches_the_local_tool(server: Live, twins: Twins) -> None:
    remote = AsyncRemoteMemoryTool(twins.store_id, base_url=server.url, api_key=twins.secret, session=SESSION)

    async def run() -> list[Outcome]:
        out = []
        for command in SEQUENCE[:30]:
            try:
                out.append(("ok", await remote.call(command)))
            except ToolError as err:
                out.append(("error", err.content))
        out.append(("ok", await remote.clear_all_memory()))
        await remote.aclose()
        return out

    remote_outcomes = asyncio.run(run())
    local_outcomes = [outcome(twins.local_tool.call, command) for command in SEQUENCE[:30]]
    local_outcomes.append(("ok", twins.local_tool.clear_all_memory()))
    assert remote_outcomes == local_outcomes


# -- random sequences ----------------------------------------------------------------------------------

_PATHS = [
    "/memories",
    "/memories/a.md",
    "/memories/d",
    "/memories/d/b.md",
    "/memories/d/e/c.md",
    "/memories/../a.md",
    "/memories/d/../a.md",
    "/memories/A.md",
    "memories/a.md",
]
_TEXTS = st.sampled_from(["", "one\n", "one\ntwo\n", "two", "one\none\n", "\n\n", "é ü\n", "password=hunter2hunter2\n"])
_RANGES = st.one_of(st.none(), st.lists(st.integers(-2, 5), min_size=2, max_size=2))
_PATH = st.sampled_from(_PATHS)


def _without_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


_COMMANDS = st.one_of(
    st.builds(lambda p, r: _without_none(command="view", path=p, view_range=r), _PATH, _RANGES),
    st.builds(lambda p, t: {"command": "create", "path": p, "file_text": t}, _PATH, _TEXTS),
    st.builds(lambda p, o, n: {"command": "str_replace", "path": p, "old_str": o, "new_str": n}, _PATH, _TEXTS, _TEXTS),
    st.builds(
        lambda p, i, t: {"command": "insert", "path": p, "insert_line": i, "insert_text": t},
        _PATH,
        st.integers(-1, 4),
        _TEXTS,
    ),
    st.builds(lambda p: {"command": "delete", "path": p}, _PATH),
    st.builds(lambda a, b: {"command": "rename", "old_path": a, "new_path": b}, _PATH, _PATH),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commands=st.lists(_COMMANDS, min_size=1, max_size=12))
def test_random_sequences_match_the_local_tool(
    server: Live, tmp_path_factory: pytest.TempPathFactory, commands: list[dict[str, Any]]
) -> None:
    pair = Twins(server, tmp_path_factory.mktemp("twin") / "local", session="random")
    try:
        pair.assert_same([*commands, {"command": "view", "path": "/memories"}])
        for path in _PATHS[1:]:
            pair.assert_same([{"command": "view", "path": path}])
    finally:
        pair.close()


# -- through the SDK's tool runners ---------------------------------------------------------------------


def assert_commits_of_the_script(server: Live, store_id: str, key_id: str) -> None:
    with server.store(store_id) as store:
        commits = [info for info in reversed(log(store)) if info.command != "init"]
    assert [(info.command, info.paths) for info in commits] == EXPECTED_COMMITS
    assert {(info.actor, info.session) for info in commits} == {(key_id, "s1")}


def test_sync_tool_runner_session(server: Live) -> None:
    store_id = server.root.create_store("runner").id
    record, secret = server.root.create_key("runner", stores=(store_id,))
    api = ScriptedMessagesAPI(SCRIPT)
    with (
        sync_client(api) as client,
        RemoteMemoryTool(store_id, base_url=server.url, api_key=secret, session="s1") as tool,
    ):
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": USER_PROMPT}], tools=[tool]
        )
        final = runner.until_done()
    assert final_text(final) == FINAL_TEXT
    assert_session_on_the_wire(api, "memvault", threaded=True)
    assert_commits_of_the_script(server, store_id, record.id)


def test_async_tool_runner_session(server: Live) -> None:
    store_id = server.root.create_store("async runner").id
    record, secret = server.root.create_key("async runner", stores=(store_id,))
    api = ScriptedMessagesAPI(SCRIPT)

    async def run() -> Any:
        async with (
            async_client(api) as client,
            AsyncRemoteMemoryTool(store_id, base_url=server.url, api_key=secret, session="s1") as tool,
        ):
            runner = client.beta.messages.tool_runner(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                messages=[{"role": "user", "content": USER_PROMPT}],
                tools=[tool],
                stream=True,
            )
            async for stream in runner:
                async for _event in stream:
                    pass
            return await runner.until_done()

    final = asyncio.run(run())
    assert final_text(final) == FINAL_TEXT
    assert_session_on_the_wire(api, "memvault", threaded=True)
    assert_commits_of_the_script(server, store_id, record.id)


def test_the_remote_agent_example(server: Live) -> None:
    """examples/remote_agent.py as a worker runs it: the model's API and the memory server from
    the environment, no store key anywhere in it."""
    store_id = server.root.create_store("example").id
    record, secret = server.root.create_key("example worker", stores=(store_id,))
    script = [
        [
            {
                "type": "tool_use",
                "id": "t1",
                "name": "memory",
                "input": {"command": "create", "path": "/memories/dana.md", "file_text": "Dana prefers email.\n"},
            }
        ],
        [{"type": "text", "text": "Noted: Dana prefers email."}],
    ]
    with FakeMessagesServer(script) as messages:
        env = messages.env()
        for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY", "MEMVAULT_KEY_FILE", "MEMVAULT_STORE"):
            env.pop(name, None)
        env |= {"MEMVAULT_SERVER_URL": server.url, "MEMVAULT_API_KEY": secret, "MEMVAULT_STORE_ID": store_id}
        run = subprocess.run(
            [sys.executable, str(EXAMPLES / "remote_agent.py"), "--session", "example-1", "Remember Dana."],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert messages.errors == []
        results = messages.tool_results_of(1)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Noted: Dana prefers email.\n"
    assert [block["content"] for block in results] == ["File created successfully at: /memories/dana.md"]
    with server.store(store_id) as store:
        assert store.read_text("/memories/dana.md") == "Dana prefers email.\n"
        newest = log(store)[0]
    assert (newest.command, newest.actor, newest.session) == ("create", record.id, "example-1")


def test_the_remote_agent_example_names_what_is_missing() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMVAULT_", "ANTHROPIC_"))}
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "remote_agent.py"), "hello"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr == (
        "Set ANTHROPIC_API_KEY, MEMVAULT_SERVER_URL, MEMVAULT_API_KEY, --store-id or MEMVAULT_STORE_ID "
        "to run this example.\n"
    )
