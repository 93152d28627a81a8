"""``memvault expire --unused-for 90d``: delete files nobody read or wrote for that long.

One commit attributed to ``--actor`` (default ``operator``) deletes them all; ``memvault restore``
or ``revert`` brings them back. ``--dry-run`` lists them and changes nothing.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from ..protocol import format_size
from ._common import fmt_time, print_json, terminal_safe
from ._common import open_store as _open

if TYPE_CHECKING:
    from ..expiry import ExpireResult

__all__ = ["register", "format_result"]


def format_result(result: ExpireResult) -> str:
    since = fmt_time(result.cutoff)
    n = len(result.files)
    if not result.files:
        return f"No file unused since {since}: nothing to expire.\n"
    files = f"{n} file{'s' if n != 1 else ''} unused since {since}"
    if result.dry_run:
        head = f"Would expire {files} (dry run, nothing changed):"
    else:
        head = f"Expired {files} in commit {(result.commit_id or '')[:10]} (#{result.seq}):"
    width = max(len(f.path) for f in result.files)
    lines = [head]
    for f in result.files:
        read = "never read" if f.last_read is None else f"read {fmt_time(f.last_read)}"
        lines.append(
            f"  {terminal_safe(f.path):<{width}}  {format_size(f.size):>7}  written {fmt_time(f.last_write)}, {read}"
        )
    return "\n".join(lines) + "\n"


def _cmd_expire(args: argparse.Namespace) -> int:
    from ..expiry import expire, parse_duration

    unused_for = parse_duration(args.unused_for)
    with _open(args) as store:
        result = expire(
            store,
            unused_for,
            actor=args.actor,
            session=args.session,
            dry_run=args.dry_run,
            assume_unread=args.assume_unread,
        )
    if args.json:
        print_json(result.to_json())
    else:
        print(format_result(result), end="")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser(
        "expire", help="delete, as one commit, the files not read or written for a while (e.g. --unused-for 90d)"
    )
    s.add_argument("--unused-for", required=True, metavar="DURATION", help="e.g. 90d, 12w, 36h (units s, m, h, d, w)")
    s.add_argument("--dry-run", action="store_true", help="list the files that would go; change nothing")
    s.add_argument(
        "--assume-unread",
        action="store_true",
        help="go on without the access-time file, taking every file as never read (refused otherwise)",
    )
    s.add_argument("--actor", default="operator", help="who the commit is attributed to (default: operator)")
    s.add_argument("--session", default="", help="session recorded with the commit (default: none)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_expire)
