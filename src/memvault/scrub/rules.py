"""The built-in rules (what each detects, and where its regexes can start), the detectors of private
key blocks (PEM, bare DER bodies, PuTTY, age, JWK), the checks of whole keys, and custom rules.

A :class:`Rule` names a kind, its detector (:mod:`memvault.scrub.detectors`) and its *probes*
(:class:`~memvault.scrub.prefilter.Pattern` s). :func:`probe_set` gathers every probe of every rule
in one :class:`~memvault.scrub.prefilter.PatternSet`, so that one pass over a text says which rules
can report anything and where their regexes can start.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from memvault.scrub.detectors import (
    P_BLOCK,
    P_CUSTOM,
    P_SPECIFIC,
    TAIL_WORDS,
    URLSAFE_CHARS,
    Candidate,
    Detector,
    detect_assignments,
    detect_aws_secret,
    detect_azure,
    detect_basic_auth,
    detect_bearer,
    detect_jwt,
    detect_npm_auth,
    detect_twilio_token,
    simple_detector,
)
from memvault.scrub.names import name_gate, named_values
from memvault.scrub.personal import detect_dob, detect_email, detect_iban, detect_ip, detect_numbers
from memvault.scrub.prefilter import HYPERSCAN, Pattern, PatternSet, match_at
from memvault.scrub.validators import (
    aws_id_check,
    aws_secret_check,
    azure_key_check,
    github_check,
    hex_token_check,
    iban_valid,
    is_placeholder,
    jwt_check,
    luhn_valid,
    openai_check,
    random_looking,
    token_check,
)
from memvault.settings import CustomRule

#: Token characters (the inside of a character class), short for the regexes.
_T: Final = URLSAFE_CHARS


# -- candidate starts --------------------------------------------------------------------------
#
# Every rule says, as :class:`~memvault.scrub.prefilter.Pattern` s, where its regexes can start
# (a necessary condition: a superset of the offsets where they match) and what must occur for it
# to report anything at all. One :class:`~memvault.scrub.prefilter.PatternSet` scan of the text
# answers that for every rule; a rule then runs its Python regex only at those offsets
# (:func:`~memvault.scrub.prefilter.match_at`), which gives exactly the matches of
# ``finditer``. The scan runs over the text's *ASCII projection* (:func:`projections`): one byte
# per character, every non-ASCII character a ``?``, so byte offsets are character offsets. A
# pattern class that the Python rule could satisfy with a non-ASCII character (``\d``, ``\w``,
# ``\s``, negated classes) therefore includes ``?``. The four non-ASCII characters that
# ``re.IGNORECASE`` or ``str.lower`` equate with an ASCII letter are rare: a text holding one is
# scanned twice, once more with them projected to that letter.

#: Non-ASCII characters that case-insensitive matching or ``str.lower`` equate with an ASCII letter.
_ODD_CASE: Final[dict[int, str]] = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}


def projections(text: str, plain: bytes | None = None) -> tuple[bytes, ...]:
    """``text`` with every non-ASCII character as ``?`` (``plain``, if the caller has it already);
    and if it holds one of ``_ODD_CASE``, also with those as their ASCII letter (for
    case-insensitive patterns)."""
    if text.isascii():
        return (text.encode("ascii") if plain is None else plain,)
    if plain is None:
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


#: A character of the first part (the user name), and of the second (after the colon), of
#: ``scheme://user:password@``: all that the detector's classes take (they exclude ``\s``,
#: which holds these ASCII blanks, and the punctuation; ``?`` stays in: it projects every
#: non-ASCII character).
_URL_FIRST_CHAR: Final = "[^ \\t\\n\\r\\f\\x0b:@/#\\[\\]\"'<>`]"
_URL_SECOND_CHAR: Final = "[^ \\t\\n\\r\\f\\x0b@/\"'<>`]"


# -- the rules ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """A built-in rule: the kind it reports, its probes and its detector."""

    kind: str
    #: Where the rule's regexes can start, or what must occur for it to report anything; the rule
    #: runs when any probe reports (always, when there are none) ...
    probes: tuple[tuple[Pattern, ...], ...]
    detect: Detector
    #: ... or, if set, only when every probe reports (its detector finds nothing otherwise).
    every_probe: bool = False


_ANTHROPIC = rf"sk-ant-(?<![{_T}]sk-ant-)(?:api|admin|oat|ort|sid)\d\d-[{_T}]{{20,}}"
#: Character-class bodies (``[^...]`` of the ``not_after`` context) of the rules' look-behinds.
_NOT_T: Final = r"A-Za-z0-9_\-"
_NOT_ALNUM: Final = "A-Za-z0-9"
_NOT_WORD: Final = "A-Za-z0-9_"
#: What Python's ``\s`` matches among ASCII characters, and ``?`` for the rest.
_S: Final = r"[\t\n\x0b\x0c\r \x1c-\x1f?]"
# -- private keys, as blocks ------------------------------------------------------------------------
#
# A private key is not a token of one shape: PEM blocks (with the headers people mangle), base64
# bodies without their PEM lines, PuTTY's ``.ppk`` files, age's secret keys and the private members
# of JSON Web Keys. Their detectors live here, next to the rules that run them.

#: A PEM private key's BEGIN and END lines, as people write them: either case, three to six
#: dashes, blanks inside (``-----BEGIN RSA PRIVATE KEY-----``, ``----begin private key----``).
_PEM_BEGIN_RE: Final = re.compile(r"-{3,6} ?BEGIN[A-Z0-9 ]{0,40}?PRIVATE {1,3}KEY(?: BLOCK)? ?-{3,6}", re.IGNORECASE)
_PEM_END_RE: Final = re.compile(r"-{3,6} ?END[A-Z0-9 ]{0,40}?PRIVATE {1,3}KEY(?: BLOCK)? ?-{3,6}", re.IGNORECASE)
_PEM_BODY_LINE_RE: Final = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z-]+:.*|\\n|)[ \t]*\r?(?:\n|\\n|$)")


#: The OID of PBES2 (an encrypted PKCS#8 key), DER-encoded.
_PBES2_OID: Final = bytes.fromhex("06092a864886f70d01050d")
_OPENSSH_MAGIC: Final = b"openssh-key-v1\x00"


def der_private_key(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a base64 body, decoded) starts a private key's DER:
    PKCS#1 RSA or DSA (``SEQUENCE { INTEGER 0, INTEGER ... }``), PKCS#8 (``SEQUENCE { INTEGER 0|1,
    SEQUENCE ... }``), SEC1 EC (``SEQUENCE { INTEGER 1, OCTET STRING ... }``), an encrypted PKCS#8
    key (PBES2), or OpenSSH's own format. Public keys and certificates do not match.

    Args:
        head: at least 16 decoded bytes.

    Returns:
        True for the start of a private key's encoding.
    """
    if head.startswith(_OPENSSH_MAGIC):
        return True
    if len(head) < 8 or head[0] != 0x30:
        return False
    i = 2 + (head[1] & 0x7F if head[1] & 0x80 else 0)  # past the outer SEQUENCE's length
    rest = head[i:]
    if rest[:3] == b"\x02\x01\x00":
        return rest[3:4] in (b"\x02", b"\x30")
    if rest[:3] == b"\x02\x01\x01":
        return rest[3:4] in (b"\x04", b"\x30")
    return rest[:1] == b"\x30" and _PBES2_OID in head[i : i + 16]


