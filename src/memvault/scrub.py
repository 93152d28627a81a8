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
    Every rule has trigger strings; a rule whose triggers do not occur in the text (or in its
    lower-case copy) is skipped without running its regex. Numeric personal data shares one
    candidate scan. Patterns start with a literal where they can (a look-behind is placed after
    the prefix it guards), so ``re`` skips ahead to the prefix instead of trying every position;
    case-insensitive patterns and e-mail/URL credentials are matched only where ``str.find``
    locates their anchor (see :func:`_match_at`). Costly scans are skipped by exact necessary
    conditions tested first: a literal-first gate regex (IPv4, IPv6), a byte signature of the
    text (IBAN, AWS secret), cheap substrings (Twilio context). The number and IPv4 patterns run
    only where their look-behind can pass, found in a byte signature (:func:`_sig_matches`).
    Every other occurrence of the credential values found is located with one Aho-Corasick pass
    (``pyahocorasick``) once there are several values. ``benchmarks/bench_scrub_speed.py``
    measures it: about 3-5 MB/s on typical notes, still far below the 20 MB/s goal of issue 4.

Custom rules run Python regexes without a timeout: see
:data:`~memvault.settings.MAX_CUSTOM_PATTERN_CHARS` for the limits applied to them.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import math
import re
import string
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

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
    if not value:
        return 0.0
    n = len(value)
    return -sum([c / n * math.log2(c / n) for c in Counter(value).values()])


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check over a string of ASCII digits."""
    if not digits.isdigit() or not digits.isascii():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


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
#: Whole values that mean "no value": checked case-insensitively after stripping quotes.
_PLACEHOLDER_RE: Final = re.compile("|".join(re.escape(w) for w in _PLACEHOLDER_WORDS))
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
    if _PLACEHOLDER_RE.search(low):
        return True
    return len(v) >= 6 and len(set(low)) <= 3


_ASCII_LOWER: Final = frozenset(string.ascii_lowercase)
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
    return len(value) >= min_len and _char_classes(value) >= 2 and shannon_entropy(value) >= min_entropy


# -- fast matching -------------------------------------------------------------------------------
#
# Python's ``re`` scans quickly for a literal prefix but tries every position for a pattern that
# starts with a look-behind or a case-insensitive alternation. The helpers below find the few
# positions where a match can start with ``str.find`` and run the pattern only there, which gives
# exactly the matches of ``finditer``: matches are tried left to right and a position inside the
# previous match is skipped, as ``finditer`` does.

#: Characters that ``re.IGNORECASE`` equates with an ASCII letter but ``str.lower`` does not map to it.
_CASEFOLD_ODD: Final = ("\u0131", "\u017f")


def _lower_aligned(text: str, lower: str) -> bool:
    """Whether a case-insensitive ASCII literal matches ``text`` exactly where it occurs in ``lower``."""
    return len(lower) == len(text) and not any(c in text for c in _CASEFOLD_ODD)


def _find_all(hay: str, words: tuple[str, ...]) -> list[int]:
    """Sorted start offsets of every occurrence of any of ``words`` in ``hay``."""
    out: list[int] = []
    for word in words:
        pos = hay.find(word)
        while pos >= 0:
            out.append(pos)
            pos = hay.find(word, pos + 1)
    if len(words) > 1:
        out.sort()
    return out


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


def _finditer_ci(rx: re.Pattern[str], text: str, lower: str, anchors: tuple[str, ...]) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a case-insensitive pattern whose matches start with one of ``anchors``
    (lower case), found in ``lower``; plain ``finditer`` when ``lower`` is not aligned with ``text``."""
    if not _lower_aligned(text, lower):
        return rx.finditer(text)
    return _match_at(rx, text, _find_all(lower, anchors))


def _finditer_before(
    rx: re.Pattern[str], back: re.Pattern[str], text: str, anchor: str, reach: int
) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a pattern that starts with a run of at most ``reach`` characters
    ending at ``anchor``: ``back`` (that run, anchored at its end with ``\\Z``) finds the run's start."""
    last = 0
    for q in _find_all(text, (anchor,)):
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
_Detector = Callable[[str, str], Iterable[_Cand]]


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    #: Any of these in the text (case-sensitive) or, if ``lower``, in its lower-case copy.
    triggers: tuple[str, ...]
    detect: _Detector
    lower: bool = False


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

    def detect(text: str, _lower: str) -> Iterable[_Cand]:
        for m in rx.finditer(text):
            value = m.group(group)
            if not value or (check is not None and not check(value)):
                continue
            yield m.start(group), m.end(group), kind, priority

    return detect


