"""memvault as an MCP server (``memvault mcp``), over the official ``mcp`` SDK: the only module
that imports ``mcp``.

Tools (names and arguments; every path is a ``/memories/...`` path of the memory tool's grammar):

- the six memory commands, with the exact result and error strings of
  :class:`memvault.agent.tool.MemoryTool` (both call :func:`memvault.protocol.commands.run_command`):
  ``memory_view(path, view_range?)``, ``memory_create(path, file_text)``,
  ``memory_str_replace(path, old_str, new_str?)``, ``memory_insert(path, insert_line, insert_text)``,
  ``memory_delete(path)``, ``memory_rename(old_path, new_path)``;
- history, read-only (JSON text, at most about the store's ``view_max_chars`` characters, with
  a note saying how to read on when cut): ``memory_log(path?, limit?, skip?)``,
  ``memory_show(rev?)``, ``memory_diff(old?, new?, path?)``, ``memory_blame(path, rev?, start_line?)``;
- ``memory_revert(rev)``: one new commit undoing commit ``rev`` (:func:`memvault.edits.undo.revert`);
  what it puts back passes the scrubber under the store's policy of now, as the tool's writes do:
  masked (the result's ``findings`` and ``note`` say so) or the whole revert refused.

Nothing else: no redaction, keys, expiry, import or export over MCP (those stay operator
commands). A failed command is a tool result with ``isError`` whose text is the message
MemoryTool gives the model; an unexpected exception becomes a generic message (its type is
logged, never its text).

Attribution: every commit records the server's ``actor`` and a session: the client's MCP
session id when the transport has one, else the ``session`` given to :func:`build_server`
(``--session``), else a random id per connection (stdio: per server process; HTTP without a
session id: per server run). The SDK hands a tool no session id as such: the id is the request's
``Mcp-Session-Id`` header (``Context.headers``), which a stateful streamable HTTP connection
carries (issued by the SDK's session manager, unknown ids get 404). Stdio and the 2026-07-28
protocol (stateless HTTP, which the SDK's client negotiates when it can) have none. It is
attribution, not identity: only a well-formed id (visible ASCII, at most 128 characters) is recorded.

Transports: stdio (:func:`serve_stdio`) and streamable HTTP (:func:`serve_http`, path ``/mcp``),
behind the guards of :mod:`memvault.agent.mcphttp`: ``Authorization: Bearer <token>`` on every request
(anything else gets 401), and on a loopback bind, however its address is spelled, a ``Host`` naming
the bound address or ``localhost`` with the bound port (else 421) and no ``Origin`` but a loopback
one of that port (else 403). The token file is by default ``$XDG_CONFIG_HOME/memvault/mcp-token``
(``~/.config/memvault/mcp-token``), outside the store, so a copy or backup of the store directory
carries no credential, and a store in object storage needs no local directory (one token then
serves all of the user's stores; ``--token-file`` gives a store its own). HTTP binds a loopback
address unless ``allow_remote`` is given; then TLS has to be terminated by a reverse proxy in front
of it (this server speaks plain HTTP), and that proxy checks the ``Host`` it is named by.

Times in the history tools' JSON are ISO 8601 in UTC with the seconds since the epoch alongside as
``timestamp``, as ``memvault log --json`` gives them (:mod:`memvault.timefmt`).

The server holds one :class:`~memvault.store.MemoryStore`; each command runs in a worker thread.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from anyio.to_thread import run_sync
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations

from ..edits.undo import revert
from ..errors import InternalError, InvalidInputError, MemvaultError
from ..history import blame, diff, format_diff, iter_log, resolve
from ..protocol.commands import ToolResult, run_command
from ..store import MemoryStore
from ..timefmt import json_times
from .mcphttp import bearer_guard, check_bind, default_token_file, host_guard, is_loopback, load_or_create_token

__all__ = [
    "TOOL_NAMES",
    "DEFAULT_ACTOR",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAX_LOG_LIMIT",
    "build_server",
    "default_token_file",
    "load_or_create_token",
    "is_loopback",
    "check_bind",
    "bearer_guard",
    "host_guard",
    "serve_stdio",
    "serve_http",
]

_log = logging.getLogger("memvault")

DEFAULT_ACTOR = "mcp"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
HTTP_PATH = "/mcp"
DEFAULT_LOG_LIMIT = 50
MAX_LOG_LIMIT = 500
#: Characters of changes listed per commit by ``memory_log`` (``memory_show`` lists more).
_LOG_CHANGES_CHARS = 1000
#: An ``Mcp-Session-Id`` as the specification allows it: visible ASCII (bounded here).
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,128}")
_SESSION_HEADER = "mcp-session-id"

TOOL_NAMES = (
    "memory_view",
    "memory_create",
    "memory_str_replace",
    "memory_insert",
    "memory_delete",
    "memory_rename",
    "memory_log",
    "memory_show",
    "memory_diff",
    "memory_blame",
    "memory_revert",
)

_INSTRUCTIONS = (
    "Persistent memory kept under /memories: encrypted, and versioned (every change is one commit "
    "recorded with who made it). View /memories at the start of a task to recall earlier progress, "
    "and record what you learn as you go. memory_view, memory_create, memory_str_replace, "
    "memory_insert, memory_delete and memory_rename work like Anthropic's memory tool; memory_log, "
    "memory_show, memory_diff and memory_blame read the history; memory_revert undoes one commit."
)
_REMOTE_INSTRUCTIONS = (
    "Persistent memory kept under /memories, on a memvault server: encrypted, and versioned (every "
    "change is one commit recorded with who made it). View /memories at the start of a task to recall "
    "earlier progress, and record what you learn as you go. memory_view, memory_create, "
    "memory_str_replace, memory_insert, memory_delete and memory_rename work like Anthropic's memory tool."
)

# -- results ---------------------------------------------------------------------------------------


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def _content(result: ToolResult) -> CallToolResult:
    """A protocol result as MCP content: text, or the image blocks of an image view."""
    if isinstance(result, str):
        return _text(result)
    blocks: list[ContentBlock] = []
    for block in result:
        if block.get("type") == "image":
            source = block["source"]
            blocks.append(ImageContent(type="image", data=source["data"], mime_type=source["media_type"]))
        else:
            blocks.append(TextContent(type="text", text=str(block.get("text", ""))))
    return CallToolResult(content=blocks)


def _guarded(fn: Callable[[], ToolResult]) -> CallToolResult:
    """Run one command; failures become ``isError`` results with MemoryTool's text."""
    try:
        return _content(fn())
    except MemvaultError as err:
        return _text(str(err), error=True)
    except Exception as err:
        # Log the type only: the message of an arbitrary exception may hold content or paths.
        _log.error("memvault: unexpected %s while running an MCP tool", type(err).__name__)
        return _text("Error: " + str(InternalError()), error=True)


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _fit(items: list[Any], room: int) -> int:
    """How many of ``items`` (from the start) fit in ``room`` characters of JSON; at least one."""
    used = 0
    for i, item in enumerate(items):
        used += len(_dumps(item)) + 2
        if used > room and i > 0:
            return i
    return len(items)


