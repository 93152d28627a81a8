"""Core commands: ``init``, ``keygen`` and ``demo`` (``log`` and the other read commands are in ``history``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus
from ..fsutil import durable_flush
from ..settings import StoreSettings
from ._common import credentials as _credentials
from ._common import store_path as _store_path

if TYPE_CHECKING:
    from ..history import CommitInfo

__all__ = ["register"]


def _print_log(entries: Sequence[CommitInfo]) -> None:
    from .history import format_log_line

    for e in entries:
        print(format_log_line(e))


def _cmd_init(args: argparse.Namespace) -> int:
    from ..store import MemoryStore

    if args.template is not None:
        from ..edits.templates import check_template

        check_template(args.template)  # before anything is created
    settings = StoreSettings(
        overwrite_on_create=args.overwrite_on_create,
        durability=args.durability,
        retain_history_days=args.retain_history_days,
    )
    store = MemoryStore.create(
        _store_path(args),
        settings=settings,
        allow_weak_passphrase=args.allow_weak_passphrase,
        **({"key": args.key} if args.key else _credentials(confirm=True)),
    )
    where = _store_path(args)
    if store.remote is not None:
        print(f"Created an empty memory store at {where} (this host's cache: {store.root})")
        warning = store.remote.versioning_warning()
        if warning:
            print(f"memvault: warning: {warning}", file=sys.stderr)
    else:
        print(f"Created an empty memory store in {store.root}")
    try:
        if args.template is not None:
            from ..edits.templates import apply_template

            done = apply_template(store, args.template)
            print(f"Wrote the {args.template} template as commit #{done.seq}: {', '.join(done.value)}")
    finally:
        store.close()
    return ExitStatus.SUCCESS


def _cmd_keygen(args: argparse.Namespace) -> int:
    from ..crypto import new_key

    if args.file == "-":
        return _keygen_stdout(new_key)
    path = Path(args.file)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, new_key())
        durable_flush(fd)
    finally:
        os.close(fd)
    print(f"Wrote a new 32-byte key to {path} (mode 0600). Keep a copy somewhere safe: without it the store is lost.")
    return ExitStatus.SUCCESS


def _keygen_stdout(new_key: Callable[[], bytes]) -> int:
    """``keygen -``: the key as 64 hex digits and a newline on stdout (a valid key file), never
    on a terminal (it would stay on screen and in the scrollback)."""
    import stat

    from ..errors import InvalidInputError

    if sys.stdout.isatty():
        raise InvalidInputError(
            "Refusing to write a key to a terminal: redirect it (memvault keygen - > key.hex) or pipe it."
        )
    sys.stdout.flush()
    fd = sys.stdout.fileno()
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_mode & 0o077 and st.st_uid == os.geteuid():
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o600)  # a new file the shell made for `> key.hex`
    os.write(fd, new_key().hex().encode() + b"\n")
    return ExitStatus.SUCCESS


def _demo_dir(raw: str | None) -> Path:
    """The demo's directory: a new temporary one, or ``raw`` if it is missing or an empty directory."""
    from ..errors import StoreExistsError

    if not raw:
        return Path(tempfile.mkdtemp(prefix="memvault-demo-"))
    base = Path(raw)
    if base.is_symlink():
        raise StoreExistsError(f"The demo needs a new or empty directory; {raw} is a symbolic link.")
    if base.exists() and not base.is_dir():
        raise StoreExistsError(f"The demo needs a new or empty directory; {raw} is not a directory.")
    if base.is_dir() and any(base.iterdir()):
        raise StoreExistsError(f"The demo needs a new or empty directory; {raw} is not empty.")
    base.mkdir(parents=True, exist_ok=True)
    return base


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..agent.demo import run_demo
    from ..history import log
    from ..store import MemoryStore

    base = _demo_dir(args.dir)
    key_file = base / "demo.key"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        from ..crypto import new_key

        os.write(fd, new_key())
    finally:
        os.close(fd)
    store = MemoryStore.create(base / "store", key_file=key_file)
    steps = run_demo(store)
    if args.json:
        print(
            json.dumps(
                {
                    "store": str(store.root),
                    "key_file": str(key_file),
                    "steps": [{"input": s.input, "output": s.output, "is_error": s.is_error} for s in steps],
                    "history": [e.to_json() for e in log(store)],
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        store.close()
        return ExitStatus.SUCCESS
    print(f"memvault demo: an encrypted memory store in {store.root}\n")
    for step in steps:
        shown = {k: v for k, v in step.input.items()}
        print(f">>> memory {json.dumps(shown, ensure_ascii=False)}")
        print(("ERROR: " if step.is_error else "") + step.output + "\n")
    print("History (newest first): commit, seq, time, actor, command, path")
    _print_log(log(store))
    print(f"\nReview it yourself:  MEMVAULT_KEY_FILE={key_file} memvault --store {store.root} log")
    store.close()
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser("init", help="create an empty store (key from the environment or a prompt)")
    s.add_argument("--overwrite-on-create", action="store_true", help="let `create` overwrite existing files")
    s.add_argument("--durability", choices=["full", "none"], default="full", help="fsync policy (default: full)")
    s.add_argument(
        "--retain-history-days",
        type=int,
        metavar="N",
        help="shred versions that left the head N days ago at each `gc` (default: keep every version)",
    )
    s.add_argument(
        "--allow-weak-passphrase",
        action="store_true",
        help="accept a passphrase shorter than 12 characters (weak against offline guessing)",
    )
    s.add_argument(
        "--key",
        help="unlock with a key provider instead: aws-kms:<key id, ARN or alias/name>, "
        "pkcs11:token=...;object=..., command:<program>",
    )
    s.add_argument(
        "--template",
        metavar="NAME",
        help="seed the files for work over many sessions, as one commit by actor operator: project (progress "
        "log, feature checklist, init script notes), support (guidelines, customer notes) or research "
        "(sources, findings, open questions); each with an index, /memories/MEMORY.md",
    )
    s.set_defaults(func=_cmd_init)

    s = sub.add_parser("keygen", help="write a new random 32-byte key file (for MEMVAULT_KEY_FILE)")
    s.add_argument(
        "file", help="path of the new key file (must not exist), or - for 64 hex digits on stdout (not a terminal)"
    )
    s.set_defaults(func=_cmd_keygen)

    s = sub.add_parser("demo", help="run the customer-service example on a new store and show its history")
    s.add_argument(
        "dir", nargs="?", help="new or empty directory for the demo store and key (default: a new temp directory)"
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_demo)
