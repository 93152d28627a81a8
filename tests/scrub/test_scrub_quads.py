"""Dotted quads: versions and section numbers are not addresses, addresses still are.

The corpus (``quads_corpus.jsonl``, from ``make_quads_corpus.py``) has three parts of 1,200 benign notes
and 600 notes with global IPv4 addresses each: ``dev`` (the rule was changed against it), ``heldout-a``
(measured once, then looked at and the rule changed again) and ``heldout-b`` (written after the rule's last
change and measured once). See tests/scrub/README.md for the figures before and after.

What holds: no labelled address is missed in any part (the scrubber did miss 27 of the dev part's
before); the classes a review named (section numbers, a second version further along the sentence,
upgrades) are left alone; and the share of benign notes flagged stays at or under what the rule does
today in each part (regression bounds: a version that nothing in its note binds to a version is still
read as an address, which is most of what is left, on purpose: a missed address is a leak, a masked
version a nuisance). Failure messages name note ids and classes, not values.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from memvault.scrub import Scrubber

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "quads_corpus.jsonl"
SPLITS = ("dev", "heldout-a", "heldout-b")
#: Benign notes flagged today in each part (before this rule: 89.5%, 91.3% and 90.6%).
BENIGN_CEILING = {"dev": 0.15, "heldout-a": 0.43, "heldout-b": 0.77}
#: Words of an upgrade in the dev part's upgrade notes (``moved the fleet to ...`` is not one).
UPGRADE_WORDS = ("pgrade", "olled", "umped", "inned", "owngrade", "atched", "pdate")


def _generator():  # noqa: ANN202 - a module loaded from a file path
    spec = importlib.util.spec_from_file_location("make_quads_corpus", HERE / "make_quads_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scanned() -> list[tuple[dict, list[tuple[int, int, str]]]]:
    scrubber = Scrubber()
    notes = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(n, [(f.start, f.end, f.kind) for f in scrubber.scan(n["text"])]) for n in notes]


def test_quads_corpus_matches_its_generator() -> None:
    generator = _generator()
    assert generator.dumps(generator.generate()) == CORPUS.read_text(encoding="utf-8"), (
        "quads_corpus.jsonl is stale: python tests/scrub/make_quads_corpus.py"
    )


@pytest.mark.parametrize("split", SPLITS)
def test_every_address_is_found(scanned, split: str) -> None:
    notes = [(n, fs) for n, fs in scanned if n["split"] == split and n["spans"]]
    assert len(notes) == 600
    missed = [
        n["id"] for n, fs in notes for s in n["spans"] if not any(s["start"] < f1 and f0 < s["end"] for f0, f1, _ in fs)
    ]
    assert not missed, f"{len(missed)} addresses missed in {split}: {missed[:15]}"


@pytest.mark.parametrize("split", SPLITS)
def test_benign_notes_flagged_no_more_than_today(scanned, split: str) -> None:
    benign = [(n, fs) for n, fs in scanned if n["split"] == split and not n["spans"]]
    assert len(benign) == 1200
    flagged = Counter(n["category"] for n, fs in benign if fs)
    share = sum(flagged.values()) / len(benign)
    assert share <= BENIGN_CEILING[split], f"{share:.1%} of {split}'s benign notes flagged; by class {dict(flagged)}"


@pytest.mark.parametrize("cls", ["section", "outline", "siblings", "upgrade", "whats_new"])
def test_the_classes_a_review_named_are_left_alone(scanned, cls: str) -> None:
    notes = [
        (n, fs)
        for n, fs in scanned
        if n["split"] == "dev"
        and n["category"] == f"negative:{cls}"
        and (cls != "upgrade" or any(w in n["text"] for w in UPGRADE_WORDS))
    ]
    assert len(notes) >= 100
    flagged = [n["id"] for n, fs in notes if fs]
    assert len(flagged) <= 0.02 * len(notes), f"{len(flagged)}/{len(notes)} {cls} notes flagged: {flagged[:10]}"
