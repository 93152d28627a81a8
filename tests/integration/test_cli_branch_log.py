"""The read commands with ``--branch``: ``log``, ``show``, ``diff``, ``cat`` (and ``blame``, ``ls``)
read a dream branch's history (its commits, then main's before its fork point) instead of main's.

Every human-readable output is asserted exactly; only commit ids and local times are filled in,
from ``memvault.history.log`` (never from the formatter under test).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault import history
from memvault.cli import main
from memvault.protocol.commands import run_command

ID = "0123456789abcdef"
NAME = f"dream/{ID}"


@pytest.fixture
def ids(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """main: #0 init, #1 creates a.md, #2 (after the fork) creates c.md; the branch: #2 its fork
    commit on main's #1, #3 an edit of a.md. ``C1``/``c1``/``t1``: main's commits (full id, short
    id, local time); ``B2``/``b2``/``u2``: the branch's."""
    path = tmp_path / "store"
    store = make_store(path)
    tool = memvault.MemoryTool(store, actor="claude", session="s-1")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\nbeta\n"})
    branch = store.branch(NAME)
    branch.create(actor="dream", session="night-1", extra={"model": "claude-test"})
    edit = {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "ALPHA"}
    assert run_command(branch, edit, actor="dream", session="night-1") == (
        "The memory file has been edited. Snippet of /memories/a.md with line numbers:\n     1\tALPHA\n     2\tbeta"
    )
    tool.call({"command": "create", "path": "/memories/c.md", "file_text": "charlie\n"})
    out: dict[str, Any] = {"store": store, "branch": branch}
    for letter, short, when, entries in (("C", "c", "t", history.log(store)), ("B", "b", "u", history.log(branch))):
        for e in entries:
            if (e.branch == NAME) == (letter == "B"):
                out[f"{letter}{e.seq}"] = e.commit_id
                out[f"{short}{e.seq}"] = e.commit_id[:10]
                out[f"{when}{e.seq}"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.time))
    assert sorted(k for k in out if k[0] in "BC" and k[1:].isdigit()) == ["B2", "B3", "C0", "C1", "C2"]
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(path))
    monkeypatch.setenv("NO_COLOR", "1")
    yield out
    store.close()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> str:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    if status == 0:
        assert captured.err == ""
        return captured.out
    assert captured.out == ""
    return captured.err


def expect(template: str, ids: dict[str, Any]) -> str:
    return template.format(**ids)


def utc(t: float) -> str:
    """How ``--json`` writes a time: ISO 8601, UTC, to the second, with its offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))


BRANCH_LOG = """\
{b3}  #3    {u3}  dream      str_replace /memories/a.md  [dream/0123456789abcdef]
{b2}  #2    {u2}  dream      fork        [dream/0123456789abcdef]
{c1}  #1    {t1}  claude     create      /memories/a.md
{c0}  #0    {t0}  memvault   init
"""

MAIN_LOG = """\
{c2}  #2    {t2}  claude     create      /memories/c.md
{c1}  #1    {t1}  claude     create      /memories/a.md
{c0}  #0    {t0}  memvault   init
"""

PATCH = """\
diff --memvault a/memories/a.md b/memories/a.md
--- a/memories/a.md
+++ b/memories/a.md
@@ -1,2 +1,2 @@
-alpha
+ALPHA
 beta
