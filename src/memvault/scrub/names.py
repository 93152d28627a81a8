"""Known secret names: a value of a credential's shape assigned to the name of that credential.

The other rules find a credential by its shape and then ask whether its body looks random (enough
bits per character, a digit or both letter cases): that keeps placeholders out where a key is
matched anywhere in a text. After the name of the very credential (``aws_secret_access_key=``,
``TWILIO_AUTH_TOKEN:``, ``"SecretAccessKey": "``, ``<SecretAccessKey>``), a value of exactly that
credential's shape is the credential, whatever its first character, its entropy or its character
classes: here only a documented placeholder (``is_placeholder``, AWS's published example keys) is
let through. :data:`KEY_NAMES` holds, for each credential kind with a defined alphabet, the names
providers and their SDKs give it and the shape of its values.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import Final

from memvault.scrub.detectors import P_CONTEXT, P_SPECIFIC, Candidate, Detector
from memvault.scrub.prefilter import class_table, run_starts
from memvault.scrub.validators import AWS_EXAMPLES, is_placeholder

__all__ = ["KEY_NAMES", "VALUE_STARTS", "VALUE_AFTER", "name_gate", "named_key_detector"]

#: What may join the words of a name (``aws_secret_access_key``, ``aws-secret-access-key``,
#: ``AWS.SECRET``, ``secretAccessKey``, ``secret access key``).
_J: Final = r"[_\-. ]?"
#: Base64url token characters (the inside of a character class).
_T: Final = r"A-Za-z0-9_\-"

#: kind -> (the names of the credential, case-insensitive; the shape of its values, whose group
#: ``body`` is the part a placeholder would fill). A name may end an identifier
#: (``PROD_AWS_SECRET_ACCESS_KEY``) but not go on (``AWS_SECRET_ACCESS_KEY_FILE``).
KEY_NAMES: Final[dict[str, tuple[str, str]]] = {
    "anthropic_api_key": (
        f"(?:anthropic|claude){_J}(?:api{_J})?key",
        rf"sk-ant-(?:api|admin|oat|ort|sid)\d\d-(?P<body>[{_T}]{{20,}})(?![{_T}])",
    ),
    "openai_api_key": (f"openai{_J}(?:api{_J})?(?:key|token)", rf"sk-(?!ant-)(?P<body>[{_T}]{{20,}})(?![{_T}])"),
    "aws_access_key_id": (
        f"(?:aws{_J})?access{_J}key{_J}id",
        r"A(?:KIA|SIA|BIA|CCA)(?P<body>[A-Z0-9]{16})(?![A-Z0-9])",
    ),
    "aws_secret_access_key": (
        f"(?:aws{_J})?secret{_J}access{_J}key|aws{_J}secret(?:{_J}key)?",
        r"(?P<body>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    ),
    "google_api_key": (
        f"(?:google|gcp|gemini|maps|firebase|places|youtube){_J}api{_J}key",
        rf"AIza(?P<body>[{_T}]{{35}})(?![{_T}])",
    ),
    "azure_connection_string": (
        f"account{_J}key|shared{_J}access{_J}key|azure{_J}storage{_J}(?:account{_J})?(?:access{_J})?key",
        r"(?P<body>[A-Za-z0-9+/]{86}==|[A-Za-z0-9+/]{43}=)(?![A-Za-z0-9+/=])",
    ),
    "github_token": (
        f"(?:github|gh){_J}(?:pat|token|api{_J}token|access{_J}token)",
        r"(?:gh[pousr]_|github_pat_)(?P<body>[A-Za-z0-9_]{36,251})(?![A-Za-z0-9_])",
    ),
    "gitlab_token": (
        f"(?:gitlab|gl){_J}(?:private{_J}|personal{_J}access{_J}|access{_J})?(?:token|pat)",
        rf"gl(?:pat|rt|dt|ptt|ft|soat|cbt|oas)-(?P<body>[{_T}]{{20,}})(?![{_T}])",
    ),
    "slack_token": (
        f"slack{_J}(?:bot{_J}|app{_J}|user{_J}|api{_J})?token",
        r"(?:xox[abposre]|xapp)-(?P<body>[A-Za-z0-9\-]{10,250})(?![A-Za-z0-9\-])",
    ),
    "stripe_key": (
        f"stripe(?:{_J}(?:live|test|secret|api|restricted|webhook|signing))*{_J}(?:key|secret)",
        r"(?:[sr]k_(?:live|test)_|whsec_)(?P<body>[A-Za-z0-9]{10,})(?![A-Za-z0-9_])",
    ),
    "twilio_account_sid": (f"(?:twilio{_J})?account{_J}sid", r"AC(?P<body>[0-9a-fA-F]{32})(?![A-Za-z0-9])"),
    "twilio_auth_token": (f"twilio{_J}(?:auth{_J})?token", r"(?P<body>[0-9a-fA-F]{32})(?![A-Za-z0-9])"),
    "sendgrid_api_key": (
        f"sendgrid{_J}(?:api{_J})?key",
        rf"SG\.(?P<body>[{_T}]{{16,32}}\.[{_T}]{{30,64}})(?![{_T}])",
    ),
    "npm_token": (f"npm{_J}(?:auth{_J})?token|node{_J}auth{_J}token", r"npm_(?P<body>[A-Za-z0-9]{36})(?![A-Za-z0-9_])"),
    "pypi_token": (
        f"pypi{_J}(?:api{_J})?token|twine{_J}password|uv{_J}publish{_J}token|poetry{_J}pypi{_J}token(?:{_J}pypi)?",
        rf"pypi-AgE(?P<body>[{_T}]{{50,}})(?![{_T}])",
    ),
}

#: kind -> the words its names end with (a value's name ends with one of them, just before the value).
NAME_TAILS: Final[dict[str, tuple[str, ...]]] = {
    "anthropic_api_key": ("key",),
    "openai_api_key": ("key", "token"),
    "aws_access_key_id": ("id",),
    "aws_secret_access_key": ("key", "secret"),
    "google_api_key": ("key",),
    "azure_connection_string": ("key",),
    "github_token": ("pat", "token"),
    "gitlab_token": ("pat", "token"),
    "slack_token": ("token",),
    "stripe_key": ("key", "secret"),
    "twilio_account_sid": ("sid",),
    "twilio_auth_token": ("token",),
    "sendgrid_api_key": ("key",),
    "npm_token": ("token",),
    "pypi_token": ("token", "password", "pypi"),
}
#: kind -> how its values start, in lower case (compared case-insensitively: a superset).
VALUE_STARTS: Final[dict[str, tuple[str, ...]]] = {
    "anthropic_api_key": ("sk-ant-",),
    "openai_api_key": ("sk-",),
    "aws_access_key_id": ("akia", "asia", "abia", "acca"),
    "google_api_key": ("aiza",),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": tuple(f"gl{p}-" for p in ("pat", "rt", "dt", "ptt", "ft", "soat", "cbt", "oas")),
    "slack_token": (*(f"xox{c}-" for c in "abposre"), "xapp-"),
    "stripe_key": ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
    "twilio_account_sid": ("ac",),
    "sendgrid_api_key": ("sg.",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-age",),
}
#: kind -> the characters and least length of its values, for the kinds whose values have no fixed
#: start: their starts are the starts of such runs (``run_starts``), once the prefilter saw one.
VALUE_RUNS: Final[dict[str, tuple[str, int]]] = {
    "aws_secret_access_key": (string.ascii_letters + string.digits + "/+", 40),
    "azure_connection_string": (string.ascii_letters + string.digits + "/+", 43),
    "twilio_auth_token": ("0123456789abcdefABCDEF", 32),
}
#: The character before a value: the last of what stands between it and its name (the inside of a
#: character class; a value right after a name's last letter is not taken).
VALUE_AFTER: Final = "\"'`\\]>:=, \\t\\-"

#: Between a name and its value: closing quotes or brackets (``ENV["NAME"]``, ``\"NAME\"``), then
#: blanks around ``=``, ``:``, ``:=``, ``=>``, ``->``, ``>`` (XML), ``is``, or a comma before a quoted
#: value (``setdefault("NAME", "value")``), or blanks only (``aws configure set NAME value``); then an
#: opening quote.
_SEP: Final = r"(?:\\?[\"'`\]]){0,3}[ \t]{0,8}(?::=|=>|->|[:=>]|\bis\b:?|,(?=[ \t]*\\?[\"'`]))?[ \t]{0,8}(?:\\?[\"'`])?"
#: ``_SEP`` without look-arounds, for the prefilter (a superset of it).
_GATE_SEP: Final = r"(?:\\?[\"'`\]]){0,3}[ \t]{0,8}(?::=|=>|->|[:=>]|is:?|,)?[ \t]{0,8}(?:\\?[\"'`])?"


def name_gate(kind: str) -> str:
    """What must occur for ``kind``'s detector to find anything, for the prefilter (case-insensitive):
    a tail word of its names, what may stand between a name and a value, how a value starts."""
    chars, length = VALUE_RUNS.get(kind, ("", 0))
    if kind in VALUE_STARTS:
        start = "|".join(re.escape(v) for v in VALUE_STARTS[kind])
    else:
        start = f"[{re.escape(chars)}]{{{length}}}"
    return f"(?:{'|'.join(NAME_TAILS[kind])}){_GATE_SEP}(?:{start})"


_VALUE_AFTER_SET: Final = frozenset("\"'`]>:=, \t-")
#: The longest name and ``_SEP``: how far before a value its name can start.
_REACH: Final = 96


def _prefix_starts(text: str, prefixes: tuple[str, ...]) -> list[int]:
    """Sorted offsets where one of ``prefixes`` (lower case) starts in ``text``, either case, after a
    character of :data:`VALUE_AFTER`."""
    low = text.lower()
    if len(low) != len(text):  # (a character whose lower case is longer: kept as it is)
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    out: set[int] = set()
    for prefix in prefixes:
        pos = low.find(prefix, 1)
        while pos > 0:
            if text[pos - 1] in _VALUE_AFTER_SET:
                out.add(pos)
            pos = low.find(prefix, pos + 1)
    return sorted(out)


def _assignment_re(kind: str) -> re.Pattern[str]:
    """One of ``kind``'s names, what may stand between it and a value, and a value of its shape (group 1)."""
    names, shape = KEY_NAMES[kind]
    return re.compile(f"(?i:{names})(?![A-Za-z0-9_]){_SEP}(?<=[{VALUE_AFTER}])({shape})")


