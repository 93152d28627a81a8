"""Platforms and terminals: the durable flush where ``fdatasync`` or ``F_FULLFSYNC`` differ
(macOS, simulated), a clear refusal where ``fcntl`` is missing (Windows, simulated), Ctrl-C while
the command loads or at the passphrase prompt, and the writer-lock wait told on a terminal
(pseudo-terminals, real processes holding the lock)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memvault import MemoryStore, MemoryTool
from memvault.cli import main
from memvault.errors import LockedError
from memvault.fsutil import UNSUPPORTED_PLATFORM, durable_flush
from memvault.store import lock as storelock
from memvault.store.lock import LockHolder, StoreLock

ENTRY = "import sys; from memvault.cli import main; sys.exit(main())"
HOST = os.uname().nodename


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key.bin"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    return path


@pytest.fixture
def store(tmp_path: Path, key_file: Path) -> Path:
    """An empty store made with the key file (no KDF: fast)."""
    root = tmp_path / "store"
    MemoryStore.create(root, key_file=key_file).close()
    return root


def _env(key_file: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    if key_file is not None:
        env["MEMVAULT_KEY_FILE"] = str(key_file)
    env.update(extra)
    return env


def _pty_run(
    args: list[str],
    env: dict[str, str],
    *,
    answer: tuple[bytes, bytes] | None = None,
    controlling: bool = False,
    timeout: float = 20.0,
) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a new pseudo-terminal; with ``answer``
    ``(prompt, keys)``, type ``keys`` once ``prompt`` shows. ``controlling``: the terminal is the
    process's controlling terminal (so ^C is a real interrupt from the line discipline).
    Returns the exit status and everything the terminal showed."""
    master, slave = pty.openpty()

    def make_controlling() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        preexec_fn=make_controlling if controlling else None,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"no end within {timeout} s; the terminal showed {out!r}")
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError as err:  # EIO: every process let go of the terminal
                if err.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            out += chunk
            if answer is not None and answer[0] in out:
                os.write(master, answer[1])
                answer = None
        return proc.wait(timeout=10), out.decode().replace("\r\n", "\n")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.fixture
def hold_lock(store: Path) -> Iterator[Callable[[float], subprocess.Popen[str]]]:
    """Start a process that holds the store's writer lock for ``seconds`` (it says "held" once it
    holds it)."""
    started: list[subprocess.Popen[str]] = []
    code = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from memvault.store.lock import StoreLock
        with StoreLock(Path(sys.argv[1]) / "lock").hold():
            print("held", flush=True)
            time.sleep(float(sys.argv[2]))
        """
    )

    def start(seconds: float) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(store), str(seconds)], stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


# -- the durable flush -----------------------------------------------------------------------------


class _Calls:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> _Calls:
    record = _Calls()
    monkeypatch.setattr(os, "fsync", lambda fd: record.seen.append(("fsync", fd)))
    monkeypatch.setattr(os, "fdatasync", lambda fd: record.seen.append(("fdatasync", fd)), raising=False)
    monkeypatch.delattr(fcntl, "F_FULLFSYNC", raising=False)
    return record


def test_durable_flush_on_linux_uses_fdatasync_for_data_only(calls: _Calls) -> None:
    durable_flush(7)
    durable_flush(8, data_only=True)
    assert calls.seen == [("fsync", 7), ("fdatasync", 8)]


def test_durable_flush_without_fdatasync_falls_back_to_fsync(calls: _Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "fdatasync")
    durable_flush(8, data_only=True)
    assert calls.seen == [("fsync", 8)]


def test_durable_flush_uses_full_fsync_where_it_exists(calls: _Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS: F_FULLFSYNC, which also empties the drive's cache, instead of fsync or fdatasync;
    a filesystem that refuses it gets fsync."""
    monkeypatch.setattr(fcntl, "F_FULLFSYNC", 51, raising=False)
    refuse = {"on": False}

    def fake_fcntl(fd: int, op: int, arg: int = 0) -> int:
        calls.seen.append(("F_FULLFSYNC" if op == 51 else f"fcntl {op}", fd))
        if refuse["on"]:
            raise OSError(errno.ENOTSUP, "Operation not supported")
        return 0

    monkeypatch.setattr(fcntl, "fcntl", fake_fcntl)
    durable_flush(5)
    durable_flush(6, data_only=True)
    assert calls.seen == [("F_FULLFSYNC", 5), ("F_FULLFSYNC", 6)]
    refuse["on"] = True
    calls.seen.clear()
    durable_flush(9, data_only=True)
    assert calls.seen == [("F_FULLFSYNC", 9), ("fdatasync", 9)]


