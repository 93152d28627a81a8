"""``memvault repair-log``: for a store in object storage, list the objects of its log that are
not simply commits' records, and void (``--void SEQ``) an object that stops commits: the log
record's place cannot be freed (records are created once, and the bucket policy keeps them), so
a key holder's authenticated void steps over it (docs/format.md §12.6)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ExitStatus, InvalidInputError
from ._common import open_store, print_json

__all__ = ["register"]

_MEANING = {
    "junk": "not an authentic record at the next commit's place: commits stop (void it)",
    "beyond-gap": "beyond the next commit's place, with nothing between: commits stop (restore what was deleted, "
    "or void it with --yes)",
    "voided": "voided by a key holder: commits step over it",
    "stray": "at a later attempt of a commit already made: never read",
    "forged-void": "a void that does not verify: ignored",
}


def _cmd_repair_log(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        if store.remote is None:
            raise InvalidInputError("repair-log works on a store in object storage (s3:// or file://) only.")
        with store.writing():
            store.head  # noqa: B018 - brings the replica up to date under the lock
            voided = [] if args.void is None else store.remote.void(args.void, beyond_gap=args.yes)
            found = store.remote.log_findings()
            next_commit = store.remote.next_commit
    if args.json:
        print_json(
            {
                "voided": voided,
                "next_commit": next_commit,
                "findings": [{"kind": f.kind, "seq": f.seq, "key": f.key} for f in found],
            }
        )
        return ExitStatus.SUCCESS
    for key in voided:
        print(f"Voided {key}.")
    for f in found:
        print(f"{f.kind:<12} #{f.seq:<6} {f.key}  {_MEANING[f.kind]}")
    blocking = [f for f in found if f.kind in ("junk", "beyond-gap")]
    if blocking:
        print(f"Commits stop at #{next_commit}: memvault repair-log --void {blocking[0].seq}")
    else:
        print(f"Nothing stops commits; the next is #{next_commit}.")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser(
        "repair-log",
        help="store in object storage: list log objects that are not commits, void one that stops commits",
    )
    s.add_argument("--void", type=int, metavar="SEQ", help="void what stops commit number SEQ")
    s.add_argument(
        "--yes",
        action="store_true",
        help="also void objects beyond a gap (they cannot be authenticated: check for deleted records first)",
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_repair_log)
