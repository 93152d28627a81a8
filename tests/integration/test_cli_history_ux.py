"""git habits in the read commands: positional revisions and ``A..B`` ranges, ``-N``,
``--oneline``, ``--format``, ``--date``, aligned columns, ISO 8601 times in ``--json``, messages for
a directory or a revision given as a path; and, in a real pseudo-terminal, the pager and colour.

Commit times are fixed (``T0 + seq`` hours) and local time is ``UTC+05:30`` (a POSIX ``TZ`` needing
no zone database), so dates are written out by hand; only commit ids come from the library.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import memvault
import memvault.store
from memvault import history
from memvault.cli import main
from memvault.cli._output import color_enabled, format_date, pager_command, relative_date
from memvault.erasure import redact as shred
from memvault.errors import InvalidInputError, InvalidPathError
from memvault.paths import parse_path

T0 = 1_700_000_000  # 2023-11-14 22:13:20 UTC, 2023-11-15 03:43:20 at UTC+05:30
TZ = "IST-5:30"
LONG = "a-rather-long-actor-name"
MAIN = "import sys; from memvault.cli import main; sys.exit(main())"


@pytest.fixture
def local_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", TZ)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _build(path: Path, key: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """#0 init, #1 a.md, #2 an edit by a long actor name, #3 d/b.md, #4 c.md, #5 e.md with a
    scrubber finding; commit N at T0 + N hours."""
    ticks = iter(range(100))
    monkeypatch.setattr(memvault.store.transaction, "commit_time", lambda: float(T0 + 3600 * next(ticks)))
    store = memvault.MemoryStore.create(path, key_file=key)
    tool = memvault.MemoryTool(store, actor="claude", session="s-1")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "one\n"})
    memvault.MemoryTool(store, actor=LONG, session="s-2").call(
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}
    )
    tool.call({"command": "create", "path": "/memories/d/b.md", "file_text": "b\n"})
    tool.call({"command": "create", "path": "/memories/c.md", "file_text": "c\n"})
    e = parse_path("/memories/e.md")
    store.transact(
        lambda txn: txn.write_file(e, b"[redacted email]\n"),
        command="create",
        paths=(e.text,),
        actor="claude",
        session="s-3",
        findings={"email": 1},
    )
    ids: dict[str, Any] = {"store": store}
    for info in history.log(store):
        ids[f"C{info.seq}"] = info.commit_id
        ids[f"c{info.seq}"] = info.commit_id[:10]
    monkeypatch.undo()
    return ids


@pytest.fixture
def ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_tz: None) -> Iterator[dict[str, Any]]:
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    out = _build(tmp_path / "store", key, monkeypatch)
    monkeypatch.setenv("TZ", TZ)
    monkeypatch.delenv("MEMVAULT_PASSPHRASE", raising=False)
    monkeypatch.delenv("MEMVAULT_KEY", raising=False)
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(key))
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("NO_COLOR", "1")
    out["files"] = {"key": key, "store": tmp_path / "store"}
    yield out
    out["store"].close()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> str:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    if status == 0:
        assert captured.err == ""
        return captured.out
    assert captured.out == ""
    return captured.err


LOG = """\
{c5}  #5    2023-11-15 08:43:20  claude                   create      /memories/e.md  [email:1]
{c4}  #4    2023-11-15 07:43:20  claude                   create      /memories/c.md
{c3}  #3    2023-11-15 06:43:20  claude                   create      /memories/d/b.md
{c2}  #2    2023-11-15 05:43:20  a-rather-long-actor-name str_replace /memories/a.md
{c1}  #1    2023-11-15 04:43:20  claude                   create      /memories/a.md
{c0}  #0    2023-11-15 03:43:20  memvault                 init
"""


def lines(ids: dict[str, Any], *seqs: int) -> str:
    """The log lines of these commits printed together: the actor column is wide only with #2."""
    log = LOG if 2 in seqs else LOG.replace(" " * 14 + " create", " create").replace("memvault" + " " * 14, "memvault")
    by_seq = {5 - i: line for i, line in enumerate(log.format(**ids).splitlines(keepends=True))}
    return "".join(by_seq[s] for s in seqs)


# -- columns, ranges, -N ---------------------------------------------------------------------------


