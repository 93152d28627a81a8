"""``/v1/memory_stores/{id}/memories``: create, list, retrieve, update (POST or PATCH) and delete
memories, over :class:`memvault.memories.Memories`. Writes by an API key are versions whose actor
is the key's id; an archived store refuses creates and updates (400) and allows deletes."""

from __future__ import annotations

from typing import Any

from ...memories.model import VIA_API
from ..errors import bad_request
from .base import ApiView, Call

__all__ = ["MemoriesView", "MemoryView", "live_store"]


def live_store(view: ApiView, call: Call, *, writing: bool) -> str:
    """The store id of the call, checked: the key may use it, it exists and, when ``writing``,
    it is not archived."""
    store_id = call.params["memory_store_id"]
    call.writing = writing
    if call.pending is not None and (not call.key.may_use(store_id) or store_id not in call.registry.stores):
        call.confirm()  # the last read of the catalog may not know the store yet: read its head first
    call.require_store(store_id)
    record = view.app.root.store(store_id, call.registry)
    if writing and record.archived_at is not None:
        raise bad_request("This memory store is archived; its memories cannot be created or updated.")
    return store_id


class MemoriesView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}/memories"

    def post(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=True)
        body = call.fields({"path", "content"}, {"path"})
        view = call.view("basic")
        with self.app.root.memories(store_id, call.registry) as memories:
            memory = memories.create(body["path"], body.get("content"), actor=call.key.id, via=VIA_API, view=view,
                                     check=call.confirm)  # fmt: skip
        self.app.metrics.commit("memory-create")
        return 200, memory.to_json()

    def get(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=False)
        view = call.view("basic")
        limit = call.limit(view)
        raw_depth = call.query.get("depth", "0")
        if not raw_depth.isdigit() or int(raw_depth) > 1000:
            raise bad_request("`depth` must be an integer of at least 0.")
        with self.app.root.memories(store_id, call.registry) as memories:
            page = memories.list(path_prefix=call.query.get("path_prefix", "/"), depth=int(raw_depth), limit=limit,
                                 view=view, page=call.query.get("page"))  # fmt: skip
        return 200, {"data": [item.to_json() for item in page.data], "next_page": page.next_page}


class MemoryView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}/memories/{memory_id}"

    def get(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=False)
        view = call.view("full")
        with self.app.root.memories(store_id, call.registry) as memories:
            memory = memories.retrieve(call.params["memory_id"], view=view)
        return 200, memory.to_json()

    def post(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=True)
        body = call.fields({"content", "path", "precondition"})
        view = call.view("basic")
        expected = None
        precondition = body.get("precondition")
        if precondition is not None:
            if (
                not isinstance(precondition, dict)
                or precondition.get("type") != "content_sha256"
                or set(precondition) != {"type", "content_sha256"}
            ):
                raise bad_request('`precondition` must be {"type": "content_sha256", "content_sha256": <hex>}.')
            expected = precondition["content_sha256"]
        with self.app.root.memories(store_id, call.registry) as memories:
            memory = memories.update(
                call.params["memory_id"], content=body.get("content"), path=body.get("path"),
                expected_sha256=expected, actor=call.key.id, via=VIA_API, view=view, check=call.confirm,
            )  # fmt: skip
        self.app.metrics.commit("memory-update")
        return 200, memory.to_json()

    def delete(self, call: Call) -> tuple[int, Any]:
        store_id = live_store(self, call, writing=False)
        memory_id = call.params["memory_id"]
        with self.app.root.memories(store_id, call.registry) as memories:
            memories.delete(memory_id, expected_sha256=call.query.get("expected_content_sha256"), actor=call.key.id,
                            via=VIA_API, check=call.confirm)  # fmt: skip
        self.app.metrics.commit("memory-delete")
        return 200, {"id": memory_id, "type": "memory_deleted"}
