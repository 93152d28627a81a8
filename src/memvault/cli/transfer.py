"""Transfer commands: ``import DIR``, ``export DIR [--rev REV]``, ``export --plaintext-git DIR``,
``copy SRC DST``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ExitStatus
from . import UsageError
from ._common import open_store as _open
from ._common import print_json, progress_bar

__all__ = ["register"]

PLAINTEXT_WARNING = (
    "memvault: warning: --plaintext-git writes every version of every memory, decrypted, to {dir}; "
    "anyone who can read it can read them all, and later redactions do not reach it."
)


def _cmd_import(args: argparse.Namespace) -> int:
    from ..transfer import import_dir

    with _open(args) as store:
        result = import_dir(
            store,
            args.dir,
            actor=args.actor,
            session=args.session,
            prefix=args.prefix,
            skip_invalid=args.skip_invalid,
            overwrite=args.overwrite,
            progress=progress_bar("importing"),
        )
    if args.json:
        print_json(result.to_json())
        return ExitStatus.SUCCESS
    if result.commit_id is None:
        print("Nothing to import.")
    else:
        print(
            f"Imported {len(result.imported)} file(s) into {args.prefix} as commit "
            f"{result.commit_id[:10]} (#{result.seq})."
        )
    for path in result.overwritten:
        print(f"  replaced {path}")
    for path in result.hidden:
        print(f"  note: {path} is hidden (its name starts with '.'; the memory tool's view does not list it)")
    for path in result.unscanned:
        print(f"  note: {path} is an image, stored without passing the scrubber (it reads text only)")
    for path, kinds in sorted(result.findings.items()):
        masked = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        print(f"  masked in {path}: {masked}")
    for entry in result.skipped:
        print(f"  skipped {entry.source}: {entry.reason}")
    return ExitStatus.SUCCESS


def _cmd_export(args: argparse.Namespace) -> int:
    from ..transfer import export_plaintext_git, export_tree

    if args.plaintext_git:
        if args.rev is not None:
            raise UsageError("--rev cannot be combined with --plaintext-git (the whole history is exported)")
        if not args.yes_write_plaintext:
            raise UsageError(
                "--plaintext-git writes the decrypted content of every version to disk; "
                "add --yes-write-plaintext to confirm"
            )
        print(PLAINTEXT_WARNING.format(dir=args.dir), file=sys.stderr)
        with _open(args) as store:
            result = export_plaintext_git(
                store, args.dir, i_understand_plaintext=True, progress=progress_bar("replaying commits")
            )
        if args.json:
            print_json(result.to_json())
        else:
            print(
                f"Wrote {len(result.git_commits)} commit(s) to the plaintext git repository {args.dir} "
                "(bare; try `git log -p`)."
            )
        return ExitStatus.SUCCESS
    if args.yes_write_plaintext:
        raise UsageError("--yes-write-plaintext only goes with --plaintext-git")
    with _open(args) as store:
        result = export_tree(store, args.dir, rev=args.rev or "HEAD", progress=progress_bar("exporting"))
    if args.json:
        print_json(result.to_json())
    else:
        print(
            f"Exported {len(result.files)} file(s) of commit {result.commit_id[:10]} to {args.dir} "
            "(plaintext; files 0600, directories 0700)."
        )
    return ExitStatus.SUCCESS


def _cmd_copy(args: argparse.Namespace) -> int:
    from ..transfer import copy_store
    from ._common import credentials
    from .verify import format_problem, format_summary

    result = copy_store(args.source, args.destination, **credentials())
    if args.json:
        print_json(result.to_json())
    else:
        print(f"Copied store {result.store_id} ({result.commits} commits) to {args.destination}")
        for problem in result.report.problems:
            print(format_problem(problem))
        print(format_summary(result.report))
    return ExitStatus.SUCCESS if result.report.ok else ExitStatus.INTEGRITY


def register(sub: Any) -> None:
    s = sub.add_parser("import", help="import a plain directory of memory files as one commit")
    s.add_argument("dir", help="an SDK memory folder (with memories/ inside), a memories root, or any folder")
    s.add_argument("--skip-invalid", action="store_true", help="skip entries that cannot be imported")
    s.add_argument("--overwrite", action="store_true", help="replace files that already exist in the store")
    s.add_argument("--actor", default="operator", help="who the commit is attributed to (default: operator)")
    s.add_argument("--session", default="", help="session recorded with the commit")
    s.add_argument("--prefix", default="/memories", help="memory directory to import into (default: /memories)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_import)

    s = sub.add_parser("export", help="write the tree at a revision (or the whole history) as plaintext")
    s.add_argument("dir", help="target directory (must not exist, or be empty)")
    s.add_argument("--rev", default=None, help="revision to export (default: HEAD)")
    s.add_argument("--plaintext-git", action="store_true", help="write the whole history as a plaintext git repository")
    s.add_argument("--yes-write-plaintext", action="store_true", help="confirm --plaintext-git")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_export)

    s = sub.add_parser(
        "copy", help="copy a store with its whole history to another place (directory, s3://, file://), then verify"
    )
    s.add_argument("source", help="the store to copy: a directory or a URL")
    s.add_argument("destination", help="where the copy goes: an empty directory or an empty URL prefix")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_copy)
