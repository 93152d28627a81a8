""":func:`pull`: copy a remote memory store into a store, one commit per version imported.

The plan: list the remote memories (view basic) and, with ``history``, every version the API
still holds (view full, newest first, all pages); a version the store already has (the watermark
of its memory in the sync state, :mod:`.state`) is never imported again. Each remaining version
becomes one ``migrate-pull`` commit, oldest first, under the store's writer lock: ``created`` and
``modified`` write the content at ``/memories<path>`` (scrubbed as any write is: what the
scrubber masks is counted, what it refuses is recorded as refused and not written), ``deleted``
deletes the file, and a redacted version is recorded as redacted with no file change (the file
keeps the content it had, or stays absent). Without ``history``, or for a memory whose versions
the API no longer holds, its current version is imported (its author and time when the API
still has that version). A memory the API lists no more is deleted once a read confirms it.

Each commit records the original author (``actor`` as JSON; ``api:<id>``, ``user:<id>``,
``session`` with the session's id, ... as the commit's actor and session) and the original time
(``time``); the commit's own time is the pull's. A pull killed at any point converges on the next
run: a version is imported by exactly one commit, which names it.

A file of the store that changed since the last sync (or a file the sync does not know at the
path a memory arrives at) is a conflict: it is left as it is, the memory's newer versions wait,
and the summary lists it; ``force`` imports over it (the replaced content stays in the store's
history).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ... import crypto
from ...errors import ConflictError, InvalidPathError, NotFoundError, SensitiveDataError
from ...paths import ROOT, MemoryPath, parse_path
from ...scrub.guard import check_path, scrub_text, scrubber_for
from .model import ApiRefusedError, MemoryStoresApi, RemoteMemory, RemoteVersion, actor_json, actor_label
from .state import MIGRATE, PULL_COMMAND, STATE, Entry, SyncState, load_state, rfc3339
from .summary import Conflict, MigrateSummary, Refusal

if TYPE_CHECKING:
    from ...store import MemoryStore, Transaction

__all__ = ["pull", "Progress", "check_remote_store", "covers"]

#: ``progress(done, total)``, called as the work advances.
Progress = Callable[[int, int], None]
_TRIES = 8


class _Stale(Exception):
    """The store's head moved since the state was read: read it again, decide again."""


