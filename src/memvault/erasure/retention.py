"""History retention: crypto-shred every file and directory version that left the head more than
``retain_history_days`` ago (``memvault expire --history``, and ``memvault gc`` when the store
sets it). Their data keys are destroyed in one ``redact`` commit, as redaction does
(:mod:`memvault.erasure.redact`); the head is never touched. What this guarantees and what it does not
reach: SECURITY.md, "Retention".

A dry run and the real run choose with the same function (:func:`expired`), and a real run given
the dry run's result as ``expect`` destroys nothing when the choice changed meanwhile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..errors import ConflictError, InvalidInputError
from ..format.records import Node
from ..history import shard_diff, walk
from ..store import MemoryStore

__all__ = ["ExpiredVersion", "RetentionResult", "expired", "expired_versions", "apply_retention"]

_DAY = 86400.0


@dataclass(frozen=True)
class ExpiredVersion:
    """A version retention shreds: its path and kind, its version number, its data key, and the
    commit that replaced or deleted it (when it left the head)."""

    path: str
    kind: str
    version: int
    dek_id: str
    left_commit: str
    left_seq: int

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "version": self.version,
            "dek_id": self.dek_id,
            "left_commit": self.left_commit,
            "left_seq": self.left_seq,
        }


@dataclass(frozen=True)
class RetentionResult:
    """A retention run: the cutoff, the data keys destroyed (or that would be) and their
    versions (sorted by path, then version), the commit made."""

    cutoff: float
    dek_ids: tuple[str, ...]
    dry_run: bool
    commit_id: str | None = None
    versions: tuple[ExpiredVersion, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff,
            "versions": len(self.dek_ids),
            "dek_ids": list(self.dek_ids),
            "dry_run": self.dry_run,
            "commit": self.commit_id,
            "expired": [v.to_json() for v in self.versions],
        }


def expired(store: MemoryStore, cutoff: float) -> dict[bytes, ExpiredVersion]:
    """Every version (file or directory node) that a commit made before ``cutoff`` replaced or
    deleted, and that no redaction destroyed yet, by data key. Versions still in the head are
    never among them (each version has a key of its own)."""
    current: dict[bytes, Node] = {}
    found: dict[bytes, ExpiredVersion] = {}
    commits = list(walk(store))
    for commit_id, meta, tree_id, parent in reversed(commits):
        parent_tree = store.commit(parent)[1] if parent is not None else None
        created, deleted, modified = shard_diff(store, tree_id, parent_tree)
        left = [current.pop(node.token) for node in deleted if node.token in current]
        for node in created + modified:
            before = current.get(node.token)
            if before is not None and before.dek_id != node.dek_id:
                left.append(before)
            current[node.token] = node
        if meta.time < cutoff:
            for node in left:
                if not node.redacted:
                    found[node.dek_id] = ExpiredVersion(
                        node.path, node.kind, node.version, node.dek_id.hex(), commit_id.decode(), meta.seq
                    )
    for node in current.values():
        found.pop(node.dek_id, None)
    return {d: v for d, v in found.items() if not store.keyring.is_destroyed(d)}


def expired_versions(store: MemoryStore, cutoff: float) -> set[bytes]:
    """The data keys of the versions :func:`expired` finds."""
    return set(expired(store, cutoff))


def apply_retention(
    store: MemoryStore,
    days: float | None = None,
    *,
    actor: str = "retention",
    session: str = "",
    now: float | None = None,
    dry_run: bool = False,
    expect: RetentionResult | None = None,
) -> RetentionResult:
    """Destroy the data keys of every version that left the head more than ``days`` ago (default:
    the store's ``retain_history_days``), in one ``redact`` commit chosen and made under the
    writer lock (an edit cannot slip between). An interrupted run is finished by the next one.
    ``dry_run``: choose only; ``expect``: a dry run's result, which the choice must equal.

    Raises:
        InvalidInputError: no ``days`` given and the store sets no retention, or ``days`` < 0.
        ConflictError: the choice is not ``expect``'s (nothing destroyed).
    """
    if days is None:
        days = store.settings.retain_history_days
        if days is None:
            raise InvalidInputError("Error: The store sets no retention period (retain_history_days); give one.")
    if days < 0:
        raise InvalidInputError("Error: A retention period is 0 days or more.")
    cutoff = (time.time() if now is None else now) - days * _DAY
    with store.writing():
        chosen = expired(store, cutoff)
        dek_ids = set(chosen)
        listed = tuple(sorted(d.hex() for d in dek_ids))
        versions = tuple(sorted(chosen.values(), key=lambda v: (v.path, v.version, v.dek_id)))
        if expect is not None and listed != tuple(sorted(expect.dek_ids)):
            raise ConflictError(
                f"Error: The history changed since retention was planned ({len(expect.dek_ids)} version(s), "
                f"now {len(listed)}); nothing was shredded. Run it again."
            )
        if dry_run or not dek_ids:
            return RetentionResult(cutoff, listed, dry_run, versions=versions)
        info: dict[str, object] = {"time": time.time(), "actor": actor, "reason": f"retention: {days:g} days"}
        _count, _live, commit_id = store.destroy_keys(dek_ids, info, actor=actor, session=session)
    return RetentionResult(cutoff, listed, False, None if commit_id is None else commit_id.decode(), versions)
