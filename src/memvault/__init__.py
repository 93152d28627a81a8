"""memvault: an encrypted, git-versioned backend for Anthropic's memory tool.

``MemoryStore`` is the store; ``MemoryTool`` / ``AsyncMemoryTool`` are the drop-in SDK tools;
``RemoteMemoryTool`` / ``AsyncRemoteMemoryTool`` the same tools over a memvault server (an API
key, no store key); ``context_management()`` is the request block that pairs the memory tool with
context editing.

Every name is imported on first use, so that ``import memvault`` is instant: store and CLI code
never pay for importing ``anthropic``, and the ``memvault`` command, which must import this
package before it runs, can turn an interrupt or an unsupported platform into one line of its
own. memvault runs on Linux and macOS; elsewhere (Windows) using any of these names raises
:class:`ImportError` saying so.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent.remote import AsyncRemoteMemoryTool, RemoteMemoryTool
    from .agent.tool import AsyncMemoryTool, MemoryTool
    from .errors import MemvaultError
    from .protocol.context import context_management
    from .settings import KdfParams, StoreSettings
    from .store import MemoryStore

__all__ = [
    "MemoryStore",
    "MemoryTool",
    "AsyncMemoryTool",
    "RemoteMemoryTool",
    "AsyncRemoteMemoryTool",
    "StoreSettings",
    "KdfParams",
    "MemvaultError",
    "context_management",
]
__version__ = "0.1.0"

#: Where each public name lives.
_HOMES = {
    "MemoryStore": "store",
    "MemoryTool": "agent.tool",
    "AsyncMemoryTool": "agent.tool",
    "RemoteMemoryTool": "agent.remote",
    "AsyncRemoteMemoryTool": "agent.remote",
    "StoreSettings": "settings",
    "KdfParams": "settings",
    "MemvaultError": "errors",
    "context_management": "protocol.context",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'memvault' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
