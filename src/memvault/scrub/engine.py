"""The scrubber's engine: find credentials and personal data in text, and mask them.

A :class:`Scrubber` holds compiled rules (built once) and a policy
(:class:`~memvault.settings.ScrubSettings`). :meth:`Scrubber.scan` returns :class:`Finding` s:
a kind and code-point offsets, never the value. :meth:`Scrubber.mask` replaces every finding by
``[REDACTED:<kind>]`` (``redact`` is its old name); :meth:`Scrubber.apply` also reports counts per
kind and the kinds whose policy is ``reject``. :meth:`Scrubber.scan_window` and
:meth:`Scrubber.apply_window` do the same for an edit, around the text it wrote. The checks live in
:mod:`memvault.scrub.validators`, the detectors in :mod:`memvault.scrub.detectors`, the rule table
in :mod:`memvault.scrub.rules`.

How a rule decides
    The text is first *folded* (:func:`fold`): Unicode blanks and hyphens become ASCII ones,
    zero-width characters and soft hyphens are dropped, ``%40`` becomes ``@``; findings are mapped
    back to the text as written. Most credentials have a fixed prefix (``sk-ant-api03-``, ``AKIA``,
    ``ghp_``, ``xoxb-``...) and are matched by shape, then checked: the body must be random enough
    and not, as a whole, a placeholder (``<YOUR_API_KEY>``, ``xxxxxxxx``, ``sk-...abcd``,
    ``your-api-key-here``, AWS's published example keys); a word inside a random body never makes
    it one. Shapes without a prefix need context: an AWS secret key or Twilio auth token is only
    reported near its provider's name or its key id (for AWS, also an AWS word after it on its
    line), a bearer token after ``Bearer``, a password after a password-like name. Right after
    the name of the very credential (``aws_secret_access_key=``, ``TWILIO_AUTH_TOKEN:``,
    ``<SecretAccessKey>``), a value of that credential's shape is reported whatever its first
    character or entropy; only a documented placeholder is not (:mod:`memvault.scrub.names`). Checksums are
    verified where a format has one: Luhn (cards), ISO 7064 mod 97 (IBAN), CRC32 of classic GitHub
    tokens (a token whose checksum is right is reported even if it looks like a placeholder), a
    JWT's header must decode to JSON with ``alg``, a bare base64 key body must decode to a private
    key's DER.

Decisions worth knowing
    * ``ip``: only globally routable addresses are reported; loopback, private (RFC 1918),
      shared, link-local, documentation and reserved ranges are not personal data. A dotted quad
      that its text binds to a version or a section (a version, section or software word before
      it, an upgrade, a list or range with a version, a heading, an outline, a table column of
      versions: :mod:`memvault.scrub.versions`) is not an address, unless its clause names an
      address; a quad nothing binds to a version is reported.
    * ``email``: reserved example domains (``example.com``, ``.test``, ``.invalid``, ``.local``,
      ``.internal``), ``git@host:`` remotes and ``name@2x.png`` asset names are not reported.
    * ``credit_card``: the numbers payment processors publish for testing
      (:data:`~memvault.scrub.validators.TEST_CARD_NUMBERS`) are not reported; a number grouped as
      cards are printed is a card even after order or reference wording.
    * ``phone``: reported when it has a ``+`` country code, the North American shape
      ``(NXX) NXX-XXXX``/``NXX-NXX-XXXX``, a European trunk ``0`` with separators, or any
      10-15 digit run right after a phone word (``tel``, ``phone``, ``mobile``...). Dates, times,
      versions and ``ABC-1234-5678`` style ids are excluded by shape.
    * A password label followed by prose (``password: (prompted at login)``, ``password: stored
      in the vault``) is not a password.
    * A policy of ``allow`` turns the kind's rule off: it is not scanned at all, so ``scan``
      never reports it. ``reject`` kinds are reported and masked like ``redact`` ones (so a
      caller that ignores the rejection still stores nothing sensitive); :meth:`Scrubber.apply`
      lists them in :attr:`ScrubResult.rejected` and the caller must refuse the write.
    * Overlapping candidates are merged into one finding spanning their union, named by the most
      specific rule (provider formats beat ``bearer_token`` beat ``password_assignment`` beat
      ``generic_secret`` beat personal data), so masking never leaves part of a match behind.
    * Out of scope: deliberate obfuscation (base64 of a key, reversed text, look-alike letters).

Speed and cost
    Each rule declares *probes* (:class:`~memvault.scrub.prefilter.Pattern` s): where its regexes
    can start, or what must occur for it to report anything. One Hyperscan pass over the text
    (:mod:`memvault.scrub.prefilter`) answers every probe of every rule at once; a rule whose probes
    report nothing is skipped, the others run their Python regex only at the reported offsets
    (:func:`~memvault.scrub.prefilter.match_at`), which gives exactly the matches of ``finditer``.
    The probes are necessary conditions, so this changes no finding (``tests/unit/test_prefilter.py``
    compares with every rule run at every offset). Long runs of one character class (AWS secret,
    Twilio token) are found from a byte signature instead
    (:func:`~memvault.scrub.prefilter.run_starts`): Hyperscan pays for those at every position.
    Every other occurrence of the credential values found is located with one Aho-Corasick pass
    (:func:`~memvault.scrub.validators.cover`). Time and memory are linear in the text, on
    adversarial texts too (``tests/scrub/test_scrub_cost.py``): the values searched for total at
    most twice the text, an assignment whose name lies inside a value already reported is not
    tried again, and a text that many values match everywhere is covered one occurrence per
    position. ``benchmarks/bench_scrub.py`` measures throughput and the cost of the worst inputs.

Custom rules run Python regexes without a timeout: see
:data:`~memvault.settings.MAX_CUSTOM_PATTERN_CHARS` for the limits applied to them.
"""

