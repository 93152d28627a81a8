"""``memvault redact``: erase file versions by destroying their keys (operator only).

The text to match is read from standard input (or a prompt), never from the command line,
since it is usually the secret itself.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from ..errors import ExitStatus, InvalidInputError
from ._common import fmt_time, open_store, print_json

__all__ = ["register"]


def _report(result: Any, as_json: bool) -> int:
    if as_json:
        print_json(result.to_json())
        return ExitStatus.SUCCESS
    if not result.versions:
        print("Nothing matched; nothing was redacted.")
        return ExitStatus.SUCCESS
    print(f"Redacted {len(result.versions)} version(s):")
    for v in result.versions:
        print(f"  {v.path}  version {v.version}  first in {v.commit_id[:10]} (#{v.seq})")
    if result.removed_from_head:
        print(
            f"Removed from the current state in commit {result.commit_id[:10]}: {', '.join(result.removed_from_head)}"
        )
    print("Copies memvault cannot reach may still exist:")
    for item in result.remaining_copies:
        print(f"  - {item}")
    return ExitStatus.SUCCESS


def _cmd_versions(args: argparse.Namespace) -> int:
    from ..shred import file_versions

    with open_store(args) as store:
        versions = file_versions(store, args.path)
        if args.json:
            print_json([v.to_json() for v in versions])
            return ExitStatus.SUCCESS
        for v in versions:
            meta = store.commit_meta(v.commit_id.encode())
            print(
                f"{v.commit_id[:10]}  #{v.seq:<4} {fmt_time(meta.time)}  {meta.actor:<10} version {v.version}  {v.path}"
            )
    return ExitStatus.SUCCESS


def _cmd_version(args: argparse.Namespace) -> int:
    from ..shred import shred_version

    with open_store(args) as store:
        result = shred_version(store, args.path, args.rev, actor=args.actor, reason=args.reason)
    return _report(result, args.json)


def _cmd_file(args: argparse.Namespace) -> int:
    from ..shred import shred_file

    with open_store(args) as store:
        result = shred_file(store, args.path, actor=args.actor, reason=args.reason)
    return _report(result, args.json)


def _cmd_matching(args: argparse.Namespace) -> int:
    from ..shred import shred_matching

    if sys.stdin.isatty():
        text = getpass.getpass("text to erase (not echoed): ")
    else:
        text = sys.stdin.read()
        text = text[:-1] if text.endswith("\n") else text
    if not text:
        raise InvalidInputError("No text to match was given on standard input.")
    with open_store(args) as store:
        result = shred_matching(store, text, actor=args.actor, reason=args.reason)
    return _report(result, args.json)


def register(sub: Any) -> None:
    red = sub.add_parser("redact", help="erase file versions by destroying their keys (history stays verifiable)")
    rsub = red.add_subparsers(dest="redact_cmd", required=True)
    s = rsub.add_parser("versions", help="list the versions of a file (across renames)")
    s.add_argument("path")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_versions)
    for name, func, helptext in (
        ("version", _cmd_version, "erase the version of PATH current at --rev"),
        ("file", _cmd_file, "erase every version of PATH (across renames)"),
        ("matching", _cmd_matching, "erase every version containing a text read from standard input"),
    ):
        s = rsub.add_parser(name, help=helptext)
        if name != "matching":
            s.add_argument("path")
        if name == "version":
            s.add_argument("--rev", required=True, help="the revision whose version of PATH to erase")
        s.add_argument("--actor", default="operator", help="who redacts (recorded, encrypted; default: operator)")
        s.add_argument("--reason", default="", help="why (recorded, encrypted)")
        s.add_argument("--json", action="store_true", help="machine-readable output")
        s.set_defaults(func=func)
