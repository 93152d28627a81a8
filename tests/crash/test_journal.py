"""The commit journal (format version 5): a durable commit is one flush, and a power loss loses no
acknowledged commit.

A power loss is simulated on copies of a store directory. A checkpoint makes everything durable;
after it, only the journal is flushed. So what the disk may hold after a power loss lies between
the store as it was at the checkpoint and as the kernel held it at the end: each file written
since (packs, their indexes, the keyring, the branch) may be kept whole, lost, cut short or
zero-filled, and the journal is what its flushes made it. A reboot changes the boot id; the
first open after it replays the journal (docs/format.md §7.1).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault import fsutil
from memvault.errors import StorageError
from memvault.settings import StoreSettings
from memvault.store import journal as journal_module
from memvault.verify import verify

pytestmark = pytest.mark.skipif(
    not journal_module.journal_available(), reason="the commit journal needs Linux 5.8+ (syncfs and a boot id)"
)

State = dict[str, bytes]
COMMANDS: list[dict[str, Any]] = [
    {"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"},
    {"command": "create", "path": "/memories/b.md", "file_text": "bravo\n" * 50},
    {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "ALPHA"},
    {"command": "insert", "path": "/memories/b.md", "insert_line": 1, "insert_text": "inserted\n"},
    {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c/a.md"},
    {"command": "delete", "path": "/memories/b.md"},
    {"command": "create", "path": "/memories/d.md", "file_text": "delta\n"},
]


def _state(store: memvault.MemoryStore) -> State:
    return {e.path: store.read_bytes(e.path) for e in store.list("/memories", recursive=True) if e.kind == "file"}


def _open(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE)


def _reboot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new boot: the kernel's boot id changes (and with it, what the kernel may have lost)."""
    new = os.urandom(16)
    monkeypatch.setattr(journal_module, "boot_id", lambda: new)


class History:
    """A store with a checkpoint, then the commands of :data:`COMMANDS` through the journal:
    ``at_checkpoint`` and ``final`` are copies of the directory then, ``states[i]`` the files
    after the i-th command (``states[0]``: at the checkpoint), ``heads[i]`` the branch value."""

    def __init__(self, root: Path) -> None:
        live = root / "live"
        store = make_store(live, StoreSettings(durability="full"))
        tool = memvault.MemoryTool(store)
        tool.call({"command": "create", "path": "/memories/zero.md", "file_text": "zero\n"})
        assert store.keyring.before_rewrite is not None
        store.keyring.before_rewrite()  # a checkpoint: everything durable, a new generation
        self.at_checkpoint = root / "at-checkpoint"
        shutil.copytree(live, self.at_checkpoint)
        self.states = [_state(store)]
        self.heads = [store.head[0]]
        for command in COMMANDS:
            tool.call(command)
            self.states.append(_state(store))
            self.heads.append(store.head[0])
        self.final = root / "final"
        shutil.copytree(live, self.final)  # before close() flushes read times (durably)
        store.close()
        self.root = root

    def new_files(self) -> list[str]:
        """Files of the final copy that are new or changed since the checkpoint (the journal aside)."""
        out = []
        for path in sorted(self.final.rglob("*")):
            rel = str(path.relative_to(self.final))
            if not path.is_file() or rel in ("journal", "lock", "access"):
                continue
            old = self.at_checkpoint / rel
            if not old.exists() or old.read_bytes() != path.read_bytes():
                out.append(rel)
        return out

    def image(self, name: str, choose: Any) -> Path:
        """A disk after a power loss: the checkpoint's copy, the final journal, and for each file
        written since, what ``choose(rel, old bytes or None, new bytes)`` returns (None: absent)."""
        image = self.root / name
        shutil.copytree(self.at_checkpoint, image)
        shutil.copy2(self.final / "journal", image / "journal")
        for rel in self.new_files():
            old_path = self.at_checkpoint / rel
            old = old_path.read_bytes() if old_path.exists() else None
            data = choose(rel, old, (self.final / rel).read_bytes())
            target = image / rel
            if data is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists():
                    os.chmod(target, 0o600)
                target.write_bytes(data)
        return image


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return History(tmp_path_factory.mktemp("journal"))