_MACOS = textwrap.dedent(
    """
    import collections, fcntl, json, os, sys
    del os.fdatasync  # macOS has none
    real_fsync, real_fcntl = os.fsync, fcntl.fcntl
    counts = collections.Counter()

    def fsync(fd):
        caller = sys._getframe(1).f_globals.get("__name__", "?")
        counts["fsync from memvault" if caller.startswith("memvault") else "fsync from others"] += 1
        real_fsync(fd)

    def fake_fcntl(fd, op, arg=0):
        if op == 51:
            counts["F_FULLFSYNC"] += 1
            return 0
        return real_fcntl(fd, op, arg)

    os.fsync = fsync
    fcntl.fcntl = fake_fcntl
    from memvault.cli import main
    from memvault import MemoryStore, MemoryTool

    for where in sys.argv[1:]:
        if where.endswith("full"):
            fcntl.F_FULLFSYNC = 51
        counts.clear()
        status = [main(["--store", where, "init"])]
        with MemoryStore.open(where, key_file=os.environ["MEMVAULT_KEY_FILE"]) as store:
            MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "hello"})
        status.append(main(["--store", where, "cat", "/memories/a.md"]))
        print()
        print(json.dumps({"status": status, "counts": counts}))
    """
)


def test_a_store_works_where_fdatasync_is_missing(tmp_path: Path, key_file: Path) -> None:
    """macOS, simulated: no ``os.fdatasync``, first without ``F_FULLFSYNC`` (fsync then), then
    with it: every flush memvault itself makes goes through it (dulwich's own fsyncs at ``init``
    remain)."""
    done = subprocess.run(
        [sys.executable, "-c", _MACOS, str(tmp_path / "plain"), str(tmp_path / "full")],
        env=_env(key_file, MEMVAULT_NO_SYNCFS="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0:2] == [f"Created an empty memory store in {tmp_path / 'plain'}", "hello"]
    assert lines[3:5] == [f"Created an empty memory store in {tmp_path / 'full'}", "hello"]
    plain, full = json.loads(lines[2]), json.loads(lines[5])
    assert plain["status"] == full["status"] == [0, 0]
    assert plain["counts"]["fsync from memvault"] >= 10
    assert "F_FULLFSYNC" not in plain["counts"]
    assert full["counts"]["F_FULLFSYNC"] >= 10
    assert "fsync from memvault" not in full["counts"]


# -- no fcntl (Windows) ----------------------------------------------------------------------------

_NO_FCNTL = "import sys; sys.modules['fcntl'] = None; "


def test_without_fcntl_memvault_refuses_in_one_clear_line(tmp_path: Path, key_file: Path) -> None:
    """Where ``import fcntl`` fails (Windows), using memvault raises ImportError naming the
    supported platforms, and the command prints that one line and exits 1, creating nothing."""
    code = _NO_FCNTL + textwrap.dedent(
        """
        import memvault
        for attempt in ("from memvault import MemoryStore", "import memvault.store", "memvault.MemoryTool"):
            try:
                exec(attempt)
            except ImportError as err:
                print(type(err).__name__, err)
        from memvault.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--store", str(tmp_path / "s"), "init"],
        env=_env(key_file),
        capture_output=True,
        text=True,
        timeout=30,
    )
    message = (
        "memvault runs on Linux and macOS only; this platform (linux) lacks the POSIX file locking "
        "(fcntl, flock) it needs to keep a store consistent."
    )
    assert message == UNSUPPORTED_PLATFORM
    assert (done.returncode, done.stdout, done.stderr) == (1, f"ImportError {message}\n" * 3, f"memvault: {message}\n")
    assert not (tmp_path / "s").exists()


# -- Ctrl-C ----------------------------------------------------------------------------------------


def test_the_console_entry_loads_nothing_before_main_runs() -> None:
    """``from memvault.cli import main`` (what the ``memvault`` script runs first) imports no other
    part of memvault and no third-party package: an interrupt can only land in ``main``, which
    ends quietly."""
    code = (
        "import sys; before = set(sys.modules); from memvault.cli import main; "
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('memvault') or "
        "m.split('.')[0] in ('pydantic', 'cryptography', 'dulwich', 'hyperscan', 'anthropic')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout == "['memvault', 'memvault.cli']\n", done.stderr


@pytest.mark.parametrize(
    "module",
    [
        "memvault.cli._main",
        "memvault.settings",
        # Imported from inside pydantic_core's Rust initialisation: interrupted there, pyo3 panics
        # (prints "panicked at ..." itself, then raises PanicException, a BaseException).
        "datetime",
        "cryptography.hazmat.bindings._rust",
    ],
)
def test_ctrl_c_while_the_command_loads_ends_quietly(store: Path, key_file: Path, module: str) -> None:
    """An interrupt while ``main`` imports the rest of memvault (stalled here at ``module``):
    status 130, nothing on stderr (no traceback, no panic)."""
    code = textwrap.dedent(
        f"""
        import sys, time

        class Stall:
            def find_spec(self, name, path=None, target=None):
                if name == {module!r}:
                    print("loading", flush=True)
                    time.sleep(30)
                return None

        sys.meta_path.insert(0, Stall())
        {ENTRY}
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--store", str(store), "log"],
        env=_env(key_file),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "loading\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert (proc.returncode, out, err) == (130, "", "")


def test_ctrl_c_at_any_moment_of_start_up_ends_quietly(store: Path, key_file: Path) -> None:
    """SIGINT sent at many moments from the process's start to the end of its command: each run
    ends with status 130 and nothing on stderr, or completes its command normally; never a
    traceback or a panic. (A SIGINT that lands while the interpreter itself exits, after the
    command finished, kills it by that signal: what a shell reports as status 130 too.)"""
    with MemoryStore.open(store, key_file=key_file) as s:
        MemoryTool(s, actor="agent", session="s1").call(
            {"command": "create", "path": "/memories/a.md", "file_text": "a\n"}
        )
    code = "import sys\nfrom memvault.cli import main\nprint('go', flush=True)\nsys.exit(main())"
    args = [sys.executable, "-c", code, "--store", str(store), "log", "-p"]

    def started() -> subprocess.Popen[str]:
        proc = subprocess.Popen(args, env=_env(key_file), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "go\n"
        return proc

    begin = time.monotonic()
    proc = started()
    full, err = proc.communicate(timeout=60)
    span = time.monotonic() - begin
    assert (proc.returncode, err) == (0, "") and "/memories/a.md" in full
    outcomes = []
    runs = 30
    for i in range(runs):
        proc = started()
        time.sleep(span * i / (runs - 6))  # the last few land after the command is done
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        outcomes.append(proc.returncode)
        assert "Traceback" not in err and "panic" not in err.lower(), (i, err)
        assert proc.returncode in (0, 130, -signal.SIGINT), (i, proc.returncode, err)
        if proc.returncode == 130:
            assert err == "", (i, err)
        elif proc.returncode == 0:
            assert (out, err) == (full, ""), i
    assert outcomes.count(130) >= runs // 3, outcomes  # most runs were interrupted while starting


def test_ctrl_c_at_the_passphrase_prompt_ends_the_line(store: Path) -> None:
    """^C typed at the prompt (a real interrupt from the terminal): the cursor moves to a new
    line, no traceback, status 130."""
    status, shown = _pty_run(
        ["--store", str(store), "log"], _env(), answer=(b"memvault passphrase: ", b"\x03"), controlling=True
    )
    assert (status, shown) == (130, "memvault passphrase: \n")


def test_end_of_input_at_the_passphrase_prompt_is_no_key(store: Path) -> None:
    status, shown = _pty_run(
        ["--store", str(store), "log"], _env(), answer=(b"memvault passphrase: ", b"\x04"), controlling=True
    )
    assert (status, shown) == (12, "memvault passphrase: \nmemvault: No passphrase: the input ended.\n")


# -- the writer lock -------------------------------------------------------------------------------


def test_a_waiting_writer_says_who_holds_the_lock(
    store: Path, key_file: Path, hold_lock: Callable[[float], subprocess.Popen[str]]
) -> None:
    """On a terminal, a writer that has waited a second says so, naming the holder's pid and
    host; it goes on once the holder lets go."""
    holder = hold_lock(2.5)
    status, shown = _pty_run(["--store", str(store), "--lock-timeout", "20", "gc"], _env(key_file))
    first, *rest = shown.splitlines()
    assert first == (
        f"memvault: waiting for the store's lock, held by pid {holder.pid} on {HOST} (up to 20 s in all; --lock-timeout)..."
    )
    assert status == 0, shown
    assert rest and "waiting" not in "\n".join(rest)


@pytest.mark.parametrize("how", ["option-after", "environment"])
def test_lock_timeout_bounds_the_wait(
    store: Path, key_file: Path, hold_lock: Callable[[float], subprocess.Popen[str]], how: str
) -> None:
    holder = hold_lock(30)
    args, env = ["--store", str(store), "gc"], _env(key_file)
    if how == "option-after":
        args += ["--lock-timeout", "1.5"]
    else:
        env["MEMVAULT_LOCK_TIMEOUT"] = "1.5"
    started = time.monotonic()
    status, shown = _pty_run(args, env)
    assert 1.5 <= time.monotonic() - started < 10
    assert status == 11
    lines = shown.splitlines()
    assert lines[0] == (
        f"memvault: waiting for the store's lock, held by pid {holder.pid} on {HOST} (up to 1.5 s in all; --lock-timeout)..."
    )
    assert re.fullmatch(
        r"memvault: The memory store is locked by another writer \(waited 1\.[5-9] s\); retry shortly\.", lines[1]
    ), lines
    assert len(lines) == 2


def test_no_lock_notice_off_a_terminal(
    store: Path,
    key_file: Path,
    hold_lock: Callable[[float], subprocess.Popen[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Off a terminal (a script, a log, --json consumers) the wait is silent; the timeout error
    is the one line."""
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key_file))
    hold_lock(30)
    assert main(["gc", "--store", str(store), "--lock-timeout", "1.2"]) == 11
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"memvault: The memory store is locked by another writer \(waited 1\.[2-9] s\); retry shortly\.\n", err
    ), err


def test_malformed_lock_timeout_is_a_usage_error(
    store: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key_file))
    monkeypatch.setenv("MEMVAULT_LOCK_TIMEOUT", "soon")
    assert main(["--store", str(store), "gc"]) == 2
    assert capsys.readouterr().err == "memvault: MEMVAULT_LOCK_TIMEOUT must be a number of seconds.\n"
    assert main(["--store", str(store), "gc", "--lock-timeout", "-1"]) == 2
    assert capsys.readouterr().err == "memvault: --lock-timeout must be a number of seconds, 0 or more.\n"
    assert main(["--store", str(store), "gc", "--lock-timeout", "nan"]) == 2
    assert capsys.readouterr().err == "memvault: --lock-timeout must be a number of seconds, 0 or more.\n"


def test_a_lock_probed_by_a_reader_is_still_taken_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """held() and holder() take a shared flock for an instant: a writer that may not wait
    (timeout 0) tries once more after a millisecond instead of failing on it."""
    path = tmp_path / "lock"
    path.write_bytes(b"")
    probe = os.open(path, os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH)  # a reader's probe, caught in the middle
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        fcntl.flock(probe, fcntl.LOCK_UN)  # the probe ends

    monkeypatch.setattr(storelock.time, "sleep", sleep)
    try:
        with StoreLock(path, timeout=0.0).hold():
            assert StoreLock(path).held()
        assert sleeps == [0.001]
        fcntl.flock(probe, fcntl.LOCK_EX)  # a real writer: timeout 0 still fails, after that one retry
        monkeypatch.setattr(storelock.time, "sleep", sleeps.append)
        with pytest.raises(LockedError):
            with StoreLock(path, timeout=0.0).hold():
                pass
        assert sleeps == [0.001, 0.001]
    finally:
        os.close(probe)
    assert not StoreLock(path).held()


def test_the_lock_file_names_its_holder_while_held(tmp_path: Path) -> None:
    lock = StoreLock(tmp_path / "lock", timeout=0.0)
    assert lock.holder() is None  # no file yet
    name = f'{{"host": "{HOST}", "pid": {os.getpid()}}}\n'
    with lock.hold():
        assert (tmp_path / "lock").read_text() == name
        assert lock.holder() == LockHolder(os.getpid(), HOST)
    # The name stays (rewriting the file at each release would cost every durable commit a
    # flush), but nobody holds the lock, so it names nobody.
    assert (tmp_path / "lock").read_text() == name
    assert lock.holder() is None


def test_a_writer_rewrites_the_lock_file_only_when_it_names_someone_else(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    lock = StoreLock(path, timeout=0.0)
    with lock.hold():
        pass
    os.utime(path, ns=(0, 0))  # any write or truncation sets mtime to now
    with lock.hold():
        pass
    assert path.stat().st_mtime_ns == 0  # named this process already: not written
    path.write_text('{"host": "elsewhere", "pid": 4242}\n')
    with lock.hold():
        assert path.read_text() == f'{{"host": "{HOST}", "pid": {os.getpid()}}}\n'


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", None),  # an older memvault, or between writers
        (b"garbage\n", None),
        (b'{"host": "elsewhere", "pid": 4242}\n', LockHolder(4242, "elsewhere")),
        (b'{"host": "elsewhere", "pid": true}\n', None),
        (b'{"host": "", "pid": 4242}\n', None),
    ],
)
def test_the_holder_of_other_lock_files(tmp_path: Path, content: bytes, expected: LockHolder | None) -> None:
    (tmp_path / "lock").write_bytes(content)
    lock = StoreLock(tmp_path / "lock")
    assert lock.holder() is None  # nobody holds it: whatever the file says
    fd = os.open(tmp_path / "lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a writer that does not name itself (an older version)
        assert lock.holder() == expected
    finally:
        os.close(fd)


def test_a_dead_process_of_this_host_holds_nothing(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "lock").write_text(f'{{"host": "{HOST}", "pid": {int(gone.stdout)}}}\n')
    fd = os.open(tmp_path / "lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert StoreLock(tmp_path / "lock").holder() is None
    finally:
        os.close(fd)


def test_the_notice_is_called_once_after_its_delay(tmp_path: Path) -> None:
    seen: list[tuple[LockHolder | None, float, float]] = []
    lock_path = tmp_path / "lock"
    other = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(other, b'{"host": "elsewhere", "pid": 77}\n')
    fcntl.flock(other, fcntl.LOCK_EX)
    start = time.monotonic()
    storelock.set_lock_wait_notice(
        lambda holder, timeout: seen.append((holder, timeout, time.monotonic() - start)), after=0.2
    )
    try:
        with pytest.raises(LockedError):
            with StoreLock(lock_path, timeout=0.6).hold():
                pass
    finally:
        storelock.set_lock_wait_notice(None)
        os.close(other)
    assert [(holder, timeout) for holder, timeout, _ in seen] == [(LockHolder(77, "elsewhere"), 0.6)]
    assert 0.2 <= seen[0][2] < 0.6
