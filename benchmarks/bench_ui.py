#!/usr/bin/env python
"""Server time of every page of the review UI on a large store: 10,000 files, 100,000 commits.

The store is built once into a cache directory (``--cache``, default
``$XDG_CACHE_HOME/memvault-bench-ui``; a few minutes: durability none, one transaction for the
10,000 files, then one commit per edit of one file by 5 actors in sessions of 50 commits, a rename
and a delete now and then, packs merged every 5,000 commits, a dream branch at the end), and
reused while its parameters match. The UI is then served on 127.0.0.1 as ``memvault ui`` serves
it. Each page is requested once (``first``: a page not ready within 0.15 s answers that it is being
prepared and reloads itself; ``ready after``: until the page itself came), then ``--runs`` times
(``median``, ``max``). Times are the ``Server-Timing`` the UI reports (the application's time,
without the network).

    python benchmarks/bench_ui.py                    # 10,000 files, 100,000 commits
    python benchmarks/bench_ui.py --files 1000 --commits 5000 --runs 3    # quick
    python benchmarks/bench_ui.py --json             # machine-readable
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import memvault
from memvault.history import resolve
from memvault.paths import parse_path
from memvault.settings import KdfParams, StoreSettings
from memvault.ui.app import ReviewApp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from serversupport import serve_asgi, stop_server  # noqa: E402  (the tests' loopback server)

PASSPHRASE = "bench-ui passphrase, not a secret"
TARGET_MS = 200.0
DREAM = "00000000000000bb"


def _path(i: int) -> str:
    return f"/memories/d{i // 100:03d}/note-{i:05d}.md"


def _text(i: int, version: int) -> bytes:
    body = "".join(f"- fact {k} about item {i}: seen in version {version if k == i % 20 else 0}\n" for k in range(20))
    return f"# note {i}\n\n{body}".encode()


def build(location: Path, files: int, commits: int) -> None:
    """The benchmark store (see the module docstring)."""
    settings = StoreSettings.model_validate({"durability": "none", "scrub": {"enabled": False}})
    store = memvault.MemoryStore.create(location, passphrase=PASSPHRASE, settings=settings,
                                        kdf=KdfParams(memory_kib=8, iterations=1, lanes=1))  # fmt: skip

    def seed(txn: memvault.store.Transaction) -> None:
        for i in range(files):
            txn.write_file(parse_path(_path(i)), _text(i, 0))

    store.transact(seed, command="setup", paths=(), actor="importer", session="seed")
    started = time.monotonic()
    renamed: dict[int, str] = {}
    for k in range(1, commits):
        i = (k * 7919) % files
        path = renamed.get(i, _path(i))
        actor, session = f"agent{k % 5}", f"session-{k // 50:05d}"
        if k % 997 == 0 and i not in renamed:  # a rename now and then
            new = path.replace(".md", "-renamed.md")

            def move(txn: memvault.store.Transaction, old: str = path, new: str = new) -> None:
                txn.rename(parse_path(old), parse_path(new))

            store.transact(move, command="rename", paths=(path, new), actor=actor, session=session)
            renamed[i] = new
            continue

        def edit(txn: memvault.store.Transaction, path: str = path, i: int = i, k: int = k) -> None:
            txn.write_file(parse_path(path), _text(i, k))

        store.transact(edit, command="str_replace", paths=(path,), actor=actor, session=session)
        if k % 5000 == 0:
            store.maintain()
            rate = k / (time.monotonic() - started)
            print(f"  {k} commits ({rate:.0f}/s)", file=sys.stderr, flush=True)
    branch = store.branch(f"dream/{DREAM}")
    branch.create(actor="dream", session=DREAM, extra={"model": "bench"})
    for i in (1, 2, 3):
        path = renamed.get(i, _path(i))
        branch.transact(lambda txn, p=path, i=i: txn.write_file(parse_path(p), _text(i, 10**6)),
                        command="str_replace", paths=(path,), actor="dream", session=DREAM)  # fmt: skip
    store.maintain()
    store.close()


def _request(port: int, path: str, cookie: str, form: dict[str, str] | None = None) -> tuple[int, float, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"Host": f"127.0.0.1:{port}", "Cookie": cookie}
    body = None
    if form is not None:
        from urllib.parse import urlencode

        body = urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request("POST" if form is not None else "GET", path, body=body, headers=headers)
    response = conn.getresponse()
    text = response.read().decode("utf-8", "replace")
    timing = response.getheader("server-timing") or "app;dur=nan"
    conn.close()
    return response.status, float(timing.split("dur=")[1]), text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "memvault-bench-ui"
    parser.add_argument("--cache", type=Path, default=cache)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    location = args.cache / f"store-{args.files}-{args.commits}"
    if args.rebuild or not (location / "memvault.json").exists():
        shutil.rmtree(location, ignore_errors=True)
        location.parent.mkdir(parents=True, exist_ok=True)
        print(f"building {location} ({args.files} files, {args.commits} commits)...", file=sys.stderr, flush=True)
        started = time.monotonic()
        build(location, args.files, args.commits)
        print(f"built in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    opened = time.monotonic()
    store = memvault.MemoryStore.open(location, passphrase=PASSPHRASE)
    open_seconds = time.monotonic() - opened
    app = ReviewApp.local(store, actor="ui:bench", name=str(location))
    server, thread, port = serve_asgi(app.asgi)
    app.allow_port(port)
    cookie = f"{app.cookie_name}={app.sessions.new().id}"
    head, seq = store.head
    middle = resolve(store, f"#{seq // 2}").decode()
    edit = head.decode()
    seed_commit = resolve(store, "#1").decode()
    directory = f"/memories/d{(args.files // 100) // 2:03d}"
    pages = {
        "tree /memories": "/tree",
        "tree of a directory": f"/tree?path={directory}",
        "tree at an old revision": f"/tree?rev={middle}&path={directory}",
        "file at the head": f"/file?path={_path(3)}",
        "file at an old revision": f"/file?path={_path(3)}&rev={middle}",
        "history": "/history",
        "history from the middle": f"/history?start={middle}",
        "history by actor": "/history?actor=agent3",
        "history by session (rare)": f"/history?session=session-{(seq // 2) // 50:05d}",
        "history by command (rare)": "/history?command=rename",
        "history by path (rare)": f"/history?path={_path(3)}",
        "history since a time": "/history?since=2000-01-01",
        "commit (one edit)": f"/commit/{edit}",
        "commit (one edit, unified)": f"/commit/{edit}?mode=unified",
        "commit (10,000 files created)": f"/commit/{seed_commit}",
        "dreams": "/dreams",
        "redact form": f"/redact?path={_path(3)}",
        "checks (audit job)": "/checks",
        "dream review (job)": f"/dreams/{DREAM}",
        "file versions (index job)": f"/file/versions?path={_path(3)}",
        "blame (index job)": f"/file/blame?path={_path(3)}",
        "revert preview (job)": f"/revert/{edit}",
        "restore preview (job)": f"/restore?path={_path(3)}&rev={middle}",
    }
    results: dict[str, dict[str, Any]] = {}
    for name, url in pages.items():
        started = time.monotonic()
        status, first, _text_ = _request(port, url, cookie)
        while status == 202 or 'role="status">Auditing' in _text_:  # a job: wait for it, then time its page
            time.sleep(0.2)
            status, _ms, _text_ = _request(port, url, cookie)
        ready = time.monotonic() - started
        samples = [_request(port, url, cookie)[1] for _ in range(args.runs)]
        results[name] = {"status": status, "first_ms": first, "median_ms": statistics.median(samples),
                         "max_ms": max(samples), "ready_s": round(ready, 2)}  # fmt: skip
        if not args.json:
            flag = "" if max(samples) < TARGET_MS and first < TARGET_MS else "  OVER"
            print(f"{name:34} {status}  first {first:8.1f} ms  median {statistics.median(samples):7.1f} ms  "
                  f"max {max(samples):7.1f} ms  ready after {ready:6.2f} s{flag}", flush=True)  # fmt: skip
    stop_server(server, thread)
    store.close()
    summary = {"files": args.files, "commits": args.commits, "open_s": round(open_seconds, 2), "pages": results}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"\nstore opened in {open_seconds:.1f} s. first: the first request's server time (a page not "
            "ready within 0.15 s answers that it is being prepared); median, max: the page's own server time "
            f"over {args.runs} requests; ready after: from the first request to the page shown."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
