"""``memvault verify`` on a store with a dream branch: the branch is walked from its head down to its
fork commit, each commit authenticated in the branch's domain, its trees, shards and file versions
checked as ``main``'s are, and its data keys counted as used. Forged and spliced branches, a branch
ref that names no commit, a damaged blob of a branch commit, and a discarded dream (its keys
destroyed) are each reported with an exact code and message."""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from dulwich.objects import Commit
from dulwich.repo import Repo

import memvault
from conftest import PASSPHRASE, keyring_records, make_store, rewrite_packed_object
from memvault import history
from memvault.cli import main
from memvault.errors import IntegrityError, RollbackDetectedError
from memvault.format import records
from memvault.format.records import CommitMeta
from memvault.git.repo import GitStore
from memvault.protocol.commands import run_command
from memvault.verify import Problem, VerifyReport, verify

NAME = "dream/0123456789abcdef"
CANARY = "canary-5d1e branch plaintext that must never appear in a report"


@dataclass
class Seeded:
    path: Path
    main: list[bytes]  #: main's commits by seq (#0 init, #1, #2)
    branch: list[bytes]  #: the branch's commits, oldest first: fork (#3), create b.md (#4), edit a.md (#5)


def _seed(path: Path) -> Seeded:
    """main: #1 creates a.md, #2 notes/n.md; the branch forks at #2, creates b.md, edits a.md."""
    store = make_store(path)
    tool = memvault.MemoryTool(store, actor="claude", session="s-1")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"})
    tool.call({"command": "create", "path": "/memories/notes/n.md", "file_text": "november\n"})
    main_ids = [c for c, *_ in history.walk(store)][::-1]
    branch = store.branch(NAME)
    branch.create(actor="dream", session="x")
    for command in (
        {"command": "create", "path": "/memories/b.md", "file_text": f"bravo {CANARY}\n"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "ALPHA"},
    ):
        result = run_command(branch, command, actor="dream", session="x")
        assert isinstance(result, str) and not result.startswith("Error"), result
    branch_ids = branch.branch_commits()[::-1]
    assert [branch.commit_meta(c).seq for c in branch_ids] == [3, 4, 5]
    assert store.head == (main_ids[-1], 2)
    store.close()
    return Seeded(path, main_ids, branch_ids)


@pytest.fixture
def seeded(store_path: Path) -> Seeded:
    return _seed(store_path)


def _open(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE, check_head=False)


def _verify(path: Path) -> VerifyReport:
    with _open(path) as store:
        return verify(store)


def _codes(report: VerifyReport) -> list[tuple[str, str]]:
    return [(p.severity, p.code) for p in report.problems]


def _ref(path: Path, name: str) -> Path:
    return path.joinpath("repo", "refs", "heads", *name.split("/"))


def _set_ref(path: Path, name: str, value: bytes) -> None:
    _ref(path, name).write_bytes(value + b"\n")


def _reachable(path: Path, refs: list[bytes]) -> tuple[int, set[bytes]]:
    """Independently of memvault: (commits, every object) reachable from ``refs``."""
    repo = Repo(str(path / "repo"))
    seen: set[bytes] = set()
    commits = 0
    for ref in refs:
        commit_id: bytes | None = repo.refs[ref]
        while commit_id is not None and commit_id not in seen:
            commit = repo[commit_id]
            assert isinstance(commit, Commit)
            seen.add(commit_id)
            commits += 1
            stack = [commit.tree]
            while stack:
                tree_id = stack.pop()
                if tree_id in seen:
                    continue
                seen.add(tree_id)
                for entry in repo[tree_id].iteritems():  # type: ignore[attr-defined]
                    if entry.mode == 0o040000:
                        stack.append(entry.sha)
                    else:
                        seen.add(entry.sha)
            commit_id = commit.parents[0] if commit.parents else None
    return commits, seen


def _write_commit(path: Path, tree_id: bytes, parent: bytes, meta: CommitMeta, *, tag_branch: str = "") -> bytes:
    """A commit sealed and tagged with the store's own keys, in main's domain (``tag_branch``
    empty) or a branch's: what only a key holder can make. Nothing moves."""
    store = _open(path)
    try:
        keys = store._keys
        sealed = records.seal_meta(keys.meta, store.store_id, meta)
        tag = records.commit_tag(keys.chain, store.store_id, meta.seq, parent, tree_id, sealed, branch=tag_branch)
        commit = GitStore.commit(tree_id, parent, records.commit_message(sealed, tag))
        store.git.write([commit])
        return commit.id
    finally:
        store.close()


