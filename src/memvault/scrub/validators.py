"""Pure checks of candidate values: entropy, checksums (Luhn, IBAN, GitHub's CRC32, a JWT's
header, the DER start of a private key), placeholders, payment processors' test card numbers,
character classes, and the checks of each credential's body.

:func:`occurrences` and :func:`cover` (every occurrence of many values in one pass) live here too:
this is the one module of the package that imports ``ahocorasick``.
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
    "iban_length",
    "github_checksum_valid",
    "jwt_valid",
    "is_placeholder",
    "char_classes",
    "random_looking",
    "AWS_EXAMPLES",
    "TEST_CARD_NUMBERS",
    "is_test_card",
    "iin_plausible",
    "token_check",
    "openai_check",
    "github_check",
    "aws_id_check",
    "aws_secret_check",
    "hex_token_check",
    "azure_key_check",
    "jwt_check",
    "occurrences",
    "cover",
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


def iban_length(country: str) -> int | None:
    """The length of an IBAN of ``country`` (two letters, either case); None for a country without IBANs."""
    return _IBAN_LENGTHS.get(country.upper())


def iban_valid(value: str) -> bool:
    """Country length and ISO 7064 mod-97 check of an IBAN (spaces and hyphens ignored, either case)."""
    compact = value.replace(" ", "").replace("-", "").upper()
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
#
# A placeholder is a *whole value* of a documented placeholder shape: a template (``<YOUR_API_KEY>``,
# ``{{ token }}``, ``${DB_PASSWORD}``), a reference to a variable or a secret store (``$TOKEN``,
# ``os.environ["KEY"]``, ``vault:secret/x``), a masked or cut value (``****``, ``sk-...abcd``,
# ``xxxxxxxx1234``), a value made of placeholder words (``your-api-key-here``, ``changeme123``), a
# value of a handful of distinct characters, or one of the words that mean "no value". Nothing is
# decided by a word found *inside* a value: the random body of a real key may hold ``your``,
# ``here`` or ``xxxx`` by chance (45 in 200,000 random Anthropic keys did, with the old rule).

#: Words that make a value a placeholder when every word of it is one of these or of ``_KEY_WORDS``.
_PLACEHOLDER_WORDS: Final = frozenset(
    {
        "your", "yours", "my", "our", "here", "example", "examples", "placeholder", "redacted", "changeme",
        "change", "me", "dummy", "replace", "replaceme", "insert", "fixme", "todo", "tbd", "sample", "notreal",
        "not", "real", "fake", "test", "testing", "demo", "foo", "bar", "baz", "qux", "xyz", "abc", "abcd",
        "abcdef", "abcdefgh", "qwerty", "asdf", "none", "null", "empty", "mysecret", "mypassword",
    }
)  # fmt: skip
#: Words that name what a placeholder stands for (neutral on their own).
_KEY_WORDS: Final = frozenset(
    {
        "api", "key", "keys", "token", "tokens", "access", "id", "client", "app", "auth", "value", "string",
        "new", "actual", "prod", "production", "dev", "staging", "the", "with", "of", "for", "to", "in",
        "this", "that", "bot", "user", "username", "webhook", "signing", "private", "public", "account", "sid",
        "service", "org", "project", "pass", "pwd", "pat", "personal", "bearer", "jwt", "aws", "openai",
        "anthropic", "github", "gitlab", "slack", "stripe", "twilio", "sendgrid", "npm", "pypi", "google", "azure",
        "live", "sk", "pk", "rk", "ghp", "xoxb", "xoxp", "db", "database", "admin", "root", "master", "apikey",
        "secret", "password", "passwd", "super", "some", "random", "generated", "enter", "put", "paste", "goes",
    }
)  # fmt: skip
#: A word of a value: a run of lower-case letters, of upper-case letters (then lower-case ones), or of digits.
_WORD_RE: Final = re.compile(r"[A-Z]+[a-z]*|[a-z]+|[0-9]+")
#: Characters no token alphabet holds that mark a masked or cut value, or template syntax.
#: Whether a value holds any character of ``_MASK_MARKS`` (one search; random keys hold none).
_MARK_CHARS_RE: Final = re.compile("[.\u2026*\u2022\u25cf\u2588#${}%(]")
_MASK_MARKS: Final = ("...", "\u2026", "***", "\u2022", "\u25cf", "\u2588", "####", "${", "{{", "}}", "%(", "$(")
#: Whole values of a template shape: ``<...>``, ``[...]``, ``{...}``, ``(...)``.
_TEMPLATE_RE: Final = re.compile(r"<[^<>]*>|\[[^\[\]]*\]|\{[^{}]*\}|\([^()]*\)")
#: References to a variable or a secret store, as a whole value (or its start).
_REFERENCE_RE: Final = re.compile(
    r"(?:os\.)?(?:environ|getenv)\b|process\.env\b|ENV\[|env\(|secrets\.[A-Za-z_]|"
    r"(?:vault|env|ssm|secretsmanager|sm|op|awssm|gcpsm|azkv|keyvault|k8s|file):"
)
#: The longest value made of placeholder words (twelve words at most).
_MAX_WORDY: Final = 200
#: Runs of ``x`` (or ``X``) of this length or more stand for masked characters.
_X_RUN_RE: Final = re.compile(r"[xX]{3,}")

#: Whole values that mean "no value": checked case-insensitively after stripping quotes.
_NON_VALUES: Final[frozenset[str]] = frozenset(
    {
        "", "none", "null", "nil", "true", "false", "empty", "required", "optional", "string", "str", "bytes",
        "hidden", "masked", "redacted", "n/a", "na", "tbd", "todo", "unset", "undefined", "yes", "no", "on", "off",
        "env", "password", "passwd", "pass", "secret", "token", "apikey", "api_key", "key", "value", "test",
        "mysecret", "mypassword", "secretpassword", "supersecret", "foo", "bar", "foobar", "admin", "root",
        "default", "random", "generated", "auto", "prompt", "ask", "stdin", "-", "--", "?", "see", "set",
        "0123456789", "123456789", "12345678", "1234567890", "abcdefgh", "qwerty12", "qwertyuiop", "letmein",
    }
)  # fmt: skip
AWS_EXAMPLES: Final[frozenset[str]] = frozenset(
    {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AKIAI44QH8DHBEXAMPLE",
     "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"}
)  # fmt: skip


def is_placeholder(value: str) -> bool:
    """Whether ``value`` as a whole is a documented placeholder shape, not a secret.

    Args:
        value: the candidate value (surrounding quotes and blanks are ignored).

    Returns:
        True for a word that means "no value", one of AWS's published example keys, a reference
        (``$X``, ``%X%``, ``@x``, ``os.environ[...]``, ``vault:...``), a template (``<...>``,
        ``{{ x }}``), a masked or cut value (``***``, ``...``, ``…``, only ``x`` runs and digits), a
        value whose every word is a placeholder word or names a key, with at least one placeholder
        word and no more digits than letters (``your-api-key-here``, ``changeme123``), or six
        characters or more of at most three distinct ones. A word inside a random value never decides.
    """
    v = value.strip().strip("'\"`")
    low = v.lower()
    if low in _NON_VALUES or v in AWS_EXAMPLES or v.startswith(("$", "%", "@", "&", "*")):
        return True
    if _MARK_CHARS_RE.search(v) is not None and any(mark in v for mark in _MASK_MARKS):
        return True
    if v[:1] in "<[{(" and _TEMPLATE_RE.fullmatch(v) is not None or _REFERENCE_RE.match(v) is not None:
        return True
    if len(v) >= 6 and len(set(low[:16])) <= 3 and len(set(low)) <= 3:
        return True
    return _placeholder_words(v)


def _placeholder_words(v: str) -> bool:
    """Every word of ``v`` is a placeholder word, names a key, is digits or a run of ``x``; at
    least one is a placeholder word or an ``x`` run; no more digits than letters; nothing but
    ``-_.:/`` and blanks between them. Stops at the first other word (a random value's first)."""
    if len(v) > _MAX_WORDY:
        return False
    marked = False
    letters = digits = covered = 0
    for n, m in enumerate(_WORD_RE.finditer(v)):
        word = m.group()
        if n == 12:
            return False
        covered += len(word)
        if word.isdigit():
            digits += len(word)
            continue
        letters += len(word)
        low = word.lower()
        if low in _PLACEHOLDER_WORDS or _X_RUN_RE.fullmatch(word) is not None:
            marked = True
        elif low not in _KEY_WORDS:
            return False
    return marked and letters >= digits and covered + _separators(v) == len(v)


def _separators(v: str) -> int:
    return sum(v.count(c) for c in "-_.:/ ")


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


# -- the bodies of credentials -------------------------------------------------------------------
#
# Each check below answers for a whole, well-formed value of its kind; a random value of the real
# shape always passes (``tests/scrub/test_scrub_keys.py`` checks that on generated keys).


def token_check(prefix_len: int, *, min_entropy: float = 3.0) -> Callable[[str], bool]:
    """A check of a token's body (after ``prefix_len`` characters).

    Args:
        prefix_len: characters of fixed prefix before the random body.
        min_entropy: bits per character the body must reach.

    Returns:
        ``check(value)``: the body is not a placeholder and is random enough.
    """

    def check(value: str) -> bool:
        body = value[prefix_len:]
        return not is_placeholder(body) and entropy_at_least(body, min_entropy)

    return check


#: Project, service-account and admin keys of OpenAI: a word after ``sk-`` before the random body.
_OPENAI_SCOPES: Final = ("proj-", "svcacct-", "admin-", "None-")


def openai_check(value: str) -> bool:
    """An OpenAI key (``sk-``, not ``sk-ant-``) whose body is random: a digit or both letter cases,
    not a placeholder, at least 3.5 bits per character (4 without a digit)."""
    body = value[3:]
    if body.startswith("ant-"):
        return False
    for scope in _OPENAI_SCOPES:
        if body.startswith(scope):
            body = body[len(scope) :]
            break
    digit = not _ASCII_DIGITS.isdisjoint(body)
    cases = not _ASCII_LOWER.isdisjoint(body) and not _ASCII_UPPER.isdisjoint(body)
    if not (digit or cases) or is_placeholder(body):
        return False
    return entropy_at_least(body, 3.5 if digit else 4.0)


def github_check(value: str) -> bool:
    """A GitHub token with the right checksum, or whose body looks random."""
    if value.startswith("github_pat_"):
        return token_check(11)(value)
    if github_checksum_valid(value):
        return True
    return token_check(4, min_entropy=3.5)(value)


def aws_id_check(value: str) -> bool:
    """An AWS access key id that is not an example (AWS's documented ones, ``...EXAMPLE``), not a
    masked one, and not a run of a few characters."""
    body = value[4:]
    return (
        value not in AWS_EXAMPLES and not value.endswith("EXAMPLE") and len(set(body)) > 4 and not is_placeholder(body)
    )


def aws_secret_check(value: str) -> bool:
    """A 40-character AWS secret access key: both letter cases, not an example or a placeholder,
    at least 4 bits per character (a random one has about 4.9)."""
    if value in AWS_EXAMPLES or "EXAMPLE" in value:
        return False
    if _ASCII_LOWER.isdisjoint(value) or _ASCII_UPPER.isdisjoint(value):
        return False
    return not is_placeholder(value) and entropy_at_least(value, 4.0)


def azure_key_check(value: str) -> bool:
    """An Azure storage account key or SAS signature: not a placeholder, at least 3.5 bits per character."""
    return not is_placeholder(value) and entropy_at_least(value, 3.5)


def jwt_check(value: str) -> bool:
    """A JWT whose header decodes to JSON with ``alg`` and whose payload and signature are not a placeholder."""
    return jwt_valid(value) and not is_placeholder(value.split(".", 1)[1])


def hex_token_check(value: str) -> bool:
    """A random hex token (Twilio's auth token, an account sid's body): not a placeholder, at
    least 2.5 bits per character (32 random hex digits have about 3.6)."""
    return not is_placeholder(value) and entropy_at_least(value, 2.5)


# -- payment cards -----------------------------------------------------------------------------------

#: Card numbers that payment processors publish for testing (Stripe's and Visa's documentation, and
#: the test numbers of the common gateways): not a person's card wherever they appear.
TEST_CARD_NUMBERS: Final[frozenset[str]] = frozenset(
    {
        # Stripe (https://docs.stripe.com/testing)
        "2223003122003222", "3056930009020004", "3566002020360505", "36227206271667", "371449635398431",
        "378282246310005", "4000000000000002", "4000000000000010", "4000000000000028", "4000000000000036",
        "4000000000000044", "4000000000000069", "4000000000000077", "4000000000000101", "4000000000000119",
        "4000000000000127", "4000000000000259", "4000000000000341", "4000000000001976", "4000000000003055",
        "4000000000003063", "4000000000003097", "4000000000003220", "4000000000004954", "4000000000005423",
        "4000000000006975", "4000000000009979", "4000000000009987", "4000000000009995", "4000000400000008",
        "4000000560000004", "4000000760000002", "4000001240000000", "4000002080000001", "4000002460000001",
        "4000002500000003", "4000002500003155", "4000002760000016", "4000002760003184", "4000003720000278",
        "4000003800000008", "4000003800000446", "4000004840008001", "4000006430000009", "4000007240000007",
        "4000007520000008", "4000008260000000", "4000008400001629", "4000056655665556", "4100000000000019",
        "4242424242424242", "5105105105105100", "5200828282828210", "5555555555554444", "6011000990139424",
        "6011111111111117", "6011981111111113", "6200000000000005", "6200000000000047", "6205500000000000004",
        "6555900000604105",
        # Visa's, Adyen's and other gateways' published test numbers
        "2222400070000005", "2222410740360010", "2223000048400011", "2223520443560010", "30569309025904",
        "3088000000000017", "3530111333300000", "3566111111111113", "36006666333344", "36700102000000",
        "370000000000002", "378734493671000", "38520000023237", "4000020000000000", "4000160000000004",
        "4000640000000005", "4000760000000001", "4002690000000008", "4003550000000003", "4005519200000004",
        "4009348888881881", "4012000033330026", "4012000077777777", "4012888888881881", "4017340000000003",
        "4035501000000008", "4111111111111111", "4131840000000003", "4151500000000008", "4166676667666746",
        "4199350000000002", "4217651111111119", "4222222222222", "4400000000000008", "4444333322221111",
        "4484600000000004", "4500600000000061", "4571000000000001", "4607000000000009", "4646464646464644",
        "4977949494949497", "4988438843884305", "5018000000000009", "5100290029002909", "5101180000000007",
        "5136333333333335", "5424000000000015", "5431111111111111", "5454545454545454", "5500000000000004",
        "5555444433331111", "5555555555555557", "5577000055770004", "5585558555855583", "6011000000000012",
        "6011000995500000", "6011601160116611", "6243030000000001", "6250941006528599", "6304000000000000",
        "6445644564456445", "6703444444444449", "6759649826438453",
    }
)  # fmt: skip


def is_test_card(digits: str) -> bool:
    """Whether ``digits`` (a card number's digits only) is a published test card number."""
    return digits in TEST_CARD_NUMBERS


def iin_plausible(digits: str) -> bool:
    """Whether the leading digits (the issuer's number) and the length fit a card network."""
    n = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if two in (36, 38, 30):
        return n in (14, 16)
    if digits.startswith(("6011", "65")) or 644 <= int(digits[:3]) <= 649 or two == 62:
        return 16 <= n <= 19
    if two == 35:
        return 16 <= n <= 19
    return two in (50, 56, 57, 58, 63, 67) and 12 <= n <= 19


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


def cover(text: str, values: Collection[str], budget: int) -> list[tuple[int, int, str]]:
    """``(start, end, value)`` spans covering every occurrence in ``text`` of each of ``values``,
    in time and memory linear in ``len(text)`` and the values' total length.

    Overlapping occurrences are all reported (one Aho-Corasick pass) while there are at most
    ``budget`` of them; a text with more (a periodic text that many values match everywhere) is
    covered by the longest occurrence ending at each position instead, which covers the same
    characters: at most one per position, from an automaton walked in Python.

    Args:
        text: the text searched.
        values: non-empty strings.
        budget: how many occurrences to report before switching to one per position.

    Returns:
        Spans in no particular order, each with the value found there; their union is the union
        of all occurrences of all values.
    """
    out: list[tuple[int, int, str]] = []
    for pos, value in occurrences(text, values):
        out.append((pos, pos + len(value), value))
        if len(out) > budget:
            return _longest_per_end(text, values)
    return out


def _longest_per_end(text: str, values: Collection[str]) -> list[tuple[int, int, str]]:
    """For each end position, the longest of ``values`` ending there (an Aho-Corasick automaton
    whose states know the longest value that is a suffix of their string; linear)."""
    goto: list[dict[str, int]] = [{}]
    longest: list[str] = [""]  # the longest value that is a suffix of each state's string
    for value in values:
        state = 0
        for ch in value:
            nxt = goto[state].get(ch)
            if nxt is None:
                nxt = len(goto)
                goto[state][ch] = nxt
                goto.append({})
                longest.append("")
            state = nxt
        if len(value) > len(longest[state]):
            longest[state] = value
    fail = [0] * len(goto)
    queue = collections.deque(goto[0].values())
    while queue:
        state = queue.popleft()
        for ch, nxt in goto[state].items():
            f = fail[state]
            while f and ch not in goto[f]:
                f = fail[f]
            fail[nxt] = goto[f].get(ch, 0) if state else 0
            if len(longest[fail[nxt]]) > len(longest[nxt]):
                longest[nxt] = longest[fail[nxt]]
            queue.append(nxt)
    out: list[tuple[int, int, str]] = []
    state = 0
    for i, ch in enumerate(text):
        while state and ch not in goto[state]:
            state = fail[state]
        state = goto[state].get(ch, 0)
        if longest[state]:
            out.append((i + 1 - len(longest[state]), i + 1, longest[state]))
    return out
