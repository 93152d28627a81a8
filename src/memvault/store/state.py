"""The decrypted state of a commit, and the reader that authenticates and decrypts history.

:class:`StateReader` opens commits (each authenticated once, then cached), index shards and
file contents, and builds a :class:`StoreState` incrementally from the shards that changed.
"""

from __future__ import annotations

import gc
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .. import crypto
from ..errors import IntegrityError, RedactedError
from ..format import layout, records
from ..format.layout import LayoutChecker
from ..format.records import CommitMeta, Node
from ..git.repo import GitStore
from ..keys.keyring import ZERO_ID, Keyring
from ..keys.slots import Subkeys
from ..paths import ROOT, fold_key

__all__ = ["StoreState", "OpenedCommit", "StateReader", "shard_of", "split_path", "PLAINTEXT_CACHE_BYTES"]

#: Default budget of decrypted file contents kept in memory for repeated views (bytes).
PLAINTEXT_CACHE_BYTES = 8 * 1024 * 1024
#: Decoded index shards kept by blob id (history walks reuse unchanged shards).
_SHARD_CACHE_ENTRIES = 1024
#: Authenticated commits kept by id (a log or blame opens each commit once).
_COMMIT_CACHE_ENTRIES = 4096
#: Subtrees whose shards :meth:`StateReader.shard_blobs` remembers (a history walk then reads only
#: the subtrees each commit changed, not all of its tree's).
_SUBTREE_CACHE_ENTRIES = 65536
#: Shard name of each first token byte (two lowercase hex digits).
_SHARD_NAMES = tuple(b"%02x" % i for i in range(256))


def shard_of(token: bytes) -> bytes:
    """The index shard (two hex digits) of a path token."""
    return _SHARD_NAMES[token[0]] if token else b""


def split_path(path: str) -> tuple[str, str]:
    """``(parent, name)`` of a canonical path."""
    parent, _, name = path.rpartition("/")
    return parent, name


@dataclass
class StoreState:
    """The decrypted state at one commit. Mutated only by the store, under its state lock."""

    commit_id: bytes
    seq: int
    tree_id: bytes
    shard_blobs: dict[bytes, bytes] = field(default_factory=dict)  #: shard -> index blob id
    shards: dict[bytes, dict[bytes, Node]] = field(default_factory=dict)  #: shard -> token -> node
    nodes: dict[str, Node] = field(default_factory=dict)  #: canonical path -> node
    children: dict[str, dict[str, str]] = field(default_factory=dict)  #: dir -> fold(name) -> name
    file_count: int = 0
    total_bytes: int = 0  #: plaintext bytes of all files
    #: The key siblings are unique by in :attr:`children` (``paths.sibling_key`` of the store's grammar).
    fold: Callable[[str], str] = field(default=fold_key, compare=False, repr=False)

    def add(self, node: Node) -> None:
        self.nodes[node.path] = node
        self.shards.setdefault(shard_of(node.token), {})[node.token] = node
        parent, name = split_path(node.path)
        self.children.setdefault(parent, {})[self.fold(name)] = name
        if node.is_dir:
            self.children.setdefault(node.path, {})
        else:
            self.file_count += 1
            self.total_bytes += node.size

    def remove(self, node: Node) -> None:
        """Forget one node. A directory's child list survives while it still has children:
        an incremental reload removes and re-adds a directory whose shard changed while its
        children, in other shards, stay."""
        del self.nodes[node.path]
        shard = self.shards[shard_of(node.token)]
        del shard[node.token]
        parent, name = split_path(node.path)
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.pop(self.fold(name), None)
            if not siblings and parent != ROOT and parent not in self.nodes:
                del self.children[parent]
        if node.is_dir:
            if not self.children.get(node.path):
                self.children.pop(node.path, None)
        else:
            self.file_count -= 1
            self.total_bytes -= node.size


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


@dataclass(frozen=True)
class OpenedCommit:
    """An authenticated commit: its decrypted metadata, tree and parent (None for the first)."""

    meta: CommitMeta
    tree_id: bytes
    parent_id: bytes | None

    @property
    def seq(self) -> int:
        return self.meta.seq