def _tree(path: Path, commit_id: bytes) -> bytes:
    with _open(path) as store:
        return store.git.read_commit(commit_id)[0]


def _meta(seq: int, command: str, *, branch: str = "", extra: dict[str, str] | None = None) -> CommitMeta:
    return CommitMeta(seq, 1.0, "mallory", "", command, (), {}, branch=branch, extra=extra or {})


def _flip_object_byte(path: Path, obj_id: bytes) -> None:
    """Flip one byte of the object's content (re-deflated: only git's checksum can tell)."""

    def flip(raw: bytes) -> bytes:
        out = bytearray(raw)
        out[len(out) // 2] ^= 0x01
        return bytes(out)

    h = obj_id.decode()
    loose = path / "repo" / "objects" / h[:2] / h[2:]
    if not loose.exists():
        rewrite_packed_object(path, obj_id, flip)
        return
    raw = zlib.decompress(loose.read_bytes())
    os.chmod(loose, 0o600)
    loose.write_bytes(zlib.compress(flip(raw)))


# -- a healthy store with a branch ---------------------------------------------------------------------


def test_store_with_a_branch_verifies_clean_and_its_keys_are_used(seeded: Seeded) -> None:
    commits, objects = _reachable(seeded.path, [b"refs/heads/main", f"refs/heads/{NAME}".encode()])
    assert commits == 6
    data = (seeded.path / "keyring").read_bytes()
    dek_records = sum(1 for t, _s, _e in keyring_records(data) if t == 1)
    assert dek_records == 5  # a.md, notes/, n.md on main; b.md and a.md's second version on the branch
    calls: list[tuple[int, int]] = []
    with _open(seeded.path) as store:
        report = verify(store, progress=lambda done, total: calls.append((done, total)))
    # No orphan-key warning: the keys of the branch's versions are used (by the branch).
    assert report.problems == []
    assert (report.commits, report.objects, report.versions, report.keys) == (6, len(objects), 4, 5)
    assert (report.head, report.head_seq) == (seeded.main[-1].decode(), 2)
    assert calls == [(i, 6) for i in range(7)]


def test_discarded_dream_keys_destroyed_is_not_an_error(seeded: Seeded) -> None:
    """A discarded dream: the keys of the branch's own versions are destroyed (as a redaction),
    first with its ref still there, then without it."""
    store = _open(seeded.path)
    branch = store.branch(NAME)
    with branch.reading() as view:
        own = {n.dek_id for path in ("/memories/b.md", "/memories/a.md") if (n := view.get(path)) is not None}
    assert len(own) == 2
    store.destroy_keys(own, {"time": time.time(), "actor": "dream", "reason": "discarded"}, actor="dream")
    store.close()
    report = _verify(seeded.path)
    assert report.problems == []
    # main's #3 is the redact commit; the branch's versions are redacted, main's two remain.
    assert (report.commits, report.versions, report.keys, report.head_seq) == (7, 2, 3, 3)
    with _open(seeded.path) as store:
        assert store.branch(NAME).delete()
    report = _verify(seeded.path)
    assert report.problems == []
    assert (report.commits, report.versions, report.keys) == (4, 2, 3)


# -- forged and spliced branches ------------------------------------------------------------------------


def test_commit_in_mains_domain_on_a_branch_is_bad_branch(seeded: Seeded) -> None:
    """A key holder's commit tagged for main, put on top of the branch: the branch no longer opens."""
    head = seeded.branch[-1]
    forged = _write_commit(seeded.path, _tree(seeded.path, head), head, _meta(6, "create"))
    _set_ref(seeded.path, NAME, forged)
    with _open(seeded.path) as store:
        with pytest.raises(IntegrityError):
            store.branch(NAME).branch_commits()
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "bad-branch",
            f"The dream branch {NAME} holds commit {forged.decode()}, which authenticates as a commit of main, not "
            "of the branch: commits were put on the branch by something other than memvault.",
            None, forged.decode(), None, NAME,
        )
    ]  # fmt: skip
    # The branch's own commits were still followed: their versions checked, their keys used.
    assert (report.commits, report.versions) == (7, 4)


