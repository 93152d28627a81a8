"""The keyring's compact table of sealed data key records behaves as a dict of its records."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.keys.framing import DEK_RECORD, DEK_SIZE
from memvault.keys.sealedkeys import SealedKeys

WRAPPED = DEK_SIZE - 20


def body(dek_id: bytes, epoch: int, fill: int) -> bytes:
    return dek_id + struct.pack(">I", epoch) + bytes([fill]) * WRAPPED


def framed(*bodies: bytes) -> bytes:
    return b"".join(DEK_RECORD + b for b in bodies)


ids = st.binary(min_size=16, max_size=16)
ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put_if_absent", "pop", "settle", "force", "run", "len"]),
        st.integers(0, 39),
        st.integers(0, 255),
        st.lists(st.integers(0, 39), max_size=12),
    ),
    max_size=200,
)


@settings(max_examples=80, deadline=None)
@given(st.lists(ids, min_size=40, max_size=40, unique=True), ops)
def test_it_answers_as_a_dict_of_the_same_operations(
    pool: list[bytes], steps: list[tuple[str, int, int, list[int]]]
) -> None:
    table, model = SealedKeys(), {}
    for op, which, fill, many in steps:
        dek_id = pool[which]
        if op == "put":
            table.put(body(dek_id, fill, fill))
            model[dek_id] = body(dek_id, fill, fill)
        elif op == "put_if_absent":
            table.put_if_absent(body(dek_id, fill, fill))
            model.setdefault(dek_id, body(dek_id, fill, fill))
        elif op == "pop":
            assert table.pop(dek_id) == model.pop(dek_id, None)
        elif op == "run":  # records read as one run, an id possibly twice: the later one counts
            bodies = [body(pool[i], fill, (fill + n) % 256) for n, i in enumerate(many)]
            if bodies:
                table.put_run(framed(*bodies))
            model.update((b[:16], b) for b in bodies)
        elif op == "len":
            assert len(table) == len(model)
        else:
            table.settle(force=op == "force")
        assert table.body(dek_id) == model.get(dek_id)
    assert len(table) == len(model)
    for dek_id in pool:
        expected = model.get(dek_id)
        assert table.body(dek_id) == expected
        assert (dek_id in table) == (expected is not None)
        assert table.get(dek_id) == (None if expected is None else (expected[19], expected[20:]))


def test_a_run_is_searched_in_place_then_sorted_in_after_enough_lookups() -> None:
    table = SealedKeys()
    records = [body(i.to_bytes(16, "big")[::-1], 1, i % 251) for i in range(3000)]
    table.put_run(framed(*records))
    # An id that occurs inside a record's wrapped key, not where an id starts, is not a record.
    inner = records[5][30:46]
    assert table.body(inner) is None
    assert table.body(records[2999][:16]) == records[2999]
    for r in records[:100]:  # enough lookups to pay for the sort: still the same answers after it
        assert table.body(r[:16]) == r
    assert all(table.body(r[:16]) == r for r in records[::7])
    assert len(table) == 3000


def test_a_run_must_be_whole_data_key_records() -> None:
    record = framed(body(b"\1" * 16, 1, 1))
    for bad in (record[:-1], record + b"\0", b"\2" + record[1:]):
        with pytest.raises(ValueError):
            SealedKeys().put_run(bad)


def test_a_large_refresh_is_merged_into_one_sorted_run_and_stays_findable() -> None:
    table = SealedKeys()
    records = [body(i.to_bytes(16, "big")[::-1], 1, i % 251) for i in range(5000)]
    for r in records:
        table.put(r)
    table.settle()
    table.put(body(b"\xff" * 16, 2, 7))  # one more after the merge waits outside the sorted part
    assert len(table) == 5001
    assert all(table.body(r[:16]) == r for r in records[::97])
    assert table.get(b"\xff" * 16) == (2, bytes([7]) * WRAPPED)
    assert table.get(b"\x01" * 16) is None


def test_a_record_of_another_size_is_refused() -> None:
    with pytest.raises(ValueError):
        SealedKeys().put(b"\0" * (DEK_SIZE - 1))
