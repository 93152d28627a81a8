"""``memvault grep PATTERN [PATH]``: search the decrypted text files (:func:`memvault.history.grep.grep`).

Output as ``git grep`` prints it: ``path:text``, ``path:line:text`` with ``-n``, in git's colours
with ``--color`` (on a terminal by default); exit status 1 when no line matches (as grep), 0 when
one does.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ExitStatus
from ._common import open_store, print_json, terminal_safe
from ._logfmt import paint
from ._output import add_color_flags, color_enabled

__all__ = ["register"]


def _cmd_grep(args: argparse.Namespace) -> int:
    from ..history.grep import compile_pattern, grep

    regex = compile_pattern(args.pattern, ignore_case=args.ignore_case)
    on = color_enabled(args.color) and not args.json
    found = False
    rows: list[dict[str, Any]] = []
    with open_store(args) as store:
        for match in grep(store, regex, args.path or "/memories", args.rev):
            found = True
            if args.json:
                rows.append(match.to_json())
                continue
            colon = paint(":", "cyan", on)
            number = paint(str(match.line), "green", on) + colon if args.line_number else ""
            print(f"{paint(match.path, 'magenta', on)}{colon}{number}{terminal_safe(match.text)}")
    if args.json:
        print_json(rows)
    return ExitStatus.SUCCESS if found else ExitStatus.ERROR


def register(sub: Any) -> None:
    s = sub.add_parser(
        "grep",
        help="search the decrypted text files for a regular expression (exit 1: no match)",
        description="Print every line of the text files (at --rev, below PATH) that PATTERN, a Python regular "
        "expression, matches: path:text, or path:line:text with -n, as git grep prints them. Binary files "
        "(images) and redacted versions are not searched. Exit status 0 when a line matches, 1 when none does.",
    )
    s.add_argument("pattern", metavar="PATTERN", help="a Python regular expression (re.search on each line)")
    s.add_argument("path", metavar="PATH", nargs="?", help="only this file or the files below this directory")
    s.add_argument("--rev", default="HEAD", help="search the files as of this revision (default: HEAD)")
    s.add_argument("-i", "--ignore-case", action="store_true", help="match without regard to case")
    s.add_argument("-n", "--line-number", action="store_true", help="prefix each line with its line number")
    add_color_flags(s, what="colour as git grep")
    s.add_argument("--json", action="store_true", help="machine-readable output: [{path, line, text}]")
    s.set_defaults(func=_cmd_grep)
