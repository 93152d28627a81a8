#!/usr/bin/env python
"""memvault on S3 (moto on loopback, behind a proxy that injects round-trip time) against local memvault
and the SDK's plain-file memory tool: requests, sequential round trips and latency per command, then
the commit throughput of several writer processes sharing one store.

Part 1 (one process, interleaved as in ``bench_tool.py``, whose workload and backends it reuses):
the SDK's ``BetaLocalFilesystemMemoryTool``, memvault on a local directory and memvault on S3 once
per injected round-trip time (each S3 store behind its own ``FaultProxy`` with ``latency`` = RTT)
take turns running the same commands. Per command it prints the HTTP requests (deltas of
``S3Objects.requests``), the sequential round trips (counted from the timestamps the proxy records,
and estimated as (latency at the largest RTT - latency at RTT 0) / RTT), the median latencies and
their ratios to local memvault and to the SDK tool, and checks the targets: a mutation on an
up-to-date replica in at most 3 sequential round trips, a view of an unchanged head in at most 1.

Part 2: 1, 2, 4, 8 writer processes (each its own replica directory, like separate hosts) commit
to one store through one proxy (``--writer-rtt``) for ``--duration`` seconds: commits/s, races
lost per commit, retried requests; then the store's commits are checked against the acknowledged
commands.

Run ``python benchmarks/bench_s3.py --help``; see ``benchmarks/README.md``. Needs boto3 and
moto[server] (``pip install -e '.[test]'``); makes no request beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import gc
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # s3support (imported where needed: it imports pytest)

import bench_tool  # noqa: E402
from bench_tool import Backend, Workload  # noqa: E402

#: The commands of part 1 by default (bench_tool's names).
DEFAULT_COMMANDS = ("view_file", "view_dir", "create", "str_replace", "insert", "delete", "rename")
#: Target: sequential round trips of a mutation on an up-to-date replica / a view of an unchanged head.
TARGET_MUTATION_RT = 3
TARGET_VIEW_RT = 1
#: Statuses after which memvault sends the request again (docs/format.md §12.1).
RETRY_STATUSES = {409, 429, 500, 502, 503, 504}
#: Commits a store has before the writers start: #0 (init) and the shared file's create.
BASE_COMMITS = 2


# -- the proxy ------------------------------------------------------------------------------------


def _operation(method: str, path: str) -> str:
    """S3 operation of a request as the proxy saw it."""
    if method == "GET":
        return "ListObjectsV2" if "list-type=2" in path else "GetObject"
    return {"PUT": "PutObject", "DELETE": "DeleteObject", "HEAD": "HeadObject"}.get(method, method)


def timed_proxy(upstream: str, latency: float) -> Any:
    """A ``s3support.FaultProxy`` in front of ``upstream`` that injects ``latency`` seconds into every
    request and records ``(start, end, operation)`` of each in ``spans`` (perf_counter seconds)."""
    import s3support

    class TimedProxy(s3support.FaultProxy):  # type: ignore[misc]
        spans: list[tuple[float, float, str]]
        #: ``(predicate(method, path), action())``: the first request matching runs the action
        #: before it is forwarded (then the hook is gone).
        hook: tuple[Callable[[str, str], bool], Callable[[], None]] | None
        hook_lock: threading.Lock

        def serve(self, handler: Any) -> None:
            t0 = time.perf_counter()
            with self.hook_lock:
                hook = self.hook
                if hook is not None and hook[0](handler.command, handler.path):
                    self.hook = None
                else:
                    hook = None
            if hook is not None:
                hook[1]()
            try:
                super().serve(handler)
            finally:
                self.spans.append((t0, time.perf_counter(), _operation(handler.command, handler.path)))

    proxy = TimedProxy(upstream)
    proxy.spans = []
    proxy.hook = None
    proxy.hook_lock = threading.Lock()
    proxy.latency = latency
    return proxy


def sequential_round_trips(spans: Sequence[tuple[float, float]], tolerance: float) -> int:
    """The longest chain of requests each sent after the previous one's answer: the command's
    sequential round trips. Requests overlapping by less than ``tolerance`` (the proxy notes a
    span's end a moment after the answer left) count as sequential. Greedy by earliest end."""
    count, last_end = 0, float("-inf")
    for start, end in sorted(spans, key=lambda s: s[1]):
        if start >= last_end - tolerance:
            count += 1
            last_end = end
    return count


# -- part 1: per-command latency --------------------------------------------------------------------


@dataclass
class Metered:
    """A memvault-on-S3 backend: its store, proxy, RTT and, per call, what it cost."""

    backend: Backend
    store: Any
    proxy: Any
    rtt: float
    timed: bool = False
    #: label -> [(t0, t1, requests by operation, timed)]
    calls: dict[str, list[tuple[float, float, collections.Counter[str], bool]]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )


def _label(data: dict[str, Any]) -> str:
    """bench_tool's command name of a tool input."""
    if data["command"] != "view":
        return str(data["command"])
    if "view_range" in data:
        return "view_range"
    if data["path"] == "/memories":
        return "view_root"
    return "view_file" if data["path"].endswith(".md") else "view_dir"


def meter(backend: Backend, rtt: float, proxy: Any) -> Metered:
    """Wrap ``backend.call`` to record each call's window and its requests (``S3Objects.requests``)."""
    tool = backend.call.__self__  # type: ignore[attr-defined]  # the memvault.MemoryTool
    store = tool.store
    objects = store.remote.objects
    metered = Metered(backend, store, proxy, rtt)
    inner = backend.call

    def call(data: dict[str, Any]) -> object:
        before = collections.Counter(objects.requests)
        t0 = time.perf_counter()
        try:
            return inner(data)
        finally:
            t1 = time.perf_counter()
            delta = collections.Counter(objects.requests)
            delta.subtract(before)
            metered.calls[_label(data)].append((t0, t1, +delta, metered.timed))

    backend.call = call
    return metered


@contextmanager
def s3_environment(moto_url: str) -> Iterator[Any]:
    """A fresh bucket on the moto server and the AWS environment pointing at it (undone on exit)."""
    import pytest

    import s3support

    with pytest.MonkeyPatch.context() as mp:
        env = s3support.make_s3_env(moto_url, mp)
        yield env, mp


def calibrate(moto_url: str, proxy: Any, bucket: str, n: int) -> dict[str, dict[str, float]]:
    """Median ms per request of a boto3 client straight to moto and through ``proxy`` (RTT 0):
    moto's own service time (plus the client's), and what the proxy hop adds."""
    import s3support

    out: dict[str, dict[str, float]] = {}
    body = os.urandom(2048)
    for where, endpoint in (("moto", moto_url), ("proxy at RTT 0", proxy.url)):
        client = s3support.s3_client(endpoint)
        prefix = f"calibrate-{where.split()[0]}"
        for i in range(30):
            client.put_object(Bucket=bucket, Key=f"{prefix}/log/{i:020d}", Body=body[:200])
        calls = {
            "ListObjectsV2": lambda c=client, p=prefix: c.list_objects_v2(
                Bucket=bucket, Prefix=f"{p}/log/", StartAfter=f"{p}/log/{28:020d}"
            ),
            "GetObject": lambda c=client, p=prefix: c.get_object(Bucket=bucket, Key=f"{p}/log/{1:020d}")["Body"].read(),
            "PutObject": lambda c=client, p=prefix: c.put_object(
                Bucket=bucket, Key=f"{p}/x/{time.perf_counter_ns()}", Body=body, IfNoneMatch="*"
            ),
        }
        row: dict[str, float] = {}
        for name, fn in calls.items():
            fn()
            samples = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
            row[name] = statistics.median(samples) * 1000
        out[where] = row
    return out


def bench_latency(args: argparse.Namespace, base: Path, moto_url: str) -> dict[str, Any]:
    workload = Workload(n=args.size, per_command=args.warmup + args.ops * args.runs, seed=args.seed)
    backends: list[Backend] = []
    metered: list[Metered] = []
    proxies: list[Any] = []
    calibration: dict[str, Any] = {}
    catch_up: dict[str, Any] = {}
    os.environ["MEMVAULT_CACHE_DIR"] = str(base / "replicas")
    try:
        with s3_environment(moto_url) as (env, mp):
            _progress(f"N={args.size}: seeding reference ...")
            backends.append(bench_tool.make_reference(base / "reference", workload))
            _progress(f"N={args.size}: seeding local memvault durability={args.durability} ...")
            local = bench_tool.make_memvault(base / "local", workload, args.durability)
            local.name = f"local-{args.durability}"
            backends.append(local)
            for rtt in args.rtts:
                proxy = timed_proxy(moto_url, rtt / 1000)
                proxies.append(proxy)
                mp.setenv("AWS_ENDPOINT_URL", proxy.url)  # read when the store's S3 client is made
                _progress(f"N={args.size}: seeding memvault on S3 through the proxy at RTT {rtt:g} ms ...")
                bucket = f"{env.bucket}-rtt{rtt:g}".replace(".", "-")  # a bucket each: moto lists a whole bucket
                env.client.create_bucket(Bucket=bucket)
                url = f"s3://{bucket}/latency"
                backend = bench_tool.make_memvault(url, workload, args.durability)  # type: ignore[arg-type]
                backend.name = f"s3@{rtt:g}ms"
                backends.append(backend)
                metered.append(meter(backend, rtt / 1000, proxy))
            _progress("measuring moto's own time per request ...")
            calibration = calibrate(moto_url, proxies[0], env.bucket, 10 if args.quick else 30)
            os.sync()
            rng = random.Random(f"schedule/s3/{args.seed}")
            gc.collect()
            _progress(f"warm-up ({args.warmup} ops per command per backend) ...")
            bench_tool.run_phase(backends, args.commands, args.warmup, args.chunk, rng, run=None)
            run_times: list[float] = []
            for m in metered:
                m.timed = True
                m.proxy.spans.clear()
            for run in range(args.runs):
                gc.collect()
                _progress(f"run {run + 1}/{args.runs}: {args.ops} ops per command per backend, interleaved ...")
                t0 = time.perf_counter()
                bench_tool.run_phase(backends, args.commands, args.ops, args.chunk, rng, run=run)
                run_times.append(time.perf_counter() - t0)
            for m in metered:
                m.timed = False
            parity = bench_tool.check_parity(backends)
            stats = {m.backend.name: dict(m.store.remote.stats) for m in metered}
            top = max(metered, key=lambda m: m.rtt)
            if top.rtt > 0:
                _progress(f"catching up on another host's commits, and losing a race, at RTT {top.rtt * 1000:g} ms ...")
                mp.setenv("AWS_ENDPOINT_URL", moto_url)  # the other host goes straight to moto, outside the spans
                catch_up = bench_catch_up(top, base / "other-host", args, workload)
    finally:
        for backend in backends:
            backend.close()
        for proxy in proxies:
            proxy.stop()
    result = bench_tool._size_result(args.size, workload, backends, args, run_times, parity)
    return {
        "result": result,
        "per_command": _per_command(args, result, backends, metered),
        "service_ms": _service_times(metered[0]),
        "calibration_ms": calibration,
        "replica_stats": stats,
        "catch_up": catch_up,
    }


def bench_catch_up(m: Metered, cache: Path, args: argparse.Namespace, workload: Workload) -> dict[str, Any]:
    """Requests and sequential round trips of commands on a replica that is not up to date: after
    another host (straight to moto, so not in the spans) committed once; and a create whose log
    record another host takes first (it commits while the first upload is in flight)."""
    import memvault
    from memvault.protocol.commands import run_command

    url = f"s3://{m.store.remote.objects.bucket}/{m.store.remote.objects.prefix}"
    other = memvault.MemoryStore.open(url, passphrase=bench_tool.PASSPHRASE, cache_dir=cache)
    tool = memvault.MemoryTool(m.store, actor="bench", session="catch-up")
    objects, remote = m.store.remote.objects, m.store.remote
    counter = iter(range(10**6))

    def other_commits() -> None:
        k = next(counter)
        run_command(other, {"command": "create", "path": f"/memories/other/o{k}.md", "file_text": f"other {k}\n"},
                    actor="other", session=f"other-{k}")  # fmt: skip

    def lose_race() -> None:
        m.proxy.hook = (lambda method, path: method == "PUT" and "/packs/" in path, other_commits)

    scenarios: list[tuple[str, Callable[[], None], Callable[[int], dict[str, Any]]]] = [
        ("view_file, 1 new commit of another host", other_commits,
         lambda k: {"command": "view", "path": workload.note_path(k % workload.n)}),
        ("create, 1 new commit of another host", other_commits,
         lambda k: {"command": "create", "path": f"/memories/catchup/a{k}.md", "file_text": "catch up\n"}),
        ("create, losing the race for its log record", lose_race,
         lambda k: {"command": "create", "path": f"/memories/catchup/b{k}.md", "file_text": "lost once\n"}),
    ]  # fmt: skip
    repeats = 2 if args.quick else 6
    out: dict[str, Any] = {}
    try:
        for name, before, command in scenarios:
            counts, latencies, races, requests = [], [], [], collections.Counter()
            for k in range(repeats):
                before()
                time.sleep(m.rtt)  # the other host's requests are done; nothing of them is in the spans
                req0, races0 = collections.Counter(objects.requests), remote.stats["races_lost"]
                t0 = time.perf_counter()
                result = tool.call(command(k))
                t1 = time.perf_counter()
                if not isinstance(result, str) or result.startswith("Error"):
                    raise BenchError(f"catch-up {name}: {result!r:.200}")
                time.sleep(0.05)  # let the proxy note the last span
                timed = [(s, e, op) for s, e, op in list(m.proxy.spans) if t0 <= s <= t1]
                counts.append(sequential_round_trips([(s, e) for s, e, _ in timed], m.rtt / 2))
                last = [(round((s - t0) * 1000, 1), round((e - t0) * 1000, 1), op) for s, e, op in timed]
                latencies.append((t1 - t0) * 1000)
                races.append(remote.stats["races_lost"] - races0)
                delta = collections.Counter(objects.requests)
                delta.subtract(req0)
                requests.update(+delta)
            out[name] = {
                "round_trips": {"median": statistics.median(counts), "max": max(counts), "min": min(counts)},
                "latency_ms": statistics.median(latencies),
                "races_lost": sum(races),
                "requests_per_command": {op: v / repeats for op, v in sorted(requests.items())},
                "n": repeats,
                "last_call_spans_ms": last,
            }
    finally:
        m.proxy.hook = None
        other.close()
    return out


def _service_times(m: Metered) -> dict[str, float]:
    """Median span at the proxy minus injected latency, by operation (moto + the proxy hop)."""
    by_op: dict[str, list[float]] = collections.defaultdict(list)
    for start, end, op in m.proxy.spans:
        by_op[op].append((end - start - m.rtt) * 1000)
    return {op: statistics.median(v) for op, v in sorted(by_op.items())}


def _median_ratio(mine: list[float], theirs: list[float]) -> float:
    """Median over runs of the per-run ratio of medians."""
    return statistics.median(a / b for a, b in zip(mine, theirs, strict=True))


def _per_command(args: argparse.Namespace, result: dict[str, Any], backends: list[Backend],
                 metered: list[Metered]) -> dict[str, Any]:  # fmt: skip
    local_name = backends[1].name
    top = max(metered, key=lambda m: m.rtt)
    zero = next(m for m in metered if m.rtt == 0)
    out: dict[str, Any] = {}
    for command in args.commands:
        row = result["commands"][command]
        cell: dict[str, Any] = {"latency_us": {b.name: row[b.name]["median_us"] for b in backends}}
        cell["ratio_to_local"] = {
            m.backend.name: _median_ratio(row[m.backend.name]["run_medians_us"], row[local_name]["run_medians_us"])
            for m in metered
        }
        cell["ratio_to_sdk"] = {m.backend.name: row[m.backend.name]["ratio"] for m in metered}
        # Requests per command: every timed call of every S3 backend (the RTT changes none of them).
        requests: dict[str, list[int]] = collections.defaultdict(list)
        timed_calls = [c for m in metered for c in m.calls[command] if c[3]]
        for _t0, _t1, delta, _ in timed_calls:
            for op in set(delta) | set(requests):
                requests[op].append(delta.get(op, 0))
        cell["requests"] = {op: {"min": min(v), "max": max(v), "median": statistics.median(v)}
                            for op, v in sorted(requests.items())}  # fmt: skip
        # Sequential round trips, from the proxy's timestamps at the largest RTT.
        if top.rtt > 0:
            spans = sorted(top.proxy.spans)
            starts = [s[0] for s in spans]
            counts = []
            worst: list[tuple[float, float, str]] = []
            for t0, t1, _delta, timed in top.calls[command]:
                if not timed:
                    continue
                lo, hi = bisect.bisect_left(starts, t0), bisect.bisect_right(starts, t1)
                counts.append(sequential_round_trips([(s, e) for s, e, _ in spans[lo:hi]], top.rtt / 2))
                if counts[-1] == max(counts):  # the requests of the slowest-chained call, ms from its start
                    worst = [(round((s - t0) * 1000, 1), round((e - t0) * 1000, 1), op) for s, e, op in spans[lo:hi]]
            cell["round_trips"] = {"rtt_ms": top.rtt * 1000, "median": statistics.median(counts), "max": max(counts),
                                   "min": min(counts), "n": len(counts), "worst_call_spans_ms": worst}  # fmt: skip
            slope = (row[top.backend.name]["median_us"] - row[zero.backend.name]["median_us"]) / 1e6 / top.rtt
            cell["round_trips_slope"] = slope
            target = TARGET_VIEW_RT if command.startswith("view") else TARGET_MUTATION_RT
            cell["target"] = target
            # The median: a call whose concurrent uploads the host's scheduler staggered by more than
            # RTT/2 looks one round trip longer (its spans are printed below the table).
            cell["pass"] = statistics.median(counts) <= target
        out[command] = cell
    return out


# -- part 2: concurrent writers ----------------------------------------------------------------------


def worker(spec: dict[str, Any]) -> int:
    """One writer process ("host"): open the store with its own replica, wait for the start signal,
    then alternate creating a file of its own and inserting a line into the shared file until the
    deadline (or ``ops`` commands); print one JSON line with what it did."""
    import memvault
    from memvault.errors import MemvaultError, StorageError
    from memvault.protocol.commands import run_command

    store = memvault.MemoryStore.open(spec["url"], passphrase=bench_tool.PASSPHRASE, cache_dir=spec["cache"])
    w = spec["worker"]
    Path(spec["ready"]).touch()
    go = Path(spec["go"])
    while not go.exists():
        time.sleep(0.002)
    requests0 = collections.Counter(store.remote.objects.requests)
    stats0 = collections.Counter(store.remote.stats)
    cpu0 = time.process_time()
    start = time.time()
    deadline = start + spec["duration"]
    acked: list[str] = []
    failed: collections.Counter[str] = collections.Counter()
    unknown: list[str] = []
    latencies: list[float] = []
    races: list[int] = []  #: races lost by each command before its commit stood
    k = 0
    while time.time() < deadline and (not spec["ops"] or k < spec["ops"]):
        if k % 2 == 0:
            command = {"command": "create", "path": f"/memories/w{w}/note{k}.md", "file_text": f"w{w} note {k}\n"}
        else:
            command = {"command": "insert", "path": "/memories/shared.md", "insert_line": 0, "insert_text": f"w{w} {k}"}
        session = f"w{w}-{k}"
        lost = store.remote.stats["races_lost"]
        t0 = time.perf_counter()
        try:
            run_command(store, command, actor=f"w{w}", session=session)
            acked.append(session)
        except MemvaultError as err:
            failed[type(err).__name__] += 1
            if isinstance(err, StorageError) and err.outcome_unknown:
                unknown.append(session)
        latencies.append(time.perf_counter() - t0)
        races.append(store.remote.stats["races_lost"] - lost)
        k += 1
        if spec["think"]:
            time.sleep(spec["think"])
    end = time.time()
    cpu = time.process_time() - cpu0
    requests = collections.Counter(store.remote.objects.requests)
    requests.subtract(requests0)
    stats = collections.Counter(store.remote.stats)
    stats.subtract(stats0)
    store.close()
    print(json.dumps({"worker": w, "start": start, "end": end, "acked": acked, "failed": dict(failed),
                      "unknown": unknown, "latencies": latencies, "races": races, "requests": dict(+requests),
                      "stats": dict(+stats), "cpu_s": cpu}))  # fmt: skip
    return 0


def _history_sessions(url: str, cache: Path) -> tuple[list[int], list[str]]:
    """``(seqs, sessions)`` of every commit from the head down to #0, newest first (through a
    writer's replica, so the open pulls little)."""
    import memvault

    store = memvault.MemoryStore.open(url, passphrase=bench_tool.PASSPHRASE, cache_dir=cache)
    try:
        commit_id, _seq = store.head
        seqs, sessions = [], []
        current: bytes | None = commit_id
        while current is not None:
            meta, _tree, parent = store.commit(current)
            seqs.append(meta.seq)
            sessions.append(meta.session)
            current = parent
        return seqs, sessions
    finally:
        store.close()


def bench_writers(args: argparse.Namespace, base: Path, moto_url: str) -> list[dict[str, Any]]:
    results = []
    proxy = timed_proxy(moto_url, args.writer_rtt / 1000)
    try:
        for n in args.writers:
            with s3_environment(moto_url) as (env, mp):  # a bucket each: moto lists a whole bucket
                results.append(_writers_level(n, args, base / f"writers-{n}", env, mp, moto_url, proxy))
    finally:
        proxy.stop()
    return results


def _writers_level(n: int, args: argparse.Namespace, root: Path, env: Any, mp: Any, moto_url: str,
                   proxy: Any) -> dict[str, Any]:  # fmt: skip
    import memvault
    from memvault.protocol.commands import run_command

    root.mkdir()
    url = env.url("writers")
    kdf = memvault.KdfParams(memory_kib=8, iterations=1, lanes=1)
    settings = memvault.StoreSettings(durability=args.durability)  # type: ignore[arg-type]
    mp.setenv("AWS_ENDPOINT_URL", moto_url)  # setup and check straight to moto
    setup = memvault.MemoryStore.create(url, passphrase=bench_tool.PASSPHRASE, kdf=kdf, settings=settings,
                                        cache_dir=root / "setup")  # fmt: skip
    run_command(setup, {"command": "create", "path": "/memories/shared.md", "file_text": "start\n"},
                actor="setup", session="setup")  # fmt: skip
    setup.close()
    mp.setenv("AWS_ENDPOINT_URL", proxy.url)
    _progress(f"{n} writer(s): starting processes (RTT {args.writer_rtt:g} ms, {args.duration:g} s) ...")
    go = root / "go"
    procs: list[subprocess.Popen[str]] = []
    try:
        for w in range(n):
            spec = {"url": url, "cache": str(root / f"host{w}"), "worker": w, "duration": args.duration,
                    "ops": args.writer_ops, "think": args.think / 1000, "ready": str(root / f"ready{w}"),
                    "go": str(go)}  # fmt: skip
            procs.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          env=dict(os.environ)))  # fmt: skip
        for w, proc in enumerate(procs):
            while not (root / f"ready{w}").exists():
                if proc.poll() is not None:
                    raise BenchError(f"writer {w} exited before starting: {proc.communicate()[1][-2000:]}")
                time.sleep(0.01)
        log_mark, span_mark = len(proxy.log), len(proxy.spans)
        cpu0 = time.process_time()
        go.touch()
        reports = []
        for w, proc in enumerate(procs):
            out, err = proc.communicate(timeout=args.duration + 300)
            if proc.returncode != 0:
                raise BenchError(f"writer {w} failed (exit {proc.returncode}): {err[-2000:]}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        server_cpu = time.process_time() - cpu0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    statuses = collections.Counter(str(s) for _m, _p, s in proxy.log[log_mark:])
    spans = proxy.spans[span_mark:]
    seen = collections.Counter(op for _s, _e, op in spans)
    service = sorted((end - start) * 1000 - args.writer_rtt for start, end, _op in spans)
    mp.setenv("AWS_ENDPOINT_URL", moto_url)
    _progress(f"{n} writer(s): checking the store's history against the acknowledged commands ...")
    keys = [k for k in env.keys() if k.startswith("writers/log/")]
    log_records = sum(1 for k in keys if re.fullmatch(r"writers/log/[0-9]{20}", k))  # not waiting markers
    seqs, sessions = _history_sessions(url, root / "host0")
    shutil.rmtree(root, ignore_errors=True)
    result = _writer_result(n, reports, statuses, seen, log_records, seqs, sessions, server_cpu)
    result["other_log_keys"] = len(keys) - log_records
    result["service_ms"] = (
        {"p50": bench_tool._pct(service, 0.5), "p90": bench_tool._pct(service, 0.9)} if service else {}
    )
    return result


def _latency_ms(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {}
    return {"p50": bench_tool._pct(latencies, 0.5) * 1000, "p90": bench_tool._pct(latencies, 0.9) * 1000,
            "max": latencies[-1] * 1000}  # fmt: skip


def _writer_result(n: int, reports: list[dict[str, Any]], statuses: collections.Counter[str],
                   seen: collections.Counter[str], log_records: int, seqs: list[int],
                   sessions: list[str], server_cpu: float) -> dict[str, Any]:  # fmt: skip
    window = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    acked = [s for r in reports for s in r["acked"]]
    stats: collections.Counter[str] = collections.Counter()
    requests: collections.Counter[str] = collections.Counter()
    failed: collections.Counter[str] = collections.Counter()
    for r in reports:
        stats.update(r["stats"])
        requests.update(r["requests"])
        failed.update(r["failed"])
    latencies = sorted(v for r in reports for v in r["latencies"])
    races = [v for r in reports for v in r["races"]]
    committed = [s for s in sessions if s not in ("setup", "")]
    commits = max(1, len(acked))
    linear = seqs == list(range(len(seqs) - 1, -1, -1))
    history_ok = linear and sorted(committed) == sorted(acked) and len(set(committed)) == len(committed)
    retried = sum(v for s, v in statuses.items() if s.isdigit() and int(s) in RETRY_STATUSES)
    return {
        "writers": n,
        "window_s": window,
        "acked": len(acked),
        "commits_per_s": len(acked) / window,
        "per_writer_commits_per_s": [len(r["acked"]) / (r["end"] - r["start"]) for r in reports],
        "failed": dict(failed),
        "unknown_outcome": [s for r in reports for s in r["unknown"]],
        "races_lost": stats["races_lost"],
        "races_per_commit": stats["races_lost"] / commits,
        "max_races_one_command": max(races, default=0),
        "commands_with_lost_race": sum(1 for v in races if v) / max(1, len(races)),
        "per_writer_acked": [len(r["acked"]) for r in reports],
        "writer_cpu_cores": sum(r["cpu_s"] for r in reports) / window,
        "server_cpu_cores": server_cpu / window,
        "published": stats["published"],
        "pulls": stats["pulls"],
        "pulled": stats["pulled"],
        "latency_ms": _latency_ms(latencies),
        "requests": dict(requests),
        "requests_total": sum(requests.values()),
        "requests_per_commit": sum(requests.values()) / commits,
        "proxy_requests": sum(seen.values()),
        "proxy_requests_per_s": sum(seen.values()) / window,
        "statuses": dict(statuses),
        "retried": retried,
        "log_records": log_records,
        "base_commits": BASE_COMMITS,
        "commits_match": log_records == BASE_COMMITS + len(acked),
        "history_linear": linear,
        "history_commits": len(committed),
        "history_ok": history_ok,
    }


# -- reporting ----------------------------------------------------------------------------------------


BenchError = bench_tool.BenchError


def _progress(msg: str) -> None:
    print(f"[bench_s3 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def environment(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = bench_tool.environment(base)
    env["packages"] = {d: bench_tool._version(d) for d in ("memvault", "anthropic", "boto3", "botocore", "moto")}
    env["kdf"] = ("memvault stores use a deliberately cheap Argon2id (m=8 KiB, t=1, p=1); it only affects "
                  "create/open time, never per-command cost")  # fmt: skip
    env["load"] = _load()
    env["revision"] = _revision()
    env["s3"] = (f"moto {env['packages']['moto']} S3 server on 127.0.0.1, in this process, each request made atomic "
                 f"by tests/s3support.py; injected RTT {', '.join(f'{r:g}' for r in args.rtts)} ms per request "
                 f"(part 1), {args.writer_rtt:g} ms (part 2)")  # fmt: skip
    return env


def _revision() -> str:
    """The checkout's commit, and whether src/ differs from it."""
    repo = HERE.parent
    try:
        rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev} + uncommitted changes in src/" if dirty else rev


def _load() -> str:
    """The 1-minute load average and CPU pressure: other work on the host skews every figure."""
    try:
        load = f"loadavg {os.getloadavg()[0]:.2f}"
    except OSError:
        load = "loadavg unknown"
    try:
        some = Path("/proc/pressure/cpu").read_text().split()[1]  # "avg10=…"
        return f"{load}, cpu pressure {some}"
    except (OSError, IndexError):
        return load


def _ms(us: float) -> str:
    ms = us / 1000
    return f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


_SHORT = {"ListObjectsV2": "List", "PutObject": "Put", "GetObject": "Get", "DeleteObject": "Delete"}


def _requests_cell(requests: dict[str, dict[str, float]]) -> str:
    parts = []
    for op, v in requests.items():
        if v["max"] == 0:
            continue
        count = f"{v['min']:g}" if v["min"] == v["max"] else f"{v['min']:g}-{v['max']:g}"
        parts.append(f"{_SHORT.get(op, op)} {count}")
    return " + ".join(parts) or "none"


def render(env: dict[str, Any], args: argparse.Namespace, latency: dict[str, Any] | None,
           writers: list[dict[str, Any]], total_s: float) -> str:  # fmt: skip
    out: list[str] = []
    out.append("memvault on S3 (moto on loopback + injected RTT) vs local memvault vs BetaLocalFilesystemMemoryTool")
    out.append(f"command:  {env['command']}")
    out.append(f"date:     {env['date']}")
    out.append(f"machine:  {env['machine']}")
    out.append(f"temp dir: {env['tmp_filesystem']}")
    out.append(f"python:   {env['python']}; " + ", ".join(f"{k} {v}" for k, v in env["packages"].items()))
    out.append(f"memvault: at {env['revision']}")
    out.append(f"S3:       {env['s3']}")
    out.append(f"note:     {env['kdf']}; durability {args.durability} for local and S3 stores")
    out.append(f"load:     at start {env['load']}; at end {env.get('load_end', '?')} (on {os.cpu_count()} CPUs)")
    passed = True
    if latency is not None:
        res, per = latency["result"], latency["per_command"]
        names = [f"s3@{r:g}ms" for r in args.rtts]
        local = f"local-{args.durability}"
        out.append("")
        out.append(f"## Part 1: one client, N = {args.size} notes; {args.runs} run(s) x {args.ops} timed ops per "
                   f"command per backend after {args.warmup} warm-up, interleaved; runs "
                   f"{', '.join(f'{t:.0f}' for t in res['run_s'])} s")  # fmt: skip
        cal = latency["calibration_ms"]
        out.append("moto's own time per request (median ms, boto3 client included): "
                   + "; ".join(f"{where}: " + ", ".join(f"{op} {v:.1f}" for op, v in row.items())
                               for where, row in cal.items()))  # fmt: skip
        out.append("at the RTT-0 proxy, span minus injected RTT (moto + proxy hop), during the run: "
                   + ", ".join(f"{op} {v:.1f}" for op, v in latency["service_ms"].items()) + " ms")  # fmt: skip
        if res["parity_mismatches"]:
            out.append("WARNING: final views differ from the reference for " + ", ".join(res["parity_mismatches"]))
        else:
            out.append(f"check: after the run, {len(bench_tool.PARITY_PATHS)} views show the same entries and "
                       "content in every backend")  # fmt: skip
        top = max(args.rtts)
        out.append("")
        out.append(f"requests and sequential round trips per command (round trips: longest chain of requests each "
                   f"sent after the previous answer, from the proxy's timestamps at RTT {top:g} ms; estimate: "
                   f"(median at {top:g} ms - median at 0 ms) / {top:g} ms)")  # fmt: skip
        out.append("")
        out.append("| command | HTTP requests | round trips median (max) | estimate | target | check |")
        out.append("|---|---|---:|---:|---:|---|")
        outliers: list[str] = []
        for command, cell in per.items():
            rt = cell.get("round_trips")
            check = "PASS" if cell.get("pass") else "FAIL"
            passed = passed and bool(cell.get("pass"))
            out.append(f"| {command} | {_requests_cell(cell['requests'])} | "
                       + (f"{rt['median']:g} ({rt['max']}) | {cell['round_trips_slope']:.1f} | <= {cell['target']} | "
                          f"{check} |" if rt else "n/a | n/a | | |"))  # fmt: skip
            if rt and rt["max"] > cell["target"]:
                outliers.append(f"{command}: {rt['max']} round trips in its slowest-chained call of {rt['n']}; its "
                                "requests (start-end ms from the call's start): "
                                + ", ".join(f"{_SHORT.get(op, op)} {a:g}-{b:g}" for a, b, op in
                                            rt["worst_call_spans_ms"]))  # fmt: skip
        out.extend(outliers)
        out.append("")
        out.append("median latency (SDK and local in µs, S3 in ms) and ratios (median over runs of the per-run ratio "
                   "of medians; lower is better)")  # fmt: skip
        out.append("")
        header = ["command", "SDK µs", f"{local} µs", *(f"{n} ms" for n in names),
                  *(f"{n} / local" for n in names), *(f"{n} / SDK" for n in names)]  # fmt: skip
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for command, cell in per.items():
            lat = cell["latency_us"]
            cells = [command, bench_tool._us(lat["reference"]), bench_tool._us(lat[local])]
            cells += [_ms(lat[n]) for n in names]
            cells += [bench_tool._ratio(cell["ratio_to_local"][n]) for n in names]
            cells += [bench_tool._ratio(cell["ratio_to_sdk"][n]) for n in names]
            out.append("| " + " | ".join(cells) + " |")
        if latency["catch_up"]:
            out.append("")
            out.append(f"a replica that is behind, at RTT {top:g} ms (the other host writes straight to moto; "
                       "requests and round trips are the measured host's):")  # fmt: skip
            out.append("")
            out.append("| scenario | HTTP requests per command | round trips median (max) | races lost | median ms |")
            out.append("|---|---|---:|---:|---:|")
            for name, row in latency["catch_up"].items():
                reqs = " + ".join(f"{_SHORT.get(op, op)} {v:.3g}" for op, v in row["requests_per_command"].items())
                rt = row["round_trips"]
                out.append(f"| {name} | {reqs} | {rt['median']:g} ({rt['max']}) | {row['races_lost']}/{row['n']} | "
                           f"{row['latency_ms']:.0f} |")  # fmt: skip
        out.append(f"{local} / SDK: " + ", ".join(f"{c} {bench_tool._ratio(res['commands'][c][local]['ratio'])}"
                                                  for c in per))  # fmt: skip
        stats = "; ".join(f"{n}: " + ", ".join(f"{k} {v}" for k, v in sorted(s.items()))
                          for n, s in latency["replica_stats"].items())  # fmt: skip
        out.append(f"replica stats (store.remote.stats, whole part 1): {stats}")
    if writers:
        out.append("")
        out.append(f"## Part 2: writer processes on one store, each its own replica; RTT {args.writer_rtt:g} ms; "
                   f"{args.duration:g} s" + (f" or {args.writer_ops} commands" if args.writer_ops else "")
                   + "; each alternates create (own file) / insert (shared file)"
                   + (f", {args.think:g} ms pause after each" if args.think else ", back to back"))  # fmt: skip
        out.append("")
        out.append("| writers | acked | commits/s | per writer /s (min-max) | failed | cmd p50 ms | cmd p90 ms | "
                   "cmd max ms | commits = acked? |")  # fmt: skip
        out.append("|---:|---:|---:|---:|---|---:|---:|---:|---|")
        for r in writers:
            ok = r["commits_match"] and r["history_ok"] and not r["unknown_outcome"]
            passed = passed and ok
            rates = r["per_writer_commits_per_s"]
            per_writer = f"{min(rates):.1f}" if len(rates) == 1 else f"{min(rates):.1f}-{max(rates):.1f}"
            failed = ", ".join(f"{k} {v}" for k, v in r["failed"].items()) or "0"
            lat = r["latency_ms"]
            out.append(f"| {r['writers']} | {r['acked']} | {r['commits_per_s']:.1f} | {per_writer} | {failed} | "
                       f"{lat.get('p50', 0):.0f} | {lat.get('p90', 0):.0f} | {lat.get('max', 0):.0f} | "
                       f"{'yes' if ok else 'NO'} |")  # fmt: skip
        out.append("")
        out.append("| writers | races lost | races/commit | cmds that lost a race | most races of one cmd | "
                   "requests/commit | retried | moto req/s | request p50/p90 ms | CPU: writers | "
                   "CPU: moto + proxy |")  # fmt: skip
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in writers:
            svc = r.get("service_ms", {})
            out.append(f"| {r['writers']} | {r['races_lost']} | {r['races_per_commit']:.2f} | "
                       f"{r['commands_with_lost_race']:.0%} | {r['max_races_one_command']} | "
                       f"{r['requests_per_commit']:.1f} | {r['retried']} | {r['proxy_requests_per_s']:.0f} | "
                       f"{svc.get('p50', 0):.0f}/{svc.get('p90', 0):.0f} | {r['writer_cpu_cores']:.2f} | "
                       f"{r['server_cpu_cores']:.2f} |")  # fmt: skip
        for r in writers:
            reqs = ", ".join(f"{k} {v}" for k, v in sorted(r["requests"].items()))
            statuses = ", ".join(f"{k}: {v}" for k, v in sorted(r["statuses"].items()))
            out.append(
                f"{r['writers']} writer(s): log records {r['log_records']} = {r['base_commits']} before + "
                f"{r['log_records'] - r['base_commits']} (acknowledged {r['acked']}: "
                f"{'OK' if r['commits_match'] else 'MISMATCH'}); history linear "
                f"{'yes' if r['history_linear'] else 'NO'}, each acknowledged command in exactly one commit "
                f"{'yes' if r['history_ok'] else 'NO'}; other keys left under log/ {r['other_log_keys']}; "
                f"requests {reqs}; answers {statuses}"
                + (f"; outcome unknown: {len(r['unknown_outcome'])}" if r["unknown_outcome"] else "")
            )
    out.append("")
    out.append("round trips: a mutation = pull (List) -> uploads of pack, idx and data keys (concurrent) -> create of "
               "the log record; a view of an unchanged head = the pull's List (docs/format.md §12).")  # fmt: skip
    out.append("races lost: log-record creates another writer won (412), after which the command re-runs on the new "
               "head; retried: answers 409/429/5xx that memvault sent again; request p50/p90: time a request spent "
               "at the proxy minus the injected RTT (moto's service time, queueing included).")  # fmt: skip
    out.append(f"overall: {'PASS' if passed else 'FAIL'}; total wall time {total_s:.0f} s")
    return "\n".join(out)


# -- main ---------------------------------------------------------------------------------------------


def _float_list(text: str) -> list[float]:
    try:
        values = sorted({float(v) for v in text.split(",") if v.strip()})
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError("expected a comma-separated list of numbers >= 0")
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rtts", type=_float_list, default=[0.0, 5.0, 20.0],
                   help="injected round-trip times in ms for part 1 (0 is always added; round trips are counted at the "
                        "largest: keep it >= 10; default 0,5,20)")  # fmt: skip
    p.add_argument("--size", type=int, default=None, help="store size in notes for part 1 (default 100)")
    p.add_argument("--ops", type=int, default=None, help="timed ops per command per backend per run (default 12)")
    p.add_argument("--runs", type=int, default=None, help="timed runs of part 1; medians of runs (default 3)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up ops per command per backend (default 3)")
    p.add_argument("--chunk", type=int, default=3, help="consecutive ops of one backend before switching (default 3)")
    p.add_argument("--commands", type=bench_tool._commands, default=list(DEFAULT_COMMANDS),
                   help="part 1 commands: names from bench_tool.py, or views / mutations / all "
                        "(default view_file,view_dir,create,str_replace,insert,delete,rename)")  # fmt: skip
    p.add_argument("--writers", type=bench_tool._int_list, default=None,
                   help="writer process counts for part 2 (default 1,2,4,8)")  # fmt: skip
    p.add_argument("--writer-rtt", type=float, default=5.0, help="injected RTT in ms for part 2 (default 5)")
    p.add_argument("--duration", type=float, default=None, help="seconds each part-2 level runs (default 8)")
    p.add_argument("--think", type=float, default=0.0,
                   help="ms each writer pauses after each command (default 0: back to back)")  # fmt: skip
    p.add_argument("--writer-ops", type=int, default=0,
                   help="stop each writer after this many commands (default 0: only the duration)")  # fmt: skip
    p.add_argument("--durability", choices=("full", "none"), default="full",
                   help="durability of every memvault store, local and S3 (default full)")  # fmt: skip
    p.add_argument("--only", choices=("latency", "writers"), default=None, help="run one part only")
    p.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON on stdout instead of the tables")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: size 30, 1 run x 3 ops, 1 warm-up; writers 1,2 for 2 s")  # fmt: skip
    p.add_argument("--tmpdir", type=Path, default=None, help="where to create the temporary stores and replicas")
    args = p.parse_args(argv)
    if 0.0 not in args.rtts:
        args.rtts = [0.0, *args.rtts]
    args.size = args.size or (30 if args.quick else 100)
    args.ops = args.ops if args.ops is not None else (3 if args.quick else 12)
    args.runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    args.writers = args.writers or ([1, 2] if args.quick else [1, 2, 4, 8])
    args.duration = args.duration if args.duration is not None else (2.0 if args.quick else 8.0)
    if args.ops < 1 or args.runs < 1 or args.warmup < 0 or args.chunk < 1 or args.duration <= 0 or args.think < 0:
        p.error("--ops, --runs and --chunk must be >= 1, --warmup and --think >= 0, --duration > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        return worker(json.loads(argv[1]))
    args = parse_args(argv)
    started = time.perf_counter()
    _progress("importing anthropic, memvault, boto3 and moto ...")
    import anthropic.tools  # noqa: F401  (import once, outside any timing)

    import memvault.storage.s3  # noqa: F401
    import s3support

    base = Path(tempfile.mkdtemp(prefix="memvault-bench-s3-", dir=args.tmpdir))
    latency: dict[str, Any] | None = None
    writers: list[dict[str, Any]] = []
    saved = dict(os.environ)
    try:
        env = environment(base, args)
        with s3support.moto_server() as moto_url:
            if args.only != "writers":
                latency = bench_latency(args, base, moto_url)
            if args.only != "latency":
                writers = bench_writers(args, base, moto_url)
    except BenchError as err:
        print(f"benchmark failed: {err}", file=sys.stderr)
        return 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(base, ignore_errors=True)
    total = time.perf_counter() - started
    env["load_end"] = _load()
    if args.json:
        doc = {"environment": env, "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
               "latency": latency, "writers": writers, "total_s": round(total, 1)}  # fmt: skip
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(render(env, args, latency, writers, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
