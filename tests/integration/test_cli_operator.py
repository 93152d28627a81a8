"""Operator writes (put, edit, rm, mv), grep and config get/set on the command line: one commit
each by ``operator``, scrubbed and refused as the memory tool's writes are; the editor's copy
private and shredded; settings changed only as an authenticated commit."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memvault
from memvault import history
from memvault.cli import main
from memvault.errors import MemvaultError
from memvault.protocol.commands import run_command
from memvault.store.config import read_config

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(40))


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store made by ``memvault init`` with a key file (no Argon2), the CLI pointed at it."""
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY", "VISUAL", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key))
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "store"))
    assert main(["init"]) == 0
    return tmp_path / "store"


def _open(store: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.open(store, key_file=os.environ["MEMVAULT_KEY_FILE"])


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _last(store: Path) -> history.CommitInfo:
    with _open(store) as s:
        return history.log(s, limit=1)[0]


def _tool_error(store: Path, command: dict[str, object]) -> str:
    """The memory tool's refusal of ``command``, as the CLI prints it."""
    with _open(store) as s:
        with pytest.raises(MemvaultError) as caught:
            run_command(s, command, actor="agent", session="")
    return "memvault: " + caught.value.message.removeprefix("Error: ") + "\n"


# -- put -------------------------------------------------------------------------------------------


def test_put_from_stdin_and_file_scrubbed_as_one_commit_each(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _stdin(monkeypatch, b"Customer: bob.smith@acme-corp.io\nprefers email\n")
    assert _run(capsys, "put", "/memories/customers/bob.md") == (
        0,
        "Wrote /memories/customers/bob.md (new file) in commit "
        f"{_last(cli).commit_id[:10]} (#1).\n"
        "Note: sensitive data was removed before storing (1 email); the file shows [REDACTED:<kind>] in its place.\n",
        "",
    )
    info = _last(cli)
    assert (info.seq, info.actor, info.command, info.paths, info.findings) == (
        1,
        "operator",
        "put",
        ("/memories/customers/bob.md",),
        {"email": 1},
    )
    with _open(cli) as s:
        assert history.read_at(s, "/memories/customers/bob.md") == b"Customer: [REDACTED:email]\nprefers email\n"

    source = tmp_path / "plain.md"
    source.write_text("replaced\n")
    code, out, err = _run(capsys, "put", "/memories/customers/bob.md", str(source), "--actor", "alice", "--json")
    assert (code, err) == (0, "")
    info = _last(cli)
    assert json.loads(out) == {
        "command": "put",
        "paths": ["/memories/customers/bob.md"],
        "commit": info.commit_id,
        "seq": 2,
        "sha256": hashlib.sha256(b"replaced\n").hexdigest(),
        "findings": {},
        "binary": False,
        "created": False,
    }
    assert (info.actor, info.command, info.findings) == ("alice", "put", {})


def test_put_names_a_local_file_it_cannot_read(
    cli: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``put PATH FILE`` with FILE missing, unreadable or a directory: the message names FILE (not
    the memory path), the store is unchanged, and no key is asked for first."""
    head = _open(cli).head
    unreadable = tmp_path / "secret-notes.md"
    unreadable.write_text("x")
    unreadable.chmod(0)
    cases = [
        (str(tmp_path / "missing.md"), "No such file or directory"),
        (str(tmp_path), "Is a directory"),
    ]
    if os.geteuid() != 0:  # root reads a file of mode 0 all the same
        cases.append((str(unreadable), "Permission denied"))
    for source, reason in cases:
        code, out, err = _run(capsys, "put", "/memories/notes.md", source)
        assert (code, out, err) == (2, "", f"memvault: Cannot read the file {source!r}: {reason}.\n")
    # Before the key: without one, the file's name is still what is told.
    monkeypatch.delenv("MEMVAULT_KEY_FILE")
    code, out, err = _run(capsys, "put", "/memories/notes.md", "no-such-notes.md")
    assert (code, err) == (2, "memvault: Cannot read the file 'no-such-notes.md': No such file or directory.\n")
    # scrub FILE alike.
    code, out, err = _run(capsys, "scrub", "no-such-notes.md")
    assert (code, err) == (2, "memvault: Cannot read the file 'no-such-notes.md': No such file or directory.\n")
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(tmp_path / "key"))
    assert _open(cli).head == head


def test_put_refuses_exactly_as_the_memory_tool(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stdin(monkeypatch, b"x\n")
    assert main(["put", "/memories/dir/a.md"]) == 0
    cases = [
        ("/memories/../etc/passwd", "text", {"command": "create", "path": "/memories/../etc/passwd", "file_text": "x"}),
        ("/memories/dir", "text", {"command": "create", "path": "/memories/dir", "file_text": "x"}),
        ("/memories", "text", {"command": "create", "path": "/memories", "file_text": "x"}),
        (
            "/memories/bob.smith@acme-corp.io.md",
            "text",
            {"command": "create", "path": "/memories/bob.smith@acme-corp.io.md", "file_text": "x"},
        ),
    ]
    for path, text, tool_input in cases:
        _stdin(monkeypatch, text.encode())
        code, out, err = _run(capsys, "put", path)
        assert (code, out) == (4, "")
        assert err == _tool_error(cli, tool_input)
    assert main(["config", "set", "scrub.policy.email", "reject"]) == 0
    _stdin(monkeypatch, b"mail bob.smith@acme-corp.io")
    code, _out, err = _run(capsys, "put", "/memories/c.md")
    assert code == 4
    assert err == _tool_error(
        cli, {"command": "create", "path": "/memories/c.md", "file_text": "mail bob.smith@acme-corp.io"}
    )
    assert main(["config", "set", "max_file_bytes", "16"]) == 0
    _stdin(monkeypatch, b"0123456789abcdef!")
    assert _run(capsys, "put", "/memories/big.md") == (
        4,
        "",
        "memvault: The content for /memories/big.md is over the limit of 16 bytes per file.\n",
    )
    assert _last(cli).command == "config"  # nothing of the refused writes was committed


def test_put_images_only_when_they_are_images(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    image = tmp_path / "chart.png"
    image.write_bytes(PNG)
    code, out, err = _run(capsys, "put", "/memories/chart.png", str(image))
    assert (code, err) == (0, "")
    assert out.endswith("\nNote: an image is stored without scanning (the scrubber reads text only).\n")
    code, out, _ = _run(capsys, "cat", "/memories/chart.png", "--json")
    assert json.loads(out)["encoding"] == "base64"
    with _open(cli) as s, s.reading() as view:
        node = view.get("/memories/chart.png")
        assert node is not None and node.binary

    _stdin(monkeypatch, b"not an image")
    assert _run(capsys, "put", "/memories/fake.jpg") == (
        2,
        "",
        "memvault: /memories/fake.jpg is named as an image but the content is not a PNG or JPEG file.\n",
    )
    assert _run(capsys, "put", "/memories/chart.md", str(image)) == (
        2,
        "",
        "memvault: The content for /memories/chart.md is not UTF-8 text (only .png, .jpg and .jpeg files may be "
        "binary).\n",
    )


# -- edit ------------------------------------------------------------------------------------------

EDITOR = """
import json, os, stat, sys
path = sys.argv[1]
log = os.environ["EDIT_LOG"]
st, dst = os.stat(path), os.stat(os.path.dirname(path))
with open(log, "a") as f:
    f.write(json.dumps({"path": path, "mode": stat.S_IMODE(st.st_mode), "dir_mode": stat.S_IMODE(dst.st_mode),
                        "content": open(path).read(), "tty": os.isatty(0)}) + "\\n")
action = os.environ.get("EDIT_ACTION", "append")
if action == "append":
    with open(path, "a") as f:
        f.write(os.environ.get("EDIT_TEXT", "added by the editor\\n"))
    with open(os.path.join(os.path.dirname(path), ".swapfile"), "w") as f:
        f.write("editor's own copy")
elif action == "fail":
    sys.exit(3)
elif action == "race":
    import memvault
    with memvault.MemoryStore.open(os.environ["MEMVAULT_STORE"], key_file=os.environ["MEMVAULT_KEY_FILE"]) as s:
        s.put_file("/memories/a.md", "changed meanwhile\\n", actor="agent")
    with open(path, "a") as f:
        f.write("mine\\n")
elif action == "sleep":
    import time
    print("EDITOR-READY", flush=True)
    time.sleep(30)
"""


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    log = tmp_path / "edit.log"
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.setenv("EDIT_LOG", str(log))
    return log


def _edits(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_edit_on_a_private_copy_that_is_shredded(
    cli: Path, editor: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stdin(monkeypatch, b"first line\n")
    assert main(["put", "/memories/a.md"]) == 0
    wiped: list[tuple[str, bytes, bytes]] = []
    import memvault.cli.write as write_cli

    real_wipe = write_cli.wipe_file

    def spy(path: Path) -> None:  # an open descriptor sees the inode's bytes after the wipe
        fd = os.open(path, os.O_RDONLY)
        try:
            before = os.pread(fd, 4096, 0)
            real_wipe(path)
            wiped.append((path.name, before, os.pread(fd, 4096, 0)))
        finally:
            os.close(fd)

    monkeypatch.setattr(write_cli, "wipe_file", spy)
    monkeypatch.setenv("EDIT_TEXT", "password=hunter2hunter2 and bob.smith@acme-corp.io\n")
    code, out, err = _run(capsys, "edit", "/memories/a.md")
    info = _last(cli)
    assert (code, err) == (0, "")
    assert out == (
        f"Saved /memories/a.md in commit {info.commit_id[:10]} (#2).\n"
        "Note: sensitive data was removed before storing (1 email, 1 password_assignment); the file shows "
        "[REDACTED:<kind>] in its place.\n"
    )
    assert (info.actor, info.command, info.paths) == ("operator", "edit", ("/memories/a.md",))
    [seen] = _edits(editor)
    assert (seen["mode"], seen["dir_mode"], seen["content"]) == (0o600, 0o700, "first line\n")
    copy = Path(str(seen["path"]))
    assert copy.name == "a.md" and not copy.parent.exists()
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        assert str(copy).startswith("/dev/shm/memvault-edit-")
    assert sorted(name for name, _b, _a in wiped) == [".swapfile", "a.md"]
    for _name, before, after in wiped:
        assert before and after == bytes(len(before))
    with _open(cli) as s:
        stored = history.read_at(s, "/memories/a.md").decode()
    assert stored.startswith("first line\n") and "hunter2hunter2" not in stored and "bob.smith" not in stored


def test_edit_unchanged_failed_new_and_raced(
    cli: Path, editor: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stdin(monkeypatch, b"first line\n")
    assert main(["put", "/memories/a.md"]) == 0
    monkeypatch.setenv("EDIT_ACTION", "none")
    assert _run(capsys, "edit", "/memories/a.md") == (0, "No changes to /memories/a.md; nothing was committed.\n", "")
    monkeypatch.setenv("EDIT_ACTION", "fail")
    assert _run(capsys, "edit", "/memories/a.md") == (
        1,
        "",
        f"memvault: The editor ({sys.executable}) exited with status 3; nothing was written.\n",
    )
    assert _last(cli).seq == 1
    assert all(not Path(str(e["path"])).parent.exists() for e in _edits(editor))

    monkeypatch.setenv("EDIT_ACTION", "append")
    code, out, _ = _run(capsys, "edit", "/memories/notes/new.md")
    assert (code, out) == (0, f"Saved /memories/notes/new.md (new file) in commit {_last(cli).commit_id[:10]} (#2).\n")
    assert _edits(editor)[-1]["content"] == ""

    monkeypatch.setenv("EDIT_ACTION", "race")
    assert _run(capsys, "edit", "/memories/a.md") == (
        5,
        "",
        "memvault: /memories/a.md changed since it was read (its content differs); nothing was written.\n",
    )
    info = _last(cli)
    assert (info.seq, info.actor) == (3, "agent")

    _stdin(monkeypatch, PNG)
    assert main(["put", "/memories/chart.png"]) == 0
    monkeypatch.setenv("EDIT_ACTION", "append")
    assert _run(capsys, "edit", "/memories/chart.png")[::2] == (
        2,
        "memvault: /memories/chart.png is a binary file and cannot be edited as text.\n",
    )
    assert _run(capsys, "edit", "/memories/notes")[::2] == (4, "memvault: /memories/notes is a directory\n")
    runs = len(_edits(editor))
    expected = _tool_error(cli, {"command": "create", "path": "/memories/bob.smith@acme-corp.io.md", "file_text": ""})
    assert _run(capsys, "edit", "/memories/bob.smith@acme-corp.io.md")[::2] == (4, expected)
    assert len(_edits(editor)) == runs  # refused before the editor opened


def _pty_run(
    argv: list[str],
    env: dict[str, str],
    *,
    interrupt_after: str | None = None,
    sig: int = signal.SIGINT,
    group: bool = True,
) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal; once ``interrupt_after`` is printed send ``sig`` to its
    process group (what the terminal does on Ctrl-C) or, without ``group``, to memvault alone."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from memvault.cli import main; sys.exit(main())", *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    out = b""
    sent = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if interrupt_after and not sent and interrupt_after.encode() in out:
            os.killpg(proc.pid, sig) if group else os.kill(proc.pid, sig)
            sent = True
        if proc.poll() is not None and not ready:
            break
    try:
        code = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, out.decode(errors="replace").replace("\r\n", "\n")


def test_edit_on_a_terminal_and_ctrl_c_in_the_editor(cli: Path, editor: Path, tmp_path: Path) -> None:
    s = _open(cli)
    s.put_file("/memories/a.md", "first line\n", actor="agent")
    s.close()
    env = {**os.environ, "EDIT_ACTION": "append", "PYTHONPATH": os.pathsep.join(sys.path)}
    code, out = _pty_run(["edit", "/memories/a.md"], env)
    assert code == 0, out
    assert f"Saved /memories/a.md in commit {_last(cli).commit_id[:10]} (#2).\n" in out
    assert _edits(editor)[-1]["tty"] is True  # the editor has the terminal

    code, out = _pty_run(["edit", "/memories/a.md"], {**env, "EDIT_ACTION": "sleep"}, interrupt_after="EDITOR-READY")
    assert code == 1, out  # the editor died of Ctrl-C; memvault did not, and says so
    assert "memvault: The editor (" in out and "nothing was written.\n" in out
    assert "Traceback" not in out.split("EDITOR-READY")[0]
    assert _last(cli).seq == 2
    assert not Path(str(_edits(editor)[-1]["path"])).parent.exists()

    # SIGTERM (or a hangup) to memvault while the editor runs: the copy is shredded all the same.
    code, out = _pty_run(
        ["edit", "/memories/a.md"],
        {**env, "EDIT_ACTION": "sleep"},
        interrupt_after="EDITOR-READY",
        sig=signal.SIGTERM,
        group=False,
    )
    assert code == 130, out
    assert _last(cli).seq == 2
    assert not Path(str(_edits(editor)[-1]["path"])).parent.exists()


# -- rm, mv ----------------------------------------------------------------------------------------


def test_rm_and_mv(cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for path in ("/memories/d/one.md", "/memories/d/two.md", "/memories/b.md"):
        _stdin(monkeypatch, b"x\n")
        assert main(["put", path]) == 0
    assert _run(capsys, "rm", "/memories/d") == (
        2,
        "",
        "memvault: /memories/d is a directory; deleting it and everything below it needs recursive (rm -r).\n",
    )
    assert _run(capsys, "rm", "/memories/nope.md") == (
        4,
        "",
        _tool_error(cli, {"command": "delete", "path": "/memories/nope.md"}),
    )
    assert _run(capsys, "rm", "/memories")[::2] == (4, _tool_error(cli, {"command": "delete", "path": "/memories"}))
    code, out, _ = _run(capsys, "rm", "/memories/d/one.md")
    assert (code, out) == (0, f"Deleted /memories/d/one.md in commit {_last(cli).commit_id[:10]} (#4).\n")
    code, out, _ = _run(capsys, "rm", "-r", "/memories/d", "--actor", "ops-bot")
    info = _last(cli)
    assert (code, out) == (0, f"Deleted /memories/d in commit {info.commit_id[:10]} (#5).\n")
    assert (info.actor, info.command, info.paths) == ("ops-bot", "delete", ("/memories/d",))

    code, out, _ = _run(capsys, "mv", "/memories/b.md", "/memories/archive/b.md")
    info = _last(cli)
    assert (code, out) == (0, f"Moved /memories/b.md to /memories/archive/b.md in commit {info.commit_id[:10]} (#6).\n")
    assert (info.actor, info.command, info.paths) == (
        "operator",
        "rename",
        ("/memories/b.md", "/memories/archive/b.md"),
    )
    _stdin(monkeypatch, b"y\n")
    assert main(["put", "/memories/c.md"]) == 0
    for new in ("/memories/c.md", "/memories/bob.smith@acme-corp.io", "/memories/x/../y"):
        expected = _tool_error(cli, {"command": "rename", "old_path": "/memories/archive/b.md", "new_path": new})
        assert _run(capsys, "mv", "/memories/archive/b.md", new) == (4, "", expected)
    code, out, _ = _run(capsys, "mv", "/memories/c.md", "/memories/d.md", "--json")
    assert json.loads(out) == {
        "command": "rename",
        "paths": ["/memories/c.md", "/memories/d.md"],
        "commit": _last(cli).commit_id,
        "seq": 8,
        "sha256": None,
        "findings": {},
        "binary": False,
        "created": False,
    }


# -- grep ------------------------------------------------------------------------------------------


def test_grep(cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "/memories/a.md": b"Alpha line\nsecond Line\n",
        "/memories/sub/b.md": b"no match here\nLINE three\r\n",
        "/memories/pic.png": PNG + b"line",
    }
    for path, data in files.items():
        _stdin(monkeypatch, data)
        assert main(["put", path]) == 0
    assert _run(capsys, "grep", "line") == (0, "/memories/a.md:Alpha line\n", "")
    assert _run(capsys, "grep", "-i", "-n", "line") == (
        0,
        "/memories/a.md:1:Alpha line\n/memories/a.md:2:second Line\n/memories/sub/b.md:2:LINE three\r\n",
        "",
    )
    assert _run(capsys, "grep", "--line-number", "-i", "^line", "/memories/sub") == (
        0,
        "/memories/sub/b.md:2:LINE three\r\n",
        "",
    )
    code, out, _ = _run(capsys, "grep", "[Ll]ine$", "--json")
    assert (code, json.loads(out)) == (
        0,
        [
            {"path": "/memories/a.md", "line": 1, "text": "Alpha line"},
            {"path": "/memories/a.md", "line": 2, "text": "second Line"},
        ],
    )
    assert _run(capsys, "grep", "zebra") == (1, "", "")
    assert _run(capsys, "grep", "-n", "Alpha", "--color=always") == (
        0,
        "\x1b[35m/memories/a.md\x1b[0m\x1b[36m:\x1b[0m\x1b[32m1\x1b[0m\x1b[36m:\x1b[0mAlpha line\n",
        "",
    )
    assert _run(capsys, "grep", "Alpha", "--color", "--no-color") == (0, "/memories/a.md:Alpha line\n", "")
    _stdin(monkeypatch, b"zebra crossing\n")
    assert main(["put", "/memories/a.md"]) == 0
    assert _run(capsys, "grep", "-n", "zebra") == (0, "/memories/a.md:1:zebra crossing\n", "")
    assert _run(capsys, "grep", "-n", "Alpha", "--rev", "HEAD~1") == (0, "/memories/a.md:1:Alpha line\n", "")
    assert _run(capsys, "grep", "(unclosed") == (
        2,
        "",
        "memvault: Invalid regular expression: missing ), unterminated subpattern (at position 0).\n",
    )
    assert _run(capsys, "grep", "x", "/memories/missing")[::2] == (
        4,
        "memvault: The path /memories/missing does not exist at that revision.\n",
    )


# -- config ----------------------------------------------------------------------------------------


def test_config_get(cli: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "config", "get")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:14] == [
        "durability = full",
        "max_depth = 16",
        "max_file_bytes = 102400",
        "max_files = 100000",
        "max_path_bytes = 1024",
        "max_segment_bytes = 255",
        "max_stored_bytes = 17179869184",
        "max_total_bytes = 1073741824",
        "overwrite_on_create = false",
        "path_grammar = memvault",
        "retain_history_days = null",
        "scrub.allowlist = []",
        "scrub.custom_rules = []",
        "scrub.enabled = true",
    ]
    assert "scrub.policy.email = redact" in lines and len(lines) == 14 + 29 + 1  # 29 kinds, view_max_chars
    assert lines[-1] == "view_max_chars = 16000"
    assert _run(capsys, "config", "get", "durability") == (0, "full\n", "")
    assert _run(capsys, "config", "get", "scrub.policy.ip", "--json") == (
        0,
        '{\n  "scrub.policy.ip": "redact"\n}\n',
        "",
    )
    code, _out, err = _run(capsys, "config", "get", "max_size")
    assert code == 2 and err.startswith("memvault: Unknown setting 'max_size'. Settings: durability, max_depth,")


def test_config_set_is_an_authenticated_commit(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _run(capsys, "config", "set", "max_file_bytes", "2048")
    info = _last(cli)
    assert (code, out, err) == (
        0,
        f"max_file_bytes: 102400 -> 2048\nRecorded in commit {info.commit_id[:10]} (#1).\n",
        "",
    )
    assert (info.actor, info.command, info.paths) == ("operator", "config", ())
    assert info.extra == {"max_file_bytes": '{"old": 102400, "new": 2048}'}
    with _open(cli) as s:  # the MAC verifies: the store opens, with the new value
        assert s.settings.max_file_bytes == 2048
    assert read_config(cli).settings.max_file_bytes == 2048

    before = (cli / "memvault.json").read_bytes()
    for argv, message in (
        (
            ["max_file_bytes", "0"],
            "Invalid setting: max_file_bytes: Input should be greater than or equal to 1. Nothing was changed.",
        ),
        (
            ["durability", "sometimes"],
            "Invalid setting: durability: Input should be 'full' or 'none'. Nothing was changed.",
        ),
        (
            ["scrub.policy.email", "shout"],
            "Invalid setting: scrub.policy.email: Input should be 'redact', 'reject' or 'allow'. Nothing was changed.",
        ),
        (
            ["scrub.policy.nokind", "reject"],
            "Invalid setting: scrub: policy names unknown kinds: nokind. Nothing was changed.",
        ),
    ):
        assert _run(capsys, "config", "set", *argv) == (2, "", f"memvault: {message}\n")
    assert _run(capsys, "config", "set", "max_file_bytes", "2048") == (
        0,
        "max_file_bytes is already 2048; nothing was changed.\n",
        "",
    )
    assert (cli / "memvault.json").read_bytes() == before and _last(cli).seq == 1

    rules = '[{"kind": "ticket", "pattern": "TCK-[0-9]{6}"}]'
    assert main(["config", "set", "scrub.custom_rules", rules, "--actor", "alice"]) == 0
    info = _last(cli)
    assert (info.actor, sorted(info.extra)) == ("alice", ["scrub.custom_rules", "scrub.policy.ticket"])
    assert json.loads(info.extra["scrub.policy.ticket"]) == {"old": None, "new": "redact"}
    _stdin(monkeypatch, b"reject")
    assert main(["config", "set", "scrub.policy.ticket", "-"]) == 0
    _stdin(monkeypatch, b"see TCK-123456")
    code, _out, err = _run(capsys, "put", "/memories/t.md")
    assert (code, err) == (
        4,
        "memvault: The text contains sensitive data (ticket) that must not be stored in memory. Nothing was written; "
        "remove it and try again.\n",
    )
    code, out, _ = _run(capsys, "config", "set", "scrub.custom_rules", "[]", "--json")
    assert json.loads(out)["changes"] == [
        {
            "key": "scrub.custom_rules",
            "old": [{"kind": "ticket", "pattern": "TCK-[0-9]{6}", "validator": None}],
            "new": [],
        },
        {"key": "scrub.policy.ticket", "old": "reject", "new": None},
    ]
    assert main(["config", "set", "retain_history_days", "30"]) == 0
    assert main(["config", "set", "durability", "none"]) == 0
    with _open(cli) as s:
        assert (s.settings.retain_history_days, s.settings.durability) == (30, "none")
    assert _run(capsys, "verify")[0] == 0


def test_config_set_refuses_path_limits_existing_paths_break_and_a_forged_file(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stdin(monkeypatch, b"x")
    assert main(["put", "/memories/a/b/c/d.md"]) == 0
    assert _run(capsys, "config", "set", "max_depth", "2") == (
        2,
        "",
        "memvault: 2 existing path(s) break the new path limits (first: /memories/a/b/c); move or delete them "
        "first. Nothing was changed.\n",
    )
    assert main(["config", "set", "max_depth", "4"]) == 0

    config = json.loads((cli / "memvault.json").read_text())
    config["settings"]["max_files"] = 5  # changed by hand: the MAC no longer matches
    (cli / "memvault.json").write_text(json.dumps(config))
    assert _run(capsys, "config", "set", "max_files", "7")[0] == 3


def test_config_set_puts_the_old_file_back_when_the_commit_fails(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault.admin.config import change_settings
    from memvault.errors import StorageError

    before = (cli / "memvault.json").read_bytes()
    s = _open(cli)

    def fail(*args: object, **kwargs: object) -> None:
        raise StorageError("The disk is full.")

    monkeypatch.setattr(s, "transact", fail)
    with pytest.raises(StorageError):
        change_settings(s, {"max_files": 9})
    assert (cli / "memvault.json").read_bytes() == before and s.settings.max_files == 100_000
    s.close()


def test_config_set_on_a_store_in_object_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cli: Path
) -> None:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    url = f"file://{bucket}"
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MEMVAULT_STORE", url)
    assert main(["init"]) == 0
    code, out, _ = _run(capsys, "config", "set", "max_files", "10")
    assert code == 0 and out.startswith("max_files: 100000 -> 10\n")
    assert json.loads((bucket / "memvault.json").read_text())["settings"]["max_files"] == 10
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "other-host"))  # a host with a new cache
    assert _run(capsys, "config", "get", "max_files") == (0, "10\n", "")
    info = _last_remote(url)
    assert (info.command, info.extra) == ("config", {"max_files": '{"old": 100000, "new": 10}'})


def _last_remote(url: str) -> history.CommitInfo:
    with memvault.MemoryStore.open(url, key_file=os.environ["MEMVAULT_KEY_FILE"]) as s:
        return history.log(s, limit=1)[0]


def test_grep_colour_on_a_terminal(cli: Path) -> None:
    with _open(cli) as s:
        s.put_file("/memories/a.md", "Alpha line\n", actor="agent")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    code, out = _pty_run(["grep", "Alpha"], env)
    assert (code, out) == (0, "\x1b[35m/memories/a.md\x1b[0m\x1b[36m:\x1b[0mAlpha line\n")
    code, out = _pty_run(["grep", "Alpha"], {**env, "TERM": "dumb"})
    assert (code, out) == (0, "/memories/a.md:Alpha line\n")


def test_a_scrub_setting_changed_in_the_library_applies_to_the_open_store(tmp_path: Path) -> None:
    """The store object that changed its scrub policy scrubs by the new one at once (its scrubber
    is built again), without being opened again."""
    from conftest import make_store
    from memvault.admin.config import change_settings
    from memvault.protocol.commands import run_command

    store = make_store(tmp_path / "s")
    run_command(store, {"command": "create", "path": "/memories/a.md", "file_text": "mail bob@globex-corp.io\n"},
                actor="t", session="")  # fmt: skip
    assert store.read_text("/memories/a.md") == "mail [REDACTED:email]\n"
    change_settings(store, {"scrub.policy.email": "allow"}, actor="operator")
    run_command(store, {"command": "create", "path": "/memories/b.md", "file_text": "mail bob@globex-corp.io\n"},
                actor="t", session="")  # fmt: skip
    assert store.read_text("/memories/b.md") == "mail bob@globex-corp.io\n"
    store.close()
