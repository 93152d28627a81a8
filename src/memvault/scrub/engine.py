"""The scrubber's engine: find credentials and personal data in text, and mask them.

A :class:`Scrubber` holds compiled rules (built once) and a policy
(:class:`~memvault.settings.ScrubSettings`). :meth:`Scrubber.scan` returns :class:`Finding` s:
a kind and code-point offsets, never the value. :meth:`Scrubber.mask` replaces every finding by
``[REDACTED:<kind>]`` (``redact`` is its old name); :meth:`Scrubber.apply` also reports counts per
kind and the kinds whose policy is ``reject``. The checks live in :mod:`memvault.scrub.validators`,
the detectors in :mod:`memvault.scrub.detectors`, the rule table in :mod:`memvault.scrub.rules`.

How a rule decides
    Most credentials have a fixed prefix (``sk-ant-api03-``, ``AKIA``, ``ghp_``, ``xoxb-``...) and
    are matched by shape, then checked against placeholders (``xxxx``, ``<YOUR_API_KEY>``,
    ``...``, a handful of distinct characters, AWS's published example keys). Shapes without a
    prefix need context: an AWS secret key or Twilio auth token is only reported near its
    provider's name or its key id, a bearer token after ``Bearer``, a password after a
    password-like name. Checksums are verified where a format has one: Luhn (cards), ISO 7064
    mod 97 (IBAN), CRC32 of classic GitHub tokens (a token whose checksum is right is reported
    even if it looks like a placeholder), and a JWT's header must decode to JSON with ``alg``.

Decisions worth knowing
    * ``ip``: only globally routable addresses are reported; loopback, private (RFC 1918),
      link-local, documentation and reserved ranges are not personal data. A dotted quad right
      after ``v``, ``version`` or ``build`` is a version number, not an address.
    * ``email``: reserved example domains (``example.com``, ``.test``, ``.invalid``, ``.local``,
      ``.internal``), ``git@host:`` remotes and ``name@2x.png`` asset names are not reported.
    * ``phone``: reported when it has a ``+`` country code, the North American shape
      ``(NXX) NXX-XXXX``/``NXX-NXX-XXXX``, a European trunk ``0`` with separators, or any
      10-15 digit run right after a phone word (``tel``, ``phone``, ``mobile``...). Dates, times,
      versions and ``ABC-1234-5678`` style ids are excluded by shape.
    * A policy of ``allow`` turns the kind's rule off: it is not scanned at all, so ``scan``
      never reports it. ``reject`` kinds are reported and masked like ``redact`` ones (so a
      caller that ignores the rejection still stores nothing sensitive); :meth:`Scrubber.apply`
      lists them in :attr:`ScrubResult.rejected` and the caller must refuse the write.
    * Overlapping candidates are merged into one finding spanning their union, named by the most
      specific rule (provider formats beat ``bearer_token`` beat ``password_assignment`` beat
      ``generic_secret`` beat personal data), so masking never leaves part of a match behind.

Speed
    Each rule declares *probes* (:class:`~memvault.scrub.prefilter.Pattern` s): where its regexes
    can start, or what must occur for it to report anything. One Hyperscan pass over the text
    (:mod:`memvault.scrub.prefilter`) answers every probe of every rule at once; a rule whose probes
    report nothing is skipped, the others run their Python regex only at the reported offsets
    (``_match_at`` in :mod:`~memvault.scrub.detectors`), which gives exactly the matches of ``finditer``. The probes are
    necessary conditions, so this changes no finding (``tests/unit/test_prefilter.py`` compares
    with every rule run at every offset). Long runs of one character class (AWS secret, Twilio
    token) are found from a byte signature instead (``_run_starts``): Hyperscan pays for
    those at every position. Every other occurrence of the credential values found is located
    with one Aho-Corasick pass (``pyahocorasick``, :func:`~memvault.scrub.validators.occurrences`)
    once there are several values.
    ``benchmarks/bench_scrub_speed.py`` measures throughput; what is left is mostly the Python
    validators of the candidates (entropy, placeholders, context), so notes dense in secrets
    cost the most.

Custom rules run Python regexes without a timeout: see
:data:`~memvault.settings.MAX_CUSTOM_PATTERN_CHARS` for the limits applied to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from memvault.scrub.detectors import Candidate, Detector
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
from memvault.scrub.validators import AWS_EXAMPLES, occurrences
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


_CREDENTIAL_SET: Final = frozenset(CREDENTIAL_KINDS)
#: Every probe of the built-in rules, compiled on first use.
_PROBE_SET: Final = probe_set()


class Scrubber:
    """Finds and masks sensitive data according to a :class:`ScrubSettings` policy."""

    __slots__ = ("_settings", "_plan", "_always", "_rule_of", "_allow", "_policy", "_active")

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
        self._active: frozenset[str] = frozenset(active)

    @property
    def settings(self) -> ScrubSettings:
        return self._settings

    def policy(self, kind: str) -> str:
        """The action for ``kind`` (``redact`` for a kind the settings do not name)."""
        return self._policy.get(kind, "redact")

    def scan(self, text: str) -> list[Finding]:
        """Sorted, non-overlapping findings in ``text`` (empty if the scrubber is disabled)."""
        if not isinstance(text, str):
            raise TypeError("text must be a str")
        if not self._settings.enabled or not text:
            return []
        return self._findings(text, _PROBE_SET.grouped(projections(text)))

    def _findings(self, text: str, reported: dict[int, list[int]]) -> list[Finding]:
        """The findings of the rules given the offsets ``reported`` by each probe (a superset of
        where the rules' regexes match: every offset of every probe gives the same findings)."""
        cands: list[Candidate] = []
        rule_of, plan = self._rule_of, self._plan
        for i in sorted({rule_of[p] for p in reported if p in rule_of}):
            probes, detect, every_probe = plan[i]
            if len(probes) == 1:
                got = reported[probes[0]]
                starts: tuple[list[int], ...] = (got if len(got) == 1 else sorted(set(got)),)
            elif every_probe and not all(p in reported for p in probes):
                continue
            else:
                starts = tuple(sorted(set(reported[p])) if p in reported else [] for p in probes)
            cands.extend(detect(text, starts))
        for detect in self._always:
            cands.extend(detect(text, ()))
        # A value recognised as a credential in one place (by its context) is masked everywhere:
        # every occurrence (overlapping ones too) takes the kind of the value's first candidate.
        first: dict[str, tuple[int, str, int]] = {}
        for start, end, kind, prio in cands:
            if kind in _CREDENTIAL_SET and end - start >= 8:
                value = text[start:end]
                if value not in first:
                    first[value] = (start, kind, prio)
        for pos, value in occurrences(text, first):
            start, kind, prio = first[value]
            if pos != start:
                cands.append((pos, pos + len(value), kind, prio))
        return self._resolve(text, cands)

    def _resolve(self, text: str, cands: list[Candidate]) -> list[Finding]:
        active, allow = self._active, self._allow
        kept = [c for c in cands if c[1] > c[0] and c[2] in active and text[c[0] : c[1]] not in allow]
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
        findings = self.scan(text)
        counts: dict[str, int] = {}
        rejected: set[str] = set()
        for f in findings:
            if self.policy(f.kind) == "reject":
                rejected.add(f.kind)
            else:
                counts[f.kind] = counts.get(f.kind, 0) + 1
        return ScrubResult(self._mask(text, findings), counts, sorted(rejected))
