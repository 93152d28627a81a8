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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from ..format.records import CommitMeta, Node
from ..history import shard_diff, walk
from .model import API_ROOT, Actor, Operation, actor_of

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["VersionRecord", "CommitInfo", "VersionTable", "LineageIndex"]

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


_OPS: tuple[Operation, ...] = ("created", "modified", "deleted")
_OP_CODE = {op: i for i, op in enumerate(_OPS)}
_BINARY, _DIGEST, _SIZED = 1, 2, 4  # row flags


class VersionTable(Sequence[VersionRecord]):
    """Every version of the index in ``(seq, file_id)`` order, kept as columns (raw ids, digests
    and sizes packed in arrays; one path object per row, shared with the head's sorted paths):
    ``table[i]`` makes the :class:`VersionRecord`. About 120 bytes and a path a version, where a
    record object with its bytes objects costs about 450.

    Args:
        fids: the file id of each lineage number, 16 bytes each (extended by the index in place).
    """

    def __init__(self, fids: bytearray) -> None:
        self._seqs = array("q")
        self._lineages = array("q")  # row -> lineage number (LineageIndex._fids)
        self._prev = array("q")  # row -> the lineage's version before it (-1: none)
        self._ops = bytearray()
        self._flags = bytearray()
        self._tokens = bytearray()  # 32 bytes a row
        self._deks = bytearray()  # 16 bytes a row (zeros for ``deleted``)
        self._digests = bytearray()  # 32 bytes a row (zeros where unknown)
        self._sizes = array("q")
        self._paths: list[str | None] = []
        self._fids = fids  # lineage number -> 16-byte file id (the index's, extended in place)

    def append(self, record: VersionRecord, lineage: int, prev: int) -> int:
        """Add ``record`` (after every row before it in order) of lineage number ``lineage``,
        whose previous version is row ``prev`` (-1: none); returns its row."""
        self._seqs.append(record.seq)
        self._lineages.append(lineage)
        self._prev.append(prev)
        self._ops.append(_OP_CODE[record.operation])
        flags = _BINARY if record.binary else 0
        flags |= _DIGEST if record.digest is not None else 0
        flags |= _SIZED if record.size is not None else 0
        self._flags.append(flags)
        self._tokens += record.token.ljust(32, b"\0")
        self._deks += record.dek_id.ljust(16, b"\0") if record.dek_id else bytes(16)
        self._digests += record.digest if record.digest is not None else bytes(32)
        self._sizes.append(record.size if record.size is not None else 0)
        self._paths.append(record.path)
        return len(self._seqs) - 1

    def seq(self, row: int) -> int:
        """The commit number of row ``row``."""
        return self._seqs[row]

    def prev(self, row: int) -> int:
        """The row of the lineage's version before row ``row`` (-1: none)."""
        return self._prev[row]

    def path(self, row: int) -> str | None:
        """The API path of row ``row`` (the same object the head's sorted paths hold)."""
        return self._paths[row]

    def is_created(self, row: int) -> bool:
        """Whether row ``row`` is a ``created`` version."""
        return self._ops[row] == 0

    def __len__(self) -> int:
        return len(self._seqs)

    @overload
    def __getitem__(self, i: int) -> VersionRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[VersionRecord]: ...

    def __getitem__(self, i: int | slice) -> VersionRecord | list[VersionRecord]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self._seqs)
        if not 0 <= i < len(self._seqs):
            raise IndexError(i)
        operation = _OPS[self._ops[i]]
        flags = self._flags[i]
        lineage = self._lineages[i]
        return VersionRecord(
            self._seqs[i], bytes(self._fids[16 * lineage : 16 * lineage + 16]), operation,
            bytes(self._tokens[32 * i : 32 * i + 32]),
            b"" if operation == "deleted" else bytes(self._deks[16 * i : 16 * i + 16]),
            self._paths[i], bytes(self._digests[32 * i : 32 * i + 32]) if flags & _DIGEST else None,
            self._sizes[i] if flags & _SIZED else None, bool(flags & _BINARY),
        )  # fmt: skip


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
        #: search it by bisection: no object per version, so an idle store's index stays small).
        self._fids = bytearray()
        self.versions = VersionTable(self._fids)
        #: Lineages by number: file id -> number; per number its newest row and its row at the
        #: head (-1: not a text file at the head).
        self._numbers: dict[bytes, int] = {}
        self._latest = array("q")
        self._head = array("q")
        #: Sorted API paths of the head's text files, and the lineage number at each.
        self.sorted_paths: list[str] = []
        self._owners = array("q")
        self._live: dict[bytes, int] = {}  # token -> lineage number of every file at the head
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

    def _number(self, fid: bytes) -> int:
        """The lineage number of ``fid``, given one if it has none."""
        n = self._numbers.get(fid)
        if n is None:
            n = self._numbers[fid] = len(self._latest)
            self._fids += fid
            self._latest.append(-1)
            self._head.append(-1)
        return n

    def _fid(self, n: int) -> bytes:
        return bytes(self._fids[16 * n : 16 * n + 16])

    def _apply(self, commit_id: bytes, meta: CommitMeta, tree_id: bytes, parent: bytes | None) -> None:
        parent_tree = self._store.commit(parent)[1] if parent is not None else None
        created, deleted, modified = shard_diff(self._store, tree_id, parent_tree)
        actor = actor_of(meta)
        self.commits.add(meta.seq, CommitInfo(commit_id, meta.time, self._actors.setdefault(actor, actor)))
        before: dict[bytes, tuple[bytes, str | None]] = {}  # lineage -> (token, path) in the parent
        after: dict[bytes, Node] = {}
        for node in deleted:
            n = self._live.pop(node.token, None)
            if n is not None:
                before[self._fid(n)] = (node.token, None if node.redacted else node.path)
        unresolved: list[Node] = []
        for node in modified:
            found = self._live.get(node.token)
            prev = self._fid(found) if found is not None else None
            if node.redacted:
                fid = self._lineage_of_redacted(node) or prev
            else:
                fid = node.file_id if not node.is_dir else None
            if prev is not None:
                before.setdefault(prev, (node.token, None if node.redacted else node.path))
            if fid is None:
                self._live.pop(node.token, None)
                continue
            self._live[node.token] = self._number(fid)
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
            self._live[node.token] = self._number(fid)
            after[fid] = node
        if unresolved:
            gone = [fid for fid in before if fid not in after]
            if len(unresolved) == 1 and len(gone) == 1:  # a rename's target, redacted since
                pairs = [(unresolved[0], gone[0])]
            else:
                pairs = [(node, node.dek_id) for node in unresolved]
            for node, fid in pairs:
                self._live[node.token] = self._number(fid)
                after[fid] = node
        for fid in sorted(set(before) | set(after)):
            found_node = after.get(fid)
            if found_node is None:
                token, path = before[fid]
                self._record(VersionRecord(meta.seq, fid, "deleted", token, b"", _api(path), None, None, False))
                continue
            operation: Operation = "modified" if fid in before else "created"
            node = found_node
            if node.redacted:
                record = VersionRecord(meta.seq, fid, operation, node.token, node.dek_id, None, None, None, False)
            else:
                record = VersionRecord(meta.seq, fid, operation, node.token, node.dek_id, _api(node.path),
                                       node.sha256, node.size, node.binary)  # fmt: skip
            self._record(record)

    def _record(self, record: VersionRecord) -> None:
        n = self._number(record.file_id)
        row = self.versions.append(record, n, self._latest[n])
        self._latest[n] = row
        old = self._head[n]
        if old >= 0:
            self._head[n] = -1
            old_path = self.versions.path(old)
            if old_path is not None:
                self._drop_path(old_path, n)
        if record.operation == "deleted" or record.path is None or record.binary:
            return
        self._head[n] = row
        path = self.versions.path(row)
        assert path is not None
        i = bisect.bisect_left(self.sorted_paths, path)
        if i < len(self.sorted_paths) and self.sorted_paths[i] == path:
            owner = self._owners[i]
            if owner != n:  # a lineage replaced another at the same path
                self._head[owner] = -1
            self.sorted_paths[i] = path
            self._owners[i] = n
        else:
            self.sorted_paths.insert(i, path)
            self._owners.insert(i, n)

    def _drop_path(self, path: str, n: int) -> None:
        i = bisect.bisect_left(self.sorted_paths, path)
        if i < len(self.sorted_paths) and self.sorted_paths[i] == path and self._owners[i] == n:
            del self.sorted_paths[i]
            del self._owners[i]

    # -- queries -------------------------------------------------------------------------------------

    def record(self, seq: int, fid: bytes) -> VersionRecord | None:
        """The version commit ``seq`` made of lineage ``fid``, or None."""
        for record in self.written_by(seq):
            if record.file_id == fid:
                return record
        return None

    def written_by(self, seq: int) -> list[VersionRecord]:
        """The versions commit ``seq`` made (in lineage order)."""
        table = self.versions
        lo = bisect.bisect_left(range(len(table)), seq, key=table.seq)
        hi = bisect.bisect_right(range(len(table)), seq, lo=lo, key=table.seq)
        return [table[i] for i in range(lo, hi)]

    def owner(self, path: str) -> bytes | None:
        """The lineage of the text file at API path ``path`` at the indexed head, if any."""
        i = bisect.bisect_left(self.sorted_paths, path)
        if i < len(self.sorted_paths) and self.sorted_paths[i] == path:
            return self._fid(self._owners[i])
        return None

    def at_head(self, fid: bytes) -> VersionRecord | None:
        """Lineage ``fid``'s version at the indexed head, if it is a text file there."""
        n = self._numbers.get(fid)
        row = self._head[n] if n is not None else -1
        return self.versions[row] if row >= 0 else None

    def latest(self, fid: bytes) -> VersionRecord | None:
        """The newest version of lineage ``fid``."""
        n = self._numbers.get(fid)
        return self.versions[self._latest[n]] if n is not None else None

    def versions_of(self, fid: bytes) -> list[VersionRecord]:
        """Every version of lineage ``fid``, oldest first."""
        n = self._numbers.get(fid)
        rows = []
        row = self._latest[n] if n is not None else -1
        while row >= 0:
            rows.append(row)
            row = self.versions.prev(row)
        return [self.versions[r] for r in reversed(rows)]

    def created(self, fid: bytes) -> VersionRecord | None:
        """The version that created lineage ``fid`` (its latest ``created``)."""
        n = self._numbers.get(fid)
        row = self._latest[n] if n is not None else -1
        while row >= 0:
            if self.versions.is_created(row):
                return self.versions[row]
            row = self.versions.prev(row)
        return None


def _api(path: str | None) -> str | None:
    if path is None or not path.startswith(_PREFIX):
        return None
    return path[len(API_ROOT) :]
