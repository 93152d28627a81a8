"""The store: :class:`MemoryStore` (open, read the head, commit), its state, transactions, the
commit pipeline, the configuration file and access times.
"""

from .config import STORE_FILE
from .memorystore import MemoryStore
from .state import StoreState
from .transaction import Committed, Transaction

__all__ = ["MemoryStore", "Transaction", "Committed", "StoreState", "STORE_FILE"]
