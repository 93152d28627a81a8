"""Which store a request of the review UI reaches, as whom, and with what rights.

:class:`LocalBackend` (``memvault ui``): the one store the command opened; the operator logged
in with the printed token may do everything; writes are attributed to ``ui:<OS user>``.
:class:`ServedBackend` (``/ui/`` of ``memvault serve``): the memory stores of a server root; a
session holds an API key's id, whose record is read again from the catalog at every request (a
revoked key is logged out at its next request); a key reaches only the stores it may use (others
look absent), and only an admin key may write (redact, merge or discard a dream, revert, restore);
writes are attributed to the key's id.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import NotFoundError
from ..memories import Memories

if TYPE_CHECKING:
    from ..server.root import ServerRoot
    from ..store import MemoryStore

__all__ = ["Access", "Identity", "StoreEntry", "Backend", "LocalBackend", "ServedBackend", "LOCAL_STORE"]

#: The store id of ``memvault ui``'s one store (in links; it has no id of its own there).
LOCAL_STORE = "local"


@dataclass(frozen=True)
class Identity:
    """Who a session is: an API key's id and name under ``serve`` ("" for ``memvault ui``),
    whether it may write, and the stores it may reach (empty: all)."""

    key_id: str
    name: str
    may_write: bool
    stores: tuple[str, ...] = ()

    def may_use(self, store_id: str) -> bool:
        return not self.stores or store_id in self.stores


@dataclass(frozen=True)
class StoreEntry:
    """A store a session may open (the store list of ``/ui/``)."""

    id: str
    name: str
    description: str = ""
    archived: bool = False


@dataclass(frozen=True)
class Access:
    """One request's store: the store, its memory-stores view (the lineage index), its id and
    name, whom writes are attributed to and whether the session may write."""

    store: MemoryStore
    memories: Memories
    store_id: str
    name: str
    actor: str
    may_write: bool


class Backend(Protocol):
    """What the UI asks of a backend."""

    served: bool

    def login(self, secret: str) -> str | None: ...

    def identity(self, key_id: str) -> Identity | None: ...

    def stores(self, identity: Identity) -> list[StoreEntry]: ...

    def open(self, identity: Identity, store_id: str) -> AbstractContextManager[Access]: ...


class LocalBackend:
    """``memvault ui``: one open store, everything allowed to the holder of the login token.

    Args:
        store: the open store (closed by the caller).
        actor: whom writes are attributed to (``ui:<OS user>``).
        name: how the pages name the store (the location as given).
    """

    served = False

    def __init__(self, store: MemoryStore, *, actor: str, name: str) -> None:
        self.store = store
        self.actor = actor
        self.name = name
        self.memories = Memories(store)

    def login(self, secret: str) -> str | None:
        return None  # the login token is the only way in

    def identity(self, key_id: str) -> Identity | None:
        return Identity("", self.actor, True)

    def stores(self, identity: Identity) -> list[StoreEntry]:
        return [StoreEntry(LOCAL_STORE, self.name)]

    @contextmanager
    def open(self, identity: Identity, store_id: str) -> Iterator[Access]:
        if store_id != LOCAL_STORE:
            raise NotFoundError("Error: No store has this id.")
        yield Access(self.store, self.memories, LOCAL_STORE, self.name, self.actor, True)


class ServedBackend:
    """``/ui/`` of ``memvault serve`` over an open server root."""

    served = True

    def __init__(self, root: ServerRoot) -> None:
        self.root = root

    def login(self, secret: str) -> str | None:
        """The id of the live API key whose secret this is, else None."""
        key = self.root.authenticate(secret.strip())
        return key.id if key is not None else None

    def identity(self, key_id: str) -> Identity | None:
        """The key's rights at the catalog's head (None: unknown or revoked)."""
        key = self.root.registry().keys.get(key_id)
        if key is None or key.revoked_at is not None:
            return None
        return Identity(key.id, key.name, key.admin, key.stores)

    def stores(self, identity: Identity) -> list[StoreEntry]:
        """The live memory stores the key may use, oldest first."""
        return [
            StoreEntry(s.id, s.name, s.description, s.archived_at is not None)
            for s in self.root.registry().live_stores()
            if identity.may_use(s.id)
        ]

    @contextmanager
    def open(self, identity: Identity, store_id: str) -> Iterator[Access]:
        """The store ``store_id`` for this key (NotFoundError for a store it may not use, as for
        one that does not exist)."""
        if not identity.may_use(store_id):
            raise NotFoundError("Error: No memory store has this id.")
        registry = self.root.registry()
        record = self.root.store(store_id, registry)
        with self.root.memories(store_id, registry) as memories:
            yield Access(memories.store, memories, store_id, record.name, identity.key_id, identity.may_write)
