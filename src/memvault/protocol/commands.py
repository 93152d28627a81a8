"""The ``memory_20250818`` protocol over a :class:`~memvault.store.MemoryStore`.

This module owns the wire contract: input validation, the six commands, and the exact result
and error strings of Anthropic's documentation (where the SDK reference deviates, the
documentation wins). It does not import ``anthropic``;
:mod:`memvault.agent.tool` adapts it to the SDK. Every failure is a
:class:`~memvault.errors.MemvaultError` whose message is the tool error text.

Every path goes through :func:`memvault.paths.parse_path` before any storage call.
"""

from __future__ import annotations

import base64
import functools
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import (
    EditError,
    InvalidInputError,
    InvalidPathError,
    LimitExceededError,
    MemvaultError,
    PathExistsError,
    PathNotFoundError,
)
from ..paths import ROOT, MemoryPath, display, parse_path
from ..scrub.guard import check_path, scrub_edit, scrub_text
from ..store import AnyBranch, Transaction

__all__ = [
    "COMMANDS",
    "IMAGE_SUFFIXES",
    "ToolResult",
    "run_command",
    "clear_all_memory",
    "CLEARED",
    "format_size",
    "MAX_LINES",
]

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
#: The documented line limit of a file view.
MAX_LINES = 999_999
_LINE_NUMBER_WIDTH = 6
#: Directory "size" shown in listings, as a Linux filesystem would print it.
_DIR_SIZE = "4.0K"
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
#: Name suffixes of the images a store keeps as binary files (the tool views them as images).
IMAGE_SUFFIXES = frozenset(_IMAGE_TYPES)
_HIDDEN_DIR = "node_modules"

#: What a command returns: text, or content blocks (an image view).
ToolResult = str | list[dict[str, Any]]

_FIELDS: dict[str, tuple[tuple[str, type, bool], ...]] = {
    # name, type, required
    "view": (("path", str, True), ("view_range", list, False)),
    "create": (("path", str, True), ("file_text", str, True)),
    "str_replace": (("path", str, True), ("old_str", str, True), ("new_str", str, False)),
    "insert": (("path", str, True), ("insert_line", int, True), ("insert_text", str, True)),
    "delete": (("path", str, True),),
    "rename": (("old_path", str, True), ("new_path", str, True)),
}


def _validate_input(data: object) -> tuple[str, dict[str, Any]]:
    if not isinstance(data, Mapping):
        raise InvalidInputError("Error: The memory tool input must be a JSON object.")
    command = data.get("command")
    if command not in COMMANDS:
        shown = "missing" if command is None else f"`{display(command)}`"
        raise InvalidInputError(
            f"Error: Unknown command {shown}. Valid commands are: {', '.join(COMMANDS)}."
            if command is not None
            else "Error: Missing required field `command`. Valid commands are: " + ", ".join(COMMANDS) + "."
        )
    args: dict[str, Any] = {}
    for name, typ, required in _FIELDS[command]:
        value = data.get(name)
        if value is None:
            if required:
                raise InvalidInputError(f"Error: Missing required field `{name}` for command `{command}`.")
            continue
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            kind = {str: "a string", int: "an integer", list: "a list"}[typ]
            raise InvalidInputError(f"Error: Field `{name}` of command `{command}` must be {kind}.")
        if isinstance(value, str) and not name.endswith("path"):  # paths: the path grammar decides
            _check_text(name, value)
        args[name] = value
    return command, args


#: A lone surrogate: text that cannot be encoded as UTF-8 (found without copying the text).
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _check_text(name: str, value: str) -> None:
    if not value.isascii() and _SURROGATE_RE.search(value) is not None:
        raise InvalidInputError(f"Error: Field `{name}` is not valid Unicode text (it contains a lone surrogate).")


def _path(store: AnyBranch, raw: str) -> MemoryPath:
    return parse_path(raw, store.settings)


#: Text fields of the commands; none may be longer than a whole file may be.
_TEXT_FIELDS = ("file_text", "old_str", "new_str", "insert_text")


def run_command(store: AnyBranch, data: object, *, actor: str, session: str) -> ToolResult:
    """Validate and execute one memory tool command; raise MemvaultError on any failure."""
    command, args = _validate_input(data)
    limit = store.settings.max_file_bytes
    for name in _TEXT_FIELDS:
        value = args.get(name)
        if value is not None and len(value) > limit:  # characters <= UTF-8 bytes
            raise LimitExceededError(
                f"Error: `{name}` is {len(value)} characters long, over the limit of {limit} bytes per file"
            )
    handler = _HANDLERS[command]
    return handler(store, args, actor, session)


