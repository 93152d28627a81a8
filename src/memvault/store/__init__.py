"""The store: :class:`MemoryStore` (create, open, read, commit), side branches (:class:`BranchStore`),
state, transactions, the commit pipeline, the typed read API, the configuration file and access times.
"""

from .branch import BranchStore
from .config import STORE_FILE
from .memorystore import MemoryStore
from .reads import MemoryEntry
from .state import StoreState
from .transaction import Committed, Transaction

#: A store's ``main`` or one of its side branches: what the memory protocol, history and audit
#: work on.
AnyBranch = MemoryStore | BranchStore

__all__ = [
    "MemoryStore",
    "BranchStore",
    "AnyBranch",
    "MemoryEntry",
    "Transaction",
    "Committed",
    "StoreState",
    "STORE_FILE",
]
