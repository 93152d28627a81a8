"""``memvault audit``: every finding kind on a crafted store, exactly; a clean store is ok; the CLI's
text and JSON output and exit statuses; the audit commits nothing and records no read."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

import memvault
from conftest import PASSPHRASE, make_store
from memvault.admin.audit import AuditReport, audit, index_links
from memvault.cli import main
from memvault.edits.templates import apply_template
from memvault.errors import InvalidInputError, InvalidPathError
from memvault.paths import parse_path
from memvault.settings import CustomRule, ScrubSettings, StoreSettings
from memvault.store import Transaction

DAY = 86400.0
INDEX = "/memories/MEMORY.md"


def _store(tmp_path: Path, files: dict[str, str], settings: StoreSettings | None = None) -> memvault.MemoryStore:
    """A store holding ``files``, written in one commit."""
    store = make_store(tmp_path / "s", settings or StoreSettings(durability="none"))
    if files:
        _write(store, files)
    return store


def _write(store: memvault.MemoryStore, files: dict[str, str]) -> None:
    def apply(txn: Transaction) -> None:
        for path, text in files.items():
            txn.write_file(parse_path(path, txn.settings), text.encode("utf-8"))

    store.transact(apply, command="put", paths=tuple(files), actor="test", session="")


def _found(report: AuditReport) -> list[tuple[str, str]]:
    return [(f.kind, f.path) for f in report.findings]


def _mtime(store: memvault.MemoryStore, path: str) -> float:
    node = store.snapshot().get(parse_path(path))
    assert node is not None
    return node.mtime


def test_a_template_store_is_clean_and_the_audit_changes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, {})
    apply_template(store, "project")
    seq = store.head[1]
    report = audit(store)
    assert report.ok and report.findings == [] and report.notes == []
    assert report.files == 4
    assert report.to_json() == {"ok": True, "index": INDEX, "findings": [], "notes": []}
    assert store.head[1] == seq  # no commit
    assert store.access_times.last_read() == {}  # and no recorded read (the index was read)
    store.close()


def test_no_index_makes_every_file_an_orphan(tmp_path: Path) -> None:
    store = _store(tmp_path, {"/memories/a.md": "a\n", "/memories/d/b.md": "b\n"})
    report = audit(store)
    assert _found(report) == [
        ("index-missing", INDEX),
        ("orphan", "/memories/a.md"),
        ("orphan", "/memories/d/b.md"),
    ]
    assert not report.ok
    # a directory at the index's path is no index either
    report = audit(store, index="/memories/d")
    assert _found(report) == [
        ("index-missing", "/memories/d"),
        ("orphan", "/memories/a.md"),
        ("orphan", "/memories/d/b.md"),
    ]
    assert "directory" in report.findings[0].detail
    with pytest.raises(InvalidPathError):
        audit(store, index="/etc/MEMORY.md")
    with pytest.raises(InvalidInputError):
        audit(store, stale_after=0)
    store.close()


def test_dangling_links(tmp_path: Path) -> None:
    index = (
        "# Index\n"
        "- [a](a.md): relative to the index's directory\n"
        "- [missing](/memories/missing.md)\n"
        "- see /memories/gone/x.md.\n"
        "- [web](https://example.com/memories/nothing.md), [top](#top), [mail](mailto:x@example.com)\n"
        "- [escape](../etc/passwd)\n"
        "- /memories/missing.md again, and [a again](./a.md#section)\n"
    )
    store = _store(tmp_path, {INDEX: index, "/memories/a.md": "a\n"})
    report = audit(store)
    assert _found(report) == [
        ("dangling-link", "../etc/passwd"),
        ("dangling-link", "/memories/gone/x.md"),
        ("dangling-link", "/memories/missing.md"),
    ]
    details = {f.path: f.detail for f in report.findings}
    assert details["/memories/missing.md"] == f"linked from {INDEX} line 3, 7: no such file"
    assert details["/memories/gone/x.md"] == f"linked from {INDEX} line 4: no such file"
    assert "not a memory path" in details["../etc/passwd"]
    store.close()


def test_orphans_and_what_an_entry_reaches(tmp_path: Path) -> None:
    index = (
        "- /memories/a.md: bare path, ends at the colon\n"
        "- [notes](notes/): a directory reaches every file below it\n"
        "- [spaced](<sp ace.md>) and [encoded](sp%20ace2.md)\n"
        "- `/memories/code.md` in a code span\n"
    )
    files = {
        INDEX: index,
        "/memories/a.md": "a\n",
        "/memories/b.md": "b\n",
        "/memories/notes/x.md": "x\n",
        "/memories/notes/deep/y.md": "y\n",
        "/memories/sp ace.md": "s\n",
        "/memories/sp ace2.md": "t\n",
        "/memories/code.md": "c\n",
        "/memories/other/c.md": "o\n",
        "/memories/notes2.md": "n\n",  # a sibling with the directory's name as prefix: not below it
    }
    store = _store(tmp_path, files)
    report = audit(store)
    assert _found(report) == [
        ("orphan", "/memories/b.md"),
        ("orphan", "/memories/notes2.md"),
        ("orphan", "/memories/other/c.md"),
    ]
    # an index elsewhere: relative links resolve against its own directory
    _write(store, {"/memories/other/INDEX.md": "[c](c.md) [up](../b.md)\n"})
    report = audit(store, index="/memories/other/INDEX.md")
    assert report.index == "/memories/other/INDEX.md"
    orphans = [p for k, p in _found(report) if k == "orphan"]
    assert "/memories/b.md" not in orphans and "/memories/other/c.md" not in orphans
    assert "/memories/a.md" in orphans and INDEX in orphans and "/memories/other/INDEX.md" not in orphans
    store.close()


def test_index_links_parsing() -> None:
    text = '[a](a.md) /memories/b.md, [c](<../memories/c.md> "title")\n[x](http://h/memories/x) ~/memories/no\n'
    links = [(link.line, link.path.text if link.path else None) for link in index_links(text)]
    assert links == [(1, "/memories/a.md"), (1, "/memories/c.md"), (1, "/memories/b.md")]


def test_index_over_the_window_by_lines(tmp_path: Path) -> None:
    lines = ["- [a](a.md)"] + [f"filler {i}" for i in range(2, 203)] + ["- [b](b.md)", "- /memories/c.md and [d](d.md)"]
    assert len(lines) == 204
    files = {INDEX: "\n".join(lines) + "\n", "/memories/a.md": "1\n", "/memories/b.md": "2\n"}
    files["/memories/c.md"] = "3\n"
    files["/memories/d.md"] = "4\n"
    store = _store(tmp_path, files)
    report = audit(store)
    assert _found(report) == [("index-over-window", INDEX), ("outside-window", INDEX), ("outside-window", INDEX)]
    assert report.findings[0].detail.startswith("204 lines, ")
    assert "first 200 lines" in report.findings[0].detail
    assert report.findings[1].detail == "line 203 (/memories/b.md) is not loaded"
    assert report.findings[2].detail == "line 204 (/memories/d.md, /memories/c.md) is not loaded"
    store.close()


def test_index_over_the_window_by_bytes(tmp_path: Path) -> None:
    index = "- /memories/a.md\n" + "x" * 24_970 + "\n- /memories/b.md\n"
    assert index.count("\n") == 3 and len(index) > 25_000
    store = _store(tmp_path, {INDEX: index, "/memories/a.md": "1\n", "/memories/b.md": "2\n"})
    report = audit(store)
    assert _found(report) == [("index-over-window", INDEX), ("outside-window", INDEX)]
    assert report.findings[0].detail.startswith(
        f"3 lines, {len(index):,} bytes: a session loads only the first 2 lines"
    )
    assert report.findings[1].detail == "line 3 (/memories/b.md) is not loaded"
    # exactly 200 lines within the byte limit: nothing to report
    _write(store, {INDEX: "- /memories/a.md\n- /memories/b.md\n" + "line\n" * 198})
    assert audit(store).ok
    store.close()


def test_stale_files_by_last_write_and_last_read(tmp_path: Path) -> None:
    files = {INDEX: "- /memories/old.md\n- /memories/read.md\n", "/memories/old.md": "o\n", "/memories/read.md": "r\n"}
    store = _store(tmp_path, files)
    written = _mtime(store, "/memories/old.md")
    token = store.token("/memories/read.md")
    store.access_times.touch(token, written + 50 * DAY)
    now = written + 100 * DAY
    report = audit(store, now=now)  # cutoff: 10 days after the writes; read.md was read at 50
    assert _found(report) == [("stale", INDEX), ("stale", "/memories/old.md")]
    assert report.findings[1].detail.startswith("unused for 100 days: written ")
    assert report.findings[1].detail.endswith(", read never")
    assert report.notes == []
    assert audit(store, now=now, stale_after=120 * DAY).ok
    assert store.flush_access_times()
    store.close()

    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        assert _found(audit(again, now=now)) == [("stale", INDEX), ("stale", "/memories/old.md")]
    (tmp_path / "s" / "access").unlink()
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        report = audit(again, now=now)
        # reads are unknown: read.md is judged by its last write alone, and the report says so
        assert _found(report) == [("stale", INDEX), ("stale", "/memories/old.md"), ("stale", "/memories/read.md")]
        assert all(f.detail.endswith("read unknown") for f in report.findings)
        assert len(report.notes) == 1 and report.notes[0].startswith("reads-unknown: ")
        assert "missing" in report.notes[0]


def test_near_size_limit(tmp_path: Path) -> None:
    files = {
        INDEX: "/memories/big.md /memories/edge.md\n",
        "/memories/big.md": "x" * 901,  # over 90 % of 1000
        "/memories/edge.md": "y" * 900,  # exactly 90 %: not over
    }
    store = _store(tmp_path, files, StoreSettings(durability="none", max_file_bytes=1000))
    report = audit(store)
    assert _found(report) == [("near-size-limit", "/memories/big.md")]
    assert report.findings[0].detail == "901 bytes, 90% of the 1,000-byte limit (max_file_bytes)"
    store.close()


_TEXT = "The deploy runs from the release branch after the smoke tests pass on staging.\n" * 3


def test_duplicates_and_near_duplicates(tmp_path: Path) -> None:
    files = {
        INDEX: "- [all](/memories/)\n",  # the root: every file is reached
        "/memories/a.md": "same content\n",
        "/memories/b.md": "same content\n",
        "/memories/c.md": "same content\n",
        "/memories/d.md": _TEXT,
        "/memories/e.md": _TEXT.replace("staging", "stagin"),
        "/memories/f.md": "Something else entirely, nothing like the others.\n",
        "/memories/empty1.md": "",  # empty files are no duplicates
        "/memories/empty2.md": "",
    }
    store = _store(tmp_path, files)
    report = audit(store)
    assert _found(report) == [("duplicate", "/memories/a.md"), ("near-duplicate", "/memories/d.md")]
    assert report.findings[0].detail == "3 files with the same content: /memories/a.md, /memories/b.md, /memories/c.md"
    assert report.findings[1].detail.endswith("% similar to /memories/e.md")
    assert int(report.findings[1].detail.split("%")[0]) >= 90
    assert report.notes == []
    store.close()


def test_near_duplicates_are_skipped_past_200_files(tmp_path: Path) -> None:
    def files(n: int) -> dict[str, str]:
        out = {INDEX: "- [many](many)\n", "/memories/many/d.md": _TEXT, "/memories/many/e.md": _TEXT + "x\n"}
        for i in range(n - 3):  # unlike each other: lengths far apart or disjoint letters
            out[f"/memories/many/{i:03}.md"] = hashlib.sha256(str(i).encode()).hexdigest()[: 4 + i % 50] * (1 + i)
        return out

    store = _store(tmp_path, files(200))  # 200 text files with the index: compared
    report = audit(store)
    assert _found(report) == [("near-duplicate", "/memories/many/d.md")]
    assert report.notes == [] and report.files == 200
    _write(store, {"/memories/many/one-more.md": "z"})
    report = audit(store)
    assert report.findings == []
    assert report.notes == [
        "near-duplicate-skipped: 201 text files under 64 KiB, more than the 200 compared pairwise; "
        "near-duplicates not checked"
    ]
    store.close()


def test_scrubber_findings_in_a_files_history(tmp_path: Path) -> None:
    scrub = ScrubSettings(custom_rules=[CustomRule(kind="codename", pattern=r"\bPROJECT-[A-Z]{4}\b")])
    store = _store(tmp_path, {INDEX: "/memories/a.md /memories/b.md /memories/gone.md\n"}, StoreSettings(scrub=scrub))
    tool = memvault.MemoryTool(store, actor="claude")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "working on PROJECT-KITE\n"})
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "nothing secret\n"})
    tool.call({"command": "create", "path": "/memories/gone.md", "file_text": "PROJECT-HAWK\n"})
    tool.call({"command": "delete", "path": "/memories/gone.md"})
    tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "working", "new_str": "still working"})
    assert b"PROJECT-KITE" not in store.snapshot().read(parse_path("/memories/a.md"))  # redacted on write
    report = audit(store)
    # gone.md's finding names a file that no longer exists: the index link to it dangles instead
    assert _found(report) == [("dangling-link", "/memories/gone.md"), ("scrubber-findings", "/memories/a.md")]
    assert report.findings[1].detail == "1 commit with findings: #2 (create: codename 1)"
    store.close()


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("MEMVAULT_KEY_FILE", raising=False)
    monkeypatch.delenv("MEMVAULT_KEY", raising=False)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_STORE", str(tmp_path / "s"))
    return tmp_path / "s"


def test_cli_clean_store_exits_0(cli_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {})
    apply_template(store, "research")
    store.close()
    assert main(["audit"]) == 0
    out, err = capsys.readouterr()
    assert out == "No findings; 5 files checked.\n" and err == ""
    assert main(["audit", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "index": INDEX, "findings": [], "notes": []}


def test_cli_findings_exit_1(cli_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {INDEX: "- /memories/a.md\n- [gone](gone.md)\n", "/memories/a.md": "a\n"})
    _write(store, {"/memories/lost.md": "l\n"})
    seq = store.head[1]
    store.close()
    assert main(["audit", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"ok", "index", "findings", "notes"}
    assert doc["ok"] is False and doc["index"] == INDEX and doc["notes"] == []
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [
        ("dangling-link", "/memories/gone.md"),
        ("orphan", "/memories/lost.md"),
    ]
    assert all(set(f) == {"kind", "path", "detail"} for f in doc["findings"])

    assert main(["audit"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"dangling-link  /memories/gone.md  linked from {INDEX} line 2: no such file",
        "orphan  /memories/lost.md  no index entry links to it or to a directory above it",
        "2 findings of 2 kinds; 3 files checked.",
    ]
    # every file is stale a second after it was written (a second for the clock to move on)
    time.sleep(1.1)
    assert main(["audit", "--stale-after", "1s", "--json"]) == 1
    kinds = [(f["kind"], f["path"]) for f in json.loads(capsys.readouterr().out)["findings"]]
    assert kinds == [
        ("dangling-link", "/memories/gone.md"),
        ("orphan", "/memories/lost.md"),
        ("stale", INDEX),
        ("stale", "/memories/a.md"),
        ("stale", "/memories/lost.md"),
    ]
    assert main(["audit", "--index", "/memories/nope.md"]) == 1
    assert capsys.readouterr().out.startswith("index-missing  /memories/nope.md  ")
    with memvault.MemoryStore.open(cli_env, passphrase=PASSPHRASE) as again:
        assert again.head[1] == seq  # the audit committed nothing


def test_cli_errors(cli_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit"]) == 10  # no store
    assert "No memory store" in capsys.readouterr().err
    _store(tmp_path, {}).close()
    assert main(["audit", "--stale-after", "ninety days"]) == 2
    assert "Not a duration" in capsys.readouterr().err
    assert main(["audit", "--index", "/etc/passwd", "--json"]) == 4
    assert json.loads(capsys.readouterr().err)["kind"] == "REFUSED"
