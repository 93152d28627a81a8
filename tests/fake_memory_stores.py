"""A small fake of a managed memory-stores API (``/v1/memory_stores...``), served over real HTTP on
127.0.0.1 in a background thread, for the tests of ``memvault migrate``.

It keeps stores, memories and every version in memory, with the API's shapes and rules: ids with
their prefixes, RFC 3339 times, ``{data, next_page}`` pages behind an opaque cursor (at most 100
items a page, 20 with ``view=full``), versions newest first (``created``, ``modified``,
``deleted``; a redacted one keeps its id, operation, time and actor, and loses path, content,
digest and size), ``content_sha256`` preconditions (409 ``memory_precondition_failed_error``, or
200 when the memory already is as asked), path rules (NFC, 1-20 segments, at most 1,024 bytes) and
overlaps (409 ``memory_path_conflict_error`` naming the memory in the way), content of at most
102,400 bytes (413). Writes through HTTP are by ``api_actor`` (an id derived from the key).

A test can also:

- write, delete and redact as other actors, between calls (:meth:`FakeMemoryStores.write`,
  :meth:`~FakeMemoryStores.delete`, :meth:`~FakeMemoryStores.redact`), and run code just before
  the n-th call of an operation (:meth:`~FakeMemoryStores.before`): a concurrent writer; or once
  it was handled, before the answer goes out (:meth:`~FakeMemoryStores.after`);
- make calls fail (:meth:`~FakeMemoryStores.fail`): a status with headers (``retry-after``...),
  optionally after the change was made (a 5xx whose outcome is unknown to the client), or a dropped
  connection (status 0);
- forget versions, as the service's retention does (:meth:`~FakeMemoryStores.expire`);
- quote the key it refused in its error message (``echo_key``), as a careless server might;
- look at every request (:attr:`~FakeMemoryStores.requests`: method, target, headers) and every
  request body (:attr:`~FakeMemoryStores.bodies`).

Operations: ``list_stores``, ``create_store``, ``retrieve_store``, ``list_memories``,
``create_memory``, ``retrieve_memory``, ``update_memory``, ``delete_memory``, ``list_versions``,
``retrieve_version``, ``redact_version``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["FakeMemoryStores", "sha"]

MAX_CONTENT = 102_400


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ApiFailure(Exception):
    def __init__(self, status: int, kind: str, message: str, **fields: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.fields = status, kind, message, fields


@dataclass
class Version:
    id: str
    memory_id: str
    store_id: str
    operation: str
    created_at: float
    actor: dict[str, str] | None
    path: str | None
    content: str | None
    redacted_at: float | None = None

    def to_json(self, view: str) -> dict[str, Any]:
        redacted = self.redacted_at is not None
        has = self.operation != "deleted" and not redacted
        return {
            "type": "memory_version", "id": self.id, "memory_id": self.memory_id, "memory_store_id": self.store_id,
            "operation": self.operation, "created_at": _rfc3339(self.created_at), "created_by": self.actor,
            "path": None if redacted else self.path,
            "content": self.content if has and view == "full" else None,
            "content_sha256": sha(self.content) if has and self.content is not None else None,
            "content_size_bytes": len(self.content.encode()) if has and self.content is not None else None,
            "redacted_at": _rfc3339(self.redacted_at) if redacted else None,
            "redacted_by": {"type": "user_actor", "user_id": "user_admin"} if redacted else None,
        }  # fmt: skip


@dataclass
class Memory:
    id: str
    path: str
    content: str
    version: str
    created_at: float
    updated_at: float

    def to_json(self, store_id: str, view: str) -> dict[str, Any]:
        return {
            "type": "memory", "id": self.id, "memory_store_id": store_id, "path": self.path,
            "content": self.content if view == "full" else None, "content_sha256": sha(self.content),
            "content_size_bytes": len(self.content.encode()), "memory_version_id": self.version,
            "created_at": _rfc3339(self.created_at), "updated_at": _rfc3339(self.updated_at),
        }  # fmt: skip


@dataclass
class Store:
    id: str
    name: str
    metadata: dict[str, str]
    created_at: float
    memories: dict[str, Memory] = field(default_factory=dict)
    versions: list[Version] = field(default_factory=list)  # oldest first
    expired: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {"type": "memory_store", "id": self.id, "name": self.name, "description": "",
                "metadata": self.metadata, "created_at": _rfc3339(self.created_at),
                "updated_at": _rfc3339(self.created_at), "archived_at": None}  # fmt: skip


@dataclass
class Fault:
    op: str
    status: int
    after: int
    times: int
    headers: dict[str, str]
    applied: bool
    seen: int = 0


def _path_problem(path: object) -> str | None:
    if not isinstance(path, str) or not path.startswith("/") or path.endswith("/"):
        return "path must start with / and name a memory"
    if len(path.encode("utf-8", "surrogatepass")) > 1024:
        return "path is longer than 1024 bytes"
    parts = path[1:].split("/")
    if len(parts) > 20:
        return "path has more than 20 segments"
    if any(p in ("", ".", "..") for p in parts):
        return "path has an empty, . or .. segment"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in path):
        return "path has a control or format character"
    if not unicodedata.is_normalized("NFC", path):
        return "path is not NFC"
    return None


class FakeMemoryStores:
    """The fake API (see the module docstring). ``keys``: the API keys it accepts."""

    def __init__(self, keys: tuple[str, ...] = ("sk-fake-key-0123456789abcdef",), *, echo_key: bool = False) -> None:
        self.keys = set(keys)
        self.echo_key = echo_key
        self.stores: dict[str, Store] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[Any] = []
        self.calls: dict[str, int] = {}
        self.faults: list[Fault] = []
        self.hooks: list[tuple[str, int, Callable[[], None]]] = []
        self.after_hooks: list[tuple[str, int, Callable[[], None]]] = []
        self.lock = threading.RLock()
        self._clock = 1_800_000_000.0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- the test's side -----------------------------------------------------------------------------

    def now(self) -> float:
        with self.lock:
            self._clock = max(self._clock + 0.001, round(time.time(), 6))
            return self._clock

    def create_store(self, name: str = "fake store", metadata: dict[str, str] | None = None) -> str:
        with self.lock:
            sid = "memstore_" + secrets.token_hex(8)
            self.stores[sid] = Store(sid, name, dict(metadata or {}), self.now())
            return sid

    def write(self, store: str, path: str, content: str, *, actor: dict[str, str] | None = None) -> Memory:
        """Create or change the memory at ``path`` as ``actor`` (default: a user)."""
        with self.lock:
            found = next((m for m in self.stores[store].memories.values() if m.path == path), None)
            who = actor if actor is not None else {"type": "user_actor", "user_id": "user_console"}
            if found is None:
                return self._create(self.stores[store], path, content, who)
            return self._update(self.stores[store], found, content, None, who)

    def rename(self, store: str, memory: str, path: str, *, actor: dict[str, str] | None = None) -> Memory:
        with self.lock:
            s = self.stores[store]
            m = s.memories[memory]
            return self._update(s, m, m.content, path, actor or {"type": "user_actor", "user_id": "user_console"})

    def delete(self, store: str, path: str, *, actor: dict[str, str] | None = None) -> None:
        with self.lock:
            s = self.stores[store]
            found = next(m for m in s.memories.values() if m.path == path)
            self._delete(s, found, actor or {"type": "user_actor", "user_id": "user_console"})

    def redact(self, store: str, version: str) -> None:
        with self.lock:
            v = next(v for v in self.stores[store].versions if v.id == version)
            v.redacted_at = self.now()

    def expire(self, store: str, version: str) -> None:
        """Forget a version, as the service's retention does."""
        with self.lock:
            self.stores[store].expired.add(version)

    def memory_at(self, store: str, path: str) -> Memory | None:
        with self.lock:
            return next((m for m in self.stores[store].memories.values() if m.path == path), None)

    def files(self, store: str) -> dict[str, str]:
        with self.lock:
            return {m.path: m.content for m in self.stores[store].memories.values()}

    def versions(self, store: str) -> list[Version]:
        with self.lock:
            return list(self.stores[store].versions)

    def fail(
        self, op: str, status: int, *, after: int = 0, times: int = 1, headers: dict[str, str] | None = None,
        applied: bool = False,
    ) -> None:  # fmt: skip
        """Answer ``status`` (0: drop the connection) to ``times`` calls of ``op`` after ``after``
        others; ``applied``: make the change first (a write whose answer is lost)."""
        with self.lock:
            self.faults.append(Fault(op, status, after, times, dict(headers or {}), applied))

    def before(self, op: str, nth: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` just before the ``nth`` (1-based) call of ``op`` is handled."""
        with self.lock:
            self.hooks.append((op, nth, fn))

    def after(self, op: str, nth: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the ``nth`` call of ``op`` was handled, before its answer is sent."""
        with self.lock:
            self.after_hooks.append((op, nth, fn))

    def count(self, op: str) -> int:
        with self.lock:
            return self.calls.get(op, 0)

    # -- serving -------------------------------------------------------------------------------------

    def __enter__(self) -> FakeMemoryStores:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                fake.serve(self)

            do_GET = do_POST = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda *args: None  # type: ignore[method-assign]  # a dropped connection
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self.lock:
            self.requests.append((h.command, h.path, headers))
            if raw:
                self.bodies.append(json.loads(raw))
        split = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        status, body, extra = 200, {}, {}
        try:
            auth = headers.get("authorization", "")
            if not auth.startswith("Bearer ") or auth[len("Bearer ") :] not in self.keys:
                said = f": {auth}" if self.echo_key else ""  # a careless server quoting what it got
                raise ApiFailure(401, "authentication_error", "invalid x-api-key" + said)
            actor = {"type": "api_actor", "api_key_id": "apikey_" + sha(auth)[:12]}
            op, handler = self._route(h.command, split.path, query, raw, actor)
            with self.lock:
                self.calls[op] = self.calls.get(op, 0) + 1
                n = self.calls[op]
                hooks = [fn for (o, k, fn) in self.hooks if o == op and k == n]
                later = [fn for (o, k, fn) in self.after_hooks if o == op and k == n]
                fault = None
                for f in self.faults:
                    if f.op == op:
                        f.seen += 1
                        if fault is None and f.after < f.seen <= f.after + f.times:
                            fault = f
            for fn in hooks:
                fn()
            if fault is not None and not fault.applied:
                self._fault(h, fault)
                return
            with self.lock:
                status, body = handler()
            for fn in later:
                fn()
            if fault is not None:
                self._fault(h, fault)
                return
        except ApiFailure as err:
            status = err.status
            body = {"type": "error", "error": {"type": err.kind, "message": err.message, **err.fields},
                    "request_id": "req_fake"}  # fmt: skip
            if status in (400, 401, 404, 409, 413):
                extra["x-should-retry"] = "false"
        self._send(h, status, body, extra)

    def _fault(self, h: BaseHTTPRequestHandler, fault: Fault) -> None:
        if fault.status == 0:
            h.close_connection = True
            try:
                h.connection.shutdown(2)
            except OSError:
                pass
            return
        body = {"type": "error", "error": {"type": "rate_limit_error" if fault.status == 429 else "api_error",
                                           "message": "injected"}, "request_id": "req_fake"}  # fmt: skip
        self._send(h, fault.status, body, fault.headers)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, body: object, headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.send_header("request-id", "req_fake")
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    # -- the API ---------------------------------------------------------------------------------------

    def _route(
        self, method: str, path: str, query: dict[str, str], raw: bytes, actor: dict[str, str]
    ) -> tuple[str, Callable[[], tuple[int, Any]]]:
        body: dict[str, Any] = json.loads(raw) if raw else {}
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:2] != ["v1", "memory_stores"]:
            raise ApiFailure(404, "not_found_error", "no such route")
        rest = parts[2:]
        if not rest:
            if method == "GET":
                return "list_stores", lambda: self._list_stores(query)
            return "create_store", lambda: self._new_store(body)
        store = self._store(rest[0])
        if len(rest) == 1:
            return "retrieve_store", lambda: (200, store.to_json())
        view_default = "full" if len(rest) == 3 and method == "GET" else "basic"
        view = query.get("view", view_default)
        if rest[1] == "memories":
            if len(rest) == 2:
                if method == "GET":
                    return "list_memories", lambda: self._list_memories(store, query, view)
                return "create_memory", lambda: self._create_api(store, body, view, actor)
            mid = rest[2]
            if method == "GET":
                return "retrieve_memory", lambda: (200, self._memory(store, mid).to_json(store.id, view))
            if method == "DELETE":
                return "delete_memory", lambda: self._delete_api(store, mid, query, actor)
            return "update_memory", lambda: self._update_api(store, mid, body, view, actor)
        if rest[1] == "memory_versions":
            if len(rest) == 2:
                return "list_versions", lambda: self._list_versions(store, query, view)
            if len(rest) == 4 and rest[3] == "redact":
                return "redact_version", lambda: self._redact_api(store, rest[2])
            return "retrieve_version", lambda: (200, self._version(store, rest[2]).to_json(view))
        raise ApiFailure(404, "not_found_error", "no such route")

    def _store(self, sid: str) -> Store:
        with self.lock:
            if sid not in self.stores:
                raise ApiFailure(404, "not_found_error", "no such memory store")
            return self.stores[sid]

    def _memory(self, store: Store, mid: str) -> Memory:
        if mid not in store.memories:
            raise ApiFailure(404, "not_found_error", "no such memory")
        return store.memories[mid]

    def _version(self, store: Store, vid: str) -> Version:
        found = next((v for v in store.versions if v.id == vid and v.id not in store.expired), None)
        if found is None:
            raise ApiFailure(404, "not_found_error", "no such memory version")
        return found

    @staticmethod
    def _limit(query: dict[str, str], view: str) -> int:
        limit = int(query.get("limit", "20"))
        if not 1 <= limit <= (20 if view == "full" else 100):
            raise ApiFailure(400, "invalid_request_error", "limit out of range")
        return limit

    @staticmethod
    def _page(items: list[Any], query: dict[str, str], limit: int) -> tuple[list[Any], str | None]:
        start = 0
        if "page" in query:
            try:
                start = int(base64.urlsafe_b64decode(query["page"].encode()).decode().split(":")[1])
            except (ValueError, IndexError):
                raise ApiFailure(400, "invalid_request_error", "bad page cursor") from None
        chunk = items[start : start + limit]
        more = start + limit < len(items)
        cursor = base64.urlsafe_b64encode(f"{secrets.token_hex(4)}:{start + limit}".encode()).decode()
        return chunk, cursor if more else None

    def _list_stores(self, query: dict[str, str]) -> tuple[int, Any]:
        items = sorted(self.stores.values(), key=lambda s: s.created_at)
        chunk, cursor = self._page(items, query, self._limit(query, "basic"))
        return 200, {"data": [s.to_json() for s in chunk], "next_page": cursor}

    def _new_store(self, body: dict[str, Any]) -> tuple[int, Any]:
        name = body.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 255:
            raise ApiFailure(400, "invalid_request_error", "name: 1 to 255 characters")
        sid = self.create_store(name, body.get("metadata") or {})
        return 200, self.stores[sid].to_json()

    def _list_memories(self, store: Store, query: dict[str, str], view: str) -> tuple[int, Any]:
        items = sorted(store.memories.values(), key=lambda m: m.path)
        chunk, cursor = self._page(items, query, self._limit(query, view))
        return 200, {"data": [m.to_json(store.id, view) for m in chunk], "next_page": cursor}

    def _list_versions(self, store: Store, query: dict[str, str], view: str) -> tuple[int, Any]:
        items = [v for v in reversed(store.versions) if v.id not in store.expired]
        if "memory_id" in query:
            items = [v for v in items if v.memory_id == query["memory_id"]]
        chunk, cursor = self._page(items, query, self._limit(query, view))
        return 200, {"data": [v.to_json(view) for v in chunk], "next_page": cursor}

    def _check(self, store: Store, path: object, content: object, moving: str | None) -> None:
        problem = _path_problem(path)
        if problem is not None:
            raise ApiFailure(400, "invalid_request_error", problem)
        assert isinstance(path, str)
        if not isinstance(content, str):
            raise ApiFailure(400, "invalid_request_error", "content must be a string")
        if len(content.encode("utf-8")) > MAX_CONTENT:
            raise ApiFailure(413, "request_too_large", "content over 102400 bytes")
        for m in store.memories.values():
            if m.id == moving:
                continue
            if m.path == path or m.path.startswith(path + "/") or path.startswith(m.path + "/"):
                raise ApiFailure(409, "memory_path_conflict_error", f"the path conflicts with {m.path}",
                                 conflicting_memory_id=m.id, conflicting_path=m.path)  # fmt: skip

    def _add_version(self, store: Store, m: Memory, op: str, actor: dict[str, str] | None, content: str | None) -> None:
        v = Version("memver_" + secrets.token_hex(10), m.id, store.id, op, self.now(), actor,
                    m.path, content)  # fmt: skip
        store.versions.append(v)
        m.version, m.updated_at = v.id, v.created_at

    def _create(self, store: Store, path: str, content: str, actor: dict[str, str] | None) -> Memory:
        self._check(store, path, content, None)
        t = self.now()
        m = Memory("mem_" + secrets.token_hex(10), path, content, "", t, t)
        store.memories[m.id] = m
        self._add_version(store, m, "created", actor, content)
        return m

    def _update(
        self, store: Store, m: Memory, content: str | None, path: str | None, actor: dict[str, str] | None
    ) -> Memory:
        new_content = m.content if content is None else content
        new_path = m.path if path is None else path
        if new_content == m.content and new_path == m.path:
            return m  # no version for a change that changes nothing
        self._check(store, new_path, new_content, m.id)
        m.content, m.path = new_content, new_path
        self._add_version(store, m, "modified", actor, new_content)
        return m

    def _delete(self, store: Store, m: Memory, actor: dict[str, str] | None) -> None:
        del store.memories[m.id]
        v = Version("memver_" + secrets.token_hex(10), m.id, store.id, "deleted", self.now(), actor, m.path, None)
        store.versions.append(v)

    def _create_api(self, store: Store, body: dict[str, Any], view: str, actor: dict[str, str]) -> tuple[int, Any]:
        content = body.get("content")
        m = self._create(store, body.get("path"), "" if content is None else content, actor)  # type: ignore[arg-type]
        return 200, m.to_json(store.id, view)

    def _update_api(
        self, store: Store, mid: str, body: dict[str, Any], view: str, actor: dict[str, str]
    ) -> tuple[int, Any]:
        m = self._memory(store, mid)
        content, path = body.get("content"), body.get("path")
        pre = body.get("precondition")
        if pre is not None and pre.get("content_sha256") != sha(m.content):
            same = (content is None or content == m.content) and (path is None or path == m.path)
            if not same:
                raise ApiFailure(409, "memory_precondition_failed_error", "the content changed")
        return 200, self._update(store, m, content, path, actor).to_json(store.id, view)

    def _delete_api(self, store: Store, mid: str, query: dict[str, str], actor: dict[str, str]) -> tuple[int, Any]:
        m = self._memory(store, mid)
        expected = query.get("expected_content_sha256")
        if expected is not None and expected != sha(m.content):
            raise ApiFailure(409, "memory_precondition_failed_error", "the content changed")
        self._delete(store, m, actor)
        return 200, {"type": "memory_deleted", "id": mid}

    def _redact_api(self, store: Store, vid: str) -> tuple[int, Any]:
        v = self._version(store, vid)
        v.redacted_at = self.now()
        return 200, v.to_json("basic")
