"""Settings after creation (``memvault config get/set``): read them by key, change them as an
authenticated commit.

Keys are dotted names: every field of :class:`~memvault.settings.StoreSettings`
(``max_file_bytes``, ``durability``, ``retain_history_days``, ...), ``scrub`` and its parts
``scrub.enabled``, ``scrub.policy`` with ``scrub.policy.<kind>`` for each kind, ``scrub.allowlist``
and ``scrub.custom_rules``. :func:`change_settings` validates the whole new settings
(pydantic, :class:`StoreSettings`: a bad value changes nothing), then, under the store's writer
lock, writes ``memvault.json`` with its MAC under the store's config key (for a store in object
storage: swapped in the bucket only if nobody changed it meanwhile) and records one ``config``
commit on ``main`` whose ``extra`` names each key changed with its old and new value
(settings are not secret), and whose metadata records the new file as the one in force
(docs/format.md §1.1). A failed commit puts the old ``memvault.json`` back.

:func:`repair_settings` writes back the ``memvault.json`` the history records as in force, when
the one there is another (an older copy put back, or a change stopped between its two writes):
the store does not open until then (:class:`~memvault.errors.SettingsMismatchError`).

Other processes that have the store open keep the settings they read until they open it again;
the store object passed in uses the new limits at once, and the new durability and scrubber
policy from the next time the store is opened.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConflictError, IntegrityError, InvalidInputError, InvalidPathError
from ..fsutil import atomic_write
from ..paths import ROOT, parse_path
from ..remote.layout import CONFIG
from ..settings import SCRUB_KINDS, StoreSettings
from ..store import STORE_FILE, MemoryStore
from ..store.config import (
    READABLE_VERSIONS,
    StoreConfig,
    config_key,
    encode_config,
    parse_config,
    read_config,
    settings_mismatch,
    write_config,
)

__all__ = [
    "SettingChange",
    "SettingsChangeResult",
    "settings_items",
    "setting_keys",
    "get_setting",
    "parse_value",
    "change_settings",
    "SettingsRepairResult",
    "repair_settings",
]

_SCRUB = "scrub"
_POLICY = "scrub.policy"
#: Keys below ``scrub`` that hold one value each (``scrub.policy`` holds one per kind).
_SCRUB_LEAVES = ("enabled", "allowlist", "custom_rules")


@dataclass(frozen=True)
class SettingChange:
    """One key whose value changed (values as JSON would show them; None: absent)."""

    key: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class SettingsChangeResult:
    """What :func:`change_settings` did: the keys changed and the ``config`` commit (None when
    every value was already as asked: nothing was written)."""

    changes: tuple[SettingChange, ...]
    commit_id: str | None
    seq: int | None

    def to_json(self) -> dict[str, Any]:
        return {"changes": [c.to_json() for c in self.changes], "commit": self.commit_id, "seq": self.seq}


def _nested(settings: StoreSettings) -> dict[str, Any]:
    """Every setting, defaults included, as plain JSON values (``scrub`` as an object)."""
    out: dict[str, Any] = {name: getattr(settings, name) for name in type(settings).model_fields if name != _SCRUB}
    out[_SCRUB] = settings.scrub.model_dump()
    return out


def settings_items(settings: StoreSettings) -> dict[str, Any]:
    """Every setting by its leaf key (``scrub.policy.<kind>`` one per kind), sorted by key."""
    nested = _nested(settings)
    scrub = nested.pop(_SCRUB)
    out = dict(nested)
    for leaf in _SCRUB_LEAVES:
        out[f"{_SCRUB}.{leaf}"] = scrub[leaf]
    for kind, policy in scrub["policy"].items():
        out[f"{_POLICY}.{kind}"] = policy
    return dict(sorted(out.items()))


def setting_keys(settings: StoreSettings) -> list[str]:
    """Every key :func:`get_setting` and :func:`change_settings` accept, sorted."""
    groups = [_SCRUB, _POLICY]
    return sorted([*settings_items(settings), *groups])


def _unknown(key: str, settings: StoreSettings) -> InvalidInputError:
    top = sorted(k for k in settings_items(settings) if not k.startswith(_POLICY + "."))
    return InvalidInputError(
        f"Error: Unknown setting {key!r}. Settings: {', '.join(top)}, {_POLICY} and {_POLICY}.<kind> "
        "(`memvault config get` lists them all)."
    )


def _locate(
    data: dict[str, Any], key: str, settings: StoreSettings, *, create: bool = False
) -> tuple[dict[str, Any], str]:
    """The dict holding ``key``'s value inside the nested settings, and the name in it."""
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            raise _unknown(key, settings)
        node = child
    last = parts[-1]
    # A new kind's policy may be named when custom rules bring that kind (validation decides).
    if last not in node and not (create and key.startswith(_POLICY + ".") and len(parts) == 3):
        raise _unknown(key, settings)
    return node, last


