#!/usr/bin/env python
"""Storage growth: the store's size on disk after N edits of one 5 KB note.

Creates a store with one ~5 KB note, then runs ``--edits`` str_replace commands through
``memvault.MemoryTool.call`` (one commit each; every edit changes a version marker). Afterwards
it reports the store directory like ``du`` (apparent bytes, allocated bytes, files, loose
objects, packs, keyring size) and compares it with the *useful* payload: the total padded
ciphertext of the note's versions, i.e. the sum of the sizes of the content blobs memvault wrote
(each is ``60 + 28 + padded_size(len(content))`` bytes, docs/format.md 4 and 5.1; the script
checks that formula against every blob it sees written).

Objects are tallied as they are written (``GitStore.write`` is wrapped in this process only):
content blobs (``MVB1``), index shard blobs (``MVI1``), trees and commits, with their raw sizes.

After the edits the store is closed (``close()`` packs loose objects for a few seconds), measured,
then packed completely with ``MemoryStore.maintain()`` (what ``memvault gc`` runs) and measured
again. For comparison, unless ``--no-pack``, copies of the closed store are packed outside
memvault: dulwich ``pack_loose_objects`` and, if installed, C git ``git gc`` (delta compression
of trees); each copy is reopened with memvault and the note viewed, to show it still reads.

    python benchmarks/bench_growth.py                 # 10,000 edits (several minutes)
    python benchmarks/bench_growth.py --edits 1000    # quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

PASSPHRASE = "memvault-growth-passphrase"
NOTE_PATH = "/memories/notes/growth.md"
NOTE_BYTES = 5 * 1024


def note_text() -> str:
    line = "- agent memory note about the customer meeting, the follow-up decision and its owner\n"
    body = (line * (NOTE_BYTES // len(line) + 1))[: NOTE_BYTES - 40]
    return "# Growth note\nversion: v000000\n" + body


def du(path: Path) -> dict[str, int]:
    """Apparent bytes (sum of st_size, directories included, like ``du --apparent-size``), the
    same for regular files only, allocated bytes (st_blocks * 512), files, directories."""
    apparent = allocated = files = dirs = file_bytes = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        dirs += 1
        st = os.lstat(dirpath)
        apparent += st.st_size
        allocated += st.st_blocks * 512
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            file_bytes += st.st_size
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return {"apparent": apparent, "file_bytes": file_bytes, "allocated": allocated, "files": files, "dirs": dirs}


def object_stats(store_root: Path) -> dict[str, int]:
    objects = store_root / "repo" / "objects"
    loose = loose_bytes = 0
    for d in objects.iterdir():
        if len(d.name) == 2 and d.is_dir():
            for f in d.iterdir():
                loose += 1
                loose_bytes += f.stat().st_size
    packs = list((objects / "pack").glob("*.pack")) if (objects / "pack").exists() else []
    keyring = sum(f.stat().st_size for f in store_root.iterdir() if f.is_file() and "keyring" in f.name)
    return {
        "loose_objects": loose,
        "loose_object_bytes": loose_bytes,
        "packs": len(packs),
        "pack_bytes": sum(p.stat().st_size for p in packs),
        "pack_index_bytes": sum(p.with_suffix(".idx").stat().st_size for p in packs if p.with_suffix(".idx").exists()),
        "keyring_bytes": keyring,
    }


def measure(store_root: Path) -> dict[str, Any]:
    return {"du": du(store_root), "objects": object_stats(store_root), "repo_du": du(store_root / "repo")}


def check_readable(store_root: Path, want: str) -> str:
    import memvault
    from memvault.protocol.commands import run_command

    store = memvault.MemoryStore.open(store_root, passphrase=PASSPHRASE)
    try:
        out = str(run_command(store, {"command": "view", "path": NOTE_PATH}, actor="bench", session="check"))
    finally:
        store.close()
    return "ok" if want in out else "MISMATCH"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--edits", type=int, default=10_000, help="str_replace edits, one commit each (default 10000)")
    p.add_argument("--durability", choices=("full", "none"), default="none",
                   help="store durability (does not change sizes; default none, for speed)")  # fmt: skip
    p.add_argument("--no-pack", action="store_true", help="skip the packing experiments on a copy")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--tmpdir", type=Path, default=None)
    args = p.parse_args(argv)

    import memvault
    from memvault import crypto
    from memvault.git.repo import GitStore

    written: Counter[str] = Counter()  # category -> bytes (raw object payload)
    counts: Counter[str] = Counter()
    loose_file_bytes: Counter[str] = Counter()
    formula_mismatch = 0
    content_sizes: list[int] = []
    original_write = GitStore.write
    original_write_pack = GitStore.write_pack

    def tally(self: GitStore, objects: list[Any]) -> None:
        for obj in objects:
            raw = obj.as_raw_string()
            if obj.type_name == b"blob":
                kind = "content blobs" if raw.startswith(b"MVB1") else "index shard blobs"
            else:
                kind = obj.type_name.decode() + "s"
            if self.contains(obj.id):  # not written again
                continue
            counts[kind] += 1
            written[kind] += len(raw)
            header = obj.type_name + b" " + str(len(raw)).encode() + b"\0"
            loose_file_bytes[kind] += len(zlib.compress(header + raw, 0))  # as a loose object
            if kind == "content blobs":
                content_sizes.append(len(raw))

    def tallying_write(self: GitStore, objects: Any) -> None:
        objects = list(objects)
        tally(self, objects)
        original_write(self, objects)

    def tallying_write_pack(self: GitStore, objects: Any, **kwargs: Any) -> None:
        objects = list(objects)  # a commit's objects (one pack each commit)
        tally(self, objects)
        original_write_pack(self, objects, **kwargs)

    GitStore.write = tallying_write  # type: ignore[method-assign]
    GitStore.write_pack = tallying_write_pack  # type: ignore[method-assign]

    base = Path(tempfile.mkdtemp(prefix="memvault-growth-", dir=args.tmpdir))
    started = time.perf_counter()
    try:
        root = base / "store"
        settings = memvault.StoreSettings(durability=args.durability)
        kdf = memvault.KdfParams(memory_kib=8, iterations=1, lanes=1)
        store = memvault.MemoryStore.create(root, passphrase=PASSPHRASE, kdf=kdf, settings=settings)
        tool = memvault.MemoryTool(store, actor="bench", session="growth")
        text = note_text()
        out = tool.call({"command": "create", "path": NOTE_PATH, "file_text": text})
        assert isinstance(out, str) and not out.startswith("Error"), out
        empty_plus_note = measure(root)
        content_len = len(text.encode())
        expected_blob = 60 + 28 + crypto.padded_size(content_len)
        t0 = time.perf_counter()
        latencies: list[float] = []
        for k in range(args.edits):
            t1 = time.perf_counter()
            out = tool.call({"command": "str_replace", "path": NOTE_PATH,
                             "old_str": f"version: v{k:06d}", "new_str": f"version: v{k + 1:06d}"})  # fmt: skip
            latencies.append(time.perf_counter() - t1)
            if not isinstance(out, str) or out.startswith("Error"):
                raise SystemExit(f"edit {k} failed: {out!r:.200}")
            if (k + 1) % 1000 == 0:
                print(f"[growth {time.strftime('%H:%M:%S')}] {k + 1:,} edits", file=sys.stderr, flush=True)
        edit_s = time.perf_counter() - t0
        store.close()
        formula_mismatch = sum(1 for s in content_sizes if s != expected_blob)
        after = measure(root)  # close() packed what fitted in its few seconds
        t0 = time.perf_counter()
        with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
            again.maintain()  # what `memvault gc` does
        gc_seconds = time.perf_counter() - t0
        after_gc = measure(root)
        versions = len(content_sizes)  # the create + every edit
        padded_total = sum(content_sizes)
        packed: dict[str, Any] = {}
        if not args.no_pack:
            copy = base / "copy-dulwich"
            shutil.copytree(root, copy, symlinks=True)
            from dulwich.repo import Repo

            t0 = time.perf_counter()
            repo = Repo(str(copy / "repo"))
            n_packed = repo.object_store.pack_loose_objects()
            repo.close()
            packed["dulwich pack_loose_objects"] = {
                "seconds": time.perf_counter() - t0, "objects": n_packed, **measure(copy),
                "readable": check_readable(copy, f"version: v{args.edits:06d}"),
            }  # fmt: skip
            shutil.rmtree(copy, ignore_errors=True)
            git = shutil.which("git")
            if git:
                copy = base / "copy-git"
                shutil.copytree(root, copy, symlinks=True)
                t0 = time.perf_counter()
                subprocess.run([git, "-C", str(copy / "repo"), "-c", "gc.auto=1", "gc", "--quiet", "--prune=now"],
                               check=True, capture_output=True)  # fmt: skip
                packed["git gc (C git, deltas)"] = {
                    "seconds": time.perf_counter() - t0, **measure(copy),
                    "readable": check_readable(copy, f"version: v{args.edits:06d}"),
                }  # fmt: skip
                shutil.rmtree(copy, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    result = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "edits": args.edits,
        "durability": args.durability,
        "note_bytes": content_len,
        "content_blob_bytes_each": expected_blob,
        "formula_mismatches": formula_mismatch,
        "versions": versions,
        "padded_ciphertext_total": padded_total,
        "written_raw": dict(written),
        "written_loose_file_bytes": dict(loose_file_bytes),
        "written_counts": dict(counts),
        "after_create": empty_plus_note,
        "after_edits": after,
        "after_gc": {**after_gc, "seconds": gc_seconds},
        "edit_seconds": edit_s,
        "edit_median_ms": statistics.median(latencies) * 1000 if latencies else 0.0,
        "packed_copies": packed,
        "total_s": time.perf_counter() - started,
    }
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def _mib(n: float) -> str:
    return f"{n / 2**20:,.2f} MiB"


def render(r: dict[str, Any]) -> str:
    out = ["storage growth: one 5 KB note, N str_replace edits via MemoryTool.call (one commit each)"]
    out.append(f"command: {r['command']}")
    out.append(f"date:    {r['date']}")
    out.append(f"edits:   {r['edits']:,} in {r['edit_seconds']:.0f} s (median {r['edit_median_ms']:.1f} ms per edit, "
               f"durability {r['durability']})")  # fmt: skip
    pt = r["padded_ciphertext_total"]
    out.append(f"note:    {r['note_bytes']:,} B plaintext -> content blob {r['content_blob_bytes_each']:,} B "
               f"(60 header + 28 nonce/tag + padded frame); {r['versions']:,} versions; formula mismatches: "
               f"{r['formula_mismatches']}")  # fmt: skip
    out.append(f"total padded ciphertext of the versions: {pt:,} B = {_mib(pt)}")
    out.append("")
    out.append("objects written (raw payload / as loose files at zlib level 0), per edit in brackets:")
    n = max(r["edits"], 1)
    for kind in ("content blobs", "index shard blobs", "trees", "commits"):
        c = r["written_counts"].get(kind, 0)
        out.append(f"  {kind:18} {c:>7,} objects  {_mib(r['written_raw'].get(kind, 0)):>12}  "
                   f"{_mib(r['written_loose_file_bytes'].get(kind, 0)):>12}  "
                   f"[{c / n:.2f} objects, {r['written_raw'].get(kind, 0) / n:,.0f} B]")  # fmt: skip
    out.append("")
    out.append("| state | apparent (du) | file bytes | allocated | files | dirs | loose objects | packs | keyring "
               "| allocated / padded ct |")  # fmt: skip
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def row(label: str, m: dict[str, Any]) -> str:
        d, o = m["du"], m["objects"]
        return (f"| {label} | {_mib(d['apparent'])} | {_mib(d['file_bytes'])} | {_mib(d['allocated'])} | "
                f"{d['files']:,} | {d['dirs']:,} | "
                f"{o['loose_objects']:,} | {o['packs']} | {_mib(o['keyring_bytes'])} | "
                f"{d['allocated'] / pt:.2f} |")  # fmt: skip

    out.append(row("after create (1 version)", r["after_create"]))
    out.append(row(f"after {r['edits']:,} edits and close() (packs for a few seconds)", r["after_edits"]))
    out.append(row(f"then `memvault gc` ({r['after_gc']['seconds']:.1f} s)", r["after_gc"]))
    for label, m in r["packed_copies"].items():
        out.append(row(f"copy after {label} ({m['seconds']:.1f} s; memvault reads it: {m['readable']})", m))
    out.append("")
    a = r["after_gc"]["du"]
    out.append(f"after {r['edits']:,} edits and gc: apparent (du) / padded ciphertext = {a['apparent'] / pt:.2f}; "
               f"file bytes / padded ciphertext = {a['file_bytes'] / pt:.2f}; "
               f"allocated / padded ciphertext = {a['allocated'] / pt:.2f}")  # fmt: skip
    out.append("apparent (du) counts directories (each object fan-out directory is 4 KiB or more); file bytes "
               "do not.")  # fmt: skip
    out.append(f"total wall time {r['total_s']:.0f} s")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