def _body_end(text: str, pos: int) -> int:
    """Where the base64 body lines from ``pos`` end (blank lines and headers included), trailing
    blanks excluded."""
    stop = pos
    while stop < len(text):
        line = _PEM_BODY_LINE_RE.match(text, stop)
        if line is None or line.end() == stop:
            break
        stop = line.end()
    return pos + len(text[pos:stop].rstrip())


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
            stop = max(m.end(), _body_end(text, m.end()))
        yield m.start(), stop, "private_key", P_BLOCK
        pos = stop


#: Where a bare base64 body may start: DER of a private key starts ``MI``/``MH``/``MC`` (a
#: SEQUENCE), OpenSSH's format ``b3BlbnNzaC1rZXktdjE`` (``openssh-key-v1``).
_BARE_BODY_RE: Final = re.compile(r"(?<![A-Za-z0-9+/])(?:M[IHC]|b3Bl)[A-Za-z0-9+/]{58}")


def detect_bare_key(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """A private key's base64 body without its PEM lines: a run of 60 or more base64 characters
    whose first bytes decode to a private key's DER (:func:`der_private_key`),
    with the body lines that follow it."""
    last = 0
    for m in match_at(_BARE_BODY_RE, text, starts[0]):
        if m.start() < last:
            continue
        try:
            head = base64.b64decode(m.group()[:24])
        except (ValueError, binascii.Error):
            continue
        if der_private_key(head):
            last = _body_end(text, m.start())
            yield m.start(), last, "private_key", P_BLOCK


_PUTTY_RE: Final = re.compile(r"PuTTY-User-Key-File-\d+:|Private-Lines: *(\d{1,3})", re.IGNORECASE)
_PUTTY_MAC_RE: Final = re.compile(r"[ \t]*Private-(?:MAC|Hash): *[0-9a-fA-F]+", re.IGNORECASE)
_PUTTY_LINES_RE: Final = re.compile(r"Private-Lines: *(\d{1,3})[ \t]*\r?\n", re.IGNORECASE)


def detect_putty(text: str, _starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """A PuTTY ``.ppk`` key file: from its header (or its ``Private-Lines``) through the private
    lines and the MAC line."""
    pos = 0
    while True:
        m = _PUTTY_RE.search(text, pos)
        if m is None:
            return
        lines = _PUTTY_LINES_RE.search(text, m.start(), m.start() + 4096)
        if lines is None:
            pos = m.end()
            continue
        stop = lines.end()
        for _ in range(int(lines.group(1))):
            nl = text.find("\n", stop)
            stop = len(text) if nl < 0 else nl + 1
        mac = _PUTTY_MAC_RE.match(text, stop)
        stop = mac.end() if mac is not None else lines.end() + len(text[lines.end() : stop].rstrip())
        yield m.start(), max(stop, lines.start() + 1), "private_key", P_BLOCK
        pos = max(stop, m.end())


_AGE_RE: Final = re.compile(r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58,}", re.IGNORECASE)
#: A JWK member holding private key material (``d``; RSA's primes and CRT values; a symmetric ``k``).
_JWK_PRIVATE_RE: Final = re.compile(r"\\?\"(?:d|p|q|dp|dq|qi|k)\\?\"\s*:\s*\\?\"([A-Za-z0-9_\-]{16,})")


def detect_key_tokens(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """age secret keys (``AGE-SECRET-KEY-1...``) and the private members of JSON Web Keys (within
    1,024 characters of a ``"kty"``)."""
    if starts[0]:
        for m in match_at(_AGE_RE, text, starts[0]):
            yield m.start(), m.end(), "private_key", P_BLOCK
    if starts[1]:
        kty = [k.start() for k in re.finditer('kty\\\\?"', text)]
        for m in _JWK_PRIVATE_RE.finditer(text):
            i = bisect.bisect_left(kty, m.start() - 1024)
            if i < len(kty) and kty[i] < m.start() + 1024 and not is_placeholder(m.group(1)):
                yield m.start(1), m.end(1), "private_key", P_BLOCK


def _detect_named_azure_key(text: str, _starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """An Azure storage key right after one of its names (``AccountKey:``, ``AZURE_STORAGE_KEY=``)."""
    for start, end in named_values("azure_connection_string", text):
        yield start, end, "azure_connection_string", P_SPECIFIC


# -- the checks of whole keys ---------------------------------------------------------------------


def _gitlab_check(value: str) -> bool:
    return token_check(value.index("-") + 1)(value)


def _slack_check(value: str) -> bool:
    return token_check(5)(value) and any(c.isdigit() for c in value)


def _stripe_check(value: str) -> bool:
    return token_check(6 if value.startswith("whsec") else value.index("_", 3) + 1)(value)


def _twilio_sid_check(value: str) -> bool:
    return hex_token_check(value[2:])


def _webhook_check(value: str) -> bool:
    return not is_placeholder(value.rsplit("/", 1)[1])


#: The check each credential kind's detector applies to a whole, well-formed value (for the kinds
#: found by shape, and the bodies of those found by context): a random value of the real shape
#: must pass every one of them (``tests/scrub/test_scrub_keys.py``).
KEY_CHECKS: Final[dict[str, Callable[[str], bool]]] = {
    "anthropic_api_key": token_check(13),
    "openai_api_key": openai_check,
    "aws_access_key_id": aws_id_check,
    "aws_secret_access_key": aws_secret_check,
    "google_api_key": token_check(4),
    "azure_connection_string": azure_key_check,
    "github_token": github_check,
    "gitlab_token": _gitlab_check,
    "slack_token": _slack_check,
    "slack_webhook": _webhook_check,
    "stripe_key": _stripe_check,
    "twilio_account_sid": _twilio_sid_check,
    "twilio_auth_token": hex_token_check,
    "sendgrid_api_key": token_check(3),
    "npm_token": token_check(4),
    "pypi_token": token_check(5),
    "jwt": jwt_check,
}

RULES: Final[tuple[Rule, ...]] = (
    Rule("private_key", (_anywhere("PRIVATE {1,3}KEY", caseless=True),), detect_private_key),
    Rule(
        "private_key", (_at("M[IHC][A-Za-z0-9+/]{4}", "b3BlbnNzaC1rZXktdjE", not_after="A-Za-z0-9+/"),), detect_bare_key
    ),
    Rule("private_key", (_anywhere("PuTTY-User-Key-File-", "Private-Lines:", caseless=True),), detect_putty),
    Rule("private_key", (_at("AGE-SECRET-KEY-1", caseless=True), _anywhere('kty\\\\?"')), detect_key_tokens),
    Rule(
        "anthropic_api_key",
        (_at("sk-ant-", not_after=_NOT_T),),
        simple_detector("anthropic_api_key", _ANTHROPIC, check=KEY_CHECKS["anthropic_api_key"]),
    ),
    Rule(
        "openai_api_key",
        (_at(r"sk-[A-Za-z0-9_\-]{20}", not_after=_NOT_T),),
        simple_detector("openai_api_key", rf"sk-(?<![{_T}]sk-)[{_T}]{{20,}}(?![{_T}])", check=openai_check),
    ),
    Rule(
        "aws_access_key_id",
        (_at("A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}", not_after="A-Z0-9"),),
        simple_detector(
            "aws_access_key_id", r"A(?<![A-Z0-9]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Z0-9])", check=aws_id_check
        ),
    ),
    Rule(
        "aws_secret_access_key",
        (
            _anywhere("[A-Za-z0-9/+]{40}"),
            _anywhere(
                "aws",
                "secret_access",
                "secret access",
                "secretaccess",
                r"secret[\-.]access",
                "(?:akia|asia)[a-z0-9]{16}",
                caseless=True,
            ),
        ),
        detect_aws_secret,
        every_probe=True,
    ),
    Rule(
        "google_api_key",
        (_at(r"AIza[A-Za-z0-9_\-]{35}", not_after=_NOT_T),),
        simple_detector(
            "google_api_key", rf"AIza(?<![{_T}]AIza)[{_T}]{{35}}(?![{_T}])", check=KEY_CHECKS["google_api_key"]
        ),
    ),
    Rule(
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
        detect_azure,
    ),
    Rule(
        "github_token",
        (_at("gh[pousr]_[A-Za-z0-9]{36}", "github_pat_[A-Za-z0-9_]{50}", not_after=_NOT_WORD),),
        simple_detector(
            "github_token",
            r"g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{50,})(?![A-Za-z0-9_])",
            check=github_check,
        ),
    ),
    Rule(
        "gitlab_token",
        (
            _at(
                *(rf"gl{p}-[A-Za-z0-9_\-]{{20}}" for p in ("pat", "rt", "dt", "ptt", "ft", "soat", "cbt", "oas")),
                not_after=_NOT_T,
            ),
        ),
        simple_detector(
            "gitlab_token",
            rf"gl(?<![{_T}]gl)(?:pat|rt|dt|ptt|ft|soat|cbt|oas)-[{_T}]{{20,}}(?![{_T}])",
            check=_gitlab_check,
        ),
    ),
    Rule(
        "slack_token",
        (_at(r"xox[abposre]-[A-Za-z0-9\-]{10}", r"xapp-[A-Za-z0-9\-]{10}", not_after=_NOT_ALNUM),),
        simple_detector(
            "slack_token",
            r"x(?<![A-Za-z0-9]x)(?:ox[abposre]|app)-[A-Za-z0-9\-]{10,250}(?![A-Za-z0-9\-])",
            check=_slack_check,
        ),
    ),
    Rule(
        "slack_webhook",
        (_at(r"http://hooks\.slack\.com/", r"https://hooks\.slack\.com/"),),
        simple_detector(
            "slack_webhook",
            r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{12,}",
            priority=P_SPECIFIC + 2,
            check=_webhook_check,
        ),
    ),
    Rule(
        "stripe_key",
        (
            _at(
                "[sr]k_live_[A-Za-z0-9]{10}", "[sr]k_test_[A-Za-z0-9]{10}", "whsec_[A-Za-z0-9]{24}", not_after=_NOT_WORD
            ),
        ),
        simple_detector(
            "stripe_key",
            r"(?:[sr]k_(?<![A-Za-z0-9_].._)(?:live|test)_[A-Za-z0-9]{10,}|whsec_(?<![A-Za-z0-9_]whsec_)[A-Za-z0-9]{24,})"
            r"(?![A-Za-z0-9_])",
            check=_stripe_check,
        ),
    ),
    Rule(
        "twilio_account_sid",
        (_at("AC[0-9a-f]{32}", not_after=_NOT_ALNUM),),
        simple_detector(
            "twilio_account_sid",
            r"AC(?<![A-Za-z0-9]AC)[0-9a-f]{32}(?![A-Za-z0-9])",
            check=_twilio_sid_check,
        ),
    ),
    Rule(
        "twilio_auth_token",
        (
            _anywhere("[0-9a-f]{32}"),
            _anywhere("twilio", "auth_token", "authtoken", "auth token", "auth-token", "ac[0-9a-f]{32}", caseless=True),
        ),
        detect_twilio_token,
        every_probe=True,
    ),
    Rule(
        "sendgrid_api_key",
        (_at(r"SG\.[A-Za-z0-9_\-]{16}", not_after=r"A-Za-z0-9_\-."),),
        simple_detector(
            "sendgrid_api_key",
            rf"SG\.(?<![{_T}.]SG\.)[{_T}]{{16,32}}\.[{_T}]{{30,64}}(?![{_T}])",
            check=KEY_CHECKS["sendgrid_api_key"],
        ),
    ),
    Rule(
        "npm_token",
        (_at("npm_[A-Za-z0-9]{36}", not_after=_NOT_WORD),),
        simple_detector(
            "npm_token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9_])", check=KEY_CHECKS["npm_token"]
        ),
    ),
    Rule("npm_token", (_anywhere("_auth"),), detect_npm_auth),
    Rule(
        "pypi_token",
        (_at(r"pypi-AgE[A-Za-z0-9_\-]{50}", not_after=_NOT_T),),
        simple_detector("pypi_token", rf"pypi-AgE(?<![{_T}]pypi-AgE)[{_T}]{{50,}}", check=KEY_CHECKS["pypi_token"]),
    ),
    Rule("jwt", (_at(r"eyJ[A-Za-z0-9_\-]{8}", not_after=r"A-Za-z0-9_\-."),), detect_jwt),
    # an Azure key assigned to its name (AWS secret keys and Twilio tokens: by their rules above)
    Rule(
        "azure_connection_string",
        (_anywhere(name_gate("azure_connection_string"), caseless=True),),
        _detect_named_azure_key,
    ),
    Rule(
        "basic_auth",
        (
            _at("://"),
            _at("basic" + _S, caseless=True),
            _at(_S + "-u", "--user"),
            # what a URL with a password holds somewhere (most URLs have none: their part is skipped)
            _anywhere("://" + _URL_FIRST_CHAR + "{1,128}:" + _URL_SECOND_CHAR + "{1,256}@"),
        ),
        detect_basic_auth,
    ),
    Rule(
        "bearer_token",
        (
            _at(
                "bearer[ \t]", "authorization:", "x-api-key:[ \t]", "api-key:[ \t]", "x-auth-token:[ \t]", caseless=True
            ),
        ),
        detect_bearer,
    ),
    Rule(
        "password_assignment",
        (
            # the word, then a separator, or a quote or blank and what may follow it
            _at(
                *(w + "[:=,]" for w in TAIL_WORDS),
                *(w + "[\"'\x60 \t][ \t:=,i]" for w in TAIL_WORDS),
                caseless=True,
            ),
            _anywhere(
                *(f"-{w}[ =]" for w in ("password", "passwd", "pass", "token", "api-key", "secret", "client-secret"))
            ),
        ),
        detect_assignments,
    ),
    Rule("email", ((Pattern(r"[A-Za-z0-9._%+\-?]@[A-Za-z0-9?]", shift=1),),), detect_email),
    Rule(
        "ip",
        (
            _at(
                *(
                    f"[0-9?]{{{k}}}\\.[0-9?]{{{n}}}\\.[0-9?]{{{p}}}\\.[0-9?]"
                    for k in (1, 2, 3)
                    for n in (1, 2, 3)
                    for p in (1, 2, 3)
                ),
                not_after=r"A-Za-z0-9_.\-",
            ),
            _at("[23][0-9a-fA-F]{3}:", not_after=r"A-Za-z0-9_:."),
        ),
        detect_ip,
    ),
    Rule(
        "iban",
        (
            _at(
                "[A-Z]{2}[0-9?]{2}[A-Z0-9]{4}",
                "[A-Z]{2}[0-9?]{2}[ \\-][A-Z0-9]{4}",
                not_after=_NOT_ALNUM,
                caseless=True,
            ),
        ),
        detect_iban,
    ),
    Rule(
        "dob",
        (
            _anywhere(
                "dob",
                r"d\.o\.b",
                r"d\.ob",
                r"do\.b",
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
            # where each of the words can start (``date`` and ``data`` only as the start of a birth date)
            _at(
                "dob",
                r"d\.o",
                r"do\.",
                "dateof",
                r"date[ _\-]of",
                "date de",
                "data di",
                "birth",
                "born",
                "geb",
                "fecha",
                r"n\?",
                caseless=True,
            ),
        ),
        detect_dob,
        every_probe=True,
    ),
)
#: The shared numeric scan (phone, credit_card, ssn).
NUMBERS: Final = Rule("phone", (_at(r"[+(0-9?][0-9? \-.()/]{6}", not_after=r"A-Za-z0-9_.\-/:+#("),), detect_numbers)
#: Kinds produced by the shared numeric scan.
NUMERIC_KINDS: Final = frozenset({"phone", "credit_card", "ssn"})
#: Kinds some rule may report besides its own (the assignment rule also reports generic_secret).
RULE_EXTRA_KINDS: Final[dict[str, tuple[str, ...]]] = {"password_assignment": ("generic_secret",)}


# -- custom rules and the probe set -------------------------------------------------------------


def custom_detector(rule: CustomRule) -> Detector:
    """The detector of a custom rule: its regex over the whole text, then its validator."""
    rx = re.compile(rule.pattern)
    group: int | str = "value" if "value" in rx.groupindex else (1 if rx.groups else 0)
    kind, validator = rule.kind, rule.validator

    def detect(text: str, _starts: tuple[list[int], ...]) -> Iterable[Candidate]:
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
            elif validator == "entropy" and not random_looking(value, min_len=12, min_entropy=3.0):
                continue
            yield start, end, kind, P_CUSTOM

    return detect


#: Every probe of the built-in rules, in order: ``PROBES[i]`` is a tuple of patterns.
PROBES: Final[tuple[tuple[Pattern, ...], ...]] = tuple(p for r in (*RULES, NUMBERS) for p in r.probes)


def probe_set(*, hyperscan: bool = HYPERSCAN, kinds: frozenset[str] | None = None) -> PatternSet:
    """The patterns of every probe (compiled on first use), each in the group of its index in
    :data:`PROBES`; with ``kinds``, only the probes of the rules of those kinds."""
    wanted = set(range(len(PROBES)))
    if kinds is not None:
        wanted = {i for rule in (*RULES, NUMBERS) if rule.kind in kinds for i in probe_ids(rule)}
    return PatternSet(
        [pat for i, probe in enumerate(PROBES) if i in wanted for pat in probe],
        groups=[i for i, probe in enumerate(PROBES) if i in wanted for _ in probe],
        hyperscan=hyperscan,
    )


def probe_ids(rule: Rule) -> tuple[int, ...]:
    """Indices in ``PROBES`` of the probes of a built-in ``rule``."""
    first = 0
    for r in (*RULES, NUMBERS):
        if r is rule:
            return tuple(range(first, first + len(r.probes)))
        first += len(r.probes)
    raise ValueError("not a built-in rule")
