#!/usr/bin/env python
"""Compaction of a store in S3 (moto on loopback; docs/format.md §12.8): objects and bytes in the
bucket after N commits, before and after ``gc``; the first open of a new host (HTTP requests and
seconds, open and one view) before and after; and the cost of a mutation (requests, sequential round
trips through a proxy that injects RTT) while another host compacts the store.

Targets (after 1,000 commits and a gc): at most 50 objects under the store's prefix, bytes within
1.5x of the replica directory, a first open in at most 10 requests and 3 s; a mutation in at most 3
sequential round trips and 6 requests with a compaction running concurrently.

Run ``python benchmarks/bench_s3_gc.py --help``. Needs boto3 and moto[server]; makes no request
beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # s3support, conftest's FAST_KDF

from bench_s3 import s3_environment, sequential_round_trips, timed_proxy  # noqa: E402

PASSPHRASE = "bench passphrase"
TARGET_OBJECTS = 50
TARGET_BYTES_RATIO = 1.5
TARGET_OPEN_REQUESTS = 10
TARGET_OPEN_SECONDS = 3.0
TARGET_MUTATION_RT = 3
TARGET_MUTATION_REQUESTS = 6


def _kdf() -> Any:
    from conftest import FAST_KDF

    return FAST_KDF


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _bucket(env: Any, prefix: str) -> tuple[int, int]:
    pages = env.client.get_paginator("list_objects_v2").paginate(Bucket=env.bucket, Prefix=prefix + "/")
    items = [item for page in pages for item in page.get("Contents", [])]
    return len(items), sum(int(item["Size"]) for item in items)


def _as_host(cache: Path) -> Any:
    import s3support

    return s3support.as_host(cache)


def _first_open(url: str, cache: Path) -> dict[str, float]:
    """A new host opens the store and views one file: requests and seconds."""
    import memvault
    from memvault.protocol.commands import run_command

    t0 = time.perf_counter()
    with _as_host(cache):
        store = memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache)
    opened = time.perf_counter() - t0
    out = str(run_command(store, {"command": "view", "path": "/memories/n0.md"}, actor="bench", session="b"))
    seconds = time.perf_counter() - t0
    assert "note 0" in out
    requests = sum(store.remote.objects.requests.values())
    store.close()
    return {"requests": requests, "seconds": round(seconds, 3), "open_seconds": round(opened, 3)}


def run(args: argparse.Namespace, base: Path, moto_url: str) -> dict[str, Any]:
    import memvault
    from memvault.admin.remote_gc import compact_remote
    from memvault.protocol.commands import run_command

    result: dict[str, Any] = {"commits": args.commits}
    with s3_environment(moto_url) as (env, _mp):
        url = env.url("gc")
        cache = base / "a"
        with _as_host(cache):
            store = memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=_kdf(), cache_dir=cache)
        t0 = time.perf_counter()
        for i in range(args.commits - 1):  # init is commit 0
            text = f"note {i}\n" + "x" * args.note_bytes
            run_command(store, {"command": "create", "path": f"/memories/n{i}.md", "file_text": text},
                        actor="bench", session="w")  # fmt: skip
        result["commit_seconds"] = round(time.perf_counter() - t0, 1)
        store.maintain()  # the replica as a host keeps it: its packs merged
        result["replica_bytes"] = _tree_bytes(cache)
        result["before"] = dict(zip(("objects", "bytes"), _bucket(env, "gc"), strict=True))
        if args.before:
            result["before"]["first_open"] = _first_open(url, base / "cold-before")
        t0 = time.perf_counter()
        report = compact_remote(store, grace=0)
        result["gc"] = {"seconds": round(time.perf_counter() - t0, 1), "packs_merged": report.packs_merged,
                        "deleted": dict(report.deleted)}  # fmt: skip
        result["after"] = dict(zip(("objects", "bytes"), _bucket(env, "gc"), strict=True))
        result["after"]["first_open"] = _first_open(url, base / "cold-after")
        result["mutation_during_gc"] = _mutations_during_gc(url, base, moto_url, store, args)
        store.close()
    after = result["after"]
    result["targets"] = {
        "objects": after["objects"] <= TARGET_OBJECTS,
        "bytes": after["bytes"] <= TARGET_BYTES_RATIO * result["replica_bytes"],
        "first_open_requests": after["first_open"]["requests"] <= TARGET_OPEN_REQUESTS,
        "first_open_seconds": after["first_open"]["seconds"] <= TARGET_OPEN_SECONDS,
        "mutation_round_trips": result["mutation_during_gc"]["max_round_trips"] <= TARGET_MUTATION_RT,
        "mutation_requests": result["mutation_during_gc"]["max_requests"] <= TARGET_MUTATION_REQUESTS,
    }
    return result


def _mutations_during_gc(
    url: str, base: Path, moto_url: str, gc_store: Any, args: argparse.Namespace
) -> dict[str, Any]:
    """A second host commits through a proxy injecting ``args.rtt`` ms while the first runs gc in a
    loop (grace 0): requests and sequential round trips per mutation."""
    import memvault
    from memvault.admin.remote_gc import compact_remote
    from memvault.protocol.commands import run_command

    proxy = timed_proxy(moto_url, args.rtt / 1000)
    proxy.__enter__()
    saved = os.environ.get("AWS_ENDPOINT_URL")
    os.environ["AWS_ENDPOINT_URL"] = proxy.url
    try:
        cache = base / "writer"
        with _as_host(cache):
            writer = memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache)
        run_command(writer, {"command": "view", "path": "/memories"}, actor="bench", session="m")
    finally:
        if saved is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = saved
    stop = threading.Event()
    runs = collections.Counter[str]()

    def compact_loop() -> None:
        while not stop.is_set():
            report = compact_remote(gc_store, grace=30)
            runs["gc_runs"] += 1
            runs["checkpoints"] += report.checkpoint is not None

    thread = threading.Thread(target=compact_loop)
    thread.start()
    rows = []
    try:
        for i in range(args.mutations):
            before = sum(writer.remote.objects.requests.values())
            proxy.spans.clear()
            t0 = time.perf_counter()
            run_command(writer, {"command": "create", "path": f"/memories/m{i}.md", "file_text": f"m {i}\n"},
                        actor="bench", session="m")  # fmt: skip
            spans = [(s, e) for s, e, _op in proxy.spans]
            rows.append({
                "requests": sum(writer.remote.objects.requests.values()) - before,
                "round_trips": sequential_round_trips(spans, 0.0005),
                "ms": round((time.perf_counter() - t0) * 1000, 1),
                "ops": [(op, round((s - t0) * 1000, 1), round((e - t0) * 1000, 1)) for s, e, op in sorted(proxy.spans)],
            })  # fmt: skip
    finally:
        stop.set()
        thread.join()
        writer.close()
        proxy.__exit__(None, None, None)
    return {"rtt_ms": args.rtt, "mutations": len(rows), **runs,
            "max_requests": max(r["requests"] for r in rows), "max_round_trips": max(r["round_trips"] for r in rows),
            "round_trips": dict(collections.Counter(r["round_trips"] for r in rows)),
            "slowest": max(rows, key=lambda r: (r["round_trips"], r["ms"]))["ops"],
            "median_ms": sorted(r["ms"] for r in rows)[len(rows) // 2]}  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--commits", type=int, default=1000, help="commits before the gc, init included (default 1000)")
    p.add_argument("--note-bytes", type=int, default=200, help="bytes of each note beyond its first line")
    p.add_argument("--before", action="store_true", help="also time a new host's first open before the gc (slow)")
    p.add_argument("--mutations", type=int, default=20, help="mutations timed during compactions (default 20)")
    p.add_argument("--rtt", type=float, default=5.0, help="RTT injected for the mutations, ms (default 5)")
    p.add_argument("--tmpdir", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    import s3support

    args = parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp, s3support.moto_server() as moto_url:
        result = run(args, Path(tmp), moto_url)
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0 if all(result["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
