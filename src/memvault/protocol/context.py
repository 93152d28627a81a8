"""What goes into Claude's context besides the memory tool's own results: the API's context
editing block that pairs with the memory tool, and the head of the memory index a session
starts with.

Pure functions over plain values (no ``anthropic``, no store): :mod:`memvault.cli.hook` and
applications call them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = [
    "CONTEXT_MANAGEMENT_BETA",
    "CLEAR_TOOL_USES",
    "DEFAULT_TRIGGER_INPUT_TOKENS",
    "DEFAULT_KEEP_TOOL_USES",
    "MEMORY_TOOL_NAME",
    "INDEX_PATH",
    "INDEX_MAX_LINES",
    "INDEX_MAX_BYTES",
    "context_management",
    "index_head",
    "session_start_output",
]

#: The beta the API needs for ``context_management`` (and for the memory tool).
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
#: The context edit that clears old tool results.
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
#: The API's defaults for ``clear_tool_uses_20250919`` (Anthropic's context editing documentation):
#: clear once the prompt exceeds 100,000 input tokens, keep the 3 most recent tool uses; no
#: ``clear_at_least``, no excluded tools, tool inputs kept.
DEFAULT_TRIGGER_INPUT_TOKENS = 100_000
DEFAULT_KEEP_TOOL_USES = 3
#: The name the memory tool has in requests (``memory_20250818``).
MEMORY_TOOL_NAME = "memory"

#: The index a session starts with (``memvault init --template`` writes one).
INDEX_PATH = "/memories/MEMORY.md"
#: What Claude Code loads of its own auto-memory index, ``MEMORY.md``, at session start: the first
#: 200 lines or the first 25KB, whichever comes first (Claude Code's memory documentation). Claude
#: Code's code sets 25,000 and measures string length; memvault counts UTF-8 bytes, the same for
#: ASCII and never more.
INDEX_MAX_LINES = 200
INDEX_MAX_BYTES = 25_000


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value}")
    return value


def context_management(
    *,
    trigger: int = DEFAULT_TRIGGER_INPUT_TOKENS,
    keep: int = DEFAULT_KEEP_TOOL_USES,
    clear_at_least: int | None = None,
    clear_tool_inputs: bool = False,
    exclude_tools: Iterable[str] = (),
) -> dict[str, Any]:
    """The ``context_management`` block of a Messages API request that pairs the memory tool with
    context editing: old tool results are cleared as the conversation grows, except the memory
    tool's, since what Claude must keep is in the memory directory.

    One ``clear_tool_uses_20250919`` edit; send it with the ``context-management-2025-06-27`` beta
    (:data:`CONTEXT_MANAGEMENT_BETA`)::

        client.beta.messages.create(..., tools=[tool], context_management=memvault.context_management(),
                                    betas=[memvault.protocol.context.CONTEXT_MANAGEMENT_BETA])

    The defaults are the API's own, as Anthropic's context editing documentation states them, written
    out so the request says what it asks for.

    Args:
        trigger: clear once the prompt exceeds this many input tokens (default 100,000).
        keep: how many of the most recent tool uses to keep (default 3).
        clear_at_least: clear only when at least this many input tokens can go (default: not set,
            the API's default); worth setting with prompt caching, since clearing invalidates the
            cached prefix.
        clear_tool_inputs: clear the tool calls' inputs too, not only their results (default False).
        exclude_tools: other tools whose uses are never cleared; ``memory`` always is.

    Returns:
        A new plain dict, e.g. ``{"edits": [{"type": "clear_tool_uses_20250919", "trigger":
        {"type": "input_tokens", "value": 100000}, "keep": {"type": "tool_uses", "value": 3},
        "exclude_tools": ["memory"], "clear_tool_inputs": False}]}``.

    Raises:
        ValueError: a count below 1, an empty tool name.
        TypeError: a count that is not an ``int`` (a bool is not one), a tool name that is not a
            str, ``exclude_tools`` given as one string, a ``clear_tool_inputs`` that is not a bool.
            (Library misuse, as everywhere in memvault, is not a :class:`~memvault.errors.MemvaultError`.)
    """
    edit: dict[str, Any] = {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": "input_tokens", "value": _positive("trigger", trigger)},
        "keep": {"type": "tool_uses", "value": _positive("keep", keep)},
    }
    if clear_at_least is not None:
        edit["clear_at_least"] = {"type": "input_tokens", "value": _positive("clear_at_least", clear_at_least)}
    if isinstance(exclude_tools, str):
        raise TypeError("exclude_tools must be a list of tool names, not one string")
    excluded = [MEMORY_TOOL_NAME]
    for name in exclude_tools:
        if not isinstance(name, str):
            raise TypeError(f"exclude_tools must hold tool names (str), not {type(name).__name__}")
        if not name:
            raise ValueError("exclude_tools must not hold an empty tool name")
        if name not in excluded:
            excluded.append(name)
    edit["exclude_tools"] = excluded
    if not isinstance(clear_tool_inputs, bool):
        raise TypeError(f"clear_tool_inputs must be a bool, not {type(clear_tool_inputs).__name__}")
    edit["clear_tool_inputs"] = clear_tool_inputs
    return {"edits": [edit]}


def index_head(data: bytes, *, max_lines: int = INDEX_MAX_LINES, max_bytes: int = INDEX_MAX_BYTES) -> str:
    """The part of a memory index a session starts with: what Claude Code loads of ``MEMORY.md``.

    Exactly a prefix of ``data``: the first ``max_lines`` lines (each with its newline; a last line
    without one counts too), then, if that is more than ``max_bytes`` bytes of UTF-8, the longest
    run of whole lines from the start that fits in ``max_bytes``. If not even the first line fits,
    its beginning: the longest prefix of at most ``max_bytes`` bytes that ends on a character
    boundary (Claude Code cuts such a line too). Bytes that are not UTF-8 come out as U+FFFD.
    """
    _positive("max_lines", max_lines)
    _positive("max_bytes", max_bytes)
    end = 0
    for _ in range(max_lines):
        newline = data.find(b"\n", end)
        if newline < 0:
            end = len(data)
            break
        end = newline + 1
    head = data[:end]
    if len(head) > max_bytes:
        cut = head.rfind(b"\n", 0, max_bytes)  # the newline itself must fit: it is at most at max_bytes - 1
        if cut >= 0:
            head = head[: cut + 1]
        else:
            cut = max_bytes
            while cut > 0 and head[cut] & 0xC0 == 0x80:  # do not split a UTF-8 sequence
                cut -= 1
            head = head[:cut]
    return head.decode("utf-8", errors="replace")


def session_start_output(context: str) -> str:
    """The JSON a Claude Code ``SessionStart`` hook prints to add ``context`` to the session
    (``hookSpecificOutput.additionalContext``; Claude Code's hooks documentation), on one line and
    ASCII only (non-ASCII and control characters escaped), whatever the encoding of standard output."""
    output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}
    return json.dumps(output, ensure_ascii=True)
