#!/usr/bin/env python
"""What unlocking a store costs, per way to unlock a key slot: ``MemoryStore.open`` and the first
mutation after it, and how many calls each makes to the key provider.

Six ways, each with a small local store of its own (``bench_tool.py``'s notes, one seeding
transaction), take turns in one process, shuffled every round:

- ``passphrase``: a passphrase slot with the default Argon2id (``memvault.settings.DEFAULT_KDF``,
  what every store gets; the other benchmarks use a cheap one);
- ``key-file``: a raw 32-byte key file (HKDF);
- ``kms@<RTT>ms``: ``aws-kms:alias/...``, moto's KMS on loopback behind a ``FaultProxy`` adding an
  injected round-trip time to every request (0 and 20 ms by default), counting the requests;
- ``pkcs11``: ``pkcs11:token=...;object=...``, an AES key on a SoftHSM2 token made in a temp dir;
- ``command``: ``command:python examples/key_helper.py``, run through a counting wrapper.

Per round and way: time ``MemoryStore.open``, then a ``create`` (the first mutation), a ``view``, a
second ``create`` and a directory ``view`` through ``memvault.protocol.commands.run_command``; count the
provider calls (KMS requests at the proxy, helper runs, PKCS#11 sessions and unwraps, Argon2id and
key-file KEK derivations) during the open and during the commands. Prints medians, ratios to the
passphrase slot (median of per-round ratios), the calls per open and a PASS/FAIL line: no command
after open may call a provider or derive a key. Then, unless ``--fresh 0``, the same open and first
create in fresh processes (what a CLI invocation pays: imports, boto3, the PKCS#11 module).

Run ``python benchmarks/bench_keys.py --help``; see ``benchmarks/README.md``. Needs boto3,
moto[server], python-pkcs11 and SoftHSM2 (``softhsm2-util``); makes no request beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import json
import os
import random
import secrets
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))  # s3support (imported where needed: it imports pytest)

import bench_s3  # noqa: E402
import bench_tool  # noqa: E402

EXAMPLE_HELPER = ROOT / "examples" / "key_helper.py"
SOFTHSM_MODULES = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/local/lib/softhsm/libsofthsm2.so",
    "/opt/homebrew/lib/softhsm/libsofthsm2.so",
)
TOKEN, TOKEN_KEY, PIN = "memvault-bench", "bench-kek", "4711-0815"
KMS_ALIAS = "alias/memvault-bench"
PASSPHRASE = bench_tool.PASSPHRASE
#: Commands run after each open; the first and third are the timed mutations.
AFTER_OPEN = ("create", "view_file", "create", "view_dir")

#: Counter names. Provider calls and key derivations, counted by wrappers around memvault's
#: functions (in this process), at the KMS proxy and by the helper wrapper (one line per run).
ARGON2 = "Argon2id runs"
KEK = "KEK derivations"  # Argon2id (passphrase) or HKDF (key file): slots._derive_kek
KMS_UNWRAP, KMS_WRAP, KMS_CLIENT = "KmsProvider.unwrap", "KmsProvider.wrap", "KMS clients made"
HSM_UNWRAP, HSM_WRAP, HSM_SESSION = "HsmProvider.unwrap", "HsmProvider.wrap", "PKCS#11 sessions"
CMD_UNWRAP, CMD_WRAP = "CommandProvider.unwrap", "CommandProvider.wrap"
KMS_REQUEST = "KMS requests"  # + ":" + X-Amz-Target operation (Decrypt, Encrypt, ...)
HELPER_RUN = "helper runs"  # + ":" + op
#: The wrapped functions whose time is recorded, and the way each one is the key step of.
KEY_STEP = {"passphrase": KEK, "key-file": KEK, "kms": KMS_UNWRAP, "pkcs11": HSM_UNWRAP, "command": CMD_UNWRAP}

#: The counting wrapper around the example helper: appends the request's op to a file, then runs
#: the helper in the same interpreter (no second process), with the request on its standard input.
HELPER_WRAPPER = """\
import io, json, runpy, sys
count_file, helper = sys.argv[1], sys.argv[2]
data = sys.stdin.buffer.read()
try:
    op = str(json.loads(data).get("op", "?"))
except (ValueError, AttributeError):
    op = "?"
with open(count_file, "a") as f:
    f.write(op + "\\n")
