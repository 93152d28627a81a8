"""Redaction (crypto-shredding, :mod:`memvault.erasure.redact`): choose what to erase, see the dry run's
list of what would be destroyed, type the word shown, then the keys are destroyed.

The dry run runs as a job and is kept in the session as a plan; the confirmed run hands it to
the library as ``expect``, so it destroys exactly the versions listed, or nothing (the history
changed between: ConflictError). A text to match is kept in the plan only, never in a URL.
"""

from __future__ import annotations

import time
from typing import Any

from ...erasure.redact import ShredResult, shred_file, shred_matching, shred_version
from ...store import MemoryStore
from ..jobs import Job
from ..sessions import Plan, new_secret, same
from .base import Ctx, Page, Redirect, Reply, UiError, View, commit_of, done
from .file import node_at, working

__all__ = ["RedactForm", "RedactPlanView", "VIEWS", "SCOPES"]

SCOPES = ("version", "file", "matching")
_MAX_REASON = 1000


def _shred(store: MemoryStore, target: dict[str, str], *, actor: str, **options: Any) -> ShredResult:
    scope = target["scope"]
    common: dict[str, Any] = {"actor": actor, "reason": target["reason"], **options}
    if scope == "version":
        return shred_version(store, target["path"], target["rev"], **common)
    if scope == "file":
        return shred_file(store, target["path"], **common)
    return shred_matching(store, target["text"], **common)


class RedactForm(View):
    """``/redact``: GET the choice (a version, every version of a file, every version holding a
    text), POST it to plan the dry run."""

    path = "/redact"
    writes = True

    def get(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        path = ctx.arg("path")
        values: dict[str, Any] = {
            "nav": "redact",
            "path": path,
            "rev": "",
            "scope": ctx.arg("scope") or "version",
            "node": None,
            "seq": None,
        }
        if path:
            commit_id = commit_of(store, ctx.arg("rev"))
            values["path"], node, _gone = node_at(ctx, commit_id, path)
            values["rev"] = commit_id.decode()
            values["seq"] = store.commit_meta(commit_id).seq
            values["node"] = node
        return Page("redact.html", values)

    def post(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        assert isinstance(store, MemoryStore) and ctx.session is not None and ctx.identity is not None
        form = ctx.form
        scope = form.get("scope", "")
        if scope not in SCOPES:
            raise UiError(400, "Choose what to redact: a version, a file, or every version holding a text.")
        reason = form.get("reason", "").strip()
        if len(reason) > _MAX_REASON:
            raise UiError(400, f"The reason is limited to {_MAX_REASON} characters.")
        target = {"scope": scope, "reason": reason or "review UI", "path": "", "rev": "", "text": ""}
        if scope == "matching":
            target["text"] = form.get("text", "")
            if len(target["text"]) < 4:
                raise UiError(400, "Give at least 4 characters to match, so a redaction is not accidental.")
        else:
            commit_id = commit_of(store, form.get("rev", ""))
            target["path"], _node, _gone = node_at(ctx, commit_id, form.get("path", ""))
            target["rev"] = commit_id.decode()
        plan = Plan(new_secret()[:32], "redact", target, time.time(), ctx.store.store_id,
                    word="redact-" + new_secret()[:4])  # fmt: skip
        access, identity, app = ctx.store, ctx.identity, ctx.app

        def dry_run(job: Job) -> ShredResult:
            with app.backend.open(identity, access.store_id) as opened:
                return _shred(opened.store, target, actor=access.actor, dry_run=True)

        plan.job = app.jobs.run(("redact", plan.id), "planning the redaction (dry run)", dry_run)
        ctx.session.add_plan(plan)
        return Redirect(ctx.links.redaction(plan.id))


class RedactPlanView(View):
    """``/redact/<plan>``: GET the dry run's list and the word to type, POST the redaction."""

    path = "/redact/{plan}"
    writes = True

    def _plan(self, ctx: Ctx, plan_id: str) -> Plan:
        assert ctx.session is not None
        plan = ctx.session.plan(plan_id, "redact", ctx.store.store_id)
        if plan is None:
            raise UiError(404, "This redaction plan expired or was used; nothing was redacted. Plan it again.")
        return plan

    def get(self, ctx: Ctx) -> Reply:
        plan = self._plan(ctx, ctx.params.get("plan", ""))
        job: Job = plan.job
        if not job.done or job.error:
            return working(job)
        return Page("redact_plan.html", {"nav": "redact", "plan": plan, "dry": job.result, "mistyped": False})

    def post(self, ctx: Ctx) -> Reply:
        assert ctx.session is not None
        plan = self._plan(ctx, ctx.params.get("plan", ""))
        job: Job = plan.job
        if not job.done or job.error:
            raise UiError(409, "The dry run has not finished; nothing was redacted.")
        dry: ShredResult = job.result
        if not same(ctx.form.get("word", "").strip(), plan.word):
            return Page("redact_plan.html", {"nav": "redact", "plan": plan, "dry": dry, "mistyped": True}, status=400)
        store = ctx.store.store
        assert isinstance(store, MemoryStore)
        ctx.session.plans.pop(plan.id, None)  # one use, whatever happens next
        result = _shred(store, plan.target, actor=ctx.store.actor, expect=dry)
        detail = f"{result.data_keys} data key(s) destroyed; {len(result.versions)} version(s) are gone for good."
        return done(
            ctx,
            "redact",
            "Redacted",
            result.commit_id,
            list(result.removed_from_head),
            detail=detail,
            remaining=result.remaining_copies,
        )


VIEWS: tuple[type[View], ...] = (RedactForm, RedactPlanView)
