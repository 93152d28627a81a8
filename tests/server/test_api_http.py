"""The API over raw HTTP, for what the SDK hides: the error envelope and its headers, both ways
of sending a key, bodies refused before they are read, malformed input, PATCH, unknown routes
and methods, cursors that were tampered with, and a client that goes away mid-body. Each bad
request changes nothing."""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

from serversupport import Served  # noqa: E402

STORES = "/v1/memory_stores"


@pytest.fixture
def store_id(served: Served) -> str:
    status, _h, body = served.http("POST", STORES, {"name": "raw"})
    assert status == 200
    return str(body["id"])


def memories_of(served: Served, store_id: str) -> list[str]:
    status, _h, body = served.http("GET", f"{STORES}/{store_id}/memories")
    assert status == 200
    return [m["path"] for m in body["data"]]


def read_answer(sock: socket.socket) -> str:
    """One HTTP answer read off ``sock``: the head and a body of its Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode("utf-8", "replace")


def assert_envelope(status: int, headers: dict[str, str], body: dict, code: int, kind: str) -> None:
    assert status == code
    assert body["type"] == "error"
    assert body["error"]["type"] == kind
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert body["request_id"] == headers["request-id"] and body["request_id"].startswith("req_")
    assert headers["cache-control"] == "no-store"


def test_both_ways_of_sending_a_key(served: Served) -> None:
    assert served.http("GET", STORES, key=False, headers={"x-api-key": served.admin_key})[0] == 200
    assert served.http("GET", STORES, key=False, headers={"authorization": f"bearer {served.admin_key}"})[0] == 200
    status, headers, body = served.http("GET", STORES, key=False)
    assert_envelope(status, headers, body, 401, "authentication_error")
    assert headers["x-should-retry"] == "false"
    status, headers, body = served.http("GET", STORES, key=False, headers={"authorization": "Basic abc"})
    assert status == 401


def test_beta_headers_are_accepted_in_any_combination(served: Served) -> None:
    for beta in ("agent-memory-2026-07-22", "managed-agents-2026-04-01",
                 "managed-agents-2026-04-01,agent-memory-2026-07-22", ""):  # fmt: skip
        assert served.http("GET", STORES, headers={"anthropic-beta": beta})[0] == 200


def test_success_headers(served: Served) -> None:
    status, headers, _body = served.http("GET", STORES)
    assert status == 200
    assert headers["request-id"].startswith("req_")
    assert headers["cache-control"] == "no-store"
    assert headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'"text"', "JSON object"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_malformed_bodies_are_400(served: Served, store_id: str, raw: bytes, needle: str) -> None:
    status, headers, body = served.http("POST", f"{STORES}/{store_id}/memories", raw=raw)
    assert_envelope(status, headers, body, 400, "invalid_request_error")
    assert needle in body["error"]["message"]
    assert headers["x-should-retry"] == "false"
    assert memories_of(served, store_id) == []


@pytest.mark.parametrize(
    "body",
    [
        {"path": "/a.md", "content": "x", "extra": 1},
        {"content": "x"},
        {"path": 5, "content": "x"},
        {"path": "/a.md", "content": 5},
        {"path": ["/a.md"], "content": "x"},
        {"path": "/a.md", "content": {"text": "x"}},
        {"path": "/a.md", "content": "\ud800"},
    ],
)
def test_unknown_fields_and_wrong_types_are_400(served: Served, store_id: str, body: dict) -> None:
    status, headers, answer = served.http("POST", f"{STORES}/{store_id}/memories", body)
    assert_envelope(status, headers, answer, 400, "invalid_request_error")
    assert memories_of(served, store_id) == []


def test_update_accepts_patch_and_post(served: Served, store_id: str) -> None:
    status, _h, m = served.http("POST", f"{STORES}/{store_id}/memories", {"path": "/a.md", "content": "1"})
    assert status == 200
    path = f"{STORES}/{store_id}/memories/{m['id']}"
    assert served.http("PATCH", path, {"content": "2"})[2]["content_sha256"] != m["content_sha256"]
    assert served.http("POST", path + "?view=full", {"content": "3"})[2]["content"] == "3"
    status, headers, body = served.http("PUT", path, {"content": "4"})
    assert_envelope(status, headers, body, 405, "invalid_request_error")
    assert served.http("GET", path)[2]["content"] == "3"


def test_unknown_routes_are_404_in_the_envelope(served: Served) -> None:
    status, headers, body = served.http("GET", "/v1/nothing")
    assert status == 404 and body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert headers["x-should-retry"] == "false"


def test_body_over_the_limit_is_refused_before_it_is_read(served: Served, store_id: str) -> None:
    limit = served.app.max_body_bytes
    # Declared too large: answered at once, although the body never comes.
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        head = (
            f"POST {STORES}/{store_id}/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {served.admin_key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {limit + 1}\r\n\r\n"
        )
        sock.sendall(head.encode())
        answer = read_answer(sock)
    assert answer.startswith("HTTP/1.1 413")
    assert "request_too_large" in answer
    # Chunked, no length: refused once the limit is passed.
    big = json.dumps({"path": "/big.md", "content": "a" * (limit + 10)}).encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        head = (
            f"POST {STORES}/{store_id}/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {served.admin_key}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.sendall(head.encode())
        try:
            for start in range(0, len(big), 65536):
                piece = big[start : start + 65536]
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may close as soon as it has answered
        answer = read_answer(sock)
    assert answer.startswith("HTTP/1.1 413")
    assert memories_of(served, store_id) == []


def test_a_client_that_goes_away_mid_body_changes_nothing(served: Served, store_id: str) -> None:
    body = json.dumps({"path": "/half.md", "content": "x" * 1000}).encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        head = (
            f"POST {STORES}/{store_id}/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {served.admin_key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body[: len(body) // 2])
    time.sleep(0.3)
    assert memories_of(served, store_id) == []
    assert served.http("GET", "/healthz", key=False)[0] == 200


def test_query_parameters_are_checked(served: Served, store_id: str) -> None:
    base = f"{STORES}/{store_id}/memories"
    for query in ("?limit=0", "?limit=101", "?limit=x", "?view=full&limit=21", "?view=all", "?depth=-1",
                  "?depth=x", "?path_prefix=notes/"):  # fmt: skip
        status, headers, body = served.http("GET", base + query)
        assert_envelope(status, headers, body, 400, "invalid_request_error")
    versions = f"{STORES}/{store_id}/memory_versions"
    for query in ("?created_at[gte]=yesterday", "?created_at[lte]=2026-01-01T00:00:00", "?operation=renamed"):
        status, headers, body = served.http("GET", versions + query)
        assert_envelope(status, headers, body, 400, "invalid_request_error")
    for query in ("?created_at[gte]=2026-01-01T00:00:00Z", "?created_at[gte]=2026-01-01T00:00:00%2B00:00"):
        assert served.http("GET", versions + query)[0] == 200
    assert served.http("GET", f"{STORES}?include_archived=maybe")[0] == 400


def test_cursors_are_opaque_and_bound_to_their_listing(served: Served, store_id: str) -> None:
    base = f"{STORES}/{store_id}/memories"
    for i in range(3):
        served.http("POST", base, {"path": f"/secret-name-{i}.md", "content": "x"})
    status, _h, page = served.http("GET", base + "?limit=1")
    cursor = page["next_page"]
    assert status == 200 and cursor and "secret-name" not in cursor
    assert served.http("GET", base + f"?limit=1&page={cursor}")[2]["data"][0]["path"] == "/secret-name-1.md"
    tampered = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
    status, headers, body = served.http("GET", base + f"?limit=1&page={tampered}")
    assert_envelope(status, headers, body, 400, "invalid_request_error")
    # A cursor of one listing is refused by another (another prefix, another store).
    assert served.http("GET", base + f"?limit=1&page={cursor}&path_prefix=/other/")[0] == 400
    status, _h, other = served.http("POST", STORES, {"name": "other"})
    assert served.http("GET", f"{STORES}/{other['id']}/memories?limit=1&page={cursor}")[0] == 400


def test_an_answer_never_echoes_a_rejected_secret(served: Served, store_id: str) -> None:
    secret = "sk-ant-api03-" + "Zq7Xk2Lp9Wm4" * 7 + "Rt5Nb8Vc3Hj6Y" + "AA"
    served.root.registry()  # the store exists
    # Make the policy reject instead of mask: an operator's config of the store.
    with served.root.memories(store_id) as memories:
        from memvault.admin.config import change_settings

        change_settings(memories.store, {"scrub.policy.anthropic_api_key": "reject"}, actor="operator")
    served.root._evict(store_id)  # noqa: SLF001 - reopen with the new policy
    status, headers, body = served.http("POST", f"{STORES}/{store_id}/memories", {"path": "/k.md", "content": secret})
    assert_envelope(status, headers, body, 400, "invalid_request_error")
    assert "anthropic_api_key" in body["error"]["message"]
    assert secret not in json.dumps(body) and "Zq7Xk2Lp9Wm4" not in json.dumps(body)
    assert memories_of(served, store_id) == []
