"""Safety rails of the operator's destructive commands and of store creation.

- ``redact ... --dry-run`` and ``expire --history --dry-run`` list exactly what would be destroyed
  and change nothing (same head, same keyring bytes);
- on a terminal, they ask first, showing the count (run in a real pseudo-terminal); ``--yes`` and
  scripts (no terminal) are not asked;
- ``restore`` of a redacted version says it was redacted, by whom and when;
- ``demo DIR`` refuses a non-empty directory; ``keygen -`` writes to a pipe or a file, never to a
  terminal;
- a failed or interrupted store creation leaves nothing that stops ``init`` from running again.
"""

from __future__ import annotations

import errno
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault.cli import main
from memvault.errors import ConflictError, RedactedError, StoreExistsError
from memvault.keys.slots import read_key_file
from memvault.store import building, memorystore, opening, transaction

NOTES = "/memories/notes.md"
OTHER = "/memories/other.md"
CLI = "import sys; from memvault.cli import main; sys.exit(main())"


# -- helpers --------------------------------------------------------------------------------------


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "k.bin"
    path.write_bytes(bytes(range(32)))
    path.chmod(0o600)
    return path


@pytest.fixture
def cli(tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A store with two versions of NOTES (#1, #2) and OTHER (#3), committed two hours ago, and
    the CLI's environment."""
    root = tmp_path / "store"
    with monkeypatch.context() as m:
        m.setattr(transaction, "commit_time", lambda: time.time() - 7200)
        with memvault.MemoryStore.create(root, key_file=key_file) as s:
            s.put_file(NOTES, "alpha secret v1\n")
            s.put_file(NOTES, "alpha secret v2\n")
            s.put_file(OTHER, "plain\n")
    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY", "MEMVAULT_PAGER", "PAGER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key_file))
    monkeypatch.setenv("MEMVAULT_STORE", str(root))
    yield root


def _open(root: Path, key_file: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(root, key_file=key_file)


def _ids(root: Path, key_file: Path) -> dict[int, str]:
    """``seq -> commit id`` of the store's history."""
    from memvault.history import log

    with _open(root, key_file) as s:
        return {e.seq: e.commit_id for e in log(s)}


def _untouched(root: Path, key_file: Path) -> tuple[tuple[bytes, int], bytes]:
    with _open(root, key_file) as s:
        head = s.head
    return head, (root / "keyring").read_bytes()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_") and k not in ("PAGER", "NO_COLOR")}
    env["MEMVAULT_KEY_FILE"] = os.environ["MEMVAULT_KEY_FILE"]
    env["MEMVAULT_STORE"] = os.environ["MEMVAULT_STORE"]
    env["TERM"] = "dumb"
    return env


def _pty(
    argv: list[str], env: dict[str, str], answers: tuple[tuple[str, str], ...] = (), cwd: Path | None = None
) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a pseudo-terminal; each time the output
    ends with the next ``(prompt, answer)``'s prompt, type the answer and Enter."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *argv], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd
    )
    os.close(slave)
    out, pending = b"", list(answers)
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child is gone and the terminal closed
                    break
                if not chunk:
                    break
                out += chunk
            if pending and out.endswith(pending[0][0].encode()):
                os.write(master, pending.pop(0)[1].encode() + b"\n")
            if not ready and proc.poll() is not None:
                break
        else:
            raise AssertionError(f"the command did not finish: {out!r}")
        code = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert not pending, out
    return code, out.decode().replace("\r\n", "\n")


def _versions(ids: dict[int, str], *seqs: int) -> list[str]:
    return [f"  {NOTES}  version {n}  first in {ids[n][:10]} (#{n})" for n in seqs]


# -- redact --dry-run -----------------------------------------------------------------------------


