"""``/v1/memory_stores``: create, list, retrieve, update, archive and delete memory stores.

Any key lists and retrieves the stores it may use; creating, changing, archiving and deleting
need an admin key. An archived store refuses an update (400) and stays readable.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from typing import Any

from ...memories.model import micros
from ..catalog import StoreRecord, check_description, check_name, merge_metadata
from ..errors import bad_request
from .base import ApiView, Call

__all__ = ["StoresView", "StoreView", "ArchiveView"]


class StoresView(ApiView):
    route = "/v1/memory_stores"

    def post(self, call: Call) -> tuple[int, Any]:
        call.require_admin()
        body = call.fields({"name", "description", "metadata"}, {"name"})
        record = self.app.root.create_store(
            check_name(body["name"]),
            description=check_description(body.get("description") or ""),
            metadata=merge_metadata({}, body.get("metadata") or {}),
            actor=call.key.id,
        )
        call.store_id = record.id
        self.app.metrics.commit("store-create")
        return 200, record.to_json()

    def get(self, call: Call) -> tuple[int, Any]:
        call.confirm()  # a listing shows the catalog's head
        gte, lte = call.time("created_at[gte]"), call.time("created_at[lte]")
        archived = call.flag("include_archived")
        limit = call.limit("basic")
        query = {"list": "stores", "gte": gte, "lte": lte, "archived": archived, "key": call.key.id}
        after = self.app.store_cursors.open(call.query["page"], query) if "page" in call.query else None
        position = None if after is None else (float(after[0]), str(after[1]))
        ordered = call.registry.live_after(position)  # oldest first: past `lte`, nothing more matches
        in_window = itertools.takewhile(lambda s: lte is None or micros(s.created_at) <= lte, ordered)
        records = (
            s for s in in_window
            if call.key.may_use(s.id) and (archived or s.archived_at is None)
            and (gte is None or micros(s.created_at) >= gte)
        )  # fmt: skip
        page = list(itertools.islice(records, limit + 1))  # one more: whether a next page exists
        page, more = page[:limit], len(page) > limit
        cursor = self.app.store_cursors.seal(query, [page[-1].created_at, page[-1].id]) if more else None
        return 200, {"data": [s.to_json() for s in page], "next_page": cursor}


class StoreView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}"

    def _record(self, call: Call) -> StoreRecord:
        call.confirm()  # the store as the catalog's head holds it
        store_id = call.params["memory_store_id"]
        call.require_store(store_id)
        return self.app.root.store(store_id, call.registry)

    def get(self, call: Call) -> tuple[int, Any]:
        return 200, self._record(call).to_json()

    def post(self, call: Call) -> tuple[int, Any]:
        record = self._record(call)
        call.require_admin()
        body = call.fields({"name", "description", "metadata"})
        name = check_name(body["name"]) if body.get("name") is not None else None
        description = check_description(body["description"]) if body.get("description") is not None else None
        patch = body.get("metadata")

        def change(current: StoreRecord) -> StoreRecord:
            if current.archived_at is not None:
                raise bad_request("This memory store is archived; it cannot be updated.")
            changed = replace(
                current,
                name=name if name is not None else current.name,
                description=description if description is not None else current.description,
                metadata=merge_metadata(current.metadata, patch) if patch is not None else current.metadata,
            )
            return current if changed == current else replace(changed, updated_at=time.time())

        updated = self.app.root.change_store(record.id, change, actor=call.key.id)
        self.app.metrics.commit("store-update")
        return 200, updated.to_json()

    def delete(self, call: Call) -> tuple[int, Any]:
        record = self._record(call)
        call.require_admin()
        self.app.root.delete_store(record.id, actor=call.key.id)
        self.app.metrics.commit("store-delete")
        return 200, {"id": record.id, "type": "memory_store_deleted"}


class ArchiveView(ApiView):
    route = "/v1/memory_stores/{memory_store_id}/archive"

    def post(self, call: Call) -> tuple[int, Any]:
        store_id = call.params["memory_store_id"]
        call.confirm()
        call.require_store(store_id)
        self.app.root.store(store_id, call.registry)
        call.require_admin()
        call.fields(set())

        def archive(current: StoreRecord) -> StoreRecord:
            if current.archived_at is not None:
                return current  # archiving is idempotent
            now = time.time()
            return replace(current, archived_at=now, updated_at=now)

        archived = self.app.root.change_store(store_id, archive, actor=call.key.id, command="store-archive")
        self.app.metrics.commit("store-archive")
        return 200, archived.to_json()
