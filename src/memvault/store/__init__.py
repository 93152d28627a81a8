"""The store: :class:`MemoryStore` (open, read, commit), side branches (:class:`BranchStore`),
state, transactions, the commit pipeline, the configuration file and access times.
"""

from .branch import BranchStore
from .config import STORE_FILE
from .memorystore import MemoryStore
from .state import StoreState
from .transaction import Committed, Transaction

#: A store's ``main`` or one of its side branches: what the memory protocol, history and audit
#: work on.
AnyBranch = MemoryStore | BranchStore

__all__ = ["MemoryStore", "BranchStore", "AnyBranch", "Transaction", "Committed", "StoreState", "STORE_FILE"]
