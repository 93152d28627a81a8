"""Tampering with a copy of the store is detected: flipped bytes, swapped blobs, blobs from
another store, forged commits, and a branch moved back to an older commit."""

from __future__ import annotations

import errno
import os
import shutil
import zlib
from pathlib import Path

import pytest
from anthropic.lib.tools._beta_functions import ToolError
from dulwich.objects import Commit, Tree
from dulwich.repo import Repo

import memvault
from conftest import PASSPHRASE, keyring_records, make_store, rewrite_packed_object, unpack_to_loose
from memvault.errors import IntegrityError, RollbackDetectedError, StorageError, WrongKeyError
from memvault.format import records
from memvault.verify import verify


def _open(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE)


def _loose_path(store_path: Path, obj_id: bytes) -> Path:
    h = obj_id.decode()
    return store_path / "repo" / "objects" / h[:2] / h[2:]


#: How the damaged object is stored: in a pack (what commands write) or loose (stores written
#: before commits were packs).
LAYOUTS = ["packed", "loose"]


def _replace_object(store: memvault.MemoryStore, layout: str, obj_id: bytes, body: bytes | None) -> None:
    """Make the object ``obj_id`` hold ``body`` (its id no longer matches), or remove it."""
    if layout == "packed":
        rewrite_packed_object(store.root, obj_id, body)
        return
    unpack_to_loose(store)
    path = _loose_path(store.root, obj_id)
    if body is None:
        path.unlink()
        return
    kind = zlib.decompress(path.read_bytes()).split(b" ", 1)[0]
    os.chmod(path, 0o600)
    path.write_bytes(zlib.compress(kind + b" %d\0" % len(body) + body))


def _set_branch(store_path: Path, commit_id: bytes) -> None:
    (store_path / "repo" / "refs" / "heads" / "main").write_bytes(commit_id + b"\n")


