"""Reading versions out of the lineage index: filtered listings newest first, one version by
id, its content (decrypted from the commit that wrote it) and its redaction."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, NotFoundError
from ..store.nodes import shard_among
from .ids import memory_id, parse_memory_id, version_id
from .index import LineageIndex, VersionRecord
from .model import MemoryVersion, micros, redaction_of

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["VersionReader", "OPERATIONS"]

OPERATIONS = ("created", "modified", "deleted")
_NOT_FOUND = "Error: No memory version has this id."


def _order(record: VersionRecord) -> tuple[int, bytes]:
    return record.seq, record.file_id


class VersionReader:
    """Versions of the memories of ``store`` as :class:`MemoryVersion` objects (the caller holds
    the store's state lock and has brought ``index`` up to date).

    Args:
        store: the store. index: its lineage index. store_ref: the ``memory_store_id`` to name.
    """

    def __init__(self, store: MemoryStore, index: LineageIndex, store_ref: str) -> None:
        self._store = store
        self._index = index
        self._ref = store_ref

    def version_id(self, record: VersionRecord) -> str:
        """The version's id."""
        return version_id(record.seq, record.file_id)

    def record(self, key: tuple[int, bytes] | None) -> VersionRecord:
        """The indexed version ``(seq, file_id)`` (NotFoundError if none)."""
        record = self._index.record(*key) if key is not None else None
        if record is None:
            raise NotFoundError(_NOT_FOUND)
        return record

    def is_redacted(self, record: VersionRecord) -> bool:
        """Whether the version's content is gone (its data key destroyed)."""
        if record.operation == "deleted":
            return False
        return record.path is None or self._store.keyring.is_destroyed(record.dek_id)

    def _content(self, record: VersionRecord) -> str:
        commit_id = self._index.commits[record.seq].commit_id
        tree_id = self._store.commit(commit_id)[1]
        blobs = self._store.index_blobs(tree_id)
        shard = shard_among(blobs, record.token)
        node = self._store.shard_nodes(shard, blobs[shard])[record.token]
        return self._store.read_node(node).decode("utf-8")

    def build(self, record: VersionRecord, *, view: str) -> MemoryVersion:
        """The version as the API shows it (content when ``view`` is ``full`` and it has some)."""
        info = self._index.commits[record.seq]
        common = (self.version_id(record), memory_id(record.file_id), self._ref, record.operation, info.time,
                  info.actor)  # fmt: skip
        if record.operation == "deleted":
            return MemoryVersion(*common, record.path, None, None, None)
        if self.is_redacted(record):
            at, by = redaction_of(self._store.keyring.tombstone(record.dek_id))
            return MemoryVersion(*common, None, None, None, None, at if at is not None else info.time, by)
        content = self._content(record) if view == "full" and not record.binary else None
        return MemoryVersion(*common, record.path, content, record.sha256, record.size)

    def get(self, key: tuple[int, bytes] | None, *, view: str) -> MemoryVersion:
        """One version by ``(seq, file_id)`` (NotFoundError if none)."""
        return self.build(self.record(key), view=view)

    def list(
        self,
        *,
        limit: int,
        view: str,
        after: Any = None,
        memory_id: str | None = None,
        operation: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        service_account_id: str | None = None,
        created_at_gte: int | None = None,
        created_at_lte: int | None = None,
    ) -> tuple[list[MemoryVersion], Any]:
        """At most ``limit`` versions newest first after the cursor position ``after``, filtered;
        and the position of the last one when more may follow (else None).

        ``memory_id`` keeps one memory's versions (deleted memories too); ``operation`` one kind;
        ``session_id``/``api_key_id`` the changes of that session or API key; a
        ``service_account_id`` matches nothing (memvault has no service accounts);
        ``created_at_gte``/``created_at_lte`` are microseconds since the epoch, inclusive.
        """
        if operation is not None and operation not in OPERATIONS:
            raise InvalidInputError(f"Error: `operation` must be one of {', '.join(OPERATIONS)}.")
        if service_account_id is not None:
            return [], None
        if memory_id is not None:
            fid = parse_memory_id(memory_id)
            records: Sequence[VersionRecord] = self._index.versions_of(fid) if fid is not None else []
        else:
            records = self._index.versions
        end = len(records)
        if after is not None:
            try:
                position = (int(after[0]), bytes.fromhex(after[1]))
            except (TypeError, ValueError, IndexError, KeyError):
                raise InvalidInputError("Error: The page cursor is not valid for this listing.") from None
            end = bisect.bisect_left(records, position, key=_order)
        out: list[MemoryVersion] = []
        i = end - 1
        while i >= 0 and len(out) < limit:
            record = records[i]
            i -= 1
            info = self._index.commits[record.seq]
            if operation is not None and record.operation != operation:
                continue
            if created_at_gte is not None and micros(info.time) < created_at_gte:
                continue
            if created_at_lte is not None and micros(info.time) > created_at_lte:
                continue
            if session_id is not None or api_key_id is not None:
                actor = info.actor
                if session_id is not None and (actor.type != "session_actor" or actor.id != session_id):
                    continue
                if api_key_id is not None and (actor.type != "api_actor" or actor.id != api_key_id):
                    continue
            out.append(self.build(record, view=view))
            last = record
        more = i >= 0 and bool(out)
        return out, ([last.seq, last.file_id.hex()] if more else None)
