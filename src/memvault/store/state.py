"""The reader that authenticates and decrypts a store's history.

:class:`StateReader` opens commits (each authenticated once, then cached), index shards and
file contents, and makes the :class:`~memvault.store.nodes.StoreState` of a commit, which
decodes its shards through it when first needed (docs/format.md §8, *Lazy decoding*).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from .. import crypto
from ..errors import IntegrityError, RedactedError
from ..format import layout, records
from ..format.layout import LayoutChecker
from ..format.records import CommitMeta, Node
from ..git.repo import GitStore
from ..keys.keyring import ZERO_ID, Keyring
from ..keys.slots import Subkeys
from ..paths import fold_key
from .nodes import PLACEHOLDER, NodeMap, StoreState, shard_of, split_path

__all__ = ["StoreState", "NodeMap", "OpenedCommit", "StateReader", "shard_of", "split_path", "PLAINTEXT_CACHE_BYTES"]

#: Default budget of decrypted file contents kept in memory for repeated views (bytes).
PLAINTEXT_CACHE_BYTES = 8 * 1024 * 1024
#: Decoded index shards kept by blob id (history walks reuse unchanged shards).
_SHARD_CACHE_ENTRIES = 1024
#: Authenticated commits kept by id (a log or blame opens each commit once).
_COMMIT_CACHE_ENTRIES = 4096
#: Subtrees whose shards :meth:`StateReader.shard_blobs` remembers (a history walk then reads only
#: the subtrees each commit changed, not all of its tree's).
_SUBTREE_CACHE_ENTRIES = 65536


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

    Not thread-safe: the store calls it under its state lock (``lock``), and so do the states it
    makes when they decode a shard.

    Args:
        git: the store's repository.
        keyring: the store's keyring (data keys, destroyed keys).
        keys: the subkeys of the store's first epoch (index, metadata and chain keys).
        store_id: the store's id.
        token: ``HMAC(K_name, path)`` of a UTF-8 path.
        lock: the store's state lock (re-entrant).
    """

    def __init__(
        self, git: GitStore, keyring: Keyring, keys: Subkeys, store_id: bytes, token: Callable[[bytes], bytes],
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:  # fmt: skip
        self.git = git
        self.lock: AbstractContextManager[Any] = lock if lock is not None else threading.RLock()
        #: How many index shards this reader has decoded (authenticated and opened) in all: the
        #: work a command did on the index, for tests and benchmarks.
        self.shards_decoded = 0
        self._keyring = keyring
        self._keys = keys
        self._store_id = store_id
        self._token = token
        #: How sibling names are told apart (``paths.sibling_key``); every state built gets it.
        self.fold: Callable[[str], str] = fold_key
        #: The store's ``max_files`` as its settings have it now: picks the layout of a commit on
        #: the empty tree in a store of format version 6 (:func:`~memvault.format.layout.fresh_layout`).
        self.max_files: Callable[[], int] = lambda: 100_000
        self._layout = LayoutChecker(git.tree_entries)
        self._subtrees: layout.Memo = {}
        #: Fan-out depth of the roots whose first subtree is the key (:meth:`shard_digits`).
        self._depths: dict[bytes, int] = {}
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
        """The layout a commit on ``tree_id`` keeps in a store of ``format_version``
        (:func:`~memvault.format.layout.tree_layout`)."""
        fresh = layout.fresh_layout(format_version, self.max_files())
        return layout.tree_layout(self.git.tree_entries(tree_id), self.git.tree_entries, fresh)

    def relayout_target(self, tree_id: bytes, format_version: int, max_files: int) -> int:
        """The layout ``memvault upgrade`` refiles the tree ``tree_id`` in (0: it keeps its own):
        the one a new store of ``format_version`` and ``max_files`` would take, when the tree's is
        shallower."""
        root = self.git.tree_entries(tree_id)
        fresh = layout.fresh_layout(format_version, max_files)
        if not root:
            return 0
        own = layout.tree_layout(root, self.git.tree_entries, fresh)
        return fresh if own < fresh else 0

    def shard_digits(self, tree_id: bytes) -> int:
        """How many hex digits name the shards of the tree ``tree_id`` (2 for the empty tree).

        Raises:
            IntegrityError: a tree on the way to the first blob cannot be read.
        """
        root = self.git.tree_entries(tree_id)
        if b"i" in root or not root:
            return 2
        # Remembered by the root's first subtree, which consecutive commits mostly share: one
        # commit after another, the trees below it are not read again to find the depth.
        first = root[min(root)][1]
        depth = self._depths.get(first)
        if depth is None:
            depth = layout.fanout_depth(root, self.git.tree_entries)
            if len(self._depths) >= _SUBTREE_CACHE_ENTRIES:
                self._depths.clear()
            self._depths[first] = depth
        return depth

    def shard_blobs(self, tree_id: bytes) -> dict[bytes, bytes]:
        """``shard -> index blob id`` of a commit's tree.

        Raises:
            IntegrityError: a tree on the way does not have memvault's layout.
        """
        return self._walk_shards(tree_id, name_problem=False)

    def _walk_shards(self, tree_id: bytes, *, name_problem: bool) -> dict[bytes, bytes]:
        # Every tree read is checked against its role; ``name_problem``: the error says what
        # does not fit (as ``_refuse``). Subtrees walked before are not read again (the memo).
        depth = self.shard_digits(tree_id)

        def read(obj_id: bytes, role: str, _prefix: bytes) -> layout.Entries:
            entries = self.git.tree_entries(obj_id)
            problem = layout.shape_problem(entries, role, depth)
            if problem is not None:
                _refuse(problem if name_problem else None)
                raise IntegrityError()
            return entries

        if len(self._subtrees) > _SUBTREE_CACHE_ENTRIES:
            self._subtrees.clear()
        return layout.walk(tree_id, read, content=False, memo=self._subtrees, depth=depth)[0]

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
        self.shards_decoded += 1
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
                placeholder = f"{PLACEHOLDER}{token.hex()[:16]}>"
                node = Node(placeholder, "file", token, b"", 0, dek_id, sealed=sealed, redacted=True)
                if shard_of(token, len(shard)) != shard or token in nodes:
                    raise IntegrityError()
                nodes[token] = node
                continue
            node = records.open_node(keyring.dek(dek_id), store_id, token, dek_id, sealed)
            # The record names its path; the path's token (HMAC(K_name, path)) must be the entry's.
            if shard_of(token, len(shard)) != shard or token in nodes or token_of(node.path.encode()) != token:
                raise IntegrityError()
            nodes[token] = node
        return nodes

    def token_of(self, path: str) -> bytes:
        """The path token ``HMAC(K_name, path)`` of a canonical path."""
        return self._token(path.encode("utf-8"))

    def is_head(self, commit_id: bytes) -> bool:
        """Whether ``commit_id`` is ``main``'s head now: the branch's value, or the commit the
        keyring records on top of it (docs/format.md §8 step 3)."""
        if self.git.head() == commit_id:
            return True
        self._keyring.refresh()
        hw = self._keyring.high_water
        return hw is not None and hw.commit_id == commit_id

    def check_top(self, tree_id: bytes) -> None:
        """Check the top of a commit's tree against the layouts (docs/format.md §8, *Lazy
        decoding*): in a fan-out layout the root and the trees it holds (at most 17 trees of at
        most 16 entries), in layout 1 the root, the index subtree whole and the content subtree's
        two fan-out levels (at most 35 such trees). The trees below (``<h0>/.../<h(d-1)>``,
        ``c/<h0>/<h1>``) are checked on the way to a shard when it is first located
        (:meth:`locate_shard`) or all at once (:meth:`all_shard_blobs`).

        Raises:
            IntegrityError: a tree does not fit.
        """
        root = self.git.tree_entries(tree_id)
        _refuse(self._layout.problem(tree_id, levels=2 if b"i" in root else 1))

    def carry_check(self, parent_tree: bytes, tree_id: bytes) -> None:
        """A commit this process wrote on ``parent_tree``, in its layout, made the root ``tree_id``:
        its top passes :meth:`check_top` if the parent's did (:meth:`.LayoutChecker.carry`)."""
        self._layout.carry(parent_tree, tree_id)

    def locate_shard(self, tree_id: bytes, shard: bytes) -> bytes | None:
        """The index blob id of ``shard`` in a commit's tree (None: no such shard), the trees on
        the way and those holding the shard's content blobs checked against the layouts.

        Raises:
            IntegrityError: a tree there does not fit.
        """
        self.check_top(tree_id)
        root = self.git.tree_entries(tree_id)
        if b"i" in root:
            h0, h1 = shard[:1], shard[1:]  # layout 1: the shard at i/<h0>/<h1>, its content below c/<h0>/<h1>
            content = root.get(b"c")
            fan = self.git.tree_entries(content[1]).get(h0) if content is not None else None
            leaf = self.git.tree_entries(fan[1]).get(h1) if fan is not None else None
            if leaf is not None:
                _refuse(self._layout.problem(leaf[1], "c2"))
            fan = self.git.tree_entries(root[b"i"][1]).get(h0)
            if fan is None:
                return None
            found = self.git.tree_entries(fan[1]).get(h1)
            return found[1] if found is not None else None
        # A fan-out layout: the shard's name has as many digits as the tree has levels (a name of
        # another length meets a tree of the wrong role on the way, and is refused).
        letter = layout.FANOUT_LAYOUTS.get(len(shard))
        if letter is None or len(shard) != self.shard_digits(tree_id):
            raise IntegrityError("The store's index is inconsistent.")
        entries = root
        for level in range(len(shard)):
            below = entries.get(shard[level : level + 1])
            if below is None:
                return None
            _refuse(self._layout.problem(below[1], f"{letter}{level + 1}", levels=0))
            entries = self.git.tree_entries(below[1])
        found = entries.get(b"i")
        return found[1] if found is not None else None

    def all_shard_blobs(self, tree_id: bytes) -> dict[bytes, bytes]:
        """``shard -> index blob id`` of a commit's tree, the whole tree checked against the
        layouts (subtrees already checked are remembered by id).

        In a fan-out layout every tree holds a shard or leads to one, so the walk that finds the
        shards checks each tree as it reads it: one pass, each tree read once (a layout 4 tree
        has about 70,000, more than the tree cache holds). Layout 1's content subtree leads to no
        shard: it is checked whole first.

        Raises:
            IntegrityError: a tree does not fit.
        """
        if b"i" in self.git.tree_entries(tree_id):
            _refuse(self._layout.problem(tree_id))
            return self.shard_blobs(tree_id)
        return self._walk_shards(tree_id, name_problem=True)

    def load_state(
        self, commit_id: bytes, seq: int, tree_id: bytes, old: StoreState | None, *, current: bool = False
    ) -> StoreState:
        """The state of an authentic commit, its shards decoded when first needed; ``old``, a
        state of an earlier commit of the same history, is consumed: its decoded shards whose
        index blob did not change are kept (and a complete state stays complete).

        Args:
            current: the state of ``main``'s head (a node whose data key was destroyed is an
                error when its shard is decoded).

        Raises:
            IntegrityError: the top of the tree does not have memvault's layout; for a complete
                ``old``, as :meth:`StoreState.load_all`.
        """
        self.check_top(tree_id)
        if old is None:
            return StoreState(commit_id, seq, tree_id, self, current=current)
        old.current = current
        return old.follow(commit_id, seq, tree_id)

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
        self._depths.clear()
        self._layout.forget()

    def forget_plaintext(self) -> None:
        """Drop every decrypted content, node and commit metadata kept in memory."""
        self._contents.clear()
        self._contents_size = 0
        self._shards.clear()
        self._commits.clear()


def _refuse(problem: str | None) -> None:
    if problem is not None:
        raise IntegrityError(f"The store's git repository holds a tree memvault did not write: {problem}.")


def _when(value: object) -> str:
    """`` at <UTC time>`` for a tombstone's time (a number, or its text), or "" if it is not one."""
    try:
        t = float(str(value))
    except ValueError:
        return ""
    if not 0 < t < 253402300800:  # also refuses NaN and infinities
        return ""
    return f" at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(t))}"
