"""A dream branch's record in the keyring (docs/format.md §3.1, §5.8): the keyring names the data
keys each branch commit wrote and the branch's newest commit, MAC-chained like ``main``'s.

The attacks are a keyless writer's: moving the branch's ref back (or removing it) before the
operator reviews or discards the dream, hoping to keep a rejected rewrite that the operator
believes shredded, or to have an older state of the dream reviewed and merged. Each is detected,
and ``dream discard`` destroys every key the dream ever wrote whatever its ref says.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE, keyring_records, make_store, rewrite_packed_object
from memvault import history
from memvault.cli import main
from memvault.dream.review import discard_dream, dream_diff, list_dreams, merge_dream
from memvault.errors import (
    IntegrityError,
    InvalidInputError,
    RedactedError,
    RollbackDetectedError,
    StorageError,
)
from memvault.format.records import Node
from memvault.git.refs import Branch
from memvault.paths import parse_path
from memvault.protocol.commands import run_command
from memvault.settings import StoreSettings
from memvault.store import BranchStore
from memvault.store import memorystore as store_mod
from memvault.verify import verify

DREAM = "0123456789abcdef"
NAME = f"dream/{DREAM}"
SECRET = "/memories/people.md"
REWRITE = "REJECTED-REWRITE-c41f: the user's home address is 12 Example Road"

DEK, BRANCH_KEYS, BRANCH = 1, 9, 10


def _run(target: memvault.MemoryStore | BranchStore, **command: str) -> None:
    actor = "agent" if isinstance(target, memvault.MemoryStore) else "dream"
    result = run_command(target, command, actor=actor, session="s")
    assert isinstance(result, str) and not result.startswith("Error"), result


def _ref(root: Path) -> Path:
    return root / "repo" / "refs" / "heads" / "dream" / DREAM


def _dek_ids(root: Path) -> set[bytes]:
    """The ids of the DEK records in the keyring file, read independently of memvault."""
    data = (root / "keyring").read_bytes()
    return {data[start + 3 : start + 19] for rtype, start, _end in keyring_records(data) if rtype == DEK}


def _types(root: Path) -> list[int]:
    data = (root / "keyring").read_bytes()
    return [rtype for rtype, _start, _end in keyring_records(data)]


def _unreadable(root: Path, node: Node) -> None:
    """``node`` cannot be read with the store's key any more (a fresh process)."""
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert again.keyring.is_destroyed(node.dek_id)
        with pytest.raises((RedactedError, IntegrityError)):
            again.read_node(node)


@pytest.fixture
def store(tmp_path: Path) -> memvault.MemoryStore:
    s = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _run(s, command="create", path=SECRET, file_text="Alice: likes tea\n")
    return s


def _dream_with_rewrite(store: memvault.MemoryStore) -> tuple[BranchStore, bytes, Node]:
    """A dream that (1) tidies a file, (2) rewrites it with text the operator will reject, (3)
    goes on. Returns the branch, the commit before the rewrite, and the rewrite's node."""
    branch = store.branch(NAME)
    branch.create(actor="dream", session=DREAM, extra={"model": "test-model"})
    _run(branch, command="str_replace", path=SECRET, old_str="likes tea", new_str="likes green tea")
    before = branch.head[0]
    _run(branch, command="create", path=SECRET + ".tmp", file_text=f"{REWRITE}\n")
    rewrite = branch.snapshot().get(SECRET + ".tmp")
    assert rewrite is not None and branch.read_node(rewrite) == f"{REWRITE}\n".encode()
    _run(branch, command="create", path="/memories/index.md", file_text="- people\n")
    return branch, before, rewrite


# -- the finding: discard after the ref was moved back ---------------------------------------------


def test_discard_after_the_ref_was_moved_back_destroys_the_rejected_rewrite(
    store: memvault.MemoryStore, tmp_path: Path
) -> None:
    root = tmp_path / "s"
    _branch, before, rewrite = _dream_with_rewrite(store)
    store.close()
    _ref(root).write_bytes(before + b"\n")  # the keyless writer moves the ref back past the rewrite
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        result = discard_dream(again, DREAM, actor="alice")
        assert again.branches() == []
    assert rewrite.dek_id not in _dek_ids(root)  # no wrapped copy of its key is left in the keyring
    _unreadable(root, rewrite)
    # The tidy-up, the rewrite, the index: every key it wrote, known from the keyring.
    assert result.keys_destroyed >= 3
    assert result.to_json()["complete"] is True
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        report = verify(again)
    assert report.problems == []  # the rewrite's key is destroyed, not an orphan


