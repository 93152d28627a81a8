"""Untrusted text as escaped markup: file contents, diffs and names from the store.

Memory content is text a model wrote. Everything from the store reaches a page through Jinja2's
autoescaping or through :func:`show` here, which escapes it and also makes visible what a
browser would otherwise act on or hide: control characters, bidirectional overrides and
isolates, zero-width and other format characters, line and paragraph separators (each shown as
a ``U+XXXX`` marker). Very long lines and very large diffs are cut with a notice.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from markupsafe import Markup, escape

from ..history import FileDiff

__all__ = ["show", "clip", "lines_of", "DiffRow", "FileView", "diff_view", "LINE_LIMIT", "DIFF_LINE_LIMIT"]

#: Characters of a line shown; the rest is cut with a notice (a 100,000-character line stays usable).
LINE_LIMIT = 5000
#: Lines of a file a diff compares; a larger side is not diffed (a notice says so).
DIFF_LINE_LIMIT = 5000
#: Bytes of one side a diff compares.
DIFF_BYTE_LIMIT = 1024 * 1024
#: Lines shown of one file's diff (context included).
DIFF_ROWS_LIMIT = 3000
#: Lines longer than this get no word-level highlight (its cost is quadratic).
_WORD_DIFF_CHARS = 1000
#: What a browser would act on or hide: C0 and C1 controls (not tab), soft hyphen, the Arabic
#: letter mark, Mongolian vowel separator, zero-width characters and direction marks, line and
#: paragraph separators, embeddings and overrides, invisible operators, isolates, the BOM,
#: interlinear annotations, tag characters, lone surrogates.
_HIDDEN = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\ud800-\udfff]"
)
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


def show(text: str) -> Markup:
    """``text`` escaped for HTML, each hidden or control character shown as a ``U+XXXX`` marker."""
    out: list[str] = []
    at = 0
    for match in _HIDDEN.finditer(text):
        out.append(escape(text[at : match.start()]))
        code = f"U+{ord(match.group()):04X}"
        out.append(f'<span class="ctl" title="{code}">{code}</span>')
        at = match.end()
    out.append(escape(text[at:]))
    return Markup("".join(out))  # noqa: S704 - every piece above is escaped or a fixed marker


def clip(line: str, limit: int = LINE_LIMIT) -> tuple[str, int]:
    """``line`` cut to ``limit`` characters, and how many were cut."""
    if len(line) <= limit:
        return line, 0
    return line[:limit], len(line) - limit


def lines_of(data: bytes) -> list[str]:
    """The lines of a file's content (UTF-8, undecodable bytes replaced), without line ends."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _line(text: str) -> Markup:
    shown, cut = clip(text)
    out = show(shown)
    if cut:
        out += Markup('<span class="cut">… {} more characters not shown</span>').format(cut)
    return out


def _words(old: str, new: str) -> tuple[Markup, Markup]:
    """Both lines with the words that differ marked (``<del>`` in the old, ``<ins>`` in the new)."""
    if len(old) > _WORD_DIFF_CHARS or len(new) > _WORD_DIFF_CHARS:
        return _line(old), _line(new)
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    left: list[Markup] = []
    right: list[Markup] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        was, now = show("".join(a[i1:i2])), show("".join(b[j1:j2]))
        if tag == "equal":
            left.append(was)
            right.append(now)
            continue
        if i2 > i1:
            left.append(Markup("<del>{}</del>").format(was))
        if j2 > j1:
            right.append(Markup("<ins>{}</ins>").format(now))
    return Markup("").join(left), Markup("").join(right)


RowKind = Literal["same", "del", "add", "change", "gap"]


@dataclass(frozen=True)
class DiffRow:
    """One row of a side-by-side diff (``old``/``new`` None: no line on that side); the unified
    view shows a ``change`` row as its old line then its new one."""

    kind: RowKind
    old_no: int | None = None
    old: Markup | None = None
    new_no: int | None = None
    new: Markup | None = None


@dataclass
class FileView:
    """One file of a diff, ready to show."""

    path: str
    old_path: str | None
    status: str
    rows: list[DiffRow] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    notice: str = ""  #: why no (or not every) line is shown
    binary: bool = False

    def unified(self) -> Iterator[tuple[str, int | None, int | None, Markup]]:
        """``(kind, old line number, new line number, text)`` rows of the unified view."""
        for row in self.rows:
            if row.kind == "gap":
                yield "gap", None, None, Markup("")
            elif row.kind == "same":
                yield "same", row.old_no, row.new_no, row.new or Markup("")
            else:
                if row.old is not None:
                    yield "del", row.old_no, None, row.old
                if row.new is not None:
                    yield "add", None, row.new_no, row.new


def diff_view(d: FileDiff, context: int = 3) -> FileView:
    """The rows of one file's diff with ``context`` lines around each change; word-level marks
    on lines changed in place; a binary, too large or too long diff is a notice instead."""
    view = FileView(d.path, d.old_path if d.old_path != d.path else None, d.status)
    old, new = d.old or b"", d.new or b""
    if d.binary:
        view.binary = True
        view.notice = f"Binary content ({len(old)} bytes before, {len(new)} bytes after)."
        return view
    if len(old) > DIFF_BYTE_LIMIT or len(new) > DIFF_BYTE_LIMIT:
        view.notice = f"Too large to compare here ({len(old)} and {len(new)} bytes); read the file's versions."
        return view
    a, b = lines_of(old), lines_of(new)
    if len(a) > DIFF_LINE_LIMIT or len(b) > DIFF_LINE_LIMIT:
        view.notice = f"Too long to compare here ({len(a)} and {len(b)} lines); read the file's versions."
        return view
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for kind, i1, i2, j1, j2 in matcher.get_opcodes():
        if kind != "equal":
            view.removed += i2 - i1
            view.added += j2 - j1
    groups = list(matcher.get_grouped_opcodes(context))
    for group in groups:
        if group[0][1] > 0 or group[0][3] > 0:  # lines not shown before this group
            view.rows.append(DiffRow("gap"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                view.rows += [DiffRow("same", i + 1, _line(a[i]), j + 1, _line(b[j]))
                              for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]  # fmt: skip
            elif tag == "delete":
                view.rows += [DiffRow("del", i + 1, _line(a[i])) for i in range(i1, i2)]
            elif tag == "insert":
                view.rows += [DiffRow("add", new_no=j + 1, new=_line(b[j])) for j in range(j1, j2)]
            else:
                view.rows += _changed(a, b, i1, i2, j1, j2)
            if len(view.rows) > DIFF_ROWS_LIMIT:
                view.rows = view.rows[:DIFF_ROWS_LIMIT]
                view.notice = f"Only the first {DIFF_ROWS_LIMIT} lines of this diff are shown."
                return view
    if groups and (groups[-1][-1][2] < len(a) or groups[-1][-1][4] < len(b)):
        view.rows.append(DiffRow("gap"))  # lines not shown after the last group
    return view


def _changed(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> list[DiffRow]:
    """Rows of a block of lines changed in place: pairs side by side with their words marked."""
    rows: list[DiffRow] = []
    for k in range(max(i2 - i1, j2 - j1)):
        i, j = i1 + k, j1 + k
        if i < i2 and j < j2:
            left, right = _words(a[i], b[j])
            rows.append(DiffRow("change", i + 1, left, j + 1, right))
        elif i < i2:
            rows.append(DiffRow("del", i + 1, _line(a[i])))
        else:
            rows.append(DiffRow("add", new_no=j + 1, new=_line(b[j])))
    return rows
