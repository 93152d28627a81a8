"""What every CLI command shares: finding the store, getting the key, output helpers.

Secrets never come from the command line: the key is read from ``$MEMVAULT_PASSPHRASE``,
``$MEMVAULT_KEY_FILE`` or a terminal prompt.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from ..errors import InvalidInputError, KeyUnavailableError

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = [
    "ENV_STORE",
    "ENV_PASSPHRASE",
    "ENV_KEY_FILE",
    "ENV_KEY",
    "ENV_LOCK_TIMEOUT",
    "ENV_DEBUG",
    "store_path",
    "credentials",
    "ask_secret",
    "lock_timeout",
    "open_store",
    "fmt_time",
    "print_json",
    "use_color",
    "color",
    "progress_bar",
    "terminal_safe",
    "open_input",
    "read_input",
]

ENV_STORE = "MEMVAULT_STORE"
ENV_PASSPHRASE = "MEMVAULT_PASSPHRASE"  # noqa: S105 (a variable name, not a secret)
ENV_KEY_FILE = "MEMVAULT_KEY_FILE"
ENV_KEY = "MEMVAULT_KEY"
ENV_LOCK_TIMEOUT = "MEMVAULT_LOCK_TIMEOUT"
ENV_DEBUG = "MEMVAULT_DEBUG"


def store_path(args: argparse.Namespace) -> str | Path:
    """``--store``, else ``$MEMVAULT_STORE``, else the current directory: a path, or a URL
    (``s3://bucket/prefix``, ``file:///path``) kept as text."""
    from ..storage import is_remote

    raw = args.store or os.environ.get(ENV_STORE) or "."
    return raw if is_remote(raw) else Path(raw)


def credentials(*, confirm: bool = False, prompt: str = "memvault passphrase: ") -> dict[str, Any]:
    """Keyword arguments for ``MemoryStore.create/open``: a key provider's URI, a key file or a
    passphrase. A variable that is set but empty is an error that says so (never a silent prompt)."""
    for name in (ENV_KEY, ENV_PASSPHRASE, ENV_KEY_FILE):
        if name in os.environ and not os.environ[name]:
            raise KeyUnavailableError(f"{name} is set but empty: give it a value, or unset it.")
    key_file = os.environ.get(ENV_KEY_FILE)
    passphrase = os.environ.get(ENV_PASSPHRASE)
    key = os.environ.get(ENV_KEY)
    if sum(map(bool, (key_file, passphrase, key))) > 1:
        raise KeyUnavailableError(f"Set only one of {ENV_KEY}, {ENV_PASSPHRASE} and {ENV_KEY_FILE}.")
    if key:
        return {"key": key}
    if key_file:
        return {"key_file": key_file}
    if passphrase:
        return {"passphrase": passphrase}
    if not sys.stdin.isatty():
        raise KeyUnavailableError(f"No key: set {ENV_KEY}, {ENV_PASSPHRASE} or {ENV_KEY_FILE}, or run on a terminal.")
    first = ask_secret(prompt)
    if confirm and ask_secret("repeat passphrase: ") != first:
        raise KeyUnavailableError("The passphrases do not match.")
    return {"passphrase": first}


def ask_secret(prompt: str) -> str:
    """Read a secret at the terminal without echo. Ctrl-C ends the prompt's line before the
    interrupt goes on (the shell's next prompt starts on a line of its own); end of input is
    :class:`KeyUnavailableError`."""
    try:
        return getpass.getpass(prompt)
    except KeyboardInterrupt:
        _end_prompt_line()
        raise
    except EOFError:
        _end_prompt_line()
        raise KeyUnavailableError("No passphrase: the input ended.") from None


def _end_prompt_line() -> None:
    try:  # the prompt and the echoed ^C are on the terminal, wherever stderr goes
        with open("/dev/tty", "w") as tty:
            tty.write("\n")
    except OSError:
        sys.stderr.write("\n")
        sys.stderr.flush()


def lock_timeout(args: argparse.Namespace) -> float | None:
    """``--lock-timeout``, else ``$MEMVAULT_LOCK_TIMEOUT``: seconds a writer waits for the store's
    lock; None for the library's default."""
    seconds = getattr(args, "lock_timeout", None)
    if seconds is None:
        raw = os.environ.get(ENV_LOCK_TIMEOUT, "").strip()
        if not raw:
            return None
        try:
            seconds = float(raw)
        except ValueError:
            raise InvalidInputError(f"{ENV_LOCK_TIMEOUT} must be a number of seconds.") from None
        what = ENV_LOCK_TIMEOUT
    else:
        what = "--lock-timeout"
    if not 0 <= seconds < float("inf"):
        raise InvalidInputError(f"{what} must be a number of seconds, 0 or more.")
    return float(seconds)


def open_store(args: argparse.Namespace, **options: Any) -> MemoryStore:
    """Open the store the arguments and environment point at (waiting for its lock as
    :func:`lock_timeout` says); ``options`` go to ``MemoryStore.open``. A memory store of a
    server root (``ROOT/stores/memstore_...``) opens with the root's key source."""
    from ..store import MemoryStore

    timeout = lock_timeout(args)
    extra: dict[str, Any] = dict(options) if timeout is None else {**options, "lock_timeout": timeout}
    location = store_path(args)
    from ..server.root import open_served_store, served_root_of

    if served_root_of(location) is not None:  # a memory store of a server root: the root's key opens it
        from ..keys.slots import Unlock

        found = credentials()
        unlock = Unlock.of(found.get("passphrase"), found.get("key_file"), found.get("key"))
        return open_served_store(location, unlock, **extra)
    return MemoryStore.open(location, **extra, **credentials())


def port_number(text: str) -> int:
    """argparse type of a TCP port option: an integer 0-65535 (0: any free port)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port: {text!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port: {text!r}")
    return n


def fmt_time(t: float) -> str:
    """Local time, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def print_json(obj: object) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2))