"""


def test_log_of_a_branch(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "log", "--branch", NAME) == expect(BRANCH_LOG, ids)
    assert run_cli(capsys, "log", "--branch", ID) == expect(BRANCH_LOG, ids)  # the bare id
    assert run_cli(capsys, "log", "--branch", ID.upper()) == expect(BRANCH_LOG, ids)
    assert run_cli(capsys, "log") == expect(MAIN_LOG, ids)  # main's history does not show the branch
    # revisions and filters work on the branch's history
    lines = expect(BRANCH_LOG, ids).splitlines(keepends=True)
    assert run_cli(capsys, "log", "--branch", ID, "--rev", "#2", "-n", "1") == lines[1]
    assert run_cli(capsys, "log", "--branch", ID, "--actor", "dream") == lines[0] + lines[1]
    # a range on the branch: its own commits after main's #1; a positional revision resolves there too
    assert run_cli(capsys, "log", "--branch", ID, "#1..") == lines[0] + lines[1]
    assert run_cli(capsys, "log", "--branch", ID, "#2", "-1") == lines[1]
    assert run_cli(capsys, "log", "--branch", ID, "--oneline", "HEAD~1..") == expect(
        "{b3} str_replace /memories/a.md  [dream/0123456789abcdef]\n", ids
    )
    assert run_cli(capsys, "log", "--branch", ID, "--stat", "-n", "1") == expect(
        BRANCH_LOG.splitlines()[0] + "\n    modified  /memories/a.md  +1 -1\n", ids
    )


def test_log_of_a_branch_as_json(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    entries = json.loads(run_cli(capsys, "log", "--branch", NAME, "--json"))
    assert entries == [{**e.to_json(), "time": utc(e.time), "timestamp": e.time} for e in history.log(ids["branch"])]
    times = [e.time for e in history.log(ids["branch"])]
    assert entries[:3] == [
        {
            "commit": ids["B3"], "seq": 3, "time": utc(times[0]), "timestamp": times[0], "actor": "dream", "session": "night-1",
            "command": "str_replace", "paths": ["/memories/a.md"], "findings": {}, "branch": NAME,
            "changes": [{"op": "modified", "path": "/memories/a.md", "kind": "file"}],
        },
        {
            "commit": ids["B2"], "seq": 2, "time": utc(times[1]), "timestamp": times[1], "actor": "dream", "session": "night-1",
            "command": "fork", "paths": [], "findings": {}, "branch": NAME,
            "extra": {"fork": ids["C1"], "keyring": "recorded", "model": "claude-test"}, "changes": [],
        },
        {
            "commit": ids["C1"], "seq": 1, "time": utc(times[2]), "timestamp": times[2], "actor": "claude", "session": "s-1",
            "command": "create", "paths": ["/memories/a.md"], "findings": {},
            "changes": [{"op": "created", "path": "/memories/a.md", "kind": "file"}],
        },
    ]  # fmt: skip
    assert [e["commit"] for e in json.loads(run_cli(capsys, "log", "--json"))] == [ids["C2"], ids["C1"], ids["C0"]]


def test_show_of_a_branch(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    header = expect(
        """\
commit {B3}
Seq:      #3
Date:     {u3}
Actor:    dream
Session:  night-1
Command:  str_replace /memories/a.md
Branch:   dream/0123456789abcdef

    modified  /memories/a.md  +1 -1

""",
        ids,
    )
    assert run_cli(capsys, "show", "--branch", ID) == header + PATCH
    # "#2" on the branch is its fork commit, not main's #2
    assert run_cli(capsys, "show", "--branch", NAME, "#2") == expect(
        """\