# -- formatting ----------------------------------------------------------------------------------


def format_size(n: int) -> str:
    """Human-readable size: ``512B``, ``5.5K``, ``12K``, ``1.2M``."""
    if n < 1024:
        return f"{n}B"
    value = float(n)
    for unit in ("K", "M", "G", "T"):
        value /= 1024
        if value < 1024 or unit == "T":
            return f"{value:.1f}{unit}" if value < 10 else f"{round(value)}{unit}"
    raise AssertionError("unreachable")


def _lines(text: str) -> list[str]:
    """Split on LF only (CR is kept), without the empty tail a trailing newline leaves."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


#: Line numbers whose row prefix (number padded to _LINE_NUMBER_WIDTH, tab) is kept ready: a
#: whole view at the default ``view_max_chars`` holds fewer rows.
_LABEL_COUNT = 2048


@functools.cache
def _labels() -> tuple[str, ...]:
    """The row prefix of every line number below :data:`_LABEL_COUNT` (built at first use)."""
    return tuple(str(n).rjust(_LINE_NUMBER_WIDTH) + "\t" for n in range(_LABEL_COUNT))


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{str(i).rjust(_LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines, first))


# -- view ------------------------------------------------------------------------------------------


def _view(store: AnyBranch, args: dict[str, Any], actor: str, session: str) -> ToolResult:
    path = _path(store, args["path"])
    with store.reading() as snap:
        return _view_at(store, snap, path, args)


def _view_at(store: AnyBranch, snap: Transaction, path: MemoryPath, args: dict[str, Any]) -> ToolResult:
    if snap.is_dir(path):
        return _view_dir(snap, path)
    node = snap.get(path)
    if node is None:
        raise PathNotFoundError(f"The path {path.text} does not exist. Please provide a valid path.")
    data = snap.read(path)
    store.note_read(node)  # for expiry (memory only; see MemoryStore.note_read)
    suffix = "." + path.name.rpartition(".")[2].lower() if "." in path.name else ""
    if node.binary:
        media_type = _IMAGE_TYPES.get(suffix)
        if media_type is None:
            raise InvalidInputError(f"Error: {path.text} is a binary file and cannot be shown as text.")
        return [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()},
            }
        ]
    return _view_file(store, path, data.decode("utf-8"), args.get("view_range"))


def _view_dir(snap: Transaction, path: MemoryPath) -> str:
    rows = [f"{_DIR_SIZE}\t{path.text}"]

    def walk(directory: MemoryPath, depth: int) -> None:
        for name in snap.child_names(directory):
            if name.startswith(".") or name == _HIDDEN_DIR:
                continue
            child = directory.child(name)
            node = snap.get(child)
            if node is None:
                continue
            if node.is_dir:
                rows.append(f"{_DIR_SIZE}\t{child.text}")
                if depth < 2:
                    walk(child, depth + 1)
            else:
                rows.append(f"{format_size(node.size)}\t{child.text}")

    walk(path, 1)
    header = (
        f"Here're the files and directories up to 2 levels deep in {path.text}, "
        "excluding hidden items and node_modules:"
    )
    return header + "\n" + "\n".join(rows)


def _view_range(raw: object, n_lines: int) -> tuple[int, int]:
    """``[start, end]`` (1-based, inclusive; ``end == -1`` means the last line) clipped to the
    file, as the SDK reference does: out-of-range numbers select fewer lines, never an error.
    Only a malformed value (not a list of two integers) is refused."""
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw)
    ):
        shown = f"a list of {len(raw)} items" if isinstance(raw, list) and len(raw) > 2 else display(raw)
        raise InvalidInputError(f"Error: Invalid `view_range` parameter: {shown}. It should be a list of two integers.")
    start, end = raw
    start = max(1, start)
    end = n_lines if end == -1 else min(end, n_lines)
    return start, end


def _view_file(store: AnyBranch, path: MemoryPath, text: str, view_range: object) -> str:
    """Numbered lines of the file (or of ``view_range``), at most ``view_max_chars`` of output.

    A longer view stops at a line boundary and ends with a one-line notice telling Claude which
    ``view_range`` continues it; the limit applies to ranged views too, so paging is bounded.
    """
    lines = _lines(text)
    if len(lines) > MAX_LINES:
        raise LimitExceededError(f"File {path.text} exceeds maximum line limit of 999,999 lines.")
    header = f"Here's the content of {path.text} with line numbers:\n"
    start, end = (1, len(lines)) if view_range is None else _view_range(view_range, len(lines))
    limit = store.settings.view_max_chars
    if start <= end:
        selected = lines[start - 1 : end]
        # Every row is the number padded to _LINE_NUMBER_WIDTH (MAX_LINES has that many digits),
        # a tab and the line, plus a newline: when all of them fit, join them in one pass.
        if sum(map(len, selected)) + (_LINE_NUMBER_WIDTH + 2) * len(selected) <= limit:
            if end < _LABEL_COUNT:
                return header + "\n".join(map(operator.add, _labels()[start : end + 1], selected))
            return header + _numbered(selected, start)
    rows: list[str] = []
    used = 0
    cut = False
    for number in range(start, end + 1):
        row = f"{str(number).rjust(_LINE_NUMBER_WIDTH)}\t{lines[number - 1]}"
        if used + len(row) + 1 > limit:
            if not rows:  # one line longer than the whole budget: show its beginning
                rows.append(row[:limit])
                cut = True
            break
        rows.append(row)
        used += len(row) + 1
    last = start + len(rows) - 1
    if last >= end and not cut:  # also an empty selection (start past the end)
        return header + "\n".join(rows)
    if cut:
        notice = f"[Line {start} of {path.text} is longer than the {limit}-character view limit and is cut.]"
    else:
        upto = -1 if end == len(lines) else end
        notice = (
            f"[{path.text} has {len(lines)} lines and {len(text)} characters; only lines {start}-{last} are "
            f"shown (a view is limited to {limit} characters). Use view_range to read on, "
            f"e.g. view_range [{last + 1}, {upto}].]"
        )
    return header + "\n".join(rows) + "\n" + notice


# -- mutations ---------------------------------------------------------------------------------------


def _read_text(txn: Transaction, path: MemoryPath, missing: str) -> str:
    """The text of the file at ``path``; a directory or absent path is ``missing``."""
    node = None if path.is_root else txn.get(path)
    if node is None or node.is_dir:
        raise PathNotFoundError(missing)
    if node.binary:
        raise InvalidInputError(f"Error: {path.text} is a binary file and cannot be edited as text.")
    return txn.read(path).decode("utf-8")


def _encode(store: AnyBranch, path: MemoryPath, text: str) -> bytes:
    data = text.encode("utf-8")
    _check_size(store, path, len(data))
    return data


def _check_size(store: AnyBranch, path: MemoryPath, size: int) -> None:
    if size > store.settings.max_file_bytes:
        raise LimitExceededError(
            f"Error: The content for {path.text} is {size} bytes, over the limit of "
            f"{store.settings.max_file_bytes} bytes per file"
        )


def _utf8_size(text: str) -> int:
    """The UTF-8 length of ``text`` (without encoding an ASCII text)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _with_note(message: str, findings: dict[str, int]) -> str:
    """Tell Claude what was redacted (kinds and counts, never values), so it does not put it back."""
    if not findings:
        return message
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(findings.items()))
    return (
        f"{message}\n\nNote: sensitive data was removed before storing ({parts}); the file shows "
        "[REDACTED:<kind>] in its place. Do not try to restore it."
    )


