"""Undo without destroying history (revert, restore, rollback) and preconditioned writes.

Every test drives a scripted agent session through ``MemoryTool``, then asserts the exact
resulting tree, that exactly one commit was made with its command and actor, that every older
revision still reads as before, and that refusals write nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, make_store
from memvault.cli import main
from memvault.edits import undo, writes
from memvault.errors import (
    ConflictError,
    EditError,
    InvalidInputError,
    LimitExceededError,
    PathNotFoundError,
)
from memvault.history import Change, log, read_at, resolve, tree_at
from memvault.settings import StoreSettings

NOTES = "/memories/notes.md"
PROJ = "/memories/proj"
PLAN = "/memories/proj/plan.md"
ROAD = "/memories/proj/roadmap.md"
TMP = "/memories/tmp.md"


def script(store: memvault.MemoryStore) -> dict[str, bytes]:
    """A scripted agent session; the commit id after each step, by name."""
    tool = memvault.MemoryTool(store, actor="agent", session="s1")
    revs: dict[str, bytes] = {}
    steps = [
        ("create_notes", {"command": "create", "path": NOTES, "file_text": "alpha\nbeta\n"}),
        ("create_plan", {"command": "create", "path": PLAN, "file_text": "step 1\n"}),
        ("edit_notes", {"command": "str_replace", "path": NOTES, "old_str": "beta", "new_str": "gamma"}),
        ("rename_plan", {"command": "rename", "old_path": PLAN, "new_path": ROAD}),
        ("create_tmp", {"command": "create", "path": TMP, "file_text": "scratch\n"}),
        ("delete_tmp", {"command": "delete", "path": TMP}),
    ]
    for name, command in steps:
        tool.call(command)
        revs[name] = store.head[0]
    return revs


#: The tree after :func:`script` (None: a directory).
FINAL: dict[str, bytes | None] = {NOTES: b"alpha\ngamma\n", PROJ: None, ROAD: b"step 1\n"}


def files(store: memvault.MemoryStore, rev: str | bytes = "HEAD") -> dict[str, bytes | None]:
    """Every path at ``rev``: file content, or None for a directory."""
    commit = rev if isinstance(rev, bytes) else resolve(store, rev)
    return {e.path: None if e.kind == "dir" else read_at(store, e.path, commit) for e in tree_at(store, commit)}


def history_snapshot(store: memvault.MemoryStore, revs: dict[str, bytes]) -> dict[str, dict[str, bytes | None]]:
    return {name: files(store, commit) for name, commit in revs.items()}


def assert_one_commit(store: memvault.MemoryStore, seq_before: int, command: str, result: undo.UndoResult) -> None:
    """Exactly one new commit, attributed to the operator, matching the result."""
    entries = log(store, limit=2)
    top = entries[0]
    assert top.seq == seq_before + 1 == store.head[1] == result.seq
    assert entries[1].seq == seq_before
    assert (top.command, top.actor, top.session) == (command, "operator", "")
    assert top.commit_id == result.commit_id == store.head[0].decode()
    assert set(top.paths) <= set(result.paths) and top.paths
    # The commit's own view of what changed names the same paths as the result.
    assert {p for c in top.changes for p in (c.path, c.old_path) if p} == set(result.paths)


@pytest.fixture
def scripted(store: memvault.MemoryStore) -> dict[str, bytes]:
    revs = script(store)
    assert files(store) == FINAL
    return revs


# -- revert -------------------------------------------------------------------------------------------


def test_revert_modification(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    old = history_snapshot(store, scripted)
    seq = store.head[1]
    result = undo.revert(store, scripted["edit_notes"])
    assert result.changes == (Change("modified", NOTES, "file"),)
    assert (result.command, result.target, result.target_seq) == ("revert", scripted["edit_notes"].decode(), 3)
    assert files(store) == {**FINAL, NOTES: b"alpha\nbeta\n"}
    assert_one_commit(store, seq, "revert", result)
    assert log(store, limit=1)[0].paths == (NOTES,)
    assert history_snapshot(store, scripted) == old  # every old revision still reads the same
    # A new version of the same lineage, re-encrypted (a new blob), not the old one.
    assert [e.version for e in tree_at(store) if e.path == NOTES] == [3]


def test_revert_rename_renames_back(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    seq = store.head[1]
    result = undo.revert(store, scripted["rename_plan"])
    assert result.changes == (Change("renamed", PLAN, "file", old_path=ROAD),)
    assert files(store) == {NOTES: b"alpha\ngamma\n", PROJ: None, PLAN: b"step 1\n"}
    assert_one_commit(store, seq, "revert", result)
    assert log(store, limit=1)[0].paths == (PLAN, ROAD)
    # The lineage continues: created (1), renamed (2), renamed back (3).
    assert [e.version for e in tree_at(store) if e.path == PLAN] == [3]


def test_revert_delete_recreates_then_is_a_noop(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    seq = store.head[1]
    result = undo.revert(store, scripted["delete_tmp"])
    assert result.changes == (Change("created", TMP, "file"),)
    assert files(store) == {**FINAL, TMP: b"scratch\n"}
    assert_one_commit(store, seq, "revert", result)

    head = store.head
    again = undo.revert(store, scripted["delete_tmp"])
    assert (again.commit_id, again.seq, again.changes, again.changed) == (None, None, (), False)
    assert again.note == (
        f"Nothing to revert: every path commit {scripted['delete_tmp'].decode()[:10]} (#6) changed "
        "is already as it was before it."
    )
    assert store.head == head  # no empty commit

    # Reverting the revert deletes the file again.
    assert result.commit_id is not None
    twice = undo.revert(store, result.commit_id)
    assert twice.changes == (Change("deleted", TMP, "file"),)
    assert files(store) == FINAL


def test_revert_create_in_new_directory(store: memvault.MemoryStore) -> None:
    tool = memvault.MemoryTool(store, actor="agent")
    tool.call({"command": "create", "path": "/memories/d/a.md", "file_text": "a"})
    first = store.head[0]
    tool.call({"command": "create", "path": "/memories/e/x.md", "file_text": "x"})
    second = store.head[0]
    tool.call({"command": "create", "path": "/memories/d/b.md", "file_text": "b"})

    # /memories/d holds a later file: the revert removes a.md and keeps the directory.
    result = undo.revert(store, first)
    assert result.changes == (Change("deleted", "/memories/d/a.md", "file"),)
    # /memories/e was created by the commit and is empty afterwards: it goes too.
    result = undo.revert(store, second)
    assert result.changes == (Change("deleted", "/memories/e", "dir"), Change("deleted", "/memories/e/x.md", "file"))
    assert files(store) == {"/memories/d": None, "/memories/d/b.md": b"b"}


def test_revert_conflicts_write_nothing(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    head = store.head
    with pytest.raises(ConflictError) as err:
        undo.revert(store, scripted["create_notes"])  # notes.md was edited later
    assert str(err.value) == (
        f"Error: Cannot revert commit {scripted['create_notes'].decode()[:10]} (#1): changed after it: "
        f"{NOTES}. Revert the later commits first, or use restore."
    )
    with pytest.raises(ConflictError) as err:
        undo.revert(store, scripted["create_plan"])  # plan.md was renamed later
    assert f"changed after it: {PLAN}." in str(err.value)
    assert store.head == head and files(store) == FINAL

    # An edit after a revert target's edit is a conflict as well.
    memvault.MemoryTool(store).call({"command": "str_replace", "path": NOTES, "old_str": "alpha", "new_str": "omega"})
    head = store.head
    with pytest.raises(ConflictError, match="changed after it: /memories/notes.md"):
        undo.revert(store, scripted["edit_notes"])
    assert store.head == head


def test_revert_initial_commit_is_refused(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    head = store.head
    with pytest.raises(InvalidInputError, match=r"\(#0\) is the store's initial commit; there is nothing to revert"):
        undo.revert(store, "#0")
    assert store.head == head


# -- restore ------------------------------------------------------------------------------------------


def test_restore_file_deleted_file_and_directory(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    old = history_snapshot(store, scripted)

    seq = store.head[1]
    result = undo.restore(store, NOTES, scripted["create_notes"])
    assert result.changes == (Change("modified", NOTES, "file"),)
    assert files(store) == {**FINAL, NOTES: b"alpha\nbeta\n"}
    assert_one_commit(store, seq, "restore", result)

    seq = store.head[1]
    result = undo.restore(store, TMP, scripted["create_tmp"])  # deleted since
    assert result.changes == (Change("created", TMP, "file"),)
    assert files(store)[TMP] == b"scratch\n"
    assert_one_commit(store, seq, "restore", result)

    # A directory subtree: plan.md comes back, roadmap.md (absent then) goes.
    seq = store.head[1]
    result = undo.restore(store, PROJ, "HEAD~5")  # right after create_plan
    assert result.changes == (Change("renamed", PLAN, "file", old_path=ROAD),)
    assert files(store) == {NOTES: b"alpha\nbeta\n", PROJ: None, PLAN: b"step 1\n", TMP: b"scratch\n"}
    assert_one_commit(store, seq, "restore", result)
    assert log(store, limit=1)[0].paths == (PLAN, ROAD)

    assert history_snapshot(store, scripted) == old


def test_restore_refusals_and_noop(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    head = store.head
    with pytest.raises(PathNotFoundError) as err:
        undo.restore(store, TMP, scripted["create_plan"])
    assert str(err.value) == (
        f"Error: The path {TMP} did not exist at revision {scripted['create_plan'].decode()[:10]} (#2)."
    )
    result = undo.restore(store, ROAD, "HEAD")
    assert (result.commit_id, result.changes) == (None, ())
    assert result.note.startswith(f"Nothing to restore: {ROAD} is already as it was at ")
    assert store.head == head


def test_restore_over_a_limit_changes_nothing(store_path: Path) -> None:
    with make_store(store_path, StoreSettings(max_files=2)) as store:
        tool = memvault.MemoryTool(store)
        tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a"})
        tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b"})
        with_b = store.head[0]
        tool.call({"command": "delete", "path": "/memories/b.md"})
        tool.call({"command": "create", "path": "/memories/c.md", "file_text": "c"})
        head = store.head
        with pytest.raises(LimitExceededError, match="at most 2 files"):
            undo.restore(store, "/memories/b.md", with_b)
        assert store.head == head
        assert files(store) == {"/memories/a.md": b"a", "/memories/c.md": b"c"}
        # The rollback to that revision fits (c.md goes, b.md comes back).
        result = undo.rollback(store, with_b)
        assert result.changes == (
            Change("created", "/memories/b.md", "file"),
            Change("deleted", "/memories/c.md", "file"),
        )
        assert files(store) == {"/memories/a.md": b"a", "/memories/b.md": b"b"}


# -- rollback -----------------------------------------------------------------------------------------


def test_rollback_and_roll_forward(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    old = history_snapshot(store, scripted)
    seq = store.head[1]
    result = undo.rollback(store, scripted["create_plan"])
    assert result.changes == (
        Change("modified", NOTES, "file"),
        Change("renamed", PLAN, "file", old_path=ROAD),
    )
    assert files(store) == old["create_plan"] == {NOTES: b"alpha\nbeta\n", PROJ: None, PLAN: b"step 1\n"}
    assert_one_commit(store, seq, "rollback", result)
    assert history_snapshot(store, scripted) == old  # nothing rewritten

    # Rolling forward to the commit before the rollback brings everything back.
    assert result.commit_id is not None
    forward = undo.rollback(store, "HEAD~1")
    assert files(store) == FINAL
    assert forward.changes == (Change("modified", NOTES, "file"), Change("renamed", ROAD, "file", old_path=PLAN))

    head = store.head
    noop = undo.rollback(store, "HEAD")
    assert noop.commit_id is None and noop.note.startswith("Nothing to roll back: ")
    assert store.head == head


def test_rollback_to_empty_store(store: memvault.MemoryStore, scripted: dict[str, bytes]) -> None:
    result = undo.rollback(store, "#0")
    assert result.changes == (
        Change("deleted", NOTES, "file"),
        Change("deleted", PROJ, "dir"),
        Change("deleted", ROAD, "file"),
    )
    assert files(store) == {}
    assert read_at(store, ROAD, scripted["delete_tmp"]) == b"step 1\n"


def test_rollback_replans_when_another_writer_commits_first(
    store: memvault.MemoryStore, store_path: Path, scripted: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    real_apply = undo._apply
    calls: list[int] = []

    def racing(*args: object) -> tuple[Change, ...]:
        calls.append(len(calls))
        if len(calls) == 1:  # after planning, before the transaction: another writer commits
            other.put_file("/memories/late.md", "late\n", actor="other")
        return real_apply(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(undo, "_apply", racing)
    result = undo.rollback(store, scripted["create_plan"])
    assert len(calls) == 3  # plan, (transaction aborted on the moved head), plan again, apply
    assert Change("deleted", "/memories/late.md", "file") in result.changes
    top = log(store, limit=2)
    assert [e.command for e in top] == ["rollback", "put"]
    assert "/memories/late.md" in top[0].paths  # the metadata names what the commit changed
    assert files(store) == {NOTES: b"alpha\nbeta\n", PROJ: None, PLAN: b"step 1\n"}
    other.close()


# -- preconditioned writes ----------------------------------------------------------------------------


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_transact_returns_the_commit_it_made(store: memvault.MemoryStore) -> None:
    from memvault.paths import parse_path

    path = parse_path("/memories/t.md")
    first = store.transact(
        lambda txn: (txn.write_file(path, b"one\n"), "value")[1],
        command="put",
        paths=(path.text,),
        actor="a",
        session="",
    )
    second = store.transact(lambda txn: txn.delete(path), command="delete", paths=(path.text,), actor="a", session="")
    assert first.value == "value" and second.value is None
    assert second.seq == first.seq + 1 and first.commit_id != second.commit_id
    assert store.head == (second.commit_id, second.seq)
    meta, _tree, parent = store.commit(second.commit_id)
    assert parent == first.commit_id and meta.seq == second.seq and meta.command == "delete"


def test_write_preconditions(store: memvault.MemoryStore) -> None:
    path = "/memories/prefs.md"
    created = writes.write(store, path, "v1\n", must_not_exist=True, actor="sync", session="job-1")
    assert created.sha256 == sha(b"v1\n") == writes.content_sha256(store, path)
    assert created.commit_id == store.head[0].decode() and created.seq == store.head[1] == 1
    top = log(store, limit=1)[0]
    assert (top.command, top.actor, top.session, top.paths) == ("write", "sync", "job-1", (path,))

    head = store.head
    v1 = sha(b"v1\n")
    with pytest.raises(ConflictError) as err:
        writes.write(store, path, "other\n", must_not_exist=True)
    assert str(err.value) == f"Error: {path} already exists (expected it not to exist; now sha256 {v1[:12]}…)"
    stale = sha(b"something else")
    with pytest.raises(ConflictError) as err:
        writes.write(store, path, "v2\n", expected_sha256=stale)
    assert str(err.value) == (
        f"Error: {path} changed since you read it (expected sha256 {stale[:12]}…, now {v1[:12]}…)"
    )
    assert store.head == head and read_at(store, path) == b"v1\n"

    updated = writes.write(store, path, "v2\n", expected_sha256=created.sha256.upper())
    assert updated.sha256 == sha(b"v2\n") and read_at(store, path) == b"v2\n"
    assert updated.seq == head[1] + 1
    assert log(store, limit=1)[0].actor == "library"

    image = writes.write(store, "/memories/pic.png", b"\x89PNG\x00\xff")
    assert image.sha256 == sha(b"\x89PNG\x00\xff")
    assert memvault.MemoryTool(store).call({"command": "view", "path": "/memories/pic.png"})[0]["type"] == "image"  # type: ignore[index]

    with pytest.raises(InvalidInputError, match="64 hexadecimal digits"):
        writes.write(store, path, "x", expected_sha256="abc")
    with pytest.raises(ValueError):
        writes.write(store, path, "x", expected_sha256=updated.sha256, must_not_exist=True)
    with pytest.raises(PathNotFoundError):
        writes.content_sha256(store, "/memories/nope.md")


def test_edit_and_delete_preconditions(store: memvault.MemoryStore) -> None:
    path = "/memories/todo.md"
    memvault.MemoryTool(store).call({"command": "create", "path": path, "file_text": "a\nb\nb\n"})
    current = writes.content_sha256(store, path)
    head = store.head
    with pytest.raises(ConflictError, match="changed since you read it"):
        writes.edit(store, path, "a", "A", expected_sha256=sha(b"stale"))
    with pytest.raises(EditError, match="appears 2 times"):
        writes.edit(store, path, "b\n", "B\n", expected_sha256=current)
    with pytest.raises(EditError, match="appears 0 times"):
        writes.edit(store, path, "zzz", "B\n")
    assert store.head == head and read_at(store, path) == b"a\nb\nb\n"

    edited = writes.edit(store, path, "a\n", "A\n", expected_sha256=current)
    assert edited.sha256 == sha(b"A\nb\nb\n") == writes.content_sha256(store, path)
    assert read_at(store, path) == b"A\nb\nb\n"
    assert log(store, limit=1)[0].command == "edit"

    head = store.head
    with pytest.raises(ConflictError, match="changed since you read it"):
        writes.delete(store, path, expected_sha256=current)  # the pre-edit content
    assert store.head == head
    gone = writes.delete(store, path, expected_sha256=edited.sha256)
    assert (gone.sha256, gone.seq) == (None, head[1] + 1)
    assert tree_at(store) == []
    with pytest.raises(ConflictError) as err:
        writes.edit(store, path, "A", "a", expected_sha256=edited.sha256)
    assert str(err.value) == (
        f"Error: {path} changed since you read it (expected sha256 {edited.sha256[:12]}…, now it does not exist)"
    )
    with pytest.raises(PathNotFoundError):
        writes.delete(store, path)
    assert read_at(store, path, "HEAD~1") == b"A\nb\nb\n"  # the history keeps the deleted version


@pytest.mark.parametrize("shared", [True, False], ids=["one-store-object", "store-per-thread"])
def test_concurrent_writers_exactly_one_wins_per_round(store_path: Path, shared: bool) -> None:
    path = "/memories/counter.md"
    threads, rounds = 4, 5
    with make_store(store_path) as store:
        writes.write(store, path, "start\n")
        seq0 = store.head[1]
    handles = [memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)]
    if not shared:
        handles += [memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE) for _ in range(threads - 1)]
    barrier = threading.Barrier(threads, timeout=60)
    outcomes: list[list[str]] = [[] for _ in range(rounds)]
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        s = handles[n % len(handles)]
        try:
            for r in range(rounds):
                expected = writes.content_sha256(s, path)
                text = read_at(s, path).decode()
                barrier.wait()  # everybody has read the same version
                try:
                    writes.write(s, path, text + f"round {r} by {n}\n", expected_sha256=expected)
                    outcome = f"won:{n}"
                except ConflictError:
                    outcome = "conflict"
                with lock:
                    outcomes[r].append(outcome)
                barrier.wait()  # the round is over before anyone reads again
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
            barrier.abort()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []
    winners = []
    for r in range(rounds):
        assert sorted(outcomes[r]).count("conflict") == threads - 1, outcomes[r]
        won = [o for o in outcomes[r] if o.startswith("won:")]
        assert len(won) == 1
        winners.append(won[0].split(":")[1])
    s = handles[0]
    expected_text = "start\n" + "".join(f"round {r} by {w}\n" for r, w in enumerate(winners))
    assert read_at(s, path).decode() == expected_text
    assert s.head[1] == seq0 + rounds  # one commit per winner, none for a lost race
    for h in handles:
        h.close()


# -- CLI ----------------------------------------------------------------------------------------------


@pytest.fixture
def cli_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> memvault.MemoryStore:
    path = tmp_path / "store"
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "cli passphrase")
    monkeypatch.setenv("MEMVAULT_STORE", str(path))
    return memvault.MemoryStore.create(path, passphrase="cli passphrase", kdf=FAST_KDF)


def test_cli_revert_restore_rollback(cli_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    store = cli_store
    revs = script(store)
    short = {k: v.decode()[:10] for k, v in revs.items()}

    assert main(["revert", short["edit_notes"]]) == 0
    new = store.head[0].decode()
    assert capsys.readouterr().out == (
        f"Reverted {short['edit_notes']} (#3) in commit {new[:10]} (#7):\n  modified  /memories/notes.md\n"
    )
    top = log(store, limit=1)[0]
    assert (top.command, top.actor) == ("revert", "operator")

    assert main(["revert", short["edit_notes"]]) == 0
    assert capsys.readouterr().out.startswith(f"Nothing to revert: every path commit {short['edit_notes']} (#3)")
    assert store.head[1] == 7

    # notes.md is back to its content right after create_notes, so that revert would apply;
    # plan.md was renamed away after create_plan: a conflict.
    assert main(["revert", short["create_plan"], "--json"]) == 5
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err) == {
        "error": f"Cannot revert commit {short['create_plan']} (#2): changed after it: {PLAN}. "
        "Revert the later commits first, or use restore.",
        "exit_status": 5,
        "kind": "CONFLICT",
    }
    assert main(["revert", "#0"]) == 2
    assert "is the store's initial commit" in capsys.readouterr().err

    assert main(["restore", TMP, "--rev", "#5", "--actor", "alice"]) == 0
    new = store.head[0].decode()
    assert capsys.readouterr().out == (
        f"Restored {TMP} to {short['create_tmp']} (#5) in commit {new[:10]} (#8):\n  created   /memories/tmp.md\n"
    )
    assert log(store, limit=1)[0].actor == "alice"
    assert main(["restore", "/memories/nope.md", "--rev", "HEAD"]) == 4
    assert (
        capsys.readouterr().err == f"memvault: The path /memories/nope.md did not exist at revision {new[:10]} (#8).\n"
    )

    assert main(["rollback", "#2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "command": "rollback",
        "target": revs["create_plan"].decode(),
        "target_seq": 2,
        "commit": store.head[0].decode(),
        "seq": 9,
        "changes": [
            {"op": "renamed", "path": PLAN, "kind": "file", "old_path": ROAD},
            {"op": "deleted", "path": TMP, "kind": "file"},
        ],
        "findings": {},
        "note": "",
    }
    assert files(store) == {NOTES: b"alpha\nbeta\n", PROJ: None, PLAN: b"step 1\n"}

    assert main(["rollback", "#0"]) == 0
    new = store.head[0].decode()
    assert capsys.readouterr().out == (
        f"Rolled the store back to {log(store)[-1].commit_id[:10]} (#0) in commit {new[:10]} (#10):\n"
        "  deleted   /memories/notes.md\n"
        "  deleted   /memories/proj/\n"
        "  deleted   /memories/proj/plan.md\n"
    )
    assert main(["log", "-n", "4", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [(e["seq"], e["command"], e["actor"]) for e in entries] == [
        (10, "rollback", "operator"),
        (9, "rollback", "operator"),
        (8, "restore", "alice"),
        (7, "revert", "operator"),
    ]
    store.close()
