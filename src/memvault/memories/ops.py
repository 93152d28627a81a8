""":class:`Memories`: the memory-stores operations over one memvault store.

Memories are the text files below ``/memories``: a memory's id is its lineage (kept across edits
and renames), its path the store path without ``/memories``. Every change is one commit of the
store (so ``memvault log``, ``verify``, ``redact`` see it) attributed to the caller's actor, and
a write goes through the store's scrubber first, as the memory tool's do. Directories are the
store's business: the API sees a path as taken only by a file, and a create or rename onto a
directory holding no file replaces that directory.

Preconditions (the SHA-256 of the current content) are checked under the store's writer lock,
so of two writers expecting the same content exactly one wins; a precondition that fails while
the memory already is exactly as asked succeeds without a new version, and so does an update
that changes nothing.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .. import crypto
from ..errors import (
    ConflictError,
    InternalError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
)
from ..format.records import Node
from ..paths import MemoryPath
from ..scrub.guard import check_path, scrub_text
from ..store import Committed, Transaction
from .cursor import CursorSealer
from .ids import memory_id, parse_memory_id, parse_version_id, version_id
from .index import LineageIndex
from .model import VIA, VIA_API, Memory, MemoryPrefix, Page, api_path
from .paths import to_store_path, to_store_prefix
from .versions import VersionReader

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["Memories", "View"]

View = Literal["basic", "full"]
T = TypeVar("T")
_MOVE_TRIES = 8
#: Commits one index refresh takes in beyond which the history caches it filled are dropped.
_WALK_TRIM = 64
_SHA_HEX = frozenset("0123456789abcdef")


class _Unchanged(Exception):
    """The memory already is as asked: no commit (never escapes this module)."""


class _Moved(Exception):
    """The memory moved between looking it up and taking the writer lock: look again."""


def _expected_sha(value: object, name: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= _SHA_HEX:
        raise InvalidInputError(f"Error: `{name}` must be 64 lower-case hexadecimal digits.")
    return bytes.fromhex(value)


class Memories:
    """The memory-stores operations on ``store``. Thread-safe.

    Args:
        store: an open store.
        store_ref: the id the objects name as their ``memory_store_id``.
        cursor_key: 32-byte key of the page cursors (default: random, valid for this object).
    """

    def __init__(self, store: MemoryStore, store_ref: str = "", *, cursor_key: bytes | None = None) -> None:
        self.store = store
        self.ref = store_ref
        self.index = LineageIndex(store)
        self._cursors = CursorSealer(cursor_key, store.store_id)
        self._versions = VersionReader(store, self.index, store_ref)

    # -- internals -----------------------------------------------------------------------------------

    def _sync(self, txn: Transaction) -> None:
        if self.index.refresh((txn.base_commit, txn.base_seq)) > _WALK_TRIM:
            self.store.trim_caches()  # the walk filled caches the head does not need

    def _read(self, body: Callable[[Transaction], T]) -> T:
        with self.store.reading() as txn:
            self._sync(txn)
            return body(txn)

    def _encode(self, text: object, findings: dict[str, int]) -> bytes:
        """``text`` scrubbed and encoded, within the store's size limit."""
        if not isinstance(text, str):
            raise InvalidInputError("Error: `content` must be a string.")
        limit = self.store.settings.max_file_bytes
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidInputError("Error: `content` is not valid Unicode text (it holds a lone surrogate).") from None
        if size > limit:
            raise LimitExceededError(f"Error: `content` is {size} bytes, over the limit of {limit} bytes per memory.")
        return scrub_text(self.store, text, findings).encode("utf-8")

    def _fid(self, text: object) -> bytes:
        fid = parse_memory_id(text) if isinstance(text, str) else None
        if fid is None:
            raise NotFoundError("Error: No memory has this id.")
        return fid

    def _current(self, txn: Transaction, fid: bytes) -> tuple[Node, MemoryPath]:
        """The head node of lineage ``fid`` and its store path (NotFoundError if none)."""
        found = self.index.at_head(fid)
        if found is not None and found.path is not None:
            vpath = to_store_path(found.path, self.store.settings)
            node = txn.get(vpath)
            if node is not None and not node.is_dir and node.file_id == fid:
                return node, vpath
        raise NotFoundError("Error: No memory has this id.")

    def _memory(self, fid: bytes, node: Node, content: str | None) -> Memory:
        latest = self.index.latest(fid)
        created = self.index.created(fid)
        if latest is None:
            raise InternalError()
        updated_at = self.index.commits[latest.seq].time
        created_at = self.index.commits[created.seq].time if created is not None else updated_at
        return Memory(
            memory_id(fid), self.ref, api_path(node.path), content, node.sha256.hex(), node.size,
            self._versions.version_id(latest), created_at, updated_at,
        )  # fmt: skip

    def _conflict(self, node: Node, wanted: MemoryPath) -> PathConflictError:
        is_memory = not node.binary and self.index.owner(api_path(node.path)) == node.file_id
        return PathConflictError(
            f"Error: The path {api_path(wanted.text)} conflicts with the memory at {api_path(node.path)}.",
            memory_id=memory_id(node.file_id) if is_memory else "",
            path=api_path(node.path),
        )

    def _first_file_below(self, txn: Transaction, directory: MemoryPath, moving: bytes | None) -> Node | None:
        """The first file below ``directory`` other than lineage ``moving``."""
        for name in txn.child_names(directory):
            child = directory.child(name)
            node = txn.get(child)
            if node is None:
                continue
            if not node.is_dir:
                if node.file_id != moving:
                    return node
                continue
            found = self._first_file_below(txn, child, moving)
            if found is not None:
                return found
        return None

    def _claim(self, txn: Transaction, vpath: MemoryPath, moving: bytes | None) -> None:
        """Make ``vpath`` free for a memory (lineage ``moving`` when it is a rename), or raise
        PathConflictError: a file holds it, lies below it or above it. A directory there that
        holds no file is removed (a directory exists only while a memory lies under it). The
        memory being moved is not in its own way: it leaves its old path in the same commit."""
        node = txn.get(vpath)
        if node is not None:
            if not node.is_dir:
                if node.file_id != moving:
                    raise self._conflict(node, vpath)
                return
            below = self._first_file_below(txn, vpath, moving)
            if below is not None:
                raise self._conflict(below, vpath)
            txn.delete(vpath)
        parent = vpath.parent
        while not parent.is_root:
            above = txn.get(parent)
            if above is not None:
                if not above.is_dir and above.file_id != moving:
                    raise self._conflict(above, vpath)
                break
            parent = parent.parent

    def _with_current_path(self, fid: bytes, body: Callable[[MemoryPath], T]) -> T:
        """Run ``body`` with the memory's current store path; again if it moved meanwhile. The
        first try takes the path the index knew (no read of the head: the transaction checks it)."""
        known = self.index.at_head(fid)
        for attempt in range(_MOVE_TRIES):
            if attempt == 0 and known is not None and known.path is not None:
                vpath = to_store_path(known.path, self.store.settings)
            else:
                vpath = self._read(lambda txn: self._current(txn, fid)[1])
            try:
                return body(vpath)
            except _Moved:
                continue
        raise ConflictError("Error: The memory kept moving while it was being changed; retry.")

    # -- memories ------------------------------------------------------------------------------------

    def create(
        self, path: object, content: object, *, actor: str, session: str = "", via: str = VIA_API,
        view: View = "basic", check: Callable[[], None] | None = None,
    ) -> Memory:  # fmt: skip
        """Create the memory at API path ``path`` (``content`` None is empty text). ``check``, if
        given, runs under the writer lock before anything changes (whatever it raises, nothing is
        written): a server confirms there that the caller may still write.

        Returns:
            The new memory (``content`` set when ``view`` is ``full``).

        Raises:
            InvalidPathError, InvalidInputError, LimitExceededError, SensitiveDataError: bad input
            or a write the store's policy refuses (nothing written).
            PathConflictError: the path, a path above it or one below it holds a file.
        """
        settings = self.store.settings
        vpath = to_store_path(path, settings)
        check_path(self.store, vpath)
        findings: dict[str, int] = {}
        data = self._encode("" if content is None else content, findings)

        def apply(txn: Transaction) -> bytes:
            if check is not None:
                check()
            self._sync(txn)
            self._claim(txn, vpath, None)
            txn.write_file(vpath, data)
            node = txn.get(vpath)
            assert node is not None
            return node.file_id

        committed = self.store.transact(apply, command="create", paths=(vpath.text,), actor=actor, session=session,
                                        findings=findings, extra={VIA: via})  # fmt: skip
        return self._written(committed.value, committed, vpath, data, view)

    def _written(self, fid: bytes, committed: Committed[Any], vpath: MemoryPath, data: bytes, view: View) -> Memory:
        """The memory a commit of this object just wrote at ``vpath``, as it wrote it (no read:
        its creation time is the index's, or this commit's for a new memory)."""
        created = self.index.created(fid)
        return Memory(
            memory_id(fid), self.ref, api_path(vpath.text), data.decode("utf-8") if view == "full" else None,
            crypto.sha256(data).hex(), len(data), version_id(committed.seq, fid),
            self.index.commits[created.seq].time if created is not None else committed.time, committed.time,
        )  # fmt: skip

    def retrieve(self, memory_id_: object, *, view: View = "full") -> Memory:
        """The memory with this id at the head.

        Raises:
            NotFoundError: no memory at the head has this id (never was, or deleted).
        """
        fid = self._fid(memory_id_)

        def body(txn: Transaction) -> Memory:
            node, vpath = self._current(txn, fid)
            content = txn.read(vpath).decode("utf-8") if view == "full" else None
            return self._memory(fid, node, content)

        return self._read(body)

    def update(
        self, memory_id_: object, *, content: object = None, path: object = None, expected_sha256: object = None,
        actor: str, session: str = "", via: str = VIA_API, view: View = "basic",
        check: Callable[[], None] | None = None,
    ) -> Memory:  # fmt: skip
        """Change a memory's content, path or both (its id stays), as one commit (``check`` as
        for :meth:`create`).

        ``expected_sha256`` is the precondition: the SHA-256 (hex) of the content the caller last
        saw. Nothing is committed when the memory already is as asked (with or without a
        precondition).

        Raises:
            NotFoundError: no memory has this id. PreconditionFailedError: the content changed.
            PathConflictError: the new path is taken. And what :meth:`create` raises for bad input.
        """
        fid = self._fid(memory_id_)
        settings = self.store.settings
        target = to_store_path(path, settings) if path is not None else None
        if target is not None:
            check_path(self.store, target)
        findings: dict[str, int] = {}
        data = self._encode(content, findings) if content is not None else None
        expected = _expected_sha(expected_sha256, "precondition.content_sha256")

        def once(old: MemoryPath) -> Memory:
            new = target if target is not None else old

            def apply(txn: Transaction) -> bytes:
                if check is not None:
                    check()
                self._sync(txn)
                node, vpath = self._current(txn, fid)
                if vpath != old:
                    raise _Moved
                same = (data is None or crypto.sha256(data) == node.sha256) and new == vpath
                if expected is not None and node.sha256 != expected and not same:
                    raise PreconditionFailedError(
                        "Error: The memory's content changed since the precondition was read; nothing was written."
                    )
                if same:
                    raise _Unchanged
                body = data if data is not None else txn.read(vpath)
                if new != vpath:
                    self._claim(txn, new, fid)
                    txn.delete(vpath)
                txn.write_file(new, body, lineage=node)
                return body

            command, paths = ("rename", (old.text, new.text)) if new != old else ("update", (old.text,))
            try:
                committed = self.store.transact(apply, command=command, paths=paths, actor=actor, session=session,
                                                findings=findings, extra={VIA: via})  # fmt: skip
            except _Unchanged:
                return self.retrieve(memory_id_, view=view)
            return self._written(fid, committed, new, committed.value, view)

        return self._with_current_path(fid, once)

    def delete(
        self, memory_id_: object, *, expected_sha256: object = None, actor: str, session: str = "", via: str = VIA_API,
        check: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        """Delete a memory (its versions stay, as history). ``expected_sha256`` and ``check`` as for
        :meth:`update`.

        Raises:
            NotFoundError, PreconditionFailedError.
        """
        fid = self._fid(memory_id_)
        expected = _expected_sha(expected_sha256, "expected_content_sha256")

        def once(old: MemoryPath) -> None:
            def apply(txn: Transaction) -> None:
                if check is not None:
                    check()
                self._sync(txn)
                node, vpath = self._current(txn, fid)
                if vpath != old:
                    raise _Moved
                if expected is not None and node.sha256 != expected:
                    raise PreconditionFailedError(
                        "Error: The memory's content changed since the precondition was read; nothing was deleted."
                    )
                txn.delete(vpath)

            self.store.transact(apply, command="delete", paths=(old.text,), actor=actor, session=session,
                                extra={VIA: via})  # fmt: skip

        self._with_current_path(fid, once)

    def list(
        self,
        *,
        path_prefix: object = "/",
        depth: int = 0,
        limit: int = 20,
        view: View = "basic",
        page: str | None = None,
    ) -> Page[Memory | MemoryPrefix]:
        """The memories below ``path_prefix`` in path order, a page at a time.

        ``depth`` 0 lists every memory below the prefix; ``depth`` N lists those at most N
        segments below it and rolls deeper ones into a :class:`MemoryPrefix` of N segments.

        Raises:
            InvalidPathError: a bad prefix. InvalidInputError: a bad depth or limit, or a cursor
            of another listing.
        """
        prefix_path = to_store_prefix(path_prefix, self.store.settings)
        prefix = "/" if prefix_path.is_root else api_path(prefix_path.text) + "/"
        if type(depth) is not int or depth < 0:
            raise InvalidInputError("Error: `depth` must be an integer of at least 0.")
        if type(limit) is not int or limit < 1:
            raise InvalidInputError("Error: `limit` must be an integer of at least 1.")
        query = {"list": "memories", "prefix": prefix, "depth": depth, "view": view}
        after = self._cursors.open(page, query) if page is not None else None
        if after is not None and not isinstance(after, str):
            raise InvalidInputError("Error: The page cursor is not valid for this listing.")

        def body(txn: Transaction) -> Page[Memory | MemoryPrefix]:
            paths = self.index.sorted_paths
            if after is None:
                i = bisect.bisect_left(paths, prefix)
            elif after.endswith("/"):
                i = bisect.bisect_left(paths, after[:-1] + "0")  # past everything below that prefix
            else:
                i = bisect.bisect_right(paths, after)
            items: list[Memory | MemoryPrefix] = []
            last = ""
            while i < len(paths) and len(items) < limit and paths[i].startswith(prefix):
                path = paths[i]
                rest = path[len(prefix) :].split("/")
                if depth and len(rest) > depth:
                    last = prefix + "/".join(rest[:depth]) + "/"
                    items.append(MemoryPrefix(last))
                    i = bisect.bisect_left(paths, last[:-1] + "0")
                    continue
                fid = self.index.owner(path)
                vpath = to_store_path(path, self.store.settings)
                node = txn.get(vpath)
                if fid is None or node is None or node.is_dir:
                    i += 1
                    continue
                content = txn.read(vpath).decode("utf-8") if view == "full" else None
                items.append(self._memory(fid, node, content))
                last = path
                i += 1
            more = i < len(paths) and paths[i].startswith(prefix)
            return Page(items, self._cursors.seal(query, last) if more and items else None)

        return self._read(body)

    # -- versions ------------------------------------------------------------------------------------

    def versions(self, *, limit: int = 20, view: View = "basic", page: str | None = None, **filters: Any) -> Page[Any]:
        """Versions newest first, filtered (see :meth:`VersionReader.list`)."""
        if type(limit) is not int or limit < 1:
            raise InvalidInputError("Error: `limit` must be an integer of at least 1.")
        query = {"list": "versions", "view": view, **{k: v for k, v in filters.items() if v is not None}}
        after = self._cursors.open(page, query) if page is not None else None

        def body(_txn: Transaction) -> Page[Any]:
            items, last = self._versions.list(limit=limit, view=view, after=after, **filters)
            return Page(items, self._cursors.seal(query, last) if last is not None else None)

        return self._read(body)

    def version(self, version_id_: object, *, view: View = "full") -> Any:
        """One version by id (NotFoundError if none)."""
        key = parse_version_id(version_id_) if isinstance(version_id_, str) else None
        return self._read(lambda _txn: self._versions.get(key, view=view))

    def redact(self, version_id_: object, *, actor: str, via: str = VIA_API) -> Any:
        """Destroy the data key of one version (crypto-shredding): its content, path, digest and
        size are gone for good; its id, operation, time and actor stay. Redacting a redacted
        version changes nothing.

        Raises:
            NotFoundError: no such version. ConflictError: the version is the memory's current one
            (update or delete the memory first), or a ``deleted`` version (it holds no content).
        """
        key = parse_version_id(version_id_) if isinstance(version_id_, str) else None
        record = self._read(lambda _txn: self._versions.record(key))
        if self._versions.is_redacted(record):
            return self.version(version_id_, view="basic")
        if record.operation == "deleted":
            raise ConflictError("Error: A `deleted` version holds no content to redact; redact the version before it.")
        latest = self.index.latest(record.file_id)
        if latest == record and self.index.at_head(record.file_id) is not None:
            raise ConflictError(
                "Error: The current version of a memory cannot be redacted; update or delete the memory first."
            )
        info: dict[str, object] = {"time": time.time(), "actor": actor, VIA: via, "file": record.file_id.hex(),
                                   "reason": "memory-stores API"}  # fmt: skip
        self.store.destroy_keys({record.dek_id}, info, actor=actor, remove_from_head=False)
        return self.version(version_id_, view="basic")
