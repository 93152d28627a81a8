""":func:`push`: publish a store's head (the files below ``/memories``) to a remote memory store.

The remote store is listed once (view basic: paths and digests, no content) and each file of the
head is compared with it and with the sync state's baselines (:mod:`.state`):

- a file the API cannot take (binary, over 102,400 bytes, a path the API refuses, a path above or
  below a memory that stays on the API) is refused, with the reason;
- a memory the sync knows: unchanged when both sides match; when only the store changed, an
  update whose ``content_sha256`` precondition is the digest the last sync saw; when the API's
  memory changed, moved or went since the last sync, a conflict: it is never overwritten;
- a file the sync does not know: created; a memory the API already has at that path is adopted
  when its content equals the file's, else a conflict (and so is a 409 path conflict on create,
  the memory in the way read back first);
- a memory deleted in the store since the last sync is deleted on the API only with ``delete``,
  each delete guarded by the digest the last sync saw; without it, it is listed as kept.

Deletions go first (so their paths are free for what is created), then updates, then creates.
What the push confirmed is recorded in one ``migrate-push`` commit with no file change (the full
record of :mod:`.state`), so a pull or push that follows knows the baselines. A push killed midway
converges on the next run: a memory it created is found at its path with the same content and
adopted; one it updated matches already. A push sends the head as the store keeps it (after the
store's scrubber, when it was written): plaintext content and paths go to the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ... import crypto
from ...errors import ConflictError
from ...paths import MemoryPath
from .model import ApiRefusedError, MemoryStoresApi, RemoteMemory
from .pull import Progress, check_remote_store
from .rules import MAX_CONTENT_BYTES, content_problem, overlap, path_problem
from .state import MIGRATE, NEW_STORE, PUSH_COMMAND, STATE, Entry, SyncState, find_new_store, load_state
from .summary import Conflict, MigrateSummary, Refusal

if TYPE_CHECKING:
    from ...store import MemoryStore, Transaction

__all__ = ["push", "STORE_TAG", "store_tag"]

#: The metadata key a store made by ``--new-store`` carries, so a push run again finds it.
STORE_TAG = "memvault_store"
_TRIES = 8


class _Stale(Exception):
    """The store's head moved since the state was read."""


def store_tag(store: MemoryStore) -> str:
    """The tag of a remote store made for ``store`` (a digest of its id: not the id itself)."""
    return crypto.sha256(b"memvault migrate store\x00" + store.store_id).hex()[:32]


@dataclass(frozen=True)
class _File:
    """A file of the head below ``/memories``: its API path, store path and digest."""

    path: str
    vpath: MemoryPath
    sha: str
    size: int
    binary: bool


def _files(txn: Transaction) -> Iterator[_File]:
    root = MemoryPath(())
    for vpath in txn.descendants(root):
        node = txn.get(vpath)
        if node is None or node.is_dir:
            continue
        yield _File(vpath.text[len("/memories") :], vpath, node.sha256.hex(), node.size, node.binary)


def _confirmed(memory: RemoteMemory, local_path: str, local_sha: str) -> Entry:
    return Entry(memory.id, local_path, memory.path, memory.content_sha256, local_sha, memory.memory_version_id,
                 memory.updated_at)  # fmt: skip


