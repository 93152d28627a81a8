"""The keyring's compact table of sealed data key records behaves as a dict of its records."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.keys.framing import DEK_SIZE
from memvault.keys.sealedkeys import SealedKeys

WRAPPED = DEK_SIZE - 20


def body(dek_id: bytes, epoch: int, fill: int) -> bytes:
    return dek_id + struct.pack(">I", epoch) + bytes([fill]) * WRAPPED


ids = st.binary(min_size=16, max_size=16)
ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put_if_absent", "pop", "settle", "force"]), st.integers(0, 39), st.integers(0, 255)
    ),  # fmt: skip
    max_size=300,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(ids, min_size=40, max_size=40, unique=True), ops)
def test_it_answers_as_a_dict_of_the_same_operations(pool: list[bytes], steps: list[tuple[str, int, int]]) -> None:
    table, model = SealedKeys(), {}
    for op, which, fill in steps:
        dek_id = pool[which]
        if op == "put":
            table.put(body(dek_id, fill, fill))
            model[dek_id] = body(dek_id, fill, fill)
        elif op == "put_if_absent":
            table.put_if_absent(body(dek_id, fill, fill))
            model.setdefault(dek_id, body(dek_id, fill, fill))
        elif op == "pop":
            assert table.pop(dek_id) == model.pop(dek_id, None)
        else:
            table.settle(force=op == "force")
        assert len(table) == len(model)
    for dek_id in pool:
        expected = model.get(dek_id)
        assert table.body(dek_id) == expected
        assert (dek_id in table) == (expected is not None)
        assert table.get(dek_id) == (None if expected is None else (expected[19], expected[20:]))


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
