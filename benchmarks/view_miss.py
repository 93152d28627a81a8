#!/usr/bin/env python
"""What a file view costs when its note is not in the plaintext cache, with the CPU's caches cold.

Seeds ``bench_tool.py``'s workload at ``--size`` notes for the reference tool and for one memvault
store per version (this checkout; with ``--base-src``, also another ``src`` imported as
``ab_versions.py`` does), then views notes never viewed before ("miss") and right after again
("hit"), each op preceded by a reference-tool view of another note, as in ``bench_tool.py``,
where the backends take turns (that view evicts memvault's code and data from the CPU caches).
The versions alternate op by op. Prints the median miss and hit latency of each version, and
``miss - hit``: what reading, checking and decrypting a blob adds to a view.

    git archive main src | tar -x -C /tmp/base
    python benchmarks/view_miss.py --base-src /tmp/base/src --size 10000 --ops 400
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_versions  # noqa: E402
from bench_tool import Workload, make_reference  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-src", type=Path, help="src directory of another memvault to compare")
    parser.add_argument("--size", type=int, default=10_000, help="notes in the store")
    parser.add_argument("--ops", type=int, default=400, help="notes viewed (each once missed, once hit)")
    parser.add_argument("--range", action="store_true", help="view lines 10-20 instead of the whole note")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memvault-viewmiss-"))
    pc = time.perf_counter_ns
    try:
        import memvault

        versions = {"new": memvault}
        if args.base_src is not None:
            versions = {"base": ab_versions.import_base(args.base_src, work / "pkg"), **versions}
        workload = Workload(n=args.size, per_command=1, seed=1)
        ref = make_reference(work / "reference", workload)
        stores = {name: ab_versions.make_store(v, name, work / name, workload, "none") for name, v in versions.items()}
        rng = random.Random(7)
        order = rng.sample(range(args.size), min(args.ops, args.size))
        samples: dict[str, list[int]] = {f"{name} {kind}": [] for name in stores for kind in ("miss", "hit")}
        gc.collect()
        for k, i in enumerate(order):
            op: dict[str, object] = {"command": "view", "path": workload.note_path(i)}
            if args.range:
                op["view_range"] = [10, 20]
            names = list(stores) if k % 2 else list(reversed(stores))
            for kind in ("miss", "hit"):
                for name in names:
                    ref.call({"command": "view", "path": workload.note_path(rng.randrange(args.size))})
                    t0 = pc()
                    stores[name].call(op)
                    samples[f"{name} {kind}"].append(pc() - t0)
        med = {key: statistics.median(v) / 1000 for key, v in samples.items()}
        shown = "view_range [10, 20]" if args.range else "whole note"
        print(f"N = {args.size:,}, {len(order)} notes, {shown}; median µs")
        print("| version | miss | hit | miss - hit | miss / hit |\n|---|---:|---:|---:|---:|")
        for name in stores:
            miss, hit = med[f"{name} miss"], med[f"{name} hit"]
            print(f"| {name} | {miss:.1f} | {hit:.1f} | {miss - hit:.1f} | {miss / hit:.2f} |")
        for backend in stores.values():
            backend.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