class _Pusher:
    """One push run (see :func:`push`)."""

    def __init__(
        self, store: MemoryStore, api: MemoryStoresApi, remote: str | None, *, delete: bool, dry_run: bool
    ) -> None:
        self.store = store
        self.api = api
        self.remote = remote
        self.delete = delete
        self.dry_run = dry_run
        self.summary = MigrateSummary("push", remote or "", dry_run=dry_run)
        self.state = load_state(store, remote) if remote else SyncState("")
        self.changes: dict[str, Entry] = {}
        self.pushed: set[str] = set()
        self.head = store.snapshot()

    def entry(self, memory: str) -> Entry | None:
        return self.changes.get(memory, self.state.entries.get(memory))

    def keep(self, entry: Entry) -> None:
        if self.state.entries.get(entry.memory) != entry:
            self.changes[entry.memory] = entry
        else:
            self.changes.pop(entry.memory, None)

    def conflict(self, path: str, reason: str, memory: str = "") -> None:
        self.summary.conflicts.append(Conflict(path, reason, memory))

    def refuse(self, path: str, reason: str) -> None:
        self.summary.refused.append(Refusal(path, reason))

    # -- the run -------------------------------------------------------------------------------------

    def run(self, progress: Progress | None) -> None:
        remote = self.api.list_memories(self.remote) if self.remote else []
        by_id = {m.id: m for m in remote}
        by_path = {m.path: m for m in remote}
        files = {f.path: f for f in _files(self.head)}
        mapped = self.state.by_path()
        gone = sorted(p for p in mapped if p not in files)
        total, done = len(files) + len(gone), 0

        def tick() -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total)

        staying = set(by_path)
        for path in gone:
            if self.remove(mapped[path], by_id):
                staying.discard(by_id[mapped[path].memory].path)
            tick()
        ordered = sorted(files, key=lambda p: (p not in mapped, p))  # updates, then creates
        for path in ordered:
            self.publish(files[path], mapped.get(path), by_id, by_path, staying)
            tick()

    def remove(self, entry: Entry, by_id: dict[str, RemoteMemory]) -> bool:
        """A memory deleted in the store since the last sync; whether it was deleted on the API."""
        assert entry.path is not None
        found = by_id.get(entry.memory)
        if found is None:  # gone on both sides
            self.keep(Entry(entry.memory, None, None, None, None, entry.version, entry.at))
            return False
        if not self.delete:
            self.summary.kept.append(entry.path)
            return False
        if found.content_sha256 != entry.remote_sha or found.path != entry.remote_path:
            self.conflict(entry.path, "changed on the API since the last sync; not deleted", entry.memory)
            return False
        if self.dry_run:
            self.summary.deleted.append(entry.path)
            return True
        assert self.remote is not None and entry.remote_sha is not None
        try:
            self.api.delete_memory(self.remote, entry.memory, entry.remote_sha)
        except ApiRefusedError as err:
            if err.status == 404:
                self.keep(Entry(entry.memory, None, None, None, None, entry.version, entry.at))
                return False
            if err.status == 409:
                self.conflict(entry.path, "changed on the API meanwhile; not deleted", entry.memory)
                return False
            if err.status in (401, 403):
                raise
            self.refuse(entry.path, f"the API refused the delete ({err.reason})")
            return False
        last = self.api.list_versions(self.remote, memory=entry.memory, limit=1)
        version, at = (last[0].id, last[0].created_at) if last else (entry.version, entry.at)
        self.keep(Entry(entry.memory, None, None, None, None, version, at))
        self.summary.deleted.append(entry.path)
        self.pushed.add(entry.path)
        return True

    def publish(
        self, file: _File, entry: Entry | None, by_id: dict[str, RemoteMemory], by_path: dict[str, RemoteMemory],
        staying: set[str],
    ) -> None:  # fmt: skip
        """Create or update the memory of one file, or say why not."""
        path = file.path
        problem = path_problem(path)
        if problem is None:
            problem = content_problem(b"", binary=True) if file.binary else None
        if problem is None and file.size > MAX_CONTENT_BYTES:
            problem = f"{file.size:,} bytes, over the API's limit of {MAX_CONTENT_BYTES:,} bytes per memory"
        if problem is not None:
            self.refuse(path, problem)
            return
        if entry is not None:
            self.update(file, entry, by_id.get(entry.memory))
            return
        found = by_path.get(path)
        if found is not None:
            other = self.entry(found.id)
            if other is not None and other.path is not None and other.path != path:
                self.conflict(path, f"the API's memory at this path is synced with {other.path}", found.id)
            elif found.content_sha256 == file.sha:
                self.adopt(found, file)
            else:
                self.conflict(path, "the API has another memory at this path", found.id)
            return
        blocking = next((other for other in sorted(staying) if overlap(other, path)), None)
        if blocking is not None:
            self.refuse(path, f"the path overlaps {blocking} on the API (a path is a file or a directory, not both)")
            return
        self.create(file)

    def text(self, file: _File) -> str | None:
        """The file's content as text (refused, None, if it is not UTF-8)."""
        data = self.head.read(file.vpath)
        problem = content_problem(data, binary=False)
        if problem is not None:
            self.refuse(file.path, problem)
            return None
        return data.decode("utf-8")

    def adopt(self, found: RemoteMemory, file: _File) -> None:
        self.keep(_confirmed(found, file.path, file.sha))
        self.summary.adopted.append(file.path)
        self.summary.unchanged += 1

    def update(self, file: _File, entry: Entry, found: RemoteMemory | None) -> None:
        path = file.path
        if found is None:
            self.conflict(path, "deleted on the API since the last sync", entry.memory)
            return
        if found.content_sha256 == file.sha and found.path == entry.remote_path:
            self.keep(_confirmed(found, path, file.sha))
            self.summary.unchanged += 1
            return
        if found.content_sha256 != entry.remote_sha:
            self.conflict(path, "changed on the API since the last sync", entry.memory)
            return
        if found.path != entry.remote_path:
            self.conflict(path, f"moved on the API to {found.path} since the last sync", entry.memory)
            return
        if file.sha == entry.local_sha:
            self.summary.unchanged += 1  # nothing changed on either side since the last sync
            return
        if self.dry_run:
            self.summary.updated.append(path)
            return
        assert self.remote is not None and entry.remote_sha is not None
        text = self.text(file)
        if text is None:
            return
        try:
            done = self.api.update_memory(self.remote, entry.memory, text, entry.remote_sha)
        except ApiRefusedError as err:
            if err.status == 409:
                self.conflict(path, "changed on the API meanwhile", entry.memory)
            elif err.status == 404:
                self.conflict(path, "deleted on the API meanwhile", entry.memory)
            elif err.status in (401, 403):
                raise
            else:
                self.refuse(path, f"the API refused it ({err.reason})")
            return
        self.keep(_confirmed(done, path, file.sha))
        self.summary.updated.append(path)
        self.pushed.add(path)

    def create(self, file: _File) -> None:
        path = file.path
        if self.dry_run:
            self.summary.created.append(path)
            return
        assert self.remote is not None
        text = self.text(file)
        if text is None:
            return
        try:
            done = self.api.create_memory(self.remote, path, text)
        except ApiRefusedError as err:
            if err.status == 409:
                self.settle_conflict(file, err)
            elif err.status in (401, 403):
                raise
            else:
                self.refuse(path, f"the API refused it ({err.reason})")
            return
        self.keep(_confirmed(done, path, file.sha))
        self.summary.created.append(path)
        self.pushed.add(path)

    def settle_conflict(self, file: _File, err: ApiRefusedError) -> None:
        """A create met a path conflict: adopt the memory in the way if it is this very file
        (a create of an earlier run, or a writer with the same content), else a conflict."""
        assert self.remote is not None
        found = self.api.retrieve_memory(self.remote, err.conflicting_memory_id) if err.conflicting_memory_id else None
        if found is not None and found.path == file.path and found.content_sha256 == file.sha:
            self.adopt(found, file)
            return
        where = found.path if found is not None else err.conflicting_path
        if where and where != file.path:
            self.conflict(file.path, f"the API has a memory at {where}, above or below this path",
                          err.conflicting_memory_id)  # fmt: skip
        else:
            self.conflict(file.path, "the API has another memory at this path", err.conflicting_memory_id)

    # -- the record ------------------------------------------------------------------------------------

    def record(self, new_store: str | None) -> None:
        """The ``migrate-push`` commit: the full record of what this push confirmed."""
        if self.dry_run or self.remote is None or (not self.changes and new_store is None):
            return
        paths = tuple(sorted("/memories" + p for p in self.pushed))
        for _ in range(_TRIES):
            state = self.state.copy()
            state.entries.update(self.changes)
            extra = {MIGRATE: self.remote, STATE: state.record()}
            if new_store is not None:
                extra[NEW_STORE] = new_store
            check = _expecting(self.state.seq)

            try:
                self.store.transact(check, command=PUSH_COMMAND, paths=paths, actor="operator", session="",
                                    extra=extra)  # fmt: skip
            except _Stale:
                self.state.refresh(self.store, self.store.head)
                continue
            self.summary.commits += 1
            return
        raise ConflictError("Error: The store kept changing while the push recorded its mapping; run it again.")


