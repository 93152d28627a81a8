"""tests/needs.py: a test that needs something the machine lacks is skipped with its reason where
nothing requires it (the README's test command on a fresh machine), and fails where
``MEMVAULT_TEST_REQUIRE`` lists it (CI); a name no test knows is a usage error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
REASON = "needs SoftHSM2, a PKCS#11 module (apt-get install softhsm2; brew install softhsm)"


def _pytest(cwd: Path, *args: str, require: str | None = None, path: str | None = None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMVAULT_TEST_REQUIRE"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])])
    if require is not None:
        env["MEMVAULT_TEST_REQUIRE"] = require
    if path is not None:
        env["PATH"] = path
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def lacking(tmp_path: Path) -> Path:
    """A test file whose fixture finds SoftHSM2 missing."""
    (tmp_path / "test_lacking.py").write_text(
        "import pytest, needs\n"
        "@pytest.fixture(scope='session')\n"
        "def module():\n"
        "    needs.missing('softhsm')\n"
        "def test_one(module): pass\n"
        "def test_two(module): pass\n"
        "def test_other(): pass\n"
    )
    return tmp_path


def test_missing_skips_with_its_reason_shown(lacking: Path) -> None:
    status, out = _pytest(lacking, "-p", "needs", "-q", "test_lacking.py")
    assert status == 0, out
    assert "1 passed, 2 skipped" in out
    assert f"2 skipped: {REASON}; set MEMVAULT_TEST_REQUIRE=softhsm to fail instead of skipping" in out


@pytest.mark.parametrize("require", ["softhsm", "softhsm,", " other , softhsm "])
def test_missing_fails_where_required(lacking: Path, require: str) -> None:
    other = "other" in require
    args = ["-p", "needs", "-q", "test_lacking.py"]
    if other:  # a second known name, as a later browser test adds one
        (lacking / "conftest.py").write_text("import needs\nneeds.NEEDS['other'] = 'another thing'\n")
    status, out = _pytest(lacking, *args, require=require)
    assert status == 1, out
    assert "1 passed, 2 errors" in out
    assert "SoftHSM2, a PKCS#11 module (apt-get install softhsm2; brew install softhsm) was not found" in out
    assert "MEMVAULT_TEST_REQUIRE requires it" in out


def test_a_name_no_test_knows_is_a_usage_error(lacking: Path) -> None:
    status, out = _pytest(lacking, "-p", "needs", "-q", "test_lacking.py", require="softhsm2")
    assert status == 4, out
    assert "MEMVAULT_TEST_REQUIRE names softhsm2, which no test needs (known: chromium, opensc, softhsm)" in out


def test_the_hsm_tests_skip_without_softhsm_and_fail_where_required() -> None:
    """The real suite's PKCS#11 tests on a machine without SoftHSM2 (``softhsm2-util`` not on the
    PATH): skipped by the README's command, an error in CI."""
    args = ("tests/integration/test_hsm.py", "-k", "wrap_and_unwrap")  # -q: the project's addopts
    bare = os.path.dirname(sys.executable)  # python, and no softhsm2-util
    status, out = _pytest(TESTS.parent, *args, path=bare)
    assert status == 0 and "1 skipped, 3 deselected" in out and f"1 skipped: {REASON}" in out, out
    status, out = _pytest(TESTS.parent, *args, path=bare, require="softhsm")
    assert status == 1 and "3 deselected, 1 error" in out and "MEMVAULT_TEST_REQUIRE requires it" in out, out
