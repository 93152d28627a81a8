"""Read commands: ``log``, ``show``, ``diff``, ``blame``, ``cat`` and ``ls``.

A thin shell over :mod:`memvault.history`: each command resolves revisions, calls the library
and prints its typed results, as git would (colour on a terminal only) or as JSON built from the
results' ``to_json()`` with ``--json``. Revisions use the syntax of :func:`memvault.history.resolve`.
With ``--branch NAME`` a command reads the history of the dream branch ``NAME`` (its commits, then
``main``'s before its fork point) instead of ``main``'s: revisions are resolved on that branch.
"""

from __future__ import annotations

import argparse
import base64
import functools
import re
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
    parse_time,
    read_at,
    resolve,
    tree_at,
)
from ..paths import parse_path
from ..store.branch import BRANCH_PREFIX
from ._common import color, fmt_time, open_store, print_json, terminal_safe, use_color

if TYPE_CHECKING:
    from ..store import AnyBranch, MemoryStore

__all__ = ["register", "format_log_line", "parse_when", "branch_name"]

SHORT = 10
REVISION_HELP = (
    "revisions: HEAD (or @), HEAD~N, HEAD^, a full or abbreviated (4+ hex) commit id, #SEQ, "
    "@{ISO-TIME} (newest commit at or before it; UTC without an offset); ~N and ^ follow any revision"
)
_RELATIVE = re.compile(r"(\d+)\s*([smhdw])")
_BRANCH_ID = re.compile(r"[0-9a-fA-F]{16}")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
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


def parse_when(text: str, now: float | None = None, *, end: bool = False) -> float:
    """``--since``/``--until``: an ISO 8601 date or time, or ``N{s,m,h,d,w}`` meaning that long ago."""
    m = _RELATIVE.fullmatch(text.strip())
    if m:
        return (time.time() if now is None else now) - int(m.group(1)) * _UNITS[m.group(2)]
    try:
        return parse_time(text, end=end)
    except InvalidInputError:
        raise InvalidInputError(
            f"{text!r} is not a time; use ISO 8601 (2026-11-01, 2026-11-01T14:30:00Z) "
            "or an age such as 30m, 2h, 3d, 1w."
        ) from None


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}")
    return n


def branch_name(text: str) -> str:
    """``--branch``: ``dream/<16 hex digits>``, or the 16 hex digits alone, as the branch's name.

    Raises:
        InvalidInputError: ``text`` is neither.
    """
    ident = text.strip()
    if ident.startswith(BRANCH_PREFIX + "/"):
        ident = ident[len(BRANCH_PREFIX) + 1 :]
    if not _BRANCH_ID.fullmatch(ident):
        raise InvalidInputError(
            f"{text!r} is not a dream branch; give {BRANCH_PREFIX}/ and 16 hex digits, or the 16 hex digits alone."
        )
    return f"{BRANCH_PREFIX}/{ident.lower()}"


def _history_of(store: MemoryStore, branch: str | None) -> AnyBranch:
    """What the command reads: ``main`` (the store), or the side branch ``branch`` (already
    checked by :func:`branch_name`).

    Raises:
        InvalidInputError: the store has no such branch (or cannot have any: object storage).
    """
    if branch is None:
        return store
    side = store.branch(branch)
    if branch not in store.branches():
        raise InvalidInputError(f"There is no dream branch {branch} in this store.")
    return side


def _parent(store: AnyBranch, commit_id: bytes) -> bytes | None:
    return store.commit(commit_id)[2]


def _commit_diff(store: AnyBranch, commit_id: bytes) -> list[FileDiff]:
    """What one commit changed in file contents (against its parent; the first against nothing)."""
    return diff(store, _parent(store, commit_id), commit_id)


def _display_path(c: Change) -> str:
    path = c.path + ("/" if c.kind == "dir" else "")
    if c.op == "renamed" and c.old_path is not None:
        path = f"{c.old_path}{'/' if c.kind == 'dir' else ''} -> {path}"
    if c.redacted is not None:
        by = f" by {c.redacted['actor']}" if c.redacted.get("actor") else ""
        when = f" at {fmt_time(float(c.redacted['time']))}" if c.redacted.get("time") else ""
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


def _stat_lines(rows: Iterable[tuple[Change, tuple[int, int] | None]], on: bool) -> list[str]:
    out: list[str] = []
    for c, n in rows:
        op = color(f"{c.op:<9}", _OP_COLORS[c.op], on)
        if c.kind == "dir":
            counts = ""
        elif n is None:
            counts = "  binary"
        else:
            counts = "  " + color(f"+{n[0]}", "green", on) + " " + color(f"-{n[1]}", "red", on)
        out.append(f"    {op} {_display_path(c)}{counts}")
    return out


