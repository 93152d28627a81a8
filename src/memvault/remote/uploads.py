"""What a replica writes to object storage besides commits (docs/format.md §12): data key objects
re-wrapped by a master-key rotation, key slots, the store's configuration, and the warning about a
bucket that keeps old versions."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from ..errors import IntegrityError, ServiceError
from ..keys.keyring import Keyring
from ..storage.base import ObjectStore
from .checkpoint import bundle_key, decode_bundle, encode_bundle
from .layout import CONFIG, dek_key, slot_key, split_append
from .logstate import LogListing

__all__ = ["Uploads", "drop_from_bundle"]

#: Rewrites of a bundle tried while other hosts rewrite it too.
_BUNDLE_ROUNDS = 20

T = TypeVar("T")
K = TypeVar("K")


class Uploads:
    """The uploads (and deletions) of a :class:`~memvault.remote.replica.Replica` other than its
    commits."""

    objects: ObjectStore
    keyring: Keyring
    _listing: LogListing | None

    def _all(self, fn: Callable[[K], T], items: Iterable[K]) -> list[T]:
        raise NotImplementedError

    def versioning_warning(self) -> str | None:
        """What to tell an operator when the bucket keeps old versions of objects (a destroyed data
        key's object then survives its deletion), or None."""
        state = self.objects.versioning()
        if state is None:
            return None
        return (
            f"{self.objects.description} has versioning {state.lower()}: a data key that redaction deletes, a "
            "data key a rotation re-wrapped and a removed key slot stay in the bucket's old versions until they "
            "expire. Add a lifecycle rule that expires noncurrent versions under the store's deks/ and keys/ "
            "prefixes (NoncurrentVersionExpiration), or use a bucket without versioning (SECURITY.md, object "
            "storage)."
        )

    def push_rewrapped(self) -> None:
        """Replace the data key objects with the replica's DEK records after a master-key rotation
        re-wrapped them (objects of keys destroyed meanwhile stay deleted)."""
        deks, _chained = split_append(self.keyring.records())

        def replace(dek_id: bytes) -> None:
            current = self.objects.get_tagged(dek_key(dek_id))
            if current is not None and current[0] != deks[dek_id]:
                self.objects.swap(dek_key(dek_id), deks[dek_id], current[1])

        self._all(replace, list(deks))

    def push_slot(self, slot_id: str, data: bytes | None) -> None:
        """Upload a new key slot (``data``) or delete one (None)."""
        if data is None:
            self.objects.delete(slot_key(slot_id))
        elif self.objects.create(slot_key(slot_id), data) is None:
            raise IntegrityError(f"{self.objects.description} already holds a different key slot {slot_id}.")

    def push_config(self, data: bytes) -> None:
        """Replace the store's ``memvault.json`` (after a format upgrade)."""
        current = self.objects.get_tagged(CONFIG)
        self.objects.swap(CONFIG, data, current[1] if current else None)

    def destroyed(self, dek_ids: Iterable[bytes]) -> None:
        """Delete the objects of destroyed data keys (after the redaction's commit), and their DEK
        records from the data key bundles of the checkpoints the last pull listed (§12.8)."""
        ids = set(dek_ids)
        self._all(self.objects.delete, [dek_key(dek_id) for dek_id in ids])
        if ids and self._listing is not None:
            self._all(lambda position: drop_from_bundle(self.objects, position, ids), list(self._listing.checkpoints))

    def delete_destroyed(self, dek_ids: Iterable[bytes]) -> None:
        """:meth:`destroyed` right after this host's redaction committed: a failure says that the
        redaction stands and who finishes the deletion.

        Raises:
            ServiceError: the object store failed (the keys are destroyed all the same).
        """
        try:
            self.destroyed(dek_ids)
        except ServiceError as err:
            raise ServiceError(
                err.service,
                err.action,
                f"{err.reason}. The redaction is committed and its keys are gone from this host's cache, but their "
                "objects are still in the bucket: the next host to open the store, or `memvault gc`, deletes them",
            ) from None


def drop_from_bundle(objects: ObjectStore, position: int, dek_ids: set[bytes]) -> bool:
    """Rewrite the data key bundle of checkpoint ``position`` without the DEK records of ``dek_ids``
    (``If-Match`` on its version tag, read again when another host rewrote it meanwhile); return
    whether it held any.

    Raises:
        ServiceError: the object store failed.
    """
    for _attempt in range(_BUNDLE_ROUNDS):
        current = objects.get_tagged(bundle_key(position))
        if current is None:
            return False
        records = decode_bundle(current[0])
        if not records.keys() & dek_ids:
            return False
        kept = {dek_id: record for dek_id, record in records.items() if dek_id not in dek_ids}
        if objects.swap(bundle_key(position), encode_bundle(kept), current[1]) is not None:
            return True
    raise ServiceError(objects.description, "rewrite", "the data key bundle kept changing")