from __future__ import annotations

import array
import bisect
import re
from dataclasses import dataclass, field
from typing import Final

from memvault.scrub.detectors import Candidate, Detector
from memvault.scrub.prefilter import PatternSet
from memvault.scrub.rules import (
    NUMBERS,
    NUMERIC_KINDS,
    RULE_EXTRA_KINDS,
    RULES,
    custom_detector,
    probe_ids,
    probe_set,
    projections,
)
from memvault.scrub.validators import AWS_EXAMPLES, cover
from memvault.settings import (
    SCRUB_CREDENTIAL_KINDS,
    SCRUB_KINDS,
    SCRUB_PII_KINDS,
    ScrubSettings,
    StoreSettings,
)

__all__ = [
    "Scrubber",
    "Finding",
    "ScrubResult",
    "fold",
    "Folded",
    "EDIT_CONTEXT",
    "LINE_CONTEXT",
    "KINDS",
    "CREDENTIAL_KINDS",
    "PII_KINDS",
    "mask_marker",
    "redaction_marker",
]

KINDS: Final[tuple[str, ...]] = SCRUB_KINDS
CREDENTIAL_KINDS: Final[tuple[str, ...]] = SCRUB_CREDENTIAL_KINDS
PII_KINDS: Final[tuple[str, ...]] = SCRUB_PII_KINDS


def mask_marker(kind: str) -> str:
    """The text that replaces (masks) a finding of ``kind``: ``[REDACTED:<kind>]``."""
    return f"[REDACTED:{kind}]"


#: The old name of :func:`mask_marker` (still exported).
redaction_marker: Final = mask_marker


@dataclass(frozen=True, slots=True)
class Finding:
    """One sensitive span: ``text[start:end]`` is of ``kind``. Holds no value, so repr is safe."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ScrubResult:
    """Outcome of :meth:`Scrubber.apply`: the masked text and what was found (never values)."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.counts) or bool(self.rejected)


