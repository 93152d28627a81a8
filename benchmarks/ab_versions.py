#!/usr/bin/env python
"""Two versions of memvault against the SDK's reference tool, interleaved in one process.

``bench_tool.py`` compares one memvault with the reference; comparing two memvault versions
with two ``bench_tool.py`` runs minutes apart mixes the change with the host's drift (the disk
of the project machine moves by 10x within minutes). This script imports a second copy of
memvault (``--base-src``: a ``src`` directory, e.g. ``git archive main src | tar -x -C /tmp/base``)
under another package name, seeds one store per version and durability plus the reference, and
runs the same workload on all of them round-robin (``bench_tool.run_phase``), so every version
sees the same phases of the host. It prints, per command, each backend's median latency and its
ratio to the reference (median over runs of the per-run ratio of medians), and the geomean.
Where a store's directories land on the disk changes its file-creation cost for the whole run
(seen: the same code 2x apart in one run), so ``--repeat`` seeds fresh stores several times and
reports the median geomean.

    git archive main src | tar -x -C /tmp/base
    python benchmarks/ab_versions.py --base-src /tmp/base/src --sizes 1000 --runs 3
"""

from __future__ import annotations

import argparse
import gc
import importlib
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_tool  # noqa: E402
from bench_tool import MUTATION_COMMANDS, PASSPHRASE, Backend, Workload, make_reference, run_phase  # noqa: E402

ALIAS = "memvault_ab_base"


def import_base(src: Path, work: Path) -> ModuleType:
    """memvault from ``src`` imported as :data:`ALIAS` (absolute self-imports rewritten)."""
    target = work / ALIAS
    shutil.copytree(src / "memvault", target)
    for py in target.rglob("*.py"):
        text = py.read_text(encoding="utf-8")
        text = re.sub(r"\b(from|import) memvault\b", rf"\1 {ALIAS}", text)
        py.write_text(text, encoding="utf-8")
    sys.path.insert(0, str(work))
    return importlib.import_module(ALIAS)


def make_store(mv: ModuleType, name: str, root: Path, workload: Workload, durability: str) -> Backend:
    paths = importlib.import_module(f"{mv.__name__}.paths")
    settings = mv.StoreSettings(durability=durability, max_files=workload.n + workload.extra_files + 100)
    kdf = mv.KdfParams(memory_kib=8, iterations=1, lanes=1)
    store = mv.MemoryStore.create(root, passphrase=PASSPHRASE, kdf=kdf, settings=settings)

    def seed(txn: Any) -> None:
        for path, text in workload.seed_files():
            txn.write_file(paths.parse_path(path, settings), text.encode("utf-8"))
        for d in workload.empty_dirs:
            txn.make_dirs(paths.parse_path(d, settings))

    store.transact(seed, command="seed", paths=("/memories",), actor="bench", session="seed")
    store.close()
    store = mv.MemoryStore.open(root, passphrase=PASSPHRASE)
    tool = mv.MemoryTool(store, actor="bench", session="bench")
    return Backend(name, tool.call, store.close, {}, workload)


def bench_once(
    n: int, rep: int, args: argparse.Namespace, base: ModuleType, new: ModuleType, modes: list[str], d: Path
) -> dict[str, float]:
    """One interleaved run on freshly seeded stores; print its table, return each backend's geomean."""
    workload = Workload(n=n, per_command=args.warmup + args.ops * args.runs, seed=args.seed)
    backends = [make_reference(d / "reference", workload)]
    for mode in modes:
        backends.append(make_store(base, f"base-{mode}", d / f"base-{mode}", workload, mode))
        backends.append(make_store(new, f"new-{mode}", d / f"new-{mode}", workload, mode))
    rng = random.Random(f"schedule/{args.seed}/{n}/{rep}")
    commands = args.commands.split(",") if args.commands else list(MUTATION_COMMANDS)
    try:
        run_phase(backends, commands, args.warmup, args.chunk, rng, run=None)
        for run in range(args.runs):
            gc.collect()
            run_phase(backends, commands, args.ops, args.chunk, rng, run=run)
    finally:
        for b in backends:
            b.close()
        shutil.rmtree(d, ignore_errors=True)
    ref = backends[0]
    print(f"\nN = {n:,}, repeat {rep + 1}: {args.runs} runs x {args.ops} ops per command per backend, interleaved")
    geo = bench_tool.print_ratio_table(ref, backends[1:], commands)
    return geo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-src", type=Path, required=True, help="src directory of the other memvault")
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--durability", default="full,none")
    parser.add_argument("--ops", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--commands", default="", help="comma-separated; default: the mutations")
    parser.add_argument("--repeat", type=int, default=1, help="fresh stores this many times per size")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memvault-ab-"))
    try:
        import memvault

        base = import_base(args.base_src, work / "pkg")
        print(f"new:  {Path(memvault.__file__).parent}\nbase: {args.base_src} (imported as {ALIAS})")
        print(f"command: {' '.join(sys.argv)}\ndate: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}")
        modes = args.durability.split(",")
        summary: dict[int, dict[str, list[float]]] = {}
        for n in (int(x) for x in args.sizes.split(",")):
            for rep in range(args.repeat):
                geo = bench_once(n, rep, args, base, memvault, modes, work / f"n{n}-r{rep}")
                for name, value in geo.items():
                    summary.setdefault(n, {}).setdefault(name, []).append(value)
        if args.repeat > 1:
            print("\nGeomean of the mutation ratios per repeat (fresh stores each time), and their median:")
            for n, per in summary.items():
                for name, values in per.items():
                    shown = ", ".join(f"{v:.2f}" for v in values)
                    print(f"N = {n:,} {name}: median {statistics.median(values):.2f} ({shown})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