def test_commit_that_authenticates_nowhere_on_a_branch_is_bad_branch(seeded: Seeded) -> None:
    head = seeded.branch[-1]
    repo = Repo(str(seeded.path / "repo"))
    real = repo[head]
    assert isinstance(real, Commit)
    last = real.message[-2:-1]  # one digit of the Memvault-Tag changed
    message = real.message[:-2] + (b"0" if last != b"0" else b"1") + b"\n"
    forged = GitStore.commit(real.tree, real.parents[0], message)
    with _open(seeded.path) as store:
        store.git.write([forged])
    _set_ref(seeded.path, NAME, forged.id)
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "bad-branch", f"The dream branch {NAME} does not open: A commit of the store is not authentic.",
            None, forged.id.decode(), None, NAME,
        )
    ]  # fmt: skip
    # The forged commit (the head's tree) and the branch's commits below it were still checked.
    assert (report.commits, report.versions) == (6, 4)


def test_fork_commit_on_a_commit_that_is_not_mains_is_bad_branch(seeded: Seeded) -> None:
    """A fork commit (authentic in the branch's domain) whose parent does not authenticate on main."""
    head = seeded.main[-1]
    tree = _tree(seeded.path, head)
    repo = Repo(str(seeded.path / "repo"))
    real = repo[head]
    assert isinstance(real, Commit)
    not_main = GitStore.commit(real.tree, real.parents[0], real.message.replace(b"Memvault-Tag: ", b"Memvault-Tag: 0"))
    with _open(seeded.path) as store:
        store.git.write([not_main])
    fork = _write_commit(
        seeded.path, tree, not_main.id, _meta(3, "fork", branch=NAME, extra={"fork": not_main.id.decode()}),
        tag_branch=NAME,
    )  # fmt: skip
    _set_ref(seeded.path, NAME, fork)
    report = _verify(seeded.path)
    assert _codes(report) == [("error", "bad-branch"), ("warning", "orphan-key"), ("warning", "orphan-key")]
    assert report.problems[0] == Problem(
        "error", "bad-branch", f"The dream branch {NAME} does not open: A commit of the store is not authentic.",
        None, fork.decode(), None, NAME,
    )  # fmt: skip


def test_fork_commit_naming_another_fork_point_is_bad_branch(seeded: Seeded) -> None:
    head = seeded.main[-1]
    fork = _write_commit(
        seeded.path, _tree(seeded.path, head), head,
        _meta(3, "fork", branch=NAME, extra={"fork": seeded.main[1].decode()}), tag_branch=NAME,
    )  # fmt: skip
    _set_ref(seeded.path, NAME, fork)
    report = _verify(seeded.path)
    assert report.problems[0] == Problem(
        "error", "bad-branch",
        f"The dream branch {NAME} does not open: The fork commit of the dream branch {NAME} is not authentic.",
        None, fork.decode(), None, NAME,
    )  # fmt: skip
    assert _codes(report) == [("error", "bad-branch"), ("warning", "orphan-key"), ("warning", "orphan-key")]
    with _open(seeded.path) as store, pytest.raises(IntegrityError, match="fork commit .* is not authentic"):
        store.branch(NAME).check_fork()  # the library refuses it too


def test_branch_forked_from_a_commit_off_mains_history_is_bad_branch(seeded: Seeded) -> None:
    """An authentic commit of main's domain that main never pointed at, and a branch forked from it."""
    tree1 = _tree(seeded.path, seeded.main[1])
    aside = _write_commit(seeded.path, tree1, seeded.main[1], _meta(2, "create"))
    fork = _write_commit(
        seeded.path, tree1, aside, _meta(3, "fork", branch=NAME, extra={"fork": aside.decode()}), tag_branch=NAME
    )
    _set_ref(seeded.path, NAME, fork)
    report = _verify(seeded.path)
    assert report.problems[0] == Problem(
        "error", "bad-branch",
        f"The dream branch {NAME} forks from commit {aside.decode()}, which is not in main's history.",
        None, fork.decode(), 3, NAME,
    )  # fmt: skip
    # The ref was also moved off the branch's recorded head (#5): a rollback too.
    assert _codes(report) == [
        ("error", "bad-branch"), ("error", "rollback"), ("warning", "orphan-key"), ("warning", "orphan-key"),
    ]  # fmt: skip
    with _open(seeded.path) as store:
        branch = store.branch(NAME)
        with pytest.raises(RollbackDetectedError):
            branch.check_fork()  # the library refuses it (review and merge check it)
        branch.check_mark = False
        with pytest.raises(IntegrityError, match="not in main's history"):
            branch.check_fork()  # and would for the fork point alone


