"""The storage seam every backend implements: a flat namespace of immutable or compare-and-swapped
objects, addressed by ``/``-separated keys (docs/format.md §12)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ObjectInfo", "ObjectStore", "check_key"]

#: Keys memvault uses: lowercase letters, digits, ``.``, ``_``, ``-`` in ``/``-separated parts.
_KEY = re.compile(r"\A[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*\Z")


def check_key(key: str) -> str:
    """``key`` if it is a key memvault writes; ValueError otherwise (a programming error: keys
    are never taken from input)."""
    if not _KEY.match(key) or len(key) > 512:
        raise ValueError(f"not an object key: {key!r}")
    return key


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: its key (without the backend's prefix), size and version tag (an
    opaque string that changes whenever the object is replaced: the S3 ETag)."""

    key: str
    size: int
    tag: str


class ObjectStore(Protocol):
    """What memvault needs from a place that holds a store's objects.

    Every method is atomic per object: a reader sees an object whole or not at all. A request
    that may or may not have taken effect (a timeout after sending) is resolved by reading the
    object back, never by guessing. Errors of the service raise
    :class:`~memvault.errors.ServiceError` naming it; a missing object is not an error.
    """

    #: Who holds the objects, for messages ("S3 bucket example", "directory /srv/m").
    description: str

    def create(self, key: str, data: bytes) -> str | None:
        """Write ``data`` at ``key`` only if no object is there.

        Returns:
            The new object's version tag if this call created it (or a retry of it found its own
            bytes there); None if another object was there first (the lost compare-and-swap).
        """
        ...

    def get(self, key: str) -> bytes | None:
        """The object at ``key``, or None if there is none."""
        ...

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        """The object at ``key`` and its version tag, or None if there is none."""
        ...

    def list(self, prefix: str, *, start_after: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix`` and sorts after ``start_after``, in
        ascending byte order of key (all pages)."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object at ``key`` (no error if it is absent)."""
        ...

    def swap(self, key: str, data: bytes, expected: str | None) -> str | None:
        """Replace the object at ``key`` if its version tag is ``expected`` (None: only if it is
        absent).

        Returns:
            The new version tag, or None if the object had another tag (the lost swap).
        """
        ...

    def versioning(self) -> str | None:
        """``"Enabled"`` or ``"Suspended"`` if the backend keeps old versions of replaced and
        deleted objects, else None (a deleted data key then stays in the bucket's history)."""
        ...
