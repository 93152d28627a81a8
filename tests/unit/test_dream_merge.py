"""The dream merge: each file takes main's and the dream's changes, and clashes are conflicts."""

from __future__ import annotations

import sys

import pytest

from memvault.dream.merge import FileConflict, MergePlan, three_way
from memvault.errors import InvalidInputError

BASE = b"# Cats\nline one\nline two\nline three\nline four\nline five\n"


def test_non_overlapping_edits_to_one_file_merge() -> None:
    ours = b"# Cats (main)\nline one\nline two\nline three\nline four\nline five\n"
    theirs = b"# Cats\nline one\nline two\nline three\nline four\nline five, consolidated\nline six\n"
    plan = three_way({"cats.md": BASE}, {"cats.md": ours}, {"cats.md": theirs})
    assert plan.ok
    assert plan.conflicts == []
    assert plan.changes == {
        "cats.md": b"# Cats (main)\nline one\nline two\nline three\nline four\nline five, consolidated\nline six\n"
    }


def test_overlapping_edits_conflict_and_render_with_markers() -> None:
    ours = b"# Cats\nline one\nline two by main\nline three\nline four\nline five\n"
    theirs = b"# Cats\nline one\nline two by the dream\nline three\nline four\nline five\n"
    plan = three_way({"cats.md": BASE}, {"cats.md": ours}, {"cats.md": theirs})
    assert not plan.ok
    assert plan.changes == {}
    assert plan.conflicts == [
        FileConflict(path="cats.md", reason="both changed the same lines", base=BASE, ours=ours, theirs=theirs)
    ]
    assert plan.conflicts[0].render() == (
        "# Cats\n"
        "line one\n"
        "<<<<<<< main\n"
        "line two by main\n"
        "||||||| fork\n"
        "line two\n"
        "=======\n"
        "line two by the dream\n"
        ">>>>>>> dream\n"
        "line three\n"
        "line four\n"
        "line five\n"
    )


def test_overlap_on_an_unterminated_last_line_keeps_markers_on_their_own_lines() -> None:
    conflict = three_way({"a.md": b"x\nend"}, {"a.md": b"x\nmain end"}, {"a.md": b"x\ndream end"}).conflicts[0]
    assert conflict.render() == ("x\n<<<<<<< main\nmain end\n||||||| fork\nend\n=======\ndream end\n>>>>>>> dream\n")


def test_dream_only_change_is_taken() -> None:
    plan = three_way({"a.md": b"old\n"}, {"a.md": b"old\n"}, {"a.md": b"new\n"})
    assert plan == MergePlan(changes={"a.md": b"new\n"}, conflicts=[])
    assert plan.ok


def test_main_only_change_is_kept_without_an_entry() -> None:
    plan = three_way({"a.md": b"old\n"}, {"a.md": b"main's\n"}, {"a.md": b"old\n"})
    assert plan == MergePlan(changes={}, conflicts=[])


def test_main_only_addition_and_deletion_need_no_entry() -> None:
    plan = three_way({"gone.md": b"x\n"}, {"new.md": b"y\n"}, {"gone.md": b"x\n"})
    assert plan == MergePlan(changes={}, conflicts=[])


def test_same_change_on_both_sides_needs_no_entry() -> None:
    plan = three_way(
        {"a.md": b"old\n", "d.md": b"bye\n"},
        {"a.md": b"same\n", "n.md": b"hi\n"},
        {"a.md": b"same\n", "n.md": b"hi\n"},
    )
    assert plan == MergePlan(changes={}, conflicts=[])


def test_deleted_on_main_changed_by_dream_conflicts() -> None:
    plan = three_way({"a.md": b"old\n"}, {}, {"a.md": b"dreamt\n"})
    assert plan.changes == {}
    assert plan.conflicts == [
        FileConflict(
            path="a.md", reason="deleted on main, changed by the dream", base=b"old\n", ours=None, theirs=b"dreamt\n"
        )
    ]
    assert plan.conflicts[0].render() == (
        "CONFLICT (deleted on main, changed by the dream): a.md\nfork: 4 bytes\nmain: absent\ndream: 7 bytes\n"
    )


def test_deleted_by_dream_changed_on_main_conflicts() -> None:
    plan = three_way({"a.md": b"old\n"}, {"a.md": b"main's\n"}, {})
    assert plan.changes == {}
    assert plan.conflicts == [
        FileConflict(
            path="a.md", reason="deleted by the dream, changed on main", base=b"old\n", ours=b"main's\n", theirs=None
        )
    ]
    assert plan.conflicts[0].render() == (
        "CONFLICT (deleted by the dream, changed on main): a.md\nfork: 4 bytes\nmain: 7 bytes\ndream: absent\n"
    )


def test_dream_deleting_an_untouched_file_is_a_deletion() -> None:
    plan = three_way({"a.md": b"old\n", "b.md": b"keep\n"}, {"a.md": b"old\n", "b.md": b"keep\n"}, {"b.md": b"keep\n"})
    assert plan == MergePlan(changes={"a.md": None}, conflicts=[])


def test_dream_adding_a_file_is_taken() -> None:
    plan = three_way({}, {}, {"new.md": b"summary\n"})
    assert plan == MergePlan(changes={"new.md": b"summary\n"}, conflicts=[])


def test_added_on_both_sides_with_same_content_needs_no_entry() -> None:
    plan = three_way({}, {"n.md": b"same\n"}, {"n.md": b"same\n"})
    assert plan == MergePlan(changes={}, conflicts=[])


