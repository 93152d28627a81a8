"""Read commands: ``log``, ``show``, ``diff``, ``blame``, ``cat`` and ``ls``.

A thin shell over :mod:`memvault.history`: each command resolves revisions, calls the library
and prints its typed results, as git would, or as JSON built from the results' ``to_json()`` with
``--json`` (times as ISO 8601 with the exact number beside them: :mod:`._output`). ``log``,
``show``, ``diff`` and ``blame`` go through a pager on a terminal and take ``--color``; ``log``
and ``show`` take ``--date`` (:mod:`._output`); ``log`` lines are laid out by :mod:`._logfmt`.
Revisions use the syntax of :func:`memvault.history.resolve`. With ``--branch NAME`` a command
reads the history of the dream branch ``NAME`` (its commits, then ``main``'s before its fork
point) instead of ``main``'s: revisions are resolved on that branch.
"""

from __future__ import annotations

import argparse
import base64
import functools
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus, InvalidInputError, MemvaultError
from ..history import (
    OPERATIONS,
    BlameLine,
    Change,
    CommitInfo,
    FileDiff,
    TreeEntry,
    blame,
    diff,
    format_diff,
    iter_log,
    read_at,
    resolve,
    split_range,
    tree_at,
)
from ..paths import parse_path
from ._common import open_store, print_json, terminal_safe
from ._logfmt import ONELINE, PAGE, SHORT, LogFormat, format_log_line, paint
from ._output import DATE_STYLES, add_color_flags, color_enabled, format_date, json_times, paged
from ._revargs import (
    branch_name,
    count,
    history_of,
    log_selection,
    parse_when,
    path_arg,
    resolve_arg,
    split_rev_path,
)

if TYPE_CHECKING:
    from ..store import AnyBranch

__all__ = ["register", "format_log_line", "parse_when", "branch_name"]

REVISION_HELP = (
    "revisions: HEAD (or @), HEAD~N, HEAD^, a full or abbreviated (4+ hex) commit id, #SEQ, "
    "@{ISO-TIME} (newest commit at or before it; UTC without an offset); ~N and ^ follow any revision"
)
_OP_COLORS = {"created": "green", "modified": "yellow", "deleted": "red", "renamed": "cyan"}


# -- shared helpers --------------------------------------------------------------------------------