def test_columns_fit_the_longest_actor_of_each_page(
    ids: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli(capsys, "log") == LOG.format(**ids)
    # without the long name the columns keep their usual widths
    assert run_cli(capsys, "log", "-n", "2") == (
        "{c5}  #5    2023-11-15 08:43:20  claude     create      /memories/e.md  [email:1]\n"
        "{c4}  #4    2023-11-15 07:43:20  claude     create      /memories/c.md\n"
    ).format(**ids)
    # widths are computed per page of output: only the page holding #2 is wider
    monkeypatch.setattr("memvault.cli.history.PAGE", 2)
    assert run_cli(capsys, "log") == (
        "{c5}  #5    2023-11-15 08:43:20  claude     create      /memories/e.md  [email:1]\n"
        "{c4}  #4    2023-11-15 07:43:20  claude     create      /memories/c.md\n"
        "{c3}  #3    2023-11-15 06:43:20  claude                   create      /memories/d/b.md\n"
        "{c2}  #2    2023-11-15 05:43:20  a-rather-long-actor-name str_replace /memories/a.md\n"
        "{c1}  #1    2023-11-15 04:43:20  claude     create      /memories/a.md\n"
        "{c0}  #0    2023-11-15 03:43:20  memvault   init\n"
    ).format(**ids)


def test_positional_revisions_ranges_and_counts(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "log", "-2") == lines(ids, 5, 4)
    assert run_cli(capsys, "log", "-0") == ""
    assert run_cli(capsys, "log", "#2") == lines(ids, 2, 1, 0)  # a revision: start there
    assert run_cli(capsys, "log", "HEAD~3", "-1") == lines(ids, 2)
    assert run_cli(capsys, "log", ids["c3"]) == lines(ids, 3, 2, 1, 0)
    # A..B: reachable from B, not from A, newest first; an empty side is HEAD
    assert run_cli(capsys, "log", "HEAD~4..HEAD~1") == lines(ids, 4, 3, 2)
    assert run_cli(capsys, "log", "#3..") == lines(ids, 5, 4)
    newest = "{c5} create /memories/e.md  [email:1]\n{c4} create /memories/c.md\n".format(**ids)
    assert run_cli(capsys, "log", "HEAD~2..", "--oneline") == newest
    assert run_cli(capsys, "log", "#4..#4") == ""
    assert run_cli(capsys, "log", "HEAD..#1") == ""  # B before A: nothing
    assert run_cli(capsys, "log", "#0..#5", "-n", "2", "--skip", "1") == lines(ids, 4, 3)
    # a revision and a path together; a path still works alone, before or after --
    assert run_cli(capsys, "log", "#3", "/memories/a.md") == lines(ids, 2, 1)
    assert run_cli(capsys, "log", "/memories/a.md") == lines(ids, 2, 1)
    assert run_cli(capsys, "log", "#0..", "--", "/memories/a.md") == lines(ids, 2, 1)
    assert run_cli(capsys, "log", "--rev", "#1") == lines(ids, 1, 0)
    assert [e["seq"] for e in json.loads(run_cli(capsys, "log", "--json", "#1..#3"))] == [3, 2]
    # the library: the same range
    assert [e.seq for e in history.log(ids["store"], start="#3", exclude="#1")] == [3, 2]
    assert history.split_range("HEAD~4..") == ("HEAD~4", "HEAD")
    assert history.split_range("..#2") == ("HEAD", "#2")
    assert history.split_range("#2") is None


def test_log_argument_errors(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run_cli(capsys, "log", "-2", "-n", "3", status=2) == "memvault: Give the number of commits once: -N or -n N.\n"
    )
    assert run_cli(capsys, "log", "#2", "--rev", "#1", status=2) == (
        "memvault: Give the revision once: as an argument or with --rev.\n"
    )
    assert run_cli(capsys, "log", "#2", "#1", status=2) == (
        "memvault: log takes at most one revision or range (A..B), not #2 #1; a path starts with /.\n"
    )
    assert (
        run_cli(capsys, "log", "/memories/a.md", "/memories/c.md", status=2)
        == "memvault: log takes at most one PATH.\n"
    )
    assert run_cli(capsys, "log", "#1...#3", status=2) == (
        "memvault: '#1...#3': A...B is not supported (history is linear); use A..B.\n"
    )
    assert run_cli(capsys, "log", "#1..nope", status=2) == "memvault: Unknown revision 'nope'.\n"
    # a path without its leading slash is taken for a revision, and told so
    assert run_cli(capsys, "log", "memories/a.md", status=2) == (
        "memvault: 'memories/a.md' is neither a revision nor a path; a path starts with /: "
        "memvault log /memories/a.md.\n"
    )
    assert run_cli(capsys, "diff", "memories/a.md", status=2) == (
        "memvault: 'memories/a.md' is neither a revision nor a path; a path starts with /: "
        "memvault diff /memories/a.md.\n"
    )
    assert run_cli(capsys, "show", "#1..#3", status=2) == (
        "memvault: show takes one revision, not the range '#1..#3'; its commits: memvault log -p #1..#3; "
        "the change across it: memvault diff #1..#3.\n"
    )
    assert run_cli(capsys, "show", "/memories/a.md", status=2) == (
        "memvault: '/memories/a.md' is not a revision; for a file at a revision: memvault show HEAD:/memories/a.md.\n"
    )


# -- --oneline, --format, --date -------------------------------------------------------------------


def test_oneline_and_format(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "log", "--oneline") == (
        "{c5} create /memories/e.md  [email:1]\n{c4} create /memories/c.md\n{c3} create /memories/d/b.md\n"
        "{c2} str_replace /memories/a.md\n{c1} create /memories/a.md\n{c0} init\n"
    ).format(**ids)
    template = "%h %H #%(seq) %an|%ad|%aI|%at|%s|%(session)|%(command)|%(paths)|%(branch)|%(findings)%n100%%"
    assert run_cli(capsys, "log", "-1", "--format", template) == (
        "{c5} {C5} #5 claude|2023-11-15 08:43:20|2023-11-15T08:43:20+05:30|1700018000|create /memories/e.md|s-3|create"
        "|/memories/e.md||email:1\n100%\n"
    ).format(**ids)
    assert run_cli(capsys, "log", "#2", "-1", "--date=iso", "--format=%ad %(actor)") == (
        "2023-11-15T05:43:20+05:30 a-rather-long-actor-name\n"
    )
    assert run_cli(capsys, "log", "-1", "--format", "%C(red)%h%C(reset) %s") == "{c5} create /memories/e.md\n".format(
        **ids
    )
    assert run_cli(capsys, "log", "-1", "--color=always", "--format", "%C(red)%h%C(reset) %s") == (
        "\x1b[31m{c5}\x1b[0m create /memories/e.md\n".format(**ids)
    )
    assert run_cli(capsys, "log", "-1", "--color=always", "--oneline") == (
        "\x1b[33m{c5}\x1b[0m create /memories/e.md  \x1b[31m[email:1]\x1b[0m\n".format(**ids)
    )
    placeholders = (
        "%H, %h, %s, %an, %ad, %ar, %aI, %at, %n, %%, %C(NAME), %(seq), %(actor), %(session), %(command), "
        "%(paths), %(branch), %(findings)"
    )
    assert run_cli(capsys, "log", "--format", "%h %x", status=2) == (
        f"memvault: Unknown placeholder '%x' in --format; use one of {placeholders}.\n"
    )
    assert run_cli(capsys, "log", "--format", "%(nope)", status=2) == (
        f"memvault: Unknown placeholder '%(nope)' in --format; use one of {placeholders}.\n"
    )
    assert run_cli(capsys, "log", "--format", "50%", status=2) == (
        f"memvault: Unknown placeholder '%' in --format; use one of {placeholders}.\n"
    )
    assert run_cli(capsys, "log", "--format", "%C(pink)", status=2) == (
        "memvault: Unknown colour 'pink' in --format; use one of red, green, yellow, blue, magenta, cyan, bold, "
        "dim, reset.\n"
    )
    assert run_cli(capsys, "log", "--oneline", "--format", "%h", status=2) == (
        "memvault: Give --oneline or --format, not both.\n"
    )
    assert json.loads(run_cli(capsys, "log", "--json", "--oneline", status=2)) == {
        "error": "--json has its own layout: --oneline and --format do not apply to it.",
        "exit_status": 2,
        "kind": "USAGE",
    }


def test_dates(ids: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_cli(capsys, "log", "-2", "--date=iso") == (
        "{c5}  #5    2023-11-15T08:43:20+05:30  claude     create      /memories/e.md  [email:1]\n"
        "{c4}  #4    2023-11-15T07:43:20+05:30  claude     create      /memories/c.md\n"
    ).format(**ids)
    assert run_cli(capsys, "log", "-2", "--date=local") == lines(ids, 5, 4)
    # relative to a fixed "now": 2 hours after #5; the column is as wide as its longest date
    now = SimpleNamespace(time=lambda: float(T0 + 7 * 3600))
    monkeypatch.setattr("memvault.cli.history.time", now)
    assert run_cli(capsys, "log", "--date=relative", "#1..#4") == (
        "{c4}  #4    3 hours ago  claude                   create      /memories/c.md\n"
        "{c3}  #3    4 hours ago  claude                   create      /memories/d/b.md\n"
        "{c2}  #2    5 hours ago  a-rather-long-actor-name str_replace /memories/a.md\n"
    ).format(**ids)
    assert run_cli(capsys, "log", "-1", "--format=%ar|%ad", "--date=relative") == "2 hours ago|2 hours ago\n"
    assert run_cli(capsys, "show", "--date=iso", "#3").startswith(
        "commit {C3}\nSeq:      #3\nDate:     2023-11-15T06:43:20+05:30\nActor:    claude\n".format(**ids)
    )
    assert run_cli(capsys, "show", "#3").startswith(
        "commit {C3}\nSeq:      #3\nDate:     2023-11-15 06:43:20\n".format(**ids)
    )


def test_relative_date_rounds_as_git() -> None:
    now = 1_000_000_000.0
    cases = [
        (0, "0 seconds ago"),
        (1, "1 second ago"),
        (89, "89 seconds ago"),
        (90, "2 minutes ago"),
        (89 * 60 + 29, "89 minutes ago"),
        (90 * 60, "2 hours ago"),
        (35 * 3600, "35 hours ago"),
        (36 * 3600, "2 days ago"),
        (13 * 86400, "13 days ago"),
        (14 * 86400, "2 weeks ago"),
        (69 * 86400, "10 weeks ago"),
        (70 * 86400, "2 months ago"),
        (364 * 86400, "12 months ago"),
        (365 * 86400, "1 year ago"),
        (500 * 86400, "1 year, 4 months ago"),
        (1825 * 86400, "5 years ago"),
        (-10, "in the future"),
    ]
    assert [relative_date(now - ago, now) for ago, _ in cases] == [text for _, text in cases]


def test_format_date_styles(local_tz: None) -> None:
    assert format_date(T0) == "2023-11-15 03:43:20"
    assert format_date(T0 + 0.9, "iso") == "2023-11-15T03:43:20+05:30"
    assert format_date(T0, "relative", now=T0 + 60) == "60 seconds ago"


# -- JSON times --------------------------------------------------------------------------------------


def test_json_times_are_iso_8601_with_the_number_beside(
    ids: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    [row] = json.loads(run_cli(capsys, "log", "--json", "-1", "#2"))
    assert list(row)[:4] == ["commit", "seq", "time", "timestamp"]
    assert (row["time"], row["timestamp"]) == ("2023-11-15T00:13:20+00:00", float(T0 + 2 * 3600))
    shown = json.loads(run_cli(capsys, "show", "--json", "#3"))
    assert (shown["time"], shown["timestamp"]) == ("2023-11-15T01:13:20+00:00", float(T0 + 3 * 3600))
    blamed = json.loads(run_cli(capsys, "blame", "--json", "/memories/a.md"))
    assert blamed == [
        {
            "line": 1,
            "text": "two",
            "commit": ids["C2"],
            "seq": 2,
            "time": "2023-11-15T00:13:20+00:00",
            "timestamp": float(T0 + 2 * 3600),
            "actor": LONG,
        }
    ]
    [entry] = json.loads(run_cli(capsys, "ls", "--json", "/memories/c.md"))
    assert (entry["mtime"], entry["mtime_timestamp"]) == ("2023-11-15T02:13:20+00:00", float(T0 + 4 * 3600))
    # a redaction's time, inside a change
    shred.shred_version(ids["store"], "/memories/c.md", "#4", actor="alice", reason="test")
    when = history.log(ids["store"], start="#4", limit=1)[0].changes[0].redacted["time"]  # type: ignore[index]
    [row] = json.loads(run_cli(capsys, "log", "--json", "#4", "-1"))
    redacted = row["changes"][0]["redacted"]
    # the destroyed version's lineage (file id) rides along; it is an opaque 128-bit id
    assert re.fullmatch(r"[0-9a-f]{32}", redacted.pop("file"))
    assert redacted == {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(when)),
        "timestamp": when,
        "actor": "alice",
        "reason": "test",
    }


# -- paths that are directories or revisions -----------------------------------------------------------


def test_directory_and_revision_given_as_a_path(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "cat", "/memories/d", status=4) == "memvault: /memories/d is a directory, not a file.\n"
    assert run_cli(capsys, "cat", "/memories", status=4) == "memvault: /memories is a directory, not a file.\n"
    assert run_cli(capsys, "blame", "/memories/d/", status=4) == "memvault: /memories/d is a directory, not a file.\n"
    assert (
        run_cli(capsys, "show", "HEAD:/memories/d", status=4) == "memvault: /memories/d is a directory, not a file.\n"
    )
    with pytest.raises(InvalidPathError, match="is a directory"):
        history.read_at(ids["store"], "/memories/d")
    assert run_cli(capsys, "cat", "HEAD~2", status=2) == (
        "memvault: 'HEAD~2' is a revision, not a path; cat takes a revision with --rev: memvault cat --rev HEAD~2 PATH.\n"
    )
    assert run_cli(capsys, "blame", "#1", status=2) == (
        "memvault: '#1' is a revision, not a path; blame takes a revision with --rev: memvault blame --rev #1 PATH.\n"
    )
    assert run_cli(capsys, "ls", "HEAD~1..HEAD", status=2) == (
        "memvault: 'HEAD~1..HEAD' is a revision, not a path; ls takes a revision with --rev: "
        "memvault ls --rev HEAD~1..HEAD PATH.\n"
    )
    assert run_cli(capsys, "cat", "HEAD~1:memories/a.md", status=2) == (
        "memvault: 'HEAD~1:memories/a.md' is REV:PATH, which cat does not take; "
        "use memvault cat --rev HEAD~1 /memories/a.md.\n"
    )
    # not revision-like: the path grammar's own message (exit 4)
    assert run_cli(capsys, "cat", "notes.md", status=4) == (
        "memvault: Invalid path notes.md: it must be /memories or start with /memories/\n"
    )
    assert history.looks_like_revision("@{2026-11-01 14:30}~2^")
    assert not history.looks_like_revision("memories/a.md")
    assert not history.looks_like_revision("")


# -- colour and pager in a pseudo-terminal --------------------------------------------------------------


def run_pty(argv: list[str], env: dict[str, str], timeout: float = 8.0) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a new pseudo-terminal; its exit status and
    everything it showed there (CRLF as LF)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", MAIN, *argv], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed its end
                    break
                if not data:
                    break
                out += data
            elif proc.poll() is not None:
                break
        else:
            raise AssertionError(f"timed out; output so far: {out!r}")
        return proc.wait(timeout=timeout), out.decode().replace("\r\n", "\n")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


PAGER = """\
import os, sys
print(f"pager {' '.join(sys.argv[1:])}: LESS={os.environ.get('LESS')} LV={os.environ.get('LV')}", flush=True)
for line in sys.stdin:
    sys.stdout.write("P:" + line)
"""

FIRST_LINE_PAGER = """\
import sys
sys.stdout.write("P:" + sys.stdin.readline())
"""


@pytest.fixture
def term(ids: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """An environment for the CLI on a terminal: the store, TERM=xterm, no pager or colour
    settings; ``pager`` and ``quitter`` commands; a ``less`` on PATH that says how it was called."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "pager.py").write_text(PAGER)
    (tmp_path / "first.py").write_text(FIRST_LINE_PAGER)
    less = bin_dir / "less"
    less.write_text(f"#!{sys.executable}\n" + PAGER.replace("pager ", "less "))
    less.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "PAGER", "MEMVAULT_PAGER", "LESS", "LV", "MEMVAULT_PASSPHRASE", "MEMVAULT_KEY")
    }
    env.update(
        TERM="xterm",
        TZ=TZ,
        MEMVAULT_KEY_FILE=str(ids["files"]["key"]),
        MEMVAULT_STORE=str(ids["files"]["store"]),
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return {
        "env": env,
        "pager": f"{shlex.quote(sys.executable)} {shlex.quote(str(tmp_path / 'pager.py'))}",
        "quitter": f"{shlex.quote(sys.executable)} {shlex.quote(str(tmp_path / 'first.py'))}",
        **ids,
    }


def test_pager_on_a_terminal(term: dict[str, Any]) -> None:
    env = {**term["env"], "MEMVAULT_PAGER": term["pager"], "PAGER": "never-used"}
    oneline = "{c5} create /memories/e.md  [email:1]\n{c4} create /memories/c.md\n".format(**term)
    plain = ["log", "-2", "--oneline", "--color=never"]
    assert run_pty(plain, env) == (
        0,
        "pager : LESS=FRX LV=-c\nP:{c5} create /memories/e.md  [email:1]\nP:{c4} create /memories/c.md\n".format(
            **term
        ),
    )
    assert run_pty([*plain, "--no-pager"], env) == (0, oneline)
    # the user's LESS is kept; $PAGER when $MEMVAULT_PAGER is unset
    env = {**term["env"], "PAGER": term["pager"] + " --flag", "LESS": "-S"}
    assert run_pty(["diff", "#3", "#4", "--color=never"], env) == (
        0,
        "pager --flag: LESS=-S LV=-c\n"
        "P:diff --memvault a/memories/c.md b/memories/c.md\nP:--- /dev/null\nP:+++ b/memories/c.md\n"
        "P:@@ -0,0 +1 @@\nP:+c\n",
    )
    # neither: less -FRX (here a stand-in on PATH)
    assert run_pty(["blame", "/memories/a.md", "--color=never"], term["env"]) == (
        0,
        "less -FRX: LESS=FRX LV=-c\nP:{c2}  #2    {long}  1) two\n".format(long=LONG, **term),
    )
    # set to nothing or to cat: no pager
    for value in ("", "cat"):
        assert run_pty(plain, {**term["env"], "MEMVAULT_PAGER": value, "PAGER": term["pager"]}) == (0, oneline)


def test_pager_content_stays_terminal_safe(term: dict[str, Any]) -> None:
    tool = memvault.MemoryTool(term["store"])
    tool.call({"command": "create", "path": "/memories/x.md", "file_text": "a\x1b[2Kb\n"})
    env = {**term["env"], "MEMVAULT_PAGER": term["pager"]}
    assert run_pty(["show", "HEAD:/memories/x.md"], env) == (0, "pager : LESS=FRX LV=-c\nP:a\\x1b[2Kb\n")


def test_a_missing_pager_means_plain_output(term: dict[str, Any]) -> None:
    env = {**term["env"], "MEMVAULT_PAGER": str(Path(term["env"]["MEMVAULT_STORE"]) / "no-such-pager")}
    assert run_pty(["log", "-1", "--oneline", "--color=never"], env) == (
        0,
        "{c5} create /memories/e.md  [email:1]\n".format(**term),
    )
    env = {**term["env"], "MEMVAULT_PAGER": "'unbalanced"}
    assert run_pty(["log", "-1", "--oneline", "--color=never"], env) == (  # unbalanced quotes: no pager
        0,
        "{c5} create /memories/e.md  [email:1]\n".format(**term),
    )


def test_quitting_the_pager_early_is_not_an_error(term: dict[str, Any]) -> None:
    tool = memvault.MemoryTool(term["store"])
    for n in range(3):  # 3 x 80 kB of patch: more than a pipe holds, so writing hits the closed pipe
        text = "".join(f"line {i}\n" for i in range(8000))
        tool.call({"command": "create", "path": f"/memories/big{n}.md", "file_text": text})
    env = {**term["env"], "MEMVAULT_PAGER": term["quitter"]}
    assert run_pty(["diff", "#5", "HEAD", "--color=never"], env) == (
        0,
        "P:diff --memvault a/memories/big0.md b/memories/big0.md\n",
    )


def test_no_pager_when_stdout_is_not_a_terminal(term: dict[str, Any]) -> None:
    env = {**term["env"], "MEMVAULT_PAGER": term["pager"]}
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", MAIN, "log", "-1", "--oneline"], env=env, capture_output=True, text=True, timeout=15
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "{c5} create /memories/e.md  [email:1]\n".format(**term),
        "",
    )


def test_colour_on_a_terminal(term: dict[str, Any]) -> None:
    env = {**term["env"], "MEMVAULT_PAGER": "cat"}
    argv = ["log", "-1", "--oneline"]
    coloured = "\x1b[33m{c5}\x1b[0m create /memories/e.md  \x1b[31m[email:1]\x1b[0m\n".format(**term)
    plain = "{c5} create /memories/e.md  [email:1]\n".format(**term)
    assert run_pty(argv, env) == (0, coloured)  # auto
    assert run_pty([*argv, "--color=never"], env) == (0, plain)
    assert run_pty(argv, {**env, "TERM": "dumb"}) == (0, plain)
    assert run_pty(argv, {**env, "NO_COLOR": "1"}) == (0, plain)
    assert run_pty([*argv, "--color=always"], {**env, "TERM": "dumb"}) == (0, coloured)
    # through the pager, colour is decided for the terminal behind it
    assert run_pty(argv, {**env, "MEMVAULT_PAGER": term["pager"]}) == (0, "pager : LESS=FRX LV=-c\nP:" + coloured)
    # not a terminal: --color alone means always
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", MAIN, *argv, "--color"], env=env, capture_output=True, text=True, timeout=15
    )
    assert (done.returncode, done.stdout) == (0, coloured)


def test_colour_flags_not_on_a_terminal(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    plain = "{c5} create /memories/e.md  [email:1]\n".format(**ids)
    assert run_cli(capsys, "log", "-1", "--oneline") == plain  # auto: not a terminal
    assert run_cli(capsys, "log", "-1", "--oneline", "--color=always", "--no-color") == plain
    assert run_cli(capsys, "log", "-1", "--oneline", "--no-color", "--color=always") != plain
    assert run_cli(capsys, "diff", "#3", "#4", "--color=always") == (
        "\x1b[1mdiff --memvault a/memories/c.md b/memories/c.md\x1b[0m\n\x1b[1m--- /dev/null\x1b[0m\n"
        "\x1b[1m+++ b/memories/c.md\x1b[0m\n\x1b[36m@@ -0,0 +1 @@\x1b[0m\n\x1b[32m+c\x1b[0m\n"
    )
    assert run_cli(
        capsys, "blame", "/memories/c.md", "--color=always"
    ) == "\x1b[33m{c4}\x1b[0m  #4    claude  1) c\n".format(**ids)
    assert "\x1b[" not in run_cli(capsys, "show", "#4", "--color=never")
    assert run_cli(capsys, "show", "#4", "--color=always").startswith("\x1b[33mcommit {C4}\x1b[0m\n".format(**ids))


def test_color_and_pager_choices() -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    tty: Any = Tty()
    assert color_enabled("auto", tty, {"TERM": "xterm"})
    assert not color_enabled("auto", tty, {"TERM": "dumb"})
    assert not color_enabled("auto", tty, {"TERM": "xterm", "NO_COLOR": "x"})
    assert color_enabled("auto", tty, {"TERM": "xterm", "NO_COLOR": ""})  # empty counts as unset
    assert not color_enabled("auto", SimpleNamespace(isatty=lambda: False), {"TERM": "xterm"})  # type: ignore[arg-type]
    assert not color_enabled("never", tty, {"TERM": "xterm"})
    assert color_enabled("always", tty, {"TERM": "dumb", "NO_COLOR": "x"})
    assert pager_command({}) == ["less", "-FRX"]
    assert pager_command({"PAGER": "more"}) == ["more"]
    assert pager_command({"PAGER": "more", "MEMVAULT_PAGER": "less -S"}) == ["less", "-S"]
    assert pager_command({"PAGER": "more", "MEMVAULT_PAGER": ""}) is None
    assert pager_command({"PAGER": " cat "}) is None
    assert pager_command({"PAGER": "'a b' -x"}) == ["a b", "-x"]


def test_help_lists_the_placeholders(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "2000")  # one line per paragraph
    assert main(["log", "--help"]) == 0
    out = capsys.readouterr().out
    assert (
        "--format placeholders: %H commit id, %h short id, %s subject (command and paths), %an actor, %ad date "
        "(--date style), %ar relative date, %aI ISO 8601 date, %at Unix time, %(seq), %(actor), %(session), "
        "%(command), %(paths), %(branch), %(findings), %n newline, %% a %, "
        "%C(red|green|yellow|blue|magenta|cyan|bold|dim|reset) colour."
    ) in out
    assert "usage: memvault log [options] [REV | A..B] [[--] PATH]\n" in out


def test_invalid_choices(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "log", "--color=sometimes", status=2) == (
        "memvault: argument --color: invalid choice: 'sometimes' (choose from 'auto', 'always', 'never')\n"
    )
    assert run_cli(capsys, "log", "--date=unix", status=2) == (
        "memvault: argument --date: invalid choice: 'unix' (choose from 'local', 'iso', 'relative')\n"
    )
    with pytest.raises(InvalidInputError):
        history.split_range("#1...#2")