def test_a_branch_moved_back_is_refused_by_review_merge_and_verify(store: memvault.MemoryStore, tmp_path: Path) -> None:
    root = tmp_path / "s"
    branch, before, _rewrite = _dream_with_rewrite(store)
    newest, newest_seq = branch.head
    main_head = store.head
    store.close()
    _ref(root).write_bytes(before + b"\n")
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        with pytest.raises(RollbackDetectedError, match=f"the dream branch {NAME} is at commit #"):
            dream_diff(again, DREAM)
        with pytest.raises(RollbackDetectedError):
            merge_dream(again, DREAM)
        assert again.head == main_head  # nothing merged
        with pytest.raises(RollbackDetectedError):
            again.branch(NAME).head  # noqa: B018 - every reader of the branch
        with pytest.raises(RollbackDetectedError):
            history.log(again.branch(NAME))
        [info] = list_dreams(again)
        assert info.status == "damaged" and info.problem.startswith("Rollback detected")
        with pytest.raises(RollbackDetectedError):
            _run(again.branch(NAME), command="create", path="/memories/x.md", file_text="x\n")
        report = verify(again)
    rollback = [p for p in report.problems if p.code == "rollback"]
    assert [(p.severity, p.branch, p.commit) for p in rollback] == [("error", NAME, before.decode())]
    assert f"has recorded its commit #{newest_seq}" in rollback[0].message
    assert not report.ok
    _ref(root).write_bytes(newest + b"\n")  # put back where the keyring says: it opens again
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert dream_diff(again, DREAM).info.head == newest.decode()
        assert verify(again).ok


def test_a_branch_back_by_one_serves_the_recorded_commit_unless_it_is_gone(
    store: memvault.MemoryStore, tmp_path: Path
) -> None:
    """As for ``main``: a ref at the parent of the recorded commit serves that commit (a writer
    stopped between the keyring and the ref), and the next write moves the ref; if that commit's
    objects are gone, in durability ``full``, it is a rollback."""
    root = tmp_path / "s"
    branch, _before, _rewrite = _dream_with_rewrite(store)
    newest = branch.head[0]
    parent = branch.commit(newest)[2]
    assert parent is not None
    store.close()
    _ref(root).write_bytes(parent + b"\n")
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert again.branch(NAME).head[0] == newest
        report = verify(again)
        assert [(p.severity, p.code, p.branch) for p in report.problems] == [("warning", "unpublished-commit", NAME)]
        branch = again.branch(NAME)
        _run(branch, command="create", path="/memories/more.md", file_text="more\n")
        assert branch.commit(branch.head[0])[2] == newest
        assert _ref(root).read_bytes() == branch.head[0] + b"\n"
        last = branch.head[0]
    # Now take the newest commit's object away as well (its ref moved back by one).
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        kept = again.branch(NAME).commit(last)[2]
        assert kept is not None
    _ref(root).write_bytes(kept + b"\n")
    rewrite_packed_object(root, last, None)
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        with pytest.raises(RollbackDetectedError, match="newest commit recorded for the dream branch"):
            again.branch(NAME).head  # noqa: B018


# -- a ref removed by hand, a write that failed after its keys were recorded --------------------------


def test_discard_by_id_after_the_ref_was_removed(store: memvault.MemoryStore, tmp_path: Path) -> None:
    root = tmp_path / "s"
    _branch, _before, rewrite = _dream_with_rewrite(store)
    store.close()
    _ref(root).unlink()
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert again.branches() == []
        [info] = list_dreams(again)
        assert (info.id, info.status) == (DREAM, "damaged") and "ref is gone" in info.problem
        report = verify(again)
        missing = [p for p in report.problems if p.code == "missing-branch"]
        assert [(p.severity, p.branch) for p in missing] == [("warning", NAME)]
        assert f"memvault dream discard {DREAM}" in missing[0].message
        result = discard_dream(again, DREAM)
        assert result.keys_destroyed >= 3 and result.complete
        assert list_dreams(again) == []
        with pytest.raises(InvalidInputError, match=f"No dream {DREAM}"):
            discard_dream(again, DREAM)  # nothing left of it
        assert verify(again).problems == []
    _unreadable(root, rewrite)


