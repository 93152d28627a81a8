"""The compaction lease of a store in object storage (docs/format.md §12.8, invariant 5): one
object, ``gc-lease``, that says which host compacts the store until when, and which objects the gc
runs have seen orphaned since when (deleted only after the grace period)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from ..errors import ConflictError
from ..storage.base import ObjectStore

__all__ = ["LEASE", "LEASE_SECONDS", "Lease"]

#: The lease's key, relative to the prefix.
LEASE = "gc-lease"
#: How long a lease holds without being renewed (seconds, the holder's clock).
LEASE_SECONDS = 900.0
_MAX_LEASE_BYTES = 64 * 1024 * 1024


class Lease:
    """The lease as host ``host`` (16 hex) sees it.

    Args:
        objects: the store's objects.
        host: this host's id.
        clock: the wall clock (Unix seconds).
    """

    def __init__(self, objects: ObjectStore, host: str, clock: Callable[[], float] = time.time) -> None:
        self._objects = objects
        self._host = host
        self._clock = clock
        self._tag: str | None = None
        #: Objects seen orphaned by gc runs: key -> when first seen (Unix seconds).
        self.orphans: dict[str, float] = {}

    def acquire(self) -> None:
        """Take the lease (create it, or replace one that expired or is this host's).

        Raises:
            ConflictError: another host holds it (or took it at the same moment).
            ServiceError: the object store failed.
        """
        current = self._objects.get_tagged(LEASE)
        expected = None
        if current is not None:
            data, expected = current
            holder, expires, self.orphans = _parse(data)
            if holder != self._host and expires > self._clock():
                raise ConflictError(
                    f"Error: another host ({holder}) is compacting {self._objects.description} (its lease runs for "
                    f"{max(0, int(expires - self._clock()))} s more); run gc again later."
                )
        tag = self._write(self._clock() + LEASE_SECONDS, expected)
        if tag is None:
            raise ConflictError(f"Error: another host took the compaction lease of {self._objects.description}.")
        self._tag = tag

    def peek(self) -> None:
        """Read the orphans the gc runs have seen, without taking the lease (``verify --remote``)."""
        current = self._objects.get(LEASE)
        if current is not None:
            self.orphans = _parse(current)[2]

    def renew(self) -> None:
        """Extend the lease (before each phase of a gc run).

        Raises:
            ConflictError: the lease is no longer this host's (it expired and another host took it).
        """
        tag = self._write(self._clock() + LEASE_SECONDS, self._tag)
        if tag is None:
            raise ConflictError(f"Error: this host lost the compaction lease of {self._objects.description}.")
        self._tag = tag

    def release(self) -> None:
        """Give the lease up, keeping the orphans seen (a failure is left to expire)."""
        if self._tag is not None:
            self._write(0.0, self._tag)
            self._tag = None

    def _write(self, expires: float, expected: str | None) -> str | None:
        state = {"expires": expires, "host": self._host, "orphans": dict(sorted(self.orphans.items()))}
        data = json.dumps(state, sort_keys=True).encode()
        return self._objects.swap(LEASE, data, expected) if expected is not None else self._objects.create(LEASE, data)


def _parse(data: bytes) -> tuple[str, float, dict[str, float]]:
    """``(holder, expires, orphans)`` of a lease object; a damaged one reads as expired and empty
    (anyone who may write the bucket can delete it anyway)."""
    try:
        if len(data) > _MAX_LEASE_BYTES:
            raise ValueError
        state = json.loads(data)
        holder, expires, orphans = str(state["host"]), float(state["expires"]), state["orphans"]
        return holder, expires, {str(k): float(v) for k, v in dict(orphans).items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", 0.0, {}
