"""Three-way merge of a consolidation ("dream") branch back into main, file by file.

A dream runs on a branch forked from main. While it ran, main may have moved on. This module
works out, for each memory file, what main's content must become so that it carries both the
dream's changes and main's own, using the content at the fork point as the common base. Text
files changed on both sides are merged line by line with :mod:`merge3` (the optional
``memvault[dream]`` extra); anything that cannot be merged cleanly is reported as a
:class:`FileConflict`, never resolved in the dream's favour.

The functions here are pure: they take and return plaintext bytes and never touch a store.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidInputError

if TYPE_CHECKING:
    import merge3

__all__ = ["FileConflict", "MergePlan", "three_way"]

#: The labels of the three sides in a conflict view, as git would name them.
MAIN_LABEL = "main"
FORK_LABEL = "fork"
DREAM_LABEL = "dream"

#: Reasons a file could not be merged (the ``reason`` of a :class:`FileConflict`).
REASON_OVERLAP = "both changed the same lines"
REASON_ADD_ADD = "added on both sides with different content"
REASON_DELETED_ON_MAIN = "deleted on main, changed by the dream"
REASON_DELETED_BY_DREAM = "deleted by the dream, changed on main"
REASON_BINARY = "binary file changed on both sides"

_MISSING_MERGE3 = (
    "Error: merging a dream needs merge3: install memvault with the dream extra (pip install 'memvault[dream]')."
)


@dataclass(frozen=True)
class FileConflict:
    """One file both main and the dream changed in ways that cannot be combined automatically.

    Attributes:
        path: The memory file's path.
        reason: Short human text saying what clashed (one of the ``REASON_*`` strings).
        base: Content at the fork point, or ``None`` when the file was absent there.
        ours: Content on main now, or ``None`` when absent on main.
        theirs: Content on the dream branch, or ``None`` when absent there.
    """

    path: str
    reason: str
    base: bytes | None
    ours: bytes | None
    theirs: bytes | None

    def render(self) -> str:
        """A git-style view of the conflict, for a person or the model to resolve.

        For text files whose changes overlap this is the file with conflict markers
        (``<<<<<<< main``, ``||||||| fork``, ``=======``, ``>>>>>>> dream``) around each clashing
        hunk. For every other kind (add/delete, binary, or when :mod:`merge3` is unavailable)
        it is a header line naming the path and reason, then one line per side saying whether
        that side is absent, binary, or how many bytes it holds.

        Returns:
            The view as text; bytes that are not UTF-8 are shown as U+FFFD. Never raises for
            undecodable content.
        """
        if (
            self.reason == REASON_OVERLAP
            and self.base is not None
            and self.ours is not None
            and self.theirs is not None
        ):
            try:
                m3 = _merger(self.base, self.ours, self.theirs)
            except InvalidInputError:
                pass  # merge3 has gone since the plan was made: fall back to the summary view
            else:
                return b"".join(_marked_lines(m3)).decode("utf-8", errors="replace")
        sides = ((FORK_LABEL, self.base), (MAIN_LABEL, self.ours), (DREAM_LABEL, self.theirs))
        rows = [f"CONFLICT ({self.reason}): {self.path}"]
        if any(content is not None for _label, content in sides):  # (a file/directory clash has no contents)
            rows.extend(f"{label}: {self._describe(content)}" for label, content in sides)
        return "\n".join(rows) + "\n"

    def _describe(self, content: bytes | None) -> str:
        """``absent``, ``binary, N bytes`` or ``N bytes`` for one side's content."""
        if content is None:
            return "absent"
        if self.reason == REASON_BINARY or _utf8(content) is None:
            return f"binary, {len(content)} bytes"
        return f"{len(content)} bytes"


@dataclass(frozen=True)
class MergePlan:
    """What must happen to main to take in a dream branch.

    Attributes:
        changes: For each path whose content on main must change, its new content (``None``
            means delete the file). Paths main already has right are not listed.
        conflicts: The files that could not be merged, sorted by path.
    """

    changes: dict[str, bytes | None]
    conflicts: list[FileConflict]

    @property
    def ok(self) -> bool:
        """Whether the merge is clean (no conflicts), so ``changes`` can be applied as is."""
        return not self.conflicts


