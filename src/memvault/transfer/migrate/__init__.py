"""Migration between a store and a memory-stores API (``memvault migrate``): :func:`pull` copies a
remote memory store in, with its history, one commit per version; :func:`push` publishes the head
with ``content_sha256`` preconditions, never overwriting a change made on the other side. The sync
state (which memory is which file, the baselines) lives in the store's encrypted history
(:mod:`.state`); :class:`MemoryStoresClient` (the only ``anthropic`` importer here) makes the calls.
"""

from .client import MemoryStoresClient
from .model import ApiRefusedError, CallStats, MemoryStoresApi, RemoteMemory, RemoteStore, RemoteVersion
from .pull import pull
from .push import push
from .state import Entry, SyncState, load_state
from .summary import Conflict, MigrateSummary, Refusal

__all__ = [
    "MemoryStoresClient",
    "MemoryStoresApi",
    "ApiRefusedError",
    "CallStats",
    "RemoteMemory",
    "RemoteStore",
    "RemoteVersion",
    "pull",
    "push",
    "Entry",
    "SyncState",
    "load_state",
    "MigrateSummary",
    "Refusal",
    "Conflict",
]
