"""``memvault scrub`` shows what would be masked (kinds and places, never values)
without writing; ``memvault import`` reports what was masked in each file, in text and ``--json``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import memvault
from memvault.cli import main
from memvault.settings import ScrubSettings, StoreSettings

# Fake values of the real shapes.
EMAIL = "jane.doe@northwind-traders.com"
PASSWORD = "Tr0ub4dor&3"
AWS_ID = "AKIAQ7VXK2JD4NRP3W6T"
NOTE = (
    "# Contacts\n"
    f"mail {EMAIL}\n"
    "kept: bob@example.com, 10.0.0.12, card 4242 4242 4242 4242, <YOUR_API_KEY>\n"
    f"password: {PASSWORD}\n"
)


def test_scrub_lists_findings_without_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    note = tmp_path / "note.md"
    note.write_text(NOTE)
    assert main(["scrub", str(note)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{note}:2:6: email (30 characters) would be masked\n"
        f"{note}:4:11: password_assignment (11 characters) would be masked\n"
        "2 finding(s) (1 email, 1 password_assignment); nothing was written.\n"
    )
    assert EMAIL not in out and PASSWORD not in out
    assert note.read_text() == NOTE


def test_scrub_json_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(NOTE.encode())))
    assert main(["scrub", "-", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {
        "source": "-",
        "characters": len(NOTE),
        "policy": "default",
        "findings": [
            {"kind": "email", "action": "mask", "line": 2, "column": 6, "end_line": 2, "end_column": 36,
             "start": 16, "end": 46, "length": 30},
            {"kind": "password_assignment", "action": "mask", "line": 4, "column": 11, "end_line": 4,
             "end_column": 22, "start": 132, "end": 143, "length": 11},
        ],
        "counts": {"email": 1, "password_assignment": 1},
    }  # fmt: skip
    assert NOTE[16:46] == EMAIL and NOTE[132:143] == PASSWORD  # the offsets above, checked by hand
    assert EMAIL not in out and PASSWORD not in out


def test_scrub_check_and_a_clean_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirty, clean = tmp_path / "dirty.md", tmp_path / "clean.md"
    dirty.write_text(f"key {AWS_ID}\n")
    clean.write_text("Testing with bob@example.com and 192.168.1.20; test card 4242 4242 4242 4242.\n")
    assert main(["scrub", "--check", str(dirty)]) == 4
    assert main(["scrub", "--check", str(clean)]) == 0
    out = capsys.readouterr().out
    assert out.endswith("No sensitive data found; nothing was written.\n")
    assert AWS_ID not in out


def test_scrub_refuses_a_text_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = tmp_path / "raw.bin"
    raw.write_bytes(b"\xff\xfe bad")
    assert main(["scrub", str(raw)]) == 2
    assert capsys.readouterr().err == "memvault: The text to scan is not UTF-8.\n"


def test_scrub_with_the_store_policy(env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = StoreSettings(scrub=ScrubSettings(policy={"email": "allow", "password_assignment": "reject"}))
    memvault.MemoryStore.create(env, passphrase="cli passphrase", settings=settings, kdf=memvault.KdfParams(
        memory_kib=8, iterations=1, lanes=1)).close()  # fmt: skip
    note = tmp_path / "note.md"
    note.write_text(NOTE)
    assert main(["scrub", "--store-policy", str(note)]) == 0
    assert capsys.readouterr().out == (
        f"{note}:4:11: password_assignment (11 characters) would be refused (policy: reject)\n"
        "1 finding(s) (1 password_assignment); nothing was written.\n"
    )


def test_import_reports_findings_per_file(env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init"]) == 0
    capsys.readouterr()
    src = tmp_path / "src"
    (src / "team").mkdir(parents=True)
    (src / "contacts.md").write_text(NOTE)
    (src / "team" / "ci.md").write_text(f"ci key {AWS_ID}\nsecond mail {EMAIL}\n")
    (src / "clean.md").write_text("nothing to see; bob@example.com\n")
    assert main(["import", str(src)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        "  masked in /memories/contacts.md: 1 email, 1 password_assignment",
        "  masked in /memories/team/ci.md: 1 aws_access_key_id, 1 email",
    ]
    src2 = tmp_path / "src2"
    src2.mkdir()
    (src2 / "more.md").write_text(f"reach me at {EMAIL}\n")
    assert main(["import", str(src2), "--prefix", "/memories/more", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["findings"] == {"/memories/more/more.md": {"email": 1}}
    assert main(["log", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries[0]["findings"] == {"email": 1}
    assert entries[1]["findings"] == {"aws_access_key_id": 1, "email": 2, "password_assignment": 1}
