"""The long versions of the reliability checks that CI runs small, in one command.

    python benchmarks/long_checks.py            # about 12-18 minutes on the project's 2-vCPU machine
    python benchmarks/long_checks.py --quick    # the CI sizes, as a smoke test
    python benchmarks/long_checks.py --only stateful,fuzz --seed 7

Checks (each a pytest run or the stress script in a subprocess; the summary gives its outcome,
test count and wall time):

- ``stateful``: tests/property/test_stateful.py with 400 hypothesis examples of up to 60 steps
  and 400 seeded runs (CI: 30 and 20), checking every result and the whole tree against a model;
- ``fuzz``: tests/property/test_fuzz_decoders.py with 50 times the CI examples, seeded (CI: a fixed
  derandomized sequence), plus the crasher corpus;
- ``faults``: every fault-injection and crash test (tests/crash), already exhaustive in CI;
- ``stress``: benchmarks/bench_stress.py with 4 processes x 2 threads x 1,000 commands;
- ``s3race``: the object-storage race test (tests/remote) with 8 processes x 40 rounds (CI: 4 x 6),
  each process a host with its own cache, against moto on loopback;
- ``s3soak``: the soak of a store in S3 (tests/s3soak.py) with 8 writer hosts x 500 commits through a
  faulty proxy, a gc every 100 commits on a ninth host, a writer paused across a compaction, 3
  redactions (CI: 3 x 15, a gc every 10); its SOAK-FIGURES line gives the counts;
- ``s3gc10k``: 10,000 commits and a gc leave at most 50 objects and about the replica's bytes
  (CI: 120 commits); its GC-FIGURES line gives the counts;
- ``scrubkeys``: tests/scrub/test_scrub_keys.py's check that no random key of any credential kind is let
  through, with a million keys per kind (CI: 100,000; 2-3 minutes on the project's machine);
- ``open1m``: benchmarks/bench_coldstart.py on a store of 1,000,000 notes (one seeding transaction,
  about 2.5 minutes): a fresh process that opens it and reads one file must take at most 3 s (median
  of 3; ``--quick``: 20,000 notes, 1 s).

Exit status 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pytest(paths: list[str], extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *paths, *extra]


#: The long soak (tests/s3soak.py): 8 writers x 500 commits, a gc every 100 commits on a ninth host.
SOAK_ENV = {
    "MEMVAULT_SOAK_HOSTS": "8", "MEMVAULT_SOAK_COMMITS": "500", "MEMVAULT_SOAK_GC_EVERY": "100",
    "MEMVAULT_SOAK_REDACTIONS": "3", "MEMVAULT_SOAK_MAX_FAULTS": "0", "MEMVAULT_SOAK_FAULT_INTERVAL": "0.5",
    "MEMVAULT_SOAK_SLOW_SECONDS": "1.0", "MEMVAULT_SOAK_COMMIT_WINDOW": "20", "MEMVAULT_SOAK_GRACE": "120",
    "MEMVAULT_SOAK_MIN_PAUSE": "5", "MEMVAULT_SOAK_MAX_PAUSE": "90",
}  # fmt: skip


def checks(quick: bool, seed: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    stateful_env = (
        {}
        if quick
        else {"MEMVAULT_STATEFUL_EXAMPLES": "400", "MEMVAULT_STATEFUL_STEPS": "60", "MEMVAULT_STATEFUL_SEEDED": "400"}
    )
    fuzz_env = {} if quick else {"MEMVAULT_FUZZ_SCALE": "50", "MEMVAULT_FUZZ_SEED": str(seed)}
    fuzz_extra = [] if quick else [f"--hypothesis-seed={seed}"]
    stress_ops = "100" if quick else "1000"
    race_env = {} if quick else {"MEMVAULT_S3_RACE_WORKERS": "8", "MEMVAULT_S3_RACE_ROUNDS": "40"}
    return {
        "stateful": (_pytest(["tests/property/test_stateful.py"], []), stateful_env),
        "fuzz": (_pytest(["tests/property/test_fuzz_decoders.py"], fuzz_extra), fuzz_env),
        "faults": (_pytest(["tests/crash"], []), {}),
        "stress": (
            [sys.executable, "benchmarks/bench_stress.py", "--procs", "4", "--ops", stress_ops, "--seed", str(seed)],
            {},
        ),
        "s3race": (_pytest(["tests/remote/test_remote_store.py", "-k", "racing_processes"], []), race_env),
        "s3soak": (
            _pytest(["tests/remote/test_soak.py", "-s", "-k", "soak_loses"], []),
            {} if quick else SOAK_ENV,
        ),
        "s3gc10k": (
            _pytest(["tests/remote/test_soak.py", "-s", "-k", "many_commits"], []),
            {} if quick else {"MEMVAULT_GC_COMMITS": "10000"},
        ),
        "scrubkeys": (
            _pytest(["tests/scrub/test_scrub_keys.py", "-k", "never_let"], []),
            {} if quick else {"MEMVAULT_SCRUB_KEYS": "1000000"},
        ),
        "open1m": (
            [
                sys.executable,
                "benchmarks/bench_coldstart.py",
                "--files",
                "20000" if quick else "1000000",
                "--runs",
                "3",
                "--variants",
                "memvault-read,memvault-cat",
                "--max-read-seconds",
                "1" if quick else "3",
            ],
            {},
        ),  # fmt: skip
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="CI sizes (a smoke test of this script)")
    ap.add_argument(
        "--only",
        default="",
        help="comma-separated subset of: stateful, fuzz, faults, stress, s3race, s3soak, s3gc10k, scrubkeys, open1m",
    )
    ap.add_argument("--seed", type=int, default=1, help="seed of the fuzz and stress runs (default 1)")
    args = ap.parse_args()
    todo = checks(args.quick, args.seed)
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in todo]
        if unknown:
            ap.error(f"unknown check(s): {', '.join(unknown)}")
        todo = {k: v for k, v in todo.items() if k in wanted}
    results: list[tuple[str, bool, str, float]] = []
    for name, (cmd, env) in todo.items():
        print(f"== {name}: {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(cmd[1:])}", flush=True)
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True)
        wall = time.monotonic() - t0
        out = proc.stdout + proc.stderr
        if name == "stress":
            summary = " | ".join(line for line in out.splitlines() if line.startswith(("commands:", "commits:")))
        elif name == "open1m":
            summary = " | ".join(line for line in out.splitlines() if line.startswith(("| memvault-", "memvault-read")))
        else:
            m = re.findall(r"^=*\s*(\d+ passed.*?)(?: in [\d.]+s.*)?=*$", out, re.M)
            summary = m[-1].strip() if m else out.strip().splitlines()[-1] if out.strip() else ""
        for figures in re.findall(r"(?:SOAK|GC)-FIGURES \{.*\}", out):
            print(f"   {figures}", flush=True)  # the counts the soak and the gc size check measured
        ok = proc.returncode == 0
        if not ok:
            print(out[-4000:])
        results.append((name, ok, summary, wall))
        print(f"   {'PASS' if ok else 'FAIL'} in {wall:.0f} s: {summary}", flush=True)
    print()
    for name, ok, summary, wall in results:
        print(f"{name:<9} {'PASS' if ok else 'FAIL'}  {wall:6.0f} s  {summary}")
    return 0 if all(ok for _n, ok, _s, _w in results) else 1


if __name__ == "__main__":
    sys.exit(main())
