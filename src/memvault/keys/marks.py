"""High-water marks in the keyring: the newest commit recorded for ``main`` and the freshness rule
that compares a branch with it (docs/format.md §8), and the records of the side branches
(``dream/<id>``, docs/format.md §3.1, §5.8): for each branch, the data keys written for it
(``BRANCH_KEYS`` records) and its own high-water mark (``BRANCH`` records). Both branch record
types are links of the keyring's MAC chain; :class:`~memvault.keys.keyring.Keyring` frames them and
hands them here, one branch commit's append at a time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .. import crypto
from ..errors import IntegrityError, RollbackDetectedError
from . import framing as fr

__all__ = ["HighWater", "BranchMarks", "freshness_problem"]

_KEYS_MAC = b"memvault/v1/branch-keys"
_BRANCH_MAC = b"memvault/v1/branch"
_BRANCH_HEAD = struct.Struct(">8sBQ20s20s")  #: a BRANCH body without its mac


@dataclass(frozen=True)
class HighWater:
    """The newest commit this store has ever recorded (on ``main``, or on one side branch):
    ``seq``, its id and its parent's (40 hex digits each)."""

    seq: int
    commit_id: bytes
    parent_id: bytes


def freshness_problem(head: bytes, seq: int, hw: HighWater, *, branch: str = "") -> IntegrityError | None:
    """What is wrong with a branch at commit ``head`` (sequence number ``seq``) given its
    high-water mark ``hw``, or None (docs/format.md §8; a side branch: §5.8).

    Args:
        branch: the side branch's name, for the message ("": ``main``).
    """
    if head == hw.commit_id:
        return None
    if seq == hw.seq - 1 and head == hw.parent_id:
        return None  # the recorded commit on top was lost (durability "none" only)
    what, its = (f"the dream branch {branch}", "its ") if branch else ("the branch", "")
    if seq < hw.seq:
        return RollbackDetectedError(
            f"Rollback detected: {what} is at commit #{seq} but this store has recorded {its}commit "
            f"#{hw.seq}. Someone reset or replaced {its or 'the '}history."
        )
    if seq == hw.seq:
        return RollbackDetectedError(f"Fork detected: {what} points at a commit this store never recorded.")
    if branch:
        return IntegrityError(f"The store's keyring is older than the dream branch {branch} (restored from a backup?).")
    return IntegrityError("The store's keyring is older than its history (restored from a backup?).")


def _damaged() -> IntegrityError:
    return IntegrityError("The store's keyring is damaged.")


@dataclass(frozen=True)
class _Recorded:
    mark: HighWater
    from_fork: bool  #: the branch's first record is its fork commit's


class BranchMarks:
    """What the keyring's branch records say, read so far: per branch (its 8-byte id, the 16 hex
    digits of ``dream/<id>``), the data keys written for it and its high-water mark. Not
    thread-safe by itself; the keyring's owner serialises."""

    def __init__(self, mac_key: bytes, store_id: bytes) -> None:
        self._mac_key = mac_key
        self._store_id = store_id
        self._recorded: dict[bytes, _Recorded] = {}
        self._keys: dict[bytes, set[bytes]] = {}

    def mark(self, branch_id: bytes) -> HighWater | None:
        """The newest commit recorded for the branch, or None (no record: a branch made by an
        earlier release or in a store of format version 1 or 2, or none at all)."""
        entry = self._recorded.get(branch_id)
        return None if entry is None else entry.mark

    def from_fork(self, branch_id: bytes) -> bool:
        """Whether the keyring recorded the branch from its fork commit on, so that
        :meth:`keys` names every data key written for it."""
        entry = self._recorded.get(branch_id)
        return entry is not None and entry.from_fork

    def keys(self, branch_id: bytes) -> frozenset[bytes]:
        """The ids of every data key recorded as written for the branch (destroyed ones too)."""
        return frozenset(self._keys.get(branch_id, ()))

    def recorded(self) -> list[bytes]:
        """The ids of the branches with a record, sorted."""
        return sorted(self._recorded)

    def apply(self, keys_bodies: list[bytes], body: bytes, chain: bytes) -> bytes:
        """Verify the BRANCH_KEYS records ``keys_bodies`` and the BRANCH record ``body`` that
        closes their append, chained from ``chain``, then take them in; return the new chain.

        Raises:
            IntegrityError: a mac does not verify, a record names another branch, or the BRANCH
                record breaks the branch's sequence (nothing is taken in).
        """
        named: set[bytes] = set()
        for keys_body in keys_bodies:
            count, rest = divmod(len(keys_body) - fr.BRANCH_ID_SIZE - 32, 16)
            if count < 1 or rest:
                raise _damaged()
            crypto.mac_verify(self._mac_key, _KEYS_MAC + self._store_id + keys_body[:-32] + chain, keys_body[-32:])
            chain = keys_body[-32:]
            ids = keys_body[fr.BRANCH_ID_SIZE : -32]
            named.update(ids[i : i + 16] for i in range(0, len(ids), 16))
        if len(body) != fr.BRANCH_BODY.size:
            raise _damaged()
        branch_id, flags, seq, raw_commit, raw_parent, tag = fr.BRANCH_BODY.unpack(body)
        crypto.mac_verify(self._mac_key, _BRANCH_MAC + self._store_id + body[:-32] + chain, tag)
        if flags & ~fr.BRANCH_FORK or any(keys_body[: fr.BRANCH_ID_SIZE] != branch_id for keys_body in keys_bodies):
            raise _damaged()
        fork = bool(flags & fr.BRANCH_FORK)
        mark = HighWater(seq, raw_commit.hex().encode(), raw_parent.hex().encode())
        known = self._recorded.get(branch_id)
        if known is None:
            entry = _Recorded(mark, fork)
        else:
            hw = known.mark
            follows = seq == hw.seq + 1 and mark.parent_id == hw.commit_id
            replaces = seq == hw.seq and mark.parent_id == hw.parent_id and mark.commit_id != hw.commit_id
            if fork or not (follows or replaces):
                raise _damaged()
            entry = _Recorded(mark, known.from_fork)
        self._recorded[branch_id] = entry
        self._keys.setdefault(branch_id, set()).update(named)
        return bytes(tag)

    def encode(
        self, branch_id: bytes, dek_ids: list[bytes], *, fork: bool, seq: int, commit_id: bytes, parent_id: bytes,
        chain: bytes,
    ) -> tuple[bytes, bytes]:  # fmt: skip
        """Encode the records of one commit of a branch, chained from ``chain``: the BRANCH_KEYS
        records naming ``dek_ids`` (none if it is empty) and the BRANCH record of the commit
        (``fork``: the branch's first). Ids are 40 hex digits. Returns ``(keys records, branch
        record)``; the commit's DEK records go between them in the same append."""
        out: list[bytes] = []
        for start in range(0, len(dek_ids), fr.MAX_BRANCH_KEYS):
            head = branch_id + b"".join(dek_ids[start : start + fr.MAX_BRANCH_KEYS])
            chain = crypto.mac(self._mac_key, _KEYS_MAC + self._store_id + head + chain)
            out.append(fr.RECORD.pack(fr.BRANCH_KEYS, len(head) + 32) + head + chain)
        flags = fr.BRANCH_FORK if fork else 0
        head = _BRANCH_HEAD.pack(
            branch_id, flags, seq, bytes.fromhex(commit_id.decode()), bytes.fromhex(parent_id.decode())
        )
        chain = crypto.mac(self._mac_key, _BRANCH_MAC + self._store_id + head + chain)
        return b"".join(out), fr.RECORD.pack(fr.BRANCH, fr.BRANCH_BODY.size) + head + chain
