"""``memvault anchor``: what this host keeps about the store outside it (the host state,
docs/format.md §14), and ``anchor reset`` to accept on purpose what a check against it refused: an
older copy of a store directory put back (a backup restored), another store at an object-storage
URL this host used, or an older copy of that store's log. Neither needs the store's key."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import ExitStatus, InvalidInputError
from ._common import lock_timeout, print_json, store_path

__all__ = ["register"]


def _local(path: Path) -> tuple[str, int | None, bool]:
    """``(store id hex, the commit the anchor names or None, whether host state is on)``."""
    from ..hoststate import recorded_anchor
    from ..store.config import read_config

    store_id = read_config(path).store_id
    recorded = recorded_anchor(path, store_id)
    return store_id.hex(), None if recorded is None else recorded[1], recorded is not None


def _describe_seq(seq: int | None) -> str:
    if seq is None:
        return "none yet"
    return "damaged" if seq < 0 else f"#{seq}"


def _cmd_show(args: argparse.Namespace) -> int:
    from ..hoststate import state_dir
    from ..storage import is_remote

    where = store_path(args)
    state = state_dir()
    if is_remote(str(where)):
        from ..store.replicated import recorded_at_url

        seen, seq = recorded_at_url(str(where), None)
        out: dict[str, Any] = {"store": str(where), "host_state": str(state) if state else None,
                               "store_id": seen.hex() if seen else None, "seen_seq": seq}  # fmt: skip
        text = [f"This host used store {seen.hex() if seen else '(none yet)'} at {where}; newest log record seen: "
                f"{_describe_seq(seq)}."]  # fmt: skip
    else:
        store_id, seq, kept = _local(Path(where))
        out = {"store": str(where), "host_state": str(state) if kept else None, "store_id": store_id, "seen_seq": seq}
        text = [f"Store {store_id} at {where}; newest commit this host saw there: {_describe_seq(seq)}."]
    if out["host_state"] is None:
        text.append("Host state is off or unavailable (MEMVAULT_ANCHOR_DIR): nothing is kept.")
    else:
        text.append(f"Host state: {out['host_state']}")
    if args.json:
        print_json(out)
    else:
        print("\n".join(text))
    return ExitStatus.SUCCESS


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise InvalidInputError("anchor reset accepts the store as it is now: add --yes to confirm (no terminal).")
    if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        raise InvalidInputError("Not confirmed; nothing was changed.")


def _cmd_reset(args: argparse.Namespace) -> int:
    from ..storage import is_remote

    where = store_path(args)
    if is_remote(str(where)):
        from ..store.lock import DEFAULT_LOCK_TIMEOUT
        from ..store.replicated import forget_at_url, recorded_at_url

        seen, _seq = recorded_at_url(str(where), None)
        _confirm(
            f"Forget what this host keeps of store {seen.hex() if seen else '(none)'} at {where} (its cache, its "
            "high-water mark, and its read times unless the same store is still there)?",
            args.yes,
        )
        timeout = lock_timeout(args)
        old, now = forget_at_url(str(where), None, DEFAULT_LOCK_TIMEOUT if timeout is None else timeout)
        result: dict[str, Any] = {"store": str(where), "forgotten_store_id": old.hex() if old else None,
                                  "store_id": now.hex() if now else None}  # fmt: skip
        message = (
            f"This host forgot store {old.hex() if old else '(none)'} at {where}; the next command takes the store "
            f"there ({now.hex() if now else 'none yet'}) as it is then."
        )
    else:
        from ..hoststate import recorded_anchor

        store_id, seq, kept = _local(Path(where))
        if not kept:
            raise InvalidInputError(
                "Host state is off or unavailable (MEMVAULT_ANCHOR_DIR): there is no anchor to reset."
            )
        _confirm(
            f"This host saw commit {_describe_seq(seq)} of store {store_id} at {where}. Forget that and accept the "
            "store as it is now?",
            args.yes,
        )
        recorded = recorded_anchor(Path(where), bytes.fromhex(store_id))
        if recorded is not None:
            recorded[0].unlink(missing_ok=True)
        result = {"store": str(where), "store_id": store_id, "forgotten_seq": seq}
        message = f"Reset this host's anchor of store {store_id} at {where}: the next command anchors it as it is then."
    if args.json:
        print_json(result)
    else:
        print(message)
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser("anchor", help="what this host keeps about the store (anchor, high-water mark); reset it")
    asub = s.add_subparsers(dest="anchor_cmd", required=True)
    show = asub.add_parser("show", help="the newest commit this host saw of the store, and where that is kept")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=_cmd_show)
    reset = asub.add_parser(
        "reset", help="accept the store as it is now (an older copy restored on purpose, another store at a URL)"
    )
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation (scripts)")
    reset.add_argument("--json", action="store_true", help="machine-readable output")
    reset.set_defaults(func=_cmd_reset)