def use_color(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, never when ``NO_COLOR`` is set (not empty) or ``TERM`` is
    ``dumb`` (as the history commands' ``--color=auto``)."""
    stream = stream or sys.stdout
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


_CODES = {"red": "31", "green": "32", "yellow": "33", "cyan": "36", "bold": "1", "dim": "2"}


def color(text: str, name: str, enabled: bool) -> str:
    return f"\x1b[{_CODES[name]}m{text}\x1b[0m" if enabled else text


def progress_bar(label: str) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` that draws a bar on stderr, or None when stderr is not a
    terminal (so pipes and logs get no control characters)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // total if total else width
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{end}")
        sys.stderr.flush()

    return show


def terminal_safe(text: str, stream: TextIO | None = None) -> str:
    """``text`` with control and format characters (escape sequences, bidi overrides, ...)
    shown as visible escapes, when ``stream`` (stdout) is a terminal; unchanged otherwise.

    Memory content is written by the model: printed raw on a reviewer's terminal, an escape
    sequence could hide lines, rewrite the screen or set the clipboard. Pipes get the bytes as
    they are (``cat > file`` stays exact); tabs and newlines are kept.
    """
    if not (stream or sys.stdout).isatty():
        return text
    import unicodedata

    out = []
    for c in text:
        if c in "\n\t" or (c.isprintable() and unicodedata.category(c) != "Cf"):
            out.append(c)
        elif ord(c) < 0x100:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}")
    return "".join(out)


def open_input(source: str) -> BinaryIO:
    """The local file ``source``, named on the command line, opened for reading.

    Raises:
        InvalidInputError: it cannot be opened (missing, unreadable, a directory); the message
            names it (the name the user gave, with any control character escaped).
    """
    try:
        return open(source, "rb")  # the caller closes it
    except OSError as err:
        raise InvalidInputError(f"Cannot read the file {source!r}: {err.strerror or 'I/O error'}.") from None


def read_input(f: BinaryIO, source: str, limit: int = -1) -> bytes:
    """At most ``limit`` bytes (all with -1) of ``f``, opened by :func:`open_input` from ``source``.

    Raises:
        InvalidInputError: the read failed; the message names ``source``.
    """
    try:
        return f.read(limit)
    except OSError as err:
        raise InvalidInputError(f"Cannot read the file {source!r}: {err.strerror or 'I/O error'}.") from None
