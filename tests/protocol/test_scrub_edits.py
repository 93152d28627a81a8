"""Through the memory tool: an edit is scrubbed around what it wrote, before
the store's writer lock is taken (and again under it only if the file changed meanwhile), a text over
the size limit is refused before any scanning, and renaming a directory re-checks every path it moves.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from anthropic.lib.tools._beta_functions import ToolError

import memvault
from conftest import PASSPHRASE, make_store
from memvault import history
from memvault.scrub import Scrubber, engine
from memvault.settings import StoreSettings

# Fake values of the real shapes.
GH = "ghp_R8mKq2LvX9pT4wZb7NcY3hJf6sDg1aEo5uQi"
IBAN = "DE89 3704 0044 0532 0130 00"
PASSWORD = "Copper7741#Maple"


def _read(tool: memvault.MemoryTool, path: str) -> str:
    out = tool.call({"command": "view", "path": path})
    assert isinstance(out, str)
    return out


def test_a_value_split_across_an_edit_is_caught(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    tool.call(
        {"command": "create", "path": "/memories/pay.md", "file_text": "Refund to IBAN DE89 3704 0044 TAIL (Ana).\n"}
    )
    out = tool.call(
        {"command": "str_replace", "path": "/memories/pay.md", "old_str": "TAIL", "new_str": "0532 0130 00"}
    )
    assert isinstance(out, str) and "(1 iban)" in out
    assert history.read_at(store, "/memories/pay.md") == b"Refund to IBAN [REDACTED:iban] (Ana).\n"


def test_an_edit_scans_around_itself_and_masks_what_it_finds_everywhere(
    store: memvault.MemoryStore, tool: memvault.MemoryTool
) -> None:
    """The file is mostly old text, written through the library (which does not scrub): the edit's
    window does not reach its first line, so the password there is not the edit's finding; but the
    same password written by the edit is masked wherever it occurs in the file."""
    filler = "".join(f"- line {i}: the queue drained in {i % 50} s\n" for i in range(1000))  # about 36 KB
    store.put_file("/memories/far.md", f"old: {PASSWORD} stays\n{filler}END\n")
    out = tool.call(
        {"command": "str_replace", "path": "/memories/far.md", "old_str": "END", "new_str": f"db_password = {PASSWORD}"}
    )
    assert isinstance(out, str) and "(2 password_assignment)" in out
    stored = history.read_at(store, "/memories/far.md").decode()
    assert PASSWORD not in stored
    assert stored.startswith("old: [REDACTED:password_assignment] stays\n")
    assert stored.endswith("db_password = [REDACTED:password_assignment]\n")
    assert history.log(store, limit=1)[0].findings == {"password_assignment": 2}


def test_old_text_far_from_an_edit_is_not_rescanned(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    """What the window does not reach is left as it was (it was scrubbed when it was written, unless a
    caller wrote around the scrubber, as here; ``memvault scrub`` finds such values)."""
    filler = "".join(f"- line {i}: the queue drained in {i % 50} s\n" for i in range(1000))
    store.put_file("/memories/far.md", f"token {GH}\n{filler}END\n")
    out = tool.call({"command": "str_replace", "path": "/memories/far.md", "old_str": "END", "new_str": "DONE"})
    assert isinstance(out, str) and "Note:" not in out
    assert GH in history.read_at(store, "/memories/far.md").decode()
    assert engine.EDIT_CONTEXT < len(filler)  # beyond the reach of every rule


def test_a_key_block_completed_by_an_edit_is_caught(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    """A PEM block's BEGIN line about 10 KB before the edit that writes its END line: beyond the
    reach of the line rules, within that of the key blocks."""
    body = "\n".join(
        f"MIIEpAIBAAKCAQEA{i:04d}" + "Qm3vT8xLp2Zr9Ks4Wb7Ny1Jd6Hc0Fg5Ua8Ve3Ti2Ro4Pl9Mk1Xq7Sw6" for i in range(140)
    )
    store.put_file("/memories/key.md", f"deploy key:\n-----BEGIN RSA PRIVATE KEY-----\n{body}\nTAIL\nafter\n")
    assert engine.LINE_CONTEXT < len(body) < engine.EDIT_CONTEXT
    out = tool.call(
        {
            "command": "str_replace",
            "path": "/memories/key.md",
            "old_str": "TAIL",
            "new_str": "-----END RSA PRIVATE KEY-----",
        }
    )
    assert isinstance(out, str) and "(1 private_key)" in out
    assert history.read_at(store, "/memories/key.md") == b"deploy key:\n[REDACTED:private_key]\nafter\n"


def _blocking_window(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event, list[int]]:
    """Make the first ``apply_window`` wait for ``release`` after setting ``started``."""
    started, release, calls = threading.Event(), threading.Event(), []
    original = Scrubber.apply_window

    def apply_window(self: Scrubber, text: str, start: int, end: int) -> object:
        calls.append(1)
        if len(calls) == 1:
            started.set()
            assert release.wait(30)
        return original(self, text, start, end)

    monkeypatch.setattr(Scrubber, "apply_window", apply_window)
    return started, release, calls


def test_scrubbing_an_edit_does_not_hold_the_writer_lock(
    store: memvault.MemoryStore, tool: memvault.MemoryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"})
    started, release, calls = _blocking_window(monkeypatch)
    errors: list[BaseException] = []

    def edit() -> None:
        try:
            tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "beta"})
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    editor = threading.Thread(target=edit)
    editor.start()
    try:
        assert started.wait(30)
        # while the edit is being scrubbed, another writer commits and a reader reads
        other = threading.Thread(
            target=lambda: tool.call({"command": "create", "path": "/memories/b.md", "file_text": "other\n"})
        )
        other.start()
        other.join(20)
        assert not other.is_alive(), "a write waited for the scrubbing of another command's edit"
        assert "other" in _read(tool, "/memories/b.md")
    finally:
        release.set()
        editor.join(30)
    assert not errors
    assert "beta" in _read(tool, "/memories/a.md")
    assert len(calls) == 1  # the file did not change meanwhile: scrubbed once, outside the lock


def test_an_edit_is_scrubbed_again_when_the_file_changed_meanwhile(
    store: memvault.MemoryStore, tool: memvault.MemoryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\ngamma\n"})
    started, release, calls = _blocking_window(monkeypatch)
    done: list[object] = []
    editor = threading.Thread(
        target=lambda: done.append(
            tool.call(
                {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": f"token {GH}"}
            )
        )
    )
    editor.start()
    try:
        assert started.wait(30)
        tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "gamma", "new_str": "delta"})
    finally:
        release.set()
        editor.join(30)
    assert len(calls) == 3  # the blocked one, the other edit's, and this edit again under the lock
    assert history.read_at(store, "/memories/a.md") == b"token [REDACTED:github_token]\ndelta\n"
    assert isinstance(done[0], str) and "(1 github_token)" in done[0]


def test_an_edit_over_the_size_limit_is_refused_before_scrubbing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path / "s", StoreSettings(max_file_bytes=1000))
    tool = memvault.MemoryTool(store)
    try:
        tool.call({"command": "create", "path": "/memories/a.md", "file_text": "START " + "x" * 894})
        calls: list[int] = []
        monkeypatch.setattr(Scrubber, "apply_window", lambda *a: calls.append(1))
        monkeypatch.setattr(Scrubber, "apply", lambda *a: calls.append(1))
        for command in (
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "START", "new_str": "y" * 200},
            {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "z" * 200},
            {"command": "create", "path": "/memories/b.md", "file_text": "\u00e9" * 600},  # 1,200 UTF-8 bytes
        ):
            with pytest.raises(ToolError) as info:
                tool.call(command)
            assert "over the limit of 1000 bytes per file" in str(info.value)
        assert calls == []
    finally:
        store.close()


def test_a_long_adversarial_edit_costs_linear_time(tmp_path: Path) -> None:
    """The issue's case through str_replace: ``pin=`` repeated, written into a file. Ten times more
    costs about ten times more (a ratio, not a time)."""
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    tool = memvault.MemoryTool(store)
    try:
        seconds = []
        for n in (5_000, 50_000):
            path = f"/memories/pin{n}.md"
            tool.call({"command": "create", "path": path, "file_text": "notes\nMARK\nend\n"})
            best = float("inf")
            for i in range(3):
                new = f"MARK{i + 1}\n" + "pin=" * (n // 4)
                old = "MARK" if i == 0 else f"MARK{i}\n" + "[REDACTED:password_assignment]"
                t = time.perf_counter()
                tool.call({"command": "str_replace", "path": path, "old_str": old, "new_str": new})
                best = min(best, time.perf_counter() - t)
            seconds.append(best)
        assert seconds[1] / seconds[0] < 30, seconds
    finally:
        store.close()


@pytest.mark.parametrize(
    ("directory", "name", "kind"),
    [
        ("twilio", "5f3b8c1d2e4a6f7091b2c3d4e5f60718.md", "twilio_auth_token"),
        ("born", "1990-04-12.md", "dob"),
    ],
)
def test_renaming_a_directory_rechecks_the_paths_it_moves(
    store: memvault.MemoryStore, tool: memvault.MemoryTool, directory: str, name: str, kind: str
) -> None:
    # create refuses the path itself ...
    with pytest.raises(ToolError) as info:
        tool.call({"command": "create", "path": f"/memories/{directory}/{name}", "file_text": "x"})
    assert str(info.value).startswith(f"Error: The path contains sensitive data ({kind})")
    # ... so a rename must not make it
    tool.call({"command": "create", "path": f"/memories/x/sub/{name}", "file_text": "x"})
    before = store.head
    with pytest.raises(ToolError) as info:
        tool.call({"command": "rename", "old_path": "/memories/x", "new_path": f"/memories/{directory}"})
    assert str(info.value).startswith(f"Error: The path contains sensitive data ({kind})")
    assert store.head == before
    assert "x/sub" in _read(tool, "/memories")


def test_renaming_a_directory_of_harmless_names_works(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    tool.call({"command": "create", "path": "/memories/x/a.md", "file_text": "a"})
    tool.call({"command": "create", "path": "/memories/x/b/c.md", "file_text": "c"})
    assert tool.call({"command": "rename", "old_path": "/memories/x", "new_path": "/memories/y"}) == (
        "Successfully renamed /memories/x to /memories/y"
    )
    assert history.read_at(store, "/memories/y/b/c.md") == b"c"


def test_a_view_never_loads_or_compiles_the_scrubber(tmp_path: Path) -> None:
    """The rules are compiled once per process, on first use: a process that only views never
    imports the engine (whose module compiles them lazily)."""
    import subprocess
    import sys

    store = make_store(tmp_path / "s")
    memvault.MemoryTool(store).call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"})
    store.close()
    code = (
        "import sys, memvault\n"
        f"s = memvault.MemoryStore.open({str(tmp_path / 's')!r}, passphrase={PASSPHRASE!r})\n"
        "out = memvault.MemoryTool(s).call({'command': 'view', 'path': '/memories/a.md'})\n"
        "assert 'alpha' in out\n"
        "print('memvault.scrub.engine' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
