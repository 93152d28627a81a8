"""``memvault gc``: pack loose objects and merge packs (storage maintenance, never needed for
correctness). :meth:`MemoryStore.close` does the same for the objects a session wrote, within a
few seconds; this does all of it, for long-running writers or after an import. For a store in
object storage it also compacts the bucket (docs/format.md §12.8)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ExitStatus
from ._common import open_store as _open
from ._common import print_json

__all__ = ["register"]


def _cmd_gc(args: argparse.Namespace) -> int:
    with _open(args) as store:
        packed, merged = store.maintain()
        report = None
        if store.remote is not None:  # the bucket: checkpoint, merged pack, bundle, deletions (format.md §12.8)
            from ..admin.remote_gc import compact_remote

            report = compact_remote(store, args.grace)
        shredded = None
        if store.settings.retain_history_days is not None:  # the store's retention period
            from ..erasure.retention import apply_retention

            shredded = apply_retention(store, actor="gc")
        loose, packs = store.git.loose_count(), store.git.pack_count()
    versions = len(shredded.dek_ids) if shredded else 0
    if args.json:
        out: dict[str, Any] = {"packed": packed, "merged_packs": merged, "loose_objects": loose, "packs": packs,
                               "shredded_versions": versions}  # fmt: skip
        if report is not None:
            out["remote"] = {"checkpoint": report.checkpoint, "packs_merged": report.packs_merged,
                             "deleted": dict(report.deleted), "waiting": dict(report.waiting)}  # fmt: skip
        print_json(out)
    else:
        print(f"Packed {packed} loose objects; merged {merged} packs. Now {loose} loose objects and {packs} packs.")
        if report is not None:
            made = f"checkpoint at log position {report.checkpoint} ({report.packs_merged} packs merged into one)"
            print(f"Bucket: {made if report.checkpoint is not None else 'no new checkpoint'}; deleted "
                  f"{sum(report.deleted.values())} objects; {sum(report.waiting.values())} wait for the grace "
                  "period.")  # fmt: skip
        if shredded is not None:
            print(f"Retention: shredded {versions} version(s) older than the store's retain_history_days.")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser(
        "gc",
        help="pack loose objects and merge packs (storage maintenance); compacts a store in object storage",
        description="Pack loose objects and merge packs. For a store in object storage (s3://, file://), also "
        "compact the bucket: one checkpoint of the log, one pack, one data key bundle, then delete what they "
        "supersede and orphaned objects once the grace period has passed (docs/format.md §12.8).",
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument(
        "--grace",
        type=float,
        metavar="SECONDS",
        default=None,
        help="grace period before superseded or orphaned objects in object storage are deleted (default: "
        "$MEMVAULT_GC_GRACE, else 3600; keep it above 300 except in tests)",
    )
    s.set_defaults(func=_cmd_gc)
