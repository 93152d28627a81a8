"""The memory-stores model over a store: memories with ids that survive renames, versions with
actors, content_sha256 preconditions, redaction of one version (what the server serves)."""

from .model import Actor, Memory, MemoryPrefix, MemoryVersion, Page
from .ops import Memories

__all__ = ["Memories", "Memory", "MemoryPrefix", "MemoryVersion", "Actor", "Page"]
