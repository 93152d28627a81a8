"""``verify`` and ``audit`` results with links to the files and commits they name.

Both run as jobs: ``audit`` of the head starts when the page is shown (its result is kept for
that head), ``verify`` (the whole store, every version) when asked for with the button."""

from __future__ import annotations

from typing import Any

from ...admin.audit import audit
from ...verify import verify
from ..jobs import Job
from .base import Ctx, Page, Redirect, Reply, UiError, View

__all__ = ["ChecksView", "VIEWS", "SHOWN"]

#: Findings or problems listed per check (a store without an index has one orphan per file).
SHOWN = 500


def _start(ctx: Ctx, kind: str, head: bytes, *, wait: float) -> Job:
    access, identity, app = ctx.store, ctx.identity, ctx.app
    assert identity is not None

    def work(job: Job) -> Any:
        with app.backend.open(identity, access.store_id) as opened:
            if kind == "audit":
                return audit(opened.store, at=head)

            def progress(done: int, total: int) -> None:
                job.progress = (done, total)

            return verify(opened.store, progress=progress)

    label = "verifying the store" if kind == "verify" else "auditing the memory"
    key = ("audit", access.store_id, head) if kind == "audit" else ("verify", access.store_id)
    return app.jobs.run(key, label, work, wait=wait)


class ChecksView(View):
    """``/checks``: the last verify and the audit of the head; POST ``action=verify|audit`` runs one."""

    path = "/checks"

    def get(self, ctx: Ctx) -> Reply:
        access = ctx.store
        head = access.store.head[0]
        audit_job = _start(ctx, "audit", head, wait=0.15)
        verify_job = ctx.app.jobs.get(("verify", access.store_id))
        running = not audit_job.done or (verify_job is not None and not verify_job.done)
        values = {"nav": "checks", "audit": audit_job, "verify": verify_job, "head": head.decode(), "shown": SHOWN}
        return Page("checks.html", values, refresh=1 if running else None)

    def post(self, ctx: Ctx) -> Reply:
        action = ctx.form.get("action", "")
        if action not in ("verify", "audit"):
            raise UiError(400, "Unknown check.")
        access = ctx.store
        head = access.store.head[0]
        key = ("verify", access.store_id) if action == "verify" else ("audit", access.store_id, head)
        job = ctx.app.jobs.get(key)
        if job is None or job.done:
            ctx.app.jobs.forget(key)
            _start(ctx, action, head, wait=0.0)
        return Redirect(ctx.links.checks())


VIEWS: tuple[type[View], ...] = (ChecksView,)