def get_setting(settings: StoreSettings, key: str) -> Any:
    """The value of ``key`` (a leaf, or a group: ``scrub``, ``scrub.policy``) as a JSON value.

    Raises:
        InvalidInputError: no such setting.
    """
    node, name = _locate(_nested(settings), key.strip(), settings)
    return node[name]


def parse_value(text: str) -> Any:
    """A value as the command line gives it: JSON (``2048``, ``true``, ``null``, ``["a"]``,
    ``"text"``), else the text itself (``none``, ``reject``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _validation_message(err: ValueError) -> str:
    errors = getattr(err, "errors", None)
    if not callable(errors):
        return str(err)
    parts = []
    for e in errors():
        where = ".".join(str(p) for p in e.get("loc", ()))
        msg = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)


def _apply(base: StoreSettings, updates: Mapping[str, Any]) -> StoreSettings:
    data = _nested(base)
    keys = [k.strip() for k in updates]
    for key, value in zip(keys, updates.values(), strict=True):
        node, name = _locate(data, key, base, create=True)
        node[name] = value
    if any(k in (_SCRUB, f"{_SCRUB}.custom_rules") for k in keys):
        # A removed custom rule takes its kind's policy with it (unless this change names it).
        rules = data[_SCRUB].get("custom_rules")
        kinds = set(SCRUB_KINDS)
        if isinstance(rules, list):
            kinds |= {str(r.get("kind")) for r in rules if isinstance(r, dict)}
        policy = data[_SCRUB].get("policy")
        named = {k.removeprefix(_POLICY + ".") for k in keys if k.startswith(_POLICY + ".")}
        if isinstance(policy, dict) and _POLICY not in keys:
            data[_SCRUB]["policy"] = {k: v for k, v in policy.items() if k in kinds or k in named}
    try:
        return StoreSettings.model_validate(data)
    except ValueError as err:  # pydantic's ValidationError
        raise InvalidInputError(f"Error: Invalid setting: {_validation_message(err)}. Nothing was changed.") from None


def _changes(old: StoreSettings, new: StoreSettings) -> tuple[SettingChange, ...]:
    a, b = settings_items(old), settings_items(new)
    return tuple(SettingChange(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def _check_paths(store: MemoryStore, old: StoreSettings, new: StoreSettings) -> None:
    """Refuse path limits that existing paths break (the memory tool could no longer name them)."""
    limits = ("max_path_bytes", "max_segment_bytes", "max_depth")
    if all(getattr(new, name) >= getattr(old, name) for name in limits):
        return
    broken = []
    with store.reading() as view:
        for path in view.descendants(parse_path(ROOT)):
            try:
                parse_path(path.text, new)
            except InvalidPathError:
                broken.append(path.text)
    if broken:
        raise InvalidInputError(
            f"Error: {len(broken)} existing path(s) break the new path limits (first: {broken[0]}); "
            "move or delete them first. Nothing was changed."
        )


def _config_key(store: MemoryStore) -> bytes:
    return config_key(store.master_keys(), store.store_id)


def _file_name(store: MemoryStore) -> str:
    return STORE_FILE if store.remote is None else f"{STORE_FILE} in {store.remote.objects.description}"


def _recorded(store: MemoryStore) -> bytes:
    """The settings MAC the head records as in force (b"": none). Caller holds the writer lock."""
    return store.commit_meta(store.head[0]).settings_digest


def _current(store: MemoryStore, key: bytes) -> tuple[StoreConfig, str | None]:
    """The store's ``memvault.json`` as it is now (for object storage: the bucket's, and its
    version tag), authenticated. Caller holds the writer lock."""
    tag = None
    if store.remote is not None:
        tagged = store.remote.objects.get_tagged(CONFIG)
        if tagged is None:
            raise IntegrityError(f"{store.remote.objects.description} holds no memvault.json for this store.")
        config, tag = parse_config(tagged[0]), tagged[1]
    else:
        config = read_config(store.root)
    if config.store_id != store.store_id:
        raise IntegrityError("The store's configuration file is damaged.")
    config.verify(key)
    return config, tag


def change_settings(
    store: MemoryStore, updates: Mapping[str, Any], *, actor: str = "operator", session: str = ""
) -> SettingsChangeResult:
    """Set each ``key -> value`` of ``updates`` (keys: :func:`setting_keys`; values as JSON
    gives them) on the store's current settings, as one ``config`` commit.

    Nothing is written when every value already is as asked. A lowered path limit that an
    existing path breaks is refused.

    Raises:
        InvalidInputError: an unknown key or an invalid value (nothing changed).
        IntegrityError: ``memvault.json`` does not authenticate.
        SettingsMismatchError: ``memvault.json`` is not the one the history records as in force
            (:func:`repair_settings`; nothing changed).
        ConflictError: object storage's ``memvault.json`` changed meanwhile (nothing changed).
        LockedError, StorageError: as for any commit (the old ``memvault.json`` is put back).
    """
    if not updates:
        raise InvalidInputError("Error: No setting to change.")
    if "path_grammar" in updates:
        raise InvalidInputError(
            "Error: path_grammar is chosen when a store is made and cannot change (its paths follow it). "
            "Nothing was changed."
        )
    key = _config_key(store)
    with store.writing():
        config, tag = _current(store, key)
        if not config.bound_to(_recorded(store)):
            raise settings_mismatch(_file_name(store))  # a change would make an older file current again
        new = _apply(config.settings, updates)
        changes = _changes(config.settings, new)
        if not changes:
            store.settings = config.settings
            return SettingsChangeResult((), None, None)
        _check_paths(store, config.settings, new)
        path = store.root / STORE_FILE
        old_bytes = path.read_bytes()
        record = write_config(store.root, store.store_id, new, config.version, key, durable=True)
        new_tag = None
        if store.remote is not None:
            new_tag = store.remote.objects.swap(CONFIG, path.read_bytes(), tag)
            if new_tag is None:
                atomic_write(path, old_bytes)
                raise ConflictError(
                    "Error: The store's memvault.json in object storage changed meanwhile; nothing was changed. "
                    "Run the command again."
                )
        extra = {c.key: json.dumps({"old": c.old, "new": c.new}, ensure_ascii=False) for c in changes}
        try:
            done = store.transact(
                lambda txn: None, command="config", paths=(), actor=actor, session=session, extra=extra, settings=record
            )
        except BaseException:
            atomic_write(path, old_bytes)
            if store.remote is not None and new_tag is not None:
                store.remote.objects.swap(CONFIG, old_bytes, new_tag)
            raise
        store.settings = new
    return SettingsChangeResult(changes, done.commit_id.decode(), done.seq)


@dataclass(frozen=True)
class SettingsRepairResult:
    """What :func:`repair_settings` did: each key whose value the file written back changed
    (old: the file that was there), the format version written back when it differed, and the
    commit whose settings were written back (None, like ``changes`` empty: nothing to do)."""

    changes: tuple[SettingChange, ...]
    version: tuple[int, int] | None
    commit_id: str | None
    seq: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "changes": [c.to_json() for c in self.changes],
            "version": None if self.version is None else {"old": self.version[0], "new": self.version[1]},
            "commit": self.commit_id,
            "seq": self.seq,
        }


def repair_settings(store: MemoryStore) -> SettingsRepairResult:
    """Write back the ``memvault.json`` the history records as in force: the one the newest
    commit that put settings in force (``init``, ``config``, ``upgrade``) recorded, when the file
    there holds others (docs/format.md §1.1), in the newer of the two files' format versions. No
    commit is made: the history already says which settings are in force. Open the store with
    ``check_head=False`` (it does not open otherwise).

    Raises:
        InvalidInputError: the history records no settings (a store whose commits all come from a
            release before the record; ``memvault upgrade`` records them).
        IntegrityError: ``memvault.json`` does not authenticate, or the recorded settings cannot
            be written back (they do not match their recorded digest).
        ConflictError: object storage's ``memvault.json`` changed meanwhile (nothing changed).
        LockedError, StorageError: as for any write (the old ``memvault.json`` stays).
    """
    key = _config_key(store)
    with store.writing():
        config, tag = _current(store, key)
        head = store.head[0]
        recorded = store.commit_meta(head).settings_digest
        if not recorded:
            raise InvalidInputError(
                "Error: The store's history records no settings yet (its newest commits were written by a release "
                "from before the record); nothing to repair. `memvault upgrade` records the settings in force."
            )
        if config.bound_to(recorded):
            return SettingsRepairResult((), None, None, None)
        commit: bytes | None = head
        while commit is not None:  # back to the commit that put them in force (they carry on unchanged)
            meta, _tree, parent = store.commit(commit)
            if meta.settings_file is not None:
                break
            commit = parent
        if commit is None or meta.settings_file is None or meta.settings_digest != recorded:
            raise IntegrityError("The store's history records settings it does not hold; they cannot be written back.")
        version = max(config.version, meta.settings_file["version"])  # an upgrade since stays
        try:
            settings = StoreSettings.model_validate(meta.settings_file["settings"])
            if version not in READABLE_VERSIONS:
                raise ValueError(version)
        except ValueError:  # pydantic's ValidationError too
            raise IntegrityError("The settings the store's history records are not valid here.") from None
        data, record = encode_config(store.store_id, {**meta.settings_file, "version": version}, key)
        if record.digest != recorded:
            raise IntegrityError("The store's history records settings it does not hold; they cannot be written back.")
        path = store.root / STORE_FILE
        old_bytes = path.read_bytes()
        atomic_write(path, data, durable=True)
        if store.remote is not None and store.remote.objects.swap(CONFIG, data, tag) is None:
            atomic_write(path, old_bytes)
            raise ConflictError(
                "Error: The store's memvault.json in object storage changed meanwhile; nothing was changed. "
                "Run the command again."
            )
        store.settings, store.format_version = settings, version
    return SettingsRepairResult(
        _changes(config.settings, settings),
        None if version == config.version else (config.version, version),
        commit.decode(),
        meta.seq,
    )
