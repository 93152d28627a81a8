#!/usr/bin/env python
"""Cold start: a fresh process answers ``view /memories`` on a 10,000-file store.

Whole-process wall time (``subprocess.run``, timed from outside; median of ``--runs``, variants
interleaved in a shuffled order every round) of:

- ``baseline``: this script's child mode doing nothing (interpreter start + this script's imports);
- ``reference``: ``anthropic.tools.BetaLocalFilesystemMemoryTool`` on a plain directory holding
  the same files, ``tool.call({"command": "view", "path": "/memories"})``;
- ``memvault-tool``: ``memvault.MemoryStore.open`` + ``memvault.MemoryTool(store).call(...)``
  (the SDK adapter, so it imports ``anthropic``);
- ``memvault-lib``: ``MemoryStore.open`` + ``memvault.protocol.commands.run_command`` (the same command
  without the SDK adapter: the store path);
- ``memvault-cli``: the ``memvault`` entry point, ``memvault --store S ls`` (every path, kind and
  size);
- ``memvault-read``: ``MemoryStore.open`` + ``store.read_text`` of one file (a process that needs
  one file: what opening costs before any listing);
- ``memvault-cat``: the entry point, ``memvault --store S cat <one file>``.

Each child also reports its own phases (import, open, view) measured with ``perf_counter``, and
whether ``anthropic`` ended up in ``sys.modules``. Finally ``python -X importtime`` runs the
store path and the CLI once more and the script lists any ``anthropic`` module they imported
(there must be none).

The memvault store uses a raw key file (no KDF at open, like ``MEMVAULT_KEY_FILE``); the cost of
opening with a passphrase and the production Argon2id is measured separately and printed.
memvault's modules are byte-compiled first, as ``pip install`` does (the SDK's are, in
site-packages), so no child pays for compiling sources even under ``PYTHONDONTWRITEBYTECODE``.

    python benchmarks/bench_coldstart.py                     # 10,000 files, 7 runs
    python benchmarks/bench_coldstart.py --files 1000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KEY_FILE = "store.key"
NOTE = "# Note {i}\n\n" + ("- agent memory note about the customer meeting and the follow-up owner\n" * 28)
VARIANTS = ("baseline", "reference", "memvault-tool", "memvault-lib", "memvault-cli", "memvault-read", "memvault-cat")
VIEW = {"command": "view", "path": "/memories"}
#: The file ``memvault-read`` and ``memvault-cat`` read (note 7, in either layout).
ONE_FILE = {"flat": "/memories/notes/note_00007.md", "nested": "/memories/notes/d000/note_00007.md"}


# -- child side: keep imports lazy, so each variant pays only for what it uses --------------------


def child(mode: str, target: str, report: str) -> int:
    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    out = ""
    if mode == "baseline":
        pass
    elif mode == "reference":
        from anthropic.tools import BetaLocalFilesystemMemoryTool

        t1 = time.perf_counter()
        tool = BetaLocalFilesystemMemoryTool(base_path=target)
        t2 = time.perf_counter()
        out = str(tool.call(VIEW))
        t3 = time.perf_counter()
        phases = {"import": t1 - t0, "open": t2 - t1, "view": t3 - t2}
    elif mode == "memvault-read":
        import memvault

        t1 = time.perf_counter()
        store = memvault.MemoryStore.open(target, key_file=os.path.join(target, "..", KEY_FILE))
        t2 = time.perf_counter()
        layout = "flat" if store.exists(ONE_FILE["flat"]) else "nested"
        out = store.read_text(ONE_FILE[layout])
        t3 = time.perf_counter()
        store.close()
        phases = {"import": t1 - t0, "open": t2 - t1, "view": t3 - t2}
    elif mode in ("memvault-tool", "memvault-lib"):
        import memvault

        if mode == "memvault-tool":
            from memvault.agent.tool import MemoryTool
        else:
            from memvault.protocol.commands import run_command
        t1 = time.perf_counter()
        store = memvault.MemoryStore.open(target, key_file=os.path.join(target, "..", KEY_FILE))
        t2 = time.perf_counter()
        if mode == "memvault-tool":
            out = str(MemoryTool(store, actor="bench", session="cold").call(VIEW))
        else:
            out = str(run_command(store, VIEW, actor="bench", session="cold"))
        t3 = time.perf_counter()
        store.close()
        phases = {"import": t1 - t0, "open": t2 - t1, "view": t3 - t2}
    else:
        raise SystemExit(f"unknown mode {mode}")
    sys.stdout.write(out)
    sys.stdout.flush()
    anthropic_mods = sorted(m for m in sys.modules if m == "anthropic" or m.startswith("anthropic."))
    with open(report, "w") as f:
        json.dump({"phases": phases, "anthropic_modules": len(anthropic_mods), "lines": out.count("\n")}, f)
    return 0


# -- parent side ------------------------------------------------------------------------------------


def _progress(msg: str) -> None:
    print(f"[coldstart {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _note_path(i: int, layout: str) -> str:
    if layout == "flat":
        return f"notes/note_{i:05d}.md"
    return f"notes/d{i // 50:03d}/note_{i:05d}.md"


def setup(base: Path, files: int, layout: str, *, reference: bool = True) -> dict[str, float]:
    import compileall

    import memvault
    from memvault.crypto import new_key
    from memvault.paths import parse_path

    times: dict[str, float] = {}
    # Byte-compile memvault as `pip install` does for an installed package. An editable install
    # (a checkout) imports from the source tree, where nothing writes bytecode when
    # PYTHONDONTWRITEBYTECODE is set: every child would compile memvault's sources anew while the
    # SDK's modules come precompiled from site-packages.
    t0 = time.perf_counter()
    if not compileall.compile_dir(str(Path(memvault.__file__).parent), quiet=1):
        raise SystemExit("could not byte-compile memvault")
    times["byte-compile memvault (as pip install does)"] = time.perf_counter() - t0
    if reference:  # the plain directory only the reference variant reads
        t0 = time.perf_counter()
        ref = base / "ref" / "memories"
        for i in range(files):
            p = ref / _note_path(i, layout)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(NOTE.format(i=i), encoding="utf-8")
        times["reference seed"] = time.perf_counter() - t0

    key = base / KEY_FILE
    key.write_bytes(new_key())
    key.chmod(0o600)
    os.chmod(key, 0o600)
    t0 = time.perf_counter()
    content = sum(len(NOTE.format(i=i)) for i in range(files))
    settings = memvault.StoreSettings(max_files=files + 100, max_total_bytes=max(2 * content, 1 << 30))
    store = memvault.MemoryStore.create(base / "store", key_file=key, settings=settings)

    def seed(txn: Any) -> None:
        for i in range(files):
            txn.write_file(parse_path("/memories/" + _note_path(i, layout), settings), NOTE.format(i=i).encode())

    store.transact(seed, command="seed", paths=("/memories",), actor="bench", session="seed")
    store.close()
    times["memvault seed (one transaction, durability full)"] = time.perf_counter() - t0

    # The passphrase path: production Argon2id at open, on an empty store (open cost is per process).
    pstore = memvault.MemoryStore.create(base / "pstore", passphrase="cold-start-passphrase")
    pstore.close()
    opens = []
    for _ in range(3):
        t0 = time.perf_counter()
        memvault.MemoryStore.open(base / "pstore", passphrase="cold-start-passphrase").close()
        opens.append(time.perf_counter() - t0)
    times["passphrase open, default Argon2id (median of 3)"] = statistics.median(opens)
    return times


def command_for(variant: str, base: Path, report: Path, layout: str) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if variant == "memvault-cli":
        # The installed entry point itself (no wrapper): what a user or a hook runs.
        env["MEMVAULT_KEY_FILE"] = str(base / KEY_FILE)
        return [*cli_prog(), "--store", str(base / "store"), "ls"], env
    if variant == "memvault-cat":
        env["MEMVAULT_KEY_FILE"] = str(base / KEY_FILE)
        return [*cli_prog(), "--store", str(base / "store"), "cat", ONE_FILE[layout]], env
    target = base / "ref" if variant == "reference" else base / "store"
    script = os.path.abspath(__file__)
    return [sys.executable, script, "--child", variant, "--target", str(target), "--report", str(report)], env


def cli_prog() -> list[str]:
    """The installed ``memvault`` entry point, or an equivalent ``python -c`` call."""
    entry = Path(sys.executable).with_name("memvault")
    if entry.exists():
        return [str(entry)]
    return [sys.executable, "-c", "import sys; from memvault.cli import main; sys.exit(main())"]


def importtime_check(base: Path) -> dict[str, list[str]]:
    """Modules whose name starts with ``anthropic`` in ``python -X importtime`` of the store path
    and of the CLI (both must be empty)."""
    env = dict(os.environ, MEMVAULT_KEY_FILE=str(base / KEY_FILE))
    checks = {
        "store path (MemoryStore.open + protocol.run_command)": [
            sys.executable, "-X", "importtime", "-c",
            "import memvault, sys; from memvault.protocol.commands import run_command; "
            f"s = memvault.MemoryStore.open({str(base / 'store')!r}, key_file={str(base / KEY_FILE)!r}); "
            "run_command(s, {'command': 'view', 'path': '/memories'}, actor='a', session='s'); s.close()",
        ],
        "CLI (memvault entry point, ls)": [*cli_prog(), "--store", str(base / "store"), "ls"],
        "import memvault (package)": [sys.executable, "-X", "importtime", "-c", "import memvault"],
    }  # fmt: skip
    env["PYTHONPROFILEIMPORTTIME"] = "1"  # same as -X importtime, also for the entry point script
    found: dict[str, list[str]] = {}
    for label, cmd in checks.items():
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        if "import time:" not in proc.stderr:
            raise SystemExit(f"no import timings from {label}")
        mods = []
        for line in proc.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                name = line.rsplit("|", 1)[1].strip()
                if name == "anthropic" or name.startswith("anthropic."):
                    mods.append(name)
        found[label] = mods
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--files", type=int, default=10_000, help="files in each store (default 10000)")
    p.add_argument("--runs", type=int, default=7, help="whole-process runs per variant (default 7)")
    p.add_argument("--layout", choices=("flat", "nested"), default="flat",
                   help="flat: all files in /memories/notes/ (default); nested: 50 per notes/dNNN/")  # fmt: skip
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"subset of {','.join(VARIANTS)}")
    p.add_argument("--seed", type=int, default=1, help="seed of the run order")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--tmpdir", type=Path, default=None)
    p.add_argument("--max-read-seconds", type=float, default=None,
                   help="exit 1 if memvault-read's median whole process takes longer")  # fmt: skip
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--target", help=argparse.SUPPRESS)
    p.add_argument("--report", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.target, args.report)
    variants = [v for v in args.variants.split(",") if v]
    if any(v not in VARIANTS for v in variants) or args.runs < 1:
        p.error("unknown variant, or --runs < 1")

    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="memvault-cold-", dir=args.tmpdir))
    try:
        _progress(f"seeding {args.files:,} files ({args.layout}) into a plain directory and a memvault store ...")
        setup_times = setup(base, args.files, args.layout, reference="reference" in variants)
        walls: dict[str, list[float]] = {v: [] for v in variants}
        reports: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        rng = random.Random(args.seed)
        report = base / "report.json"
        for r in range(args.runs):
            order = list(variants)
            rng.shuffle(order)
            _progress(f"round {r + 1}/{args.runs}: {', '.join(order)}")
            for variant in order:
                cmd, env = command_for(variant, base, report, args.layout)
                t0 = time.perf_counter()
                report.unlink(missing_ok=True)
                proc = subprocess.run(cmd, env=env, capture_output=True, check=False)
                wall = time.perf_counter() - t0
                if proc.returncode != 0:
                    print(proc.stderr.decode(errors="replace"), file=sys.stderr)
                    raise SystemExit(f"{variant} failed ({proc.returncode})")
                walls[variant].append(wall)
                if report.exists():
                    reports[variant].append(json.loads(report.read_text()))
                else:  # the CLI entry point: no in-process phases
                    lines = proc.stdout.count(b"\n")
                    reports[variant].append({"phases": {}, "anthropic_modules": None, "lines": lines})
        _progress("checking imports with python -X importtime ...")
        imports = importtime_check(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    summary: dict[str, Any] = {}
    for v in variants:
        phase_names = list(reports[v][0]["phases"])
        summary[v] = {
            "wall_median_s": statistics.median(walls[v]),
            "wall_s": walls[v],
            "phases_median_s": {k: statistics.median(r["phases"][k] for r in reports[v]) for k in phase_names},
            "anthropic_modules": reports[v][0]["anthropic_modules"],
            "output_lines": reports[v][0]["lines"],
        }
    result = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "files": args.files,
        "layout": args.layout,
        "runs": args.runs,
        "setup_s": setup_times,
        "variants": summary,
        "importtime_anthropic_modules": imports,
        "total_s": time.perf_counter() - started,
    }
    print(json.dumps(result, indent=2) if args.json else render(result))
    if args.max_read_seconds is not None:
        took = summary["memvault-read"]["wall_median_s"] if "memvault-read" in summary else None
        if took is None or took > args.max_read_seconds:
            print(f"memvault-read: {took} s, bound {args.max_read_seconds} s: FAIL", file=sys.stderr)
            return 1
        print(f"memvault-read {took:.3f} s <= {args.max_read_seconds} s")
    return 0


def render(res: dict[str, Any]) -> str:
    out = ["cold start: fresh process -> open -> view /memories, or read one file (memvault-read, memvault-cat);"
           " whole process, timed from outside"]  # fmt: skip
    out.append(f"command: {res['command']}")
    out.append(f"date:    {res['date']}")
    out.append(f"store:   {res['files']:,} files, layout {res['layout']}; {res['runs']} runs per variant, "
               "variants in a shuffled order every round; medians")  # fmt: skip
    out.append("setup:   " + "; ".join(f"{k} {v:.2f} s" for k, v in res["setup_s"].items()))
    out.append("")
    out.append("| variant | whole process | import | open | view / ls | output lines | anthropic modules loaded |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    v = res["variants"]

    def ms(x: float | None) -> str:
        return "" if x is None else f"{x * 1000:,.0f} ms" if x >= 0.1 else f"{x * 1000:,.1f} ms"

    for name, row in v.items():
        ph = row["phases_median_s"]
        mods = "see below" if row["anthropic_modules"] is None else row["anthropic_modules"]
        out.append(f"| {name} | {ms(row['wall_median_s'])} | {ms(ph.get('import'))} | {ms(ph.get('open'))} | "
                   f"{ms(ph.get('view'))} | {row['output_lines']:,} | {mods} |")  # fmt: skip
    out.append("")
    if "reference" in v:
        ref = v["reference"]["wall_median_s"]
        for name in ("memvault-tool", "memvault-lib", "memvault-cli"):
            if name in v:
                out.append(f"ratio {name} / reference (whole process): {v[name]['wall_median_s'] / ref:.3f}")
        if "baseline" in v:
            base = v["baseline"]["wall_median_s"]
            for name in ("memvault-tool", "memvault-lib", "memvault-cli"):
                if name in v:
                    out.append(f"ratio {name} / reference, interpreter start subtracted: "
                               f"{(v[name]['wall_median_s'] - base) / (ref - base):.3f}")  # fmt: skip
    out.append("")
    for label, mods in res["importtime_anthropic_modules"].items():
        verdict = "no anthropic module imported" if not mods else f"IMPORTS {len(mods)} anthropic modules: {mods[:5]}"
        out.append(f"python -X importtime, {label}: {verdict}")
    out.append(f"total wall time {res['total_s']:.0f} s")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
