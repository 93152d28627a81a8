"""Dreams: the dream branches, one dream's diff against its fork point with its flagged changes
(deletions first) and its audit before and after, and its merge or discard.

Merging is one commit on ``main`` of the reviewed branch head only (``expect_head``); discarding
destroys the data keys of every version the dream wrote (crypto-shredding), after the operator
types the word shown. Both need a session that may write and a CSRF token; both are attributed
to the session's actor.
"""

from __future__ import annotations

import time

from ...dream.review import (
    DreamConflictError,
    DreamDiff,
    discard_dream,
    dream_diff,
    list_dreams,
    merge_dream,
    open_dream,
)
from ...store import MemoryStore
from ..jobs import Job
from ..sessions import Plan, new_secret, same
from ..textview import diff_view
from .base import Ctx, Page, Reply, UiError, View, done
from .file import working

__all__ = ["DreamsView", "DreamView", "MergeView", "DiscardView", "VIEWS"]

_ORDER = {"deleted": 0, "rewritten": 1, "renamed": 2, "": 3}


def _main(ctx: Ctx) -> MemoryStore:
    store = ctx.store.store
    if not isinstance(store, MemoryStore):  # pragma: no cover - backends open main
        raise UiError(404, "No dreams here.")
    return store


def review(ctx: Ctx, dream_id: str) -> Job:
    """The job computing the dream's review (kept for this dream head and this head of main)."""
    store = _main(ctx)
    branch = open_dream(store, dream_id)
    key = ("dream", ctx.store.store_id, branch.name, branch.head[0], store.head[0])
    access, identity, app = ctx.store, ctx.identity, ctx.app
    assert identity is not None

    def work(job: Job) -> DreamDiff:
        with app.backend.open(identity, access.store_id) as opened:
            return dream_diff(opened.store, dream_id)

    return app.jobs.run(key, "reviewing the dream", work, wait=0.15)


class DreamsView(View):
    """``/dreams``: every dream branch, oldest first."""

    path = "/dreams"

    def get(self, ctx: Ctx) -> Reply:
        return Page("dreams.html", {"nav": "dreams", "dreams": list_dreams(_main(ctx))})


class DreamView(View):
    """``/dreams/<id>``: the dream's diff, flags first, and its audit before and after."""

    path = "/dreams/{dream}"

    def get(self, ctx: Ctx) -> Reply:
        job = review(ctx, ctx.params.get("dream", ""))
        if not job.done or job.error:
            return working(job)
        result: DreamDiff = job.result
        files = sorted(result.files, key=lambda f: (_ORDER.get(result.flags.get(f.path, ""), 3), f.path))
        views = [(diff_view(f), result.flags.get(f.path, "")) for f in files]
        before = {(f.kind, f.path) for f in result.audit_before.findings}
        new_findings = [f for f in result.audit_after.findings if (f.kind, f.path) not in before]
        mode = "unified" if ctx.arg("mode") == "unified" else "split"
        return Page("dream.html", {"nav": "dreams", "review": result, "views": views, "mode": mode,
                                   "new_findings": new_findings})  # fmt: skip


class MergeView(View):
    """``/dreams/<id>/merge``: GET the confirmation, POST the merge of the reviewed head."""

    path = "/dreams/{dream}/merge"
    writes = True

    def get(self, ctx: Ctx) -> Reply:
        job = review(ctx, ctx.params.get("dream", ""))
        if not job.done or job.error:
            return working(job)
        return Page("dream_merge.html", {"nav": "dreams", "review": job.result})

    def post(self, ctx: Ctx) -> Reply:
        dream_id = ctx.params.get("dream", "")
        try:
            result = merge_dream(_main(ctx), dream_id, actor=ctx.store.actor, expect_head=ctx.form.get("head", ""))
        except DreamConflictError as err:
            return Page("dream_conflict.html", {"nav": "dreams", "message": str(err).removeprefix("Error: "),
                                                "paths": [c.path for c in err.conflicts], "dream": dream_id},
                        status=409)  # fmt: skip
        return done(ctx, "dreams", f"Merged dream {result.dream_id}", result.commit, result.changed)


class DiscardView(View):
    """``/dreams/<id>/discard``: GET the confirmation (what is destroyed, the word to type), POST
    the discard."""

    path = "/dreams/{dream}/discard"
    writes = True

    def get(self, ctx: Ctx) -> Reply:
        dream_id = ctx.params.get("dream", "")
        job = review(ctx, dream_id)
        if not job.done or job.error:
            return working(job)
        result: DreamDiff = job.result
        assert ctx.session is not None
        plan = Plan(new_secret()[:32], "discard", {"dream": result.info.id, "head": result.info.head},
                    time.time(), ctx.store.store_id, word="discard-" + new_secret()[:4])  # fmt: skip
        ctx.session.add_plan(plan)
        return Page("dream_discard.html", {"nav": "dreams", "review": result, "plan": plan, "mistyped": False})

    def post(self, ctx: Ctx) -> Reply:
        assert ctx.session is not None
        plan = ctx.session.plan(ctx.form.get("plan", ""), "discard", ctx.store.store_id)
        dream_id = ctx.params.get("dream", "")
        if plan is None or plan.target["dream"] != dream_id.removeprefix("dream/"):
            raise UiError(409, "This confirmation expired or is not for this dream; nothing was discarded. "
                          "Review the dream again.")  # fmt: skip
        if not same(ctx.form.get("word", "").strip(), plan.word):
            return _retype(ctx, plan, dream_id)
        store = _main(ctx)
        if open_dream(store, dream_id).head[0].decode() != plan.target["head"]:
            raise UiError(409, "The dream changed since it was reviewed; nothing was discarded. Review it again.")
        result = discard_dream(store, dream_id, actor=ctx.store.actor)
        ctx.session.plans.pop(plan.id, None)
        return done(
            ctx,
            "dreams",
            f"Discarded dream {result.dream_id}",
            result.commit or None,
            [],
            detail=f"{result.keys_destroyed} data key(s) destroyed.",
        )


def _retype(ctx: Ctx, plan: Plan, dream_id: str) -> Reply:
    job = review(ctx, dream_id)
    if not job.done or job.error:
        return working(job)
    return Page("dream_discard.html", {"nav": "dreams", "review": job.result, "plan": plan, "mistyped": True},
                status=400)  # fmt: skip


VIEWS: tuple[type[View], ...] = (DreamsView, DreamView, MergeView, DiscardView)