def _check_recovered(image: Path, expected: State, head: bytes) -> None:
    with _open(image) as store:
        assert _state(store) == expected
        assert store.head[0] == head
        report = verify(store)
        assert report.ok, report.problems
        store.put_file("/memories/after.md", "after\n")  # and the store goes on
        assert store.read_text("/memories/after.md") == "after\n"


def test_a_journaled_commit_flushes_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One fdatasync, of the journal, and no syncfs or fsync, for every commit after the first."""
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/first.md", "file_text": "1\n"})  # starts the journal
    flushed: list[str] = []
    real_fdatasync, real_fsync, real_syncfs = os.fdatasync, os.fsync, fsutil._syncfs
    monkeypatch.setattr(os, "fdatasync", lambda fd: (flushed.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                     real_fdatasync(fd))[1])  # fmt: skip
    monkeypatch.setattr(os, "fsync", lambda fd: (flushed.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(fsutil, "_syncfs", lambda fd: (flushed.append("syncfs"), real_syncfs(fd))[1])
    for i in range(5):
        flushed.clear()
        tool.call({"command": "create", "path": f"/memories/n{i}.md", "file_text": f"{i}\n"})
        assert flushed == [str(tmp_path / "s" / "journal")]


def test_the_same_boot_replays_nothing(history: History, tmp_path: Path) -> None:
    """Without a reboot the kernel lost nothing: the store opens as it was, the journal untouched."""
    copy = tmp_path / "copy"
    shutil.copytree(history.final, copy)
    journal_before = (copy / "journal").read_bytes()
    with _open(copy) as store:
        assert _state(store) == history.states[-1]
    assert (copy / "journal").read_bytes() == journal_before


def test_everything_after_the_checkpoint_lost_but_the_journal(
    history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = history.image("nothing-kept", lambda rel, old, new: old)
    _reboot(monkeypatch)
    _check_recovered(image, history.states[-1], history.heads[-1])


def test_everything_kept(history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    image = history.image("all-kept", lambda rel, old, new: new)
    _reboot(monkeypatch)
    _check_recovered(image, history.states[-1], history.heads[-1])


def test_keyring_kept_packs_lost(history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the journal this is what a rollback looks like: records of commits whose objects are gone."""
    image = history.image("keyring-only", lambda rel, old, new: new if not rel.startswith("repo/objects") else old)
    _reboot(monkeypatch)
    _check_recovered(image, history.states[-1], history.heads[-1])


