"""``memvault grep``: search the decrypted text files of a revision with a Python regular expression.

:func:`grep` yields one :class:`GrepMatch` per matching line, files in path order, lines in
order. Binary files (images) and redacted versions are not searched. Nothing is recorded as a
read for expiry: an operator's search is not the memory tool using a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError, PathNotFoundError, RedactedError
from ..paths import ROOT, parse_path
from ..store import AnyBranch
from ..store.revisions import resolve

__all__ = ["GrepMatch", "grep", "compile_pattern"]


@dataclass(frozen=True)
class GrepMatch:
    """One matching line: the file, the line number (from 1) and the line's text (no newline)."""

    path: str
    line: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "text": self.text}


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """``pattern`` as a Python regular expression.

    Raises:
        InvalidInputError: it does not compile.
    """
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as err:
        raise InvalidInputError(f"Error: Invalid regular expression: {err.msg} (at position {err.pos}).") from None


def _under(path: str, root: str) -> bool:
    return root == ROOT or path == root or path.startswith(root + "/")


def grep(
    store: AnyBranch,
    pattern: str | re.Pattern[str],
    path: str = ROOT,
    rev: str | bytes = "HEAD",
    *,
    ignore_case: bool = False,
) -> Iterator[GrepMatch]:
    """Every line of the text files at ``rev`` below ``path`` (a file or a directory) that
    ``pattern`` matches (``re.search``; a compiled pattern keeps its own flags).

    Lines are split on LF only (a trailing CR stays in the text), as the memory tool's view does.

    Raises:
        InvalidInputError: a bad pattern or revision. PathNotFoundError: ``path`` does not exist
        at ``rev``. InvalidPathError: ``path`` is not a memory path.
    """
    regex = pattern if isinstance(pattern, re.Pattern) else compile_pattern(pattern, ignore_case=ignore_case)
    root = parse_path(path).text
    commit_id = rev if isinstance(rev, bytes) else resolve(store, rev)
    state = store.state_at(commit_id)
    if root != ROOT and root not in state.nodes:
        raise PathNotFoundError(f"Error: The path {root} does not exist at that revision.")
    for file_path, node in sorted(state.nodes.items()):
        if node.is_dir or node.binary or node.redacted or not _under(file_path, root):
            continue
        try:
            text = store.read_node(node).decode("utf-8")
        except RedactedError:  # a version shredded since that revision: nothing left to search
            continue
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            if regex.search(line) is not None:
                yield GrepMatch(file_path, number, line)
