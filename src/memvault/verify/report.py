"""What :func:`~memvault.verify.verify` reports: typed problems and counts, never printed here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Problem", "VerifyReport", "Severity", "printable"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One thing :func:`verify` found wrong. ``commit``/``seq``: the first (oldest) commit where
    the damaged item appears, where known; ``path``: the memory path affected, where known;
    ``branch``: the side branch (``dream/<id>``) that commit is on, or the branch the problem is
    about (None: ``main``, or not about a commit)."""

    severity: Severity
    code: str
    message: str
    path: str | None = None
    commit: str | None = None
    seq: int | None = None
    branch: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON; ``branch`` only when set (a problem on a side branch)."""
        out: dict[str, Any] = {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "commit": self.commit,
            "seq": self.seq,
        }
        if self.branch is not None:
            out["branch"] = self.branch
        return out


@dataclass(frozen=True)
class VerifyReport:
    """The result of :func:`verify`: every problem found, and how much was checked."""

    problems: list[Problem]
    commits: int  #: commits read on main and on its side branches
    objects: int  #: distinct git objects checked (commits, trees, shard and content blobs)
    versions: int  #: distinct file versions (content blobs) authenticated and decrypted
    keys: int  #: data key records in the keyring checked
    key_slots: int  #: key slot files that parse
    head: str | None = None  #: the branch head (hex), if readable
    head_seq: int | None = None  #: its sequence number, if it authenticates

    @property
    def ok(self) -> bool:
        """True when no problem is an error (warnings are allowed)."""
        return not self.errors

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "head": self.head,
            "head_seq": self.head_seq,
            "commits": self.commits,
            "objects": self.objects,
            "versions": self.versions,
            "keys": self.keys,
            "key_slots": self.key_slots,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "problems": [p.to_json() for p in self.problems],
        }


def printable(name: str) -> str:
    """A file or ref name from the store directory, safe to put in a message (no control
    characters)."""
    return "".join(ch if ch.isprintable() else "?" for ch in name)
