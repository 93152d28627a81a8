"""memvault: an encrypted, git-versioned backend for Anthropic's memory tool.

``MemoryStore`` is the store; ``MemoryTool`` / ``AsyncMemoryTool`` are the drop-in SDK tools;
``context_management()`` is the request block that pairs the memory tool with context editing.
The tools are imported lazily so that store and CLI code never pay for importing ``anthropic``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import context_management
from .errors import MemvaultError
from .settings import KdfParams, StoreSettings
from .store import MemoryStore

if TYPE_CHECKING:
    from .tool import AsyncMemoryTool, MemoryTool

__all__ = [
    "MemoryStore",
    "MemoryTool",
    "AsyncMemoryTool",
    "StoreSettings",
    "KdfParams",
    "MemvaultError",
    "context_management",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("MemoryTool", "AsyncMemoryTool"):
        from . import tool

        return getattr(tool, name)
    raise AttributeError(f"module 'memvault' has no attribute {name!r}")
