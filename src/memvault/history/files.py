"""Files and trees at a revision, diffs between revisions and blame: typed results, never printed
here (the command line and the review pages print them)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import IntegrityError, InvalidPathError, PathNotFoundError
from ..format.records import CommitMeta, Node
from ..paths import ROOT, parse_path
from ..store import AnyBranch, StoreState
from ..store.revisions import resolve
from .log import CommitInfo, Operation, iter_log, node_pairs, within

__all__ = [
    "TreeEntry", "FileDiff", "BlameLine", "tree_at", "read_at", "diff", "commit_diff", "format_diff", "blame",
    "attribute_lines",
]  # fmt: skip


@dataclass(frozen=True)
class TreeEntry:
    """A file or directory of the tree at some revision."""

    path: str
    kind: Literal["file", "dir"]
    size: int
    sha256: str
    version: int
    mtime: float

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "size": self.size,
            "sha256": self.sha256,
            "version": self.version,
            "mtime": self.mtime,
        }


@dataclass(frozen=True)
class FileDiff:
    """How one file differs between two revisions (``None`` content: absent on that side)."""

    path: str
    old_path: str | None
    old: bytes | None
    new: bytes | None

    @property
    def status(self) -> Operation:
        if self.old is None:
            return "created"
        if self.new is None:
            return "deleted"
        if self.old_path is not None and self.old_path != self.path:
            return "renamed"
        return "modified"

    @property
    def binary(self) -> bool:
        """Whether either side is not UTF-8 text (no line diff then)."""
        try:
            (self.old or b"").decode("utf-8")
            (self.new or b"").decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    def line_counts(self) -> tuple[int, int] | None:
        """``(added, removed)`` lines, or ``None`` for a binary file."""
        if self.binary:
            return None
        old_lines = (self.old or b"").decode("utf-8").splitlines()
        new_lines = (self.new or b"").decode("utf-8").splitlines()
        added = removed = 0
        matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                removed += i2 - i1
                added += j2 - j1
        return added, removed

    def to_json(self) -> dict[str, Any]:
        """Status, line counts and the unified diff text (never raw content)."""
        counts = self.line_counts()
        return {
            "path": self.path,
            "old_path": self.old_path,
            "status": self.status,
            "binary": counts is None,
            "added": counts[0] if counts is not None else None,
            "removed": counts[1] if counts is not None else None,
            "patch": format_diff([self]),
        }


@dataclass(frozen=True)
class BlameLine:
    """One line of a file and the commit that last changed it."""

    line: int
    text: str
    commit_id: str
    seq: int
    time: float
    actor: str

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "text": self.text,
            "commit": self.commit_id,
            "seq": self.seq,
            "time": self.time,
            "actor": self.actor,
        }


# -- trees and files at a revision ----------------------------------------------------------------


def _state(store: AnyBranch, rev: str | bytes) -> StoreState:
    return store.state_at(rev if isinstance(rev, bytes) else resolve(store, rev))


def tree_at(store: AnyBranch, rev: str | bytes = "HEAD", path: str = ROOT) -> list[TreeEntry]:
    """Every file and directory at ``rev`` (below ``path``), sorted by path."""
    root = parse_path(path).text
    state = _state(store, rev)
    if root != ROOT and root not in state.nodes:
        raise PathNotFoundError(f"Error: The path {root} does not exist at that revision.")
    return [
        TreeEntry(n.path, n.kind, n.size, n.sha256.hex(), n.version, n.mtime)
        for p, n in sorted(state.nodes.items())
        if within(p, root)
    ]


def read_at(store: AnyBranch, path: str, rev: str | bytes = "HEAD") -> bytes:
    """The content of the file ``path`` at ``rev``."""
    vpath = parse_path(path).text
    state = _state(store, rev)
    node = state.nodes.get(vpath)
    if node is None:
        # A redacted version keeps only its opaque token, which the path still determines.
        token = store.token(vpath)
        node = state.redacted(token)
    if vpath == ROOT or (node is not None and node.is_dir):
        raise InvalidPathError(f"Error: {vpath} is a directory, not a file.")
    if node is None:
        raise PathNotFoundError(f"Error: The file {vpath} does not exist at that revision.")
    return store.read_node(node)


# -- diff -------------------------------------------------------------------------------------------


def diff(
    store: AnyBranch, old: str | bytes | None, new: str | bytes = "HEAD", path: str | None = None
) -> list[FileDiff]:
    """Files that differ between two revisions (whole store, or below ``path``), sorted by path.

    ``old=None`` compares with an empty store (what the first commit added). A file moved by a
    rename between the two revisions is paired with its old path when its content is unchanged
    or when the lineage (file id) matches.
    """
    root = parse_path(path).text if path is not None else ROOT
    a_nodes = _state(store, old).nodes if old is not None else {}
    b = _state(store, new)
    a_files = {p: n for p, n in a_nodes.items() if not n.is_dir and not n.redacted and within(p, root)}
    b_files = {p: n for p, n in b.nodes.items() if not n.is_dir and not n.redacted and within(p, root)}
    return _pair(store, a_files, b_files)


def commit_diff(store: AnyBranch, rev: str | bytes = "HEAD", path: str | None = None) -> list[FileDiff]:
    """Files commit ``rev`` changed (below ``path``), against its parent: what :func:`diff`
    gives for the parent and ``rev``, read from the index shards the commit changed only (its
    cost is the change's, not the store's). Redacted versions are left out, as in :func:`diff`."""
    commit_id = rev if isinstance(rev, bytes) else resolve(store, rev)
    root = parse_path(path).text if path is not None else ROOT
    _meta, tree_id, parent = store.commit(commit_id)
    a_files: dict[str, Node] = {}
    b_files: dict[str, Node] = {}
    for before, after in node_pairs(store, tree_id, store.commit(parent)[1] if parent is not None else None):
        for node, side in ((before, a_files), (after, b_files)):
            if node is not None and not node.is_dir and not node.redacted and within(node.path, root):
                side[node.path] = node
    return _pair(store, a_files, b_files)


def _pair(store: AnyBranch, a_files: dict[str, Node], b_files: dict[str, Node]) -> list[FileDiff]:
    """The files that differ between two sets of file nodes (``path -> node``), a file moved
    paired with its old path when its lineage matches; sorted by path."""
    by_lineage = {n.file_id: p for p, n in a_files.items() if p not in b_files}
    out: list[FileDiff] = []
    paired: set[str] = set()
    for p, node in sorted(b_files.items()):
        before = a_files.get(p)
        if before is not None:
            if before.sha256 != node.sha256:
                out.append(FileDiff(p, p, store.read_node(before), store.read_node(node)))
            continue
        source = by_lineage.get(node.file_id)
        if source is not None:
            paired.add(source)
            out.append(FileDiff(p, source, store.read_node(a_files[source]), store.read_node(node)))
        else:
            out.append(FileDiff(p, None, None, store.read_node(node)))
    for p, node in sorted(a_files.items()):
        if p not in b_files and p not in paired:
            out.append(FileDiff(p, p, store.read_node(node), None))
    return sorted(out, key=lambda d: d.path)


def format_diff(diffs: Iterable[FileDiff]) -> str:
    """Unified diff text (git style ``a/`` and ``b/`` prefixes) of :func:`diff` results."""
    chunks: list[str] = []
    for d in diffs:
        old_name = "/dev/null" if d.old is None else "a" + (d.old_path or d.path)
        new_name = "/dev/null" if d.new is None else "b" + d.path
        header = f"diff --memvault a{d.old_path or d.path} b{d.path}\n"
        if d.status == "renamed":
            header += f"rename from {d.old_path}\nrename to {d.path}\n"
        try:
            old_text = (d.old or b"").decode("utf-8")
            new_text = (d.new or b"").decode("utf-8")
        except UnicodeDecodeError:
            chunks.append(header + f"Binary files {old_name} and {new_name} differ\n")
            continue
        body = "".join(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                new_text.splitlines(keepends=True),
                fromfile=old_name,
                tofile=new_name,
            )
        )
        if body and not body.endswith("\n"):
            body += "\n\\ No newline at end of file\n"
        chunks.append(header + body)
    return "".join(chunks)


# -- blame ------------------------------------------------------------------------------------------


def blame(store: AnyBranch, path: str, rev: str | bytes = "HEAD") -> list[BlameLine]:
    """For each line of ``path`` at ``rev``, the commit that last changed it (following renames)."""
    vpath = parse_path(path).text
    start = rev if isinstance(rev, bytes) else resolve(store, rev)
    content = read_at(store, vpath, start)
    versions: list[tuple[CommitInfo, bytes]] = []
    tracked = vpath
    for info in iter_log(store, start=start, path=vpath, follow=True):
        hit = next((c for c in info.changes if c.path == tracked and c.kind == "file"), None)
        if hit is None:
            continue
        if hit.op == "deleted":
            break
        versions.append((info, read_at(store, tracked, info.commit_id.encode())))
        if hit.op == "renamed" and hit.old_path is not None:
            tracked = hit.old_path
        elif hit.op == "created":
            break
    versions.reverse()  # oldest first
    out = attribute_lines([(info.commit_id, info, data) for info, data in versions])
    if versions and versions[-1][1] != content:
        raise IntegrityError("The store's history does not lead to the file's content.")
    return out


def attribute_lines(versions: Iterable[tuple[str, CommitMeta, bytes]]) -> list[BlameLine]:
    """Blame's core: given versions of one file oldest first, each as ``(commit id in hex, that
    commit's metadata, the content it wrote)``, the lines of the newest, each with the commit
    that last changed it (lines the oldest version given already had are its own)."""
    lines: list[str] = []
    owners: list[tuple[str, CommitMeta]] = []
    for commit_id, meta, data in versions:
        new_lines = data.decode("utf-8", errors="replace").split("\n")
        if new_lines and new_lines[-1] == "":
            new_lines.pop()
        matcher = difflib.SequenceMatcher(a=lines, b=new_lines, autojunk=False)
        new_owners = [(commit_id, meta)] * len(new_lines)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                new_owners[block.b + k] = owners[block.a + k]
        lines, owners = new_lines, new_owners
    return [
        BlameLine(i + 1, text, commit_id, meta.seq, meta.time, meta.actor)
        for i, (text, (commit_id, meta)) in enumerate(zip(lines, owners, strict=True))
    ]
