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
from collections.abc import Iterable
from typing import Final

from memvault.scrub.detectors import P_CONTEXT, P_SPECIFIC, Candidate, Detector
from memvault.scrub.validators import AWS_EXAMPLES, is_placeholder

__all__ = ["KEY_NAMES", "named_key_detector"]

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

#: Between a name and its value: closing quotes or brackets (``ENV["NAME"]``, ``\"NAME\"``), then
#: blanks around ``=``, ``:``, ``:=``, ``=>``, ``->``, ``>`` (XML), ``is``, or a comma before a quoted
#: value (``setdefault("NAME", "value")``), or blanks only (``aws configure set NAME value``); then an
#: opening quote.
_SEP: Final = r"(?:\\?[\"'`\]])*[ \t]*(?::=|=>|->|[:=>]|\bis\b:?|,(?=[ \t]*\\?[\"'`]))?[ \t]*(?:\\?[\"'`])?"


def _assignment_re(kind: str) -> re.Pattern[str]:
    """One of ``kind``'s names, what may stand between it and a value, and a value of its shape (group 1)."""
    names, shape = KEY_NAMES[kind]
    return re.compile(f"(?i:{names})(?![A-Za-z0-9_]){_SEP}({shape})")


def named_key_detector(kind: str) -> Detector:
    """The detector of values of ``kind``'s shape right after one of its names: reported unless
    the value (or its body) is a documented placeholder or one of AWS's example keys."""
    rx = _assignment_re(kind)
    priority = P_CONTEXT if kind in ("aws_secret_access_key", "twilio_auth_token") else P_SPECIFIC

    def detect(text: str, _starts: tuple[list[int], ...]) -> Iterable[Candidate]:
        for m in rx.finditer(text):
            value = m.group(1)
            if value in AWS_EXAMPLES or kind.startswith("aws") and "EXAMPLE" in value:
                continue
            if is_placeholder(value) or is_placeholder(m.group("body")):
                continue
            yield m.start(1), m.end(1), kind, priority

    return detect