# -- folding -------------------------------------------------------------------------------------
#
# People write the same value in several spellings: a card number copied from a PDF has no-break or
# thin spaces, a French phone number narrow no-break spaces, an SSN non-breaking hyphens; a key pasted
# through a chat may carry a zero-width space; an address in a URL is percent-encoded. The rules see
# the text *folded*: those spaces and hyphens become ASCII ones (one for one), zero-width characters
# and soft hyphens are dropped, ``%40`` becomes ``@``; findings are mapped back to the original text,
# so masking covers the value as it was written. Deliberate obfuscation (base64, reversed text,
# look-alike letters) is not folded: it is out of scope.

#: One-for-one: Unicode blanks to a space, Unicode hyphens and dashes to ``-``.
_FOLD_ONE: Final[dict[int, str]] = {
    **dict.fromkeys([0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000], " "),
    **dict.fromkeys([0x2010, 0x2011, 0x2012, 0x2013, 0x2212, 0xFE63, 0xFF0D], "-"),
}
_FOLD_ONE_CHARS: Final = tuple(map(chr, _FOLD_ONE))
#: Whether a text needs folding at all (one search; most texts do not).
_FOLD_ANY_RE: Final = re.compile(
    "[\u00a0\u00ad\u1680\u2000-\u200d\u2010-\u2013\u202f\u205f-\u2064\u2212\u3000\ufe63\ufeff\uff0d]"
)
#: What folding drops (zero-width characters, soft hyphens) or shortens (``%40`` to ``@``).
_FOLD_DROP_RE: Final = re.compile("[\u00ad\u200b-\u200d\u2060-\u2064\ufeff]+|%40")


#: Every character folding changes.
_FOLD_CHARS: Final = frozenset(
    "\u00a0\u00ad\u1680\u202f\u205f\u2212\u3000\ufe63\ufeff\uff0d"
    + "".join(map(chr, [*range(0x2000, 0x200E), *range(0x2010, 0x2014), *range(0x2060, 0x2065)]))
)


def _may_fold(text: str, plain: bytes | None) -> bool:
    """Whether ``text`` (not ASCII) holds a character folding changes: looked up at the first
    ``?`` of ``plain`` (where the other characters are), then one search of the rest."""
    if plain is None:
        return _FOLD_ANY_RE.search(text) is not None
    i = plain.find(b"?")
    for _ in range(64):
        if i < 0:
            return False
        if text[i] in _FOLD_CHARS:
            return True
        i = plain.find(b"?", i + 1)
    return i >= 0 and _FOLD_ANY_RE.search(text, i) is not None


@dataclass(frozen=True, slots=True)
class Folded:
    """A text as the rules see it, and how its offsets map back to the original.

    Piece ``i``: the folded characters from ``starts[i]`` up to ``starts[i + 1]`` come from the
    original at ``origins[i]``, one for one; or, when ``shrunk[i]`` is not 0, the piece is one
    folded character standing for ``shrunk[i]`` original ones (``@`` for ``%40``). No pieces:
    offsets are the same in both. (Arrays, not tuples: a text of many zero-width characters makes
    many pieces, and arrays leave the garbage collector nothing to walk.)
    """

    text: str
    starts: array.array[int]
    origins: array.array[int]
    shrunk: array.array[int]

    def start(self, pos: int) -> int:
        """The original offset of the folded character at ``pos``."""
        if not self.starts:
            return pos
        i = bisect.bisect_right(self.starts, pos) - 1
        return self.origins[i] if self.shrunk[i] else self.origins[i] + (pos - self.starts[i])

    def end(self, pos: int) -> int:
        """The original offset just after the folded character before ``pos`` (``pos`` > 0)."""
        if not self.starts:
            return pos
        i = bisect.bisect_right(self.starts, pos - 1) - 1
        return self.origins[i] + (self.shrunk[i] or pos - self.starts[i])


