"""What the review UI asks of the library: history paged from a commit id with a bound on the
commits looked at (``log_page``), the ``command`` filter, a commit's diff read from the shards it
changed (``commit_diff``), blame's core on given versions (``attribute_lines``), and previews of
revert and restore that a confirmed run must match (``dry_run``, ``expect``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memvault
from conftest import make_store
from memvault import history
from memvault.edits import undo
from memvault.errors import ConflictError, InvalidInputError
from memvault.settings import StoreSettings

A = "/memories/a.md"
B = "/memories/dir/b.md"
C = "/memories/dir/c.md"


@pytest.fixture
def busy(tmp_path: Path) -> memvault.MemoryStore:
    """A store with 40 commits by two actors in four sessions, a rename, a delete and a redaction."""
    s = make_store(tmp_path / "s", StoreSettings(durability="none"))
    tool = memvault.MemoryTool(s, actor="agent", session="s0")
    tool.call({"command": "create", "path": A, "file_text": "one\ntwo\nthree\n"})
    tool.call({"command": "create", "path": B, "file_text": "bee\n"})
    for i in range(30):
        who = memvault.MemoryTool(s, actor="agent" if i % 3 else "reviewer", session=f"s{i // 10}")
        who.call({"command": "str_replace", "path": A, "old_str": "two" if i == 0 else f"two-{i - 1}",
                  "new_str": f"two-{i}"})  # fmt: skip
    tool.call({"command": "rename", "old_path": B, "new_path": C})
    tool.call({"command": "create", "path": "/memories/tmp.md", "file_text": "scratch\n"})
    tool.call({"command": "delete", "path": "/memories/tmp.md"})
    tool.call({"command": "str_replace", "path": C, "old_str": "bee", "new_str": "bee\nhive"})
    from memvault.erasure.redact import shred_version

    shred_version(s, A, "HEAD~10", reason="test")
    return s


def test_pages_from_a_cursor_cover_the_log_once_in_order(busy: memvault.MemoryStore) -> None:
    everything = [info.commit_id for info in history.iter_log(busy)]
    seen: list[str] = []
    start: str | bytes = "HEAD"
    while True:
        page = history.log_page(busy, start=start, limit=7)
        seen += [info.commit_id for info in page.commits]
        assert page.scanned == len(page.commits) <= 7
        if page.next_start is None:
            break
        start = page.next_start.encode()
    assert seen == everything and len(everything) == len(set(everything)) == busy.head[1] + 1


def test_a_rare_filter_stops_after_the_scan_bound_and_says_where_to_go_on(busy: memvault.MemoryStore) -> None:
    first = history.log_page(busy, limit=50, scan=3, command="rename")  # redact, edit, delete: no rename
    assert first.scanned == 3 and first.commits == []
    assert first.next_start is not None
    # The next commit to look at is the fourth from the head.
    assert first.next_start == history.resolve(busy, "HEAD~3").decode()
    found: list[history.CommitInfo] = []
    start = first.next_start
    while start is not None:
        page = history.log_page(busy, start=start.encode(), limit=50, scan=5, command="rename")
        assert page.scanned <= 5
        found += page.commits
        start = page.next_start
    assert [(f.command, f.paths) for f in found] == [("rename", (B, C))]


def test_command_actor_session_filters_match_iter_log(busy: memvault.MemoryStore) -> None:
    reviewer = history.log_page(busy, limit=100, actor="reviewer", session="s1")
    assert [c.seq for c in reviewer.commits] == [c.seq for c in history.iter_log(busy, actor="reviewer", session="s1")]
    assert reviewer.commits and all(c.actor == "reviewer" and c.session == "s1" for c in reviewer.commits)
    assert {c.command for c in history.iter_log(busy, command="str_replace")} == {"str_replace"}
    assert len(list(history.iter_log(busy, command="str_replace"))) == 31


def test_a_path_followed_across_a_rename_continues_on_the_next_page(busy: memvault.MemoryStore) -> None:
    whole = [c.commit_id for c in history.iter_log(busy, path=C)]
    assert len(whole) == 3  # the edit, the rename, the creation as b.md
    first = history.log_page(busy, limit=2, path=C)
    assert [c.commit_id for c in first.commits] == whole[:2]
    assert first.next_path == B  # the rename was followed back
    rest = history.log_page(busy, start=first.next_start or "", limit=10, path=first.next_path)
    assert [c.commit_id for c in rest.commits] == whole[2:]


def test_unknown_filter_is_refused(busy: memvault.MemoryStore) -> None:
    with pytest.raises(TypeError):
        history.log_page(busy, colour="red")


def test_commit_diff_is_the_diff_against_the_parent_for_every_commit(busy: memvault.MemoryStore) -> None:
    kinds = set()
    for info in history.iter_log(busy):
        commit = info.commit_id.encode()
        parent = busy.commit(commit)[2]
        got = history.commit_diff(busy, commit)
        want = history.diff(busy, parent, commit)
        assert [(d.path, d.old_path, d.old, d.new) for d in got] == [(d.path, d.old_path, d.old, d.new) for d in want]
        kinds |= {d.status for d in got}
    assert kinds == {"created", "modified", "deleted", "renamed"}


def test_commit_diff_reads_only_the_changed_shards(busy: memvault.MemoryStore) -> None:
    edit = history.resolve(busy, "HEAD~1")  # the edit of c.md (HEAD is a redaction of an old version)
    opened: list[bytes] = []
    real = busy.shard_nodes

    def spy(shard: bytes, blob_id: bytes) -> dict[bytes, memvault.format.records.Node]:  # type: ignore[name-defined]
        opened.append(shard)
        return real(shard, blob_id)

    busy.shard_nodes = spy  # type: ignore[method-assign]
    assert [d.path for d in history.commit_diff(busy, edit)] == [C]
    assert 1 <= len(opened) <= 2  # one shard, in the commit and in its parent


def test_blame_is_attribute_lines_over_the_file_versions(busy: memvault.MemoryStore) -> None:
    lines = history.blame(busy, C)
    assert [(b.text, b.actor) for b in lines] == [("bee", "agent"), ("hive", "agent")]
    versions = [c for c in history.iter_log(busy, path=C)][::-1]
    data = [busy.read_node(busy.state_at(v.commit_id.encode()).nodes[B if v.command == "create" else C])
            for v in versions]  # fmt: skip
    again = history.attribute_lines([(v.commit_id, v, d) for v, d in zip(versions, data, strict=True)])
    assert again == lines
    assert lines[0].commit_id == versions[0].commit_id and lines[1].commit_id == versions[-1].commit_id


def _notes(tmp_path: Path) -> tuple[memvault.MemoryStore, bytes]:
    s = make_store(tmp_path / "u", StoreSettings(durability="none"))
    s.put_file(A, "first\n")
    s.put_file(B, "second\n")
    target = s.head[0]
    s.put_file(A, "first, edited\n")
    return s, target


def test_revert_preview_writes_nothing_and_the_confirmed_run_makes_exactly_it(tmp_path: Path) -> None:
    s, _ = _notes(tmp_path)
    head = s.head
    preview = undo.revert(s, "HEAD", dry_run=True)
    assert s.head == head and preview.dry_run and preview.commit_id is None
    assert [(c.op, c.path) for c in preview.changes] == [("modified", A)]
    done = undo.revert(s, "HEAD", actor="ui:alice", expect=preview)
    assert done.commit_id is not None and done.changes == preview.changes and not done.dry_run
    assert history.read_at(s, A) == b"first\n"
    assert s.commit_meta(done.commit_id.encode()).actor == "ui:alice"


def test_a_confirmation_refuses_when_the_store_changed_since_the_preview(tmp_path: Path) -> None:
    s, target = _notes(tmp_path)
    preview = undo.restore(s, "/memories", target, dry_run=True)
    assert {(c.op, c.path) for c in preview.changes} == {("modified", A)}
    s.put_file("/memories/late.md", "written after the preview\n")
    head = s.head
    with pytest.raises(ConflictError, match="previewed"):
        undo.restore(s, "/memories", target, expect=preview)
    assert s.head == head  # nothing written
    with pytest.raises(InvalidInputError):
        undo.revert(s, "HEAD", expect=preview)  # a preview of another command
    assert s.head == head
