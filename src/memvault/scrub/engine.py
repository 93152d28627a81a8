"""The sensitive-data scrubber: find credentials and personal data in text before it is stored.

A :class:`Scrubber` holds compiled rules (built once) and a policy
(:class:`~memvault.settings.ScrubSettings`). :meth:`Scrubber.scan` returns :class:`Finding` s:
a kind and code-point offsets, never the value. :meth:`Scrubber.redact` replaces every finding by
``[REDACTED:<kind>]``; :meth:`Scrubber.apply` also reports counts per kind and the kinds whose
policy is ``reject``.

How a rule decides
    Most credentials have a fixed prefix (``sk-ant-api03-``, ``AKIA``, ``ghp_``, ``xoxb-``...) and
    are matched by shape, then checked against placeholders (``xxxx``, ``<YOUR_API_KEY>``,
    ``...``, a handful of distinct characters, AWS's published example keys). Shapes without a
    prefix need context: an AWS secret key or Twilio auth token is only reported near its
    provider's name or its key id, a bearer token after ``Bearer``, a password after a
    password-like name. Checksums are verified where a format has one: Luhn (cards), ISO 7064
    mod 97 (IBAN), CRC32 of classic GitHub tokens (a token whose checksum is right is reported
    even if it looks like a placeholder), and a JWT's header must decode to JSON with ``alg``.

Decisions worth knowing
    * ``ip``: only globally routable addresses are reported; loopback, private (RFC 1918),
      link-local, documentation and reserved ranges are not personal data. A dotted quad right
      after ``v``, ``version`` or ``build`` is a version number, not an address.
    * ``email``: reserved example domains (``example.com``, ``.test``, ``.invalid``, ``.local``,
      ``.internal``), ``git@host:`` remotes and ``name@2x.png`` asset names are not reported.
    * ``phone``: reported when it has a ``+`` country code, the North American shape
      ``(NXX) NXX-XXXX``/``NXX-NXX-XXXX``, a European trunk ``0`` with separators, or any
      10-15 digit run right after a phone word (``tel``, ``phone``, ``mobile``...). Dates, times,
      versions and ``ABC-1234-5678`` style ids are excluded by shape.
    * A policy of ``allow`` turns the kind's rule off: it is not scanned at all, so ``scan``
      never reports it. ``reject`` kinds are reported and redacted like ``redact`` ones (so a
      caller that ignores the rejection still stores nothing sensitive); :meth:`Scrubber.apply`
      lists them in :attr:`ScrubResult.rejected` and the caller must refuse the write.
    * Overlapping candidates are merged into one finding spanning their union, named by the most
      specific rule (provider formats beat ``bearer_token`` beat ``password_assignment`` beat
      ``generic_secret`` beat personal data), so redaction never leaves part of a match behind.

Speed
    Each rule declares *probes* (:class:`~memvault.prefilter.Pattern` s): where its regexes can
    start, or what must occur for it to report anything. One Hyperscan pass over the text
    (:mod:`memvault.prefilter`) answers every probe of every rule at once; a rule whose probes
    report nothing is skipped, the others run their Python regex only at the reported offsets
    (:func:`_match_at`), which gives exactly the matches of ``finditer``. The probes are
    necessary conditions, so this changes no finding (``tests/unit/test_prefilter.py`` compares
    with every rule run at every offset). Long runs of one character class (AWS secret, Twilio
    token) are found from a byte signature instead (:func:`_run_starts`): Hyperscan pays for
    those at every position. Every other occurrence of the credential values found is located
    with one Aho-Corasick pass (``pyahocorasick``) once there are several values.
    ``benchmarks/bench_scrub_speed.py`` measures throughput; what is left is mostly the Python
    validators of the candidates (entropy, placeholders, context), so notes dense in secrets
    cost the most.

Custom rules run Python regexes without a timeout: see
:data:`~memvault.settings.MAX_CUSTOM_PATTERN_CHARS` for the limits applied to them.
"""

from __future__ import annotations

import base64
import binascii
import collections
import functools
import ipaddress
import json
import math
import re
import string
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from memvault.scrub.prefilter import HYPERSCAN, Pattern, PatternSet
from memvault.settings import (
    SCRUB_CREDENTIAL_KINDS,
    SCRUB_KINDS,
    SCRUB_PII_KINDS,
    CustomRule,
    ScrubSettings,
    StoreSettings,
)

#: Aho-Corasick automaton (``pyahocorasick``): finds every occurrence of many values in one pass.
_aho: Any
try:
    import ahocorasick as _aho_module  # type: ignore[import-untyped,import-not-found,unused-ignore]

    _aho = _aho_module
except ImportError:  # pragma: no cover - a dependency; str.find below gives the same answer
    _aho = None
#: With at least this many distinct values, one automaton pass beats one ``str.find`` pass per value.
_AHO_MIN_VALUES: Final = 8

__all__ = ["Scrubber", "Finding", "ScrubResult", "KINDS", "CREDENTIAL_KINDS", "PII_KINDS", "redaction_marker"]

KINDS: Final[tuple[str, ...]] = SCRUB_KINDS
CREDENTIAL_KINDS: Final[tuple[str, ...]] = SCRUB_CREDENTIAL_KINDS
PII_KINDS: Final[tuple[str, ...]] = SCRUB_PII_KINDS


def redaction_marker(kind: str) -> str:
    """The text that replaces a finding of ``kind``."""
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True, slots=True)
class Finding:
    """One sensitive span: ``text[start:end]`` is of ``kind``. Holds no value, so repr is safe."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ScrubResult:
    """Outcome of :meth:`Scrubber.apply`: the redacted text and what was found (never values)."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.counts) or bool(self.rejected)


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
_AWS_EXAMPLES: Final[frozenset[str]] = frozenset(
    {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AKIAI44QH8DHBEXAMPLE",
     "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"}
)  # fmt: skip


def is_placeholder(value: str) -> bool:
    """A documented placeholder, a masked value, a variable reference or an obviously fake value."""
    v = value.strip().strip("'\"`")
    low = v.lower()
    if low in _NON_VALUES or v in _AWS_EXAMPLES or v.startswith(("$", "%", "@", "&", "*")):
        return True
    if _aho is None:
        if _PLACEHOLDER_RE.search(low) is not None:
            return True
    elif next(_placeholder_automaton().iter(low), None) is not None:
        return True
    return len(v) >= 6 and len(set(low)) <= 3


_ASCII_LOWER: Final = frozenset(string.ascii_lowercase)
_ASCII_LETTERS: Final = frozenset(string.ascii_letters)
_ASCII_UPPER: Final = frozenset(string.ascii_uppercase)
_ASCII_DIGITS: Final = frozenset(string.digits)


def _char_classes(value: str) -> int:
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


def _random_looking(value: str, *, min_len: int = 16, min_entropy: float = 3.0) -> bool:
    """Long enough, several character classes, high entropy: a generated secret, not a word."""
    return len(value) >= min_len and _char_classes(value) >= 2 and entropy_at_least(value, min_entropy)


