"""``memvault expire --unused-for 90d``: delete files nobody read or wrote for that long.

One commit attributed to ``--actor`` (default ``operator``) deletes them all; ``memvault restore``
or ``revert`` brings them back. ``--dry-run`` lists them and changes nothing.

``expire --history`` crypto-shreds old versions (a redaction: it cannot be undone): ``--dry-run``
lists them; on a terminal it shows how many and asks first (``--yes`` does not ask).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from ..protocol.commands import format_size
from ._common import fmt_time, print_json, terminal_safe
from ._common import open_store as _open

if TYPE_CHECKING:
    from ..erasure.expiry import ExpireResult
    from ..erasure.retention import ExpiredVersion

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


def _version_line(v: ExpiredVersion) -> str:
    shown = v.path + "/" if v.kind == "dir" else v.path
    return f"  {terminal_safe(shown)}  version {v.version}  left the head in {v.left_commit[:10]} (#{v.left_seq})"


def _cmd_history(args: argparse.Namespace) -> int:
    import functools
    import time

    from ..erasure.expiry import parse_duration
    from ..erasure.retention import apply_retention
    from ..errors import InvalidInputError
    from .redact import confirm

    if args.unused_for or args.assume_unread:
        raise InvalidInputError("--history expires old versions; it takes --older-than, not --unused-for.")
    days = None if args.older_than is None else parse_duration(args.older_than) / 86400
    with _open(args) as store:
        if days is None and store.settings.retain_history_days is None:
            raise InvalidInputError(
                "The store sets no retention period (retain_history_days): give one with --older-than DURATION "
                "(--older-than 90d), or set the store's: memvault config set retain_history_days 90."
            )
        run = functools.partial(apply_retention, store, days, actor=args.actor, session=args.session, now=time.time())
        if args.dry_run:
            result = run(dry_run=True)
        elif not args.yes and sys.stdin.isatty() and sys.stderr.isatty():
            plan = run(dry_run=True)
            if plan.dek_ids:
                n = len(plan.dek_ids)
                lines = [f"This destroys the data keys of {n} old version(s); no one can read them again:"]
                lines += [_version_line(v) for v in plan.versions[:20]]
                lines += [f"  ... and {n - 20} more (--dry-run lists them all)"] if n > 20 else []
                if not confirm(f"Shred {n} old version(s)?", lines):
                    raise InvalidInputError("Not confirmed; nothing was shredded.")
            result = run(expect=plan)
        else:
            result = run()
    if args.json:
        print_json(result.to_json())
    elif not result.dek_ids:
        print("No version left the head before the cutoff; nothing was shredded.")
    elif result.dry_run:
        print(
            f"Would shred {len(result.dek_ids)} old version(s), destroying their data keys (dry run: nothing changed):"
        )
        print("\n".join(_version_line(v) for v in result.versions))
    else:
        commit = f" in commit {result.commit_id[:10]}" if result.commit_id else ""
        print(f"Shredded {len(result.dek_ids)} old version(s){commit}: their data keys are destroyed.")
    return ExitStatus.SUCCESS


def _cmd_expire(args: argparse.Namespace) -> int:
    from ..erasure.expiry import expire, parse_duration
    from ..errors import InvalidInputError

    if args.history:
        return _cmd_history(args)
    if args.unused_for is None:
        raise InvalidInputError("Give --unused-for DURATION (files), or --history (old versions).")
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
    s.add_argument("--unused-for", metavar="DURATION", help="e.g. 90d, 12w, 36h (units s, m, h, d, w)")
    s.add_argument(
        "--history",
        action="store_true",
        help="instead, crypto-shred versions that left the head longer ago than the store's retain_history_days",
    )
    s.add_argument("--older-than", metavar="DURATION", help="with --history: this period instead of the store's")
    s.add_argument("--dry-run", action="store_true", help="list the files (or versions) that would go; change nothing")
    s.add_argument("--yes", action="store_true", help="with --history: do not ask for confirmation on a terminal")
    s.add_argument(
        "--assume-unread",
        action="store_true",
        help="go on without the access-time file, taking every file as never read (refused otherwise)",
    )
    s.add_argument("--actor", default="operator", help="who the commit is attributed to (default: operator)")
    s.add_argument("--session", default="", help="session recorded with the commit (default: none)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_expire)
