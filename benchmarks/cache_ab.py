#!/usr/bin/env python
"""memvault with its plaintext cache and without, interleaved with the reference in one process.

Runs ``bench_tool.py``'s workload at one size against three backends that take turns: the SDK's
plain-file tool, a memvault store with the default plaintext cache (8 MiB) and one with
``plaintext_cache_bytes=0``. Prints, per command, the median over runs of each store's ratio to
the reference in that run, and the geomean of the mutation ratios. It answers one question: what
the cache buys (repeated views) and whether turning it off costs the mutations anything (they
read the file they edit through the same cache). See docs/performance.md §16.2.

    python benchmarks/cache_ab.py --size 10000 --durability full --runs 3
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_tool as bt  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--size", type=int, default=10000, help="notes in the store (default 10000)")
    p.add_argument("--durability", choices=("full", "none"), default="full", help="memvault durability (default full)")
    p.add_argument("--runs", type=int, default=3, help="timed runs (default 3)")
    p.add_argument("--ops", type=int, default=40, help="timed ops per command per backend per run (default 40)")
    p.add_argument("--tmpdir", type=Path, default=None, help="where to create the temporary stores")
    args = p.parse_args(argv)
    if args.size < 1 or args.runs < 1 or args.ops < 1:
        p.error("--size, --runs and --ops must be >= 1")
    import anthropic.tools  # noqa: F401  (import once, outside any timing)

    base = Path(tempfile.mkdtemp(prefix="memvault-cache-ab-", dir=args.tmpdir))
    warmup = 5
    workload = bt.Workload(n=args.size, per_command=warmup + args.ops * args.runs, seed=1)
    backends: list[bt.Backend] = []
    try:
        backends.append(bt.make_reference(base / "reference", workload))
        backends.append(bt.make_memvault(base / "cache-8MiB", workload, args.durability))
        backends.append(bt.make_memvault(base / "cache-0", workload, args.durability, 0))
        backends[1].name, backends[2].name = "cache 8 MiB", "cache 0"
        os.sync()
        rng = random.Random(f"cache-ab/{args.size}")
        commands = list(bt.COMMANDS)
        bt.run_phase(backends, commands, warmup, 3, rng, run=None)
        for run in range(args.runs):
            bt.run_phase(backends, commands, args.ops, 3, rng, run=run)
    finally:
        for backend in backends:
            backend.close()
        shutil.rmtree(base, ignore_errors=True)

    ref, *stores = backends
    print(f"N = {args.size:,}, durability {args.durability}, {args.runs} run(s) x {args.ops} ops: "
          "ratio to the reference (median over runs)")  # fmt: skip
    print(f"| command | {' | '.join(s.name for s in stores)} |")
    print("|---|" + "---:|" * len(stores))
    mutation_ratios: dict[str, list[float]] = {s.name: [] for s in stores}
    for command in bt.COMMANDS:
        cells = []
        for store in stores:
            pairs = zip(store.samples[command], ref.samples[command], strict=True)
            ratio = statistics.median(statistics.median(mine) / statistics.median(theirs) for mine, theirs in pairs)
            cells.append(f"{ratio:.2f}")
            if command in bt.MUTATION_COMMANDS:
                mutation_ratios[store.name].append(ratio)
        print(f"| {command} | {' | '.join(cells)} |")
    geomeans = [bt._geomean(v) for v in mutation_ratios.values()]
    print(f"| geomean mutations | {' | '.join(f'{g:.2f}' for g in geomeans if g is not None)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
