"""The built-in rules (what each detects, and where its regexes can start) and custom rules.

A :class:`Rule` names a kind, its detector (:mod:`memvault.scrub.detectors`) and its *probes*
(:class:`~memvault.scrub.prefilter.Pattern` s). :func:`probe_set` gathers every probe of every rule
in one :class:`~memvault.scrub.prefilter.PatternSet`, so that one pass over a text says which rules
can report anything and where their regexes can start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from memvault.scrub.detectors import (
    P_CUSTOM,
    P_SPECIFIC,
    TAIL_WORDS,
    URLSAFE_CHARS,
    Candidate,
    Detector,
    aws_id_check,
    detect_assignments,
    detect_aws_secret,
    detect_azure,
    detect_basic_auth,
    detect_bearer,
    detect_dob,
    detect_email,
    detect_iban,
    detect_ip,
    detect_jwt,
    detect_npm_auth,
    detect_numbers,
    detect_private_key,
    detect_twilio_token,
    github_check,
    openai_check,
    simple_detector,
    token_check,
)
from memvault.scrub.prefilter import HYPERSCAN, Pattern, PatternSet
from memvault.scrub.validators import entropy_at_least, iban_valid, is_placeholder, luhn_valid, random_looking
from memvault.settings import CustomRule

#: Token characters (the inside of a character class), short for the regexes.
_T: Final = URLSAFE_CHARS


# -- candidate starts --------------------------------------------------------------------------
#
# Every rule says, as :class:`~memvault.scrub.prefilter.Pattern` s, where its regexes can start
# (a necessary condition: a superset of the offsets where they match) and what must occur for it
# to report anything at all. One :class:`~memvault.scrub.prefilter.PatternSet` scan of the text
# answers that for every rule; a rule then runs its Python regex only at those offsets
# (``_match_at`` in :mod:`~memvault.scrub.detectors`), which gives exactly the matches of
# ``finditer``. The scan runs over the text's *ASCII projection* (:func:`projections`): one byte
# per character, every non-ASCII character a ``?``, so byte offsets are character offsets. A
# pattern class that the Python rule could satisfy with a non-ASCII character (``\d``, ``\w``,
# ``\s``, negated classes) therefore includes ``?``. The four non-ASCII characters that
# ``re.IGNORECASE`` or ``str.lower`` equate with an ASCII letter are rare: a text holding one is
# scanned twice, once more with them projected to that letter.

#: Non-ASCII characters that case-insensitive matching or ``str.lower`` equate with an ASCII letter.
_ODD_CASE: Final[dict[int, str]] = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}


def projections(text: str) -> tuple[bytes, ...]:
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
RULES: Final[tuple[Rule, ...]] = (
    Rule("private_key", (_anywhere("PRIVATE KEY"),), detect_private_key),
    Rule(
        "anthropic_api_key",
        (_at("sk-ant-", not_after=_NOT_T),),
        simple_detector("anthropic_api_key", _ANTHROPIC, check=token_check(13)),
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
            _anywhere("aws", "secret_access", "secretaccess", "(?:akia|asia)[a-z0-9]{16}", caseless=True),
        ),
        detect_aws_secret,
        every_probe=True,
    ),
    Rule(
        "google_api_key",
        (_at(r"AIza[A-Za-z0-9_\-]{35}", not_after=_NOT_T),),
        simple_detector("google_api_key", rf"AIza(?<![{_T}]AIza)[{_T}]{{35}}(?![{_T}])", check=token_check(4)),
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
            check=lambda v: token_check(v.index("-") + 1)(v),
        ),
    ),
    Rule(
        "slack_token",
        (_at(r"xox[abposre]-[A-Za-z0-9\-]{10}", r"xapp-[A-Za-z0-9\-]{10}", not_after=_NOT_ALNUM),),
        simple_detector(
            "slack_token",
            r"x(?<![A-Za-z0-9]x)(?:ox[abposre]|app)-[A-Za-z0-9\-]{10,250}(?![A-Za-z0-9\-])",
            check=lambda v: token_check(5)(v) and any(c.isdigit() for c in v),
        ),
    ),
    Rule(
        "slack_webhook",
        (_at(r"http://hooks\.slack\.com/", r"https://hooks\.slack\.com/"),),
        simple_detector(
            "slack_webhook",
            r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{12,}",
            priority=P_SPECIFIC + 2,
            check=lambda v: not is_placeholder(v.rsplit("/", 1)[1]),
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
            check=lambda v: token_check(v.index("_", 3) + 1 if not v.startswith("whsec") else 6)(v),
        ),
    ),
    Rule(
        "twilio_account_sid",
        (_at("AC[0-9a-f]{32}", not_after=_NOT_ALNUM),),
        simple_detector(
            "twilio_account_sid",
            r"AC(?<![A-Za-z0-9]AC)[0-9a-f]{32}(?![A-Za-z0-9])",
            check=lambda v: not is_placeholder(v[2:]) and entropy_at_least(v[2:], 3.0),
        ),
    ),
    Rule(
        "twilio_auth_token",
        (
            _anywhere("[0-9a-f]{32}"),
            _anywhere("twilio", "auth_token", "authtoken", "ac[0-9a-f]{32}", caseless=True),
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
            check=token_check(3),
        ),
    ),
    Rule(
        "npm_token",
        (_at("npm_[A-Za-z0-9]{36}", not_after=_NOT_WORD),),
        simple_detector("npm_token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9_])", check=token_check(4)),
    ),
    Rule("npm_token", (_anywhere("_auth"),), detect_npm_auth),
    Rule(
        "pypi_token",
        (_at(r"pypi-AgE[A-Za-z0-9_\-]{50}", not_after=_NOT_T),),
        simple_detector("pypi_token", rf"pypi-AgE(?<![{_T}]pypi-AgE)[{_T}]{{50,}}", check=token_check(5)),
    ),
    Rule("jwt", (_at(r"eyJ[A-Za-z0-9_\-]{8}", not_after=r"A-Za-z0-9_\-."),), detect_jwt),
    Rule(
        "basic_auth",
        (_at("://"), _at("basic" + _S, caseless=True), _anywhere("-u", "--user")),
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
    Rule("email", ((Pattern(r"[A-Za-z0-9._%+\-]@[A-Za-z0-9]", shift=1),),), detect_email),
    Rule(
        "ip",
        (
            _at(
                *(f"[0-9?]{{{k}}}\\.[0-9?]{{{n}}}\\." for k in (1, 2, 3) for n in (1, 2, 3)),
                not_after=r"A-Za-z0-9_.\-",
            ),
            _at("[23][0-9a-fA-F]{3}:", not_after=r"A-Za-z0-9_:."),
        ),
        detect_ip,
    ),
    Rule(
        "iban",
        (_at("[A-Z]{2}[0-9?]{2}[A-Z0-9]{4}", "[A-Z]{2}[0-9?]{2} [A-Z0-9]{4}", not_after=_NOT_ALNUM),),
        detect_iban,
    ),
    Rule(
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


def probe_set(*, hyperscan: bool = HYPERSCAN) -> PatternSet:
    """The patterns of every probe (compiled on first use), each in the group of its probe."""
    return PatternSet(
        [pat for probe in PROBES for pat in probe],
        groups=[i for i, probe in enumerate(PROBES) for _ in probe],
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
