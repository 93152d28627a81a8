"""What each memory tool command costs on a store in S3 whose replica is up to date: requests and
sequential round trips, counted at the proxy in front of moto (docs/format.md §12.3, §12.4): a
mutation lists the log once, uploads its pack, index and data keys together, then creates its log
record (at most 3 round trips and 6 requests); a view of an unchanged head is the log's listing."""

from __future__ import annotations

from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE
from memvault.errors import EditError
from memvault.protocol.commands import run_command
from s3support import as_host, sequential_round_trips

#: Seconds the proxy holds each request: requests sent together overlap by this much, so the
#: round trips counted from its timestamps do not depend on how fast this machine is.
LATENCY = 0.1


def _cost(s3_faulty, store: memvault.MemoryStore, **command: object) -> tuple[int, int, int]:
    """``(requests, lists of the bucket, sequential round trips)`` of one command."""
    proxy = s3_faulty.proxy
    first = len(proxy.log)
    run_command(store, command, actor="tester", session="s")
    made, timings = proxy.log[first:], proxy.timings[first:]
    lists = sum(1 for method, path, _status in made if method == "GET" and "list-type=2" in path)
    return len(made), lists, sequential_round_trips(timings)


COMMANDS = [
    ("create", {"command": "create", "path": "/memories/notes/a.md", "file_text": "alpha\nbeta\n"}),
    ("view", {"command": "view", "path": "/memories/notes/a.md"}),
    ("str_replace", {"command": "str_replace", "path": "/memories/notes/a.md", "old_str": "beta", "new_str": "gamma"}),
    ("insert", {"command": "insert", "path": "/memories/notes/a.md", "insert_line": 1, "insert_text": "delta\n"}),
    ("rename", {"command": "rename", "old_path": "/memories/notes/a.md", "new_path": "/memories/notes/b.md"}),
    ("view_dir", {"command": "view", "path": "/memories/notes"}),
    ("delete", {"command": "delete", "path": "/memories/notes/b.md"}),
]


def test_each_command_on_an_up_to_date_replica_costs_what_the_format_says(s3_faulty, tmp_path: Path) -> None:
    cache = tmp_path / "a"
    with as_host(cache):
        store = memvault.MemoryStore.create(s3_faulty.url("rt"), passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=cache)
    try:
        run_command(store, {"command": "create", "path": "/memories/notes/warm.md", "file_text": "w\n"},
                    actor="tester", session="s")  # fmt: skip
        run_command(store, {"command": "view", "path": "/memories/notes/warm.md"}, actor="tester", session="s")
        s3_faulty.proxy.latency = LATENCY
        costs = {name: _cost(s3_faulty, store, **command) for name, command in COMMANDS}
    finally:
        s3_faulty.proxy.latency = 0.0
        store.close()
    for name, (requests, lists, trips) in costs.items():
        if name.startswith("view"):
            assert (requests, lists, trips) == (1, 1, 1), (name, costs)
        else:
            assert lists == 1, (name, costs)  # one pull: the log is listed once
            assert requests <= 6, (name, costs)
            assert trips <= 3, (name, costs)
    # The figures the format states: a create is its list, the pack, its index, one data key per
    # file version it writes and the log record; a delete writes no data key.
    assert costs["create"][0] == 1 + 2 + 1 + 1, costs
    assert costs["delete"][0] == 1 + 2 + 1, costs
    assert costs["create"][2] == costs["delete"][2] == 3, costs


@pytest.mark.parametrize("name", ["str_replace", "insert", "rename"])
def test_an_edit_on_a_replica_that_is_behind_runs_on_the_newest_text(s3_env, tmp_path: Path, name: str) -> None:
    """The edit's first read (before the writer lock) takes in no other host's commit; the edit
    itself still runs on the newest head (the pull of transact)."""
    url = s3_env.url("behind")
    with as_host(tmp_path / "a"):
        a = memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=tmp_path / "a")
    with as_host(tmp_path / "b"):
        b = memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=tmp_path / "b")
    try:
        run_command(a, {"command": "create", "path": "/memories/x.md", "file_text": "one\n"}, actor="t", session="s")
        run_command(b, {"command": "view", "path": "/memories/x.md"}, actor="t", session="s")  # b is up to date
        run_command(a, {"command": "str_replace", "path": "/memories/x.md", "old_str": "one", "new_str": "two"},
                    actor="t", session="s")  # fmt: skip
        if name == "str_replace":
            with pytest.raises(EditError, match="did not appear verbatim"):
                run_command(b, {"command": "str_replace", "path": "/memories/x.md", "old_str": "one", "new_str": "3"},
                            actor="t", session="s")  # fmt: skip
            run_command(b, {"command": "str_replace", "path": "/memories/x.md", "old_str": "two", "new_str": "3"},
                        actor="t", session="s")  # fmt: skip
            expected = {"/memories/x.md": b"3\n"}
        elif name == "insert":
            run_command(b, {"command": "insert", "path": "/memories/x.md", "insert_line": 1, "insert_text": "end"},
                        actor="t", session="s")  # fmt: skip
            expected = {"/memories/x.md": b"two\nend\n"}
        else:
            run_command(b, {"command": "rename", "old_path": "/memories/x.md", "new_path": "/memories/y.md"},
                        actor="t", session="s")  # fmt: skip
            expected = {"/memories/y.md": b"two\n"}
        for store in (a, b):
            view = store.snapshot()
            files = {
                f"/memories/{n}": store.read_node(view.get(f"/memories/{n}")) for n in view.child_names("/memories")
            }
            assert files == expected
    finally:
        a.close()
        b.close()
