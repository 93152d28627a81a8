"""Revert a commit, restore a file or directory: a preview of the changes (the library's dry run)
first, then the confirmed run, which makes exactly the previewed changes or nothing."""

from __future__ import annotations

import time
from typing import Any

from ...edits.undo import UndoResult, restore, revert
from ...store import MemoryStore
from ..jobs import Job
from ..sessions import Plan, new_secret
from .base import Ctx, Page, Reply, UiError, View, commit_of, done
from .file import working

__all__ = ["RevertView", "RestoreView", "VIEWS"]


def _run(store: MemoryStore, target: dict[str, str], **options: Any) -> UndoResult:
    commit_id = target["commit"].encode("ascii")
    if target["command"] == "revert":
        return revert(store, commit_id, **options)
    return restore(store, target["path"], commit_id, **options)


def _preview(ctx: Ctx, target: dict[str, str]) -> Reply:
    """Make the plan and show its preview (or the job still computing it)."""
    assert ctx.session is not None and ctx.identity is not None
    plan = Plan(new_secret()[:32], target["command"], target, time.time(), ctx.store.store_id)
    access, identity, app = ctx.store, ctx.identity, ctx.app

    def work(job: Job) -> UndoResult:
        with app.backend.open(identity, access.store_id) as opened:
            return _run(opened.store, target, actor=access.actor, dry_run=True)

    key = ("undo", access.store_id, target["command"], target["commit"], target["path"], access.store.head[0])
    plan.job = app.jobs.run(key, f"previewing the {target['command']}", work, wait=0.15)
    ctx.session.add_plan(plan)
    return _show(plan)


def _show(plan: Plan) -> Reply:
    job: Job = plan.job
    if not job.done:
        return working(job)
    return Page("undo.html", {"nav": "history", "plan": plan, "preview": job.result, "error": job.error},
                status=409 if job.error else 200)  # fmt: skip


def _confirm(ctx: Ctx, command: str) -> Reply:
    assert ctx.session is not None
    plan = ctx.session.plan(ctx.form.get("plan", ""), command, ctx.store.store_id)
    if plan is None:
        raise UiError(409, f"This {command} preview expired or was used; nothing was changed. Preview it again.")
    job: Job = plan.job
    if not job.done or job.error:
        raise UiError(409, f"The {command} preview has no result to confirm; nothing was changed.")
    store = ctx.store.store
    assert isinstance(store, MemoryStore)
    ctx.session.plans.pop(plan.id, None)
    result = _run(store, plan.target, actor=ctx.store.actor, expect=job.result)
    what = "Restored" if command == "restore" else "Reverted"
    return done(ctx, "history", what, result.commit_id, list(result.paths), detail=result.note)


class RevertView(View):
    """``/revert/<commit>``: GET the preview, POST the revert."""

    path = "/revert/{commit}"
    writes = True

    def get(self, ctx: Ctx) -> Reply:
        commit_id = commit_of(ctx.store.store, ctx.params.get("commit", ""))
        return _preview(ctx, {"command": "revert", "commit": commit_id.decode(), "path": ""})

    def post(self, ctx: Ctx) -> Reply:
        return _confirm(ctx, "revert")


class RestoreView(View):
    """``/restore?path=&rev=``: GET the preview, POST the restore."""

    path = "/restore"
    writes = True

    def get(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        if not ctx.arg("path") or not ctx.arg("rev"):
            raise UiError(400, "Restore needs a path and the revision to restore it from.")
        commit_id = commit_of(store, ctx.arg("rev"))
        return _preview(ctx, {"command": "restore", "commit": commit_id.decode(), "path": ctx.arg("path")})

    def post(self, ctx: Ctx) -> Reply:
        return _confirm(ctx, "restore")


VIEWS: tuple[type[View], ...] = (RevertView, RestoreView)