def _create(store: AnyBranch, args: dict[str, Any], actor: str, session: str) -> ToolResult:
    path = _path(store, args["path"])
    if path.is_root:
        raise PathExistsError("Error: /memories is a directory; give a file path below it")
    check_path(store, path)
    findings: dict[str, int] = {}
    _check_size(store, path, _utf8_size(args["file_text"]))  # before scrubbing: a refused text costs nothing
    data = _encode(store, path, scrub_text(store, args["file_text"], findings))

    def apply(txn: Transaction) -> str:
        node = txn.get(path)
        if node is not None:
            if node.is_dir:
                raise PathExistsError(f"Error: {path.text} is a directory")
            if not store.settings.overwrite_on_create:
                raise PathExistsError(f"Error: File {path.text} already exists")
        txn.write_file(path, data)
        return _with_note(f"File created successfully at: {path.text}", findings)

    return store.transact(
        apply, command="create", paths=(path.text,), actor=actor, session=session, findings=findings
    ).value


#: The "Multiple occurrences" error lists at most this many line numbers, then ", and more": a
#: one-character old_str in a 100 KiB file would otherwise list 100,000 of them (a result far
#: larger than any view may be).
MAX_LISTED_LINES = 100


def _line_numbers(content: str, needle: str) -> str:
    """The line of every occurrence of ``needle`` (overlapping ones too, as the SDK lists them),
    at most :data:`MAX_LISTED_LINES` of them; linear in the part of ``content`` scanned."""
    out: list[str] = []
    line = 1
    scanned = 0
    pos = content.find(needle)
    while pos != -1:
        if len(out) == MAX_LISTED_LINES:
            out.append("and more")
            break
        line += content.count("\n", scanned, pos)
        scanned = pos
        out.append(str(line))
        pos = content.find(needle, pos + 1)
    return ", ".join(out)


