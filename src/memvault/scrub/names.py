"""Known secret names: a value of a credential's shape assigned to the name of that credential.

Credentials without a prefix of their own (an AWS secret access key, an Azure storage key, a Twilio
auth token) are found by their context: near their
provider's name, and only if they look random (enough bits per character, both letter cases), which
keeps hashes and placeholders out. After the name of the very credential (``aws_secret_access_key=``,
``TWILIO_AUTH_TOKEN:``, ``"SecretAccessKey": "``, ``<SecretAccessKey>``, ``AccountKey=``), a value of
exactly that credential's shape is the credential, whatever its first character, its digits or its
entropy: only a documented placeholder (``is_placeholder``, AWS's published example keys) is let
through. :data:`KEY_NAMES` holds, for each of these kinds, the names providers and their SDKs give
it and the shape of its values. (A credential with a prefix of its own, ``sk-ant-``, ``ghp_``,
``AKIA``..., is found by its prefix wherever it is, under any name.)
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from typing import Final

from memvault.scrub.prefilter import class_table, run_starts
from memvault.scrub.validators import AWS_EXAMPLES, is_placeholder

__all__ = ["KEY_NAMES", "VALUE_RUNS", "VALUE_AFTER", "name_gate", "named_value", "named_values"]

#: What may join the words of a name (``aws_secret_access_key``, ``aws-secret-access-key``,
#: ``AWS.SECRET``, ``secretAccessKey``, ``secret access key``).
_J: Final = r"[_\-. ]?"

#: kind -> (the names of the credential, case-insensitive; the shape of its values, whose group
#: ``body`` is the part a placeholder would fill). A name may end an identifier
#: (``PROD_AWS_SECRET_ACCESS_KEY``) but not go on (``AWS_SECRET_ACCESS_KEY_FILE``).
KEY_NAMES: Final[dict[str, tuple[str, str]]] = {
    "aws_secret_access_key": (
        f"(?:aws{_J})?secret{_J}access{_J}key|aws{_J}secret(?:{_J}key)?",
        r"(?P<body>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    ),
    "azure_connection_string": (
        f"account{_J}key|shared{_J}access{_J}key|azure{_J}storage{_J}(?:account{_J})?(?:access{_J})?key",
        r"(?P<body>[A-Za-z0-9+/]{86}==|[A-Za-z0-9+/]{43}=)(?![A-Za-z0-9+/=])",
    ),
    "twilio_auth_token": (f"twilio{_J}(?:auth{_J})?token", r"(?P<body>[0-9a-f]{32})(?![A-Za-z0-9])"),
}
#: kind -> the words its names end with (a value's name ends with one of them, just before the value).
NAME_TAILS: Final[dict[str, tuple[str, ...]]] = {
    "aws_secret_access_key": ("key", "secret"),
    "azure_connection_string": ("key",),
    "twilio_auth_token": ("token",),
}
#: kind -> words one of which each of its names holds (a quick test before the names' regex).
NAME_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "aws_secret_access_key": ("secret",),
    "azure_connection_string": ("account", "shared", "azure"),
    "twilio_auth_token": ("twilio",),
}
#: kind -> the characters and least length of its values, for the kinds whose values have no fixed
#: start: their starts are the starts of such runs (``run_starts``), once the prefilter saw one.
VALUE_RUNS: Final[dict[str, tuple[str, int]]] = {
    "aws_secret_access_key": (string.ascii_letters + string.digits + "/+", 40),
    "azure_connection_string": (string.ascii_letters + string.digits + "/+", 43),
    "twilio_auth_token": ("0123456789abcdef", 32),
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
    one of its names, what may stand between a name and a value, a run of its value's characters."""
    chars, length = VALUE_RUNS[kind]
    return f"(?:{KEY_NAMES[kind][0]}){_GATE_SEP}[{re.escape(chars)}]{{{length}}}"


#: The characters of ``_SEP`` (besides ``is``).
_SEP_CHARS: Final = frozenset("\"'`]\\>:=, \t-")
#: The longest name.
_NAME_MAX: Final = 48
#: The longest name and ``_SEP``: how far before a value its name can start.
_REACH: Final = 96


def _lower(text: str) -> str:
    """``text`` in lower case, character for character (a character whose lower case is longer is
    kept as it is)."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return low


def _assignment_re(kind: str) -> re.Pattern[str]:
    """One of ``kind``'s names, what may stand between it and a value, and a value of its shape (group 1)."""
    names, shape = KEY_NAMES[kind]
    return re.compile(f"(?i:{names})(?![A-Za-z0-9_]){_SEP}(?<=[{VALUE_AFTER}])({shape})")


#: The last letters of the tail words, in either case.
_TAIL_ENDS: Final = frozenset(c for tails in NAME_TAILS.values() for t in tails for c in (t[-1], t[-1].upper()))
#: kind -> (the whole assignment, one of its names ending at the end over text in lower case, tails,
#: words).
_READERS: Final = {
    kind: (_assignment_re(kind), re.compile(f"(?:{names})\\Z"), NAME_TAILS[kind], NAME_WORDS[kind])
    for kind, (names, _) in KEY_NAMES.items()
}


def named_value(kind: str, text: str, q: int) -> int | None:
    """Where the value of ``kind`` starting at ``q`` ends, if one of ``kind``'s names stands right
    before it (with what may stand between them) and the value has ``kind``'s shape and is not a
    documented placeholder or one of AWS's example keys; else None.

    Args:
        kind: a kind of :data:`KEY_NAMES`.
        text: the text.
        q: where a value may start.

    Returns:
        The value's end offset, or None.
    """
    if q == 0 or text[q - 1] not in _SEP_CHARS:  # (most starts: inside a run, not after a separator)
        return None
    if kind == "aws_secret_access_key" and "EXAMPLE" in text[q : q + 40]:  # (AWS's example keys, often quoted)
        return None
    rx, name_end, tails, words = _READERS[kind]
    e = q  # where the name would end: before what may stand between a name and its value
    while e > 0 and text[e - 1] in _SEP_CHARS:
        e -= 1
    if e > 2 and text[e - 2 : e].lower() == "is" and text[e - 3] in " \t":
        e -= 2
        while e > 0 and text[e - 1] in _SEP_CHARS:
            e -= 1
    if q - e > _REACH or e == 0 or text[e - 1] not in _TAIL_ENDS:  # (a name ends with a tail word's last letter)
        return None
    window = _lower(text[max(0, e - _NAME_MAX) : e])
    if not window.endswith(tails) or not any(w in window for w in words):  # (cheap tests first)
        return None
    b = name_end.search(window)
    m = None if b is None else rx.match(text, e - len(window) + b.start())
    if m is None or m.start(1) != q:
        return None
    value = m.group(1)
    if value in AWS_EXAMPLES or "EXAMPLE" in value and kind.startswith("aws"):
        return None
    body = m.group("body")
    if is_placeholder(value) or body != value and is_placeholder(body):
        return None
    return m.end(1)


def named_values(kind: str, text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of every value :func:`named_value` finds at the starts of the runs of
    ``kind``'s characters (:data:`VALUE_RUNS`), in order, not overlapping."""
    chars, length = VALUE_RUNS[kind]
    last = 0
    for q in run_starts(text, _RUN_TABLES[kind], length):
        if q >= last:
            end = named_value(kind, text, q)
            if end is not None:
                last = end
                yield q, end


_RUN_TABLES: Final = {kind: class_table(chars) for kind, (chars, _) in VALUE_RUNS.items()}
