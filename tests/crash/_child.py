"""Child process for the crash and multi-process tests (run as a script, never collected).

Usage (the passphrase comes from the ``MEMVAULT_TEST_PASSPHRASE`` environment variable):

- ``_child.py crash STORE POINT COMMAND_JSON``: open the store, arm the crash point ``POINT``
  (see :data:`POINTS`), run one memory command; the process dies with ``os._exit(137)`` at the
  crash point. Exit 3 if the command finished without reaching the point, 4 if it failed.
- ``_child.py hang STORE COMMAND_JSON READY_FILE``: like ``crash`` but at the branch
  compare-and-swap (store lock held, keyring already appended) it creates ``READY_FILE`` and
  sleeps until killed.
- ``_child.py pause STORE POINT COMMAND_JSON READY_FILE``: like ``crash``, but at the crash
  point (one of the wrapped steps: ``git_write_*``, ``keyring_before/after``, ``cas_*``) it
  creates ``READY_FILE`` and sleeps, for the parent to kill it with SIGKILL.
- ``_child.py create-crash STORE WHEN``: create a store and die before/after the atomic write
  of ``memvault.json`` (``WHEN`` is ``before`` or ``after``).
- ``_child.py zygote``: import everything once, then for each line of stdin (a JSON list of
  ``[store, point, command]`` jobs) fork one child per job (each runs like ``crash``), wait for
  all of them and print a JSON list of their exit codes. Forked children are real processes that
  die the same way; forking only saves the interpreter start-up per crash.
- ``_child.py worker STORE WORKER N_OPS PATH READY_FILE GO_FILE``: run :func:`hammer` against
  ``PATH`` after a start barrier; print its result as JSON.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_CRASHED = 137
EXIT_NOT_REACHED = 3
EXIT_COMMAND_FAILED = 4
PASSPHRASE_ENV = "MEMVAULT_TEST_PASSPHRASE"

#: Crash point -> what a fresh open must show afterwards, and what the next writer must see:
#: ``old`` (nothing recorded), ``pending`` (recorded in the keyring but the branch not moved: the
#: recorded commit is durable and authentic, so a fresh open already serves it and the next
#: writer moves the branch to it), ``new`` (published).
#: The ``pack_*``/``idx_*`` points act on the commit's pack, the ``merge_*`` points on the merge
#: of the smallest packs a command makes before it (forced here: every pack is merged).
POINTS: dict[str, str] = {
    "git_write_before": "old",
    "merge_pack_torn": "old",
    "merge_before_idx": "old",
    "merge_after_idx": "old",
    "pack_torn": "old",
    "pack_before_idx": "old",
    "idx_torn": "old",
    "pack_after_idx": "old",
    "merge_retiring": "old",
    "merge_retired": "old",
    "git_write_after": "old",
    "keyring_before": "old",
    "keyring_torn_half": "old",
    "keyring_torn_all_but_last_byte": "old",
    "keyring_after": "pending",
    "cas_before": "pending",
    "ref_lock_left": "pending",
    "ref_in_place_written": "new",
    "cas_after": "new",
}

COUNTER_RE = re.compile(r"\[count: (\d+)\]")
LOST_RACE = "No replacement was performed"


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_CRASHED)


def _wrap(owner: Any, name: str, *, before: bool, action: Callable[[], None] = die) -> None:
    real = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            action()
        result = real(*args, **kwargs)
        action()
        return result

    setattr(owner, name, wrapper)


def _torn(src: Any) -> None:
    """Cut the temporary file ``src`` to half its size and die (a write the crash interrupted)."""
    fd = os.open(src, os.O_WRONLY)
    os.ftruncate(fd, os.fstat(fd).st_size // 2)
    os.close(fd)
    die()


def _arm_pack_point(point: str, action: Callable[[], None]) -> None:
    """Crash points in :meth:`GitStore.write_pack`, at its renames and removals. The ``merge_*``
    points force a merge of every pack first (the policy is tested elsewhere); the merged pack is
    the first ``.pack`` renamed, the commit's pack the next."""
    from memvault.git import packdir
    from memvault.git import repo as gitrepo

    real_replace, real_unlink = gitrepo.os.replace, gitrepo.os.unlink
    renamed: list[str] = []
    merge = point.startswith("merge_")
    if merge:
        packdir.MERGE_AT = 2  # type: ignore[misc]
        packdir.geometric_merge = len  # type: ignore[assignment]

    def replace(src: Any, dst: Any) -> None:
        dst_s = os.fsdecode(dst)
        kind = ".pack" if dst_s.endswith(".pack") else ".idx" if dst_s.endswith(".idx") else None
        if kind is None:
            real_replace(src, dst)
            return
        which = "merge" if merge and len(renamed) < 2 else "pack"
        if (point, kind) in (("pack_torn", ".pack"), ("idx_torn", ".idx"), ("merge_pack_torn", ".pack")) and (
            which == ("merge" if point.startswith("merge_") else "pack")
        ):
            _torn(src)
        real_replace(src, dst)
        renamed.append(kind)
        if (point, which, kind) in (
            ("merge_before_idx", "merge", ".pack"),
            ("merge_after_idx", "merge", ".idx"),
            ("pack_before_idx", "pack", ".pack"),
            ("pack_after_idx", "pack", ".idx"),
        ):
            action()

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        real_unlink(path, *args, **kwargs)
        if point == "merge_retiring" and os.fsdecode(path).endswith(".idx"):
            action()  # one replaced pack lost its index, its data and the others are still there

    gitrepo.os.replace = replace  # type: ignore[assignment]
    gitrepo.os.unlink = unlink  # type: ignore[assignment]
    if point == "merge_retired":
        _wrap(packdir.PackDirectory, "_retire", before=False, action=action)
    if point in ("merge_retiring", "merge_retired"):
        # With the commit journal, the packs a merge replaced are removed after the journal's
        # next checkpoint: make the command's own journal append begin with one.
        from memvault.store import journal as journal_mod

        real_append = journal_mod.Journal.append

        def append(self: Any, entry: Any) -> bool:
            self.checkpoint()
            return real_append(self, entry)

        journal_mod.Journal.append = append  # type: ignore[method-assign]


