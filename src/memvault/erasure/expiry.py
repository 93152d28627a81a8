"""Expiry: delete the files nobody has read or written for a while, as one commit.

A file's *last use* is the later of its last write (the time of the commit that wrote its current
version, from its encrypted node record) and its last recorded read (:mod:`memvault.store.atimes`, at
one-hour resolution). :func:`expire` deletes every file whose last use is older than the cutoff in
one commit attributed to the caller (command ``expire``), so ``memvault restore`` or ``revert``
brings any of them back; directories are left in place. A damaged access-time file stops it
(:class:`~memvault.errors.IntegrityError`): without the reads, recently read files would look
unused.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..errors import ConflictError, InvalidInputError
from ..paths import parse_path

if TYPE_CHECKING:
    from ..store import MemoryStore, Transaction

__all__ = ["StaleFile", "ExpireResult", "parse_duration", "stale_files", "expire"]

_UNITS: Final[dict[str, int]] = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION_RE: Final = re.compile(r"\A([0-9]{1,7})([smhdw])\Z")


def parse_duration(text: str) -> float:
    """Seconds in ``90d``, ``12h``, ``2w``, ``30m`` or ``45s``; InvalidInputError otherwise."""
    m = _DURATION_RE.match(text.strip())
    if m is None or int(m.group(1)) == 0:
        raise InvalidInputError(
            f"Not a duration: {text!r}; use a positive number and a unit s, m, h, d or w (e.g. 90d)."
        )
    return float(int(m.group(1)) * _UNITS[m.group(2)])


@dataclass(frozen=True, slots=True)
class StaleFile:
    """A file whose last use is before the cutoff."""

    path: str
    size: int
    last_write: float
    last_read: float | None

    @property
    def last_use(self) -> float:
        return self.last_write if self.last_read is None else max(self.last_write, self.last_read)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "last_write": self.last_write,
            "last_read": self.last_read,
            "last_use": self.last_use,
        }


@dataclass(frozen=True, slots=True)
class ExpireResult:
    """What :func:`expire` deleted (or, with ``dry_run``, would delete)."""

    cutoff: float
    dry_run: bool
    files: list[StaleFile] = field(default_factory=list)
    commit_id: str | None = None
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff,
            "dry_run": self.dry_run,
            "commit": self.commit_id,
            "seq": self.seq,
            "files": [f.to_json() for f in self.files],
        }


def stale_files(txn: Transaction, last_read: dict[bytes, float], cutoff: float) -> list[StaleFile]:
    """Files of ``txn`` last used before ``cutoff``, in path order (redacted files included:
    their content is already gone, and deleting them only drops the name)."""
    out: list[StaleFile] = []
    root = parse_path("/memories", txn.settings)
    for path in txn.descendants(root):
        node = txn.get(path)
        if node is None or node.is_dir:
            continue
        stale = StaleFile(path.text, node.size, node.mtime, last_read.get(node.token))
        if stale.last_use < cutoff:
            out.append(stale)
    return out


def expire(
    store: MemoryStore,
    unused_for: float,
    *,
    actor: str,
    session: str = "",
    dry_run: bool = False,
    now: float | None = None,
    assume_unread: bool = False,
) -> ExpireResult:
    """Delete, in one commit, every file not read or written in the last ``unused_for`` seconds.

    No commit when nothing is stale, or with ``dry_run``. The files are chosen on a view of the
    head and deleted in a transaction on that same head (the commit metadata names them); if
    another writer commits in between, the choice is made again.

    Args:
        assume_unread: go on when the access-time file is missing or is not the one the keyring
            recorded last, taking the reads it lacks as never made.

    Raises:
        IntegrityError: the access-time file is damaged, or (without ``assume_unread``) missing or
            not the one recorded last: removing it or putting back an older copy needs no key, and
            taken for "never read", files read daily would go.
    """
    if unused_for <= 0:
        raise InvalidInputError("The unused-for duration must be positive.")
    only = None if assume_unread else store.is_recorded_access_file
    cutoff = (time.time() if now is None else now) - unused_for
    for _attempt in range(_ATTEMPTS):
        head = store.head[0]  # a view newer than this makes the transaction below retry
        last_read = store.access_times.last_read(only=only)  # the bytes checked are the bytes read
        with store.reading() as view:
            stale = stale_files(view, last_read, cutoff)
        if dry_run or not stale:
            return ExpireResult(cutoff, dry_run, stale)

        def apply(txn: Transaction, head: bytes = head, stale: list[StaleFile] = stale) -> None:
            if txn.base_commit != head:
                raise _HeadMoved
            for f in stale:
                txn.delete(parse_path(f.path, txn.settings))

        try:
            done = store.transact(
                apply, command="expire", paths=tuple(f.path for f in stale), actor=actor, session=session
            )
        except _HeadMoved:
            continue
        return ExpireResult(cutoff, False, stale, done.commit_id.decode(), done.seq)
    raise ConflictError("Error: The memory store kept changing during the command; retry it.")


class _HeadMoved(Exception):
    """Another writer committed between choosing the files and the transaction."""


_ATTEMPTS: Final = 8
