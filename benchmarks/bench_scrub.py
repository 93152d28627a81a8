#!/usr/bin/env python
"""memvault's scrubber vs Yelp's detect-secrets on the same labelled notes, in one run.

For each tool and each corpus (the held-out corpus ``tests/scrub/heldout_corpus.jsonl`` and the public
examples ``tests/scrub/public_examples.jsonl``) it prints:

- recall per kind: a labelled span counts as caught when any finding overlaps it (the finding's kind
  does not have to match), and recall over credential kinds and over personal-data kinds (ip and dob
  count as personal data);
- the benign-note false-positive rate: the fraction of notes without labelled spans that get any finding;
- false-positive findings: findings (in any note) that overlap no labelled span;
- throughput in MB/s (UTF-8 bytes of note text scanned per second of wall time; best of ``--repeat``);
- for memvault only, the notes in which ``redact()`` left a labelled value in the text.

detect-secrets is not a memvault dependency; install it into the venv for the benchmark only::

    pip install detect-secrets

It runs with every plugin and its default filters, no network verification, each note scanned as a
markdown file named ``memory.md`` through the line-based scanner that ``SecretsCollection.scan_file``
uses (``detect_secrets.core.scan._process_line_based_plugins``), without the file I/O. Its findings carry
the secret value and line number; the value is located in the line to get character offsets (all
occurrences; the whole line if the value cannot be found).

    python benchmarks/bench_scrub.py
    python benchmarks/bench_scrub.py --tools memvault --repeat 5
    python benchmarks/bench_scrub.py --json > scrub.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import platform
import shlex
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = ROOT / "tests" / "scrub" / "heldout_corpus.jsonl"
PUBLIC = ROOT / "tests" / "scrub" / "public_examples.jsonl"


def _generator_kinds() -> tuple[list[str], list[str]]:
    """The kind taxonomy of the held-out corpus generator (written from the issue, not memvault)."""
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heldout", type=Path, default=HELDOUT)
    ap.add_argument("--public", type=Path, default=PUBLIC)
    ap.add_argument("--tools", default="memvault,detect-secrets")
    ap.add_argument("--repeat", type=int, default=3, help="memvault scans each corpus this many times (best time)")
    ap.add_argument("--ds-repeat", type=int, default=1, help="same for detect-secrets (slow)")
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
    for label, path in (("held-out", a.heldout), ("public", a.public)):
        if path.exists():
            corpora[label] = load(path)
        else:
            print(f"bench_scrub: {path} not found, skipping the {label} corpus", file=sys.stderr)
    if not corpora:
        sys.exit("bench_scrub: no corpus found")

    results: dict = defaultdict(dict)
    for t, inst in instances.items():
        for label, notes in corpora.items():
            print(f"[{t}] scanning {label} ({len(notes)} notes)...", file=sys.stderr, flush=True)
            results[t][label] = evaluate(
                inst, notes, a.repeat if t == "memvault" else a.ds_repeat, check_redact=(t == "memvault")
            )

    env = {
        "command": " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {t: inst.version() for t, inst in instances.items()},
        "corpora": {label: str(p) for label, p in (("held-out", a.heldout), ("public", a.public)) if label in corpora},
    }
    if "detect-secrets" in instances:
        instances["detect-secrets"].close()
    if a.json:
        print(json.dumps({"environment": env, "results": results}, indent=2))
        return 0
    print(f"$ {env['command']}")
    print(f"python {env['python']} on {env['platform']}")
    for t, v in env["versions"].items():
        print(f"{t}: {v}")
    print("a labelled span is caught when any finding overlaps it; ip and dob count as personal data")
    print(report(results, list(instances), list(corpora)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
