"""The one grammar for memory paths, and the one function that enforces it.

Every path the memory tool receives was chosen by the model, so a poisoned conversation or a
prompt injection chooses it too. :func:`parse_path` is the single validator: every command
(view, create, str_replace, insert, delete, rename) and export call it, and nothing else turns
text into a :class:`MemoryPath`. It never touches storage, never URL-decodes and never
normalizes a name into a different one: it either returns the canonical path or raises
:class:`~memvault.errors.InvalidPathError`.

Guarantees of a :class:`MemoryPath` returned by :func:`parse_path`:

* The input was a ``str`` equal to ``/memories`` or starting with ``/memories/`` (a segment
  match: ``/memoriesX/a``, ``/memories_evil``, ``memories/a`` and ``/Memories`` are refused).
  A single trailing ``/`` is tolerated and dropped; ``/memories/`` is the root.
* The rest was split on ``/`` only, and every segment:

  - is not ``""`` (no ``//`` anywhere), ``.`` or ``..``;
  - contains no character of Unicode category Cc, Cf (bidi overrides, zero-width characters,
    BOM), Cs (lone surrogates), Co (private use), Cn (unassigned in this Python's Unicode
    database), Zl or Zp;
  - contains no ``\\``, no ``%`` followed by two hex digits (so ``%2e``, ``%252e`` and
    ``%c0%af`` are refused, never decoded), and none of ``:*?"<>|``;
  - is in Unicode normalization forms NFC and NFKC, so no name has a second spelling (NFD
    ``cafe\\u0301``) and nothing folds to a dot, slash or backslash on another system (``‥``,
    ``．．``, ``／``, ``＼``, ``﹒``, fullwidth letters, ``COM¹``);
  - does not name ``.git`` in any spelling NTFS or HFS+ would treat as ``.git`` (any case,
    trailing dots or spaces, an alternate data stream, the 8.3 short name ``GIT~1``; the rule
    mirrors ``dulwich.index.validate_path_element_ntfs``/``_hfs``);
  - is not a Windows device name (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM0``-``COM9``,
    ``LPT0``-``LPT9``, also with superscript digits, plus ``CONIN$``/``CONOUT$``), in any case,
    with or without an extension (``nul.txt``, ``Con.md``);
  - does not end with ``.`` or a space and does not start with a space;
  - is at most ``settings.max_segment_bytes`` UTF-8 bytes long.

* The canonical text (``/memories`` or ``/memories/a/b``) is at most
  ``settings.max_path_bytes`` UTF-8 bytes, and there are at most ``settings.max_depth``
  segments below the root.

An error message is always ``Error: Invalid path <display(raw)>: <reason>``, where the reason
is one of the :class:`Reason` constants. Rules are checked rule by rule over the whole path,
in the order of :class:`Reason`, so the most specific reason wins, with one deliberate
exception: the total length is checked first, which bounds the work done on hostile input.

Sibling names that differ only by case or compatibility form (``Notes.md``/``notes.md``) are
valid paths; the store refuses the second one with :func:`fold_key`.

A store made for the memory-stores API (``settings.path_grammar == "api"``) takes the API's own,
looser grammar instead (:func:`parse_path` applies it; docs/format.md says what it means for
``export``): below ``/memories`` every segment is not ``""``, ``.`` or ``..``; holds no character of
category Cc, Cf, Cs, Zl or Zp; is in NFC; and the limits above hold. Reserved characters, device
names, ``.git``, leading or trailing dots and spaces are allowed, and names are case-sensitive
(``Notes.md`` and ``notes.md`` are two siblings: :func:`sibling_key` is the identity there).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from memvault.errors import InvalidPathError
from memvault.settings import StoreSettings

__all__ = ["ROOT", "MemoryPath", "Reason", "parse_path", "fold_key", "exact_key", "sibling_key", "display"]

ROOT: Final[str] = "/memories"
_PREFIX: Final[str] = ROOT + "/"
_PREFIX_LEN: Final[int] = len(_PREFIX)

_DEFAULT_SETTINGS: Final[StoreSettings] = StoreSettings()

#: Unicode categories refused anywhere in a segment (and escaped by :func:`display`).
_BAD_CATEGORIES: Final[frozenset[str]] = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: The categories the memory-stores API grammar refuses (control, format, surrogate, U+2028/9).
_API_BAD_CATEGORIES: Final[frozenset[str]] = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: Characters that render as nothing (or as blank) although their category is a letter or mark
#: (Unicode Default_Ignorable_Code_Point outside Cf, plus blank fillers): two names differing
#: only by one of these look identical in a listing. Non-ASCII spaces (Zs) are refused too.
_INVISIBLE: Final[frozenset[str]] = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2800\u3164\uffa0"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))
    + "".join(chr(c) for c in range(0xE0100, 0xE01F0))
)
#: Every ASCII character a segment may not contain, plus percent escapes: one scan for the
#: common case. A hit sends the path through the rule-by-rule checks to find the reason.
_ASCII_BAD_RE: Final[re.Pattern[str]] = re.compile(r'[\x00-\x1f\x7f\\:*?"<>|]|%[0-9A-Fa-f]{2}')
_ASCII_CONTROL_RE: Final[re.Pattern[str]] = re.compile(r"[\x00-\x1f\x7f]")
_PERCENT_RE: Final[re.Pattern[str]] = re.compile(r"%[0-9A-Fa-f]{2}")
_RESERVED_RE: Final[re.Pattern[str]] = re.compile(r'[:*?"<>|]')

_SUPERSCRIPT_DIGITS: Final[str] = "\u00b9\u00b2\u00b3"
#: Windows device names, upper case; matched against the part before the first dot.
_DEVICE_NAMES: Final[frozenset[str]] = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{stem}{digit}" for stem in ("COM", "LPT") for digit in "0123456789" + _SUPERSCRIPT_DIGITS}
)
_MAX_DEVICE_LEN: Final[int] = max(len(name) for name in _DEVICE_NAMES)
#: First characters of every segment that could be ``.git``, ``git~1`` or a device name.
_RISKY_FIRST: Final[frozenset[str]] = frozenset(".gGcCpPaAnNlL")
_RISKY_PREFIXES: Final[tuple[str, ...]] = (".git", "git~1", "con", "prn", "aux", "nul", "com", "lpt")

#: Code points HFS+ ignores when comparing names (dulwich ``HFS_IGNORABLE_CHARS``; all are Cf,
#: so the grammar already refuses them, but the .git rule removes them to stay a faithful mirror).
_HFS_IGNORABLE: Final[dict[int, None]] = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


class Reason:
    """The reason part of every :class:`InvalidPathError` message, in checking order."""

    NOT_A_STRING: Final = "expected a string"
    EMPTY: Final = "it is empty"
    PATH_TOO_LONG: Final = "it is longer than {limit} bytes"
    OUTSIDE_ROOT: Final = "it must be /memories or start with /memories/"
    EMPTY_SEGMENT: Final = "it contains an empty segment"
    DOT_SEGMENT: Final = "it contains a '.' or '..' segment"
    CONTROL: Final = "it contains a control, format, invisible or unassigned character"
    BACKSLASH: Final = "it contains a backslash"
    PERCENT: Final = "it contains a percent-encoded sequence"
    RESERVED_CHAR: Final = "it contains a reserved character"
    NOT_NORMALIZED: Final = "it is not in Unicode normalization form NFC/NFKC"
    NOT_NORMALIZED_NFC: Final = "it is not in Unicode normalization form NFC"
    DOTGIT: Final = "it names .git"
    DEVICE_NAME: Final = "it contains a reserved device name"
    TRAILING_DOT_OR_SPACE: Final = "a segment ends with a dot or space"
    LEADING_SPACE: Final = "a segment starts with a space"
    SEGMENT_TOO_LONG: Final = "a segment is longer than {limit} bytes"
    TOO_DEEP: Final = "it is nested deeper than {limit} levels"


@dataclass(frozen=True, slots=True)
class MemoryPath:
    """A validated path: the segments below ``/memories`` (``()`` is ``/memories`` itself).

    Build one with :func:`parse_path`; :meth:`child` does not validate and is for names that
    are already known to be valid (for example, read back from an authenticated manifest).
    """

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        """The canonical text: ``/memories`` or ``/memories/a/b`` (no trailing slash)."""
        if not self.parts:
            return ROOT
        return _PREFIX + "/".join(self.parts)

    @property
    def is_root(self) -> bool:
        """True for ``/memories`` itself."""
        return not self.parts

    @property
    def name(self) -> str:
        """The last segment, or ``""`` for the root."""
        return self.parts[-1] if self.parts else ""

    @property
    def parent(self) -> MemoryPath:
        """The enclosing directory; the root's parent is the root."""
        if not self.parts:
            return self
        return MemoryPath(self.parts[:-1])

    def child(self, name: str) -> MemoryPath:
        """This path with ``name`` appended. No validation: internal use only."""
        return MemoryPath((*self.parts, name))

    def is_within(self, other: MemoryPath) -> bool:
        """True if this path is ``other`` or lies below it."""
        return self.parts[: len(other.parts)] == other.parts

    def relative_to(self, other: MemoryPath) -> tuple[str, ...]:
        """The segments of this path below ``other``; ``ValueError`` if it is not within it."""
        if not self.is_within(other):
            raise ValueError(f"{self.text!r} is not within {other.text!r}")
        return self.parts[len(other.parts) :]

    def __str__(self) -> str:
        return self.text


