"""A commit: its metadata, what it changed, and its decrypted diff against its parent (side by side
or unified, words changed in a line marked). A commit that changed many files lists them, each
with its own diff page; huge files are cut with a notice (:mod:`memvault.ui.textview`)."""

from __future__ import annotations

from ...history import changes, commit_diff
from ..textview import diff_view
from .base import Ctx, Page, Reply, View, commit_of

__all__ = ["CommitView", "VIEWS", "MAX_FILES"]

#: Files diffed on one page; a commit that changed more lists them with a link to each diff.
MAX_FILES = 100


class CommitView(View):
    """``/commit/<id>?mode=split|unified&path=``."""

    path = "/commit/{commit}"

    def get(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        commit_id = commit_of(store, ctx.params.get("commit", ""))
        meta, _tree, parent = store.commit(commit_id)
        changed = changes(store, commit_id)
        mode = "unified" if ctx.arg("mode") == "unified" else "split"
        only = ctx.arg("path") or None
        files = [c for c in changed if c.kind == "file" and c.redacted is None]
        diffs = None
        if only is not None or len(files) <= MAX_FILES:
            diffs = [diff_view(d) for d in commit_diff(store, commit_id, only)]
        return Page("commit.html", {
            "nav": "history", "commit": commit_id.decode(), "meta": meta, "changes": changed,
            "parent": parent.decode() if parent is not None else None, "diffs": diffs, "mode": mode, "only": only,
            "files": files, "at_head": commit_id == store.head[0],
        })  # fmt: skip


VIEWS: tuple[type[View], ...] = (CommitView,)
