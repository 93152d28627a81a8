#!/usr/bin/env python
"""memvault vs the SDK's plain-file memory tool: same workload, one process, interleaved.

Runs a seeded, agent-like workload of ``memory_20250818`` commands through ``tool.call({...})``
against ``anthropic.tools.BetaLocalFilesystemMemoryTool`` (the reference) and against
``memvault.MemoryTool`` (one store per durability mode), at several store sizes. The backends
run round-robin, a few ops each, with the starting backend rotating every round, so that the
host's drift hits all of them alike; compare the *ratios*, not the absolute figures.

Store layout at size N (identical for every backend)::

    /memories/notes/dNNN/note_NNNNN.md   N notes of ~2 KB, 50 per directory (N/50 directories)
    /memories/work/edit/e_NN.md          10 KB str_replace targets
    /memories/work/ins/i_NN.md           10 KB insert targets
    /memories/work/del/v_NNNN.md         2 KB delete victims (one per delete op)
    /memories/work/ren/r_NNNN.md         2 KB rename sources (one per rename op)
    /memories/work/new/                  where create writes new 2 KB files

Everything mutable sits three levels down, so ``view /memories`` (which lists two levels)
shows the same ~N/50 + 8 entries for the whole run.

Run ``python benchmarks/bench_tool.py --help``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import math
import os
import platform
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

VIEW_COMMANDS = ("view_file", "view_range", "view_dir", "view_root")
MUTATION_COMMANDS = ("create", "str_replace", "insert", "delete", "rename")
COMMANDS = VIEW_COMMANDS + MUTATION_COMMANDS
#: Views of one note, split into first views and repeats in the output.
FILE_VIEWS = ("view_file", "view_range")

#: Notes per directory below /memories/notes.
DIR_FANOUT = 50
#: Number of 10 KB files that str_replace (and, separately, insert) cycle through.
EDIT_POOL = 16
NOTE_BYTES = 2048
EDIT_BYTES = 10 * 1024
#: Distinct note bodies; note i uses body i % NOTE_BODIES under its own heading.
NOTE_BODIES = 64
VIEW_RANGE = [10, 20]
INSERT_LINE = 5
PASSPHRASE = "memvault-benchmark-passphrase"

_WORDS = (
    "agent memory note project deadline customer meeting follow-up summary decision risk owner budget "
    "roadmap api latency bug fix release review design draft todo blocked priority sprint metric "
    "dashboard incident postmortem hypothesis experiment result config deploy rollback cache index "
    "query schema migration token session context preference language timezone contact invoice "
    "contract vendor policy security audit backup restore archive tag label status estimate"
).split()

Call = Callable[[dict[str, Any]], object]


# -- workload -----------------------------------------------------------------------------------


def _text_of(rng: random.Random, header: str, size: int, marker_line: str | None = None) -> str:
    """A markdown note of about ``size`` bytes: a heading and bullet lines of ~60 characters."""
    lines = [header, ""]
    total = len(header) + 1
    while total < size:
        if rng.random() < 0.08:
            line = "## " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 4))).capitalize()
        else:
            line = "- " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 11)))
        lines.append(line)
        total += len(line) + 1
    if marker_line is not None:
        lines.insert(len(lines) // 2, marker_line)
    return "\n".join(lines) + "\n"


def _marker(j: int, version: int) -> str:
    return f"@@edit-{j:02d}-v{version:04d}@@"


@dataclass
class Workload:
    """The seeded store content and the k-th input of every command (same for every backend)."""

    n: int
    per_command: int  #: warm-up + timed ops per command per backend
    seed: int
    n_dirs: int = 0
    bodies: list[str] = field(default_factory=list)
    view_targets: list[int] = field(default_factory=list)
    range_targets: list[int] = field(default_factory=list)
    dir_targets: list[int] = field(default_factory=list)
    create_texts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = random.Random(f"memvault-bench/{self.seed}/{self.n}")
        self.n_dirs = max(1, math.ceil(self.n / DIR_FANOUT))
        self.bodies = [_text_of(rng, "", NOTE_BYTES - 40) for _ in range(NOTE_BODIES)]
        self.view_targets = [rng.randrange(self.n) for _ in range(self.per_command)]
        self.range_targets = [rng.randrange(self.n) for _ in range(self.per_command)]
        self.dir_targets = [rng.randrange(self.n_dirs) for _ in range(self.per_command)]
        self.create_texts = [_text_of(rng, f"# Created note {k}", NOTE_BYTES) for k in range(8)]
        self._edit_rng_seed = rng.random()

    @staticmethod
    def note_path(i: int) -> str:
        return f"/memories/notes/d{i // DIR_FANOUT:03d}/note_{i:05d}.md"

    def note_text(self, i: int) -> str:
        return f"# Note {i}\n" + self.bodies[i % NOTE_BODIES]

    @property
    def extra_files(self) -> int:
        """Files seeded besides the N notes, plus the files create adds."""
        return 2 * EDIT_POOL + 3 * self.per_command

    def seed_files(self) -> Iterator[tuple[str, str]]:
        """Every file of the initial store, as ``(path, text)``."""
        for i in range(self.n):
            yield self.note_path(i), self.note_text(i)
        rng = random.Random(self._edit_rng_seed)
        for j in range(EDIT_POOL):
            yield (
                f"/memories/work/edit/e_{j:02d}.md",
                _text_of(rng, f"# Edit target {j}", EDIT_BYTES, f"status: {_marker(j, 0)}"),
            )
            yield f"/memories/work/ins/i_{j:02d}.md", _text_of(rng, f"# Insert target {j}", EDIT_BYTES)
        for k in range(self.per_command):
            yield f"/memories/work/del/v_{k:04d}.md", self.note_text(k)
            yield f"/memories/work/ren/r_{k:04d}.md", self.note_text(k + 1)

    #: Directories that exist from the start although no seeded file lies in them.
    empty_dirs = ("/memories/work/new",)

    def view_note(self, command: str, k: int) -> int | None:
        """The note the k-th ``command`` views (None for commands that view no single note)."""
        if command == "view_file":
            return self.view_targets[k]
        if command == "view_range":
            return self.range_targets[k]
        return None

    def op(self, command: str, k: int) -> dict[str, Any]:
        """The k-th input of ``command`` (k counts per backend, warm-up included)."""
        if command == "view_file":
            return {"command": "view", "path": self.note_path(self.view_targets[k])}
        if command == "view_range":
            return {"command": "view", "path": self.note_path(self.range_targets[k]), "view_range": list(VIEW_RANGE)}
        if command == "view_dir":
            return {"command": "view", "path": f"/memories/notes/d{self.dir_targets[k]:03d}"}
        if command == "view_root":
            return {"command": "view", "path": "/memories"}
        if command == "create":
            return {"command": "create", "path": f"/memories/work/new/c_{k:04d}.md",
                    "file_text": self.create_texts[k % len(self.create_texts)]}  # fmt: skip
        if command == "str_replace":
            j, version = k % EDIT_POOL, k // EDIT_POOL
            return {"command": "str_replace", "path": f"/memories/work/edit/e_{j:02d}.md",
                    "old_str": _marker(j, version), "new_str": _marker(j, version + 1)}  # fmt: skip
        if command == "insert":
            text = f"- inserted line {k}: follow up with the owner\n"
            return {"command": "insert", "path": f"/memories/work/ins/i_{k % EDIT_POOL:02d}.md",
                    "insert_line": INSERT_LINE, "insert_text": text}  # fmt: skip
        if command == "delete":
            return {"command": "delete", "path": f"/memories/work/del/v_{k:04d}.md"}
        if command == "rename":
            return {"command": "rename", "old_path": f"/memories/work/ren/r_{k:04d}.md",
                    "new_path": f"/memories/work/ren/r_{k:04d}_renamed.md"}  # fmt: skip
        raise ValueError(command)


# -- backends -----------------------------------------------------------------------------------


@dataclass
class Backend:
    name: str  #: "reference", "memvault-full", "memvault-none"
    call: Call
    close: Callable[[], None]
    setup: dict[str, float]  #: seconds spent seeding / opening (informational)
    workload: Workload
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COMMANDS, 0))
    #: command -> one list of latencies (ns) per timed run
    samples: dict[str, list[list[int]]] = field(default_factory=lambda: {c: [] for c in COMMANDS})
    #: command -> per timed run, for each sample: was its note viewed before in this process?
    repeats: dict[str, list[list[bool]]] = field(default_factory=lambda: {c: [] for c in FILE_VIEWS})
    viewed: set[int] = field(default_factory=set)  #: notes this backend has viewed (either view command)


def make_reference(root: Path, workload: Workload) -> Backend:
    from anthropic.tools import BetaLocalFilesystemMemoryTool

    t0 = time.perf_counter()
    tool = BetaLocalFilesystemMemoryTool(base_path=str(root))
    memories = root / "memories"
    # Seed by writing the files directly (no fsync): the reference has no bulk API.
    for path, text in workload.seed_files():
        target = memories / path[len("/memories/") :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for d in workload.empty_dirs:
        (memories / d[len("/memories/") :]).mkdir(parents=True, exist_ok=True)
    seeded = time.perf_counter() - t0
    return Backend("reference", tool.call, lambda: None, {"seed_s": seeded}, workload)


def make_memvault(root: Path, workload: Workload, durability: str, cache_bytes: int | None = None) -> Backend:
    import memvault
    from memvault.paths import parse_path

    settings = memvault.StoreSettings(durability=durability, max_files=workload.n + workload.extra_files + 100)  # type: ignore[arg-type]
    # Deliberately cheap KDF: it only costs time when a store is created or opened.
    kdf = memvault.KdfParams(memory_kib=8, iterations=1, lanes=1)
    t0 = time.perf_counter()
    store = memvault.MemoryStore.create(root, passphrase=PASSPHRASE, kdf=kdf, settings=settings)

    def seed(txn: Any) -> None:
        for path, text in workload.seed_files():
            txn.write_file(parse_path(path, settings), text.encode("utf-8"))
        for d in workload.empty_dirs:
            txn.make_dirs(parse_path(d, settings))

    # Bulk seed: one transaction, one commit for all files.
    store.transact(seed, command="seed", paths=("/memories",), actor="bench", session="seed")
    store.close()
    seeded = time.perf_counter() - t0
    # Reopen, so the timed ops start from a freshly opened store (cold content cache), as a new
    # agent process would, instead of one whose caches the seeding filled.
    t1 = time.perf_counter()
    store = memvault.MemoryStore.open(root, passphrase=PASSPHRASE)
    if cache_bytes is not None:
        store.plaintext_cache_bytes = cache_bytes
    opened = time.perf_counter() - t1
    tool = memvault.MemoryTool(store, actor="bench", session="bench")
    return Backend(f"memvault-{durability}", tool.call, store.close, {"seed_s": seeded, "open_s": opened}, workload)


# -- running --------------------------------------------------------------------------------------


class BenchError(RuntimeError):
    pass


def run_one(backend: Backend, command: str, run: int | None) -> None:
    workload = backend.workload
    k = backend.counters[command]
    backend.counters[command] = k + 1
    data = workload.op(command, k)
    note = workload.view_note(command, k)
    call = backend.call
    try:
        t0 = time.perf_counter_ns()
        out = call(data)
        t1 = time.perf_counter_ns()
    except Exception as err:
        raise BenchError(f"{backend.name}: {command} #{k} {data.get('path', data.get('old_path'))}: "
                         f"{type(err).__name__}: {err}") from err  # fmt: skip
    if not isinstance(out, str) or out.startswith("Error"):
        raise BenchError(f"{backend.name}: {command} #{k} returned {out!r:.200}")
    if run is not None:
        per_run = backend.samples[command]
        while len(per_run) <= run:
            per_run.append([])
        per_run[run].append(t1 - t0)
        if note is not None:
            repeats = backend.repeats[command]
            while len(repeats) <= run:
                repeats.append([])
            repeats[run].append(note in backend.viewed)
    if note is not None:
        backend.viewed.add(note)


def run_phase(backends: Sequence[Backend], commands_run: Sequence[str], count: int, chunk: int, rng: random.Random,
              run: int | None) -> None:  # fmt: skip
    """``count`` ops of every command on every backend, round-robin in chunks of ``chunk`` ops.

    ``run`` is the index of the timed run the samples belong to (None: warm-up, not recorded).
    The backends may belong to different store sizes (each runs its own size's workload).

    Each round shuffles the command order (an agent mixes commands) and rotates which backend
    goes first, so every backend leads equally often.
    """
    rounds = math.ceil(count / chunk) if count else 0
    done = 0
    for r in range(rounds):
        n_ops = min(chunk, count - done)
        commands = list(commands_run)
        rng.shuffle(commands)
        for ci, command in enumerate(commands):
            shift = (r + ci) % len(backends)
            for backend in [*backends[shift:], *backends[:shift]]:
                for _ in range(n_ops):
                    run_one(backend, command, run)
        done += n_ops


#: Views compared across backends after the run (a check that the workload did the same thing).
PARITY_PATHS = (
    "/memories",
    "/memories/work/edit/e_00.md",
    "/memories/work/ins/i_01.md",
    "/memories/work/new",
    "/memories/work/del",
    "/memories/work/ren",
    "/memories/notes/d000",
)


def _normalized_view(out: object) -> list[str]:
    """A view's substance: listed paths, or file lines without numbers.

    Formatting differences that memvault makes on purpose (header wording, ``4.0K`` vs ``4K``,
    trailing ``/`` on directories, the reference's phantom empty last line) are ignored.
    """
    header, _, body = str(out).partition("\n")
    rows = body.split("\n")
    if header.startswith("Here're the files"):
        return sorted(row.split("\t", 1)[-1].rstrip("/") for row in rows)
    lines = [row.split("\t", 1)[-1] for row in rows]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def check_parity(backends: Sequence[Backend]) -> list[str]:
    """Paths whose final view differs in substance from the reference's."""
    mismatches = []
    for path in PARITY_PATHS:
        want = _normalized_view(backends[0].call({"command": "view", "path": path}))
        for backend in backends[1:]:
            if _normalized_view(backend.call({"command": "view", "path": path})) != want:
                mismatches.append(f"{backend.name}:{path}")
    return mismatches


def _pct(values: list[int], q: float) -> float:
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _geomean(values: Sequence[float]) -> float | None:
    """None when there is nothing to average (JSON ``null``, not a bare ``NaN``)."""
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def print_ratio_table(ref: Backend, others: Sequence[Backend], commands: Sequence[str]) -> dict[str, float]:
    """Print, per command, each backend's median µs and its ratio to ``ref`` (median over runs of
    the per-run ratio of medians), then the geomean of the ratios; return those geomeans."""
    print("| command | reference µs | " + " | ".join(f"{b.name} µs | {b.name} ratio" for b in others) + " |")
    print("|---|---:|" + "---:|---:|" * len(others))
    ratios: dict[str, list[float]] = {b.name: [] for b in others}
    for c in commands:
        ref_med = [statistics.median(r) / 1000 for r in ref.samples[c]]
        cells = [f"{statistics.median(ref_med):,.0f}"]
        for b in others:
            meds = [statistics.median(r) / 1000 for r in b.samples[c]]
            ratio = statistics.median([m / r for m, r in zip(meds, ref_med, strict=True)])
            ratios[b.name].append(ratio)
            cells += [f"{statistics.median(meds):,.0f}", f"{ratio:.2f}"]
        print(f"| {c} | " + " | ".join(cells) + " |")
    geo = {name: g for name, values in ratios.items() if (g := _geomean(values)) is not None}
    label = ("mutations" if set(commands) <= set(MUTATION_COMMANDS)
             else "views" if set(commands) <= set(VIEW_COMMANDS) else "commands")  # fmt: skip
    print(f"| geomean {label} | | " + " | ".join(f"| {g:.2f}" for g in geo.values()) + " |")
    return geo


def _median_of_runs(per_run: list[list[int]]) -> tuple[float, list[float]]:
    """The median over runs of each run's median latency, and the per-run medians (µs)."""
    medians = [statistics.median(r) / 1000 for r in per_run if r]
    return statistics.median(medians), medians


def bench_sizes(sizes: Sequence[int], args: argparse.Namespace, base: Path) -> list[dict[str, Any]]:
    """Seed every size, then time all of them in the same interleaved runs.

    The backends of every size take turns in one round-robin, so the host's drift reaches every
    size alike and the scale ratios compare samples taken side by side, not minutes apart.
    """
    sized: list[tuple[int, Workload, list[Backend]]] = []
    run_times: list[float] = []
    parity: dict[int, list[str]] = {}
    size_dirs: list[Path] = []
    try:
        for n in sizes:
            workload = Workload(n=n, per_command=args.warmup + args.ops * args.runs, seed=args.seed)
            size_dirs.append(Path(tempfile.mkdtemp(prefix=f"n{n}-", dir=base)))
            backends: list[Backend] = []
            sized.append((n, workload, backends))
            _progress(f"N={n}: seeding reference ...")
            backends.append(make_reference(size_dirs[-1] / "reference", workload))
            for mode in args.durability:
                _progress(f"N={n}: seeding memvault durability={mode} (one transaction) ...")
                backends.append(make_memvault(size_dirs[-1] / f"memvault-{mode}", workload, mode,
                                              args.plaintext_cache_bytes))  # fmt: skip
        # Seeding leaves tens of MB unsynced (the reference and `none` write without fsync): write
        # them back now, not during the timed runs.
        os.sync()
        everyone = [b for _, _, backends in sized for b in backends]
        label = "N=" + ",".join(str(n) for n in sizes)
        rng = random.Random(f"schedule/{args.seed}/{','.join(str(n) for n in sizes)}")
        gc.collect()
        _progress(f"{label}: warm-up ({args.warmup} ops per command per backend) ...")
        run_phase(everyone, args.commands, args.warmup, args.chunk, rng, run=None)
        for run in range(args.runs):
            gc.collect()
            _progress(f"{label}: run {run + 1}/{args.runs}: {args.ops} ops per command per backend, interleaved ...")
            t0 = time.perf_counter()
            run_phase(everyone, args.commands, args.ops, args.chunk, rng, run=run)
            run_times.append(time.perf_counter() - t0)
        for n, _, backends in sized:
            parity[n] = check_parity(backends)
    finally:
        for _, _, backends in sized:
            for backend in backends:
                backend.close()
        for size_dir in size_dirs:
            shutil.rmtree(size_dir, ignore_errors=True)
    return [_size_result(n, workload, backends, args, run_times, parity[n]) for n, workload, backends in sized]


def _split_by_repeat(per_run: list[list[int]], flags: list[list[bool]], repeat: bool) -> list[int]:
    return [v for r, f in zip(per_run, flags, strict=True) for v, is_repeat in zip(r, f, strict=True)
            if is_repeat == repeat]  # fmt: skip


def _size_result(n: int, workload: Workload, backends: list[Backend], args: argparse.Namespace,
                 run_times: list[float], parity: list[str]) -> dict[str, Any]:  # fmt: skip
    ref = backends[0]
    result: dict[str, Any] = {
        "n_notes": n,
        "n_dirs": workload.n_dirs,
        "extra_files": 2 * EDIT_POOL + 2 * workload.per_command,
        "ops": args.ops,
        "runs": args.runs,
        "warmup": args.warmup,
        # With the sizes interleaved, the runs (and these times) are those of all sizes together.
        "timed_phase_s": round(sum(run_times), 3),
        "run_s": [round(t, 3) for t in run_times],
        "parity_mismatches": parity,
        "setup": {b.name: {k: round(v, 4) for k, v in b.setup.items()} for b in backends},
        "commands": {},
        "geomean": {},
    }
    for command in args.commands:
        row: dict[str, Any] = {}
        for backend in backends:
            per_run = backend.samples[command]
            pooled = [v for r in per_run for v in r]
            median, medians = _median_of_runs(per_run)
            row[backend.name] = {
                "median_us": median,
                "run_medians_us": medians,
                "p25_us": _pct(pooled, 0.25) / 1000,
                "p75_us": _pct(pooled, 0.75) / 1000,
                "min_us": min(pooled) / 1000,
                "max_us": max(pooled) / 1000,
                "n": len(pooled),
            }
            if command in FILE_VIEWS:
                # First view of its note in this process (for memvault: a plaintext-cache miss)
                # or a repeat (a hit), pooled over the runs.
                for key, repeat in (("first", False), ("repeat", True)):
                    part = _split_by_repeat(per_run, backend.repeats[command], repeat)
                    row[backend.name][f"{key}_n"] = len(part)
                    row[backend.name][f"{key}_median_us"] = statistics.median(part) / 1000 if part else None
        for backend in backends[1:]:
            # Ratio of medians within each run (both sides saw the same phase of the host), then
            # the median of those per-run ratios.
            mine, theirs = row[backend.name]["run_medians_us"], row[ref.name]["run_medians_us"]
            ratios = [m / r for m, r in zip(mine, theirs, strict=True)]
            row[backend.name]["run_ratios"] = ratios
            row[backend.name]["ratio"] = statistics.median(ratios)
        result["commands"][command] = row
    for backend in backends[1:]:
        by_command = {c: result["commands"][c][backend.name]["ratio"] for c in args.commands}
        result["geomean"][backend.name] = {
            "views": _geomean([by_command[c] for c in VIEW_COMMANDS if c in by_command]),
            "mutations": _geomean([by_command[c] for c in MUTATION_COMMANDS if c in by_command]),
        }
    return result


#: Fewest pooled samples for a first-view / repeat median to enter the scale table.
MIN_SPLIT_SAMPLES = 10


def scale_ratios(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per command and backend: latency at the largest size / at the smallest size.

    The median over runs of (that run's median at the largest size / at the smallest): with the
    sizes interleaved, both medians of a run come from the same phase of the host. For file views
    also the same for first views and repeats (pooled medians; None under MIN_SPLIT_SAMPLES).
    """
    if len(results) < 2:
        return {}
    small = min(results, key=lambda r: r["n_notes"])
    large = max(results, key=lambda r: r["n_notes"])
    out: dict[str, Any] = {"from": small["n_notes"], "to": large["n_notes"], "commands": {}, "split": {}}
    for command, row in large["commands"].items():
        cells: dict[str, float] = {}
        for name, cell in row.items():
            base = small["commands"][command][name]
            pairs = zip(cell["run_medians_us"], base["run_medians_us"], strict=True)
            cells[name] = statistics.median(big / little for big, little in pairs)
            if "run_ratios" in cell:
                pairs = zip(cell["run_ratios"], base["run_ratios"], strict=True)
                cells[f"{name} (ratio)"] = statistics.median(big / little for big, little in pairs)
        out["commands"][command] = cells
        if command in FILE_VIEWS:
            for key in ("first", "repeat"):
                split: dict[str, float | None] = {}
                for name, cell in row.items():
                    base = small["commands"][command][name]
                    enough = min(cell[f"{key}_n"], base[f"{key}_n"]) >= MIN_SPLIT_SAMPLES
                    split[name] = cell[f"{key}_median_us"] / base[f"{key}_median_us"] if enough else None
                ref = split.pop("reference")
                for name in list(split):
                    mine = split[name]
                    split[f"{name} (ratio)"] = mine / ref if mine is not None and ref is not None else None
                split["reference"] = ref
                out["split"][f"{command} ({key} views)"] = split
    return out


# -- reporting -----------------------------------------------------------------------------------


def _progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_gib() -> str:
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return f"{pages * page_size / 2**30:.0f} GiB RAM"
    except (ValueError, OSError, AttributeError):
        return "RAM unknown"


def _filesystem_of(path: Path) -> str:
    """``fstype (device)`` of the mount holding ``path`` (Linux only)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown filesystem"
    best = ("", "unknown", "?")
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        device, mount, fstype = parts[0], parts[1], parts[2]
        if (resolved == mount or resolved.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[0]):
            best = (mount, fstype, device)
    return f"{best[1]} ({best[2]})"


def environment(base: Path) -> dict[str, Any]:
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join([os.path.basename(sys.executable), *sys.argv]),
        "machine": f"{platform.platform()}; {_cpu_model()}; {os.cpu_count()} CPUs; {_mem_gib()}",
        "tmp_filesystem": f"{base} on {_filesystem_of(base)}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "packages": {d: _version(d) for d in ("memvault", "anthropic", "dulwich", "cryptography", "pydantic")},
        "kdf": "memvault stores use a deliberately cheap Argon2id (m=8 KiB, t=1, p=1); it only affects "
        "create/open time, never per-command cost",
    }


def _us(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def _ratio(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3f}" if v < 0.1 else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def _split_cell(cell: dict[str, Any], key: str) -> str:
    median = cell[f"{key}_median_us"]
    return f"{_us(median)} ({cell[f'{key}_n']})" if median is not None else f"- ({cell[f'{key}_n']})"


def render(env: dict[str, Any], results: list[dict[str, Any]], modes: Sequence[str], total_s: float,
           scale: dict[str, Any], interleaved: bool, cache_bytes: int | None) -> str:  # fmt: skip
    out: list[str] = []
    out.append("memvault vs BetaLocalFilesystemMemoryTool: tool.call() latency, interleaved, median of per-run medians")
    out.append(f"command:  {env['command']}")
    out.append(f"date:     {env['date']}")
    out.append(f"machine:  {env['machine']}")
    out.append(f"temp dir: {env['tmp_filesystem']}")
    out.append(f"python:   {env['python']}; " + ", ".join(f"{k} {v}" for k, v in env["packages"].items()))
    out.append(f"note:     {env['kdf']}")
    shared = interleaved and len(results) > 1
    if len(results) > 1:
        out.append("sizes:    " + ("interleaved: every size's backends take turns in the same runs" if interleaved
                                   else "one after another (--sizes-one-at-a-time)"))  # fmt: skip
    names = [f"memvault-{m}" for m in modes]
    for res in results:
        out.append("")
        runs = ", ".join(f"{t:.1f}" for t in res["run_s"])
        out.append(f"N = {res['n_notes']:,} notes in {res['n_dirs']} dir(s) (+{res['extra_files']} work files); "
                   f"{res['runs']} run(s) x {res['ops']} timed ops per command per backend after {res['warmup']} "
                   f"warm-up; timed runs {runs} s{' (all sizes together)' if shared else ''}")  # fmt: skip
        setup = res["setup"]
        parts = [f"reference seeded in {setup['reference']['seed_s']:.2f} s"]
        for name in names:
            parts.append(f"{name} seeded in {setup[name]['seed_s']:.2f} s (one commit), "
                         f"reopened in {setup[name]['open_s'] * 1000:.0f} ms")  # fmt: skip
        out.append("setup (not part of any timing below): " + "; ".join(parts))
        if res["parity_mismatches"]:
            out.append("WARNING: final views differ from the reference for " + ", ".join(res["parity_mismatches"]))
        else:
            out.append(f"check: after the run, {len(PARITY_PATHS)} views (root, dirs, edited files) show the same "
                       "entries and content in every backend")  # fmt: skip
        out.append("")
        header = ["command", "reference µs"]
        for m in modes:
            header += [f"memvault {m} µs", f"ratio {m}"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for command, row in res["commands"].items():
            cells = [command, _us(row["reference"]["median_us"])]
            for name in names:
                cells += [_us(row[name]["median_us"]), _ratio(row[name]["ratio"])]
            out.append("| " + " | ".join(cells) + " |")
        for label, key in (("geomean views", "views"), ("geomean mutations", "mutations")):
            cells = [label, ""]
            for name in names:
                cells += ["", _ratio(res["geomean"][name][key])]
            out.append("| " + " | ".join(cells) + " |")
        split_rows = [c for c in FILE_VIEWS if c in res["commands"]]
        if split_rows:
            out.append("")
            cache = ("memvault keeps no plaintext cache, so both decrypt" if cache_bytes == 0
                     else "memvault: plaintext-cache miss / hit")  # fmt: skip
            out.append(f"file views by whether the note was viewed before in this process ({cache}); "
                       "median µs (samples)")  # fmt: skip
            out.append("")
            header = ["command", "reference first", "reference repeat"]
            for m in modes:
                header += [f"{m} first", f"{m} repeat"]
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
            for command in split_rows:
                row = res["commands"][command]
                cells = [command]
                for name in ["reference", *names]:
                    cells += [_split_cell(row[name], "first"), _split_cell(row[name], "repeat")]
                out.append("| " + " | ".join(cells) + " |")
    if scale:
        out.append("")
        out.append(f"scale: median latency at N = {scale['to']:,} / median latency at N = {scale['from']:,} "
                   "(1.0 = independent of the number of files)")  # fmt: skip
        out.append("")
        keys = ["reference", *names, *(f"{name} (ratio)" for name in names)]
        header = ["command", "reference", *names, *(f"{name} ratio-to-ref" for name in names)]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for command, row in scale["commands"].items():
            out.append("| " + " | ".join([command] + [_ratio(row[key]) for key in keys]) + " |")
        for label, split in scale["split"].items():
            cells = [label] + [_ratio(split.get(key)) for key in keys]
            out.append("| " + " | ".join(cells) + " |")
        out.append("each cell: median over runs of (that run's median at the larger size / at the smaller); "
                   "ratio-to-ref: the same for the memvault/reference ratio (cancels drift the interleaving leaves; "
                   "meaningful where the reference itself is flat in N); first / repeat views: pooled medians, "
                   f"n/a under {MIN_SPLIT_SAMPLES} samples")  # fmt: skip
    out.append("")
    out.append("ratio = median over runs of (memvault median / reference median in that run); lower is better,")
    out.append("< 1 means memvault is faster. µs columns: median over runs of each run's median.")
    out.append("geomean views = view_file, view_range, view_dir, view_root; "
               "geomean mutations = create, str_replace, insert, delete, rename.")  # fmt: skip
    out.append(f"total wall time {total_s:.0f} s")
    return "\n".join(out)


# -- main -----------------------------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    values = [int(v.replace("_", "")) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("expected a comma-separated list of positive integers")
    return sorted(set(values))


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    if not modes or any(m not in ("full", "none") for m in modes):
        raise argparse.ArgumentTypeError("expected a comma-separated subset of: full, none")
    return list(dict.fromkeys(modes))


def _commands(text: str) -> list[str]:
    wanted = [c.strip() for c in text.split(",") if c.strip()]
    groups = {"views": VIEW_COMMANDS, "mutations": MUTATION_COMMANDS, "all": COMMANDS}
    expanded = [c for w in wanted for c in groups.get(w, (w,))]
    unknown = [c for c in expanded if c not in COMMANDS]
    if not expanded or unknown:
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of: {', '.join(COMMANDS)}, views, "
                                         "mutations, all")  # fmt: skip
    return [c for c in COMMANDS if c in expanded]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", type=_int_list, default=None, help="store sizes in notes (default 100,1000,10000)")
    p.add_argument("--ops", type=int, default=None, help="timed ops per command per backend per run (default 40)")
    p.add_argument("--runs", type=int, default=None, help="timed runs per size; medians of runs (default 3)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up ops per command per backend (default 5)")
    p.add_argument("--chunk", type=int, default=3, help="consecutive ops of one backend before switching (default 3)")
    p.add_argument("--durability", type=_modes, default=["full", "none"],
                   help="memvault durability modes to run (default full,none)")  # fmt: skip
    p.add_argument("--commands", type=_commands, default=list(COMMANDS),
                   help="commands to time: names, or views / mutations / all (default all)")  # fmt: skip
    p.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    p.add_argument("--plaintext-cache-bytes", type=int, default=None,
                   help="memvault's decrypted-content cache budget (default: the library's, 8 MiB)")  # fmt: skip
    p.add_argument("--sizes-one-at-a-time", action="store_true",
                   help="time each size in runs of its own (before 2026-11-30 the only way) instead of interleaving "
                        "every size's backends in the same runs")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print JSON on stdout instead of the tables")
    p.add_argument("--quick", action="store_true", help="tiny smoke run: size 50, 1 run, 6 ops, 2 warm-up")
    p.add_argument("--tmpdir", type=Path, default=None, help="where to create the temporary stores")
    args = p.parse_args(argv)
    args.sizes = args.sizes or ([50] if args.quick else [100, 1000, 10000])
    args.ops = args.ops if args.ops is not None else (6 if args.quick else 40)
    args.runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    if args.ops < 1 or args.runs < 1 or args.warmup < 0 or args.chunk < 1:
        p.error("--ops, --runs and --chunk must be >= 1, --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    _progress("importing anthropic and memvault ...")
    import anthropic.tools  # noqa: F401  (import once, outside any timing)

    import memvault.agent.tool  # noqa: F401

    base = Path(tempfile.mkdtemp(prefix="memvault-bench-", dir=args.tmpdir))
    try:
        env = environment(base)
        if args.sizes_one_at_a_time:
            results = [r for n in args.sizes for r in bench_sizes([n], args, base)]
        else:
            results = bench_sizes(args.sizes, args, base)
    except BenchError as err:
        print(f"benchmark failed: {err}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    total = time.perf_counter() - started
    scale = scale_ratios(results)
    if args.json:
        print(json.dumps({"environment": env, "durability": args.durability, "commands": args.commands,
                          "sizes_interleaved": not args.sizes_one_at_a_time, "results": results, "scale": scale,
                          "total_s": round(total, 1)}, indent=2))  # fmt: skip
    else:
        print(render(env, results, args.durability, total, scale, not args.sizes_one_at_a_time,
                     args.plaintext_cache_bytes))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
