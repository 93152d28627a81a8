"""memvault's tree serialisation against dulwich's, whole and patched (``GitStore.tree_update``).

dulwich's ``Tree`` is the oracle here: an independent implementation of git's tree format and
order (a tree sorts as if its name ended in ``/``). Names are drawn so that some are prefixes of
others and the same name flips between blob and tree, which is where git's order differs from a
plain sort.
"""

from __future__ import annotations

import os
from pathlib import Path

from dulwich.objects import Tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault.git.objects import MODE_BLOB, MODE_TREE, serialize_tree
from memvault.git.repo import GitStore

NAMES = st.sampled_from([b"a", b"ab", b"ab0", b"ab1", b"b", b"a0", b"0", b"00", b"z", b"c", b"i", b"ff"])
IDS = st.binary(min_size=20, max_size=20).map(lambda b: b.hex().encode())
ENTRY = st.tuples(st.sampled_from([MODE_BLOB, MODE_TREE]), IDS)
#: One step: set ``name`` to an entry, or remove it (None).
STEPS = st.lists(st.lists(st.tuples(NAMES, st.none() | ENTRY), min_size=1, max_size=4), min_size=1, max_size=12)


def apply_step(
    entries: dict[bytes, tuple[int, bytes]], step: list[tuple[bytes, tuple[int, bytes] | None]]
) -> list[bytes]:
    """Apply one step's changes to ``entries``; return the names it touched."""
    for name, value in step:
        if value is None:
            entries.pop(name, None)
        else:
            entries[name] = value
    return [name for name, _ in step]


def dulwich_tree(entries: dict[bytes, tuple[int, bytes]]) -> tuple[bytes, bytes]:
    tree = Tree()
    for name, (mode, obj_id) in entries.items():
        tree.add(name, mode, obj_id)
    return tree.as_raw_string(), tree.id


@given(st.dictionaries(NAMES, ENTRY, max_size=12))
def test_whole_trees_match_dulwich(entries: dict[bytes, tuple[int, bytes]]) -> None:
    raw, tree_id = dulwich_tree(entries)
    assert serialize_tree(entries) == raw
    assert GitStore.tree(entries).id == tree_id


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS)
def test_patched_trees_match_dulwich(tmp_path: Path, steps: list[list[tuple[bytes, tuple[int, bytes] | None]]]) -> None:
    repo = tmp_path / f"repo-{os.urandom(4).hex()}"
    git = GitStore.init(repo, durable=False)
    try:
        entries: dict[bytes, tuple[int, bytes]] = {}
        base: bytes | None = None
        for step in steps:
            tree = git.tree_update(base, entries, apply_step(entries, step))
            raw, tree_id = dulwich_tree(entries)
            assert tree.as_raw_string() == raw
            assert tree.id == tree_id
            base = tree.id
    finally:
        git.close()


def test_an_unknown_base_builds_the_whole_tree(tmp_path: Path) -> None:
    git = GitStore.init(tmp_path / "repo", durable=False)
    try:
        entries = {b"a": (MODE_BLOB, b"1" * 40), b"b": (MODE_TREE, b"2" * 40)}
        tree = git.tree_update(b"3" * 40, entries, [])  # never built here: nothing to patch
        assert tree.as_raw_string() == dulwich_tree(entries)[0]
    finally:
        git.close()


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(NAMES, ENTRY, min_size=1, max_size=12), STEPS)
def test_trees_read_back_are_patched_like_trees_built_here(
    tmp_path: Path, start: dict[bytes, tuple[int, bytes]], steps: list[list[tuple[bytes, tuple[int, bytes] | None]]]
) -> None:
    """A tree this object read (another process wrote it) is patched from the bytes it read."""
    repo = tmp_path / f"repo-{os.urandom(4).hex()}"
    writer = GitStore.init(repo, durable=False)
    tree = GitStore.tree(start)
    writer.write_pack([tree])
    writer.close()
    git = GitStore(repo, durable=False)
    try:
        entries = dict(git.tree_entries(tree.id))
        assert entries == start
        base: bytes | None = tree.id
        for step in steps:
            new = git.tree_update(base, entries, apply_step(entries, step))
            assert (new.as_raw_string(), new.id) == dulwich_tree(entries)
            base = new.id
    finally:
        git.close()


def test_a_superseded_base_is_rebuilt_whole_and_right(tmp_path: Path) -> None:
    """After a tree is patched into a new one, its cached entries are dropped; building from it
    again (a commit that failed and is retried) serialises it whole, still byte for byte."""
    git = GitStore.init(tmp_path / "repo", durable=False)
    try:
        entries = {b"a": (MODE_BLOB, b"1" * 40), b"b": (MODE_TREE, b"2" * 40)}
        base = git.tree_update(None, entries, [])
        first = {**entries, b"c": (MODE_BLOB, b"3" * 40)}
        git.tree_update(base.id, first, [b"c"])
        assert base.id not in git._tree_parts
        retry = {**entries, b"d": (MODE_TREE, b"4" * 40)}
        again = git.tree_update(base.id, retry, [b"d"])
        assert (again.as_raw_string(), again.id) == dulwich_tree(retry)
    finally:
        git.close()