sys.stdin = io.TextIOWrapper(io.BytesIO(data))
sys.argv = [helper]
runpy.run_path(helper, run_name="__main__")
"""

#: A fresh process's open and first create (``--fresh``); prints its phases as JSON.
FRESH_CHILD = """\
import json, sys, time
t0 = time.perf_counter()
import memvault
from memvault.protocol.commands import run_command
t1 = time.perf_counter()
store = memvault.MemoryStore.open(sys.argv[1], **json.loads(sys.argv[2]))
t2 = time.perf_counter()
run_command(store, {"command": "create", "path": sys.argv[3], "file_text": "fresh process\\n"},
            actor="bench", session="fresh")
t3 = time.perf_counter()
store.close()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "create_s": t3 - t2}))
"""


class BenchError(RuntimeError):
    pass


def _progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- counting -------------------------------------------------------------------------------------


class Meters:
    """Counters and total seconds of the wrapped functions, KMS requests and helper runs."""

    def __init__(self, helper_count_file: Path) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.seconds: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.lock = threading.Lock()
        self.helper_count_file = helper_count_file

    def add(self, name: str, seconds: float = 0.0) -> None:
        with self.lock:
            self.calls[name] += 1
            self.seconds[name] += seconds

    def snapshot(self) -> tuple[collections.Counter[str], collections.defaultdict[str, float]]:
        with self.lock:
            calls, seconds = collections.Counter(self.calls), collections.defaultdict(float, self.seconds)
        try:
            ops = self.helper_count_file.read_text().split()
        except FileNotFoundError:
            ops = []
        calls.update(f"{HELPER_RUN}:{op}" for op in ops)
        return calls, seconds

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        """Count every call of ``owner.attr`` under ``name`` and add up its time."""
        inner = getattr(owner, attr)

        @functools.wraps(inner)
        def metered(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - t0)

        setattr(owner, attr, metered)

    def install(self) -> None:
        """Wrap memvault's key derivations and the providers' wrap, unwrap and session functions."""
        import memvault.crypto
        import memvault.keys.slots
        from memvault.keys.command import CommandProvider
        from memvault.keys.hsm import HsmProvider
        from memvault.keys.kms import KmsProvider

        self.wrap(memvault.crypto, "argon2id", ARGON2)  # slots calls crypto.argon2id(...)
        self.wrap(memvault.keys.slots, "_derive_kek", KEK)  # unlock_master_keys calls it by its global name
        for cls, wrap_name, unwrap_name in ((KmsProvider, KMS_WRAP, KMS_UNWRAP), (HsmProvider, HSM_WRAP, HSM_UNWRAP),
                                            (CommandProvider, CMD_WRAP, CMD_UNWRAP)):  # fmt: skip
            self.wrap(cls, "wrap", wrap_name)
            self.wrap(cls, "unwrap", unwrap_name)
        self.wrap(HsmProvider, "_run", HSM_SESSION)  # one token session (open + login + find key) per call
        make_client = KmsProvider._kms

        def kms(provider: Any) -> Any:
            if provider._client is not None:
                return make_client(provider)
            t0 = time.perf_counter()
            try:
                return make_client(provider)
            finally:
                self.add(KMS_CLIENT, time.perf_counter() - t0)

        KmsProvider._kms = kms  # type: ignore[method-assign,assignment]


def delta(after: collections.Counter[str], before: collections.Counter[str]) -> collections.Counter[str]:
    out = collections.Counter(after)
    out.subtract(before)
    return +out


def kms_proxy(upstream: str, latency: float, meters: Meters) -> Any:
    """A ``FaultProxy`` in front of moto adding ``latency`` seconds to each request, counting each by
    its KMS operation (the ``X-Amz-Target`` header, ``TrentService.Decrypt``)."""
    import s3support

    class CountingProxy(s3support.FaultProxy):  # type: ignore[misc]
        def serve(self, handler: Any) -> None:
            target = handler.headers.get("X-Amz-Target", "") or f"{handler.command} {handler.path}"
            meters.add(f"{KMS_REQUEST}:{target.rpartition('.')[2]}")
            super().serve(handler)

    proxy = CountingProxy(upstream)
    proxy.latency = latency
    return proxy


# -- the ways to unlock ---------------------------------------------------------------------------


@dataclass
class Way:
    name: str
    kind: str  #: passphrase, key-file, kms, pkcs11, command
    unlock: dict[str, str]  #: keyword arguments of MemoryStore.create / open
    root: Path
    env: dict[str, str] = field(default_factory=dict)  #: set in os.environ before create and open
    name_rtt: float = 0.0  #: aws-kms: the injected RTT in ms
    setup: dict[str, Any] = field(default_factory=dict)
    #: per timed round: seconds
    open_s: list[float] = field(default_factory=list)
    key_s: list[float] = field(default_factory=list)
    client_s: list[float] = field(default_factory=list)  #: aws-kms: making the boto3 client, within key_s
    first_s: list[float] = field(default_factory=list)
    next_s: list[float] = field(default_factory=list)
    #: per timed round: calls during the open, and during the commands after it
    open_calls: list[collections.Counter[str]] = field(default_factory=list)
    after_calls: list[collections.Counter[str]] = field(default_factory=list)
    fresh: list[dict[str, float]] = field(default_factory=list)


def softhsm_token(base: Path) -> tuple[str, str]:
    """Initialise a SoftHSM2 token in ``base`` with an AES-256 key (as tests/integration/test_hsm.py
    does); set ``SOFTHSM2_CONF`` and memvault's PKCS#11 variables. Returns (module path, version)."""
    module = next((m for m in SOFTHSM_MODULES if os.path.exists(m)), None)
    util = shutil.which("softhsm2-util")
    if module is None or util is None:
        raise BenchError("SoftHSM2 is not installed (apt-get install softhsm2)")
    (base / "tokens").mkdir(parents=True)
    conf = base / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {base / 'tokens'}\nobjectstore.backend = file\nlog.level = ERROR\n")
    os.environ["SOFTHSM2_CONF"] = str(conf)  # before the module is loaded: it reads it once per process
    subprocess.run([util, "--init-token", "--free", "--label", TOKEN, "--pin", PIN, "--so-pin", "so-pin-1234"],
                   check=True, capture_output=True)  # fmt: skip
    import pkcs11

    token = pkcs11.lib(module).get_token(token_label=TOKEN)
    with token.open(user_pin=PIN, rw=True) as session:
        session.generate_key(pkcs11.KeyType.AES, 256, label=TOKEN_KEY, store=True)
    from memvault.keys.hsm import ENV_MODULE, ENV_PIN

    os.environ[ENV_MODULE] = module
    os.environ[ENV_PIN] = PIN
    version = subprocess.run([util, "--version"], capture_output=True, text=True).stdout.strip()
    return module, version


