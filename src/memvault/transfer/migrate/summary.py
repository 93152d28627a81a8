"""What a pull or a push did (or, with ``dry_run``, would do): :class:`MigrateSummary`.

Paths are API paths (``/notes/a.md``: the store path without ``/memories``). Nothing in a summary
holds content: a refusal names its reason (a limit, a rule, or the kinds of sensitive data the
scrubber found), a masked file the kinds and counts of what was masked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Refusal", "Conflict", "MigrateSummary"]


@dataclass(frozen=True)
class Refusal:
    """A file or version left out, and why (never its content)."""

    path: str
    reason: str
    memory_id: str = ""
    version_id: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"path": self.path, "reason": self.reason}
        if self.memory_id:
            out["memory_id"] = self.memory_id
        if self.version_id:
            out["version_id"] = self.version_id
        return out


@dataclass(frozen=True)
class Conflict:
    """A memory changed on the side being written since the last sync: left as it is there."""

    path: str
    reason: str
    memory_id: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"path": self.path, "reason": self.reason}
        if self.memory_id:
            out["memory_id"] = self.memory_id
        return out


@dataclass
class MigrateSummary:
    """The outcome of one run.

    ``created``/``updated``/``deleted``: paths written on the destination (the store for a pull,
    the API for a push); ``unchanged``: how many memories already matched; ``versions``: commits
    of imported versions (pull); ``refused`` and ``conflicts``: what was left out (either makes
    :attr:`ok` false, exit status 5 on the command line); ``masked``: per path, the kinds and
    counts the store's scrubber masked (pull); ``kept``: memories deleted in the store but left on
    the API (push without ``delete``); ``adopted``: remote memories found equal to the store's
    file and mapped to it. ``requests``/``retries``/``waited``: the API calls, how many were
    retries and the seconds waited before them.
    """

    command: Literal["pull", "push"]
    memory_store_id: str
    dry_run: bool = False
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    versions: int = 0
    adopted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    masked: dict[str, dict[str, int]] = field(default_factory=dict)
    commits: int = 0
    new_store: dict[str, str] | None = None
    requests: int = 0
    retries: int = 0
    waited: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing was refused and nothing conflicted."""
        return not self.refused and not self.conflicts

    def mask(self, path: str, findings: dict[str, int]) -> None:
        """Count what the scrubber masked in ``path``."""
        if not findings:
            return
        kinds = self.masked.setdefault(path, {})
        for kind, n in findings.items():
            kinds[kind] = kinds.get(kind, 0) + n

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "command": self.command,
            "memory_store_id": self.memory_store_id,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "created": sorted(set(self.created)),
            "updated": sorted(set(self.updated)),
            "deleted": sorted(set(self.deleted)),
            "unchanged": self.unchanged,
            "adopted": sorted(set(self.adopted)),
            "refused": [r.to_json() for r in self.refused],
            "conflicts": [c.to_json() for c in self.conflicts],
            "commits": self.commits,
            "requests": self.requests,
            "retries": self.retries,
            "waited_seconds": round(self.waited, 3),
        }
        if self.command == "pull":
            out["versions"] = self.versions
            out["masked"] = {p: dict(sorted(k.items())) for p, k in sorted(self.masked.items())}
        else:
            out["kept"] = sorted(set(self.kept))
            out["new_store"] = self.new_store
        return out
