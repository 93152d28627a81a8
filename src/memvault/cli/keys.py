"""``memvault passwd`` and ``memvault key list|add|remove``: key slots, never a secret in argv.

A new passphrase comes from ``$MEMVAULT_NEW_PASSPHRASE`` or a prompt (asked twice).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import ExitStatus, InvalidInputError, KeyUnavailableError
from ._common import ask_secret, fmt_time, open_store, print_json, progress_bar, terminal_safe

__all__ = ["register"]

ENV_NEW_PASSPHRASE = "MEMVAULT_NEW_PASSPHRASE"  # noqa: S105 (a variable name, not a secret)


def _new_passphrase() -> str:
    value = os.environ.get(ENV_NEW_PASSPHRASE)
    if value:
        return value
    if not sys.stdin.isatty():
        raise KeyUnavailableError(f"No new passphrase: set {ENV_NEW_PASSPHRASE} or run on a terminal.")
    first = ask_secret("new passphrase: ")
    if not first or ask_secret("repeat new passphrase: ") != first:
        raise KeyUnavailableError("The new passphrases are empty or do not match.")
    return first


#: Help of the flag that accepts a passphrase under 12 characters.
WEAK_HELP = "accept a new passphrase shorter than 12 characters (weak against offline guessing)"


def _cmd_passwd(args: argparse.Namespace) -> int:
    from ..admin.keys import change_passphrase, list_slots

    with open_store(args) as store:
        if not any(s.in_use and s.kind == "passphrase" for s in list_slots(store)):
            raise InvalidInputError("The store was not opened with a passphrase; use `memvault key add` instead.")
        slot = change_passphrase(store, _new_passphrase(), allow_weak_passphrase=args.allow_weak_passphrase)
    if args.json:
        print_json({"slot": slot.to_json()})
    else:
        print(f"Passphrase changed (new key slot {slot.slot_id}); the old passphrase no longer opens this store.")
    return ExitStatus.SUCCESS


def _cmd_list(args: argparse.Namespace) -> int:
    from ..admin.keys import list_slots

    with open_store(args) as store:
        slots = list_slots(store)
    if args.json:
        print_json([s.to_json() for s in slots])
        return ExitStatus.SUCCESS
    for s in slots:
        kdf = "" if s.kdf is None else f"argon2id m={s.kdf['memory_kib']}KiB t={s.kdf['iterations']} p={s.kdf['lanes']}"
        kdf = terminal_safe(s.provider) if s.provider else kdf
        created = fmt_time(s.created) if s.created is not None else "-"
        label = terminal_safe(s.label) if s.label else "-"
        print(f"{s.slot_id}  {s.kind:<10} {created:<19}  {label:<16} {kdf}{'  (in use)' if s.in_use else ''}".rstrip())
    return ExitStatus.SUCCESS


def _cmd_add(args: argparse.Namespace) -> int:
    from ..admin.keys import add_slot

    if args.key and args.key_file:
        raise InvalidInputError("Give --key or --key-file, not both.")

    with open_store(args) as store:
        slot = (
            add_slot(store, key=args.key, label=args.label)
            if args.key
            else add_slot(store, key_file=args.key_file, label=args.label)
            if args.key_file
            else add_slot(
                store,
                passphrase=_new_passphrase(),
                allow_weak_passphrase=args.allow_weak_passphrase,
                label=args.label,
            )
        )
    if args.json:
        print_json(slot.to_json())
    else:
        print(f"Added key slot {slot.slot_id} ({slot.kind}).")
    return ExitStatus.SUCCESS


def _cmd_remove(args: argparse.Namespace) -> int:
    from ..admin.keys import remove_slot

    with open_store(args) as store:
        remove_slot(store, args.slot_id)
    if args.json:
        print_json({"removed": args.slot_id})
    else:
        print(f"Removed key slot {args.slot_id}.")
    return ExitStatus.SUCCESS


def _cmd_rotate(args: argparse.Namespace) -> int:
    from ..admin.keys import rotate
    from ..store import MemoryStore
    from ._common import credentials, lock_timeout, store_path

    creds = credentials()
    extra: dict[str, Any] = {} if (timeout := lock_timeout(args)) is None else {"lock_timeout": timeout}
    with MemoryStore.open(store_path(args), **creds, **extra) as store:
        result = rotate(
            store, drop_other_slots=args.drop_other_slots, progress=progress_bar("re-wrapping data keys"), **creds
        )
    if args.json:
        print_json(result.to_json())
    else:
        print(
            f"Rotated the master key to epoch {result.epoch}: {result.rewrapped} data key(s) re-wrapped; "
            f"key slot {result.slot.slot_id} replaces {', '.join(result.removed_slots)}."
        )
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    s = sub.add_parser("passwd", help=f"change the passphrase (new one from ${ENV_NEW_PASSPHRASE} or a prompt)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--allow-weak-passphrase", action="store_true", help=WEAK_HELP)
    s.set_defaults(func=_cmd_passwd)

    key = sub.add_parser("key", help="list, add or remove key slots (no data is re-encrypted)")
    ksub = key.add_subparsers(dest="key_cmd", required=True)
    for name, func, helptext in (
        ("list", _cmd_list, "list key slots"),
        ("add", _cmd_add, f"add a passphrase (from ${ENV_NEW_PASSPHRASE} or a prompt), --key-file or --key slot"),
        ("remove", _cmd_remove, "remove a key slot (never the last one)"),
        ("rotate", _cmd_rotate, "new master key for future writes; re-wrap every data key (same secret)"),
    ):
        s = ksub.add_parser(name, help=helptext)
        if name == "add":
            s.add_argument("--key-file", help="a file with a raw 32-byte key (see `memvault keygen`)")
            s.add_argument(
                "--key",
                help="a key provider's URI: aws-kms:<key id, ARN or alias/name>, pkcs11:token=...;object=..., "
                "command:<program>",
            )
            s.add_argument("--allow-weak-passphrase", action="store_true", help=WEAK_HELP)
            s.add_argument("--label", default="", help="a name for the slot, shown by `key list` (e.g. who holds it)")
        if name == "remove":
            s.add_argument("slot_id", help="the slot id shown by `memvault key list`")
        if name == "rotate":
            s.add_argument(
                "--drop-other-slots",
                action="store_true",
                help="remove slots whose secrets are not given (re-add later)",
            )
        s.add_argument("--json", action="store_true", help="machine-readable output")
        s.set_defaults(func=func)
