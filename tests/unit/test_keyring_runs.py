"""A keyring read takes a long row of data key records in as one run (searched in place, sorted in
later) instead of one record at a time; what it then answers is what the record-by-record read
answers: every key, no destroyed key (also one whose record was copied back inside a run), the
newest epoch, the high-water mark and where a torn tail starts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memvault.errors import IntegrityError
from memvault.keys import keyring as keyring_mod
from memvault.keys.framing import DEK_HEAD, DEK_RECORD, DEK_RECORD_SIZE, DEK_SIZE, dek_run, newest_dek_epoch
from memvault.keys.keyring import ZERO_ID, Keyring
from memvault.keys.sealedkeys import SealedKeys

STORE_ID = bytes(range(16))
WRAP = {1: os.urandom(32), 2: os.urandom(32)}
MAC_KEY = os.urandom(32)
TOMBSTONE_KEY = os.urandom(32)


def _ring(path: Path) -> Keyring:
    return Keyring(path, STORE_ID, dict(WRAP), MAC_KEY, tombstone_key=TOMBSTONE_KEY)


def _cid(n: int) -> bytes:
    return f"{n:040x}".encode()


def _deks(writer: Keyring, keys: dict[bytes, bytes], count: int, epoch: int) -> bytes:
    out = []
    for _ in range(count):
        dek_id, dek = os.urandom(16), os.urandom(32)
        keys[dek_id] = dek
        out.append(writer.dek_record(dek_id, dek, epoch))
    return b"".join(out)


def _build(path: Path) -> tuple[dict[bytes, bytes], bytes, int]:
    """A keyring of three commits: 600 keys, one destroyed by the second commit and its record
    copied back in the middle of the third commit's run (epoch 2 there), then a torn record.
    Returns the live keys, the destroyed id and the length of the whole records."""
    Keyring.create(path, STORE_ID, durable=False)
    writer = _ring(path)
    writer.refresh()
    keys: dict[bytes, bytes] = {}
    writer.append(_deks(writer, keys, 300, 1) + writer.commit_record(1, _cid(1), ZERO_ID), durable=False)
    victim = sorted(keys)[150]
    copy_back = writer.dek_record(victim, keys.pop(victim), 1)
    chained, prev = writer.chained_records({victim: {"actor": "t", "reason": "r", "time": 1.0}}, None)
    writer.append(chained + writer.commit_record(2, _cid(2), _cid(1), prev=prev), durable=False)
    run = _deks(writer, keys, 150, 1) + copy_back + _deks(writer, keys, 150, 2)
    writer.append(run + writer.commit_record(3, _cid(3), _cid(2)), durable=False)
    whole = path.stat().st_size
    with open(path, "ab") as f:
        f.write(writer.dek_record(os.urandom(16), os.urandom(32), 1)[: DEK_RECORD_SIZE // 2])
    return keys, victim, whole


@pytest.mark.parametrize("runs", [True, False], ids=["as-runs", "record-by-record"])
def test_a_read_in_runs_answers_as_a_read_record_by_record(
    runs: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keyring"
    keys, victim, whole = _build(path)
    taken: list[int] = []
    real_put_run = SealedKeys.put_run

    def spy(self: SealedKeys, run: bytes) -> None:
        taken.append(len(run) // DEK_RECORD_SIZE)
        real_put_run(self, run)

    monkeypatch.setattr(SealedKeys, "put_run", spy)
    if not runs:
        monkeypatch.setattr(keyring_mod, "_RUN_RECORDS", 10**9)
    reader = _ring(path)
    reader.refresh()
    # The first commit's 300 records are one run; the third's 301 are cut around the copied-back
    # record of the destroyed key (150 before, 150 after); none when runs are off.
    assert taken == ([300, 150, 150] if runs else [])
    assert reader.size == whole  # the torn record after the last commit is left unread
    assert reader.high_water is not None and (reader.high_water.seq, reader.high_water.commit_id) == (3, _cid(3))
    assert reader.newest_epoch == 2
    assert not reader.has(victim) and reader.is_destroyed(victim)
    with pytest.raises(IntegrityError):
        reader.dek(victim)
    assert len(keys) == 599
    assert all(reader.dek(dek_id) == dek for dek_id, dek in keys.items())  # past the sort, too


def test_a_damaged_record_inside_a_long_row_still_fails_the_read(tmp_path: Path) -> None:
    path = tmp_path / "keyring"
    _build(path)
    data = bytearray(path.read_bytes())
    at = 21 + 100 * DEK_RECORD_SIZE + 2  # the low length byte of the 101st record
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    reader = _ring(path)
    with pytest.raises(IntegrityError):
        reader.refresh()


@pytest.mark.parametrize(
    "epochs, newest",
    [([1, 3, 2], 3), ([255, 256, 7], 256), ([0x01000000, 0x00FFFFFF, 5], 0x01000000), ([0x0102, 0x0201], 0x0201)],
)
def test_the_newest_epoch_of_a_row_is_its_largest(epochs: list[int], newest: int) -> None:
    row = b"".join(DEK_RECORD + DEK_HEAD.pack(os.urandom(16), e) + bytes(DEK_SIZE - DEK_HEAD.size) for e in epochs)
    assert dek_run(row, 0) == len(epochs)
    assert newest_dek_epoch(row) == newest
    assert newest_dek_epoch(b"") == 0


def test_a_row_is_measured_up_to_the_first_record_that_is_not_a_whole_data_key_record() -> None:
    record = DEK_RECORD + bytes(DEK_SIZE)
    assert dek_run(record * 300 + b"\x05" + record[1:] + record, 0) == 300
    assert dek_run(record * 300 + record[:-1], 0) == 300  # a torn last record is not counted
    assert dek_run(record * 255, 0, at_least=256) == 0
    assert dek_run(record * 256, 0, at_least=256) == 256
    assert dek_run(record * 1000, 83 * 10) == 990


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_forked_child_closes_files_soon_without_its_parents_thread(tmp_path: Path) -> None:
    """fsutil.close_soon (how dropped packs close) works in a forked child too: the child has no
    copy of the parent's closing thread, so it starts its own."""
    from memvault.fsutil import close_soon

    close_soon(os.open(tmp_path, os.O_RDONLY))  # the parent's thread exists now
    marker = tmp_path / "child-closed"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        fd = os.open(tmp_path, os.O_RDONLY)
        close_soon(fd)
        for _ in range(200):
            try:
                os.fstat(fd)
            except OSError:
                marker.write_text("ok")
                os._exit(0)
            time.sleep(0.01)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and marker.read_text() == "ok"