def test_branch_moved_keyring_zero_filled(history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    def choose(rel: str, old: bytes | None, new: bytes) -> bytes | None:
        if rel == "keyring":
            assert old is not None
            return old + bytes(len(new) - len(old))  # delayed allocation: the size kept, the data not
        return new

    image = history.image("zero-filled", choose)
    _reboot(monkeypatch)
    _check_recovered(image, history.states[-1], history.heads[-1])


@pytest.mark.parametrize("seed", range(12))
def test_any_mix_of_what_the_disk_kept(history: History, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Each file written since the checkpoint kept, lost, cut short, zero-filled or half old; the
    branch at any of the values it held, or torn: every acknowledged commit is there."""
    rng = random.Random(seed)

    def choose(rel: str, old: bytes | None, new: bytes) -> bytes | None:
        if rel == "repo/refs/heads/main":
            value = rng.choice([*history.heads, b"0" * 20 + b"f" * 20])
            return value + b"\n" if rng.random() < 0.8 else (value[:20] + history.heads[-1][20:] + b"\n")
        base = old or b""
        cut = rng.randint(len(base), len(new))
        return rng.choice([
            None if old is None else old,
            new,
            new[:cut],
            new[:cut] + bytes(len(new) - cut),
            base + bytes(len(new) - len(base)),
        ])  # fmt: skip

    image = history.image(f"mix-{seed}", choose)
    _reboot(monkeypatch)
    _check_recovered(image, history.states[-1], history.heads[-1])


def test_a_torn_last_entry_is_not_applied(history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    """The power went during the last commit's flush: its entry is torn, so that commit (never
    acknowledged) is not applied, and the store opens at the one before it."""
    image = history.image("torn", lambda rel, old, new: old)
    journal = bytearray((image / "journal").read_bytes())
    last = _entry_positions(bytes(journal))[-1]
    journal[last + 40] ^= 0xFF  # its first keyring record
    (image / "journal").write_bytes(bytes(journal))
    _reboot(monkeypatch)
    _check_recovered(image, history.states[-2], history.heads[-2])


def test_an_old_generation_is_never_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a checkpoint the entries before it are not replayed, even where the file still
    holds them: a copy of the store from before the checkpoint, with the new journal, opens at
    the checkpoint's state, not at a mix."""
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
    assert store.keyring.before_rewrite is not None
    store.keyring.before_rewrite()
    expected = _state(store)
    store.close()
    _reboot(monkeypatch)
    with _open(tmp_path / "s") as again:
        assert _state(again) == expected
        assert verify(again).ok


def test_a_failed_journal_flush_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flush of the entry fails: the entry is withdrawn, the command fails, nothing changed,
    not even after a reboot; the next command works."""
    path = tmp_path / "s"
    store = make_store(path, StoreSettings(durability="full"))
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    before, seq = _state(store), store.head[1]
    real_fdatasync = os.fdatasync
    journal_path = str(path / "journal")
    failed = []

    def flaky(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == journal_path and not failed:
            failed.append(fd)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", flaky)
    with pytest.raises(StorageError) as info:
        store.put_file("/memories/b.md", "b\n")
    assert not info.value.outcome_unknown and str(tmp_path) not in str(info.value)
    monkeypatch.undo()
    assert (_state(store), store.head[1]) == (before, seq)
    store.close()
    _reboot(monkeypatch)
    with _open(path) as again:
        assert (_state(again), again.head[1]) == (before, seq)
        tool = memvault.MemoryTool(again)
        tool.call({"command": "create", "path": "/memories/c.md", "file_text": "c\n"})
        assert _state(again) == {**before, "/memories/c.md": b"c\n"}


def test_a_writer_that_died_after_its_entry_is_superseded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer's entry is durable but it died before its keyring append: that commit was never
    published, and the next writer's commit (same keyring position) replaces it, also after a
    reboot."""
    path = tmp_path / "s"
    store = make_store(path, StoreSettings(durability="full"))
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    before = _state(store)

    class Died(BaseException):
        pass

    from memvault.keys.keyring import Keyring

    def die(self: Keyring, records: bytes, *, durable: bool) -> int:
        raise Died

    monkeypatch.setattr(Keyring, "append", die)
    with pytest.raises(Died):
        tool.call({"command": "create", "path": "/memories/lost.md", "file_text": "lost\n"})
    monkeypatch.undo()
    store.close()
    with _open(path) as again:
        assert _state(again) == before
        memvault.MemoryTool(again).call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
        expected = _state(again)
        assert "/memories/lost.md" not in expected
    _reboot(monkeypatch)
    _check_recovered(path, expected, _head_of(path))


def test_a_redaction_wipes_the_journal(tmp_path: Path) -> None:
    """A purge rewrites the keyring: the journal is checkpointed and overwritten first, so no entry
    keeps the destroyed key's record."""
    from memvault.erasure.redact import shred_version

    path = tmp_path / "s"
    store = make_store(path, StoreSettings(durability="full"))
    store.put_file("/memories/a.md", "secret 1\n")
    store.put_file("/memories/a.md", "clean\n")
    journal_before = (path / "journal").read_bytes()
    assert _entry_positions(journal_before)
    shred_version(store, "/memories/a.md", "#1", actor="ops")
    assert _entry_positions((path / "journal").read_bytes()) == []
    store.close()


def _head_of(path: Path) -> bytes:
    with _open(path) as store:
        return store.head[0]


def _entry_positions(journal: bytes) -> list[int]:
    """Where the file holds the magic of an entry, on a block boundary (not checked)."""
    return [p for p in range(journal_module.BLOCK, len(journal), journal_module.BLOCK) if journal[p : p + 4] == b"MVJE"]