@dataclass(frozen=True)
class _Edit:
    """A file's text after an edit, before scrubbing: ``text[start:end]`` is what the edit wrote."""

    text: str
    start: int
    end: int
    #: 0-based line where the edit starts, and how many lines it wrote (for the result's snippet).
    line: int
    lines: int


@dataclass(frozen=True)
class _Scrubbed:
    """The outcome of scrubbing an edit of ``content``: the text to store, or the error to raise."""

    content: str
    edit: _Edit
    text: str | None
    findings: dict[str, int]
    error: MemvaultError | None


def _scrub_edit(store: AnyBranch, path: MemoryPath, content: str, edit: _Edit) -> _Scrubbed:
    """Scrub ``edit`` of ``content`` (the size limit first: a text over it is never scanned)."""
    findings: dict[str, int] = {}
    try:
        _check_size(store, path, _utf8_size(edit.text))
        text = scrub_edit(store, edit.text, edit.start, edit.end, findings)
    except MemvaultError as err:
        return _Scrubbed(content, edit, None, {}, err)
    return _Scrubbed(content, edit, text, findings, None)


def _edit(
    store: AnyBranch,
    path: MemoryPath,
    missing: str,
    make: Callable[[str], _Edit],
    done: Callable[[_Edit, str], str],
    *,
    command: str,
    actor: str,
    session: str,
) -> ToolResult:
    """Run an edit of the file at ``path``: ``make(content)`` builds it (raising the command's
    errors), ``done(edit, stored text)`` words the result.

    The edit is scrubbed *before* the store's writer lock is taken, on the file as a read shows
    it, so that scanning never holds other writers up; under the lock the file is read again, and
    only if it changed meanwhile is the edit made and scrubbed again there. That first read takes
    in no other host's commits (a store in object storage): ``transact`` does, so the command
    lists the log once.
    """
    early: _Scrubbed | None = None
    try:
        with store.reading(pull=False) as snap:
            content = _read_text(snap, path, missing)
        early = _scrub_edit(store, path, content, make(content))
    except MemvaultError:
        early = None  # the same error is raised under the lock, from the state it sees

    findings: dict[str, int] = {}

    def apply(txn: Transaction) -> str:
        content = _read_text(txn, path, missing)
        outcome = early if early is not None and early.content == content else None
        if outcome is None:  # the file changed since it was read (or could not be read then)
            outcome = _scrub_edit(store, path, content, make(content))
        if outcome.error is not None:
            raise outcome.error
        assert outcome.text is not None
        txn.write_file(path, _encode(store, path, outcome.text))
        findings.update(outcome.findings)
        return _with_note(done(outcome.edit, outcome.text), findings)

    return store.transact(
        apply, command=command, paths=(path.text,), actor=actor, session=session, findings=findings
    ).value


def _str_replace(store: AnyBranch, args: dict[str, Any], actor: str, session: str) -> ToolResult:
    path = _path(store, args["path"])
    old_str: str = args["old_str"]
    new_str: str = args.get("new_str", "")
    if old_str == "":
        raise EditError("Error: `old_str` must not be empty.")

    def make(content: str) -> _Edit:
        count = content.count(old_str)
        if count == 0:
            raise EditError(
                f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path.text}."
            )
        if count > 1:
            lines = _line_numbers(content, old_str)
            raise EditError(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: {lines}. "
                "Please ensure it is unique"
            )
        pos = content.find(old_str)
        text = content[:pos] + new_str + content[pos + len(old_str) :]
        return _Edit(text, pos, pos + len(new_str), content.count("\n", 0, pos), new_str.count("\n"))

    def done(edit: _Edit, stored: str) -> str:
        new_lines = _lines(stored)
        first = max(0, edit.line - 2)
        last = min(len(new_lines), edit.line + edit.lines + 3)
        snippet = _numbered(new_lines[first:last], first + 1)
        return f"The memory file has been edited. Snippet of {path.text} with line numbers:\n{snippet}"

    missing = f"Error: The path {path.text} does not exist. Please provide a valid path."
    return _edit(store, path, missing, make, done, command="str_replace", actor=actor, session=session)