def arm(point: str, action: Callable[[], None] = die) -> None:
    """Install the crash point ``point`` in this process (``action`` replaces dying only for the
    points that wrap a whole step)."""
    from memvault.git.repo import GitStore
    from memvault.keys.keyring import Keyring

    if point == "git_write_before":
        _wrap(GitStore, "write_pack", before=True, action=action)
    elif point == "git_write_after":
        _wrap(GitStore, "write_pack", before=False, action=action)
    elif point == "keyring_before":
        _wrap(Keyring, "append", before=True, action=action)
    elif point == "keyring_after":
        _wrap(Keyring, "append", before=False, action=action)
    elif point == "cas_before":
        _wrap(GitStore, "compare_and_swap", before=True, action=action)
    elif point == "cas_after":
        _wrap(GitStore, "compare_and_swap", before=False, action=action)
    elif point.startswith(("pack_", "idx_", "merge_")):
        _arm_pack_point(point, action)
    elif point == "ref_in_place_written":
        # Die right after the branch file's bytes were overwritten in place, before its close.
        from memvault.git import refs as gitrefs

        real_pwrite_all = gitrefs.pwrite_all

        def pwrite_all(fd: int, data: bytes, offset: int) -> None:
            real_pwrite_all(fd, data, offset)
            die()

        gitrefs.pwrite_all = pwrite_all  # type: ignore[assignment]
    elif point == "ref_lock_left":
        # Die holding ``refs/heads/main.lock`` (new id written, not yet renamed over the ref).
        # Later moves are made in place; the lock protocol is what a branch file that cannot be
        # (packed, hard-linked, another size) gets: force it here.
        from memvault.git import refs as gitrefs

        gitrefs.Branch._move_in_place = lambda self, old, new: False  # type: ignore[method-assign]
        real_replace = os.replace

        def replace(src: Any, dst: Any) -> None:
            if os.fsdecode(dst).endswith(os.path.join("refs", "heads", "main")):
                die()
            real_replace(src, dst)

        os.replace = replace  # type: ignore[assignment]
    elif point.startswith("keyring_torn_"):

        def append(self: Keyring, records: bytes, *, durable: bool) -> int:
            self.refresh()
            start = self._offset
            cut = len(records) // 2 if point == "keyring_torn_half" else len(records) - 1
            fd = os.open(self._path, os.O_WRONLY)
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
            os.write(fd, records[:cut])
            die()
            return start

        Keyring.append = append  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown crash point {point!r}")


