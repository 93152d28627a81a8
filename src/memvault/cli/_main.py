"""The command line's frame: the parser tree (global options accepted before or after a
subcommand, the shared help epilog), and running one command line (exit statuses, one-line
errors with hints, ``-v`` diagnostics, a closed pipe, the lock-wait notice)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import ExitStatus, IntegrityError, KeyUnavailableError, MemvaultError, StoreNotFoundError
from . import UsageError, command_started, interrupted
from ._common import ENV_DEBUG, ENV_KEY_FILE, ENV_LOCK_TIMEOUT, ENV_STORE, lock_timeout

__all__ = ["CommandParser", "GLOBAL_OPTIONS", "build_parser", "run", "EPILOG"]

#: Every environment variable memvault reads, for the help epilog (docs/cli.md has the details).
ENVIRONMENT = (
    ("MEMVAULT_STORE", "the store (a directory, s3://bucket/prefix, file:///path) when --store is not given"),
    ("MEMVAULT_KEY", "a key provider's URI (aws-kms:, pkcs11:, command:)"),
    ("MEMVAULT_PASSPHRASE", "the passphrase (else a prompt on the terminal)"),
    ("MEMVAULT_KEY_FILE", "a file holding a 32-byte key (memvault keygen)"),
    ("MEMVAULT_NEW_PASSPHRASE", "the new passphrase of passwd and key add"),
    ("MEMVAULT_LOCK_TIMEOUT", "seconds a writer waits for the store's lock, when --lock-timeout is not given"),
    ("MEMVAULT_DEBUG", "1: as -v, log the chain of internal errors (never content or keys)"),
    (
        "MEMVAULT_PAGER, PAGER",
        "the pager of log, show, diff and blame on a terminal (default: less -FRX; empty or cat: none)",
    ),
    ("NO_COLOR, TERM=dumb", "no colour"),
    ("VISUAL, EDITOR", "the editor of memvault edit"),
    (
        "MEMVAULT_CACHE_DIR",
        "where stores in object storage and the scrubber's compiled patterns are cached"
        " (default: $XDG_CACHE_HOME/memvault)",
    ),
    ("MEMVAULT_CACHE_BYTES", "the bound of that cache's packs"),
    ("MEMVAULT_GC_GRACE", "seconds before memvault gc deletes what a checkpoint supersedes in object storage"),
    ("MEMVAULT_GC_EVERY, MEMVAULT_GC_INTERVAL", "memvault serve --gc-every and --gc-interval (background gc)"),
    (
        "MEMVAULT_ANCHOR_DIR",
        "this host's anchors of stores and high-water marks of stores in object storage"
        " (default: $XDG_STATE_HOME/memvault; off: keep none)",
    ),
    ("MEMVAULT_KEY_COMMAND_TIMEOUT", "seconds a command: key helper may take"),
    ("MEMVAULT_PKCS11_MODULE", "the PKCS#11 module of pkcs11: keys"),
    ("MEMVAULT_PKCS11_PIN", "the token's PIN"),
    ("MEMVAULT_DREAM_MODEL", "the model of memvault dream (ANTHROPIC_API_KEY: its credentials)"),
    ("MEMVAULT_SERVER_URL, MEMVAULT_API_KEY", "the memvault server and API key of mcp --server (RemoteMemoryTool)"),
    ("MEMVAULT_NO_SYNCFS", "1: sync each file of a commit, not one syncfs(2) (Linux)"),
    ("MEMVAULT_NO_JOURNAL", "1: flush a durable commit twice, not through the commit journal (Linux)"),
    ("MEMVAULT_NO_SCRUB_CACHE", "1: compile the scrubber's patterns in each process, not load them from the cache"),
)

#: What each exit status means, for the help epilog.
EXIT_MEANINGS = {
    ExitStatus.SUCCESS: "success",
    ExitStatus.ERROR: "error (storage, internal, unsupported platform); grep: no match",
    ExitStatus.USAGE: "usage: a malformed command line or input",
    ExitStatus.INTEGRITY: "integrity: stored data failed authentication (run memvault verify)",
    ExitStatus.REFUSED: "refused: no such path, exists already, over a limit, sensitive data, redacted",
    ExitStatus.CONFLICT: "conflict: a concurrent writer changed what the command depended on",
    ExitStatus.NO_STORE: "no store at the location",
    ExitStatus.LOCKED: "locked: another writer held the store's lock throughout --lock-timeout",
    ExitStatus.NO_KEY: "no key, or the wrong one",
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C)",
}


def _columns(rows: Sequence[tuple[str, str]], left: int, width: int = 79) -> list[str]:
    """Two columns, the second from ``left`` on and wrapped; a first column too wide for it
    takes a line of its own."""
    import textwrap

    out: list[str] = []
    for name, text in rows:
        body = textwrap.wrap(text, width - left - 2)
        if len(name) + 4 > left:
            out.append(f"  {name}")
        else:
            out.append(f"  {name:<{left - 2}}{body.pop(0)}")
        out += [" " * left + line for line in body]
    return out


def _epilog() -> str:
    lines = ["environment variables:", *_columns(ENVIRONMENT, 24), "", "exit statuses:"]
    lines += _columns([(str(int(status)), text) for status, text in EXIT_MEANINGS.items()], 7)
    return "\n".join(lines) + "\n"


#: The text every ``--help`` ends with.
EPILOG = _epilog()

#: Options every command accepts before or after its name: ``(flags, add_argument keywords)``.
GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--store",),
        {
            "metavar": "STORE",
            "help": f"store directory, or s3://bucket/prefix (default: ${ENV_STORE}, else the current directory)",
        },
    ),
    (("--json",), {"action": "store_true", "help": "machine-readable output (and errors as JSON on stderr)"}),
    (
        ("--lock-timeout",),
        {
            "metavar": "SECONDS",
            "type": float,
            "help": f"how long a writer waits for the store's lock (default: ${ENV_LOCK_TIMEOUT}, else 30)",
        },
    ),
    (
        ("-v", "--verbose"),
        {"action": "store_true", "help": f"log the chain of internal errors on stderr (also ${ENV_DEBUG}=1)"},
    ),
)


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises :class:`UsageError`, ends every help with
    :data:`EPILOG`, and records what it defines (for the global options and shell completion)."""

    def __init__(self, *args: Any, root: bool = False, **kwargs: Any) -> None:
        self.root = root
        #: The actions added by ``add_argument``, in order.
        self.defined: list[argparse.Action] = []
        #: Subcommand name -> ``(parser, help)``.
        self.commands: dict[str, tuple[CommandParser, str]] = {}
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)

    def format_help(self, *, epilog: bool = True) -> str:
        text = super().format_help()
        return f"{text}\n{EPILOG}" if epilog else text

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if not self.root and "--json" in args:
            # A command's own --json must not reset a --json given before the command's name.
            kwargs["default"] = argparse.SUPPRESS
        action = super().add_argument(*args, **kwargs)
        self.defined.append(action)
        return action

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        add_parser = action.add_parser

        def add_and_record(name: str, **kw: Any) -> Any:
            parser = add_parser(name, **kw)
            self.commands[name] = (parser, kw.get("help") or "")
            return parser

        action.add_parser = add_and_record  # type: ignore[method-assign]
        return action

    def option_strings(self) -> set[str]:
        return {flag for action in self.defined for flag in action.option_strings}

    def add_global_options(self) -> None:
        """Accept the global options after this command's name too (a command's own option of
        the same name wins); then the same for its subcommands."""
        if not self.root:
            own = self.option_strings()
            group = self.add_argument_group("global options")
            for flags, kwargs in GLOBAL_OPTIONS:
                if not own.intersection(flags):
                    group.add_argument(*flags, **{**kwargs, "default": argparse.SUPPRESS})
        for parser, _help in self.commands.values():
            parser.add_global_options()