def make_ways(
    args: argparse.Namespace, base: Path, moto_url: str | None, meters: Meters
) -> tuple[list[Way], list[Any]]:
    """The ways to unlock ``args.ways`` names, each with its store's location and unlock arguments
    (stores not made yet), and the KMS proxies."""
    ways: list[Way] = []
    proxies: list[Any] = []
    if "passphrase" in args.ways:
        ways.append(Way("passphrase", "passphrase", {"passphrase": PASSPHRASE}, base / "s-passphrase"))
    if "key-file" in args.ways:
        key_file = base / "store.key"
        key_file.write_bytes(secrets.token_bytes(32))
        key_file.chmod(0o600)
        ways.append(Way("key-file", "key-file", {"key_file": str(key_file)}, base / "s-key-file"))
    if "kms" in args.ways:
        import boto3

        assert moto_url is not None
        kms = boto3.session.Session().client("kms", endpoint_url=moto_url)  # straight to moto, not counted
        key_id = kms.create_key(Description="memvault bench_keys")["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName=KMS_ALIAS, TargetKeyId=key_id)
        for rtt in args.rtts:
            proxy = kms_proxy(moto_url, rtt / 1000, meters)
            proxies.append(proxy)
            ways.append(Way(f"kms@{rtt:g}ms", "kms", {"key": f"aws-kms:{KMS_ALIAS}"}, base / f"s-kms{rtt:g}",
                            env={"AWS_ENDPOINT_URL": proxy.url}, name_rtt=rtt))  # fmt: skip
    if "pkcs11" in args.ways:
        ways.append(Way("pkcs11", "pkcs11", {"key": f"pkcs11:token={TOKEN};object={TOKEN_KEY}"}, base / "s-pkcs11"))
    if "command" in args.ways:
        helper_key = base / "helper.key"
        helper_key.write_bytes(secrets.token_bytes(32))
        helper_key.chmod(0o600)
        os.environ["MEMVAULT_HELPER_KEY_FILE"] = str(helper_key)
        wrapper = base / "counting_helper.py"
        wrapper.write_text(HELPER_WRAPPER)
        argv = [sys.executable, str(wrapper), str(meters.helper_count_file), str(EXAMPLE_HELPER)]
        ways.append(Way("command", "command", {"key": "command:" + shlex.join(argv)}, base / "s-command"))
    return ways, proxies


def create_store(way: Way, args: argparse.Namespace, workload: bench_tool.Workload, meters: Meters) -> None:
    """Create ``way``'s store with its key (default KDF for the passphrase), seed it in one
    transaction, close it; record the time and the provider calls of the create."""
    import memvault
    from memvault.paths import parse_path

    os.environ.update(way.env)
    settings = memvault.StoreSettings(durability=args.durability)
    before, _ = meters.snapshot()
    t0 = time.perf_counter()
    store = memvault.MemoryStore.create(way.root, settings=settings, **way.unlock)  # type: ignore[arg-type]
    created = time.perf_counter() - t0
    calls, _ = meters.snapshot()

    def seed(txn: Any) -> None:
        for path, text in workload.seed_files():
            txn.write_file(parse_path(path, settings), text.encode("utf-8"))

    store.transact(seed, command="seed", paths=("/memories",), actor="bench", session="seed")
    store.close()
    way.setup = {"create_s": created, "create_calls": dict(delta(calls, before))}


# -- timing ---------------------------------------------------------------------------------------


def one_round(way: Way, r: int, workload: bench_tool.Workload, meters: Meters, timed: bool) -> None:
    """Open ``way``'s store, run the commands after open, close it; record times and calls."""
    import memvault
    from memvault.protocol.commands import run_command

    os.environ.update(way.env)
    note = workload.note_path(r * 7 % workload.n)
    commands = {
        "create": lambda k: {"command": "create", "path": f"/memories/unlock/r{r:04d}-{k}.md",
                             "file_text": workload.create_texts[(r + k) % len(workload.create_texts)]},
        "view_file": lambda k: {"command": "view", "path": note},
        "view_dir": lambda k: {"command": "view", "path": "/memories/unlock"},
    }  # fmt: skip
    calls0, sec0 = meters.snapshot()
    t0 = time.perf_counter()
    store = memvault.MemoryStore.open(way.root, **way.unlock)  # type: ignore[arg-type]
    t1 = time.perf_counter()
    calls1, sec1 = meters.snapshot()
    times = []
    try:
        for k, name in enumerate(AFTER_OPEN):
            c0 = time.perf_counter()
            run_command(store, commands[name](k), actor="bench", session=f"{way.name}-{r}-{k}")
            times.append(time.perf_counter() - c0)
        calls2, _ = meters.snapshot()
    finally:
        store.close()
    if timed:
        way.open_s.append(t1 - t0)
        way.key_s.append(sec1[KEY_STEP[way.kind]] - sec0[KEY_STEP[way.kind]])
        way.client_s.append(sec1[KMS_CLIENT] - sec0[KMS_CLIENT])
        way.first_s.append(times[0])
        way.next_s.append(times[2])
        way.open_calls.append(delta(calls1, calls0))
        way.after_calls.append(delta(calls2, calls1))


def run_rounds(ways: list[Way], args: argparse.Namespace, workload: bench_tool.Workload, meters: Meters) -> list[float]:
    rng = random.Random(f"bench_keys/{args.seed}")
    round_s = []
    for r in range(args.warmup + args.runs):
        timed = r >= args.warmup
        if r == 0 or r == args.warmup:
            _progress(f"{'warm-up' if not timed else 'timed'} rounds ({args.warmup if not timed else args.runs}) ...")
        order = list(ways)
        rng.shuffle(order)
        gc.collect()
        t0 = time.perf_counter()
        for way in order:
            one_round(way, r, workload, meters, timed)
        if timed:
            round_s.append(time.perf_counter() - t0)
    return round_s


def run_fresh(ways: list[Way], args: argparse.Namespace, base: Path) -> None:
    """``--fresh`` rounds: each way's open and first create in a new interpreter (shuffled)."""
    rng = random.Random(f"bench_keys/fresh/{args.seed}")
    env = dict(os.environ)
    for r in range(args.fresh):
        order = list(ways)
        rng.shuffle(order)
        for way in order:
            cmd = [sys.executable, "-c", FRESH_CHILD, str(way.root), json.dumps(way.unlock),
                   f"/memories/fresh/r{r:03d}.md"]  # fmt: skip
            t0 = time.perf_counter()
            done = subprocess.run(cmd, env={**env, **way.env}, capture_output=True, text=True, cwd=base)
            wall = time.perf_counter() - t0
            if done.returncode != 0:
                raise BenchError(f"fresh process for {way.name} failed: {done.stderr.strip()[-500:]}")
            way.fresh.append({"wall_s": wall, **json.loads(done.stdout.strip().splitlines()[-1])})


# -- results --------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ratio(values: Sequence[float], base: Sequence[float]) -> float:
    """Median over rounds of (value / base) in the same round."""
    return _median([v / b for v, b in zip(values, base, strict=True) if b > 0])


def _counts(rows: Sequence[collections.Counter[str]]) -> dict[str, list[int]]:
    """Per counter name: [min, max] over the rows (0 where a row lacks it)."""
    names = sorted({n for row in rows for n in row})
    return {n: [min(row[n] for row in rows), max(row[n] for row in rows)] for n in names}


def summarize(ways: list[Way]) -> dict[str, Any]:
    base = next((w for w in ways if w.kind == "passphrase"), None)
    key_file = next((w for w in ways if w.kind == "key-file"), None)
    out: dict[str, Any] = {}
    for w in ways:
        open_first = [a + b for a, b in zip(w.open_s, w.first_s, strict=True)]
        row: dict[str, Any] = {
            "open_ms": _median(w.open_s) * 1000,
            "key_step_ms": _median(w.key_s) * 1000,
            "kms_client_ms": _median(w.client_s) * 1000 if w.kind == "kms" else None,
            "key_step_minus_client_ms": _median([k - c for k, c in zip(w.key_s, w.client_s, strict=True)]) * 1000
            if w.kind == "kms"
            else None,
            "first_create_ms": _median(w.first_s) * 1000,
            "next_create_ms": _median(w.next_s) * 1000,
            "open_plus_first_ms": _median(open_first) * 1000,
            "open_p25_p75_ms": [statistics.quantiles(w.open_s, n=4)[i] * 1000 for i in (0, 2)]
            if len(w.open_s) > 1
            else None,
            "calls_per_open": _counts(w.open_calls),
            "calls_after_open": dict(sum(w.after_calls, collections.Counter())),
            "commands_after_open": len(w.after_calls) * len(AFTER_OPEN),
            "setup": w.setup,
        }
        if base is not None:
            base_first = [a + b for a, b in zip(base.open_s, base.first_s, strict=True)]
            row["open_ratio"] = _ratio(w.open_s, base.open_s)
            row["first_create_ratio"] = _ratio(w.first_s, base.first_s)
            row["open_plus_first_ratio"] = _ratio(open_first, base_first)
        if key_file is not None:
            diffs = [a - b for a, b in zip(w.open_s, key_file.open_s, strict=True)]
            row["open_minus_key_file_ms"] = _median(diffs) * 1000
        if w.fresh:
            row["fresh_ms"] = {k: _median([f[k] for f in w.fresh]) * 1000 for k in w.fresh[0]}
            if base is not None and base.fresh:
                row["fresh_wall_ratio"] = _ratio([f["wall_s"] for f in w.fresh], [f["wall_s"] for f in base.fresh])
        out[w.name] = row
    return out


def checks(ways: list[Way], summary: dict[str, Any]) -> dict[str, Any]:
    """No provider call or key derivation during any command after open; exactly one unlock per open."""
    after = {w.name: summary[w.name]["calls_after_open"] for w in ways}
    expected = {
        "passphrase": {ARGON2: 1, KEK: 1},
        "key-file": {KEK: 1},
        "kms": {KMS_UNWRAP: 1, KMS_CLIENT: 1, f"{KMS_REQUEST}:Decrypt": 1},
        "pkcs11": {HSM_UNWRAP: 1, HSM_SESSION: 1},
        "command": {CMD_UNWRAP: 1, f"{HELPER_RUN}:unwrap": 1},
    }
    per_open = {}
    for w in ways:
        want = {n: [v, v] for n, v in expected[w.kind].items()}
        per_open[w.name] = summary[w.name]["calls_per_open"] == want
    return {
        "no_calls_after_open": all(not calls for calls in after.values()),
        "one_unlock_per_open": per_open,
        "passed": all(not calls for calls in after.values()) and all(per_open.values()),
    }


# -- report ---------------------------------------------------------------------------------------


def environment(base: Path, args: argparse.Namespace, softhsm_version: str) -> dict[str, Any]:
    from memvault.settings import DEFAULT_KDF

    env = bench_tool.environment(base)
    env["packages"] = {d: bench_tool._version(d)
                       for d in ("memvault", "cryptography", "boto3", "botocore", "moto", "python-pkcs11")}  # fmt: skip
    env["revision"] = bench_s3._revision()
    env["load"] = bench_s3._load()
    env["kdf"] = (f"passphrase slot: Argon2id m={DEFAULT_KDF.memory_kib} KiB, t={DEFAULT_KDF.iterations}, "
                  f"p={DEFAULT_KDF.lanes} (memvault.settings.DEFAULT_KDF, what every store gets; "
                  "cryptography's Argon2id)")  # fmt: skip
    env["providers"] = [
        f"aws-kms: moto {env['packages']['moto']} KMS on 127.0.0.1 (in this process) behind a proxy adding "
        f"{', '.join(f'{r:g}' for r in args.rtts)} ms per request; {KMS_ALIAS}",
        f"pkcs11: SoftHSM2 {softhsm_version} token in the temp dir, an AES-256 key; memvault loads the module "
        "once per process",
        f"command: {sys.executable} examples/key_helper.py (AES-256-GCM, key file) behind a counting wrapper in "
        "the same interpreter",
    ]
    return env


def _ms(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _r(v: float | None) -> str:
    return "n/a" if v is None else bench_tool._ratio(v)


def _calls_once(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "none"


def _calls_cell(counts: dict[str, list[int]]) -> str:
    parts = []
    for name, (lo, hi) in counts.items():
        parts.append(f"{name} {lo}" if lo == hi else f"{name} {lo}-{hi}")
    return ", ".join(parts) or "none"


def render(env: dict[str, Any], args: argparse.Namespace, ways: list[Way], summary: dict[str, Any],
           check: dict[str, Any], round_s: list[float], total_s: float) -> str:  # fmt: skip
    out: list[str] = []
    out.append("memvault key slots: MemoryStore.open and the first mutation after it, per way to unlock")
    out.append(f"command:  {env['command']}")
    out.append(f"date:     {env['date']}")
    out.append(f"machine:  {env['machine']}")
    out.append(f"temp dir: {env['tmp_filesystem']}")
    out.append(f"python:   {env['python']}; " + ", ".join(f"{k} {v}" for k, v in env["packages"].items()))
    out.append(f"memvault: at {env['revision']}")
    out.append(f"kdf:      {env['kdf']}; key file: HKDF-SHA256")
    for line in env["providers"]:
        out.append(f"provider: {line}")
    out.append(f"load:     at start {env['load']}; at end {env.get('load_end', '?')} (on {os.cpu_count()} CPUs)")
    out.append("")
    setup = "; ".join(
        f"{w.name} {w.setup['create_s'] * 1000:.0f} ms ({_calls_once(w.setup['create_calls'])})" for w in ways
    )
    out.append(f"stores: one per way, {args.size} notes of ~2 KB + {2 * bench_tool.EDIT_POOL} work files "
               f"(bench_tool.py's), one seeding transaction, durability {args.durability}")  # fmt: skip
    out.append(f"create (not timed below; calls made): {setup}")
    out.append("")
    out.append(f"## In one process: {args.runs} rounds after {args.warmup} warm-up, ways shuffled each round; "
               f"rounds {_ms(min(round_s))}-{_ms(max(round_s))} s; medians in ms")  # fmt: skip
    out.append("")
    out.append("| way | open | open p25-p75 | key step | open - key file | / passphrase | first create | "
               "/ passphrase | next create | open + first create | / passphrase |")  # fmt: skip
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in ways:
        s = summary[w.name]
        iqr = s["open_p25_p75_ms"]
        cells = [w.name, _ms(s["open_ms"]), f"{_ms(iqr[0])}-{_ms(iqr[1])}" if iqr else "n/a", _ms(s["key_step_ms"]),
                 _ms(s["open_minus_key_file_ms"]) if "open_minus_key_file_ms" in s else "n/a",
                 _r(s.get("open_ratio")), _ms(s["first_create_ms"]), _r(s.get("first_create_ratio")),
                 _ms(s["next_create_ms"]), _ms(s["open_plus_first_ms"]),
                 _r(s.get("open_plus_first_ratio"))]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("key step: time inside the slot's unlock (passphrase and key file: the KEK derivation; providers: "
               "their unwrap, for aws-kms including the new boto3 client); open - key file: median per-round "
               "difference to the key-file open; / passphrase: median of per-round ratios; next create: the "
               "second create after open (a view in between)")  # fmt: skip
    kms = [w for w in ways if w.kind == "kms"]
    if kms:
        out.append("aws-kms key step = the KMS client (made once per process and AWS environment) + the Decrypt: "
                   + "; ".join(f"{w.name} {_ms(summary[w.name]['kms_client_ms'])} + "
                               f"{_ms(summary[w.name]['key_step_minus_client_ms'])} ms" for w in kms))  # fmt: skip
        lo, hi = min(kms, key=lambda w: w.name_rtt), max(kms, key=lambda w: w.name_rtt)
        if hi.name_rtt > lo.name_rtt:
            span = hi.name_rtt - lo.name_rtt
            by_call = (
                summary[hi.name]["key_step_minus_client_ms"] - summary[lo.name]["key_step_minus_client_ms"]
            ) / span
            by_open = (summary[hi.name]["open_ms"] - summary[lo.name]["open_ms"]) / span
            out.append(f"sequential KMS round trips per open, estimated as (median at {hi.name_rtt:g} ms - median at "
                       f"{lo.name_rtt:g} ms) / {span:g} ms: of the Decrypt call {by_call:.2f}; of the whole open "
                       f"{by_open:.2f} (the client's time varies more)")  # fmt: skip
    out.append("")
    out.append(f"## Provider calls and key derivations: per open; during the {len(AFTER_OPEN)} commands after each "
               f"open ({', '.join(AFTER_OPEN)})")  # fmt: skip
    out.append("")
    out.append("| way | per open (min-max over rounds) | one unlock per open | commands after open | "
               "calls during them |")  # fmt: skip
    out.append("|---|---|---|---:|---|")
    for w in ways:
        s = summary[w.name]
        after = s["calls_after_open"]
        out.append(f"| {w.name} | {_calls_cell(s['calls_per_open'])} | "
                   f"{'yes' if check['one_unlock_per_open'][w.name] else 'NO'} | {s['commands_after_open']} | "
                   f"{_calls_once(after)} |")  # fmt: skip
    out.append("")
    out.append("counted: KMS requests at the proxy by X-Amz-Target; helper runs by the wrapper (one line per run); "
               "Argon2id runs, KEK derivations (slots._derive_kek), provider wrap/unwrap, PKCS#11 sessions "
               "(HsmProvider._run: open + login + find key) and boto3 KMS clients made, by wrappers in this "
               "process")  # fmt: skip
    total_cmds = sum(summary[w.name]["commands_after_open"] for w in ways)
    out.append(f"no provider call or key derivation in the {total_cmds} commands after open: "
               f"{'PASS' if check['no_calls_after_open'] else 'FAIL'}")  # fmt: skip
    fresh = [w for w in ways if w.fresh]
    if fresh:
        out.append("")
        out.append(f"## In a fresh process each (what a CLI call pays): {args.fresh} per way, shuffled; medians in ms")
        out.append("")
        out.append("| way | process wall | import memvault | open | first create | wall / passphrase |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for w in fresh:
            f = summary[w.name]["fresh_ms"]
            out.append(f"| {w.name} | {_ms(f['wall_s'])} | {_ms(f['import_s'])} | {_ms(f['open_s'])} | "
                       f"{_ms(f['create_s'])} | {_r(summary[w.name].get('fresh_wall_ratio'))} |")  # fmt: skip
        out.append("")
        out.append("open in a fresh process includes importing the provider's module (boto3, python-pkcs11) and, "
                   "for pkcs11, loading and initialising the PKCS#11 module; the first create there includes the "
                   "scrubber's one-time setup (its import and pattern compilation), alike for every way")  # fmt: skip
    out.append(f"overall: {'PASS' if check['passed'] else 'FAIL'}; total wall time {total_s:.0f} s")
    return "\n".join(out)


# -- main -----------------------------------------------------------------------------------------


@contextmanager
def _kms_server(args: argparse.Namespace) -> Iterator[str | None]:
    """moto's server on loopback and the AWS environment of tests/s3support.py pointing at it (test
    credentials, region, no profiles; undone on exit), if an aws-kms way runs; its URL, else None."""
    if "kms" not in args.ways:
        yield None
        return
    import pytest

    import s3support

    with s3support.moto_server() as moto_url, pytest.MonkeyPatch.context() as mp:
        s3support.make_s3_env(moto_url, mp)  # also makes an (unused) bucket
        yield moto_url


ALL_WAYS = ("passphrase", "key-file", "kms", "pkcs11", "command")


def _ways(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    if not names or any(n not in ALL_WAYS for n in names):
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(ALL_WAYS)}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=None, help="timed rounds; every figure is a median of them (default 40)")
    p.add_argument("--warmup", type=int, default=None, help="untimed rounds first (default 2)")
    p.add_argument("--size", type=int, default=None, help="notes in each store (default 100)")
    p.add_argument("--rtts", type=bench_s3._float_list, default=[0.0, 20.0],
                   help="injected KMS round-trip times in ms, one aws-kms way each (default 0,20)")  # fmt: skip
    p.add_argument("--ways", type=_ways, default=list(ALL_WAYS),
                   help=f"subset of {','.join(ALL_WAYS)} (default all)")  # fmt: skip
    p.add_argument("--fresh", type=int, default=None,
                   help="open + first create in a fresh process, this many per way (default 5; 0: skip)")  # fmt: skip
    p.add_argument("--durability", choices=("full", "none"), default="full", help="of every store (default full)")
    p.add_argument("--seed", type=int, default=1, help="seed of the round order (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON on stdout instead of the tables")
    p.add_argument("--quick", action="store_true", help="smoke run: 20 notes, 3 rounds, 1 warm-up, 1 fresh")
    p.add_argument("--tmpdir", type=Path, default=None, help="where to create the temporary stores and token")
    args = p.parse_args(argv)
    args.runs = args.runs if args.runs is not None else (3 if args.quick else 40)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    args.size = args.size or (20 if args.quick else 100)
    args.fresh = args.fresh if args.fresh is not None else (1 if args.quick else 5)
    if args.runs < 1 or args.warmup < 0 or args.size < 1 or args.fresh < 0:
        p.error("--runs and --size must be >= 1, --warmup and --fresh >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    _progress("importing memvault, boto3, moto and python-pkcs11 ...")
    import memvault.keys.hsm  # noqa: F401
    import memvault.keys.kms  # noqa: F401

    base = Path(tempfile.mkdtemp(prefix="memvault-bench-keys-", dir=args.tmpdir))
    saved = dict(os.environ)
    meters = Meters(base / "helper-runs.txt")
    proxies: list[Any] = []
    try:
        env_info: dict[str, Any] = {}
        softhsm_version = "not used"
        if "pkcs11" in args.ways:
            _progress("initialising a SoftHSM2 token ...")
            _module, softhsm_version = softhsm_token(base / "softhsm")
        env_info = environment(base, args, softhsm_version)
        meters.install()
        with _kms_server(args) as moto_url:
            ways, proxies = make_ways(args, base, moto_url, meters)
            workload = bench_tool.Workload(n=args.size, per_command=1, seed=args.seed)
            for way in ways:
                _progress(f"creating and seeding the {way.name} store ...")
                create_store(way, args, workload, meters)
            os.sync()
            round_s = run_rounds(ways, args, workload, meters)
            if args.fresh:
                _progress(f"fresh processes ({args.fresh} per way) ...")
                run_fresh(ways, args, base)
    except BenchError as err:
        print(f"benchmark failed: {err}", file=sys.stderr)
        return 1
    finally:
        for proxy in proxies:
            proxy.stop()
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(base, ignore_errors=True)
    total = time.perf_counter() - started
    env_info["load_end"] = bench_s3._load()
    summary = summarize(ways)
    check = checks(ways, summary)
    if args.json:
        given = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        doc = {"environment": env_info, "args": given, "ways": summary, "checks": check, "round_s": round_s,
               "total_s": round(total, 1)}  # fmt: skip
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(render(env_info, args, ways, summary, check, round_s, total))
    return 0 if check["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
