"""How ``memvault log`` writes a commit on a line: the default aligned columns, ``--oneline`` and
``--format``.

The default line: short id, ``#seq``, date, actor, command, paths, then tags (the side branch of a
branch commit, scrubber findings, redacted versions). Columns are as wide as the widest value of
the commits printed together (:data:`PAGE` at a time, at least the widths of the original fixed
layout), so a long actor name shifts the columns of its page instead of breaking them.

``--format`` placeholders (:data:`PLACEHOLDERS`; an unknown one exits 2):

``%H`` full commit id, ``%h`` short id (10 hex digits), ``%s`` subject (command and paths),
``%an`` actor, ``%ad`` date in the ``--date`` style, ``%ar`` relative date, ``%aI`` ISO 8601 date
(local time with offset), ``%at`` seconds since the epoch, ``%(seq)`` sequence number,
``%(actor)``, ``%(session)``, ``%(command)``, ``%(paths)``, ``%(branch)`` (empty on ``main``),
``%(findings)`` (``kind:count`` pairs), ``%n`` newline, ``%%`` a ``%``, ``%C(NAME)`` a colour when
colour is on (red, green, yellow, blue, magenta, cyan, bold, dim, reset).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import InvalidInputError
from ..history import CommitInfo
from ._common import terminal_safe
from ._output import format_date

__all__ = ["SHORT", "PAGE", "PLACEHOLDERS", "ONELINE", "paint", "paths_text", "LogFormat", "format_log_line"]

SHORT = 10
PAGE = 100
_CODES = {
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
    "bold": "1",
    "dim": "2",
    "reset": "0",
}
_FIELD: dict[str, Callable[[CommitInfo], str]] = {
    "seq": lambda e: str(e.seq),
    "actor": lambda e: e.actor,
    "session": lambda e: e.session,
    "command": lambda e: e.command,
    "paths": lambda e: paths_text(e),
    "branch": lambda e: e.branch or "",
    "findings": lambda e: ", ".join(f"{k}:{v}" for k, v in sorted(e.findings.items())),
}
PLACEHOLDERS = ("%H", "%h", "%s", "%an", "%ad", "%ar", "%aI", "%at", "%n", "%%", "%C(NAME)") + tuple(
    f"%({name})" for name in _FIELD
)
#: ``--oneline``: the short id and the subject (then the tags).
ONELINE = "%C(yellow)%h%C(reset) %s"
_TOKEN = re.compile(r"%(?:(an|ad|ar|aI|at|[Hhsn%])|C\(([a-z]+)\)|\(([a-z]+)\))")


def paint(text: str, name: str, on: bool) -> str:
    """``text`` in colour ``name`` when ``on``."""
    return f"\x1b[{_CODES[name]}m{text}\x1b[0m" if on else text


def paths_text(e: CommitInfo) -> str:
    return " -> ".join(e.paths) if e.command == "rename" else " ".join(e.paths)


def _tags(e: CommitInfo, on: bool, lead: bool) -> str:
    """The side branch, findings and redacted versions of a commit, each in brackets."""
    out = ""
    if e.branch:  # in the paths column when there are none (a fork commit)
        out += ("  " if lead else "") + paint(f"[{e.branch}]", "cyan", on)
    if e.findings:
        out += "  " + paint("[" + ", ".join(f"{k}:{v}" for k, v in sorted(e.findings.items())) + "]", "red", on)
    redacted = [c.redacted for c in e.changes if c.redacted is not None]
    if redacted:
        by = sorted({str(r.get("actor")) for r in redacted if r.get("actor")})
        out += "  " + paint(f"[{len(redacted)} redacted{' by ' + ', '.join(by) if by else ''}]", "red", on)
    return out


@dataclass(frozen=True)
class _Columns:
    seq: int = 4
    date: int = 0
    actor: int = 10
    command: int = 11


class LogFormat:
    """Writes commits as log lines: the default layout, or a ``--format`` template (``tags``: with
    the commit's tags after it, as ``--oneline`` has them).

    Raises:
        InvalidInputError: the template has an unknown placeholder or colour.
    """

    def __init__(
        self,
        *,
        template: str | None = None,
        tags: bool = False,
        color: bool = False,
        date: str = "local",
        now: float | None = None,
    ) -> None:
        self.color = color
        self.date = date
        self.now = now
        self.tags = tags
        self._tokens = _compile(template) if template is not None else None

    def lines(self, entries: Sequence[CommitInfo]) -> list[str]:
        """One line per commit (a ``--format`` with ``%n`` makes more); the default layout's
        columns are as wide as these entries need."""
        if self._tokens is not None:
            return [self._render(e, self._tokens) for e in entries]
        dates = [format_date(e.time, self.date, self.now) for e in entries]
        actors = [terminal_safe(e.actor) for e in entries]
        base = _Columns()
        cols = _Columns(
            seq=max([base.seq, *(len(str(e.seq)) for e in entries)]),
            date=max([base.date, *(len(d) for d in dates)]),
            actor=max([base.actor, *(len(a) for a in actors)]),
            command=max([base.command, *(len(e.command) for e in entries)]),
        )
        out = []
        for e, when, actor in zip(entries, dates, actors, strict=True):
            paths = terminal_safe(paths_text(e))
            short = paint(e.commit_id[:SHORT], "yellow", self.color)
            line = (
                f"{short}  #{e.seq:<{cols.seq}} {when:<{cols.date}}  {actor:<{cols.actor}} "
                f"{e.command:<{cols.command}} {paths}"
            )
            out.append((line + _tags(e, self.color, bool(paths))).rstrip())
        return out

    def _render(self, e: CommitInfo, tokens: Sequence[tuple[str, str]]) -> str:
        out: list[str] = []
        for kind, value in tokens:
            if kind == "text":
                out.append(value)
            elif kind == "color":
                out.append(f"\x1b[{_CODES[value]}m" if self.color else "")
            elif kind == "field":
                out.append(terminal_safe(_FIELD[value](e)))
            else:
                out.append(self._placeholder(e, value))
        text = "".join(out)
        if self.tags:
            text = text.rstrip() + _tags(e, self.color, True)
        return text

    def _placeholder(self, e: CommitInfo, code: str) -> str:
        if code == "H":
            return e.commit_id
        if code == "h":
            return e.commit_id[:SHORT]
        if code == "s":
            return terminal_safe(f"{e.command} {paths_text(e)}".rstrip())
        if code == "an":
            return terminal_safe(e.actor)
        if code == "at":
            return str(int(e.time))
        style = {"ad": self.date, "ar": "relative", "aI": "iso"}[code]
        return format_date(e.time, style, self.now)


def _compile(template: str) -> list[tuple[str, str]]:
    """The template as ``(kind, value)`` tokens: ``text``, ``code`` (a one- or two-letter
    placeholder), ``color`` or ``field`` (a ``%(name)``)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while True:
        cut = template.find("%", pos)
        if cut < 0:
            break
        if cut > pos:
            tokens.append(("text", template[pos:cut]))
        m = _TOKEN.match(template, cut)
        if m is None:
            bad = template[cut : cut + 2]
            raise InvalidInputError(f"Unknown placeholder {bad!r} in --format; use one of {', '.join(PLACEHOLDERS)}.")
        code, colour, field = m.groups()
        if code in ("n", "%"):
            tokens.append(("text", "\n" if code == "n" else "%"))
        elif code is not None:
            tokens.append(("code", code))
        elif colour is not None:
            if colour not in _CODES:
                raise InvalidInputError(f"Unknown colour {colour!r} in --format; use one of {', '.join(_CODES)}.")
            tokens.append(("color", colour))
        else:
            if field not in _FIELD:
                raise InvalidInputError(
                    f"Unknown placeholder '%({field})' in --format; use one of {', '.join(PLACEHOLDERS)}."
                )
            tokens.append(("field", field))
        pos = m.end()
    if pos < len(template):
        tokens.append(("text", template[pos:]))
    return tokens


def format_log_line(e: CommitInfo, on: bool = False) -> str:
    """One commit on one line in the default layout (columns at their least widths)."""
    return LogFormat(color=on).lines([e])[0]
