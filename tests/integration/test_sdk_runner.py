"""memvault driven by the Anthropic SDK's own tool runner, against a scripted fake Messages API.

``client.beta.messages.tool_runner(...)`` is run to completion with a memvault tool. The fake
(:mod:`fake_messages_api`) plays a scripted customer-service memory session and records every
request, so these tests assert on what actually reaches the API: the ``tool_result`` blocks (their
``tool_use_id``, ``is_error`` flag and content), the ``tools`` definition, and the threading fields.

What this SDK release puts on the wire (anthropic 2.14.0):

* ``tool_runner`` is non-streaming unless given ``stream=True`` (then every turn is an SSE stream).
* It threads the conversation by default: the first request carries ``thread: {"type": "create"}``
  plus ``tools``; each later one ``thread: {"type": "continue", "previous_message_id": ...}`` with
  only the new user message (the tool results) and no ``tools``. ``thread=False`` re-sends the
  whole history every turn instead.
* A tool's return value becomes ``{"type": "tool_result", "tool_use_id": ..., "content": ...}``
  without an ``is_error`` key. A tool that raises ``anthropic.tools.ToolError(msg)`` produces
  ``"is_error": true`` with ``msg`` as the content; any other exception produces
  ``"is_error": true`` with ``repr(exc)`` as the content (so a memvault error leaking out as a
  plain exception shows up here as a content mismatch).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anthropic
import pytest
from anthropic.tools import BetaAsyncLocalFilesystemMemoryTool, BetaLocalFilesystemMemoryTool
from fake_messages_api import ScriptedMessagesAPI, async_client, sync_client, tool_results

import memvault
from memvault import AsyncMemoryTool, MemoryStore, MemoryTool
from memvault.history import log

MODEL = "claude-sonnet-4-6"  # not on the SDK's deprecation list, so no DeprecationWarning
MAX_TOKENS = 2048
USER_PROMPT = (
    "Customer Dana (order #4521) says her parcel is late. Log the case in your notes, then tidy up: "
    "move the notes to the customers folder and delete them once the refund is confirmed."
)
MEMORY_TOOL_PARAM = {"type": "memory_20250818", "name": "memory"}

GUIDELINES_PATH = "/memories/customer_service_guidelines.xml"
GUIDELINES_XML = (
    "<guidelines>\n"
    "  <rule>Greet the customer by name.</rule>\n"
    "  <rule>Offer a refund for deliveries more than 5 days late.</rule>\n"
    "</guidelines>\n"
)
NOTES_PATH = "/memories/notes.md"
NOTES_TEXT = "# Customer notes\n- Customer: Dana (order #4521)\n- Issue: late delivery\n"
MOVED_PATH = "/memories/customers/dana.md"
INSERTED = "- Preference: email\n"
HOSTILE_PATH = "/memories/../etc/passwd"
NO_MATCH = f"No replacement was performed, old_str `VIP customer` did not appear verbatim in {NOTES_PATH}."
FINAL_TEXT = "Dana's refund is logged in the guidelines-driven notes, and the case file has been cleaned up."

ErrorStyle = Literal["memvault", "reference"]


def _tool_use(tool_use_id: str, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": "memory", "input": command}


# One assistant turn per entry; the fake answers request N with turn N.
SCRIPT: list[list[dict[str, Any]]] = [
    [
        {"type": "text", "text": "Let me check my memory directory first."},
        _tool_use("toolu_01", command="view", path="/memories"),
    ],
    [_tool_use("toolu_02", command="create", path=GUIDELINES_PATH, file_text=GUIDELINES_XML)],
    [_tool_use("toolu_03", command="create", path=NOTES_PATH, file_text=NOTES_TEXT)],
    [_tool_use("toolu_04", command="view", path=NOTES_PATH)],
    [
        _tool_use(
            "toolu_05",
            command="str_replace",
            path=NOTES_PATH,
            old_str="- Issue: late delivery",
            new_str="- Issue: late delivery (refund issued)",
        )
    ],
    [_tool_use("toolu_06", command="insert", path=NOTES_PATH, insert_line=3, insert_text=INSERTED)],
    # Fails: the text is not in the file.
    [
        _tool_use(
            "toolu_07",
            command="str_replace",
            path=NOTES_PATH,
            old_str="VIP customer",
            new_str="Gold customer",
        )
    ],
    # Two failures in one turn: a traversal attempt and a create over an existing file.
    [
        {"type": "text", "text": "I'll also keep a copy of the system accounts, and re-create the notes."},
        _tool_use("toolu_08", command="create", path=HOSTILE_PATH, file_text="root:x:0:0::/root:/bin/sh\n"),
        _tool_use("toolu_09", command="create", path=NOTES_PATH, file_text="overwritten?\n"),
    ],
    # Parallel tool use: the results must come back in the model's order.
    [
        _tool_use("toolu_10", command="rename", old_path=NOTES_PATH, new_path=MOVED_PATH),
        _tool_use("toolu_11", command="view", path=MOVED_PATH),
    ],
    [_tool_use("toolu_12", command="delete", path=MOVED_PATH)],
    [_tool_use("toolu_13", command="view", path="/memories")],
    [{"type": "text", "text": FINAL_TEXT}],
]


def tool_use_ids(content: list[dict[str, Any]]) -> list[str]:
    return [block["id"] for block in content if block["type"] == "tool_use"]


def listing_header(path: str) -> str:
    """The first line of a directory view, as documented."""
    return (
        f"Here're the files and directories up to 2 levels deep in {path}, "
        + "excluding hidden items and node_modules:"
    )


@dataclass(frozen=True)
class Expect:
    """What one ``tool_result`` must look like. Unset checks are skipped."""

    is_error: bool
    equals: str | None = None
    startswith: str | None = None
    contains: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    matches: tuple[str, ...] = ()  # regexes, searched with re.MULTILINE


def expected_results(style: ErrorStyle) -> dict[str, Expect]:
    """The result of every tool call of :data:`SCRIPT`, by ``tool_use_id``.

    ``"memvault"`` holds memvault to the documented protocol strings (``Error: `` prefixes, the
    ``node_modules`` header, ``4.0K`` directory size, no phantom line for a trailing newline).
    ``"reference"`` is the SDK's ``BetaLocalFilesystemMemoryTool``, whose wording differs in the
    documented ways; only the harness self-checks use it.
    """
    expected = {
        # Empty store: a listing of the root and nothing else.
        "toolu_01": Expect(
            is_error=False,
            contains=("/memories",),
            excludes=("notes.md", "customer_service_guidelines.xml", "Error"),
        ),
        "toolu_02": Expect(is_error=False, equals=f"File created successfully at: {GUIDELINES_PATH}"),
        "toolu_03": Expect(is_error=False, equals=f"File created successfully at: {NOTES_PATH}"),
        "toolu_04": Expect(
            is_error=False,
            startswith=f"Here's the content of {NOTES_PATH} with line numbers:\n",
            matches=(
                r"^     1\t# Customer notes$",
                r"^     2\t- Customer: Dana \(order #4521\)$",
                r"^     3\t- Issue: late delivery$",
            ),
        ),
        "toolu_05": Expect(
            is_error=False,
            startswith="The memory file has been edited.",
            matches=(r"^     3\t- Issue: late delivery \(refund issued\)$",),
        ),
        "toolu_06": Expect(is_error=False, equals=f"The file {NOTES_PATH} has been edited."),
        "toolu_07": Expect(
            is_error=True,
            equals=NO_MATCH,
        ),
        "toolu_08": Expect(is_error=True, equals=f"Path {HOSTILE_PATH} would escape /memories directory"),
        "toolu_09": Expect(is_error=True, equals=f"File {NOTES_PATH} already exists"),
        "toolu_10": Expect(is_error=False, equals=f"Successfully renamed {NOTES_PATH} to {MOVED_PATH}"),
        # The move kept every edit, and the failed commands changed nothing.
        "toolu_11": Expect(
            is_error=False,
            startswith=f"Here's the content of {MOVED_PATH} with line numbers:\n",
            matches=(
                r"^     3\t- Issue: late delivery \(refund issued\)$",
                r"^     4\t- Preference: email$",
            ),
            excludes=("overwritten?", "Gold customer"),
        ),
        "toolu_12": Expect(is_error=False, equals=f"Successfully deleted {MOVED_PATH}"),
        "toolu_13": Expect(
            is_error=False,
            contains=(GUIDELINES_PATH,),
            excludes=("notes.md", "dana.md", "passwd"),
        ),
    }
    if style == "memvault":
        expected |= {
            "toolu_01": Expect(is_error=False, equals=f"{listing_header('/memories')}\n4.0K\t/memories"),
            "toolu_04": Expect(
                is_error=False,
                equals=f"Here's the content of {NOTES_PATH} with line numbers:\n"
                "     1\t# Customer notes\n"
                "     2\t- Customer: Dana (order #4521)\n"
                "     3\t- Issue: late delivery",
            ),
            "toolu_08": Expect(is_error=True, startswith=f"Error: Invalid path {HOSTILE_PATH}"),
            "toolu_09": Expect(is_error=True, equals=f"Error: File {NOTES_PATH} already exists"),
            "toolu_11": Expect(
                is_error=False,
                equals=f"Here's the content of {MOVED_PATH} with line numbers:\n"
                "     1\t# Customer notes\n"
                "     2\t- Customer: Dana (order #4521)\n"
                "     3\t- Issue: late delivery (refund issued)\n"
                "     4\t- Preference: email",
            ),
        }
    return expected


# The commits a memvault store must hold after :data:`SCRIPT`, oldest first: one per successful
# mutating command, none for a view or a failed command.
EXPECTED_COMMITS = [
    ("create", (GUIDELINES_PATH,)),
    ("create", (NOTES_PATH,)),
    ("str_replace", (NOTES_PATH,)),
    ("insert", (NOTES_PATH,)),
    ("rename", (NOTES_PATH, MOVED_PATH)),
    ("delete", (MOVED_PATH,)),
]


def assert_history_of_the_session(store: MemoryStore) -> None:
    commits = [info for info in reversed(log(store)) if info.command != "init"]
    assert [(info.command, info.paths) for info in commits] == EXPECTED_COMMITS
    assert {(info.actor, info.session) for info in commits} == {("agent", "s1")}


def assert_tool_result(block: Mapping[str, Any], tool_use_id: str, expect: Expect) -> None:
    assert block.get("type") == "tool_result", block
    assert block.get("tool_use_id") == tool_use_id, block
    if expect.is_error:
        assert block.get("is_error") is True, f"{tool_use_id} should be an error result: {block}"
    else:
        assert not block.get("is_error"), f"{tool_use_id} should not be an error result: {block}"
    content = block.get("content")
    assert isinstance(content, str), f"{tool_use_id}: content should be a plain string: {content!r}"
    if expect.equals is not None:
        assert content == expect.equals, f"{tool_use_id}: {content!r}"
    if expect.startswith is not None:
        assert content.startswith(expect.startswith), f"{tool_use_id}: {content!r}"
    for needle in expect.contains:
        assert needle in content, f"{tool_use_id}: {needle!r} missing from {content!r}"
    for needle in expect.excludes:
        assert needle not in content, f"{tool_use_id}: {needle!r} unexpectedly in {content!r}"
    for pattern in expect.matches:
        message = f"{tool_use_id}: no line matches {pattern!r} in {content!r}"
        assert re.search(pattern, content, re.MULTILINE), message


def assert_session_on_the_wire(api: ScriptedMessagesAPI, errors: ErrorStyle, *, threaded: bool) -> None:
    """Everything the runner sent for :data:`SCRIPT` is what the protocol requires."""
    assert api.errors == [], api.errors
    assert api.exhausted, f"only {len(api.replies)} of {len(SCRIPT)} scripted turns were requested"
    assert len(api.requests) == len(SCRIPT)

    first = api.requests[0]
    assert first["model"] == MODEL
    assert first["max_tokens"] == MAX_TOKENS
    assert first["messages"] == [{"role": "user", "content": USER_PROMPT}]
    assert MEMORY_TOOL_PARAM in first.get("tools", [])

    # Request N+1 answers every tool call of turn N, in the model's order, and nothing else.
    expected = expected_results(errors)
    for turn_index, turn in enumerate(SCRIPT[:-1]):
        request = api.requests[turn_index + 1]
        ids = tool_use_ids(turn)
        results = tool_results(request)
        assert [block.get("tool_use_id") for block in results] == ids, f"request #{turn_index + 1}"
        for block, tool_use_id in zip(results, ids, strict=True):
            assert_tool_result(block, tool_use_id, expected[tool_use_id])

    all_results = [block for request in api.requests for block in tool_results(request)]
    error_ids = {block["tool_use_id"] for block in all_results if block.get("is_error")}
    assert error_ids == {"toolu_07", "toolu_08", "toolu_09"}

    if threaded:
        assert first.get("thread") == {"type": "create"}
        for index, request in enumerate(api.requests[1:], start=1):
            assert request.get("thread") == {
                "type": "continue",
                "previous_message_id": api.replies[index - 1]["id"],
            }
            assert "tools" not in request
            # Only the new user message (the tool results) goes out on a continued thread.
            assert [message["role"] for message in request["messages"]] == ["user"]
    else:
        for index, request in enumerate(api.requests):
            assert "thread" not in request
            assert MEMORY_TOOL_PARAM in request.get("tools", [])
            # The whole history: the prompt, then one assistant turn and its tool results per step.
            assert len(request["messages"]) == 1 + 2 * index
            echoed = [message["content"] for message in request["messages"][1::2]]
            expected_ids = [tool_use_ids(turn) for turn in SCRIPT[:index]]
            assert [tool_use_ids(content) for content in echoed] == expected_ids


def final_text(message: Any) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


# -- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[MemoryStore]:
    """A fresh store with a deliberately cheap KDF (tests only)."""
    store = MemoryStore.create(
        tmp_path / "store",
        passphrase="pw long enough",
        kdf=memvault.settings.KdfParams(memory_kib=8, iterations=1, lanes=1),
    )
    yield store
    store.close()


@pytest.fixture
def memory_tool(vault: MemoryStore) -> MemoryTool:
    """The sync memvault tool the runner drives."""
    return MemoryTool(vault, actor="agent", session="s1")


@pytest.fixture
def async_memory_tool(vault: MemoryStore) -> AsyncMemoryTool:
    """The async memvault tool the async runner drives."""
    return AsyncMemoryTool(vault, actor="agent", session="s1")


# -- memvault through the SDK runner ----------------------------------------------------------------

RUNNER_MODES: dict[str, dict[str, Any]] = {
    "threaded": {},
    "streaming": {"stream": True},
    "unthreaded": {"thread": False},
}


@pytest.mark.parametrize("mode", list(RUNNER_MODES))
def test_tool_runner_session(vault: MemoryStore, memory_tool: MemoryTool, mode: str) -> None:
    api = ScriptedMessagesAPI(SCRIPT)
    with sync_client(api) as client:
        runner = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": USER_PROMPT}],
            tools=[memory_tool],
            **RUNNER_MODES[mode],
        )
        final = runner.until_done()

    assert final.stop_reason == "end_turn"
    assert final.id == api.replies[-1]["id"]
    assert final_text(final) == FINAL_TEXT
    assert_session_on_the_wire(api, "memvault", threaded=mode != "unthreaded")
    assert_history_of_the_session(vault)


def test_async_tool_runner_session(vault: MemoryStore, async_memory_tool: AsyncMemoryTool) -> None:
    api = ScriptedMessagesAPI(SCRIPT)

    async def run() -> Any:
        async with async_client(api) as client:
            runner = client.beta.messages.tool_runner(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                messages=[{"role": "user", "content": USER_PROMPT}],
                tools=[async_memory_tool],
            )
            return await runner.until_done()

    final = asyncio.run(run())
    assert final_text(final) == FINAL_TEXT
    assert_session_on_the_wire(api, "memvault", threaded=True)
    assert_history_of_the_session(vault)


def test_async_streaming_tool_runner_session(vault: MemoryStore, async_memory_tool: AsyncMemoryTool) -> None:
    api = ScriptedMessagesAPI(SCRIPT)

    async def run() -> tuple[Any, list[str]]:
        texts: list[str] = []
        async with async_client(api) as client:
            runner = client.beta.messages.tool_runner(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                messages=[{"role": "user", "content": USER_PROMPT}],
                tools=[async_memory_tool],
                stream=True,
            )
            async for stream in runner:
                async for event in stream:
                    if event.type == "text":
                        texts.append(event.text)
            return await runner.until_done(), texts

    final, texts = asyncio.run(run())
    assert final_text(final) == FINAL_TEXT
    assert "".join(texts).endswith(FINAL_TEXT)
    assert_session_on_the_wire(api, "memvault", threaded=True)
    assert_history_of_the_session(vault)


def test_tools_param_declares_the_memory_tool(memory_tool: MemoryTool) -> None:
    api = ScriptedMessagesAPI([[{"type": "text", "text": "Nothing to remember."}]])
    with sync_client(api) as client:
        client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": "Hi"}],
            tools=[memory_tool],
        ).until_done()

    assert len(api.requests) == 1
    tools = api.requests[0]["tools"]
    assert {"type": "memory_20250818", "name": "memory"} in tools
    assert [tool.get("name") for tool in tools].count("memory") == 1


def test_async_tools_param_declares_the_memory_tool(async_memory_tool: AsyncMemoryTool) -> None:
    api = ScriptedMessagesAPI([[{"type": "text", "text": "Nothing to remember."}]])

    async def run() -> None:
        async with async_client(api) as client:
            await client.beta.messages.tool_runner(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                messages=[{"role": "user", "content": "Hi"}],
                tools=[async_memory_tool],
            ).until_done()

    asyncio.run(run())
    assert {"type": "memory_20250818", "name": "memory"} in api.requests[0]["tools"]


# -- harness self-checks (no memvault involved) -----------------------------------------------------


def test_harness_with_sdk_reference_memory_tool(tmp_path: Path) -> None:
    """The same session against the SDK's own filesystem memory tool, with its error wording.

    If this passes and the memvault tests fail, the difference is in memvault, not in the fake
    server or the runner mechanics.
    """
    api = ScriptedMessagesAPI(SCRIPT)
    with sync_client(api) as client:
        final = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": USER_PROMPT}],
            tools=[BetaLocalFilesystemMemoryTool(str(tmp_path / "reference"))],
        ).until_done()

    assert final_text(final) == FINAL_TEXT
    assert_session_on_the_wire(api, "reference", threaded=True)
    assert not (tmp_path / "etc").exists()


def test_harness_with_sdk_reference_async_memory_tool(tmp_path: Path) -> None:
    api = ScriptedMessagesAPI(SCRIPT)

    async def run() -> Any:
        async with async_client(api) as client:
            return await client.beta.messages.tool_runner(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                messages=[{"role": "user", "content": USER_PROMPT}],
                tools=[BetaAsyncLocalFilesystemMemoryTool(str(tmp_path / "reference"))],
                stream=True,
            ).until_done()

    final = asyncio.run(run())
    assert final_text(final) == FINAL_TEXT
    assert_session_on_the_wire(api, "reference", threaded=True)


def test_fake_fails_loudly_when_the_script_runs_out(tmp_path: Path) -> None:
    # The last scripted turn still asks for a tool, so the runner wants one more turn than there is.
    api = ScriptedMessagesAPI([[_tool_use("toolu_01", command="view", path="/memories")]])
    with sync_client(api) as client:
        runner = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": "Hi"}],
            tools=[BetaLocalFilesystemMemoryTool(str(tmp_path / "reference"))],
        )
        with pytest.raises(anthropic.InternalServerError, match="the script has only 1 turn"):
            runner.until_done()
    assert len(api.requests) == 2
    assert [block["tool_use_id"] for block in tool_results(api.requests[1])] == ["toolu_01"]


def test_fake_rejects_a_broken_thread_continuation() -> None:
    api = ScriptedMessagesAPI([[{"type": "text", "text": "one"}], [{"type": "text", "text": "two"}]])
    with sync_client(api) as client:
        client.beta.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "a"}])
        with pytest.raises(anthropic.BadRequestError, match="the last reply was 'msg_fake_000'"):
            client.beta.messages.create(
                model=MODEL,
                max_tokens=16,
                messages=[{"role": "user", "content": "b"}],
                thread={"type": "continue", "previous_message_id": "msg_bogus"},
                betas=["message-threads-2026-08-12"],
            )
    assert len(api.replies) == 1
