"""The file tree at any revision, one directory at a time (a redacted file shows who redacted it
and when, never its name or content)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...paths import ROOT, parse_path
from .base import Ctx, Page, Redirect, Reply, UiError, View, commit_of

if TYPE_CHECKING:
    from ...store import AnyBranch

__all__ = ["TreeView", "StoreHome", "VIEWS", "Entry", "breadcrumbs", "rev_info", "tombstone"]

#: Entries of a directory shown per page.
PAGE = 500


@dataclass(frozen=True)
class Entry:
    """One entry of a directory listing."""

    name: str
    path: str
    kind: str
    size: int
    version: int
    mtime: float
    redacted: dict[str, Any] | None = None


def breadcrumbs(path: str) -> list[tuple[str, str]]:
    """``(name, path)`` of each directory from ``/memories`` down to ``path``."""
    parts = path[len(ROOT) :].strip("/").split("/") if path != ROOT else []
    out = [("memories", ROOT)]
    for i, part in enumerate(parts):
        out.append((part, ROOT + "/" + "/".join(parts[: i + 1])))
    return out


def tombstone(store: AnyBranch, dek_id: bytes) -> dict[str, Any]:
    """Who redacted a version, when and why (what the keyring's tombstone keeps)."""
    info = store.keyring.tombstone(dek_id) or {}
    return {"time": info.get("time"), "actor": info.get("actor", ""), "reason": info.get("reason", "")}


def rev_info(ctx: Ctx, commit_id: bytes) -> dict[str, Any]:
    """What every page at a revision shows of it: its id, number, whether it is the head, and
    the ``rev`` its links carry (None at the head: links follow the head)."""
    store = ctx.store.store
    meta = store.commit_meta(commit_id)
    follows_head = not ctx.arg("rev")
    return {"commit": commit_id.decode(), "seq": meta.seq, "time": meta.time, "at_head": commit_id == store.head[0],
            "rev": None if follows_head else commit_id.decode()}  # fmt: skip


class StoreHome(View):
    """A store's ``/`` under ``serve``: its tree."""

    path = "/"

    def get(self, ctx: Ctx) -> Reply:
        return Redirect(ctx.links.tree())


class TreeView(View):
    """``/tree?rev=&path=``: a directory at a revision (default: ``/memories`` at the head)."""

    path = "/tree"

    def get(self, ctx: Ctx) -> Reply:
        access = ctx.store
        store = access.store
        commit_id = commit_of(store, ctx.arg("rev"))
        path = parse_path(ctx.arg("path") or ROOT, store.settings).text
        state = ctx.app.state_at(access, commit_id)
        info = rev_info(ctx, commit_id)
        if path != ROOT:
            node = state.nodes.get(path)
            if node is None:
                raise UiError(404, "No such directory at this revision.")
            if not node.is_dir:
                return Redirect(ctx.links.file(path, info["rev"]))
        names = sorted(state.children.get(path, {}).values())
        entries: list[Entry] = []
        for name in names:
            child = f"{path}/{name}"
            node = state.nodes.get(child)
            if node is None:
                continue
            if node.redacted:
                entries.append(Entry("", "", "redacted", 0, 0, 0.0, tombstone(store, node.dek_id)))
            else:
                entries.append(Entry(name, child, node.kind, node.size, node.version, node.mtime))
        entries.sort(key=lambda e: (e.kind != "dir", e.kind == "redacted", e.name))
        try:
            start = max(0, int(ctx.arg("from", "0")))
        except ValueError:
            raise UiError(400, "`from` must be a number.") from None
        shown = entries[start : start + PAGE]
        return Page("tree.html", {
            "nav": "tree", "path": path, "crumbs": breadcrumbs(path), "entries": shown, "total": len(entries),
            "start": start, "next": start + PAGE if start + PAGE < len(entries) else None, "page": PAGE,
            "info": info, "files": state.file_count, "bytes": state.total_bytes,
        })  # fmt: skip


VIEWS: tuple[type[View], ...] = (StoreHome, TreeView)
