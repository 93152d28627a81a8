"""Crypto-shredding (``memvault redact``): erase file versions by destroying their data keys.

Operator-only: nothing here is reachable through the memory tool. Every file version has its own
random data key (DEK), which seals both its content blob and its node record (path, size). To
redact a version, memvault destroys that key (:meth:`MemoryStore.destroy_keys
<memvault.store.MemoryStore.destroy_keys>`, docs/format.md §3.2): one ``redact`` commit removes the
versions still live at the head and, in format version 3, records the destruction (who, when, why;
encrypted) in the keyring's MAC chain; the keyring is then rewritten without the key. Earlier
commits stay as they are and still verify; the ciphertext stays in git objects but can no longer be
decrypted by anyone, including the key holder. Reading a redacted version gives
:class:`~memvault.errors.RedactedError`; ``log`` shows it as redacted, with who and when.

What can still hold copies is listed in :data:`REMAINING_COPIES` and in every result.

Each erasing function chooses its versions with one selection (under the writer lock), which a
dry run (``dry_run=True``: what would be destroyed, nothing destroyed, no commit) and the real run
share, so the two cannot disagree; a real run given the dry run's result as ``expect`` refuses to
destroy anything else (:class:`~memvault.errors.ConflictError` when the history changed between:
a confirmation shown to an operator stays true).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ConflictError, InvalidInputError, PathNotFoundError
from ..format.records import Node
from ..history import resolve, shard_diff, walk
from ..paths import parse_path
from ..store import MemoryStore

__all__ = [
    "REMAINING_COPIES",
    "FileVersion",
    "ShredResult",
    "file_versions",
    "shred_version",
    "shred_file",
    "shred_matching",
]

#: Longest reason or actor recorded in a tombstone.
_MAX_REASON = 1000

#: Where a redacted text may still exist; memvault cannot reach these.
REMAINING_COPIES = (
    "copies or backups of the store directory (above all of its keyring file) made before the redaction",
    "exports written earlier with `memvault export` or `memvault export --plaintext-git`",
    "conversation transcripts, tool results and application logs that saw the text",
    "old disk blocks of the keyring on copy-on-write filesystems, snapshots or SSDs "
    "(memvault overwrites the destroyed records in place, which such storage may not honour)",
)

#: ... and, for a store in object storage, also these.
REMOTE_COPIES = (
    "the caches of hosts that have not opened the store since the redaction (each drops the key at its next command)",
    "old versions of the bucket's objects, if it keeps them (versioning), and its backups or replicas",
)


@dataclass(frozen=True)
class FileVersion:
    """One version of a file: where and when it first appeared, and its key id."""

    path: str
    version: int
    commit_id: str
    seq: int
    dek_id: str
    redacted: bool
    #: The lineage's file id (hex; "" unknown), recorded in the key's tombstone for the memory-stores ids.
    file_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "version": self.version,
            "commit": self.commit_id,
            "seq": self.seq,
            "dek_id": self.dek_id,
            "redacted": self.redacted,
        }


@dataclass(frozen=True)
class ShredResult:
    """What a redaction destroyed, what it removed from the head, and what it cannot reach; for
    a dry run (``dry_run``), what it would destroy and remove (``commit_id`` is None)."""

    versions: tuple[FileVersion, ...]
    removed_from_head: tuple[str, ...]
    commit_id: str | None
    remaining_copies: tuple[str, ...] = REMAINING_COPIES
    dry_run: bool = False

    @property
    def data_keys(self) -> int:
        """How many data keys the redaction destroys (one per version)."""
        return len({v.dek_id for v in self.versions})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "versions": [v.to_json() for v in self.versions],
            "removed_from_head": list(self.removed_from_head),
            "commit": self.commit_id,
            "remaining_copies": list(self.remaining_copies),
        }
        if self.dry_run:
            out.update(dry_run=True, data_keys=self.data_keys)
        return out


def _all_versions(store: MemoryStore) -> Iterator[tuple[Node, bytes, int]]:
    """Every distinct file version in the history (oldest first), with the commit it first
    appeared in."""
    seen: set[bytes] = set()
    commits = list(walk(store))
    for commit_id, meta, tree_id, parent in reversed(commits):
        parent_tree = store.commit(parent)[1] if parent is not None else None
        created, _deleted, modified = shard_diff(store, tree_id, parent_tree)
        for node in created + modified:
            if node.kind == "file" and node.dek_id not in seen:
                seen.add(node.dek_id)
                yield node, commit_id, meta.seq


def _version(node: Node, commit_id: bytes, seq: int) -> FileVersion:
    return FileVersion(node.path, node.version, commit_id.decode(), seq, node.dek_id.hex(), node.redacted,
                       node.file_id.hex())  # fmt: skip


def file_versions(store: MemoryStore, path: str) -> list[FileVersion]:
    """Every version of the file lineage(s) that ever lived at ``path`` (across renames)."""
    vpath = parse_path(path).text
    versions = list(_all_versions(store))
    lineages = {n.file_id for n, _c, _s in versions if n.path == vpath and not n.redacted}
    return [_version(n, c, s) for n, c, s in versions if n.file_id in lineages and not n.redacted]


def _shred(
    store: MemoryStore,
    select: Callable[[], list[FileVersion]],
    *,
    actor: str,
    session: str,
    reason: str,
    dry_run: bool = False,
    expect: ShredResult | None = None,
) -> ShredResult:
    """Choose the versions with ``select`` and destroy their keys in one critical section under
    the writer lock, so no commit can slip between the choice and the destruction (an edit made
    meanwhile would be a new version, still holding the text, that nobody chose). A dry run stops
    after the choice; with ``expect``, a choice other than its versions destroys nothing."""
    if len(reason) > _MAX_REASON or len(actor) > _MAX_REASON:
        raise InvalidInputError(f"Error: The reason and actor are limited to {_MAX_REASON} characters each.")
    with store.writing():
        targets = select()
        dek_ids = {bytes.fromhex(v.dek_id) for v in targets}
        if expect is not None and dek_ids != {bytes.fromhex(v.dek_id) for v in expect.versions}:
            raise ConflictError(
                f"Error: The history changed since the redaction was planned ({len(expect.versions)} version(s), "
                f"now {len(targets)}); nothing was redacted. Run it again."
            )
        if dry_run:
            head = store.state_at(store.head[0]).nodes.values()
            would = tuple(sorted(n.path for n in head if n.dek_id in dek_ids))
            return ShredResult(tuple(targets), would, None, _remaining(store), dry_run=True)
        if not targets:
            return ShredResult((), (), None)
        info: dict[str, object] = {"time": time.time(), "actor": actor, "reason": reason}
        lineages: dict[bytes, dict[str, object]] = {
            bytes.fromhex(v.dek_id): {"file": v.file_id} for v in targets if v.file_id
        }  # the memory-stores ids of these versions stay known (docs/format.md §15)
        _count, live, commit_id = store.destroy_keys(dek_ids, info, actor=actor, session=session, remove_from_head=True,
                                                     per_key=lineages)  # fmt: skip
    return ShredResult(tuple(targets), live, None if commit_id is None else commit_id.decode(), _remaining(store))


def _remaining(store: MemoryStore) -> tuple[str, ...]:
    """Where copies memvault cannot reach may be (:data:`REMAINING_COPIES`, and for a store in
    object storage :data:`REMOTE_COPIES` and the bucket's versioning warning)."""
    if store.remote is None:
        return REMAINING_COPIES
    warning = store.remote.versioning_warning()
    return REMAINING_COPIES + REMOTE_COPIES + ((warning,) if warning else ())


def shred_version(
    store: MemoryStore,
    path: str,
    rev: str,
    *,
    actor: str = "operator",
    session: str = "",
    reason: str = "",
    dry_run: bool = False,
    expect: ShredResult | None = None,
) -> ShredResult:
    """Erase the version of ``path`` that is current at revision ``rev`` (``dry_run``,
    ``expect``: see the module docstring)."""
    vpath = parse_path(path).text

    def select() -> list[FileVersion]:
        node = store.state_at(resolve(store, rev)).nodes.get(vpath)
        if node is None or node.is_dir:
            raise PathNotFoundError(f"Error: The file {vpath} does not exist at revision {rev}.")
        target = next((v for v in file_versions(store, vpath) if v.dek_id == node.dek_id.hex()), None)
        if target is None:  # pragma: no cover - every node of a state was created by some commit
            raise PathNotFoundError(f"Error: The file {vpath} does not exist at revision {rev}.")
        return [target]

    return _shred(store, select, actor=actor, session=session, reason=reason, dry_run=dry_run, expect=expect)


def shred_file(
    store: MemoryStore,
    path: str,
    *,
    actor: str = "operator",
    session: str = "",
    reason: str = "",
    dry_run: bool = False,
    expect: ShredResult | None = None,
) -> ShredResult:
    """Erase every version of the file(s) that ever lived at ``path``, across renames
    (``dry_run``, ``expect``: see the module docstring)."""

    def select() -> list[FileVersion]:
        targets = file_versions(store, path)
        if not targets:
            raise PathNotFoundError(f"Error: No version of {parse_path(path).text} exists in the history.")
        return targets

    return _shred(store, select, actor=actor, session=session, reason=reason, dry_run=dry_run, expect=expect)


def shred_matching(
    store: MemoryStore,
    text: str,
    *,
    actor: str = "operator",
    session: str = "",
    reason: str = "",
    dry_run: bool = False,
    expect: ShredResult | None = None,
) -> ShredResult:
    """Erase every version whose content or path contains ``text`` (str_replace and insert carry
    old text forward, so this finds every copy in the history; ``dry_run``, ``expect``: see the
    module docstring)."""
    if len(text) < 4:
        raise InvalidInputError("Error: Give at least 4 characters to match, so a redaction is not accidental.")
    needle = text.encode("utf-8")

    def select() -> list[FileVersion]:
        return [
            _version(node, commit_id, seq)
            for node, commit_id, seq in _all_versions(store)
            if not node.redacted and (text in node.path or needle in store.read_node(node))
        ]

    return _shred(store, select, actor=actor, session=session, reason=reason, dry_run=dry_run, expect=expect)