_ROOT_PATH: Final[MemoryPath] = MemoryPath(())


def _fail(raw: str, reason: str) -> InvalidPathError:
    return InvalidPathError(f"Error: Invalid path {display(raw)}: {reason}")


def _names_dotgit(seg: str) -> bool:
    """Mirror of dulwich's NTFS/HFS+ ``.git`` rules for one segment."""
    if seg.isascii():
        low = seg.lower()
    else:
        # HFS+: drop ignorable code points, decompose, lower-case.
        low = unicodedata.normalize("NFD", seg.translate(_HFS_IGNORABLE)).lower()
    if low.startswith(".git"):
        tail = low[4:]
    elif low.startswith("git~1"):
        tail = low[5:]
    else:
        return False
    # NTFS ignores trailing dots and spaces, and ":" starts an alternate data stream.
    tail = tail.lstrip(". ")
    return not tail or tail[0] == ":"


def _is_device_name(seg: str) -> bool:
    stem = seg.split(".", 1)[0].rstrip(" ")
    return len(stem) <= _MAX_DEVICE_LEN and stem.upper() in _DEVICE_NAMES


def _name_reason(parts: list[str]) -> str | None:
    """The first name rule (.git, device, dot or space at an end) some segment breaks."""
    if any(_names_dotgit(seg) for seg in parts):
        return Reason.DOTGIT
    if any(_is_device_name(seg) for seg in parts):
        return Reason.DEVICE_NAME
    if any(seg[-1] in ". " for seg in parts):
        return Reason.TRAILING_DOT_OR_SPACE
    if any(seg[0] == " " for seg in parts):
        return Reason.LEADING_SPACE
    return None