def _expecting(seq: int) -> Callable[[Transaction], None]:
    """A transaction body that changes nothing and refuses a head other than commit ``seq``."""

    def check(txn: Transaction) -> None:
        if txn.base_seq != seq:
            raise _Stale

    return check


def _resolve_new_store(
    store: MemoryStore, api: MemoryStoresApi, name: str, known: str | None, *, dry_run: bool
) -> tuple[str | None, bool]:
    """The remote store ``--new-store NAME`` names: the one an earlier push made (``known``, from
    the history, else found by its name and tag), else a new one (None in a dry run); and whether
    it is new."""
    if known is not None:
        try:
            found = api.retrieve_store(known)
        except ApiRefusedError as err:
            if err.status != 404:
                raise
        else:
            if not found.archived:
                return found.id, False
    tag = store_tag(store)
    for candidate in api.list_stores():
        if candidate.name == name and candidate.metadata.get(STORE_TAG) == tag and not candidate.archived:
            return candidate.id, False
    if dry_run:
        return None, True
    return api.create_store(name, {STORE_TAG: tag}).id, True


def push(
    store: MemoryStore,
    api: MemoryStoresApi,
    memory_store_id: str | None = None,
    *,
    new_store: str | None = None,
    delete: bool = False,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> MigrateSummary:
    """Publish ``store``'s head to a remote memory store (see the module docstring).

    Args:
        store: the source, open.
        api: the API's calls (:class:`~.client.MemoryStoresClient`).
        memory_store_id: the remote store; or ``new_store``: the name of a store to make (one an
            earlier push made under that name is used again).
        delete: delete on the API the memories deleted in the store since the last sync.
        dry_run: decide everything, write nothing on either side.
        progress: called with ``(done, total)`` as files are handled.

    Returns:
        The summary: what was created, updated, deleted on the API, what was refused (with the
        reason), what conflicted, what was kept.

    Raises:
        ValueError: neither or both of ``memory_store_id`` and ``new_store``.
        NotFoundError: no such remote store. ApiRefusedError, ServiceError: the API refused
        (the key, the store) or failed; what was pushed before stays and a new run converges.
    """
    if (memory_store_id is None) == (new_store is None):
        raise ValueError("Give exactly one of memory_store_id and new_store.")
    before = replace(api.stats)
    made: dict[str, str] | None = None
    known: str | None = None
    if new_store is not None:
        known = find_new_store(store, new_store)
        remote, is_new = _resolve_new_store(store, api, new_store, known, dry_run=dry_run)
        made = {"name": new_store, "id": remote or "", "created": "true" if is_new else "false"}
    else:
        remote = memory_store_id
        assert remote is not None
        check_remote_store(api, remote)
    pusher = _Pusher(store, api, remote, delete=delete, dry_run=dry_run)
    pusher.run(progress)
    pusher.record(new_store if made is not None and known != remote else None)
    summary = pusher.summary
    summary.new_store = made
    summary.requests = api.stats.requests - before.requests
    summary.retries = api.stats.retries - before.retries
    summary.waited = api.stats.waited - before.waited
    return summary
