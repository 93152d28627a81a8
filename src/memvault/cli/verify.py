"""``memvault verify``: check every object, commit and file version (of ``main`` and of each dream
branch), the freshness mark and the keys.

Exit status 0 when no error was found (warnings allowed), 3 (``ExitStatus.INTEGRITY``) when any
error was. A progress indicator goes to stderr, and only when stderr is a terminal.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from ._common import color, open_store, print_json, progress_bar, use_color

if TYPE_CHECKING:
    from ..verify import Problem, VerifyReport

__all__ = ["register", "format_problem", "format_summary"]


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


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..verify import verify

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
    s.set_defaults(func=_cmd_verify)
