"""Stress test: N processes x T threads x M random memory-tool commands on one store.

Every command goes through ``memvault.MemoryTool.call`` with its own session id, so the commit
it produced (if any) can be found in the history. Afterwards the script checks:

1. the history is linear: one parent per commit, ``seq`` falling by one per step down to ``#0``,
   every commit authenticated;
2. every command either committed exactly once (a success of a mutating command: its session
   appears in exactly one commit) or failed with a clear error and committed nothing: a protocol
   error (missing path, no match, ...), ``busy`` (the lock wait timed out, ``LockedError``) or
   ``conflict`` (``ConflictError``); any other error (internal, storage, integrity) fails the run;
3. a serial replay of the committed commands, in commit order, on a fresh store gives the same
   result string for each command and the same final tree (every path, every byte);
4. ``memvault.verify`` finds no error.

It prints the numbers, ``PASS`` or ``FAIL``, and exits 1 on failure. Usage::

    python benchmarks/bench_stress.py --procs 4 --threads 2 --ops 200 --seed 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import memvault
import memvault.paths
from memvault.settings import StoreSettings

DIRS = ["/memories", "/memories/a", "/memories/a/deep"]
NAMES = ["x.md", "y.md"]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
MUTATING = ("create", "str_replace", "insert", "delete", "rename")
WEIGHTS = {"view": 20, "create": 20, "str_replace": 20, "insert": 20, "delete": 10, "rename": 10}

#: Errors that are the protocol's answer to the state a command saw (nothing was written).
PROTOCOL_ERRORS = [
    re.compile(p)
    for p in (
        r"^(Error: )?The path \S+ does not exist\. Please provide a valid path\.$",
        r"^Error: The path \S+ does not exist$",
        r"^Error: File \S+ already exists$",
        r"^Error: The destination \S+ already exists$",
        r"^No replacement was performed, old_str `[a-z]+` did not appear verbatim in \S+\.$",
        r"^No replacement was performed\. Multiple occurrences of old_str `[a-z]+` in lines: [\d, ]+\. "
        r"Please ensure it is unique$",
        r"^Error: Invalid `insert_line` parameter: \d+\. It should be within the range of lines of the file: "
        r"\[0, \d+\]$",
        r"^Error: \S+ is a directory$",
        r"^Error: Cannot create \S+: \S+ is a file, not a directory$",
        r"^Error: Cannot move \S+ into itself \(\S+\)$",
        r"^Error: /memories is a directory; give a file path below it$",
    )
]
BUSY = re.compile(r"^The memory store is locked by another writer \(waited \d+\.\d s\); retry shortly\.$")
CONFLICT = "Error: The memory store changed concurrently; retry the command."


def classify(message: str) -> str:
    if BUSY.match(message):
        return "busy"
    if message == CONFLICT:
        return "conflict"
    if any(p.match(message) for p in PROTOCOL_ERRORS):
        return "protocol"
    return "unexpected"


def random_command(rng: random.Random, tag: str) -> dict[str, Any]:
    kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    file = f"{rng.choice(DIRS)}/{rng.choice(NAMES)}"

    def text() -> str:
        return "".join(f"{rng.choice(WORDS)} {tag}\n" for _ in range(rng.randint(1, 3)))

    if kind == "view":
        return {"command": "view", "path": file if rng.random() < 0.7 else rng.choice(DIRS)}
    if kind == "create":
        return {"command": "create", "path": file, "file_text": text()}
    if kind == "str_replace":
        return {"command": "str_replace", "path": file, "old_str": rng.choice(WORDS), "new_str": rng.choice(WORDS)}
    if kind == "insert":
        return {"command": "insert", "path": file, "insert_line": rng.randint(0, 3), "insert_text": text().rstrip()}
    if kind == "delete":
        return {"command": "delete", "path": file if rng.random() < 0.95 else rng.choice(DIRS[1:])}
    if rng.random() < 0.85:
        return {"command": "rename", "old_path": file, "new_path": f"{rng.choice(DIRS)}/{rng.choice(NAMES)}"}
    return {"command": "rename", "old_path": rng.choice(DIRS[1:]), "new_path": f"/memories/{rng.choice('cde')}"}


SETUP = [
    {"command": "create", "path": f"{d}/{n}", "file_text": f"{WORDS[i % len(WORDS)]} setup\nline two\n"}
    for i, (d, n) in enumerate((d, n) for d in DIRS for n in NAMES)
]


@dataclass
class Config:
    store: str
    key_file: str
    procs: int
    threads: int
    ops: int
    seed: int
    lock_timeout: float
    out_dir: str


def _thread_work(cfg: Config, proc: int, thread: int, shared: memvault.MemoryStore, out: list[dict[str, Any]]) -> None:
    own = None if thread % 2 == 0 else memvault.MemoryStore.open(cfg.store, key_file=cfg.key_file)
    store = shared if own is None else own
    if own is not None:
        own.lock_timeout = cfg.lock_timeout
    rng = random.Random(f"{cfg.seed}-{proc}-{thread}")
    try:
        for i in range(cfg.ops):
            session = f"p{proc}-t{thread}-{i}"
            command = random_command(rng, f"p{proc}t{thread}n{i}")
            tool = memvault.MemoryTool(store, actor=f"p{proc}t{thread}", session=session)
            start, wall = time.perf_counter(), time.time()
            try:
                result = tool.call(command)
                ok = True
            except Exception as err:  # ToolError: the message is what the model would see
                result, ok = str(err), False
            out.append(
                {
                    "session": session,
                    "command": command,
                    "ok": ok,
                    "result": result if isinstance(result, str) else "<blocks>",
                    "seconds": time.perf_counter() - start,
                    "t0": wall,
                    "t1": time.time(),
                }
            )
    finally:
        if own is not None:
            own.close()


def worker(cfg: Config, proc: int, go: Any) -> None:
    store = memvault.MemoryStore.open(cfg.store, key_file=cfg.key_file)
    store.lock_timeout = cfg.lock_timeout
    go.wait()
    results: list[list[dict[str, Any]]] = [[] for _ in range(cfg.threads)]
    threads = [
        threading.Thread(target=_thread_work, args=(cfg, proc, t, store, results[t])) for t in range(cfg.threads)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    Path(cfg.out_dir, f"proc{proc}.json").write_text(json.dumps([r for rs in results for r in rs]))


def tree(store: memvault.MemoryStore) -> dict[str, bytes | None]:
    snap = store.snapshot()
    return {p.text: None if snap.is_dir(p) else snap.read(p) for p in snap.descendants(memvault.paths.MemoryPath(()))}


def history(store: memvault.MemoryStore) -> list[tuple[int, str, str, float]]:
    """``(seq, session, command, time)`` of every commit, oldest first; checks the chain is
    linear (one parent each, seq falling by one per step down to #0)."""
    commit_id, seq = store.head
    out = []
    while True:
        meta = store.commit_meta(commit_id)
        if meta.seq != seq - len(out):
            raise AssertionError(f"history not linear at #{meta.seq}")
        out.append((meta.seq, meta.session, meta.command, meta.time))
        _tree, parents, _msg = store.git.read_commit(commit_id)
        if len(parents) > 1:
            raise AssertionError("a merge commit in the history")
        if not parents:
            break
        commit_id = parents[0]
    if out[-1][0] != 0:
        raise AssertionError("the history does not end at #0")
    return out[::-1]


@dataclass
class Report:
    commands: int = 0
    committed: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    replay_seconds: float = 0.0
    views_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass
class _View:
    record: dict[str, Any]
    lo: int  #: first commit index whose state the view may have seen
    hi: int  #: last one
    matched: bool = False


def _view_windows(records: list[dict[str, Any]], times: list[float]) -> list[_View]:
    """For each view, the commits whose resulting state it may have seen. Commit k takes its
    time under the lock after commit k-1 was published, so a view that started at ``t0`` saw at
    least the state of commit ``(last with time < t0) - 1``, and nothing committed after ``t1``."""
    out = []
    first = len(SETUP)  # the state after the last setup commit (index len(SETUP): init is #0)
    for r in records:
        if r["command"]["command"] != "view":
            continue
        lo = max(first, max((i for i, t in enumerate(times) if t < r["t0"]), default=first) - 1)
        hi = max((i for i, t in enumerate(times) if t <= r["t1"]), default=first)
        out.append(_View(r, lo, max(hi, lo)))
    return out


def _check_views(replay: memvault.MemoryStore, views: list[_View], index: int) -> None:
    """Mark the views whose answer equals the replay's answer in the state after commit ``index``."""
    tool = memvault.MemoryTool(replay, session="check")
    answers: dict[str, str] = {}
    for v in views:
        if v.matched or not v.lo <= index <= v.hi:
            continue
        key = json.dumps(v.record["command"], sort_keys=True)
        if key not in answers:
            try:
                answers[key] = str(tool.call(v.record["command"]))
            except Exception as err:
                answers[key] = str(err)
        v.matched = answers[key] == v.record["result"]


def check(cfg: Config, records: list[dict[str, Any]], report: Report, work: Path) -> None:
    from memvault.verify import verify

    store = memvault.MemoryStore.open(cfg.store, key_file=cfg.key_file)
    commits = history(store)
    by_session: dict[str, int] = {}
    for _seq, session, _command, _time in commits:
        by_session[session] = by_session.get(session, 0) + 1
    dup = [s for s, n in by_session.items() if n > 1]
    if dup:
        report.failures.append(f"sessions committed more than once: {dup[:5]}")
    records_by_session = {r["session"]: r for r in records}
    for r in records:
        name = r["command"]["command"]
        n = by_session.get(r["session"], 0)
        if r["ok"]:
            kind = "ok"
            if name in MUTATING and n != 1:
                report.failures.append(f"{r['session']} {name} succeeded but is in {n} commits")
            if name == "view" and n:
                report.failures.append(f"{r['session']} view made a commit")
        else:
            kind = classify(r["result"])
            if kind == "unexpected":
                report.failures.append(f"{r['session']} {name}: unexpected error {r['result']!r}")
            if n:
                report.failures.append(f"{r['session']} {name} failed ({kind}) but made a commit")
        report.kinds[kind] = report.kinds.get(kind, 0) + 1
    stray = [s for s in by_session if not s.startswith("setup") and s not in records_by_session and s != ""]
    if stray:
        report.failures.append(f"commits by no recorded command: {stray[:5]}")
    report.committed = sum(1 for _seq, s, _c, _t in commits if s in records_by_session)
    views = _view_windows(records, [t for _seq, _s, _c, t in commits])

    # Serial replay of the committed commands, in commit order, on a fresh store.
    start = time.perf_counter()
    replay_dir = work / "replay"
    key = work / "replay.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    replay = memvault.MemoryStore.create(replay_dir, key_file=key, settings=StoreSettings(durability="none"))
    for i, command in enumerate(SETUP):
        memvault.MemoryTool(replay, session=f"setup-{i}").call(command)
    for index, (_seq, session, _command, _time) in enumerate(commits):
        if session.startswith("setup") or session == "":
            if index == len(SETUP):
                _check_views(replay, views, index)
            continue
        r = records_by_session[session]
        try:
            again = memvault.MemoryTool(replay, session=session).call(r["command"])
        except Exception as err:
            report.failures.append(f"replay of {session} failed: {err}")
            continue
        if again != r["result"]:
            report.failures.append(f"replay of {session} answered {again!r}, the original {r['result']!r}")
        _check_views(replay, views, index)
    for v in views:
        if not v.matched:
            report.failures.append(f"{v.record['session']} view showed no state committed while it ran")
    report.views_checked = len(views)
    if tree(replay) != tree(store):
        report.failures.append("the final tree differs from the serial replay")
    report.replay_seconds = time.perf_counter() - start
    verdict = verify(store)
    if not verdict.ok:
        report.failures.append(f"verify: {[p.to_json() for p in verdict.errors]}")
    store.close()
    replay.close()


def run(
    procs: int,
    threads: int,
    ops: int,
    seed: int,
    *,
    lock_timeout: float = 30.0,
    durability: str = "full",
    directory: str | None = None,
    tamper: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Report:
    """Create a store, run the workload, check it; the returned report says whether it passed.

    ``tamper`` may edit the recorded commands before the check (to test the checker itself).
    """
    work = Path(tempfile.mkdtemp(prefix="memvault-stress-", dir=directory))
    try:
        key = work / "store.key"
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
        store_path = work / "store"
        store = memvault.MemoryStore.create(store_path, key_file=key, settings=StoreSettings(durability=durability))
        for i, command in enumerate(SETUP):
            memvault.MemoryTool(store, session=f"setup-{i}").call(command)
        store.close()
        out_dir = work / "out"
        out_dir.mkdir()
        cfg = Config(str(store_path), str(key), procs, threads, ops, seed, lock_timeout, str(out_dir))
        ctx = mp.get_context("fork")
        go = ctx.Event()
        children = [ctx.Process(target=worker, args=(cfg, p, go)) for p in range(procs)]
        for c in children:
            c.start()
        time.sleep(0.2)  # let every worker open the store before the clock starts
        start = time.perf_counter()
        go.set()
        for c in children:
            c.join()
        report = Report(seconds=time.perf_counter() - start)
        records: list[dict[str, Any]] = []
        for p, c in enumerate(children):
            if c.exitcode != 0:
                report.failures.append(f"worker {p} exited with {c.exitcode}")
                continue
            records.extend(json.loads((out_dir / f"proc{p}.json").read_text()))
        if tamper is not None:
            tamper(records)
        report.commands = len(records)
        if report.commands != procs * threads * ops:
            report.failures.append(f"{report.commands} commands recorded, {procs * threads * ops} expected")
        try:
            check(cfg, records, report, work)
        except Exception as err:  # the store no longer opens, or its history is broken
            report.failures.append(f"checking the store raised {type(err).__name__}: {err}")
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=4, help="worker processes (default 4)")
    ap.add_argument("--threads", type=int, default=2, help="threads per process (default 2)")
    ap.add_argument("--ops", type=int, default=200, help="commands per thread (default 200)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random commands (default 1)")
    ap.add_argument("--lock-timeout", type=float, default=30.0, help="seconds a write waits for the lock")
    ap.add_argument("--durability", choices=["full", "none"], default="full")
    ap.add_argument("--tmpdir", default=None, help="where the store is created (deleted at the end)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    report = run(
        args.procs, args.threads, args.ops, args.seed,
        lock_timeout=args.lock_timeout, durability=args.durability, directory=args.tmpdir,
    )  # fmt: skip
    if args.json:
        print(json.dumps({**report.__dict__, "ok": report.ok}, indent=2))
    else:
        print(
            f"{args.procs} processes x {args.threads} threads x {args.ops} commands (seed {args.seed}, "
            f"durability {args.durability}, lock timeout {args.lock_timeout:g} s)"
        )
        print(f"commands: {report.commands} in {report.seconds:.2f} s = {report.commands / report.seconds:.0f}/s")
        print(f"commits:  {report.committed} = {report.committed / report.seconds:.0f}/s")
        print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(report.kinds.items())))
        print(f"views checked against the states committed while they ran: {report.views_checked}")
        print(f"replay + verify: {report.replay_seconds:.2f} s")
        for failure in report.failures[:20]:
            print(f"  FAIL: {failure}")
        print("PASS" if report.ok else "FAIL")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
