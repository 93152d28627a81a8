"""Reviewing a dream branch: list, diff (flags, audit before/after), merge (fast and three-way, one
commit on main recording the dream, undone by revert), a blocked conflicting merge, discard
shredding the branch's own versions, and the CLI for each (text and JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, all_store_bytes, make_store
from memvault import history
from memvault.cli import main
from memvault.dream.review import (
    DreamConflictError,
    discard_dream,
    dream_diff,
    list_dreams,
    merge_dream,
)
from memvault.edits import undo
from memvault.errors import (
    ConflictError,
    IntegrityError,
    InvalidInputError,
    InvalidPathError,
    PathNotFoundError,
    RedactedError,
)
from memvault.protocol.commands import run_command
from memvault.settings import StoreSettings
from memvault.store import BranchStore

DREAM = "0123456789abcdef"
OTHER = "fedcba9876543210"
INDEX = "/memories/MEMORY.md"
CANARY = "CANARY-rejected-rewrite-7f3a"


def _run(target: memvault.MemoryStore | BranchStore, **command: str) -> str:
    return str(run_command(target, command, actor="agent" if isinstance(target, memvault.MemoryStore) else "dream",
                           session="s"))  # fmt: skip


def _read(target: memvault.MemoryStore | BranchStore, path: str) -> str:
    return history.read_at(target, path).decode("utf-8")


@pytest.fixture
def store(tmp_path: Path) -> memvault.MemoryStore:
    s = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _run(s, command="create", path=INDEX, file_text="- [facts](facts.md)\n- [gone](gone.md)\n")
    _run(s, command="create", path="/memories/facts.md", file_text="one\ntwo\nthree\nfour\nfive\n")
    _run(s, command="create", path="/memories/dup-a.md", file_text="the user prefers tea\n")
    _run(s, command="create", path="/memories/dup-b.md", file_text="the user prefers tea\n")
    return s


def _dream(store: memvault.MemoryStore, dream_id: str = DREAM) -> BranchStore:
    branch = store.branch(f"dream/{dream_id}")
    branch.create(actor="dream", session=dream_id, extra={"model": "test-model"})
    return branch


def _consolidate(branch: BranchStore) -> None:
    _run(branch, command="delete", path="/memories/dup-b.md")
    _run(branch, command="str_replace", path=INDEX, old_str="- [gone](gone.md)\n", new_str="- [tea](dup-a.md)\n")
    _run(branch, command="str_replace", path="/memories/facts.md", old_str="one\n", new_str="ONE\n")
    _run(
        branch,
        command="str_replace",
        path="/memories/dup-a.md",
        old_str="the user prefers tea",
        new_str="tea, no sugar (from dup-a, dup-b)",
    )


def test_list_and_diff_show_the_dream_and_leave_main_alone(store: memvault.MemoryStore) -> None:
    head = store.head
    branch = _dream(store)
    _consolidate(branch)
    assert store.head == head  # main untouched
    assert _read(store, INDEX) == "- [facts](facts.md)\n- [gone](gone.md)\n"
    [info] = list_dreams(store)
    assert (info.id, info.branch, info.status, info.model, info.actor, info.commits) == (
        DREAM, f"dream/{DREAM}", "open", "test-model", "dream", 4,
    )  # fmt: skip
    assert info.fork_point == head[0].decode()
    d = dream_diff(store, DREAM)
    assert [(f.path, f.status) for f in d.files] == [
        (INDEX, "modified"), ("/memories/dup-a.md", "modified"), ("/memories/dup-b.md", "deleted"),
        ("/memories/facts.md", "modified"),
    ]  # fmt: skip
    assert d.flags == {"/memories/dup-b.md": "deleted", "/memories/dup-a.md": "rewritten"}
    assert d.main_moved is False
    before = sorted((f.kind, f.path) for f in d.audit_before.findings)
    after = sorted((f.kind, f.path) for f in d.audit_after.findings)
    assert before == [
        ("dangling-link", "/memories/gone.md"), ("duplicate", "/memories/dup-a.md"),
        ("orphan", "/memories/dup-a.md"), ("orphan", "/memories/dup-b.md"),
    ]  # fmt: skip
    assert after == []
    doc = d.to_json()
    assert doc["files"][2] == {
        "path": "/memories/dup-b.md", "old_path": "/memories/dup-b.md", "status": "deleted", "flag": "deleted",
        "added": 0, "removed": 1, "old": "the user prefers tea\n", "new": None,
    }  # fmt: skip


def test_fast_merge_is_one_commit_recording_the_dream_and_revert_undoes_it(store: memvault.MemoryStore) -> None:
    fork = store.head
    branch = _dream(store)
    _consolidate(branch)
    dream_head = branch.head[0].decode()
    result = merge_dream(store, DREAM, actor="alice", session="review-1")
    assert result.seq == fork[1] + 1 and result.three_way is False
    assert result.changed == [INDEX, "/memories/dup-a.md", "/memories/dup-b.md", "/memories/facts.md"]
    meta = store.commit_meta(result.commit.encode())
    assert (meta.command, meta.actor, meta.session, meta.branch) == ("dream-merge", "alice", "review-1", "")
    assert meta.extra == {"dream": DREAM, "fork": fork[0].decode(), "model": "test-model", "dream_head": dream_head}
    assert _read(store, INDEX) == "- [facts](facts.md)\n- [tea](dup-a.md)\n"
    assert _read(store, "/memories/facts.md") == "ONE\ntwo\nthree\nfour\nfive\n"
    with pytest.raises(PathNotFoundError):
        _read(store, "/memories/dup-b.md")
    [info] = list_dreams(store)
    assert info.status == "merged" and info.merge_commit == result.commit
    with pytest.raises(InvalidInputError, match="merged already"):
        merge_dream(store, DREAM)
    undo.revert(store, result.commit, actor="alice")
    assert _read(store, INDEX) == "- [facts](facts.md)\n- [gone](gone.md)\n"
    assert _read(store, "/memories/dup-b.md") == "the user prefers tea\n"


def test_three_way_merge_after_main_moved(store: memvault.MemoryStore) -> None:
    branch = _dream(store)
    _consolidate(branch)
    _run(store, command="str_replace", path="/memories/facts.md", old_str="five\n", new_str="FIVE\n")
    _run(store, command="create", path="/memories/new-on-main.md", file_text="kept\n")
    result = merge_dream(store, DREAM)
    assert result.three_way is True
    assert _read(store, "/memories/facts.md") == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert _read(store, "/memories/new-on-main.md") == "kept\n"
    assert _read(store, INDEX) == "- [facts](facts.md)\n- [tea](dup-a.md)\n"


def test_a_conflict_blocks_the_merge_and_nothing_changes(store: memvault.MemoryStore) -> None:
    branch = _dream(store)
    _consolidate(branch)
    _run(store, command="str_replace", path="/memories/facts.md", old_str="one\n", new_str="uno\n")
    _run(store, command="str_replace", path="/memories/dup-b.md", old_str="tea", new_str="green tea")
    head = store.head
    with pytest.raises(DreamConflictError) as caught:
        merge_dream(store, DREAM)
    err = caught.value
    assert [(c.path, c.reason) for c in err.conflicts] == [
        ("/memories/dup-b.md", "deleted by the dream, changed on main"),
        ("/memories/facts.md", "both changed the same lines"),
    ]
    assert "uno" not in str(err) and "ONE" not in str(err)  # the message names files, not content
    assert "<<<<<<< main\nuno\n" in err.conflicts[1].render()
    assert store.head == head
    assert list_dreams(store)[0].status == "open"


def test_discard_shreds_the_branch_versions_only(store: memvault.MemoryStore, tmp_path: Path) -> None:
    branch = _dream(store)
    _consolidate(branch)
    _run(branch, command="create", path="/memories/secret.md", file_text=f"{CANARY}\n")
    versions = branch.branch_commits()
    result = discard_dream(store, DREAM, actor="alice")
    # the dream wrote: the index, facts.md, secret.md (3 files) and their new versions; dup-b's deletion
    # wrote nothing. Each file version and directory node it sealed has its own key.
    assert result.keys_destroyed >= 3 and result.commit
    meta = store.commit_meta(result.commit.encode())
    assert (meta.command, meta.actor) == ("redact", "alice")
    assert store.branches() == [] and list_dreams(store) == []
    # main is whole
    assert _read(store, "/memories/facts.md") == "one\ntwo\nthree\nfour\nfive\n"
    assert _read(store, "/memories/dup-b.md") == "the user prefers tea\n"
    # the branch's objects are still in git, but their keys are gone: a commit of the dream opens
    # (metadata), its versions do not.
    store.close()
    again = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    ghost = again.branch(f"dream/{DREAM}")
    with pytest.raises(InvalidInputError):
        ghost.head  # noqa: B018 - the branch ref is gone
    state = again.state_at(again.head[0])
    assert all(not n.redacted for n in state.nodes.values())
    for commit in versions:  # main never authenticates a commit of the dream
        with pytest.raises(IntegrityError):
            again.opened_commit(commit)
    for _name, data in all_store_bytes(tmp_path / "s"):
        assert CANARY.encode() not in data


def test_discard_makes_branch_versions_unreadable(store: memvault.MemoryStore) -> None:
    branch = _dream(store)
    _run(branch, command="create", path="/memories/secret.md", file_text="rejected\n")
    head = branch.head[0]
    node = branch.state_at(head).nodes["/memories/secret.md"]
    assert branch.read_node(node) == b"rejected\n"
    store.forget_cached_plaintext()
    discard_dream(store, DREAM)
    store.forget_cached_plaintext()
    assert store.keyring.is_destroyed(node.dek_id)
    with pytest.raises((RedactedError, IntegrityError)):
        store.read_node(node)


def test_bad_and_unknown_ids(store: memvault.MemoryStore) -> None:
    for bad in ("xyz", "0123", "dream/../main", "DREAM0123456789AB"):
        with pytest.raises(InvalidInputError, match="16 hex digits"):
            dream_diff(store, bad)
    with pytest.raises(InvalidInputError, match="No dream fedcba9876543210"):
        merge_dream(store, OTHER)


# -- the CLI ------------------------------------------------------------------------------------------


@pytest.fixture
def cli_store(store: memvault.MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> memvault.MemoryStore:
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.delenv("MEMVAULT_KEY", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "s"))
    return store


def test_cli_list_diff_merge(cli_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    branch = _dream(cli_store)
    _consolidate(branch)
    cli_store.close()
    assert main(["dream", "list", "--json"]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert (doc["id"], doc["status"], doc["commits"], doc["model"]) == (DREAM, "open", 4, "test-model")
    assert main(["dream", "list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{DREAM}  open  ") and "  4 commit(s)  test-model\n" in out
    assert main(["dream", "diff", DREAM]) == 0
    out = capsys.readouterr().out
    assert "  ! deleted   /memories/dup-b.md\n" in out and "  ! rewritten /memories/dup-a.md\n" in out
    assert "  fixed  dangling-link  /memories/gone.md\n" in out
    assert "-one\n+ONE\n" in out
    assert main(["dream", "diff", DREAM, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dream"]["id"] == DREAM
    assert main(["dream", "merge", DREAM, "--actor", "alice"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Merged dream {DREAM} as commit #5 ") and "fast (main had not moved)" in out
    assert "Undo with: memvault revert " in out
    assert main(["dream", "merge", DREAM]) == 2
    assert "merged already" in capsys.readouterr().err


def test_cli_conflict_is_shown_and_exits_5(cli_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    branch = _dream(cli_store)
    _consolidate(branch)
    _run(cli_store, command="str_replace", path="/memories/facts.md", old_str="one\n", new_str="uno\n")
    cli_store.close()
    assert main(["dream", "merge", DREAM]) == 5
    out, err = capsys.readouterr()
    assert "<<<<<<< main\nuno\n||||||| fork\none\n=======\nONE\n>>>>>>> dream\n" in out
    assert err.startswith(f"memvault: The dream {DREAM} conflicts with changes made on main")
    assert main(["dream", "merge", DREAM, "--json"]) == 5
    out, _err = capsys.readouterr()
    assert json.loads(out) == {
        "merged": False, "conflicts": [{"path": "/memories/facts.md", "reason": "both changed the same lines"}],
    }  # fmt: skip


def test_cli_discard(cli_store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    branch = _dream(cli_store)
    _run(branch, command="create", path="/memories/x.md", file_text="x\n")
    cli_store.close()
    assert main(["dream", "discard", DREAM, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dream"] == DREAM and doc["keys_destroyed"] == 1 and len(doc["commit"]) == 40
    assert main(["dream", "list"]) == 0
    assert capsys.readouterr().out == "No dreams.\n"
    assert main(["dream", "discard", DREAM]) == 2


def test_the_dream_writes_through_the_scrubber_and_path_grammar(store: memvault.MemoryStore) -> None:
    branch = _dream(store)
    _run(branch, command="create", path="/memories/contact.md", file_text="mail tomas.patel@monarchsolutions.de\n")
    assert _read(branch, "/memories/contact.md") == "mail [REDACTED:email]\n"
    [commit] = branch.branch_commits()[:1]
    assert branch.commit_meta(commit).findings == {"email": 1}
    with pytest.raises(InvalidPathError):
        _run(branch, command="create", path="/etc/cron.d/x", file_text="x\n")
    assert len(branch.branch_commits()) == 2  # the fork and the scrubbed create


def test_discard_removes_a_packed_branch(store: memvault.MemoryStore, tmp_path: Path) -> None:
    """After ``git pack-refs`` (what ``git gc`` runs) the branch lives in packed-refs, or in both
    places with the loose ref newer: discarding removes it from both, it does not come back."""
    from dulwich.repo import Repo

    branch = _dream(store)
    _run(branch, command="create", path="/memories/x.md", file_text="x\n")
    repo = Repo(str(tmp_path / "s" / "repo"))
    repo.refs.pack_refs(all=True)
    assert not (tmp_path / "s" / "repo" / "refs" / "heads" / "dream" / DREAM).exists()
    _run(branch, command="create", path="/memories/y.md", file_text="y\n")  # a loose ref over the packed one
    assert (tmp_path / "s" / "repo" / "refs" / "heads" / "dream" / DREAM).exists()
    discard_dream(store, DREAM)
    repo.refs._invalidate_packed_refs_cache()  # noqa: SLF001 - see what is on disk now
    assert b"refs/heads/dream/" + DREAM.encode() not in repo.refs.get_packed_refs()
    assert store.branches() == [] and list_dreams(store) == []
    repo.close()


def test_a_gap_in_a_branch_is_refused(store: memvault.MemoryStore) -> None:
    """A key holder's commit on the branch that skips a sequence number does not authenticate the branch."""
    from memvault.format import records
    from memvault.format.records import CommitMeta
    from memvault.git.repo import GitStore

    branch = _dream(store)
    head, seq = branch.head
    tree = branch.commit(head)[1]
    meta = CommitMeta(seq + 2, 1.0, "mallory", "", "create", (), {}, branch=branch.name)
    keys = store._keys  # noqa: SLF001 - forging needs the keys
    sealed = records.seal_meta(keys.meta, store.store_id, meta)
    tag = records.commit_tag(keys.chain, store.store_id, seq + 2, head, tree, sealed, branch=branch.name)
    commit = GitStore.commit(tree, head, records.commit_message(sealed, tag))
    store.git.write([commit])
    ref = tmp = store.git.side_branch(branch.name)
    assert ref.compare_and_swap(head, commit.id)
    del tmp
    with pytest.raises(IntegrityError, match="not contiguous"):
        store.branch(branch.name).head  # noqa: B018


