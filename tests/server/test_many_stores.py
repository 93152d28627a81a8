"""Many stores on one root, over real HTTP: one slow, locked or damaged store never holds up the
others (each answers its own requests with the documented error), the open stores stay within
``open_stores`` and the process's file descriptors do not grow with the stores it ever opened, and
the store listing pages through every store once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

from conftest import FAST_KDF, PASSPHRASE  # noqa: E402
from memvault.keys.slots import Unlock  # noqa: E402
from memvault.server.root import ServerRoot, store_location  # noqa: E402
from serversupport import Served, serve_root  # noqa: E402

UNLOCK = Unlock(passphrase=PASSPHRASE)


@contextmanager
def served_root(tmp_path: Path, stores: int, **options: Any) -> Iterator[tuple[Served, list[str]]]:
    """A root of ``stores`` stores (made through the library), opened with ``options`` and served."""
    location = tmp_path / "root"
    made = ServerRoot.init(location, UNLOCK, kdf=FAST_KDF, durability="none")
    admin, admin_key = made.create_key("admin", admin=True)
    plain, plain_key = made.create_key("worker")
    ids = [made.create_store(f"store {i:04d}").id for i in range(stores)]
    made.close()
    root = ServerRoot.open(location, UNLOCK, **options)
    server, thread, port, app = serve_root(root)
    try:
        yield Served(f"http://127.0.0.1:{port}", port, location, root, app, admin_key, plain_key, admin.id, plain.id,
                     server, thread), ids  # fmt: skip
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@contextmanager
def lock_held_by_another_process(store_dir: Path) -> Iterator[None]:
    """The store's writer lock (``flock`` on its lock file) held by another process throughout."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); sys.stdin.read()", str(store_dir / "lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def burst(served: Served, method: str, path: str, body: Any, n: int) -> tuple[list[threading.Thread], list[Any]]:
    """``n`` concurrent raw requests, started now; the threads and their answers (filled as they end)."""
    answers: list[Any] = []

    def one() -> None:
        try:
            answers.append(served.http(method, path, body))
        except OSError as err:  # pragma: no cover - reported by the test's assertions
            answers.append((0, {}, repr(err)))

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, answers


def timed(served: Served, method: str, path: str, body: Any = None) -> tuple[float, int, Any]:
    started = time.monotonic()
    status, _headers, answer = served.http(method, path, body)
    return time.monotonic() - started, status, answer


