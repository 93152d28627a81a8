"""``memvault audit [--index PATH] [--stale-after 90d] [--json]``: lint the store's memory.

Checks the index a session starts with (missing, longer than the loaded window, dangling links,
entries past the window) and every file (orphans no index entry reaches, stale, near the size
limit, duplicates and near-duplicates, scrubber findings in its history): :mod:`memvault.admin.audit`.
Read-only: no commit, no recorded read.

Output: one finding per line, ``kind  path  detail``, then a summary line; notes on what could not
be checked go to standard error (``--json``: ``{"ok", "index", "findings", "notes"}``). Exit status
0 without findings, 1 with any (a linter's convention); a store or key error exits as for every
command.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from ..protocol.context import INDEX_PATH
from ._common import open_store, print_json, terminal_safe

if TYPE_CHECKING:
    from ..admin.audit import AuditReport

__all__ = ["register", "format_report"]


def format_report(report: AuditReport) -> str:
    """The text output: ``kind  path  detail`` per finding, then a summary line (paths made
    terminal-safe when standard output is a terminal)."""
    lines = [terminal_safe(f"{f.kind}  {f.path}  {f.detail}") for f in report.findings]
    files = f"{report.files} file{'s' if report.files != 1 else ''} checked"
    n = len(report.findings)
    if n:
        kinds = len({f.kind for f in report.findings})
        lines.append(f"{n} finding{'s' if n != 1 else ''} of {kinds} kind{'s' if kinds != 1 else ''}; {files}.")
    else:
        lines.append(f"No findings; {files}.")
    return "\n".join(lines) + "\n"


def _cmd_audit(args: argparse.Namespace) -> int:
    from ..admin.audit import audit
    from ..erasure.expiry import parse_duration

    stale_after = parse_duration(args.stale_after)
    with open_store(args) as store:
        report = audit(store, index=args.index, stale_after=stale_after)
    if args.json:
        print_json(report.to_json())
    else:
        sys.stdout.write(format_report(report))
        for note in report.notes:
            print(f"memvault: note: {terminal_safe(note, sys.stderr)}", file=sys.stderr)
    return ExitStatus.SUCCESS if report.ok else ExitStatus.ERROR


def register(sub: Any) -> None:
    s = sub.add_parser(
        "audit",
        help="lint the memory: index problems, orphan, stale, oversized, duplicate and scrubbed files",
        description="Lint the store's memory, read-only: the index (missing, longer than the 200 lines / "
        "25,000 bytes a session loads, dangling links, entries past that window) and every file (orphans no "
        "index entry reaches, stale, over 90% of max_file_bytes, duplicates and near-duplicates, scrubber "
        "findings in its history). Exit status 0 without findings, 1 with any.",
    )
    s.add_argument("--index", default=INDEX_PATH, metavar="PATH", help=f"the index file (default: {INDEX_PATH})")
    s.add_argument(
        "--stale-after",
        default="90d",
        metavar="DURATION",
        help="a file neither read nor written for this long is stale (default: 90d; units s, m, h, d, w)",
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_audit)
