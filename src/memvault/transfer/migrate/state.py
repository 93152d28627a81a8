"""The sync state of a store with one remote memory store, kept in the store's encrypted history.

Nothing is written beside the store: every commit a migration makes names the remote store in
its (encrypted) metadata ``extra`` and says what it left behind, and the state is rebuilt by
reading those commits newest first, back to the last one that holds a full record.

- A pull makes one commit per version it imports (``migrate-pull``): ``migrate`` (the remote
  store id), ``memory``, ``version``, ``op``, ``actor`` (the original author as JSON), ``time``
  (when the version was written, RFC 3339), and the memory's entry after it: ``path`` (its API
  path in the store, "" if absent), ``sha`` (the remote content's SHA-256, "" if unknown) and
  ``stored`` (the SHA-256 of the file as the store keeps it, "" if absent). ``redacted`` or
  ``refused`` say that the version's content was not written. The last commit of a pull also
  holds the full record.
- A push makes one commit of its own (``migrate-push``, no file changes) holding the full record
  of the mapping it confirmed, and ``new_store``: the name of a store it made (``--new-store``).

An :class:`Entry` per remote memory: where it lives in the store, the remote and local digests at
the last sync (the baselines a three-way comparison needs), and the newest version the store has
of it (the watermark: older versions are never imported again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ...errors import IntegrityError
from ...history import walk

if TYPE_CHECKING:
    from ...store import MemoryStore

__all__ = [
    "MIGRATE",
    "PULL_COMMAND",
    "PUSH_COMMAND",
    "Entry",
    "SyncState",
    "load_state",
    "find_new_store",
    "rfc3339",
    "parse_time",
]

#: ``extra`` keys (docs/format.md "Migration records").
MIGRATE = "migrate"
VERSION = "version"
MEMORY = "memory"
OP = "op"
ACTOR = "actor"
TIME = "time"
PATH = "path"
REMOTE_PATH = "remote_path"
SHA = "sha"
STORED = "stored"
REDACTED = "redacted"
REFUSED = "refused"
STATE = "state"
NEW_STORE = "new_store"

PULL_COMMAND = "migrate-pull"
PUSH_COMMAND = "migrate-push"
_RECORD_VERSION = 1


def rfc3339(seconds: float) -> str:
    """``seconds`` since the epoch as RFC 3339 UTC with microseconds (``...T12:00:00.000000Z``)."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 time (ValueError if it is none)."""
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


@dataclass(frozen=True)
class Entry:
    """One remote memory as the last sync left it.

    ``path``: its API path in the store (None: not in the store: deleted, or its content was
    never written). ``remote_path``: its path on the API then (None: unknown or deleted; it
    differs from ``path`` when the store refused the path). ``remote_sha``: the remote
    content's SHA-256 then (None: unknown, e.g. after a redacted version). ``local_sha``: the
    SHA-256 of the store's file then (None: absent). ``version``: the newest version the store
    has of it ("" when the API named none). ``at``: when that version was written (seconds since
    the epoch)."""

    memory: str
    path: str | None
    remote_path: str | None
    remote_sha: str | None
    local_sha: str | None
    version: str
    at: float

    def to_row(self) -> list[Any]:
        """The entry in a full record (``"="``: the same as the value before it)."""
        rpath = "=" if self.remote_path is not None and self.remote_path == self.path else self.remote_path
        local = "=" if self.local_sha is not None and self.local_sha == self.remote_sha else self.local_sha
        return [self.memory, self.path, rpath, self.remote_sha, local, self.version, self.at]

    @classmethod
    def from_row(cls, row: object) -> Entry:
        """The entry of a full record's row (ValueError if it is none)."""
        if not isinstance(row, list) or len(row) != 7:
            raise ValueError
        memory, path, rpath, remote, local, version, at = row
        rpath = path if rpath == "=" else rpath
        local = remote if local == "=" else local
        if not isinstance(memory, str) or not isinstance(version, str) or type(at) not in (int, float):
            raise ValueError
        for value in (path, rpath, remote, local):
            if value is not None and not isinstance(value, str):
                raise ValueError
        return cls(memory, path, rpath, remote, local, version, float(at))


def _text(value: str | None) -> str:
    return "" if value is None else value


def _none(value: str | None) -> str | None:
    return value if value else None


