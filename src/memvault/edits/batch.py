"""Many writes as one commit, for programs that populate or synchronise a store.

A :class:`Batch` collects file writes and deletes and commits them together: one commit, one
flush of the disk, one history entry (command ``batch``), whatever their number. Each text is
scrubbed by the store's scrubber when it is added (as an operator's ``put`` is: masked, or
refused with :class:`~memvault.errors.SensitiveDataError`), so a refusal comes before anything is
written; images named ``.png``, ``.jpg`` or ``.jpeg`` are kept as binary files, unscanned.
Preconditions (``expected_sha256``, ``must_not_exist``) are checked inside the commit, under the
store's writer lock, like those of :mod:`memvault.edits.writes`. If any write or delete cannot be
applied, the whole batch raises and nothing is written::

    with Batch(store, actor="loader", session="crm-sync") as batch:
        for row in rows:
            batch.put(f"/memories/customers/{row.id}.md", row.summary)
        batch.delete("/memories/customers/closed")
    batch.result.seq, batch.result.findings   # the commit, and what the scrubber masked
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInputError, InvalidPathError, PathNotFoundError
from ..paths import MemoryPath, parse_path
from ..scrub.guard import check_path
from ..store import MemoryStore, Transaction
from .files import file_content
from .writes import check_precondition, encode_text, expected_digest, file_path

__all__ = ["Batch", "BatchResult"]


@dataclass(frozen=True)
class BatchResult:
    """What a committed batch did: its commit (``commit_id``/``seq`` None when the batch was
    empty), the files written and the paths deleted (canonical, in the order given), and per
    written file what the scrubber masked (path -> kind -> count; files with no finding are left
    out)."""

    commit_id: str | None
    seq: int | None
    written: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    findings: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit_id,
            "seq": self.seq,
            "written": list(self.written),
            "deleted": list(self.deleted),
            "findings": self.findings,
        }


@dataclass(frozen=True)
class _Put:
    path: MemoryPath
    data: bytes
    binary: bool
    expected: str | None
    must_not_exist: bool


@dataclass(frozen=True)
class _Delete:
    path: MemoryPath
    expected: str | None
    recursive: bool


class Batch:
    """Writes and deletes collected in memory, committed as one commit by :meth:`commit` (or on
    leaving a ``with`` block without an exception; an exception discards the batch).

    Args:
        store: the store to write.
        actor, session: recorded in the commit.
    """

    def __init__(self, store: MemoryStore, *, actor: str = "library", session: str = "") -> None:
        self._store = store
        self._actor = actor
        self._session = session
        self._ops: list[_Put | _Delete] = []
        self._findings: dict[str, dict[str, int]] = {}
        self._result: BatchResult | None = None

    def __len__(self) -> int:
        return len(self._ops)

    @property
    def result(self) -> BatchResult:
        """What the commit did (RuntimeError before it was made)."""
        if self._result is None:
            raise RuntimeError("The batch has not been committed.")
        return self._result

    def put(
        self, path: str, data: str | bytes, *, expected_sha256: str | None = None, must_not_exist: bool = False
    ) -> str:
        """Add a write of ``data`` at the file ``path`` (created or replaced; parents are created).

        ``data`` is text (str, or UTF-8 bytes), scrubbed now, or an image's bytes for a path named
        as one. With ``expected_sha256`` the file must have exactly that content when the batch
        commits, with ``must_not_exist`` it must not exist. Returns the canonical path.

        Raises:
            InvalidPathError, SensitiveDataError (in the path, or a ``reject`` finding in the
            text), LimitExceededError (over the file size limit), InvalidInputError (neither
            text nor an image, a bad digest, both preconditions), PathExistsError (the root);
            nothing is added to the batch.
        """
        self._open()
        vpath = file_path(self._store, path)
        check_path(self._store, vpath)
        expected = expected_digest(expected_sha256)
        if expected is not None and must_not_exist:
            raise InvalidInputError("Error: Give at most one of expected_sha256 and must_not_exist.")
        if isinstance(data, str):
            raw = encode_text(data, f"The content for {vpath.text}")
        elif isinstance(data, bytes):
            raw = data
        else:
            raise TypeError("data must be str or bytes")
        findings: dict[str, int] = {}
        stored, binary = file_content(self._store, vpath, raw, findings)
        self._ops.append(_Put(vpath, stored, binary, expected, must_not_exist))
        if findings:
            merged = self._findings.setdefault(vpath.text, {})
            for kind, n in findings.items():
                merged[kind] = merged.get(kind, 0) + n
        return vpath.text

    def delete(self, path: str, *, expected_sha256: str | None = None, recursive: bool = False) -> str:
        """Add a delete of the file ``path`` (or, with ``recursive``, of a directory and everything
        below it). It must exist when the batch commits (PathNotFoundError then, and nothing is
        written); with ``expected_sha256`` it must be a file with exactly that content.
        Returns the canonical path.

        Raises:
            InvalidPathError (a bad path, or the root), InvalidInputError (a bad digest).
        """
        self._open()
        vpath = parse_path(path, self._store.settings)
        if vpath.is_root:
            raise InvalidPathError("Error: Cannot delete the /memories directory itself")
        self._ops.append(_Delete(vpath, expected_digest(expected_sha256), recursive))
        return vpath.text

    def commit(self) -> BatchResult:
        """Apply every write and delete, in the order given, as one commit (command ``batch``).

        An empty batch writes no commit. Afterwards the batch takes nothing more.

        Raises:
            ConflictError (a precondition), PathNotFoundError (a delete of a missing path),
            PathExistsError (a file where a directory is needed, or the other way round),
            InvalidInputError (a directory deleted without ``recursive``), LimitExceededError
            (the store's file count or total size), and what a commit raises
            (:meth:`MemoryStore.transact`); nothing is written.
        """
        self._open()
        ops = list(self._ops)
        if not ops:
            self._result = BatchResult(None, None)
            return self._result

        def apply(txn: Transaction) -> None:
            for op in ops:
                if isinstance(op, _Put):
                    check_precondition(op.path, txn.get(op.path), op.expected, op.must_not_exist)
                    txn.write_file(op.path, op.data, binary=op.binary)
                    continue
                node = txn.get(op.path)
                check_precondition(op.path, node, op.expected, False)
                if node is None:
                    raise PathNotFoundError(f"Error: The path {op.path.text} does not exist")
                if node.is_dir and not op.recursive:
                    raise InvalidInputError(
                        f"Error: {op.path.text} is a directory; deleting it and everything below it needs recursive."
                    )
                txn.delete(op.path)

        totals: dict[str, int] = {}
        for kinds in self._findings.values():
            for kind, n in kinds.items():
                totals[kind] = totals.get(kind, 0) + n
        done = self._store.transact(
            apply, command="batch", paths=(_common_parent(ops),), actor=self._actor, session=self._session,
            findings=totals,
        )  # fmt: skip
        self._result = BatchResult(
            done.commit_id.decode(),
            done.seq,
            tuple(op.path.text for op in ops if isinstance(op, _Put)),
            tuple(op.path.text for op in ops if isinstance(op, _Delete)),
            {path: dict(kinds) for path, kinds in self._findings.items()},
        )
        return self._result

    def _open(self) -> None:
        if self._result is not None:
            raise RuntimeError("The batch was already committed; start a new one.")

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None and self._result is None:
            self.commit()


def _common_parent(ops: list[_Put | _Delete]) -> str:
    """The deepest directory holding every path of the batch (what the commit records: the
    per-file changes are in the commit itself)."""
    common = os.path.commonpath([op.path.parent.text if isinstance(op, _Put) else op.path.text for op in ops])
    return common if len(ops) > 1 else ops[0].path.text