def build_parser() -> CommandParser:
    """The ``memvault`` parser: every command module's subcommands, the global options."""
    from .. import cli

    p = CommandParser(
        prog="memvault",
        description="Encrypted, git-versioned memory for Claude's memory tool.",
        root=True,
    )
    for flags, kwargs in GLOBAL_OPTIONS:
        p.add_argument(*flags, **kwargs)
    p.add_argument("--version", action="store_true", help="print memvault's version and exit")
    sub = p.add_subparsers(dest="cmd", metavar="cmd", parser_class=CommandParser)
    for info in sorted(pkgutil.iter_modules(cli.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{cli.__name__}.{info.name}")
        module.register(sub)
    p.add_global_options()
    return p


def version() -> str:
    """The installed distribution's version, else the package's own."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("memvault")
    except PackageNotFoundError:
        return str(getattr(sys.modules.get("memvault"), "__version__", "unknown"))


def _json_requested(argv: Sequence[str]) -> bool:
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command line; return its exit status (see :class:`ExitStatus`)."""
    args_list = list(argv) if argv is not None else sys.argv[1:]
    as_json = _json_requested(args_list)
    verbose = os.environ.get(ENV_DEBUG, "") not in ("", "0")
    args: argparse.Namespace | None = None
    try:
        try:
            parser = build_parser()
        except ImportError as err:  # an unsupported platform (memvault.fsutil), a broken install
            if interrupted():
                return ExitStatus.INTERRUPTED
            _error(str(err), (), ExitStatus.ERROR, as_json)
            return ExitStatus.ERROR
        try:
            args = parser.parse_args(args_list)
        except SystemExit as done:  # --help
            sys.stdout.flush()
            return int(done.code or 0)
        as_json = bool(args.json)
        verbose = verbose or bool(getattr(args, "verbose", False))  # a command's own -v is not ours
        if args.version:
            print(f"memvault {version()}")
            return ExitStatus.SUCCESS
        if args.cmd is None:
            sys.stdout.write(parser.format_help(epilog=False))
            print("\nRun 'memvault COMMAND --help' for a command's options, 'memvault --help' for the environment")
            print("variables and exit statuses.")
            return ExitStatus.SUCCESS
        return _run_command(args)
    except BaseException as err:  # noqa: B036 - what is not ours is raised again
        return _failed(err, args, as_json, verbose)


def _failed(err: BaseException, args: argparse.Namespace | None, as_json: bool, verbose: bool) -> int:
    """Report ``err``, which ended the command, and return the exit status; raise again what is
    not an expected error. After a Ctrl-C any error is the interrupt's (an extension interrupted
    while it loaded fails its own way): status 130, nothing printed."""
    if isinstance(err, KeyboardInterrupt) or interrupted():
        return ExitStatus.INTERRUPTED
    if isinstance(err, UsageError):
        _error(str(err), (), ExitStatus.USAGE, as_json)
        return ExitStatus.USAGE
    if isinstance(err, MemvaultError):
        _debug(err, verbose)
        _error(*_explain(err, args), err.exit_status, as_json)
        return err.exit_status
    if isinstance(err, BrokenPipeError):
        # The reader went away (``memvault log | head -1``): stop quietly, as git does, and keep
        # the interpreter's final flush of stdout from reporting the closed pipe again.
        _discard_stdout()
        return ExitStatus.SUCCESS
    if isinstance(err, FileExistsError):
        _debug(err, verbose)
        _error("The file already exists.", (), ExitStatus.REFUSED, as_json)
        return ExitStatus.REFUSED
    if isinstance(err, OSError):  # e.g. a missing directory for a file the command writes
        _debug(err, verbose)
        _error(f"{err.strerror or 'I/O error'}.", (), ExitStatus.ERROR, as_json)
        return ExitStatus.ERROR
    raise err


def _run_command(args: argparse.Namespace) -> int:
    from ..store.lock import set_lock_wait_notice

    lock_timeout(args)  # a malformed $MEMVAULT_LOCK_TIMEOUT is a usage error before anything runs
    if sys.stderr.isatty():
        set_lock_wait_notice(_lock_wait_notice)
    try:
        command_started()
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at exit
        return status
    finally:
        set_lock_wait_notice(None)


def _lock_wait_notice(holder: object, timeout: float) -> None:
    who = f"held by {holder}" if holder is not None else "held by another writer"
    sys.stderr.write(f"memvault: waiting for the store's lock, {who} (up to {timeout:g} s in all; --lock-timeout)...\n")
    sys.stderr.flush()


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real descriptor (a test's capture): nothing to flush there
        pass


def _explain(err: MemvaultError, args: argparse.Namespace | None) -> tuple[str, list[str]]:
    """The message of ``err`` for a person at the CLI, and where to go from it (``hint:`` lines)."""
    message = str(err)
    if isinstance(err, StoreNotFoundError) and args is not None:
        return _no_store(message, args)
    if isinstance(err, IntegrityError) and getattr(args, "cmd", None) != "verify":
        return message, ["run 'memvault verify' for a check of the whole store that names what is damaged"]
    key_file = os.environ.get(ENV_KEY_FILE)
    if isinstance(err, KeyUnavailableError) and key_file and message.startswith("The key file"):
        return message, [f"{ENV_KEY_FILE} is {key_file}"]
    return message, []


def _no_store(message: str, args: argparse.Namespace) -> tuple[str, list[str]]:
    """Name the location tried and where it came from (the library's message may not: it is shown
    to the model too), and what to do about it."""
    from ..storage import is_remote
    from ..store.config import STORE_FILE

    raw = args.store or os.environ.get(ENV_STORE)
    source = "--store" if args.store else ENV_STORE if raw else "the current directory"
    where = raw or "."
    hints = [f"create a store there with 'memvault init', or name an existing one with --store or ${ENV_STORE}"]
    if is_remote(where):
        return f"{message} ({source})", hints
    where = os.path.abspath(where)
    nested = os.path.join(where, "store")
    if os.path.isfile(os.path.join(nested, STORE_FILE)):
        hints.append(f"{nested} holds a memory store: memvault --store {nested} ...")
    return f"No memory store exists at {where} ({source}).", hints


def _error(message: str, hints: Sequence[str], status: ExitStatus, as_json: bool) -> None:
    # Library messages are written for the memory tool ("Error: ..."); the CLI says "memvault:".
    message = message[len("Error: ") :] if message.startswith("Error: ") else message
    if as_json:
        obj: dict[str, Any] = {"error": message, "exit_status": int(status), "kind": status.name}
        if hints:
            obj["hints"] = list(hints)
        print(json.dumps(obj), file=sys.stderr)
    else:
        print(f"memvault: {message}", file=sys.stderr)
        for hint in hints:
            print(f"hint: {hint}", file=sys.stderr)


def _debug(err: BaseException, verbose: bool) -> None:
    """With ``-v`` or ``$MEMVAULT_DEBUG``: the chain of exceptions behind ``err``, each with the
    module and line that raised it. memvault's own errors show their message (written to be safe
    to show); any other exception shows its type only, since its message may quote data."""
    if not verbose:
        return
    seen: set[int] = set()
    current: BaseException | None = err
    prefix = "memvault: debug:"
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = type(current)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        text = f"{name}: {current}" if isinstance(current, MemvaultError) else name
        if isinstance(current, OSError) and current.errno is not None:
            import errno

            text += f" [{errno.errorcode.get(current.errno, current.errno)}]"
        print(f"{prefix} {text}{_raised_at(current)}", file=sys.stderr)
        current = current.__cause__ or current.__context__
        prefix = "memvault: debug:   caused by"


def _raised_at(err: BaseException) -> str:
    tb = err.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "?")
    return f" (at {module}:{tb.tb_lineno})"
