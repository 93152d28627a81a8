"""A Claude agent whose memory lives in an encrypted, git-versioned memvault store.

Usage::

    export ANTHROPIC_API_KEY=sk-ant-...
    export MEMVAULT_PASSPHRASE=...            # or MEMVAULT_KEY_FILE=..., or MEMVAULT_KEY=aws-kms:alias/...
                                              # (a key provider: no secret on the worker); else asked
    python examples/agent.py "Remember that Dana (order #4521) prefers email contact."
    python examples/agent.py --store ~/support-memory "What do we know about Dana?"

The store is opened at ``--store``, else ``$MEMVAULT_STORE``, else ``./memvault-store`` (a
directory, or ``s3://bucket/prefix`` for a store shared by many workers), and created there if it
does not exist yet (a typed-in passphrase is asked for twice then). The SDK's
tool runner executes every ``memory`` command Claude issues against the store; each change becomes
a commit attributed to actor ``example-agent`` and this run's session id, so everything the agent
wrote can be reviewed afterwards with ``memvault --store <dir> log``.

Old tool results are cleared from the context as the conversation grows (the API's
``clear_tool_uses_20250919`` context edit, as ``memvault.context_management()`` builds it: the API's
default thresholds), except those of the memory tool itself: what Claude needs to keep is in the
store. Pass ``--no-context-management`` to send the plain conversation.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anthropic

import memvault
from memvault.errors import MemvaultError, StoreNotFoundError
from memvault.protocol.context import CONTEXT_MANAGEMENT_BETA

DEFAULT_STORE = "./memvault-store"
# anthropic 2.14 marks this model deprecated (end of life 2026-11-30) and warns; pick another one with
# --model or $ANTHROPIC_MODEL.
DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_TOKENS = 4096
ACTOR = "example-agent"

SYSTEM_PROMPT = (
    "You are a customer-support assistant with a persistent memory directory at /memories. "
    "Keep durable facts about customers, open cases and your own working notes there, and keep "
    "the files short and organised. Never store secrets such as passwords, card numbers or API keys."
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run a Claude agent with memvault-backed memory.")
    parser.add_argument("prompt", nargs="+", help="what to ask the agent")
    parser.add_argument(
        "--store",
        default=os.environ.get("MEMVAULT_STORE", DEFAULT_STORE),
        help=f"memvault store directory (default: $MEMVAULT_STORE or {DEFAULT_STORE})",
    )
    parser.add_argument(
        "--model",
        default=os.environ.get("ANTHROPIC_MODEL", DEFAULT_MODEL),
        help=f"model to use (default: $ANTHROPIC_MODEL or {DEFAULT_MODEL})",
    )
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    parser.add_argument(
        "--no-context-management",
        action="store_true",
        help="do not ask the API to clear old non-memory tool results from the context",
    )
    return parser.parse_args(argv)


def read_passphrase(*, new_store: bool) -> str:
    """The store passphrase from ``$MEMVAULT_PASSPHRASE``, else from the terminal."""
    from_env = os.environ.get("MEMVAULT_PASSPHRASE")
    if from_env:
        return from_env
    passphrase = getpass.getpass("memvault passphrase: ")
    if not passphrase:
        raise SystemExit("An empty passphrase is not allowed.")
    if new_store and getpass.getpass("repeat passphrase: ") != passphrase:
        raise SystemExit("The passphrases do not match.")
    return passphrase


def unlock(*, new_store: bool) -> dict[str, str]:
    """The key as the memvault CLI takes it: a key provider's URI from ``$MEMVAULT_KEY``, a key
    file from ``$MEMVAULT_KEY_FILE`` (a raw 32-byte key, see ``memvault keygen``), else a passphrase."""
    if os.environ.get("MEMVAULT_KEY"):
        return {"key": os.environ["MEMVAULT_KEY"]}
    if os.environ.get("MEMVAULT_KEY_FILE"):
        return {"key_file": os.environ["MEMVAULT_KEY_FILE"]}
    return {"passphrase": read_passphrase(new_store=new_store)}


def open_or_create_store(where: str | Path) -> memvault.MemoryStore:
    """Open the store at ``where`` (a directory or a URL), or create one there if there is none."""
    if not isinstance(where, Path) or where.exists():
        try:
            return memvault.MemoryStore.open(where, **unlock(new_store=False))  # type: ignore[arg-type]
        except StoreNotFoundError:
            pass  # nothing there yet (or a directory without a store; create() takes only an empty one)
    print(f"Creating a new memvault store at {where}", file=sys.stderr)
    return memvault.MemoryStore.create(where, **unlock(new_store=True))  # type: ignore[arg-type]


def describe_tool_call(block: Any) -> str:
    command = block.input.get("command", "?")
    path = block.input.get("path") or block.input.get("old_path", "")
    target = f" -> {block.input['new_path']}" if command == "rename" and "new_path" in block.input else ""
    return f"[memory] {command} {path}{target}"


def run_agent(
    client: anthropic.Anthropic,
    tool: memvault.MemoryTool,
    prompt: str,
    *,
    model: str = DEFAULT_MODEL,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    context_management: bool = True,
) -> str:
    """Run the tool loop until Claude answers without using a tool, and return that answer's text."""
    options: dict[str, Any] = {}
    if context_management:
        options = {"context_management": memvault.context_management(), "betas": [CONTEXT_MANAGEMENT_BETA]}
    runner = client.beta.messages.tool_runner(
        model=model,
        max_tokens=max_tokens,
        system=SYSTEM_PROMPT,
        tools=[tool],
        messages=[{"role": "user", "content": prompt}],
        **options,
    )
    for message in runner:  # one assistant turn per iteration; the runner executes its tool calls
        for block in message.content:
            if block.type == "tool_use":
                print(describe_tool_call(block), file=sys.stderr)
    final = runner.until_done()
    return "".join(block.text for block in final.content if block.type == "text")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("Set ANTHROPIC_API_KEY to run this example.", file=sys.stderr)
        return 2

    store_path: str | Path = args.store if "://" in args.store else Path(args.store).expanduser()
    session = uuid.uuid4().hex
    try:
        store = open_or_create_store(store_path)
    except MemvaultError as err:
        print(f"memvault: {err}", file=sys.stderr)
        return int(err.exit_status)

    try:
        tool = memvault.MemoryTool(store, actor=ACTOR, session=session)
        answer = run_agent(
            anthropic.Anthropic(),
            tool,
            " ".join(args.prompt),
            model=args.model,
            max_tokens=args.max_tokens,
            context_management=not args.no_context_management,
        )
    except anthropic.APIError as err:
        print(f"Anthropic API error: {err}", file=sys.stderr)
        return 1
    finally:
        store.close()

    print(answer)
    print(
        f"\nSession {session}: review what the agent changed with\n  memvault --store {store_path} log",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