def fold(text: str, plain: bytes | None = None) -> Folded | None:
    """``text`` folded for matching (see above), or None when folding changes nothing.

    Args:
        text: the original text.
        plain: ``text`` encoded as ASCII with ``?`` for every other character, if the caller has
            it: its ``?`` show where the characters that may fold are.

    Returns:
        The folded text and its offset map; None if it equals ``text``. Blanks and hyphens fold
        one for one, so a text holding only those folds without a map (no pieces).
    """
    if text.isascii():
        if "%40" not in text:
            return None
        one = text
    elif not _may_fold(text, plain):
        if "%40" not in text:
            return None
        one = text
    else:
        one = text
        for ch in _FOLD_ONE_CHARS:  # (str.replace per character present: far faster than translate)
            if ch in one:
                one = one.replace(ch, _FOLD_ONE[ord(ch)])
    starts, origins, shrunk = array.array("q"), array.array("q"), array.array("q")
    out: list[str] = []
    f = o = 0
    for m in _FOLD_DROP_RE.finditer(one):
        at = m.start()
        if at > o:
            starts.append(f)
            origins.append(o)
            shrunk.append(0)
            out.append(one[o:at])
            f += at - o
        o = m.end()
        if o - at == 3 and one[at] == "%":  # one folded character for three original ones
            starts.append(f)
            origins.append(at)
            shrunk.append(3)
            out.append("@")
            f += 1
    if not starts and o == 0:
        return Folded(one, starts, origins, shrunk)
    starts.append(f)
    origins.append(o)
    shrunk.append(0)
    out.append(one[o:])
    return Folded("".join(out), starts, origins, shrunk)


_CREDENTIAL_SET: Final = frozenset(CREDENTIAL_KINDS)
#: Every probe of the built-in rules, compiled on first use.
_PROBE_SET: Final = probe_set()
#: The probes of the rules of multi-line key blocks only (PEM, bare bodies, PuTTY, age, JWK).
_BLOCK_PROBE_SET: Final = probe_set(kinds=frozenset({"private_key"}))
#: How far around an edit :meth:`Scrubber.scan_window` looks for key blocks, each side: more than
#: the longest finding that spans lines (the PEM block of a 16,384-bit RSA key is about 12,700
#: characters).
EDIT_CONTEXT: Final = 16384
#: How far around an edit every other rule looks, each side, before the window widens to whole
#: lines: their findings lie on one line (a value split across the edit is on the edited lines),
#: their context words at most 160 characters before or 80 after the value.
LINE_CONTEXT: Final = 256
#: How far past a window's reach it may widen to end at a line boundary (a longer line is cut).
_LINE_SLACK: Final = 8192
#: Rows of a markdown table the window takes in above an edited row, to reach the table's header.
_TABLE_ROWS: Final = 64
#: Credential values longer than this are not searched for elsewhere in the text (blocks that long
#: are found by their own shape wherever they are).
_MAX_PROPAGATED: Final = 1024
#: Occurrences reported one by one beyond the text's length, before one per position.
_MATCH_SLACK: Final = 1024


def _propagated(text: str, cands: list[Candidate]) -> list[Candidate]:
    """Every other occurrence of a credential value found: a value recognised in one place (by its
    context) is masked everywhere, each occurrence (overlapping ones too) taking the kind of the
    value's first candidate. Linear: the values searched for total at most twice the text's length
    (any beyond are left out: only a text that overlaps candidates thousands deep gets there) and
    :func:`~memvault.scrub.validators.cover` reports at most one occurrence per position past a
    budget."""
    first: dict[str, tuple[int, str, int]] = {}
    room = 2 * len(text) + _MATCH_SLACK
    for start, end, kind, prio in cands:
        if kind in _CREDENTIAL_SET and 8 <= end - start <= _MAX_PROPAGATED and end - start <= room:
            value = text[start:end]
            if value not in first:
                first[value] = (start, kind, prio)
                room -= len(value)
    if not first:
        return []
    out: list[Candidate] = []
    for pos, stop, value in cover(text, first, len(text) + _MATCH_SLACK):
        start, kind, prio = first[value]
        if pos != start:
            out.append((pos, stop, kind, prio))
    return out


