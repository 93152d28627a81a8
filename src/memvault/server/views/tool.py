"""``POST /v1/memory_stores/{id}/memvault/tool``: one ``memory_20250818`` command, run by the server
on the store exactly as :class:`memvault.MemoryTool` runs it (a memvault extension of the API).

Body: ``{"session": str, "command": {...}}`` (the tool input the model sent) or
``{"session": str, "clear_all_memory": true}``. Answer: ``{"type": "tool_result", "is_error": bool,
"content": str | [blocks]}`` with the tool's exact result or error text, so
:class:`memvault.RemoteMemoryTool` gives the model what a local tool would. Each mutating command
is one commit whose actor is the API key's id and whose session is the one given (a version of the
memory-stores API by a ``session_actor``). Every memvault error is the tool's error text, as the
local tool gives it; anything else is the API's 500.
"""

from __future__ import annotations

from typing import Any

from ...errors import MemvaultError
from ...protocol.commands import clear_all_memory, run_command
from ..errors import bad_request
from .base import ApiView, Call
from .memories import live_store

__all__ = ["ToolView"]

_READ_ONLY = frozenset({"view"})
_MAX_SESSION = 255


class ToolView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}/memvault/tool"

    def post(self, call: Call) -> tuple[int, Any]:
        body = call.fields({"session", "command", "clear_all_memory"}, {"session"})
        session = body["session"]
        if not isinstance(session, str) or not 1 <= len(session) <= _MAX_SESSION:
            raise bad_request(f"`session` must be a string of 1 to {_MAX_SESSION} characters.")
        clear = body.get("clear_all_memory") is True
        command = body.get("command")
        if clear == ("command" in body):  # a command of null is the tool's own error, as locally
            raise bad_request("Give exactly one of `command` or `clear_all_memory: true`.")
        name = command.get("command") if isinstance(command, dict) else None
        store_id = live_store(self, call, writing=clear or name not in _READ_ONLY)
        call.confirm()  # the tool's commands make their commits themselves: the key is confirmed first
        with self.app.root.memories(store_id, call.registry) as memories:
            store = memories.store
            try:
                if clear:
                    result: Any = clear_all_memory(store, actor=call.key.id, session=session)
                else:
                    result = run_command(store, command, actor=call.key.id, session=session)
            except MemvaultError as err:
                return 200, {"type": "tool_result", "is_error": True, "content": err.message}
        if clear or name not in _READ_ONLY:
            self.app.metrics.commit("tool-" + ("clear" if clear else str(name)))
        return 200, {"type": "tool_result", "is_error": False, "content": result}
