"""Writing one commit: build its objects, publish it (pack, keyring record, branch), fold it into
the cached state. The order and what a crash at each step leaves: docs/format.md §7."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace

from .. import crypto
from ..errors import ConflictError, InternalError, KeyRotatedError, LimitExceededError, MemvaultError, StorageError
from ..format import records
from ..format.layout import content_path, shard_digits, shard_path
from ..format.records import CommitMeta, Node
from ..git.objects import MODE_BLOB, MODE_TREE, GitObject
from ..git.refs import Branch
from ..git.repo import GitStore
from ..keys.keyring import ZERO_ID, Keyring
from ..keys.slots import Subkeys
from ..settings import StoreSettings
from .config import SettingsRecord, chains_key_changes, journals_commits, record_encoding, settings_record
from .journal import Entry, Journal
from .state import StateReader, StoreState, shard_of
from .transaction import Transaction

__all__ = ["CommitWriter"]

_RANDOM = secrets.SystemRandom()


def _storage_error(err: BaseException, *, outcome_unknown: bool = False) -> StorageError:
    if isinstance(err, OSError):
        return StorageError.from_os_error(err, outcome_unknown=outcome_unknown)
    return StorageError.from_os_error(OSError(5, "I/O error"), outcome_unknown=outcome_unknown)


class CommitWriter:
    """Writes commits of one store. The caller holds the writer lock and the state lock.

    Args:
        reader: the store's state reader (trees, layout, and the plaintext cache to fill).
        keyring: the store's keyring (data keys and the commit record go there).
        keys: the subkeys of the store's first epoch (index, metadata, chain keys).
        store_id: the store's id.
        durable: durability ``full``.
        on_objects: told how many objects each commit wrote (for pack upkeep at close).
        on_stale: called when a commit stands but the cached state could not be updated to it.
        on_published: told ``(seq, commit id, parent id)`` of each commit of ``main`` this writer
            published in a store directory (the host's anchor follows it).
    """

    def __init__(
        self,
        reader: StateReader,
        keyring: Keyring,
        keys: Subkeys,
        store_id: bytes,
        *,
        durable: bool,
        on_objects: Callable[[int], None],
        on_stale: Callable[[], None],
        on_published: Callable[[int, bytes, bytes], None] | None = None,
    ) -> None:
        self._reader = reader
        self.git: GitStore = reader.git
        self.keyring = keyring
        self._keys = keys
        self.store_id = store_id
        self._durable = durable
        self._on_objects = on_objects
        self._on_stale = on_stale
        self._on_published = on_published
        #: For a replica of a store in object storage: makes the commit (of ``main`` or of a side
        #: branch) there, given its pack ``(name, bytes, index bytes)`` and its keyring records,
        #: before the replica records it (:meth:`memvault.remote.replica.Replica.publish`).
        self.publish: Callable[[tuple[str, bytes, bytes], bytes], None] | None = None
        #: A store directory in durability ``full`` on a host that journals (:mod:`.journal`):
        #: commits of ``main`` of format version 5 or later are made durable through it.
        self.journal: Journal | None = None
        #: ``(commit id, settings MAC it records)`` of the last commit of ``main`` this writer built,
        #: so that the next one need not open its parent again to carry the record on.
        self._last_settings: tuple[bytes, bytes] = (b"", b"")

    def write(
        self,
        state: StoreState,
        txn: Transaction,
        meta: CommitMeta,
        *,
        epoch: int,
        version: int,
        relayout: int = 0,
        destroy: dict[bytes, dict[str, object]] | None = None,
        announce_epoch: bool = False,
        stored_limit: int | None = None,
        side: tuple[Branch, bytes | None] | None = None,
        settings: SettingsRecord | None = None,
        tracked: bytes | None = None,
    ) -> bytes:
        """Write ``txn`` on top of ``state`` as one commit and fold it into ``state``.

        Args:
            epoch: the key epoch whose wrap key wraps the new data keys.
            version: the store's format version (record encodings).
            relayout: file every live blob and shard of ``state`` anew in this tree layout (0: none).
            destroy: data keys to destroy with this commit (``dek_id -> info``): DESTROY records
                in the same keyring append, before its commit record (format version 3).
            announce_epoch: record that ``epoch`` is the store's key epoch (an EPOCH record,
                format version 3), after a rotation.
            stored_limit: refuse a commit that writes content when the packs would then hold more
                bytes than this.
            side: ``(ref, its value now)``: write on this side branch instead of ``main``
                (``meta.branch`` names it; None: its first commit): the
                keyring gets the data key records but no commit record, the side branch moves
                (docs/format.md §5.8).
            settings: the ``memvault.json`` this commit of ``main`` puts in force (recorded in its
                metadata); None: the one its parent records stays in force (docs/format.md §1.1).
            tracked: with ``side``, the side branch's 8-byte id if the keyring records its commits
                and keys (BRANCH_KEYS and BRANCH records around its data key records, §5.8).

        Returns:
            The new commit's id. If the commit stands but ``state`` could not be updated to it,
            ``on_stale`` was called.

        Raises:
            StorageError: a write failed (the store is at the old commit, or the error says
                the outcome is unknown).
            ConflictError: the branch moved under the lock (nothing was committed).
            KeyRotatedError: another process rotated the master key past ``epoch`` (nothing was
                written).
            LimitExceededError: ``stored_limit`` would be passed (nothing was written).
        """
        # Version 3 announces every rotation in the MAC chain; older versions only show it in the
        # (unauthenticated) epoch of the re-wrapped DEK records.
        newer = self.keyring.announced_epoch if chains_key_changes(version) else self.keyring.newest_epoch
        if newer > epoch:
            raise KeyRotatedError(
                "Error: The store's master key was rotated since this store was opened (or the keyring names an "
                "epoch this store does not know: run memvault verify); open the store again to write. Nothing was "
                "written."
            )
        objects: list[GitObject] = []
        dek_records: list[bytes] = []
        new_nodes: dict[str, Node | None] = {}
        touched_shards: set[bytes] = set()
        tree_changes: dict[tuple[bytes, ...], tuple[int, bytes] | None] = {}
        shard_nodes: dict[bytes, dict[bytes, Node]] = {}
        layout = self._reader.tree_layout(state.tree_id, version)
        base_tree: bytes | None = state.tree_id
        if relayout:
            moved = shard_digits(relayout) != shard_digits(layout)
            layout, base_tree = relayout, None
            for node in state.every_node():
                if not node.is_dir and not node.redacted:
                    tree_changes[content_path(node.token, layout)] = (MODE_BLOB, node.blob_id)
                if moved:  # shards of another width: every one is encoded anew below
                    touched_shards.add(shard_of(node.token, shard_digits(layout)))
                    shard_nodes.setdefault(shard_of(node.token, shard_digits(layout)), {})[node.token] = node
            for shard, shard_blob in state.shard_blobs.items() if not moved else ():
                tree_changes[shard_path(shard, layout)] = (MODE_BLOB, shard_blob)
        digits = shard_digits(layout)

        def shard_view(shard: bytes) -> dict[bytes, Node]:
            # A copy of the whole shard as the state has it (decoded now if it was not yet):
            # the new index blob holds every entry of the shard, not only the changed ones.
            if shard not in shard_nodes:
                shard_nodes[shard] = dict(state.shard(shard))
            return shard_nodes[shard]

        # In random order: data key records, blobs and records are then written in an order that
        # says nothing about the paths (a renamed or imported subtree would show their sort order).
        changes = list(txn.changes.items())
        _RANDOM.shuffle(changes)
        for path, pending in changes:
            old = state.nodes.get(path)
            if pending is None:
                if old is None:
                    continue
                touched_shards.add(shard_of(old.token, digits))
                shard_view(shard_of(old.token, digits)).pop(old.token, None)
                if not old.is_dir:
                    tree_changes[content_path(old.token, layout)] = None
                new_nodes[path] = None
                continue
            dek_id, dek = crypto.random_bytes(16), crypto.new_key()
            dek_records.append(self.keyring.dek_record(dek_id, dek, epoch))
            node = replace(pending, dek_id=dek_id, mtime=meta.time)
            if not node.is_dir:
                data = txn.contents[path]
                blob_bytes = records.encode_blob(
                    dek, store_id=self.store_id, file_id=node.file_id, version=node.version, dek_id=dek_id,
                    path=node.path, data=data,
                )  # fmt: skip
                blob = GitStore.blob(blob_bytes)
                objects.append(blob)
                node = replace(node, blob_id=blob.id, ct_sha256=crypto.sha256(blob_bytes))
                tree_changes[content_path(node.token, layout)] = (MODE_BLOB, blob.id)
            elif old is not None and not old.is_dir:
                tree_changes[content_path(old.token, layout)] = None
            node = records.seal_node(dek, self.store_id, node, encoding=record_encoding(version))
            shard = shard_of(node.token, digits)
            touched_shards.add(shard)
            shard_view(shard)[node.token] = node
            new_nodes[path] = node
        new_shard_blobs: dict[bytes, tuple[bytes | None, dict[bytes, Node]]] = {}
        for shard in touched_shards:
            nodes = shard_nodes[shard]
            path_key = shard_path(shard, layout)
            if nodes:
                shard_bytes = records.encode_shard(
                    self._keys.index, self.store_id, shard, list(nodes.values()), version=record_encoding(version)
                )
                blob = GitStore.blob(shard_bytes)
                objects.append(blob)
                tree_changes[path_key] = (MODE_BLOB, blob.id)
                new_shard_blobs[shard] = (blob.id, nodes)
            else:
                tree_changes[path_key] = None
                new_shard_blobs[shard] = (None, nodes)
        if stored_limit is not None and txn.contents:
            stored = self.git.packs.total_bytes()
            if stored + sum(len(o.as_raw_string()) for o in objects) > stored_limit:
                raise LimitExceededError(
                    f"Error: The memory store is full: its history takes {stored} bytes on disk, at most "
                    f"{stored_limit} (every version is kept). Nothing was written; an operator can raise the limit "
                    "or move the memory to a new store."
                )
        tree_id = self._apply_tree(base_tree, tree_changes, objects)
        if settings is not None:
            meta = replace(meta, settings_digest=settings.digest, settings_file=settings.file)
        elif not meta.branch:  # main: the settings in force carry on
            meta = replace(meta, settings_digest=self._settings_in_force(state.commit_id))
        sealed = records.seal_meta(self._keys.meta, self.store_id, meta)
        tag = records.commit_tag(
            self._keys.chain, self.store_id, meta.seq, state.commit_id, tree_id, sealed, branch=meta.branch
        )
        commit = GitStore.commit(tree_id, state.commit_id, records.commit_message(sealed, tag))
        objects.append(commit)
        if not meta.branch:
            self._last_settings = (commit.id, meta.settings_digest)
        if (side is None) == bool(meta.branch) or (side is not None and (destroy or announce_epoch)):
            raise InternalError()
        # Step 1: objects. A failure here leaves only unreferenced objects: the old state.
        journal = self.journal if side is None and self.publish is None and journals_commits(version) else None
        try:
            pack = self.git.write_pack(objects, merge=True, sync=journal is None)
            self._on_objects(len(objects))
        except Exception as err:
            raise _storage_error(err) from None
        if side is not None:
            appended = b"".join(dek_records)
            if tracked is not None:
                appended = self.keyring.branch_records(
                    tracked,
                    appended,
                    fork=side[1] is None,
                    seq=meta.seq,
                    commit_id=commit.id,
                    parent_id=state.commit_id,
                )
            made = (commit.id, meta.seq, tree_id)
            if self.publish is not None:  # a replica: the branch's log record in object storage is the commit
                if tracked is None:
                    raise InternalError()  # object storage holds format version 3 stores only
                self.publish(pack, appended)
                return self._follow(state, txn, new_nodes, new_shard_blobs, appended, made, side=side)
            return self._write_side(side, state, txn, appended, new_nodes, new_shard_blobs, made, tracked is not None)
        # Step 2: the keyring records the commit (the point of no return once it is durable).
        # The keyring was read by _sync under this same lock: the chain is current.
        prev: bytes | None = None
        if destroy or announce_epoch:
            chained, prev = self.keyring.chained_records(destroy or {}, epoch if announce_epoch else None)
            dek_records.append(chained)
        dek_records.append(
            self.keyring.commit_record(meta.seq, commit.id, state.commit_id, raw_ids=version >= 2, prev=prev)
        )
        if self.publish is not None:
            # A replica: the log record in object storage is the commit; the replica follows it.
            appended = b"".join(dek_records)
            self.publish(pack, appended)
            return self._follow(state, txn, new_nodes, new_shard_blobs, appended, (commit.id, meta.seq, tree_id))
        appended = b"".join(dek_records)
        journaled = journal is not None and self._journal(journal, appended, pack)
        try:
            self.keyring.append(appended, durable=self._durable and not journaled)
        except OSError as err:
            # The append cut its records off again; if that failed and the commit is still
            # recorded, withdraw it with an ABORT record (and its journal entry).
            withdrawn = self._abort(meta.seq, commit.id)
            if not withdrawn or (journal is not None and journaled and not journal.retract()):
                raise StorageError.from_os_error(err, outcome_unknown=True) from None
            raise StorageError.from_os_error(err) from None
        # Step 3: publish by moving the branch.
        failure: BaseException | None = None
        try:
            swapped = self.git.compare_and_swap(state.commit_id, commit.id)
        except BaseException as err:  # noqa: BLE001 - decided below by re-reading the branch
            failure = err
            try:
                swapped = self.git.head() == commit.id
            except (OSError, MemvaultError):
                # Cannot tell whether the branch moved: an ABORT now could contradict a moved
                # branch, so leave the recorded commit for the next writer to publish.
                raise _storage_error(err, outcome_unknown=True) from None
        if not swapped:
            self.git.branch.remove_lock()
            # Recorded but not published: say so in the keyring, so nobody publishes it later.
            if not self._abort(meta.seq, commit.id):
                raise _storage_error(failure or OSError(5, "I/O error"), outcome_unknown=True) from None
            if failure is not None:
                if isinstance(failure, MemvaultError) or not isinstance(failure, Exception):
                    raise failure
                raise _storage_error(failure) from None
            raise ConflictError("Error: The memory store changed concurrently; retry the command.")
        # Published. Fold the changes into the cached state.
        parent = state.commit_id
        if not relayout and state.tree_id is not None:
            self._reader.carry_check(state.tree_id, tree_id)
        self._fold(state, txn, new_nodes, new_shard_blobs, (commit.id, meta.seq, tree_id))
        if self._on_published is not None:
            self._on_published(meta.seq, commit.id, parent)
        if failure is not None and not isinstance(failure, Exception):
            raise failure  # e.g. KeyboardInterrupt after the branch moved: the commit stands
        return commit.id

    def _journal(self, journal: Journal, records: bytes, pack: tuple[str, bytes, bytes]) -> bool:
        """Make the commit durable through ``journal`` (docs/format.md §7.1): True once its entry
        is flushed; False for a commit too large for an entry, whose pack is then synced here
        (the keyring append syncs itself, the two flushes of version 4).

        Raises:
            StorageError: the entry or the sync failed (nothing recorded, unless it says the
                outcome is unknown).
        """
        try:
            self.keyring.refresh()
            if journal.append(Entry(self.keyring.size, records, pack[1], pack[2])):
                return True
            self.git.packs.sync()
        except OSError as err:
            raise _storage_error(err) from None
        return False

    def _write_side(
        self,
        side: tuple[Branch, bytes | None],
        state: StoreState,
        txn: Transaction,
        appended: bytes,
        new_nodes: dict[str, Node | None],
        new_shard_blobs: dict[bytes, tuple[bytes | None, dict[bytes, Node]]],
        made: tuple[bytes, int, bytes],
        recorded: bool,
    ) -> bytes:
        """Record the data keys of a side-branch commit whose objects are written (and, when the
        keyring tracks the branch, the commit: its mark), then move the side branch. Data key
        records no commit uses (a failed move) are harmless; a recorded commit the move did not
        publish is served by the next reader of the branch (store/branch.py), as for ``main``."""
        try:
            if appended:
                self.keyring.append(appended, durable=self._durable)
        except OSError as err:
            raise StorageError.from_os_error(err) from None
        try:
            swapped = side[0].compare_and_swap(side[1], made[0])
        except OSError as err:
            raise StorageError.from_os_error(err, outcome_unknown=recorded) from None
        if not swapped:
            side[0].remove_lock()
            raise ConflictError("Error: The branch changed concurrently; retry the command.")
        self._fold(state, txn, new_nodes, new_shard_blobs, made)
        return made[0]

    def _follow(
        self,
        state: StoreState,
        txn: Transaction,
        new_nodes: dict[str, Node | None],
        new_shard_blobs: dict[bytes, tuple[bytes | None, dict[bytes, Node]]],
        records: bytes,
        made: tuple[bytes, int, bytes],
        *,
        side: tuple[Branch, bytes | None] | None = None,
    ) -> bytes:
        """Record and publish in a replica a commit already made in object storage (``side``:
        ``(ref, its value now)`` of the side branch it is a commit of). It stands whatever happens
        here: a replica that cannot follow is brought up to date by its next pull (never an ABORT
        record, which would contradict the store's log)."""
        try:
            self.keyring.append(records, durable=self._durable)
            if side is not None:
                moved = side[0].compare_and_swap(side[1], made[0])
            else:
                moved = self.git.compare_and_swap(state.commit_id, made[0])
            if not moved:
                raise OSError(5, "I/O error")
        except (OSError, MemvaultError):
            if side is not None:
                side[0].remove_lock()
            self._on_stale()
            return made[0]
        self._fold(state, txn, new_nodes, new_shard_blobs, made)
        return made[0]

    def _fold(
        self,
        state: StoreState,
        txn: Transaction,
        new_nodes: dict[str, Node | None],
        new_shard_blobs: dict[bytes, tuple[bytes | None, dict[bytes, Node]]],
        made: tuple[bytes, int, bytes],
    ) -> None:
        """Fold a published commit ``(id, seq, tree id)`` into the cached ``state`` (or drop it)."""
        try:
            removed = [old for path in new_nodes if (old := state.nodes.get(path)) is not None]
            added = [node for node in new_nodes.values() if node is not None]
            state.fold_commit(new_shard_blobs, removed, added, made)
            for path, data in txn.contents.items():
                cached = new_nodes.get(path)
                if cached is not None:
                    self._reader.cache_content(cached.blob_id, data)
        except Exception:
            # The commit stands (the branch moved): report success, rebuild the cache lazily.
            self._on_stale()

    def _abort(self, seq: int, commit_id: bytes) -> bool:
        """Withdraw the recorded commit ``commit_id`` with an ``ABORT`` record if the keyring
        still names it; False if that could not be written (the next writer would then publish
        it)."""
        try:
            self.keyring.refresh()
            hw = self.keyring.high_water
            if hw is None or hw.commit_id != commit_id:
                return hw is not None  # not (or no longer) recorded: nothing to withdraw
            self.keyring.append(self.keyring.abort_record(seq, commit_id), durable=self._durable)
        except (OSError, MemvaultError):
            hw = self.keyring.high_water
            return hw is not None and hw.commit_id != commit_id
        return True

    def _apply_tree(
        self,
        tree_id: bytes | None,
        changes: dict[tuple[bytes, ...], tuple[int, bytes] | None],
        objects: list[GitObject],
    ) -> bytes:
        """Write the trees on the changed paths (bounded fan-out); return the new root id."""
        new_id = self._apply_subtree(tree_id, changes, objects)
        if new_id is None:
            empty = GitStore.tree({})
            objects.append(empty)
            return empty.id
        return new_id

    def _apply_subtree(
        self,
        tree_id: bytes | None,
        changes: dict[tuple[bytes, ...], tuple[int, bytes] | None],
        objects: list[GitObject],
    ) -> bytes | None:
        entries = dict(self.git.tree_entries(tree_id)) if tree_id is not None else {}
        grouped: dict[bytes, dict[tuple[bytes, ...], tuple[int, bytes] | None]] = {}
        changed: list[bytes] = []
        for key, value in changes.items():
            if len(key) == 1:
                changed.append(key[0])
                if value is None:
                    entries.pop(key[0], None)
                else:
                    entries[key[0]] = value
            else:
                grouped.setdefault(key[0], {})[key[1:]] = value
        for name, sub in grouped.items():
            current = entries.get(name)
            sub_id = self._apply_subtree(current[1] if current else None, sub, objects)
            changed.append(name)
            if sub_id is None:
                entries.pop(name, None)
            else:
                entries[name] = (MODE_TREE, sub_id)
        if not entries:
            return None
        tree = self.git.tree_update(tree_id, entries, changed)
        objects.append(tree)
        self.git.remember_tree(tree.id, entries)
        return tree.id

    def _settings_in_force(self, parent: bytes) -> bytes:
        """The settings MAC the commit ``parent`` of ``main`` records (b"": none)."""
        if parent == self._last_settings[0]:
            return self._last_settings[1]
        return self._reader.open_commit(parent).meta.settings_digest

    def write_initial(self, version: int, time: float, settings: StoreSettings) -> StoreState:
        """Write the first commit (``#0``, an empty tree) of a new store, recording its first
        ``memvault.json`` (format ``version``, ``settings``) as in force; return its state."""
        first = settings_record(self.store_id, settings, version, self._keys.config)
        meta = CommitMeta(seq=0, time=time, actor="memvault", session="", command="init", paths=(), findings={},
                          settings_digest=first.digest, settings_file=first.file)  # fmt: skip
        empty = GitStore.tree({})
        sealed = records.seal_meta(self._keys.meta, self.store_id, meta)
        tag = records.commit_tag(self._keys.chain, self.store_id, 0, ZERO_ID, empty.id, sealed)
        commit = GitStore.commit(empty.id, None, records.commit_message(sealed, tag))
        self.git.write_pack([empty, commit])
        record = self.keyring.commit_record(0, commit.id, ZERO_ID, raw_ids=version >= 2)
        self.keyring.append(record, durable=self._durable)
        if not self.git.compare_and_swap(None, commit.id):
            raise InternalError()
        return StoreState(commit.id, 0, empty.id, self._reader, complete=True, current=True)
