"""``memvault upgrade``: move a store to the newest on-disk format version (docs/format.md).

Stop every other process using the store first: a running process keeps the encodings of the
version it opened, and one of a release that only knows version 1 would read the new records as
damage."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ExitStatus
from ._common import open_store as _open
from ._common import print_json

__all__ = ["register"]


def _cmd_upgrade(args: argparse.Namespace) -> int:
    with _open(args) as store:
        before = store.head[1]
        old, new = store.upgrade_format(actor=args.actor, session=args.session)
        refiled = store.head[1] != before
    if args.json:
        print_json({"old_version": old, "version": new, "changed": old != new or refiled, "commit": refiled})
    elif old == new and not refiled:
        print(f"The store is already at format version {new}.")
    else:
        if old != new:
            print(f"Upgraded the store from format version {old} to {new}.")
        if refiled:
            print("Wrote one upgrade commit (no file changed): the head refiled, earlier redactions chained or the "
                  "settings in force recorded, as needed.")  # fmt: skip
        print("memvault releases that only read version 1 no longer open it.")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser("upgrade", help="move the store to the newest format version (smaller records from now on)")
    s.add_argument("--actor", default="operator", help="who the commit is attributed to (default: operator)")
    s.add_argument("--session", default="", help="session recorded with the commit (default: none)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_upgrade)
