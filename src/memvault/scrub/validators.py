"""Pure checks of candidate values: entropy, checksums (Luhn, IBAN, GitHub's CRC32, a JWT's
header), placeholders and character classes.

:func:`occurrences` (every occurrence of many values in one pass) lives here too: this is the one
module of the package that imports ``ahocorasick``, which the placeholder words also use.
"""

from __future__ import annotations

import base64
import binascii
import collections
import functools
import json
import math
import re
import string
import zlib
from collections.abc import Callable, Collection, Iterator
from typing import Any, Final

#: Aho-Corasick automaton (``pyahocorasick``): finds every occurrence of many values in one pass.
_aho: Any
try:
    import ahocorasick as _aho_module  # type: ignore[import-untyped,import-not-found,unused-ignore]

    _aho = _aho_module
except ImportError:  # pragma: no cover - a dependency; str.find and a regex give the same answers
    _aho = None
#: With at least this many distinct values, one automaton pass beats one ``str.find`` pass per value.
_AHO_MIN_VALUES: Final = 8

__all__ = [
    "shannon_entropy",
    "entropy_at_least",
    "luhn_valid",
    "iban_valid",
    "github_checksum_valid",
    "jwt_valid",
    "is_placeholder",
    "char_classes",
    "random_looking",
    "AWS_EXAMPLES",
    "occurrences",
]


# -- validators ----------------------------------------------------------------------------------


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value`` (0.0 for an empty string)."""
    n = len(value)
    if not n:
        return 0.0
    counts: dict[str, int] = {}
    _count_elements(counts, value)  # in order of first occurrence, as Counter(value)
    if n > _TERM_TABLES_MAX:
        return -sum([c / n * math.log2(c / n) for c in counts.values()])
    return -sum(map(_entropy_terms(n).__getitem__, counts.values()))


_TERM_TABLES_MAX: Final = 1024


def entropy_at_least(value: str, bits: float) -> bool:
    """``shannon_entropy(value) >= bits``, most often decided without counting characters.

    With ``n`` characters of which ``d`` are distinct, the entropy is at most ``log2(d)`` (all equally
    frequent) and at least that of one character taking ``n - d + 1`` places and the others one each
    (that split majorizes every other; entropy is Schur-concave). Only values between the two
    bounds (widened by a margin far above float rounding) are counted."""
    n = len(value)
    if n == 0:
        return bits <= 0.0
    d = len(set(value))
    low, high = _entropy_bounds(n, d)
    if high < bits - 1e-9:
        return False
    if low > bits + 1e-9:
        return True
    return shannon_entropy(value) >= bits


@functools.lru_cache(maxsize=4096)
def _entropy_bounds(n: int, d: int) -> tuple[float, float]:
    """Least and greatest entropy of ``n`` characters of which ``d`` are distinct."""
    big = n - d + 1
    return -(big / n * math.log2(big / n) + (d - 1) / n * math.log2(1 / n)), math.log2(d)


@functools.lru_cache(maxsize=256)
def _entropy_terms(n: int) -> list[float]:
    """``c / n * log2(c / n)`` for every count ``c`` from 0 to ``n`` (the terms of the entropy)."""
    return [0.0] + [c / n * math.log2(c / n) for c in range(1, n + 1)]


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check over a string of ASCII digits."""
    if not digits.isdigit() or not digits.isascii():
        return False
    odd, even = digits[-1::-2].encode(), digits[-2::-2].encode().translate(_LUHN_DOUBLE)
    return (sum(odd) + sum(even) - 48 * len(digits)) % 10 == 0


#: Each ASCII digit to the digit of its Luhn doubling (2d, less 9 above 9).
_LUHN_DOUBLE: Final = bytes.maketrans(b"0123456789", b"0246813579")


#: ``_count_elements(mapping, iterable)``: the counting loop of ``Counter`` (in C in CPython).
_count_elements: Callable[[dict[str, int], str], None] = getattr(
    collections, "_count_elements", lambda mapping, it: mapping.update(collections.Counter(it))
)


#: Length of an IBAN per country (SWIFT IBAN registry).
_IBAN_LENGTHS: Final[dict[str, int]] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def iban_valid(value: str) -> bool:
    """Country length and ISO 7064 mod-97 check of an IBAN (spaces ignored)."""
    compact = value.replace(" ", "").upper()
    if not compact.isascii() or not compact.isalnum() or len(compact) < 15:
        return False
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


_B62: Final[str] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def github_checksum_valid(token: str) -> bool:
    """Whether a classic GitHub token (``ghp_`` + 30 random + 6 base62 CRC32) has its checksum."""
    if len(token) != 40 or token[3] != "_":
        return False
    body, check = token[4:34], token[34:]
    n = zlib.crc32(body.encode("ascii", "replace"))
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = _B62[r] + out
    return out.rjust(6, "0") == check