def test_keys_of_a_branch_write_whose_ref_move_failed_are_the_dreams(
    store: memvault.MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    branch = store.branch(NAME)
    branch.create(actor="dream", session=DREAM)
    head = branch.head[0]
    keys_before = _dek_ids(root)
    real = Branch.compare_and_swap

    def failing(self: Branch, old: bytes | None, new: bytes) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Branch, "compare_and_swap", failing)
    with pytest.raises(StorageError):
        path = parse_path(SECRET + ".tmp")
        branch.transact(lambda txn: txn.write_file(path, REWRITE.encode()), command="create", paths=(path.text,),
                        actor="dream", session=DREAM)  # fmt: skip
    monkeypatch.setattr(Branch, "compare_and_swap", real)
    written = _dek_ids(root) - keys_before
    assert written  # the failed write's data keys were recorded before the ref move failed
    assert _ref(root).read_bytes() == head + b"\n"
    discard_dream(store, DREAM)
    store.close()
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert all(again.keyring.is_destroyed(k) for k in written)
    assert not written & _dek_ids(root)


def test_a_torn_branch_append_leaves_no_data_key(store: memvault.MemoryStore, tmp_path: Path) -> None:
    """A crash inside a branch write's keyring append: its data key records count only with the
    BRANCH record that ends the append, so they are unread, and the next append cuts them off."""
    root = tmp_path / "s"
    branch = store.branch(NAME)
    branch.create(actor="dream", session=DREAM)
    head = branch.head[0]
    size = (root / "keyring").stat().st_size
    keys_before = _dek_ids(root)
    _run(branch, command="create", path="/memories/x.md", file_text="x\n")
    written = _dek_ids(root) - keys_before
    store.close()
    assert _types(root)[-1] == BRANCH and written
    with open(root / "keyring", "r+b") as f:
        f.truncate((root / "keyring").stat().st_size - 5)  # the BRANCH record cut short
    _ref(root).write_bytes(head + b"\n")  # the crash came before the ref moved
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        assert not any(again.keyring.has(k) for k in written)
        assert again.branch(NAME).head[0] == head
        _run(again, command="create", path="/memories/y.md", file_text="y\n")  # the next append
    assert not written & _dek_ids(root)
    assert (root / "keyring").stat().st_size > size


# -- the keyring records themselves ---------------------------------------------------------------------


def test_the_keyring_names_each_branch_commit_and_its_keys(store: memvault.MemoryStore, tmp_path: Path) -> None:
    root = tmp_path / "s"
    before = len(_types(root))
    keys_before = _dek_ids(root)
    branch = store.branch(NAME)
    branch.create(actor="dream", session=DREAM)
    _run(branch, command="create", path="/memories/a/b.md", file_text="b\n")
    data = (root / "keyring").read_bytes()
    records = keyring_records(data)[before:]
    # The fork commit: one BRANCH record; the create: BRANCH_KEYS, its DEK records, BRANCH.
    assert [t for t, _s, _e in records] == [BRANCH, BRANCH_KEYS, DEK, DEK, BRANCH]
    fork, keys, *_deks, commit = [data[s + 3 : e] for _t, s, e in records]
    assert fork[:8] == bytes.fromhex(DREAM) and fork[8] == 1  # flags: the fork commit
    seq, commit_id, parent_id = struct.unpack_from(">Q20s20s", fork, 9)
    assert (seq, parent_id.hex().encode()) == (store.head[1] + 1, store.head[0])
    assert commit[:8] == bytes.fromhex(DREAM) and commit[8] == 0
    assert struct.unpack_from(">Q20s20s", commit, 9)[1:] == (bytes.fromhex(branch.head[0].decode()), commit_id)
    assert keys[:8] == bytes.fromhex(DREAM)
    assert {keys[8 + 16 * i : 24 + 16 * i] for i in range(2)} == _dek_ids(root) - keys_before
    assert store.commit_meta(store.head[0]).seq == store.head[1]  # main did not move


def test_a_changed_or_removed_branch_record_makes_the_keyring_refuse(
    store: memvault.MemoryStore, tmp_path: Path
) -> None:
    """A keyless writer cannot take a key off a dream's list (to keep it from discard) nor drop
    the dream's newest record: the records are in the MAC chain, and main's next commit chains
    to them."""
    root = tmp_path / "s"
    _dream_with_rewrite(store)
    _run(store, command="create", path="/memories/later.md", file_text="later\n")
    store.close()
    good = (root / "keyring").read_bytes()
    records = keyring_records(good)
    keys_record = next((s, e) for t, s, e in records if t == BRANCH_KEYS)
    last_branch = [(s, e) for t, s, e in records if t == BRANCH][-1]
    flipped = bytearray(good)
    flipped[keys_record[0] + 3 + 8] ^= 1  # one bit of a key id
    removed = good[: last_branch[0]] + good[last_branch[1] :]
    for bad in (bytes(flipped), removed):
        (root / "keyring").write_bytes(bad)
        with pytest.raises(IntegrityError):
            memvault.MemoryStore.open(root, passphrase=PASSPHRASE)


