"""``memvault verify``: check every object, commit and file version (of ``main`` and of each dream
branch), the freshness mark and the keys.

Exit status 0 when no error was found (warnings allowed), 3 (``ExitStatus.INTEGRITY``) when any
error was. A progress indicator goes to stderr, and only when stderr is a terminal.

``verify --remote`` (a store in object storage) lists instead the objects under the store's prefix
that no commit needs (:func:`memvault.verify.orphans.remote_orphans`), deleting nothing; exit 0.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from . import UsageError
from ._common import color, open_store, print_json, progress_bar, store_path, terminal_safe, use_color

if TYPE_CHECKING:
    from ..remote.inventory import OrphanReport
    from ..verify import Problem, VerifyReport

__all__ = ["register", "format_problem", "format_summary", "format_orphans"]


def format_problem(problem: Problem) -> str:
    """``error  forged-commit  #5 abc1234…  message`` (the location part only where known; a
    problem on a side branch: ``error  bad-blob  dream/0123456789abcdef #5 abc1234…  message``)."""
    where = [problem.branch] if problem.branch is not None else []
    if problem.seq is not None:
        where.append(f"#{problem.seq}")
    if problem.commit is not None:
        where.append(f"{problem.commit[:7]}…")
    parts = [problem.severity, problem.code, *([" ".join(where)] if where else []), problem.message]
    return "  ".join(parts)


def format_summary(report: VerifyReport) -> str:
    counts = f"verified {report.commits} commits, {report.objects} objects, {report.versions} file versions"
    errors, warnings = len(report.errors), len(report.warnings)
    warned = f"{warnings} warning{'' if warnings == 1 else 's'}"
    if report.ok:
        return f"{counts}: OK" + (f" ({warned})" if warnings else "")
    return f"{counts}: {errors} error{'' if errors == 1 else 's'}" + (f", {warned}" if warnings else "")


#: Why an object is orphaned, as ``verify --remote`` says it.
_REASONS = {
    "unreferenced": "no committed log record names it (a lost race's, or a commit's in progress)",
    "destroyed": "the data key object of a key a redaction destroyed",
    "unknown": "the data key object of a key no commit wrapped",
}


def _bytes(n: int) -> str:
    from ..protocol.commands import format_size

    return f"{format_size(n)} ({n} bytes)" if n >= 1024 else f"{n} bytes"


def format_orphans(report: OrphanReport) -> list[str]:
    """The text output of ``verify --remote``: ``orphan  KEY  SIZE  reason`` per object, then a summary."""
    lines = [f"orphan  {terminal_safe(o.key)}  {_bytes(o.size)}  {_REASONS[o.reason]}" for o in report.orphans]
    kinds = report.by_kind()
    lines.append(
        f"{len(report.orphans)} orphaned object{'' if len(report.orphans) == 1 else 's'}, {_bytes(report.bytes)}, "
        f"among {report.objects} listed in {terminal_safe(report.description)} (packs and indexes "
        f"{kinds['packs'].objects}, {_bytes(kinds['packs'].bytes)}; data keys {kinds['deks'].objects}, "
        f"{_bytes(kinds['deks'].bytes)}); nothing was deleted"
    )
    if report.gc_now is not None:
        now, later = report.gc_now, report.gc_waiting or {}

        def counts(by: dict[str, int]) -> str:
            return ", ".join(f"{reason} {n}" for reason, n in sorted(by.items()) if n) or "none"

        lines.append(
            f"memvault gc would delete {sum(now.values())} object(s) now ({counts(now)}) and "
            f"{sum(later.values())} once its grace period has passed ({counts(later)})"
        )
    return lines


def _cmd_verify_remote(args: argparse.Namespace) -> int:
    from ..verify.orphans import remote_orphans

    if not isinstance(store_path(args), str):  # a path: a store directory
        raise UsageError("--remote lists the objects of a store in object storage (an s3:// or file:// --store)")
    with open_store(args) as store:
        report = remote_orphans(store)
    if args.json:
        print_json(report.to_json())
    else:
        print("\n".join(format_orphans(report)))
    return ExitStatus.SUCCESS


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..verify import verify

    if args.remote:
        return _cmd_verify_remote(args)
    with open_store(args, check_head=False) as store:
        report = verify(store, progress=progress_bar("verifying commits"))
    if args.json:
        print_json(report.to_json())
    else:
        colored = use_color()
        for problem in report.problems:
            line = format_problem(problem)
            print(color(line, "red" if problem.severity == "error" else "yellow", colored))
        print(color(format_summary(report), "green" if report.ok else "red", colored))
    return ExitStatus.SUCCESS if report.ok else ExitStatus.INTEGRITY


def register(sub: Any) -> None:
    s = sub.add_parser(
        "verify",
        help="check every object, commit and file version (main and dream branches), the freshness mark and the keys",
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument(
        "--remote",
        action="store_true",
        help="instead: list the objects under a store's prefix in object storage that no commit needs (packs of "
        "lost races, data key objects of destroyed or unknown keys), with counts and bytes; deletes nothing",
    )
    s.set_defaults(func=_cmd_verify)
