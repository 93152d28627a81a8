"""``memvault hook session-start``: a Claude Code ``SessionStart`` hook that starts each session with
the head of the store's memory index.

Claude Code runs the command at every session start (and resume, ``/clear``, compaction) and adds
what it prints to the session: here the first 200 lines of ``/memories/MEMORY.md``, at most 25,000
bytes (what Claude Code loads of its own ``MEMORY.md``; :func:`memvault.protocol.context.index_head`), as
``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ...}}`` (``--plain``:
the text alone). Nothing else ever goes to standard output. No index: empty context, exit 0. A
failure (no key, no store, a damaged store) is one line on standard error and exit status 1, which
Claude Code reports without stopping the session (exit status 2 would be a blocking error).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ExitStatus, MemvaultError
from ..protocol.context import INDEX_MAX_BYTES, INDEX_MAX_LINES, INDEX_PATH, index_head, session_start_output
from ._common import open_store, terminal_safe

__all__ = ["register", "read_index_head"]


def read_index_head(args: argparse.Namespace) -> str:
    """The head of the index ``args.index`` in the store the arguments point at ("" without one).

    The read counts as a use of the index for ``memvault expire``: its head is in Claude's context.

    Raises:
        MemvaultError: no key, no store, a path outside ``/memories``, a directory, a damaged store.
    """
    from ..errors import PathNotFoundError
    from ..paths import parse_path

    with open_store(args) as store:
        path = parse_path(args.index, store.settings)
        with store.reading() as view:
            node = view.get(path)
            if node is None:
                return ""
            if node.is_dir:
                raise PathNotFoundError(f"{path.text} is a directory, not an index file.")
            data = view.read(path)
        store.note_read(node)
    return index_head(data)


def _emit(text: str) -> None:
    if sys.stdout.isatty():  # a person runs it: no raw escape sequences from memory content
        sys.stdout.write(terminal_safe(text))
        return
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (rare)
        sys.stdout.write(text)
        return
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def _cmd_session_start(args: argparse.Namespace) -> int:
    try:
        head = read_index_head(args)
    except MemvaultError as err:
        message = err.message[len("Error: ") :] if err.message.startswith("Error: ") else err.message
        print(f"memvault: {message}", file=sys.stderr)
        return ExitStatus.ERROR  # non-blocking for Claude Code, whatever the kind of failure
    except OSError as err:
        print(f"memvault: {err.strerror or 'I/O error'}.", file=sys.stderr)
        return ExitStatus.ERROR
    if args.plain:
        _emit(head)
    else:
        _emit(session_start_output(head) + "\n")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    hook = sub.add_parser("hook", help="hooks for Claude Code (e.g. load the memory index at session start)")
    hsub = hook.add_subparsers(dest="hook_cmd", required=True)
    s = hsub.add_parser(
        "session-start",
        help=f"print the index's first {INDEX_MAX_LINES} lines (at most {INDEX_MAX_BYTES:,} bytes) as a "
        "SessionStart hook's additionalContext",
        description="For a Claude Code SessionStart hook: print the head of the memory index (its first "
        f"{INDEX_MAX_LINES} lines, cut to whole lines within {INDEX_MAX_BYTES:,} bytes, as Claude Code loads "
        "its own MEMORY.md) as hook JSON. No index: empty context. Errors: one line on stderr, exit status 1 "
        "(not blocking).",
    )
    s.add_argument("--index", default=INDEX_PATH, metavar="PATH", help=f"the index file (default: {INDEX_PATH})")
    s.add_argument("--plain", action="store_true", help="print the text alone instead of the hook JSON")
    s.set_defaults(func=_cmd_session_start)
