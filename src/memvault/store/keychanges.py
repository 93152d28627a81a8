"""Changes of a store's keys that are commits: destroying data keys (crypto-shredding, docs/format.md
§3.2) and recording a master-key rotation (§2.4), and the master keys themselves.

:class:`KeyChanges` is a mixin of :class:`~memvault.store.MemoryStore`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, StorageError
from ..fsutil import sync_filesystem, syncfs_available
from ..keys.slots import Subkeys
from ..paths import parse_path
from .config import chains_key_changes
from .replicated import run_racing
from .transaction import Transaction, commit_meta_after

if TYPE_CHECKING:
    from pathlib import Path

    from ..format.records import CommitMeta, Node
    from ..keys.keyring import Keyring
    from ..remote.replica import Replica
    from ..settings import StoreSettings
    from .state import StoreState

__all__ = ["KeyChanges"]


class KeyChanges:
    """Destroying data keys, recording rotations, master keys (a mixin of the store)."""

    if TYPE_CHECKING:  # what the store provides (its own definitions are checked against these)
        root: Path
        store_id: bytes
        keyring: Keyring
        remote: Replica | None
        format_version: int
        settings: StoreSettings
        _durable: bool
        _epoch: int
        _master_keys: dict[int, bytes]
        _subkeys: dict[int, Subkeys]
        _state_lock: threading.RLock
        _writer: Callable[[], AbstractContextManager[None]]

        def _sync(self, *, writer: bool) -> StoreState: ...

        def _commit(self, state: StoreState, txn: Transaction, meta: CommitMeta, **options: Any) -> bytes: ...

        def forget_cached_plaintext(self) -> None: ...

        def token(self, path: str) -> bytes: ...

        def read_node(self, node: Node) -> bytes: ...

    def destroy_keys(  # fmt: skip
        self,
        dek_ids: set[bytes],
        info: dict[str, object],
        *,
        actor: str = "operator",
        session: str = "",
        remove_from_head: bool = False,
        per_key: dict[bytes, dict[str, object]] | None = None,
    ) -> tuple[int, tuple[str, ...], bytes | None]:
        """Destroy data keys (crypto-shredding, :mod:`memvault.erasure.redact`, docs/format.md §3.2) in one ``redact``
        commit that also deletes the head's files using them (``remove_from_head``; else ConflictError);
        in object storage their objects go after it. ``per_key`` adds to ``info`` for one key (its
        lineage: ``file``; format version 3). Returns ``(keys present, paths removed, commit or None)``."""

        def once() -> tuple[int, tuple[str, ...], bytes | None]:
            state = self._sync(writer=True)
            live = tuple(sorted(n.path for n in state.nodes.values() if n.dek_id in dek_ids))
            if live and not remove_from_head:
                raise ConflictError(f"Error: {len(live)} version(s) to redact are still in the current state.")
            txn = Transaction(self, state)
            for path in live:
                if txn.get(path) is not None:
                    txn.delete(parse_path(path))
            meta = commit_meta_after(state, actor, session, "redact")
            commit_id: bytes | None = None
            try:
                if chains_key_changes(self.format_version):
                    count = sum(1 for dek_id in dek_ids if self.keyring.has(dek_id))
                    fresh = {
                        d: {**info, **(per_key or {}).get(d, {})} for d in dek_ids if not self.keyring.is_destroyed(d)
                    }
                    if fresh or live:
                        commit_id = self._commit(state, txn, meta, destroy=fresh)
                    try:
                        if commit_id is not None and not self._durable:
                            # The purge makes the keyring durable: the commit's objects must be first,
                            # or a power loss would leave the destruction without its commit.
                            sync_filesystem(self.root) if syncfs_available() else os.sync()
                        self.keyring.purge()
                    except OSError:
                        pass  # the destruction stands; the next writer purges (verify: destroyed-key-present)
                else:
                    if live:
                        commit_id = self._commit(state, txn, meta)
                    count = self.keyring.destroy(dek_ids, info, durable=True)
            except OSError as err:
                raise StorageError.from_os_error(err, what="The keyring") from None
            return count, live, commit_id

        with self._writer(), self._state_lock:
            try:
                result = run_racing(once, self.remote)
            finally:  # also when interrupted: nodes cached before the destruction are stale
                self.forget_cached_plaintext()
            if self.remote is not None:  # the data key objects go from object storage too
                self.remote.delete_destroyed(self.keyring.destroyed_ids & dek_ids)
            return result

    def record_rotation(self, *, actor: str = "operator", session: str = "") -> None:
        """After a master-key rotation (admin.keys.rotate), record its epoch in the keyring's MAC chain
        with a ``key-rotate`` commit, so no process writes under an older epoch again and an older
        keyring put back is older than the history (format version 3; nothing in 1 and 2)."""
        if not chains_key_changes(self.format_version):
            return

        def once() -> bytes:
            state = self._sync(writer=True)
            meta = commit_meta_after(state, actor, session, "key-rotate")
            return self._commit(state, Transaction(self, state), meta, announce_epoch=True)

        with self._writer(), self._state_lock:
            run_racing(once, self.remote)

    def adopt_master_key(self, epoch: int, key: bytes) -> None:
        """Start wrapping new data keys under a new epoch's master key (see admin.keys.rotate)."""
        with self._state_lock:
            self._master_keys[epoch] = key
            self._subkeys[epoch] = Subkeys(key, self.store_id, epoch)
            self._epoch = max(self._master_keys)
            self.keyring.add_wrap_key(epoch, self._subkeys[epoch].wrap)

    def master_keys(self) -> dict[int, bytes]:
        """The master key of every epoch (for wrapping into a new key slot). Handle with care."""
        return dict(self._master_keys)
