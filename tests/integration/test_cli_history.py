"""End to end: a scripted agent session through MemoryTool, then the CLI read commands.

Every human-readable output is asserted exactly; only commit ids and local times are filled in,
from ``memvault.history.log`` (never from the formatter under test). Commit times come from a
fake clock (12 hours apart, ending about 6 days ago) so that relative ``--since`` is stable.
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
import memvault.store
from conftest import PASSPHRASE, make_store
from memvault import history
from memvault.cli import main
from memvault.paths import parse_path

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
HOUR = 3600


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The store after the scripted session, and ``c0..c9`` (short ids), ``C0..C9`` (full), ``t0..t9``."""
    start = int(time.time()) - 10 * 24 * HOUR - HOUR
    ticks = iter(range(100))
    monkeypatch.setattr(memvault.store.transaction, "commit_time", lambda: float(start + 12 * HOUR * next(ticks)))
    path = tmp_path / "store"
    store = make_store(path)  # 0: init

    def run(actor: str, sess: str, *commands: dict[str, Any]) -> None:
        tool = memvault.MemoryTool(store, actor=actor, session=sess)
        for command in commands:
            result = tool.call(command)
            assert isinstance(result, str) and not result.startswith("Error"), result

    run(
        "claude",
        "s-1",
        {"command": "create", "path": "/memories/notes/acme.md", "file_text": "# Acme Corp\n- prefers email\n"},
        {"command": "create", "path": "/memories/notes/todo.md", "file_text": "call back Acme\n"},
        {
            "command": "str_replace",
            "path": "/memories/notes/acme.md",
            "old_str": "prefers email",
            "new_str": "prefers email follow-ups",
        },
    )
    run(
        "helper",
        "s-2",
        {"command": "insert", "path": "/memories/notes/acme.md", "insert_line": 1, "insert_text": "- contact: Dana\n"},
        {"command": "rename", "old_path": "/memories/notes", "new_path": "/memories/customers"},
        {"command": "delete", "path": "/memories/customers/todo.md"},
    )
    run(
        "operator",
        "review",
        {"command": "create", "path": "/memories/customers/todo.md", "file_text": "close ticket\n"},
    )
    store.put_file("/memories/customers/logo.png", PNG, actor="operator", session="review")  # 8: binary
    dana = parse_path("/memories/customers/dana.md")
    store.transact(  # 9: a write the scrubber reported on
        lambda txn: txn.write_file(dana, b"Dana, [redacted email]\n"),
        command="create",
        paths=(dana.text,),
        actor="claude",
        session="s-3",
        findings={"email": 1},
    )
    ids: dict[str, Any] = {"store": store, "start": start}
    for e in history.log(store):
        ids[f"C{e.seq}"] = e.commit_id
        ids[f"c{e.seq}"] = e.commit_id[:10]
        ids[f"t{e.seq}"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.time))
    assert len([k for k in ids if k.startswith("C")]) == 10
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(path))
    monkeypatch.setenv("NO_COLOR", "1")
    yield ids
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


def as_cli_json(row: dict[str, Any]) -> dict[str, Any]:
    """A library ``to_json()`` row as the CLI prints it: ``time`` in ISO 8601, the number as ``timestamp``."""
    return {**row, "time": utc(row["time"]), "timestamp": row["time"]}


LOG = """\
{c9}  #9    {t9}  claude     create      /memories/customers/dana.md  [email:1]
{c8}  #8    {t8}  operator   put         /memories/customers/logo.png
{c7}  #7    {t7}  operator   create      /memories/customers/todo.md
{c6}  #6    {t6}  helper     delete      /memories/customers/todo.md
{c5}  #5    {t5}  helper     rename      /memories/notes -> /memories/customers
{c4}  #4    {t4}  helper     insert      /memories/notes/acme.md
{c3}  #3    {t3}  claude     str_replace /memories/notes/acme.md
{c2}  #2    {t2}  claude     create      /memories/notes/todo.md
{c1}  #1    {t1}  claude     create      /memories/notes/acme.md
{c0}  #0    {t0}  memvault   init
"""


