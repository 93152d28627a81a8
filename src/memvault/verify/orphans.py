"""``memvault verify --remote``: the objects under a store's prefix in object storage that no commit
needs, listed and never deleted (:func:`~memvault.remote.inventory.find_orphans`)."""

from __future__ import annotations

from dataclasses import replace

from ..errors import InvalidInputError
from ..remote.compact import grace_seconds, plan_deletions
from ..remote.inventory import OrphanReport, find_orphans
from ..store import MemoryStore

__all__ = ["remote_orphans"]


def remote_orphans(store: MemoryStore) -> OrphanReport:
    """List the orphaned objects of ``store``, a store in object storage: under its writer lock,
    every object under the prefix, then a pull, then the committed log records (see
    :func:`~memvault.remote.inventory.find_orphans`), and what ``memvault gc`` would delete now and
    after its grace period (``$MEMVAULT_GC_GRACE``, :func:`~memvault.remote.compact.plan_deletions`).
    Deletes nothing (a pull may delete the data key objects of keys a redaction it takes in
    destroyed, as every pull does).

    Raises:
        InvalidInputError: ``store`` is a store directory.
        RollbackDetectedError, IntegrityError, ServiceError: see ``find_orphans`` and the pull.
    """
    replica = store.remote
    if replica is None:
        raise InvalidInputError(
            "Error: verify --remote lists the objects of a store in object storage (s3:// or file://); "
            "this store is a directory."
        )
    with store.writing():
        listed = replica.objects.list("")
        store.pull()
        report = find_orphans(replica, listed)
        plan = plan_deletions(replica, grace_seconds(None))
    return replace(report, gc_now=dict(plan.deleted), gc_waiting=dict(plan.waiting))