commit {B2}
Seq:      #2
Date:     {u2}
Actor:    dream
Session:  night-1
Command:  fork
Branch:   dream/0123456789abcdef
Extra:    fork={C1} keyring=recorded model=claude-test
""",
        ids,
    )
    assert run_cli(capsys, "show", "#2").startswith(expect("commit {C2}\nSeq:      #2\n", ids))
    assert run_cli(capsys, "show", "--branch", ID, "HEAD:/memories/a.md") == "ALPHA\nbeta\n"
    shown = json.loads(run_cli(capsys, "show", "--branch", ID, "--json", "HEAD~1"))
    [fork] = history.log(ids["branch"], start="HEAD~1", limit=1)
    assert shown == {**fork.to_json(), "time": utc(fork.time), "timestamp": fork.time, "stat": [], "patch": ""}
    assert shown["branch"] == NAME and shown["extra"] == {
        "fork": ids["C1"],
        "keyring": "recorded",
        "model": "claude-test",
    }


def test_diff_of_a_branch(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "diff", "--branch", ID) == PATCH  # the branch's head against its parent
    assert run_cli(capsys, "diff", "--branch", ID, "#1") == PATCH  # the fork point against the branch's head
    assert run_cli(capsys, "diff", "--branch", ID, "#1", "#2") == ""  # the fork commit changes nothing
    assert run_cli(capsys, "diff", "--branch", ID, "HEAD", "#1") == PATCH.replace("-alpha\n+ALPHA", "-ALPHA\n+alpha")
    assert run_cli(capsys, "diff") == (
        "diff --memvault a/memories/c.md b/memories/c.md\n--- /dev/null\n+++ b/memories/c.md\n@@ -0,0 +1 @@\n+charlie\n"
    )
    assert json.loads(run_cli(capsys, "diff", "--branch", NAME, "--json", "#1", "--", "/memories/a.md")) == {
        "old": ids["C1"],
        "new": ids["B3"],
        "path": "/memories/a.md",
        "files": [
            {
                "path": "/memories/a.md", "old_path": "/memories/a.md", "status": "modified", "binary": False,
                "added": 1, "removed": 1, "patch": PATCH,
            }
        ],
    }  # fmt: skip


def test_cat_blame_ls_of_a_branch(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "cat", "--branch", ID, "/memories/a.md") == "ALPHA\nbeta\n"
    assert run_cli(capsys, "cat", "--branch", ID, "/memories/a.md", "--rev", "#2") == "alpha\nbeta\n"
    assert run_cli(capsys, "cat", "/memories/a.md") == "alpha\nbeta\n"  # main still has the old text
    assert run_cli(capsys, "blame", "--branch", NAME, "/memories/a.md") == expect(
        "{b3}  #3    dream   1) ALPHA\n{c1}  #1    claude  2) beta\n", ids
    )
    assert run_cli(capsys, "ls", "--branch", ID) == "file  11  /memories/a.md\n"  # no c.md: made after the fork
    assert run_cli(capsys, "ls") == "file  11  /memories/a.md\nfile   8  /memories/c.md\n"


def test_branch_errors(ids: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    bad = "memvault: 'dream/xyz' is not a dream branch; give dream/ and 16 hex digits, or the 16 hex digits alone.\n"
    assert run_cli(capsys, "log", "--branch", "dream/xyz", status=2) == bad
    assert run_cli(capsys, "show", "--branch", "main", status=2) == bad.replace("'dream/xyz'", "'main'")
    assert run_cli(capsys, "diff", "--branch", "0123", status=2) == bad.replace("'dream/xyz'", "'0123'")
    assert run_cli(capsys, "cat", "--branch", "", "/memories/a.md", status=2) == bad.replace("'dream/xyz'", "''")
    missing = "memvault: There is no dream branch dream/00000000000000ff in this store.\n"
    assert run_cli(capsys, "log", "--branch", "00000000000000ff", status=2) == missing
    assert run_cli(capsys, "cat", "--branch", "dream/00000000000000ff", "/memories/a.md", status=2) == missing
    assert json.loads(run_cli(capsys, "log", "--json", "--branch", "00000000000000FF", status=2)) == {
        "error": "There is no dream branch dream/00000000000000ff in this store.",
        "exit_status": 2,
        "kind": "USAGE",
    }
    # revisions are resolved on the branch: main's #2 is not on it
    assert run_cli(capsys, "show", "--branch", ID, ids["C2"][:10], status=2) == (
        f"memvault: Unknown revision '{ids['C2'][:10]}'.\n"
    )
    # the file made on main after the fork is not on the branch
    assert run_cli(capsys, "cat", "--branch", ID, "/memories/c.md", status=4) == (
        "memvault: The file /memories/c.md does not exist at that revision.\n"
    )


def test_branch_tag_colour_only_on_a_terminal(
    ids: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = run_cli(capsys, "log", "--branch", ID)
    colored = run_cli(capsys, "log", "--branch", ID, "--color")
    assert colored.splitlines()[1] == expect(
        "\x1b[33m{b2}\x1b[0m  #2    {u2}  dream      fork        \x1b[36m[dream/0123456789abcdef]\x1b[0m", ids
    )
    assert re.sub(r"\x1b\[\d+m", "", colored) == plain
