"""Where many patterns match in one byte string, found in one pass.

The scrubber (:mod:`memvault.scrub`) asks one question of every text before running its Python
rules: at which offsets can each rule's regex start, and which rules cannot match at all? A
:class:`PatternSet` answers it for all rules at once with Hyperscan (``hyperscan``, the Python
binding of Intel's multi-pattern regex engine, which scans a text once for every pattern), and
with Python's ``re`` when Hyperscan is not installed; both give the same answer for the patterns
the scrubber uses (see :class:`Pattern` for the rules those patterns follow).

This module is the only one that imports ``hyperscan``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["Pattern", "PatternSet", "HYPERSCAN"]

_hs: Any
try:
    import hyperscan as _hs_module  # type: ignore[import-untyped,import-not-found,unused-ignore]

    _hs = _hs_module
except ImportError:  # pragma: no cover - a dependency; the re fallback gives the same answer
    _hs = None

#: Whether the Hyperscan engine is in use (else the slower ``re`` fallback).
HYPERSCAN: Final[bool] = _hs is not None


@dataclass(frozen=True, slots=True)
class Pattern:
    """One pattern over bytes, in the syntax Hyperscan and Python's ``re`` share.

    ``starts`` patterns report ``shift`` plus every offset at which they match (``shift`` lets a
    pattern include context before the offset of interest); they must be **fixed-length**
    (Hyperscan reports, for each end offset, only the leftmost start: with one length per
    pattern that is every start). ``gate`` patterns (``starts=False``) only report whether they
    match anywhere. ``caseless`` matches ASCII letters without regard to case.
    """

    regex: str
    caseless: bool = False
    starts: bool = True
    shift: int = 0


class PatternSet:
    """A compiled set of :class:`Pattern` s. Thread-safe: each thread gets its own scratch space."""

    __slots__ = ("_patterns", "_db", "_local", "_fallback", "_shifts")

    def __init__(self, patterns: Sequence[Pattern], *, hyperscan: bool = HYPERSCAN) -> None:
        """Compile ``patterns``; ``hyperscan=False`` uses the ``re`` fallback even when Hyperscan is
        installed (the tests compare the two)."""
        self._patterns = tuple(patterns)
        self._shifts = tuple(p.shift for p in self._patterns)
        self._local = threading.local()
        self._db: Any = None
        self._fallback: tuple[tuple[int, re.Pattern[bytes], bool], ...] = ()
        if hyperscan and _hs is not None and self._patterns:
            self._db = _hs.Database()
            flags = [
                (_hs.HS_FLAG_SOM_LEFTMOST if p.starts else _hs.HS_FLAG_SINGLEMATCH)
                | (_hs.HS_FLAG_CASELESS if p.caseless else 0)
                for p in self._patterns
            ]
            self._db.compile(
                expressions=[p.regex.encode("ascii") for p in self._patterns],
                ids=list(range(len(self._patterns))),
                elements=len(self._patterns),
                flags=flags,
            )
        else:
            self._fallback = tuple(
                (
                    i,
                    re.compile(
                        (f"(?=(?:{p.regex}))" if p.starts else p.regex).encode("ascii"),
                        re.IGNORECASE if p.caseless else 0,
                    ),
                    p.starts,
                )
                for i, p in enumerate(self._patterns)
            )

    def __len__(self) -> int:
        return len(self._patterns)

    def scan(self, data: bytes) -> list[tuple[int, int]]:
        """``(pattern index, start + shift)`` for every match start of every ``starts`` pattern and
        ``(pattern index, 0)`` once for each ``gate`` pattern that matches; in no particular order."""
        hits: list[tuple[int, int]] = []
        if self._db is not None:
            scratch = getattr(self._local, "scratch", None)
            if scratch is None:
                scratch = self._local.scratch = _hs.Scratch(self._db)
            self._db.scan(data, match_event_handler=_collect, context=hits, scratch=scratch)
            shifts = self._shifts
            return [(i, start + shifts[i]) for i, start in hits]
        for i, rx, starts in self._fallback:
            if starts:
                shift = self._shifts[i]
                hits.extend((i, m.start() + shift) for m in rx.finditer(data))
            elif rx.search(data) is not None:
                hits.append((i, 0))
        return hits


def _collect(index: int, start: int, _end: int, _flags: int, hits: list[tuple[int, int]]) -> None:
    hits.append((index, start))