def _cli(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Drop the tool-style ``Error:`` prefix of library messages (main() adds ``memvault:``)."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except MemvaultError as err:
            if err.message.startswith("Error: "):
                err.message = err.message[len("Error: ") :]
            raise

    return run


def _parent(store: AnyBranch, commit_id: bytes) -> bytes | None:
    return store.commit(commit_id)[2]


def _commit_diff(store: AnyBranch, commit_id: bytes) -> list[FileDiff]:
    """What one commit changed in file contents (against its parent; the first against nothing)."""
    return diff(store, _parent(store, commit_id), commit_id)


def _display_path(c: Change, date: str = "local") -> str:
    path = c.path + ("/" if c.kind == "dir" else "")
    if c.op == "renamed" and c.old_path is not None:
        path = f"{c.old_path}{'/' if c.kind == 'dir' else ''} -> {path}"
    if c.redacted is not None:
        by = f" by {c.redacted['actor']}" if c.redacted.get("actor") else ""
        when = f" at {format_date(float(c.redacted['time']), date)}" if c.redacted.get("time") else ""
        path += f"  [redacted{by}{when}]"
    return path


def _stat(info: CommitInfo, diffs: Sequence[FileDiff]) -> list[tuple[Change, tuple[int, int] | None]]:
    """Each change of the commit with ``(added, removed)`` lines (``None`` for dirs and binaries)."""
    by_path = {d.path: d for d in diffs}
    out: list[tuple[Change, tuple[int, int] | None]] = []
    for c in info.changes:
        if c.kind == "dir":
            out.append((c, None))
            continue
        d = by_path.get(c.path)
        out.append((c, (0, 0) if d is None else d.line_counts()))
    return out


def _stat_json(rows: Iterable[tuple[Change, tuple[int, int] | None]]) -> list[dict[str, Any]]:
    return [{**c.to_json(), "added": n[0] if n else None, "removed": n[1] if n else None} for c, n in rows]


def _stat_lines(rows: Iterable[tuple[Change, tuple[int, int] | None]], on: bool, date: str = "local") -> list[str]:
    out: list[str] = []
    for c, n in rows:
        op = paint(f"{c.op:<9}", _OP_COLORS[c.op], on)
        if c.kind == "dir":
            counts = ""
        elif n is None:
            counts = "  binary"
        else:
            counts = "  " + paint(f"+{n[0]}", "green", on) + " " + paint(f"-{n[1]}", "red", on)
        out.append(f"    {op} {_display_path(c, date)}{counts}")
    return out


def _color_patch(text: str, on: bool) -> str:
    if not on:
        return text
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        body, end = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        if line.startswith(("diff --memvault", "rename from", "rename to", "--- ", "+++ ", "Binary files")):
            body = paint(body, "bold", on)
        elif line.startswith("@@"):
            body = paint(body, "cyan", on)
        elif line.startswith("+"):
            body = paint(body, "green", on)
        elif line.startswith("-"):
            body = paint(body, "red", on)
        out.append(body + end)
    return "".join(out)


def _write(text: str) -> None:
    sys.stdout.write(text)


def _emit_bytes(data: bytes) -> None:
    if sys.stdout.isatty():  # a person reads it: no raw escape sequences from memory content
        sys.stdout.write(terminal_safe(data.decode("utf-8", errors="replace")))
        return
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (rare): best effort
        sys.stdout.write(data.decode("utf-8", errors="replace"))
        return
    buffer.write(data)
    buffer.flush()


def _content_json(commit_id: bytes, path: str, data: bytes) -> dict[str, Any]:
    try:
        return {"commit": commit_id.decode(), "path": path, "encoding": "utf-8", "content": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "commit": commit_id.decode(),
            "path": path,
            "encoding": "base64",
            "content": base64.b64encode(data).decode("ascii"),
        }


# -- log -------------------------------------------------------------------------------------------


def _log_format(args: argparse.Namespace, on: bool, now: float) -> LogFormat:
    if args.oneline and args.format is not None:
        raise InvalidInputError("Give --oneline or --format, not both.")
    if args.json and (args.oneline or args.format is not None):
        raise InvalidInputError("--json has its own layout: --oneline and --format do not apply to it.")
    template = ONELINE if args.oneline else args.format
    return LogFormat(template=template, tags=args.oneline, color=on, date=args.date, now=now)


def _cmd_log(args: argparse.Namespace) -> int:
    start, exclude, path, limit = log_selection(args)
    if args.follow and not path:
        raise InvalidInputError("--follow needs a PATH (memvault log --follow -- PATH).")
    since = parse_when(args.since) if args.since is not None else None
    until = parse_when(args.until, end=True) if args.until is not None else None
    branch = branch_name(args.branch) if args.branch is not None else None
    on = color_enabled(args.color) and not args.json
    fmt = _log_format(args, on, time.time())
    with open_store(args) as main:
        store = history_of(main, branch)
        start_id = resolve_arg(store, start, "log")
        exclude_id = resolve_arg(store, exclude, "log") if exclude is not None else None
        entries = iter_log(
            store,
            start=start_id,
            exclude=exclude_id,
            path=path,
            follow=args.follow,
            actor=args.actor,
            session=args.session,
            operations=args.op,
            since=since,
            until=until,
        )
        rows: list[dict[str, Any]] = []
        page: list[tuple[CommitInfo, list[FileDiff]]] = []
        first = [True]

        def flush() -> None:
            for (info, diffs), line in zip(page, fmt.lines([info for info, _ in page]), strict=True):
                block = [line]
                if args.stat:
                    block.extend(_stat_lines(_stat(info, diffs), on, args.date))
                text = "\n".join(block) + "\n"
                if args.patch:
                    text += _color_patch(terminal_safe(format_diff(diffs)), on)
                if (args.patch or args.stat) and not first[0]:
                    text = "\n" + text
                first[0] = False
                _write(text)
            page.clear()

        with paged(not args.no_pager):
            for i, info in enumerate(entries):
                if i < args.skip:
                    continue
                if limit is not None and i >= args.skip + limit:
                    break
                diffs = _commit_diff(store, info.commit_id.encode()) if (args.patch or args.stat) else []
                if args.json:
                    row = json_times(info.to_json())
                    if args.stat:
                        row["stat"] = _stat_json(_stat(info, diffs))
                    if args.patch:
                        row["patch"] = format_diff(diffs)
                    rows.append(row)
                    continue
                page.append((info, diffs))
                if len(page) >= PAGE:
                    flush()
            flush()
            if args.json:
                print_json(rows)
    return ExitStatus.SUCCESS


# -- show ------------------------------------------------------------------------------------------


def _show_header(info: CommitInfo, on: bool, date: str = "local") -> list[str]:
    lines = [
        paint(f"commit {info.commit_id}", "yellow", on),
        f"Seq:      #{info.seq}",
        f"Date:     {format_date(info.time, date)}",
        f"Actor:    {terminal_safe(info.actor)}",
        f"Session:  {terminal_safe(info.session) or '-'}",
        f"Command:  {info.command} "
        + terminal_safe(" -> ".join(info.paths) if info.command == "rename" else " ".join(info.paths)),
    ]
    if info.branch:
        lines.append(f"Branch:   {info.branch}")
    if info.extra:
        lines.append("Extra:    " + terminal_safe(" ".join(f"{k}={v}" for k, v in sorted(info.extra.items()))))
    if info.findings:
        lines.append("Findings: " + ", ".join(f"{k}:{v}" for k, v in sorted(info.findings.items())))
    return [line.rstrip() for line in lines]


def _cmd_show(args: argparse.Namespace) -> int:
    rev, path = split_rev_path(args.rev)
    branch = branch_name(args.branch) if args.branch is not None else None
    on = color_enabled(args.color)
    with open_store(args) as main:
        store = history_of(main, branch)
        commit_id = resolve_arg(store, rev, "show")
        if path is not None:
            path = parse_path(path).text
            data = read_at(store, path, commit_id)
            with paged(not args.no_pager):
                if args.json:
                    print_json(_content_json(commit_id, path, data))
                else:
                    _emit_bytes(data)
            return ExitStatus.SUCCESS
        info = next(iter_log(store, start=commit_id))
        diffs = _commit_diff(store, commit_id)
        stat = _stat(info, diffs)
        with paged(not args.no_pager):
            if args.json:
                print_json({**json_times(info.to_json()), "stat": _stat_json(stat), "patch": format_diff(diffs)})
                return ExitStatus.SUCCESS
            text = "\n".join(_show_header(info, on, args.date)) + "\n"
            if stat:
                text += "\n" + "\n".join(_stat_lines(stat, on, args.date)) + "\n"
            patch = terminal_safe(format_diff(diffs))
            if patch:
                text += "\n" + _color_patch(patch, on)
            _write(text)
    return ExitStatus.SUCCESS


# -- diff ------------------------------------------------------------------------------------------


def _cmd_diff(args: argparse.Namespace) -> int:
    revs = [a for a in args.args if not a.startswith("/")]
    paths = [a for a in args.args if a.startswith("/")]
    if len(revs) == 1:
        pair = split_range(revs[0])
        revs = list(pair) if pair is not None else revs
    if len(revs) > 2:
        raise InvalidInputError("diff takes at most two revisions.")
    if len(paths) > 1:
        raise InvalidInputError("diff takes at most one PATH.")
    path = paths[0] if paths else None
    branch = branch_name(args.branch) if args.branch is not None else None
    on = color_enabled(args.color) and not args.json
    with open_store(args) as main:
        store = history_of(main, branch)
        old: bytes | None
        if not revs:
            new = resolve(store, "HEAD")
            old = _parent(store, new)
        else:
            old = resolve_arg(store, revs[0], "diff")
            new = resolve_arg(store, revs[1], "diff") if len(revs) == 2 else resolve(store, "HEAD")
        diffs = diff(store, old, new, path)
        with paged(not args.no_pager):
            if args.json:
                print_json(
                    {
                        "old": old.decode() if old is not None else None,
                        "new": new.decode(),
                        "path": path,
                        "files": [d.to_json() for d in diffs],
                    }
                )
            else:
                _write(_color_patch(terminal_safe(format_diff(diffs)), on))
    return ExitStatus.SUCCESS


# -- blame, cat, ls --------------------------------------------------------------------------------


def format_blame(lines: Sequence[BlameLine], on: bool = False) -> list[str]:
    width = len(str(len(lines)))
    actors = [terminal_safe(b.actor) for b in lines]
    actor_width = max((len(a) for a in actors), default=0)
    seq_width = max([4, *(len(str(b.seq)) for b in lines)])
    return [
        f"{paint(b.commit_id[:SHORT], 'yellow', on)}  #{b.seq:<{seq_width}} {actor:<{actor_width}}  "
        f"{b.line:>{width}}) {terminal_safe(b.text)}"
        for b, actor in zip(lines, actors, strict=True)
    ]


def _cmd_blame(args: argparse.Namespace) -> int:
    branch = branch_name(args.branch) if args.branch is not None else None
    path = path_arg(args.path, "blame")
    on = color_enabled(args.color) and not args.json
    with open_store(args) as main:
        store = history_of(main, branch)
        lines = blame(store, path, resolve(store, args.rev))
    with paged(not args.no_pager):
        if args.json:
            print_json([json_times(b.to_json()) for b in lines])
        else:
            _write("".join(line + "\n" for line in format_blame(lines, on)))
    return ExitStatus.SUCCESS


def _cmd_cat(args: argparse.Namespace) -> int:
    branch = branch_name(args.branch) if args.branch is not None else None
    path = path_arg(args.path, "cat")
    with open_store(args) as main:
        store = history_of(main, branch)
        commit_id = resolve(store, args.rev)
        data = read_at(store, path, commit_id)
    if args.json:
        print_json(_content_json(commit_id, path, data))
    else:
        _emit_bytes(data)
    return ExitStatus.SUCCESS


def format_ls(entries: Sequence[TreeEntry]) -> list[str]:
    sizes = [str(e.size) if e.kind == "file" else "-" for e in entries]
    width = max((len(s) for s in sizes), default=1)
    return [f"{e.kind:<4}  {s:>{width}}  {e.path}" for e, s in zip(entries, sizes, strict=True)]


def _cmd_ls(args: argparse.Namespace) -> int:
    branch = branch_name(args.branch) if args.branch is not None else None
    path = path_arg(args.path, "ls") if args.path else None
    with open_store(args) as main:
        store = history_of(main, branch)
        commit_id = resolve(store, args.rev)
        entries = tree_at(store, commit_id, path) if path else tree_at(store, commit_id)
    if args.json:
        print_json([json_times(e.to_json(), key="mtime", exact="mtime_timestamp") for e in entries])
    else:
        _write("".join(line + "\n" for line in format_ls(entries)))
    return ExitStatus.SUCCESS


# -- registration ----------------------------------------------------------------------------------


def _json_flag(s: argparse.ArgumentParser) -> None:
    s.add_argument("--json", action="store_true", help="machine-readable output (times: ISO 8601, UTC)")


def _branch_flag(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--branch",
        metavar="NAME",
        help="read the history of this dream branch (dream/<16 hex digits>, or the digits alone) instead of main's",
    )


def _view_flags(s: argparse.ArgumentParser, *, date: bool) -> None:
    """``--color``, ``--no-color``, ``--no-pager`` and (``date``) ``--date``."""
    add_color_flags(s)
    s.add_argument(
        "--no-pager",
        action="store_true",
        help="never page (on a terminal output goes through $MEMVAULT_PAGER, else $PAGER, else less -FRX)",
    )
    if date:
        s.add_argument(
            "--date",
            choices=DATE_STYLES,
            default="local",
            help="local: 2026-11-01 14:30:00 (the default); iso: 2026-11-01T14:30:00+01:00; relative: 3 hours ago",
        )


LOG_FORMAT_HELP = (  # a description: argparse does not %-format it
    "--format placeholders: %H commit id, %h short id, %s subject (command and paths), %an actor, "
    "%ad date (--date style), %ar relative date, %aI ISO 8601 date, %at Unix time, %(seq), %(actor), "
    "%(session), %(command), %(paths), %(branch), %(findings), %n newline, %% a %, "
    "%C(red|green|yellow|blue|magenta|cyan|bold|dim|reset) colour"
)


def register(sub: Any) -> None:
    s = sub.add_parser(
        "log",
        help="list commits, newest first",
        description="List commits, newest first, one per line: short id, #seq, date, actor, command, paths, "
        "scrubber findings (columns as wide as the longest value). REV: start there; A..B: the commits "
        "after A up to B (an empty side is HEAD); PATH (starts with /): only commits that changed that file "
        "or anything below that directory. -N is -n N. " + REVISION_HELP + ". " + LOG_FORMAT_HELP + ".",
        usage="memvault log [options] [REV | A..B] [[--] PATH]",
    )
    s.add_argument("args", nargs="*", metavar="REV|A..B|PATH", help=argparse.SUPPRESS)
    s.add_argument("--rev", default=None, help="start from this revision (default: HEAD)")
    s.add_argument("-p", "--patch", action="store_true", help="show each commit's unified diff against its parent")
    s.add_argument("--stat", action="store_true", help="show each commit's changed paths with +/- line counts")
    s.add_argument("--follow", action="store_true", help="follow PATH back across renames")
    s.add_argument("--actor", help="only commits by this actor")
    s.add_argument("--session", help="only commits of this session")
    s.add_argument(
        "--op", action="append", choices=OPERATIONS, help="only commits with a change of this kind (repeatable)"
    )
    s.add_argument("--since", help="only commits at or after: ISO 8601 time, or an age like 30m, 2h, 3d, 1w")
    s.add_argument("--until", help="only commits at or before: ISO 8601 time, or an age like 30m, 2h, 3d, 1w")
    s.add_argument("-n", type=count, default=None, metavar="N", help="show at most N commits (also -N)")
    s.add_argument("--skip", type=count, default=0, metavar="N", help="skip the first N matching commits")
    s.add_argument("--oneline", action="store_true", help="short id and subject (command and paths) only")
    s.add_argument("--format", metavar="TEMPLATE", help="each commit as TEMPLATE (placeholders above)")
    _view_flags(s, date=True)
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_log))

    s = sub.add_parser(
        "show",
        help="show a commit (header, changes, patch) or a file at a revision",
        description="REV: the commit's header, changes and patch. REV:PATH: the content of PATH at REV. "
        + REVISION_HELP
        + ".",
    )
    s.add_argument("rev", metavar="REV[:PATH]", nargs="?", default="HEAD", help="default: HEAD")
    _view_flags(s, date=True)
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_show))

    s = sub.add_parser(
        "diff",
        help="unified diff between two revisions",
        description="No revision: HEAD against its parent (what the last commit did). One revision REV: "
        "REV against HEAD. Two revisions (or A..B): the first against the second. A PATH (starts with /) "
        "limits the diff to that file or directory. " + REVISION_HELP + ".",
        usage="memvault diff [options] [REV [REV] | A..B] [[--] PATH]",
    )
    s.add_argument("args", nargs="*", metavar="REV|PATH", help=argparse.SUPPRESS)
    _view_flags(s, date=False)
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_diff))

    s = sub.add_parser("blame", help="for each line of a file, the commit and actor that last changed it")
    s.add_argument("path", metavar="PATH")
    s.add_argument("--rev", default="HEAD", help="blame the file as of this revision (default: HEAD)")
    _view_flags(s, date=False)
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_blame))

    s = sub.add_parser("cat", help="write a file's content at a revision to stdout")
    s.add_argument("path", metavar="PATH")
    s.add_argument("--rev", default="HEAD", help="revision (default: HEAD)")
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_cat))

    s = sub.add_parser("ls", help="list the files and directories at a revision: kind, size, path")
    s.add_argument("path", metavar="PATH", nargs="?", help="only this file or directory (default: /memories)")
    s.add_argument("--rev", default="HEAD", help="revision (default: HEAD)")
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_ls))