def lines(*seqs: int) -> str:
    """The lines of LOG for these sequence numbers, in the given order."""
    by_seq = {9 - i: line for i, line in enumerate(LOG.splitlines(keepends=True))}
    return "".join(by_seq[s] for s in seqs)


def test_log_and_filters(session: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "log") == expect(LOG, session)
    assert run_cli(capsys, "log", "-n", "2", "--skip", "1") == expect(lines(8, 7), session)
    assert run_cli(capsys, "log", "--actor", "helper") == expect(lines(6, 5, 4), session)
    assert run_cli(capsys, "log", "--session", "s-1", "-n", "2") == expect(lines(3, 2), session)
    assert run_cli(capsys, "log", "--op", "deleted") == expect(lines(6), session)
    assert run_cli(capsys, "log", "--op", "deleted", "--op", "renamed") == expect(lines(6, 5), session)
    assert run_cli(capsys, "log", "--rev", "HEAD~3", "-n", "1") == expect(lines(6), session)
    # paths: without --follow the history stops at the rename; with it, it continues under the old name
    assert run_cli(capsys, "log", "/memories/customers/todo.md") == expect(lines(7, 6, 5), session)
    assert run_cli(capsys, "log", "--follow", "--", "/memories/customers/todo.md") == expect(lines(7, 6, 5, 2), session)
    assert run_cli(capsys, "log", "--follow", "/memories/customers/acme.md") == expect(lines(5, 4, 3, 1), session)
    assert run_cli(capsys, "log", "--", "/memories/notes") == expect(lines(5, 4, 3, 2, 1), session)
    # time windows: ages relative to now (commits are 12 h apart, #9 about 6 days ago), and ISO 8601
    assert run_cli(capsys, "log", "--since", "8d") == expect(lines(9, 8, 7, 6, 5), session)
    assert run_cli(capsys, "log", "--since", "1w", "--until", "140h") == expect(lines(8, 7), session)
    assert run_cli(capsys, "log", "--until", "9d") == expect(lines(2, 1, 0), session)
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(session["start"] + 12 * HOUR * 7))
    assert run_cli(capsys, "log", "--since", iso) == expect(lines(9, 8, 7), session)
    assert run_cli(capsys, "log", "--until", iso, "-n", "1") == expect(lines(7), session)
    assert run_cli(capsys, "log", "--actor", "nobody") == ""

    entries = json.loads(run_cli(capsys, "log", "--json", "--actor", "helper"))
    assert entries == [as_cli_json(e.to_json()) for e in history.log(session["store"], actor="helper")]
    assert list(entries[1])[:4] == ["commit", "seq", "time", "timestamp"]
    assert entries[1] == {
        "commit": session["C5"],
        "seq": 5,
        "time": utc(session["start"] + 12 * HOUR * 5),
        "timestamp": float(session["start"] + 12 * HOUR * 5),
        "actor": "helper",
        "session": "s-2",
        "command": "rename",
        "paths": ["/memories/notes", "/memories/customers"],
        "findings": {},
        "changes": [
            {"op": "renamed", "path": "/memories/customers", "kind": "dir", "old_path": "/memories/notes"},
            {
                "op": "renamed",
                "path": "/memories/customers/acme.md",
                "kind": "file",
                "old_path": "/memories/notes/acme.md",
            },
            {
                "op": "renamed",
                "path": "/memories/customers/todo.md",
                "kind": "file",
                "old_path": "/memories/notes/todo.md",
            },
        ],
    }


