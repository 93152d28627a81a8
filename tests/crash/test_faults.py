"""Filesystem faults at every write step, read-only stores, SIGKILL mid-command, file modes.

An :class:`_faults.Injector` makes one write step of a command (the ``open``/``write``/
``fsync``/``rename`` of the commit's pack and of its index, of a merged pack and the removal of
the packs it replaces, directory fsyncs, mode changes, the keyring append and its sync, every
step of the branch update, key slot and keyring rewrites)
raise ``ENOSPC``, ``EACCES`` or ``EIO``: a dry run lists the steps, then one run per step fails
it (every step of an edit; the first and last occurrence of each distinct step elsewhere). A
failing write of more than one byte first writes half of it, as a filling disk does.
After each fault: the caller got a :class:`~memvault.errors.StorageError` (the memory tool shows
its text; no host path, no content, no raw ``OSError``), a fresh open shows exactly the old state
(or the new one, when the fault hit a step after the branch moved and the command succeeded),
``verify`` finds no problem at all, and the same store object keeps working.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _child import PASSPHRASE_ENV
from _faults import Injector
from anthropic.lib.tools._beta_functions import ToolError

import memvault
from conftest import FAST_KDF, PASSPHRASE, make_store, seed_files
from memvault import history
from memvault.admin import keys as keymgmt
from memvault.erasure import redact as shred
from memvault.errors import MemvaultError, StorageError, WrongKeyError
from memvault.git import packdir
from memvault.git import refs as gitrefs
from memvault.paths import MemoryPath
from memvault.protocol.commands import run_command
from memvault.store import journal
from memvault.verify import verify

ERRNOS = (errno.ENOSPC, errno.EACCES, errno.EIO)
SECRET = "canary-7f3a"  # in every file's content: must never appear in an error message
INITIAL = {
    "/memories/notes.txt": f"alpha {SECRET}\nbeta\n",
    "/memories/proj/a.txt": f"a {SECRET}\n",
    "/memories/proj/sub/b.txt": f"b {SECRET}\n",
}
COMMANDS: dict[str, dict[str, Any]] = {
    "str_replace": {"command": "str_replace", "path": "/memories/notes.txt", "old_str": "beta", "new_str": "gamma"},
    "create": {"command": "create", "path": "/memories/new/n.txt", "file_text": f"fresh {SECRET}\n"},
    "insert": {"command": "insert", "path": "/memories/proj/a.txt", "insert_line": 1, "insert_text": "more"},
    "delete_dir": {"command": "delete", "path": "/memories/proj"},
    "rename_dir": {"command": "rename", "old_path": "/memories/proj", "new_path": "/memories/archive/proj"},
}
CHILD = Path(__file__).with_name("_child.py")

State = dict[str, "bytes | None"]


def open_store(path: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(path, passphrase=PASSPHRASE)


def read_state(store: memvault.MemoryStore) -> State:
    snap = store.snapshot()
    return {p.text: None if snap.is_dir(p) else snap.read(p) for p in snap.descendants(MemoryPath(()))}


def run(store: memvault.MemoryStore, command: dict[str, Any]) -> Any:
    return run_command(store, command, actor="fault-test", session="s")


def assert_clean(store: memvault.MemoryStore) -> None:
    """verify passes; the only warnings allowed are the data keys of a withdrawn (ABORTed) commit,
    which stay in the append-only keyring by design, a rotation that stopped before re-wrapping
    them, and a redaction that stopped after recording the destruction but before removing the
    key's record (verify says how to finish each)."""
    report = verify(store)
    allowed = ("orphan-key", "rotation-unfinished", "destroyed-key-present")
    problems = [p for p in report.problems if p.code not in allowed]
    assert report.ok and not problems, [p.to_json() for p in report.problems]


def check_message(message: str, root: Path) -> None:
    assert str(root) not in message and "/tmp" not in message
    assert SECRET not in message and "Traceback" not in message


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, State, dict[str, State]]:
    base = tmp_path_factory.mktemp("faults")
    path = base / "store"
    store = make_store(path)
    seed_files(store, INITIAL, actor="setup", session="s")
    before = read_state(store)
    store.close()
    afters = {}
    for name, command in COMMANDS.items():
        copy = base / f"after-{name}"
        shutil.copytree(path, copy)
        with open_store(copy) as s:
            run(s, command)
            afters[name] = read_state(s)
        assert afters[name] != before
    return path, before, afters


