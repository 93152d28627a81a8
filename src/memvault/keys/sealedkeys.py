"""The sealed data key records a keyring has read, kept compact: ``dek_id -> (epoch, wrapped key)``.

A store holds one data key record per version (one per memory of an idle server store, 100,000
at 100,000 notes), and a process keeps every one of them from open to close. A dict of tuples of
bytes costs about 250 bytes a record; here each record is its DEK body as the keyring stores it
(``dek_id || u32 epoch || wrapped key``, :data:`~memvault.keys.framing.DEK_SIZE` bytes), in one
bytearray sorted by id, found by binary search. Records added one by one since the last merge
wait in a dict; a long run of records read at once (a keyring of 1,000,000 notes written by one
import is one run of 83 MB) is kept as the file framed it and searched in place until enough
lookups have paid for sorting it (docs/format.md §3.3 has the reasoning and the figures).
"""

from __future__ import annotations

from . import framing as fr

__all__ = ["SealedKeys"]

_SIZE = fr.DEK_SIZE
_ID = 16
#: Where a record's id starts in a run (after its record header), and a run's stride.
_HEAD = fr.RECORD.size
_STRIDE = fr.DEK_RECORD_SIZE
#: Records waiting in the dict beyond which :meth:`SealedKeys.settle` merges them (at least).
_MIN_MERGE = 64
#: Lookups that searched the unsorted runs after which they are sorted in: a search of a run
#: costs about 1/150 of sorting it, at any size (docs/format.md §3.3).
_SEARCHES_BEFORE_SORT = 64


class SealedKeys:
    """``dek_id -> (epoch, wrapped key)`` of a keyring's data key records; not thread-safe (the
    keyring's caller serialises). The newest record of an id wins: dict, then runs from the
    newest, then the sorted part."""

    __slots__ = ("_base", "_count", "_runs", "_run_records", "_searches", "_recent", "_gone")

    def __init__(self) -> None:
        self._base = bytearray()  # DEK bodies sorted by id, _SIZE bytes each, ids unique
        self._count = 0
        self._runs: list[bytes] = []  # framed DEK records as read, oldest run first, newer than _base
        self._run_records = 0
        self._searches = 0  # lookups that searched _runs since they were last sorted in
        self._recent: dict[bytes, bytes] = {}  # dek_id -> DEK body, newer than _runs and _base
        self._gone: set[bytes] = set()  # ids removed from _runs and _base (a newer _recent entry wins)

    def _find(self, dek_id: bytes) -> int:
        """The index of ``dek_id``'s record in the sorted part, or -1."""
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

    def _in_runs(self, dek_id: bytes) -> bytes | None:
        """The newest record of ``dek_id`` in the unsorted runs (searched in place), or None."""
        self._searches += 1
        for run in reversed(self._runs):
            at = next(fr.dek_records_of(run, dek_id), -1)
            if at >= 0:
                return run[at + _HEAD : at + _HEAD + _SIZE]
        return None

    def body(self, dek_id: bytes) -> bytes | None:
        """The DEK body of ``dek_id`` (``dek_id || epoch || wrapped key``), or None."""
        found = self._recent.get(dek_id)
        if found is not None or dek_id in self._gone:
            return found
        if self._runs:
            found = self._in_runs(dek_id)
            if self._searches >= _SEARCHES_BEFORE_SORT:
                self._merge()
            if found is not None:
                return found
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
        """How many ids have a record (sorts everything in first)."""
        self._merge()
        return self._count

    def put(self, body: bytes) -> None:
        """Keep the DEK body ``body`` (:data:`~memvault.keys.framing.DEK_SIZE` bytes), replacing
        any record of its id. Raises ValueError for a body of another size."""
        if len(body) != _SIZE:
            raise ValueError("a data key record has a fixed size")
        self._recent[bytes(body[:_ID])] = bytes(body)

    def put_run(self, run: bytes) -> None:
        """Keep the framed DEK records ``run`` (each a record header and a DEK body, back to back,
        as the keyring holds them; newer than every record kept), searched in place until sorted
        in. Raises ValueError unless ``run`` is whole records of that kind."""
        if len(run) % _STRIDE or fr.dek_run(run, 0) * _STRIDE != len(run):
            raise ValueError("not a run of data key records")
        if self._recent or self._gone:
            self._merge()  # what waits is older than the run: settle it so the run wins over it
        self._runs.append(bytes(run))
        self._run_records += len(run) // _STRIDE

    def put_if_absent(self, body: bytes) -> None:
        """Keep ``body`` unless a record of its id is kept already."""
        if body[:_ID] not in self:
            self.put(body)

    def pop(self, dek_id: bytes) -> bytes | None:
        """Remove ``dek_id``'s record; its DEK body, or None if there was none."""
        found = self.body(dek_id)
        if found is not None:
            self._recent.pop(dek_id, None)
            self._gone.add(dek_id)
        return found

    def copy(self) -> SealedKeys:
        """A table holding the same records that changes independently of this one (the sorted
        part and the runs, never changed in place, are shared)."""
        other = SealedKeys()
        other._base, other._count = self._base, self._count
        other._runs, other._run_records, other._searches = list(self._runs), self._run_records, self._searches
        other._recent, other._gone = dict(self._recent), set(self._gone)
        return other

    def settle(self, *, force: bool = False) -> None:
        """Merge the records added one by one since the last merge into the sorted part, when
        they are many (more than an eighth of what is kept, and at least a few dozen) or
        ``force`` (which sorts the runs in too)."""
        waiting = len(self._recent)
        if force or (waiting >= _MIN_MERGE and waiting * 8 >= self._count + self._run_records):
            self._merge()

    def _merge(self) -> None:
        """Sort every record into the sorted part: the newest of each id, none removed."""
        if not (self._recent or self._gone or self._runs):
            return
        base = bytes(self._base)
        records = [base[at : at + _SIZE] for at in range(0, len(base), _SIZE)]
        for run in self._runs:
            records.extend(run[at : at + _SIZE] for at in range(_HEAD, len(run), _STRIDE))
        if self._runs:  # an id may repeat in the file, or be in the sorted part too: the newest wins
            newest = dict(zip([r[:_ID] for r in records], records, strict=True))
            if len(newest) != len(records):
                records = list(newest.values())
        drop = self._gone | self._recent.keys()  # removed, or replaced by a newer record
        if drop:
            records = [r for r in records if r[:_ID] not in drop]
        records.extend(self._recent.values())
        records.sort()  # ids are unique now, so bodies sort by id
        self._base = bytearray(b"".join(records))  # a new object: copies share the old one
        self._count = len(records)
        self._runs, self._run_records, self._searches = [], 0, 0
        self._recent = {}
        self._gone = set()