def _token_check(prefix_len: int, *, min_entropy: float = 3.0) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        body = value[prefix_len:]
        return not is_placeholder(body) and shannon_entropy(body) >= min_entropy

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
        and shannon_entropy(body) >= 3.5
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


#: Byte signature for the AWS secret gate: ``a`` for an ASCII ``[A-Za-z0-9/+]``, ``.`` otherwise.
_AWS_SIG: Final = bytes(
    ord("a") if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "/+") else 46 for b in range(256)
)
_AWS_RUN: Final = b"a" * 40


def _aws_secret(text: str, lower: str) -> Iterable[_Cand]:
    if _AWS_RUN not in text.encode("utf-8", "surrogatepass").translate(_AWS_SIG):  # no 40-character run
        return
    if _AWS_CONTEXT_RE.search(lower) is None:  # no context anywhere: no key can qualify
        return
    for m in _AWS_SECRET_RE.finditer(text):
        value = m.group()
        if value in _AWS_EXAMPLES or "EXAMPLE" in value or _char_classes(value) < 3:
            continue
        if not any(c.isupper() for c in value) or not any(c.islower() for c in value):
            continue
        if _AWS_CONTEXT_RE.search(lower, max(0, m.start() - 160), m.start()) is None:
            continue
        if not is_placeholder(value) and shannon_entropy(value) >= 4.0:
            yield m.start(), m.end(), "aws_secret_access_key", _P_CONTEXT


_TWILIO_TOKEN_RE: Final = re.compile(r"[0-9a-f](?<![A-Za-z0-9].)[0-9a-f]{31}(?![A-Za-z0-9])")
_TWILIO_CONTEXT_RE: Final = re.compile(r"twilio|auth_?token|authtoken|ac(?<![a-z0-9]ac)[0-9a-f]{32}")


_TWILIO_AC_RE: Final = re.compile(r"ac[0-9a-f]{32}")


def _twilio_token(text: str, lower: str) -> Iterable[_Cand]:
    # every context match contains "twilio", "auth" or an ``ac`` + 32 hex run: test those first
    if "twilio" not in lower and "auth" not in lower and _TWILIO_AC_RE.search(lower) is None:
        return
    if _TWILIO_CONTEXT_RE.search(lower) is None:  # no context anywhere: no token can qualify
        return
    for m in _TWILIO_TOKEN_RE.finditer(text):
        if text[max(0, m.start() - 2) : m.start()] == "AC":
            continue
        if _TWILIO_CONTEXT_RE.search(lower, max(0, m.start() - 160), m.start()) is None:
            continue
        if not is_placeholder(m.group()) and shannon_entropy(m.group()) >= 3.0:
            yield m.start(), m.end(), "twilio_auth_token", _P_CONTEXT


_PEM_BEGIN_RE: Final = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE: Final = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_LINE_RE: Final = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z-]+:.*|\\n|)[ \t]*\r?(?:\n|\\n|$)")


def _private_key(text: str, _lower: str) -> Iterable[_Cand]:
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


def _jwt(text: str, _lower: str) -> Iterable[_Cand]:
    for m in _JWT_RE.finditer(text):
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


def _basic_auth(text: str, lower: str) -> Iterable[_Cand]:
    if "://" in text:
        for m in _finditer_before(_URL_AUTH_RE, _SCHEME_BACK_RE, text, "://", 21):
            pw = m.group(2)
            if not is_placeholder(pw) and not is_placeholder(m.group(1) + pw) and pw.lower() not in ("pass", "pwd"):
                yield m.start(2), m.end(2), "basic_auth", _P_STRUCT
    if "basic" in lower:
        for m in _finditer_ci(_BASIC_HEADER_RE, text, lower, ("basic",)):
            value = m.group(1)
            if not is_placeholder(value) and _char_classes(value) >= 2:
                yield m.start(1), m.end(1), "basic_auth", _P_STRUCT
    if "-u" in text or "--user" in text:
        for m in _CURL_USER_RE.finditer(text):
            pw = m.group(2)
            if not is_placeholder(pw) and len(pw) >= 4:
                yield m.start(2), m.end(2), "basic_auth", _P_STRUCT


