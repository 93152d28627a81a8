"""Compaction of a store in object storage from a store object (``memvault gc``, or a server in
the background): under the store's writer lock, a pull, then :func:`~memvault.remote.compact.compact`
(docs/format.md §12.8)."""

from __future__ import annotations

from ..errors import InvalidInputError
from ..remote.compact import GcReport, compact, grace_seconds, plan_deletions
from ..store import MemoryStore
from ..store.config import extends_object_log

__all__ = ["compact_remote", "remote_gc_plan"]


def compact_remote(store: MemoryStore, grace: float | None = None) -> GcReport:
    """Compact ``store``, a store in object storage: checkpoint, merged pack, data key bundle, and
    the deletions the grace period allows.

    Args:
        store: an open store in object storage.
        grace: seconds before superseded and orphaned objects are deleted (None:
            ``$MEMVAULT_GC_GRACE``, else one hour).

    Raises:
        InvalidInputError: ``store`` is a store directory or of a format version before 4, or a
            bad grace period.
        ConflictError: another host is compacting the store.
        RollbackDetectedError, IntegrityError, ServiceError: see the pull and the compaction.
    """
    replica = store.remote
    if replica is None:
        raise InvalidInputError("Error: only a store in object storage (s3:// or file://) is compacted remotely.")
    if not extends_object_log(store.format_version):
        raise InvalidInputError(
            f"Error: Compacting a store in object storage needs format version 4 (this store has version "
            f"{store.format_version}): once every host of the store runs this release, run `memvault upgrade` "
            "(an older release would find no log in a compacted store)."
        )
    seconds = grace_seconds(grace)
    with store.writing():
        store.pull()
        return compact(replica, grace=seconds)


def remote_gc_plan(store: MemoryStore, grace: float | None = None) -> GcReport:
    """What ``memvault gc`` would delete in ``store`` now and after the grace period (nothing is
    deleted; under the writer lock, after a pull).

    Raises:
        InvalidInputError: ``store`` is a store directory, or a bad grace period.
        IntegrityError, ServiceError: see :func:`~memvault.remote.compact.plan_deletions`.
    """
    replica = store.remote
    if replica is None:
        raise InvalidInputError("Error: only a store in object storage has a remote gc plan.")
    seconds = grace_seconds(grace)
    with store.writing():
        store.pull()
        return plan_deletions(replica, seconds)
