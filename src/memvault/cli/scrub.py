"""``memvault scrub [FILE|-]``: what the scrubber would mask in a text, without writing anything."""

from __future__ import annotations

import argparse
import bisect
import sys
from typing import Any

from ..errors import ExitStatus, InvalidInputError
from ._common import open_input, open_store, print_json, read_input, terminal_safe

__all__ = ["register"]


def _read(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    with open_input(source) as f:
        return read_input(f, source)


def _place(line_starts: list[int], offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of ``offset``."""
    line = bisect.bisect_right(line_starts, offset) - 1
    return line + 1, offset - line_starts[line] + 1


def _cmd_scrub(args: argparse.Namespace) -> int:
    from ..scrub import Scrubber
    from ..settings import ScrubSettings

    try:
        text = _read(args.file).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError("Error: The text to scan is not UTF-8.") from None
    if args.store_policy:
        with open_store(args) as store:
            settings = store.settings.scrub
    else:
        settings = ScrubSettings()
    scrubber = Scrubber(settings)
    findings = scrubber.scan(text)
    line_starts = [0]
    nl = text.find("\n")
    while nl >= 0:
        line_starts.append(nl + 1)
        nl = text.find("\n", nl + 1)
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for f in findings:
        line, column = _place(line_starts, f.start)
        end_line, end_column = _place(line_starts, f.end - 1)
        action = scrubber.policy(f.kind)
        rows.append(
            {
                "kind": f.kind,
                "action": "refuse" if action == "reject" else "mask",
                "line": line,
                "column": column,
                "end_line": end_line,
                "end_column": end_column + 1,
                "start": f.start,
                "end": f.end,
                "length": f.end - f.start,
            }
        )
        counts[f.kind] = counts.get(f.kind, 0) + 1
    name = "-" if args.file == "-" else args.file
    status = ExitStatus.REFUSED if args.check and findings else ExitStatus.SUCCESS
    if args.json:
        print_json(
            {
                "source": name,
                "characters": len(text),
                "policy": "store" if args.store_policy else "default",
                "findings": rows,
                "counts": dict(sorted(counts.items())),
            }
        )
        return status
    shown = terminal_safe("(stdin)" if name == "-" else name)
    for row in rows:
        span = f"{row['length']} characters"
        if row["end_line"] != row["line"]:
            span += f", to line {row['end_line']}"
        verb = "would be refused (policy: reject)" if row["action"] == "refuse" else "would be masked"
        print(f"{shown}:{row['line']}:{row['column']}: {row['kind']} ({span}) {verb}")
    if rows:
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        print(f"{len(rows)} finding(s) ({summary}); nothing was written.")
    else:
        print("No sensitive data found; nothing was written.")
    return status


def register(sub: Any) -> None:
    s = sub.add_parser(
        "scrub",
        help="show what the scrubber would mask in a file or stdin (kinds and places, never values); writes nothing",
        description=(
            "Scan a text as the store's scrubber does before a write and list each finding: its kind, line, "
            "column and length, never the value. Nothing is written. Kept on purpose: documented placeholders "
            "(<YOUR_API_KEY>, sk-ant-..., xxxx), reserved example domains (example.com, .test, .invalid), "
            "private, loopback and documentation addresses, published test card numbers, values of a few "
            "distinct characters."
        ),
    )
    s.add_argument("file", nargs="?", default="-", help="the file to scan; - (the default) reads stdin")
    s.add_argument(
        "--store-policy",
        action="store_true",
        help="use the store's scrub settings (its policy, allowlist and custom rules; needs the key) "
        "instead of the defaults",
    )
    s.add_argument("--check", action="store_true", help="exit with status 4 when anything would be masked or refused")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_scrub)
