"""``memvault migrate pull|push``: between a store and a memory-stores API (Anthropic's, a vendor's
of the same shape, or ``memvault serve``), over :mod:`memvault.transfer.migrate`.

The API key comes from ``$ANTHROPIC_API_KEY`` or the variable ``--api-key-env`` names, never from
the command line. Exit status 5 when anything was refused or conflicted (the rest was done).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus, InvalidInputError, StoreNotFoundError
from ._common import credentials, open_store, print_json, progress_bar, store_path, terminal_safe

if TYPE_CHECKING:
    from ..store import MemoryStore
    from ..transfer.migrate import MemoryStoresClient, MigrateSummary

__all__ = ["register", "DEFAULT_KEY_ENV"]

#: Where the API key is read from unless ``--api-key-env`` names another variable.
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"


def _client(args: argparse.Namespace) -> MemoryStoresClient:
    name = args.api_key_env
    if not name.isidentifier():
        raise InvalidInputError(f"--api-key-env must name an environment variable, not {name!r}.")
    key = os.environ.get(name, "")
    if not key:
        raise InvalidInputError(f"No API key: set ${name}" + (" or name another variable with --api-key-env." if
                                                             name == DEFAULT_KEY_ENV else "."))  # fmt: skip
    if not args.api_url.startswith(("https://", "http://")):
        raise InvalidInputError("--api-url must be an http:// or https:// URL.")
    from ..transfer.migrate import MemoryStoresClient

    return MemoryStoresClient(args.api_url, key, max_retries=args.max_retries)


@contextmanager
def _destination(args: argparse.Namespace) -> Iterator[MemoryStore]:
    """The store a pull writes to: opened, or created with the usual key sources when absent (a
    dry run works on a new empty store in a temporary directory instead, and leaves nothing)."""
    from ..store import MemoryStore

    try:
        store: MemoryStore | None = open_store(args)
    except StoreNotFoundError:
        store = None
    if store is None and args.dry_run:
        from ..crypto import new_key

        with tempfile.TemporaryDirectory(prefix="memvault-migrate-") as scratch:
            key_file = Path(scratch) / "key"
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(new_key())
            with MemoryStore.create(Path(scratch) / "store", key_file=key_file) as temporary:
                yield temporary
        return
    if store is None:
        store = MemoryStore.create(store_path(args), **credentials(confirm=True))
    with store:
        yield store


def _report(summary: MigrateSummary, args: argparse.Namespace) -> int:
    status = ExitStatus.SUCCESS if summary.ok else ExitStatus.CONFLICT
    if args.json:
        print_json(summary.to_json())
        return status
    would = "would be " if summary.dry_run else ""
    where = "in the store" if summary.command == "pull" else "on the API"
    verb = {"pull": "Pulled", "push": "Pushed"}[summary.command]
    if summary.dry_run:
        verb = f"Dry run, nothing written: {summary.command}"
    store_id = summary.memory_store_id or "(a new store)"
    if summary.new_store is not None and summary.new_store.get("created") == "true":
        print(f"Memory store {terminal_safe(summary.new_store['name'])!r} {would or ''}created: {store_id}")
    print(
        f"{verb} {store_id}: {len(set(summary.created))} {would}created, {len(set(summary.updated))} {would}updated, "
        f"{len(set(summary.deleted))} {would}deleted {where}, {summary.unchanged} unchanged."
    )
    if summary.command == "pull":
        print(f"  {summary.versions} version(s) {would or ''}imported in {summary.commits} commit(s).")
    for path in sorted(set(summary.adopted)):
        print(f"  adopted {terminal_safe(path)} (the API's memory already had this content)")
    for path, kinds in sorted(summary.masked.items()):
        masked = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        print(f"  masked in {terminal_safe(path)}: {masked}")
    for path in sorted(set(summary.kept)):
        print(f"  kept on the API: {terminal_safe(path)} (deleted in the store; push with --delete to delete it)")
    for refusal in summary.refused:
        print(f"  refused {terminal_safe(refusal.path)}: {terminal_safe(refusal.reason)}")
    for conflict in summary.conflicts:
        print(f"  conflict {terminal_safe(conflict.path)}: {terminal_safe(conflict.reason)}")
    waited = f" ({summary.waited:.1f} s waited)" if summary.retries else ""
    print(
        f"  API: {summary.requests} request(s), {summary.retries} retr{'y' if summary.retries == 1 else 'ies'}{waited}."
    )
    if summary.conflicts:
        hint = (
            "pull, then push again"
            if summary.command == "push"
            else "see them, then pull with --force to take the API's"
        )
        print(f"hint: conflicts are left as they are on both sides; {hint}.")
    return status


def _cmd_pull(args: argparse.Namespace) -> int:
    from ..transfer.migrate import pull

    with _client(args) as client, _destination(args) as store:
        summary = pull(store, client, args.memory_store, history=args.history, dry_run=args.dry_run, force=args.force,
                       progress=progress_bar("pulling"))  # fmt: skip
    return _report(summary, args)


def _cmd_push(args: argparse.Namespace) -> int:
    from ..transfer.migrate import push

    if args.new_store is not None and not args.new_store:
        raise InvalidInputError("--new-store needs a name.")
    with _client(args) as client, open_store(args) as store:
        summary = push(store, client, args.memory_store, new_store=args.new_store, delete=args.delete,
                       dry_run=args.dry_run, progress=progress_bar("pushing"))  # fmt: skip
    return _report(summary, args)


def _common(s: Any) -> None:
    s.add_argument("--api-url", required=True, metavar="URL",
                   help="the memory-stores API (e.g. https://api.anthropic.com, or a memvault serve URL)")  # fmt: skip
    s.add_argument("--api-key-env", default=DEFAULT_KEY_ENV, metavar="VAR",
                   help=f"the environment variable holding the API key (default: {DEFAULT_KEY_ENV})")  # fmt: skip
    s.add_argument("--dry-run", action="store_true", help="say what would happen; write nothing on either side")
    s.add_argument("--max-retries", type=int, default=6, metavar="N",
                   help="times one call is retried on 429, 5xx or no answer (default: 6)")  # fmt: skip
    s.add_argument("--json", action="store_true", help="machine-readable summary")


def register(sub: Any) -> None:
    m = sub.add_parser("migrate", help="move memories between this store and a memory-stores API (pull, push)")
    msub = m.add_subparsers(dest="migrate_cmd", metavar="cmd", required=True)

    s = msub.add_parser("pull", help="copy a remote memory store into this store (created if absent)")
    _common(s)
    s.add_argument("--memory-store", required=True, metavar="ID", help="the remote memory store (memstore_...)")
    s.add_argument("--history", action="store_true", help="import every version the API still holds, as commits")
    s.add_argument("--force", action="store_true",
                   help="import over files changed in the store since the last sync (kept in its history)")  # fmt: skip
    s.set_defaults(func=_cmd_pull)

    s = msub.add_parser("push", help="publish this store's head to a remote memory store")
    _common(s)
    which = s.add_mutually_exclusive_group(required=True)
    which.add_argument("--memory-store", metavar="ID", help="the remote memory store (memstore_...)")
    which.add_argument("--new-store", metavar="NAME", help="make a memory store with this name (once) and push to it")
    s.add_argument(
        "--delete", action="store_true", help="delete on the API what was deleted in the store since the last sync"
    )
    s.set_defaults(func=_cmd_push)
