"""Reading the history of a store: typed results, never printed here.

Every commit returned has been authenticated (HMAC chain tag) and its metadata decrypted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .errors import IntegrityError
from .store import MemoryStore

__all__ = ["CommitInfo", "iter_log", "log"]


@dataclass(frozen=True)
class CommitInfo:
    """One commit: who did what, when. ``commit_id`` is the git id (hex)."""

    commit_id: str
    seq: int
    time: float
    actor: str
    session: str
    command: str
    paths: tuple[str, ...]
    findings: dict[str, int]

    def to_json(self) -> dict[str, object]:
        return {
            "commit": self.commit_id,
            "seq": self.seq,
            "time": self.time,
            "actor": self.actor,
            "session": self.session,
            "command": self.command,
            "paths": list(self.paths),
            "findings": self.findings,
        }


def iter_log(store: MemoryStore) -> Iterator[CommitInfo]:
    """Commits from the head back to the first, newest first; ``seq`` must count down by one."""
    commit_id: bytes | None = store.head[0]
    expected: int | None = None
    while commit_id is not None:
        meta = store.commit_meta(commit_id)
        if expected is not None and meta.seq != expected:
            raise IntegrityError("The store's history is not contiguous.")
        yield CommitInfo(
            commit_id.decode(), meta.seq, meta.time, meta.actor, meta.session, meta.command, meta.paths, meta.findings
        )
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
