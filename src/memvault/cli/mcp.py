"""``memvault mcp``: serve the store to MCP clients (Claude Code, Claude Desktop, ...) over
stdio (default) or streamable HTTP (``--http``, bearer token, loopback unless
``--allow-remote``). The server is :mod:`memvault.agent.mcp` (needs ``memvault[mcp]``); the
store and key are found as for every command, and the store stays open while it serves.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ExitStatus, InvalidInputError, KeyUnavailableError
from ._common import port_number

__all__ = ["register"]

_DEFAULT_ACTOR = "mcp"  # memvault.agent.mcp.DEFAULT_ACTOR (not imported: mcp is optional)
_DEFAULT_HOST = "127.0.0.1"
_DEFAULT_PORT = 8765


class _Terminated(Exception):
    """SIGTERM while serving: stop, close the store, exit 0."""


def _terminate(_signum: int, _frame: object) -> None:
    raise _Terminated


@contextmanager
def _backend(args: argparse.Namespace) -> Iterator[tuple[Any, Any]]:
    """``(store, None)`` for a local store, ``(None, runner)`` with ``--server``: a memory store of a
    memvault server, reached with the API key of ``$MEMVAULT_API_KEY`` (never an argument)."""
    if args.server is None:
        from ._common import open_store

        with open_store(args) as store:
            yield store, None
        return
    if not args.memory_store:
        raise InvalidInputError("Error: --server needs --memory-store ID (memstore_...).")
    from ..agent.remote import API_KEY_ENV, RemoteMemoryTool

    if not os.environ.get(API_KEY_ENV):
        raise KeyUnavailableError(f"No API key for the memory server: set {API_KEY_ENV}.")
    with RemoteMemoryTool(args.memory_store, base_url=args.server) as tool:

        def run(data: dict[str, Any], session: str) -> Any:
            return tool.run(data, session=session)

        yield None, run


def _cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from ..agent import mcp as mcpserver
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] in ("mcp", "mcp_types", "starlette", "uvicorn"):
            raise InvalidInputError(
                "memvault mcp needs the MCP SDK: install memvault[mcp] (pip install 'memvault[mcp]')."
            ) from None
        raise
    import anyio

    token_file = Path(args.token_file) if args.token_file else mcpserver.default_token_file()
    if args.http:
        mcpserver.check_bind(args.host, args.allow_remote)  # before asking for a key
    with _backend(args) as (store, remote):
        token = ""
        if args.http:
            token, created = mcpserver.load_or_create_token(token_file)
            if created:
                print(f"memvault: made a new MCP bearer token in {token_file} (mode 0600)", file=sys.stderr)
        if remote is not None:
            server = mcpserver.build_server(remote=remote, session=args.session)
        else:
            server = mcpserver.build_server(store, actor=args.actor, session=args.session)

        def ready(url: str) -> None:
            print(f"memvault: serving MCP at {url} (bearer token in {token_file})", file=sys.stderr, flush=True)

        async def serve() -> None:
            if not args.http:
                await mcpserver.serve_stdio(server)
                return
            await mcpserver.serve_http(
                server, token=token, host=args.host, port=args.port, allow_remote=args.allow_remote, ready=ready
            )

        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
        try:
            anyio.run(serve)
        except _Terminated:
            pass
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser(
        "mcp",
        help="serve the store to MCP clients (stdio, or streamable HTTP with --http)",
        description="Serve the memory store as an MCP server: the memory tool's six commands (memory_view, "
        "memory_create, ...), read-only history (memory_log, memory_show, memory_diff, memory_blame) and "
        "memory_revert. Every commit records --actor and the client's session. Default transport: stdio. "
        "With --http: streamable HTTP at http://HOST:PORT/mcp, each request needing 'Authorization: Bearer "
        "TOKEN' (the token file is made on first use, mode 0600). Needs memvault[mcp].",
    )
    s.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    s.add_argument(
        "--server", metavar="URL",
        help="serve a memory store of a memvault server (memvault serve) instead of a local store: its "
        "commands run there, with the API key in $MEMVAULT_API_KEY; no history tools",
    )  # fmt: skip
    s.add_argument("--memory-store", metavar="ID", help="with --server: the memory store (memstore_...)")
    s.add_argument("--host", default=_DEFAULT_HOST, help=f"address to bind with --http (default: {_DEFAULT_HOST})")
    s.add_argument(
        "--port",
        type=port_number,
        default=_DEFAULT_PORT,
        help=f"port with --http (default: {_DEFAULT_PORT}; 0: any free)",
    )
    s.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer token file for --http (default: $XDG_CONFIG_HOME/memvault/mcp-token, i.e. "
        "~/.config/memvault/mcp-token); made with a new random token when absent",
    )
    s.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow binding a non-loopback address (terminate TLS in a reverse proxy in front of it)",
    )
    s.add_argument("--actor", default=_DEFAULT_ACTOR, help=f"who commits are attributed to (default: {_DEFAULT_ACTOR})")
    s.add_argument(
        "--session",
        help="session recorded with commits when the client has no MCP session id (default: a random id "
        "per connection)",
    )
    s.set_defaults(func=_cmd_mcp)
