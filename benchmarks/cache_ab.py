#!/usr/bin/env python
"""memvault with its plaintext cache and without, interleaved with the reference in one process.

Runs ``bench_tool.py``'s workload at one size against three backends that take turns: the SDK's
plain-file tool, a memvault store with the default plaintext cache (8 MiB) and one with
``plaintext_cache_bytes=0``. Prints, per command, the median over runs of each store's ratio to
the reference in that run, and the geomean of the mutation ratios. It answers one question: what
the cache buys (repeated views) and whether turning it off costs the mutations anything (they
read the file they edit through the same cache). See docs/performance.md, "Decisions, and why".

    python benchmarks/cache_ab.py --size 10000 --durability full --repeat 4
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


def run_once(args: argparse.Namespace, rep: int) -> dict[str, float]:
    """One interleaved run on freshly seeded stores; print its table, return the mutation geomeans.

    Where a store's files land on the disk changes its file-creation cost for a whole run (seen:
    the same code 2x apart in one run), so every repeat seeds fresh stores, in alternating order.
    """
    base = Path(tempfile.mkdtemp(prefix="memvault-cache-ab-", dir=args.tmpdir))
    warmup = 5
    workload = bt.Workload(n=args.size, per_command=warmup + args.ops * args.runs, seed=1)
    budgets: list[tuple[str, int | None]] = [("cache 8 MiB", None), ("cache 0", 0)]
    if rep % 2:
        budgets.reverse()
    backends: list[bt.Backend] = []
    try:
        backends.append(bt.make_reference(base / "reference", workload))
        for name, budget in budgets:
            backends.append(bt.make_memvault(base / name.replace(" ", "-"), workload, args.durability, budget))
            backends[-1].name = name
        os.sync()
        rng = random.Random(f"cache-ab/{args.size}/{rep}")
        commands = list(bt.COMMANDS)
        bt.run_phase(backends, commands, warmup, 3, rng, run=None)
        for run in range(args.runs):
            bt.run_phase(backends, commands, args.ops, 3, rng, run=run)
    finally:
        for backend in backends:
            backend.close()
        shutil.rmtree(base, ignore_errors=True)

    ref = backends[0]
    stores = sorted(backends[1:], key=lambda b: b.name, reverse=True)  # "cache 8 MiB" first
    print(f"\nN = {args.size:,}, durability {args.durability}, repeat {rep + 1} (seeded first: {budgets[0][0]}), "
          f"{args.runs} run(s) x {args.ops} ops")  # fmt: skip
    bt.print_ratio_table(ref, stores, bt.VIEW_COMMANDS)
    return bt.print_ratio_table(ref, stores, bt.MUTATION_COMMANDS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--size", type=int, default=10000, help="notes in the store (default 10000)")
    p.add_argument("--durability", choices=("full", "none"), default="full", help="memvault durability (default full)")
    p.add_argument("--runs", type=int, default=3, help="timed runs per repeat (default 3)")
    p.add_argument("--ops", type=int, default=40, help="timed ops per command per backend per run (default 40)")
    p.add_argument("--repeat", type=int, default=4, help="fresh stores this many times (default 4)")
    p.add_argument("--tmpdir", type=Path, default=None, help="where to create the temporary stores")
    args = p.parse_args(argv)
    if args.size < 1 or args.runs < 1 or args.ops < 1 or args.repeat < 1:
        p.error("--size, --runs, --ops and --repeat must be >= 1")
    import anthropic.tools  # noqa: F401  (import once, outside any timing)

    per_repeat = [run_once(args, rep) for rep in range(args.repeat)]
    print("\ngeomean of the mutation ratios per repeat, and their median:")
    for name in per_repeat[0]:
        values = [g[name] for g in per_repeat]
        print(f"  {name}: median {statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