def three_way(
    base: Mapping[str, bytes],
    ours: Mapping[str, bytes],
    theirs: Mapping[str, bytes],
    *,
    binary: Collection[str] = (),
) -> MergePlan:
    """Merge, file by file, the dream's changes (``theirs``) into main (``ours``).

    Each mapping holds every file present in that tree, path to content; a missing key means
    the file is absent there. Per path: if the dream left it as at the fork, main keeps its
    own; if main left it, the dream's content (or deletion) is taken; if both ended up the
    same, nothing changes; otherwise both changed it differently, and a text file present on
    all three sides is merged line by line, everything else being a conflict.

    Args:
        base: The files at the fork point.
        ours: The files on main now.
        theirs: The files on the dream branch.
        binary: Paths whose content is binary (images): never merged line-wise. Content that
            is not valid UTF-8 is treated as binary too.

    Returns:
        The plan: the new content for each path main must change, and the conflicts.

    Raises:
        InvalidInputError: a line merge is needed and :mod:`merge3` (``memvault[dream]``) is
            not installed.
    """
    changes: dict[str, bytes | None] = {}
    conflicts: list[FileConflict] = []
    for path in sorted(set(base) | set(ours) | set(theirs)):
        b, o, t = base.get(path), ours.get(path), theirs.get(path)
        if t == b or o == t:
            continue  # the dream did not touch it, or both sides made the same change
        if o == b:
            changes[path] = t  # only the dream changed it: take its content or deletion
            continue
        reason = _clash(b, o, t, is_binary=path in binary)
        if reason is None:
            assert b is not None and o is not None and t is not None  # _clash said all three are text
            merged = _merge_text(b, o, t)
            if merged is None:
                reason = REASON_OVERLAP
            elif merged != o:
                changes[path] = merged
        if reason is not None:
            conflicts.append(FileConflict(path=path, reason=reason, base=b, ours=o, theirs=t))
    return MergePlan(changes=changes, conflicts=conflicts)


def _clash(b: bytes | None, o: bytes | None, t: bytes | None, *, is_binary: bool) -> str | None:
    """Why a path both sides changed differently cannot be line-merged, or ``None`` if it can."""
    if b is None:
        return REASON_ADD_ADD
    if o is None:
        return REASON_DELETED_ON_MAIN
    if t is None:
        return REASON_DELETED_BY_DREAM
    if is_binary or any(_utf8(side) is None for side in (b, o, t)):
        return REASON_BINARY
    return None


def _merge_text(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """The line merge of three UTF-8 texts, or ``None`` when any hunk conflicts."""
    m3 = _merger(base, ours, theirs)
    merged: list[bytes] = []
    for group in m3.merge_groups():
        if group[0] == "conflict":
            return None
        merged.extend(group[1])
    return b"".join(merged)


def _marked_lines(m3: merge3.Merge3[bytes]) -> list[bytes]:
    """merge3's conflict-marked lines, with a line break added to any unterminated last line
    that a marker would otherwise be glued onto."""
    raw = list(
        m3.merge_lines(
            name_a=MAIN_LABEL.encode(),
            name_b=DREAM_LABEL.encode(),
            name_base=FORK_LABEL.encode(),
            base_marker=b"|||||||",
        )
    )
    out: list[bytes] = []
    for i, line in enumerate(raw):
        if i + 1 < len(raw) and not line.endswith((b"\n", b"\r")):
            line += b"\n"
        out.append(line)
    return out


def _lines(content: bytes) -> list[bytes]:
    """``content`` split into lines, each keeping its line break."""
    return content.splitlines(keepends=True)


def _utf8(content: bytes) -> str | None:
    """``content`` decoded as UTF-8, or ``None`` when it is not valid UTF-8."""
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _merger(base: bytes, ours: bytes, theirs: bytes) -> merge3.Merge3[bytes]:
    """A :class:`merge3.Merge3` over the lines of the three contents, importing merge3 on first need.

    Raises:
        InvalidInputError: merge3 is not installed (the ``memvault[dream]`` extra).
    """
    try:
        import merge3
    except ImportError:
        raise InvalidInputError(_MISSING_MERGE3) from None
    return merge3.Merge3(_lines(base), _lines(ours), _lines(theirs))
