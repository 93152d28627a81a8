"""The lineage index of a store's ``main`` history: every version of every memory.

Built by replaying the history once (oldest commit first; only the index shards a commit changed
are opened, as ``log`` does) and brought up to date with the commits made since, so a server asks
it for a memory's versions, its creation time or the head's sorted paths without walking history
again. It holds ids, times, digests and paths of the history, in memory only (never written
anywhere): the encrypted history stays the one place they are kept.

A lineage is a file's random file id (kept across edits and renames). A version is one commit's
change of one lineage: ``created`` (the lineage appears), ``modified`` (content or path changed)
or ``deleted`` (the lineage leaves the head). Directories are no memories and are not indexed.

Redacted versions: their node record is sealed under the destroyed key, so the lineage of a
version that was already redacted when the index is built comes from its tombstone (redactions
through :class:`~memvault.memories.ops.Memories` record it), else from the lineage at the same
path before, else from the one file a rename commit removed; a version none of these names gets
a lineage of its own (its data key id), documented in docs/format.md.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..format.records import CommitMeta, Node
from ..history import shard_diff, walk
from .model import API_ROOT, Actor, Operation, actor_of

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["VersionRecord", "CommitInfo", "LineageIndex"]

_PREFIX = API_ROOT + "/"


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One version as the index keeps it.

    ``token`` locates the node in its commit's tree (for a ``deleted`` version: in the parent's);
    ``dek_id`` is the data key of the version's node (b"" for ``deleted``); ``path`` is the API
    path (None if the node was already redacted when indexed); ``digest`` (the SHA-256 of the
    content, :attr:`sha256` in hex) and ``size`` describe the content (None for ``deleted`` or
    unknown); ``binary`` marks a file kept as bytes (no memory of the API)."""

    seq: int
    file_id: bytes
    operation: Operation
    token: bytes
    dek_id: bytes
    path: str | None
    digest: bytes | None
    size: int | None
    binary: bool

    @property
    def sha256(self) -> str | None:
        """The SHA-256 of the content in hex (None for ``deleted`` or unknown)."""
        return self.digest.hex() if self.digest is not None else None


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """What the index keeps of a commit: its id, time and API actor (nothing else of its metadata)."""

    commit_id: bytes
    time: float
    actor: Actor


class CommitTable:
    """``seq -> CommitInfo`` of the indexed commits, kept compact (a raw id and a time in arrays,
    one object per actor): ``commits[seq]`` and ``commits.get(seq)`` make the :class:`CommitInfo`."""

    def __init__(self) -> None:
        self._ids = bytearray()  # 20 raw bytes per commit
        self._times = array("d")
        self._actors: list[Actor] = []
        #: seq -> position, once the sequence numbers stop being 0, 1, 2, ... (None until then).
        self._positions: dict[int, int] | None = None

    def add(self, seq: int, info: CommitInfo) -> None:
        """Record commit ``seq`` (each once, oldest first)."""
        n = len(self._times)
        if self._positions is None and seq != n:
            self._positions = {i: i for i in range(n)}
        if self._positions is not None:
            self._positions[seq] = n
        self._ids += bytes.fromhex(info.commit_id.decode("ascii"))
        self._times.append(info.time)
        self._actors.append(info.actor)

    def get(self, seq: int) -> CommitInfo | None:
        """Commit ``seq``, or None."""
        i = seq if self._positions is None else self._positions.get(seq, -1)
        if not 0 <= i < len(self._times):
            return None
        return CommitInfo(self._ids[20 * i : 20 * i + 20].hex().encode("ascii"), self._times[i], self._actors[i])

    def __getitem__(self, seq: int) -> CommitInfo:
        info = self.get(seq)
        if info is None:
            raise KeyError(seq)
        return info

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and self.get(seq) is not None

    def __len__(self) -> int:
        return len(self._times)


