"""The detectors of the built-in rules: each finds the candidates of one kind (or a few) in a text.

A :data:`Detector` is called as ``detect(text, starts)`` with the offsets its rule's probes
reported (see :mod:`memvault.scrub.rules`) and yields :data:`Candidate` s. It runs its Python
regex only at those offsets (``_match_at``, which gives exactly the matches of ``finditer``), then
checks each value (:mod:`memvault.scrub.validators`: placeholders, entropy, checksums) and, for
shapes without a prefix, its context.
"""

from __future__ import annotations

import ipaddress
import re
import string
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from memvault.scrub.validators import (
    AWS_EXAMPLES,
    char_classes,
    entropy_at_least,
    github_checksum_valid,
    iban_valid,
    is_placeholder,
    jwt_valid,
    luhn_valid,
    random_looking,
)

_ASCII_LETTERS: Final = frozenset(string.ascii_letters)


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
        for m in _match_at(rx, text, starts[0]):
            value = m.group(group)
            if not value or (check is not None and not check(value)):
                continue
            yield m.start(group), m.end(group), kind, priority

    return detect


def token_check(prefix_len: int, *, min_entropy: float = 3.0) -> Callable[[str], bool]:
    """A check of a token's body (after ``prefix_len`` characters): not a placeholder, random enough."""

    def check(value: str) -> bool:
        body = value[prefix_len:]
        return not is_placeholder(body) and entropy_at_least(body, min_entropy)

    return check


def openai_check(value: str) -> bool:
    """An OpenAI key (``sk-``, not ``sk-ant-``) whose body mixes letters and digits at random."""
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


def github_check(value: str) -> bool:
    """A GitHub token with the right checksum, or whose body looks random."""
    if value.startswith("github_pat_"):
        return token_check(11)(value)
    if github_checksum_valid(value):
        return True
    return token_check(4, min_entropy=3.5)(value)


def aws_id_check(value: str) -> bool:
    """An AWS access key id that is not an example (AWS's documented ones, ``...EXAMPLE``) and
    not a run of a few characters."""
    return value not in AWS_EXAMPLES and not value.endswith("EXAMPLE") and len(set(value[4:])) > 4


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


def detect_aws_secret(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """40-character AWS secret keys near an AWS word or key id."""
    if not starts[0] or not starts[1]:  # no 40-character run, or no context anywhere
        return
    lower = ""
    for m in _match_at(_AWS_SECRET_RE, text, _run_starts(text, _B64_TABLE, 40)):
        value = m.group()
        if value in AWS_EXAMPLES or "EXAMPLE" in value or char_classes(value) < 3:
            continue
        if not any(c.isupper() for c in value) or not any(c.islower() for c in value):
            continue
        lower = lower or text.lower()
        if _AWS_CONTEXT_RE.search(lower, max(0, m.start() - 160), m.start()) is None:
            continue
        if not is_placeholder(value) and entropy_at_least(value, 4.0):
            yield m.start(), m.end(), "aws_secret_access_key", P_CONTEXT


_TWILIO_TOKEN_RE: Final = re.compile(r"[0-9a-f](?<![A-Za-z0-9].)[0-9a-f]{31}(?![A-Za-z0-9])")
_TWILIO_CONTEXT_RE: Final = re.compile(r"twilio|auth_?token|authtoken|ac(?<![a-z0-9]ac)[0-9a-f]{32}")


def detect_twilio_token(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """32-hex Twilio auth tokens near a Twilio word or account sid."""
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
            yield m.start(), m.end(), "twilio_auth_token", P_CONTEXT


_PEM_BEGIN_RE: Final = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE: Final = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_LINE_RE: Final = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z-]+:.*|\\n|)[ \t]*\r?(?:\n|\\n|$)")


