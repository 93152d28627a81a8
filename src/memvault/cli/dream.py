"""``memvault dream``: a consolidation pass on a branch, and its review.

``memvault dream [--model M] [--instructions FILE] [--transcripts DIR] [--max-changed-files N]
[--max-deleted-bytes N] [--max-turns N]`` runs Claude (through the ``anthropic`` SDK, which reads
``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``) on a new dream branch: :mod:`memvault.dream.runner`.
``main`` is untouched. ``dream list``, ``dream diff ID``, ``dream merge ID`` and ``dream discard ID``
review it: :mod:`memvault.dream.review`. Each takes ``--json``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus, InvalidInputError
from ._common import fmt_time, open_store, print_json, terminal_safe

if TYPE_CHECKING:
    from ..admin.audit import AuditReport
    from ..dream.review import DreamDiff

__all__ = ["register", "format_dream_diff"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _cmd_run(args: argparse.Namespace) -> int:
    from ..dream.runner import DreamQuotas, run_dream

    instructions = None
    if args.instructions is not None:
        try:
            instructions = Path(args.instructions).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            reason = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else (err.strerror or "unreadable")
            raise InvalidInputError(f"Cannot read the instructions file: {reason}.") from None
    quotas = DreamQuotas(max_changed_files=args.max_changed_files, max_deleted_bytes=args.max_deleted_bytes)
    with open_store(args) as store:
        result = run_dream(
            store, model=args.model, instructions=instructions,
            transcripts=Path(args.transcripts) if args.transcripts else None, quotas=quotas, max_turns=args.max_turns,
        )  # fmt: skip
    if args.json:
        print_json(result.to_json())
        return ExitStatus.SUCCESS
    n = len(result.changed_files)
    print(f"dream {result.dream_id}  ({result.branch}, model {result.model}, forked from {result.fork_point[:12]})")
    print(
        f"{result.commits} commit(s), {n} file(s) changed, {result.deleted_bytes} bytes deleted; "
        f"stopped: {result.stopped}"
    )
    for path in result.changed_files:
        print(f"  {terminal_safe(path)}")
    if result.refused:
        print(f"{result.refused} tool call(s) refused (quota, path or input errors)")
    if result.summary:
        print("\n" + terminal_safe(result.summary.strip()))
    print(f"\nReview: memvault dream diff {result.dream_id}; then dream merge or dream discard.")
    return ExitStatus.SUCCESS


def _cmd_list(args: argparse.Namespace) -> int:
    from ..dream.review import list_dreams

    with open_store(args) as store:
        dreams = list_dreams(store)
    if args.json:
        print_json([d.to_json() for d in dreams])
        return ExitStatus.SUCCESS
    if not dreams:
        print("No dreams.")
    for d in dreams:
        if d.status == "damaged":
            print(f"{d.id}  damaged  {terminal_safe(d.problem)}")
            continue
        merged = f"  merged as {d.merge_commit[:12]}" if d.merge_commit else ""
        print(
            f"{d.id}  {d.status:<6}  {fmt_time(d.created)}  {d.commits:>3} commit(s)  {terminal_safe(d.model)}{merged}"
        )
    return ExitStatus.SUCCESS


def _audit_summary(before: AuditReport, after: AuditReport) -> list[str]:
    b = Counter(f.kind for f in before.findings)
    a = Counter(f.kind for f in after.findings)
    lines = [f"audit: {len(before.findings)} finding(s) at the fork point, {len(after.findings)} after the dream"]
    for kind in sorted(a.keys() | b.keys()):
        if a[kind] != b[kind]:
            lines.append(f"  {kind}: {b[kind]} -> {a[kind]}")
    fixed = {(f.kind, f.path) for f in before.findings} - {(f.kind, f.path) for f in after.findings}
    new = [f for f in after.findings if (f.kind, f.path) not in {(g.kind, g.path) for g in before.findings}]
    lines += [f"  fixed  {kind}  {terminal_safe(path)}" for kind, path in sorted(fixed)]
    lines += [f"  new    {f.kind}  {terminal_safe(f.path)}  {terminal_safe(f.detail)}" for f in new]
    return lines


def format_dream_diff(d: DreamDiff) -> str:
    """The text of ``dream diff``: a header, the flagged changes, the audit before and after,
    then the decrypted diff."""
    from ..history import format_diff

    info = d.info
    lines = [
        f"dream {info.id}  {info.status}  model {terminal_safe(info.model)}  by {terminal_safe(info.actor)}  "
        f"{fmt_time(info.created)}",
        f"fork point {info.fork_point[:12]}, head {info.head[:12]}, {info.commits} commit(s)"
        + ("; main moved since the fork: a merge is three-way" if d.main_moved else ""),
    ]
    stats = Counter(f.status for f in d.files)
    lines.append(", ".join(f"{n} {status}" for status, n in sorted(stats.items())) or "no file changed")
    for f in d.files:
        flag = d.flags.get(f.path)
        if flag:
            lines.append(f"  ! {flag:<9} {terminal_safe(f.path)}")
    lines += _audit_summary(d.audit_before, d.audit_after)
    return "\n".join(lines) + "\n\n" + terminal_safe(format_diff(d.files))


def _cmd_diff(args: argparse.Namespace) -> int:
    from ..dream.review import dream_diff

    with open_store(args) as store:
        d = dream_diff(store, args.id)
        if args.json:
            print_json(d.to_json())
        else:
            sys.stdout.write(format_dream_diff(d))
    return ExitStatus.SUCCESS


def _cmd_merge(args: argparse.Namespace) -> int:
    from ..dream.review import DreamConflictError, merge_dream

    with open_store(args) as store:
        try:
            result = merge_dream(store, args.id, actor=args.actor, expect_head=args.head)
        except DreamConflictError as err:
            if args.json:
                conflicts: list[dict[str, Any]] = [{"path": c.path, "reason": c.reason} for c in err.conflicts]
                print_json({"merged": False, "conflicts": conflicts})
            else:
                for c in err.conflicts:
                    sys.stdout.write(terminal_safe(c.render()) + "\n")
            raise
    if args.json:
        print_json({"merged": True, **result.to_json()})
    else:
        how = "three-way (main moved since the fork)" if result.three_way else "fast (main had not moved)"
        print(f"Merged dream {result.dream_id} as commit #{result.seq} {result.commit[:12]}, {how}:")
        for path in result.changed:
            print(f"  {terminal_safe(path)}")
        print(f"Undo with: memvault revert {result.commit[:12]}")
    return ExitStatus.SUCCESS


def _cmd_discard(args: argparse.Namespace) -> int:
    from ..dream.review import discard_dream

    with open_store(args) as store:
        result = discard_dream(store, args.id, actor=args.actor)
    if args.json:
        print_json(result.to_json())
    else:
        print(
            f"Discarded dream {result.dream_id}: {result.keys_destroyed} data key(s) destroyed"
            + (f" by commit {result.commit[:12]}" if result.commit else "")
            + "; its versions cannot be read any more."
        )
        if not result.complete:
            print(
                "The keyring did not record every data key of this dream (it was made by an earlier release, or "
                "in a store before `memvault upgrade`): its keys were found only from its branch, and versions "
                "its branch no longer reaches were not destroyed (`memvault verify` lists them as orphan-key)."
            )
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser(
        "dream",
        help="consolidate the memory on a branch with Claude, then review, merge or discard it",
        description="Without a subcommand: run a consolidation pass (Claude through the anthropic SDK: "
        "ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) on a new dream branch; main is untouched. Then review it "
        "with `dream diff ID` and `dream merge ID` or `dream discard ID`.",
    )
    s.add_argument("--model", help="the model (default: $MEMVAULT_DREAM_MODEL, else claude-sonnet-4-5)")
    s.add_argument("--instructions", metavar="FILE", help="extra instructions for this pass (UTF-8 text)")
    s.add_argument("--transcripts", metavar="DIR", help="retained session transcripts to learn from (scrubbed first)")
    s.add_argument("--max-changed-files", type=_positive, default=50, metavar="N", help="quota (default 50)")
    s.add_argument("--max-deleted-bytes", type=_positive, default=65536, metavar="N", help="quota (default 65536)")
    s.add_argument("--max-turns", type=_positive, default=40, metavar="N", help="model turns at most (default 40)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_run)
    sub2 = s.add_subparsers(dest="dream_cmd", metavar="{list,diff,merge,discard}")
    p = sub2.add_parser("list", help="the dream branches and their status")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_list)
    for name, func, text in (
        ("diff", _cmd_diff, "the decrypted diff of a dream from its fork point, flagged, with the audit before/after"),
        ("merge", _cmd_merge, "merge a dream into main as one commit (three-way if main moved; conflicts block)"),
        ("discard", _cmd_discard, "discard a dream: destroy the data keys of its versions, remove its branch"),
    ):
        p = sub2.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("id", help="the dream id (16 hex digits, from `memvault dream list`)")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        if name in ("merge", "discard"):
            p.add_argument("--actor", default="operator", help="who approves (recorded in the commit)")
        if name == "merge":
            p.add_argument(
                "--head", metavar="COMMIT", help="the dream's head as reviewed (from `dream diff`): refuse if it moved"
            )
        p.set_defaults(func=func)
