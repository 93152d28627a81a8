"""The sealed data key records a keyring has read, kept compact: ``dek_id -> (epoch, wrapped key)``.

A store holds one data key record per version (one per memory of an idle server store, 100,000
at 100,000 notes), and a process keeps every one of them from open to close. A dict of tuples of
bytes costs about 250 bytes a record; here each record is its DEK body as the keyring stores it
(``dek_id || u32 epoch || wrapped key``, :data:`~memvault.keys.framing.DEK_SIZE` bytes), in one
bytearray sorted by id, found by binary search. Records added since the last :meth:`settle` wait
in a dict and are merged in one sort (the two sorted runs merge in linear time), so a refresh that
reads 100,000 records sorts once.
"""

from __future__ import annotations

from . import framing as fr

__all__ = ["SealedKeys"]

_SIZE = fr.DEK_SIZE
_ID = 16
#: Records waiting in the dict beyond which :meth:`SealedKeys.settle` merges them (at least).
_MIN_MERGE = 64


class SealedKeys:
    """``dek_id -> (epoch, wrapped key)`` of a keyring's data key records; not thread-safe (the
    keyring's caller serialises)."""

    __slots__ = ("_base", "_count", "_recent", "_gone")

    def __init__(self) -> None:
        self._base = bytearray()  # DEK bodies sorted by id, _SIZE bytes each
        self._count = 0
        self._recent: dict[bytes, bytes] = {}  # dek_id -> DEK body, added since the last merge
        self._gone: set[bytes] = set()  # ids in _base removed since the last merge

    def _find(self, dek_id: bytes) -> int:
        """The index of ``dek_id``'s record in the sorted part, or -1 (removed ones included)."""
        base = self._base
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) >> 1
            at = mid * _SIZE
            here = base[at : at + _ID]
            if here < dek_id:
                lo = mid + 1
            elif here > dek_id:
                hi = mid
            else:
                return mid
        return -1

    def body(self, dek_id: bytes) -> bytes | None:
        """The DEK body of ``dek_id`` (``dek_id || epoch || wrapped key``), or None."""
        found = self._recent.get(dek_id)
        if found is not None:
            return found
        if dek_id in self._gone:
            return None
        i = self._find(dek_id)
        return bytes(self._base[i * _SIZE : (i + 1) * _SIZE]) if i >= 0 else None

    def get(self, dek_id: bytes) -> tuple[int, bytes] | None:
        """``(epoch, wrapped key)`` of ``dek_id``, or None."""
        body = self.body(dek_id)
        if body is None:
            return None
        return fr.DEK_HEAD.unpack_from(body)[1], body[fr.DEK_HEAD.size :]

    def __contains__(self, dek_id: object) -> bool:
        return isinstance(dek_id, bytes) and self.body(dek_id) is not None

    def __len__(self) -> int:
        return self._count - len(self._gone) + len(self._recent)

    def put(self, body: bytes) -> None:
        """Keep the DEK body ``body`` (:data:`~memvault.keys.framing.DEK_SIZE` bytes), replacing
        any record of its id. Raises ValueError for a body of another size."""
        if len(body) != _SIZE:
            raise ValueError("a data key record has a fixed size")
        dek_id = bytes(body[:_ID])
        if dek_id not in self._recent and self._find(dek_id) >= 0:
            self._gone.add(dek_id)  # the sorted copy is superseded
        self._recent[dek_id] = bytes(body)

    def put_if_absent(self, body: bytes) -> None:
        """Keep ``body`` unless a record of its id is kept already."""
        if body[:_ID] not in self:
            self.put(body)

    def pop(self, dek_id: bytes) -> bytes | None:
        """Remove ``dek_id``'s record; its DEK body, or None if there was none."""
        found = self._recent.pop(dek_id, None)
        if found is not None:
            return found
        if dek_id in self._gone:
            return None
        i = self._find(dek_id)
        if i < 0:
            return None
        self._gone.add(dek_id)
        return bytes(self._base[i * _SIZE : (i + 1) * _SIZE])

    def copy(self) -> SealedKeys:
        """A table holding the same records that changes independently of this one (the sorted
        part, never changed in place, is shared)."""
        other = SealedKeys()
        other._base, other._count = self._base, self._count
        other._recent, other._gone = dict(self._recent), set(self._gone)
        return other

    def settle(self, *, force: bool = False) -> None:
        """Merge the records added since the last merge into the sorted part, when they are many
        (more than an eighth of it, and at least a few dozen) or ``force``."""
        waiting = len(self._recent)
        if not force and (waiting < _MIN_MERGE or waiting * 8 < self._count):
            return
        if not waiting and not self._gone:
            return
        base, gone = self._base, self._gone
        records = [bytes(base[i * _SIZE : (i + 1) * _SIZE]) for i in range(self._count)]
        if gone:
            records = [r for r in records if r[:_ID] not in gone]
        records.extend(sorted(self._recent.values()))
        records.sort()  # two sorted runs: merged in linear time; ids are unique, so bodies sort by id
        self._base = bytearray(b"".join(records))  # a new object: copies share the old one
        self._count = len(records)
        self._recent = {}
        self._gone = set()
