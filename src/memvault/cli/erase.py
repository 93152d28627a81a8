"""``memvault shred-store``: destroy the whole store (key slots and data keys first), after a
confirmation (``--yes`` for scripts), and print a receipt to file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ExitStatus, InvalidInputError
from ._common import fmt_time, open_store, print_json, store_path

__all__ = ["register"]


def _cmd_shred_store(args: argparse.Namespace) -> int:
    from ..erasure.destroy import shred_store

    store = open_store(args)
    if not args.yes:
        if not sys.stdin.isatty():
            store.close()
            raise InvalidInputError("shred-store destroys the store for good: add --yes to confirm (no terminal).")
        answer = input(f"Destroy memory store {store.store_id.hex()} at {store_path(args)} for good? Type its id: ")
        if answer.strip() != store.store_id.hex():
            store.close()
            raise InvalidInputError("Not confirmed; nothing was changed.")
    receipt = shred_store(store)  # the store object is done with: not closed (its directory is gone)
    if args.json:
        print_json(receipt.to_json())
        return ExitStatus.SUCCESS
    print(f"Destroyed memory store {receipt.store_id} at {fmt_time(receipt.time)}:")
    print(f"  {receipt.key_slots} key slot(s) and {receipt.data_keys} data key(s) overwritten and removed,")
    print(
        f"  {receipt.commits} commit(s) of history now undecryptable, {receipt.files_overwritten} file(s) overwritten"
    )
    if receipt.objects_deleted:
        print(f"  {receipt.objects_deleted} object(s) deleted from object storage")
    print("Copies this cannot reach:")
    for item in receipt.remaining_copies:
        print(f"  - {item}")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser("shred-store", help="destroy the whole store: key slots and data keys first, then the rest")
    s.add_argument("--yes", action="store_true", help="do not ask for confirmation (scripts)")
    s.add_argument("--json", action="store_true", help="machine-readable receipt")
    s.set_defaults(func=_cmd_shred_store)