def _name_suspect(parts: list[str]) -> bool:
    """Cheap filter: False guarantees :func:`_name_reason` returns None.

    A name rule can only fire for a segment that starts with a space, ends with a dot or space,
    or starts with one of :data:`_RISKY_FIRST` (for a segment that passed the character and
    normalization rules, the NFD form used by the HFS+ rule starts with the same character).
    ASCII segments are narrowed further by their lower-cased prefix.
    """
    for seg in parts:
        if seg[-1] in ". " or seg[0] == " ":
            return True
        if seg[0] in _RISKY_FIRST and (not seg.isascii() or seg.lower().startswith(_RISKY_PREFIXES)):
            return True
    return False


def _has_bad_category(text: str) -> bool:
    if _ASCII_CONTROL_RE.search(text):
        return True
    if text.isascii():
        return False
    category = unicodedata.category
    return any(
        category(c) in _BAD_CATEGORIES or c in _INVISIBLE or (category(c) == "Zs" and c != " ")
        for c in text
        if c >= "\x80"
    )


def _is_normalized(seg: str) -> bool:
    return seg.isascii() or (unicodedata.is_normalized("NFC", seg) and unicodedata.is_normalized("NFKC", seg))


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def parse_path(raw: object, settings: StoreSettings | None = None) -> MemoryPath:
    """Validate ``raw`` against the grammar of this module and return its canonical form.

    Raises :class:`~memvault.errors.InvalidPathError` for anything else; no other exception
    escapes for any input.
    """
    if not isinstance(raw, str):
        raise InvalidPathError(f"Error: Invalid path: {Reason.NOT_A_STRING}")
    if type(raw) is not str:  # a str subclass could override the methods used below
        raw = str.__str__(raw)
    if not raw:
        raise _fail(raw, Reason.EMPTY)
    if settings is None:
        settings = _DEFAULT_SETTINGS

    # Total length first: everything after this runs on at most max_path_bytes + 1 characters.
    max_path = settings.max_path_bytes
    trailing = 1 if raw[-1] == "/" else 0
    if len(raw) - trailing > max_path or _utf8_len(raw) - trailing > max_path:
        raise _fail(raw, Reason.PATH_TOO_LONG.format(limit=max_path))

    if raw == ROOT:
        return _ROOT_PATH
    if not raw.startswith(_PREFIX):
        raise _fail(raw, Reason.OUTSIDE_ROOT)
    rest = raw[_PREFIX_LEN:]
    if not rest:
        return _ROOT_PATH
    if trailing:
        rest = rest[:-1]
    parts = rest.split("/")

    if "" in parts:
        raise _fail(raw, Reason.EMPTY_SEGMENT)
    if "." in parts or ".." in parts:
        raise _fail(raw, Reason.DOT_SEGMENT)
    if settings.path_grammar == "api":
        return _api_path(raw, rest, parts, settings)

    ascii_only = rest.isascii()
    if not ascii_only or _ASCII_BAD_RE.search(rest):
        if _has_bad_category(rest):
            raise _fail(raw, Reason.CONTROL)
        if "\\" in rest:
            raise _fail(raw, Reason.BACKSLASH)
        if _PERCENT_RE.search(rest):
            raise _fail(raw, Reason.PERCENT)
        if _RESERVED_RE.search(rest):
            raise _fail(raw, Reason.RESERVED_CHAR)
        if not ascii_only and not all(_is_normalized(seg) for seg in parts):
            raise _fail(raw, Reason.NOT_NORMALIZED)

    if _name_suspect(parts):
        reason = _name_reason(parts)
        if reason is not None:
            raise _fail(raw, reason)

    max_segment = settings.max_segment_bytes
    if ascii_only:
        too_long = len(rest) > max_segment and any(len(seg) > max_segment for seg in parts)
    else:
        too_long = any(_utf8_len(seg) > max_segment for seg in parts)
    if too_long:
        raise _fail(raw, Reason.SEGMENT_TOO_LONG.format(limit=max_segment))
    if len(parts) > settings.max_depth:
        raise _fail(raw, Reason.TOO_DEEP.format(limit=settings.max_depth))
    return MemoryPath(tuple(parts))