def test_added_on_both_sides_with_different_content_conflicts() -> None:
    plan = three_way({}, {"n.md": b"main\n"}, {"n.md": b"dream!\n"})
    assert plan.changes == {}
    assert plan.conflicts == [
        FileConflict(
            path="n.md",
            reason="added on both sides with different content",
            base=None,
            ours=b"main\n",
            theirs=b"dream!\n",
        )
    ]
    assert plan.conflicts[0].render() == (
        "CONFLICT (added on both sides with different content): n.md\nfork: absent\nmain: 5 bytes\ndream: 7 bytes\n"
    )


def test_binary_changed_on_both_sides_conflicts_even_if_lines_would_merge() -> None:
    base = b"a\nb\nc\nd\n"
    ours = b"A\nb\nc\nd\n"
    theirs = b"a\nb\nc\nD\n"
    plan = three_way({"img.png": base}, {"img.png": ours}, {"img.png": theirs}, binary={"img.png"})
    assert plan.changes == {}
    assert plan.conflicts == [
        FileConflict(path="img.png", reason="binary file changed on both sides", base=base, ours=ours, theirs=theirs)
    ]
    assert plan.conflicts[0].render() == (
        "CONFLICT (binary file changed on both sides): img.png\n"
        "fork: binary, 8 bytes\n"
        "main: binary, 8 bytes\n"
        "dream: binary, 8 bytes\n"
    )


def test_binary_changed_by_dream_only_is_taken() -> None:
    plan = three_way({"img.png": b"\x89PNG1"}, {"img.png": b"\x89PNG1"}, {"img.png": b"\x89PNG2"}, binary=["img.png"])
    assert plan == MergePlan(changes={"img.png": b"\x89PNG2"}, conflicts=[])


def test_non_utf8_changed_on_both_sides_conflicts_and_renders() -> None:
    base = b"caf\xe9\n"
    ours = b"caf\xe9 au lait\n"
    theirs = b"caf\xe9 noir\n"
    plan = three_way({"x.md": base}, {"x.md": ours}, {"x.md": theirs})
    assert plan.changes == {}
    assert plan.conflicts == [
        FileConflict(path="x.md", reason="binary file changed on both sides", base=base, ours=ours, theirs=theirs)
    ]
    assert plan.conflicts[0].render() == (
        "CONFLICT (binary file changed on both sides): x.md\n"
        "fork: binary, 5 bytes\n"
        "main: binary, 13 bytes\n"
        "dream: binary, 10 bytes\n"
    )


def test_render_of_an_overlap_replaces_undecodable_bytes() -> None:
    conflict = FileConflict(
        path="x.md", reason="both changed the same lines", base=b"k\xff\n", ours=b"main\xfe\n", theirs=b"dream\n"
    )
    assert conflict.render() == ("<<<<<<< main\nmain\ufffd\n||||||| fork\nk\ufffd\n=======\ndream\n>>>>>>> dream\n")


def test_conflicts_are_sorted_by_path_and_clean_paths_still_merge() -> None:
    plan = three_way(
        {"b.md": b"1\n", "a.md": b"1\n", "c.md": b"1\n"},
        {"b.md": b"main\n", "a.md": b"main\n", "c.md": b"1\n"},
        {"b.md": b"dream\n", "a.md": b"dream\n", "c.md": b"dream\n"},
    )
    assert [c.path for c in plan.conflicts] == ["a.md", "b.md"]
    assert plan.changes == {"c.md": b"dream\n"}
    assert not plan.ok


def test_merge_equal_to_main_needs_no_entry() -> None:
    # the dream's only change is one main also made, plus main's own: the merge is main's content
    base = b"a\nb\nc\nd\ne\n"
    ours = b"A\nb\nc\nd\nE\n"
    theirs = b"A\nb\nc\nd\ne\n"
    plan = three_way({"f.md": base}, {"f.md": ours}, {"f.md": theirs})
    assert plan == MergePlan(changes={}, conflicts=[])


def test_crlf_lines_merge_byte_exact() -> None:
    base = b"a\r\nb\r\nc\r\nd\r\ne\r\n"
    ours = b"a\r\nB\r\nc\r\nd\r\ne\r\n"
    theirs = b"a\r\nb\r\nc\r\nD\r\ne\r\n"
    plan = three_way({"f.md": base}, {"f.md": ours}, {"f.md": theirs})
    assert plan == MergePlan(changes={"f.md": b"a\r\nB\r\nc\r\nD\r\ne\r\n"}, conflicts=[])


def test_missing_merge3_is_a_clear_error_only_when_a_line_merge_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "merge3", None)
    # no line merge needed: every rule but the line merge works without merge3
    plan = three_way(
        {"a.md": b"old\n", "d.md": b"x\n", "img.png": b"1"},
        {"a.md": b"old\n", "d.md": b"main\n", "img.png": b"2"},
        {"a.md": b"new\n", "img.png": b"3"},
        binary={"img.png"},
    )
    assert plan.changes == {"a.md": b"new\n"}
    assert [(c.path, c.reason) for c in plan.conflicts] == [
        ("d.md", "deleted by the dream, changed on main"),
        ("img.png", "binary file changed on both sides"),
    ]
    # a line merge is needed: the error names the extra
    with pytest.raises(InvalidInputError) as err:
        three_way({"f.md": b"a\nb\nc\n"}, {"f.md": b"A\nb\nc\n"}, {"f.md": b"a\nb\nC\n"})
    assert str(err.value) == (
        "Error: merging a dream needs merge3: install memvault with the dream extra (pip install 'memvault[dream]')."
    )