def test_redact_dry_run_lists_and_destroys_nothing(
    cli: Path, key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _ids(cli, key_file)
    before = _untouched(cli, key_file)
    assert main(["redact", "file", NOTES, "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Would redact 2 version(s), destroying 2 data key(s) (dry run: nothing changed):",
        *_versions(ids, 1, 2),
        f"Would remove from the current state: {NOTES}",
    ]
    assert _untouched(cli, key_file) == before
    with _open(cli, key_file) as s:
        assert s.read_text(NOTES, rev=1) == "alpha secret v1\n"

    assert main(["redact", "version", NOTES, "--rev", "#1", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    dek = out["versions"][0]["dek_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", dek)
    assert {k: v for k, v in out.items() if k != "remaining_copies"} == {
        "versions": [{"path": NOTES, "version": 1, "commit": ids[1], "seq": 1, "dek_id": dek, "redacted": False}],
        "removed_from_head": [],
        "commit": None,
        "dry_run": True,
        "data_keys": 1,
    }
    assert _untouched(cli, key_file) == before

    # matching: the text comes from stdin, as for the real run.
    sys_stdin = sys.stdin
    try:
        import io

        sys.stdin = io.StringIO("alpha secret\n")
        assert main(["redact", "matching", "--dry-run"]) == 0
    finally:
        sys.stdin = sys_stdin
    assert capsys.readouterr().out.splitlines()[0] == (
        "Would redact 2 version(s), destroying 2 data key(s) (dry run: nothing changed):"
    )
    assert _untouched(cli, key_file) == before

    # The real run then destroys exactly what the dry run listed.
    assert main(["redact", "file", NOTES, "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert [(v["seq"], v["version"]) for v in done["versions"]] == [(1, 1), (2, 2)]
    assert "dry_run" not in done and done["commit"] is not None
    assert main(["redact", "file", NOTES, "--dry-run"]) == 4  # nothing left to redact there
    assert capsys.readouterr().err == f"memvault: No version of {NOTES} exists in the history.\n"


def test_a_real_run_refuses_a_choice_other_than_the_confirmed_one(cli: Path, key_file: Path) -> None:
    from memvault.erasure.redact import shred_matching

    with _open(cli, key_file) as s:
        plan = shred_matching(s, "alpha secret", dry_run=True)
        assert len(plan.versions) == 2
        s.put_file("/memories/copy.md", "alpha secret again\n")  # a new version nobody confirmed
        keyring = (cli / "keyring").read_bytes()
        with pytest.raises(ConflictError, match=r"planned \(2 version\(s\), now 3\); nothing was redacted"):
            shred_matching(s, "alpha secret", expect=plan)
        assert (cli / "keyring").read_bytes() == keyring
        assert s.read_text(NOTES, rev=1) == "alpha secret v1\n"
        again = shred_matching(s, "alpha secret", dry_run=True)
        assert len(shred_matching(s, "alpha secret", expect=again).versions) == 3


# -- confirmation on a terminal -------------------------------------------------------------------


def test_redact_asks_on_a_terminal(cli: Path, key_file: Path) -> None:
    ids = _ids(cli, key_file)
    before = _untouched(cli, key_file)
    question = [
        "This destroys the data keys of 2 version(s); no one can read them again:",
        *_versions(ids, 1, 2),
        f"It also removes from the current state: {NOTES}",
    ]
    code, out = _pty(["redact", "file", NOTES], _env(), (("[y/N] ", "n"),))
    assert code == 2
    assert out.splitlines() == [
        *question,
        "Redact 2 version(s)? [y/N] n",
        "memvault: Not confirmed; nothing was redacted.",
    ]
    assert _untouched(cli, key_file) == before

    code, out = _pty(["redact", "file", NOTES, "--actor", "alice"], _env(), (("[y/N] ", "yes"),))
    assert code == 0, out
    lines = out.splitlines()
    assert lines[: len(question) + 2] == [*question, "Redact 2 version(s)? [y/N] yes", "Redacted 2 version(s):"]
    with _open(cli, key_file) as s:
        assert s.head[1] == 4
        assert not s.exists(NOTES)
        assert (
            lines[len(question) + 4] == f"Removed from the current state in commit {s.head[0].decode()[:10]}: {NOTES}"
        )


def test_redact_with_yes_or_without_a_terminal_does_not_ask(cli: Path, key_file: Path) -> None:
    code, out = _pty(["redact", "version", NOTES, "--rev", "#1", "--yes"], _env())
    assert code == 0
    assert out.splitlines()[0] == "Redacted 1 version(s):" and "[y/N]" not in out
    # A script: no terminal at all, no --yes: it goes ahead as before.
    done = subprocess.run(
        [sys.executable, "-c", CLI, "redact", "version", NOTES, "--rev", "#2"],
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines()[0] == "Redacted 1 version(s):"
    with _open(cli, key_file) as s:
        assert s.head[1] == 5 and not s.exists(NOTES)


def test_redact_matching_on_a_terminal_reads_the_text_then_asks(cli: Path, key_file: Path) -> None:
    before = _untouched(cli, key_file)
    answers = (("text to erase (not echoed): ", "alpha secret"), ("[y/N] ", ""))
    code, out = _pty(["redact", "matching"], _env(), answers)
    assert code == 2
    assert "alpha secret" not in out  # not echoed, not shown back
    assert "Redact 2 version(s)? [y/N] \nmemvault: Not confirmed; nothing was redacted.\n" in out
    assert _untouched(cli, key_file) == before


# -- expire --history -----------------------------------------------------------------------------


def test_expire_history_dry_run_and_confirmation(cli: Path, key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = _ids(cli, key_file)
    before = _untouched(cli, key_file)
    assert main(["expire", "--history", "--older-than", "1h", "--dry-run"]) == 0
    expected = [
        "Would shred 1 old version(s), destroying their data keys (dry run: nothing changed):",
        f"  {NOTES}  version 1  left the head in {ids[2][:10]} (#2)",
    ]
    assert capsys.readouterr().out.splitlines() == expected
    assert main(["expire", "--history", "--older-than", "1h", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["versions"] == 1 and out["dry_run"] and out["commit"] is None
    assert out["expired"] == [
        {
            "path": NOTES,
            "kind": "file",
            "version": 1,
            "dek_id": out["dek_ids"][0],
            "left_commit": ids[2],
            "left_seq": 2,
        }
    ]
    assert _untouched(cli, key_file) == before

    code, out_text = _pty(["expire", "--history", "--older-than", "1h"], _env(), (("[y/N] ", "n"),))
    assert code == 2
    assert out_text.splitlines() == [
        "This destroys the data keys of 1 old version(s); no one can read them again:",
        expected[1],
        "Shred 1 old version(s)? [y/N] n",
        "memvault: Not confirmed; nothing was shredded.",
    ]
    assert _untouched(cli, key_file) == before
    code, out_text = _pty(["expire", "--history", "--older-than", "1h"], _env(), (("[y/N] ", "y"),))
    assert code == 0
    with _open(cli, key_file) as s:
        assert out_text.splitlines()[-1] == (
            f"Shredded 1 old version(s) in commit {s.head[0].decode()[:10]}: their data keys are destroyed."
        )
        assert s.read_text(NOTES) == "alpha secret v2\n"
        with pytest.raises(RedactedError):
            s.read_text(NOTES, rev=1)


# -- restore of a redacted version ----------------------------------------------------------------


def test_restore_of_a_redacted_version_says_so(cli: Path, key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = _ids(cli, key_file)
    assert main(["redact", "version", NOTES, "--rev", "#1", "--actor", "alice", "--json"]) == 0
    dek = json.loads(capsys.readouterr().out)["versions"][0]["dek_id"]
    with _open(cli, key_file) as s:
        when = float(str((s.keyring.tombstone(bytes.fromhex(dek)) or {})["time"]))
        head = s.head
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))
    assert main(["restore", NOTES, "--rev", "#1"]) == 4
    assert capsys.readouterr().err == (
        f"memvault: Cannot restore {NOTES} from {ids[1][:10]} (#1): this version was redacted by alice at {stamp}; "
        "its content is gone.\n"
    )
    assert main(["restore", NOTES, "--rev", "#1", "--json"]) == 4
    assert json.loads(capsys.readouterr().err)["kind"] == "REFUSED"
    with _open(cli, key_file) as s:
        assert s.head == head
    # A path that never existed is still "did not exist".
    assert main(["restore", "/memories/never.md", "--rev", "#1"]) == 4
    assert capsys.readouterr().err == (
        f"memvault: The path /memories/never.md did not exist at revision {ids[1][:10]} (#1).\n"
    )


# -- demo and keygen ------------------------------------------------------------------------------


def test_demo_refuses_a_non_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("keep me")
    assert main(["demo", str(full)]) == 4
    assert capsys.readouterr().err == f"memvault: The demo needs a new or empty directory; {full} is not empty.\n"
    assert sorted(os.listdir(full)) == ["mine.txt"] and (full / "mine.txt").read_text() == "keep me"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["demo", str(a_file), "--json"]) == 4
    assert json.loads(capsys.readouterr().err)["error"] == (
        f"The demo needs a new or empty directory; {a_file} is not a directory."
    )
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert main(["demo", str(link)]) == 4
    assert capsys.readouterr().err == f"memvault: The demo needs a new or empty directory; {link} is a symbolic link.\n"
    assert not (tmp_path / "elsewhere").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["demo", str(empty), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["store"] == str(empty / "store")
    assert sorted(os.listdir(empty)) == ["demo.key", "store"]


def test_keygen_dash_writes_hex_to_a_pipe_or_file_never_a_terminal(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    piped = subprocess.run([sys.executable, "-c", CLI, "keygen", "-"], env=env, capture_output=True, timeout=30)
    assert piped.returncode == 0 and piped.stderr == b""
    assert re.fullmatch(rb"[0-9a-f]{64}\n", piped.stdout)
    key = tmp_path / "from-pipe.hex"
    key.write_bytes(piped.stdout)
    key.chmod(0o600)
    assert read_key_file(key) == bytes.fromhex(piped.stdout.decode())
    with memvault.MemoryStore.create(tmp_path / "s", key_file=key) as s:  # a usable key file
        s.put_file(NOTES, "x")

    # `memvault keygen - > file` under umask 022: the new file becomes 0600.
    target = tmp_path / "redirected.hex"
    old = os.umask(0o022)
    try:
        with open(target, "wb") as out:
            assert os.stat(target).st_mode & 0o777 == 0o644
            done = subprocess.run([sys.executable, "-c", CLI, "keygen", "-"], env=env, stdout=out, timeout=30)
    finally:
        os.umask(old)
    assert done.returncode == 0
    assert os.stat(target).st_mode & 0o777 == 0o600
    assert re.fullmatch(rb"[0-9a-f]{64}\n", target.read_bytes()) and target.read_bytes() != piped.stdout

    code, out = _pty(["keygen", "-"], env, cwd=tmp_path)
    assert code == 2
    assert (
        out
        == "memvault: Refusing to write a key to a terminal: redirect it (memvault keygen - > key.hex) or pipe it.\n"
    )
    assert not (tmp_path / "-").exists()


# -- a failed or interrupted init ------------------------------------------------------------------


def _fail_at(monkeypatch: pytest.MonkeyPatch, point: str, exc: BaseException) -> None:
    """Make store creation raise ``exc`` at ``point``."""

    def boom(*_a: Any, **_k: Any) -> Any:
        raise exc

    if point == "rename":
        real = building.os.rename

        def rename(src: Any, dst: Any) -> None:
            if building.BUILD_MARKER in str(src):
                raise exc
            real(src, dst)

        monkeypatch.setattr(building.os, "rename", rename)
    elif point in ("write_slot", "restrict_modes", "write_config"):
        monkeypatch.setattr(opening, point, boom)
    else:
        owner, name = {
            "keyring": (opening.Keyring, "create"),
            "git": (opening.GitStore, "init"),
            "first commit": (memorystore.CommitWriter, "write_initial"),
            "access file": (opening.AccessTimes, "create"),
        }[point]
        monkeypatch.setattr(owner, name, boom)


POINTS = ["write_slot", "keyring", "git", "first commit", "access file", "restrict_modes", "write_config", "rename"]
FAILURES = {
    "ctrl-c": KeyboardInterrupt(),
    "disk full": OSError(errno.ENOSPC, "No space left on device"),
    "no fdatasync": AttributeError("module 'os' has no attribute 'fdatasync'"),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("point", POINTS)
def test_a_failed_create_of_a_new_directory_leaves_nothing(
    tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch, point: str, failure: str
) -> None:
    target = tmp_path / "new" / "deeper" / "store"
    with monkeypatch.context() as m:
        _fail_at(m, point, FAILURES[failure])
        with pytest.raises((KeyboardInterrupt, memvault.MemvaultError, AttributeError)) as info:
            memvault.MemoryStore.create(target, key_file=key_file)
    if failure == "disk full":
        assert str(info.value) == "The memory store could not be written (No space left on device)."
    else:
        assert type(info.value) is type(FAILURES[failure])
    assert os.listdir(tmp_path) == ["k.bin"]  # no store, no hidden sibling, no parent made for it
    with memvault.MemoryStore.create(target, key_file=key_file) as s:
        s.put_file(NOTES, "after\n")
    with memvault.MemoryStore.open(target, key_file=key_file) as s:
        assert s.read_text(NOTES) == "after\n"
    assert sorted(os.listdir(target.parent)) == ["store"]


@pytest.mark.parametrize("point", POINTS[:-1])
def test_a_failed_create_in_an_empty_directory_empties_it_again(
    tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    target = tmp_path / "mounted"
    target.mkdir()
    os.chmod(target, 0o751)
    with monkeypatch.context() as m:
        _fail_at(m, point, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            memvault.MemoryStore.create(target, key_file=key_file)
    assert os.listdir(target) == [] and os.stat(target).st_mode & 0o777 == 0o751
    with memvault.MemoryStore.create(target, key_file=key_file) as s:
        assert s.head[1] == 0
    assert os.stat(target).st_mode & 0o777 == 0o700


def test_what_an_interrupted_create_left_is_named(tmp_path: Path, key_file: Path) -> None:
    """A build in place killed outright (no cleanup ran) leaves store entries but no memvault.json:
    init refuses, and says what it found."""
    target = tmp_path / "half"
    target.mkdir()
    for name in ("keys", "repo"):
        (target / name).mkdir()
    (target / "keyring").write_bytes(b"x")
    with pytest.raises(StoreExistsError) as info:
        memvault.MemoryStore.create(target, key_file=key_file)
    assert str(info.value) == (
        "The store directory is not empty: it holds what looks like an interrupted store creation "
        "(no memvault.json). If no store was ever made there, empty it and create the store again."
    )
    (target / "notes.txt").write_text("someone's")
    with pytest.raises(StoreExistsError, match=r"^The store directory is not empty\.$"):
        memvault.MemoryStore.create(target, key_file=key_file)


_INTERRUPTIBLE = """
import sys, time
import memvault.crypto, memvault.store.memorystore as ms
stage = sys.argv[1]
real_kdf, real_init = memvault.crypto.argon2id, ms.GitStore.init
def kdf(*a, **k):
    if stage == "kdf":
        print("STAGE", flush=True)
    return real_kdf(*a, **k)
def init(*a, **k):
    repo = real_init(*a, **k)
    if stage == "build":
        print("STAGE", flush=True)
        time.sleep(10)
    return repo
memvault.crypto.argon2id, ms.GitStore.init = kdf, init
from memvault.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("stage", ["kdf", "build"])
def test_ctrl_c_during_init_then_init_succeeds(tmp_path: Path, stage: str) -> None:
    """SIGINT during the default Argon2id derivation, or while the directory is being built."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env["MEMVAULT_PASSPHRASE"] = "a long enough passphrase"
    target = tmp_path / "store"
    argv = ["--store", str(target), "init"]
    proc = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE, stage, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready and proc.stdout.readline() == b"STAGE\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr is not None and proc.stderr.read() == b""
    assert os.listdir(tmp_path) == []
    done = subprocess.run([sys.executable, "-c", CLI, *argv], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Created an empty memory store in {target}\n"
    with memvault.MemoryStore.open(target, passphrase="a long enough passphrase") as s:
        assert s.head[1] == 0