def _insert(store: AnyBranch, args: dict[str, Any], actor: str, session: str) -> ToolResult:
    path = _path(store, args["path"])
    line: int = args["insert_line"]
    text: str = args["insert_text"]
    # One trailing LF ends the inserted text's last line; any further LFs are blank lines the
    # model asked for (the SDK strips them all).
    inserted = (text[:-1] if text.endswith("\n") else text).split("\n")

    def make(content: str) -> _Edit:
        lines = _lines(content)
        if line < 0 or line > len(lines):
            raise EditError(
                f"Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines "
                f"of the file: [0, {len(lines)}]"
            )
        start = sum(map(len, lines[:line])) + line  # each line before and its LF
        lines[line:line] = inserted
        written = sum(map(len, inserted)) + len(inserted) - 1
        return _Edit("\n".join(lines) + "\n", start, start + written, line, len(inserted))

    def done(_edit: _Edit, _stored: str) -> str:
        return f"The file {path.text} has been edited."

    missing = f"Error: The path {path.text} does not exist"
    return _edit(store, path, missing, make, done, command="insert", actor=actor, session=session)


def _delete(store: AnyBranch, args: dict[str, Any], actor: str, session: str) -> ToolResult:
    path = _path(store, args["path"])
    if path.is_root:
        raise InvalidPathError("Error: Cannot delete the /memories directory itself")

    def apply(txn: Transaction) -> str:
        if txn.get(path) is None:
            raise PathNotFoundError(f"Error: The path {path.text} does not exist")
        txn.delete(path)
        return f"Successfully deleted {path.text}"

    return store.transact(apply, command="delete", paths=(path.text,), actor=actor, session=session).value


def _rename(store: AnyBranch, args: dict[str, Any], actor: str, session: str) -> ToolResult:
    old = _path(store, args["old_path"])
    new = _path(store, args["new_path"])
    if old.is_root:
        raise InvalidPathError("Error: Cannot rename the /memories directory itself")
    if new.is_root:
        raise PathExistsError("Error: The destination /memories already exists")
    check_path(store, new)
    # Every path below a moved directory gets a new name too: each is checked as create would
    # check it, before the writer lock is taken (and, under it, any that appeared meanwhile, also
    # those of other hosts' commits: this read takes none in, transact does).
    checked = {new.text}
    with store.reading(pull=False) as snap:
        moving = [_rebase(p, old, new) for p in snap.descendants(old)] if snap.is_dir(old) else []
    for dst in moving:
        check_path(store, dst)
        checked.add(dst.text)

    def apply(txn: Transaction) -> str:
        if txn.get(old) is None:
            raise PathNotFoundError(f"Error: The path {old.text} does not exist")
        if txn.get(new) is not None:
            raise PathExistsError(f"Error: The destination {new.text} already exists")
        if new.is_within(old):
            raise InvalidPathError(f"Error: Cannot move {old.text} into itself ({new.text})")
        if txn.is_dir(old):
            for src in txn.descendants(old):
                dst = _rebase(src, old, new)
                if dst.text not in checked:
                    check_path(store, dst)
        txn.rename(old, new)
        return f"Successfully renamed {old.text} to {new.text}"

    return store.transact(apply, command="rename", paths=(old.text, new.text), actor=actor, session=session).value


def _rebase(path: MemoryPath, old: MemoryPath, new: MemoryPath) -> MemoryPath:
    """``path`` (``old`` or below it) as it is named once ``old`` is renamed ``new``."""
    return MemoryPath(new.parts + path.parts[len(old.parts) :])


_HANDLERS = {
    "view": _view,
    "create": _create,
    "str_replace": _str_replace,
    "insert": _insert,
    "delete": _delete,
    "rename": _rename,
}


#: What ``clear_all_memory`` returns, as the SDK's ``BetaLocalFilesystemMemoryTool`` does.
CLEARED = "All memory cleared"


class _NothingToClear(Exception):
    """``/memories`` is empty already: no commit (never escapes this module)."""


def clear_all_memory(store: AnyBranch, *, actor: str, session: str) -> str:
    """Delete everything under ``/memories`` in one ``clear`` commit (none when it is empty);
    returns :data:`CLEARED`."""
    root = parse_path(ROOT)

    def apply(txn: Transaction) -> None:
        names = txn.child_names(root)
        if not names:
            raise _NothingToClear
        for name in names:
            txn.delete(root.child(name))

    try:
        store.transact(apply, command="clear", paths=(ROOT,), actor=actor, session=session)
    except _NothingToClear:
        pass
    return CLEARED