_BEARER_RE: Final = re.compile(
    r"(?i:\bbearer|authorization:\s*token|\bx-api-key:|\bapi-key:|\bx-auth-token:)[ \t]+"
    r"([A-Za-z0-9\-._~+/]{16,}=*)(?![A-Za-z0-9\-._~+/=])"
)


_BEARER_ANCHORS: Final = ("bearer", "authorization:", "x-api-key:", "api-key:", "x-auth-token:")


def _bearer(text: str, lower: str) -> Iterable[_Cand]:
    for m in _finditer_ci(_BEARER_RE, text, lower, _BEARER_ANCHORS):
        value = m.group(1)
        if not is_placeholder(value) and _char_classes(value) >= 2 and shannon_entropy(value) >= 3.0:
            yield m.start(1), m.end(1), "bearer_token", _P_STRUCT - 5


_AZURE_RE: Final = re.compile(
    r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=([A-Za-z0-9+/%]{20,}(?:={1,2}|%3D){0,2})"
)


_AZURE_ANCHORS: Final = ("accountkey=", "sharedaccesskey=", "sharedaccesssignature=", "sig=")


def _azure(text: str, lower: str) -> Iterable[_Cand]:
    for m in _finditer_ci(_AZURE_RE, text, lower, _AZURE_ANCHORS):
        if not is_placeholder(m.group(1)) and shannon_entropy(m.group(1)) >= 3.5:
            yield m.start(1), m.end(1), "azure_connection_string", _P_SPECIFIC


_NPM_AUTH_RE: Final = re.compile(r"_auth(?:Token)?\s*=\s*['\"]?([^\s'\"]{8,})")


