"""Operator writes: ``put``, ``edit``, ``rm`` and ``mv`` (:mod:`memvault.edits.files`).

Each is one commit attributed to ``--actor`` (default ``operator``), scrubbed and refused as the
memory tool's writes are. ``edit`` opens ``$VISUAL``, else ``$EDITOR``, else ``vi`` on a private
temporary copy (mode 0600 in a directory of mode 0700, in ``/dev/shm`` where there is one), which
is overwritten with zeros and removed afterwards, also when the editor fails or on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ..errors import ExitStatus, LimitExceededError, MemvaultError
from ..fsutil import wipe_file
from ._common import open_input, open_store, print_json, read_input, terminal_safe

if TYPE_CHECKING:
    from ..edits.files import OperatorWrite

__all__ = ["register", "private_edit_file", "shred_dir"]

#: Where the temporary copy of an edit goes when it exists: memory, never a disk.
SHM = "/dev/shm"  # noqa: S108 (a private directory is made inside it)


def _commit(result: OperatorWrite) -> str:
    return f"commit {(result.commit_id or '')[:10]} (#{result.seq})"


def _note(result: OperatorWrite) -> str:
    if result.binary:
        return "\nNote: an image is stored without scanning (the scrubber reads text only)."
    if not result.findings:
        return ""
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(result.findings.items()))
    return (
        f"\nNote: sensitive data was removed before storing ({parts}); the file shows [REDACTED:<kind>] in its place."
    )


def _emit(result: OperatorWrite, text: str, args: argparse.Namespace) -> int:
    if args.json:
        print_json(result.to_json())
    else:
        print(terminal_safe(text) + _note(result))
    return ExitStatus.SUCCESS


# -- put -------------------------------------------------------------------------------------------


def _read_input(source: BinaryIO | None, name: str, limit: int, shown: str) -> bytes:
    """At most ``limit`` bytes of ``source`` (the file ``name``), or of stdin for None; more is
    refused."""
    if source is None:
        if sys.stdin.isatty():
            print("Reading the content from standard input; end it with Ctrl-D.", file=sys.stderr)
        data = sys.stdin.buffer.read(limit + 1)
    else:
        data = read_input(source, name, limit + 1)
    if len(data) > limit:
        raise LimitExceededError(f"The content for {shown} is over the limit of {limit} bytes per file.")
    return data


def _cmd_put(args: argparse.Namespace) -> int:
    from ..edits.files import put
    from ..paths import parse_path

    # The local file first: a name mistyped is told before a passphrase is asked for.
    with contextlib.ExitStack() as stack:
        source = None if args.file in (None, "-") else stack.enter_context(open_input(args.file))
        with open_store(args) as store:
            shown = parse_path(args.path, store.settings).text
            data = _read_input(source, args.file, store.settings.max_file_bytes, shown)
            result = put(store, args.path, data, actor=args.actor, session=args.session)
    what = "new file" if result.created else "replaced"
    return _emit(result, f"Wrote {result.paths[0]} ({what}) in {_commit(result)}.", args)


# -- edit ------------------------------------------------------------------------------------------


def shred_dir(directory: Path) -> None:
    """Overwrite every regular file below ``directory`` with zeros and remove it, then the
    directories (what an editor leaves beside the file too: swap and backup files)."""
    for root, dirs, files in os.walk(directory, topdown=False):
        for name in files:
            path = Path(root) / name
            try:
                if stat.S_ISREG(os.lstat(path).st_mode):
                    wipe_file(path)
                else:
                    path.unlink()
            except OSError:
                pass  # removed meanwhile; rmtree below takes what is left
        for name in dirs:
            with contextlib.suppress(OSError):
                (Path(root) / name).rmdir()
    with contextlib.suppress(OSError):
        directory.rmdir()
    if directory.exists():
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def private_edit_file(name: str, content: bytes) -> Iterator[Path]:
    """A file holding ``content``, mode 0600 in a new directory of mode 0700 (in ``/dev/shm``
    where it can be), shredded with everything beside it when the block ends, however it ends."""
    base = SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK | os.X_OK) else None
    directory = Path(tempfile.mkdtemp(prefix="memvault-edit-", dir=base))
    try:
        path = directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        yield path
    finally:
        shred_dir(directory)


def _editor() -> str:
    return os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"


def _editor_name(editor: str) -> str:
    """The program of an editor command line, for messages."""
    try:
        words = shlex.split(editor)
    except ValueError:
        return editor
    return words[0] if words else editor


def _ended(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _shred_on_hangup() -> Iterator[None]:
    """A hangup (the terminal closed) or SIGTERM ends the command through the ``finally``
    blocks, so the temporary copy is shredded then too (by default they end the process on
    the spot)."""
    previous = {sig: signal.signal(sig, _ended) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_editor(editor: str, path: Path) -> int:
    """Run ``editor`` on ``path`` through the shell (as git does: ``$EDITOR`` may hold
    arguments); Ctrl-C goes to the editor, not to memvault, while it runs."""
    previous = signal.signal(signal.SIGINT, lambda _sig, _frame: None)  # the child gets the default back
    try:
        return subprocess.call(["/bin/sh", "-c", editor + ' "$@"', editor, str(path)])  # noqa: S603
    finally:
        signal.signal(signal.SIGINT, previous)


def _cmd_edit(args: argparse.Namespace) -> int:
    from .. import crypto
    from ..edits.files import read_for_edit, save_edit

    editor = _editor()
    with open_store(args) as store:
        path, content = read_for_edit(store, args.path)
        name = path.rpartition("/")[2]
        with _shred_on_hangup(), private_edit_file(name, content or b"") as tmp:
            status = _run_editor(editor, tmp)
            if status != 0:
                raise MemvaultError(
                    f"The editor ({_editor_name(editor)}) exited with status {status}; nothing was written."
                )
            edited = tmp.read_bytes()
        if edited == (content or b""):
            if args.json:
                print_json({"command": "edit", "paths": [path], "commit": None, "seq": None})
            else:
                print(terminal_safe(f"No changes to {path}; nothing was committed."))
            return ExitStatus.SUCCESS
        expected = None if content is None else crypto.sha256(content).hex()
        result = save_edit(store, path, edited, expected_sha256=expected, actor=args.actor, session=args.session)
    return _emit(result, f"Saved {path}{' (new file)' if result.created else ''} in {_commit(result)}.", args)


# -- rm, mv ----------------------------------------------------------------------------------------


def _cmd_rm(args: argparse.Namespace) -> int:
    from ..edits.files import remove

    with open_store(args) as store:
        result = remove(store, args.path, recursive=args.recursive, actor=args.actor, session=args.session)
    return _emit(result, f"Deleted {result.paths[0]} in {_commit(result)}.", args)


def _cmd_mv(args: argparse.Namespace) -> int:
    from ..edits.files import move

    with open_store(args) as store:
        result = move(store, args.old, args.new, actor=args.actor, session=args.session)
    return _emit(result, f"Moved {result.paths[0]} to {result.paths[1]} in {_commit(result)}.", args)


# -- registration ----------------------------------------------------------------------------------


def _common(s: argparse.ArgumentParser) -> None:
    s.add_argument("--actor", default="operator", help="who the commit is attributed to (default: operator)")
    s.add_argument("--session", default="", help="session recorded with the commit (default: none)")
    s.add_argument("--json", action="store_true", help="machine-readable output")


def register(sub: Any) -> None:
    s = sub.add_parser(
        "put",
        help="create or replace a file from FILE or stdin, as one commit (scrubbed like the model's writes)",
        description="Create or replace PATH with the content of FILE (or stdin: no FILE, or -), as one commit. "
        "The content must be UTF-8 text, which passes the store's scrubber as the memory tool's writes do, "
        "or a PNG or JPEG image for a path ending in .png, .jpg or .jpeg (stored as binary, unscanned).",
    )
    s.add_argument("path", metavar="PATH", help="a file path under /memories")
    s.add_argument("file", metavar="FILE", nargs="?", help="read the content from FILE (default, or -: stdin)")
    _common(s)
    s.set_defaults(func=_cmd_put)

    s = sub.add_parser(
        "edit",
        help="edit a file in $VISUAL / $EDITOR (else vi) and commit the change",
        description="Open PATH (or a new, empty file) in $VISUAL, else $EDITOR, else vi, on a private temporary "
        "copy (0600, in a 0700 directory, in /dev/shm where there is one) that is overwritten with zeros and "
        "removed afterwards. Saving a change makes one commit, scrubbed like the model's writes; unchanged "
        "content makes none; an editor that exits non-zero aborts. The commit is refused if the file changed "
        "meanwhile (exit 5).",
    )
    s.add_argument("path", metavar="PATH", help="a file path under /memories (a new file if it does not exist)")
    _common(s)
    s.set_defaults(func=_cmd_edit)

    s = sub.add_parser("rm", help="delete a file (a directory and everything below it with -r), as one commit")
    s.add_argument("path", metavar="PATH")
    s.add_argument("-r", "--recursive", action="store_true", help="delete a directory and everything below it")
    _common(s)
    s.set_defaults(func=_cmd_rm)

    s = sub.add_parser("mv", help="move or rename a file or directory, as one commit")
    s.add_argument("old", metavar="OLD")
    s.add_argument("new", metavar="NEW", help="the new path (must not exist)")
    _common(s)
    s.set_defaults(func=_cmd_mv)