# -- what an adversarial review found ---------------------------------------------------------------


def test_merged_status_comes_from_main_and_survives_more_branch_commits(store: memvault.MemoryStore) -> None:
    branch = _dream(store)
    _consolidate(branch)
    result = merge_dream(store, DREAM)
    _run(branch, command="create", path="/memories/late.md", file_text="late\n")  # the pass wrote on
    [info] = list_dreams(store)
    assert (info.status, info.merge_commit) == ("merged", result.commit)
    with pytest.raises(InvalidInputError, match="merged already"):
        merge_dream(store, DREAM)


def test_merge_refuses_a_branch_that_moved_since_review(store: memvault.MemoryStore) -> None:
    branch = _dream(store)
    _consolidate(branch)
    reviewed = dream_diff(store, DREAM).info.head
    _run(branch, command="delete", path="/memories/facts.md")  # after the review
    head = store.head
    with pytest.raises(ConflictError, match="not at the reviewed"):
        merge_dream(store, DREAM, expect_head=reviewed[:12])
    assert store.head == head
    with pytest.raises(ConflictError):
        merge_dream(store, DREAM, expect_head="abc")  # too short to name a commit
    result = merge_dream(store, DREAM, expect_head=branch.head[0].decode()[:7])
    assert "/memories/facts.md" in result.changed


