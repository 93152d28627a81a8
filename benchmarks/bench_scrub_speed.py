"""Throughput of ``Scrubber().scan`` in MB/s (UTF-8 bytes of text scanned per second).

For each corpus, the notes are repeated until they total about 3 MB, then timed two ways:

- ``per-note``: ``scan`` called on every note in turn (how the store uses it: one call per write);
- ``joined``: ``scan`` called once on all of those notes joined by newlines (one ~3 MB text).

The held-out and agent-notes corpora are also timed in two halves: their benign notes (the held-out
ones each written to hold a near miss: a placeholder, a hash, an example key; the agent ones full of
versions, ids, ports and test card numbers) and their notes with labelled findings.

Each figure is the median of ``--runs`` timed runs (default 5).

    python benchmarks/bench_scrub_speed.py [--runs 5] [--mb 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from memvault.scrub import Scrubber

ROOT = Path(__file__).resolve().parent.parent
_HELDOUT = ROOT / "tests" / "scrub" / "heldout_corpus.jsonl"
_AGENT = ROOT / "tests" / "scrub" / "agent_corpus.jsonl"
#: (name, path, which notes: all, only those without labelled spans, only those with some)
CORPORA: list[tuple[str, Path, str]] = [
    ("dev", ROOT / "tests" / "scrub" / "dev_corpus.jsonl", "all"),
    ("public", ROOT / "tests" / "scrub" / "public_examples.jsonl", "all"),
    ("heldout", _HELDOUT, "all"),
    ("  benign", _HELDOUT, "benign"),
    ("  labelled", _HELDOUT, "labelled"),
    ("agent", _AGENT, "all"),
    ("  benign", _AGENT, "benign"),
    ("  labelled", _AGENT, "labelled"),
]


def load_notes(path: Path, target_bytes: int, which: str = "all") -> list[str]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    notes = [r["text"] for r in rows if which == "all" or bool(r.get("spans")) == (which == "labelled")]
    out: list[str] = []
    total = 0
    while total < target_bytes:
        for note in notes:
            out.append(note)
            total += len(note.encode("utf-8"))
            if total >= target_bytes:
                break
    return out


def median_mb_per_s(fn: Callable[[], object], nbytes: int, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return nbytes / 1e6 / statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mb", type=float, default=3.0)
    args = ap.parse_args()
    scrubber = Scrubber()
    print(f"{'corpus':<10}{'MB':>8}{'notes':>8}{'per-note MB/s':>16}{'joined MB/s':>14}")
    for name, path, which in CORPORA:
        if not path.exists():
            print(f"{name:<10}  (missing: {path})")
            continue
        notes = load_notes(path, int(args.mb * 1e6), which)
        joined = "\n".join(notes)
        nbytes = sum(len(n.encode("utf-8")) for n in notes)
        per_note = median_mb_per_s(lambda ns=notes: [scrubber.scan(n) for n in ns], nbytes, args.runs)
        whole = median_mb_per_s(lambda j=joined: scrubber.scan(j), len(joined.encode("utf-8")), args.runs)
        print(f"{name:<10}{nbytes / 1e6:>8.2f}{len(notes):>8}{per_note:>16.2f}{whole:>14.2f}")


if __name__ == "__main__":
    main()
