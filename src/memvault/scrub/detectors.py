"""The detectors of the built-in rules: each finds the candidates of one kind (or a few) in a text.

A :data:`Detector` is called as ``detect(text, starts)`` with the offsets its rule's probes
reported (see :mod:`memvault.scrub.rules`) and yields :data:`Candidate` s. It runs its Python
regex only at those offsets (:func:`~memvault.scrub.prefilter.match_at`, which gives exactly the
matches of ``finditer``), then checks each value (:mod:`memvault.scrub.validators`: placeholders,
entropy, checksums) and, for shapes without a prefix, its context. The detectors of private key
blocks are in :mod:`memvault.scrub.rules`, next to their rules.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
import string
from collections.abc import Callable, Iterable
from typing import Final

from memvault.scrub.prefilter import class_table, finditer_before, match_at, run_starts
from memvault.scrub.validators import (
    aws_secret_check,
    azure_key_check,
    char_classes,
    entropy_at_least,
    hex_token_check,
    iban_length,
    iban_valid,
    iin_plausible,
    is_placeholder,
    is_test_card,
    jwt_check,
    luhn_valid,
    random_looking,
)
from memvault.scrub.versions import Memo, version_context

_ASCII_LETTERS: Final = frozenset(string.ascii_letters)


#: A candidate: (start, end, kind, priority).
Candidate = tuple[int, int, str, int]
#: ``detect(text, starts)``: ``starts[i]`` are the sorted offsets reported by the rule's
#: ``probes[i]`` (empty if none; ``[0]`` for a gate that matched).
Detector = Callable[[str, tuple[list[int], ...]], Iterable[Candidate]]


#: Token characters (the inside of a character class): the base64url alphabet.
URLSAFE_CHARS: Final = r"A-Za-z0-9_\-"
_T: Final = URLSAFE_CHARS  # (short, for the regexes)
# Priorities: higher wins the name of a merged finding.
P_BLOCK, P_SPECIFIC, P_STRUCT, P_CONTEXT, P_ASSIGN, P_GENERIC, P_CUSTOM = 100, 90, 80, 70, 50, 40, 60
P_PII: Final[dict[str, int]] = {
    "email": 35,
    "credit_card": 34,
    "iban": 34,
    "ssn": 33,
    "dob": 32,
    "ip": 31,
    "phone": 30,
}


# -- credentials ---------------------------------------------------------------------------------


def simple_detector(
    kind: str, pattern: str, priority: int = P_SPECIFIC, check: Callable[[str], bool] | None = None, group: int = 0
) -> Detector:
    """A detector reporting ``kind`` for each match of ``pattern`` at the reported offsets
    whose ``group`` passes ``check``."""
    rx = re.compile(pattern)

    def detect(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
        for m in match_at(rx, text, starts[0]):
            value = m.group(group)
            if not value or (check is not None and not check(value)):
                continue
            yield m.start(group), m.end(group), kind, priority

    return detect


_AWS_SECRET_RE: Final = re.compile(r"[A-Za-z0-9/+](?<![A-Za-z0-9/+=].)[A-Za-z0-9/+]{39}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT_RE: Final = re.compile(r"aws|secret_?access|secretaccesskey|(?:akia|asia)[a-z0-9]{16}")


_B64_TABLE: Final = class_table(string.ascii_letters + string.digits + "/+")
_HEX_TABLE: Final = class_table("0123456789abcdef")


def detect_aws_secret(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """40-character AWS secret keys with an AWS word or key id up to 160 characters before them,
    or an AWS word on their line up to 80 characters after them."""
    if not starts[0] or not starts[1]:  # no 40-character run, or no context anywhere
        return
    lower = ""
    for m in match_at(_AWS_SECRET_RE, text, run_starts(text, _B64_TABLE, 40)):
        value = m.group()
        if not aws_secret_check(value):
            continue
        lower = lower or text.lower()
        if _AWS_CONTEXT_RE.search(lower, max(0, m.start() - 160), m.start()) is None:
            after = lower.find("\n", m.end(), m.end() + 80)
            if _AWS_AFTER_RE.search(lower, m.end(), m.end() + 80 if after < 0 else after) is None:
                continue
        yield m.start(), m.end(), "aws_secret_access_key", P_CONTEXT


#: An AWS word after a secret, on its line.
_AWS_AFTER_RE: Final = re.compile(r"\baws\b|secret[ _]?access")
_TWILIO_TOKEN_RE: Final = re.compile(r"[0-9a-f](?<![A-Za-z0-9].)[0-9a-f]{31}(?![A-Za-z0-9])")
#: Twilio's name, an account sid or an auth token label, up to 160 characters before a token.
_TWILIO_NEAR_RE: Final = re.compile(r"twilio|auth[ _\-]?token|ac(?<![a-z0-9]ac)[0-9a-f]{32}")
#: The label of an identifier or a digest just before a hex run: a trace id, not a token.
_HEX_ID_LABEL_RE: Final = re.compile(
    r"(?:trace|span|request|correlation|session|message|event|commit|build|object|\bid|md5|sha\d*|hash|etag|"
    r"checksum|digest|fingerprint|uuid)[\w \-]{0,12}[:=#]?[ \t`'\"]*$"
)


def detect_twilio_token(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """32-hex Twilio auth tokens up to 160 characters after Twilio's name, an auth token label or
    an account sid; not right after the label of an id or a digest (``trace id 4bf9...``)."""
    if not starts[0] or not starts[1]:  # no 32-hex run, or no context anywhere
        return
    lower = ""
    for m in match_at(_TWILIO_TOKEN_RE, text, run_starts(text, _HEX_TABLE, 32)):
        if text[max(0, m.start() - 2) : m.start()] == "AC":
            continue
        lower = lower or text.lower()
        line_start = lower.rfind("\n", max(0, m.start() - 160), m.start()) + 1 or max(0, m.start() - 160)
        if _HEX_ID_LABEL_RE.search(lower, max(line_start, m.start() - 40), m.start()) is not None:
            continue
        if _TWILIO_NEAR_RE.search(lower, max(0, m.start() - 160), m.start()) is None:
            continue
        if hex_token_check(m.group()):
            yield m.start(), m.end(), "twilio_auth_token", P_CONTEXT


_JWT_RE: Final = re.compile(rf"eyJ(?<![{_T}.]eyJ)[{_T}]{{8,}}\.[{_T}]{{2,}}\.[{_T}]*(?![{_T}.])")


def detect_jwt(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """JWTs whose header decodes to JSON with ``alg``."""
    for m in match_at(_JWT_RE, text, starts[0]):
        value = m.group()
        if jwt_check(value):
            yield m.start(), m.end(), "jwt", P_STRUCT


_URL_AUTH_RE: Final = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://([^\s:@/?#\[\]\"'<>`]{1,128}):([^\s@/\"'<>`]{1,256})@"
    r"(?=[A-Za-z0-9\[])"
)
_BASIC_HEADER_RE: Final = re.compile(r"(?i:\bbasic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_CURL_USER_RE: Final = re.compile(r"(?:\s-u|--user)[ =]?['\"]?([^\s:'\"$]{1,64}):([^\s'\"]{1,128})")


_SCHEME_BACK_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,20}\Z")


def detect_basic_auth(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Passwords in URLs (``scheme://user:pw@``), ``Basic`` headers and ``curl -u``; URLs only
    if a URL with a password can be in the text (``starts[3]``)."""
    if starts[0] and starts[3]:
        for m in finditer_before(_URL_AUTH_RE, _SCHEME_BACK_RE, text, starts[0], 21):
            pw = m.group(2)
            if not is_placeholder(pw) and not is_placeholder(m.group(1) + pw) and pw.lower() not in ("pass", "pwd"):
                yield m.start(2), m.end(2), "basic_auth", P_STRUCT
    if starts[1]:
        for m in match_at(_BASIC_HEADER_RE, text, starts[1]):
            value = m.group(1)
            if not is_placeholder(value) and char_classes(value) >= 2:
                yield m.start(1), m.end(1), "basic_auth", P_STRUCT
    if starts[2]:
        for m in match_at(_CURL_USER_RE, text, starts[2]):
            pw = m.group(2)
            if not is_placeholder(pw) and len(pw) >= 4:
                yield m.start(2), m.end(2), "basic_auth", P_STRUCT


