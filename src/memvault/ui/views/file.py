"""A file as it was at a revision, its versions and its blame.

Versions and blame come from the store's lineage index (:mod:`memvault.memories.index`: every
version of every file, built once by replaying the history, then kept up to date), so they cost
the file's versions, not the history's length. On a long history the first build runs as a job
and the page shows its progress. A redacted version shows who redacted it and when, never its
content or name.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from ...errors import RedactedError
from ...format.records import Node
from ...history import BlameLine, attribute_lines, walk
from ...memories.index import LineageIndex, VersionRecord
from ...paths import ROOT, parse_path
from ...store import MemoryStore
from ...store.nodes import shard_among
from ..jobs import Job
from ..textview import clip, lines_of, show
from .base import Ctx, Page, Reply, UiError, View, commit_of
from .tree import breadcrumbs, rev_info, tombstone

__all__ = ["FileView", "VersionsView", "BlameView", "VIEWS", "lineage", "node_at"]

#: Commits the index may lag behind the head and still be brought up to date inside a request.
INLINE_COMMITS = 200
#: The index is built in steps of this many commits (the job's progress).
INDEX_STEP = 1000
#: Versions listed per page; versions blame looks at (the newest).
VERSIONS_PAGE = 100
BLAME_VERSIONS = 200
#: Images shown inline (by their first bytes), and up to what size.
_IMAGES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))
_IMAGE_BYTES = 2 * 1024 * 1024
_API_ROOT = ROOT


def node_at(ctx: Ctx, commit_id: bytes, path: str) -> tuple[str, Node | None, dict[str, Any] | None]:
    """The file at ``path`` at ``commit_id``: ``(canonical path, node, None)``, or for a version
    redacted since ``(path, None, its tombstone)``. UiError 404 if there was none there."""
    store = ctx.store.store
    vpath = parse_path(path, store.settings).text
    state = ctx.app.state_at(ctx.store, commit_id)
    node = state.nodes.get(vpath)
    if node is None:
        token = store.token(vpath)  # a redacted version keeps only its token, which the path determines
        gone = state.redacted(token)
        if gone is not None:
            return vpath, None, tombstone(store, gone.dek_id)
        raise UiError(404, "No file at this path at this revision.")
    if node.is_dir:
        raise UiError(404, "This path is a directory at this revision.")
    return vpath, node, None


def lineage(ctx: Ctx) -> LineageIndex | Page:
    """The store's lineage index, up to date with the head; or, while a long history is being
    indexed, the page that says so (it reloads itself)."""
    access = ctx.store
    index = access.memories.index
    head, seq = access.store.head
    if seq - index.seq <= INLINE_COMMITS:
        index.refresh((head, seq))
        return index
    identity = ctx.identity
    app = ctx.app

    def build(job: Job) -> None:
        assert identity is not None
        with app.backend.open(identity, access.store_id) as opened:
            target = opened.memories.index
            job.progress = (max(target.seq, 0), seq)
            steps = [(cid, meta.seq) for cid, meta, _t, _p in walk(opened.store, head)
                     if meta.seq > target.seq and (meta.seq % INDEX_STEP == 0 or cid == head)]  # fmt: skip
            for cid, step in reversed(steps):
                target.refresh((cid, step))
                job.progress = (step, seq)

    job = app.jobs.run(("index", access.store_id, head), "indexing the history", build, wait=0.15)
    if job.done and not job.error:
        index.refresh((head, seq))
        return index
    return working(job)


def working(job: Job) -> Page:
    """The page of a job still running (it reloads every second), or of one that failed."""
    if job.done and job.error:
        return Page("error.html", {"status": 500, "message": job.error}, status=500)
    return Page("working.html", {"job": job}, status=202, refresh=1)


def _content(store: MemoryStore, commit_id: bytes, token: bytes) -> Node | None:
    """The node with path token ``token`` in commit ``commit_id`` (read from its one shard)."""
    tree = store.commit(commit_id)[1]
    blobs = store.index_blobs(tree)
    shard = shard_among(blobs, token)
    blob = blobs.get(shard)
    return store.shard_nodes(shard, blob).get(token) if blob is not None else None


def _image(data: bytes) -> str | None:
    if len(data) > _IMAGE_BYTES:
        return None
    for magic, kind in _IMAGES:
        if data.startswith(magic):
            return f"data:{kind};base64," + base64.b64encode(data).decode("ascii")
    return None


class FileView(View):
    """``/file?path=&rev=``: a file's content at a revision, line by line."""

    path = "/file"

    def get(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        commit_id = commit_of(store, ctx.arg("rev"))
        path, node, gone = node_at(ctx, commit_id, ctx.arg("path"))
        values: dict[str, Any] = {"nav": "tree", "path": path, "crumbs": breadcrumbs(path),
                                  "info": rev_info(ctx, commit_id), "tab": "content", "redacted": gone}  # fmt: skip
        if node is None:
            return Page("file.html", values)
        try:
            data = store.read_node(node)
        except RedactedError:
            values["redacted"] = tombstone(store, node.dek_id)
            return Page("file.html", values)
        values.update(node=node, size=len(data), image=None, lines=None)
        if node.binary:
            values["image"] = _image(data)
        else:
            lines = []
            for number, text in enumerate(lines_of(data), 1):
                shown, cut = clip(text)
                lines.append((number, show(shown), cut))
            values["lines"] = lines
        return Page("file.html", values)


@dataclass(frozen=True)
class VersionRow:
    """One version of a file as the versions page lists it."""

    seq: int
    commit: str
    time: float
    actor: str
    session: str
    command: str
    operation: str
    path: str | None
    size: int | None
    redacted: dict[str, Any] | None


class VersionsView(View):
    """``/file/versions?path=&rev=``: every version of the file's lineage, newest first."""

    path = "/file/versions"

    def get(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        commit_id = commit_of(store, ctx.arg("rev"))
        path, node, gone = node_at(ctx, commit_id, ctx.arg("path"))
        values: dict[str, Any] = {"nav": "tree", "path": path, "crumbs": breadcrumbs(path), "tab": "versions",
                                  "info": rev_info(ctx, commit_id), "redacted": gone, "rows": []}  # fmt: skip
        if node is None:
            return Page("versions.html", values)
        index = lineage(ctx)
        if isinstance(index, Page):
            return index
        records = index.versions_of(node.file_id)
        try:
            before = int(ctx.arg("before") or 1 << 62)
        except ValueError:
            raise UiError(400, "`before` must be a number.") from None
        newer = [r for r in reversed(records) if r.seq < before]
        page = newer[:VERSIONS_PAGE]
        values["rows"] = [self._row(ctx, index, r) for r in page]
        values["more"] = page[-1].seq if len(newer) > VERSIONS_PAGE else None
        values["count"] = len(records)
        return Page("versions.html", values)

    @staticmethod
    def _row(ctx: Ctx, index: LineageIndex, record: VersionRecord) -> VersionRow:
        store = ctx.store.store
        commit_id = index.commits[record.seq].commit_id
        meta = store.commit_meta(commit_id)
        redacted = None
        if record.operation != "deleted" and (record.path is None or store.keyring.is_destroyed(record.dek_id)):
            redacted = tombstone(store, record.dek_id)
        path = _API_ROOT + record.path if record.path is not None and redacted is None else None
        return VersionRow(record.seq, commit_id.decode(), meta.time, meta.actor, meta.session, meta.command,
                          record.operation, path, record.size, redacted)  # fmt: skip


class BlameView(View):
    """``/file/blame?path=&rev=``: each line of the file and the commit that last changed it."""

    path = "/file/blame"

    def get(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        commit_id = commit_of(store, ctx.arg("rev"))
        path, node, gone = node_at(ctx, commit_id, ctx.arg("path"))
        values: dict[str, Any] = {"nav": "tree", "path": path, "crumbs": breadcrumbs(path), "tab": "blame",
                                  "info": rev_info(ctx, commit_id), "redacted": gone, "lines": [], "skipped": 0,
                                  "redacted_versions": 0, "limit": BLAME_VERSIONS}  # fmt: skip
        if node is None:
            return Page("blame.html", values)
        if node.binary:
            raise UiError(422, "A binary file has no lines to blame.")
        index = lineage(ctx)
        if isinstance(index, Page):
            return index
        try:
            current = store.read_node(node)
        except RedactedError:
            values["redacted"] = tombstone(store, node.dek_id)
            return Page("blame.html", values)
        access, identity, app = ctx.store, ctx.identity, ctx.app
        at = commit_id

        def work(job: Job) -> tuple[list[BlameLine], int, int]:
            assert identity is not None
            with app.backend.open(identity, access.store_id) as opened:
                return _blame(opened.store, index, node, at, current)

        key = ("blame", access.store_id, node.dek_id, commit_id, store.head[0])
        job = app.jobs.run(key, "blaming the file", work, wait=0.15)
        if not job.done or job.error:
            return working(job)
        lines, skipped, redacted = job.result
        rows = []
        for line in lines:
            shown, cut = clip(line.text)
            rows.append((line, show(shown), cut))
        values.update(lines=rows, skipped=skipped, redacted_versions=redacted)
        return Page("blame.html", values)


def _blame(store: MemoryStore, index: LineageIndex, node: Node, at: bytes, current: bytes) -> tuple[
        list[BlameLine], int, int]:  # fmt: skip
    """Blame ``node`` (the file at commit ``at``, whose content is ``current``) over the newest
    :data:`BLAME_VERSIONS` versions of its lineage since it was last created: its lines, how many
    older versions were left out, how many redacted versions could not be read."""
    at_seq = store.commit_meta(at).seq
    life: list[VersionRecord] = []
    for record in reversed(index.versions_of(node.file_id)):
        if record.seq > at_seq:
            continue
        if record.operation == "deleted":
            break
        life.append(record)
        if record.operation == "created":
            break
    life.reverse()
    skipped = max(0, len(life) - BLAME_VERSIONS)
    versions = []
    redacted = 0
    for record in life[skipped:]:
        cid = index.commits[record.seq].commit_id
        version = _content(store, cid, record.token)
        if version is None or version.redacted or store.keyring.is_destroyed(record.dek_id):
            redacted += 1
            continue
        try:
            data = store.read_node(version)
        except RedactedError:
            redacted += 1
            continue
        versions.append((cid.decode(), store.commit_meta(cid), data))
    if not versions or versions[-1][2] != current:
        versions.append((at.decode(), store.commit_meta(at), current))
    return attribute_lines(versions), skipped, redacted


VIEWS: tuple[type[View], ...] = (FileView, VersionsView, BlameView)
