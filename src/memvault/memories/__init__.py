"""The memory-stores model over a memvault store: path-addressed text memories with ids that
survive renames, every change a version with its actor, preconditions on a content hash, and
redaction of single versions (crypto-shredding).

``ids`` (memory and version ids), ``model`` (the objects and their JSON shapes), ``index`` (the
lineage index of a store's history: which versions each memory has), ``ops`` (:class:`Memories`:
create, retrieve, update, delete and list memories; list, retrieve and redact versions). The
server, the review pages, the command line and ``migrate`` all go through :class:`Memories`.
"""

from .model import Actor, Memory, MemoryPrefix, MemoryVersion, Page
from .ops import Memories

__all__ = ["Memories", "Memory", "MemoryPrefix", "MemoryVersion", "Actor", "Page"]