def test_a_keyring_cut_back_to_before_the_dream_is_a_rollback(store: memvault.MemoryStore, tmp_path: Path) -> None:
    """Every record of the dream cut off the keyring's end (its records after main's last): the
    fork commit says the keyring keeps the branch, so a branch the keyring does not know is a
    rollback, not a dream of an earlier release."""
    root = tmp_path / "s"
    cut = (root / "keyring").stat().st_size
    branch, before, _rewrite = _dream_with_rewrite(store)
    assert branch.fork_meta.extra["keyring"] == "recorded"
    store.close()
    with open(root / "keyring", "r+b") as f:
        f.truncate(cut)
    _ref(root).write_bytes(before + b"\n")
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as again:
        with pytest.raises(RollbackDetectedError, match="keyring has no record of the dream branch"):
            dream_diff(again, DREAM)
        assert "rollback" in {p.code for p in verify(again).problems}


def test_a_dream_name_is_used_once(store: memvault.MemoryStore) -> None:
    branch = store.branch(NAME)
    branch.create(actor="dream")
    assert branch.delete()
    with pytest.raises(InvalidInputError, match="exists already"):
        store.branch(NAME).create(actor="dream")


# -- dreams of an earlier release (no record in the keyring) ---------------------------------------


def test_a_dream_from_before_the_records_is_discarded_from_its_ref_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A version 2 store writes no branch records (older releases read it); its dream is found
    from its ref, and discard says that versions the ref no longer reaches are not destroyed. After
    ``upgrade``, the dream's new commits are recorded, and moving its ref back is detected."""
    root = tmp_path / "s"
    with monkeypatch.context() as m:
        m.setattr(store_mod, "FORMAT_VERSION", 2)
        old = memvault.MemoryStore.create(root, passphrase=PASSPHRASE, kdf=FAST_KDF)
    _run(old, command="create", path=SECRET, file_text="Alice\n")
    branch = old.branch(NAME)
    branch.create(actor="dream")
    _run(branch, command="create", path="/memories/x.md", file_text="x\n")
    x_head = branch.head[0]
    assert BRANCH not in _types(root) and BRANCH_KEYS not in _types(root)
    old.close()
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        store.upgrade_format()
        assert store.format_version == 6
        branch = store.branch(NAME)
        assert "keyring" not in branch.fork_meta.extra
        _run(branch, command="create", path="/memories/y.md", file_text="y\n")
        _run(branch, command="create", path="/memories/z.md", file_text="z\n")
    _ref(root).write_bytes(x_head + b"\n")  # back by two commits: z and y
    with memvault.MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        with pytest.raises(RollbackDetectedError):
            store.branch(NAME).head  # noqa: B018 - recorded since the upgrade
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(root))
    assert main(["dream", "discard", DREAM]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Discarded dream {DREAM}: ")
    assert "only from its branch" in out
    assert main(["dream", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_discard_json_says_whether_every_key_was_known(
    store: memvault.MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _dream_with_rewrite(store)
    store.close()
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "s"))
    assert main(["dream", "discard", DREAM, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["complete"] is True and doc["keys_destroyed"] >= 3


# -- verify: what under refs/heads/dream/ is not a ref --------------------------------------------------


def test_verify_warns_about_a_symlink_or_directory_under_the_dream_refs(
    store: memvault.MemoryStore, tmp_path: Path
) -> None:
    root = tmp_path / "s"
    branch = store.branch(NAME)
    branch.create(actor="dream")
    dreams = _ref(root).parent
    os.symlink(_ref(root), dreams / "fedcba9876543210")
    (dreams / "subdir").mkdir()
    report = verify(store)
    assert [(p.severity, p.code, p.message) for p in report.problems] == [
        ("warning", "stray-ref", "refs/heads/dream/fedcba9876543210 is a symbolic link, not a ref: memvault never "
         "writes it, and ignores it."),
        ("warning", "stray-ref", "refs/heads/dream/subdir is a directory or another kind of file, not a ref: "
         "memvault never writes it, and ignores it."),
    ]  # fmt: skip
    assert history.read_at(branch, SECRET) == b"Alice: likes tea\n"