def test_log_stat_and_patch(session: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "log", "--stat", "-n", "5") == expect(
        """\
{c9}  #9    {t9}  claude     create      /memories/customers/dana.md  [email:1]
    created   /memories/customers/dana.md  +1 -0

{c8}  #8    {t8}  operator   put         /memories/customers/logo.png
    created   /memories/customers/logo.png  binary

{c7}  #7    {t7}  operator   create      /memories/customers/todo.md
    created   /memories/customers/todo.md  +1 -0

{c6}  #6    {t6}  helper     delete      /memories/customers/todo.md
    deleted   /memories/customers/todo.md  +0 -1

{c5}  #5    {t5}  helper     rename      /memories/notes -> /memories/customers
    renamed   /memories/notes/ -> /memories/customers/
    renamed   /memories/notes/acme.md -> /memories/customers/acme.md  +0 -0
    renamed   /memories/notes/todo.md -> /memories/customers/todo.md  +0 -0
""",
        session,
    )
    assert run_cli(capsys, "log", "--stat", "--skip", "7") == expect(
        """\
{c2}  #2    {t2}  claude     create      /memories/notes/todo.md
    created   /memories/notes/todo.md  +1 -0

{c1}  #1    {t1}  claude     create      /memories/notes/acme.md
    created   /memories/notes/
    created   /memories/notes/acme.md  +2 -0

{c0}  #0    {t0}  memvault   init
""",
        session,
    )
    assert run_cli(capsys, "log", "-p", "--skip", "3", "-n", "4") == expect(
        """\
{c6}  #6    {t6}  helper     delete      /memories/customers/todo.md
diff --memvault a/memories/customers/todo.md b/memories/customers/todo.md
--- a/memories/customers/todo.md
+++ /dev/null
@@ -1 +0,0 @@
-call back Acme

{c5}  #5    {t5}  helper     rename      /memories/notes -> /memories/customers
diff --memvault a/memories/notes/acme.md b/memories/customers/acme.md
rename from /memories/notes/acme.md
rename to /memories/customers/acme.md
diff --memvault a/memories/notes/todo.md b/memories/customers/todo.md
rename from /memories/notes/todo.md
rename to /memories/customers/todo.md

{c4}  #4    {t4}  helper     insert      /memories/notes/acme.md
diff --memvault a/memories/notes/acme.md b/memories/notes/acme.md
--- a/memories/notes/acme.md
+++ b/memories/notes/acme.md
@@ -1,2 +1,3 @@
 # Acme Corp
+- contact: Dana
 - prefers email follow-ups

{c3}  #3    {t3}  claude     str_replace /memories/notes/acme.md
diff --memvault a/memories/notes/acme.md b/memories/notes/acme.md
--- a/memories/notes/acme.md
+++ b/memories/notes/acme.md
@@ -1,2 +1,2 @@
 # Acme Corp
-- prefers email
+- prefers email follow-ups
""",
        session,
    )
    assert run_cli(capsys, "log", "-p", "-n", "1", "--skip", "1") == expect(
        """\
{c8}  #8    {t8}  operator   put         /memories/customers/logo.png
diff --memvault a/memories/customers/logo.png b/memories/customers/logo.png
Binary files /dev/null and b/memories/customers/logo.png differ
""",
        session,
    )
    [entry] = json.loads(run_cli(capsys, "log", "--json", "--stat", "-p", "-n", "1", "--skip", "5"))
    assert entry == {
        **as_cli_json(history.log(session["store"], limit=1, offset=5)[0].to_json()),
        "stat": [{"op": "modified", "path": "/memories/notes/acme.md", "kind": "file", "added": 1, "removed": 0}],
        "patch": (
            "diff --memvault a/memories/notes/acme.md b/memories/notes/acme.md\n"
            "--- a/memories/notes/acme.md\n+++ b/memories/notes/acme.md\n"
            "@@ -1,2 +1,3 @@\n # Acme Corp\n+- contact: Dana\n - prefers email follow-ups\n"
        ),
    }
    [entry] = json.loads(run_cli(capsys, "log", "--json", "--stat", "-n", "1", "--skip", "1"))
    assert entry["stat"] == [
        {"op": "created", "path": "/memories/customers/logo.png", "kind": "file", "added": None, "removed": None}
    ]
    assert "patch" not in entry


