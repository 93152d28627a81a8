"""A Claude agent whose memory lives on a memvault server: the worker holds an API key, no store key.

Usage::

    export ANTHROPIC_API_KEY=sk-ant-...                  # the model
    export MEMVAULT_SERVER_URL=https://memory.internal   # the memory server (memvault serve)
    export MEMVAULT_API_KEY=mvk_...                      # memvault server apikey create --store ...
    python examples/remote_agent.py --store-id memstore_... "Remember that Dana prefers email."

``--store-id`` (else ``$MEMVAULT_STORE_ID``) names the memory store (``memvault server stores``).
The SDK's tool runner executes every ``memory`` command Claude issues as one request to the server,
which runs it on the store exactly as the local ``MemoryTool`` would: each change is a commit whose
actor is the API key's id and whose session is this run's (``--session``, else a new random id).
An operator reviews them with ``memvault --store ROOT/stores/<id> log --session <session>``.

Old tool results are cleared from the context as the conversation grows
(``memvault.context_management()``), except those of the memory tool; ``--no-context-management``
sends the plain conversation.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import anthropic

import memvault
from memvault.protocol.context import CONTEXT_MANAGEMENT_BETA

DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_TOKENS = 4096

SYSTEM_PROMPT = (
    "You are a customer-support assistant with a persistent memory directory at /memories. "
    "Keep durable facts about customers, open cases and your own working notes there, and keep "
    "the files short and organised. Never store secrets such as passwords, card numbers or API keys."
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run a Claude agent whose memory is on a memvault server.")
    parser.add_argument("prompt", nargs="+", help="what to ask the agent")
    parser.add_argument(
        "--store-id",
        default=os.environ.get("MEMVAULT_STORE_ID"),
        help="the memory store (memstore_...; default: $MEMVAULT_STORE_ID)",
    )
    parser.add_argument("--session", default=None, help="recorded with each commit (default: a new random id)")
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


def describe_tool_call(block: Any) -> str:
    command = block.input.get("command", "?")
    path = block.input.get("path") or block.input.get("old_path", "")
    target = f" -> {block.input['new_path']}" if command == "rename" and "new_path" in block.input else ""
    return f"[memory] {command} {path}{target}"


def run_agent(
    client: anthropic.Anthropic,
    tool: memvault.RemoteMemoryTool,
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
    missing = [
        name for name in ("ANTHROPIC_API_KEY", "MEMVAULT_SERVER_URL", "MEMVAULT_API_KEY") if not os.environ.get(name)
    ]
    if missing or not args.store_id:
        needs = [*missing, *([] if args.store_id else ["--store-id or MEMVAULT_STORE_ID"])]
        print(f"Set {', '.join(needs)} to run this example.", file=sys.stderr)
        return 2

    session = args.session or uuid.uuid4().hex
    # The memory server's URL and key come from MEMVAULT_SERVER_URL / MEMVAULT_API_KEY.
    with memvault.RemoteMemoryTool(args.store_id, session=session) as tool:
        try:
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

    print(answer)
    print(f"\nSession {session}: the memory server recorded each change under this session.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
