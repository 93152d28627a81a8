"""The scrubber's cost is linear in its input, on inputs built to make it work hard.

``pin=`` repeated to 100,000 characters made the "mask this value everywhere" step build millions of
candidates (7 s and 540 MB). These tests check the *shape* of the cost, not a time: scanning ten times
more text of the same adversarial kind may cost about ten times more, never a hundred (quadratic).
Absolute figures (under 0.5 s and 50 MB for 100 KiB) are measured by ``benchmarks/bench_scrub.py``.
"""

from __future__ import annotations

import gc
import time
import tracemalloc

import pytest

from memvault.scrub import Finding, Scrubber

SMALL, LARGE = 10 * 1024, 100 * 1024
#: Ten times the input may cost this much more (linear: 10; quadratic: 100). Generous: CI is noisy.
MAX_RATIO = 30

#: Texts that hit each costly path: values overlapping hundreds deep, dense findings of every
#: kind, blocks without an end, lines without an end, characters the scrubber folds.
UNITS = [
    "pin=",
    "password=",
    "api_key='",
    "token: ",
    "secret=Ab3x",
    "1.1.1.1 ",
    "| 8.4.15.160 ",
    "a@bc.de ",
    "4539148803436467 ",
    "+1 212 555 0100 ",
    "ssn 123-45-6789 ",
    "DE89370400440532013000 ",
    "http://u:p@h ",
    "dob 1990-01-01 ",
    "-----BEGIN PRIVATE KEY-----\n",
    "Private-Lines: 1\nAAAA\n",
    "MIIEpAIBAAKCAQEA",
    "AGE-SECRET-KEY-1",
    '{"kty":"EC","d":"',
    "%40a",
    "a\u200b",
    "4111\u00a01111 ",
    "aws AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/ab ",
    "twilio 0123456789abcdef0123456789abcdef ",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc ",
    "aws_secret_access_key=",
    "SecretAccessKey: /AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/a ",
    "| 84.1.2.3 | 5.6.7.8 |\n",
    "- 4.2.1.3 and 84.1.2.3, ",
    "version 2.4.1.1 vs ",
]


def _text(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


def _seconds(scrubber: Scrubber, text: str, repeat: int, rounds: int) -> float:
    """Least time of ``rounds`` rounds of ``repeat`` scans, per scan."""
    best = float("inf")
    gc.collect()
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(repeat):
            scrubber.scan(text)
        best = min(best, (time.perf_counter() - t) / repeat)
    return best


def _peak(scrubber: Scrubber, text: str) -> int:
    tracemalloc.start()
    try:
        scrubber.scan(text)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    s = Scrubber()
    s.scan("compile the rules first")
    return s


@pytest.mark.parametrize("unit", UNITS)
def test_time_grows_linearly(scrubber: Scrubber, unit: str) -> None:
    small = _seconds(scrubber, _text(unit, SMALL), repeat=10, rounds=5)
    large = _seconds(scrubber, _text(unit, LARGE), repeat=1, rounds=3)
    ratio = large / max(small, 1e-6)
    assert ratio < MAX_RATIO, (
        f"{unit!r}: 10x the text took {ratio:.0f}x the time ({small * 1e3:.2f} ms -> {large * 1e3:.1f} ms)"
    )


@pytest.mark.parametrize("unit", UNITS)
def test_memory_grows_linearly(scrubber: Scrubber, unit: str) -> None:
    small = _peak(scrubber, _text(unit, SMALL))
    large = _peak(scrubber, _text(unit, LARGE))
    assert large < MAX_RATIO * max(small, 64 * 1024), f"{unit!r}: peak {small} -> {large} bytes"


def test_the_issues_input_is_found_and_masked(scrubber: Scrubber) -> None:
    """``pin=`` repeated is a run of assignments whose value (``pin=pin=...``) is also found at the
    text's start, as every value found is: the whole text is one finding, masked whole."""
    text = _text("pin=", LARGE)
    assert scrubber.scan(text) == [Finding("password_assignment", 0, LARGE)]
    assert scrubber.mask(text) == "[REDACTED:password_assignment]"