def _seed(store: memvault.MemoryStore) -> None:
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha secret\n" * 50})
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "bravo other\n" * 50})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_corrupted_blob_object_is_refused(store_path: Path, layout: str) -> None:
    store = make_store(store_path)
    _seed(store)
    node = store.snapshot().get("/memories/a.md")
    assert node is not None
    raw = bytearray(store.git.read_blob(node.blob_id))
    raw[len(raw) // 2] ^= 0x01
    _replace_object(store, layout, node.blob_id, bytes(raw))
    fresh = _open(store_path)  # listing still works: the index is intact
    with pytest.raises(ToolError) as info:
        memvault.MemoryTool(fresh).call({"command": "view", "path": "/memories/a.md"})
    assert str(info.value) == "Memory store integrity check failed for /memories/a.md."
    assert "alpha" not in str(info.value)
    # b.md is unaffected.
    assert "bravo" in memvault.MemoryTool(fresh).call({"command": "view", "path": "/memories/b.md"})  # type: ignore[operator]


def test_every_byte_flip_of_a_blob_is_an_integrity_error(store: memvault.MemoryStore) -> None:
    _seed(store)
    node = store.snapshot().get("/memories/a.md")
    assert node is not None
    blob = store.git.read_blob(node.blob_id)
    dek = store.keyring.dek(node.dek_id)
    assert records.decode_blob(dek, blob, store_id=store.store_id, node=node).startswith(b"alpha")
    step = max(1, len(blob) // 300)
    for i in list(range(0, 80)) + list(range(80, len(blob), step)) + [len(blob) - 1]:
        flipped = bytearray(blob)
        flipped[i] ^= 0x80
        with pytest.raises(IntegrityError):
            records.decode_blob(dek, bytes(flipped), store_id=store.store_id, node=node)


def test_blob_swapped_between_paths_or_versions_is_refused(store: memvault.MemoryStore) -> None:
    _seed(store)
    snap = store.snapshot()
    a, b = snap.get("/memories/a.md"), snap.get("/memories/b.md")
    assert a is not None and b is not None
    blob_b = store.git.read_blob(b.blob_id)
    # B's blob read as A (with A's key, or with B's key under A's identity): refused.
    for key in (store.keyring.dek(a.dek_id), store.keyring.dek(b.dek_id)):
        with pytest.raises(IntegrityError):
            records.decode_blob(key, blob_b, store_id=store.store_id, node=a)
    # An older version of A under A's new version: refused.
    store.put_file("/memories/a.md", "alpha v2")
    a2 = store.snapshot().get("/memories/a.md")
    assert a2 is not None and a2.version == a.version + 1
    old_blob = store.git.read_blob(a.blob_id)
    with pytest.raises(IntegrityError):
        records.decode_blob(store.keyring.dek(a.dek_id), old_blob, store_id=store.store_id, node=a2)
    # Same version number, same path, renamed identity: the path is in the AAD.
    moved = records.Node(**{**{f: getattr(a, f) for f in a.__dataclass_fields__}, "path": "/memories/z.md"})
    with pytest.raises(IntegrityError):
        records.decode_blob(store.keyring.dek(a.dek_id), old_blob, store_id=store.store_id, node=moved)


def _forge_commit(store_path: Path, tree_id: bytes, parent: bytes, message: bytes) -> bytes:
    repo = Repo(str(store_path / "repo"))
    c = Commit()
    c.tree, c.parents = tree_id, [parent]
    c.author = c.committer = b"memvault <memvault@invalid>"
    c.author_time = c.commit_time = 0
    c.author_timezone = c.commit_timezone = 0
    c.message = message
    repo.object_store.add_object(c)
    return c.id


def test_swapping_tree_entries_is_detected(store_path: Path) -> None:
    store = make_store(store_path)
    _seed(store)
    for i in range(12):  # tokens under at least two first hex digits (all alike: 16**-13)
        store.put_file(f"/memories/more/{i}.md", "x")
    repo = Repo(str(store_path / "repo"))
    head = repo.refs[b"refs/heads/main"]
    commit = repo[head]
    root = repo[commit.tree]
    # Swap two top-level subtrees (files and shards of one token prefix filed under another).
    entries = [(e.path, e.mode, e.sha) for e in root.iteritems()]
    assert len(entries) >= 2
    (a, mode_a, sha_a), (b, mode_b, sha_b) = entries[:2]
    forged = Tree()
    forged.add(a, mode_b, sha_b)
    forged.add(b, mode_a, sha_a)
    for name, mode, sha in entries[2:]:
        forged.add(name, mode, sha)
    repo.object_store.add_object(forged)
    _set_branch(store_path, _forge_commit(store_path, forged.id, commit.parents[0], commit.message))
    with pytest.raises(IntegrityError):
        _open(store_path)


def test_forged_commits_are_detected(store_path: Path) -> None:
    store = make_store(store_path)
    _seed(store)
    head, _ = store.head
    repo = Repo(str(store_path / "repo"))
    commit = repo[head]
    good = commit.message
    bogus_tag = good[:-10] + b"0000000000"[:9] + b"\n"
    for message in [bogus_tag, good.split(b"\nMemvault-Tag")[0] + b"\n", b"memvault\n", good[:-20]]:
        _set_branch(store_path, _forge_commit(store_path, commit.tree, head, message))
        with pytest.raises(IntegrityError):
            _open(store_path)
    # A real commit re-parented (same tree, same message, different parent) is refused too.
    grandparent = repo[commit.parents[0]].parents[0]
    _set_branch(store_path, _forge_commit(store_path, commit.tree, grandparent, good))
    with pytest.raises(IntegrityError):
        _open(store_path)
    _set_branch(store_path, head)
    assert _open(store_path).head[0] == head


def test_branch_reset_to_older_commit_is_rollback(store_path: Path) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    ids = []
    for i in range(5):
        tool.call({"command": "create", "path": f"/memories/{i}.md", "file_text": str(i)})
        ids.append(store.head[0])
    _set_branch(store_path, ids[1])
    with pytest.raises(RollbackDetectedError) as info:
        _open(store_path)
    assert "#2" in str(info.value) and "#5" in str(info.value)
    # An already-open store notices on its next command, and writes nothing.
    with pytest.raises(ToolError) as tool_info:
        tool.call({"command": "create", "path": "/memories/x.md", "file_text": "x"})
    assert "Rollback detected" in str(tool_info.value)
    assert (store_path / "repo" / "refs" / "heads" / "main").read_bytes().strip() == ids[1]
    _set_branch(store_path, ids[-1])
    assert _open(store_path).head == (ids[-1], 5)


def test_fork_to_sibling_commit_is_detected(store_path: Path) -> None:
    """Two copies continue from one commit; pointing one at the other's commit is a fork."""
    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    twin_path = store_path.parent / "twin"
    shutil.copytree(store_path, twin_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/b.md", "file_text": "b"})
    twin = _open(twin_path)
    memvault.MemoryTool(twin).call({"command": "create", "path": "/memories/c.md", "file_text": "c"})
    assert twin.head[1] == store.head[1] == 2 and twin.head[0] != store.head[0]
    shutil.copytree(twin_path / "repo" / "objects", store_path / "repo" / "objects", dirs_exist_ok=True)
    _set_branch(store_path, twin.head[0])
    with pytest.raises(RollbackDetectedError) as info:
        _open(store_path)
    assert str(info.value).startswith("Fork detected")


def test_blob_or_repo_from_another_store_with_same_passphrase(tmp_path: Path) -> None:
    x, y = make_store(tmp_path / "x"), make_store(tmp_path / "y")
    memvault.MemoryTool(x).call({"command": "create", "path": "/memories/a.md", "file_text": "from x"})
    memvault.MemoryTool(y).call({"command": "create", "path": "/memories/a.md", "file_text": "from y"})
    x_node, y_node = x.snapshot().get("/memories/a.md"), y.snapshot().get("/memories/a.md")
    assert x_node is not None and y_node is not None
    x_blob = x.git.read_blob(x_node.blob_id)
    # X's blob under Y's identity and keys: refused (store_id in the header and AAD).
    with pytest.raises(IntegrityError):
        records.decode_blob(y.keyring.dek(y_node.dek_id), x_blob, store_id=y.store_id, node=y_node)
    # X's whole repository dropped into Y's directory: Y's chain key rejects it.
    shutil.rmtree(tmp_path / "y" / "repo")
    shutil.copytree(tmp_path / "x" / "repo", tmp_path / "y" / "repo")
    with pytest.raises(IntegrityError):
        _open(tmp_path / "y")
    # X's keyring in Y: refused (store id in the keyring header).
    shutil.copy(tmp_path / "x" / "keyring", tmp_path / "y" / "keyring")
    with pytest.raises(IntegrityError):
        _open(tmp_path / "y")


def test_wrong_passphrase_and_weakened_key_slot(store_path: Path) -> None:
    import json

    make_store(store_path).close()
    with pytest.raises(WrongKeyError) as info:
        memvault.MemoryStore.open(store_path, passphrase="not it")
    assert str(info.value) == "The passphrase or key does not unlock this memory store."
    slot_file = next((store_path / "keys").glob("*.json"))
    slot = json.loads(slot_file.read_text())
    slot["kdf"]["iterations"] = 2  # an attacker "weakens" the slot: the AAD no longer matches
    slot_file.write_text(json.dumps(slot))
    with pytest.raises(WrongKeyError):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    slot["kdf"]["memory_kib"] = 2**40  # an absurd work factor is refused before the KDF runs
    slot_file.write_text(json.dumps(slot))
    with pytest.raises(IntegrityError):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_blob_object_replaced_by_other_valid_object_is_refused(store_path: Path, layout: str) -> None:
    """The place of an object (a loose object file, or the index entry of a packed object) holds
    another valid object: git's id check fails."""
    store = make_store(store_path)
    _seed(store)
    snap = store.snapshot()
    a, b = snap.get("/memories/a.md"), snap.get("/memories/b.md")
    assert a is not None and b is not None
    _replace_object(store, layout, a.blob_id, store.git.read_blob(b.blob_id))
    fresh = _open(store_path)
    with pytest.raises(IntegrityError):
        fresh.git.read_blob(a.blob_id)  # refused by the git layer already
    with pytest.raises(IntegrityError):
        fresh.read_node(a)


def test_replayed_old_high_water_record_is_refused(store_path: Path) -> None:
    """Appending an old, authentic high-water record must not lower the mark."""
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    ids = []
    for i in range(3):
        tool.call({"command": "create", "path": f"/memories/{i}.md", "file_text": str(i)})
        ids.append(store.head[0])
    keyring = store_path / "keyring"
    data = keyring.read_bytes()
    commits = [(s, e) for t, s, e in keyring_records(data) if t in (2, 5)]
    assert len(commits) == 4  # init + 3 creates
    first_start, first_end = commits[1]
    keyring.write_bytes(data + data[first_start:first_end])
    _set_branch(store_path, ids[0])
    with pytest.raises(IntegrityError):
        _open(store_path)


def test_failed_publish_leaves_nothing_and_is_never_published_later(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    before = store.head

    def fail(*args: object, **kwargs: object) -> bool:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(store.git, "compare_and_swap", fail)
    with pytest.raises(ToolError) as info:
        tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b"})
    assert str(info.value) == "The memory store could not be written (I/O error)."
    monkeypatch.undo()
    assert store.head == before
    # A fresh writer must not publish the recorded-then-aborted commit.
    fresh = _open(store_path)
    memvault.MemoryTool(fresh).call({"command": "create", "path": "/memories/c.md", "file_text": "c"})
    snap = _open(store_path).snapshot()
    assert snap.get("/memories/b.md") is None
    assert snap.get("/memories/c.md") is not None
    assert _open(store_path).head[1] == before[1] + 1


def test_packed_refs_still_open(store_path: Path) -> None:
    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    head = store.head
    ref = store_path / "repo" / "refs" / "heads" / "main"
    (store_path / "repo" / "packed-refs").write_bytes(
        b"# pack-refs with: peeled fully-peeled sorted \n" + head[0] + b" refs/heads/main\n"
    )
    ref.unlink()
    assert _open(store_path).head == head


def test_branch_moved_back_by_one_still_serves_the_recorded_commit(store_path: Path) -> None:
    """Resetting the branch to the parent of the newest recorded commit gains nothing: that commit
    is durable and authentic, so readers serve it and the next writer moves the branch back."""
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.txt", "file_text": "one\n"})
    first = store.head[0]
    tool.call({"command": "str_replace", "path": "/memories/a.txt", "old_str": "one", "new_str": "two"})
    second = store.head[0]
    _set_branch(store_path, first)
    reader = _open(store_path)
    assert reader.head == (second, 2)
    view = memvault.MemoryTool(reader).call({"command": "view", "path": "/memories/a.txt"})
    assert view.endswith("     1\ttwo")  # type: ignore[union-attr]
    memvault.MemoryTool(_open(store_path)).call({"command": "create", "path": "/memories/b.txt", "file_text": "b"})
    fresh = _open(store_path)
    assert fresh.head[1] == 3 and fresh.git.read_commit(fresh.head[0])[1] == [second]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_branch_moved_back_by_one_with_the_commit_deleted_is_rollback(store_path: Path, layout: str) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.txt", "file_text": "one\n"})
    first = store.head[0]
    tool.call({"command": "str_replace", "path": "/memories/a.txt", "old_str": "one", "new_str": "two"})
    second = store.head[0]
    _set_branch(store_path, first)
    _replace_object(store, layout, second, None)
    with pytest.raises(RollbackDetectedError) as info:
        _open(store_path)
    assert str(info.value).startswith("Rollback detected: the store recorded commit #2, but it is missing")


def test_zero_filled_keyring_tail_after_power_loss_opens(store_path: Path) -> None:
    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.txt", "file_text": "a"})
    head = store.head
    with open(store_path / "keyring", "ab") as f:
        f.write(bytes(4096))
    reopened = _open(store_path)
    assert reopened.head == head
    memvault.MemoryTool(reopened).call({"command": "create", "path": "/memories/b.txt", "file_text": "b"})
    assert _open(store_path).head[1] == head[1] + 1
    assert not (store_path / "keyring").read_bytes().endswith(bytes(64))  # the zeros were cut off


def test_forged_tombstone_cannot_hide_a_live_file(store_path: Path) -> None:
    """Someone without the key appends a tombstone for a live version's data key (the key id
    is visible in the blob header): refused, instead of the file reading as redacted."""
    import struct

    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    node = store.snapshot().get("/memories/a.md")
    assert node is not None
    body = node.dek_id + bytes(12 + 40 + 16)
    with open(store_path / "keyring", "ab") as f:
        f.write(struct.pack(">BH", 4, len(body)) + body)
    with pytest.raises(IntegrityError) as info:
        _open(store_path)
    assert str(info.value) == "The store's keyring is damaged."


@pytest.mark.parametrize("where", ["open", "read"])
@pytest.mark.parametrize("err", [errno.EIO, errno.EMFILE, errno.EACCES])
def test_a_keyring_the_filesystem_cannot_read_is_a_storage_error_not_tampering(
    store: memvault.MemoryStore, monkeypatch: pytest.MonkeyPatch, where: str, err: int
) -> None:
    """A transient fault reading the keyring (I/O error, out of descriptors, permission) is
    reported as what it is, with the system's reason, and `verify` reports it; the keyring is not
    called damaged, and the store works again once the fault is gone."""
    _seed(store)
    keyring = str(store.root / "keyring")
    real_open, real_fdopen = os.open, os.fdopen
    if where == "open":

        def failing_open(path: object, *args: object, **kwargs: object) -> int:
            if os.fspath(path) == keyring:  # type: ignore[arg-type]
                raise OSError(err, os.strerror(err))
            return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", failing_open)
    else:

        class FailingReads:
            def __init__(self, fd: int) -> None:
                self._f = real_fdopen(fd, "rb")

            def __enter__(self) -> FailingReads:
                return self

            def __exit__(self, *exc: object) -> None:
                self._f.close()

            def fileno(self) -> int:
                return self._f.fileno()

            def seek(self, pos: int) -> int:
                return self._f.seek(pos)

            def read(self, n: int = -1) -> bytes:
                raise OSError(err, os.strerror(err))

        def fdopen(fd: int, *args: object, **kwargs: object) -> object:
            if os.readlink(f"/proc/self/fd/{fd}") == keyring:
                return FailingReads(fd)
            return real_fdopen(fd, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "fdopen", fdopen)
    with pytest.raises(StorageError) as caught:
        store.keyring.refresh()
    assert not isinstance(caught.value, IntegrityError)
    assert os.strerror(err) in str(caught.value) and "could not be read" in str(caught.value)
    report = verify(store)
    assert [p.code for p in report.errors] == ["bad-keyring"]
    monkeypatch.undo()
    store.keyring.refresh()
    assert verify(store).ok


def test_a_keyring_replaced_by_a_directory_is_damage(store: memvault.MemoryStore, store_path: Path) -> None:
    store.close()
    keyring = store_path / "keyring"
    keyring.unlink()
    keyring.mkdir()
    with pytest.raises(IntegrityError):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)


@pytest.mark.parametrize("name", ["memvault.json", "keys/slot"])
def test_a_store_file_the_filesystem_refuses_is_a_storage_error_not_damage(
    store: memvault.MemoryStore,
    store_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    """Permission denied on the configuration file or a key slot names the file and the system's
    reason and exits 1, not "damaged" (exit 3): an operator told so might restore backups over a
    healthy store."""
    store.close()
    target = (
        str(store_path / "memvault.json") if name == "memvault.json" else str(next((store_path / "keys").iterdir()))
    )
    real_open = os.open

    def refusing_open(path: object, *args: object, **kwargs: object) -> int:
        if os.fspath(path) == target:  # type: ignore[arg-type]
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing_open)
    with pytest.raises(StorageError) as caught:
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    assert not isinstance(caught.value, IntegrityError)
    message = str(caught.value)
    assert "could not be read" in message and os.strerror(errno.EACCES) in message and "damaged" not in message
    assert ("memvault.json" in message) if name == "memvault.json" else ("key slot" in message)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    from memvault.cli import main

    assert main(["--store", str(store_path), "ls"]) == 1
    assert "could not be read" in capsys.readouterr().err


def test_a_truncated_keyring_or_an_empty_slot_directory_says_what_is_wrong(store_path: Path) -> None:
    """A keyring cut back to its header is not "history missing", and a key slot directory with no
    slot is not "the passphrase does not unlock": each names the part that is damaged."""
    make_store(store_path).close()
    keyring = store_path / "keyring"
    whole = keyring.read_bytes()
    keyring.write_bytes(whole[:21])
    with pytest.raises(IntegrityError, match="keyring records no commit"):
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    keyring.write_bytes(whole)
    slots = list((store_path / "keys").iterdir())
    for slot in slots:
        slot.rename(store_path / slot.name)
    with pytest.raises(IntegrityError, match="no key slot") as caught:
        memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE)
    assert not isinstance(caught.value, WrongKeyError)
