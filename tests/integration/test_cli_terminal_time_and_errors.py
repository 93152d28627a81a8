"""The CLI on the edges: terminal escapes in memory content, time windows with a clock set back,
one-line OS errors, passwd on a key-file store, redacted versions in the one-line log."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault import history
from memvault.cli import main
from memvault.cli._common import terminal_safe
from memvault.erasure import redact as shred
from memvault.store import transaction as store_module


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_safe_escapes_control_and_format_characters() -> None:
    hostile = "ok\n\x1b[2K\x1b[1Ahidden\t\x07\u202eevil\x1b]52;c;ZXZpbA==\x07"
    assert terminal_safe(hostile, _Tty()) == "ok\n\\x1b[2K\\x1b[1Ahidden\t\\x07\\u202eevil\\x1b]52;c;ZXZpbA==\\x07"
    assert terminal_safe(hostile, io.StringIO()) == hostile  # pipes get the exact text


def test_cat_and_diff_on_a_terminal_show_escapes(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make_store(store_path)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/x.md", "file_text": "a\x1b[2Kb\n"})
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(store_path))
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    monkeypatch.setattr("sys.stdout", tty)
    assert main(["cat", "/memories/x.md"]) == 0
    assert tty.getvalue() == "a\\x1b[2Kb\n"
    tty.truncate(0)
    tty.seek(0)
    assert main(["log", "-p", "-n", "1"]) == 0
    assert "+a\\x1b[2Kb" in tty.getvalue() and "\x1b" not in tty.getvalue()
    for command in (["show", "HEAD"], ["diff", "HEAD~1", "HEAD"], ["blame", "/memories/x.md"]):
        tty.truncate(0)
        tty.seek(0)
        assert main(command) == 0, command
        assert "a\\x1b[2Kb" in tty.getvalue() and "\x1b" not in tty.getvalue(), command
    pipe = io.StringIO()  # not a terminal: the exact bytes
    monkeypatch.setattr("sys.stdout", pipe)
    assert main(["cat", "/memories/x.md"]) == 0
    assert pipe.getvalue() == "a\x1b[2Kb\n"


def test_since_survives_a_clock_set_back(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    now = time.time()
    for i, t in enumerate([now, now - 3600, now + 10]):
        monkeypatch.setattr(store_module, "commit_time", lambda t=t: t)
        tool.call({"command": "create", "path": f"/memories/{i}.md", "file_text": "x"})
    # #2 was made "an hour ago" by a clock set back; #1 and #0 (init) come after it in the chain.
    assert [c.seq for c in history.log(store, since=now - 60)] == [3, 1, 0]


def test_at_time_to_the_second_selects_that_commit(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(store_path)
    monkeypatch.setattr(store_module, "commit_time", lambda: 1_800_000_000.75)
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    shown = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_800_000_000.75))  # as log prints it (UTC here)
    assert history.resolve(store, f"@{{{shown}}}") == store.head[0]
    assert history.parse_time(shown) == 1_800_000_000.0  # --since keeps the start of the second


def test_os_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keygen", str(tmp_path / "missing" / "k.bin")]) == 1
    assert capsys.readouterr().err == "memvault: No such file or directory.\n"


def test_passwd_on_a_key_file_store_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "k.bin"
    assert main(["keygen", str(key)]) == 0
    memvault.MemoryStore.create(tmp_path / "s", key_file=key).close()
    monkeypatch.delenv("MEMVAULT_PASSPHRASE", raising=False)
    monkeypatch.delenv("MEMVAULT_NEW_PASSPHRASE", raising=False)
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key))
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "s"), "passwd"]) == 2
    assert capsys.readouterr().err == (
        "memvault: The store was not opened with a passphrase; use `memvault key add` instead.\n"
    )


def test_log_line_marks_redacted_versions(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "secret text\n"})
    tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "secret", "new_str": "public"})
    shred.shred_version(store, "/memories/a.md", "#1", actor="alice")
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(store_path))
    assert main(["log"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  #3  " in lines[0] and " alice " in lines[0] and " redact" in lines[0]  # the redaction's commit
    assert lines[2].endswith("[1 redacted by alice]")  # commit #1 created the redacted version
    assert "redacted" not in lines[1]
