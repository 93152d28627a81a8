"""How a replica follows its store's one log (docs/format.md §12.4): the log position it has taken
in (a hint file, checked against the keyring), the records its keyring holds already, a trial of
records that leaves the keyring as it was, and the side branches' refs that the log's records move."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from .. import crypto
from ..errors import IntegrityError
from ..fsutil import atomic_write, read_bounded
from ..git.repo import GitStore
from ..keys.framing import ATIMES, BRANCH, COMMIT, COMMIT_RAW, frame_records
from ..keys.keyring import Keyring
from .layout import LogRecord, decode_log, split_append

__all__ = ["ChainedRuns", "Follower", "POSITION_FILE", "SIDES_FILE", "SIDE_PREFIX"]

#: The log position of the newest log record the replica took in, in the replica directory.
POSITION_FILE = "remote-position"
#: The side branches whose refs follow records being taken in, in the replica directory.
SIDES_FILE = "remote-sides"
#: Where side branches' refs live in the replica's repository (``refs/heads/dream/<16 hex>``, the
#: names of docs/format.md §5.8; their 8-byte keyring id is the hex).
SIDE_PREFIX = "dream/"
_MAX_HINT_BYTES = 4096
_POSITION_MAC = b"memvault/v1/remote-position"
_SIDES_MAC = b"memvault/v1/remote-sides"
_U64 = struct.Struct(">Q")
#: The chained records after which a log record's run of chained records can begin: a commit's
#: closing record (of ``main`` or of a side branch) and a record that stands alone.
_RUN_ENDS = frozenset({COMMIT, COMMIT_RAW, BRANCH, ATIMES})


class ChainedRuns:
    """Chained keyring records in the order they were taken in, and where a log record's run of
    them can begin (at the start, or after a record of :data:`_RUN_ENDS`), indexed by the record
    each such place begins with (a lookup reads no more than the run it matches)."""

    def __init__(self, chained: bytes = b"") -> None:
        self._data = bytearray()
        self._starts = {0}
        self._firsts: dict[bytes, list[int]] = {}  #: digest of a run's first record -> its offsets
        self.add(chained)

    def add(self, chained: bytes) -> None:
        """Add ``chained``, whole records (a torn tail is left out), after those held."""
        records, end = frame_records(chained)
        base = len(self._data)
        self._data += chained[:end]
        begin = 0
        for stop, rtype, _body in records:
            if base + begin in self._starts:
                self._firsts.setdefault(_digest(chained[begin:stop]), []).append(base + begin)
            if rtype in _RUN_ENDS:
                self._starts.add(base + stop)
            begin = stop

    def holds(self, run: bytes) -> bool:
        """Whether ``run`` (a log record's chained records) is, byte for byte, whole records
        held here that begin where a run can begin and end where one ends: not a fragment of
        records, nor one cut across a record or across a commit's records."""
        records, end = frame_records(run)
        if not records or end != len(run):
            return False
        for at in self._firsts.get(_digest(run[: records[0][0]]), ()):
            if at + len(run) in self._starts and self._data[at : at + len(run)] == run:
                return True
        return False


def _digest(record: bytes) -> bytes:
    return hashlib.sha256(record).digest()


class Follower:
    """What a replica (directory ``root``, its ``keyring`` and ``git``) knows of its place in the
    log. The caller holds the replica's writer lock.

    Args:
        key: the MAC key of the hint and the note (the store's keyring key, as the host's
            high-water mark's); None (a replica made for an upload): hints are never trusted.
        store_id: the store's id, bound into those MACs.
    """

    def __init__(self, root: Path, keyring: Keyring, git: GitStore, key: bytes | None, store_id: bytes) -> None:
        self._path = root / POSITION_FILE
        self._sides = root / SIDES_FILE
        self.keyring = keyring
        self.git = git
        self._key = key
        self._store_id = store_id
        self._hinted = True  #: a hint file may exist
        self._sides_checked = False  #: the refs of recorded side branches were caught up once

    def position(self, bound: int | None) -> int:
        """The log position of the newest record the replica took in: the hint's when its MAC
        verifies, the keyring records a side branch, the position is not above ``bound`` (the
        host's high-water mark's position, None: no mark) and the keyring's newest commit of
        ``main`` (or of the side branch the hint names) is the commit the hint names; else
        ``main``'s newest sequence number (a lower bound: each position holds one commit; a pull
        steps over records after it that the keyring holds already)."""
        hw = self.keyring.high_water
        floor = hw.seq if hw is not None else -1
        if self._key is None or not self.may_repeat():
            return floor  # without a side branch's record the position is exact
        try:
            hint = json.loads(read_bounded(self._path, _MAX_HINT_BYTES))
            position, commit, branch = hint["position"], hint["commit"].encode("ascii"), bytes.fromhex(hint["branch"])
            mac = crypto.b64decode(hint["mac"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return floor
        if type(position) is not int or not floor <= position < 2**64 or len(commit) != 40:
            return floor
        if bound is not None and position > bound:
            return floor
        if not crypto.consteq(crypto.mac(self._key, self._hint_message(position, commit, branch)), mac):
            return floor
        newest = self.keyring.branches.mark(branch) if branch else hw
        return position if newest is not None and newest.commit_id == commit else floor

    def _hint_message(self, position: int, commit: bytes, branch: bytes) -> bytes:
        return _POSITION_MAC + self._store_id + _U64.pack(position) + commit + branch

    def save(self, position: int, log: LogRecord) -> None:
        """Record that the record at ``position`` is ``log``: a hint file, or none while the
        position is ``main``'s sequence number (a log without side branches' records needs none).

        Raises:
            OSError: the file could not be written or removed.
        """
        if log.branch is None and position == log.seq:
            if self._hinted:
                try:
                    os.unlink(self._path)
                except FileNotFoundError:
                    pass
                self._hinted = False
            return
        if self._key is None:
            return
        branch = log.branch or b""
        mac = crypto.b64encode(crypto.mac(self._key, self._hint_message(position, log.commit_id, branch)))
        hint = {"branch": branch.hex(), "commit": log.commit_id.decode("ascii"), "mac": mac, "position": position}
        atomic_write(self._path, json.dumps(hint, sort_keys=True).encode() + b"\n", durable=False)
        self._hinted = True

    def accepts(self, runs: list[bytes]) -> int:
        """How many of ``runs`` (log records' chained records) the keyring would take in, in order;
        nothing changes (:meth:`Keyring.accepts <memvault.keys.keyring.Keyring.accepts>`)."""
        return self.keyring.accepts(runs)

    def may_repeat(self) -> bool:
        """Whether a record the keyring holds already can come up again at the next position: only
        once the keyring records a side branch (its position is then a hint that can lag)."""
        return bool(self.keyring.branches.recorded())

    def already_applied(self, logs: list[LogRecord]) -> list[LogRecord]:
        """The records at the beginning of ``logs`` whose chained records the keyring holds
        already (their MACs chain each to its predecessor: only the record the keyring took in at
        that point, or a copy of it, can match, and a copy adds nothing). None while the keyring
        records no side branch: the position is then exact, and such an object stays junk.
        A record matches only as whole runs of records (:meth:`ChainedRuns.holds`)."""
        if not self.may_repeat():
            return []
        held = ChainedRuns(split_append(self.keyring.records())[1])
        out: list[LogRecord] = []
        for log in logs:
            if not held.holds(log.chained):
                break
            out.append(log)
        return out

    def publishable(self, record: bytes, store_id: bytes, position: int) -> LogRecord:
        """The log record this host is about to create at ``position``, decoded.

        Raises:
            IntegrityError: it is the commit of a side branch whose records the keyring would
                refuse (a writer chains them from the branch's state: such records must never
                become a log record, which would stop every writer).
        """
        log = decode_log(record, store_id, position)
        if log.branch is not None and self.accepts([log.chained]) != 1:
            name = SIDE_PREFIX + log.branch.hex()
            raise IntegrityError(f"The commit of the dream branch {name} does not follow the keyring's record of it.")
        return log

    def expect_sides(self, logs: list[LogRecord]) -> None:
        """Note, before the keyring takes ``logs`` in, the side branches whose refs must follow
        them, so that a process stopped between the keyring's append and the refs' moves has its
        successor make them (:meth:`catch_up_sides`).

        Raises:
            OSError: the note could not be written.
        """
        branches = {log.branch for log in logs if log.branch is not None}
        if branches and self._key is not None:
            ids = sorted(branches | self._expected())
            mac = crypto.b64encode(crypto.mac(self._key, self._sides_message(ids)))
            note = {"branches": [b.hex() for b in ids], "mac": mac}
            atomic_write(self._sides, json.dumps(note, sort_keys=True).encode() + b"\n", durable=False)

    def _sides_message(self, ids: list[bytes]) -> bytes:
        return _SIDES_MAC + self._store_id + b"".join(ids)

    def _expected(self) -> set[bytes]:
        """The side branches the note names, if its MAC verifies (else none: a note written by
        anything but this store's writer makes no ref)."""
        if self._key is None:
            return set()
        try:
            note = json.loads(read_bounded(self._sides, _MAX_HINT_BYTES * 16))
            ids = [bytes.fromhex(name) for name in note["branches"] if isinstance(name, str) and len(name) == 16]
            if len(ids) != len(note["branches"]) or ids != sorted(set(ids)):
                return set()
            mac = crypto.b64decode(note["mac"])
        except (OSError, ValueError, KeyError, TypeError):
            return set()
        ok = crypto.consteq(crypto.mac(self._key, self._sides_message(ids)), mac)
        return set(ids) if ok else set()

    def catch_up_sides(self, logs: list[LogRecord] | None) -> None:
        """:meth:`catch_up_side` for the side branches of ``logs`` (records just taken in) and
        those :meth:`expect_sides` noted (refs made if missing; the note then goes), and, once
        per process, for every branch the keyring records whose ref exists.

        Raises:
            OSError: a ref could not be written.
        """
        expected = self._expected()
        for branch in sorted({log.branch for log in logs or () if log.branch is not None} | expected):
            self.catch_up_side(branch, create=True)
        if expected or self._sides.exists():  # one that does not verify goes too
            try:
                os.unlink(self._sides)
            except FileNotFoundError:
                pass
        if not self._sides_checked:
            for branch in self.keyring.branches.recorded():
                self.catch_up_side(branch, create=False)
            self._sides_checked = True

    def catch_up_side(self, branch: bytes, *, create: bool) -> None:
        """Move side branch ``branch``'s ref (8-byte id) to the keyring's newest record of it when
        its objects are here (the keyring's MAC chain vouches for the commit id, and every reader
        of the branch authenticates the commit itself); ``create``: also make a ref that is missing
        (log records of the branch were just taken in; a branch a copied store's records name but
        whose ref was removed before the copy, a discarded one, is not made again).

        Raises:
            OSError: the ref could not be written.
        """
        mark = self.keyring.branches.mark(branch)
        if mark is None or not self.git.contains(mark.commit_id):
            return
        ref = self.git.side_branch(SIDE_PREFIX + branch.hex())
        head = ref.head()
        if head is None and not create:
            return
        if head != mark.commit_id and not ref.compare_and_swap(head, mark.commit_id):
            ref.remove_lock()