# -- candidate starts --------------------------------------------------------------------------
#
# Every rule says, as :class:`~memvault.prefilter.Pattern` s, where its regexes can start (a
# necessary condition: a superset of the offsets where they match) and what must occur for it to
# report anything at all. One :class:`~memvault.prefilter.PatternSet` scan of the text answers
# that for every rule; a rule then runs its Python regex only at those offsets (``_match_at``),
# which gives exactly the matches of ``finditer``. The scan runs over the text's *ASCII
# projection* (:func:`_projection`): one byte per character, every non-ASCII character a ``?``,
# so byte offsets are character offsets. A pattern class that the Python rule could satisfy with
# a non-ASCII character (``\d``, ``\w``, ``\s``, negated classes) therefore includes ``?``. The
# four non-ASCII characters that ``re.IGNORECASE`` or ``str.lower`` equate with an ASCII letter
# are rare: a text holding one is scanned twice, once more with them projected to that letter.

#: Non-ASCII characters that case-insensitive matching or ``str.lower`` equate with an ASCII letter.
_ODD_CASE: Final[dict[int, str]] = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}


def _projections(text: str) -> tuple[bytes, ...]:
    """``text`` with every non-ASCII character as ``?``; and if it holds one of ``_ODD_CASE``, also
    with those as their ASCII letter (for case-insensitive patterns)."""
    if text.isascii():
        return (text.encode("ascii"),)
    plain = text.encode("ascii", "replace")
    if "\u0130" not in text and "\u0131" not in text and "\u017f" not in text and "\u212a" not in text:
        return (plain,)  # (four substring searches cost a fifth of a regex search for any of them)
    return plain, text.translate(_ODD_CASE).encode("ascii", "replace")


def _at(*bodies: str, not_after: str | None = None, caseless: bool = False) -> tuple[Pattern, ...]:
    """Patterns reporting each offset where one of ``bodies`` (fixed-length) matches; with
    ``not_after`` (the inside of a character class), only where the character before is not in it."""
    out: list[Pattern] = []
    for body in bodies:
        if not_after is None:
            out.append(Pattern(body, caseless))
        else:
            out += [Pattern("^" + body, caseless), Pattern(f"[^{not_after}]{body}", caseless, shift=1)]
    return tuple(out)


def _anywhere(*bodies: str, caseless: bool = False) -> tuple[Pattern, ...]:
    """Gate patterns: whether any of ``bodies`` occurs."""
    return tuple(Pattern(b, caseless, starts=False) for b in bodies)