class SyncState:
    """The entries of one remote store (``memory id -> Entry``), as of commit ``seq``."""

    def __init__(self, remote: str) -> None:
        self.remote = remote
        self.entries: dict[str, Entry] = {}
        self.commit_id = b""
        self.seq = -1

    # -- lookups -----------------------------------------------------------------------------------

    def by_path(self) -> dict[str, Entry]:
        """The entries of memories present in the store, by API path."""
        return {e.path: e for e in self.entries.values() if e.path is not None}

    # -- records -----------------------------------------------------------------------------------

    def record(self) -> str:
        """The full record: every entry, compact JSON."""
        rows = [self.entries[k].to_row() for k in sorted(self.entries)]
        return json.dumps({"v": _RECORD_VERSION, "e": rows}, ensure_ascii=False, separators=(",", ":"))

    def import_extra(
        self, entry: Entry, *, op: str, actor: str, time: str, redacted: bool = False, refused: str = ""
    ) -> dict[str, str]:
        """The ``extra`` of the commit that imports version ``entry.version`` and leaves ``entry``."""
        extra = {
            MIGRATE: self.remote, MEMORY: entry.memory, VERSION: entry.version, OP: op, ACTOR: actor, TIME: time,
            PATH: _text(entry.path), SHA: _text(entry.remote_sha), STORED: _text(entry.local_sha),
        }  # fmt: skip
        if entry.remote_path != entry.path:
            extra[REMOTE_PATH] = _text(entry.remote_path)
        if redacted:
            extra[REDACTED] = "true"
        if refused:
            extra[REFUSED] = refused
        return extra

    def apply(self, extra: dict[str, str]) -> None:
        """Take in what one commit of this remote store recorded (IntegrityError if malformed:
        the metadata is authenticated, so only a holder of the key could have written it)."""
        try:
            if STATE in extra:
                data = json.loads(extra[STATE])
                if (
                    not isinstance(data, dict)
                    or data.get("v") != _RECORD_VERSION
                    or not isinstance(data.get("e"), list)
                ):
                    raise ValueError
                entries = [Entry.from_row(row) for row in data["e"]]
                self.entries = {e.memory: e for e in entries}
                return
            if MEMORY not in extra:
                return
            at = parse_time(extra[TIME]) if extra.get(TIME) else 0.0
            path = _none(extra.get(PATH))
            rpath = _none(extra[REMOTE_PATH]) if REMOTE_PATH in extra else path
            entry = Entry(extra[MEMORY], path, rpath, _none(extra.get(SHA)), _none(extra.get(STORED)),
                          extra.get(VERSION, ""), at)  # fmt: skip
        except (ValueError, KeyError, TypeError):
            raise IntegrityError("A migration record in the store's history is malformed.") from None
        self.entries[entry.memory] = entry

    def refresh(self, store: MemoryStore, head: tuple[bytes, int]) -> None:
        """Take in the commits from this state's commit up to ``head`` (``(commit_id, seq)``)."""
        commit_id, seq = head
        if seq <= self.seq:
            return
        found: list[dict[str, str]] = []
        for _cid, meta, _tree, _parent in walk(store, commit_id):
            if meta.seq <= self.seq:
                break
            if meta.extra.get(MIGRATE) == self.remote:
                found.append(meta.extra)
                if STATE in meta.extra:
                    break
        for extra in reversed(found):
            self.apply(extra)
        self.commit_id, self.seq = commit_id, seq

    def with_entry(self, entry: Entry) -> SyncState:
        """A copy of this state with ``entry`` set."""
        out = SyncState(self.remote)
        out.entries = {**self.entries, entry.memory: entry}
        out.commit_id, out.seq = self.commit_id, self.seq
        return out

    def copy(self) -> SyncState:
        out = SyncState(self.remote)
        out.entries = dict(self.entries)
        out.commit_id, out.seq = self.commit_id, self.seq
        return out


def load_state(store: MemoryStore, remote: str) -> SyncState:
    """The sync state of ``store`` with remote store ``remote``, as of the store's head."""
    state = SyncState(remote)
    state.refresh(store, store.head)
    return state


def find_new_store(store: MemoryStore, name: str) -> str | None:
    """The id of the remote store a push made under ``name`` (``--new-store``), newest first."""
    for _cid, meta, _tree, _parent in walk(store):
        if meta.command == PUSH_COMMAND and meta.extra.get(NEW_STORE) == name and meta.extra.get(MIGRATE):
            return meta.extra[MIGRATE]
    return None