def dry_run(path: Path, action: Any) -> list[str]:
    """The write steps ``action()`` takes on the store at ``path`` (no fault)."""
    injector = Injector(path)
    with injector.active():
        action()
    return injector.steps


def chosen(steps: list[str], every: bool) -> list[tuple[str, int]]:
    """The steps to fail, as ``(step, n)`` (the n-th occurrence of that step): all of them, or
    the first and the last occurrence of each distinct step (a command can take identical steps
    several times, e.g. a merged pack's and the commit's pack). Named by occurrence rather than
    position because the number of some steps can vary from run to run."""
    counts: dict[str, int] = {}
    out: list[tuple[str, int]] = []
    for step in steps:
        counts[step] = counts.get(step, 0) + 1
        out.append((step, counts[step]))
    if every:
        return out
    return [(step, n) for step, n in out if n in (1, counts[step])]


def fault_sweep(
    template: tuple[Path, State, dict[str, State]],
    tmp_path: Path,
    name: str,
    errnos: tuple[int, ...],
    caplog: pytest.LogCaptureFixture,
    *,
    every: bool,
) -> list[str]:
    """Fail chosen steps k of ``COMMANDS[name]`` (see :func:`chosen`), one run each, and check
    every outcome. Returns the failed steps (``"<errno> <step>"``)."""
    src, before, afters = template
    after, command = afters[name], COMMANDS[name]
    dry = tmp_path / "dry"
    shutil.copytree(src, dry)
    with open_store(dry) as s:
        steps = dry_run(dry, lambda: run(s, command))
        assert read_state(s) == after
    assert len(steps) > 10
    picks = chosen(steps, every)
    fired: list[str] = []
    path: Path | None = None
    store: memvault.MemoryStore | None = None
    for n, pick in enumerate(picks):
        if path is None:  # a fresh copy (the previous command committed)
            path = tmp_path / f"run{n}"
            shutil.copytree(src, path)
            store = open_store(path)
        assert store is not None
        err = errnos[n % len(errnos)]
        injector = Injector(path, fail_on=pick, err=err)
        via_tool = n % 2 == 1
        caplog.clear()
        outcome: BaseException | None = None
        with caplog.at_level(logging.WARNING, logger="memvault"), injector.active():
            try:
                if via_tool:
                    memvault.MemoryTool(store, actor="fault-test").call(command)
                else:
                    run(store, command)
            except (MemvaultError, ToolError) as exc:
                outcome = exc
        assert not caplog.records, [r.getMessage() for r in caplog.records]  # no unexpected exception
        if injector.fired is not None:
            fired.append(f"{errno.errorcode[err]} {injector.fired}")
        else:  # this run took fewer of that step: no fault, the command must simply succeed
            assert outcome is None, outcome
        expected = [after]
        if outcome is not None:
            text = str(outcome)
            check_message(text, path)
            reason = os.strerror(err)
            if isinstance(outcome, ToolError):
                assert text.startswith(f"The memory store could not be written ({reason})"), (injector.fired, text)
                unknown = "may or may not" in text
            else:
                assert isinstance(outcome, StorageError), (injector.fired, type(outcome), text)
                unknown = outcome.outcome_unknown
                assert text == f"The memory store could not be written ({reason})." or unknown, text
            expected = [before, after] if unknown else [before]
        fresh = open_store(path)
        state = read_state(fresh)
        assert state in expected, (injector.fired, outcome)
        assert_clean(fresh)
        fresh.close()
        assert read_state(store) == state  # the store object that saw the fault agrees
        if state == after:
            store.close()
            path, store = None, None
    assert len(fired) >= 0.8 * len(picks), (len(fired), len(picks))
    # Finally, with no fault, the store that went through all of them takes the command.
    if path is not None and store is not None:
        run(store, command)
        assert read_state(open_store(path)) == after
        assert_clean(open_store(path))
    return fired