def _npm_auth(text: str, _lower: str) -> Iterable[_Cand]:
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
#: Assignments are found from anchor words (``str.find`` on the lower-case text is much faster
#: than a regex over every position); the tail regex then matches at the anchor and the name is
#: the identifier that ends there.
_ANCHORS: Final = ("pass", "pwd", "secret", "key", "token", "cred", "pin")
_ASSIGN_TAIL_RE: Final = re.compile(
    r"(?i:password|passwd|passphrase|pass|pwd|secrets?|key|token|credentials?|cred|pin)(?![A-Za-z0-9_\-])[\"'`]?"
    r"(?:[ \t]*(?::=|=>|=|:|\bis\b:?)[ \t]*|[ \t]*,[ \t]*(?=[\"']))"
    r"(?:\"((?:[^\"\\\n]|\\.){1,512})\"|'([^'\n]{1,512})'|`([^`\n]{1,512})`|([^\s\"'`,;)}\]][^\s\"'`,;)}]{0,511}))"
)
_ANCHOR_RE_I: Final = re.compile("|".join(_ANCHORS), re.IGNORECASE)
_NAME_CHARS_STR: Final = string.ascii_letters + string.digits + "_.-"
_NAME_END_RE: Final = re.compile(r"(?:^|(?<=[_.\-])|(?<=[a-z0-9])(?=[A-Z]))(?i:" + _PW_NAME + r")$")
_CLI_PW_RE: Final = re.compile(
    r"-(?<![A-Za-z0-9-].)-?(?:password|passwd|pass|token|api-key|secret|client-secret)[ =]['\"]?([^\s'\"]{1,256})"
)
_PASSWORD_WORDS: Final = ("pass", "pwd", "pin")
_CODE_REF_RE: Final = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+(?:\(.*)?|[A-Za-z_]\w*\(.*|[a-z]+(?:_[a-z]+)+")
_ENV_NAME_RE: Final = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_PATHLIKE_RE: Final = re.compile(r"(?:/|\./|~/|[A-Za-z]:\\)[\w./\\-]*|[\w.-]+\.(?:txt|pem|key|json|ya?ml|env|cfg|ini)")


def _assignment_value_ok(name: str, value: str, quoted: bool) -> str | None:
    """The kind to report for ``name = value``, or None if the value is not a secret."""
    low_name = name.lower()
    if is_placeholder(value) or len(value) < 4:
        return None
    if _PATHLIKE_RE.fullmatch(value) or value.isdigit() and len(value) < 6 and "pin" not in low_name:
        return None
    if not quoted and (_CODE_REF_RE.fullmatch(value) or _ENV_NAME_RE.fullmatch(value)):
        return None
    if quoted and _ENV_NAME_RE.fullmatch(value):
        return None
    if value.endswith((":", "(")) or value.startswith(("http://", "https://")) and "@" not in value:
        return None
    is_password = any(w in low_name for w in _PASSWORD_WORDS) or low_name.endswith(("secret", "secrets", "cred"))
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


def _anchor_positions(text: str, lower: str) -> Iterable[int]:
    if len(lower) != len(text):  # a few characters change length when lowered
        yield from (m.start() for m in _ANCHOR_RE_I.finditer(text))
        return
    for word in _ANCHORS:
        pos = lower.find(word)
        while pos >= 0:
            yield pos
            pos = lower.find(word, pos + 1)


def _assignments(text: str, lower: str) -> Iterable[_Cand]:
    # The rule runs ungated: when ``lower`` is aligned, no anchor word means no match at all (the
    # option names of ``_CLI_PW_RE`` contain one too); otherwise apply the trigger test here.
    if len(lower) != len(text) and not any(w in lower for w in _ANCHORS):
        return
    seen: set[int] = set()
    for ks in _anchor_positions(text, lower):
        m = _ASSIGN_TAIL_RE.match(text, ks)
        if m is None:
            continue
        window = text[max(0, ks - 64) : ks]
        ns = ks - (len(window) - len(window.rstrip(_NAME_CHARS_STR)))  # name characters ending at ks
        name_m = _NAME_END_RE.search(text[ns : _name_end(text, ks)])
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
            if " is" in lower[ks:start] and not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
                continue  # prose: "the password is Tr0ub4dor&3" needs a value that looks made up
        kind = _assignment_value_ok(name, value, gi != 4)
        if kind is not None:
            yield start, end, kind, _P_ASSIGN if kind == "password_assignment" else _P_GENERIC
    if _CLI_GATE_RE.search(lower) is not None:  # "-p", "--t", "--s", "--a" or "--c"
        for m in _CLI_PW_RE.finditer(text):
            value = m.group(1)
            if not is_placeholder(value) and len(value) >= 4 and not value.startswith("-"):
                yield m.start(1), m.end(1), "password_assignment", _P_ASSIGN


#: ``\w`` is ``str.isalnum()`` or ``_``, so this is the run of ``isalnum()``, ``_`` and ``-``.
_NAME_FWD_RE: Final = re.compile(r"[\w\-]*")
_CLI_GATE_RE: Final = re.compile(r"-p|--[tsac]")


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


def _email(text: str, _lower: str) -> Iterable[_Cand]:
    for m in _finditer_before(_EMAIL_RE, _LOCAL_BACK_RE, text, "@", 64):
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


#: Byte signature of an ASCII text for ``_NUM_RE``: ``S`` for a character a match can start with
#: (``[+(\d]``), ``W`` for one its look-behind rejects (``[\w.\-/:+#(]``, ASCII ``\w``), space otherwise.
_NUM_SIG: Final = bytes(
    ord("S")
    if chr(b) in "+(0123456789"
    else ord("W")
    if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_.-/:#")
    else 32
    for b in range(256)
)


def _num_matches(text: str) -> Iterator[re.Match[str]]:
    return _sig_matches(_NUM_RE, _NUM_SIG, text)


def _sig_matches(rx: re.Pattern[str], table: bytes, text: str) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a pattern that starts with one character and a look-behind on the
    one before it, given a signature ``table``: ``S`` for an ASCII character a match can start
    with, ``W`` for one the look-behind rejects, a space for the rest. The regex runs only where a
    match can start: an ``S`` at the start or after a space (a non-ASCII character, ``?`` after
    encoding, counts as a space), and at every non-ASCII character (it may be a digit of another
    script)."""
    raw = text.encode("ascii", "replace")  # one byte per character
    sig = raw.translate(table)
    starts = [0] if sig[:1] == b"S" else []
    p = sig.find(b" S")
    while p >= 0:
        starts.append(p + 1)
        p = sig.find(b" S", p + 2)
    if not text.isascii():
        p = raw.find(b"?")
        while p >= 0:
            starts.append(p)
            p = raw.find(b"?", p + 1)
        starts = sorted(set(starts))
    return _match_at(rx, text, starts)


def _numbers(text: str, _lower: str) -> Iterable[_Cand]:
    for m in _num_matches(text):
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


def _classify_number(text: str, start: int, raw: str) -> Iterable[_Cand]:
    end = start + len(raw)
    digits = raw.translate(_DROP_SEPARATORS)  # raw holds only \d characters and these separators
    before = text[max(0, start - 40) : start]
    line_before = before.rsplit("\n", 1)[-1]
    near = line_before[-20:]
    # SSN
    sm = _SSN_RE.fullmatch(raw)
    if sm and (sm.group(2) == "-" or _SSN_WORD_RE.search(line_before)):
        area, group, serial = sm.group(1), sm.group(3), sm.group(4)
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            yield start, end, "ssn", _P_PII["ssn"]
            return
    # card
    if 13 <= len(digits) <= 19 and luhn_valid(digits) and _iin_plausible(digits):
        groups = tuple(len(g) for g in _GROUP_SEP_RE.split(raw))
        plain = raw.isdigit()
        if (plain or groups in _CARD_GROUPS) and not (
            _NEG_CONTEXT_RE.search(near) and not _CARD_CONTEXT_RE.search(line_before)
        ):
            yield start, end, "credit_card", _P_PII["credit_card"]
            return
    # dates, times, versions, decimals are not phone numbers
    if _DATE_LIKE_RE.search(raw) or _DIGITS_DOTS_RE.fullmatch(raw) and raw.count(".") != 2:
        return
    if _DOTTED_QUAD_RE.search(raw):  # dotted quad or version
        return
    context = _PHONE_CONTEXT_RE.search(line_before[-30:]) is not None
    if _NEG_CONTEXT_RE.search(near) and not context and not raw.startswith("+"):
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


#: Every ``_IPV4_RE`` match contains this (a literal-first pattern, so ``re`` skips ahead fast).
_IPV4_GATE_RE: Final = re.compile(r"\.\d{1,3}\.\d{1,3}\.")
#: Every ``_IPV6_RE`` match starts with ``[23]``, three hex digits and a colon: found from the colon.
_IPV6_GATE_RE: Final = re.compile(r":(?<=[23][0-9a-fA-F]{3}:)")


#: Signature table for ``_IPV4_RE`` (see :func:`_sig_matches`): it starts with ``\d`` after no ``[\w.\-]``.
_IPV4_SIG: Final = bytes(
    ord("S")
    if chr(b).isdigit() and b < 128
    else ord("W")
    if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_.-")
    else 32
    for b in range(256)
)


def _ip(text: str, lower: str) -> Iterable[_Cand]:
    ipv4 = _sig_matches(_IPV4_RE, _IPV4_SIG, text) if _IPV4_GATE_RE.search(text) is not None else ()
    for m in ipv4:
        if _VERSION_BEFORE_RE.search(text, max(0, m.start() - 40), m.start()):
            continue
        try:
            addr = ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if addr.is_global:
            yield m.start(), m.end(), "ip", _P_PII["ip"]
    if ("::" in text or text.count(":") >= 7) and _IPV6_GATE_RE.search(text) is not None:
        for m in _IPV6_RE.finditer(text):
            try:
                addr6 = ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            if addr6.is_global:
                yield m.start(), m.end(), "ip", _P_PII["ip"]


_IBAN_RE: Final = re.compile(
    r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)


#: Byte signature of a text for the IBAN gate: ``A`` for an upper-case ASCII letter, ``0`` for an
#: ASCII digit or any byte of a non-ASCII character (``\\d`` also matches other scripts' digits),
#: the space kept, ``.`` for everything else.
_IBAN_SIG: Final = bytes(
    ord("A") if 65 <= b <= 90 else ord("0") if 48 <= b <= 57 or b >= 128 else 32 if b == 32 else ord(".")
    for b in range(256)
)
#: Every ``_IBAN_RE`` match shows this in the signature (literal first, so ``re`` skips ahead fast).
_IBAN_GATE_RE: Final = re.compile(rb"AA00 ?[A0]{4} ?[A0]{4}")


def _iban(text: str, _lower: str) -> Iterable[_Cand]:
    if _IBAN_GATE_RE.search(text.encode("utf-8", "surrogatepass").translate(_IBAN_SIG)) is None:
        return
    for m in _IBAN_RE.finditer(text):
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


#: Every way a ``_DOB_RE`` match can start, lower-case.
_DOB_ANCHORS: Final = ("dob", "d.o", "do.", "date", "data", "birth", "born", "geb", "fecha", "n\u00e9")


def _dob(text: str, lower: str) -> Iterable[_Cand]:
    for m in _finditer_ci(_DOB_RE, text, lower, _DOB_ANCHORS):
        yield m.start(1), m.end(1), "dob", _P_PII["dob"]


_ANTHROPIC = rf"sk-ant-(?<![{_T}]sk-ant-)(?:api|admin|oat|ort|sid)\d\d-[{_T}]{{20,}}"
_RULES: Final[tuple[_Rule, ...]] = (
    _Rule("private_key", ("PRIVATE KEY",), _private_key),
    _Rule("anthropic_api_key", ("sk-ant-",), _simple("anthropic_api_key", _ANTHROPIC, check=_token_check(13))),
    _Rule(
        "openai_api_key",
        ("sk-",),
        _simple("openai_api_key", rf"sk-(?<![{_T}]sk-)[{_T}]{{20,}}(?![{_T}])", check=_openai_check),
    ),
    _Rule(
        "aws_access_key_id",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        _simple(
            "aws_access_key_id", r"A(?<![A-Z0-9]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Z0-9])", check=_aws_id_check
        ),
    ),
    _Rule("aws_secret_access_key", ("aws", "secret_access", "secretaccess", "akia", "asia"), _aws_secret, lower=True),
    _Rule(
        "google_api_key",
        ("AIza",),
        _simple("google_api_key", rf"AIza(?<![{_T}]AIza)[{_T}]{{35}}(?![{_T}])", check=_token_check(4)),
    ),
    _Rule("azure_connection_string", ("accountkey=", "sharedaccess", "sig="), _azure, lower=True),
    _Rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _simple(
            "github_token",
            r"g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{50,})(?![A-Za-z0-9_])",
            check=_github_check,
        ),
    ),
    _Rule(
        "gitlab_token",
        ("glpat-", "glrt-", "gldt-", "glptt-", "glft-", "glsoat-", "glcbt-", "gloas-"),
        _simple(
            "gitlab_token",
            rf"gl(?<![{_T}]gl)(?:pat|rt|dt|ptt|ft|soat|cbt|oas)-[{_T}]{{20,}}(?![{_T}])",
            check=lambda v: _token_check(v.index("-") + 1)(v),
        ),
    ),
    _Rule(
        "slack_token",
        ("xox", "xapp-"),
        _simple(
            "slack_token",
            r"x(?<![A-Za-z0-9]x)(?:ox[abposre]|app)-[A-Za-z0-9\-]{10,250}(?![A-Za-z0-9\-])",
            check=lambda v: _token_check(5)(v) and any(c.isdigit() for c in v),
        ),
    ),
    _Rule(
        "slack_webhook",
        ("hooks.slack.com",),
        _simple(
            "slack_webhook",
            r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{12,}",
            priority=_P_SPECIFIC + 2,
            check=lambda v: not is_placeholder(v.rsplit("/", 1)[1]),
        ),
    ),
    _Rule(
        "stripe_key",
        ("_live_", "_test_", "whsec_"),
        _simple(
            "stripe_key",
            r"(?:[sr]k_(?<![A-Za-z0-9_].._)(?:live|test)_[A-Za-z0-9]{10,}|whsec_(?<![A-Za-z0-9_]whsec_)[A-Za-z0-9]{24,})"
            r"(?![A-Za-z0-9_])",
            check=lambda v: _token_check(v.index("_", 3) + 1 if not v.startswith("whsec") else 6)(v),
        ),
    ),
    _Rule(
        "twilio_account_sid",
        ("AC",),
        _simple(
            "twilio_account_sid",
            r"AC(?<![A-Za-z0-9]AC)[0-9a-f]{32}(?![A-Za-z0-9])",
            check=lambda v: not is_placeholder(v[2:]) and shannon_entropy(v[2:]) >= 3.0,
        ),
    ),
    _Rule("twilio_auth_token", ("twilio", "auth_token", "authtoken", "ac"), _twilio_token, lower=True),
    _Rule(
        "sendgrid_api_key",
        ("SG.",),
        _simple(
            "sendgrid_api_key",
            rf"SG\.(?<![{_T}.]SG\.)[{_T}]{{16,32}}\.[{_T}]{{30,64}}(?![{_T}])",
            check=_token_check(3),
        ),
    ),
    _Rule(
        "npm_token",
        ("npm_",),
        _simple("npm_token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9_])", check=_token_check(4)),
    ),
    _Rule("npm_token", ("_auth",), _npm_auth),
    _Rule(
        "pypi_token",
        ("pypi-",),
        _simple("pypi_token", rf"pypi-AgE(?<![{_T}]pypi-AgE)[{_T}]{{50,}}", check=_token_check(5)),
    ),
    _Rule("jwt", ("eyJ",), _jwt),
    _Rule("basic_auth", ("://", "basic", "-u", "--user"), _basic_auth, lower=True),
    _Rule("bearer_token", ("bearer", "authorization", "api-key", "auth-token"), _bearer, lower=True),
    _Rule("password_assignment", ("",), _assignments, lower=True),
    _Rule("email", ("@",), _email),
    _Rule("ip", (".", ":"), _ip),
    _Rule("iban", ("",), _iban),
    _Rule(
        "dob",
        ("dob", "d.o.b", "birth", "born", "geburt", "geboren", "nacimiento", "naissance", "né", "nascita", "geb."),
        _dob,
        lower=True,
    ),
)
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

    def detect(text: str, _lower: str) -> Iterable[_Cand]:
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


_Gate = tuple["str | re.Pattern[str]", ...]


def _gate(triggers: tuple[str, ...]) -> _Gate | None:
    """How to test whether any of ``triggers`` occurs: None (always), else tests of which one must
    hit. Triggers that contain another are dropped (implied by it); those sharing a first character
    become one regex when ``re`` can skip ahead fast (their common prefix is two characters or a
    rare one; faster than one ``in`` per trigger), else each is tested with ``in``."""
    if "" in triggers:
        return None
    kept = [t for t in dict.fromkeys(triggers) if not any(o != t and o in t for o in triggers)]
    groups: dict[str, list[str]] = {}
    for t in kept:
        groups.setdefault(t[0], []).append(t)
    tests: list[str | re.Pattern[str]] = []
    for g in groups.values():
        prefix = g[0] if len(g) == 1 else _common_prefix(g)
        if len(g) > 1 and (len(prefix) >= 2 or prefix[0] in _RARE_FIRST):
            tests.append(re.compile("|".join(re.escape(t) for t in sorted(g, key=len, reverse=True))))
        else:
            tests.extend(g)
    # short triggers first: the likeliest to occur, and the test stops at the first hit
    return tuple(sorted(tests, key=lambda t: len(t) if isinstance(t, str) else 99))


#: Characters rare enough in notes that ``re`` skipping to each occurrence beats several ``in`` tests.
_RARE_FIRST: Final = frozenset(string.ascii_uppercase + "gjkqvxyz")


def _common_prefix(words: list[str]) -> str:
    first, last = min(words), max(words)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


class Scrubber:
    """Finds and redacts sensitive data according to a :class:`ScrubSettings` policy."""

    __slots__ = ("_settings", "_rules", "_gates", "_numeric", "_allow", "_policy", "_active")

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
        rules += [_Rule(c.kind, ("",), _custom_detector(c)) for c in settings.custom_rules if c.kind in active]
        self._rules: tuple[_Rule, ...] = tuple(rules)
        self._gates: tuple[tuple[bool, _Gate | None, _Detector], ...] = tuple(
            (r.lower, _gate(r.triggers), r.detect) for r in rules
        )
        self._numeric = bool(active & _NUMERIC_KINDS)
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
        lower = text.lower()
        cands: list[_Cand] = []
        for use_lower, gate, detect in self._gates:
            if gate is None:
                cands.extend(detect(text, lower))
                continue
            hay = lower if use_lower else text
            for test in gate:  # a plain loop: cheaper than any() over a generator
                if (test in hay) if type(test) is str else (test.search(hay) is not None):  # type: ignore[union-attr]
                    cands.extend(detect(text, lower))
                    break
        if self._numeric:
            cands.extend(_numbers(text, lower))
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