_BEARER_RE: Final = re.compile(
    r"(?i:\bbearer|authorization:\s*token|\bx-api-key:|\bapi-key:|\bx-auth-token:)[ \t]+"
    r"([A-Za-z0-9\-._~+/]{16,}=*)(?![A-Za-z0-9\-._~+/=])"
)


def detect_bearer(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Tokens after ``Bearer``, ``Authorization: token`` and API key headers."""
    for m in match_at(_BEARER_RE, text, starts[0]):
        value = m.group(1)
        if not is_placeholder(value) and char_classes(value) >= 2 and entropy_at_least(value, 3.0):
            yield m.start(1), m.end(1), "bearer_token", P_STRUCT - 5


_AZURE_RE: Final = re.compile(
    r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=([A-Za-z0-9+/%]{20,}(?:={1,2}|%3D){0,2})"
)


def detect_azure(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """The key or signature of an Azure connection string."""
    for m in match_at(_AZURE_RE, text, starts[0]):
        if azure_key_check(m.group(1)):
            yield m.start(1), m.end(1), "azure_connection_string", P_SPECIFIC


_NPM_AUTH_RE: Final = re.compile(r"_auth(?:Token)?\s*=\s*['\"]?([^\s'\"]{8,})")


def detect_npm_auth(text: str, _starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """``_auth`` / ``_authToken`` values of an ``.npmrc``."""
    for m in _NPM_AUTH_RE.finditer(text):
        if not is_placeholder(m.group(1)):
            yield m.start(1), m.end(1), "npm_token", P_SPECIFIC


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
TAIL_WORDS: Final = (
    "password", "passwd", "passphrase", "pass", "pwd", "secret", "secrets", "key", "token", "credential",
    "credentials", "cred", "pin",
)  # fmt: skip
_ASSIGN_TAIL_RE: Final = re.compile(
    r"(?i:password|passwd|passphrase|pass|pwd|secrets?|key|token|credentials?|cred|pin)(?![A-Za-z0-9_\-])[\"'`]?"
    r"(?:[ \t]*(?::=|=>|=|:|\bis\b:?)[ \t]*|[ \t]*,[ \t]*(?=[\"']))"
    r"(?:\"((?:[^\"\\\n]|\\.){1,512})\"|'([^'\n]{1,512})'|`([^`\n]{1,512})`|([^\s\"'`,;)}\]][^\s\"'`,;)}]{0,511}))"
)
_NAME_CHARS_STR: Final = string.ascii_letters + string.digits + "_.-"
#: The longest value ``_ASSIGN_TAIL_RE`` takes (a value that long may go on past it).
_MAX_VALUE: Final = 512
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


def _code_reference(value: str) -> bool:
    """A reference in code (``settings.db_password``, ``get_secret(...)``), not a value: no part of a
    dotted name mixes lower case, upper case and digits as generated values do."""
    if _CODE_REF_RE.fullmatch(value) is None:
        return False
    return not any(len(part) >= 8 and char_classes(part) >= 3 for part in value.split("(", 1)[0].split("."))


def _assignment_value_ok(name: str, value: str, quoted: bool) -> str | None:
    """The kind to report for ``name = value``, or None if the value is not a secret."""
    low_name = name.lower()
    if is_placeholder(value) or len(value) < 4:
        return None
    if _pathlike(value) or value.isdigit() and len(value) < 6 and "pin" not in low_name:
        return None
    if not quoted and (_code_reference(value) or _ENV_NAME_RE.fullmatch(value)):
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
        if random_looking(value, min_len=8, min_entropy=2.5) and " " not in value:
            return "password_assignment"
        return None
    if random_looking(value, min_len=12, min_entropy=3.0) and " " not in value:
        return "generic_secret"
    return None


def detect_assignments(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Values assigned to password-like names (``password = ...``, ``api_key: ...``) and
    passed as ``--password`` style options."""
    seen: set[int] = set()
    lower = ""
    covered = 0  # end of the last value reported whole: a name inside it only repeats part of it
    for ks in starts[0]:  # where a name's last word is followed by a quote, blank or separator
        if ks < covered:
            continue
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
            if _prose_after(text, value, end):
                continue  # "password: (prompted at login)", "password: stored in the vault"
        kind = _assignment_value_ok(name, value, gi != 4)
        if kind is not None:
            # (a value cut at its longest may go on: names in its last stretch are tried)
            covered = end if m.end(gi) - start < _MAX_VALUE else end - _PW_NAME_WIDTH - 64
            yield start, end, kind, P_ASSIGN if kind == "password_assignment" else P_GENERIC
    if starts[1]:
        for m in _CLI_PW_RE.finditer(text):
            value = m.group(1)
            if not is_placeholder(value) and len(value) >= 4 and not value.startswith("-"):
                yield m.start(1), m.end(1), "password_assignment", P_ASSIGN


#: A word and a blank after an unquoted value: the value is the first word of a sentence.
_WORD_AFTER_RE: Final = re.compile(r"[ \t]+[^\W\d_]")


def _prose_after(text: str, value: str, end: int) -> bool:
    """Whether the unquoted ``value`` (ending at ``end``) opens prose, not a secret: it starts with
    a parenthesis, or it is a word of letters only and another word follows it on its line."""
    if value[:1] in "([":
        return True
    return value.isalpha() and _WORD_AFTER_RE.match(text, end) is not None


#: ``\w`` is ``str.isalnum()`` or ``_``, so this is the run of ``isalnum()``, ``_`` and ``-``.
_NAME_FWD_RE: Final = re.compile(r"[\w\-]*")


def _name_end(text: str, ks: int) -> int:
    m = _NAME_FWD_RE.match(text, ks)
    return m.end() if m is not None else ks


# -- personal data -------------------------------------------------------------------------------

#: An address: the local part and the domain may hold any letters (``åsa@företaget.se``), the top
#: label is letters or an IDNA label (``xn--p1ai``).
_EMAIL_RE: Final = re.compile(
    r"(?<![\w.%+\-])[^\W_][\w.%+\-]{0,63}@"
    r"((?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+([^\W\d_]{2,24}|xn--[a-z0-9\-]{2,59}))(?![\w\-])"
)
_EMAIL_SKIP_DOMAINS: Final = ("example.com", "example.org", "example.net")
_EMAIL_SKIP_TLDS: Final = frozenset(
    {"test", "example", "invalid", "localhost", "local", "internal", "lan", "localdomain", "png", "jpg", "jpeg",
     "gif", "svg", "webp", "js", "ts", "tsx", "py", "rb", "go", "rs", "css", "html", "json", "yaml", "yml", "lock"}
)  # fmt: skip


#: Where ``_LOCAL_BACK_RE = [^\W_][\w.%+\-]{0,63}\Z`` first matches before an ``@`` (within 64
#: characters): at the first letter or digit after the last character that a local part cannot hold.
_NOT_LOCAL_RE: Final = re.compile(r"(?s).*[^\w.%+\-]")
_LOCAL_FIRST_RE: Final = re.compile(r"[^\W_]")


_ASSET_SCALE_RE: Final = re.compile(r"\d+x\.")


def detect_email(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Email addresses, except reserved example domains, asset names and ``git@host:`` remotes."""
    last = 0
    for q in starts[0]:  # (finditer_before, finding the local part without trying every offset)
        lo = max(0, q - 64)
        cut = _NOT_LOCAL_RE.match(text, lo, q)
        b = _LOCAL_FIRST_RE.search(text, lo if cut is None else cut.end(), q)
        if b is None or b.start() < last:
            continue
        m = _EMAIL_RE.match(text, b.start())
        if m is None:
            continue
        last = m.end()
        domain = m.group(1).lower()
        if m.group(2).lower() in _EMAIL_SKIP_TLDS or domain.endswith(_EMAIL_SKIP_DOMAINS):
            continue
        if _ASSET_SCALE_RE.match(domain):  # logo@2x.png
            continue
        if text.startswith(":", m.end()) and m.group().startswith("git@"):  # git@github.com:org/repo
            continue
        yield m.start(), m.end(), "email", P_PII["email"]


_NUM_RE: Final = re.compile(r"[+(\d](?<![\w.\-/:+#(][+(\d])[\d \-.()/]{5,24}\d(?![\w\-/]|\.\d|:\d)")
_PHONE_WORDS: Final = (
    r"phone|tel\b|tel\.|t\u00e9l|mobile|cell|call|fax|whatsapp|sms|handy|telefon|t\u00e9l\u00e9phone|portable|"
    r"m\u00f3vil|cellulare|\bph\b|contact|reach"
)
_NEG_WORDS: Final = (
    r"order|invoice|ticket|tracking|shipment|case|rma|ref|id\b|#|no\.|number|build|version|pid|\bport\b|po\b"
)
_CARD_WORDS: Final = r"card|visa|mastercard|amex|credit|debit|cc\b|pan\b|payment|charge|paid|pay\b"
_PHONE_CONTEXT_RE: Final = re.compile(f"(?i:{_PHONE_WORDS})")
_NEG_CONTEXT_RE: Final = re.compile(f"(?i:{_NEG_WORDS})")
_CARD_CONTEXT_RE: Final = re.compile(f"(?i:{_CARD_WORDS})")
#: The same words over an ASCII text in lower case (the same answer, several times faster: a
#: case-insensitive alternation is tried branch by branch at every offset); the look-ahead holds
#: the first letter of every word.
_PHONE_LOWER_RE: Final = re.compile(f"(?=[ptmcfwshr])(?:{_PHONE_WORDS})")
_NEG_LOWER_RE: Final = re.compile(f"(?=[oitscrn#bvp])(?:{_NEG_WORDS})")
_CARD_LOWER_RE: Final = re.compile(f"(?=[cvmadp])(?:{_CARD_WORDS})")


def _has_word(before: str, rx: re.Pattern[str], lower_rx: re.Pattern[str]) -> bool:
    """Whether ``rx`` (case-insensitive) matches in ``before``: ``lower_rx`` over it in lower case
    if it is ASCII."""
    if before.isascii():
        return lower_rx.search(before.lower()) is not None
    return rx.search(before) is not None


_NANP_RE: Final = re.compile(r"(?:\+?1[ \-.]?)?(?:\(([2-9]\d\d)\)[ \-.]?|([2-9]\d\d)([ \-.]))[2-9]\d\d[ \-.]\d{4}")
_INTL_RE: Final = re.compile(r"\+\d{1,3}(?:[ \-.]?\(\d{1,4}\))?(?:[ \-.]?\d{1,5}){1,6}")
_TRUNK_RE: Final = re.compile(r"\(?0\d{1,4}\)?(?:[ \-/.]\d{2,8}){1,5}")
_SSN_RE: Final = re.compile(r"(\d{3})([ \-]?)(\d{2})\2(\d{4})")
_DATE_LIKE_RE: Final = re.compile(r"\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}|\d{1,2}[\-/.]\d{1,2}[\-/.]\d{2,4}")
_CARD_GROUPS: Final = frozenset(
    {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 4, 4, 1), (4, 4, 4, 2), (4, 4, 4, 3)}
)


def detect_numbers(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Phone numbers, payment cards and US SSNs: one scan of digit runs, each classified once."""
    match = _NUM_RE.match
    last = 0
    for pos in starts[0]:  # (match_at, inlined: this is the commonest rule by far)
        if pos < last:
            continue
        m = match(text, pos)
        if m is None:
            continue
        last = m.end()
        raw = m.group()
        start = pos
        if "(" in raw or ")" in raw:  # trim unbalanced parentheses at either end
            while raw.endswith(")") and raw.count(")") > raw.count("("):
                raw = raw[:-1]
            while raw.startswith("(") and raw.count("(") > raw.count(")"):
                raw, start = raw[1:], start + 1
        raw = raw.rstrip(" -./(")
        if not raw or len(raw) == 10 and raw[4] == "-" and raw[7] == "-" and _ISO_DATE_RE.fullmatch(raw):
            continue  # (the commonest number in notes: a date)
        if raw.count(".") > 2 and _DIGITS_DOTS_RE.fullmatch(raw):
            continue  # versions (what _classify_number concludes first)
        if len(raw.translate(_DROP_SEPARATORS)) < 7 and not raw.startswith(("0", "(0")):
            continue  # too few digits for any kind (only a trunk prefix after a phone word takes fewer)
        found = _classify_number(text, start, raw)
        if found is not None:
            yield found


_SSN_WORD_RE: Final = re.compile(r"(?i)ssn|social security")
_GROUP_SEP_RE: Final = re.compile(r"[ \-]")
_DIGITS: Final = frozenset(string.digits)
_DIGITS_DOTS_RE: Final = re.compile(r"[\d.]+")
_ISO_DATE_RE: Final = re.compile(r"\d{4}-\d\d-\d\d")
_DOTTED_QUAD_RE: Final = re.compile(r"\d\.\d+\.\d+\.\d")
_PHONE_CHARS_RE: Final = re.compile(r"\+?[\d ()\-.]+")
#: ``_NUM_RE`` matches hold ``\d`` characters (all ``str.isdigit``) and these separators only.
_DROP_SEPARATORS: Final = str.maketrans("", "", " -.()/+")


def _line_before(text: str, start: int) -> str:
    """Up to 40 characters before ``start`` on its line."""
    return text[max(0, start - 40) : start].rsplit("\n", 1)[-1]


def _classify_number(text: str, start: int, raw: str) -> Candidate | None:
    """The phone number, card or SSN that the digit run ``raw`` at ``start`` is, if any."""
    if raw.count(".") > 2 and _DIGITS_DOTS_RE.fullmatch(raw):
        return None  # versions (what the checks below conclude)
    end = start + len(raw)
    digits = raw.translate(_DROP_SEPARATORS)  # raw holds only \d characters and these separators
    # SSN
    sm = _SSN_RE.fullmatch(raw) if len(raw) in (9, 11) else None  # 9 digits, maybe 2 separators
    if sm and (sm.group(2) == "-" or _SSN_WORD_RE.search(_line_before(text, start))):
        area, group, serial = sm.group(1), sm.group(3), sm.group(4)
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            return start, end, "ssn", P_PII["ssn"]
    # card: a published test number is no one's; grouped as cards are printed, a number is a card
    # even after order or reference wording (plain digits there are an order or tracking number)
    if 13 <= len(digits) <= 19 and luhn_valid(digits) and iin_plausible(digits):
        if is_test_card(digits):
            return None
        grouped = tuple(len(g) for g in _GROUP_SEP_RE.split(raw)) in _CARD_GROUPS and len(set(raw) - _DIGITS) == 1
        line_before = _line_before(text, start)
        if (
            grouped
            or raw.isdigit()
            and not (
                _has_word(line_before[-20:], _NEG_CONTEXT_RE, _NEG_LOWER_RE)
                and not _has_word(line_before, _CARD_CONTEXT_RE, _CARD_LOWER_RE)
            )
        ):
            return start, end, "credit_card", P_PII["credit_card"]
    # dates, times, versions, decimals are not phone numbers
    if not raw.startswith("+") and (
        _DATE_LIKE_RE.search(raw)
        and len(_GROUP_SEP_RE.split(raw)) <= 4
        or _DIGITS_DOTS_RE.fullmatch(raw)
        and raw.count(".") != 2
    ):
        return None  # (a number with a country code is never a date)
    if _DOTTED_QUAD_RE.search(raw):  # dotted quad or version
        return None
    line_before = _line_before(text, start)
    context = _has_word(line_before[-30:], _PHONE_CONTEXT_RE, _PHONE_LOWER_RE)
    if not context and not raw.startswith("+") and _has_word(line_before[-20:], _NEG_CONTEXT_RE, _NEG_LOWER_RE):
        return None
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
        return start, end, "phone", P_PII["phone"]
    if context and 7 <= len(digits) <= 15 and _PHONE_CHARS_RE.fullmatch(raw):
        return start, end, "phone", P_PII["phone"]
    return None


_IPV4_RE: Final = re.compile(r"\d(?<![\w.\-]\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w\-]|\.\d)")
_IPV6_RE: Final = re.compile(r"[23](?<![\w:.].)[0-9a-fA-F]{3}:[0-9a-fA-F:]{2,36}[0-9a-fA-F](?![\w:])")


def _private_v4(value: str) -> bool:
    """A quick answer for the common non-global IPv4 ranges (10/8, 127/8, 172.16/12, 192.168/16,
    100.64/10, 169.254/16, 0/8, 224/3); False means "ask :mod:`ipaddress`"."""
    a, _, rest = value.partition(".")
    b = rest.partition(".")[0]
    if len(a) > 3 or len(b) > 3:
        return False
    x, y = int(a), int(b)
    return (
        x in (0, 10, 127)
        or x >= 224
        or x == 172
        and 16 <= y <= 31
        or x == 192
        and y == 168
        or x == 100
        and 64 <= y <= 127
        or x == 169
        and y == 254
    )


def _v4_bounds() -> tuple[list[int], list[bool]] | None:
    """The IPv4 space cut where membership of the networks that decide ``is_global`` (those of
    :mod:`ipaddress`, and :func:`_private_v4`'s) changes: ``(cuts, report)``, ``report[i]`` (global
    and not one of :func:`_private_v4`'s) holding from ``cuts[i]`` up to the next cut. None if this
    Python's :mod:`ipaddress` keeps its networks elsewhere (then it is asked every time)."""
    consts = getattr(ipaddress.IPv4Address, "_constants", None)
    nets = [ipaddress.IPv4Network(n) for n in ("100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16")]
    nets += [ipaddress.IPv4Network((x << 24, 8)) for x in (0, 10, 127, *range(224, 256))]
    for name in ("_public_network", "_private_networks", "_private_networks_exceptions"):
        got = getattr(consts, name, None)
        if isinstance(got, ipaddress.IPv4Network):
            nets.append(got)
        elif isinstance(got, list) and all(isinstance(n, ipaddress.IPv4Network) for n in got):
            nets.extend(got)
        elif name != "_private_networks_exceptions":
            return None
    ends = {int(n.broadcast_address) + 1 for n in nets}
    cuts = sorted(c for c in {0} | {int(n.network_address) for n in nets} | ends if c < 1 << 32)
    addrs = [ipaddress.IPv4Address(c) for c in cuts]
    return cuts, [a.is_global and not _private_v4(str(a)) for a in addrs]


_V4_BOUNDS: Final = _v4_bounds()
#: The value of each octet as :mod:`ipaddress` reads it (no leading zeros).
_OCTETS: Final[dict[str, int]] = {str(i): i for i in range(256)}


def _reported_v4(value: str) -> bool:
    """Whether the IPv4 address ``value`` (four runs of one to three digits joined by dots) is
    reported: not one of :func:`_private_v4`'s, an address to :mod:`ipaddress`, and global."""
    if _V4_BOUNDS is not None and value.isascii():
        a, b, c, d = map(_OCTETS.get, value.split("."))
        if a is None or b is None or c is None or d is None:
            return False  # (over 255, or a leading zero: ipaddress refuses those)
        n = a << 24 | b << 16 | c << 8 | d
        cuts, report = _V4_BOUNDS
        return report[bisect.bisect_right(cuts, n) - 1]
    if _private_v4(value):
        return False
    try:
        return ipaddress.IPv4Address(value).is_global
    except ValueError:
        return False


def detect_ip(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Globally routable IPv4 and IPv6 addresses (not version numbers)."""
    memo: Memo = {}  # (each quad is read once, also as another's neighbour)
    for m in match_at(_IPV4_RE, text, starts[0]):
        value = m.group()
        if _reported_v4(value) and not version_context(text, m.start(), m.end(), memo):
            yield m.start(), m.end(), "ip", P_PII["ip"]
    if starts[1] and ("::" in text or text.count(":") >= 7):
        for m in match_at(_IPV6_RE, text, starts[1]):
            try:
                addr6 = ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            if addr6.is_global:
                yield m.start(), m.end(), "ip", P_PII["ip"]


#: An IBAN as people write it: either case, in groups of four split by blanks or hyphens (the same
#: separator throughout), or none.
_IBAN_RE: Final = re.compile(
    r"[A-Za-z](?<![A-Za-z0-9][A-Za-z])[A-Za-z]\d{2}([ \-]?)[A-Za-z0-9]{4}(?:\1[A-Za-z0-9]{4}){1,6}"
    r"(?:\1[A-Za-z0-9]{1,3})?(?![A-Za-z0-9])"
)


def detect_iban(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """IBANs with their country's length and a valid mod-97 check (the match may run on into a
    following group: the IBAN is its first characters of the country's length)."""
    for m in match_at(_IBAN_RE, text, starts[0]):
        value = m.group()
        length = iban_length(value[:2])
        if length is None:
            continue
        seen = 0
        for i, ch in enumerate(value):
            seen += ch.isalnum()
            if seen == length:
                cand = value[: i + 1]
                if iban_valid(cand):
                    yield m.start(), m.start() + len(cand), "iban", P_PII["iban"]
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


def detect_dob(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Dates right after a birth-date word."""
    if not starts[0]:  # none of the words the rule is for
        return
    for m in match_at(_DOB_RE, text, starts[1]):
        yield m.start(1), m.end(1), "dob", P_PII["dob"]