def _color_patch(text: str, on: bool) -> str:
    if not on:
        return text
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        body, end = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        if line.startswith(("diff --memvault", "rename from", "rename to", "--- ", "+++ ", "Binary files")):
            body = color(body, "bold", on)
        elif line.startswith("@@"):
            body = color(body, "cyan", on)
        elif line.startswith("+"):
            body = color(body, "green", on)
        elif line.startswith("-"):
            body = color(body, "red", on)
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


def format_log_line(e: CommitInfo, on: bool = False) -> str:
    """One commit on one line: short id, #seq, local time, actor, command, paths, the side branch
    of a branch commit (``[dream/<id>]``), findings."""
    paths = " -> ".join(e.paths) if e.command == "rename" else " ".join(e.paths)
    short = color(e.commit_id[:SHORT], "yellow", on)
    line = f"{short}  #{e.seq:<4} {fmt_time(e.time)}  {e.actor:<10} {e.command:<11} {paths}"
    if e.branch:  # in the paths column when there are none (a fork commit)
        line += ("  " if paths else "") + color(f"[{e.branch}]", "cyan", on)
    if e.findings:
        line += "  " + color("[" + ", ".join(f"{k}:{v}" for k, v in sorted(e.findings.items())) + "]", "red", on)
    redacted = [c.redacted for c in e.changes if c.redacted is not None]
    if redacted:
        by = sorted({str(r.get("actor")) for r in redacted if r.get("actor")})
        line += "  " + color(f"[{len(redacted)} redacted{' by ' + ', '.join(by) if by else ''}]", "red", on)
    return line.rstrip()


def _cmd_log(args: argparse.Namespace) -> int:
    if args.follow and not args.path:
        raise InvalidInputError("--follow needs a PATH (memvault log --follow -- PATH).")
    since = parse_when(args.since) if args.since is not None else None
    until = parse_when(args.until, end=True) if args.until is not None else None
    branch = branch_name(args.branch) if args.branch is not None else None
    on = use_color() and not args.json
    with open_store(args) as main:
        store = _history_of(main, branch)
        entries = iter_log(
            store,
            start=args.rev,
            path=args.path,
            follow=args.follow,
            actor=args.actor,
            session=args.session,
            operations=args.op,
            since=since,
            until=until,
        )
        rows: list[dict[str, Any]] = []
        first = True
        for i, info in enumerate(entries):
            if i < args.skip:
                continue
            if args.n is not None and i >= args.skip + args.n:
                break
            diffs = _commit_diff(store, info.commit_id.encode()) if (args.patch or args.stat) else []
            if args.json:
                row = info.to_json()
                if args.stat:
                    row["stat"] = _stat_json(_stat(info, diffs))
                if args.patch:
                    row["patch"] = format_diff(diffs)
                rows.append(row)
                continue
            block = [format_log_line(info, on)]
            if args.stat:
                block.extend(_stat_lines(_stat(info, diffs), on))
            text = "\n".join(block) + "\n"
            if args.patch:
                text += _color_patch(terminal_safe(format_diff(diffs)), on)
            if (args.patch or args.stat) and not first:
                text = "\n" + text
            first = False
            _write(text)
        if args.json:
            print_json(rows)
    return ExitStatus.SUCCESS


# -- show ------------------------------------------------------------------------------------------


def split_rev_path(spec: str) -> tuple[str, str | None]:
    """``REV[:PATH]`` -> ``(REV, PATH or None)``; a ``@{time}`` may itself contain colons."""
    end = spec.rfind("}")
    cut = spec.find(":", end + 1 if end >= 0 else 0)
    if cut < 0:
        return spec, None
    rev, path = spec[:cut], spec[cut + 1 :]
    if not path:
        raise InvalidInputError(f"No path after the colon in {spec!r}; use REV:/memories/...")
    return rev, path if path.startswith("/") else "/" + path