def test_a_three_way_merge_is_scrubbed_whole(store: memvault.MemoryStore) -> None:
    """A value that is a secret only next to main's new context line is masked in the merge."""
    secret = "Zk8Qp2Rv7Xw3Ly5Nt9Bm4Hc6Jd1Fg0Ks/Ta+Ue2W"
    _run(store, command="create", path="/memories/ops.md", file_text="ops\n\nnotes\n")
    branch = _dream(store)
    _run(branch, command="str_replace", path="/memories/ops.md", old_str="notes\n", new_str=f"notes\n{secret}\n")
    assert _read(branch, "/memories/ops.md") == f"ops\n\nnotes\n{secret}\n"  # alone it is not flagged
    _run(store, command="str_replace", path="/memories/ops.md", old_str="ops\n", new_str="aws secret access key:\n")
    result = merge_dream(store, DREAM)
    merged = _read(store, "/memories/ops.md")
    assert secret not in merged
    assert merged == "aws secret access key:\n\nnotes\n[REDACTED:aws_secret_access_key]\n"
    assert store.commit_meta(result.commit.encode()).findings == {"aws_secret_access_key": 1}


def test_a_renamed_file_keeps_its_lineage_through_the_merge(store: memvault.MemoryStore) -> None:
    before = store.state_at(store.head[0]).nodes["/memories/facts.md"]
    branch = _dream(store)
    _run(branch, command="rename", old_path="/memories/facts.md", new_path="/memories/known-facts.md")
    merge_dream(store, DREAM)
    after = store.state_at(store.head[0]).nodes["/memories/known-facts.md"]
    assert after.file_id == before.file_id and after.version > before.version
    assert "/memories/facts.md" not in store.state_at(store.head[0]).nodes


