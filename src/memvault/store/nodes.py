"""The decrypted state of one commit: :class:`StoreState`, whose index shards are decoded when
first needed (a read decodes the shard of its path and of its parents; listings, counts and
iteration decode all of them), and :class:`NodeMap`, its paths. The shards come from a
:class:`ShardSource` (the store's :class:`~memvault.store.state.StateReader`), which authenticates
each; docs/format.md §8, *Lazy decoding*, says what is checked when.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Container, ItemsView, Iterator, KeysView, Mapping, ValuesView
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from ..errors import IntegrityError
from ..format.records import Node
from ..paths import ROOT

__all__ = [
    "StoreState", "NodeMap", "ShardSource", "shard_of", "shard_among", "split_path", "gc_paused", "PLACEHOLDER",
]  # fmt: skip


class ShardSource(Protocol):
    """What a state decodes its shards through (the store's state reader)."""

    #: The store's state lock (re-entrant): a state fills itself in under it.
    lock: AbstractContextManager[Any]
    #: How sibling names are told apart (``paths.sibling_key``).
    fold: Callable[[str], str]

    def token_of(self, path: str) -> bytes: ...

    def is_head(self, commit_id: bytes) -> bool: ...

    def locate_shard(self, tree_id: bytes, shard: bytes) -> bytes | None: ...

    def shard_digits(self, tree_id: bytes) -> int: ...

    def all_shard_blobs(self, tree_id: bytes) -> dict[bytes, bytes]: ...

    def shard_nodes(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]: ...


#: Shard name of each first token byte (two lowercase hex digits).
_SHARD_NAMES = tuple(b"%02x" % i for i in range(256))


def shard_of(token: bytes, digits: int = 2) -> bytes:
    """The index shard of a path token: the first ``digits`` hex digits of it (2 in tree layouts
    1 and 2, the layout's number in layouts 3 and 4; docs/format.md §5.3)."""
    if digits == 2:
        return _SHARD_NAMES[token[0]] if token else b""
    return token[: (digits + 1) // 2].hex()[:digits].encode()


def shard_among(shards: Container[bytes], token: bytes) -> bytes:
    """The shard of ``token`` among the shard names ``shards`` of one tree (every name of a tree
    has the same number of digits); its two-digit name if no name fits."""
    for digits in (2, 3, 4):
        name = shard_of(token, digits)
        if name in shards:
            return name
    return shard_of(token)


def split_path(path: str) -> tuple[str, str]:
    """``(parent, name)`` of a canonical path."""
    parent, _, name = path.rpartition("/")
    return parent, name


#: Paths a state remembers it looked up (:meth:`StoreState.node`).
_SEEN_PATHS = 256
#: In ``StoreState._blobs``: a shard not located yet.
_UNKNOWN = b"?"
#: How the placeholder path of a redacted version starts (docs/format.md §5.7).
PLACEHOLDER = f"{ROOT}/<redacted:"


class StoreState:
    """The decrypted state at one commit, decoded one index shard at a time.

    A shard is located in the commit's tree and decoded (authenticated, every node record
    opened and checked: docs/format.md §5.4) when a path in it is first looked up; listings,
    the file and byte counts and iteration over :attr:`nodes` decode every shard first
    (:meth:`load_all`). Decoding adds the shard whole or, when it raises, nothing. Mutated only
    by the store (lookups fill it in: a state another thread may read is filled under the
    reader's lock).

    Args:
        commit_id, seq, tree_id: the commit.
        reader: decodes and authenticates the shards.
        complete: every shard is present already (a new store's empty state, or one being built).
        current: the state of ``main``'s head: a node whose data key was destroyed is an error
            (while the commit is still the head).
    """

    def __init__(
        self, commit_id: bytes, seq: int, tree_id: bytes, reader: ShardSource, *, complete: bool = False,
        current: bool = False,
    ) -> None:  # fmt: skip
        self.commit_id = commit_id
        self.seq = seq
        self.tree_id = tree_id
        self.reader = reader
        #: The key siblings are unique by in :attr:`children` (``paths.sibling_key`` of the store's grammar).
        self.fold: Callable[[str], str] = reader.fold
        self.current = current
        #: shard -> token -> node of the shards decoded so far (each dict is never changed in
        #: place: a commit replaces it, so copies of the state and the reader's cache share it).
        self.shards: dict[bytes, dict[bytes, Node]] = {}
        #: shard -> index blob id (None: no such shard) of the shards located so far.
        self._blobs: dict[bytes, bytes | None] = {}
        #: Hex digits of the tree's shard names (0: not looked up yet).
        self._digits = 0
        self._complete = complete
        #: Every shard with nodes is in :attr:`shards` (a copy of a complete state, which builds
        #: its child lists and counts only when asked).
        self._located_all = complete
        #: dir -> fold(name) -> name; kept only once complete.
        self._children: dict[str, dict[str, str]] = {}
        self._file_count = 0
        self._total_bytes = 0
        #: Paths looked up lately and their nodes, their ancestors checked to be directories
        #: (a repeated look-up costs one dict access, not a path token; bounded).
        self._seen: dict[str, Node] = {}
        #: Canonical path -> node of every node; kept only once complete (a look-up is then one
        #: dict access, as listings need).
        self._paths: dict[str, Node] = {}

    # -- look-ups --------------------------------------------------------------------------------

    @property
    def nodes(self) -> NodeMap:
        """Canonical path -> node, decoding what a look-up needs (a view: no reference cycle)."""
        return NodeMap(self)

    @property
    def complete(self) -> bool:
        """Whether every shard of the commit is decoded."""
        return self._complete

    def node(self, path: str) -> Node | None:
        """The node at canonical ``path`` (None: none), decoding its shard if needed.

        Raises:
            IntegrityError: the shard (or one of the path's ancestors') is not authentic, or
                an ancestor is not a directory.
        """
        if self._complete:
            return self._paths.get(path)
        node = self._seen.get(path)
        if node is not None:
            return node
        if path == ROOT:
            return None  # the root has no node
        token = self.reader.token_of(path)
        node = self.shard(self.shard_name(token)).get(token)
        if node is None or node.path != path:
            return None  # absent, or a redacted version (its placeholder path is not looked up)
        parent = path.rpartition("/")[0]
        if parent != ROOT:
            above = self.node(parent)
            if above is None or not above.is_dir:
                raise IntegrityError("The store's index is inconsistent.")
        if len(self._seen) >= _SEEN_PATHS:
            self._seen.clear()
        self._seen[path] = node
        return node

    def redacted(self, token: bytes) -> Node | None:
        """The redacted version whose path has ``token`` (its path went with its key; the token
        stays), or None; decodes that token's shard only."""
        node = self.shard(self.shard_name(token)).get(token) if token else None
        return node if node is not None and node.redacted else None

    def shard_name(self, token: bytes) -> bytes:
        """The name of the shard that holds ``token`` in this state's tree (as many hex digits
        as its layout's shards have)."""
        if not self._digits:
            self._digits = self.reader.shard_digits(self.tree_id)
        return shard_of(token, self._digits)

    def shard(self, shard: bytes) -> dict[bytes, Node]:
        """``token -> node`` of one shard (empty: none at this commit), decoded if needed. The
        caller must not change the dict."""
        nodes = self.shards.get(shard)
        if nodes is not None:
            return nodes
        if self._located_all:
            return {}
        with self.reader.lock:
            nodes = self.shards.get(shard)
            if nodes is None:
                blob = self._blobs.get(shard, _UNKNOWN)
                if blob == _UNKNOWN:
                    blob = self.reader.locate_shard(self.tree_id, shard)
                nodes = self._decoded(shard, blob)
                self._blobs[shard] = blob
                self.shards[shard] = nodes
            return nodes

    def decoded(self, shard: bytes) -> dict[bytes, Node] | None:
        """The nodes of ``shard`` if it is decoded (None: not yet), decoding nothing."""
        nodes = self.shards.get(shard)
        return nodes if nodes is not None or not self._located_all else {}

    def _decoded(self, shard: bytes, blob: bytes | None) -> dict[bytes, Node]:
        nodes = self.reader.shard_nodes(shard, blob) if blob is not None else {}
        if self.current and any(n.redacted for n in nodes.values()) and self.reader.is_head(self.commit_id):
            # Redaction removes a version from the head before destroying its key. (A state the
            # branch has left since, a copy kept by a reader, may hold versions redacted since.)
            raise IntegrityError("The current state refers to a destroyed data key.")
        return nodes

    # -- the whole state -------------------------------------------------------------------------

    def load_all(self) -> None:
        """Decode every shard not decoded yet and check the whole tree and index (as an open
        did before shards were decoded lazily). On an error nothing is added.

        Raises:
            IntegrityError: a tree does not have memvault's layout, a shard is not authentic, or
                a node's parent is not a directory.
        """
        if self._complete:
            return
        with self.reader.lock, gc_paused():
            if not self._complete:
                self._load_all_unpaused()

    def _load_all_unpaused(self) -> None:
        # The body of load_all, with the collector paused (gc_paused).
        blobs = self.reader.all_shard_blobs(self.tree_id)
        shards = {s: n for s, n in self.shards.items() if self._blobs.get(s) == blobs.get(s)}
        for shard, blob in blobs.items():
            if shard not in shards:
                shards[shard] = self._decoded(shard, blob)
        children: dict[str, dict[str, str]] = {}
        files = size = 0
        every = [n for nodes in shards.values() for n in nodes.values()]
        every.sort(key=lambda n: n.path.count("/"))
        for node in every:
            files, size = files + (not node.is_dir), size + node.size
            _link(children, node, self.fold)
        paths = {n.path: n for n in every}
        for node in every:
            parent = node.path.rpartition("/")[0]
            if parent != ROOT and (parent not in paths or not paths[parent].is_dir):
                raise IntegrityError("The store's index is inconsistent.")
        self.shards = shards
        self._blobs = dict(blobs)
        self._children, self._file_count, self._total_bytes = children, files, size
        self._paths, self._seen = paths, {}
        self._complete = self._located_all = True

    @property
    def children(self) -> dict[str, dict[str, str]]:
        """``dir -> fold(name) -> name`` of every directory (decodes every shard)."""
        self.load_all()
        return self._children

    @property
    def file_count(self) -> int:
        """Files (not directories) in the state (decodes every shard)."""
        self.load_all()
        return self._file_count

    @property
    def total_bytes(self) -> int:
        """Plaintext bytes of all files (decodes every shard)."""
        self.load_all()
        return self._total_bytes

    @property
    def shard_blobs(self) -> dict[bytes, bytes]:
        """``shard -> index blob id`` of every shard (decodes every shard)."""
        self.load_all()
        return {s: b for s, b in self._blobs.items() if b is not None}

    def every_node(self) -> list[Node]:
        """Every node of the state (decodes every shard)."""
        self.load_all()
        return list(self._paths.values())

    def paths(self) -> dict[str, Node]:
        """Canonical path -> node of every node, redacted versions under their placeholder
        paths (decodes every shard). The caller must not change the dict."""
        self.load_all()
        return self._paths

    # -- changes -----------------------------------------------------------------------------------

    def fold_commit(
        self, shards: dict[bytes, tuple[bytes | None, dict[bytes, Node]]], removed: list[Node], added: list[Node],
        made: tuple[bytes, int, bytes],
    ) -> None:  # fmt: skip
        """Become the commit ``made`` = ``(id, seq, tree id)`` this store wrote on top of this
        state: ``shards`` maps each shard it rewrote to ``(its new index blob or None, its
        nodes)``; ``removed`` and ``added`` are the nodes it replaced and wrote."""
        if shards:
            digits = len(next(iter(shards)))
            if self.shards and len(next(iter(self.shards))) != digits:
                # A commit in another layout (``upgrade``, or the first after the tree emptied):
                # it wrote every shard of the state.
                self.shards, self._blobs = {}, {}
            self._digits = digits
        for shard, (blob, nodes) in shards.items():
            self._blobs[shard] = blob
            self.shards[shard] = nodes
        if self._complete:
            for node in sorted(removed, key=lambda n: -n.path.count("/")):
                self._paths.pop(node.path, None)
                _unlink(self._children, node, self.fold)
                self._file_count -= not node.is_dir
                self._total_bytes -= node.size
            for node in sorted(added, key=lambda n: n.path.count("/")):
                self._paths[node.path] = node
                _link(self._children, node, self.fold)
                self._file_count += not node.is_dir
                self._total_bytes += node.size
        self._seen.clear()
        self.commit_id, self.seq, self.tree_id = made

    def follow(self, commit_id: bytes, seq: int, tree_id: bytes) -> StoreState:
        """This state brought to another commit of the same history, keeping the decoded shards
        whose index blob did not change (a complete state stays complete). Consumes this state.

        Raises:
            IntegrityError: as :meth:`load_all` (complete) or as a shard's decoding.
        """
        new = StoreState(commit_id, seq, tree_id, self.reader, current=self.current)
        reader = self.reader
        if not self._complete:
            if self.shards and reader.shard_digits(tree_id) != len(next(iter(self.shards))):
                return new  # another layout (an upgrade since): its shards have other names
            for shard, nodes in self.shards.items():
                blob = reader.locate_shard(tree_id, shard)
                if blob == self._blobs.get(shard):
                    new.shards[shard], new._blobs[shard] = nodes, blob
            return new
        with gc_paused():
            blobs = reader.all_shard_blobs(tree_id)
            children, paths = self._children, self._paths
            files, size = self._file_count, self._total_bytes
            shards = dict(self.shards)
            for shard in list(shards):
                if self._blobs.get(shard) != blobs.get(shard):
                    for node in sorted(shards.pop(shard).values(), key=lambda n: -len(n.path)):
                        paths.pop(node.path, None)
                        _unlink(children, node, self.fold)
                        files, size = files - (not node.is_dir), size - node.size
            added: list[Node] = []
            for shard, blob in blobs.items():
                if shard not in shards:
                    shards[shard] = new._decoded(shard, blob)
                    added.extend(shards[shard].values())
            for node in sorted(added, key=lambda n: n.path.count("/")):
                paths[node.path] = node
                _link(children, node, self.fold)
                files, size = files + (not node.is_dir), size + node.size
            new.shards, new._blobs, new._paths = shards, dict(blobs), paths
            new._children, new._file_count, new._total_bytes = children, files, size
            new._complete = new._located_all = True
            for node in added:
                parent = node.path.rpartition("/")[0]
                if parent != ROOT:
                    above = new.node(parent)
                    if above is None or not above.is_dir:
                        raise IntegrityError("The store's index is inconsistent.")
        return new

    def copy(self) -> StoreState:
        """A copy that later commits do not change (it shares the decoded shards, which are
        never changed in place; it decodes the others itself)."""
        with self.reader.lock:
            new = StoreState(self.commit_id, self.seq, self.tree_id, self.reader, current=self.current)
            new.shards, new._blobs = dict(self.shards), dict(self._blobs)
            new._located_all = self._complete or self._located_all
            return new


def _link(children: dict[str, dict[str, str]], node: Node, fold: Callable[[str], str]) -> None:
    """Enter ``node`` in its parent's child list (a directory gets its own)."""
    parent, name = split_path(node.path)
    children.setdefault(parent, {})[fold(name)] = name
    if node.is_dir:
        children.setdefault(node.path, {})


def _unlink(children: dict[str, dict[str, str]], node: Node, fold: Callable[[str], str]) -> None:
    """Take ``node`` out of its parent's child list. A directory's child list survives while it
    still has children: a reload removes and re-adds a directory whose shard changed while its
    children, in other shards, stay."""
    parent, name = split_path(node.path)
    siblings = children.get(parent)
    if siblings is not None:
        siblings.pop(fold(name), None)
        if not siblings and parent != ROOT and not _is_dir_listed(children, parent, fold):
            del children[parent]
    if node.is_dir and not children.get(node.path):
        children.pop(node.path, None)


def _is_dir_listed(children: dict[str, dict[str, str]], path: str, fold: Callable[[str], str]) -> bool:
    """Whether the directory ``path`` is still in its own parent's child list."""
    parent, name = split_path(path)
    return fold(name) in children.get(parent, {})


class NodeMap(Mapping[str, Node]):
    """``canonical path -> node`` of a :class:`StoreState`: a look-up decodes the shard of that
    path only; iteration, ``len`` and the views decode every shard. Redacted versions are
    listed under their placeholder paths (docs/format.md §5.7) and never found by a look-up."""

    __slots__ = ("_state",)

    def __init__(self, state: StoreState) -> None:
        self._state = state

    def _find(self, path: object) -> Node | None:
        if not isinstance(path, str):
            return None
        if path.startswith(PLACEHOLDER):  # a redacted version: not found by its token
            return self._state.paths().get(path)
        return self._state.node(path)

    def __getitem__(self, path: str) -> Node:
        node = self._find(path)
        if node is None:
            raise KeyError(path)
        return node

    def get(self, path: str, default: Node | None = None) -> Node | None:  # type: ignore[override]
        node = self._find(path)
        return default if node is None else node

    def __contains__(self, path: object) -> bool:
        return self._find(path) is not None

    def _paths(self) -> dict[str, Node]:
        return self._state.paths()

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths())

    def __len__(self) -> int:
        return len(self._state.paths())

    def keys(self) -> KeysView[str]:
        return self._paths().keys()

    def values(self) -> ValuesView[Node]:
        return self._paths().values()

    def items(self) -> ItemsView[str, Node]:
        return self._paths().items()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a state is decoded (and resume it after).

    Decoding keeps almost every object it makes (nodes, index entries) and makes no cycles, yet
    the collector would run dozens of times meanwhile; in a process with a large heap (one that
    imported the ``anthropic`` SDK: ~175,000 objects) one full collection triggered by the load
    walks all of them. Nothing is lost: the collector resumes with the new objects in its
    youngest generation. If it was already disabled (by the application), it is left alone.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
