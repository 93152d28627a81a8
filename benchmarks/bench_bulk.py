#!/usr/bin/env python
"""Populating a store with many files: the SDK's plain-file tool against memvault, in one run.

Ways, each writing ``--files`` new notes of about 200 bytes under ``/memories/bulk/`` into a fresh
store (or, for the reference, a fresh directory), on the same disk:

- ``reference``: ``anthropic.tools.BetaLocalFilesystemMemoryTool``, one ``create`` per file;
- ``tool``: ``memvault.MemoryTool``, one ``create`` per file (one durable commit each);
- ``batch``: :class:`memvault.edits.batch.Batch`, every file in one commit (texts scrubbed);
- ``import``: :func:`memvault.transfer.importer.import_dir` of a directory holding the files.

memvault stores use durability ``--durability`` (default ``full``) and a cheap KDF (it only
affects opening). The ways run in turn, ``--repeat`` times in a rotating order; the script prints
the median seconds of each and its ratio to the reference's median. Usage::

    python benchmarks/bench_bulk.py --files 5000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import memvault  # noqa: E402
from memvault.edits.batch import Batch  # noqa: E402
from memvault.settings import MIN_KDF, StoreSettings  # noqa: E402
from memvault.transfer.importer import import_dir  # noqa: E402


def note(i: int) -> str:
    return f"# Note {i}\n- customer {i} prefers email follow-ups\n- last ticket closed on day {i % 28 + 1}\n" * 2


def new_store(path: Path, durability: str) -> memvault.MemoryStore:
    settings = StoreSettings.model_validate({"durability": durability, "max_files": 1_000_000})
    return memvault.MemoryStore.create(path, passphrase="bench-bulk-passphrase", kdf=MIN_KDF, settings=settings)


def run_reference(work: Path, n: int, _durability: str) -> float:
    from anthropic.tools import BetaLocalFilesystemMemoryTool

    tool = BetaLocalFilesystemMemoryTool(base_path=str(work / "ref"))
    t0 = time.perf_counter()
    for i in range(n):
        tool.call({"command": "create", "path": f"/memories/bulk/n{i:06d}.md", "file_text": note(i)})  # type: ignore[arg-type]
    return time.perf_counter() - t0


def run_tool(work: Path, n: int, durability: str) -> float:
    store = new_store(work / "tool", durability)
    tool = memvault.MemoryTool(store, actor="bench")
    t0 = time.perf_counter()
    for i in range(n):
        tool.call({"command": "create", "path": f"/memories/bulk/n{i:06d}.md", "file_text": note(i)})
    elapsed = time.perf_counter() - t0
    store.close()
    return elapsed


def run_batch(work: Path, n: int, durability: str) -> float:
    store = new_store(work / "batch", durability)
    t0 = time.perf_counter()
    with Batch(store, actor="bench") as batch:
        for i in range(n):
            batch.put(f"/memories/bulk/n{i:06d}.md", note(i))
    elapsed = time.perf_counter() - t0
    store.close()
    return elapsed


def run_import(work: Path, n: int, durability: str) -> float:
    source = work / "source"
    (source / "bulk").mkdir(parents=True)
    for i in range(n):
        (source / "bulk" / f"n{i:06d}.md").write_text(note(i))
    store = new_store(work / "import", durability)
    t0 = time.perf_counter()
    import_dir(store, source, actor="bench")
    elapsed = time.perf_counter() - t0
    store.close()
    return elapsed


WAYS: dict[str, Callable[[Path, int, str], float]] = {
    "reference": run_reference,
    "tool": run_tool,
    "batch": run_batch,
    "import": run_import,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=5000, help="files written by each way (default 5000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, each way once per round (default 3)")
    parser.add_argument("--durability", default="full", choices=("full", "none"))
    parser.add_argument("--ways", default=",".join(WAYS), help="which ways (default all)")
    args = parser.parse_args()
    ways = [w for w in args.ways.split(",") if w]
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        parser.error(f"unknown ways: {', '.join(unknown)}")
    times: dict[str, list[float]] = {w: [] for w in ways}
    print(f"{args.files} files per way, durability {args.durability}, {args.repeat} round(s), "
          f"{time.strftime('%Y-%m-%d %H:%M')}, loadavg {os.getloadavg()[0]:.2f}")  # fmt: skip
    for r in range(args.repeat):
        order = ways[r % len(ways) :] + ways[: r % len(ways)]
        for way in order:
            work = Path(tempfile.mkdtemp(prefix="bench-bulk-"))
            try:
                os.sync()
                times[way].append(WAYS[way](work, args.files, args.durability))
            finally:
                shutil.rmtree(work, ignore_errors=True)
    ref = statistics.median(times["reference"]) if "reference" in times else None
    print(f"{'way':10} {'median s':>9} {'runs':>26} {'/ reference':>12}")
    for way in ways:
        med = statistics.median(times[way])
        runs = ", ".join(f"{t:.2f}" for t in times[way])
        ratio = f"{med / ref:.3f}" if ref else "-"
        print(f"{way:10} {med:9.3f} {runs:>26} {ratio:>12}")


if __name__ == "__main__":
    main()