def test_show(session: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "show", "#3") == expect(
        """\
commit {C3}
Seq:      #3
Date:     {t3}
Actor:    claude
Session:  s-1
Command:  str_replace /memories/notes/acme.md

    modified  /memories/notes/acme.md  +1 -1

diff --memvault a/memories/notes/acme.md b/memories/notes/acme.md
--- a/memories/notes/acme.md
+++ b/memories/notes/acme.md
@@ -1,2 +1,2 @@
 # Acme Corp
-- prefers email
+- prefers email follow-ups
""",
        session,
    )
    assert run_cli(capsys, "show") == expect(
        """\
commit {C9}
Seq:      #9
Date:     {t9}
Actor:    claude
Session:  s-3
Command:  create /memories/customers/dana.md
Findings: email:1

    created   /memories/customers/dana.md  +1 -0

diff --memvault a/memories/customers/dana.md b/memories/customers/dana.md
--- /dev/null
+++ b/memories/customers/dana.md
@@ -0,0 +1 @@
+Dana, [redacted email]
""",
        session,
    )
    # an abbreviated id, HEAD~N and @{time} name the same commits as #seq
    assert run_cli(capsys, "show", session["C5"][:7]) == run_cli(capsys, "show", "HEAD~4")
    assert run_cli(capsys, "show", "HEAD~4").startswith(expect("commit {C5}\nSeq:      #5\n", session))
    when = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(session["start"] + 12 * HOUR * 5 + 60))
    assert run_cli(capsys, "show", f"@{{{when}}}") == run_cli(capsys, "show", "#5")
    assert run_cli(capsys, "show", "#0") == expect(
        "commit {C0}\nSeq:      #0\nDate:     {t0}\nActor:    memvault\nSession:  -\nCommand:  init\n", session
    )

    # REV:PATH is the file at that revision (a relative path is taken from the root, as in git)
    assert run_cli(capsys, "show", "#3:/memories/notes/acme.md") == "# Acme Corp\n- prefers email follow-ups\n"
    assert run_cli(capsys, "show", "HEAD~8:memories/notes/acme.md") == "# Acme Corp\n- prefers email\n"
    assert run_cli(capsys, "show", f"@{{{when}}}:/memories/customers/todo.md") == "call back Acme\n"
    assert json.loads(run_cli(capsys, "show", "--json", "#7:/memories/customers/todo.md")) == {
        "commit": session["C7"],
        "path": "/memories/customers/todo.md",
        "encoding": "utf-8",
        "content": "close ticket\n",
    }
    shown = json.loads(run_cli(capsys, "show", "--json", "#6"))
    assert shown == {
        **as_cli_json(history.log(session["store"], start="#6", limit=1)[0].to_json()),
        "stat": [{"op": "deleted", "path": "/memories/customers/todo.md", "kind": "file", "added": 0, "removed": 1}],
        "patch": (
            "diff --memvault a/memories/customers/todo.md b/memories/customers/todo.md\n"
            "--- a/memories/customers/todo.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-call back Acme\n"
        ),
    }


