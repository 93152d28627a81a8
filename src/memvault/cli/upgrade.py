"""``memvault upgrade``: move a store to the newest on-disk format version (docs/format.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ExitStatus
from ._common import open_store as _open
from ._common import print_json

__all__ = ["register"]


def _cmd_upgrade(args: argparse.Namespace) -> int:
    with _open(args) as store:
        old, new = store.upgrade_format()
    if args.json:
        print_json({"old_version": old, "version": new, "changed": old != new})
    elif old == new:
        print(f"The store is already at format version {new}.")
    else:
        print(f"Upgraded the store from format version {old} to {new}.")
        print("memvault releases that only read version 1 no longer open it.")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser("upgrade", help="move the store to the newest format version (smaller records from now on)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_upgrade)
