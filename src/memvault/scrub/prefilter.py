"""Where many patterns match in one byte string, found in one pass.

The scrubber (:mod:`memvault.scrub`) asks one question of every text before running its Python
rules: at which offsets can each rule's regex start, and which rules cannot match at all? A
:class:`PatternSet` answers it for all rules at once with Hyperscan (``hyperscan``, the Python
binding of Intel's multi-pattern regex engine, which scans a text once for every pattern), and
with Python's ``re`` when Hyperscan is not installed; both give the same answer for the patterns
the scrubber uses (see :class:`Pattern` for the rules those patterns follow). Then each rule runs
its Python regex only at the offsets reported (:func:`match_at`, :func:`finditer_before`,
:func:`run_starts`), which gives the same matches as running it everywhere.

Compiling the scrubber's Hyperscan database takes about a tenth of a second, once per process (on
first use). :class:`PatternSet` keeps the compiled database in a cache directory, so that later
processes load it instead (:func:`cache_dir`; the file format and when a file is trusted are in
``docs/format.md`` §13).

This module is the only one that imports ``hyperscan``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import stat
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..fsutil import FILE_MODE, O_NEW_FILE, O_READ, cache_root, make_dirs_in_own, open_trusted_dir, trusted, write_all

__all__ = [
    "Pattern",
    "PatternSet",
    "HYPERSCAN",
    "match_at",
    "finditer_before",
    "class_table",
    "run_starts",
    "cache_dir",
    "CACHE_FILES",
]

_hs: Any
try:
    import hyperscan as _hs_module  # type: ignore[import-untyped,import-not-found,unused-ignore]

    _hs = _hs_module
except ImportError:  # pragma: no cover - a dependency; the re fallback gives the same answer
    _hs = None

# Python's own regex parser gives the width of a pattern (``re._parser`` from 3.11, ``sre_parse`` before).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    _parse: Any = getattr(re, "_parser", None) or __import__("sre_parse")
    _parse = _parse.parse

#: Whether the Hyperscan engine is in use (else the slower ``re`` fallback).
HYPERSCAN: Final[bool] = _hs is not None
#: Compiled databases kept in the cache directory; the least recently written beyond are removed.
CACHE_FILES: Final = 8
#: The first bytes of a cache file (then the fingerprint, the SHA-256 of the database, the database).
_CACHE_MAGIC: Final = b"memvault hyperscan database 1\n"
#: A cache file larger than this is not read (the scrubber's database is about 250 KB).
_CACHE_MAX_BYTES: Final = 64 << 20


@dataclass(frozen=True, slots=True)
class Pattern:
    """One pattern over bytes, in the syntax Hyperscan and Python's ``re`` share.

    ``starts`` patterns report ``shift`` plus every offset at which they match (``shift`` lets a
    pattern include context before the offset of interest); they must be **fixed-length**
    (Hyperscan reports where matches end; with one length, the start follows; tracking starts
    instead costs much more). ``gate`` patterns (``starts=False``) only report whether they
    match anywhere. ``caseless`` matches ASCII letters without regard to case.
    """

    regex: str
    caseless: bool = False
    starts: bool = True
    shift: int = 0


class PatternSet:
    """A set of :class:`Pattern` s, compiled on first use. Thread-safe: each thread scans with
    its own Hyperscan scratch space."""

    __slots__ = (
        "_patterns",
        "_groups",
        "_hyperscan",
        "_adjust",
        "_gather",
        "_db",
        "_source",
        "_fallback",
        "_local",
        "_lock",
    )

    def __init__(
        self, patterns: Sequence[Pattern], *, groups: Sequence[int] | None = None, hyperscan: bool = HYPERSCAN
    ) -> None:
        """``groups[i]`` names the group of pattern ``i`` for :meth:`grouped` (default: ``i``).
        ``hyperscan=False`` uses the ``re`` fallback even when Hyperscan is installed (the tests
        compare the two). ValueError if a ``starts`` pattern is not fixed-length, or ``groups``
        does not name one group per pattern."""
        self._patterns = tuple(patterns)
        self._groups = tuple(range(len(self._patterns))) if groups is None else tuple(groups)
        if len(self._groups) != len(self._patterns):
            raise ValueError("groups must name one group per pattern")
        self._hyperscan = hyperscan and _hs is not None and bool(self._patterns)
        #: For a starts pattern, what turns the end offset Hyperscan reports into the offset wanted.
        self._adjust = tuple(p.shift - width(p.regex) if p.starts else 0 for p in self._patterns)
        self._gather = _gatherer(self._groups, tuple(p.starts for p in self._patterns), self._adjust)
        self._db: Any = None
        self._source: str | None = None
        self._fallback: tuple[tuple[int, re.Pattern[bytes], bool, int], ...] | None = None
        self._local = threading.local()
        self._lock = threading.Lock()

    def scan(self, data: bytes) -> list[tuple[int, int]]:
        """``(pattern index, start + shift)`` for every match start of every ``starts`` pattern and
        ``(pattern index, 0)`` once for each ``gate`` pattern that matches; in no particular order."""
        if self._hyperscan:
            scratch = getattr(self._local, "scratch", None)
            if scratch is None:
                scratch = self._local.scratch = _hs.Scratch(self._database())
            hits: list[tuple[int, int]] = []
            self._db.scan(data, match_event_handler=_collect, context=hits, scratch=scratch)
            adjust, patterns = self._adjust, self._patterns
            return [(i, end + adjust[i] if patterns[i].starts else 0) for i, end in hits]
        out: list[tuple[int, int]] = []
        for i, rx, starts, shift in self._regexes():
            if starts:
                out.extend((i, m.start() + shift) for m in rx.finditer(data))
            elif rx.search(data) is not None:
                out.append((i, 0))
        return out

    def grouped(self, datas: Sequence[bytes]) -> dict[int, list[int]]:
        """What :meth:`scan` reports for each of ``datas`` (which must be of one length), gathered
        by group: ``{group: offsets}`` for the groups with any report, the offsets in no
        particular order and possibly repeated (a gate group reports ``0`` for each match)."""
        out: dict[int, list[int]] = {}
        if self._hyperscan:
            scratch = getattr(self._local, "scratch", None)
            if scratch is None:
                scratch = self._local.scratch = _hs.Scratch(self._database())
            for data in datas:
                self._db.scan(data, match_event_handler=self._gather, context=out, scratch=scratch)
            return out
        groups = self._groups
        for data in datas:
            for i, offset in self.scan(data):
                out.setdefault(groups[i], []).append(offset)
        return out

    @property
    def source(self) -> str | None:
        """Where the Hyperscan database came from: ``"compiled"`` in this process, ``"cache"`` (a
        file of :func:`cache_dir`), or None (not needed yet, or the ``re`` fallback)."""
        return self._source

    def _database(self) -> Any:
        with self._lock:
            if self._db is None:
                expressions = [p.regex.encode("ascii") for p in self._patterns]
                flags = [
                    (0 if p.starts else _hs.HS_FLAG_SINGLEMATCH) | (_hs.HS_FLAG_CASELESS if p.caseless else 0)
                    for p in self._patterns
                ]
                fingerprint = _digest_of(expressions, flags)
                where = cache_dir()
                db = None if where is None else _load_cached(where, fingerprint)
                if db is not None:
                    self._source = "cache"
                else:
                    db = _hs.Database()
                    db.compile(
                        expressions=expressions,
                        ids=list(range(len(expressions))),
                        elements=len(expressions),
                        flags=flags,
                    )
                    self._source = "compiled"
                    if where is not None:
                        _store_cached(where, fingerprint, db)
                self._db = db
            return self._db

    def _regexes(self) -> tuple[tuple[int, re.Pattern[bytes], bool, int], ...]:
        if self._fallback is None:
            self._fallback = tuple(
                (
                    i,
                    re.compile(
                        (f"(?=(?:{p.regex}))" if p.starts else p.regex).encode("ascii"),
                        re.IGNORECASE if p.caseless else 0,
                    ),
                    p.starts,
                    p.shift,
                )
                for i, p in enumerate(self._patterns)
            )
        return self._fallback


# -- the cache of compiled databases ----------------------------------------------------------


def cache_dir() -> Path | None:
    """The directory of compiled Hyperscan databases, ``scrub`` under
    :func:`~memvault.fsutil.cache_root`; None when ``MEMVAULT_NO_SCRUB_CACHE`` is ``1`` (each
    process then compiles its own)."""
    if os.environ.get("MEMVAULT_NO_SCRUB_CACHE", "") == "1":
        return None
    return cache_root() / "scrub"


def _digest_of(expressions: list[bytes], flags: list[int]) -> bytes:
    """What a cached database must have been compiled from: the patterns, their flags, this
    Hyperscan binding and machine type."""
    spec = {
        "format": 1,
        "hyperscan": str(getattr(_hs, "__version__", "")),
        "machine": platform.machine(),
        "mode": "block",
        "patterns": [[e.decode("ascii"), f] for e, f in zip(expressions, flags, strict=True)],
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).digest()


def _load_cached(directory: Path, fingerprint: bytes) -> Any:
    """The database cached in ``directory`` for ``fingerprint``, or None: no file, a directory or
    file that is not trusted, a file that is damaged or was written for other patterns, a
    database Hyperscan refuses (another version, a CPU without the features it was built for)."""
    dfd = open_trusted_dir(directory)
    if dfd is None:
        return None
    try:
        fd = os.open(f"{fingerprint.hex()[:32]}.hsdb", O_READ, dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not trusted(st, stat.S_IFREG) or st.st_size > _CACHE_MAX_BYTES:
            return None
        data = os.pread(fd, st.st_size + 1, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    head = len(_CACHE_MAGIC)
    digest, blob = data[head + 32 : head + 64], data[head + 64 :]
    if data[:head] != _CACHE_MAGIC or data[head : head + 32] != fingerprint:
        return None
    if hashlib.sha256(blob).digest() != digest:
        return None
    try:
        db = _hs.loadb(blob, _hs.HS_MODE_BLOCK)
        _hs.Scratch(db)  # checks that this CPU can run it
    except (_hs.HyperscanError, TypeError, ValueError):
        return None
    return db


def _store_cached(directory: Path, fingerprint: bytes, db: Any) -> None:
    """Keep ``db`` in ``directory``, replacing a file of the same fingerprint atomically, and
    remove the least recently written beyond :data:`CACHE_FILES`. The directory and its missing
    parents are made (0700) only under a directory of this user's: root running with another
    user's home leaves that home alone. Best effort: a cache that cannot be written (read-only
    home, no space) is skipped."""
    try:
        if not make_dirs_in_own(directory):
            return
        dfd = open_trusted_dir(directory)
        if dfd is None:
            return
        try:
            blob = _hs.dumpb(db)
            name = f"{fingerprint.hex()[:32]}.hsdb"
            tmp = f".{name}.tmp-{os.getpid()}-{threading.get_ident()}"
            fd = os.open(tmp, O_NEW_FILE, FILE_MODE, dir_fd=dfd)
            try:
                try:
                    write_all(fd, _CACHE_MAGIC + fingerprint + hashlib.sha256(blob).digest() + blob)
                finally:
                    os.close(fd)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
            kept = sorted(
                (os.stat(n, dir_fd=dfd, follow_symlinks=False).st_mtime_ns, n)
                for n in os.listdir(dfd)
                if n.endswith(".hsdb")
            )
            for _mtime, old in kept[: max(0, len(kept) - CACHE_FILES)]:
                if old != name:
                    os.unlink(old, dir_fd=dfd)
        finally:
            os.close(dfd)
    except (OSError, _hs.HyperscanError):
        pass


def _collect(index: int, _start: int, end: int, _flags: int, hits: list[tuple[int, int]]) -> None:
    hits.append((index, end))


def _gatherer(
    groups: tuple[int, ...], starts: tuple[bool, ...], adjust: tuple[int, ...]
) -> Callable[[int, int, int, int, dict[int, list[int]]], None]:
    """A Hyperscan match handler that files each match under its group (in the callback: one
    Python call per match, no list of matches to walk again)."""

    #: Per pattern: its group, and what turns an end offset into the offset reported (None: a gate).
    plan = tuple((g, a if s else None) for g, s, a in zip(groups, starts, adjust, strict=True))

    def gather(index: int, _start: int, end: int, _flags: int, out: dict[int, list[int]]) -> None:
        group, shift = plan[index]
        got = out.get(group)
        if got is None:
            out[group] = [0 if shift is None else end + shift]
        else:
            got.append(0 if shift is None else end + shift)

    return gather


def width(regex: str) -> int:
    """The length of every match of ``regex``; ValueError if matches can differ in length."""
    lo, hi = _parse(regex).getwidth()
    if lo != hi:
        raise ValueError(f"not a fixed-length pattern: {regex!r}")
    return int(lo)


# -- Python regexes at the reported offsets ------------------------------------------------------


def match_at(rx: re.Pattern[str], text: str, starts: Iterable[int]) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)``, trying ``rx`` only at ``starts``: sorted offsets that include every
    offset a match can start at (what a :class:`PatternSet` reports), so the matches are the same."""
    last = 0
    for pos in starts:
        if pos < last:
            continue
        m = rx.match(text, pos)
        if m is not None:
            last = m.end()
            yield m


