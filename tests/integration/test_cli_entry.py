"""The command line's frame: a closed pipe, --version, a bare ``memvault``, the help epilog,
global options before or after the command, messages that lead somewhere, ``-v``, and shell
completion."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from memvault import MemoryStore, MemoryTool
from memvault.cli import build_parser, main
from memvault.cli._main import ENVIRONMENT, EPILOG, CommandParser
from memvault.cli.completion import script

SRC = Path(__file__).resolve().parents[2] / "src" / "memvault"
ENTRY = "import sys; from memvault.cli import main; sys.exit(main())"
BIG = "".join(f"line {i} of the operator's notes about the weekly report\n" for i in range(1500))  # ~80 KB


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key.bin"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    return path


@pytest.fixture
def store(tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with two commits (an 80 KB file), unlocked by ``$MEMVAULT_KEY_FILE``; no
    ``$MEMVAULT_STORE``."""
    for name in ("MEMVAULT_STORE", "MEMVAULT_PASSPHRASE", "MEMVAULT_KEY", "MEMVAULT_DEBUG", "MEMVAULT_LOCK_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key_file))
    root = tmp_path / "store"
    with MemoryStore.create(root, key_file=key_file) as s:
        MemoryTool(s, actor="agent").call({"command": "create", "path": "/memories/big.md", "file_text": BIG})
    return root


# -- a closed pipe ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["log"], ["cat", "/memories/big.md"]], ids=["small-output", "large-output"])
def test_a_reader_that_went_away_ends_the_command_quietly(store: Path, args: list[str]) -> None:
    """The reader closed the pipe before any output (``| head -0``): status 0 and nothing on
    stderr, neither from the command nor from Python's last flush of stdout."""
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "--store", str(store), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert (proc.wait(timeout=30), err) == (0, b"")


def test_head_in_a_pipefail_pipeline(store: Path) -> None:
    shell = f"set -o pipefail; {sys.executable} -c '{ENTRY}' --store '{store}' cat /memories/big.md | head -1"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "line 0 of the operator's notes about the weekly report\n",
        "",
    )


# -- version, bare command, help -------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"memvault {version('memvault')}\n"


def test_bare_memvault_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """No command: usage, every command with its summary, where to read more; status 0 (a request
    for help, as ``memvault --help``), on stdout."""
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("usage: memvault [-h] [--store STORE] [--json] [--lock-timeout SECONDS] [-v]")
    assert "\n    log                 list commits, newest first\n" in out
    assert "\n    completion          print a shell completion script (bash, zsh or fish)\n" in out
    parser = build_parser()
    assert isinstance(parser, CommandParser)
    for name in parser.commands:
        assert re.search(rf"\n    {re.escape(name)}\s", out), name
    assert out.endswith(
        "\nRun 'memvault COMMAND --help' for a command's options, 'memvault --help' for the environment\n"
        "variables and exit statuses.\n"
    )
    assert "environment variables:" not in out