class LineageIndex:
    """The versions of every memory of one store's ``main``; thread-safe.

    Args:
        store: the store whose history is indexed.
    """

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self.seq = -1
        self.commit_id = b""
        self.commits = CommitTable()
        #: Every version, ordered by ``(seq, file_id)`` (:meth:`record` and :meth:`written_by`
        #: search it: no dict per version, so an idle store's index stays small).
        self.versions: list[VersionRecord] = []
        self.by_file: dict[bytes, list[VersionRecord]] = {}
        #: Head: lineage -> its newest version (token, API path) of each text file; sorted API
        #: paths of those files.
        self.head: dict[bytes, VersionRecord] = {}
        self.sorted_paths: list[str] = []
        self._path_owner: dict[str, bytes] = {}
        self._live: dict[bytes, bytes] = {}  # token -> lineage of every file at the head
        self._binary: set[bytes] = set()  # lineages whose head version is binary
        self._actors: dict[Actor, Actor] = {}  # one object per actor, shared by its commits

    def refresh(self, head: tuple[bytes, int] | None = None) -> int:
        """Take in the commits made since the last refresh, up to ``head`` (``(commit_id, seq)``;
        default: the store's head now); returns how many. Raises what reading the history raises
        (IntegrityError)."""
        commit_id, seq = head if head is not None else self._store.head
        with self._lock:
            if commit_id == self.commit_id or seq <= self.seq:
                return 0  # one linear history: an older head is already in
            todo = []
            for cid, meta, tree_id, parent in walk(self._store, commit_id):
                if meta.seq <= self.seq:
                    break
                todo.append((cid, meta, tree_id, parent))
            for cid, meta, tree_id, parent in reversed(todo):
                self._apply(cid, meta, tree_id, parent)
            self.commit_id, self.seq = commit_id, seq
            return len(todo)

    # -- replay ------------------------------------------------------------------------------------

    def _lineage_of_redacted(self, node: Node) -> bytes | None:
        info = self._store.keyring.tombstone(node.dek_id) or {}
        text = info.get("file")
        if isinstance(text, str) and len(text) == 32:
            try:
                return bytes.fromhex(text)
            except ValueError:
                return None
        return None

    def _apply(self, commit_id: bytes, meta: CommitMeta, tree_id: bytes, parent: bytes | None) -> None:
        parent_tree = self._store.commit(parent)[1] if parent is not None else None
        created, deleted, modified = shard_diff(self._store, tree_id, parent_tree)
        actor = actor_of(meta)
        self.commits.add(meta.seq, CommitInfo(commit_id, meta.time, self._actors.setdefault(actor, actor)))
        before: dict[bytes, tuple[bytes, str | None]] = {}  # lineage -> (token, path) in the parent
        after: dict[bytes, Node] = {}
        for node in deleted:
            fid = self._live.pop(node.token, None)
            if fid is not None:
                before[fid] = (node.token, None if node.redacted else node.path)
        unresolved: list[Node] = []
        for node in modified:
            prev = self._live.get(node.token)
            if node.redacted:
                fid = self._lineage_of_redacted(node) or prev
            else:
                fid = node.file_id if not node.is_dir else None
            if prev is not None:
                before.setdefault(prev, (node.token, None if node.redacted else node.path))
            if fid is None:
                self._live.pop(node.token, None)
                continue
            self._live[node.token] = fid
            after[fid] = node
        for node in created:
            if node.redacted:
                fid = self._lineage_of_redacted(node)
                if fid is None:
                    unresolved.append(node)
                    continue
            elif node.is_dir:
                continue
            else:
                fid = node.file_id
            self._live[node.token] = fid
            after[fid] = node
        if unresolved:
            gone = [fid for fid in before if fid not in after]
            if len(unresolved) == 1 and len(gone) == 1:  # a rename's target, redacted since
                pairs = [(unresolved[0], gone[0])]
            else:
                pairs = [(node, node.dek_id) for node in unresolved]
            for node, fid in pairs:
                self._live[node.token] = fid
                after[fid] = node
        for fid in sorted(set(before) | set(after)):
            found = after.get(fid)
            if found is None:
                token, path = before[fid]
                self._record(VersionRecord(meta.seq, fid, "deleted", token, b"", _api(path), None, None, False))
                continue
            operation: Operation = "modified" if fid in before else "created"
            node = found
            if node.redacted:
                record = VersionRecord(meta.seq, fid, operation, node.token, node.dek_id, None, None, None, False)
            else:
                record = VersionRecord(meta.seq, fid, operation, node.token, node.dek_id, _api(node.path),
                                       node.sha256, node.size, node.binary)  # fmt: skip
            self._record(record)

    def _record(self, record: VersionRecord) -> None:
        self.versions.append(record)
        self.by_file.setdefault(record.file_id, []).append(record)
        fid = record.file_id
        old = self.head.pop(fid, None)
        if old is not None and old.path is not None:
            self._drop_path(old.path, fid)
        self._binary.discard(fid)
        if record.operation == "deleted" or record.path is None:
            return
        if record.binary:
            self._binary.add(fid)
            return
        self.head[fid] = record
        owner = self._path_owner.get(record.path)
        if owner is not None and owner != fid:  # a lineage replaced another at the same path
            self.head.pop(owner, None)
        else:
            bisect.insort(self.sorted_paths, record.path)
        self._path_owner[record.path] = fid

    def _drop_path(self, path: str, fid: bytes) -> None:
        if self._path_owner.get(path) != fid:
            return
        del self._path_owner[path]
        i = bisect.bisect_left(self.sorted_paths, path)
        if i < len(self.sorted_paths) and self.sorted_paths[i] == path:
            del self.sorted_paths[i]

    # -- queries -------------------------------------------------------------------------------------

    def file_at(self, seq: int, path: str) -> bytes | None:
        """The lineage commit ``seq`` wrote at API path ``path`` (None if it wrote none there)."""
        info = self.commits.get(seq)
        if info is None:
            return None
        for record in self.written_by(seq):
            if record.path == path:
                return record.file_id
        return None

    def record(self, seq: int, fid: bytes) -> VersionRecord | None:
        """The version commit ``seq`` made of lineage ``fid``, or None."""
        i = bisect.bisect_left(self.versions, (seq, fid), key=_order)
        if i < len(self.versions) and _order(self.versions[i]) == (seq, fid):
            return self.versions[i]
        return None

    def written_by(self, seq: int) -> list[VersionRecord]:
        """The versions commit ``seq`` made (in lineage order)."""
        lo = bisect.bisect_left(self.versions, seq, key=_seq)
        return self.versions[lo : bisect.bisect_right(self.versions, seq, lo=lo, key=_seq)]

    def owner(self, path: str) -> bytes | None:
        """The lineage of the text file at API path ``path`` at the indexed head, if any."""
        return self._path_owner.get(path)

    def is_binary(self, fid: bytes) -> bool:
        """Whether lineage ``fid``'s head version is a binary file (no memory of the API)."""
        return fid in self._binary

    def latest(self, fid: bytes) -> VersionRecord | None:
        """The newest version of lineage ``fid``."""
        found = self.by_file.get(fid)
        return found[-1] if found else None

    def created(self, fid: bytes) -> VersionRecord | None:
        """The version that created lineage ``fid`` (its latest ``created``)."""
        for record in reversed(self.by_file.get(fid, ())):
            if record.operation == "created":
                return record
        return None


def _order(record: VersionRecord) -> tuple[int, bytes]:
    return record.seq, record.file_id


def _seq(record: VersionRecord) -> int:
    return record.seq


def _api(path: str | None) -> str | None:
    if path is None or not path.startswith(_PREFIX):
        return None
    return path[len(API_ROOT) :]