def finditer_before(
    rx: re.Pattern[str], back: re.Pattern[str], text: str, anchors: Iterable[int], reach: int
) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a pattern that starts with a run of at most ``reach`` characters
    ending at an anchor (every offset of which is in sorted ``anchors``): ``back`` (that run,
    anchored at its end with ``\\Z``) finds the run's start."""
    last = 0
    for q in anchors:
        b = back.search(text, max(0, q - reach), q)
        if b is None or b.start() < last:
            continue
        m = rx.match(text, b.start())
        if m is not None:
            last = m.end()
            yield m


def class_table(chars: str) -> bytes:
    """A ``bytes.translate`` table: ``a`` for each of ``chars`` (ASCII), ``.`` for every other byte."""
    return bytes(ord("a") if chr(b) in chars else ord(".") for b in range(256))


def run_starts(text: str, table: bytes, length: int) -> list[int]:
    """Where each run of at least ``length`` characters of ``table``'s class starts (a regex whose
    matches are such runs, not preceded by a class character, can start nowhere else)."""
    sig = text.encode("ascii", "replace").translate(table)  # one byte per character
    run = b"a" * length
    out: list[int] = []
    p = sig.find(run)
    while p >= 0:
        out.append(p)
        p = sig.find(b".", p + length)
        if p < 0:
            break
        p = sig.find(run, p)
    return out