def fds() -> int:
    """Files this process holds open (sockets, which come and go with connections, left out)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("/")
        except OSError:
            pass  # closed meanwhile
    return count


pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")


def test_a_store_whose_lock_another_process_holds_does_not_hold_up_the_others(tmp_path: Path) -> None:
    with served_root(tmp_path, 2, lock_timeout=6.0) as (served, (a, b)):
        served.http("POST", f"/v1/memory_stores/{b}/memories", {"path": "/b.md", "content": "b"})
        with lock_held_by_another_process(Path(store_location(str(served.location), b))):
            # More writers to B than the server has threads (40): each waits for B's lock.
            threads, answers = burst(served, "POST", f"/v1/memory_stores/{b}/memories",
                                     {"path": "/during.md", "content": "x"}, 48)  # fmt: skip
            time.sleep(0.5)
            for i in range(3):
                took, status, _ = timed(served, "POST", f"/v1/memory_stores/{a}/memories",
                                        {"path": f"/a{i}.md", "content": "a"})  # fmt: skip
                assert status == 200 and took < 3.0, (status, took)  # B's lock wait is 6 s
                took, status, listing = timed(served, "GET", f"/v1/memory_stores/{a}/memories")
                assert status == 200 and took < 3.0, (status, took)
            for t in threads:
                t.join(timeout=60)
        assert len(answers) == 48
        for status, headers, answer in answers:  # busy, never an error of another kind
            assert status == 503 and answer["error"]["type"] == "overloaded_error", answer
            assert headers.get("retry-after") and headers.get("x-should-retry") != "false"
        status, _h, listing = served.http("GET", f"/v1/memory_stores/{b}/memories")
        assert [m["path"] for m in listing["data"]] == ["/b.md"]  # nothing of the refused writes
        status, _h, _m = served.http("POST", f"/v1/memory_stores/{b}/memories", {"path": "/after.md", "content": "y"})
        assert status == 200  # B works again once the lock is free


def test_a_store_whose_open_hangs_does_not_hold_up_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memvault.store import MemoryStore

    with served_root(tmp_path, 3) as (served, (a, b, c)):
        release = threading.Event()
        real_open = MemoryStore.open.__func__  # type: ignore[attr-defined]

        def slow_open(cls: type[MemoryStore], path: Any, *args: Any, **kwargs: Any) -> MemoryStore:
            if str(path).endswith(b):
                release.wait(60)  # B's storage hangs
            return real_open(cls, path, *args, **kwargs)  # type: ignore[no-any-return]

        monkeypatch.setattr(MemoryStore, "open", classmethod(slow_open))
        threads, answers = burst(served, "GET", f"/v1/memory_stores/{b}/memories", None, 48)
        time.sleep(0.5)
        try:
            for store_id in (a, c):  # not open yet: their opens must not wait for B's
                took, status, _ = timed(served, "POST", f"/v1/memory_stores/{store_id}/memories",
                                        {"path": "/m.md", "content": "m"})  # fmt: skip
                assert status == 200 and took < 3.0, (status, took)
                took, status, _ = timed(served, "GET", "/v1/memory_stores")
                assert status == 200 and took < 3.0, (status, took)
        finally:
            release.set()
            for t in threads:
                t.join(timeout=60)
        statuses = sorted(status for status, _h, _a in answers)
        assert set(statuses) <= {200, 503} and 200 in statuses  # those that waited got B's answer
        for status, headers, answer in answers:
            if status == 503:
                assert answer["error"]["type"] == "overloaded_error" and headers.get("retry-after")
        assert served.http("GET", f"/v1/memory_stores/{b}/memories")[0] == 200


def _damage(store_dir: Path, how: str) -> None:
    if how == "config":
        (store_dir / "memvault.json").write_bytes(b"{not json")
    elif how == "keyring":
        data = (store_dir / "keyring").read_bytes()
        (store_dir / "keyring").write_bytes(data[: len(data) // 2] + bytes(64))
    elif how == "repo":
        for pack in (store_dir / "repo").rglob("*"):
            if pack.is_file() and "objects" in pack.parts:
                pack.write_bytes(b"\0" * max(1, pack.stat().st_size))
    else:  # "keys": the key slots gone
        for slot in (store_dir / "keys").iterdir():
            slot.unlink()


@pytest.mark.parametrize("how", ["config", "keyring", "repo", "keys"])
def test_a_damaged_store_answers_its_own_requests_with_an_error_and_the_others_serve(tmp_path: Path, how: str) -> None:
    with served_root(tmp_path, 3, open_stores=2) as (served, (a, b, c)):
        for store_id in (a, b, c):
            served.http("POST", f"/v1/memory_stores/{store_id}/memories", {"path": "/x.md", "content": "x"})
        served.root._evict(b)  # noqa: SLF001 - B is opened again from its damaged files
        _damage(Path(store_location(str(served.location), b)), how)
        before = None
        for round_ in range(6):
            status, headers, answer = served.http("GET", f"/v1/memory_stores/{b}/memories")
            assert status == 500 and answer["error"]["type"] == "api_error", answer
            assert headers.get("x-should-retry") != "false"
            assert str(served.location) not in str(answer)  # no host path in the message
            for store_id in (a, c):
                status, _h, listing = served.http("GET", f"/v1/memory_stores/{store_id}/memories")
                assert status == 200 and [m["path"] for m in listing["data"]] == ["/x.md"]
            status, _h, stores = served.http("GET", "/v1/memory_stores")
            assert status == 200 and {s["id"] for s in stores["data"]} == {a, b, c}
            if round_ == 1:
                before = fds()
        assert before is not None and fds() <= before  # failed opens leave no file open
        assert served.root.open_count() <= 2


def test_open_stores_stay_bounded_and_file_descriptors_do_not_grow(tmp_path: Path) -> None:
    with served_root(tmp_path, 24, open_stores=4) as (served, ids):
        for store_id in ids:  # one commit each (an open store keeps one file open per pack)
            status, _h, _a = served.http("POST", f"/v1/memory_stores/{store_id}/memories", {"path": "/m.md",
                                                                                          "content": "m"})  # fmt: skip
            assert status == 200 and served.root.open_count() <= 4
        counts = []
        for _round in range(4):  # every store opened again and again, each closed in its turn
            for store_id in ids:
                status, _h, listing = served.http("GET", f"/v1/memory_stores/{store_id}/memories")
                assert status == 200 and [m["path"] for m in listing["data"]] == ["/m.md"]
                assert served.root.open_count() <= 4
            counts.append(fds())
        assert max(counts[1:]) <= counts[0], counts  # nothing of a store stays open once it is closed


def test_the_store_listing_pages_through_every_store_once(tmp_path: Path) -> None:
    with served_root(tmp_path, 57) as (served, ids):
        for store_id in ids[::5]:  # some archived: left out unless asked for
            served.http("POST", f"/v1/memory_stores/{store_id}/archive", {})
        for archived, expected in (("false", [i for i in ids if i not in ids[::5]]), ("true", ids)):
            seen, page = [], None
            while True:
                query = f"?limit=7&include_archived={archived}" + (f"&page={page}" if page else "")
                status, _h, answer = served.http("GET", "/v1/memory_stores" + query)
                assert status == 200 and len(answer["data"]) <= 7
                seen += [s["id"] for s in answer["data"]]
                page = answer["next_page"]
                if page is None:
                    break
            assert seen == expected  # oldest first, each once
        created = [s["created_at"] for s in served.http("GET", "/v1/memory_stores?limit=100")[2]["data"]]
        status, _h, window = served.http("GET", f"/v1/memory_stores?created_at[gte]={created[3]}"
                                                f"&created_at[lte]={created[9]}&limit=100")  # fmt: skip
        assert [s["created_at"] for s in window["data"]] == created[3:10]
