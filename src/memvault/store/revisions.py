"""Revisions: the one grammar that names a commit, for the read API (``MemoryStore.read_text(...,
rev=)``), :mod:`memvault.history`, undo, the MCP server and the CLI alike.

- ``HEAD`` (or ``@``, or empty), ``HEAD~N`` and ``HEAD^`` (the N-th / first parent); ``~N`` and
  ``^`` also follow any other revision (``#12~2``, ``3f2a9c^``);
- a full or abbreviated commit id (at least 4 hex digits, unique in the history);
- ``#N``: the commit with sequence number N (``memvault log`` shows it);
- ``@{TIME}``: the newest commit made at or before TIME, an ISO 8601 date or date-time
  (``@{2026-11-01}``, ``@{2026-11-01 14:30}``, ``@{2026-11-01T14:30:00+01:00}``); a time
  without an offset is UTC.

The library also takes a sequence number as an ``int``, a commit id as ``bytes``, and None for the
head (:data:`Revision`). A range ``A..B`` (:func:`split_range`; an empty side is ``HEAD``) names the
commits reachable from B and not from A. Only commits of the history read (the head back to ``#0``)
are found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Protocol

from ..errors import IntegrityError, InvalidInputError
from ..format.records import CommitMeta

__all__ = ["Revision", "History", "resolve", "ancestors", "parse_time", "split_range", "looks_like_revision"]

#: A revision as the library takes it: None (the head), a sequence number, or the grammar above as
#: text (a commit id also as bytes).
Revision = str | bytes | int | None

_HEX = re.compile(r"[0-9a-fA-F]{4,40}")
_SEQ = re.compile(r"#(\d+)")
_TIME = re.compile(r"@\{(.+)\}")
_STEPS = re.compile(r"(.*?)((?:~\d*|\^+)+)")
_SYNTAX = re.compile(r"(?:HEAD|@|[0-9a-fA-F]{4,40}|#\d+|@\{[^}]+\})?(?:~\d*|\^+)*")


class History(Protocol):
    """What revisions are resolved in: a store's ``main`` or one of its side branches."""

    @property
    def head(self) -> tuple[bytes, int]: ...

    def commit(self, commit_id: bytes) -> tuple[CommitMeta, bytes, bytes | None]: ...


def ancestors(store: History, start: bytes | None = None) -> Iterator[tuple[bytes, CommitMeta, bytes, bytes | None]]:
    """``(commit_id, meta, tree_id, parent_id)`` from ``start`` (default: the head) back to the
    first commit, each authenticated.

    Raises:
        IntegrityError: a commit is not authentic, or the sequence numbers are not contiguous.
    """
    commit_id: bytes | None = start if start is not None else store.head[0]
    expected: int | None = None
    while commit_id is not None:
        meta, tree_id, parent = store.commit(commit_id)
        if expected is not None and meta.seq != expected:
            raise IntegrityError("The store's history is not contiguous.")
        yield commit_id, meta, tree_id, parent
        commit_id, expected = parent, meta.seq - 1


def resolve(store: History, rev: Revision) -> bytes:
    """The commit id (40 hex bytes) ``rev`` names (see the module docstring).

    Raises:
        InvalidInputError: ``rev`` breaks the grammar, or names no commit of the history (or
            more than one: an abbreviation too short).
        TypeError: ``rev`` is not a :data:`Revision`.
    """
    if rev is None:
        return store.head[0]
    if isinstance(rev, bool) or not isinstance(rev, (str, bytes, int)):
        raise TypeError("a revision is None, a sequence number, or a revision's text (a commit id also as bytes)")
    if isinstance(rev, int):
        return _by_seq(store, rev)
    spec = rev.decode("ascii", "replace") if isinstance(rev, bytes) else rev
    text = spec.strip()
    shown = spec[:60]
    if text in ("HEAD", "@", ""):
        return store.head[0]
    m = _STEPS.fullmatch(text)
    if m and (not text.startswith("@{") or m.group(1).endswith("}")):
        steps = sum(int(n or 1) for n in re.findall(r"~(\d*)", m.group(2))) + m.group(2).count("^")
        base = resolve(store, m.group(1)) if m.group(1) else store.head[0]
        for i, (commit_id, *_rest) in enumerate(ancestors(store, base)):
            if i == steps:
                return commit_id
        raise InvalidInputError(f"Error: Revision {shown!r} goes back beyond the first commit.")
    if m := _SEQ.fullmatch(text):
        return _by_seq(store, int(m.group(1)))
    if m := _TIME.fullmatch(text):
        when = parse_time(m.group(1), end=True)
        for commit_id, meta, _tree, _parent in ancestors(store):
            if meta.time <= when:
                return commit_id
        raise InvalidInputError(f"Error: No commit was made at or before {m.group(1)[:60]}.")
    if _HEX.fullmatch(text):
        prefix = text.lower()
        found: list[bytes] = []
        for commit_id, *_rest in ancestors(store):
            if commit_id.decode().startswith(prefix):
                if len(prefix) == 40:
                    return commit_id
                found.append(commit_id)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise InvalidInputError(f"Error: Revision {shown!r} is ambiguous; give more digits.")
    raise InvalidInputError(f"Error: Unknown revision {shown!r}.")


def _by_seq(store: History, seq: int) -> bytes:
    head, head_seq = store.head
    if 0 <= seq <= head_seq:
        for commit_id, meta, _tree, _parent in ancestors(store, head):
            if meta.seq == seq:
                return commit_id
    raise InvalidInputError(f"Error: There is no commit #{seq}.")


def parse_time(text: str, *, end: bool = False) -> float:
    """An ISO 8601 date or date-time as seconds since the epoch (UTC when no offset is given).
    With ``end``, a time given to the second (or minute) means the end of that second (minute),
    so the time ``log`` prints for a commit (whole seconds) selects that commit as an upper bound
    (``@{...}``, ``--until``); a bare date means the start of the day, as in git.

    Raises:
        InvalidInputError: ``text`` is not ISO 8601.
    """
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(
            f"Error: {text[:60]!r} is not a date or time; use ISO 8601 such as 2026-11-01 or 2026-11-01T14:30:00Z."
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    stamp = when.timestamp()
    clock = text.strip()[10:]
    if end and clock and "." not in clock:
        digits = re.sub(r"[+-]\d\d:?\d\d$|Z$", "", clock).strip(" T")
        stamp += 59.999999 if digits.count(":") == 1 else 0.999999
    return stamp


def split_range(spec: str) -> tuple[str, str] | None:
    """``A..B`` -> ``(A, B)`` (an empty side is ``HEAD``); None when ``spec`` is not a range.

    Raises:
        InvalidInputError: ``A...B`` (history is linear: there is nothing symmetric to show).
    """
    if ".." not in spec:
        return None
    if "..." in spec:
        raise InvalidInputError(f"Error: {spec[:60]!r}: A...B is not supported (history is linear); use A..B.")
    left, right = spec.split("..", 1)
    return left.strip() or "HEAD", right.strip() or "HEAD"


def looks_like_revision(text: str) -> bool:
    """Whether ``text`` has the syntax of a revision (see the module docstring) or of a range of
    two; it may still name no commit."""
    try:
        pair = split_range(text)
    except InvalidInputError:
        return False
    sides = pair if pair is not None else (text,)
    return bool(text.strip()) and all(_SYNTAX.fullmatch(side.strip()) for side in sides)
