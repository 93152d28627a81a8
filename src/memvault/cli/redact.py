"""``memvault redact``: erase file versions by destroying their keys (operator only).

The text to match is read from standard input (or a prompt), never from the command line,
since it is usually the secret itself. ``--dry-run`` lists what would be destroyed and changes
nothing; on a terminal (stdin and stderr) the erasing commands show the versions and ask before
destroying anything (``--yes`` does not ask; without a terminal nothing is asked).
"""

from __future__ import annotations

import argparse
import functools
import getpass
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus, InvalidInputError
from ._common import fmt_time, open_store, print_json

if TYPE_CHECKING:
    from ..erasure.redact import FileVersion, ShredResult

__all__ = ["register", "confirm"]

#: Versions listed in a confirmation before "... and N more".
_SHOWN = 20


def _line(v: FileVersion) -> str:
    return f"  {v.path}  version {v.version}  first in {v.commit_id[:10]} (#{v.seq})"


def _report(result: ShredResult, as_json: bool) -> int:
    if as_json:
        print_json(result.to_json())
        return ExitStatus.SUCCESS
    if result.dry_run:
        if not result.versions:
            print("Nothing matched; nothing would be redacted.")
            return ExitStatus.SUCCESS
        n = len(result.versions)
        print(f"Would redact {n} version(s), destroying {result.data_keys} data key(s) (dry run: nothing changed):")
        print("\n".join(_line(v) for v in result.versions))
        if result.removed_from_head:
            print(f"Would remove from the current state: {', '.join(result.removed_from_head)}")
        return ExitStatus.SUCCESS
    if not result.versions:
        print("Nothing matched; nothing was redacted.")
        return ExitStatus.SUCCESS
    print(f"Redacted {len(result.versions)} version(s):")
    for v in result.versions:
        print(_line(v))
    if result.removed_from_head:
        print(
            f"Removed from the current state in commit {(result.commit_id or '')[:10]}: "
            f"{', '.join(result.removed_from_head)}"
        )
    print("Copies memvault cannot reach may still exist:")
    for item in result.remaining_copies:
        print(f"  - {item}")
    return ExitStatus.SUCCESS


def confirm(question: str, lines: list[str]) -> bool:
    """Show ``lines`` and ``question`` on stderr and read y/yes from the terminal (anything else,
    end of input included, is no)."""
    for line in lines:
        print(line, file=sys.stderr)
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _asks(args: argparse.Namespace) -> bool:
    """Whether to ask before destroying: on a terminal (stdin and stderr), unless --yes."""
    return not args.yes and sys.stdin.isatty() and sys.stderr.isatty()


def _erase(args: argparse.Namespace, erase: Callable[..., ShredResult]) -> int:
    """Run ``erase`` as a dry run, after a confirmation on a terminal, or straight away."""
    if args.dry_run:
        return _report(erase(dry_run=True), args.json)
    expect = None
    if _asks(args):
        plan = erase(dry_run=True)
        if not plan.versions:
            return _report(plan, args.json)
        n = len(plan.versions)
        lines = [f"This destroys the data keys of {n} version(s); no one can read them again:"]
        lines += [_line(v) for v in plan.versions[:_SHOWN]]
        lines += [f"  ... and {n - _SHOWN} more (--dry-run lists them all)"] if n > _SHOWN else []
        if plan.removed_from_head:
            lines.append(f"It also removes from the current state: {', '.join(plan.removed_from_head)}")
        if not confirm(f"Redact {n} version(s)?", lines):
            raise InvalidInputError("Not confirmed; nothing was redacted.")
        expect = plan
    return _report(erase(expect=expect), args.json)


def _cmd_versions(args: argparse.Namespace) -> int:
    from ..erasure.redact import file_versions

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
    from ..erasure.redact import shred_version

    with open_store(args) as store:
        erase = functools.partial(shred_version, store, args.path, args.rev, actor=args.actor, reason=args.reason)
        return _erase(args, erase)


def _cmd_file(args: argparse.Namespace) -> int:
    from ..erasure.redact import shred_file

    with open_store(args) as store:
        return _erase(args, functools.partial(shred_file, store, args.path, actor=args.actor, reason=args.reason))


def _cmd_matching(args: argparse.Namespace) -> int:
    from ..erasure.redact import shred_matching

    if sys.stdin.isatty():
        text = getpass.getpass("text to erase (not echoed): ")
    else:
        text = sys.stdin.read()
        text = text[:-1] if text.endswith("\n") else text
    if not text:
        raise InvalidInputError("No text to match was given on standard input.")
    with open_store(args) as store:
        return _erase(args, functools.partial(shred_matching, store, text, actor=args.actor, reason=args.reason))


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
        s.add_argument(
            "--dry-run", action="store_true", help="list the versions that would be erased; destroy nothing, no commit"
        )
        s.add_argument("--yes", action="store_true", help="do not ask for confirmation on a terminal (scripts)")
        s.add_argument("--json", action="store_true", help="machine-readable output")
        s.set_defaults(func=func)
