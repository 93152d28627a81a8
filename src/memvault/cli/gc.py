"""``memvault gc``: pack loose objects and merge packs (storage maintenance, never needed for
correctness). :meth:`MemoryStore.close` does the same for the objects a session wrote, within a
few seconds; this does all of it, for long-running writers or after an import. For a store in
object storage it works on this host's cache, and deletes again the data key objects of every
destroyed key (a redaction that stopped before deleting them)."""

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
        if store.remote is not None:  # data key objects a redaction stopped before deleting
            with store.writing():
                store.remote.destroyed(store.keyring.destroyed_ids)
        shredded = None
        if store.settings.retain_history_days is not None:  # the store's retention period
            from ..erasure.retention import apply_retention

            shredded = apply_retention(store, actor="gc")
        loose, packs = store.git.loose_count(), store.git.pack_count()
    versions = len(shredded.dek_ids) if shredded else 0
    if args.json:
        print_json({"packed": packed, "merged_packs": merged, "loose_objects": loose, "packs": packs,
                    "shredded_versions": versions})  # fmt: skip
    else:
        print(f"Packed {packed} loose objects; merged {merged} packs. Now {loose} loose objects and {packs} packs.")
        if shredded is not None:
            print(f"Retention: shredded {versions} version(s) older than the store's retain_history_days.")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser("gc", help="pack loose objects and merge packs (storage maintenance)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_gc)