def _open(store_path: str) -> Any:
    import memvault

    return memvault.MemoryStore.open(store_path, passphrase=os.environ[PASSPHRASE_ENV])


def _run_one(store_path: str, command: dict[str, Any]) -> int:
    from memvault.errors import MemvaultError
    from memvault.protocol.commands import run_command

    store = _open(store_path)
    try:
        run_command(store, command, actor="crash-child", session="crash")
    except MemvaultError as err:
        print(f"command failed: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_COMMAND_FAILED
    return EXIT_NOT_REACHED


def hammer(run: Callable[[dict[str, Any]], Any], worker: int, n_ops: int, path: str) -> dict[str, int]:
    """Alternate unique-line inserts and read-modify-write counter increments on ``path``.

    ``run`` executes one memory command and raises on failure. An increment views the file,
    then replaces ``[count: N]`` with ``[count: N+1]``; a lost race (the counter moved between
    the view and the replace) is retried. Returns the counts of successful mutating commands.
    """
    inserts = increments = retries = 0
    for i in range(n_ops):
        if i % 2 == 0:
            run({"command": "insert", "path": path, "insert_line": 0, "insert_text": f"w{worker}-{i}"})
            inserts += 1
            continue
        for _attempt in range(500):
            text = run({"command": "view", "path": path})
            found = COUNTER_RE.findall(text)
            if len(found) != 1:
                raise AssertionError(f"worker {worker}: expected one counter line, view showed {found!r}")
            n = int(found[0])
            try:
                edit = {"command": "str_replace", "path": path, "old_str": f"[count: {n}]"}
                run({**edit, "new_str": f"[count: {n + 1}]"})
            except Exception as err:
                if LOST_RACE not in str(err):
                    raise
                retries += 1
                continue
            increments += 1
            break
        else:
            raise AssertionError(f"worker {worker}: increment never succeeded")
    return {"inserts": inserts, "increments": increments, "retries": retries}


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.005)


def main(argv: list[str]) -> int:
    mode = argv[1]
    if mode == "crash":
        _, _, store_path, point, command = argv
        arm(point)
        return _run_one(store_path, json.loads(command))
    if mode == "zygote":
        import memvault.protocol.commands  # noqa: F401

        for line in sys.stdin:
            pids = []
            for store_path, point, command in json.loads(line):
                pid = os.fork()
                if pid == 0:
                    try:
                        arm(point)
                        code = _run_one(store_path, command)
                    except BaseException:
                        import traceback

                        traceback.print_exc()
                        code = 1
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
                pids.append(pid)
            codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
            print(json.dumps(codes), flush=True)
        return 0
    if mode == "hang":
        _, _, store_path, command, ready = argv
        from memvault.git.repo import GitStore

        def hang(*_args: Any, **_kwargs: Any) -> bool:
            Path(ready).touch()
            time.sleep(120)
            return False

        GitStore.compare_and_swap = hang  # type: ignore[method-assign]
        return _run_one(store_path, json.loads(command))
    if mode == "pause":
        _, _, store_path, point, command, ready = argv

        def pause() -> None:
            Path(ready).touch()
            time.sleep(120)

        arm(point, pause)
        return _run_one(store_path, json.loads(command))
    if mode == "create-crash":
        _, _, store_path, when = argv
        import memvault
        import memvault.store.config
        from memvault.settings import KdfParams

        real = memvault.store.config.atomic_write

        def atomic_write(*args: Any, **kwargs: Any) -> None:
            if when == "before":
                die()
            real(*args, **kwargs)
            die()

        memvault.store.config.atomic_write = atomic_write  # type: ignore[assignment]
        kdf = KdfParams(memory_kib=8, iterations=1, lanes=1)
        memvault.MemoryStore.create(store_path, passphrase=os.environ[PASSPHRASE_ENV], kdf=kdf)
        return EXIT_NOT_REACHED
    if mode == "worker":
        _, _, store_path, worker, n_ops, path, ready, go = argv
        from memvault.protocol.commands import run_command

        store = _open(store_path)
        Path(ready).touch()
        _wait_for(Path(go), 30)

        def run(command: dict[str, Any]) -> Any:
            return run_command(store, command, actor=f"proc-{worker}", session="hammer")

        print(json.dumps(hammer(run, int(worker), int(n_ops), path)))
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
