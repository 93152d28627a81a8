"""``memvault config get [KEY]`` and ``memvault config set KEY VALUE``: the store's settings
after creation (:mod:`memvault.admin.config`).

``set`` is one authenticated ``config`` commit, never an edit of a file: the new settings are
validated as a whole, ``memvault.json`` is rewritten with its MAC, and the commit names each key
changed with its old and new value. VALUE is JSON (``2048``, ``true``, ``null``, ``["a", "b"]``)
or else plain text (``none``, ``reject``); ``-`` reads it from stdin.

``repair`` writes back the ``memvault.json`` the history records as in force, when the one there
is another (the store refuses to open until then): no commit, the history already says which.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import ExitStatus
from ._common import credentials, lock_timeout, open_store, print_json, store_path, terminal_safe

__all__ = ["register", "format_value"]


def format_value(value: Any) -> str:
    """A setting's value as ``config get`` prints it: text bare, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _cmd_get(args: argparse.Namespace) -> int:
    from ..admin.config import get_setting, settings_items

    with open_store(args) as store:
        settings = store.settings
    if args.key is not None:
        value = get_setting(settings, args.key)
        if args.json:
            print_json({args.key.strip(): value})
        else:
            print(terminal_safe(format_value(value)))
        return ExitStatus.SUCCESS
    items = settings_items(settings)
    if args.json:
        print_json(items)
    else:
        for key, value in items.items():
            print(terminal_safe(f"{key} = {format_value(value)}"))
    return ExitStatus.SUCCESS


def _cmd_set(args: argparse.Namespace) -> int:
    from ..admin.config import change_settings, parse_value

    raw = sys.stdin.read() if args.value == "-" else args.value
    value = parse_value(raw.strip() if args.value == "-" else raw)
    with open_store(args) as store:
        result = change_settings(store, {args.key: value}, actor=args.actor, session=args.session)
    if args.json:
        print_json(result.to_json())
    elif result.commit_id is None:
        print(terminal_safe(f"{args.key.strip()} is already {format_value(value)}; nothing was changed."))
    else:
        for c in result.changes:
            print(terminal_safe(f"{c.key}: {format_value(c.old)} -> {format_value(c.new)}"))
        print(f"Recorded in commit {result.commit_id[:10]} (#{result.seq}).")
    return ExitStatus.SUCCESS


def _cmd_repair(args: argparse.Namespace) -> int:
    from ..admin.config import repair_settings
    from ..store import MemoryStore

    extra: dict[str, Any] = {} if (timeout := lock_timeout(args)) is None else {"lock_timeout": timeout}
    with MemoryStore.open(store_path(args), check_head=False, **extra, **credentials()) as store:
        result = repair_settings(store)
    if args.json:
        print_json(result.to_json())
    elif result.commit_id is None:
        print("memvault.json is the settings file the history records; nothing was changed.")
    else:
        if result.version is not None:
            print(f"format version: {result.version[0]} -> {result.version[1]}")
        for c in result.changes:
            print(terminal_safe(f"{c.key}: {format_value(c.old)} -> {format_value(c.new)}"))
        print(f"Wrote back the settings of commit {result.commit_id[:10]} (#{result.seq}).")
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    config = sub.add_parser(
        "config",
        help="read or change the store's settings (limits, scrub policy, durability) as an authenticated commit",
        description="Settings by key: the limits (max_file_bytes, max_files, max_total_bytes, max_stored_bytes, "
        "max_path_bytes, max_segment_bytes, max_depth, view_max_chars), overwrite_on_create, durability, "
        "retain_history_days, and the scrubber: scrub.enabled, scrub.policy.<kind> (redact, reject or allow), "
        "scrub.allowlist (a JSON list), scrub.custom_rules (a JSON list of {kind, pattern, validator}).",
    )
    csub = config.add_subparsers(dest="config_cmd", required=True)
    s = csub.add_parser("get", help="print one setting, or every setting as KEY = VALUE")
    s.add_argument("key", metavar="KEY", nargs="?", help="a setting (default: all of them)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_get)

    s = csub.add_parser(
        "set",
        help="change one setting, as one `config` commit (validated first: a bad value changes nothing)",
        description='Set KEY to VALUE: JSON (2048, true, null, ["a"]) or else plain text (none, reject); - reads '
        "VALUE from stdin. The whole new settings are validated first (a bad value changes nothing); then "
        "memvault.json is rewritten with its MAC and one commit (command config) records each key changed with "
        "its old and new value. Other processes using the store see the change when they next open it.",
    )
    s.add_argument("key", metavar="KEY")
    s.add_argument("value", metavar="VALUE")
    s.add_argument("--actor", default="operator", help="who the commit is attributed to (default: operator)")
    s.add_argument("--session", default="", help="session recorded with the commit (default: none)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_set)

    s = csub.add_parser(
        "repair",
        help="write back the memvault.json the history records, when the store refuses the one there",
        description="When the store refuses to open because memvault.json is not the settings file its history "
        "records as in force (an older copy was put back, or a `config set` stopped between writing the file and "
        "its commit), write back the one the newest settings change (init, config set, upgrade) recorded. No "
        "commit is made. Prints each setting it changed; check them with `config get`, and change them with "
        "`config set` if the interrupted change is still wanted.",
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=_cmd_repair)