def test_diff(session: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    last = """\
diff --memvault a/memories/customers/dana.md b/memories/customers/dana.md
--- /dev/null
+++ b/memories/customers/dana.md
@@ -0,0 +1 @@
+Dana, [redacted email]
"""
    assert run_cli(capsys, "diff") == last  # no revision: what the last commit did
    assert run_cli(capsys, "diff", "HEAD~1") == last  # one revision: against HEAD
    assert run_cli(capsys, "diff", "HEAD~1", "HEAD") == last
    assert run_cli(capsys, "diff", "HEAD~1..HEAD") == last
    assert run_cli(capsys, "diff", "#2", "#7") == (
        """\
diff --memvault a/memories/notes/acme.md b/memories/customers/acme.md
rename from /memories/notes/acme.md
rename to /memories/customers/acme.md
--- a/memories/notes/acme.md
+++ b/memories/customers/acme.md
@@ -1,2 +1,3 @@
 # Acme Corp
-- prefers email
+- contact: Dana
+- prefers email follow-ups
"""
        # todo.md is not paired with its old path: it was deleted and created anew (a new lineage)
        """\
diff --memvault a/memories/customers/todo.md b/memories/customers/todo.md
--- /dev/null
+++ b/memories/customers/todo.md
@@ -0,0 +1 @@
+close ticket
diff --memvault a/memories/notes/todo.md b/memories/notes/todo.md
--- a/memories/notes/todo.md
+++ /dev/null
@@ -1 +0,0 @@
-call back Acme
"""
    )
    assert run_cli(capsys, "diff", "#1", "#4", "--", "/memories/notes/acme.md") == (
        """\
diff --memvault a/memories/notes/acme.md b/memories/notes/acme.md
--- a/memories/notes/acme.md
+++ b/memories/notes/acme.md
@@ -1,2 +1,3 @@
 # Acme Corp
-- prefers email
+- contact: Dana
+- prefers email follow-ups
"""
    )
    assert run_cli(capsys, "diff", "#7", "#7") == ""
    out = json.loads(run_cli(capsys, "diff", "--json", "#5", "#8"))
    assert out == {
        "old": session["C5"],
        "new": session["C8"],
        "path": None,
        "files": [
            {
                "path": "/memories/customers/logo.png",
                "old_path": None,
                "status": "created",
                "binary": True,
                "added": None,
                "removed": None,
                "patch": (
                    "diff --memvault a/memories/customers/logo.png b/memories/customers/logo.png\n"
                    "Binary files /dev/null and b/memories/customers/logo.png differ\n"
                ),
            },
            {
                "path": "/memories/customers/todo.md",
                "old_path": "/memories/customers/todo.md",
                "status": "modified",
                "binary": False,
                "added": 1,
                "removed": 1,
                "patch": (
                    "diff --memvault a/memories/customers/todo.md b/memories/customers/todo.md\n"
                    "--- a/memories/customers/todo.md\n+++ b/memories/customers/todo.md\n"
                    "@@ -1 +1 @@\n-call back Acme\n+close ticket\n"
                ),
            },
        ],
    }


def test_blame_cat_ls(session: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "blame", "/memories/customers/acme.md") == expect(
        """\
{c1}  #1    claude  1) # Acme Corp
{c4}  #4    helper  2) - contact: Dana
{c3}  #3    claude  3) - prefers email follow-ups
""",
        session,
    )
    assert run_cli(capsys, "blame", "/memories/notes/acme.md", "--rev", "#3") == expect(
        "{c1}  #1    claude  1) # Acme Corp\n{c3}  #3    claude  2) - prefers email follow-ups\n", session
    )
    assert json.loads(run_cli(capsys, "blame", "--json", "/memories/customers/todo.md")) == [
        {
            "line": 1,
            "text": "close ticket",
            "commit": session["C7"],
            "seq": 7,
            "time": utc(session["start"] + 12 * HOUR * 7),
            "timestamp": float(session["start"] + 12 * HOUR * 7),
            "actor": "operator",
        }
    ]

    assert run_cli(capsys, "cat", "/memories/customers/todo.md") == "close ticket\n"
    assert run_cli(capsys, "cat", "/memories/notes/todo.md", "--rev", "#5~1") == "call back Acme\n"
    assert json.loads(run_cli(capsys, "cat", "--json", "/memories/customers/logo.png")) == {
        "commit": session["C9"],
        "path": "/memories/customers/logo.png",
        "encoding": "base64",
        "content": "iVBORw0KGgoA/w==",
    }

    assert run_cli(capsys, "ls") == (
        """\
dir    -  /memories/customers
file  55  /memories/customers/acme.md
file  23  /memories/customers/dana.md
file  10  /memories/customers/logo.png
file  13  /memories/customers/todo.md
"""
    )
    assert run_cli(capsys, "ls", "--rev", "#4") == (
        """\
dir    -  /memories/notes
file  55  /memories/notes/acme.md
file  15  /memories/notes/todo.md
"""
    )
    assert run_cli(capsys, "ls", "--rev", "#0") == ""
    assert run_cli(capsys, "ls", "--rev", "HEAD~4", "/memories/customers/todo.md") == (
        "file  15  /memories/customers/todo.md\n"
    )
    assert json.loads(run_cli(capsys, "ls", "--json", "--rev", "#2", "/memories/notes")) == [
        {**e.to_json(), "mtime": utc(e.mtime), "mtime_timestamp": e.mtime}
        for e in history.tree_at(session["store"], "#2")
    ]
    assert [e["path"] for e in json.loads(run_cli(capsys, "ls", "--json", "--rev", "#2"))] == [
        "/memories/notes",
        "/memories/notes/acme.md",
        "/memories/notes/todo.md",
    ]


def test_cat_binary_is_raw_bytes(session: dict[str, Any], capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["cat", "/memories/customers/logo.png"]) == 0
    assert capsysbinary.readouterr().out == PNG
    assert main(["show", "HEAD:/memories/customers/logo.png"]) == 0
    assert capsysbinary.readouterr().out == PNG


def test_errors(session: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    # a bad revision is a usage error (2), a path missing at that revision is refused (4): one line, no traceback
    assert run_cli(capsys, "show", "nope", status=2) == "memvault: Unknown revision 'nope'.\n"
    assert run_cli(capsys, "log", "--rev", "HEAD~10", status=2) == (
        "memvault: Revision 'HEAD~10' goes back beyond the first commit.\n"
    )
    assert run_cli(capsys, "diff", "#42", status=2) == "memvault: There is no commit #42.\n"
    assert run_cli(capsys, "cat", "/memories/a.md", "--rev", "@{2000-01-01}", status=2) == (
        "memvault: No commit was made at or before 2000-01-01.\n"
    )
    assert run_cli(capsys, "blame", "/memories/x.md", "--rev", "abcz", status=2) == (
        "memvault: Unknown revision 'abcz'.\n"
    )
    assert run_cli(capsys, "cat", "/memories/customers/acme.md", "--rev", "#3", status=4) == (
        "memvault: The file /memories/customers/acme.md does not exist at that revision.\n"
    )
    assert run_cli(capsys, "show", "#3:/memories/customers/acme.md", status=4) == (
        "memvault: The file /memories/customers/acme.md does not exist at that revision.\n"
    )
    assert run_cli(capsys, "blame", "/memories/customers/todo.md", "--rev", "#6", status=4) == (
        "memvault: The file /memories/customers/todo.md does not exist at that revision.\n"
    )
    assert run_cli(capsys, "ls", "--rev", "#1", "/memories/customers", status=4) == (
        "memvault: The path /memories/customers does not exist at that revision.\n"
    )
    assert json.loads(run_cli(capsys, "show", "--json", "nope", status=2)) == {
        "error": "Unknown revision 'nope'.",
        "exit_status": 2,
        "kind": "USAGE",
    }
    assert run_cli(capsys, "log", "--since", "yesterday", status=2) == (
        "memvault: 'yesterday' is not a time; use ISO 8601 (2026-11-01, 2026-11-01T14:30:00Z) "
        "or an age such as 30m, 2h, 3d, 1w.\n"
    )
    assert run_cli(capsys, "log", "--follow", status=2) == (
        "memvault: --follow needs a PATH (memvault log --follow -- PATH).\n"
    )
    assert run_cli(capsys, "diff", "#1", "#2", "#3", status=2) == "memvault: diff takes at most two revisions.\n"
    assert run_cli(capsys, "log", "-n", "-1", status=2) == "memvault: argument -n: invalid count: '-1'\n"
    assert run_cli(capsys, "log", "--op", "moved", status=2).startswith("memvault: argument --op: invalid choice")


def test_color_only_on_a_terminal(
    session: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = run_cli(capsys, "log", "-p", "-n", "1", "--skip", "6")
    assert "\x1b[" not in plain
    colored = run_cli(capsys, "log", "-p", "-n", "1", "--skip", "6", "--color=always")
    assert colored.startswith(f"\x1b[33m{session['c3']}\x1b[0m  #3 ")
    assert "\x1b[31m-- prefers email\x1b[0m\n\x1b[32m+- prefers email follow-ups\x1b[0m\n" in colored
    assert "\x1b[36m@@ -1,2 +1,2 @@\x1b[0m\n" in colored
    # stripping the escapes gives the plain output back
    assert re.sub(r"\x1b\[\d+m", "", colored) == plain
    assert "\x1b[" not in run_cli(capsys, "log", "--json", "-n", "1")
