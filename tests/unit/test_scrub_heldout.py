"""The scrubber against the held-out corpus (tests/scrub/heldout_corpus.jsonl): the issue's targets.

The corpus was written without reading the scrubber or its dev corpus; do not tune rules to it note by
note (failure messages name note ids and kinds only, on purpose). Targets:

- recall >= 0.97 over credential kinds and >= 0.95 over personal-data kinds (ip and dob included);
  a labelled span is caught when any finding overlaps it;
- fewer than 2% of benign notes (no labelled span) get any finding;
- redact() leaves no labelled value in the text.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

CORPUS_DIR = Path(__file__).resolve().parent.parent / "scrub"
CORPUS = CORPUS_DIR / "heldout_corpus.jsonl"


def _load_generator():  # noqa: ANN202 - a module loaded from a file path
    spec = importlib.util.spec_from_file_location("make_heldout_corpus", CORPUS_DIR / "make_heldout_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The kind taxonomy comes from the corpus generator, written from the issue, not from memvault.
GENERATOR = _load_generator()
CREDENTIAL_KINDS = set(GENERATOR.CREDENTIAL_KINDS)
PERSONAL_KINDS = set(GENERATOR.PERSONAL_KINDS)

CREDENTIAL_RECALL = 0.97
PERSONAL_RECALL = 0.95
BENIGN_FP_RATE = 0.02


def _load() -> list[dict]:
    with CORPUS.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def notes() -> list[dict]:
    return _load()


@pytest.fixture(scope="module")
def scrubber():
    from memvault.scrub import Scrubber  # a failure here means the scrubber does not exist yet

    return Scrubber()


@pytest.fixture(scope="module")
def findings(notes, scrubber) -> list[list[tuple[int, int, str]]]:
    return [[(f.start, f.end, f.kind) for f in scrubber.scan(n["text"])] for n in notes]


def _overlap(s: dict, f0: int, f1: int) -> bool:
    return s["start"] < f1 and f0 < s["end"]


def _recall(notes, findings, kinds: set[str]) -> tuple[float, str]:
    caught, total, missed = Counter(), Counter(), []
    for note, fs in zip(notes, findings):
        for s in note["spans"]:
            if s["kind"] not in kinds:
                continue
            total[s["kind"]] += 1
            if any(_overlap(s, f0, f1) for f0, f1, _ in fs):
                caught[s["kind"]] += 1
            else:
                missed.append(f"{note['id']}:{s['kind']}")
    recall = sum(caught.values()) / sum(total.values())
    per_kind = ", ".join(f"{k} {caught[k]}/{total[k]}" for k in sorted(total) if caught[k] < total[k])
    return recall, f"recall {recall:.4f}; kinds below 100%: {per_kind}; first misses: {missed[:15]}"


def test_corpus_is_well_formed_and_covers_every_kind(notes):
    assert len(notes) >= 2000
    counts = Counter(s["kind"] for n in notes for s in n["spans"])
    for kind in CREDENTIAL_KINDS | PERSONAL_KINDS:
        assert counts[kind] >= 40, kind
    assert set(counts) <= CREDENTIAL_KINDS | PERSONAL_KINDS
    positive = sum(1 for n in notes if n["spans"])
    assert 0.3 <= positive / len(notes) <= 0.5
    for n in notes:
        assert n["category"].startswith("negative:") == (not n["spans"]), n["id"]
        for s in n["spans"]:
            assert 0 <= s["start"] < s["end"] <= len(n["text"]), n["id"]


def test_corpus_matches_its_generator(notes):
    """The committed corpus is exactly what make_heldout_corpus.py produces (so it can be regenerated)."""
    assert GENERATOR.dumps(GENERATOR.generate()) == CORPUS.read_text(encoding="utf-8"), (
        "heldout_corpus.jsonl is stale: python tests/scrub/make_heldout_corpus.py"
    )


def test_credential_recall(notes, findings):
    recall, detail = _recall(notes, findings, CREDENTIAL_KINDS)
    assert recall >= CREDENTIAL_RECALL, detail


def test_personal_data_recall(notes, findings):
    recall, detail = _recall(notes, findings, PERSONAL_KINDS)
    assert recall >= PERSONAL_RECALL, detail


def test_benign_notes_are_left_alone(notes, findings):
    benign = [(n, fs) for n, fs in zip(notes, findings) if not n["spans"]]
    flagged = [(n, fs) for n, fs in benign if fs]
    rate = len(flagged) / len(benign)
    by_category = Counter(n["category"] for n, _ in flagged)
    by_kind = Counter(k for _, fs in flagged for _, _, k in fs)
    assert rate < BENIGN_FP_RATE, (
        f"{len(flagged)}/{len(benign)} benign notes flagged ({rate:.2%}); by note category {dict(by_category)}; "
        f"by finding kind {dict(by_kind)}; first: {[n['id'] for n, _ in flagged[:15]]}"
    )


def test_redact_removes_every_caught_value(notes, scrubber):
    """Every labelled value that scan() catches (any overlapping finding) is gone after redact():
    no finding covers only part of a secret. (Values scan() misses are what the recall targets
    above measure; requiring none to survive would demand 100% recall.)"""
    leaks = []
    for n in notes:
        if not n["spans"]:
            continue
        findings = scrubber.scan(n["text"])
        clean = scrubber.redact(n["text"])
        for s in n["spans"]:
            caught = any(f.start < s["end"] and s["start"] < f.end for f in findings)
            if caught and n["text"][s["start"] : s["end"]] in clean:
                leaks.append(f"{n['id']}:{s['kind']}")
    assert not leaks, f"{len(leaks)} caught values survive redact(): {leaks[:20]}"