def _command_paths(parser: CommandParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [path]
    for name, (sub, _help) in parser.commands.items():
        out += _command_paths(sub, (*path, name))
    return out


def test_every_help_ends_with_the_environment_and_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert isinstance(parser, CommandParser)
    paths = _command_paths(parser)
    assert ("key", "add") in paths and ("dream", "merge") in paths and ("redact", "versions") in paths
    for path in paths:
        assert main([*path, "--help"]) == 0, path
        out = capsys.readouterr().out
        assert out.endswith("\n" + EPILOG), path
    assert EPILOG.startswith("environment variables:\n  MEMVAULT_STORE        the store (a directory,")
    assert "\nexit statuses:\n  0    success\n" in EPILOG
    assert "\n  11   locked: another writer held the store's lock throughout --lock-timeout\n" in EPILOG
    assert EPILOG.endswith("\n  130  interrupted (Ctrl-C)\n")
    assert (
        "\n  MEMVAULT_LOCK_TIMEOUT\n                        seconds a writer waits for the store's lock, when" in EPILOG
    )


def test_the_epilog_names_every_variable_memvault_reads() -> None:
    """Every ``MEMVAULT_*`` name in the source is in the epilog, and nothing else is."""
    in_source: set[str] = set()
    for path in SRC.rglob("*.py"):
        in_source |= set(re.findall(r"\bMEMVAULT_[A-Z0-9_]+\b", path.read_text()))
    listed = {name for names, _ in ENVIRONMENT for name in names.split(", ") if name.startswith("MEMVAULT_")}
    assert listed == in_source


# -- global options --------------------------------------------------------------------------------


def test_global_options_go_before_or_after_the_command(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = [(1, "agent", "create"), (0, "memvault", "init")]
    for args in (
        ["--store", str(store), "--json", "log"],
        ["--json", "log", "--store", str(store)],
        ["log", "--store", str(store), "--json"],
        ["--store", str(tmp_path / "elsewhere"), "log", "--json", "--store", str(store)],  # the later one wins
    ):
        assert main(args) == 0, args
        assert [(e["seq"], e["actor"], e["command"]) for e in json.loads(capsys.readouterr().out)] == expected
    # a command without a --json of its own still takes it: its errors come as JSON
    assert main(["cat", "/memories/nope.md", "--store", str(store), "--json"]) == 4
    assert json.loads(capsys.readouterr().err)["kind"] == "REFUSED"
    assert main(["--json", "cat", "/memories/nope.md", "--store", str(store)]) == 4
    assert json.loads(capsys.readouterr().err)["kind"] == "REFUSED"
    # nested commands too
    assert main(["key", "list", "--store", str(store), "--json"]) == 0
    assert [slot["kind"] for slot in json.loads(capsys.readouterr().out)] == ["keyfile"]


# -- messages --------------------------------------------------------------------------------------


def test_no_store_names_the_place_and_what_to_do(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # holds store/, which holds the store
    assert main(["log"]) == 10
    assert capsys.readouterr().err == (
        f"memvault: No memory store exists at {tmp_path} (the current directory).\n"
        "hint: create a store there with 'memvault init', or name an existing one with --store or $MEMVAULT_STORE\n"
        f"hint: {store} holds a memory store: memvault --store {store} ...\n"
    )
    monkeypatch.setenv("MEMVAULT_STORE", "nowhere")
    assert main(["log", "--json"]) == 10
    assert json.loads(capsys.readouterr().err) == {
        "error": f"No memory store exists at {tmp_path / 'nowhere'} (MEMVAULT_STORE).",
        "exit_status": 10,
        "kind": "NO_STORE",
        "hints": ["create a store there with 'memvault init', or name an existing one with --store or $MEMVAULT_STORE"],
    }


def test_key_file_errors_say_what_is_wrong(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run_with(key_file: Path) -> str:
        monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key_file))
        assert main(["--store", str(store), "log"]) == 12
        return capsys.readouterr().err

    assert run_with(tmp_path / "missing.bin") == (
        f"memvault: The key file does not exist.\nhint: MEMVAULT_KEY_FILE is {tmp_path / 'missing.bin'}\n"
    )
    assert (
        run_with(tmp_path)
        == f"memvault: The key file is a directory, not a file.\nhint: MEMVAULT_KEY_FILE is {tmp_path}\n"
    )
    from memvault.keys import slots

    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(slots, "open", refused, raising=False)  # root reads any file: refuse by hand
    assert run_with(tmp_path / "key.bin") == (
        "memvault: The key file cannot be read: permission denied.\n"
        f"hint: MEMVAULT_KEY_FILE is {tmp_path / 'key.bin'}\n"
    )


@pytest.mark.parametrize("name", ["MEMVAULT_PASSPHRASE", "MEMVAULT_KEY_FILE", "MEMVAULT_KEY"])
def test_an_empty_variable_says_it_is_empty(
    store: Path, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMVAULT_KEY_FILE")
    monkeypatch.setenv(name, "")
    assert main(["--store", str(store), "log"]) == 12
    assert capsys.readouterr().err == f"memvault: {name} is set but empty: give it a value, or unset it.\n"


def test_integrity_errors_suggest_verify(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (store / "memvault.json").write_text("{ damaged")
    assert main(["--store", str(store), "log"]) == 3
    assert capsys.readouterr().err == (
        "memvault: The store's configuration file is damaged.\n"
        "hint: run 'memvault verify' for a check of the whole store that names what is damaged\n"
    )
    assert main(["--store", str(store), "log", "--json"]) == 3
    assert json.loads(capsys.readouterr().err)["hints"] == [
        "run 'memvault verify' for a check of the whole store that names what is damaged"
    ]


def test_verbose_logs_the_chain_without_secrets(
    store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """-v (or MEMVAULT_DEBUG=1): each exception behind the error, where it was raised; memvault's
    own messages, only the type of any other (its message could quote data)."""
    (store / "memvault.json").write_text('{"secret-looking": "hunter2"')
    assert main(["-v", "--store", str(store), "log"]) == 3
    lines = capsys.readouterr().err.splitlines()
    assert re.fullmatch(
        r"memvault: debug: memvault\.errors\.IntegrityError: The store's configuration file is damaged\. "
        r"\(at memvault\.store\.config:\d+\)",
        lines[0],
    ), lines
    assert re.fullmatch(
        r"memvault: debug:   caused by json\.decoder\.JSONDecodeError \(at json\.decoder:\d+\)", lines[1]
    )
    assert lines[-2:] == [
        "memvault: The store's configuration file is damaged.",
        "hint: run 'memvault verify' for a check of the whole store that names what is damaged",
    ]
    assert "hunter2" not in "\n".join(lines)

    monkeypatch.setenv("MEMVAULT_DEBUG", "1")
    assert main(["log", "--store", str(store)]) == 3
    assert capsys.readouterr().err.splitlines()[:2] == lines[:2]
    monkeypatch.setenv("MEMVAULT_DEBUG", "0")
    assert main(["log", "--store", str(store)]) == 3
    assert not capsys.readouterr().err.startswith("memvault: debug:")


# -- shell completion ------------------------------------------------------------------------------


def test_bash_completion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    (tmp_path / "c.bash").write_text(capsys.readouterr().out)
    probe = """
source "$1"
t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _memvault; echo "${COMPREPLY[*]}"; }
t memvault lo
t memvault ke
t memvault key ""
t memvault --store /x key a
t memvault log --co
t memvault log --color ""
t memvault --store ""
t memvault completion ""
t memvault cat --rev HEAD /mem
"""
    done = subprocess.run(["bash", "-c", probe, "probe", str(tmp_path / "c.bash")], capture_output=True, text=True)
    assert done.stdout.splitlines() == [
        "log",
        "keygen key",
        "list add remove rotate",
        "add",
        "--color",
        "auto always never",
        "",  # a store's location: bash completes file names (complete -o default)
        "bash zsh fish",
        "",  # a path inside the store: not completed (it would need the key)
    ], done.stderr


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion(tmp_path: Path) -> None:
    (tmp_path / "c.zsh").write_text(script("zsh"))
    probe = """
compdef() { :; }
source "$1"
_describe() { print -r -- "${(j: :)${(@)${(P)4}%%:*}}"; }
compadd() { print -r -- "${(j: :)${(@P)2}}"; }
_files() { print -r -- "(files)"; }
t() { words=("$@"); CURRENT=$#words; PREFIX=${words[-1]}; _memvault; }
t memvault key ""
t memvault --store /x key ""
t memvault log --color ""
t memvault log --store ""
t memvault completion ""
t memvault cat /mem
"""
    done = subprocess.run(["zsh", "-f", "-c", probe, "zsh", str(tmp_path / "c.zsh")], capture_output=True, text=True)
    assert done.stdout.splitlines() == [
        "list add remove rotate",
        "list add remove rotate",
        "auto always never",
        "(files)",
        "bash zsh fish",
        "(files)",
    ], done.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion(tmp_path: Path) -> None:
    (tmp_path / "c.fish").write_text(script("fish"))
    probe = """
source $argv[1]
for line in "memvault lo" "memvault key " "memvault --store /x key a" "memvault log --color " "memvault completion "
    echo (complete -C "$line" | string replace -r '\\t.*' '' | string join ' ')
end
"""
    done = subprocess.run(
        ["fish", "--no-config", "-c", probe, str(tmp_path / "c.fish")], capture_output=True, text=True
    )
    assert done.stdout.splitlines() == ["log", "add list remove rotate", "add", "always auto never", "bash fish zsh"], (
        done.stderr
    )