class _LocalConflict(Exception):
    """The store's file changed since the last sync (or is in the way): nothing written."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Step:
    """One version to import: ``version`` (listed or fetched), or the current state of
    ``current`` (fetched when its turn comes), or the deletion of ``deleted`` (a memory id)."""

    memory: str
    at: float
    version: RemoteVersion | None = None
    current: RemoteMemory | None = None
    deleted: bool = False


@dataclass(frozen=True)
class _Content:
    """What a content version becomes in the store, decided before the writer lock is taken."""

    vpath: MemoryPath | None  # None: refused
    data: bytes
    findings: dict[str, int]
    refused: str


def check_remote_store(api: MemoryStoresApi, store_id: str) -> None:
    """Raise NotFoundError when the API has no memory store ``store_id``."""
    try:
        api.retrieve_store(store_id)
    except ApiRefusedError as err:
        if err.status == 404:
            raise NotFoundError(
                f"Error: The API has no memory store {store_id!r} (or the key may not use it)."
            ) from None
        raise


def covers(entry: Entry | None, version: str, at: float, order: dict[str, list[str]]) -> bool:
    """Whether the store already has version ``version`` (written at ``at``) of ``entry``'s
    memory: it is the watermark, older than it in the API's listing ``order`` (ids newest first
    per memory), or, when the watermark is not listed (no longer held), no newer than it."""
    if entry is None:
        return False
    if entry.version and entry.version == version:
        return True
    ids = order.get(entry.memory, [])
    if entry.version in ids and version in ids:
        return ids.index(entry.version) < ids.index(version)
    return at <= entry.at


def _store_path(api_path: str | None, store: MemoryStore) -> MemoryPath:
    if not isinstance(api_path, str) or not api_path.startswith("/") or api_path.endswith("/"):
        raise InvalidPathError("Error: Invalid path: it must start with / and name a memory")
    return parse_path(ROOT + api_path, store.settings)


def _kinds_in_path(store: MemoryStore, text: str) -> str:
    scrubber = scrubber_for(store)
    return ", ".join(sorted({f.kind for f in scrubber.scan(text) if scrubber.policy(f.kind) != "allow"}))


def _prepare(store: MemoryStore, version: RemoteVersion) -> _Content:
    """The store path and the scrubbed bytes of a content version, or why it is refused."""
    try:
        vpath = _store_path(version.path, store)
    except InvalidPathError as err:
        return _Content(None, b"", {}, "path: " + err.message.rsplit(": ", 1)[-1])
    try:
        check_path(store, vpath)
    except SensitiveDataError:
        return _Content(None, b"", {}, f"sensitive data in the path ({_kinds_in_path(store, vpath.text)})")
    if version.content is None:
        return _Content(None, b"", {}, "the API gave no content")
    findings: dict[str, int] = {}
    try:
        text = scrub_text(store, version.content, findings)
    except SensitiveDataError:
        kinds = ", ".join(sorted(set(scrubber_for(store).apply(version.content).rejected)))
        return _Content(None, b"", {}, f"sensitive data ({kinds})")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return _Content(None, b"", {}, "not valid Unicode text")
    limit = store.settings.max_file_bytes
    if len(data) > limit:
        return _Content(None, b"", {}, f"{len(data):,} bytes, over the store's limit of {limit:,} bytes per file")
    return _Content(vpath, data, findings, "")


def _file_below(txn: Transaction, directory: MemoryPath, skip: str | None) -> MemoryPath | None:
    """A file below ``directory`` other than ``skip``, if any."""
    for child in txn.descendants(directory):
        node = txn.get(child)
        if node is not None and not node.is_dir and child.text != skip:
            return child
    return None


class _Puller:
    """One pull run (see :func:`pull`)."""

    def __init__(self, store: MemoryStore, api: MemoryStoresApi, remote: str, *, dry_run: bool, force: bool) -> None:
        self.store = store
        self.api = api
        self.remote = remote
        self.dry_run = dry_run
        self.force = force
        self.summary = MigrateSummary("pull", remote, dry_run=dry_run)
        self.state: SyncState = load_state(store, remote)
        self.order: dict[str, list[str]] = {}
        self.blocked: set[str] = set()
        self.preview = store.snapshot() if dry_run else None

    # -- the plan ------------------------------------------------------------------------------------

    def plan(self, history: bool) -> list[_Step]:
        memories = self.api.list_memories(self.remote)
        listed = {m.id: m for m in memories}
        steps: list[_Step] = []
        planned: set[str] = set()
        held: set[str] = set()
        if history:
            versions = self.api.list_versions(self.remote)
            for v in versions:
                self.order.setdefault(v.memory_id, []).append(v.id)
                held.add(v.id)
            for v in reversed(versions):
                if not covers(self.state.entries.get(v.memory_id), v.id, v.created_at, self.order):
                    steps.append(_Step(v.memory_id, v.created_at, version=v))
                    planned.add(v.memory_id)
        extra: list[_Step] = []
        for m in memories:
            entry = self.state.entries.get(m.id)
            if m.memory_version_id in held or covers(entry, m.memory_version_id, m.updated_at, self.order):
                if m.id not in planned:
                    self.summary.unchanged += 1
                continue
            extra.append(_Step(m.id, m.updated_at, current=m))
        for entry in self.state.entries.values():
            alive = entry.path is not None or entry.remote_path is not None
            if alive and entry.memory not in listed and entry.memory not in planned:
                if self.api.retrieve_memory(self.remote, entry.memory) is None:  # not moved mid-listing: gone
                    extra.append(_Step(entry.memory, time.time(), deleted=True))
        return _merge(steps, extra)

    # -- one step --------------------------------------------------------------------------------------

    def _fetch(self, step: _Step) -> RemoteVersion | None:
        """The version a step imports (None: nothing to import any more)."""
        if step.version is not None:
            return step.version
        if step.deleted:
            found = self.api.list_versions(self.remote, memory=step.memory, limit=1)
            if found and found[0].operation == "deleted":
                return found[0]
            now = time.time()
            return RemoteVersion("", step.memory, "deleted", now, rfc3339(now), None, None, None, None, False)
        m = step.current
        assert m is not None
        version = self.api.retrieve_version(self.remote, m.memory_version_id)
        if version is not None and version.memory_id == m.id:
            return version
        fresh = self.api.retrieve_memory(self.remote, m.id)
        if fresh is None:
            return None  # deleted meanwhile: the next pull imports that
        return RemoteVersion(fresh.memory_version_id, m.id, "current", fresh.updated_at, rfc3339(fresh.updated_at),
                             None, fresh.path, fresh.content, fresh.content_sha256, False)  # fmt: skip

    def run(self, steps: list[_Step], progress: Progress | None) -> None:
        last_commit = -1
        for i, step in enumerate(steps):
            if step.memory not in self.blocked:
                version = self._fetch(step)
                if version is not None and self._import(version, final=i == len(steps) - 1):
                    last_commit = i
            if progress is not None:
                progress(i + 1, len(steps))
        if self.summary.commits and last_commit != len(steps) - 1 and not self.dry_run:
            self._record()

    def _import(self, version: RemoteVersion, *, final: bool) -> bool:
        """Import one version as one commit; whether a commit was made (or would be)."""
        content = _prepare(self.store, version) if self._has_content(version) else None
        for _ in range(_TRIES):
            entry = self.state.entries.get(version.memory_id)
            if covers(entry, version.id, version.created_at, self.order) and version.id:
                return False  # another pull imported it meanwhile
            if not version.id and entry is not None and entry.path is None and entry.remote_path is None:
                return False  # a deletion with no version id, recorded meanwhile
            new, refused, redacted = self._entry_after(entry, version, content)
            actor, session = actor_label(version.actor)
            op = version.operation
            extra = self.state.import_extra(new, op=op, actor=actor_json(version.actor), time=version.created_at_text,
                                            redacted=redacted, refused=refused)  # fmt: skip
            if final:
                extra[STATE] = self.state.with_entry(new).record()
            paths, apply = self._change(entry, version, content)
            try:
                if self.preview is not None:
                    outcome = apply(self.preview)
                else:
                    committed = self.store.transact(
                        self._checked(apply), command=PULL_COMMAND, paths=paths, actor=actor, session=session,
                        findings=content.findings if content is not None else None, extra=extra,
                    )  # fmt: skip
                    outcome = committed.value
                    self.state.commit_id, self.state.seq = committed.commit_id, committed.seq
            except _Stale:
                self.state.refresh(self.store, self.store.head)
                continue
            except _LocalConflict as err:
                self.blocked.add(version.memory_id)
                where = new.path or (entry.path if entry is not None else None) or version.path or ""
                self.summary.conflicts.append(Conflict(where, err.reason, version.memory_id))
                return False
            self.state.entries[new.memory] = new
            self._count(outcome, version.path or (entry.path if entry is not None else None) or "", version, content,
                        refused)  # fmt: skip
            return True
        raise ConflictError("Error: The store kept changing while the pull wrote to it; run it again.")

    @staticmethod
    def _has_content(version: RemoteVersion) -> bool:
        return version.operation != "deleted" and not version.redacted

    def _entry_after(
        self, entry: Entry | None, version: RemoteVersion, content: _Content | None
    ) -> tuple[Entry, str, bool]:
        """The memory's entry once ``version`` is imported; the refusal; whether it is redacted."""
        if version.operation == "deleted":
            return Entry(version.memory_id, None, None, None, None, version.id, version.created_at), "", False
        base = entry or Entry(version.memory_id, None, None, None, None, "", 0.0)
        if version.redacted or content is None:
            return Entry(base.memory, base.path, base.remote_path, None, base.local_sha, version.id,
                         version.created_at), "", True  # fmt: skip
        if content.vpath is None:
            return Entry(base.memory, base.path, version.path, version.content_sha256, base.local_sha, version.id,
                         version.created_at), content.refused, False  # fmt: skip
        sha = crypto.sha256(content.data).hex()
        return Entry(base.memory, version.path, version.path, version.content_sha256, sha, version.id,
                     version.created_at), "", False  # fmt: skip

    def _checked(self, apply: Callable[[Transaction], str]) -> Callable[[Transaction], str]:
        expected = self.state.seq

        def run(txn: Transaction) -> str:
            if txn.base_seq != expected:
                raise _Stale
            return apply(txn)

        return run

    def _change(
        self, entry: Entry | None, version: RemoteVersion, content: _Content | None
    ) -> tuple[tuple[str, ...], Callable[[Transaction], str]]:
        """The commit's paths and the change it makes: ``apply(txn)`` returns ``created``,
        ``updated``, ``deleted`` or ``same`` (no file changed), or raises _LocalConflict."""
        old = _store_path(entry.path, self.store) if entry is not None and entry.path is not None else None
        known = entry.local_sha if entry is not None else None
        target = content.vpath if content is not None else None
        force = self.force

        def local_change(txn: Transaction) -> None:
            if old is None or force:
                return
            node = txn.get(old)
            now = node.sha256.hex() if node is not None and not node.is_dir else None
            if now != known:
                raise _LocalConflict("changed in the store since the last sync" if now else
                                     "deleted in the store since the last sync")  # fmt: skip

        def apply(txn: Transaction) -> str:
            if version.operation == "deleted":
                local_change(txn)
                node = txn.get(old) if old is not None else None
                if old is None or node is None or node.is_dir:
                    return "same"
                txn.delete(old)
                return "deleted"
            if target is None or content is None:
                return "same"  # redacted or refused: recorded, nothing written
            local_change(txn)
            prev = txn.get(old) if old is not None else None
            prev = prev if prev is not None and not prev.is_dir else None
            moving = prev is not None and target != old
            mine = old.text if moving and old is not None else None  # the memory's own file, moving away
            here = txn.get(target)
            if here is not None and here.is_dir:
                below = _file_below(txn, target, mine)
                if below is not None:
                    raise _LocalConflict(f"the store has a directory here, holding {below.text}")
            elif here is not None and target != old and here.sha256 != crypto.sha256(content.data) and not force:
                raise _LocalConflict("a file of the store that was not synced is at this path")
            parent = target.parent
            while not parent.is_root:
                above = txn.get(parent)
                if above is not None and not above.is_dir and above.path != mine:
                    raise _LocalConflict(f"the file {above.path} of the store is in the way")
                parent = parent.parent
            # decided: now change the working copy
            if moving and old is not None:
                txn.delete(old)
            if here is not None and here.is_dir:
                txn.delete(target)
                here = None
            if moving:
                txn.write_file(target, content.data, lineage=prev)
                return "updated"
            if here is not None and here.sha256 == crypto.sha256(content.data):
                return "same"
            txn.write_file(target, content.data, lineage=prev if prev is not None else here)
            return "updated" if (prev is not None or here is not None) else "created"

        paths = tuple(dict.fromkeys(p.text for p in (old, target) if p is not None))
        return paths, apply

    def _count(self, outcome: str, path: str, version: RemoteVersion, content: _Content | None, refused: str) -> None:
        self.summary.commits += 1
        self.summary.versions += 1
        if refused:
            self.summary.refused.append(Refusal(path, refused, version.memory_id, version.id))
        if outcome == "created":
            self.summary.created.append(path)
        elif outcome == "updated":
            self.summary.updated.append(path)
        elif outcome == "deleted":
            self.summary.deleted.append(path)
        if content is not None and content.vpath is not None:
            self.summary.mask(path, content.findings)

    def _record(self) -> None:
        """A commit holding the full record (when the last step made none)."""
        for _ in range(_TRIES):
            extra = {MIGRATE: self.remote, STATE: self.state.record()}
            try:
                committed = self.store.transact(self._checked(lambda txn: "same"), command=PULL_COMMAND, paths=(),
                                                actor="memvault", session="", extra=extra)  # fmt: skip
            except _Stale:
                self.state.refresh(self.store, self.store.head)
                continue
            self.state.commit_id, self.state.seq = committed.commit_id, committed.seq
            self.summary.commits += 1
            return


