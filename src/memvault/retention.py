"""History retention: crypto-shred every file and directory version that left the head more than
``retain_history_days`` ago (``memvault expire --history``, and ``memvault gc`` when the store
sets it). Their data keys are destroyed in one ``redact`` commit, as redaction does
(:mod:`memvault.shred`); the head is never touched. What this guarantees and what it does not
reach: SECURITY.md, "Retention".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .errors import InvalidInputError
from .format.records import Node
from .history import shard_diff, walk
from .store import MemoryStore

__all__ = ["RetentionResult", "expired_versions", "apply_retention"]

_DAY = 86400.0


@dataclass(frozen=True)
class RetentionResult:
    """A retention run: the cutoff, the data keys destroyed (or that would be), the commit made."""

    cutoff: float
    dek_ids: tuple[str, ...]
    dry_run: bool
    commit_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff,
            "versions": len(self.dek_ids),
            "dek_ids": list(self.dek_ids),
            "dry_run": self.dry_run,
            "commit": self.commit_id,
        }


def expired_versions(store: MemoryStore, cutoff: float) -> set[bytes]:
    """The data keys of every version (file or directory node) that a commit made before
    ``cutoff`` replaced or deleted, and that no redaction destroyed yet. Versions still in the
    head are never among them (each version has a key of its own)."""
    current: dict[bytes, Node] = {}
    expired: set[bytes] = set()
    commits = list(walk(store))
    for _commit_id, meta, tree_id, parent in reversed(commits):
        parent_tree = store.commit(parent)[1] if parent is not None else None
        created, deleted, modified = shard_diff(store, tree_id, parent_tree)
        left = [current.pop(node.token) for node in deleted if node.token in current]
        for node in created + modified:
            before = current.get(node.token)
            if before is not None and before.dek_id != node.dek_id:
                left.append(before)
            current[node.token] = node
        if meta.time < cutoff:
            expired.update(node.dek_id for node in left if not node.redacted)
    expired -= {node.dek_id for node in current.values()}
    return {dek_id for dek_id in expired if not store.keyring.is_destroyed(dek_id)}


def apply_retention(
    store: MemoryStore,
    days: float | None = None,
    *,
    actor: str = "retention",
    session: str = "",
    now: float | None = None,
    dry_run: bool = False,
) -> RetentionResult:
    """Destroy the data keys of every version that left the head more than ``days`` ago (default:
    the store's ``retain_history_days``), in one ``redact`` commit chosen and made under the
    writer lock (an edit cannot slip between). An interrupted run is finished by the next one.

    Raises:
        InvalidInputError: no ``days`` given and the store sets no retention, or ``days`` < 0.
    """
    if days is None:
        days = store.settings.retain_history_days
        if days is None:
            raise InvalidInputError("Error: The store sets no retention period (retain_history_days); give one.")
    if days < 0:
        raise InvalidInputError("Error: A retention period is 0 days or more.")
    cutoff = (time.time() if now is None else now) - days * _DAY
    with store.writing():
        dek_ids = expired_versions(store, cutoff)
        listed = tuple(sorted(d.hex() for d in dek_ids))
        if dry_run or not dek_ids:
            return RetentionResult(cutoff, listed, dry_run)
        info: dict[str, object] = {"time": time.time(), "actor": actor, "reason": f"retention: {days:g} days"}
        _count, _live, commit_id = store.destroy_keys(dek_ids, info, actor=actor, session=session)
    return RetentionResult(cutoff, listed, False, None if commit_id is None else commit_id.decode())