def _window(text: str, start: int, end: int, reach: int) -> tuple[int, bool, int, bool]:
    """``(a, cut_a, b, cut_b)``: the span ``text[a:b]`` within ``reach`` of ``text[start:end]``
    widened to whole lines (by at most ``_LINE_SLACK``), and whether each end cuts a line (else it
    is the text's end or a line boundary)."""
    n = len(text)
    lo, hi = max(0, start - reach), min(n, end + reach)
    a, cut_a = lo, False
    if lo > 0:
        nl = text.rfind("\n", max(0, lo - _LINE_SLACK), lo)
        a, cut_a = (nl + 1, False) if nl >= 0 else (lo, True)
    rows = 0
    while not cut_a and a > 0 and rows < _TABLE_ROWS and text.startswith("|", a):  # up to a table's header
        nl = text.rfind("\n", max(0, a - 1 - _LINE_SLACK), a - 1)
        if nl < 0 and a - 1 > _LINE_SLACK:
            break
        a, rows = nl + 1, rows + 1
    b, cut_b = hi, False
    if hi < n:
        nl = text.find("\n", hi, hi + _LINE_SLACK)
        b, cut_b = (nl, False) if nl >= 0 else (hi, True)
    return a, cut_a, b, cut_b


def _merge(findings: list[Finding]) -> list[Finding]:
    """Sorted, non-overlapping findings: overlapping ones merged into their union, named by the
    longest of them."""
    findings.sort(key=lambda f: (f.start, -f.end))
    out: list[Finding] = []
    for f in findings:
        if out and f.start < out[-1].end:
            last = out[-1]
            kind = last.kind if last.end - last.start >= f.end - f.start else f.kind
            out[-1] = Finding(kind, last.start, max(last.end, f.end))
        else:
            out.append(f)
    return out


