"""The soak of a store in S3 and the size check after many commits, shared by
tests/remote/test_soak.py (CI sizes) and benchmarks/long_checks.py (long sizes, through that test).

The soak: ``hosts`` writer processes, each a host with its own replica and host state, commit
``commits`` files each to one ``s3://`` store through a :class:`s3support.FaultProxy` in front of
moto that injects 500/503 answers, connection resets and slow answers; one more host runs ``gc``
(``compact_remote``) every ``gc_every`` commits of the store, creating and redacting a file of known
content before some of them; one writer is paused (SIGSTOP) until a compaction has run from start to
end, then resumed. Each writer acknowledges what its commands returned; a command that failed with
an unknown outcome is resolved by reading the file back. Afterwards :func:`check_soak` reads the
whole history as a new host: every acknowledged commit exactly once and nothing else, ``memvault
verify`` and ``verify --remote`` clean on every host and on a new one, and no redacted text in any object of the
bucket (raw, inflated, in pack entries) nor in anything a host can decrypt.

Run as a script, this module is one host of the soak: ``s3soak.py writer|gc|verify CONFIG_JSON``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: Faults the soak injects, each once, into requests for the store's objects.
FAULT_KINDS = ("500", "503", "reset_before", "reset_after", "slow")
#: Statuses the proxy logs for a request it failed (slow answers are found by their timing).
_FAILED = {500, 503, "reset_before", "reset_after"}
#: Reads back of a commit of unknown outcome before a host gives up.
READ_ATTEMPTS = 100


@dataclass
class SoakSize:
    """The sizes of one soak run (see the module docstring)."""

    hosts: int = 8
    commits: int = 500
    gc_every: int = 100
    redactions: int = 3
    #: Seconds between two injected faults, and the most injected (0: no bound).
    fault_interval: float = 0.5
    max_faults: int = 0
    slow_seconds: float = 1.0
    #: Writers' commit window (replica.COMMIT_WINDOW) and gc's grace period: the grace must exceed
    #: the window plus the longest pause of a writer (docs/format.md §12.8, invariant 7).
    commit_window: float = 20.0
    grace: float = 120.0
    #: The pause lasts until a compaction ran wholly inside it, at least min_pause and at most
    #: max_pause seconds; it starts when this fraction of the commits is acknowledged.
    min_pause: float = 5.0
    max_pause: float = 90.0
    pause_at: float = 0.3
    seed: int = 1

    @classmethod
    def from_env(cls, defaults: SoakSize) -> SoakSize:
        """``defaults`` with ``MEMVAULT_SOAK_<FIELD>`` variables applied (long_checks.py sets them)."""
        values = asdict(defaults)
        for name, value in values.items():
            raw = os.environ.get(f"MEMVAULT_SOAK_{name.upper()}")
            if raw is not None:
                values[name] = type(value)(raw)
        return cls(**values)


@dataclass
class SoakResult:
    """What a soak run did and found."""

    url: str
    base: Path
    acked: dict[str, str] = field(default_factory=dict)  #: session -> path
    tokens: dict[int, str] = field(default_factory=dict)  #: writer -> the token in its files
    secrets: dict[str, str] = field(default_factory=dict)  #: path -> content redacted
    destroyed: set[str] = field(default_factory=set)  #: data key ids (hex) the redactions destroyed
    gcs: list[dict[str, Any]] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)
    paused: dict[str, float] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    objects_before_gc: tuple[int, int] = (0, 0)
    objects_after_gc: tuple[int, int] = (0, 0)
    verify: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0


def host_cache(url: str, base: Path, name: str) -> Path:
    """The replica directory of host ``name``, where the CLI with ``MEMVAULT_CACHE_DIR=base/name`` finds it."""
    from memvault.remote.replica import cache_dir_for

    return cache_dir_for(url, base / name)


def host_env(cache: Path) -> dict[str, str]:
    """The variables that make a process the host of ``cache`` (as ``s3support.as_host`` does)."""
    return {"MEMVAULT_CACHE_DIR": str(cache.parent), "MEMVAULT_ANCHOR_DIR": str(cache.parent / f"{cache.name}-state")}


def bucket_totals(client: Any, bucket: str, prefix: str) -> tuple[int, int]:
    """``(objects, bytes)`` under ``prefix/`` in ``bucket``."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    items = [item for page in pages for item in page.get("Contents", [])]
    return len(items), sum(int(item["Size"]) for item in items)