def detect_private_key(text: str, _starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """PEM private key blocks; a truncated block takes the body lines that follow it."""
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
        yield m.start(), stop, "private_key", P_BLOCK
        pos = stop


_JWT_RE: Final = re.compile(rf"eyJ(?<![{_T}.]eyJ)[{_T}]{{8,}}\.[{_T}]{{2,}}\.[{_T}]*(?![{_T}.])")


def detect_jwt(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """JWTs whose header decodes to JSON with ``alg``."""
    for m in _match_at(_JWT_RE, text, starts[0]):
        value = m.group()
        if jwt_valid(value) and not is_placeholder(value.split(".", 1)[1]):
            yield m.start(), m.end(), "jwt", P_STRUCT


_URL_AUTH_RE: Final = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://([^\s:@/?#\[\]\"'<>`]{1,128}):([^\s@/\"'<>`]{1,256})@"
    r"(?=[A-Za-z0-9\[])"
)
_BASIC_HEADER_RE: Final = re.compile(r"(?i:\bbasic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_CURL_USER_RE: Final = re.compile(r"(?:\s-u|--user)[ =]?['\"]?([^\s:'\"$]{1,64}):([^\s'\"]{1,128})")


_SCHEME_BACK_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,20}\Z")


def detect_basic_auth(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Passwords in URLs (``scheme://user:pw@``), ``Basic`` headers and ``curl -u``."""
    if starts[0]:
        for m in _finditer_before(_URL_AUTH_RE, _SCHEME_BACK_RE, text, starts[0], 21):
            pw = m.group(2)
            if not is_placeholder(pw) and not is_placeholder(m.group(1) + pw) and pw.lower() not in ("pass", "pwd"):
                yield m.start(2), m.end(2), "basic_auth", P_STRUCT
    if starts[1]:
        for m in _match_at(_BASIC_HEADER_RE, text, starts[1]):
            value = m.group(1)
            if not is_placeholder(value) and char_classes(value) >= 2:
                yield m.start(1), m.end(1), "basic_auth", P_STRUCT
    if starts[2]:
        for m in _CURL_USER_RE.finditer(text):
            pw = m.group(2)
            if not is_placeholder(pw) and len(pw) >= 4:
                yield m.start(2), m.end(2), "basic_auth", P_STRUCT


_BEARER_RE: Final = re.compile(
    r"(?i:\bbearer|authorization:\s*token|\bx-api-key:|\bapi-key:|\bx-auth-token:)[ \t]+"
    r"([A-Za-z0-9\-._~+/]{16,}=*)(?![A-Za-z0-9\-._~+/=])"
)


def detect_bearer(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Tokens after ``Bearer``, ``Authorization: token`` and API key headers."""
    for m in _match_at(_BEARER_RE, text, starts[0]):
        value = m.group(1)
        if not is_placeholder(value) and char_classes(value) >= 2 and entropy_at_least(value, 3.0):
            yield m.start(1), m.end(1), "bearer_token", P_STRUCT - 5


_AZURE_RE: Final = re.compile(
    r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=([A-Za-z0-9+/%]{20,}(?:={1,2}|%3D){0,2})"
)


def detect_azure(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """The key or signature of an Azure connection string."""
    for m in _match_at(_AZURE_RE, text, starts[0]):
        if not is_placeholder(m.group(1)) and entropy_at_least(m.group(1), 3.5):
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
            yield start, end, kind, P_ASSIGN if kind == "password_assignment" else P_GENERIC
    if starts[1]:
        for m in _CLI_PW_RE.finditer(text):
            value = m.group(1)
            if not is_placeholder(value) and len(value) >= 4 and not value.startswith("-"):
                yield m.start(1), m.end(1), "password_assignment", P_ASSIGN


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


def detect_email(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Email addresses, except reserved example domains, asset names and ``git@host:`` remotes."""
    for m in _finditer_before(_EMAIL_RE, _LOCAL_BACK_RE, text, starts[0], 64):
        domain = m.group(1).lower()
        if m.group(2).lower() in _EMAIL_SKIP_TLDS or domain.endswith(_EMAIL_SKIP_DOMAINS):
            continue
        if _ASSET_SCALE_RE.match(domain):  # logo@2x.png
            continue
        if text.startswith(":", m.end()) and m.group().startswith("git@"):  # git@github.com:org/repo
            continue
        yield m.start(), m.end(), "email", P_PII["email"]


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


def detect_numbers(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Phone numbers, payment cards and US SSNs: one scan of digit runs, each classified once."""
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


def _classify_number(text: str, start: int, raw: str) -> Iterable[Candidate]:
    end = start + len(raw)
    digits = raw.translate(_DROP_SEPARATORS)  # raw holds only \d characters and these separators
    # SSN
    sm = _SSN_RE.fullmatch(raw) if len(raw) in (9, 11) else None  # 9 digits, maybe 2 separators
    if sm and (sm.group(2) == "-" or _SSN_WORD_RE.search(_line_before(text, start))):
        area, group, serial = sm.group(1), sm.group(3), sm.group(4)
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            yield start, end, "ssn", P_PII["ssn"]
            return
    # card
    if 13 <= len(digits) <= 19 and luhn_valid(digits) and _iin_plausible(digits):
        groups = tuple(len(g) for g in _GROUP_SEP_RE.split(raw))
        plain = raw.isdigit()
        line_before = _line_before(text, start)
        if (plain or groups in _CARD_GROUPS) and not (
            _NEG_CONTEXT_RE.search(line_before[-20:]) and not _CARD_CONTEXT_RE.search(line_before)
        ):
            yield start, end, "credit_card", P_PII["credit_card"]
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
        yield start, end, "phone", P_PII["phone"]
        return
    if context and 7 <= len(digits) <= 15 and _PHONE_CHARS_RE.fullmatch(raw):
        yield start, end, "phone", P_PII["phone"]


_IPV4_RE: Final = re.compile(r"\d(?<![\w.\-]\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w\-]|\.\d)")
_IPV6_RE: Final = re.compile(r"[23](?<![\w:.].)[0-9a-fA-F]{3}:[0-9a-fA-F:]{2,36}[0-9a-fA-F](?![\w:])")
_VERSION_BEFORE_RE: Final = re.compile(r"(?i)\b(?:v|version|ver|build|release|rev|firmware|oid|sdk)\b[^\n]{0,24}$")


def detect_ip(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Globally routable IPv4 and IPv6 addresses (not version numbers)."""
    for m in _match_at(_IPV4_RE, text, starts[0]):
        if _VERSION_BEFORE_RE.search(text, max(0, m.start() - 40), m.start()):
            continue
        try:
            addr = ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if addr.is_global:
            yield m.start(), m.end(), "ip", P_PII["ip"]
    if starts[1] and ("::" in text or text.count(":") >= 7):
        for m in _match_at(_IPV6_RE, text, starts[1]):
            try:
                addr6 = ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            if addr6.is_global:
                yield m.start(), m.end(), "ip", P_PII["ip"]


_IBAN_RE: Final = re.compile(
    r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)


def detect_iban(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """IBANs with their country's length and a valid mod-97 check."""
    for m in _match_at(_IBAN_RE, text, starts[0]):
        value = m.group()
        # the optional trailing group may have eaten a following word; retry without it
        for cand in (value, value.rsplit(" ", 1)[0]):
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
    if not starts[0]:  # none of the words the rule is for (the rule does not look for "d.ob")
        return
    for m in _match_at(_DOB_RE, text, starts[1]):
        yield m.start(1), m.end(1), "dob", P_PII["dob"]
