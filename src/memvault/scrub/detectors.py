"""The detectors of the built-in rules: each finds the candidates of one kind (or a few) in a text.

A :data:`Detector` is called as ``detect(text, starts)`` with the offsets its rule's probes
reported (see :mod:`memvault.scrub.rules`) and yields :data:`Candidate` s. It runs its Python
regex only at those offsets (:func:`~memvault.scrub.prefilter.match_at`, which gives exactly the
matches of ``finditer``), then checks each value (:mod:`memvault.scrub.validators`: placeholders,
entropy, checksums) and, for shapes without a prefix, its context. These are the credentials'; the
detectors of personal data are in :mod:`memvault.scrub.personal`, those of private key blocks in
:mod:`memvault.scrub.rules`, next to their rules.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from typing import Final

from memvault.scrub.names import named_value
from memvault.scrub.prefilter import class_table, finditer_before, match_at, run_starts
from memvault.scrub.validators import (
    aws_secret_check,
    azure_key_check,
    char_classes,
    entropy_at_least,
    hex_token_check,
    is_placeholder,
    jwt_check,
    random_looking,
)

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
    or an AWS word on their line up to 80 characters after them; and right after one of the key's
    names (``aws_secret_access_key=``), any value of its shape (:func:`~memvault.scrub.names.named_value`)."""
    if not starts[0] or not starts[1]:  # no 40-character run, or no context anywhere
        return
    lower = ""
    last = 0
    for q in run_starts(text, _B64_TABLE, 40):
        if q < last:
            continue
        end = named_value("aws_secret_access_key", text, q)
        if end is not None:
            last = end
            yield q, end, "aws_secret_access_key", P_CONTEXT
            continue
        m = _AWS_SECRET_RE.match(text, q)
        if m is None:
            continue
        last = m.end()
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
    an account sid; not right after the label of an id or a digest (``trace id 4bf9...``); and right
    after one of the token's names (``TWILIO_AUTH_TOKEN=``), any value of its shape."""
    if not starts[0] or not starts[1]:  # no 32-hex run, or no context anywhere
        return
    lower = ""
    last = 0
    for q in run_starts(text, _HEX_TABLE, 32):
        if q < last:
            continue
        end = named_value("twilio_auth_token", text, q)
        if end is not None:
            last = end
            yield q, end, "twilio_auth_token", P_CONTEXT
            continue
        m = _TWILIO_TOKEN_RE.match(text, q)
        if m is None:
            continue
        last = m.end()
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