def test_branch_ref_pointing_at_a_main_commit_is_bad_branch(seeded: Seeded) -> None:
    _set_ref(seeded.path, NAME, seeded.main[1])
    with _open(seeded.path) as store:
        with pytest.raises(IntegrityError):
            store.branch(NAME).branch_commits()
    report = _verify(seeded.path)
    assert report.problems[0] == Problem(
        "error", "bad-branch",
        f"The dream branch {NAME} points at commit {seeded.main[1].decode()} of main: a branch's commits "
        "authenticate only on that branch, and it has no fork commit.",
        None, seeded.main[1].decode(), None, NAME,
    )  # fmt: skip
    # The branch's own two versions are no longer reachable: their keys are orphans.
    assert _codes(report) == [("error", "bad-branch"), ("warning", "orphan-key"), ("warning", "orphan-key")]
    assert report.commits == 3


def test_main_pointed_at_a_branch_commit_is_refused_and_reported(seeded: Seeded) -> None:
    (seeded.path / "repo" / "refs" / "heads" / "main").write_bytes(seeded.branch[-1] + b"\n")
    with pytest.raises(IntegrityError):
        memvault.MemoryStore.open(seeded.path, passphrase=PASSPHRASE)
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "forged-commit",
            f"Commit #{seq} {commit.decode()} is a commit of the dream branch {NAME}, not of main: it authenticates "
            "only on that branch.",
            None, commit.decode(), seq,
        )
        for seq, commit in ((5, seeded.branch[2]), (4, seeded.branch[1]), (3, seeded.branch[0]))
    ]  # fmt: skip


def test_branch_ref_that_is_not_a_commit_id_is_bad_ref(seeded: Seeded) -> None:
    _ref(seeded.path, NAME).write_bytes(b"not a commit id\n")
    report = _verify(seeded.path)
    # The branch's versions cannot be reached, so no key is called an orphan.
    assert report.problems == [
        Problem(
            "error", "bad-ref",
            f"The dream branch {NAME} (refs/heads/{NAME}) is damaged: it does not hold a commit id.",
            None, None, None, NAME,
        )
    ]  # fmt: skip


def test_ref_that_is_not_a_dream_branch_is_a_warning(seeded: Seeded) -> None:
    _set_ref(seeded.path, "dream/not-a-branch\x1b", seeded.main[-1])
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "warning", "stray-ref",
            "The ref refs/heads/dream/not-a-branch? is not a dream branch (dream/ and 16 lowercase hex digits): "
            "memvault never writes it, and ignores it.",
        )
    ]  # fmt: skip
    assert report.ok


# -- damage to a branch's objects --------------------------------------------------------------------


def test_damaged_blob_of_a_branch_commit_is_bad_blob(seeded: Seeded) -> None:
    with _open(seeded.path) as store:
        node = store.branch(NAME).snapshot().get("/memories/b.md")
    assert node is not None
    _flip_object_byte(seeded.path, node.blob_id)
    report = _verify(seeded.path)
    assert report.problems == [
        Problem(
            "error", "bad-blob",
            f"Content blob {node.blob_id.decode()} of /memories/b.md (version 1) is damaged: the object does not "
            "match its id.",
            "/memories/b.md", seeded.branch[1].decode(), 4, NAME,
        )
    ]  # fmt: skip
    text = json.dumps(report.to_json())
    assert CANARY not in text and "bravo" not in text
    assert report.to_json()["problems"][0]["branch"] == NAME


def test_cli_verify_names_the_branch(
    seeded: Seeded, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(seeded.path))
    monkeypatch.setenv("NO_COLOR", "1")
    _commits, objects = _reachable(seeded.path, [b"refs/heads/main", f"refs/heads/{NAME}".encode()])
    assert main(["verify"]) == 0
    assert capsys.readouterr().out == f"verified 6 commits, {len(objects)} objects, 4 file versions: OK\n"
    with _open(seeded.path) as store:
        node = store.branch(NAME).snapshot().get("/memories/b.md")
    assert node is not None
    _flip_object_byte(seeded.path, node.blob_id)
    assert main(["verify"]) == 3
    commit = seeded.branch[1].decode()
    assert capsys.readouterr().out.splitlines() == [
        f"error  bad-blob  {NAME} #4 {commit[:7]}…  Content blob {node.blob_id.decode()} of /memories/b.md "
        "(version 1) is damaged: the object does not match its id.",
        f"verified 6 commits, {len(objects)} objects, 4 file versions: 1 error",
    ]
