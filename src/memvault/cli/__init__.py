"""The ``memvault`` command line: a thin shell over the library, one module per command group
(each registers its subcommands with ``register(subparsers)``; modules are discovered).

The store is found from ``--store``, else ``$MEMVAULT_STORE``, else the current directory; the
key comes from ``$MEMVAULT_KEY`` (a key provider's URI; ``init --key``), ``$MEMVAULT_PASSPHRASE``,
``$MEMVAULT_KEY_FILE`` or a prompt, never a secret from an argument. Global options (``--store``,
``--json``, ``--lock-timeout``, ``-v``) go before or after the command's name. Expected errors
print one line on stderr (JSON with ``--json``), perhaps followed by ``hint:`` lines, and exit
with the code of :class:`memvault.errors.ExitStatus`; no traceback.

This module imports nothing else at first: the rest of memvault is imported inside :func:`main`,
so that Ctrl-C while it loads ends quietly (status 130) and a platform memvault does not run on
gets one line (status 1). The frame itself is in ``_main``.

An interrupt can break an import in other ways than by ``KeyboardInterrupt``: a Rust extension
(``pydantic_core``, ``cryptography``) interrupted while it initialises panics, prints the panic
itself and raises ``PanicException``; ``__set_name__`` wraps it in a ``RuntimeError``; an import
half done is an ``ImportError``. So the ``memvault`` program (:func:`main` called without
arguments) ends at once with status 130 on a SIGINT received before its command starts to run
(loading, parsing: nothing done yet, nothing to undo); once the command runs, a SIGINT is a
``KeyboardInterrupt`` (its ``finally`` blocks clean up), and whatever error ends the command after
one (:func:`interrupted`) is reported as the interrupt: status 130, nothing printed.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["main", "build_parser", "UsageError", "interrupted", "command_started", "INTERRUPTED"]

#: The exit status of an interrupted command (``ExitStatus.INTERRUPTED``, without importing it).
INTERRUPTED = 130

#: What :func:`main`'s SIGINT handler has seen and does: ``seen``, SIGINTs received; ``exit_now``,
#: leave the process at once (the program, before its command runs).
_sigint = {"seen": 0, "exit_now": False}


class UsageError(Exception):
    """A malformed command line (exit status 2)."""


def interrupted() -> bool:
    """Whether :func:`main` has received a SIGINT (Ctrl-C) in this process: an error that ends a
    command after one may be that interrupt's doing, and is reported as the interrupt."""
    return _sigint["seen"] > 0


def command_started() -> None:
    """Say that the command itself runs now: from here on a SIGINT raises ``KeyboardInterrupt``
    (the command's ``finally`` blocks clean up) instead of ending the process at once."""
    _sigint["exit_now"] = False


def _on_sigint(signum: int, frame: Any) -> None:
    _sigint["seen"] += 1
    if _sigint["exit_now"]:
        os._exit(INTERRUPTED)
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: the program's arguments, ``sys.argv[1:]``); return the
    exit status (see :class:`~memvault.errors.ExitStatus`). A SIGINT at any point ends it with
    status 130 and nothing printed, however the code it interrupted failed (see the module's
    docstring); without ``argv`` (the ``memvault`` program), one received before the command
    starts to run ends the process at once."""
    try:
        _watch_interrupts(exit_now=argv is None)
        try:
            from ._main import run
        except ImportError as err:  # memvault.fsutil on a platform without fcntl, a broken install
            if interrupted():
                return INTERRUPTED
            print(f"memvault: {err}", file=sys.stderr)
            return 1
        return run(argv)
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt) or interrupted():
            return INTERRUPTED
        raise
    finally:
        _sigint["exit_now"] = False
        if signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _watch_interrupts(*, exit_now: bool) -> None:
    """Put :func:`_on_sigint` in place of Python's default SIGINT handler; leave SIGINT alone in
    another thread, or in a program embedding memvault that handles SIGINT its own way."""
    _sigint.update(seen=0, exit_now=exit_now)
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        _sigint["exit_now"] = False
        return
    try:
        signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:  # not the main thread
        _sigint["exit_now"] = False


def build_parser() -> argparse.ArgumentParser:
    """The ``memvault`` argument parser, with every command."""
    from ._main import build_parser as build

    return build()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
