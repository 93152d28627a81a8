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
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["main", "build_parser", "UsageError"]


class UsageError(Exception):
    """A malformed command line (exit status 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (see :class:`~memvault.errors.ExitStatus`)."""
    try:
        from ._main import run
    except KeyboardInterrupt:
        return 130
    except ImportError as err:  # memvault.fsutil on a platform without fcntl, a broken install
        print(f"memvault: {err}", file=sys.stderr)
        return 1
    return run(argv)


def build_parser() -> argparse.ArgumentParser:
    """The ``memvault`` argument parser, with every command."""
    from ._main import build_parser as build

    return build()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