def _capped_changes(row: dict[str, Any], room: int) -> dict[str, Any]:
    """``row`` with as many of its ``changes`` as fit in ``room`` characters (``more_changes``: the rest)."""
    changes = row.get("changes", [])
    shown = _fit(changes, room)
    if shown < len(changes):
        row = {**row, "changes": changes[:shown], "more_changes": len(changes) - shown}
    return row


def _prefix(text: str, room: int) -> str:
    """The longest prefix of ``text`` (roughly) whose JSON string takes at most ``room`` characters."""
    cut = min(len(text), room)
    while cut > 0 and (size := len(_dumps(text[:cut]))) > room:
        cut = min(cut - 1, cut * room // size)
    return text[:cut]


# -- history (read-only) ---------------------------------------------------------------------------


def _int_arg(name: str, value: int, low: int, high: int | None = None) -> None:
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidInputError(f"Error: `{name}` must be {bounds}.")


def _log_json(store: MemoryStore, path: str | None, limit: int, skip: int) -> str:
    _int_arg("limit", limit, 1, MAX_LOG_LIMIT)
    _int_arg("skip", skip, 0)
    rows: list[dict[str, Any]] = []
    more = False
    for i, info in enumerate(iter_log(store, path=path)):
        if i < skip:
            continue
        if len(rows) == limit:
            more = True
            break
        rows.append(_capped_changes(json_times(info.to_json()), _LOG_CHANGES_CHARS))
    budget = store.settings.view_max_chars
    shown = _fit(rows, budget - 200)
    out: dict[str, Any] = {"commits": rows[:shown], "more": more or shown < len(rows)}
    if out["more"]:
        out["next_skip"] = skip + shown
        if shown < len(rows):
            out["note"] = f"Only {shown} commits fit in one result ({budget} characters); use skip to read on."
    return _dumps(out)


def _cut_patch(out: dict[str, Any], patch: str, budget: int) -> dict[str, Any]:
    room = max(0, budget - len(_dumps(out)) - 300)
    out["patch"] = _prefix(patch, room)
    if len(out["patch"]) < len(patch):
        out["note"] = (
            f"The patch has {len(patch)} characters; only the first {len(out['patch'])} are shown "
            f"(results are limited to {budget} characters). Use memory_diff with a path to see one file."
        )
    return out


def _show_json(store: MemoryStore, rev: str) -> str:
    commit_id = resolve(store, rev)
    info = next(iter_log(store, start=commit_id))
    parent = store.commit(commit_id)[2]
    budget = store.settings.view_max_chars
    out = _capped_changes(json_times(info.to_json()), budget // 2)
    return _dumps(_cut_patch(out, format_diff(diff(store, parent, commit_id)), budget))


def _diff_json(store: MemoryStore, old: str | None, new: str | None, path: str | None) -> str:
    new_id = resolve(store, new if new is not None else "HEAD")
    old_id = resolve(store, old) if old is not None else store.commit(new_id)[2]
    diffs = diff(store, old_id, new_id, path)
    files = [{k: v for k, v in d.to_json().items() if k != "patch"} for d in diffs]
    budget = store.settings.view_max_chars
    shown = _fit(files, budget // 4)
    out: dict[str, Any] = {
        "old": old_id.decode() if old_id is not None else None,
        "new": new_id.decode(),
        "path": path,
        "files": files[:shown],
    }
    if shown < len(files):
        out["more_files"] = len(files) - shown
    return _dumps(_cut_patch(out, format_diff(diffs), budget))


def _blame_json(store: MemoryStore, path: str, rev: str, start_line: int) -> str:
    _int_arg("start_line", start_line, 1)
    commit_id = resolve(store, rev)
    lines = blame(store, path, commit_id)
    budget = store.settings.view_max_chars
    selected = lines[start_line - 1 :]
    texts = [_prefix(b.text, budget // 4) for b in selected]
    rows = [[b.line, b.seq, text] for b, text in zip(selected, texts, strict=True)]

    def page(shown: int) -> str:
        commits = {
            str(b.seq): json_times({"commit": b.commit_id, "time": b.time, "actor": b.actor}) for b in selected[:shown]
        }
        out: dict[str, Any] = {
            "path": path,
            "rev": commit_id.decode(),
            "total_lines": len(lines),
            "lines": rows[:shown],
            "commits": commits,
        }
        if shown < len(rows):
            out["note"] = f"Lines {start_line}-{start_line + shown - 1} of {len(lines)}; use start_line to read on."
        if any(len(text) < len(b.text) for text, b in zip(texts[:shown], selected, strict=False)):
            out["cut"] = f"Lines longer than about {budget // 4} characters are cut; memory_view shows them."
        return _dumps(out)

    shown = _fit(rows, budget * 3 // 4)
    text = page(shown)
    while len(text) > budget and shown > 1:
        shown -= 1
        text = page(shown)
    return text


def _revert_json(store: MemoryStore, rev: str, actor: str, session: str) -> str:
    result = revert(store, rev, actor=actor, session=session)
    return _dumps(_capped_changes(result.to_json(), store.settings.view_max_chars // 2))


# -- the server ------------------------------------------------------------------------------------

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def _annotations(title: str, *, destructive: bool, idempotent: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def _read_only(title: str) -> ToolAnnotations:
    return _READ_ONLY.model_copy(update={"title": title})


def _tool(
    fn: Callable[..., Any], name: str, description: str, annotations: ToolAnnotations, args: dict[str, str]
) -> Tool:
    """A tool whose advertised input schema describes each argument (validation is the SDK's)."""
    tool = Tool.from_function(fn, name=name, description=description, annotations=annotations)
    properties = tool.parameters.get("properties", {})
    for arg, text in args.items():
        properties[arg]["description"] = text
    return tool


_PATH = "A path under /memories, e.g. /memories/notes.md."
_REV = "A revision: HEAD, HEAD~N, #SEQ (the seq of memory_log), a commit id (4+ hex digits) or @{ISO-TIME}."


#: Runs one memory command (the tool's input) for a session; raises MemvaultError with the tool's text.
Runner = Callable[[dict[str, Any], str], ToolResult]


def build_server(
    store: MemoryStore | None = None, *, remote: Runner | None = None, actor: str = DEFAULT_ACTOR,
    session: str | None = None, name: str = "memvault",
) -> MCPServer[dict[str, str]]:  # fmt: skip
    """An MCP server over ``store`` (which the caller keeps open and closes): the tools of the
    module docstring, each commit attributed to ``actor`` and a session (see there). With
    ``remote`` instead (``memvault mcp --server``: a memory store of a memvault server, whose
    commands run there, :meth:`memvault.RemoteMemoryTool.run`), the six memory commands only:
    history and revert stay with the server's operator.

    Raises:
        ValueError: not exactly one of ``store`` and ``remote``.
    """
    if (store is None) == (remote is None):
        raise ValueError("give exactly one of store and remote")

    @asynccontextmanager
    async def per_connection(_server: MCPServer[dict[str, str]]) -> AsyncIterator[dict[str, str]]:
        yield {"session": uuid.uuid4().hex}

    def attribution(ctx: Context[Any, Any]) -> str:
        headers = ctx.headers
        if headers is not None:
            sid = headers.get(_SESSION_HEADER)
            if sid is not None and _SESSION_ID.fullmatch(sid):
                return sid
        if session is not None:
            return session
        state: dict[str, str] = ctx.request_context.lifespan_context
        return state["session"]

    def local() -> MemoryStore:
        assert store is not None  # the history tools are listed only for a local store
        return store

    def run(data: dict[str, Any], who: str) -> ToolResult:
        if remote is not None:
            return remote(data, who)
        assert store is not None
        return run_command(store, data, actor=actor, session=who)

    async def command(ctx: Context[Any, Any], data: dict[str, Any]) -> CallToolResult:
        who = attribution(ctx)
        return await run_sync(_guarded, lambda: run(data, who))

    async def memory_view(path: str, ctx: Context[Any, Any], view_range: list[int] | None = None) -> CallToolResult:
        data: dict[str, Any] = {"command": "view", "path": path}
        if view_range is not None:
            data["view_range"] = view_range
        return await command(ctx, data)

    async def memory_create(path: str, file_text: str, ctx: Context[Any, Any]) -> CallToolResult:
        return await command(ctx, {"command": "create", "path": path, "file_text": file_text})

    async def memory_str_replace(path: str, old_str: str, ctx: Context[Any, Any], new_str: str = "") -> CallToolResult:
        return await command(ctx, {"command": "str_replace", "path": path, "old_str": old_str, "new_str": new_str})

    async def memory_insert(path: str, insert_line: int, insert_text: str, ctx: Context[Any, Any]) -> CallToolResult:
        data = {"command": "insert", "path": path, "insert_line": insert_line, "insert_text": insert_text}
        return await command(ctx, data)

    async def memory_delete(path: str, ctx: Context[Any, Any]) -> CallToolResult:
        return await command(ctx, {"command": "delete", "path": path})

    async def memory_rename(old_path: str, new_path: str, ctx: Context[Any, Any]) -> CallToolResult:
        return await command(ctx, {"command": "rename", "old_path": old_path, "new_path": new_path})

    async def memory_log(path: str | None = None, limit: int = DEFAULT_LOG_LIMIT, skip: int = 0) -> CallToolResult:
        return await run_sync(_guarded, lambda: _log_json(local(), path, limit, skip))

    async def memory_show(rev: str = "HEAD") -> CallToolResult:
        return await run_sync(_guarded, lambda: _show_json(local(), rev))

    async def memory_diff(old: str | None = None, new: str | None = None, path: str | None = None) -> CallToolResult:
        return await run_sync(_guarded, lambda: _diff_json(local(), old, new, path))

    async def memory_blame(path: str, rev: str = "HEAD", start_line: int = 1) -> CallToolResult:
        return await run_sync(_guarded, lambda: _blame_json(local(), path, rev, start_line))

    async def memory_revert(rev: str, ctx: Context[Any, Any]) -> CallToolResult:
        who = attribution(ctx)
        return await run_sync(_guarded, lambda: _revert_json(local(), rev, actor, who))

    overwrite = store.settings.overwrite_on_create if store is not None else False
    tools = [
        _tool(
            memory_view,
            "memory_view",
            "Show a directory of the memory (files and directories up to 2 levels deep, with sizes) or a "
            "file with line numbers. Long files are shown a page at a time: the result then ends with a "
            "note naming the view_range that continues it.",
            _read_only("View memory"),
            {
                "path": _PATH + " /memories itself lists everything.",
                "view_range": "Optional [start, end] line numbers of a file (1-based, inclusive; end -1 = last line).",
            },
        ),
        _tool(
            memory_create,
            "memory_create",
            "Create a file with the given content (missing directories are created). "
            + ("An existing file is overwritten." if overwrite else "Fails if the file exists."),
            _annotations("Create a memory file", destructive=overwrite, idempotent=overwrite),
            {"path": _PATH, "file_text": "The whole content of the new file."},
        ),
        _tool(
            memory_str_replace,
            "memory_str_replace",
            "Replace the one occurrence of old_str in a file with new_str (fails when old_str occurs "
            "zero times or more than once); the result shows the edited lines.",
            _annotations("Edit a memory file", destructive=True),
            {
                "path": _PATH,
                "old_str": "Text that occurs exactly once in the file, verbatim (whitespace included).",
                "new_str": "The replacement text (default: empty, which deletes old_str).",
            },
        ),
        _tool(
            memory_insert,
            "memory_insert",
            "Insert text into a file after line insert_line (0 inserts at the top).",
            _annotations("Insert into a memory file", destructive=False),
            {
                "path": _PATH,
                "insert_line": "The line to insert after: 0 for the top, up to the file's number of lines.",
                "insert_text": "The text to insert (one or more lines).",
            },
        ),
        _tool(
            memory_delete,
            "memory_delete",
            "Delete a file or a directory with everything in it (history keeps the old versions).",
            _annotations("Delete from memory", destructive=True, idempotent=True),
            {"path": _PATH},
        ),
        _tool(
            memory_rename,
            "memory_rename",
            "Rename or move a file or directory; fails if new_path exists.",
            _annotations("Rename in memory", destructive=True),
            {"old_path": _PATH, "new_path": "The new path, under /memories; must not exist yet."},
        ),
    ]
    history = [
        _tool(
            memory_log,
            "memory_log",
            "The history, newest first, as JSON: each commit's id, seq, time, actor, session, command, paths "
            "and changes. The result says when there is more (next_skip).",
            _read_only("Memory history"),
            {
                "path": "Only commits that changed this file, or anything below this directory (renames followed).",
                "limit": f"At most this many commits (1-{MAX_LOG_LIMIT}, default {DEFAULT_LOG_LIMIT}).",
                "skip": "Skip this many matching commits first (for reading on).",
            },
        ),
        _tool(
            memory_show,
            "memory_show",
            "One commit as JSON: its metadata, changes and unified diff (cut when long).",
            _read_only("Show a memory commit"),
            {"rev": _REV + " Default: HEAD."},
        ),
        _tool(
            memory_diff,
            "memory_diff",
            "Unified diff between two revisions, as JSON with the changed files (cut when long). Without "
            "old: what the commit new (default HEAD) changed.",
            _read_only("Diff memory revisions"),
            {
                "old": _REV + " Default: the parent of new.",
                "new": _REV + " Default: HEAD.",
                "path": "Only this file, or the files below this directory.",
            },
        ),
        _tool(
            memory_blame,
            "memory_blame",
            "For each line of a file, the commit (seq, actor, time) that last changed it, as JSON.",
            _read_only("Blame a memory file"),
            {"path": _PATH, "rev": _REV + " Default: HEAD.", "start_line": "First line to show (default 1)."},
        ),
        _tool(
            memory_revert,
            "memory_revert",
            "Undo one commit with a new commit (history is kept). Refused when a path the commit touched "
            "changed after it. What it puts back is scrubbed as a write is: sensitive data is masked "
            "(the result says so), or the revert is refused.",
            _annotations("Revert a memory commit", destructive=True),
            {"rev": _REV},
        ),
    ]
    return MCPServer(
        name=name,
        title="memvault memory",
        instructions=_INSTRUCTIONS if store is not None else _REMOTE_INSTRUCTIONS,
        version=_version(),
        tools=tools + (history if store is not None else []),
        lifespan=per_connection,
        log_level="WARNING",
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memvault")
    except PackageNotFoundError:
        return "0"


# -- transports ------------------------------------------------------------------------------------


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve one client on stdin/stdout until it disconnects."""
    await server.run_stdio_async()


async def serve_http(
    server: MCPServer[Any],
    *,
    token: str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` behind the bearer ``token`` (and, on a
    loopback ``host``, the Host/Origin check of :func:`memvault.agent.mcphttp.host_guard`) until
    interrupted. ``ready`` gets the URL once the socket is bound (``port`` 0: a free port).

    Raises:
        InvalidInputError: a non-loopback ``host`` without ``allow_remote``.
    """
    import uvicorn

    check_bind(host, allow_remote)
    app = bearer_guard(server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host), token)
    sock = socket.create_server((host.strip("[]"), port), family=_family(host))
    try:
        address, bound = sock.getsockname()[:2]
        if is_loopback(host):
            app = host_guard(app, address, bound)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        if ready is not None:
            ready(f"http://{shown}:{bound}{HTTP_PATH}")
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