class StateReader:
    """Authenticates and decrypts a store's history; keeps the caches that make it cheap.

    Not thread-safe: the store calls it under its state lock.

    Args:
        git: the store's repository.
        keyring: the store's keyring (data keys, destroyed keys).
        keys: the subkeys of the store's first epoch (index, metadata and chain keys).
        store_id: the store's id.
        token: ``HMAC(K_name, path)`` of a UTF-8 path.
    """

    def __init__(
        self, git: GitStore, keyring: Keyring, keys: Subkeys, store_id: bytes, token: Callable[[bytes], bytes]
    ) -> None:
        self.git = git
        self._keyring = keyring
        self._keys = keys
        self._store_id = store_id
        self._token = token
        #: How sibling names are told apart (``paths.sibling_key``); every state built gets it.
        self.fold: Callable[[str], str] = fold_key
        self._layout = LayoutChecker(git.tree_entries)
        self._subtrees: layout.Memo = {}
        self._commits: OrderedDict[bytes, OpenedCommit] = OrderedDict()
        self._shards: OrderedDict[bytes, dict[bytes, Node]] = OrderedDict()
        self._contents: OrderedDict[bytes, bytes] = OrderedDict()
        self._contents_size = 0
        self._contents_budget = PLAINTEXT_CACHE_BYTES

    # -- commits -----------------------------------------------------------------------------------

    def open_commit(self, commit_id: bytes, *, branch: str = "") -> OpenedCommit:
        """Authenticate a commit (format, chain tag, metadata) once; later calls are cached.

        Args:
            branch: the side branch the commit must belong to ("": ``main``); a commit of
                another branch is not authentic here (docs/format.md §5.6).

        Raises:
            IntegrityError: the commit is missing, malformed or not authentic.
        """
        opened = self._commits.get(commit_id)
        if opened is not None and opened.meta.branch == branch:
            self._commits.move_to_end(commit_id)
            return opened
        tree_id, parents, message = self.git.read_commit(commit_id)
        try:
            sealed, tag = records.parse_commit_message(message)
            meta = records.open_meta(self._keys.meta, self._store_id, sealed)
            parent_id = parents[0] if parents else ZERO_ID
            expected = records.commit_tag(
                self._keys.chain, self._store_id, meta.seq, parent_id, tree_id, sealed, branch=branch
            )
            if not crypto.consteq(expected, tag) or len(parents) > 1 or (meta.seq == 0) != (not parents):
                raise IntegrityError()
            if meta.branch != branch:
                raise IntegrityError()
        except (IntegrityError, ValueError):
            raise IntegrityError("A commit of the store is not authentic.") from None
        opened = OpenedCommit(meta, tree_id, parents[0] if parents else None)
        self._commits[commit_id] = opened
        if len(self._commits) > _COMMIT_CACHE_ENTRIES:
            self._commits.popitem(last=False)
        return opened

    # -- trees and shards ----------------------------------------------------------------------------

    def tree_layout(self, tree_id: bytes, format_version: int) -> int:
        """The layout a commit on ``tree_id`` keeps (:func:`~memvault.format.layout.tree_layout`)."""
        return layout.tree_layout(self.git.tree_entries(tree_id), format_version)

    def shard_blobs(self, tree_id: bytes) -> dict[bytes, bytes]:
        """``shard -> index blob id`` of a commit's tree.

        Raises:
            IntegrityError: a tree on the way does not have memvault's layout.
        """

        def read(obj_id: bytes, role: str, _prefix: bytes) -> layout.Entries:
            entries = self.git.tree_entries(obj_id)
            if layout.shape_problem(entries, role) is not None:
                raise IntegrityError()
            return entries

        if len(self._subtrees) > _SUBTREE_CACHE_ENTRIES:
            self._subtrees.clear()
        return layout.walk(tree_id, read, content=False, memo=self._subtrees)[0]

    def shard_nodes(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]:
        """The decrypted nodes of one index shard blob (``token -> node``), cached.

        Raises:
            IntegrityError: the shard or a record in it is not authentic.
        """
        self.follow_keyring()
        # Keyed by name and blob: the same blob filed under another shard name must be decoded
        # (and refused: the name is in its associated data), not served from the cache.
        key = shard + blob_id
        cached = self._shards.get(key)
        if cached is not None:
            self._shards.move_to_end(key)
            return cached
        nodes = self._decode_shard(shard, blob_id)
        self._shards[key] = nodes
        if len(self._shards) > _SHARD_CACHE_ENTRIES:
            self._shards.popitem(last=False)
        return nodes

    def _decode_shard(self, shard: bytes, blob_id: bytes) -> dict[bytes, Node]:
        blob = self.git.read_blob(blob_id)
        nodes: dict[bytes, Node] = {}
        keyring, store_id, token_of = self._keyring, self._store_id, self._token
        for token, dek_id, sealed in records.decode_shard(self._keys.index, store_id, shard, blob):
            if keyring.is_destroyed(dek_id):
                # Redacted version: its name and content went with its key. The placeholder path
                # uses characters the path grammar refuses, so it can never collide.
                placeholder = f"{ROOT}/<redacted:{token.hex()[:16]}>"
                node = Node(placeholder, "file", token, b"", 0, dek_id, sealed=sealed, redacted=True)
                if shard_of(token) != shard or token in nodes:
                    raise IntegrityError()
                nodes[token] = node
                continue
            node = records.open_node(keyring.dek(dek_id), store_id, token, dek_id, sealed)
            # The record names its path; the path's token (HMAC(K_name, path)) must be the entry's.
            if shard_of(token) != shard or token in nodes or token_of(node.path.encode()) != token:
                raise IntegrityError()
            nodes[token] = node
        return nodes

    def load_state(self, commit_id: bytes, seq: int, tree_id: bytes, old: StoreState | None) -> StoreState:
        with gc_paused():
            return self._load_state_unpaused(commit_id, seq, tree_id, old)

    def _load_state_unpaused(self, commit_id: bytes, seq: int, tree_id: bytes, old: StoreState | None) -> StoreState:
        # The whole tree has memvault's layout (subtrees already checked are remembered by id).
        problem = self._layout.problem(tree_id)
        if problem is not None:
            raise IntegrityError(f"The store's git repository holds a tree memvault did not write: {problem}.")
        blob_ids = self.shard_blobs(tree_id)
        state = StoreState(commit_id, seq, tree_id, fold=self.fold)
        if old is not None:
            # Incremental: keep shards whose index blob did not change.
            state.nodes, state.children = old.nodes, old.children
            state.file_count, state.total_bytes = old.file_count, old.total_bytes
            state.shards, state.shard_blobs = old.shards, old.shard_blobs
            for shard in list(state.shard_blobs):
                if blob_ids.get(shard) != state.shard_blobs[shard]:
                    for node in sorted(state.shards.get(shard, {}).values(), key=lambda n: -len(n.path)):
                        state.remove(node)
                    del state.shard_blobs[shard]
                    state.shards.pop(shard, None)
        added: list[Node] = []
        for shard, blob_id in blob_ids.items():
            if state.shard_blobs.get(shard) == blob_id:
                continue
            added.extend(self.shard_nodes(shard, blob_id).values())
            state.shard_blobs[shard] = blob_id
        for node in sorted(added, key=lambda n: n.path.count("/")):
            state.add(node)
        for node in added:
            parent = node.path.rpartition("/")[0]
            if parent != ROOT and (parent not in state.nodes or not state.nodes[parent].is_dir):
                raise IntegrityError("The store's index is inconsistent.")
        return state

    # -- file contents -------------------------------------------------------------------------------

    def follow_keyring(self) -> None:
        """If another store object or process rewrote the keyring (a redaction or rotation), drop
        every cached key and plaintext and read it again, so destroyed keys stop working here too."""
        if self._keyring.replaced_on_disk():
            self._keyring.refresh()
            self.forget_plaintext()

    def read_node(self, node: Node) -> bytes:
        """Decrypted content of a file node, authenticated against its node record (cached).

        Raises:
            RedactedError: the version's data key was destroyed.
            IntegrityError: the content is missing or not authentic.
        """
        self.follow_keyring()
        if node.redacted or self._keyring.is_destroyed(node.dek_id):
            info = self._keyring.tombstone(node.dek_id) or {}
            actor = info.get("actor")
            by = f" by {actor[:200]}" if isinstance(actor, str) and actor else ""
            raise RedactedError(f"This version was redacted{by}{_when(info.get('time'))}; its content is gone.")
        cached = self._contents.get(node.blob_id)
        if cached is not None:
            self._contents.move_to_end(node.blob_id)
            return cached
        try:
            # The ciphertext's SHA-256 (the node record's ``c``) is checked by the git layer,
            # in place of the git id's SHA-1 for a packed copy: one hash over the blob, not two.
            blob = self.git.read_blob(node.blob_id, node.ct_sha256)
            data = records.decode_blob(self._keyring.dek(node.dek_id), blob, store_id=self._store_id, node=node)
        except IntegrityError:
            raise IntegrityError(f"Memory store integrity check failed for {node.path}.") from None
        self.cache_content(node.blob_id, data)
        return data

    def cache_content(self, blob_id: bytes, data: bytes) -> None:
        """Keep a decrypted content in the bounded LRU (never more than the byte budget)."""
        if not self._contents_budget or len(data) > self._contents_budget // 8 or blob_id in self._contents:
            return
        self._contents[blob_id] = data
        self._contents_size += len(data)
        self._trim_contents()

    def _trim_contents(self) -> None:
        while self._contents_size > self._contents_budget:
            _, old = self._contents.popitem(last=False)
            self._contents_size -= len(old)

    @property
    def plaintext_budget(self) -> int:
        """Bytes of decrypted contents kept (0: none)."""
        return self._contents_budget

    @plaintext_budget.setter
    def plaintext_budget(self, size: int) -> None:
        self._contents_budget = size
        self._trim_contents()

    def forget_history(self) -> None:
        """Drop the caches of history reads (authenticated commits, decoded shards, the subtrees
        seen, the layout checks): after a walk of the whole history they hold what the head no
        longer needs; each is filled again on demand."""
        self._shards.clear()
        self._commits.clear()
        self._subtrees.clear()
        self._layout.forget()

    def forget_plaintext(self) -> None:
        """Drop every decrypted content, node and commit metadata kept in memory."""
        self._contents.clear()
        self._contents_size = 0
        self._shards.clear()
        self._commits.clear()


def _when(value: object) -> str:
    """`` at <UTC time>`` for a tombstone's time (a number, or its text), or "" if it is not one."""
    try:
        t = float(str(value))
    except ValueError:
        return ""
    if not 0 < t < 253402300800:  # also refuses NaN and infinities
        return ""
    return f" at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(t))}"
