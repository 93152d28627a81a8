"""Drop-in memory tools for the ``anthropic`` SDK: the only module that imports ``anthropic``.

``MemoryTool`` / ``AsyncMemoryTool`` subclass the SDK's abstract memory tools, so an instance
goes straight into ``client.beta.messages.tool_runner(..., tools=[tool])``. Every failure
reaches the model as a ``ToolError`` with a clean message: memvault errors carry their
protocol text; anything unexpected becomes a generic message (never ``repr(exc)``, which would
leak host paths or content). ``clear_all_memory()`` (called by the application, never by the
model) deletes everything under ``/memories`` in one commit, as the SDK's local filesystem tool
empties its directory, but undoable with ``memvault revert``.
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool
from anthropic.lib.tools._beta_functions import BetaFunctionToolResultType, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from anyio.to_thread import run_sync

from ..errors import InternalError, MemvaultError
from ..protocol.commands import CLEARED, clear_all_memory, run_command
from ..store import AnyBranch

__all__ = ["MemoryTool", "AsyncMemoryTool", "CLEARED"]

_log = logging.getLogger("memvault")


def _execute(store: AnyBranch, data: object, actor: str, session: str) -> BetaFunctionToolResultType:
    try:
        return run_command(store, data, actor=actor, session=session)  # type: ignore[return-value]
    except MemvaultError as err:
        raise ToolError(str(err)) from None
    except Exception as err:
        # Log the type only: the message of an arbitrary exception may hold content or paths.
        _log.error("memvault: unexpected %s while running a memory command", type(err).__name__)
        raise ToolError("Error: " + str(InternalError())) from None


def _as_input(command: Any) -> object:
    """A command model (or dict) as the plain dict the protocol layer validates."""
    if isinstance(command, dict):
        return command
    dump = getattr(command, "to_dict", None) or getattr(command, "model_dump", None)
    return dump() if dump is not None else command


class MemoryTool(BetaAbstractMemoryTool):
    """memvault as a synchronous ``memory_20250818`` tool.

    Each mutating command is one commit attributed to ``actor`` and ``session``.

    Args:
        store: the store (:class:`~memvault.MemoryStore`) or a side branch of it the model works on.
        actor: who the commits of this tool are attributed to (``log`` shows it; encrypted in the
            commit's metadata). Default ``"claude"``; name the agent when several share a store.
        session: recorded with each commit, to tell one conversation's changes from another's
            (``log --session``); default: a new random id per tool object.
        cache_control: the prompt-caching breakpoint of the tool definition
            (``{"type": "ephemeral"}``), passed to the SDK as is.
    """

    def __init__(
        self,
        store: AnyBranch,
        *,
        actor: str = "claude",
        session: str | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.store = store
        self.actor = actor
        self.session = session if session is not None else uuid.uuid4().hex

    def call(self, input: object) -> BetaFunctionToolResultType:
        return _execute(self.store, input, self.actor, self.session)

    def _run(self, command: Any) -> BetaFunctionToolResultType:
        return _execute(self.store, _as_input(command), self.actor, self.session)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> BetaFunctionToolResultType:
        return self._run(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> BetaFunctionToolResultType:
        return self._run(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> BetaFunctionToolResultType:
        return self._run(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> BetaFunctionToolResultType:
        return self._run(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> BetaFunctionToolResultType:
        return self._run(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> BetaFunctionToolResultType:
        return self._run(command)

    def clear_all_memory(self) -> str:
        """Delete every file and directory under ``/memories`` in one commit (command ``clear``)
        attributed to this tool's actor and session; ``memvault revert`` brings them back. An
        empty ``/memories`` makes no commit. Returns ``"All memory cleared"``, as the SDK's local
        filesystem tool does.

        Raises:
            MemvaultError: e.g. LockedError, StorageError (for the application: not a ToolError).
        """
        return clear_all_memory(self.store, actor=self.actor, session=self.session)


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """memvault as an asynchronous ``memory_20250818`` tool (work runs in a worker thread).

    Arguments as for :class:`MemoryTool`.
    """

    def __init__(
        self,
        store: AnyBranch,
        *,
        actor: str = "claude",
        session: str | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.store = store
        self.actor = actor
        self.session = session if session is not None else uuid.uuid4().hex

    async def call(self, input: object) -> BetaFunctionToolResultType:
        return await run_sync(_execute, self.store, input, self.actor, self.session)

    async def _run(self, command: Any) -> BetaFunctionToolResultType:
        return await run_sync(_execute, self.store, _as_input(command), self.actor, self.session)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> BetaFunctionToolResultType:
        return await self._run(command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> BetaFunctionToolResultType:
        return await self._run(command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> BetaFunctionToolResultType:
        return await self._run(command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> BetaFunctionToolResultType:
        return await self._run(command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> BetaFunctionToolResultType:
        return await self._run(command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> BetaFunctionToolResultType:
        return await self._run(command)

    async def clear_all_memory(self) -> str:
        """As :meth:`MemoryTool.clear_all_memory`, in a worker thread."""
        return await run_sync(functools.partial(clear_all_memory, self.store, actor=self.actor, session=self.session))
