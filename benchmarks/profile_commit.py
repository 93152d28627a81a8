#!/usr/bin/env python
"""Where the time of a mutating memory command goes, phase by phase, measured from outside.

Wraps memvault's functions (monkeypatching in this process only; nothing under ``src/`` is
changed) with ``perf_counter_ns`` timers that keep *exclusive* time: when a wrapped function
calls another wrapped function, the inner one's time is charged to the inner phase only.
``os.fsync``/``os.fdatasync`` are phases of their own, labelled with the phase that called them,
and ``os.open`` / ``os.replace`` / ``os.mkdir`` / ``os.utime`` / ``os.chmod`` are counted per op.

For each store size and durability mode, a store is seeded (one transaction, not profiled),
reopened, then ``--ops`` ops of each command run through ``memvault.MemoryTool.call`` (the
SDK's entry point); per-op medians are reported. ``--cprofile`` adds a cProfile listing.

    python benchmarks/profile_commit.py                        # sizes 100,10000; full,none; 40 ops
    python benchmarks/profile_commit.py --sizes 100 --ops 10   # quick
    python benchmarks/profile_commit.py --cprofile 25          # + top 25 functions by tottime
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PASSPHRASE = "memvault-profile-passphrase"
COMMANDS = ("create", "str_replace", "insert", "delete", "rename")
DEFAULT_COMMANDS = ("create", "str_replace", "delete")
NOTE = ("- agent memory note about the customer meeting and the follow-up decision owner\n" * 26)[:2000]

#: (phase label, module attribute path, attribute) wrapped with an exclusive timer.
#: Order does not matter; nesting is handled at run time.
PHASES: list[tuple[str, str, str]] = [
    ("input validation", "memvault.protocol.commands", "_validate_input"),
    ("path validation", "memvault.protocol.commands", "_path"),
    ("scrubber", "memvault.scrub.guard", "scrub_text"),
    ("scrubber", "memvault.scrub.guard", "check_path"),
    ("utf-8 encode + size check", "memvault.protocol.commands", "_encode"),
    ("writer lock", "memvault.store.lock", "StoreLock.hold"),
    ("sync head (ref read, keyring refresh)", "memvault.store.memorystore", "MemoryStore._sync"),
    ("read current content", "memvault.store.state", "StateReader.read_node"),
    ("encryption: content blob", "memvault.format.records", "encode_blob"),
    ("encryption: node record", "memvault.format.records", "seal_node"),
    ("encryption: index shard", "memvault.format.records", "encode_shard"),
    ("encryption: commit meta + tag", "memvault.format.records", "seal_meta"),
    ("encryption: commit meta + tag", "memvault.format.records", "commit_tag"),
    ("encryption: DEK wrap (keyring record)", "memvault.keys.keyring", "Keyring.dek_record"),
    ("object serialisation: blob", "memvault.git.repo", "GitStore.blob"),
    ("object serialisation: trees", "memvault.store.commit", "CommitWriter._apply_tree"),
    ("object serialisation: commit", "memvault.git.repo", "GitStore.commit"),
    ("loose object writes", "memvault.git.repo", "GitStore.write"),
    ("pack writes (files: pack + idx)", "memvault.git.repo", "GitStore.write_pack"),
    ("pack build (pack + idx bytes)", "memvault.git.packdir", "build_pack"),
    ("pack merge in the command (write merged pack)", "memvault.git.packdir", "PackDirectory._write_merged"),
    ("pack merge in the command (plan: list, stat)", "memvault.git.packdir", "PackDirectory._merge_plan"),
    ("pack merge in the command (remove merged packs)", "memvault.git.packdir", "PackDirectory._retire"),
    ("syncfs (objects durable)", "memvault.fsutil", "_syncfs"),
    ("keyring append", "memvault.keys.keyring", "Keyring.append"),
    ("ref update (CAS)", "memvault.git.refs", "Branch.compare_and_swap"),
    ("cache update", "memvault.store.state", "StoreState.add"),
    ("cache update", "memvault.store.state", "StoreState.remove"),
    ("cache update", "memvault.store.state", "StateReader.cache_content"),
    ("commit glue (nodes, shards, ids)", "memvault.store.commit", "CommitWriter.write"),
    ("transact (rest: txn body, glue)", "memvault.store.memorystore", "MemoryStore.transact"),
    ("tool.call (rest: dispatch, formatting)", "memvault.agent.tool", "MemoryTool.call"),
]
#: Phases whose exclusive time is the "rest" of something bigger, listed last.
REST_PHASES = ("transact (rest: txn body, glue)", "tool.call (rest: dispatch, formatting)")


class Profiler:
    """Exclusive-time accounting over a stack of active phases."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []  # [label, start_ns, child_ns]
        self.op_ns: Counter[str] = Counter()
        self.op_counts: Counter[str] = Counter()
        self.active = False

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return fn(*args, **kwargs)
            frame = [label, time.perf_counter_ns(), 0]
            self.stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter_ns() - frame[1]
                self.stack.pop()
                self.op_ns[label] += elapsed - frame[2]
                if self.stack:
                    self.stack[-1][2] += elapsed

        return wrapper

    def wrap_cm(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Time only the entry of a context manager (e.g. acquiring a lock)."""
        profiler = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            cm = fn(*args, **kwargs)

            class Timed:
                def __enter__(self) -> Any:
                    return profiler.wrap(label, cm.__enter__)()

                def __exit__(self, *exc: Any) -> Any:
                    return profiler.wrap(label, cm.__exit__)(*exc)

            return Timed()

        return wrapper

    def count(self, name: str) -> None:
        if self.active:
            self.op_counts[name] += 1

    def parent(self) -> str:
        return self.stack[-1][0] if self.stack else "(outside)"


def _resolve(module_name: str, attr: str) -> tuple[Any, str]:
    module = sys.modules[module_name]
    owner: Any = module
    parts = attr.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    return owner, parts[-1]


def install(profiler: Profiler) -> None:
    import memvault.agent.tool  # noqa: F401
    import memvault.format.records  # noqa: F401
    import memvault.fsutil  # noqa: F401
    import memvault.git.packdir  # noqa: F401
    import memvault.git.refs  # noqa: F401
    import memvault.git.repo  # noqa: F401
    import memvault.keys.keyring  # noqa: F401
    import memvault.protocol.commands  # noqa: F401
    import memvault.scrub.guard  # noqa: F401
    import memvault.store.commit  # noqa: F401
    import memvault.store.memorystore  # noqa: F401
    import memvault.store.state  # noqa: F401

    for label, module_name, attr in PHASES:
        try:
            owner, name = _resolve(module_name, attr)
            if name not in (owner.__dict__ if isinstance(owner, type) else vars(owner)):
                raise AttributeError(name)
        except AttributeError:
            # Not in this version of memvault (e.g. a step an optimisation removed): the phase
            # stays empty, so one script profiles the code before and after such a change.
            continue
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        is_static = isinstance(original, staticmethod)
        fn = original.__func__ if is_static else original
        wrapped = profiler.wrap_cm(label, fn) if attr == "StoreLock.hold" else profiler.wrap(label, fn)
        setattr(owner, name, staticmethod(wrapped) if is_static else wrapped)
    # records.* functions are called as ``records.encode_blob(...)`` from store/commit.py (module
    # attribute lookup), so patching the module attribute is enough. keyring.dek_record etc. are
    # methods. GitStore.blob/commit are static methods called as ``GitStore.blob``.

    # syscalls: fsync is a timed phase labelled by its caller; the rest are counted.
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: Any) -> None:
        profiler.count(f"fsync in {profiler.parent()}")
        profiler.count("fsync (all)")
        profiler.wrap(f"fsync in {profiler.parent()}", real_fsync)(fd)

    def fdatasync(fd: Any) -> None:
        profiler.count(f"fdatasync in {profiler.parent()}")
        profiler.count("fsync (all)")
        profiler.wrap(f"fdatasync in {profiler.parent()}", real_fdatasync)(fd)

    os.fsync, os.fdatasync = fsync, fdatasync  # type: ignore[assignment]

    real_open = os.open

    def counting_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        profiler.count("os.open")
        if flags & os.O_CREAT:
            try:
                existed = os.path.lexists(path)
            except (TypeError, ValueError):
                existed = True
            if not existed:
                profiler.count("files created (os.open O_CREAT, new)")
        return real_open(path, flags, *args, **kwargs)

    os.open = counting_open  # type: ignore[assignment]

    def counter(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(real)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            profiler.count(name)
            return real(*args, **kwargs)

        return wrapper

    for name in ("replace", "rename", "mkdir", "utime", "chmod", "unlink", "ftruncate"):
        setattr(os, name, counter(f"os.{name}", getattr(os, name)))


#: Ops per command (warm-up + profiled) of one profiling pass; set by main(). Delete victims and
#: rename sources are disjoint index ranges of /memories/work/del/ sized from it.
PASS_OPS = 43


def victims() -> int:
    """Files seeded in /memories/work/del/: delete and rename, profiled pass and cProfile pass."""
    return 4 * PASS_OPS


def make_store(root: Path, n: int, durability: str) -> Any:
    import memvault
    from memvault.paths import parse_path

    settings = memvault.StoreSettings(durability=durability, max_files=n + 10_000)  # type: ignore[arg-type]
    kdf = memvault.KdfParams(memory_kib=8, iterations=1, lanes=1)
    store = memvault.MemoryStore.create(root, passphrase=PASSPHRASE, kdf=kdf, settings=settings)

    def seed(txn: Any) -> None:
        for i in range(n):
            txn.write_file(parse_path(f"/memories/notes/d{i // 50:03d}/note_{i:05d}.md", settings), NOTE.encode())
        for j in range(16):
            text = f"# Edit target {j}\n@@marker-{j}-v0@@\n" + NOTE * 5
            txn.write_file(parse_path(f"/memories/work/edit/e_{j:02d}.md", settings), text.encode())
        for k in range(victims()):
            txn.write_file(parse_path(f"/memories/work/del/v_{k:04d}.md", settings), NOTE.encode())
        txn.make_dirs(parse_path("/memories/work/new", settings))

    store.transact(seed, command="seed", paths=("/memories",), actor="profile", session="seed")
    store.close()
    # Write the seeded data back now (a `none` store leaves it unsynced), not during the profile.
    os.sync()
    return memvault.MemoryStore.open(root, passphrase=PASSPHRASE)


def op_input(command: str, k: int) -> dict[str, Any]:
    if command == "create":
        return {"command": "create", "path": f"/memories/work/new/c_{k:04d}.md", "file_text": NOTE}
    if command == "str_replace":
        j, v = k % 16, k // 16
        return {"command": "str_replace", "path": f"/memories/work/edit/e_{j:02d}.md",
                "old_str": f"@@marker-{j}-v{v}@@", "new_str": f"@@marker-{j}-v{v + 1}@@"}  # fmt: skip
    if command == "insert":
        return {"command": "insert", "path": f"/memories/work/edit/e_{k % 16:02d}.md", "insert_line": 3,
                "insert_text": f"- inserted {k}\n"}  # fmt: skip
    if command == "delete":
        return {"command": "delete", "path": f"/memories/work/del/v_{k:04d}.md"}
    if command == "rename":
        return {"command": "rename", "old_path": f"/memories/work/del/v_{k + 2 * PASS_OPS:04d}.md",
                "new_path": f"/memories/work/del/r_{k:04d}.md"}  # fmt: skip
    raise ValueError(command)


def profile_store(
    profiler: Profiler, tool: Any, commands: Sequence[str], ops: int, warmup: int
) -> dict[str, dict[str, Any]]:
    """Per command: per-phase median µs per op, per-op median total, median syscall counts."""
    out: dict[str, dict[str, Any]] = {}
    counters = dict.fromkeys(commands, 0)
    per_cmd_phase: dict[str, dict[str, list[int]]] = {c: defaultdict(list) for c in commands}
    per_cmd_counts: dict[str, dict[str, list[int]]] = {c: defaultdict(list) for c in commands}
    per_cmd_total: dict[str, list[int]] = {c: [] for c in commands}
    rounds = random.Random(f"profile/{len(commands)}/{ops}")
    for i in range(warmup + ops):
        # Interleave the commands, in a shuffled order each round: in a fixed order, a merge every
        # MERGE_AT commits would land on the same command every time.
        order = list(commands)
        rounds.shuffle(order)
        for command in order:
            k = counters[command]
            counters[command] += 1
            profiler.op_ns.clear()
            profiler.op_counts.clear()
            profiler.active = i >= warmup
            t0 = time.perf_counter_ns()
            result = tool.call(op_input(command, k))
            total = time.perf_counter_ns() - t0
            profiler.active = False
            if not isinstance(result, str) or result.startswith("Error"):
                raise RuntimeError(f"{command} #{k}: {result!r:.200}")
            if i < warmup:
                continue
            per_cmd_total[command].append(total)
            # Every phase gets a sample each op (0 when it did not run), so medians line up.
            for label in {p[0] for p in PHASES} | set(profiler.op_ns) | set(per_cmd_phase[command]):
                per_cmd_phase[command][label].append(profiler.op_ns.get(label, 0))
            for name in set(profiler.op_counts) | set(per_cmd_counts[command]):
                per_cmd_counts[command][name].append(profiler.op_counts.get(name, 0))
    for command in commands:
        n = len(per_cmd_total[command])
        phases = {}
        for label, values in per_cmd_phase[command].items():
            values = values + [0] * (n - len(values))
            phases[label] = {"median_us": statistics.median(values) / 1000, "mean_us": statistics.fmean(values) / 1000}
        counts = {}
        for name, values in per_cmd_counts[command].items():
            values = values + [0] * (n - len(values))
            counts[name] = statistics.median(values)
        out[command] = {
            "total_median_us": statistics.median(per_cmd_total[command]) / 1000,
            "total_mean_us": statistics.fmean(per_cmd_total[command]) / 1000,
            "phases": phases,
            "counts": counts,
            "n": n,
        }
    return out


def render(results: list[dict[str, Any]], cprofile_text: str) -> str:
    out: list[str] = []
    out.append("memvault mutating commands: exclusive time per phase (perf_counter_ns wrappers), per op")
    out.append(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    out.append(f"date:    {time.strftime('%Y-%m-%dT%H:%M:%S%z')}")
    out.append("phase µs = mean of the per-op exclusive time (means add up to the mean total; medians of the")
    out.append("parts would not); 'total' also shows the median. Counts are medians per op.")
    for res in results:
        for command, data in res["commands"].items():
            out.append("")
            totals = f"total median {data['total_median_us']:,.0f} µs, mean {data['total_mean_us']:,.0f} µs"
            out.append(f"N = {res['n']:,} notes (+{res['extra']} work files), durability {res['durability']}, "
                       f"{command}: {data['n']} ops, {totals}")  # fmt: skip
            out.append("")
            out.append("| phase | mean µs | share |")
            out.append("|---|---:|---:|")
            phases = data["phases"]
            total = data["total_mean_us"] or 1.0
            order = sorted((p for p in phases if p not in REST_PHASES), key=lambda p: -phases[p]["mean_us"])
            for label in [*order, *REST_PHASES]:
                if label not in phases or phases[label]["mean_us"] < 0.05:
                    continue
                out.append(f"| {label} | {phases[label]['mean_us']:,.1f} | {phases[label]['mean_us'] / total:.0%} |")
            counts = data["counts"]
            interesting = ["fsync (all)", "files created (os.open O_CREAT, new)", "os.open", "os.replace",
                           "os.mkdir", "os.chmod", "os.utime", "os.unlink", "os.ftruncate"]  # fmt: skip
            per = ", ".join(f"{name} {counts[name]:g}" for name in interesting if name in counts)
            out.append(f"syscalls per op: {per}")
            fs = ", ".join(f"{name[len('fsync in ') if name.startswith('fsync in ') else 0:]}: {counts[name]:g}"
                           for name in sorted(counts) if name.startswith(("fsync in", "fdatasync in")))  # fmt: skip
            if fs:
                out.append(f"fsync/fdatasync by caller: {fs}")
    if cprofile_text:
        out.append("")
        out.append(cprofile_text)
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", default="100,10000", help="store sizes (default 100,10000)")
    p.add_argument("--durability", default="full,none", help="modes (default full,none)")
    p.add_argument("--commands", default=",".join(DEFAULT_COMMANDS),
                   help=f"commands (default {','.join(DEFAULT_COMMANDS)}; also: insert, rename)")  # fmt: skip
    p.add_argument("--ops", type=int, default=40, help="profiled ops per command (default 40)")
    p.add_argument("--warmup", type=int, default=3, help="unprofiled ops per command first (default 3)")
    p.add_argument("--cprofile", type=int, default=0, metavar="K",
                   help="also cProfile the largest size, first mode; show the top K functions by tottime")  # fmt: skip
    p.add_argument("--tmpdir", type=Path, default=None)
    args = p.parse_args(argv)
    sizes = [int(v) for v in args.sizes.split(",")]
    modes = [m for m in args.durability.split(",") if m]
    commands = [c for c in args.commands.split(",") if c]
    if any(c not in COMMANDS for c in commands) or args.ops < 1 or args.warmup < 0:
        p.error("unknown command, --ops < 1 or --warmup < 0")
    global PASS_OPS
    PASS_OPS = args.ops + args.warmup

    import memvault

    profiler = Profiler()
    install(profiler)
    base = Path(tempfile.mkdtemp(prefix="memvault-profile-", dir=args.tmpdir))
    results = []
    cprofile_text = ""
    try:
        for n in sizes:
            for mode in modes:
                print(f"[profile] N={n} durability={mode}: seeding ...", file=sys.stderr, flush=True)
                t0 = time.perf_counter()
                store = make_store(base / f"s{n}-{mode}", n, mode)
                print(f"[profile]   seeded + reopened in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                tool = memvault.MemoryTool(store, actor="profile", session="profile")
                try:
                    per_command = profile_store(profiler, tool, commands, args.ops, args.warmup)
                    results.append({"n": n, "durability": mode, "commands": per_command, "extra": 16 + victims()})
                    if args.cprofile and n == sizes[-1] and mode == modes[0]:
                        prof = cProfile.Profile()
                        # Fresh inputs that the profiled phase did not use (at most 400 ops there).
                        offset = dict.fromkeys(COMMANDS, PASS_OPS)
                        prof.enable()
                        for i in range(args.ops):
                            for command in commands:
                                tool.call(op_input(command, offset[command] + i))
                        prof.disable()
                        buf = io.StringIO()
                        stats = pstats.Stats(prof, stream=buf)
                        stats.sort_stats("tottime").print_stats(args.cprofile)
                        text = buf.getvalue()
                        text = text[text.find("   ncalls") :] if "   ncalls" in text else text
                        cprofile_text = (f"cProfile, N = {n:,}, durability {mode}, {args.ops} ops each of "
                                         f"{', '.join(commands)} (top {args.cprofile} by tottime; "
                                         f"includes the profiler's overhead):\n{text}")  # fmt: skip
                        # Opening the store (what every new process pays before its first command).
                        prof = cProfile.Profile()
                        t_open = time.perf_counter()
                        prof.enable()
                        memvault.MemoryStore.open(base / f"s{n}-{mode}", passphrase=PASSPHRASE).close()
                        prof.disable()
                        t_open = time.perf_counter() - t_open
                        buf = io.StringIO()
                        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(args.cprofile)
                        text = buf.getvalue()
                        text = text[text.find("   ncalls") :] if "   ncalls" in text else text
                        cprofile_text += (f"\ncProfile of MemoryStore.open at N = {n:,} (cheap KDF; {t_open:.2f} s "
                                          f"under the profiler; top {args.cprofile} by tottime):\n{text}")  # fmt: skip
                finally:
                    store.close()
                shutil.rmtree(base / f"s{n}-{mode}", ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(render(results, cprofile_text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
