"""A reviewed consolidation pass ("dream") over a memvault store, from Python.

Usage::

    export ANTHROPIC_API_KEY=sk-ant-...
    export MEMVAULT_KEY_FILE=~/mv/proj.key       # or MEMVAULT_PASSPHRASE=..., or MEMVAULT_KEY=aws-kms:alias/...
    python examples/dream.py --store ~/mv/proj [--transcripts ~/mv/transcripts] [--yes]

What it does, in order:

1. audits the memory (``memvault.admin.audit.audit``) and prints the findings;
2. runs Claude on a new dream branch (``memvault.dream.runner.run_dream``): ``main`` is not touched;
3. prints the decrypted diff of the dream from its fork point, its flagged changes (deletions,
   rewrites) and the audit before and after (``memvault.dream.review.dream_diff``);
4. asks whether to merge it (``--yes`` merges without asking); merging is one commit on ``main``
   by actor ``operator`` that ``memvault revert`` undoes, and a conflict with changes made on
   ``main`` meanwhile blocks it; declining discards the dream, destroying the data keys of what
   it wrote.

The same steps from the shell: ``memvault audit``, ``memvault dream``, ``memvault dream diff ID``,
``memvault dream merge ID`` (or ``discard``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import memvault
from memvault.admin.audit import audit
from memvault.dream.review import DreamConflictError, discard_dream, dream_diff, merge_dream
from memvault.dream.runner import DreamQuotas, run_dream
from memvault.errors import MemvaultError
from memvault.history import format_diff


def _open(store: str) -> memvault.MemoryStore:
    key_file = os.environ.get("MEMVAULT_KEY_FILE")
    key = os.environ.get("MEMVAULT_KEY")
    if key:
        return memvault.MemoryStore.open(store, key=key)
    if key_file:
        return memvault.MemoryStore.open(store, key_file=key_file)
    return memvault.MemoryStore.open(store, passphrase=os.environ["MEMVAULT_PASSPHRASE"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=os.environ.get("MEMVAULT_STORE", "memvault-store"))
    parser.add_argument("--transcripts", type=Path, help="a directory of session transcripts to learn from")
    parser.add_argument("--model", help="default: $MEMVAULT_DREAM_MODEL, else memvault's default")
    parser.add_argument("--max-changed-files", type=int, default=20)
    parser.add_argument("--yes", action="store_true", help="merge without asking")
    args = parser.parse_args(argv)
    try:
        with _open(args.store) as store:
            report = audit(store)
            print(f"audit of main: {len(report.findings)} finding(s)")
            for f in report.findings:
                print(f"  {f.kind}  {f.path}  {f.detail}")

            result = run_dream(
                store, model=args.model, transcripts=args.transcripts,
                quotas=DreamQuotas(max_changed_files=args.max_changed_files),
            )  # fmt: skip
            print(f"\ndream {result.dream_id}: {result.commits} commit(s), stopped: {result.stopped}")
            print(result.summary)

            review = dream_diff(store, result.dream_id)
            for path, flag in sorted(review.flags.items()):
                print(f"  ! {flag:<9} {path}")
            before, after = len(review.audit_before.findings), len(review.audit_after.findings)
            print(f"audit: {before} finding(s) before, {after} after")
            print(format_diff(review.files))

            if not review.files:
                discard_dream(store, result.dream_id)
                print("The dream changed nothing; discarded.")
                return 0
            if not args.yes and input("Merge this dream into main? [y/N] ").strip().lower() != "y":
                discarded = discard_dream(store, result.dream_id)
                print(f"Discarded: {discarded.keys_destroyed} data key(s) destroyed.")
                return 0
            try:
                merged = merge_dream(store, result.dream_id, actor="operator")
            except DreamConflictError as err:
                for conflict in err.conflicts:
                    print(conflict.render())
                print(f"{err} Resolve on main, then run `memvault dream merge {result.dream_id}`.")
                return 5
            print(f"Merged as commit #{merged.seq} {merged.commit[:12]}; undo: memvault revert {merged.commit[:12]}")
    except MemvaultError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())
