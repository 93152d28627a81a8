"""How the read commands write for a person, as git does: a pager on a terminal, ``--color``,
``--date`` styles, and times in ``--json`` output as ISO 8601.

- **Pager** (:func:`paged`): only when stdout is a terminal and ``--no-pager`` is not given;
  ``$MEMVAULT_PAGER``, else ``$PAGER``, else ``less -FRX``. A variable that is set but empty, or
  ``cat``, means no pager. The command line is split as a shell would split it (quotes, no pipes
  or redirections). ``LESS=FRX`` and ``LV=-c`` are set for the pager unless already set (as git
  does), so ``less`` quits on a short output, shows colours and leaves the screen as it was. A
  pager that is not installed (or cannot be run) means plain output. The reader quitting the pager
  early ends the command quietly, exit 0.
- **Colour** (:func:`color_enabled`): ``always``, ``never``, or ``auto``: on a terminal, with
  ``NO_COLOR`` unset (or empty) and ``TERM`` other than ``dumb``.
- **Dates** (:func:`format_date`): ``local`` (``2026-11-01 14:30:00``, local time), ``iso``
  (``2026-11-01T14:30:00+01:00``, local time with its offset) or ``relative`` (``3 hours ago``,
  as git counts).
- **JSON** (:func:`iso_utc`, :func:`json_times`, from :mod:`memvault.timefmt`, which the MCP
  server uses too): a time is ISO 8601 in UTC with its offset (``2026-11-01T13:30:00+00:00``, to
  the second); the exact seconds since the epoch stay alongside as ``timestamp``.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, TextIO

from ..timefmt import iso_utc, json_times

__all__ = [
    "ENV_PAGER",
    "DEFAULT_PAGER",
    "COLOR_CHOICES",
    "add_color_flags",
    "DATE_STYLES",
    "color_enabled",
    "pager_command",
    "paged",
    "format_date",
    "relative_date",
    "iso_utc",
    "json_times",
]

ENV_PAGER = "MEMVAULT_PAGER"
DEFAULT_PAGER = "less -FRX"
COLOR_CHOICES = ("auto", "always", "never")
DATE_STYLES = ("local", "iso", "relative")


# -- colour ----------------------------------------------------------------------------------------


def add_color_flags(parser: Any, *, what: str = "colour") -> None:
    """Give ``parser`` ``--color[=WHEN]`` (auto, always, never; default auto) and ``--no-color``."""
    parser.add_argument(
        "--color",
        nargs="?",
        const="always",
        default="auto",
        choices=COLOR_CHOICES,
        metavar="WHEN",
        help=f"{what}: auto (a terminal, NO_COLOR unset, TERM not dumb; the default), always (also --color "
        "alone) or never",
    )
    parser.add_argument("--no-color", dest="color", action="store_const", const="never", help="same as --color=never")


def color_enabled(when: str, stream: TextIO | None = None, env: Mapping[str, str] | None = None) -> bool:
    """``--color=WHEN``: ``always``, ``never``, or ``auto`` (a terminal, ``NO_COLOR`` unset or
    empty, ``TERM`` not ``dumb``)."""
    if when == "always":
        return True
    if when == "never":
        return False
    env = os.environ if env is None else env
    stream = stream or sys.stdout
    return stream.isatty() and not env.get("NO_COLOR") and env.get("TERM") != "dumb"


# -- pager -----------------------------------------------------------------------------------------


def pager_command(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The pager's argv: ``$MEMVAULT_PAGER``, else ``$PAGER``, else ``less -FRX``; None for no
    pager (a variable set to nothing or to ``cat``, or one that does not split)."""
    env = os.environ if env is None else env
    raw = next((env[name] for name in (ENV_PAGER, "PAGER") if name in env), DEFAULT_PAGER).strip()
    if raw in ("", "cat"):
        return None
    try:
        argv = shlex.split(raw)
    except ValueError:  # unbalanced quotes: treated as no pager rather than guessed at
        return None
    return argv or None