class Scrubber:
    """Finds and masks sensitive data according to a :class:`ScrubSettings` policy."""

    __slots__ = ("_settings", "_plan", "_always", "_rule_of", "_allow", "_allow_lengths", "_policy", "_active")

    def __init__(self, settings: ScrubSettings | StoreSettings | None = None) -> None:
        if isinstance(settings, StoreSettings):
            settings = settings.scrub
        elif settings is None:
            settings = ScrubSettings()
        elif not isinstance(settings, ScrubSettings):
            raise TypeError("settings must be ScrubSettings, StoreSettings or None")
        self._settings = settings
        self._policy: dict[str, str] = dict(settings.policy)
        active = {kind for kind, action in self._policy.items() if action != "allow"}
        rules = [r for r in RULES if r.kind in active or any(k in active for k in RULE_EXTRA_KINDS.get(r.kind, ()))]
        if active & NUMERIC_KINDS:
            rules.append(NUMBERS)
        #: (probe indices, detector, whether every probe must report) per built-in rule that can
        #: report an active kind, and the index in it of the rule each probe belongs to; custom
        #: rules always run.
        self._plan: tuple[tuple[tuple[int, ...], Detector, bool], ...] = tuple(
            (probe_ids(r), r.detect, r.every_probe) for r in rules
        )
        self._rule_of: dict[int, int] = {p: i for i, (probes, _, _) in enumerate(self._plan) for p in probes}
        self._always: tuple[Detector, ...] = tuple(
            custom_detector(c) for c in settings.custom_rules if c.kind in active
        )
        self._allow: frozenset[str] = frozenset(settings.allowlist) | AWS_EXAMPLES
        self._allow_lengths: frozenset[int] = frozenset(map(len, self._allow))
        self._active: frozenset[str] = frozenset(active)

    @property
    def settings(self) -> ScrubSettings:
        return self._settings

    def policy(self, kind: str) -> str:
        """The action for ``kind`` (``redact`` for a kind the settings do not name)."""
        return self._policy.get(kind, "redact")

    def scan(self, text: str) -> list[Finding]:
        """Sorted, non-overlapping findings in ``text`` (empty if the scrubber is disabled).

        Args:
            text: the text to scan; offsets of findings are code points of it.

        Returns:
            One :class:`Finding` per sensitive span (kinds and offsets, never values).

        Raises:
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError("text must be a str")
        if not self._settings.enabled or not text:
            return []
        if text.isascii() and "%40" not in text:  # (most texts: nothing to fold)
            return self._found(text, _PROBE_SET.grouped((text.encode("ascii"),)), None, customs=True)
        return self._scan(text, _PROBE_SET, customs=True)

    def _scan(self, text: str, probes: PatternSet, *, customs: bool, folding: bool = True) -> list[Finding]:
        """The findings of the rules ``probes`` has probes for (and of custom rules, if ``customs``),
        in the folded text unless ``folding`` is false."""
        plain = None if text.isascii() else text.encode("ascii", "replace")
        folded = fold(text, plain) if folding else None
        if folded is None:
            return self._found(text, probes.grouped(projections(text, plain)), None, customs=customs)
        return self._found(text, probes.grouped(projections(folded.text)), folded, customs=customs)

    def scan_window(self, text: str, start: int, end: int) -> list[Finding]:
        """The findings an edit that wrote ``text[start:end]`` brings, the rest of ``text`` having been
        scanned before: the text within :data:`LINE_CONTEXT` characters of the edit is scanned by
        every rule, the text within :data:`EDIT_CONTEXT` characters by the rules of multi-line key
        blocks (both widened to whole lines), and every other occurrence in ``text`` of a credential
        found there is reported too. Linear in the window, plus one search of ``text`` when
        credentials are found.

        Args:
            text: the whole text after the edit.
            start, end: the span of ``text`` the edit wrote (``start == end`` for a deletion).

        Returns:
            Sorted, non-overlapping findings, in offsets of ``text``.
        """
        if not self._settings.enabled or not text:
            return []
        found, whole = self._scan_around(text, start, end, LINE_CONTEXT, _PROBE_SET, full=True)
        if not whole and "private_key" in self._active:  # (blocks are not folded: text around the edit was)
            blocks, whole = self._scan_around(text, start, end, EDIT_CONTEXT, _BLOCK_PROBE_SET, full=False)
            found = _merge(found + blocks) if blocks else found
        if whole:
            return found
        values = {text[f.start : f.end]: f.kind for f in found if f.kind in _CREDENTIAL_SET and f.end - f.start >= 8}
        if not values:
            return found
        extra = [
            Finding(values[value], pos, stop) for pos, stop, value in cover(text, values, len(text) + _MATCH_SLACK)
        ]
        return _merge(found + extra)

    def _scan_around(
        self, text: str, start: int, end: int, reach: int, probes: PatternSet, *, full: bool
    ) -> tuple[list[Finding], bool]:
        """The findings of :meth:`_scan` (with custom rules and folding if ``full``) in the window
        ``reach`` around ``text[start:end]``, in offsets of ``text`` (not those at a window end
        that cuts a line), and whether the window is the whole text."""
        a, cut_a, b, cut_b = _window(text, start, end, reach)
        found = [
            Finding(f.kind, f.start + a, f.end + a)
            for f in self._scan(text[a:b], probes, customs=full, folding=full)
            if not (cut_a and f.start == 0 or cut_b and f.end == b - a)
        ]
        return found, a == 0 and b == len(text)

    def _findings(self, text: str, reported: dict[int, list[int]]) -> list[Finding]:
        """The findings of the rules given the offsets ``reported`` by each probe over the folded
        text (a superset of where the rules' regexes match: every offset of every probe gives the
        same findings), in offsets of ``text``."""
        return self._found(text, reported, fold(text), customs=True)

    def _found(
        self, text: str, reported: dict[int, list[int]], folded: Folded | None, *, customs: bool
    ) -> list[Finding]:
        """:meth:`_findings` given ``fold(text)``; custom rules run if ``customs``."""
        seen = text if folded is None else folded.text
        cands: list[Candidate] = []
        rule_of, plan = self._rule_of, self._plan
        hit = [rule_of[p] for p in reported if p in rule_of]
        if len(hit) > 1:
            hit = sorted(set(hit))
        for i in hit:
            probes, detect, every_probe = plan[i]
            if len(probes) == 1:
                got = reported[probes[0]]
                cands.extend(detect(seen, (got if len(got) == 1 else sorted(set(got)),)))
            elif not every_probe or all(p in reported for p in probes):
                cands.extend(detect(seen, tuple([sorted(set(reported[p])) if p in reported else [] for p in probes])))
        for detect in self._always if customs else ():
            cands.extend(detect(seen, ()))
        if not cands:  # (most texts: nothing to propagate, resolve or map back)
            return []
        cands.extend(_propagated(seen, cands))
        found = self._resolve(seen, cands)
        if folded is None or not folded.starts:
            return found
        return [Finding(f.kind, folded.start(f.start), folded.end(f.end)) for f in found]

    def _resolve(self, text: str, cands: list[Candidate]) -> list[Finding]:
        active, allow, lengths = self._active, self._allow, self._allow_lengths
        kept = [
            c
            for c in cands
            if c[1] > c[0] and c[2] in active and (c[1] - c[0] not in lengths or text[c[0] : c[1]] not in allow)
        ]
        kept.sort()
        out: list[Finding] = []
        i = 0
        while i < len(kept):
            start, end, kind, prio = kept[i]
            best = (prio, end - start, kind)
            j = i + 1
            while j < len(kept) and kept[j][0] < end:
                s2, e2, k2, p2 = kept[j]
                end = max(end, e2)
                best = max(best, (p2, e2 - s2, k2))
                j += 1
            out.append(Finding(best[2], start, end))
            i = j
        return out

    def mask(self, text: str) -> str:
        """``text`` with every finding replaced by ``[REDACTED:<kind>]`` (:func:`mask_marker`)."""
        return self._mask(text, self.scan(text))

    def redact(self, text: str) -> str:
        """The old name of :meth:`mask` (the README documents ``Scrubber().redact(...)``)."""
        return self.mask(text)

    @staticmethod
    def _mask(text: str, findings: list[Finding]) -> str:
        if not findings:
            return text
        parts: list[str] = []
        pos = 0
        for f in findings:
            parts.append(text[pos : f.start])
            parts.append(mask_marker(f.kind))
            pos = f.end
        parts.append(text[pos:])
        return "".join(parts)

    def apply(self, text: str) -> ScrubResult:
        """Mask ``text`` and report counts per masked kind and the kinds the policy rejects."""
        return self._result(text, self.scan(text))

    def apply_window(self, text: str, start: int, end: int) -> ScrubResult:
        """:meth:`apply` for an edit that wrote ``text[start:end]``: only what :meth:`scan_window`
        finds is masked and counted (the rest of ``text`` was scrubbed when it was written)."""
        return self._result(text, self.scan_window(text, start, end))

    def _result(self, text: str, findings: list[Finding]) -> ScrubResult:
        counts: dict[str, int] = {}
        rejected: set[str] = set()
        for f in findings:
            if self.policy(f.kind) == "reject":
                rejected.add(f.kind)
            else:
                counts[f.kind] = counts.get(f.kind, 0) + 1
        return ScrubResult(self._mask(text, findings), counts, sorted(rejected))