def jwt_valid(value: str) -> bool:
    """Three dot-separated base64url parts whose header decodes to a JSON object with ``alg``."""
    parts = value.split(".")
    if len(parts) != 3:
        return False
    head = parts[0]
    try:
        raw = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
        obj = json.loads(raw)
    except (ValueError, binascii.Error):
        return False
    return isinstance(obj, dict) and "alg" in obj


# -- placeholders --------------------------------------------------------------------------------

_PLACEHOLDER_WORDS: Final[tuple[str, ...]] = (
    "xxxx", "****", "...", "\u2026", "<", ">", "your", "example", "placeholder", "redacted", "changeme",
    "change_me", "change-me", "dummy", "replace", "insert", "fixme", "${", "{{", "%(", "$(", "getenv",
    "environ", "process.env", "env[", "env(", "env.", "secrets.", "vault:", "sample", "notreal", "not_real",
    "here", "[", "...", "0123456789", "123456789", "abcdefgh", "qwerty12", "########", "••",
)  # fmt: skip
#: Any of ``_PLACEHOLDER_WORDS``: one Aho-Corasick pass (``pyahocorasick``; about twice as fast as
#: this regex, which tries every word at every position), or the regex without it.
_PLACEHOLDER_RE: Final = re.compile("|".join(re.escape(w) for w in _PLACEHOLDER_WORDS))


@functools.cache
def _placeholder_automaton() -> Any:
    automaton = _aho.Automaton()
    for word in _PLACEHOLDER_WORDS:
        automaton.add_word(word, None)
    automaton.make_automaton()
    return automaton


#: Whole values that mean "no value": checked case-insensitively after stripping quotes.
_NON_VALUES: Final[frozenset[str]] = frozenset(
    {
        "", "none", "null", "nil", "true", "false", "empty", "required", "optional", "string", "str", "bytes",
        "hidden", "masked", "redacted", "n/a", "na", "tbd", "todo", "unset", "undefined", "yes", "no", "on", "off",
        "env", "password", "passwd", "pass", "secret", "token", "apikey", "api_key", "key", "value", "test",
        "mysecret", "mypassword", "secretpassword", "supersecret", "foo", "bar", "foobar", "admin", "root",
        "default", "random", "generated", "auto", "prompt", "ask", "stdin", "-", "--", "?", "see", "set",
    }
)  # fmt: skip
AWS_EXAMPLES: Final[frozenset[str]] = frozenset(
    {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AKIAI44QH8DHBEXAMPLE",
     "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"}
)  # fmt: skip


def is_placeholder(value: str) -> bool:
    """A documented placeholder, a masked value, a variable reference or an obviously fake value."""
    v = value.strip().strip("'\"`")
    low = v.lower()
    if low in _NON_VALUES or v in AWS_EXAMPLES or v.startswith(("$", "%", "@", "&", "*")):
        return True
    if _aho is None:
        if _PLACEHOLDER_RE.search(low) is not None:
            return True
    elif next(_placeholder_automaton().iter(low), None) is not None:
        return True
    return len(v) >= 6 and len(set(low)) <= 3


_ASCII_LOWER: Final = frozenset(string.ascii_lowercase)
_ASCII_UPPER: Final = frozenset(string.ascii_uppercase)
_ASCII_DIGITS: Final = frozenset(string.digits)


def char_classes(value: str) -> int:
    """How many of lower case, upper case, digits and other characters ``value`` holds (0-4)."""
    if value.isascii():  # same answer as below, from set tests that run in C
        return (
            (not _ASCII_LOWER.isdisjoint(value))
            + (not _ASCII_UPPER.isdisjoint(value))
            + (not _ASCII_DIGITS.isdisjoint(value))
            + (bool(value) and not value.isalnum())
        )
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


def random_looking(value: str, *, min_len: int = 16, min_entropy: float = 3.0) -> bool:
    """Long enough, several character classes, high entropy: a generated secret, not a word."""
    return len(value) >= min_len and char_classes(value) >= 2 and entropy_at_least(value, min_entropy)


# -- many values at once -------------------------------------------------------------------------


def occurrences(text: str, values: Collection[str]) -> Iterator[tuple[int, str]]:
    """``(offset, value)`` for every occurrence in ``text`` of each of ``values`` (overlapping ones
    too), in no particular order: one Aho-Corasick pass once there are several values, else one
    ``str.find`` pass per value. ``values`` must not hold the empty string."""
    if _aho is not None and len(values) >= _AHO_MIN_VALUES:
        automaton = _aho.Automaton()
        for value in values:
            automaton.add_word(value, value)
        automaton.make_automaton()
        for last, value in automaton.iter(text):
            yield last - len(value) + 1, value
        return
    for value in values:
        pos = text.find(value)
        while pos >= 0:
            yield pos, value
            pos = text.find(value, pos + 1)