def _terminal_fd(stream: TextIO) -> int | None:
    """The file descriptor of ``stream`` when it is a real terminal (not a stand-in that only
    says so)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None
    return fd if os.isatty(fd) else None


class _PagerStream(io.TextIOWrapper):
    """The pager's stdin as ``sys.stdout``: what is written there reaches a person on a
    terminal, so it counts as one (colour, terminal-safe content)."""

    def isatty(self) -> bool:
        return True


@contextlib.contextmanager
def paged(enabled: bool = True) -> Iterator[bool]:
    """Send ``sys.stdout`` through the pager for the ``with`` body; yields whether a pager runs.

    Nothing changes when ``enabled`` is false, stdout is not a terminal, no pager is configured or
    the pager cannot be started. On leaving, the pager's input is closed and the pager waited
    for (Ctrl-C meanwhile does not leave it behind); a reader who quit early (a broken pipe) is
    not an error.
    """
    real = sys.stdout
    fd = _terminal_fd(real) if enabled else None
    argv = pager_command() if fd is not None else None
    if fd is None or argv is None:
        yield False
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    real.flush()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=fd, env=env)  # noqa: S603 (the user's pager)
    except OSError:  # not installed, not executable: plain output
        yield False
        return
    assert proc.stdin is not None
    stream = _PagerStream(proc.stdin, encoding=real.encoding or "utf-8", errors="replace")
    sys.stdout = stream
    try:
        yield True
    except BrokenPipeError:
        pass  # the reader quit the pager: the output is not wanted any more
    finally:  # also on Ctrl-C or an error: the pager keeps the terminal until the reader quits
        sys.stdout = real
        _close(stream, proc.stdin)
        _wait(proc)


def _close(stream: TextIO, pipe: Any) -> None:
    """Close the pager's input; if the pager is gone, drop what is still buffered."""
    try:
        stream.close()
        return
    except OSError:
        pass
    try:  # the pipe's other end is closed: what is left goes nowhere, and the close succeeds
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, pipe.fileno())
        finally:
            os.close(devnull)
        stream.close()
    except (OSError, ValueError):
        pass


def _wait(proc: subprocess.Popen[bytes]) -> None:
    """Wait for the pager: the person may still be reading; Ctrl-C is the pager's to handle."""
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:
            continue


# -- dates -----------------------------------------------------------------------------------------


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def relative_date(t: float, now: float | None = None) -> str:
    """How long ago ``t`` was, rounded as git rounds it (``90 seconds`` is ``2 minutes``, up to
    ``14 days`` in days, ``10 weeks`` in weeks, then months, then years and months)."""
    now = time.time() if now is None else now
    if t > now:
        return "in the future"
    diff = int(now - t)
    if diff < 90:
        return _plural(diff, "second") + " ago"
    diff = (diff + 30) // 60
    if diff < 90:
        return _plural(diff, "minute") + " ago"
    diff = (diff + 30) // 60
    if diff < 36:
        return _plural(diff, "hour") + " ago"
    diff = (diff + 12) // 24
    if diff < 14:
        return _plural(diff, "day") + " ago"
    if diff < 70:
        return _plural((diff + 3) // 7, "week") + " ago"
    if diff < 365:
        return _plural((diff + 15) // 30, "month") + " ago"
    if diff < 1825:
        total_months = (diff * 12 * 2 + 365) // (365 * 2)
        years, months = divmod(total_months, 12)
        if months:
            return f"{_plural(years, 'year')}, {_plural(months, 'month')} ago"
        return _plural(years, "year") + " ago"
    return _plural((diff + 183) // 365, "year") + " ago"


def format_date(t: float, style: str = "local", now: float | None = None) -> str:
    """``t`` in a ``--date`` style: ``local``, ``iso`` or ``relative`` (see the module doc)."""
    if style == "iso":
        return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")
    if style == "relative":
        return relative_date(t, now)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