def _merge(versions: list[_Step], extra: list[_Step]) -> list[_Step]:
    """The listed versions in their order, with the other steps put in by time."""
    pending = sorted(extra, key=lambda s: s.at)
    out: list[_Step] = []
    for step in versions:
        while pending and pending[0].at <= step.at:
            out.append(pending.pop(0))
        out.append(step)
    return out + pending


def pull(
    store: MemoryStore,
    api: MemoryStoresApi,
    memory_store_id: str,
    *,
    history: bool = False,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress | None = None,
) -> MigrateSummary:
    """Copy the remote memory store ``memory_store_id`` into ``store`` (see the module docstring).

    Args:
        store: the destination, open.
        api: the API's calls (:class:`~.client.MemoryStoresClient`).
        history: import every version the API still holds, not only the current state.
        dry_run: decide everything, write nothing (no commit): the summary says what would happen.
        force: import over files of the store changed since the last sync (their content stays in
            the store's history).
        progress: called with ``(done, total)`` as versions are imported.

    Returns:
        The summary: what was created, updated, deleted in the store, what was refused (with the
        reason) and what conflicted.

    Raises:
        NotFoundError: no such remote store. ApiRefusedError, ServiceError: the API refused or
        failed (the versions imported before stay: a new run goes on from there). What a commit
        raises (LockedError, StorageError).
    """
    before = replace(api.stats)
    check_remote_store(api, memory_store_id)
    puller = _Puller(store, api, memory_store_id, dry_run=dry_run, force=force)
    steps = puller.plan(history)
    puller.run(steps, progress)
    summary = puller.summary
    summary.requests = api.stats.requests - before.requests
    summary.retries = api.stats.retries - before.retries
    summary.waited = api.stats.waited - before.waited
    return summary
