"""History: commits newest first with actor, session, command, paths and time, filtered by each,
paged from a commit id (:func:`memvault.history.log_page`), never by an offset from the head. A
rare filter looks at a bounded number of commits per request and offers to continue."""

from __future__ import annotations

import re
from typing import Any

from ...errors import InvalidInputError
from ...history import OPERATIONS, log_page, parse_time
from ...paths import parse_path
from .base import Ctx, Page, Reply, UiError, View, commit_of

__all__ = ["HistoryView", "VIEWS", "PAGE", "SCAN_META", "SCAN_CHANGES"]

#: Commits per page.
PAGE = 50
#: Commits looked at per request with filters on a commit's metadata only (actor, session,
#: command, time), and with filters on what it changed (path, operation: its shards are read).
SCAN_META = 2000
SCAN_CHANGES = 250
_FULL_ID = re.compile(r"[0-9a-f]{40}")
_FILTERS = ("actor", "session", "command", "path", "op", "since", "until")


def _time(ctx: Ctx, name: str, *, end: bool) -> float | None:
    text = ctx.arg(name).strip()
    if not text:
        return None
    try:
        return parse_time(text.replace("T", " ") if len(text) == 16 else text, end=end)
    except InvalidInputError:
        raise UiError(400, f"`{name}` must be a date or time such as 2026-11-01 or 2026-11-01 14:30.") from None


class HistoryView(View):
    """``/history``: a page of the log, filtered."""

    path = "/history"

    def get(self, ctx: Ctx) -> Reply:
        store = ctx.store.store
        filters = {name: ctx.arg(name).strip() for name in _FILTERS}
        kwargs: dict[str, Any] = {}
        for name in ("actor", "session", "command"):
            if filters[name]:
                kwargs[name] = filters[name]
        op = filters["op"]
        if op:
            if op not in OPERATIONS:
                raise UiError(400, f"`op` must be one of {', '.join(OPERATIONS)}.")
            kwargs["operations"] = (op,)
        since, until = _time(ctx, "since", end=False), _time(ctx, "until", end=True)
        if since is not None:
            kwargs["since"] = since
        if until is not None:
            kwargs["until"] = until
        path = parse_path(filters["path"], store.settings).text if filters["path"] else None
        followed = ctx.arg("at") or path
        if followed and path:
            followed = parse_path(followed, store.settings).text
        start_text = ctx.arg("start")
        if start_text and not _FULL_ID.fullmatch(start_text):
            raise UiError(400, "`start` must be a full commit id.")
        start = commit_of(store, start_text) if start_text else store.head[0]
        scan = None
        if path or op:
            scan = SCAN_CHANGES
        elif kwargs:
            scan = SCAN_META
        page = log_page(store, start=start, limit=PAGE, scan=scan, path=followed, **kwargs)
        given = {k: v for k, v in filters.items() if v}
        more = None
        if page.next_start is not None:
            more = ctx.links.history(**given, start=page.next_start,
                                     at=page.next_path if path and page.next_path != path else None)  # fmt: skip
        return Page("history.html", {
            "nav": "history", "rows": page.commits, "filters": filters, "more": more, "scanned": page.scanned,
            "bounded": scan is not None and page.scanned >= scan, "from_head": not start_text,
            "operations": OPERATIONS, "start_seq": store.commit_meta(start).seq,
            "newest": ctx.links.history(**given),
        })  # fmt: skip


VIEWS: tuple[type[View], ...] = (HistoryView,)
