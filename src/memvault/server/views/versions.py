"""``/v1/memory_stores/{id}/memory_versions``: list (newest first, filtered), retrieve and redact
(admin keys only: crypto-shredding of one version) memory versions."""

from __future__ import annotations

from typing import Any

from ...memories.model import VIA_API
from .base import ApiView, Call
from .memories import live_store

__all__ = ["VersionsView", "VersionView", "RedactView"]

_FILTERS = ("memory_id", "operation", "session_id", "api_key_id", "service_account_id")


class VersionsView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}/memory_versions"

    def get(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=False)
        view = call.view("basic")
        limit = call.limit(view)
        filters: dict[str, Any] = {name: call.query.get(name) for name in _FILTERS}
        filters["created_at_gte"] = call.time("created_at[gte]")
        filters["created_at_lte"] = call.time("created_at[lte]")
        with self.app.root.memories(store_id, call.registry) as memories:
            page = memories.versions(limit=limit, view=view, page=call.query.get("page"), **filters)
        return 200, {"data": [v.to_json() for v in page.data], "next_page": page.next_page}


class VersionView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}"

    def get(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=False)
        view = call.view("full")
        with self.app.root.memories(store_id, call.registry) as memories:
            version = memories.version(call.params["memory_version_id"], view=view)
        return 200, version.to_json()


class RedactView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact"

    def post(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=False)
        call.require_admin()
        call.fields(set())
        with self.app.root.memories(store_id, call.registry) as memories:
            version = memories.redact(call.params["memory_version_id"], actor=call.key.id, via=VIA_API)
        self.app.metrics.commit("version-redact")
        return 200, version.to_json()