def _match_at(rx: re.Pattern[str], text: str, starts: Iterable[int]) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` given sorted ``starts`` that include every offset a match can start at."""
    last = 0
    for pos in starts:
        if pos < last:
            continue
        m = rx.match(text, pos)
        if m is not None:
            last = m.end()
            yield m


def _finditer_before(
    rx: re.Pattern[str], back: re.Pattern[str], text: str, anchors: Iterable[int], reach: int
) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a pattern that starts with a run of at most ``reach`` characters
    ending at an anchor (every offset of which is in sorted ``anchors``): ``back`` (that run,
    anchored at its end with ``\\Z``) finds the run's start."""
    last = 0
    for q in anchors:
        b = back.search(text, max(0, q - reach), q)
        if b is None or b.start() < last:
            continue
        m = rx.match(text, b.start())
        if m is not None:
            last = m.end()
            yield m


# -- rules ---------------------------------------------------------------------------------------

#: A candidate: (start, end, kind, priority).
_Cand = tuple[int, int, str, int]
#: ``detect(text, starts)``: ``starts[i]`` are the sorted offsets reported by the rule's
#: ``probes[i]`` (empty if none; ``[0]`` for a gate that matched).
_Detector = Callable[[str, tuple[list[int], ...]], Iterable[_Cand]]


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    #: Where the rule's regexes can start, or what must occur for it to report anything; the rule
    #: runs when any probe reports (always, when there are none) ...
    probes: tuple[tuple[Pattern, ...], ...]
    detect: _Detector
    #: ... or, if set, only when every probe reports (its detector finds nothing otherwise).
    every_probe: bool = False


_T: Final = r"A-Za-z0-9_\-"  # token characters
# Priorities: higher wins the name of a merged finding.
_P_BLOCK, _P_SPECIFIC, _P_STRUCT, _P_CONTEXT, _P_ASSIGN, _P_GENERIC, _P_CUSTOM = 100, 90, 80, 70, 50, 40, 60
_P_PII: Final[dict[str, int]] = {
    "email": 35,
    "credit_card": 34,
    "iban": 34,
    "ssn": 33,
    "dob": 32,
    "ip": 31,
    "phone": 30,
}


def _simple(
    kind: str, pattern: str, priority: int = _P_SPECIFIC, check: Callable[[str], bool] | None = None, group: int = 0
) -> _Detector:
    rx = re.compile(pattern)

    def detect(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
        for m in _match_at(rx, text, starts[0]):
            value = m.group(group)
            if not value or (check is not None and not check(value)):
                continue
            yield m.start(group), m.end(group), kind, priority

    return detect


def _token_check(prefix_len: int, *, min_entropy: float = 3.0) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        body = value[prefix_len:]
        return not is_placeholder(body) and entropy_at_least(body, min_entropy)

    return check


def _openai_check(value: str) -> bool:
    body = value[3:]
    if body.startswith("ant-"):
        return False
    for p in ("proj-", "svcacct-", "admin-", "None-"):
        if body.startswith(p):
            body = body[len(p) :]
            break
    return (
        any(c.isdigit() for c in body)
        and any(c.isalpha() for c in body)
        and not is_placeholder(body)
        and entropy_at_least(body, 3.5)
    )


def _github_check(value: str) -> bool:
    if value.startswith("github_pat_"):
        return _token_check(11)(value)
    if github_checksum_valid(value):
        return True
    return _token_check(4, min_entropy=3.5)(value)


def _aws_id_check(value: str) -> bool:
    return value not in _AWS_EXAMPLES and not value.endswith("EXAMPLE") and len(set(value[4:])) > 4


_AWS_SECRET_RE: Final = re.compile(r"[A-Za-z0-9/+](?<![A-Za-z0-9/+=].)[A-Za-z0-9/+]{39}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT_RE: Final = re.compile(r"aws|secret_?access|secretaccesskey|(?:akia|asia)[a-z0-9]{16}")


def _class_table(chars: str) -> bytes:
    """A ``bytes.translate`` table: ``a`` for each of ``chars`` (ASCII), ``.`` for every other byte."""
    return bytes(ord("a") if chr(b) in chars else ord(".") for b in range(256))


_B64_TABLE: Final = _class_table(string.ascii_letters + string.digits + "/+")
_HEX_TABLE: Final = _class_table("0123456789abcdef")


def _run_starts(text: str, table: bytes, length: int) -> list[int]:
    """Where each run of at least ``length`` characters of ``table``'s class starts (a regex whose
    matches are such runs, not preceded by a class character, can start nowhere else)."""
    sig = text.encode("ascii", "replace").translate(table)  # one byte per character
    run = b"a" * length
    out: list[int] = []
    p = sig.find(run)
    while p >= 0:
        out.append(p)
        p = sig.find(b".", p + length)
        if p < 0:
            break
        p = sig.find(run, p)
    return out


def _aws_secret(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    if not starts[0] or not starts[1]:  # no 40-character run, or no context anywhere
        return
    lower = ""
    for m in _match_at(_AWS_SECRET_RE, text, _run_starts(text, _B64_TABLE, 40)):
        value = m.group()
        if value in _AWS_EXAMPLES or "EXAMPLE" in value or _char_classes(value) < 3:
            continue
        if not any(c.isupper() for c in value) or not any(c.islower() for c in value):
            continue
        lower = lower or text.lower()
        if _AWS_CONTEXT_RE.search(lower, max(0, m.start() - 160), m.start()) is None:
            continue
        if not is_placeholder(value) and entropy_at_least(value, 4.0):
            yield m.start(), m.end(), "aws_secret_access_key", _P_CONTEXT


_TWILIO_TOKEN_RE: Final = re.compile(r"[0-9a-f](?<![A-Za-z0-9].)[0-9a-f]{31}(?![A-Za-z0-9])")
_TWILIO_CONTEXT_RE: Final = re.compile(r"twilio|auth_?token|authtoken|ac(?<![a-z0-9]ac)[0-9a-f]{32}")


def _twilio_token(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    if not starts[0] or not starts[1]:  # no 32-hex run, or no context anywhere
        return
    lower = ""
    for m in _match_at(_TWILIO_TOKEN_RE, text, _run_starts(text, _HEX_TABLE, 32)):
        if text[max(0, m.start() - 2) : m.start()] == "AC":
            continue
        lower = lower or text.lower()
        if _TWILIO_CONTEXT_RE.search(lower, max(0, m.start() - 160), m.start()) is None:
            continue
        if not is_placeholder(m.group()) and entropy_at_least(m.group(), 3.0):
            yield m.start(), m.end(), "twilio_auth_token", _P_CONTEXT


_PEM_BEGIN_RE: Final = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE: Final = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_LINE_RE: Final = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z-]+:.*|\\n|)[ \t]*\r?(?:\n|\\n|$)")


def _private_key(text: str, _starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    pos = 0
    end: re.Match[str] | None = None
    no_end_after = len(text) + 1  # no END marker at or after this offset (cached: keeps it linear)
    while True:
        m = _PEM_BEGIN_RE.search(text, pos)
        if m is None:
            return
        if m.end() < no_end_after and (end is None or end.start() < m.end()):
            end = _PEM_END_RE.search(text, m.end())
            if end is None:
                no_end_after = m.end()
        nxt = _PEM_BEGIN_RE.search(text, m.end())
        if end is not None and end.start() >= m.end() and (nxt is None or end.start() < nxt.start()):
            stop = end.end()
        else:  # truncated block: take the body lines that follow (fail safe)
            stop = m.end()
            while stop < len(text):
                line = _PEM_BODY_LINE_RE.match(text, stop)
                if line is None or line.end() == stop:
                    break
                stop = line.end()
            stop = max(m.end(), len(text[:stop].rstrip()))
        yield m.start(), stop, "private_key", _P_BLOCK
        pos = stop


_JWT_RE: Final = re.compile(rf"eyJ(?<![{_T}.]eyJ)[{_T}]{{8,}}\.[{_T}]{{2,}}\.[{_T}]*(?![{_T}.])")


def _jwt(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _match_at(_JWT_RE, text, starts[0]):
        value = m.group()
        if jwt_valid(value) and not is_placeholder(value.split(".", 1)[1]):
            yield m.start(), m.end(), "jwt", _P_STRUCT


_URL_AUTH_RE: Final = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://([^\s:@/?#\[\]\"'<>`]{1,128}):([^\s@/\"'<>`]{1,256})@"
    r"(?=[A-Za-z0-9\[])"
)
_BASIC_HEADER_RE: Final = re.compile(r"(?i:\bbasic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_CURL_USER_RE: Final = re.compile(r"(?:\s-u|--user)[ =]?['\"]?([^\s:'\"$]{1,64}):([^\s'\"]{1,128})")


_SCHEME_BACK_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,20}\Z")


def _basic_auth(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    if starts[0]:
        for m in _finditer_before(_URL_AUTH_RE, _SCHEME_BACK_RE, text, starts[0], 21):
            pw = m.group(2)
            if not is_placeholder(pw) and not is_placeholder(m.group(1) + pw) and pw.lower() not in ("pass", "pwd"):
                yield m.start(2), m.end(2), "basic_auth", _P_STRUCT
    if starts[1]:
        for m in _match_at(_BASIC_HEADER_RE, text, starts[1]):
            value = m.group(1)
            if not is_placeholder(value) and _char_classes(value) >= 2:
                yield m.start(1), m.end(1), "basic_auth", _P_STRUCT
    if starts[2]:
        for m in _CURL_USER_RE.finditer(text):
            pw = m.group(2)
            if not is_placeholder(pw) and len(pw) >= 4:
                yield m.start(2), m.end(2), "basic_auth", _P_STRUCT


_BEARER_RE: Final = re.compile(
    r"(?i:\bbearer|authorization:\s*token|\bx-api-key:|\bapi-key:|\bx-auth-token:)[ \t]+"
    r"([A-Za-z0-9\-._~+/]{16,}=*)(?![A-Za-z0-9\-._~+/=])"
)


def _bearer(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _match_at(_BEARER_RE, text, starts[0]):
        value = m.group(1)
        if not is_placeholder(value) and _char_classes(value) >= 2 and entropy_at_least(value, 3.0):
            yield m.start(1), m.end(1), "bearer_token", _P_STRUCT - 5


_AZURE_RE: Final = re.compile(
    r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=([A-Za-z0-9+/%]{20,}(?:={1,2}|%3D){0,2})"
)


def _azure(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _match_at(_AZURE_RE, text, starts[0]):
        if not is_placeholder(m.group(1)) and entropy_at_least(m.group(1), 3.5):
            yield m.start(1), m.end(1), "azure_connection_string", _P_SPECIFIC


_NPM_AUTH_RE: Final = re.compile(r"_auth(?:Token)?\s*=\s*['\"]?([^\s'\"]{8,})")


def _npm_auth(text: str, _starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _NPM_AUTH_RE.finditer(text):
        if not is_placeholder(m.group(1)):
            yield m.start(1), m.end(1), "npm_token", _P_SPECIFIC


# Assignments. The name must *end* with a password-like word, so ``password_file`` or
# ``api_key_env`` are not assignments of a password.
_PW_NAME: Final = (
    r"(password|passwd|passphrase|pass|pwd|secret|secrets|api[_\-.]?key|apikey|access[_\-.]?token|"
    r"auth[_\-.]?token|refresh[_\-.]?token|id[_\-.]?token|token|client[_\-.]?secret|secret[_\-.]?key|"
    r"private[_\-.]?key|access[_\-.]?key|app[_\-.]?key|master[_\-.]?key|signing[_\-.]?key|"
    r"encryption[_\-.]?key|session[_\-.]?key|hmac[_\-.]?key|webhook[_\-.]?secret|credentials?|cred|"
    r"license[_\-.]?key|pin)"
)
#: Assignments are found from the last word of a name (the tail regex matches from there); the
#: name is the identifier that ends there.
_TAIL_WORDS: Final = (
    "password", "passwd", "passphrase", "pass", "pwd", "secret", "secrets", "key", "token", "credential",
    "credentials", "cred", "pin",
)  # fmt: skip
_ASSIGN_TAIL_RE: Final = re.compile(
    r"(?i:password|passwd|passphrase|pass|pwd|secrets?|key|token|credentials?|cred|pin)(?![A-Za-z0-9_\-])[\"'`]?"
    r"(?:[ \t]*(?::=|=>|=|:|\bis\b:?)[ \t]*|[ \t]*,[ \t]*(?=[\"']))"
    r"(?:\"((?:[^\"\\\n]|\\.){1,512})\"|'([^'\n]{1,512})'|`([^`\n]{1,512})`|([^\s\"'`,;)}\]][^\s\"'`,;)}]{0,511}))"
)
_NAME_CHARS_STR: Final = string.ascii_letters + string.digits + "_.-"
#: The longest ``_PW_NAME`` match: a ``_NAME_END_RE`` match starts at most this far from the end.
_PW_NAME_WIDTH: Final = 14
_NAME_END_RE: Final = re.compile(r"(?:^|(?<=[_.\-])|(?<=[a-z0-9])(?=[A-Z]))(?i:" + _PW_NAME + r")$")
_CLI_PW_RE: Final = re.compile(
    r"-(?<![A-Za-z0-9-].)-?(?:password|passwd|pass|token|api-key|secret|client-secret)[ =]['\"]?([^\s'\"]{1,256})"
)
_CODE_REF_RE: Final = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+(?:\(.*)?|[A-Za-z_]\w*\(.*|[a-z]+(?:_[a-z]+)+")
_ENV_NAME_RE: Final = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_PATHLIKE_RE: Final = re.compile(r"(?:/|\./|~/|[A-Za-z]:\\)[\w./\\-]*|[\w.-]+\.(?:txt|pem|key|json|ya?ml|env|cfg|ini)")
#: Every ``_PATHLIKE_RE`` match ends with one of these or starts with ``/``, ``./``, ``~/`` or ``X:\``.
_PATH_ENDS: Final = (".txt", ".pem", ".key", ".json", ".yaml", ".yml", ".env", ".cfg", ".ini")


def _pathlike(value: str) -> bool:
    if not (
        value.startswith(("/", "./", "~/"))
        or value[1:3] == ":\\"
        and value[:1] in _ASCII_LETTERS
        or value.endswith(_PATH_ENDS)
    ):
        return False
    return _PATHLIKE_RE.fullmatch(value) is not None


def _assignment_value_ok(name: str, value: str, quoted: bool) -> str | None:
    """The kind to report for ``name = value``, or None if the value is not a secret."""
    low_name = name.lower()
    if is_placeholder(value) or len(value) < 4:
        return None
    if _pathlike(value) or value.isdigit() and len(value) < 6 and "pin" not in low_name:
        return None
    if not quoted and (_CODE_REF_RE.fullmatch(value) or _ENV_NAME_RE.fullmatch(value)):
        return None
    if quoted and _ENV_NAME_RE.fullmatch(value):
        return None
    if value.endswith((":", "(")) or value.startswith(("http://", "https://")) and "@" not in value:
        return None
    is_password = (
        "pass" in low_name or "pwd" in low_name or "pin" in low_name or low_name.endswith(("secret", "secrets", "cred"))
    )
    if is_password:
        if " " in value and not quoted:
            return None
        return "password_assignment"
    if low_name.endswith(("token", "api_key", "apikey", "api-key", "api.key")):
        if _random_looking(value, min_len=8, min_entropy=2.5) and " " not in value:
            return "password_assignment"
        return None
    if _random_looking(value, min_len=12, min_entropy=3.0) and " " not in value:
        return "generic_secret"
    return None


def _assignments(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    seen: set[int] = set()
    lower = ""
    for ks in starts[0]:  # where a name's last word is followed by a quote, blank or separator
        m = _ASSIGN_TAIL_RE.match(text, ks)
        if m is None:
            continue
        window = text[max(0, ks - 64) : ks]
        ns = ks - (len(window) - len(window.rstrip(_NAME_CHARS_STR)))  # name characters ending at ks
        name = text[ns : _name_end(text, ks)]
        name_m = _NAME_END_RE.search(name, max(0, len(name) - _PW_NAME_WIDTH))
        if name_m is None:
            continue
        name = name_m.group(0)
        gi = m.lastindex or 4  # exactly one of the alternative groups 1-4 took part
        start, end = m.start(gi), m.end(gi)
        if start in seen:
            continue
        seen.add(start)
        value = text[start:end]
        if gi == 4:  # unquoted: stop at trailing punctuation
            cut = len(value.rstrip(".,:;!?"))
            end, value = start + cut, value[:cut]
            lower = lower or text.lower()
            if " is" in lower[ks:start] and not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
                continue  # prose: "the password is Tr0ub4dor&3" needs a value that looks made up
        kind = _assignment_value_ok(name, value, gi != 4)
        if kind is not None:
            yield start, end, kind, _P_ASSIGN if kind == "password_assignment" else _P_GENERIC
    if starts[1]:
        for m in _CLI_PW_RE.finditer(text):
            value = m.group(1)
            if not is_placeholder(value) and len(value) >= 4 and not value.startswith("-"):
                yield m.start(1), m.end(1), "password_assignment", _P_ASSIGN


#: ``\w`` is ``str.isalnum()`` or ``_``, so this is the run of ``isalnum()``, ``_`` and ``-``.
_NAME_FWD_RE: Final = re.compile(r"[\w\-]*")


def _name_end(text: str, ks: int) -> int:
    m = _NAME_FWD_RE.match(text, ks)
    return m.end() if m is not None else ks


# -- personal data -------------------------------------------------------------------------------

_EMAIL_RE: Final = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@"
    r"((?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24}))(?![A-Za-z0-9\-])"
)
_EMAIL_SKIP_DOMAINS: Final = ("example.com", "example.org", "example.net")
_EMAIL_SKIP_TLDS: Final = frozenset(
    {"test", "example", "invalid", "localhost", "local", "internal", "lan", "localdomain", "png", "jpg", "jpeg",
     "gif", "svg", "webp", "js", "ts", "tsx", "py", "rb", "go", "rs", "css", "html", "json", "yaml", "yml", "lock"}
)  # fmt: skip


_LOCAL_BACK_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}\Z")


_ASSET_SCALE_RE: Final = re.compile(r"\d+x\.")


def _email(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _finditer_before(_EMAIL_RE, _LOCAL_BACK_RE, text, starts[0], 64):
        domain = m.group(1).lower()
        if m.group(2).lower() in _EMAIL_SKIP_TLDS or domain.endswith(_EMAIL_SKIP_DOMAINS):
            continue
        if _ASSET_SCALE_RE.match(domain):  # logo@2x.png
            continue
        if text.startswith(":", m.end()) and m.group().startswith("git@"):  # git@github.com:org/repo
            continue
        yield m.start(), m.end(), "email", _P_PII["email"]


_NUM_RE: Final = re.compile(r"[+(\d](?<![\w.\-/:+#(][+(\d])[\d \-.()/]{5,24}\d(?![\w\-/]|\.\d|:\d)")
_PHONE_CONTEXT_RE: Final = re.compile(
    r"(?i:phone|tel\b|tel\.|mobile|cell|call|fax|whatsapp|sms|handy|telefon|téléphone|\bph\b|contact|reach)"
)
_NEG_CONTEXT_RE: Final = re.compile(
    r"(?i:order|invoice|ticket|tracking|shipment|case|rma|ref|id\b|#|no\.|number|build|version|pid|port|po\b)"
)
_CARD_CONTEXT_RE: Final = re.compile(r"(?i:card|visa|mastercard|amex|credit|debit|cc\b|pan\b|payment|charge)")
_NANP_RE: Final = re.compile(r"(?:\+?1[ \-.]?)?(?:\(([2-9]\d\d)\)[ \-.]?|([2-9]\d\d)([ \-.]))[2-9]\d\d[ \-.]\d{4}")
_INTL_RE: Final = re.compile(r"\+\d{1,3}(?:[ \-.]?\(\d{1,4}\))?(?:[ \-.]?\d{1,5}){1,6}")
_TRUNK_RE: Final = re.compile(r"\(?0\d{1,4}\)?(?:[ \-/.]\d{2,8}){1,5}")
_SSN_RE: Final = re.compile(r"(\d{3})([ \-]?)(\d{2})\2(\d{4})")
_DATE_LIKE_RE: Final = re.compile(r"\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}|\d{1,2}[\-/.]\d{1,2}[\-/.]\d{2,4}")
_CARD_GROUPS: Final = frozenset(
    {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 4, 4, 1), (4, 4, 4, 2), (4, 4, 4, 3)}
)


def _iin_plausible(d: str) -> bool:
    n = len(d)
    two, four = int(d[:2]), int(d[:4])
    if d[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if two in (36, 38, 30):
        return n in (14, 16)
    if d.startswith(("6011", "65")) or 644 <= int(d[:3]) <= 649 or two == 62:
        return 16 <= n <= 19
    if two == 35:
        return 16 <= n <= 19
    return two in (50, 56, 57, 58, 63, 67) and 12 <= n <= 19


def _numbers(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _match_at(_NUM_RE, text, starts[0]):
        raw = m.group()
        start = m.start()
        # trim unbalanced parentheses at either end
        while raw.endswith(")") and raw.count(")") > raw.count("("):
            raw = raw[:-1]
        while raw.startswith("(") and raw.count("(") > raw.count(")"):
            raw, start = raw[1:], start + 1
        raw = raw.rstrip(" -./(")
        if not raw:
            continue
        yield from _classify_number(text, start, raw)


_SSN_WORD_RE: Final = re.compile(r"(?i)ssn|social security")
_GROUP_SEP_RE: Final = re.compile(r"[ \-]")
_DIGITS_DOTS_RE: Final = re.compile(r"[\d.]+")
_DOTTED_QUAD_RE: Final = re.compile(r"\d\.\d+\.\d+\.\d")
_PHONE_CHARS_RE: Final = re.compile(r"\+?[\d ()\-.]+")
#: ``_NUM_RE`` matches hold ``\d`` characters (all ``str.isdigit``) and these separators only.
_DROP_SEPARATORS: Final = str.maketrans("", "", " -.()/+")


def _line_before(text: str, start: int) -> str:
    """Up to 40 characters before ``start`` on its line."""
    return text[max(0, start - 40) : start].rsplit("\n", 1)[-1]


def _classify_number(text: str, start: int, raw: str) -> Iterable[_Cand]:
    end = start + len(raw)
    digits = raw.translate(_DROP_SEPARATORS)  # raw holds only \d characters and these separators
    # SSN
    sm = _SSN_RE.fullmatch(raw) if len(raw) in (9, 11) else None  # 9 digits, maybe 2 separators
    if sm and (sm.group(2) == "-" or _SSN_WORD_RE.search(_line_before(text, start))):
        area, group, serial = sm.group(1), sm.group(3), sm.group(4)
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            yield start, end, "ssn", _P_PII["ssn"]
            return
    # card
    if 13 <= len(digits) <= 19 and luhn_valid(digits) and _iin_plausible(digits):
        groups = tuple(len(g) for g in _GROUP_SEP_RE.split(raw))
        plain = raw.isdigit()
        line_before = _line_before(text, start)
        if (plain or groups in _CARD_GROUPS) and not (
            _NEG_CONTEXT_RE.search(line_before[-20:]) and not _CARD_CONTEXT_RE.search(line_before)
        ):
            yield start, end, "credit_card", _P_PII["credit_card"]
            return
    # dates, times, versions, decimals are not phone numbers
    if _DATE_LIKE_RE.search(raw) or _DIGITS_DOTS_RE.fullmatch(raw) and raw.count(".") != 2:
        return
    if _DOTTED_QUAD_RE.search(raw):  # dotted quad or version
        return
    line_before = _line_before(text, start)
    context = _PHONE_CONTEXT_RE.search(line_before[-30:]) is not None
    if _NEG_CONTEXT_RE.search(line_before[-20:]) and not context and not raw.startswith("+"):
        return
    for rx in (_NANP_RE, _INTL_RE, _TRUNK_RE):
        pm = rx.fullmatch(raw)
        if pm is None:
            continue
        if rx is _NANP_RE and pm.group(3) is not None and pm.group(3) == "." and not context and raw.count(".") != 2:
            continue
        if rx is _TRUNK_RE and not (10 <= len(digits) <= 11) and not context:
            continue
        if rx is _INTL_RE and not 8 <= len(digits) <= 15:
            continue
        yield start, end, "phone", _P_PII["phone"]
        return
    if context and 7 <= len(digits) <= 15 and _PHONE_CHARS_RE.fullmatch(raw):
        yield start, end, "phone", _P_PII["phone"]


_IPV4_RE: Final = re.compile(r"\d(?<![\w.\-]\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w\-]|\.\d)")
_IPV6_RE: Final = re.compile(r"[23](?<![\w:.].)[0-9a-fA-F]{3}:[0-9a-fA-F:]{2,36}[0-9a-fA-F](?![\w:])")
_VERSION_BEFORE_RE: Final = re.compile(r"(?i)\b(?:v|version|ver|build|release|rev|firmware|oid|sdk)\b[^\n]{0,24}$")


def _ip(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _match_at(_IPV4_RE, text, starts[0]):
        if _VERSION_BEFORE_RE.search(text, max(0, m.start() - 40), m.start()):
            continue
        try:
            addr = ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if addr.is_global:
            yield m.start(), m.end(), "ip", _P_PII["ip"]
    if starts[1] and ("::" in text or text.count(":") >= 7):
        for m in _match_at(_IPV6_RE, text, starts[1]):
            try:
                addr6 = ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            if addr6.is_global:
                yield m.start(), m.end(), "ip", _P_PII["ip"]


_IBAN_RE: Final = re.compile(
    r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)


def _iban(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    for m in _match_at(_IBAN_RE, text, starts[0]):
        value = m.group()
        # the optional trailing group may have eaten a following word; retry without it
        for cand in (value, value.rsplit(" ", 1)[0]):
            if iban_valid(cand):
                yield m.start(), m.start() + len(cand), "iban", _P_PII["iban"]
                break


_MONTHS: Final = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|januar|februar|märz|mai|juni|juli|oktober|dezember)\.?"
)
_DATE: Final = (
    r"(?:\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}|\d{1,2}[\-/.]\d{1,2}[\-/.](?:\d{4}|\d{2})|"
    r"\d{1,2}(?:st|nd|rd|th)?\.?\s+" + _MONTHS + r",?\s+\d{4}|" + _MONTHS + r"\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4})"
)
_DOB_RE: Final = re.compile(
    r"(?i)(?<![a-z])(?:d\.?o\.?b\.?|date[ _\-]?of[ _\-]?birth|birth[ _\-]?date|birthday|born|geburtsdatum|"
    r"geboren|fecha de nacimiento|date de naissance|née?|data di nascita|geb\.)(?![a-z])"
    r"[^\n\d]{0,40}?(?<!\d)(" + _DATE + r")(?![\d])"
)


def _dob(text: str, starts: tuple[list[int], ...]) -> Iterable[_Cand]:
    if not starts[0]:  # none of the words the rule is for (the rule does not look for "d.ob")
        return
    for m in _match_at(_DOB_RE, text, starts[1]):
        yield m.start(1), m.end(1), "dob", _P_PII["dob"]


_ANTHROPIC = rf"sk-ant-(?<![{_T}]sk-ant-)(?:api|admin|oat|ort|sid)\d\d-[{_T}]{{20,}}"
#: Character-class bodies (``[^...]`` of the ``not_after`` context) of the rules' look-behinds.
_NOT_T: Final = r"A-Za-z0-9_\-"
_NOT_ALNUM: Final = "A-Za-z0-9"
_NOT_WORD: Final = "A-Za-z0-9_"
#: What Python's ``\s`` matches among ASCII characters, and ``?`` for the rest.
_S: Final = r"[\t\n\x0b\x0c\r \x1c-\x1f?]"
_RULES: Final[tuple[_Rule, ...]] = (
    _Rule("private_key", (_anywhere("PRIVATE KEY"),), _private_key),
    _Rule(
        "anthropic_api_key",
        (_at("sk-ant-", not_after=_NOT_T),),
        _simple("anthropic_api_key", _ANTHROPIC, check=_token_check(13)),
    ),
    _Rule(
        "openai_api_key",
        (_at(r"sk-[A-Za-z0-9_\-]{20}", not_after=_NOT_T),),
        _simple("openai_api_key", rf"sk-(?<![{_T}]sk-)[{_T}]{{20,}}(?![{_T}])", check=_openai_check),
    ),
    _Rule(
        "aws_access_key_id",
        (_at("A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}", not_after="A-Z0-9"),),
        _simple(
            "aws_access_key_id", r"A(?<![A-Z0-9]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Z0-9])", check=_aws_id_check
        ),
    ),
    _Rule(
        "aws_secret_access_key",
        (
            _anywhere("[A-Za-z0-9/+]{40}"),
            _anywhere("aws", "secret_access", "secretaccess", "(?:akia|asia)[a-z0-9]{16}", caseless=True),
        ),
        _aws_secret,
        every_probe=True,
    ),
    _Rule(
        "google_api_key",
        (_at(r"AIza[A-Za-z0-9_\-]{35}", not_after=_NOT_T),),
        _simple("google_api_key", rf"AIza(?<![{_T}]AIza)[{_T}]{{35}}(?![{_T}])", check=_token_check(4)),
    ),
    _Rule(
        "azure_connection_string",
        (
            _at(
                *(
                    f"{name}=[A-Za-z0-9+/%]{{20}}"
                    for name in ("accountkey", "sharedaccesskey", "sharedaccesssignature", "sig")
                ),
                caseless=True,
            ),
        ),
        _azure,
    ),
    _Rule(
        "github_token",
        (_at("gh[pousr]_[A-Za-z0-9]{36}", "github_pat_[A-Za-z0-9_]{50}", not_after=_NOT_WORD),),
        _simple(
            "github_token",
            r"g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{50,})(?![A-Za-z0-9_])",
            check=_github_check,
        ),
    ),
    _Rule(
        "gitlab_token",
        (
            _at(
                *(rf"gl{p}-[A-Za-z0-9_\-]{{20}}" for p in ("pat", "rt", "dt", "ptt", "ft", "soat", "cbt", "oas")),
                not_after=_NOT_T,
            ),
        ),
        _simple(
            "gitlab_token",
            rf"gl(?<![{_T}]gl)(?:pat|rt|dt|ptt|ft|soat|cbt|oas)-[{_T}]{{20,}}(?![{_T}])",
            check=lambda v: _token_check(v.index("-") + 1)(v),
        ),
    ),
    _Rule(
        "slack_token",
        (_at(r"xox[abposre]-[A-Za-z0-9\-]{10}", r"xapp-[A-Za-z0-9\-]{10}", not_after=_NOT_ALNUM),),
        _simple(
            "slack_token",
            r"x(?<![A-Za-z0-9]x)(?:ox[abposre]|app)-[A-Za-z0-9\-]{10,250}(?![A-Za-z0-9\-])",
            check=lambda v: _token_check(5)(v) and any(c.isdigit() for c in v),
        ),
    ),
    _Rule(
        "slack_webhook",
        (_at(r"http://hooks\.slack\.com/", r"https://hooks\.slack\.com/"),),
        _simple(
            "slack_webhook",
            r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{12,}",
            priority=_P_SPECIFIC + 2,
            check=lambda v: not is_placeholder(v.rsplit("/", 1)[1]),
        ),
    ),
    _Rule(
        "stripe_key",
        (
            _at(
                "[sr]k_live_[A-Za-z0-9]{10}", "[sr]k_test_[A-Za-z0-9]{10}", "whsec_[A-Za-z0-9]{24}", not_after=_NOT_WORD
            ),
        ),
        _simple(
            "stripe_key",
            r"(?:[sr]k_(?<![A-Za-z0-9_].._)(?:live|test)_[A-Za-z0-9]{10,}|whsec_(?<![A-Za-z0-9_]whsec_)[A-Za-z0-9]{24,})"
            r"(?![A-Za-z0-9_])",
            check=lambda v: _token_check(v.index("_", 3) + 1 if not v.startswith("whsec") else 6)(v),
        ),
    ),
    _Rule(
        "twilio_account_sid",
        (_at("AC[0-9a-f]{32}", not_after=_NOT_ALNUM),),
        _simple(
            "twilio_account_sid",
            r"AC(?<![A-Za-z0-9]AC)[0-9a-f]{32}(?![A-Za-z0-9])",
            check=lambda v: not is_placeholder(v[2:]) and entropy_at_least(v[2:], 3.0),
        ),
    ),
    _Rule(
        "twilio_auth_token",
        (
            _anywhere("[0-9a-f]{32}"),
            _anywhere("twilio", "auth_token", "authtoken", "ac[0-9a-f]{32}", caseless=True),
        ),
        _twilio_token,
        every_probe=True,
    ),
    _Rule(
        "sendgrid_api_key",
        (_at(r"SG\.[A-Za-z0-9_\-]{16}", not_after=r"A-Za-z0-9_\-."),),
        _simple(
            "sendgrid_api_key",
            rf"SG\.(?<![{_T}.]SG\.)[{_T}]{{16,32}}\.[{_T}]{{30,64}}(?![{_T}])",
            check=_token_check(3),
        ),
    ),
    _Rule(
        "npm_token",
        (_at("npm_[A-Za-z0-9]{36}", not_after=_NOT_WORD),),
        _simple("npm_token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9_])", check=_token_check(4)),
    ),
    _Rule("npm_token", (_anywhere("_auth"),), _npm_auth),
    _Rule(
        "pypi_token",
        (_at(r"pypi-AgE[A-Za-z0-9_\-]{50}", not_after=_NOT_T),),
        _simple("pypi_token", rf"pypi-AgE(?<![{_T}]pypi-AgE)[{_T}]{{50,}}", check=_token_check(5)),
    ),
    _Rule("jwt", (_at(r"eyJ[A-Za-z0-9_\-]{8}", not_after=r"A-Za-z0-9_\-."),), _jwt),
    _Rule(
        "basic_auth",
        (_at("://"), _at("basic" + _S, caseless=True), _anywhere("-u", "--user")),
        _basic_auth,
    ),
    _Rule(
        "bearer_token",
        (
            _at(
                "bearer[ \t]", "authorization:", "x-api-key:[ \t]", "api-key:[ \t]", "x-auth-token:[ \t]", caseless=True
            ),
        ),
        _bearer,
    ),
    _Rule(
        "password_assignment",
        (
            # the word, then a separator, or a quote or blank and what may follow it
            _at(
                *(w + "[:=,]" for w in _TAIL_WORDS),
                *(w + "[\"'\x60 \t][ \t:=,i]" for w in _TAIL_WORDS),
                caseless=True,
            ),
            _anywhere(
                *(f"-{w}[ =]" for w in ("password", "passwd", "pass", "token", "api-key", "secret", "client-secret"))
            ),
        ),
        _assignments,
    ),
    _Rule("email", ((Pattern(r"[A-Za-z0-9._%+\-]@[A-Za-z0-9]", shift=1),),), _email),
    _Rule(
        "ip",
        (
            _at(
                *(f"[0-9?]{{{k}}}\\.[0-9?]{{{n}}}\\." for k in (1, 2, 3) for n in (1, 2, 3)),
                not_after=r"A-Za-z0-9_.\-",
            ),
            _at("[23][0-9a-fA-F]{3}:", not_after=r"A-Za-z0-9_:."),
        ),
        _ip,
    ),
    _Rule("iban", (_at("[A-Z]{2}[0-9?]{2}[A-Z0-9]{4}", "[A-Z]{2}[0-9?]{2} [A-Z0-9]{4}", not_after=_NOT_ALNUM),), _iban),
    _Rule(
        "dob",
        (
            _anywhere(
                "dob",
                r"d\.o\.b",
                "birth",
                "born",
                "geburt",
                "geboren",
                "nacimiento",
                "naissance",
                r"n\?",
                "nascita",
                r"geb\.",
                caseless=True,
            ),
            _at("dob", r"d\.o", r"do\.", "date", "data", "birth", "born", "geb", "fecha", r"n\?", caseless=True),
        ),
        _dob,
        every_probe=True,
    ),
)
#: The shared numeric scan (phone, credit_card, ssn).
_NUMBERS: Final = _Rule("phone", (_at(r"[+(0-9?][0-9? \-.()/]{6}", not_after=r"A-Za-z0-9_.\-/:+#("),), _numbers)
_CREDENTIAL_SET: Final = frozenset(CREDENTIAL_KINDS)
#: Kinds produced by the shared numeric scan.
_NUMERIC_KINDS: Final = frozenset({"phone", "credit_card", "ssn"})
#: Kinds some rule may report besides its own (the assignment rule also reports generic_secret).
_RULE_EXTRA_KINDS: Final[dict[str, tuple[str, ...]]] = {"password_assignment": ("generic_secret",)}


# -- scrubber ------------------------------------------------------------------------------------


def _custom_detector(rule: CustomRule) -> _Detector:
    rx = re.compile(rule.pattern)
    group: int | str = "value" if "value" in rx.groupindex else (1 if rx.groups else 0)
    kind, validator = rule.kind, rule.validator

    def detect(text: str, _starts: tuple[list[int], ...]) -> Iterable[_Cand]:
        for m in rx.finditer(text):
            start, end = m.span(group)
            if start < 0 or start == end:
                continue
            value = text[start:end]
            if validator == "luhn":
                digits = "".join(c for c in value if c.isdigit())
                if not (12 <= len(digits) <= 19 and luhn_valid(digits)):
                    continue
            elif validator == "iban" and not iban_valid(value):
                continue
            elif validator == "entropy" and not _random_looking(value, min_len=12, min_entropy=3.0):
                continue
            yield start, end, kind, _P_CUSTOM

    return detect


#: Every probe of the built-in rules, in order: ``_PROBES[i]`` is a tuple of patterns.
_PROBES: Final[tuple[tuple[Pattern, ...], ...]] = tuple(p for r in (*_RULES, _NUMBERS) for p in r.probes)


#: The patterns of every probe (compiled on first use), and the probe of each pattern.
def _probe_set(*, hyperscan: bool = HYPERSCAN) -> PatternSet:
    """The patterns of every probe (compiled on first use), each in the group of its probe."""
    return PatternSet(
        [pat for probe in _PROBES for pat in probe],
        groups=[i for i, probe in enumerate(_PROBES) for _ in probe],
        hyperscan=hyperscan,
    )


_PROBE_SET: Final = _probe_set()


def _probe_ids(rule: _Rule) -> tuple[int, ...]:
    """Indices in ``_PROBES`` of the probes of a built-in ``rule``."""
    first = 0
    for r in (*_RULES, _NUMBERS):
        if r is rule:
            return tuple(range(first, first + len(r.probes)))
        first += len(r.probes)
    raise ValueError("not a built-in rule")


class Scrubber:
    """Finds and redacts sensitive data according to a :class:`ScrubSettings` policy."""

    __slots__ = ("_settings", "_plan", "_always", "_rule_of", "_allow", "_policy", "_active")

    def __init__(self, settings: ScrubSettings | StoreSettings | None = None) -> None:
        if isinstance(settings, StoreSettings):
            settings = settings.scrub
        elif settings is None:
            settings = ScrubSettings()
        elif not isinstance(settings, ScrubSettings):
            raise TypeError("settings must be ScrubSettings, StoreSettings or None")
        self._settings = settings
        self._policy: dict[str, str] = dict(settings.policy)
        active = {kind for kind, action in self._policy.items() if action != "allow"}
        rules = [r for r in _RULES if r.kind in active or any(k in active for k in _RULE_EXTRA_KINDS.get(r.kind, ()))]
        if active & _NUMERIC_KINDS:
            rules.append(_NUMBERS)
        #: (probe indices, detector, whether every probe must report) per built-in rule that can
        #: report an active kind, and the index in it of the rule each probe belongs to; custom
        #: rules always run.
        self._plan: tuple[tuple[tuple[int, ...], _Detector, bool], ...] = tuple(
            (_probe_ids(r), r.detect, r.every_probe) for r in rules
        )
        self._rule_of: dict[int, int] = {p: i for i, (probes, _, _) in enumerate(self._plan) for p in probes}
        self._always: tuple[_Detector, ...] = tuple(
            _custom_detector(c) for c in settings.custom_rules if c.kind in active
        )
        self._allow: frozenset[str] = frozenset(settings.allowlist) | _AWS_EXAMPLES
        self._active: frozenset[str] = frozenset(active)

    @property
    def settings(self) -> ScrubSettings:
        return self._settings

    def policy(self, kind: str) -> str:
        """The action for ``kind`` (``redact`` for a kind the settings do not name)."""
        return self._policy.get(kind, "redact")

    def scan(self, text: str) -> list[Finding]:
        """Sorted, non-overlapping findings in ``text`` (empty if the scrubber is disabled)."""
        if not isinstance(text, str):
            raise TypeError("text must be a str")
        if not self._settings.enabled or not text:
            return []
        return self._findings(text, _PROBE_SET.grouped(_projections(text)))

    def _findings(self, text: str, reported: dict[int, list[int]]) -> list[Finding]:
        """The findings of the rules given the offsets ``reported`` by each probe (a superset of
        where the rules' regexes match: every offset of every probe gives the same findings)."""
        cands: list[_Cand] = []
        rule_of, plan = self._rule_of, self._plan
        for i in sorted({rule_of[p] for p in reported if p in rule_of}):
            probes, detect, every_probe = plan[i]
            if len(probes) == 1:
                got = reported[probes[0]]
                starts: tuple[list[int], ...] = (got if len(got) == 1 else sorted(set(got)),)
            elif every_probe and not all(p in reported for p in probes):
                continue
            else:
                starts = tuple(sorted(set(reported[p])) if p in reported else [] for p in probes)
            cands.extend(detect(text, starts))
        for detect in self._always:
            cands.extend(detect(text, ()))
        # A value recognised as a credential in one place (by its context) is redacted everywhere:
        # every occurrence (overlapping ones too) takes the kind of the value's first candidate.
        first: dict[str, tuple[int, str, int]] = {}
        for start, end, kind, prio in cands:
            if kind in _CREDENTIAL_SET and end - start >= 8:
                value = text[start:end]
                if value not in first:
                    first[value] = (start, kind, prio)
        if _aho is not None and len(first) >= _AHO_MIN_VALUES:
            automaton = _aho.Automaton()
            for value, (start, kind, prio) in first.items():
                automaton.add_word(value, (len(value), start, kind, prio))
            automaton.make_automaton()
            for last, (n, start, kind, prio) in automaton.iter(text):
                pos = last - n + 1
                if pos != start:
                    cands.append((pos, last + 1, kind, prio))
        else:
            for value, (start, kind, prio) in first.items():
                pos = text.find(value)
                while pos >= 0:
                    if pos != start:
                        cands.append((pos, pos + len(value), kind, prio))
                    pos = text.find(value, pos + 1)
        return self._resolve(text, cands)

    def _resolve(self, text: str, cands: list[_Cand]) -> list[Finding]:
        active, allow = self._active, self._allow
        kept = [c for c in cands if c[1] > c[0] and c[2] in active and text[c[0] : c[1]] not in allow]
        kept.sort()
        out: list[Finding] = []
        i = 0
        while i < len(kept):
            start, end, kind, prio = kept[i]
            best = (prio, end - start, kind)
            j = i + 1
            while j < len(kept) and kept[j][0] < end:
                s2, e2, k2, p2 = kept[j]
                end = max(end, e2)
                best = max(best, (p2, e2 - s2, k2))
                j += 1
            out.append(Finding(best[2], start, end))
            i = j
        return out

    def redact(self, text: str) -> str:
        """``text`` with every finding replaced by ``[REDACTED:<kind>]``."""
        return self._redact(text, self.scan(text))

    @staticmethod
    def _redact(text: str, findings: list[Finding]) -> str:
        if not findings:
            return text
        parts: list[str] = []
        pos = 0
        for f in findings:
            parts.append(text[pos : f.start])
            parts.append(redaction_marker(f.kind))
            pos = f.end
        parts.append(text[pos:])
        return "".join(parts)

    def apply(self, text: str) -> ScrubResult:
        """Redact ``text`` and report counts per redacted kind and the kinds the policy rejects."""
        findings = self.scan(text)
        counts: dict[str, int] = {}
        rejected: set[str] = set()
        for f in findings:
            if self.policy(f.kind) == "reject":
                rejected.add(f.kind)
            else:
                counts[f.kind] = counts.get(f.kind, 0) + 1
        return ScrubResult(self._redact(text, findings), counts, sorted(rejected))