def tree_bytes(root: Path) -> int:
    """Bytes of the regular files under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


# --- the hosts (child processes) ----------------------------------------------------------------


def _emit(**entry: Any) -> None:
    data = (json.dumps(entry) + "\n").encode()
    while data:  # one line per write, whatever else holds sys.stdout
        data = data[os.write(1, data) :]


def _open(config: dict[str, Any]) -> Any:
    import memvault
    import memvault.remote.replica as replica_module
    from conftest import PASSPHRASE

    replica_module.COMMIT_WINDOW = float(config["commit_window"])
    return memvault.MemoryStore.open(config["url"], passphrase=PASSPHRASE, cache_dir=config["cache"])


def _landed(store: Any, path: str, text: str, counts: Counter[str]) -> bool:
    """Whether ``path`` holds ``text`` in the store, reading until a read succeeds."""
    from memvault.errors import PathNotFoundError, StorageError

    for attempt in range(READ_ATTEMPTS):
        try:
            return bool(store.read_text(path) == text) if store.exists(path) else False
        except PathNotFoundError:
            return False
        except StorageError as err:
            counts["read_retries"] += 1
            if attempt == READ_ATTEMPTS - 1:
                raise
            print(f"read back failed: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            time.sleep(0.05)
    raise AssertionError("unreachable")


def commit_file(store: Any, path: str, text: str, session: str, counts: Counter[str]) -> str:
    """Create ``path`` with ``text`` until the store acknowledges it; how it was settled.

    Returns:
        "ok" (acknowledged), "resolved" (an unknown outcome, found committed by reading) or
        "exists" (a retry found the file there after an error that said nothing was saved). A
        ConflictError (other hosts committed first for ``replicated.RACE_SECONDS``: nothing was
        saved) is run again, as its message asks, and counted.
    """
    from memvault.errors import ConflictError, PathExistsError, StorageError
    from memvault.protocol.commands import run_command

    command = {"command": "create", "path": path, "file_text": text}
    unknown = False
    while True:
        try:
            run_command(store, command, actor=session.split("-")[0], session=session)
            return "ok"
        except PathExistsError:
            if _landed(store, path, text, counts):
                return "resolved" if unknown else "exists"
            raise
        except ConflictError:
            counts["conflicts"] += 1
        except StorageError as err:
            counts["command_errors"] += 1
            if err.outcome_unknown:
                counts["unknown_outcomes"] += 1
                unknown = True
                if _landed(store, path, text, counts):
                    return "resolved"
            time.sleep(0.05)


def _redact(store: Any, path: str, counts: Counter[str]) -> list[str]:
    """Redact every version of ``path`` until it is done; the data key ids destroyed (hex)."""
    from memvault.erasure.redact import file_versions, shred_file
    from memvault.errors import ConflictError, StorageError

    while True:
        try:
            result = shred_file(store, path, actor="dpo", session="soak-redact", reason="soak")
            return [v.dek_id for v in result.versions]
        except (StorageError, ConflictError):
            counts["redact_errors"] += 1
            time.sleep(0.05)
            try:
                versions = file_versions(store, path)
            except StorageError:
                continue
            if versions and all(v.redacted for v in versions):
                return [v.dek_id for v in versions]


def _wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.01)


def run_writer(config: dict[str, Any]) -> int:
    """One writer host: ``commits`` files of its own, one line per acknowledged commit."""
    store = _open(config)
    counts: Counter[str] = Counter()
    Path(config["ready"]).touch()
    _wait_for(Path(config["go"]))
    host = config["host"]
    for k in range(int(config["commits"])):
        session = f"h{host}-c{k}"
        path = f"/memories/h{host}/c{k}.md"
        how = commit_file(store, path, f"host {host} commit {k} {config['token']}\n", session, counts)
        counts[how] += 1
        _emit(ack=session, path=path, how=how)
    assert store.remote is not None
    _emit(stats={**counts, **store.remote.stats, "requests": sum(store.remote.objects.requests.values())})
    store.close()
    return 0


def run_gc(config: dict[str, Any]) -> int:
    """The compacting host: a redaction and a gc every ``gc_every`` commits, or when ``gc_now``
    appears; a last gc with grace 0 when ``final`` appears."""
    from memvault.admin.remote_gc import compact_remote
    from memvault.errors import StorageError

    store = _open(config)
    counts: Counter[str] = Counter()
    Path(config["ready"]).touch()
    _wait_for(Path(config["go"]))
    secrets: list[tuple[str, str]] = [tuple(s) for s in config["secrets"]]  # type: ignore[misc]
    gc_now, final = Path(config["gc_now"]), Path(config["final"])
    last = 0

    def gc(grace: float, seq: int, reason: str) -> None:
        started = time.time()
        while True:
            try:
                report = compact_remote(store, grace=grace)
                break
            except StorageError:
                counts["gc_errors"] += 1
                time.sleep(0.1)
        _emit(gc=seq, reason=reason, started=started, ended=time.time(), checkpoint=report.checkpoint,
              deleted=sum(report.deleted.values()), waiting=sum(report.waiting.values()))  # fmt: skip

    while True:
        done = final.exists()
        try:
            seq = store.head[1]
        except StorageError:
            counts["read_retries"] += 1
            continue
        if done:
            break
        forced = gc_now.exists()
        if forced or seq >= last + int(config["gc_every"]):
            if secrets and not forced:
                path, text = secrets.pop(0)
                session = f"dpo-{len(secrets)}"
                _emit(ack=session, path=path, how=commit_file(store, path, text, session, counts))
                _emit(redacted=path, deks=_redact(store, path, counts))
            if forced:
                gc_now.unlink()
            gc(float(config["grace"]), seq, "forced" if forced else "every")
            last = seq
        else:
            time.sleep(0.2)
    gc(0.0, seq, "final")
    assert store.remote is not None
    _emit(stats={**counts, **store.remote.stats, "requests": sum(store.remote.objects.requests.values())})
    store.close()
    return 0


def run_verify(config: dict[str, Any]) -> int:
    """``memvault verify`` and ``memvault verify --remote`` as this host (the CLI in this process)."""
    import contextlib
    import io

    from conftest import PASSPHRASE
    from memvault.cli import main

    os.environ["MEMVAULT_PASSPHRASE"] = PASSPHRASE
    out: dict[str, Any] = {}
    for name, args in (("verify", ["verify", "--json"]), ("remote", ["verify", "--remote", "--json"])):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            status = main(["--store", config["url"], *args])
        out[name] = {"status": status, **json.loads(buf.getvalue() or "{}")}
    out["redacted_reads"] = _redacted_reads(config)
    _emit(verify=out)
    return 0


def _redacted_reads(config: dict[str, Any]) -> dict[str, int]:
    """This host reads every version of the redacted files: how many it could decrypt (must be 0)
    and how many said they were redacted."""
    import memvault
    from conftest import PASSPHRASE
    from memvault.erasure.redact import file_versions
    from memvault.errors import RedactedError
    from memvault.history import read_at

    counts = {"decrypted": 0, "redacted": 0}
    with memvault.MemoryStore.open(config["url"], passphrase=PASSPHRASE) as store:
        for path in config["secrets"]:
            for version in file_versions(store, path):
                try:
                    read_at(store, version.path, version.commit_id)
                    counts["decrypted"] += 1
                except RedactedError:
                    counts["redacted"] += 1
    return counts


# --- the parent -----------------------------------------------------------------------------------


def _spawn(role: str, config: dict[str, Any], env: dict[str, str], errors: Path) -> subprocess.Popen[str]:
    """A host process; its stderr goes to ``errors`` (its stdout is read by a :class:`_Reader`)."""
    cmd = [sys.executable, str(Path(__file__)), role, json.dumps(config)]
    with errors.open("w") as err:
        return subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=err, text=True)


def _finish(name: str, proc: subprocess.Popen[str], reader: _Reader, errors: Path) -> None:
    proc.wait()
    reader.join()
    tail = errors.read_text(errors="replace")[-3000:]
    assert proc.returncode == 0 and not reader.noise, f"{name} (status {proc.returncode}): {reader.noise} {tail}"


class _Reader(threading.Thread):
    """Collects a child's JSON lines as they come (and its stderr at the end)."""

    def __init__(self, proc: subprocess.Popen[str], on_line: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(daemon=True)
        self.proc, self.on_line, self.lines = proc, on_line, list[dict[str, Any]]()
        self.noise: list[str] = []  #: lines that are no JSON (nothing else should print)

    def run(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                entry = json.loads(raw)
            except ValueError:
                self.noise.append(raw[:300])
                continue
            self.lines.append(entry)
            self.on_line(entry)


def _inject_faults(proxy: Any, size: SoakSize, bucket: str, prefix: str, stop: threading.Event) -> Counter[str]:
    rng = random.Random(size.seed)
    added: Counter[str] = Counter()
    while not stop.wait(size.fault_interval):
        if size.max_faults and sum(added.values()) >= size.max_faults:
            continue
        kind = rng.choice(FAULT_KINDS)
        method = rng.choice([None, "PUT", "GET", "GET"])
        proxy.add_fault(f"slow:{size.slow_seconds}" if kind == "slow" else kind, method=method,
                        key_regex=f"^/{bucket}/{prefix}/")  # fmt: skip
        added[kind] += 1
    return added


def _faults_seen(proxy: Any, slow: float) -> dict[str, int]:
    """Requests the proxy failed or answered slowly, by kind, and how many came again after one."""
    log, timings = list(proxy.log), list(proxy.timings)
    seen: Counter[str] = Counter()
    retried = 0
    for i, ((method, path, status), (received, answered)) in enumerate(zip(log, timings, strict=True)):
        if status in _FAILED:
            seen[str(status)] += 1
            retried += any(m == method and p == path for m, p, _s in log[i + 1 : i + 200])
        elif answered - received >= 0.9 * slow:
            seen["slow"] += 1
    return {**seen, "total": sum(seen.values()), "retried_requests": retried, "requests": len(log)}


def run_soak(endpoint: str, proxy: Any, client: Any, bucket: str, base: Path, size: SoakSize) -> SoakResult:
    """Run the soak on a new store in ``bucket`` (hosts through ``proxy``, set-up and checks straight
    to moto at ``endpoint`` with ``client``); the caller's environment points AWS at moto."""
    import s3support

    t0 = time.monotonic()
    prefix = "soak"
    url = f"s3://{bucket}/{prefix}"
    result = SoakResult(url=url, base=base)
    setup = s3support.create_as_host(url, host_cache(url, base, "gc"))
    setup.close()
    rng = random.Random(size.seed)
    result.secrets = {
        f"/memories/redact/r{i}.md": f"SOAKSECRET{rng.getrandbits(64):016x}\n" for i in range(size.redactions)
    }
    go, final, gc_now = base / "go", base / "final", base / "gc-now"
    proxied = {**s3support.aws_environment(proxy.url)}
    common = {"url": url, "commit_window": size.commit_window, "go": str(go)}
    lock = threading.Lock()
    progress = Counter[str]()

    def on_line(entry: dict[str, Any]) -> None:
        with lock:
            if "ack" in entry:
                progress["acked"] += 1
            if "gc" in entry:
                result.gcs.append(entry)

    procs: dict[str, tuple[subprocess.Popen[str], _Reader]] = {}
    names = [f"host{i}" for i in range(size.hosts)] + ["gc"]
    for name in names:
        cache = host_cache(url, base, name)
        config = {**common, "cache": str(cache), "ready": str(base / f"ready-{name}")}
        if name == "gc":
            config.update(secrets=list(result.secrets.items()), gc_every=size.gc_every, grace=size.grace,
                          final=str(final), gc_now=str(gc_now))  # fmt: skip
        else:
            result.tokens[int(name[4:])] = f"{rng.getrandbits(32):08x}"
            config.update(host=int(name[4:]), commits=size.commits, token=result.tokens[int(name[4:])])
        proc = _spawn("gc" if name == "gc" else "writer", config, {**proxied, **host_env(cache)}, base / f"{name}.err")
        reader = _Reader(proc, on_line)
        reader.start()
        procs[name] = (proc, reader)
    for name in names:
        while not (base / f"ready-{name}").exists():
            if procs[name][0].poll() is not None:
                raise AssertionError(f"{name} failed to start: {(base / f'{name}.err').read_text()[-3000:]}")
            time.sleep(0.02)
    stop = threading.Event()
    added: Counter[str] = Counter()
    injector = threading.Thread(target=lambda: added.update(_inject_faults(proxy, size, bucket, prefix, stop)))
    injector.start()
    go.touch()
    writers = [procs[n][0] for n in names[:-1]]
    _pause_one(writers[-1], size, lambda: progress["acked"], result, gc_now, lock)
    for name in names[:-1]:
        _finish(name, *procs[name], base / f"{name}.err")
    stop.set()
    injector.join()
    result.objects_before_gc = bucket_totals(client, bucket, prefix)
    final.touch()
    _finish("gc", *procs["gc"], base / "gc.err")
    result.objects_after_gc = bucket_totals(client, bucket, prefix)
    for name, (_proc, reader) in procs.items():
        for entry in reader.lines:
            if "ack" in entry:
                assert entry["ack"] not in result.acked, f"acknowledged twice: {entry['ack']}"
                result.acked[entry["ack"]] = entry["path"]
                result.stats[f"how_{entry['how']}"] += 1
            elif "redacted" in entry:
                result.destroyed.update(entry["deks"])
            elif "stats" in entry:
                result.stats.update({k: v for k, v in entry["stats"].items() if isinstance(v, int)})
    result.faults = {f"added_{k}": v for k, v in added.items()} | _faults_seen(proxy, size.slow_seconds)
    direct = s3support.aws_environment(endpoint)
    checks = {}
    for name in [*names, "new"]:  # "new": a host that opens from the checkpoint (no redacted ciphertext)
        env = {**direct, **host_env(host_cache(url, base, name))}
        proc = _spawn("verify", {"url": url, "secrets": list(result.secrets)}, env, base / f"verify-{name}.err")
        checks[name] = (proc, _Reader(proc, lambda _entry: None))
        checks[name][1].start()
    for name, (proc, reader) in checks.items():
        _finish(f"verify {name}", proc, reader, base / f"verify-{name}.err")
        result.verify[name] = reader.lines[-1]["verify"]
    result.seconds = time.monotonic() - t0
    return result


def _pause_one(proc: subprocess.Popen[str], size: SoakSize, acked: Callable[[], int], result: SoakResult,
               gc_now: Path, lock: threading.Lock) -> None:  # fmt: skip
    """SIGSTOP ``proc`` once ``pause_at`` of the commits are in, until a compaction started after
    the pause has ended (asked for with ``gc_now``) and ``min_pause`` passed; then SIGCONT."""
    total = size.hosts * size.commits
    while acked() < size.pause_at * total and proc.poll() is None:
        time.sleep(0.05)
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGSTOP)
    stopped = time.time()
    gc_now.touch()
    try:
        while True:
            time.sleep(0.05)
            with lock:
                inside = [g for g in result.gcs if g["started"] >= stopped]
            now = time.time()
            if (inside and now - stopped >= size.min_pause) or now - stopped >= size.max_pause:
                break
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    resumed = time.time()
    result.paused = {"seconds": resumed - stopped, "compactions_inside": len(inside),
                     "longest_compaction_inside": max((g["ended"] - g["started"] for g in inside), default=0.0)}  # fmt: skip


def check_soak(result: SoakResult, client: Any, bucket: str) -> tuple[list[str], dict[str, Any]]:
    """Read the store as a new host and every object of the bucket: the problems found (none
    expected) and the figures of the run."""
    import s3support
    from conftest import object_views
    from memvault.errors import PathNotFoundError, RedactedError
    from memvault.history import log, read_at

    problems: list[str] = []
    check = s3support.open_as_host(result.url, result.base / "check")
    history = list(reversed(log(check)))  # oldest first
    if [e.seq for e in history] != list(range(len(history))):
        problems.append("the history is not linear")
    sessions = Counter(e.session for e in history)
    ours = {s for s in sessions if s.startswith(("h", "dpo-"))}
    lost = sorted(set(result.acked) - set(sessions))
    doubled = sorted(s for s in ours if sessions[s] > 1)
    unacked = sorted(ours - set(result.acked))
    problems += [f"lost: {s}" for s in lost[:20]] + [f"doubled: {s}" for s in doubled[:20]]
    problems += [f"committed, never acknowledged: {s}" for s in unacked[:20]]
    if sessions["soak-redact"] != len(result.secrets):
        problems.append(f"{sessions['soak-redact']} redact commits, {len(result.secrets)} redactions")
    # The head: exactly the writers' acknowledged files, each with its content.
    expected = {}
    for session, path in result.acked.items():
        if session.startswith("h"):
            host, k = (int(x[1:]) for x in session.split("-"))
            expected[path] = f"host {host} commit {k} {result.tokens[host]}\n"
    head = {e.path: check.read_text(e.path) for e in check.list("/memories", recursive=True) if e.kind == "file"}
    if head != expected:
        wrong = sorted(set(head) ^ set(expected) | {p for p in head if head[p] != expected.get(p)})
        problems.append(f"{len(wrong)} files differ at the head, e.g. {wrong[:5]}")
    # Every version a host can decrypt: each path a commit changed, read at that commit.
    secrets = [t.strip().encode() for t in result.secrets.values()]
    read = redacted = 0
    for info in history:
        for path in info.paths:
            try:
                data = read_at(check, path, info.commit_id)
            except RedactedError:
                redacted += 1
                continue
            except PathNotFoundError:
                continue
            read += 1
            if any(secret in data for secret in secrets):
                problems.append(f"redacted text readable at #{info.seq}")
    # Every object, raw and inflated, pack entries one by one.
    destroyed = {bytes.fromhex(d) for d in result.destroyed}
    prefix = result.url.split("/", 3)[3]
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
    for key in keys:
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        views = [view for _kind, view in object_views(key, data)]
        for kind, body in object_views(key, data):
            if kind == 3 and body[:4] == b"MVB1" and body[44:60] in destroyed:
                problems.append(f"{key} holds the ciphertext of a destroyed key")
        if "/deks/" in key and any(d in data or d.hex().encode() in data for d in destroyed):
            problems.append(f"{key} holds a destroyed data key")
        for view in views:
            if any(secret in view for secret in secrets):
                problems.append(f"redacted text in {key}")
    check.close()
    for name, found in result.verify.items():
        if found["verify"]["status"] != 0 or not found["verify"].get("ok", False):
            problems.append(f"verify on {name}: {found['verify'].get('problems')}")
        if found["remote"]["status"] != 0 or found["remote"].get("orphans") != 0:
            problems.append(f"verify --remote on {name}: {found['remote'].get('orphans')} orphans")
        if found["redacted_reads"]["decrypted"]:
            problems.append(f"{name} decrypted {found['redacted_reads']['decrypted']} redacted version(s)")
    figures = {
        "hosts": len(result.tokens), "commits": len(history), "acknowledged": len(result.acked),
        "lost": len(lost), "doubled": len(doubled), "unacknowledged": len(unacked),
        "redactions": len(result.secrets), "destroyed_keys": len(result.destroyed),
        "versions_read": read, "versions_redacted": redacted, "objects_scanned": len(keys),
        "gcs": len(result.gcs), "checkpoints": len({g["checkpoint"] for g in result.gcs} - {None}),
        "faults": result.faults, "paused": result.paused, "host_stats": dict(result.stats),
        "objects_before_final_gc": result.objects_before_gc, "objects_after_final_gc": result.objects_after_gc,
        "seconds": round(result.seconds, 1),
    }  # fmt: skip
    return problems, figures


def gc_size_check(
    url: str, base: Path, client: Any, bucket: str, commits: int, note_bytes: int = 200
) -> dict[str, Any]:
    """``commits`` commits (init included) on a new store as one host, then ``gc`` with grace 0:
    objects and bytes in the bucket before and after, against the host's replica (packs merged, as
    ``benchmarks/bench_s3_gc.py`` measures)."""
    import s3support
    from memvault.admin.remote_gc import compact_remote
    from memvault.protocol.commands import run_command

    prefix = url.split("/", 3)[3]
    cache = base / "writer"
    store = s3support.create_as_host(url, cache)
    t0 = time.monotonic()
    for i in range(commits - 1):
        text = f"note {i}\n" + "x" * note_bytes
        run_command(store, {"command": "create", "path": f"/memories/n{i}.md", "file_text": text},
                    actor="bench", session="w")  # fmt: skip
    seconds = time.monotonic() - t0
    store.maintain()
    replica = tree_bytes(cache)
    before = bucket_totals(client, bucket, prefix)
    t0 = time.monotonic()
    compact_remote(store, grace=0)
    gc_seconds = time.monotonic() - t0
    after = bucket_totals(client, bucket, prefix)
    head = store.head[1]
    store.close()
    return {"commits": head + 1, "commit_seconds": round(seconds, 1), "gc_seconds": round(gc_seconds, 1),
            "objects_before": before[0], "bytes_before": before[1], "objects_after": after[0],
            "bytes_after": after[1], "replica_bytes": replica, "ratio": round(after[1] / replica, 3)}  # fmt: skip


def main() -> int:
    """Run one host of the soak (see the module docstring)."""
    role, config = sys.argv[1], json.loads(sys.argv[2])
    return {"writer": run_writer, "gc": run_gc, "verify": run_verify}[role](config)


if __name__ == "__main__":
    sys.exit(main())
