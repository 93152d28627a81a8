"""``memvault status``: the store at a glance (:func:`memvault.admin.status.store_status`).

No content and no secret is shown: where the store is, its format and durability, how many files
and bytes the head holds, the bytes of history on disk, the key slots by kind, the last commit,
whether another writer holds the lock, and for a store in object storage the objects under its
prefix by kind and its host's cache.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from ._common import fmt_time, open_store, print_json, store_path, terminal_safe

if TYPE_CHECKING:
    from ..admin.status import StoreStatus

__all__ = ["register", "format_status"]


def _size(n: int) -> str:
    from ..protocol.commands import format_size

    return f"{format_size(n)} ({n} bytes)" if n >= 1024 else f"{n} bytes"


def _short(n: int) -> str:
    from ..protocol.commands import format_size

    return format_size(n) if n >= 1024 else f"{n} bytes"


#: The words for each kind of object under a store's prefix (``remote.layout.OBJECT_KINDS``).
_KIND_NAMES = {"packs": "packs and indexes", "log": "log", "deks": "data keys", "other": "other"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_status(status: StoreStatus) -> list[str]:
    """The text output of ``memvault status``, one line each."""
    c = status.last_commit
    slots = ", ".join(f"{n} {kind}" for kind, n in sorted(status.key_slots.items()))
    history = f"{_size(status.history_bytes)} in {_plural(status.packs, 'pack')}"
    if status.loose_objects:
        history += f", {_plural(status.loose_objects, 'loose object')}"
    rows = [
        ("Store", terminal_safe(status.location)),
        ("Store id", status.store_id),
        ("Format", f"version {status.format_version}"),
        ("Durability", status.durability),
        ("Head", f"{_plural(status.files, 'file')}, {_size(status.bytes)}"),
        ("History", history + (" (this host's cache)" if status.remote is not None else "")),
        ("Key slots", f"{status.key_slot_count} ({slots})"),
        ("Last commit", f"{c.commit_id[:10]}  #{c.seq}  {fmt_time(c.time)}  {terminal_safe(c.actor)}  {c.command}"),
    ]
    lock = status.lock
    if not lock.held:
        rows.append(("Lock", "free"))
    elif lock.pid is None and lock.host is None:
        rows.append(("Lock", "held by another writer (holder unknown)"))
    else:
        who = f"pid {lock.pid if lock.pid is not None else 'unknown'}"
        who += f" on {terminal_safe(lock.host)}" if lock.host else ""
        rows.append(("Lock", f"held by {who}"))
    if status.branches:
        rows.append(
            (
                "Dream branches",
                f"{len(status.branches)} (open or merged; memvault dream list): " + ", ".join(status.branches),
            )
        )
    if status.remote is not None:
        r = status.remote
        b = r.bucket
        rows.append(
            (
                "Objects",
                f"{terminal_safe(r.description)}: {_plural(b.objects, 'object')}, {_size(b.bytes)}; "
                f"packs there: {_size(r.history_bytes)}",
            )
        )
        kinds = ", ".join(f"{_KIND_NAMES[kind]} {u.objects} ({_short(u.bytes)})" for kind, u in b.kinds.items())
        rows.append(("By kind", kinds))
        if r.superseded.objects:
            rows.append(
                (
                    "Superseded",
                    f"{_plural(r.superseded.objects, 'object')} ({_short(r.superseded.bytes)}) held by a newer "
                    "checkpoint: memvault gc deletes them once its grace period has passed",
                )
            )
        rows.append(
            (
                "Cache",
                f"{terminal_safe(r.cache_dir)} ({_size(r.cache_bytes)} of packs; bound {_size(r.cache_limit_bytes)}; "
                f"{_short(r.replica_bytes)} in all)",
            )
        )
    width = max(len(k) for k, _v in rows) + 1
    return [f"{k + ':':<{width}} {v}" for k, v in rows]


def _cmd_status(args: argparse.Namespace) -> int:
    from ..admin.status import store_status

    where = store_path(args)
    with open_store(args) as store:
        status = store_status(store, str(where) if store.remote is not None else os.path.abspath(store.root))
    if args.json:
        print_json(status.to_json())
    else:
        print("\n".join(format_status(status)))
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser(
        "status",
        help="the store at a glance: location, format, files, bytes, key slots, last commit, lock",
        description="Where the store is, its format version and durability, the files and bytes at the head, "
        "the bytes of history (packs on disk), the key slots by kind, the last commit, whether another writer "
        "holds the lock, and for a store in object storage the objects under its prefix by kind and this host's "
        "cache. No content is shown.",
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_status)
