"""Preconditioned writes for programmatic writers: each is one commit, checked atomically.

:func:`write`, :func:`edit` and :func:`delete` take the ``sha256`` of the content the caller last
read (:func:`content_sha256`), like the ``content_sha256`` precondition of Anthropic's managed
memory stores; the check runs inside the transaction, under the store's writer lock. A failed
precondition is a :class:`~memvault.errors.ConflictError` and writes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .. import crypto
from ..errors import (
    ConflictError,
    EditError,
    InvalidInputError,
    InvalidPathError,
    PathExistsError,
    PathNotFoundError,
)
from ..format.records import Node
from ..paths import MemoryPath, parse_path
from ..store import MemoryStore, Transaction

__all__ = [
    "WriteResult",
    "write",
    "edit",
    "delete",
    "content_sha256",
    "file_path",
    "expected_digest",
    "check_precondition",
]

_SHA_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class WriteResult:
    """A preconditioned write: the path, the new content's SHA-256 (hex; ``None`` after a
    delete) and the new commit."""

    path: str
    sha256: str | None
    commit_id: str
    seq: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "commit": self.commit_id, "seq": self.seq}


def expected_digest(value: str | None) -> str | None:
    """``value`` as a precondition: None, or 64 lower-case hex digits (InvalidInputError otherwise)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("expected_sha256 must be a str")
    text = value.strip().lower()
    if not _SHA_RE.fullmatch(text):
        raise InvalidInputError("Error: expected_sha256 must be 64 hexadecimal digits (a SHA-256 of the content).")
    return text


def check_precondition(path: MemoryPath, node: Node | None, expected: str | None, must_not_exist: bool) -> None:
    """The precondition on ``path`` (its node ``node`` now), checked inside the transaction
    (under the store lock): ConflictError unless it holds."""
    if must_not_exist and node is not None:
        now = "it is a directory" if node.is_dir else f"sha256 {node.sha256.hex()[:12]}…"
        raise ConflictError(f"Error: {path.text} already exists (expected it not to exist; now {now})")
    if expected is None:
        return
    if node is None:
        now = "it does not exist"
    elif node.is_dir:
        now = "it is a directory"
    elif node.sha256.hex() != expected:
        now = f"{node.sha256.hex()[:12]}…"
    else:
        return
    raise ConflictError(f"Error: {path.text} changed since you read it (expected sha256 {expected[:12]}…, now {now})")


def encode_text(text: str, what: str) -> bytes:
    """``text`` as UTF-8 (InvalidInputError naming ``what`` for a lone surrogate)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"Error: {what} is not valid Unicode text (it contains a lone surrogate).") from None


def file_path(store: MemoryStore, path: str) -> MemoryPath:
    """The canonical path of a file to write (InvalidPathError; PathExistsError for the root)."""
    vpath = parse_path(path, store.settings)
    if vpath.is_root:
        raise PathExistsError("Error: /memories is a directory; give a file path below it")
    return vpath


def content_sha256(store: MemoryStore, path: str) -> str:
    """The SHA-256 (hex) of the file's content at the head: the value for ``expected_sha256``."""
    vpath = file_path(store, path)
    with store.reading() as view:
        node = view.get(vpath)
    if node is None or node.is_dir:
        raise PathNotFoundError(f"Error: The file {vpath.text} does not exist")
    return node.sha256.hex()


def write(
    store: MemoryStore,
    path: str,
    data: str | bytes,
    *,
    expected_sha256: str | None = None,
    must_not_exist: bool = False,
    actor: str = "library",
    session: str = "",
) -> WriteResult:
    """Create or replace a file (bytes are stored as binary), as one commit.

    With ``expected_sha256`` the file must exist with exactly that content; with
    ``must_not_exist`` it must not exist. Otherwise :class:`ConflictError` and nothing is written.
    """
    vpath = file_path(store, path)
    expected = expected_digest(expected_sha256)
    if expected is not None and must_not_exist:
        raise ValueError("give at most one of expected_sha256 and must_not_exist")
    binary = isinstance(data, bytes)
    raw = data if isinstance(data, bytes) else encode_text(data, "The content")

    def apply(txn: Transaction) -> None:
        check_precondition(vpath, txn.get(vpath), expected, must_not_exist)
        txn.write_file(vpath, raw, binary=binary)

    done = store.transact(apply, command="write", paths=(vpath.text,), actor=actor, session=session)
    return WriteResult(vpath.text, crypto.sha256(raw).hex(), done.commit_id.decode(), done.seq)


def edit(
    store: MemoryStore,
    path: str,
    old: str,
    new: str,
    *,
    expected_sha256: str | None = None,
    actor: str = "library",
    session: str = "",
) -> WriteResult:
    """Replace the one occurrence of ``old`` in a text file by ``new`` (like ``str_replace``).

    ``old`` appearing zero or several times is an :class:`EditError`; a failed
    ``expected_sha256`` precondition is a :class:`ConflictError`. Nothing is written then.
    """
    vpath = file_path(store, path)
    expected = expected_digest(expected_sha256)
    if old == "":
        raise EditError("Error: `old` must not be empty.")
    encode_text(old, "`old`")
    encode_text(new, "`new`")

    def apply(txn: Transaction) -> bytes:
        node = txn.get(vpath)
        check_precondition(vpath, node, expected, False)
        if node is None or node.is_dir:
            raise PathNotFoundError(f"Error: The path {vpath.text} does not exist")
        if node.binary:
            raise InvalidInputError(f"Error: {vpath.text} is a binary file and cannot be edited as text.")
        content = txn.read(vpath).decode("utf-8")
        count = content.count(old)
        if count != 1:
            raise EditError(
                f"Error: No replacement was performed: `old` appears {count} times in {vpath.text}; "
                "it must appear exactly once."
            )
        data = content.replace(old, new, 1).encode("utf-8")
        txn.write_file(vpath, data)
        return data

    done = store.transact(apply, command="edit", paths=(vpath.text,), actor=actor, session=session)
    return WriteResult(vpath.text, crypto.sha256(done.value).hex(), done.commit_id.decode(), done.seq)


def delete(
    store: MemoryStore,
    path: str,
    *,
    expected_sha256: str | None = None,
    actor: str = "library",
    session: str = "",
) -> WriteResult:
    """Delete a file (or, without a precondition, a directory and everything below it)."""
    vpath = parse_path(path, store.settings)
    if vpath.is_root:
        raise InvalidPathError("Error: Cannot delete the /memories directory itself")
    expected = expected_digest(expected_sha256)

    def apply(txn: Transaction) -> None:
        node = txn.get(vpath)
        check_precondition(vpath, node, expected, False)
        if node is None:
            raise PathNotFoundError(f"Error: The path {vpath.text} does not exist")
        txn.delete(vpath)

    done = store.transact(apply, command="delete", paths=(vpath.text,), actor=actor, session=session)
    return WriteResult(vpath.text, None, done.commit_id.decode(), done.seq)
