"""Where records sit in a commit's git tree: tree layouts 1 to 4 (docs/format.md §5.3).

Layout 1: content blobs at ``c/<h0>/<h1>/<h[2:]>``, index shards at ``i/<h0>/<h1>``. Layouts 2,
3 and 4 (the fan-out layouts, ``d`` = the layout number = the digits of a shard's name): content
at ``<h0>/.../<h(d-1)>/<h[d:]>``, the shard beside it at ``<h0>/.../<h(d-1)>/i`` (``h``: the hex
path token). A root holding ``i`` is layout 1; a fan-out layout's depth is the depth of its first
blob (:func:`fanout_depth`); the empty tree is every layout. Pure: trees are read through a
callback.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import IntegrityError
from ..git.objects import MODE_BLOB, MODE_TREE

__all__ = [
    "ROLES",
    "ROLE_NAMES",
    "FANOUT_LAYOUTS",
    "SHARD_ENTRIES",
    "Entries",
    "Memo",
    "root_roles",
    "shape_problem",
    "fanout_depth",
    "fresh_layout",
    "shard_digits",
    "tree_layout",
    "content_path",
    "shard_path",
    "walk",
    "LayoutChecker",
]

#: A tree's entries: ``name -> (mode, hex id)``.
Entries = dict[bytes, tuple[int, bytes]]
#: What :func:`walk` remembers of subtrees: ``(tree id, role, prefix) -> shard -> index blob id``.
Memo = dict[tuple[bytes, str, bytes], dict[bytes, bytes]]

#: The fan-out layouts (their number is their depth) and the letter of their roles.
FANOUT_LAYOUTS = {2: "s", 3: "t", 4: "u"}
#: Largest ``max_files`` for which a new store of format version 6 takes each fan-out layout:
#: at most 32 entries per index shard, on average, when the store is full (:func:`fresh_layout`).
SHARD_ENTRIES = 32
_FRESH_LIMITS = ((2, SHARD_ENTRIES * 16**2), (3, SHARD_ENTRIES * 16**3))

_HEX1 = re.compile(rb"\A[0-9a-f]\Z")
_HEX62 = re.compile(rb"\A[0-9a-f]{62}\Z")
#: Every tree below the root by role: (name pattern, mode of every entry, role of its children or
#: None for blobs). Every tree but the root is non-empty.
ROLES: dict[str, tuple[re.Pattern[bytes], int, str | None]] = {
    "i": (_HEX1, MODE_TREE, "i1"),  # layout 1: i/<h0>
    "i1": (_HEX1, MODE_BLOB, None),  # layout 1: i/<h0>/<h1>: index shard blobs
    "c": (_HEX1, MODE_TREE, "c1"),  # layout 1: c/<h0>
    "c1": (_HEX1, MODE_TREE, "c2"),  # layout 1: c/<h0>/<h1>
    "c2": (_HEX62, MODE_BLOB, None),  # layout 1: c/<h0>/<h1>/<h[2:]>: content blobs
}
#: What a tree of each role is, for messages.
ROLE_NAMES = {
    "root": "root tree",
    "i": "index tree",
    "i1": "index tree",
    "c": "content tree",
    "c1": "content tree",
    "c2": "content tree",
}
# Layout d: "<letter>1" .. "<letter>(d-1)" are fan-out trees (one-hex-digit subtrees), "<letter>d"
# the shard trees: content blobs named h[d:] (64 - d hex digits) and the shard's index blob "i".
for _depth, _letter in FANOUT_LAYOUTS.items():
    for _level in range(1, _depth):
        ROLES[f"{_letter}{_level}"] = (_HEX1, MODE_TREE, f"{_letter}{_level + 1}")
        ROLE_NAMES[f"{_letter}{_level}"] = "fan-out tree"
    ROLES[f"{_letter}{_depth}"] = (re.compile(rb"\A(?:[0-9a-f]{%d}|i)\Z" % (64 - _depth)), MODE_BLOB, None)
    ROLE_NAMES[f"{_letter}{_depth}"] = "shard tree"
#: Subtrees whose whole content passed :meth:`LayoutChecker.problem`, remembered per checker.
_CHECKED_ENTRIES = 65536


def root_roles(entries: Entries, depth: int = 2) -> dict[bytes, str] | None:
    """The role of each entry of a root tree (``depth``: its fan-out depth, if it has a fan-out
    layout), or None if it has no layout."""
    if b"i" in entries:
        if all(name in (b"c", b"i") and mode == MODE_TREE for name, (mode, _id) in entries.items()):
            return {name: name.decode() for name in entries}
        return None
    fanout = all(_HEX1.match(name) and mode == MODE_TREE for name, (mode, _id) in entries.items())
    if depth in FANOUT_LAYOUTS and fanout:
        return dict.fromkeys(entries, f"{FANOUT_LAYOUTS[depth]}1")
    return None


def shape_problem(entries: Entries, role: str, depth: int = 2) -> str | None:
    """What in a tree of ``role`` does not fit memvault's layouts (never its bytes), or None
    (``depth``: a root's fan-out depth)."""
    if role == "root":
        if root_roles(entries, depth) is not None:
            return None
        return "a top-level entry that fits none of memvault's layouts"
    pattern, mode_required, _child = ROLES[role]
    if not entries:
        return "an empty subtree"
    for name, (mode, _id) in entries.items():
        if not pattern.match(name) or mode != mode_required:
            return "an entry out of place in memvault's layout"
    return None


def fanout_depth(root: Entries, read: Callable[[bytes], Entries]) -> int:
    """The depth of a fan-out root: how many trees lead to its first blob (2, 3 or 4; 2 when
    that is none of them, or for a layout 1 or empty root: whatever it is, the role checks then
    find what does not fit). A tree that ``read`` refuses (IntegrityError) is passed over for
    the next one, so that a hostile shard tree is refused when its shard is first needed, as in
    layout 2 (docs/format.md §8); when no blob is reached, a refused tree is taken for a shard
    tree. Reads four trees in a store that has none memvault did not write.
    """
    if not root or b"i" in root:
        return 2
    refused = 0

    def first_blob(entries: Entries, depth: int) -> int:
        nonlocal refused
        for name in sorted(entries):
            mode, obj_id = entries[name]
            if mode != MODE_TREE:
                return depth
            if depth >= max(FANOUT_LAYOUTS):
                return 0
            try:
                below = read(obj_id)
            except IntegrityError:
                refused = refused or depth + 1
                continue
            found = first_blob(below, depth + 1)
            if found:
                return found
        return 0

    depth = first_blob(root, 0) or refused
    return depth if depth in FANOUT_LAYOUTS else 2


def fresh_layout(format_version: int, max_files: int) -> int:
    """The layout of a commit on the empty tree: 1 in a format version 1 store, 2 in versions 2
    to 5, and from version 6 the shallowest fan-out layout that keeps a full store (``max_files``
    nodes) at :data:`SHARD_ENTRIES` or fewer per shard on average (layout 4 beyond 131,072)."""
    if format_version < 2:
        return 1
    if format_version < 6:
        return 2
    for depth, limit in _FRESH_LIMITS:
        if max_files <= limit:
            return depth
    return max(FANOUT_LAYOUTS)


def shard_digits(layout: int) -> int:
    """How many hex digits name a shard in ``layout`` (2 in layouts 1 and 2)."""
    return 2 if layout == 1 else layout


def tree_layout(root: Entries, read: Callable[[bytes], Entries], fresh: int) -> int:
    """The layout a commit on the root tree ``root`` keeps: its own (1 for a root holding ``i``,
    else its fan-out depth), and ``fresh`` (:func:`fresh_layout`) for the empty root."""
    if b"i" in root:
        return 1
    return fanout_depth(root, read) if root else fresh


def content_path(token: bytes, layout: int) -> tuple[bytes, ...]:
    """Where the content blob of the file with path token ``token`` sits in the tree."""
    h = token.hex().encode()
    if layout == 1:
        return (b"c", h[:1], h[1:2], h[2:])
    return (*(h[k : k + 1] for k in range(layout)), h[layout:])


def shard_path(shard: bytes, layout: int) -> tuple[bytes, ...]:
    """Where the index blob of ``shard`` (its hex digits) sits in the tree."""
    if layout == 1:
        return (b"i", shard[:1], shard[1:])
    return (*(shard[k : k + 1] for k in range(len(shard))), b"i")


def walk(
    root_id: bytes,
    read: Callable[[bytes, str, bytes], Entries | None],
    *,
    content: bool = True,
    memo: Memo | None = None,
    depth: int = 2,
) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
    """The index shards and content blobs of a tree in either layout.

    Args:
        root_id: the root tree's id.
        read: ``read(tree_id, role, prefix)`` returns the entries of a tree of that role found at
            that position (``prefix``: the hex digits of the token its entries continue), or None
            to skip it (a tree the caller found bad, or already walked at that same position: the
            same subtree at another position names other shards and tokens). It is the caller's to
            check each tree's shape.
        content: also collect content blobs (False skips layout 1's ``c`` subtree).
        memo: with ``content=False``, the shards found below each subtree, by ``(tree id, role,
            prefix)``, read and filled here: a subtree found in it is not read again (git ids
            name contents, so consecutive commits' trees share all but the changed subtrees).
            The caller bounds its size.
        depth: the root's fan-out depth (:func:`fanout_depth`), if it has a fan-out layout.

    Returns:
        ``(shard -> index blob id, path token -> content blob id)`` of the trees read.
    """
    shards: dict[bytes, bytes] = {}
    blobs: dict[bytes, bytes] = {}
    if content:
        memo = None

    def descend(tree_id: bytes, role: str, prefix: bytes) -> dict[bytes, bytes]:
        key = (tree_id, role, prefix)
        if memo is not None and key in memo:
            return memo[key]
        found: dict[bytes, bytes] = {}
        entries = read(tree_id, role, prefix)
        if entries is None:
            return found
        child = ROLES[role][2]
        for name, (_mode, obj_id) in sorted(entries.items()):
            if child is not None:
                found.update(descend(obj_id, child, prefix + name))
            elif role == "i1":
                found[prefix + name] = obj_id
            elif name == b"i":
                found[prefix] = obj_id
            elif content:
                blobs[bytes.fromhex((prefix + name).decode())] = obj_id
        if memo is not None:
            memo[key] = found
        return found

    root = read(root_id, "root", b"")
    roles = root_roles(root, depth) if root is not None else None
    if root is None or roles is None:
        return shards, blobs
    for name, role in sorted(roles.items()):
        if role == "c" and not content:
            continue
        shards.update(descend(root[name][1], role, b"" if role in ("i", "c") else name))
    return shards, blobs


class LayoutChecker:
    """Checks whole trees against the layouts, remembering subtrees that passed (so checking the
    next commit's tree reads only the trees that changed).

    Args:
        read: returns a tree's entries; raises IntegrityError if it cannot be read.
    """

    def __init__(self, read: Callable[[bytes], Entries]) -> None:
        self._read = read
        self._ok: dict[tuple[bytes, str], None] = {}
        #: Trees whose top ``levels`` passed: ``(tree id, role, levels)``.
        self._top_ok: dict[tuple[bytes, str, int], None] = {}

    def forget(self) -> None:
        """Forget the trees already checked (each is checked again when next met)."""
        self._ok.clear()
        self._top_ok.clear()

    def carry(self, parent_id: bytes, tree_id: bytes) -> None:
        """Take the root ``tree_id`` as checked as far as the root ``parent_id`` was, because this
        process built it from that one by the layout's rules (a commit in the same layout): the
        trees it changed are its own, the others were checked with ``parent_id``."""
        for levels in (1, 2):
            if (parent_id, "root", levels) in self._top_ok:
                if len(self._top_ok) >= _CHECKED_ENTRIES:
                    self._top_ok.clear()
                self._top_ok[(tree_id, "root", levels)] = None
                return

    def problem(self, tree_id: bytes, role: str = "root", *, levels: int | None = None) -> str | None:
        """A description of the first thing in the tree ``tree_id`` that does not fit, or None.

        Args:
            role: what the tree is (its place in the layout).
            levels: check the tree and only the subtrees this many levels below it (0: the tree
                alone); None: every subtree.

        Raises:
            IntegrityError: a tree in it cannot be read.
        """
        key = (tree_id, role)
        if key in self._ok or (levels is not None and (tree_id, role, levels) in self._top_ok):
            return None
        entries = self._read(tree_id)
        depth = fanout_depth(entries, self._read) if role == "root" else 2
        problem = shape_problem(entries, role, depth)
        if problem is not None:
            return problem
        if levels == 0:
            children: list[tuple[bytes, str]] = []
        elif role == "root":
            roles = root_roles(entries, depth) or {}
            children = [(entries[name][1], child_role) for name, child_role in roles.items()]
        else:
            child = ROLES[role][2]
            children = [(obj_id, child) for _mode, obj_id in entries.values()] if child is not None else []
        below = None if levels is None else levels - 1
        for obj_id, child_role in children:
            problem = self.problem(obj_id, child_role, levels=below)
            if problem is not None:
                return problem
        # A tree of blobs has nothing below it: checked at any level, it is checked whole.
        if levels is None or (role != "root" and ROLES[role][2] is None):
            if len(self._ok) >= _CHECKED_ENTRIES:
                self._ok.clear()
            self._ok[key] = None
        else:
            if len(self._top_ok) >= _CHECKED_ENTRIES:
                self._top_ok.clear()
            self._top_ok[(tree_id, role, levels)] = None
        return None
