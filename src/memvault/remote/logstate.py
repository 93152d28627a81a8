"""The state of a store's log in object storage (docs/format.md §12.6): which object holds each
commit once voids are followed, what stops a writer (an object at the next commit's place that
is no authentic record, or an object beyond a gap), and what ``verify`` and ``repair-log`` report."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..errors import IntegrityError, InvalidInputError, LogBlockedError, RollbackDetectedError
from ..storage.base import ObjectInfo
from .checkpoint import checkpoint_of
from .layout import MAX_VOID_BYTES, VoidRecord, decode_void, log_slot, void_of, wait_of

__all__ = [
    "Slot",
    "LogListing",
    "Voids",
    "LogFinding",
    "findings",
    "committed",
    "check_seen",
    "obstacle",
    "void_targets",
    "junk_error",
    "mark_tag",
    "mark_slot",
]

#: ``(seq, attempt)``: where an object of the log sits (``layout.log_key(seq, attempt)``).
Slot = tuple[int, int]
_MARK_ATTEMPT = re.compile(r"\A([1-9][0-9]{0,5})/")


@dataclass
class LogListing:
    """A listing of ``log/`` sorted into record objects (by slot), voids (by the slot they name),
    waiting markers (``(key, (seq, since, host))``) and checkpoints."""

    slots: dict[Slot, ObjectInfo] = field(default_factory=dict)
    voids: dict[Slot, list[ObjectInfo]] = field(default_factory=dict)
    waits: list[tuple[str, tuple[int, int, str]]] = field(default_factory=list)
    seqs: set[int] = field(default_factory=set)
    #: Checkpoints (docs/format.md §12.8) by the last position they cover.
    checkpoints: dict[int, ObjectInfo] = field(default_factory=dict)

    @classmethod
    def of(cls, listed: Iterable[ObjectInfo]) -> LogListing:
        """Sort a listing; keys of any other shape are ignored."""
        out = cls()
        for info in listed:
            if (slot := log_slot(info.key)) is not None:
                out.slots[slot] = info
                out.seqs.add(slot[0])
            elif (named := void_of(info.key)) is not None:
                out.voids.setdefault(named, []).append(info)
            elif (wait := wait_of(info.key)) is not None:
                out.waits.append((info.key, wait))
            elif (position := checkpoint_of(info.key)) is not None:
                out.checkpoints[position] = info
        return out

    def tip(self, first: int) -> int:
        """The newest sequence number of the run of numbers with an object from ``first`` on
        (``first - 1`` when ``first`` has none): past a gap nothing counts."""
        tip = max(first, 0) - 1
        while tip + 1 in self.seqs:
            tip += 1
        return tip

    def beyond(self, slot: Slot) -> list[Slot]:
        """The slots holding an object after ``slot`` (a later number, or a later attempt of it)."""
        return sorted(s for s in self.slots if s > slot)


class Voids:
    """The voids a listing holds, each authenticated once (by key and version tag).

    Args:
        get_all: fetches objects by key, concurrently (None for an absent one).
        key: the store's keyring key (K_keyring).
        store_id: the store's id.
    """

    def __init__(self, get_all: Callable[[list[str]], list[bytes | None]], key: bytes, store_id: bytes) -> None:
        self._get_all = get_all
        self._key = key
        self._store_id = store_id
        self._checked: dict[tuple[str, str], VoidRecord | None] = {}

    def load(self, listing: LogListing, slots: Iterable[Slot]) -> None:
        """Fetch and authenticate, in one concurrent round, the voids listed for ``slots`` that
        were not checked yet (a void that is too big, absent or does not verify counts for nothing)."""
        todo = [i for s in slots for i in listing.voids.get(s, ()) if (i.key, i.tag) not in self._checked]
        wanted = [info for info in todo if info.size <= MAX_VOID_BYTES]
        datas = self._get_all([info.key for info in wanted]) if wanted else []
        for info in todo:
            self._checked[info.key, info.tag] = None
        for info, data in zip(wanted, datas, strict=True):
            named = void_of(info.key)
            if data is None or named is None:
                continue
            try:
                self._checked[info.key, info.tag] = decode_void(data, self._key, self._store_id, *named)
            except IntegrityError:
                pass

    def load_seqs(self, listing: LogListing, low: int, high: int) -> None:
        """:meth:`load` for every slot of the numbers ``low`` to ``high - 1``."""
        self.load(listing, [slot for slot in listing.voids if low <= slot[0] < high])

    def voiding(self, listing: LogListing, slot: Slot) -> VoidRecord | None:
        """The authentic void of the object listed at ``slot`` (it names that object's version tag
        and size), or None."""
        target = listing.slots.get(slot)
        if target is None or slot not in listing.voids:
            return None
        self.load(listing, [slot])
        for info in listing.voids[slot]:
            void = self._checked.get((info.key, info.tag))
            if void is not None and (void.tag, void.size) == (target.tag, target.size):
                return void
        return None

    def resolve(self, listing: LogListing, seq: int) -> tuple[int, ObjectInfo | None]:
        """The attempt that holds commit ``seq`` (the first whose object is not voided) and its
        object, or None when that place is free."""
        attempt = 0
        while (info := listing.slots.get((seq, attempt))) is not None and self.voiding(listing, (seq, attempt)):
            attempt += 1
        return attempt, info

    def forged(self, listing: LogListing) -> list[ObjectInfo]:
        """The voids listed that do not verify (written without the store's key, or damaged)."""
        self.load(listing, listing.voids)
        return [i for infos in listing.voids.values() for i in infos if self._checked.get((i.key, i.tag)) is None]


@dataclass(frozen=True)
class LogFinding:
    """An object of the log that is not simply a commit's record. ``kind``: ``junk`` (at the next
    commit's place and not authentic: commits stop), ``beyond-gap`` (after a number with no
    object: commits stop), ``voided`` (a key holder's void steps over it), ``stray`` (at a later
    attempt of a commit already made: never read) or ``forged-void`` (a void that does not
    verify: ignored)."""

    kind: Literal["junk", "beyond-gap", "voided", "stray", "forged-void"]
    seq: int
    key: str


def findings(listing: LogListing, voids: Voids, stop: Slot, junk: bool) -> list[LogFinding]:
    """What :class:`LogFinding` describes, for a listing of the whole log.

    Args:
        stop: where the replica's last pull stopped: the next commit's place.
        junk: the object at ``stop`` is not authentic.
    """
    voids.load(listing, listing.voids)
    chosen: dict[int, int] = {}
    out: list[LogFinding] = []
    for slot, info in sorted(listing.slots.items()):
        if voids.voiding(listing, slot) is not None:
            out.append(LogFinding("voided", slot[0], info.key))
        elif slot == stop and junk:
            out.append(LogFinding("junk", slot[0], info.key))
        elif slot > stop:
            out.append(LogFinding("beyond-gap", slot[0], info.key))
        elif slot[0] < stop[0]:
            if slot[0] not in chosen:
                chosen[slot[0]] = voids.resolve(listing, slot[0])[0]
            if slot[1] > chosen[slot[0]]:
                out.append(LogFinding("stray", slot[0], info.key))
    out += [LogFinding("forged-void", named[0], i.key) for i in voids.forged(listing) if (named := void_of(i.key))]
    return out


def committed(listing: LogListing, voids: Voids, upto: int, where: str, start: int = 0) -> list[ObjectInfo]:
    """The object holding each commit ``start`` to ``upto - 1`` (voids followed), for a listing of
    the whole log (``start``: after the checkpoint that holds those before, docs/format.md §12.8).

    Raises:
        RollbackDetectedError: one of them is no longer listed (deleted since it was taken in).
    """
    voids.load(listing, listing.voids)
    out: list[ObjectInfo] = []
    for seq in range(start, upto):
        info = voids.resolve(listing, seq)[1]
        if info is None:
            raise RollbackDetectedError(f"Rollback detected: {where} no longer holds commit #{seq}.")
        out.append(info)
    return out


def junk_error(where: str, seq: int, key: str) -> LogBlockedError:
    """The error of a writer that finds ``key``, no authentic record, at commit ``seq``'s place."""
    return LogBlockedError(
        f"The object {key} in {where} is not an authentic log record of commit #{seq}, so no commit can be "
        f"made (what is committed can still be read). A key holder steps over it with: memvault repair-log "
        f"--void {seq}",
        seq=seq,
    )


def beyond_error(where: str, next_seq: int, seq: int, key: str) -> LogBlockedError:
    """The error of a writer that finds ``key`` (commit ``seq``'s) after ``next_seq``'s free place."""
    return LogBlockedError(
        f"The object {key} in {where} lies beyond commit #{next_seq}, the next to be made, with no record between: "
        "it cannot be authenticated (it is junk, or records before it were deleted: look for delete markers under "
        "log/ and remove them), so no commit can be made (what is committed can still be read). A key holder steps "
        f"over it with: memvault repair-log --void {seq} --yes",
        seq=seq,
    )


def obstacle(
    listing: LogListing, voids: Voids, stop: Slot, junk: ObjectInfo | None, where: str
) -> LogBlockedError | None:
    """What stops a writer, given where a pull stopped (``stop``, the next commit's place, and
    ``junk``, the object there when it is not an authentic record): that object, or the first
    object beyond ``stop`` that no authentic void steps over; None when nothing does."""
    if junk is not None:
        return junk_error(where, stop[0], junk.key)
    beyond = listing.beyond(stop)
    voids.load(listing, beyond)
    for slot in beyond:
        if voids.voiding(listing, slot) is None:
            return beyond_error(where, stop[0], slot[0], listing.slots[slot].key)
    return None


def void_targets(
    listing: LogListing, voids: Voids, stop: Slot, junk: ObjectInfo | None, seq: int, beyond_gap: bool, where: str
) -> list[Slot]:
    """The places whose objects a void at commit number ``seq`` covers now (see ``obstacle``):
    the object at ``stop`` when it is not authentic, else (``beyond_gap``) every object of
    ``seq`` beyond ``stop`` that no void steps over yet; empty when nothing stops commits there.

    Raises:
        InvalidInputError: ``seq`` is committed, or its objects lie beyond a gap and ``beyond_gap``
            is False.
    """
    if seq < stop[0]:
        raise InvalidInputError(f"Error: commit #{seq} is part of the history in {where}; it cannot be voided.")
    if seq == stop[0] and junk is not None:
        return [stop]  # not an authentic record: the MAC chain says so
    beyond = [slot for slot in listing.beyond(stop) if slot[0] == seq]
    voids.load(listing, beyond)
    targets = [slot for slot in beyond if voids.voiding(listing, slot) is None]
    if targets and not beyond_gap:
        raise InvalidInputError(
            f"Error: {listing.slots[targets[0]].key} in {where} lies beyond commit #{stop[0]}, the next to be made, "
            "with no record between, so it cannot be authenticated: it is junk, or records before it were deleted "
            "(look for delete markers under log/ and remove them instead). To void it anyway, add --yes."
        )
    return targets


def mark_tag(attempt: int, tag: str) -> str:
    """The tag a high-water mark records for the object at ``attempt``: its version tag, after
    ``<attempt>/`` for an attempt after the first."""
    return f"{attempt}/{tag}" if attempt else tag


def mark_slot(tag: str) -> tuple[int, str]:
    """``(attempt, version tag)`` of a tag :func:`mark_tag` made."""
    match = _MARK_ATTEMPT.match(tag)
    return (int(match.group(1)), tag[match.end() :]) if match else (0, tag)


def check_seen(
    listing: LogListing, voids: Voids, local: int, mark: tuple[int, str] | None, where: str, covered: int = -1
) -> None:
    """Check what a host has seen against the log listed from the older of ``local`` (its
    replica's newest commit) and ``mark`` (its high-water mark: ``(seq, mark_tag(...))``): the
    record of the mark listed with the same version tag and not voided, and a record of ``local``
    (when the mark names another commit). A position up to ``covered`` (that of an authentic
    checkpoint, docs/format.md §12.8) needs no record: the checkpoint holds it.

    Raises:
        RollbackDetectedError: either is not so (deleted, replaced, voided: rollback, tampering or
            a fork).
    """
    if mark is not None and mark[0] > covered:
        attempt, tag = mark_slot(mark[1])
        info = listing.slots.get((mark[0], attempt))
        if info is None:
            raise RollbackDetectedError(
                f"Rollback detected: {where} no longer holds commit #{mark[0]}, which this host has seen "
                "(the log was rolled back, or a record deleted)."
            )
        if info.tag != tag:
            raise RollbackDetectedError(
                f"Tampering detected: the log record of commit #{mark[0]} in {where} was replaced."
            )
        if voids.voiding(listing, (mark[0], attempt)) is not None:
            raise RollbackDetectedError(
                f"Fork detected: a key holder voided the log record of commit #{mark[0]} in {where}, which this host "
                "has taken in."
            )
    if covered < local and (mark is None or mark[0] != local) and voids.resolve(listing, local)[1] is None:
        raise RollbackDetectedError(
            f"Rollback detected: {where} no longer holds commit #{local}, which this host's cache holds."
        )
