"""Writes by a person (``memvault put``, ``edit``, ``rm``, ``mv``): one commit each, scrubbed and
refused as the memory tool's writes are.

A text goes through the store's scrubber (:mod:`memvault.scrub.guard`, the functions the memory
tool's ``create`` uses), its path through :func:`memvault.paths.parse_path` and the path check,
and the commit records the findings. An image (``.png``, ``.jpg``, ``.jpeg`` starting with a PNG
or JPEG signature, as :mod:`memvault.transfer.importer` accepts them) is kept as a binary file
without passing the scrubber, which reads text only. A delete goes through
:func:`memvault.edits.writes.delete` and a move through the memory tool's ``rename``
(:func:`memvault.protocol.commands.run_command`), so both refuse with the tool's messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import crypto
from ..errors import ConflictError, InvalidInputError, LimitExceededError, PathExistsError
from ..paths import MemoryPath, parse_path
from ..protocol.commands import IMAGE_SUFFIXES, run_command
from ..scrub.guard import check_path, scrub_text
from ..store import MemoryStore, Transaction
from . import writes

__all__ = [
    "OperatorWrite",
    "file_content",
    "put",
    "save_edit",
    "read_for_edit",
    "remove",
    "move",
    "is_image_path",
    "IMAGE_SIGNATURES",
]

#: The first bytes of every PNG and JPEG file: a file named as an image must be one, so text
#: cannot pass the scrubber by its name (as for an import).
IMAGE_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")


@dataclass(frozen=True)
class OperatorWrite:
    """What one operator write did: the command recorded, its paths, the new commit (None when
    nothing changed), the new content's SHA-256 (hex; None after a delete or move), the
    scrubber's findings (kind -> count), whether the file is an image stored unscanned, and
    whether the file is new."""

    command: str
    paths: tuple[str, ...]
    commit_id: str | None
    seq: int | None
    sha256: str | None = None
    findings: dict[str, int] = field(default_factory=dict)
    binary: bool = False
    created: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "paths": list(self.paths),
            "commit": self.commit_id,
            "seq": self.seq,
            "sha256": self.sha256,
            "findings": dict(sorted(self.findings.items())),
            "binary": self.binary,
            "created": self.created,
        }


def is_image_path(path: MemoryPath) -> bool:
    """Whether ``path`` is named as an image the store keeps as binary (``.png``, ``.jpg``, ``.jpeg``)."""
    return "." in path.name and "." + path.name.rpartition(".")[2].lower() in IMAGE_SUFFIXES


def file_content(store: MemoryStore, vpath: MemoryPath, data: bytes, findings: dict[str, int]) -> tuple[bytes, bool]:
    """``(bytes to store, binary)`` of ``data`` written at ``vpath``: an image as given, a text
    scrubbed by the store's scrubber (what it found added to ``findings``, kind -> count).

    Raises:
        LimitExceededError (over the size limit, before any scan), InvalidInputError (neither
        UTF-8 text nor an image named as one), SensitiveDataError (a ``reject`` finding).
    """
    limit = store.settings.max_file_bytes
    if len(data) > limit:  # the memory tool's message (Transaction.write_file), before any scan
        raise LimitExceededError(
            f"Error: The content for {vpath.text} is {len(data)} bytes, over the limit of {limit} bytes per file"
        )
    if is_image_path(vpath):
        if not data.startswith(IMAGE_SIGNATURES):
            raise InvalidInputError(
                f"Error: {vpath.text} is named as an image but the content is not a PNG or JPEG file."
            )
        return data, True
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(
            f"Error: The content for {vpath.text} is not UTF-8 text (only .png, .jpg and .jpeg files may be binary)."
        ) from None
    return scrub_text(store, text, findings).encode("utf-8"), False


def _write(
    store: MemoryStore,
    path: str,
    data: bytes,
    *,
    command: str,
    expected_sha256: str | None,
    must_not_exist: bool,
    actor: str,
    session: str,
) -> OperatorWrite:
    vpath = writes.file_path(store, path)
    check_path(store, vpath)
    findings: dict[str, int] = {}
    raw, binary = file_content(store, vpath, data, findings)

    def apply(txn: Transaction) -> bool:
        node = txn.get(vpath)
        if node is not None and node.is_dir:
            raise PathExistsError(f"Error: {vpath.text} is a directory")
        if must_not_exist and node is not None:
            raise ConflictError(f"Error: {vpath.text} was created by another writer meanwhile; nothing was written.")
        if expected_sha256 is not None and (node is None or node.sha256.hex() != expected_sha256):
            now = "it was deleted" if node is None else "its content differs"
            raise ConflictError(f"Error: {vpath.text} changed since it was read ({now}); nothing was written.")
        txn.write_file(vpath, raw, binary=binary)
        return node is None

    done = store.transact(apply, command=command, paths=(vpath.text,), actor=actor, session=session, findings=findings)
    return OperatorWrite(
        command,
        (vpath.text,),
        done.commit_id.decode(),
        done.seq,
        crypto.sha256(raw).hex(),
        findings,
        binary,
        done.value,
    )


def put(store: MemoryStore, path: str, data: bytes, *, actor: str = "operator", session: str = "") -> OperatorWrite:
    """Create or replace the file ``path`` with ``data``, as one ``put`` commit.

    ``data`` must be UTF-8 text (scrubbed as the memory tool's texts are), or, for a path named
    ``.png``, ``.jpg`` or ``.jpeg``, a PNG or JPEG image (stored as binary, unscanned).

    Raises:
        InvalidPathError, SensitiveDataError (a path or a ``reject`` finding), LimitExceededError,
        PathExistsError (a directory there), InvalidInputError (not text, not an image).
    """
    return _write(
        store, path, data, command="put", expected_sha256=None, must_not_exist=False, actor=actor, session=session
    )


def save_edit(
    store: MemoryStore,
    path: str,
    data: bytes,
    *,
    expected_sha256: str | None,
    actor: str = "operator",
    session: str = "",
) -> OperatorWrite:
    """Store the edited content of ``path`` as one ``edit`` commit, only if the file is still
    what the editor started from: content with SHA-256 ``expected_sha256`` (hex), or absent when
    it is None (a new file). Otherwise :class:`~memvault.errors.ConflictError` and nothing is
    written. Scrubbed and refused as :func:`put`."""
    return _write(
        store,
        path,
        data,
        command="edit",
        expected_sha256=expected_sha256,
        must_not_exist=expected_sha256 is None,
        actor=actor,
        session=session,
    )


def remove(
    store: MemoryStore, path: str, *, recursive: bool = False, actor: str = "operator", session: str = ""
) -> OperatorWrite:
    """Delete a file, or with ``recursive`` a directory and everything below it, as one
    ``delete`` commit (:func:`memvault.edits.writes.delete`: the memory tool's refusals).

    A file must still be the one read first (else :class:`~memvault.errors.ConflictError`), so
    a directory put in its place meanwhile is never deleted without ``recursive``.
    """
    vpath = parse_path(path, store.settings)
    node = None
    if not vpath.is_root:
        with store.reading() as view:
            node = view.get(vpath)
    if node is None:  # the root, or a missing path: the tool's refusal
        done = writes.delete(store, vpath.text, actor=actor, session=session)
    elif node.is_dir and not recursive:
        raise InvalidInputError(
            f"Error: {vpath.text} is a directory; deleting it and everything below it needs recursive (rm -r)."
        )
    else:
        expected = None if node.is_dir else node.sha256.hex()
        done = writes.delete(store, vpath.text, expected_sha256=expected, actor=actor, session=session)
    return OperatorWrite("delete", (done.path,), done.commit_id, done.seq)


def move(store: MemoryStore, old: str, new: str, *, actor: str = "operator", session: str = "") -> OperatorWrite:
    """Move a file or directory to a new path that must not exist, as one ``rename`` commit
    (the memory tool's ``rename``: its path checks and refusals)."""
    with store.writing():  # no other writer between the commit and reading its id
        run_command(store, {"command": "rename", "old_path": old, "new_path": new}, actor=actor, session=session)
        commit_id, seq = store.head
    paths = (parse_path(old, store.settings).text, parse_path(new, store.settings).text)
    return OperatorWrite("rename", paths, commit_id.decode(), seq)


def read_for_edit(store: MemoryStore, path: str) -> tuple[str, bytes | None]:
    """``(canonical path, content)`` of a text file to edit; content None if there is no file.

    Raises:
        PathExistsError: a directory, or the root. InvalidInputError: a binary file.
        InvalidPathError, SensitiveDataError: a path the memory tool would refuse.
    """
    vpath = writes.file_path(store, path)
    check_path(store, vpath)  # before anyone types into an editor what could not be saved there
    with store.reading() as view:
        node = view.get(vpath)
        if node is None:
            return vpath.text, None
        if node.is_dir:
            raise PathExistsError(f"Error: {vpath.text} is a directory")
        if node.binary:
            raise InvalidInputError(f"Error: {vpath.text} is a binary file and cannot be edited as text.")
        return vpath.text, view.read(vpath)