def _api_path(raw: str, rest: str, parts: list[str], settings: StoreSettings) -> MemoryPath:
    """The rest of :func:`parse_path` under the memory-stores API grammar."""
    if not rest.isascii():
        category = unicodedata.category
        if any(category(c) in _API_BAD_CATEGORIES for c in rest if c >= "\x80"):
            raise _fail(raw, Reason.CONTROL)
        if not unicodedata.is_normalized("NFC", rest):
            raise _fail(raw, Reason.NOT_NORMALIZED_NFC)
    elif _ASCII_CONTROL_RE.search(rest):
        raise _fail(raw, Reason.CONTROL)
    max_segment = settings.max_segment_bytes
    if any(_utf8_len(seg) > max_segment for seg in parts):
        raise _fail(raw, Reason.SEGMENT_TOO_LONG.format(limit=max_segment))
    if len(parts) > settings.max_depth:
        raise _fail(raw, Reason.TOO_DEEP.format(limit=settings.max_depth))
    return MemoryPath(tuple(parts))


def sibling_key(settings: StoreSettings | None) -> Callable[[str], str]:
    """How a store tells sibling names apart: :func:`fold_key` (names equal after case folding
    collide) under memvault's grammar, the name itself under the API grammar (case-sensitive)."""
    if settings is not None and settings.path_grammar == "api":
        return exact_key
    return fold_key


def exact_key(segment: str) -> str:
    """The name itself: siblings collide only when equal (the API grammar's :func:`sibling_key`)."""
    return segment


def fold_key(segment: str) -> str:
    """``casefold(NFKC(segment))``: siblings with equal keys collide on macOS/Windows exports."""
    return unicodedata.normalize("NFKC", segment).casefold()


_DISPLAY_LIMIT: Final[int] = 200


def _escape_char(c: str) -> str:
    if c == "\\":
        return "\\\\"
    if c.isprintable() and unicodedata.category(c) not in _BAD_CATEGORIES:
        return c
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def display(raw: object) -> str:
    """Render a hostile path safely for an error message.

    ``str(raw)`` with backslashes doubled and every non-printable character (and every
    character of category Cc, Cf, Cs, Co, Cn, Zl or Zp) escaped as ``\\xNN``, ``\\uNNNN`` or
    ``\\UNNNNNNNN``; cut to at most 200 characters (never inside an escape) plus ``...``.
    """
    try:
        text = raw if isinstance(raw, str) else str(raw)
    except Exception:  # a hostile __str__: show nothing of it
        return "<unprintable>"
    head = str.__str__(text[: _DISPLAY_LIMIT + 1])
    if head.isascii() and head.isprintable() and "\\" not in head:
        out = head
    else:
        out = "".join(map(_escape_char, head))
    if len(out) > _DISPLAY_LIMIT:
        cut = 0
        total = 0
        for c in head:
            piece = len(_escape_char(c))
            if total + piece > _DISPLAY_LIMIT:
                break
            total += piece
            cut += 1
        return "".join(map(_escape_char, head[:cut])) + "..."
    return out
