"""The read commands' arguments: revisions given as positional arguments (and the paths given
there by mistake), ``log``'s revision, range, path and ``-N``, ``REV:PATH``, ``--since``/``--until``
times, ``--branch`` names, and the history a command reads (``main`` or a dream branch)."""

from __future__ import annotations

import argparse
import re
import time
from typing import TYPE_CHECKING

from ..errors import InvalidInputError, InvalidPathError
from ..paths import parse_path
from ..store.branch import BRANCH_PREFIX
from ..store.revisions import looks_like_revision, parse_time, resolve, split_range

if TYPE_CHECKING:
    from ..store import AnyBranch, MemoryStore

__all__ = [
    "parse_when",
    "count",
    "branch_name",
    "history_of",
    "resolve_arg",
    "path_arg",
    "log_selection",
    "split_rev_path",
]

_RELATIVE = re.compile(r"(\d+)\s*([smhdw])")
_BRANCH_ID = re.compile(r"[0-9a-fA-F]{16}")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_COUNT_ARG = re.compile(r"-(\d+)")


def parse_when(text: str, now: float | None = None, *, end: bool = False) -> float:
    """``--since``/``--until``: an ISO 8601 date or time, or ``N{s,m,h,d,w}`` meaning that long ago."""
    m = _RELATIVE.fullmatch(text.strip())
    if m:
        return (time.time() if now is None else now) - int(m.group(1)) * _UNITS[m.group(2)]
    try:
        return parse_time(text, end=end)
    except InvalidInputError:
        raise InvalidInputError(
            f"{text!r} is not a time; use ISO 8601 (2026-11-01, 2026-11-01T14:30:00Z) "
            "or an age such as 30m, 2h, 3d, 1w."
        ) from None


def count(text: str) -> int:
    """``-n N``, ``--skip N``: a count, 0 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}")
    return n


def branch_name(text: str) -> str:
    """``--branch``: ``dream/<16 hex digits>``, or the 16 hex digits alone, as the branch's name.

    Raises:
        InvalidInputError: ``text`` is neither.
    """
    ident = text.strip()
    if ident.startswith(BRANCH_PREFIX + "/"):
        ident = ident[len(BRANCH_PREFIX) + 1 :]
    if not _BRANCH_ID.fullmatch(ident):
        raise InvalidInputError(
            f"{text!r} is not a dream branch; give {BRANCH_PREFIX}/ and 16 hex digits, or the 16 hex digits alone."
        )
    return f"{BRANCH_PREFIX}/{ident.lower()}"


def history_of(store: MemoryStore, branch: str | None) -> AnyBranch:
    """What the command reads: ``main`` (the store), or the side branch ``branch`` (already
    checked by :func:`branch_name`).

    Raises:
        InvalidInputError: the store has no such branch (or cannot have any: object storage).
    """
    if branch is None:
        return store
    side = store.branch(branch)
    if branch not in store.branches():
        raise InvalidInputError(f"There is no dream branch {branch} in this store.")
    return side


def resolve_arg(store: AnyBranch, text: str, command: str) -> bytes:
    """A revision given as a positional argument; a path given there instead is told so."""
    try:
        return resolve(store, text)
    except InvalidInputError:
        if command == "show" and ".." in text and looks_like_revision(text):
            raise InvalidInputError(
                f"show takes one revision, not the range {text!r}; its commits: memvault log -p {text}; "
                f"the change across it: memvault diff {text}."
            ) from None
        if "/" not in text or looks_like_revision(text):
            raise
        path = text if text.startswith("/") else "/" + text
        if command == "show":
            raise InvalidInputError(
                f"{text!r} is not a revision; for a file at a revision: memvault show HEAD:{path}."
            ) from None
        raise InvalidInputError(
            f"{text!r} is neither a revision nor a path; a path starts with /: memvault {command} {path}."
        ) from None


def path_arg(text: str, command: str) -> str:
    """The PATH argument of ``cat``, ``blame`` and ``ls``; a revision given there (these take it
    with ``--rev``) is told so."""
    try:
        return parse_path(text).text
    except InvalidPathError:
        if looks_like_revision(text):
            raise InvalidInputError(
                f"{text!r} is a revision, not a path; {command} takes a revision with --rev: "
                f"memvault {command} --rev {text} PATH."
            ) from None
        rev, colon, rest = text.partition(":")
        if colon and rest and looks_like_revision(rev):
            path = rest if rest.startswith("/") else "/" + rest
            raise InvalidInputError(
                f"{text!r} is REV:PATH, which {command} does not take; use memvault {command} --rev {rev} {path}."
            ) from None
        raise


def log_selection(args: argparse.Namespace) -> tuple[str, str | None, str | None, int | None]:
    """``log``'s positional arguments and options as ``(start, exclude, path, limit)``.

    An argument starting with ``/`` is a path; ``-N`` is ``-n N``; anything else is a revision
    or a range ``A..B`` (``start=B, exclude=A``).
    """
    revs: list[str] = []
    paths: list[str] = []
    counts: list[int] = []
    for arg in args.args:
        m = _COUNT_ARG.fullmatch(arg)
        if m:
            counts.append(int(m.group(1)))
        elif arg.startswith("/"):
            paths.append(arg)
        else:
            revs.append(arg)
    if len(paths) > 1:
        raise InvalidInputError("log takes at most one PATH.")
    if len(revs) > 1:
        raise InvalidInputError(
            f"log takes at most one revision or range (A..B), not {' '.join(revs)}; a path starts with /."
        )
    if revs and args.rev is not None:
        raise InvalidInputError("Give the revision once: as an argument or with --rev.")
    if len(counts) > 1 or (counts and args.n is not None):
        raise InvalidInputError("Give the number of commits once: -N or -n N.")
    limit = counts[0] if counts else args.n
    spec = revs[0] if revs else (args.rev or "HEAD")
    pair = split_range(spec)
    start, exclude = (pair[1], pair[0]) if pair is not None else (spec, None)
    return start, exclude, paths[0] if paths else None, limit


def split_rev_path(spec: str) -> tuple[str, str | None]:
    """``REV[:PATH]`` -> ``(REV, PATH or None)``; a ``@{time}`` may itself contain colons."""
    end = spec.rfind("}")
    cut = spec.find(":", end + 1 if end >= 0 else 0)
    if cut < 0:
        return spec, None
    rev, path = spec[:cut], spec[cut + 1 :]
    if not path:
        raise InvalidInputError(f"No path after the colon in {spec!r}; use REV:/memories/...")
    return rev, path if path.startswith("/") else "/" + path
