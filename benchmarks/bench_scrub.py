#!/usr/bin/env python
"""memvault's scrubber vs Yelp's detect-secrets on the same labelled notes, and what the scrubber costs, in one run.

For each tool and each corpus (the held-out corpus ``tests/scrub/heldout_corpus.jsonl``, the agent-notes
corpus ``tests/scrub/agent_corpus.jsonl``, the public examples ``tests/scrub/public_examples.jsonl`` and
the three parts of the dotted-quad corpus ``tests/scrub/quads_corpus.jsonl``: versions and section numbers
that are not addresses, and addresses next to the same wording) it prints:

- recall per kind: a labelled span counts as caught when any finding overlaps it (the finding's kind
  does not have to match), and recall over credential kinds and over personal-data kinds (ip and dob
  count as personal data);
- the benign-note false-positive rate: the fraction of notes without labelled spans that get any finding;
- false-positive findings: findings (in any note) that overlap no labelled span;
- throughput in MB/s (UTF-8 bytes of note text scanned per second of wall time; best of ``--repeat``);
- for memvault only, the notes in which ``redact()`` left a labelled value in the text.

Then, for memvault only:

- **benign notes**: MB/s on the benign notes of the held-out and agent corpora, scanned note by note
  (how a write uses it) and joined into one text (median of ``--repeat`` runs);
- **adversarial inputs**: the time (best of 3) and the peak memory allocated during the scan
  (``tracemalloc``) of 100 KiB texts built to make the scrubber work hard (``pin=`` repeated, dense
  findings of each kind, blocks without an end...), the worst of them last;
- **durable edits**: the scrubber's share of a ``str_replace`` and of an ``insert`` through the memory tool
  on a store with ``durability="full"``, on files of 1, 10 and 100 KiB of benign agent notes: the median
  time spent in the scrubber (``protocol.scrub_edit``, timed around each call) over the median time of
  the whole command (``--edits`` commands of each, after a warm-up).

detect-secrets is not a memvault dependency; install it into the venv for the benchmark only::

    pip install detect-secrets          # or: pip install -e '.[bench]'

It runs with every plugin and its default filters, no network verification, each note scanned as a
markdown file named ``memory.md`` through the line-based scanner that ``SecretsCollection.scan_file``
uses (``detect_secrets.core.scan._process_line_based_plugins``), without the file I/O. Its findings carry
the secret value and line number; the value is located in the line to get character offsets (all
occurrences; the whole line if the value cannot be found).

    python benchmarks/bench_scrub.py
    python benchmarks/bench_scrub.py --tools memvault --repeat 5 --edits 20
    python benchmarks/bench_scrub.py --json > scrub.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = ROOT / "tests" / "scrub" / "heldout_corpus.jsonl"
AGENT = ROOT / "tests" / "scrub" / "agent_corpus.jsonl"
PUBLIC = ROOT / "tests" / "scrub" / "public_examples.jsonl"
QUADS = ROOT / "tests" / "scrub" / "quads_corpus.jsonl"


def _generator_kinds() -> tuple[list[str], list[str]]:
    """The kind taxonomy of the held-out corpus generator (written from a list of kinds, not memvault's rules)."""
    spec = importlib.util.spec_from_file_location(
        "make_heldout_corpus", ROOT / "tests" / "scrub" / "make_heldout_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CREDENTIAL_KINDS), list(module.PERSONAL_KINDS)


CREDENTIAL_KINDS, PERSONAL_KINDS = _generator_kinds()


def load(path: Path) -> list[dict]:
    notes = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                notes.append(json.loads(line))
    return notes


# ----------------------------------------------------------------------------------------------
# tools: each is a callable text -> list of (start, end, kind)
# ----------------------------------------------------------------------------------------------


class MemvaultTool:
    name = "memvault"

    def __init__(self) -> None:
        from memvault.scrub import Scrubber

        self.scrubber = Scrubber()

    def version(self) -> str:
        try:
            v = importlib.metadata.version("memvault")
        except importlib.metadata.PackageNotFoundError:
            v = "unknown"
        try:
            rev = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", str(ROOT), "status", "--porcelain", "--", "src/memvault/scrub"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            if rev:
                v += f" (git {rev}{', scrub package modified' if dirty else ''})"
        except (OSError, subprocess.SubprocessError):
            pass
        return v

    def scan(self, text: str) -> list[tuple[int, int, str]]:
        return [(f.start, f.end, f.kind) for f in self.scrubber.scan(text)]

    def redact(self, text: str) -> str:
        return self.scrubber.redact(text)


class DetectSecretsTool:
    name = "detect-secrets"

    def __init__(self) -> None:
        from detect_secrets.core.scan import _process_line_based_plugins
        from detect_secrets.settings import default_settings

        self._process = _process_line_based_plugins
        self._ctx = default_settings()  # every plugin, default filters; no verification filter => no network
        self._ctx.__enter__()

    def close(self) -> None:
        self._ctx.__exit__(None, None, None)

    def version(self) -> str:
        return importlib.metadata.version("detect-secrets")

    def scan(self, text: str) -> list[tuple[int, int, str]]:
        lines = text.splitlines(keepends=True)
        starts, pos = [], 0
        for ln in lines:
            starts.append(pos)
            pos += len(ln)
        out = []
        for secret in self._process(lines=list(enumerate(lines, start=1)), filename="memory.md"):
            i = secret.line_number - 1
            line, base = lines[i].rstrip(), starts[i]
            value = secret.secret_value or ""
            hits, j = [], line.find(value) if value else -1
            while j >= 0:
                hits.append((base + j, base + j + len(value), secret.type))
                j = line.find(value, j + 1)
            out.extend(hits or [(base, base + len(line), secret.type)])
        return out


# ----------------------------------------------------------------------------------------------
# scoring
# ----------------------------------------------------------------------------------------------


def overlaps(a0: int, a1: int, b0: int, b1: int) -> bool:
    return a0 < b1 and b0 < a1


def evaluate(tool, notes: list[dict], repeat: int, check_redact: bool) -> dict:
    texts = [n["text"] for n in notes]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    best, findings = float("inf"), None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        res = [tool.scan(t) for t in texts]
        dt = time.perf_counter() - t0
        if dt < best:
            best, findings = dt, res
    caught, total = Counter(), Counter()
    fp_findings, fp_by_kind = 0, Counter()
    neg_notes = neg_flagged = 0
    for note, fs in zip(notes, findings, strict=True):
        spans = note["spans"]
        for s in spans:
            total[s["kind"]] += 1
            if any(overlaps(s["start"], s["end"], f0, f1) for f0, f1, _ in fs):
                caught[s["kind"]] += 1
        for f0, f1, fk in fs:
            if not any(overlaps(s["start"], s["end"], f0, f1) for s in spans):
                fp_findings += 1
                fp_by_kind[fk] += 1
        if not spans:
            neg_notes += 1
            neg_flagged += bool(fs)
    out = {
        "notes": len(notes),
        "bytes": nbytes,
        "seconds": best,
        "mb_per_s": nbytes / 1e6 / best if best else None,
        "per_kind": {k: [caught[k], total[k]] for k in CREDENTIAL_KINDS + PERSONAL_KINDS if total[k]},
        "negative_notes": neg_notes,
        "negative_notes_flagged": neg_flagged,
        "benign_fp_rate": neg_flagged / neg_notes if neg_notes else None,
        "fp_findings": fp_findings,
        "fp_findings_by_kind": dict(fp_by_kind.most_common()),
    }
    for group, kinds in (("credentials", CREDENTIAL_KINDS), ("personal", PERSONAL_KINDS)):
        c, t = sum(caught[k] for k in kinds), sum(total[k] for k in kinds)
        out[f"recall_{group}"] = c / t if t else None
        out[f"n_{group}"] = t
    c, t = sum(caught.values()), sum(total.values())
    out["recall_all"] = c / t if t else None
    if check_redact:
        leaks = 0
        for note in notes:
            clean = tool.redact(note["text"])
            if any(note["text"][s["start"] : s["end"]] in clean for s in note["spans"]):
                leaks += 1
        out["redact_leaking_notes"] = leaks
    return out


def pct(x) -> str:
    return "   n/a" if x is None else f"{100 * x:6.2f}"


def report(results: dict, tools: list[str], corpora: list[str]) -> str:
    lines = []
    for corpus in corpora:
        first = results[tools[0]][corpus]
        lines.append(
            f"\n=== corpus: {corpus} — {first['notes']} notes, {first['bytes'] / 1e6:.3f} MB, "
            f"{first['negative_notes']} benign ===\n"
        )
        head = f"{'kind':<26}{'n':>5}" + "".join(f"{t:>22}" for t in tools)
        lines += [head, "-" * len(head)]
        for group, kinds in (("credentials", CREDENTIAL_KINDS), ("personal data", PERSONAL_KINDS)):
            for k in kinds:
                if k not in first["per_kind"]:
                    continue
                n = first["per_kind"][k][1]
                cells = ""
                for t in tools:
                    c, n2 = results[t][corpus]["per_kind"][k]
                    cells += f"{c:>6}/{n2:<4}{pct(c / n2)}%"[:22].rjust(22)
                lines.append(f"{k:<26}{n:>5}{cells}")
            key = "credentials" if group == "credentials" else "personal"
            lines.append(
                f"{'recall: ' + group:<26}{first['n_' + key]:>5}"
                + "".join(f"{pct(results[t][corpus]['recall_' + key]) + '%':>22}" for t in tools)
            )
            lines.append("")
        rows = [
            ("recall: all labelled spans", lambda r: pct(r["recall_all"]) + "%"),
            (
                "benign notes with a finding",
                lambda r: f"{r['negative_notes_flagged']}/{r['negative_notes']} = {pct(r['benign_fp_rate']).strip()}%",
            ),
            ("false-positive findings", lambda r: str(r["fp_findings"])),
            ("throughput (MB/s)", lambda r: f"{r['mb_per_s']:.3f}"),
            ("scan time (s)", lambda r: f"{r['seconds']:.3f}"),
            ("redact() leaking notes", lambda r: str(r.get("redact_leaking_notes", "-"))),
        ]
        for label, fn in rows:
            lines.append(f"{label:<31}" + "".join(f"{fn(results[t][corpus]):>22}" for t in tools))
        for t in tools:
            fpk = results[t][corpus]["fp_findings_by_kind"]
            if fpk:
                lines.append(
                    f"  {t} false positives by reported kind: "
                    + ", ".join(f"{k} {v}" for k, v in list(fpk.items())[:12])
                )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# memvault only: benign throughput, adversarial inputs, durable edits
# ----------------------------------------------------------------------------------------------

#: 100 KiB texts built to make the scrubber work hard (each unit repeated): overlapping assignment
#: values, dense findings of every kind, blocks without an end, characters the scrubber folds.
ADVERSARIAL = [
    "pin=", "password=", "api_key='", "token: ", "secret=Ab3x", "1.1.1.1 ", "| 8.4.15.160 ", "a@bc.de ",
    "4539148803436467 ", "+1 212 555 0100 ", "ssn 123-45-6789 ", "DE89370400440532013000 ", "http://u:p@h ",
    "dob 1990-01-01 ", "-----BEGIN PRIVATE KEY-----\n", "Private-Lines: 1\nAAAA\n", "MIIEpAIBAAKCAQEA",
    '{"kty":"EC","d":"', "%40a", "a\u200b", "4111\u00a01111 ", "aws AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/ab ",
    "twilio 0123456789abcdef0123456789abcdef ", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc ",
    "aws_secret_access_key=", "SecretAccessKey: /AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/a ",
    "| 84.1.2.3 | 5.6.7.8 |\n", "- 4.2.1.3 and 84.1.2.3, ", "version 2.4.1.1 vs ",
]  # fmt: skip
ADVERSARIAL_BYTES = 100 * 1024


def benign_throughput(notes_by_corpus: dict[str, list[dict]], repeat: int) -> dict:
    """MB/s of memvault on the benign notes of each corpus, note by note and joined (medians)."""
    from memvault.scrub import Scrubber

    scrubber = Scrubber()
    scrubber.scan("compile the rules")
    out = {}
    for label, notes in notes_by_corpus.items():
        texts = [n["text"] for n in notes if not n["spans"]]
        if not texts:
            continue
        joined = "\n".join(texts)
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        per_note, whole = [], []
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            for t in texts:
                scrubber.scan(t)
            per_note.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            scrubber.scan(joined)
            whole.append(time.perf_counter() - t0)
        out[label] = {
            "notes": len(texts),
            "bytes": nbytes,
            "per_note_mb_per_s": nbytes / 1e6 / statistics.median(per_note),
            "joined_mb_per_s": len(joined.encode("utf-8")) / 1e6 / statistics.median(whole),
        }
    return out


def adversarial_costs() -> dict:
    """Time (best of 3) and peak allocated memory of scanning each adversarial 100 KiB text."""
    from memvault.scrub import Scrubber

    scrubber = Scrubber()
    scrubber.scan("compile the rules")
    out = {}
    for unit in ADVERSARIAL:
        text = (unit * (ADVERSARIAL_BYTES // len(unit) + 1))[:ADVERSARIAL_BYTES]
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            found = scrubber.scan(text)
            best = min(best, time.perf_counter() - t0)
        tracemalloc.start()
        scrubber.scan(text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out[unit] = {"seconds": best, "peak_bytes": peak, "findings": len(found)}
    return out


#: Bytes a file in :func:`edit_shares` leaves free for the lines its edits add.
_EDIT_ROOM = 128


def edit_shares(notes: list[dict], sizes: tuple[int, ...], edits: int) -> dict:
    """The scrubber's share of durable str_replace and insert commands on files of ``sizes`` bytes."""
    import memvault
    from memvault.protocol import commands as protocol

    benign = "\n".join(n["text"] for n in notes if not n["spans"])
    spent = [0.0]
    original = protocol.scrub_edit

    def timed(*args: object, **kwargs: object) -> str:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - t0

    protocol.scrub_edit = timed  # type: ignore[assignment]
    out: dict = {}
    try:
        for size in sizes:
            with tempfile.TemporaryDirectory() as tmp:
                store = memvault.MemoryStore.create(
                    Path(tmp) / "store",
                    passphrase="benchmark passphrase",
                    kdf=memvault.KdfParams(memory_kib=8, iterations=1, lanes=1),
                    settings=memvault.StoreSettings(durability="full"),
                )
                tool = memvault.MemoryTool(store)
                # the file takes the size asked for, less room for the edits (a little under the
                # store's 100 KiB file limit for the largest)
                budget = size - _EDIT_ROOM
                chunk = benign[:budget]
                while len(chunk.encode("utf-8")) > budget:
                    chunk = chunk[:-64]
                lines = chunk.rsplit("\n", 1)[0].split("\n")
                middle = len(lines) // 2
                text = "\n".join([*lines[:middle], "MARKER-0", *lines[middle:]]) + "\n"
                tool.call({"command": "create", "path": "/memories/notes.md", "file_text": text})
                runs: dict[str, tuple[list[float], list[float]]] = {"str_replace": ([], []), "insert": ([], [])}
                for i in range(edits + 3):  # the first three warm up
                    for command, call in (
                        ("str_replace", {"command": "str_replace", "path": "/memories/notes.md",
                                         "old_str": f"MARKER-{i}", "new_str": f"MARKER-{i + 1}"}),
                        ("insert", {"command": "insert", "path": "/memories/notes.md", "insert_line": middle // 2,
                                    "insert_text": f"- checked the queue depth ({i})\n"}),
                    ):  # fmt: skip
                        spent[0] = 0.0
                        t0 = time.perf_counter()
                        tool.call(call)
                        if i >= 3:
                            runs[command][0].append(time.perf_counter() - t0)
                            runs[command][1].append(spent[0])
                    tool.call({"command": "str_replace", "path": "/memories/notes.md",
                               "old_str": f"- checked the queue depth ({i})\n", "new_str": ""})  # fmt: skip
                store.close()
            out[str(size)] = {
                command: {
                    "command_ms": 1e3 * statistics.median(total),
                    "scrub_ms": 1e3 * statistics.median(scrub),
                    "share": statistics.median(scrub) / statistics.median(total),
                }
                for command, (total, scrub) in runs.items()
            }
            out[str(size)]["file_bytes"] = len(text.encode("utf-8"))
    finally:
        protocol.scrub_edit = original  # type: ignore[assignment]
    return out


def report_costs(costs: dict) -> str:
    lines = []
    bt = costs.get("benign_throughput")
    if bt:
        lines.append("\n=== memvault on benign notes (median of --repeat runs) ===\n")
        lines.append(f"{'corpus':<14}{'notes':>7}{'MB':>8}{'note by note MB/s':>20}{'joined MB/s':>14}")
        for label, r in bt.items():
            lines.append(
                f"{label:<14}{r['notes']:>7}{r['bytes'] / 1e6:>8.2f}{r['per_note_mb_per_s']:>20.1f}"
                f"{r['joined_mb_per_s']:>14.1f}"
            )
    adv = costs.get("adversarial")
    if adv:
        lines.append(
            f"\n=== memvault on adversarial {ADVERSARIAL_BYTES // 1024} KiB inputs (best of 3; peak traced) ===\n"
        )
        lines.append(f"{'unit repeated':<34}{'seconds':>9}{'peak MB':>9}{'findings':>10}")
        for unit, r in sorted(adv.items(), key=lambda kv: kv[1]["seconds"]):
            lines.append(f"{unit[:32]!r:<34}{r['seconds']:>9.3f}{r['peak_bytes'] / 1e6:>9.1f}{r['findings']:>10}")
        worst_t = max(r["seconds"] for r in adv.values())
        worst_m = max(r["peak_bytes"] for r in adv.values())
        lines.append(f"worst: {worst_t:.3f} s, {worst_m / 1e6:.1f} MB")
    ed = costs.get("edits")
    if ed:
        lines.append("\n=== scrubber's share of durable edits (durability=full; medians) ===\n")
        lines.append(f"{'file':>10}{'command':>13}{'command ms':>12}{'scrub ms':>10}{'share':>8}")
        for r in ed.values():
            for command in ("str_replace", "insert"):
                c = r[command]
                lines.append(
                    f"{r['file_bytes'] / 1024:>6.1f} KiB{command:>13}{c['command_ms']:>12.2f}{c['scrub_ms']:>10.3f}"
                    f"{100 * c['share']:>7.1f}%"
                )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heldout", type=Path, default=HELDOUT)
    ap.add_argument("--agent", type=Path, default=AGENT)
    ap.add_argument("--public", type=Path, default=PUBLIC)
    ap.add_argument("--quads", type=Path, default=QUADS)
    ap.add_argument("--tools", default="memvault,detect-secrets")
    ap.add_argument("--repeat", type=int, default=3, help="memvault scans each corpus this many times (best time)")
    ap.add_argument("--ds-repeat", type=int, default=1, help="same for detect-secrets (slow)")
    ap.add_argument("--edits", type=int, default=30, help="durable edits timed per command and file size")
    ap.add_argument("--no-costs", action="store_true", help="skip the memvault-only cost sections")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    instances = {}
    for t in tools:
        if t == "memvault":
            try:
                instances[t] = MemvaultTool()
            except ImportError as e:
                sys.exit(
                    f"bench_scrub: cannot import memvault.scrub ({e}); run from the repo venv "
                    f"(. .venv/bin/activate) after the scrubber exists, or pass --tools detect-secrets"
                )
        elif t == "detect-secrets":
            try:
                instances[t] = DetectSecretsTool()
            except ImportError:
                sys.exit(
                    "bench_scrub: detect-secrets is not installed. It is not a memvault dependency; install it "
                    "into the venv for the benchmark only:  pip install detect-secrets   "
                    "(or run with --tools memvault)"
                )
        else:
            sys.exit(f"bench_scrub: unknown tool {t!r} (memvault, detect-secrets)")

    corpora = {}
    for label, path in (("held-out", a.heldout), ("agent", a.agent), ("public", a.public)):
        if path.exists():
            corpora[label] = load(path)
        else:
            print(f"bench_scrub: {path} not found, skipping the {label} corpus", file=sys.stderr)
    if a.quads.exists():
        for note in load(a.quads):
            corpora.setdefault(f"quads {note['split']}", []).append(note)
    else:
        print(f"bench_scrub: {a.quads} not found, skipping the dotted-quad corpus", file=sys.stderr)
    if not corpora:
        sys.exit("bench_scrub: no corpus found")

    results: dict = defaultdict(dict)
    for t, inst in instances.items():
        for label, notes in corpora.items():
            print(f"[{t}] scanning {label} ({len(notes)} notes)...", file=sys.stderr, flush=True)
            results[t][label] = evaluate(
                inst, notes, a.repeat if t == "memvault" else a.ds_repeat, check_redact=(t == "memvault")
            )

    costs: dict = {}
    if "memvault" in instances and not a.no_costs:
        print("[memvault] benign throughput, adversarial inputs, durable edits...", file=sys.stderr, flush=True)
        benign = {label: notes for label, notes in corpora.items() if label in ("held-out", "agent")}
        costs["benign_throughput"] = benign_throughput(benign, max(3, a.repeat))
        costs["adversarial"] = adversarial_costs()
        edit_notes = corpora.get("agent") or corpora.get("held-out") or []
        costs["edits"] = edit_shares(edit_notes, (1024, 10 * 1024, 100 * 1024), a.edits)

    env = {
        "command": " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {t: inst.version() for t, inst in instances.items()},
        "corpora": {
            label: str(p)
            for label, p in (("held-out", a.heldout), ("agent", a.agent), ("public", a.public), ("quads", a.quads))
            if label in corpora or label == "quads" and a.quads.exists()
        },
    }
    if "detect-secrets" in instances:
        instances["detect-secrets"].close()
    if a.json:
        print(json.dumps({"environment": env, "results": results, "costs": costs}, indent=2))
        return 0
    print(f"$ {env['command']}")
    print(f"python {env['python']} on {env['platform']}")
    for t, v in env["versions"].items():
        print(f"{t}: {v}")
    print("a labelled span is caught when any finding overlaps it; ip and dob count as personal data")
    print(f"{env['cpus']} CPUs, load average {env['load_average']}")
    print(report(results, list(instances), list(corpora)))
    if costs:
        print(report_costs(costs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
