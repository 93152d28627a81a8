"""A side branch's keyring records (docs/format.md §3.1): ``BRANCH_KEYS`` and ``BRANCH`` bytes and
macs computed here from the document's formulas with the standard library only, and the reading
rules of a branch's high-water mark."""

from __future__ import annotations

import hashlib
import hmac
import struct

import pytest

from memvault.errors import IntegrityError
from memvault.keys.marks import BranchMarks, HighWater

KEY = bytes(range(32))
STORE = bytes.fromhex("00112233445566778899aabbccddeeff")
BRANCH_ID = bytes.fromhex("0123456789abcdef")
OTHER_ID = bytes.fromhex("fedcba9876543210")
PARENT = b"a" * 40
C1, C2, C3 = b"1" * 40, b"2" * 40, b"3" * 40
IDS = [bytes([i]) * 16 for i in (1, 2)]
ZERO = bytes(32)


def _mac(domain: bytes, body: bytes, prev: bytes) -> bytes:
    return hmac.digest(KEY, domain + STORE + body + prev, hashlib.sha256)


def _frame(record: bytes) -> tuple[int, bytes]:
    rtype, length = struct.unpack_from(">BH", record)
    assert len(record) == 3 + length
    return rtype, record[3:]


def _commit(marks: BranchMarks, seq: int, commit: bytes, parent: bytes, chain: bytes, *, fork: bool = False,
            ids: list[bytes] | None = None, branch: bytes = BRANCH_ID) -> tuple[list[bytes], bytes]:  # fmt: skip
    keys, record = marks.encode(branch, ids or [], fork=fork, seq=seq, commit_id=commit, parent_id=parent, chain=chain)
    bodies = []
    while keys:
        rtype, length = struct.unpack_from(">BH", keys)
        assert rtype == 9
        bodies.append(keys[3 : 3 + length])
        keys = keys[3 + length :]
    rtype, body = _frame(record)
    assert rtype == 10
    return bodies, body


def test_records_follow_the_document() -> None:
    marks = BranchMarks(KEY, STORE)
    keys, record = marks.encode(BRANCH_ID, IDS, fork=True, seq=4, commit_id=C1, parent_id=PARENT, chain=ZERO)
    rtype, body = _frame(keys)
    head = BRANCH_ID + IDS[0] + IDS[1]
    keys_mac = _mac(b"memvault/v1/branch-keys", head, ZERO)
    assert (rtype, body) == (9, head + keys_mac)
    rtype, body = _frame(record)
    head = BRANCH_ID + b"\x01" + struct.pack(">Q", 4) + bytes.fromhex(C1.decode()) + bytes.fromhex(PARENT.decode())
    assert (rtype, len(body)) == (10, 89)
    assert body == head + _mac(b"memvault/v1/branch", head, keys_mac)  # chained to the keys record


def test_a_branch_mark_follows_its_commits() -> None:
    marks = BranchMarks(KEY, STORE)
    bodies, body = _commit(marks, 4, C1, PARENT, ZERO, fork=True, ids=IDS)
    chain = marks.apply(bodies, body, ZERO)
    assert chain == body[-32:]
    assert marks.mark(BRANCH_ID) == HighWater(4, C1, PARENT)
    assert marks.from_fork(BRANCH_ID) and marks.keys(BRANCH_ID) == frozenset(IDS)
    assert marks.recorded() == [BRANCH_ID] and marks.mark(OTHER_ID) is None
    # the next commit follows the mark; one of the same seq and parent replaces it
    bodies, body = _commit(marks, 5, C2, C1, chain)
    chain = marks.apply(bodies, body, chain)
    bodies, body = _commit(marks, 5, C3, C1, chain)
    chain = marks.apply(bodies, body, chain)
    assert marks.mark(BRANCH_ID) == HighWater(5, C3, C1)
    for seq, commit, parent, fork in ((7, C1, C3, False), (6, C1, C2, False), (6, C1, C3, True), (5, C3, C1, False)):
        bodies, body = _commit(marks, seq, commit, parent, chain, fork=fork)
        with pytest.raises(IntegrityError):
            marks.apply(bodies, body, chain)
    assert marks.mark(BRANCH_ID) == HighWater(5, C3, C1)


def test_keys_of_another_branch_or_a_broken_chain_are_refused_and_nothing_taken_in() -> None:
    marks = BranchMarks(KEY, STORE)
    other_keys, _ = _commit(marks, 4, C1, PARENT, ZERO, ids=IDS, branch=OTHER_ID)
    _, body = _commit(marks, 4, C1, PARENT, other_keys[0][-32:], fork=True)
    with pytest.raises(IntegrityError):
        marks.apply(other_keys, body, ZERO)
    bodies, body = _commit(marks, 4, C1, PARENT, ZERO, fork=True, ids=IDS)
    with pytest.raises(IntegrityError):
        marks.apply(bodies, body, b"\x01" * 32)  # chained to something else
    with pytest.raises(IntegrityError):
        marks.apply([], body, ZERO)  # its keys record cut out of the file: the chain before it
    assert marks.recorded() == [] and marks.keys(BRANCH_ID) == frozenset()


def test_a_commit_with_many_keys_takes_several_keys_records() -> None:
    marks = BranchMarks(KEY, STORE)
    ids = [i.to_bytes(16, "big") for i in range(5000)]
    bodies, body = _commit(marks, 4, C1, PARENT, ZERO, fork=True, ids=ids)
    assert [(len(b) - 40) // 16 for b in bodies] == [4093, 907]
    marks.apply(bodies, body, ZERO)
    assert marks.keys(BRANCH_ID) == frozenset(ids)