def _show_header(info: CommitInfo, on: bool) -> list[str]:
    lines = [
        color(f"commit {info.commit_id}", "yellow", on),
        f"Seq:      #{info.seq}",
        f"Date:     {fmt_time(info.time)}",
        f"Actor:    {info.actor}",
        f"Session:  {info.session or '-'}",
        f"Command:  {info.command} " + (" -> ".join(info.paths) if info.command == "rename" else " ".join(info.paths)),
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
    with open_store(args) as main:
        store = _history_of(main, branch)
        commit_id = resolve(store, rev)
        if path is not None:
            path = parse_path(path).text
            data = read_at(store, path, commit_id)
            if args.json:
                print_json(_content_json(commit_id, path, data))
            else:
                _emit_bytes(data)
            return ExitStatus.SUCCESS
        info = next(iter_log(store, start=commit_id))
        diffs = _commit_diff(store, commit_id)
        stat = _stat(info, diffs)
        if args.json:
            print_json({**info.to_json(), "stat": _stat_json(stat), "patch": format_diff(diffs)})
            return ExitStatus.SUCCESS
        on = use_color()
        text = "\n".join(_show_header(info, on)) + "\n"
        if stat:
            text += "\n" + "\n".join(_stat_lines(stat, on)) + "\n"
        patch = terminal_safe(format_diff(diffs))
        if patch:
            text += "\n" + _color_patch(patch, on)
        _write(text)
    return ExitStatus.SUCCESS


# -- diff ------------------------------------------------------------------------------------------


def _cmd_diff(args: argparse.Namespace) -> int:
    revs = [a for a in args.args if not a.startswith("/")]
    paths = [a for a in args.args if a.startswith("/")]
    if len(revs) == 1 and ".." in revs[0]:
        left, right = revs[0].split("..", 1)
        revs = [left or "HEAD", right or "HEAD"]
    if len(revs) > 2:
        raise InvalidInputError("diff takes at most two revisions.")
    if len(paths) > 1:
        raise InvalidInputError("diff takes at most one PATH.")
    path = paths[0] if paths else None
    branch = branch_name(args.branch) if args.branch is not None else None
    with open_store(args) as main:
        store = _history_of(main, branch)
        old: bytes | None
        if not revs:
            new = resolve(store, "HEAD")
            old = _parent(store, new)
        else:
            old = resolve(store, revs[0])
            new = resolve(store, revs[1]) if len(revs) == 2 else resolve(store, "HEAD")
        diffs = diff(store, old, new, path)
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
            _write(_color_patch(terminal_safe(format_diff(diffs)), use_color()))
    return ExitStatus.SUCCESS


# -- blame, cat, ls --------------------------------------------------------------------------------


def format_blame(lines: Sequence[BlameLine], on: bool = False) -> list[str]:
    width = len(str(len(lines)))
    actor_width = max((len(b.actor) for b in lines), default=0)
    return [
        f"{color(b.commit_id[:SHORT], 'yellow', on)}  #{b.seq:<4} {b.actor:<{actor_width}}  {b.line:>{width}}) "
        f"{terminal_safe(b.text)}"
        for b in lines
    ]


def _cmd_blame(args: argparse.Namespace) -> int:
    branch = branch_name(args.branch) if args.branch is not None else None
    with open_store(args) as main:
        store = _history_of(main, branch)
        lines = blame(store, args.path, resolve(store, args.rev))
    if args.json:
        print_json([b.to_json() for b in lines])
    else:
        out = format_blame(lines, use_color())
        _write("".join(line + "\n" for line in out))
    return ExitStatus.SUCCESS


def _cmd_cat(args: argparse.Namespace) -> int:
    branch = branch_name(args.branch) if args.branch is not None else None
    with open_store(args) as main:
        store = _history_of(main, branch)
        commit_id = resolve(store, args.rev)
        path = parse_path(args.path).text
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
    with open_store(args) as main:
        store = _history_of(main, branch)
        commit_id = resolve(store, args.rev)
        entries = tree_at(store, commit_id, args.path) if args.path else tree_at(store, commit_id)
    if args.json:
        print_json([e.to_json() for e in entries])
    else:
        _write("".join(line + "\n" for line in format_ls(entries)))
    return ExitStatus.SUCCESS


# -- registration ----------------------------------------------------------------------------------


def _json_flag(s: argparse.ArgumentParser) -> None:
    s.add_argument("--json", action="store_true", help="machine-readable output")


def _branch_flag(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--branch",
        metavar="NAME",
        help="read the history of this dream branch (dream/<16 hex digits>, or the digits alone) instead of main's",
    )


def register(sub: Any) -> None:
    s = sub.add_parser(
        "log",
        help="list commits, newest first",
        description="List commits, newest first, one per line: short id, #seq, local time, actor, "
        "command, paths, scrubber findings. " + REVISION_HELP + ".",
    )
    s.add_argument("path", nargs="?", help="only commits that changed this file or anything below this directory")
    s.add_argument("--rev", default="HEAD", help="start from this revision (default: HEAD)")
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
    s.add_argument("-n", type=_count, default=None, metavar="N", help="show at most N commits")
    s.add_argument("--skip", type=_count, default=0, metavar="N", help="skip the first N matching commits")
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
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_show))

    s = sub.add_parser(
        "diff",
        help="unified diff between two revisions",
        description="No revision: HEAD against its parent (what the last commit did). One revision REV: "
        "REV against HEAD. Two revisions (or A..B): the first against the second. A PATH (after --) "
        "limits the diff to that file or directory. " + REVISION_HELP + ".",
        usage="memvault diff [--json] [--branch NAME] [REV [REV]] [-- PATH]",
    )
    s.add_argument("args", nargs="*", metavar="REV|PATH", help=argparse.SUPPRESS)
    _branch_flag(s)
    _json_flag(s)
    s.set_defaults(func=_cli(_cmd_diff))

    s = sub.add_parser("blame", help="for each line of a file, the commit and actor that last changed it")
    s.add_argument("path", metavar="PATH")
    s.add_argument("--rev", default="HEAD", help="blame the file as of this revision (default: HEAD)")
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
