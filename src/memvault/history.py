"""Reading the history of a store: typed results, never printed here.

Every commit returned has been authenticated (HMAC chain tag) and its metadata decrypted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from .errors import IntegrityError
from .records import CommitMeta
from .store import MemoryStore

__all__ = ["CommitInfo", "iter_log", "log"]

_META_FIELDS = tuple(f.name for f in fields(CommitMeta))


@dataclass(frozen=True, slots=True)
class CommitInfo(CommitMeta):
    """One authenticated commit: its git id (hex) and its decrypted metadata."""

    commit_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit_id, **CommitMeta.to_json(self)}


def iter_log(store: MemoryStore) -> Iterator[CommitInfo]:
    """Commits from the head back to the first, newest first; ``seq`` must count down by one."""
    commit_id: bytes | None = store.head[0]
    expected: int | None = None
    while commit_id is not None:
        meta = store.commit_meta(commit_id)
        if expected is not None and meta.seq != expected:
            raise IntegrityError("The store's history is not contiguous.")
        yield CommitInfo(**{f: getattr(meta, f) for f in _META_FIELDS}, commit_id=commit_id.decode())
        _, parents, _ = store.git.read_commit(commit_id)
        commit_id = parents[0] if parents else None
        expected = meta.seq - 1


def log(store: MemoryStore, *, limit: int | None = None) -> list[CommitInfo]:
    """The newest ``limit`` commits (all if None)."""
    out: list[CommitInfo] = []
    for info in iter_log(store):
        if limit is not None and len(out) >= limit:
            break
        out.append(info)
    return out
