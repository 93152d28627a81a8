"""``memvault server init|apikey|stores`` and ``memvault serve``: a server root and its API.

ROOT is a directory or ``s3://bucket/prefix``; its key comes from the usual sources
(``$MEMVAULT_KEY``, ``$MEMVAULT_KEY_FILE``, ``$MEMVAULT_PASSPHRASE`` or a prompt). A new API key's
secret is printed once, as the last line of standard output. Needs ``memvault[server]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ExitStatus, InvalidInputError
from ._common import credentials, fmt_time, port_number, print_json, terminal_safe

if TYPE_CHECKING:
    from ..keys.slots import Unlock
    from ..server.compaction import GcPolicy
    from ..server.root import ServerRoot

__all__ = ["register"]

_DEFAULT_PORT = 8080


def _unlock(*, confirm: bool = False) -> Unlock:
    from ..keys.slots import Unlock

    found = credentials(confirm=confirm)
    return Unlock.of(found.get("passphrase"), found.get("key_file"), found.get("key"))


def _needs_server_extra(err: ModuleNotFoundError) -> None:
    if err.name is not None and err.name.split(".")[0] in ("starlette", "uvicorn", "prometheus_client", "jinja2"):
        raise InvalidInputError("memvault's server needs its extra: pip install 'memvault[server]'.") from None


def _open_root(args: argparse.Namespace) -> ServerRoot:
    from ..server.root import ServerRoot

    return ServerRoot.open(args.root, _unlock())


def _cmd_init(args: argparse.Namespace) -> int:
    from ..server.root import ServerRoot

    root = ServerRoot.init(args.root, _unlock(confirm=True), durability=args.durability)
    root.close()
    if args.json:
        print_json({"root": args.root, "durability": args.durability})
    else:
        print(f"Made a memvault server root in {args.root}.")
        print("Next: memvault server apikey create ROOT --name NAME --admin, then memvault serve ROOT.")
    return ExitStatus.SUCCESS


def _resolve_stores(root: ServerRoot, wanted: list[str]) -> tuple[str, ...]:
    """Store ids from ids or names (a name must name exactly one live store)."""
    registry = root.registry()
    out: list[str] = []
    for item in wanted:
        if item in registry.stores and not registry.stores[item].deleting:
            out.append(item)
            continue
        named = [s.id for s in registry.live_stores() if s.name == item]
        if len(named) != 1:
            raise InvalidInputError(
                f"Error: {item!r} names {'no' if not named else 'more than one'} memory store; give its id."
            )
        out.append(named[0])
    return tuple(out)


def _cmd_apikey_create(args: argparse.Namespace) -> int:
    root = _open_root(args)
    try:
        record, secret = root.create_key(args.name, admin=args.admin, stores=_resolve_stores(root, args.store or []))
    finally:
        root.close()
    if args.json:
        print_json({"id": record.id, "name": record.name, "admin": record.admin, "stores": list(record.stores),
                    "key": secret})  # fmt: skip
        return ExitStatus.SUCCESS
    scope = "all memory stores" if not record.stores else ", ".join(record.stores)
    print(f"Made API key {record.id} ({'admin' if record.admin else 'plain'}, {scope}).", file=sys.stderr)
    print("Its secret follows; it is not shown again and only a digest of it is kept:", file=sys.stderr)
    print(secret)
    return ExitStatus.SUCCESS


def _cmd_apikey_list(args: argparse.Namespace) -> int:
    root = _open_root(args)
    try:
        keys = sorted(root.registry().keys.values(), key=lambda k: (k.created_at, k.id))
    finally:
        root.close()
    if args.json:
        print_json([k.to_json() for k in keys])
        return ExitStatus.SUCCESS
    for k in keys:
        state = "revoked " + fmt_time(k.revoked_at) if k.revoked_at is not None else "live"
        scope = "all stores" if not k.stores else ",".join(k.stores)
        kind = "admin" if k.admin else "plain"
        print(f"{k.id}  {kind:5}  {state:27}  {scope}  {terminal_safe(k.name)}")
    return ExitStatus.SUCCESS


def _cmd_apikey_revoke(args: argparse.Namespace) -> int:
    root = _open_root(args)
    try:
        record = root.revoke_key(args.id)
    finally:
        root.close()
    if args.json:
        print_json(record.to_json())
    else:
        print(f"Revoked API key {record.id}; every server process refuses it from its next request.")
    return ExitStatus.SUCCESS


def _cmd_stores(args: argparse.Namespace) -> int:
    from ..server.root import store_location

    root = _open_root(args)
    try:
        stores = root.registry().live_stores()
    finally:
        root.close()
    if args.json:
        print_json([{**s.to_json(), "location": store_location(args.root, s.id)} for s in stores])
        return ExitStatus.SUCCESS
    for s in stores:
        archived = "  archived" if s.archived_at is not None else ""
        print(f"{s.id}  {fmt_time(s.created_at)}  {terminal_safe(s.name)}{archived}")
    return ExitStatus.SUCCESS


def _from_env(value: float | None, name: str, option: str) -> float:
    """``value`` if the option was given, else the variable ``name`` (0 when unset)."""
    if value is not None:
        return value
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else 0.0
    except ValueError:
        raise InvalidInputError(f"Error: ${name} ({option}) must be a number.") from None


def _gc_policy(args: argparse.Namespace) -> GcPolicy:
    from ..remote.compact import grace_seconds
    from ..server.compaction import GC_EVERY_ENV, GC_INTERVAL_ENV, GcPolicy

    every = _from_env(args.gc_every, GC_EVERY_ENV, "--gc-every")
    if every != int(every):
        raise InvalidInputError("Error: --gc-every must be a whole number of commits.")
    policy = GcPolicy(every=int(every), interval=_from_env(args.gc_interval, GC_INTERVAL_ENV, "--gc-interval"),
                      grace=args.gc_grace)  # fmt: skip
    if policy.enabled:
        grace_seconds(policy.grace)  # a bad grace period fails here, not in every run
    return policy


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        from ..server.run import ServeOptions, check_bind, serve
    except ModuleNotFoundError as err:
        _needs_server_extra(err)
        raise
    check_bind(args.host, args.allow_remote)  # before asking for a key
    if args.workers < 1:
        raise InvalidInputError("Error: --workers must be at least 1.")
    gc = _gc_policy(args)
    options = ServeOptions(
        args.root, _unlock(), host=args.host, port=args.port, workers=args.workers, allow_remote=args.allow_remote,
        rate=args.rate, burst=args.burst, open_stores=args.open_stores, log_level=args.log_level,
        store_requests=args.store_requests, cache_replicas=args.cache_replicas, cache_bytes=args.cache_bytes, gc=gc,
    )  # fmt: skip

    def announce(url: str) -> None:
        workers = f"{args.workers} workers" if args.workers > 1 else "1 worker"
        print(f"memvault: serving the memory-stores API at {url} ({workers}); Ctrl-C stops", flush=True)

    try:
        return serve(options, announce=announce)
    except ModuleNotFoundError as err:
        _needs_server_extra(err)
        raise


def register(sub: Any) -> None:
    s = sub.add_parser(
        "server",
        help="a server root: init, API keys, its memory stores",
        description="Manage a memvault server root (a directory or s3://bucket/prefix): make it, create, list "
        "and revoke API keys, list its memory stores. Serve it with `memvault serve ROOT`.",
    )
    group = s.add_subparsers(dest="server_cmd", metavar="cmd", required=True)
    init = group.add_parser("init", help="make a server root", description="Make a new server root at ROOT.")
    init.add_argument("root", metavar="ROOT")
    init.add_argument("--durability", choices=("full", "none"), default="full",
                      help="durability of the catalog and of every memory store made through the API")  # fmt: skip
    init.set_defaults(func=_cmd_init)
    keys = group.add_parser(
        "apikey", help="create, list and revoke API keys",
        description="Create, list and revoke the API keys of a server root (kept in its encrypted catalog).",
    )  # fmt: skip
    kgroup = keys.add_subparsers(dest="apikey_cmd", metavar="cmd", required=True)
    create = kgroup.add_parser(
        "create", help="create an API key (its secret is printed once, as the last line)",
        description="Create an API key. Its secret (mvk_..., 256 bits) is printed once as the last line of "
        "standard output; only a digest of it is kept. Plain keys read and write memories and list versions; "
        "--admin keys also create, change, archive and delete memory stores and redact versions.",
    )  # fmt: skip
    create.add_argument("root", metavar="ROOT")
    create.add_argument("--name", required=True, help="what the key is for (encrypted in the catalog)")
    create.add_argument("--admin", action="store_true", help="may create and delete stores and redact")
    create.add_argument(
        "--store", action="append", metavar="ID_OR_NAME",
        help="limit the key to this memory store (repeat for several; default: all stores)",
    )  # fmt: skip
    create.set_defaults(func=_cmd_apikey_create)
    listing = kgroup.add_parser(
        "list", help="list API keys (never their secrets)",
        description="List the root's API keys: id, plain or admin, live or revoked (when), the stores each may "
        "use, its name. Secrets are never kept, so never shown.",
    )  # fmt: skip
    listing.add_argument("root", metavar="ROOT")
    listing.set_defaults(func=_cmd_apikey_list)
    revoke = kgroup.add_parser(
        "revoke", help="revoke an API key (every process refuses it from its next request)",
        description="Revoke the API key ID (apikey_...). Every server process of the root refuses it from its "
        "next request; the record stays in the catalog, marked revoked.",
    )  # fmt: skip
    revoke.add_argument("root", metavar="ROOT")
    revoke.add_argument("id", metavar="ID", help="the key's id (apikey_...)")
    revoke.set_defaults(func=_cmd_apikey_revoke)
    stores = group.add_parser(
        "stores", help="list the root's memory stores (names decrypted)",
        description="List the root's memory stores: id, creation time, name (decrypted), archived or not; "
        "--json adds each store's location, which --store takes for log, verify, audit, redact and export.",
    )  # fmt: skip
    stores.add_argument("root", metavar="ROOT")
    stores.set_defaults(func=_cmd_stores)

    serve = sub.add_parser(
        "serve",
        help="serve a server root's memory-stores API over HTTP",
        description="Serve the memory-stores API (/v1/memory_stores, ...) of ROOT. Point any memory-stores "
        "client at it (the anthropic SDK: base_url) with an API key of `memvault server apikey create`. Plain "
        "HTTP on loopback; for other hosts put a TLS-terminating proxy in front and pass --allow-remote. "
        "SIGINT/SIGTERM stop it cleanly (requests in flight finish). Needs memvault[server].",
    )
    serve.add_argument("root", metavar="ROOT")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=_DEFAULT_PORT,
                       help=f"port (default: {_DEFAULT_PORT}; 0: any free port)")  # fmt: skip
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="allow a non-loopback address (only behind a TLS-terminating proxy)")  # fmt: skip
    serve.add_argument("--rate", type=float, default=0.0,
                       help="requests per second allowed per API key and worker (default: 0, no limit)")  # fmt: skip
    serve.add_argument("--burst", type=int, default=0, help="burst size of the rate limit (default: 2 x rate)")
    serve.add_argument("--open-stores", type=int, default=64,
                       help="memory stores kept open per worker (default: 64)")  # fmt: skip
    serve.add_argument("--store-requests", type=int, default=16,
                       help="requests one memory store may have in progress per worker; more get 503 at once, so a "
                            "slow or locked store cannot take every thread (default: 16)")  # fmt: skip
    serve.add_argument("--cache-replicas", type=int, default=256,
                       help="a root in object storage: replicas of its stores kept in this host's cache; the least "
                            "recently used closed ones beyond are deleted (default: 256; 0: no bound)")  # fmt: skip
    serve.add_argument("--cache-bytes", type=int, default=0,
                       help="a root in object storage: bytes kept in them at most (default: 0, no bound)")  # fmt: skip
    serve.add_argument("--gc-every", type=int, default=None, metavar="N",
                       help="a root in object storage: compact a store in the background (its own replica, under the "
                            "store's gc lease) once N commits were made since its newest checkpoint (default: "
                            "$MEMVAULT_GC_EVERY, else 0: off); the process needs delete rights in the bucket",
                       )  # fmt: skip
    serve.add_argument("--gc-interval", type=float, default=None, metavar="SECONDS",
                       help="a root in object storage: every SECONDS, also compact each store with a commit since its "
                            "newest checkpoint or deletions due after the grace period (default: "
                            "$MEMVAULT_GC_INTERVAL, else 0: off)")  # fmt: skip
    serve.add_argument("--gc-grace", type=float, default=None, metavar="SECONDS",
                       help="grace period of those runs before superseded or orphaned objects are deleted (default: "
                            "$MEMVAULT_GC_GRACE, else 3600; keep it above 300 except in tests)")  # fmt: skip
    serve.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                       help="level of the server log on stderr; info includes one access line per request")  # fmt: skip
    serve.set_defaults(func=_cmd_serve)