def test_a_branch_write_after_a_rotation_elsewhere_is_refused(store: memvault.MemoryStore, tmp_path: Path) -> None:
    from memvault.admin import keys as keymgmt
    from memvault.errors import KeyRotatedError

    branch = _dream(store)
    head = branch.head[0]
    other = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    keymgmt.rotate(other, passphrase=PASSPHRASE, kdf=FAST_KDF)
    other.close()
    with pytest.raises((KeyRotatedError, IntegrityError), match="rotated"):
        _run(branch, command="create", path="/memories/c.md", file_text="c\n")
    assert store.git.side_branch(branch.name).head() == head  # nothing written


def test_directory_and_file_swaps_and_case_renames_merge(store: memvault.MemoryStore) -> None:
    _run(store, command="create", path="/memories/d/x.md", file_text="x\n")
    _run(store, command="create", path="/memories/note.md", file_text="n\n")
    branch = _dream(store)
    _run(branch, command="delete", path="/memories/d")
    _run(branch, command="create", path="/memories/d", file_text="d is a file now\n")
    _run(branch, command="rename", old_path="/memories/note.md", new_path="/memories/Note.md")
    merge_dream(store, DREAM)
    assert _read(store, "/memories/d") == "d is a file now\n"
    assert _read(store, "/memories/Note.md") == "n\n"


def test_a_directory_on_main_where_the_dream_made_a_file_is_a_conflict(store: memvault.MemoryStore) -> None:
    branch = _dream(store)
    _run(branch, command="create", path="/memories/n", file_text="file\n")
    _run(store, command="create", path="/memories/n/inside.md", file_text="dir\n")
    head = store.head
    with pytest.raises(DreamConflictError) as caught:
        merge_dream(store, DREAM)
    assert [(c.path, c.reason) for c in caught.value.conflicts] == [
        ("/memories/n", "a directory on main, a file in the dream")
    ]
    assert caught.value.conflicts[0].render() == "CONFLICT (a directory on main, a file in the dream): /memories/n\n"
    assert store.head == head


def test_a_redaction_on_main_does_not_block_an_unrelated_dream(store: memvault.MemoryStore) -> None:
    from memvault.erasure.redact import shred_file

    branch = _dream(store)
    _run(branch, command="str_replace", path="/memories/facts.md", old_str="one\n", new_str="ONE\n")
    shred_file(store, "/memories/dup-b.md", actor="operator", reason="gdpr")
    result = merge_dream(store, DREAM)
    assert result.changed == ["/memories/facts.md"]
