"""The ``memvault`` command line: a thin shell over the library, one module per command group
(each registers its subcommands with ``register(subparsers)``; modules are discovered).

The store is found from ``--store``, else ``$MEMVAULT_STORE``, else the current directory; the
key comes from ``$MEMVAULT_KEY`` (a key provider's URI; ``init --key``), ``$MEMVAULT_PASSPHRASE``,
``$MEMVAULT_KEY_FILE`` or a prompt, never a secret from an argument. Expected errors print one
line on stderr (JSON with ``--json``) and exit with the code of
:class:`memvault.errors.ExitStatus`; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from collections.abc import Sequence

from ..errors import ExitStatus, MemvaultError

__all__ = ["main", "build_parser"]


class UsageError(Exception):
    """A malformed command line (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memvault", description="Encrypted, git-versioned memory for Claude's memory tool.")
    p.add_argument(
        "--store",
        help="store directory, or s3://bucket/prefix (default: $MEMVAULT_STORE, else the current directory)",
    )
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (see :class:`ExitStatus`)."""
    args_list = list(argv) if argv is not None else sys.argv[1:]
    as_json = "--json" in args_list
    try:
        args = build_parser().parse_args(args_list)
        return int(args.func(args))
    except UsageError as err:
        _error(str(err), ExitStatus.USAGE, as_json)
        return ExitStatus.USAGE
    except MemvaultError as err:
        _error(str(err), err.exit_status, as_json)
        return err.exit_status
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except FileExistsError:
        _error("The file already exists.", ExitStatus.REFUSED, as_json)
        return ExitStatus.REFUSED
    except OSError as err:  # e.g. a missing directory for a file the command writes
        _error(f"{err.strerror or 'I/O error'}.", ExitStatus.ERROR, as_json)
        return ExitStatus.ERROR
    except BrokenPipeError:
        return ExitStatus.SUCCESS


def _error(message: str, status: ExitStatus, as_json: bool) -> None:
    # Library messages are written for the memory tool ("Error: ..."); the CLI says "memvault:".
    message = message[len("Error: ") :] if message.startswith("Error: ") else message
    if as_json:
        print(json.dumps({"error": message, "exit_status": int(status), "kind": status.name}), file=sys.stderr)
    else:
        print(f"memvault: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
