"""The access-time file: sealed, merged across sessions, bounded, and strict when read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memvault import crypto
from memvault.errors import IntegrityError
from memvault.store import atimes as access
from memvault.store.atimes import RESOLUTION, AccessTimes

KEY = bytes(range(32))
STORE = b"S" * 16
T0 = 1_800_000_000.0  # a fixed time, on an hour boundary or not: only hours are kept


def tok(i: int) -> bytes:
    return crypto.sha256(f"token {i}".encode())


def times(path: Path, store_id: bytes = STORE) -> AccessTimes:
    return AccessTimes(path, KEY, store_id)


def test_reads_survive_a_flush_at_hour_resolution(tmp_path: Path) -> None:
    a = times(tmp_path / "access")
    a.touch(tok(1), T0)
    a.touch(tok(1), T0 + 5)  # same hour: no change
    a.touch(tok(2), T0 + 2 * RESOLUTION)
    assert a.dirty
    a.flush()
    assert not a.dirty
    got = times(tmp_path / "access").last_read()
    assert got == {tok(1): (T0 // RESOLUTION) * RESOLUTION, tok(2): ((T0 // RESOLUTION) + 2) * RESOLUTION}


def test_sessions_merge_to_the_latest_read(tmp_path: Path) -> None:
    a, b = times(tmp_path / "access"), times(tmp_path / "access")
    a.touch(tok(1), T0 + 10 * RESOLUTION)
    a.touch(tok(2), T0)
    b.touch(tok(1), T0)  # older than a's
    b.touch(tok(3), T0 + RESOLUTION)
    a.flush()
    b.flush()  # must not overwrite a's later read of tok(1)
    got = times(tmp_path / "access").last_read()
    assert set(got) == {tok(1), tok(2), tok(3)}
    assert got[tok(1)] == ((T0 // RESOLUTION) + 10) * RESOLUTION


def test_flush_drops_files_that_are_gone(tmp_path: Path) -> None:
    a = times(tmp_path / "access")
    for i in range(4):
        a.touch(tok(i), T0)
    a.flush(live={tok(0), tok(2)})
    assert set(times(tmp_path / "access").last_read()) == {tok(0), tok(2)}


def test_file_is_sealed_padded_and_private(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        a = times(tmp_path / "access")
        a.touch(tok(1), T0)
        a.flush()
    finally:
        os.umask(old)
    raw = (tmp_path / "access").read_bytes()
    assert tok(1) not in raw and access.MAGIC not in raw
    assert (tmp_path / "access").stat().st_mode & 0o777 == 0o600
    sizes = set()
    for n in (2, 3, 4):
        b = times(tmp_path / f"access{n}")
        for i in range(n):
            b.touch(tok(i), T0)
        b.flush()
        sizes.add((tmp_path / f"access{n}").stat().st_size)
    assert len(sizes) == 1  # a few entries more or less: same padded size


@pytest.mark.parametrize(
    "damage",
    ["flip", "truncate", "other_store", "not_magic", "count_too_big", "huge_file"],
)
def test_damaged_file_is_refused_and_replaced_on_flush(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "access"
    a = times(path)
    a.touch(tok(1), T0)
    a.flush()
    raw = path.read_bytes()
    if damage == "flip":
        path.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    elif damage == "truncate":
        path.write_bytes(raw[:10])
    elif damage == "other_store":
        path.write_bytes(access.encode(KEY, b"T" * 16, {tok(1): 5}))
    elif damage == "not_magic":
        path.write_bytes(crypto.seal(KEY, crypto.pad(b"XXXX" + bytes(40)), access._aad(STORE)))
    elif damage == "count_too_big":
        body = access.MAGIC + (10**6).to_bytes(4, "big") + bytes(36)
        path.write_bytes(crypto.seal(KEY, crypto.pad(body), access._aad(STORE)))
    else:
        with open(path, "wb") as f:
            f.truncate(access._MAX_FILE_BYTES + 1)
    with pytest.raises(IntegrityError) as info:
        times(path).last_read()
    assert "access-time file" in str(info.value)
    b = times(path)
    b.touch(tok(7), T0)
    b.flush()  # advisory: the damaged file gives way to this session's reads
    assert times(path).last_read() == {tok(7): (T0 // RESOLUTION) * RESOLUTION}


def test_due_only_with_pending_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = times(tmp_path / "access")
    assert not a.due()
    a.touch(tok(1), T0)
    assert not a.due()  # flushed "now" at creation
    monkeypatch.setattr(access, "FLUSH_SECONDS", 0.0)
    assert a.due()


def test_tokens_must_be_32_bytes(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        access.encode(KEY, STORE, {b"short": 1})
