"""Tests that need something outside Python the machine may lack (a PKCS#11 module, later a browser):
skipped where it is missing, with the reason and how to install it, unless it is required.

``MEMVAULT_TEST_REQUIRE`` names what is required, comma-separated (``.ci/run`` sets it, so CI
fails instead of skipping): ``MEMVAULT_TEST_REQUIRE=softhsm``. A name this module does not know is
a usage error, so that a misspelling cannot turn a requirement off. The README's test command, on a
machine without them, passes with those tests skipped and a closing line saying what was skipped.

Usage (a pytest plugin: ``tests/conftest.py`` loads it): add the name to :data:`NEEDS` with what it
is and how to install it, have ``.ci/run`` install it and list it in ``MEMVAULT_TEST_REQUIRE``, and::

    @pytest.fixture(scope="session")
    def browser():
        path = shutil.which("chromium")
        if path is None:
            needs.missing("chromium")  # skips, or fails where required
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: The environment variable naming what is required.
ENV = "MEMVAULT_TEST_REQUIRE"

#: Everything a test may need: name -> what it is and how to install it.
NEEDS = {
    "softhsm": "SoftHSM2, a PKCS#11 module (apt-get install softhsm2; brew install softhsm)",
    "opensc": "OpenSC's pkcs11-tool (apt-get install opensc; brew install opensc)",
    "chromium": "Chromium and the Python package playwright, for the review UI's browser tests "
    "(apt-get install chromium chromium-driver; pip install 'memvault[test]')",
}


def _reason(name: str) -> str:
    return f"needs {NEEDS[name]}; set {ENV}={name} to fail instead of skipping"


def required() -> set[str]:
    """The names ``MEMVAULT_TEST_REQUIRE`` lists."""
    return {name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip()}


def missing(name: str) -> NoReturn:
    """Say that ``name`` (a key of :data:`NEEDS`) is not on this machine: skip the test (or every
    test of a fixture that calls this), or fail it where ``MEMVAULT_TEST_REQUIRE`` lists ``name``."""
    what = NEEDS[name]
    if name in required():
        pytest.fail(f"{what} was not found, and {ENV} requires it ({ENV}={os.environ[ENV]})", pytrace=False)
    pytest.skip(_reason(name))


def pytest_configure(config: pytest.Config) -> None:
    unknown = sorted(required() - NEEDS.keys())
    if unknown:
        known = ", ".join(sorted(NEEDS))
        raise pytest.UsageError(f"{ENV} names {', '.join(unknown)}, which no test needs (known: {known})")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per thing missing: how many tests it skipped, and why (pytest -q shows skips
    as an ``s`` only)."""
    reasons = [str(getattr(report, "longrepr", "")) for report in terminalreporter.stats.get("skipped", [])]
    for name in sorted(NEEDS):
        count = sum(_reason(name) in reason for reason in reasons)
        if count:
            terminalreporter.write_line(f"{count} skipped: {_reason(name)}", yellow=True)
