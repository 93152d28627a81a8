"""The host state's place and its anchor record, without a store (docs/format.md §14)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memvault import crypto, hoststate
from memvault.errors import IntegrityError, RollbackDetectedError, StorageError

STORE = bytes(range(16))
KEY = bytes(32)


def _commit(n: int) -> bytes:
    return f"{n:040x}".encode()


@pytest.mark.parametrize(
    ("value", "xdg", "expected"),
    [
        ("/x/state", None, "/x/state"),
        ("", "/xdg", "/xdg/memvault"),
        (None, None, "~/.local/state/memvault"),
        ("off", "/xdg", None),
        ("OFF", None, None),
    ],
)
def test_where_the_host_state_is(monkeypatch, value: str | None, xdg: str | None, expected: str | None) -> None:
    for name, set_to in (("MEMVAULT_ANCHOR_DIR", value), ("XDG_STATE_HOME", xdg)):
        if set_to is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, set_to)
    got = hoststate.state_dir()
    assert got == (None if expected is None else Path(os.path.expanduser(expected)))


def _anchor(tmp_path: Path, lineage: dict[bytes, tuple[int, bytes]] | None = None) -> hoststate.Anchor:
    return hoststate.Anchor(tmp_path / "anchor", KEY, STORE, lambda: lineage or {})


def test_the_anchor_moves_only_forward_and_only_to_published_commits(tmp_path: Path) -> None:
    anchor = _anchor(tmp_path)
    assert anchor.read() is None
    anchor.observe(3, _commit(3), _commit(2), published=False)  # recorded, not published: no move
    assert anchor.read() is None
    anchor.observe(3, _commit(3), _commit(2), published=True)
    assert anchor.read() == (3, _commit(3))
    anchor.observe(4, _commit(4), _commit(3), published=True)
    assert anchor.read() == (4, _commit(4))
    data = (tmp_path / "anchor").read_bytes()
    assert len(data) == 69 and data[:9] == b"MVANCHOR\x01"
    mac = crypto.mac(KEY, b"memvault/v1/anchor" + STORE + (4).to_bytes(8, "big") + bytes.fromhex(_commit(4).decode()))
    assert data[-32:] == mac  # the record as format.md §14.2 states it


def test_behind_or_beside_the_anchor_is_refused(tmp_path: Path) -> None:
    anchor = _anchor(tmp_path)
    anchor.observe(5, _commit(5), _commit(4), published=True)
    with pytest.raises(RollbackDetectedError, match="saw commit #5 .* newest commit is #4"):
        anchor.observe(4, _commit(4), _commit(3), published=True)
    with pytest.raises(RollbackDetectedError, match="Fork detected"):
        anchor.observe(5, b"f" * 40, _commit(4), published=True)
    with pytest.raises(RollbackDetectedError, match="Fork detected"):
        anchor.observe(6, _commit(6), b"e" * 40, published=True)  # next, but not on top of #5
    assert anchor.read() == (5, _commit(5))


def test_far_ahead_is_checked_against_the_keyrings_records(tmp_path: Path) -> None:
    _anchor(tmp_path).observe(5, _commit(5), _commit(4), published=True)
    stranger = _anchor(tmp_path, {_commit(9): (5, _commit(4))})  # another commit #5 in the keyring
    with pytest.raises(RollbackDetectedError, match="no longer holds commit #5"):
        stranger.observe(9, _commit(9), _commit(8), published=True)
    same = _anchor(tmp_path, {_commit(5): (5, _commit(4))})
    same.observe(9, _commit(9), _commit(8), published=True)
    assert same.read() == (9, _commit(9))


def test_a_damaged_or_foreign_anchor_is_an_integrity_error(tmp_path: Path) -> None:
    anchor = _anchor(tmp_path)
    anchor.observe(1, _commit(1), _commit(0), published=True)
    other = hoststate.Anchor(tmp_path / "anchor", KEY, bytes(16), lambda: {})
    with pytest.raises(IntegrityError, match="does not verify"):
        other.read()
    (tmp_path / "anchor").write_bytes(b"MVANCHOR")
    with pytest.raises(IntegrityError, match="damaged"):
        anchor.read()


def test_an_anchor_with_another_name_is_not_trusted(tmp_path: Path) -> None:
    anchor = _anchor(tmp_path)
    anchor.observe(1, _commit(1), _commit(0), published=True)
    os.link(tmp_path / "anchor", tmp_path / "second-name")
    with pytest.raises(StorageError, match="not a file of this user's alone"):
        anchor.read()


def test_a_read_only_anchor_is_still_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    anchor = _anchor(tmp_path)
    anchor.observe(2, _commit(2), _commit(1), published=True)
    real_open = os.open

    def read_only_fs(path, flags, *args):  # type: ignore[no-untyped-def]
        if flags & (os.O_RDWR | os.O_WRONLY):
            raise OSError(30, "Read-only file system")
        return real_open(path, flags, *args)

    anchor.close()
    monkeypatch.setattr(hoststate.os, "open", read_only_fs)
    later = _anchor(tmp_path)  # another process, on a host state that went read-only
    with pytest.raises(RollbackDetectedError):
        later.observe(1, _commit(1), _commit(0), published=True)
    later.observe(3, _commit(3), _commit(2), published=True)  # ahead: fine, though not moved
    monkeypatch.undo()
    assert anchor.read() == (2, _commit(2))


def test_an_anchor_removed_by_reset_is_made_again_not_written_to_the_removed_file(tmp_path: Path) -> None:
    anchor = _anchor(tmp_path)
    anchor.observe(5, _commit(5), _commit(4), published=True)
    (tmp_path / "anchor").unlink()  # `memvault anchor reset` while a store object is open
    anchor.observe(2, _commit(2), _commit(1), published=True)  # the store as it is now
    assert _anchor(tmp_path).read() == (2, _commit(2))


def test_host_state_is_refused_when_others_could_change_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", str(tmp_path / "state"))
    assert hoststate.host_state() == tmp_path / "state"
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    os.chmod(tmp_path / "state", 0o770)
    with pytest.raises(StorageError):
        hoststate.host_state()
    os.chmod(tmp_path / "state", 0o700)
    (tmp_path / "link").symlink_to(tmp_path / "state")
    monkeypatch.setenv("MEMVAULT_ANCHOR_DIR", str(tmp_path / "link"))
    with pytest.raises(StorageError):
        hoststate.host_state()
