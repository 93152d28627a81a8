"""A commit: its metadata, what it changed, and its decrypted diff against its parent (side by side
or unified, words changed in a line marked). A commit that changed many files lists them, each
with its own diff page; huge files are cut with a notice (:mod:`memvault.ui.textview`)."""

from __future__ import annotations

from ...history import changes, commit_diff
from ..textview import diff_view
from .base import Ctx, Page, Reply, UiError, View, commit_of

__all__ = ["CommitView", "VIEWS", "MAX_FILES", "CHANGES_PAGE"]

#: Files diffed on one page; a commit that changed more lists them with a link to each diff.
MAX_FILES = 100
#: Changes listed per page.
CHANGES_PAGE = 500


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
        try:
            start = max(0, int(ctx.arg("from", "0")))
        except ValueError:
            raise UiError(400, "`from` must be a number.") from None
        shown = changed[start : start + CHANGES_PAGE]
        more = start + CHANGES_PAGE if start + CHANGES_PAGE < len(changed) else None
        return Page("commit.html", {
            "nav": "history", "commit": commit_id.decode(), "meta": meta, "changes": shown, "more": more,
            "total": len(changed), "start": start,
            "parent": parent.decode() if parent is not None else None, "diffs": diffs, "mode": mode, "only": only,
            "files": files, "at_head": commit_id == store.head[0],
        })  # fmt: skip


VIEWS: tuple[type[View], ...] = (CommitView,)