def named_key_detector(kind: str) -> Detector:
    """The detector of values of ``kind``'s shape right after one of its names: reported unless
    the value (or its body) is a documented placeholder or one of AWS's example keys. It runs when
    the prefilter found :func:`name_gate`, from where a value may start (:data:`VALUE_STARTS`, the
    runs of :data:`VALUE_RUNS`): from each value of the shape that is not a placeholder, it looks
    back for a name."""
    names, shape = KEY_NAMES[kind]
    value_rx = re.compile(shape)
    rx = _assignment_re(kind)
    back = re.compile(f"(?i:{names})(?![A-Za-z0-9_]){_SEP}\\Z")
    priority = P_CONTEXT if kind in ("aws_secret_access_key", "twilio_auth_token") else P_SPECIFIC
    tails = NAME_TAILS[kind]
    run = VALUE_RUNS.get(kind)
    table = None if run is None else class_table(run[0])
    prefixes = VALUE_STARTS.get(kind, ())
    aws = kind.startswith("aws")

    def detect(text: str, _starts: tuple[list[int], ...]) -> Iterable[Candidate]:
        last = 0
        if table is None or run is None:
            anchors = _prefix_starts(text, prefixes)
        else:
            anchors = run_starts(text, table, run[1])
        for q in anchors:
            v = value_rx.match(text, q)
            if v is None or q < last:
                continue
            value = v.group()
            if value in AWS_EXAMPLES or aws and "EXAMPLE" in value or is_placeholder(value):
                continue
            if is_placeholder(v.group("body")):
                continue
            lo = max(0, q - _REACH)
            window = text[lo:q].lower()
            if not any(t in window for t in tails):  # (a name ends with one: the regex is not needed)
                continue
            b = back.search(text, lo, q)
            m = None if b is None else rx.match(text, b.start())
            if m is None or m.start(1) != q:
                continue
            last = m.end()
            yield q, m.end(1), kind, priority

    return detect