@pytest.mark.parametrize("name", [n for n in COMMANDS if n != "str_replace"])
def test_fault_at_each_kind_of_write_step(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The first and last occurrence of every distinct write step of each command (the pack's,
    the index's, ...), the errno rotating over ENOSPC, EACCES and EIO."""
    fired = fault_sweep(template, tmp_path, name, ERRNOS, caplog, every=False)
    kinds = {step.split(" ", 2)[1] for step in fired}
    # Every kind of step of a commit was hit (object writes, syncs, renames, the keyring, the ref).
    # A commit takes no chmod step: its files are created with their final modes (tested below).
    # With syncfs it takes no fsync either (objects and the previous branch move are synced by
    # syncfs, not an os call, and its failure is tested in test_syncfs): the fsync steps are each
    # failed by the test without syncfs below.
    expected = {"open", "write", "replace", "fdatasync", "ftruncate"}
    if not memvault.fsutil.syncfs_available():
        expected.add("fsync")
    assert expected <= kinds, kinds
    assert any("keyring" in s for s in fired) and any("refs/heads/main" in s for s in fired)


def test_fault_at_every_write_step_of_an_edit(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every single write step of one command (the pack's and the index's steps, each sync),
    the errno rotating over ENOSPC, EACCES and EIO."""
    fired = fault_sweep(template, tmp_path, "str_replace", ERRNOS, caplog, every=True)
    for name in ("tmp_pack_<n>", "tmp_idx_<n>"):
        assert any(step.endswith(f" write repo/objects/pack/{name}") for step in fired), fired
    for ext in (".pack", ".idx"):  # a rename is named by its target
        assert any(step.endswith(f" replace repo/objects/pack/pack-<id>{ext}") for step in fired), fired
    assert {step.split(" ", 1)[0] for step in fired} == {errno.errorcode[e] for e in ERRNOS}


def test_fault_at_every_write_step_of_an_edit_without_syncfs(
    template: tuple[Path, State, dict[str, State]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same where syncfs is unavailable (not Linux 5.8+): the fsync of the pack, of its
    index and of the pack directory are each their own step, and each of them fails once."""
    monkeypatch.setattr(memvault.fsutil, "_LIBC_SYNCFS", None)
    fired = fault_sweep(template, tmp_path, "str_replace", ERRNOS, caplog, every=True)
    for name in ("tmp_pack_<n>", "tmp_idx_<n>"):
        assert any(f"objects/pack/{name}" in step and " fsync " in step for step in fired), fired
    assert any(step.endswith(" fsync repo/objects/pack") for step in fired), fired


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "no-syncfs"])
def test_fault_at_every_write_step_of_an_edit_that_merges_packs(
    template: tuple[Path, State, dict[str, State]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    syncfs: bool,
) -> None:
    """Every write step of an edit that first merges the store's packs (forced: every pack),
    with and without syncfs: the merged pack's and index's steps, the removals of the packs it
    replaces. A fault in the merge leaves the packs as they were (the command goes on); a fault
    in a removal leaves a replaced pack behind (duplicates only)."""
    if not syncfs:
        monkeypatch.setattr(memvault.fsutil, "_LIBC_SYNCFS", None)
    monkeypatch.setattr(packdir, "MERGE_AT", 2)
    monkeypatch.setattr(packdir, "geometric_merge", len)
    if syncfs:  # the commit journal: replaced packs go after its next checkpoint, made the first step here
        real_append = journal.Journal.append

        def append(self: journal.Journal, entry: journal.Entry) -> bool:
            self.checkpoint()
            return real_append(self, entry)

        monkeypatch.setattr(journal.Journal, "append", append)
    fired = fault_sweep(template, tmp_path, "str_replace", ERRNOS, caplog, every=True)
    assert sum(" replace repo/objects/pack/pack-<id>.pack" in step for step in fired) >= 2  # merged + commit
    assert any(" unlink repo/objects/pack/pack-<id>.idx" in step for step in fired), fired
    assert any(" unlink repo/objects/pack/pack-<id>.pack" in step for step in fired), fired


@pytest.mark.parametrize("err", ERRNOS, ids=lambda e: errno.errorcode[e])
def test_each_errno_at_each_kind_of_step_of_an_edit(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, err: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Each errno at the first and last occurrence of every distinct write step of one command."""
    fired = fault_sweep(template, tmp_path, "str_replace", (err,), caplog, every=False)
    assert all(step.startswith(errno.errorcode[err]) for step in fired)
    assert any("keyring" in s for s in fired) and any("refs/heads/main" in s for s in fired)


def test_failed_undo_reports_an_unknown_outcome(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyring append fails after writing the COMMIT record, and so does every later write
    (cutting it off, the ABORT): the command may still be published, and the error says so.
    (The keyring's own flush: without the commit journal, whose failed flush test_journal.py tests.)"""
    monkeypatch.setenv("MEMVAULT_NO_JOURNAL", "1")
    src, before, afters = template
    path = tmp_path / "store"
    shutil.copytree(src, path)
    store = open_store(path)
    real_fdatasync = os.fdatasync

    def broken_disk(fd: int) -> None:
        real_fdatasync(fd)
        injector.fail_all = True  # from now on every write step fails
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    injector = Injector(path)
    with injector.active():
        monkeypatch.setattr(os, "fdatasync", broken_disk)
        with pytest.raises(StorageError) as info:
            run(store, COMMANDS["str_replace"])
        monkeypatch.undo()
    assert info.value.outcome_unknown
    assert "may or may not have been saved" in str(info.value)
    check_message(str(info.value), path)
    fresh = open_store(path)
    assert read_state(fresh) == afters["str_replace"]  # the recorded commit is served...
    run(fresh, {"command": "create", "path": "/memories/next.txt", "file_text": "n"})  # ...and published
    assert read_state(open_store(path)) == {**afters["str_replace"], "/memories/next.txt": b"n"}
    assert_clean(open_store(path))
    assert read_state(store)["/memories/next.txt"] == b"n"


def test_short_write_of_the_branch_value(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock protocol (what a branch file that cannot be overwritten in place gets)."""
    monkeypatch.setattr(gitrefs.Branch, "_move_in_place", lambda self, old, new: False)
    src, before, _ = template
    path = tmp_path / "store"
    shutil.copytree(src, path)
    store = open_store(path)
    steps = dry_run(tmp_path / "unused", lambda: None)
    assert steps == []
    probe = tmp_path / "probe"
    shutil.copytree(src, probe)
    with open_store(probe) as s:
        steps = dry_run(probe, lambda: run(s, COMMANDS["str_replace"]))
    assert "write repo/refs/heads/main.lock" in steps
    # half the branch value is written, then the disk is full
    injector = Injector(path, fail_on=("write repo/refs/heads/main.lock", 1), err=errno.ENOSPC, whole_writes=())
    with injector.active():
        try:
            run(store, COMMANDS["str_replace"])
        except StorageError:
            pass
    assert injector.fired == "write repo/refs/heads/main.lock"
    fresh = open_store(path)  # the branch is intact: the old value, or the new one
    assert read_state(fresh) in (before, read_state(open_store(probe)))
    assert_clean(fresh)


def test_failed_write_in_place_falls_back_to_the_lock_protocol(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An in-place branch write that fails half-way (half the new value written, then EIO) is
    replaced whole by the lock protocol: the command succeeds and the branch is intact."""
    src, _, afters = template
    path = tmp_path / "store"
    shutil.copytree(src, path)
    ref = path / "repo" / "refs" / "heads" / "main"
    inode, old_value = ref.stat().st_ino, ref.read_bytes()
    real = gitrefs.pwrite_all
    torn: list[bytes] = []

    def half_then_eio(fd: int, data: bytes, offset: int) -> None:
        real(fd, data[:20], offset)
        torn.append(ref.read_bytes())
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(gitrefs, "pwrite_all", half_then_eio)
    store = open_store(path)
    run(store, COMMANDS["str_replace"])
    assert ref.stat().st_ino != inode  # replaced by a rename, not left as written
    assert not (path / "repo" / "refs" / "heads" / "main.lock").exists()
    monkeypatch.undo()
    fresh = open_store(path)
    assert fresh.head[0] == ref.read_bytes().strip() == store.head[0]
    assert torn[0] not in (old_value, ref.read_bytes())  # the failed write had torn the branch
    assert read_state(fresh) == afters["str_replace"]
    assert_clean(fresh)


def test_failed_write_in_place_and_failed_lock_protocol_leave_the_old_branch(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half the new value written in place, then EIO, and the lock protocol fails too (disk
    full): the old value is written back first, so the branch is intact and names the old
    commit; the command fails with StorageError and leaves the store as it was."""
    src, before, _ = template
    path = tmp_path / "store"
    shutil.copytree(src, path)
    ref = path / "repo" / "refs" / "heads" / "main"
    old_value = ref.read_bytes()
    real = gitrefs.pwrite_all
    writes: list[bytes] = []

    def first_half_then_eio(fd: int, data: bytes, offset: int) -> None:
        writes.append(data)
        if len(writes) == 1:
            real(fd, data[:20], offset)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd, data, offset)

    def disk_full(self: object, lock: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(gitrefs, "pwrite_all", first_half_then_eio)
    monkeypatch.setattr(gitrefs.Branch, "_create_lock", disk_full)
    store = open_store(path)
    with pytest.raises(StorageError):
        run(store, COMMANDS["str_replace"])
    assert writes == [writes[0], old_value] and writes[0] != old_value
    assert ref.read_bytes() == old_value
    monkeypatch.undo()
    fresh = open_store(path)
    assert read_state(fresh) == before
    assert_clean(fresh)


# -- key material: slot writes, slot removal, keyring rewrites ------------------------------------


def key_sweep(tmp_path: Path, prepare: Any, action: Any, check: Any) -> int:
    """Fail the chosen steps (:func:`chosen`) of ``action(store)``, on a fresh store each time;
    ``check(path, failed)`` verifies the outcome. Returns the number of faults injected."""
    dry = tmp_path / "dry"
    store = make_store(dry)
    prepare(store)
    steps = dry_run(dry, lambda: action(store))
    picks = chosen(steps, every=False)
    for n, pick in enumerate(picks):
        path = tmp_path / f"k{n}"
        store = make_store(path)
        prepare(store)
        injector = Injector(path, fail_on=pick, err=ERRNOS[n % 3])
        failed: MemvaultError | None = None
        with injector.active():
            try:
                action(store)
            except MemvaultError as exc:
                failed = exc
        if failed is not None:
            assert isinstance(failed, StorageError), (injector.fired, failed)
            check_message(str(failed), path)
        check(path, failed)
        # The next writer finishes or discards leftovers: no temp or half-wiped file remains.
        writer = open_store(path)
        run(writer, {"command": "create", "path": "/memories/after.txt", "file_text": "x"})
        leftovers = [p.name for p in path.rglob(".*") if p.is_file()]
        assert leftovers == [], (injector.fired, leftovers)
        assert_clean(open_store(path))
    return len(picks)


def test_faults_while_adding_and_removing_key_slots(tmp_path: Path) -> None:
    key = tmp_path / "extra.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)

    def none(store: memvault.MemoryStore) -> None:
        run(store, {"command": "create", "path": "/memories/a.txt", "file_text": "a"})

    def add(store: memvault.MemoryStore) -> None:
        keymgmt.add_slot(store, key_file=key)

    def check_add(path: Path, failed: MemvaultError | None) -> None:
        assert read_state(open_store(path))["/memories/a.txt"] == b"a"  # the passphrase still opens it
        try:
            extra = memvault.MemoryStore.open(path, key_file=key)
        except WrongKeyError:
            assert failed is not None  # the slot is absent only when the command failed
        else:
            assert read_state(extra)["/memories/a.txt"] == b"a"

    assert key_sweep(tmp_path / "add", none, add, check_add) > 5

    def with_extra(store: memvault.MemoryStore) -> None:
        none(store)
        keymgmt.add_slot(store, key_file=key)

    def remove(store: memvault.MemoryStore) -> None:
        extra = next(s.slot_id for s in keymgmt.list_slots(store) if s.kind == "keyfile")
        keymgmt.remove_slot(store, extra)

    def check_remove(path: Path, failed: MemvaultError | None) -> None:
        # Never a half-wiped slot under its real name: the store opens with the passphrase, and
        # the key file either still works (not yet removed) or is refused.
        assert read_state(open_store(path))["/memories/a.txt"] == b"a"
        try:
            memvault.MemoryStore.open(path, key_file=key)
        except WrongKeyError:
            pass
        else:
            assert failed is not None

    assert key_sweep(tmp_path / "remove", with_extra, remove, check_remove) > 5


def test_faults_while_redacting(tmp_path: Path) -> None:
    """The keyring rewrite of a redaction: old keyring or new keyring, never a broken one."""

    def prepare(store: memvault.MemoryStore) -> None:
        run(store, {"command": "create", "path": "/memories/a.txt", "file_text": f"a {SECRET}"})
        run(store, {"command": "create", "path": "/memories/b.txt", "file_text": "b"})
        run(store, {"command": "delete", "path": "/memories/a.txt"})

    def action(store: memvault.MemoryStore) -> None:
        shred.shred_file(store, "/memories/a.txt", reason="test")

    def check(path: Path, failed: MemvaultError | None) -> None:
        store = open_store(path)
        assert read_state(store) == {"/memories/b.txt": b"b"}
        first = store.state_at(history.resolve(store, "#2"))  # before the delete
        node = first.nodes.get("/memories/a.txt")
        if node is None:  # redacted: its name went with its key
            assert sum(n.redacted for n in first.nodes.values()) == 1
            return
        assert failed is not None and store.read_node(node) == f"a {SECRET}".encode()

    assert key_sweep(tmp_path, prepare, action, check) > 5


def test_faults_while_rotating_the_master_key(tmp_path: Path) -> None:
    def prepare(store: memvault.MemoryStore) -> None:
        run(store, {"command": "create", "path": "/memories/a.txt", "file_text": "a"})

    def action(store: memvault.MemoryStore) -> None:
        keymgmt.rotate(store, passphrase=PASSPHRASE, kdf=FAST_KDF)

    def check(path: Path, failed: MemvaultError | None) -> None:
        assert read_state(open_store(path)) == {"/memories/a.txt": b"a"}

    assert key_sweep(tmp_path, prepare, action, check) > 5


# -- read-only store ------------------------------------------------------------------------------


def _chmod_tree(root: Path, writable: bool) -> None:
    for p in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        p.chmod(mode | 0o200 if writable else mode & ~0o222)


def _chmod_stops_writes(root: Path) -> bool:
    probe = root / "probe"
    try:
        probe.write_bytes(b"")
    except PermissionError:
        return True
    probe.unlink()
    return False  # e.g. running as root: simulate the read-only filesystem instead


WRITES = [
    {"command": "create", "path": "/memories/new.txt", "file_text": "x"},
    {"command": "str_replace", "path": "/memories/notes.txt", "old_str": "beta", "new_str": "gamma"},
    {"command": "insert", "path": "/memories/notes.txt", "insert_line": 0, "insert_text": "x"},
    {"command": "delete", "path": "/memories/notes.txt"},
    {"command": "rename", "old_path": "/memories/notes.txt", "new_path": "/memories/n.txt"},
]


@pytest.mark.parametrize("how", ["chmod", "erofs"])
def test_read_only_store_refuses_writes_and_serves_views(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path, how: str
) -> None:
    """``chmod -R a-w`` (simulated with EACCES on every write where chmod does not stop writes,
    e.g. as root) and a read-only filesystem (EROFS): every write fails with a clear error and
    changes nothing, views keep working, for a store opened before and one opened after."""
    src, before, _ = template
    path = tmp_path / "store"
    shutil.copytree(src, path)
    opened_before = open_store(path)
    if how == "chmod":
        _chmod_tree(path, writable=False)
        simulate = not _chmod_stops_writes(path)
        injector = Injector(path, err=errno.EACCES, fail_all=simulate)
        reason = os.strerror(errno.EACCES)
    else:
        injector = Injector(path, err=errno.EROFS, fail_all=True)
        reason = os.strerror(errno.EROFS)
    try:
        with injector.active():
            opened_after = open_store(path)
            for store in (opened_before, opened_after):
                tool = memvault.MemoryTool(store)
                for command in WRITES:
                    with pytest.raises(ToolError) as info:
                        tool.call(command)
                    assert str(info.value) == f"The memory store could not be written ({reason}).", command
                    with pytest.raises(StorageError):
                        run(store, command)
                assert tool.call({"command": "view", "path": "/memories/notes.txt"}).endswith("     2\tbeta")
                assert "/memories/proj/sub" in tool.call({"command": "view", "path": "/memories"})
                assert tool.call({"command": "view", "path": "/memories/proj/sub/b.txt"}).endswith(f"b {SECRET}")
                assert read_state(store) == before
            with pytest.raises(StorageError):
                keymgmt.add_slot(opened_after, passphrase="another passphrase", kdf=FAST_KDF)
    finally:
        if how == "chmod":
            _chmod_tree(path, writable=True)
    assert read_state(open_store(path)) == before
    assert_clean(open_store(path))
    run(opened_before, WRITES[0])  # writable again: the same store object works
    assert read_state(open_store(path))["/memories/new.txt"] == b"x"


# -- SIGKILL of a real child mid-command ----------------------------------------------------------


@pytest.mark.parametrize("point", ["git_write_after", "keyring_after", "cas_after"])
def test_sigkill_mid_command(template: tuple[Path, State, dict[str, State]], tmp_path: Path, point: str) -> None:
    """A real child paused at a write step is killed with SIGKILL: old state before the keyring
    records the commit, new state from then on; verify is clean; the lock is free at once."""
    src, before, afters = template
    path = tmp_path / "store"
    shutil.copytree(src, path)
    ready = tmp_path / "ready"
    command = COMMANDS["rename_dir"]
    env = {**os.environ, PASSPHRASE_ENV: PASSPHRASE}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "pause", str(path), point, json.dumps(command), str(ready)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    store = open_store(path)
    store.lock_timeout = 5
    want = before if point == "git_write_after" else afters["rename_dir"]
    assert read_state(store) == want
    run(store, {"command": "create", "path": "/memories/next.txt", "file_text": "n"})
    assert read_state(open_store(path)) == {**want, "/memories/next.txt": b"n"}
    assert_clean(open_store(path))


# -- file modes whatever the umask ----------------------------------------------------------------


@pytest.mark.parametrize("umask", [0, 0o077, 0o022], ids=["umask0", "umask077", "umask022"])
def test_modes_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    """Store creation, commits, a redaction's keyring rewrite, key slots added and rotated:
    every directory is 0700 and no file has a group or other permission bit."""
    old = os.umask(umask)
    try:
        path = tmp_path / "store"
        store = make_store(path)
        tool = memvault.MemoryTool(store)
        tool.call({"command": "create", "path": "/memories/a/b/c.txt", "file_text": "c"})
        tool.call({"command": "create", "path": "/memories/x.txt", "file_text": "x"})
        tool.call({"command": "delete", "path": "/memories/x.txt"})
        shred.shred_file(store, "/memories/x.txt")
        keymgmt.add_slot(store, passphrase="second passphrase", kdf=FAST_KDF)
        keymgmt.rotate(store, passphrase=PASSPHRASE, kdf=FAST_KDF, drop_other_slots=True)
        tool.call({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z"})
    finally:
        os.umask(old)
    seen = {"dirs": 0, "files": 0}
    for p in [path, *path.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        if p.is_dir():
            seen["dirs"] += 1
            assert mode == 0o700, (str(p.relative_to(path)), oct(mode))
        else:
            seen["files"] += 1
            assert mode & 0o077 == 0 and mode & 0o400, (str(p.relative_to(path)), oct(mode))
    assert seen["dirs"] > 10 and seen["files"] > 15
    assert len(list((path / "repo" / "objects" / "pack").glob("*.idx"))) >= 4  # the commits' packs were checked
    assert (path / "lock").exists() and (path / "repo" / "refs" / "heads" / "main").exists()


@pytest.mark.parametrize("umask", [0, 0o022], ids=["umask0", "umask022"])
def test_missing_parents_of_a_new_store_are_made_owner_only(tmp_path: Path, umask: int) -> None:
    """The directories create makes above a new store are 0700 whatever the umask; the existing
    ones are left as they were."""
    os.chmod(tmp_path, 0o755)
    old = os.umask(umask)
    try:
        memvault.MemoryStore.create(tmp_path / "a" / "b" / "store", passphrase=PASSPHRASE, kdf=FAST_KDF).close()
    finally:
        os.umask(old)
    for made in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "store"):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755  # an existing parent is not changed


@pytest.mark.parametrize("umask", [0, 0o022], ids=["umask0", "umask022"])
def test_commands_create_files_owner_only_from_the_start(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file a memory command creates in the store is created owner-only (packs and their
    indexes read-only), so none is ever readable by others, not even between its creation and a
    chmod; and no command changes a mode afterwards."""
    path = tmp_path / "store"
    store = make_store(path)
    seed_files(store, INITIAL, actor="setup", session="s")
    tool = memvault.MemoryTool(store)
    created: list[tuple[str, int]] = []
    chmods: list[str] = []
    real_open, real_chmod = os.open, os.chmod
    root = str(path) + os.sep

    def spy_open(p: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and os.fsdecode(os.fspath(p)).startswith(root):
            created.append((os.fsdecode(os.fspath(p))[len(root) :], mode))
        return int(real_open(p, flags, mode, *args, **kwargs))

    def spy_chmod(p: Any, *args: Any, **kwargs: Any) -> None:
        chmods.append(os.fsdecode(os.fspath(p)))
        real_chmod(p, *args, **kwargs)

    old = os.umask(umask)
    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "chmod", spy_chmod)
    try:
        for name in ("str_replace", "create", "insert", "rename_dir"):
            tool.call(COMMANDS[name])
        tool.call({"command": "delete", "path": "/memories/archive"})
    finally:
        os.umask(old)
        monkeypatch.undo()
    objects = [(p, m) for p, m in created if "/objects/" in p]
    assert len(objects) >= 5 * 2, created  # every command's pack and index were seen
    assert all(mode & 0o077 == 0 for _p, mode in created), created
    assert all(mode == 0o400 for _p, mode in objects), objects
    assert chmods == []
    for p in [path, *path.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == 0o700 if p.is_dir() else mode & 0o077 == 0, (str(p.relative_to(path)), oct(mode))


def test_leftovers_of_a_killed_writer_are_wiped_by_the_next_writer(
    template: tuple[Path, State, dict[str, State]], tmp_path: Path
) -> None:
    """Temporary files a killed writer can leave (a key slot or memvault.json being written, a
    slot being wiped, a keyring being rewritten) hold wrapped key material: readers leave them,
    the next writer wipes them, and nothing else changes."""
    src, before, _ = template
    path = tmp_path / "store"
    shutil.copytree(src, path)
    slot = next((path / "keys").glob("*.json"))
    leftovers = [
        path / "keys" / f".{slot.name}.tmp-123-456",
        path / "keys" / f".{'ab' * 16}.json.wipe",
        path / ".memvault.json.tmp-123-456",
        path / ".keyring.rewrite-123",
    ]
    for p in leftovers:
        p.write_bytes(slot.read_bytes())
    store = open_store(path)
    assert memvault.MemoryTool(store).call({"command": "view", "path": "/memories/notes.txt"}).endswith("2\tbeta")
    assert all(p.exists() for p in leftovers)  # a reader touches nothing
    run(store, {"command": "create", "path": "/memories/next.txt", "file_text": "n"})
    assert not any(p.exists() for p in leftovers)
    assert slot.exists() and read_state(open_store(path)) == {**before, "/memories/next.txt": b"n"}
    assert_clean(open_store(path))


@pytest.mark.parametrize("in_place", [False, True], ids=["new-directory", "empty-directory"])
def test_faults_while_creating_a_store(tmp_path: Path, in_place: bool) -> None:
    """A fault at each kind of step of store creation (key slot, keyring, git repository, first
    commit, memvault.json, the rename into place): a clear error, and the directory is either no
    store at all or a complete one that opens and verifies. A new directory is built in a hidden
    sibling and renamed into place; an existing empty one is built in place."""

    def target(name: str) -> Path:
        (tmp_path / name).mkdir()
        if in_place:
            (tmp_path / name / "s").mkdir()
        return tmp_path / name / "s"

    dry = target("dry")
    steps = dry_run(tmp_path / "dry", lambda: make_store(dry))
    picks = chosen(steps, every=False)
    assert len(picks) > 10
    complete = 0
    for n, pick in enumerate(picks):
        path = target(f"c{n}")
        injector = Injector(path.parent, fail_on=pick, err=ERRNOS[n % 3])
        failed: MemvaultError | None = None
        with injector.active():
            try:
                make_store(path).close()
            except MemvaultError as exc:
                failed = exc
        if injector.fired is None:
            continue
        assert isinstance(failed, StorageError) or failed is None, (injector.fired, failed)
        if failed is not None:
            check_message(str(failed), path)
        try:
            store = open_store(path)
        except memvault.errors.StoreNotFoundError:
            assert failed is not None
            # nothing half-made is left: the target is gone (new directory) or empty again
            assert (sorted(p.name for p in path.iterdir()) == []) if in_place else not path.exists()
            assert [p.name for p in path.parent.iterdir() if p.name != path.name] == []  # no hidden sibling
            make_store(path).close()  # and creating the store again works
            continue
        complete += 1
        assert read_state(store) == {}
        assert_clean(store)
        run(store, {"command": "create", "path": "/memories/a.txt", "file_text": "a"})
    if not in_place:
        assert complete >= 1  # faults after the store was renamed into place leave a whole store
