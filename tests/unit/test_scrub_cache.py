"""The cache of the scrubber's compiled Hyperscan database: a later process loads what an earlier
one compiled, and a file that is damaged, written for other patterns, or writable by someone else
is never used."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memvault.scrub import prefilter, rules
from memvault.scrub.prefilter import CACHE_FILES, Pattern, PatternSet

pytestmark = pytest.mark.skipif(not prefilter.HYPERSCAN, reason="the cache holds Hyperscan databases")

PATTERNS = [Pattern("AKIA[A-Z0-9]{4}"), Pattern("secret", caseless=True, starts=False), Pattern("[0-9]{3}-[0-9]{4}")]
OTHER = [Pattern("zzzz"), Pattern("never", starts=False), Pattern("[a-f]{3}-[a-f]{4}")]
TEXT = b"AKIAABCD and SECRET, call 555-1234 or AKIAWXYZ"
EXPECTED = sorted(PatternSet(PATTERNS, hyperscan=False).scan(TEXT))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMVAULT_NO_SCRUB_CACHE", raising=False)
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "scrub"


def _scanned(patterns: list[Pattern]) -> tuple[list[tuple[int, int]], str | None]:
    ps = PatternSet(patterns)
    return sorted(ps.scan(TEXT)), ps.source


def _only_file(directory: Path) -> Path:
    files = list(directory.glob("*.hsdb"))
    assert len(files) == 1
    return files[0]


def test_a_second_pattern_set_loads_what_the_first_compiled(cache: Path) -> None:
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    path = _only_file(cache)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert _scanned(PATTERNS) == (EXPECTED, "cache")
    assert EXPECTED != []  # (the patterns do match the text)


def test_another_process_loads_the_scrubbers_database(cache: Path) -> None:
    program = (
        "from memvault.scrub import Scrubber, rules\n"
        "probes = rules.probe_set()\n"
        "probes.grouped((b'x',))\n"
        "print(probes.source)\n"
        "print([f.kind for f in Scrubber().scan('key AKIAQWERTYUIOPASDFGH, server 8.8.8.8')])\n"
    )
    runs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert runs[0].stdout == "compiled\n['aws_access_key_id', 'ip']\n"
    assert runs[1].stdout == "cache\n['aws_access_key_id', 'ip']\n"
    assert len(list(cache.glob("*.hsdb"))) == 1


@pytest.mark.parametrize("damage", ["flip a database byte", "truncate", "flip the digest", "other magic"])
def test_a_damaged_file_is_compiled_again_and_replaced(cache: Path, damage: str) -> None:
    _scanned(PATTERNS)
    path = _only_file(cache)
    data = bytearray(path.read_bytes())
    if damage == "flip a database byte":
        data[-100] ^= 0x40
    elif damage == "truncate":
        del data[len(data) // 2 :]
    elif damage == "flip the digest":
        data[len(b"memvault hyperscan database 1\n") + 40] ^= 1
    else:
        data[0:8] = b"notours!"
    path.write_bytes(bytes(data))
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert _scanned(PATTERNS) == (EXPECTED, "cache")  # rewritten whole


def test_a_file_written_for_other_patterns_is_not_used(cache: Path) -> None:
    _scanned(OTHER)
    other = _only_file(cache)
    _scanned(PATTERNS)
    mine = next(p for p in cache.glob("*.hsdb") if p != other)
    mine.write_bytes(other.read_bytes())  # the right name, the wrong patterns inside
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")


def _plant_forged_database(cache: Path) -> Path:
    """A file that names PATTERNS' fingerprint but holds OTHER's database, with a correct digest:
    what someone who could write the cache would leave to blind the scrubber."""
    _scanned(PATTERNS)
    mine = _only_file(cache)
    data = mine.read_bytes()
    head = len(b"memvault hyperscan database 1\n") + 32
    mine.unlink()
    _scanned(OTHER)
    theirs = _only_file(cache)
    forged = theirs.read_bytes()
    theirs.unlink()
    mine.write_bytes(data[:head] + forged[head:])
    return mine


def test_a_forged_database_in_a_trusted_cache_is_loaded(cache: Path) -> None:
    # The control for the two tests below: what the trust checks are for.
    _plant_forged_database(cache)
    found, source = _scanned(PATTERNS)
    assert source == "cache" and found != EXPECTED


def test_a_cache_directory_others_can_write_is_not_used(cache: Path) -> None:
    path = _plant_forged_database(cache)
    forged = path.read_bytes()
    os.chmod(cache, 0o777)
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert path.read_bytes() == forged  # nor written to


def test_a_cache_file_others_can_write_is_not_used(cache: Path) -> None:
    path = _plant_forged_database(cache)
    os.chmod(path, 0o666)
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # replaced by the compiled one


def test_a_symlinked_cache_file_is_not_followed(cache: Path, tmp_path: Path) -> None:
    _scanned(PATTERNS)
    path = _only_file(cache)
    real = tmp_path / "elsewhere.hsdb"
    real.write_bytes(path.read_bytes())
    real.chmod(0o600)
    path.unlink()
    path.symlink_to(real)
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")


def test_a_symlinked_cache_directory_is_not_followed(cache: Path, tmp_path: Path) -> None:
    _scanned(PATTERNS)
    real = tmp_path / "real-scrub"
    cache.rename(real)
    real.chmod(0o700)
    cache.symlink_to(real)
    before = sorted(p.name for p in real.iterdir())
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert sorted(p.name for p in real.iterdir()) == before  # nor written through


def test_a_cache_file_with_another_name_is_not_used(cache: Path, tmp_path: Path) -> None:
    path = _plant_forged_database(cache)
    os.link(path, tmp_path / "elsewhere.hsdb")  # the same file under a second name
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_cache_file_of_another_user_is_not_used(cache: Path) -> None:
    path = _plant_forged_database(cache)
    os.chown(path, 65534, 65534)
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can write under another user's directory")
def test_root_makes_no_cache_directory_in_another_users_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMVAULT_NO_SCRUB_CACHE", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 65534, 65534)
    monkeypatch.delenv("MEMVAULT_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert list(home.iterdir()) == []


def test_no_cache_when_turned_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_NO_SCRUB_CACHE", "1")
    assert prefilter.cache_dir() is None
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert not cache.exists()


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMVAULT_NO_SCRUB_CACHE", raising=False)
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "file" / "cache"))
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")
    assert _scanned(PATTERNS) == (EXPECTED, "compiled")


def test_the_cache_keeps_a_bounded_number_of_databases(cache: Path) -> None:
    for i in range(CACHE_FILES + 3):
        assert _scanned([*PATTERNS, Pattern(f"marker{i:02d}")])[1] == "compiled"
    assert len(list(cache.glob("*.hsdb"))) == CACHE_FILES


def test_the_scrubber_finds_the_same_with_a_cached_database(cache: Path) -> None:
    text = "aws key AKIAQWERTYUIOPASDFGH; card 4111 1111 1111 1111 paid; mail jo@corp.de, host 8.8.8.8"
    fresh = rules.probe_set()
    cached = rules.probe_set()
    projected = (text.encode("ascii"),)
    expected = {group: sorted(offsets) for group, offsets in fresh.grouped(projected).items()}
    assert len(expected) >= 5 and fresh.source == "compiled"
    assert {group: sorted(offsets) for group, offsets in cached.grouped(projected).items()} == expected
    assert cached.source == "cache"
