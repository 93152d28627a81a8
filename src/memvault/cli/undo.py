"""Undo commands: ``revert REV``, ``restore PATH --rev REV`` and ``rollback REV``.

Each makes one new commit attributed to ``--actor`` (default ``operator``); history is never
rewritten. The output names the new commit and every path it changed; when nothing had to
change, it says why and makes no commit (exit status 0). A revert whose paths changed later is
a conflict (exit status 5). What is put back passes the store's scrubber as a write does
(:mod:`memvault.edits.undo`): what the policy masks is masked and counted on a last line; what it
rejects refuses the command with the kinds named (exit status 4), nothing written.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from ._common import open_store as _open
from ._common import print_json

if TYPE_CHECKING:
    from ..edits.undo import UndoResult

__all__ = ["register", "format_result"]


def _shown(path: str, kind: str) -> str:
    return path + "/" if kind == "dir" else path


def format_result(result: UndoResult, subject: str = "") -> str:
    """The text output of an undo command (``subject``: the restored path, for restore)."""
    if result.commit_id is None:
        return result.note + "\n"
    target = f"{result.target[:10]} (#{result.target_seq})"
    if result.command == "restore":
        head = f"Restored {subject} to {target}"
    elif result.command == "rollback":
        head = f"Rolled the store back to {target}"
    else:
        head = f"Reverted {target}"
    lines = [f"{head} in commit {result.commit_id[:10]} (#{result.seq}):"]
    for c in result.changes:
        if c.op == "renamed" and c.old_path is not None:
            lines.append(f"  {c.op:<9} {_shown(c.old_path, c.kind)} -> {_shown(c.path, c.kind)}")
        else:
            lines.append(f"  {c.op:<9} {_shown(c.path, c.kind)}")
    if result.findings:
        parts = ", ".join(f"{n} {kind}" for kind, n in sorted(result.findings.items()))
        lines.append(f"Masked by the scrubber ({parts}): the files show [REDACTED:<kind>] in its place.")
    return "\n".join(lines) + "\n"


def _emit(result: UndoResult, args: argparse.Namespace, subject: str = "") -> int:
    if args.json:
        print_json(result.to_json())
    else:
        print(format_result(result, subject), end="")
    return ExitStatus.SUCCESS


def _cmd_revert(args: argparse.Namespace) -> int:
    from ..edits.undo import revert

    with _open(args) as store:
        return _emit(revert(store, args.rev, actor=args.actor, session=args.session), args)


def _cmd_restore(args: argparse.Namespace) -> int:
    from ..edits.undo import restore
    from ..paths import parse_path

    with _open(args) as store:
        path = parse_path(args.path, store.settings).text
        return _emit(restore(store, path, args.rev, actor=args.actor, session=args.session), args, path)


def _cmd_rollback(args: argparse.Namespace) -> int:
    from ..edits.undo import rollback

    with _open(args) as store:
        return _emit(rollback(store, args.rev, actor=args.actor, session=args.session), args)


def _common(s: argparse.ArgumentParser) -> None:
    s.add_argument("--actor", default="operator", help="who the new commit is attributed to (default: operator)")
    s.add_argument("--session", default="", help="session recorded with the new commit (default: none)")
    s.add_argument("--json", action="store_true", help="machine-readable output")


def register(sub: Any) -> None:
    s = sub.add_parser("revert", help="undo one commit with a new commit (conflicts if its paths changed later)")
    s.add_argument("rev", metavar="REV", help="the commit to undo (id, HEAD~N, #SEQ, @{TIME})")
    _common(s)
    s.set_defaults(func=_cmd_revert)

    s = sub.add_parser("restore", help="put a file or directory back as it was at a revision, as a new commit")
    s.add_argument("path", metavar="PATH", help="a path under /memories (may have been deleted since)")
    s.add_argument("--rev", required=True, metavar="REV", help="the revision to take it from")
    _common(s)
    s.set_defaults(func=_cmd_restore)

    s = sub.add_parser("rollback", help="make the whole store as it was at a revision, as one new commit")
    s.add_argument("rev", metavar="REV", help="the revision to roll back to")
    _common(s)
    s.set_defaults(func=_cmd_rollback)
