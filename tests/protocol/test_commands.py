"""Protocol conformance: every command and every documented string, through MemoryTool.call.

Expected strings are written out by hand from Anthropic's memory tool documentation (the docs win
where the SDK reference deviates; README "The protocol"), never computed by the code under test.
"""

from __future__ import annotations

import base64

import pytest
from anthropic.lib.tools._beta_functions import ToolError

import memvault
from memvault.settings import StoreSettings

HEADER = "Here're the files and directories up to 2 levels deep in {}, excluding hidden items and node_modules:"


def ok(tool: memvault.MemoryTool, **command: object) -> object:
    return tool.call(command)


def err(tool: memvault.MemoryTool, **command: object) -> str:
    with pytest.raises(ToolError) as info:
        tool.call(command)
    return str(info.value)


def seq(store: memvault.MemoryStore) -> int:
    return store.head[1]


# -- view --------------------------------------------------------------------------------------


def test_view_empty_root_is_not_an_error(tool: memvault.MemoryTool) -> None:
    assert ok(tool, command="view", path="/memories") == HEADER.format("/memories") + "\n4.0K\t/memories"


def test_view_directory_two_levels_sorted_hidden_excluded(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/b.md", file_text="x" * 5632)
    ok(tool, command="create", path="/memories/a/one.txt", file_text="hello")
    ok(tool, command="create", path="/memories/a/deep/three/four.txt", file_text="deep")
    ok(tool, command="create", path="/memories/.hidden", file_text="secret")
    ok(tool, command="create", path="/memories/node_modules/pkg.json", file_text="{}")
    ok(tool, command="create", path="/memories/big.bin", file_text="z")
    out = ok(tool, command="view", path="/memories")
    assert out == "\n".join(
        [
            HEADER.format("/memories"),
            "4.0K\t/memories",
            "4.0K\t/memories/a",
            "4.0K\t/memories/a/deep",
            "5B\t/memories/a/one.txt",
            "5.5K\t/memories/b.md",
            "1B\t/memories/big.bin",
        ]
    )


def test_view_subdirectory_and_trailing_slash(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a/one.txt", file_text="hello")
    expected = HEADER.format("/memories/a") + "\n4.0K\t/memories/a\n5B\t/memories/a/one.txt"
    assert ok(tool, command="view", path="/memories/a") == expected
    assert ok(tool, command="view", path="/memories/a/") == expected


def test_view_file_with_line_numbers(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/notes.txt", file_text="Hello World\nThis is line two\n")
    assert ok(tool, command="view", path="/memories/notes.txt") == (
        "Here's the content of /memories/notes.txt with line numbers:\n     1\tHello World\n     2\tThis is line two"
    )


def test_view_range(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/n.txt", file_text="l1\nl2\nl3\nl4\n")
    head = "Here's the content of /memories/n.txt with line numbers:\n"
    assert ok(tool, command="view", path="/memories/n.txt", view_range=[2, 3]) == head + "     2\tl2\n     3\tl3"
    assert ok(tool, command="view", path="/memories/n.txt", view_range=[3, -1]) == head + "     3\tl3\n     4\tl4"
    assert ok(tool, command="view", path="/memories/n.txt", view_range=[4, 99]) == head + "     4\tl4"
    # Out-of-range numbers are clipped as the SDK reference does (the docs are silent).
    assert ok(tool, command="view", path="/memories/n.txt", view_range=[0, 2]) == head + "     1\tl1\n     2\tl2"
    assert ok(tool, command="view", path="/memories/n.txt", view_range=[5, 6]) == head
    assert ok(tool, command="view", path="/memories/n.txt", view_range=[3, 2]) == head
    for bad in ([1], ["a", 2], [True, 2], [1, 2, 3]):
        assert err(tool, command="view", path="/memories/n.txt", view_range=bad).startswith(
            "Error: Invalid `view_range` parameter"
        )
    assert err(tool, command="view", path="/memories/n.txt", view_range="1-2") == (
        "Error: Field `view_range` of command `view` must be a list."
    )


def test_view_missing(tool: memvault.MemoryTool) -> None:
    assert err(tool, command="view", path="/memories/nope.md") == (
        "The path /memories/nope.md does not exist. Please provide a valid path."
    )


def test_view_truncates_long_text_with_notice(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    line = "x" * 99  # 100 characters with its newline
    ok(tool, command="create", path="/memories/long.txt", file_text=(line + "\n") * 300)
    out = ok(tool, command="view", path="/memories/long.txt")
    assert isinstance(out, str)
    lines = out.split("\n")
    # Each row is 6 + 1 + 99 characters plus its newline: 107; 149 rows fit in 16,000.
    assert lines[1] == "     1\t" + line
    assert lines[149] == "   149\t" + line
    assert lines[150] == (
        "[/memories/long.txt has 300 lines and 30000 characters; only lines 1-149 are shown "
        "(a view is limited to 16000 characters). Use view_range to read on, e.g. view_range [150, -1].]"
    )
    assert len(lines) == 151
    # Ranged views are bounded the same way, so paging cannot bypass the limit.
    second = ok(tool, command="view", path="/memories/long.txt", view_range=[150, -1])
    assert isinstance(second, str)
    assert second.split("\n")[1] == "   150\t" + line
    assert second.split("\n")[-1].endswith(
        "only lines 150-298 are shown (a view is limited to 16000 characters). "
        "Use view_range to read on, e.g. view_range [299, -1].]"
    )
    last = ok(tool, command="view", path="/memories/long.txt", view_range=[299, -1])
    assert last == "Here's the content of /memories/long.txt with line numbers:\n   299\t" + line + "\n   300\t" + line
    middle = ok(tool, command="view", path="/memories/long.txt", view_range=[10, 200])
    assert isinstance(middle, str) and middle.endswith(
        "only lines 10-158 are shown (a view is limited to 16000 characters). Use view_range to read on, e.g. view_range [159, 200].]"
    )


def test_view_of_one_overlong_line_is_cut(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/one.txt", file_text="y" * 20_000)
    out = ok(tool, command="view", path="/memories/one.txt")
    assert isinstance(out, str)
    header, row, notice = out.split("\n")
    assert row == "     1\t" + "y" * (16_000 - 7)
    assert notice == "[Line 1 of /memories/one.txt is longer than the 16000-character view limit and is cut.]"


def test_oversized_text_fields_are_refused_early(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/s.txt", file_text="a\n")
    before = seq(store)
    big = "z" * (100 * 1024 + 1)
    for command in (
        {"command": "create", "path": "/memories/b.txt", "file_text": big},
        {"command": "str_replace", "path": "/memories/s.txt", "old_str": big, "new_str": "x"},
        {"command": "str_replace", "path": "/memories/s.txt", "old_str": "a", "new_str": big},
        {"command": "insert", "path": "/memories/s.txt", "insert_line": 0, "insert_text": big},
    ):
        field = next(k for k, v in command.items() if v is big)
        assert err(tool, **command) == (
            f"Error: `{field}` is {len(big)} characters long, over the limit of {100 * 1024} bytes per file"
        )
    assert seq(store) == before
    huge_range = list(range(10_000))
    assert err(tool, command="view", path="/memories/s.txt", view_range=huge_range) == (
        "Error: Invalid `view_range` parameter: a list of 10000 items. It should be a list of two integers."
    )


def test_view_line_limit(store: memvault.MemoryStore) -> None:
    big = memvault.MemoryStore.create(
        store.root.parent / "big", passphrase="pw long enough", kdf=memvault.KdfParams(memory_kib=8, iterations=1, lanes=1),
        settings=StoreSettings(max_file_bytes=4 * 1024 * 1024),
    )  # fmt: skip
    tool = memvault.MemoryTool(big)
    ok(tool, command="create", path="/memories/many.txt", file_text="\n" * 1_000_000)
    assert err(tool, command="view", path="/memories/many.txt") == (
        "File /memories/many.txt exceeds maximum line limit of 999,999 lines."
    )
    # Exactly 999,999 lines is allowed (the SDK is off by one here; the docs say "more than").
    ok(tool, command="create", path="/memories/max.txt", file_text="\n" * 999_999)
    out = ok(tool, command="view", path="/memories/max.txt", view_range=[999_999, -1])
    assert out == "Here's the content of /memories/max.txt with line numbers:\n999999\t"


def test_view_image_returns_content_block(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    store.put_file("/memories/chart.png", png)
    out = ok(tool, command="view", path="/memories/chart.png")
    assert out == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode()},
        }
    ]
    assert err(tool, command="str_replace", path="/memories/chart.png", old_str="PNG", new_str="x") == (
        "Error: /memories/chart.png is a binary file and cannot be edited as text."
    )


# -- create ------------------------------------------------------------------------------------------


def test_create_and_exists(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    assert (
        ok(tool, command="create", path="/memories/a.md", file_text="1")
        == "File created successfully at: /memories/a.md"
    )
    before = seq(store)
    assert (
        err(tool, command="create", path="/memories/a.md", file_text="2") == "Error: File /memories/a.md already exists"
    )
    assert seq(store) == before
    assert ok(tool, command="view", path="/memories/a.md").endswith("     1\t1")  # type: ignore[union-attr]


def test_create_overwrite_setting(tmp_path: object) -> None:
    from pathlib import Path

    s = memvault.MemoryStore.create(
        Path(str(tmp_path)) / "s", passphrase="pw long enough", kdf=memvault.KdfParams(memory_kib=8, iterations=1, lanes=1),
        settings=StoreSettings(overwrite_on_create=True),
    )  # fmt: skip
    tool = memvault.MemoryTool(s)
    ok(tool, command="create", path="/memories/a.md", file_text="1")
    assert (
        ok(tool, command="create", path="/memories/a.md", file_text="2")
        == "File created successfully at: /memories/a.md"
    )
    assert ok(tool, command="view", path="/memories/a.md").endswith("     1\t2")  # type: ignore[union-attr]


def test_create_makes_parents_and_refuses_below_a_file(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/x/y/z.md", file_text="deep")
    assert "4.0K\t/memories/x/y" in ok(tool, command="view", path="/memories")  # type: ignore[operator]
    assert err(tool, command="create", path="/memories/x/y/z.md/below.md", file_text="no") == (
        "Error: Cannot create /memories/x/y/z.md/below.md: /memories/x/y/z.md is a file, not a directory"
    )
    assert err(tool, command="create", path="/memories/x", file_text="no") == "Error: /memories/x is a directory"
    assert err(tool, command="create", path="/memories", file_text="no").startswith("Error: /memories is a directory")


def test_create_size_limit_and_file_count(tmp_path: object) -> None:
    from pathlib import Path

    s = memvault.MemoryStore.create(
        Path(str(tmp_path)) / "s", passphrase="pw long enough", kdf=memvault.KdfParams(memory_kib=8, iterations=1, lanes=1),
        settings=StoreSettings(max_file_bytes=100, max_files=2),
    )  # fmt: skip
    tool = memvault.MemoryTool(s)
    assert err(tool, command="create", path="/memories/big.md", file_text="é" * 51) == (
        "Error: The content for /memories/big.md is 102 bytes, over the limit of 100 bytes per file"
    )
    ok(tool, command="create", path="/memories/1.md", file_text="a")
    ok(tool, command="create", path="/memories/2.md", file_text="b")
    assert err(tool, command="create", path="/memories/3.md", file_text="c") == (
        "Error: The memory store is full: it holds at most 2 files"
    )
    ok(tool, command="str_replace", path="/memories/1.md", old_str="a", new_str="x" * 100)
    assert err(tool, command="str_replace", path="/memories/1.md", old_str="x", new_str="yy").startswith(
        "No replacement was performed. Multiple occurrences"
    )
    assert err(tool, command="insert", path="/memories/2.md", insert_line=0, insert_text="z" * 100).startswith(
        "Error: The content for /memories/2.md is 103 bytes"
    )


def test_case_fold_sibling_collision_refused(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/Notes.md", file_text="a")
    assert err(tool, command="create", path="/memories/notes.md", file_text="b") == (
        "Error: The path /memories/notes.md collides with the existing /memories/Notes.md "
        "(names differ only in case or form)"
    )
    assert err(tool, command="create", path="/memories/NOTES.MD/x.md", file_text="b").startswith(
        "Error: The path /memories/NOTES.MD collides"
    )
    # Renaming a file to a different case of its own name is fine.
    assert ok(tool, command="rename", old_path="/memories/Notes.md", new_path="/memories/notes.md") == (
        "Successfully renamed /memories/Notes.md to /memories/notes.md"
    )


# -- str_replace -------------------------------------------------------------------------------------


def test_str_replace_success_and_snippet(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/p.txt", file_text="a\nb\nFavorite color: blue\nc\nd\ne\n")
    out = ok(
        tool,
        command="str_replace",
        path="/memories/p.txt",
        old_str="Favorite color: blue",
        new_str="Favorite color: green",
    )
    assert out == (
        "The memory file has been edited. Snippet of /memories/p.txt with line numbers:\n"
        "     1\ta\n     2\tb\n     3\tFavorite color: green\n     4\tc\n     5\td"
    )


def test_str_replace_new_str_optional_deletes(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/p.txt", file_text="keep DROP keep\n")
    ok(tool, command="str_replace", path="/memories/p.txt", old_str=" DROP")
    assert ok(tool, command="view", path="/memories/p.txt").endswith("     1\tkeep keep")  # type: ignore[union-attr]


def test_str_replace_errors(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/p.txt", file_text="x\ny\nx\n")
    ok(tool, command="create", path="/memories/d/f.txt", file_text="x")
    before = seq(store)
    assert err(tool, command="str_replace", path="/memories/missing.txt", old_str="x", new_str="y") == (
        "Error: The path /memories/missing.txt does not exist. Please provide a valid path."
    )
    assert err(tool, command="str_replace", path="/memories/d", old_str="x", new_str="y") == (
        "Error: The path /memories/d does not exist. Please provide a valid path."
    )
    assert err(tool, command="str_replace", path="/memories/p.txt", old_str="zzz", new_str="y") == (
        "No replacement was performed, old_str `zzz` did not appear verbatim in /memories/p.txt."
    )
    assert err(tool, command="str_replace", path="/memories/p.txt", old_str="x", new_str="y") == (
        "No replacement was performed. Multiple occurrences of old_str `x` in lines: 1, 3. Please ensure it is unique"
    )
    assert seq(store) == before


# -- insert --------------------------------------------------------------------------------------------


def test_insert(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/todo.txt", file_text="one\ntwo\n")
    assert ok(tool, command="insert", path="/memories/todo.txt", insert_line=2, insert_text="three\n") == (
        "The file /memories/todo.txt has been edited."
    )
    assert ok(tool, command="insert", path="/memories/todo.txt", insert_line=0, insert_text="zero") == (
        "The file /memories/todo.txt has been edited."
    )
    assert ok(tool, command="view", path="/memories/todo.txt") == (
        "Here's the content of /memories/todo.txt with line numbers:\n"
        "     1\tzero\n     2\tone\n     3\ttwo\n     4\tthree"
    )


def test_insert_errors(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/todo.txt", file_text="one\ntwo\n")
    before = seq(store)
    assert err(tool, command="insert", path="/memories/nope.txt", insert_line=0, insert_text="x") == (
        "Error: The path /memories/nope.txt does not exist"
    )
    assert err(tool, command="insert", path="/memories", insert_line=0, insert_text="x") == (
        "Error: The path /memories does not exist"
    )
    for line in (3, -1):
        assert err(tool, command="insert", path="/memories/todo.txt", insert_line=line, insert_text="x") == (
            f"Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, 2]"
        )
    assert seq(store) == before


# -- delete ------------------------------------------------------------------------------------------------


def test_delete_file_and_directory(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/d/a.txt", file_text="a")
    ok(tool, command="create", path="/memories/d/e/b.txt", file_text="b")
    ok(tool, command="create", path="/memories/keep.txt", file_text="k")
    assert ok(tool, command="delete", path="/memories/d/a.txt") == "Successfully deleted /memories/d/a.txt"
    assert ok(tool, command="delete", path="/memories/d/e/b.txt") == "Successfully deleted /memories/d/e/b.txt"
    # An emptied directory remains until it is itself deleted.
    assert "4.0K\t/memories/d/e" in ok(tool, command="view", path="/memories")  # type: ignore[operator]
    assert ok(tool, command="delete", path="/memories/d") == "Successfully deleted /memories/d"
    assert ok(tool, command="view", path="/memories") == (
        HEADER.format("/memories") + "\n4.0K\t/memories\n1B\t/memories/keep.txt"
    )


def test_delete_errors(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    before = seq(store)
    assert err(tool, command="delete", path="/memories/nope") == "Error: The path /memories/nope does not exist"
    assert err(tool, command="delete", path="/memories") == "Error: Cannot delete the /memories directory itself"
    assert err(tool, command="delete", path="/memories/") == "Error: Cannot delete the /memories directory itself"
    assert seq(store) == before


# -- rename --------------------------------------------------------------------------------------------------


def test_rename_file_and_directory(tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/draft.txt", file_text="d")
    assert ok(tool, command="rename", old_path="/memories/draft.txt", new_path="/memories/final.txt") == (
        "Successfully renamed /memories/draft.txt to /memories/final.txt"
    )
    ok(tool, command="create", path="/memories/dir/sub/x.txt", file_text="x\n")
    assert ok(tool, command="rename", old_path="/memories/dir", new_path="/memories/moved/here") == (
        "Successfully renamed /memories/dir to /memories/moved/here"
    )
    assert ok(tool, command="view", path="/memories/moved/here/sub/x.txt") == (
        "Here's the content of /memories/moved/here/sub/x.txt with line numbers:\n     1\tx"
    )
    assert err(tool, command="view", path="/memories/dir/sub/x.txt").startswith("The path /memories/dir/sub/x.txt does")


def test_rename_errors(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.txt", file_text="a")
    ok(tool, command="create", path="/memories/b.txt", file_text="b")
    ok(tool, command="create", path="/memories/d/x.txt", file_text="x")
    before = seq(store)
    assert err(tool, command="rename", old_path="/memories/zz", new_path="/memories/c") == (
        "Error: The path /memories/zz does not exist"
    )
    assert err(tool, command="rename", old_path="/memories/a.txt", new_path="/memories/b.txt") == (
        "Error: The destination /memories/b.txt already exists"
    )
    assert err(tool, command="rename", old_path="/memories", new_path="/memories/x") == (
        "Error: Cannot rename the /memories directory itself"
    )
    assert err(tool, command="rename", old_path="/memories/d", new_path="/memories/d/inner") == (
        "Error: Cannot move /memories/d into itself (/memories/d/inner)"
    )
    assert err(tool, command="rename", old_path="/memories/d", new_path="/memories/a.txt/inner") == (
        "Error: Cannot create /memories/a.txt/inner: /memories/a.txt is a file, not a directory"
    )
    assert seq(store) == before


# -- malformed input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ({"command": "launch", "path": "/memories"}, "Error: Unknown command `launch`. Valid commands are: view, create, str_replace, insert, delete, rename."),
        ({"path": "/memories"}, "Error: Missing required field `command`. Valid commands are: view, create, str_replace, insert, delete, rename."),
        ({"command": "create", "path": "/memories/a"}, "Error: Missing required field `file_text` for command `create`."),
        ({"command": "view"}, "Error: Missing required field `path` for command `view`."),
        ({"command": "create", "path": 7, "file_text": "x"}, "Error: Field `path` of command `create` must be a string."),
        ({"command": "insert", "path": "/memories/a", "insert_line": "2", "insert_text": "x"}, "Error: Field `insert_line` of command `insert` must be an integer."),
        ({"command": "insert", "path": "/memories/a", "insert_line": True, "insert_text": "x"}, "Error: Field `insert_line` of command `insert` must be an integer."),
        ({"command": "rename", "old_path": "/memories/a"}, "Error: Missing required field `new_path` for command `rename`."),
        ({"command": "create", "path": "/memories/a", "file_text": "\ud800"}, "Error: Field `file_text` is not valid Unicode text (it contains a lone surrogate)."),
        ({"command": "redact", "path": "/memories/a"}, "Error: Unknown command `redact`. Valid commands are: view, create, str_replace, insert, delete, rename."),
    ],
)  # fmt: skip
def test_malformed_input_is_a_clean_tool_error(
    store: memvault.MemoryStore, tool: memvault.MemoryTool, command: dict[str, object], message: str
) -> None:
    before = seq(store)
    assert err(tool, **command) == message
    assert seq(store) == before


def test_non_mapping_input(tool: memvault.MemoryTool) -> None:
    with pytest.raises(ToolError) as info:
        tool.call(["view", "/memories"])
    assert str(info.value) == "Error: The memory tool input must be a JSON object."


def test_unexpected_exception_is_generic(
    store: memvault.MemoryStore, tool: memvault.MemoryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*a: object, **k: object) -> None:
        raise OSError(28, "No space left on device: '/secret/host/path'")

    monkeypatch.setattr(store, "reading", boom)
    message = err(tool, command="view", path="/memories")
    assert message == "Error: Internal memory store error."
    assert "/secret" not in message


def test_sdk_command_models_dispatch(tool: memvault.MemoryTool) -> None:
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand, BetaMemoryTool20250818ViewCommand

    create = BetaMemoryTool20250818CreateCommand(command="create", path="/memories/m.md", file_text="hi")
    assert tool.execute(create) == "File created successfully at: /memories/m.md"
    view = BetaMemoryTool20250818ViewCommand(command="view", path="/memories/m.md")
    assert tool.execute(view) == "Here's the content of /memories/m.md with line numbers:\n     1\thi"


def test_views_create_no_commits(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="a\n")
    before = seq(store)
    ok(tool, command="view", path="/memories")
    ok(tool, command="view", path="/memories/a.md")
    ok(tool, command="view", path="/memories/a.md", view_range=[1, 1])
    assert seq(store) == before


def test_each_mutation_is_exactly_one_commit(store: memvault.MemoryStore, tool: memvault.MemoryTool) -> None:
    from memvault.history import log

    commands = [
        {"command": "create", "path": "/memories/a/b.md", "file_text": "x\n"},
        {"command": "str_replace", "path": "/memories/a/b.md", "old_str": "x", "new_str": "y"},
        {"command": "insert", "path": "/memories/a/b.md", "insert_line": 1, "insert_text": "z"},
        {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/c"},
        {"command": "delete", "path": "/memories/c"},
    ]
    for i, command in enumerate(commands, start=1):
        tool.call(command)
        assert seq(store) == i
    entries = log(store)
    assert [(e.seq, e.actor, e.session, e.command, e.paths) for e in entries] == [
        (5, "agent", "session-1", "delete", ("/memories/c",)),
        (4, "agent", "session-1", "rename", ("/memories/a", "/memories/c")),
        (3, "agent", "session-1", "insert", ("/memories/a/b.md",)),
        (2, "agent", "session-1", "str_replace", ("/memories/a/b.md",)),
        (1, "agent", "session-1", "create", ("/memories/a/b.md",)),
        (0, "memvault", "", "init", ()),
    ]


def test_insert_keeps_requested_blank_lines(tool: memvault.MemoryTool) -> None:
    """One trailing LF ends the inserted line; further LFs are blank lines (the SDK drops them)."""
    ok(tool, command="create", path="/memories/t.txt", file_text="a\nb")
    ok(tool, command="insert", path="/memories/t.txt", insert_line=1, insert_text="X\n\n")
    assert ok(tool, command="view", path="/memories/t.txt") == (
        "Here's the content of /memories/t.txt with line numbers:\n     1\ta\n     2\tX\n     3\t\n     4\tb"
    )


def _view_rows_one_by_one(lines: list[str], start: int, end: int, limit: int) -> tuple[list[str], bool]:
    """The rows a numbered view shows, added one at a time against the character budget (the
    rule ``_view_file`` states), and whether the first row was cut."""
    rows: list[str] = []
    used = 0
    for number in range(start, end + 1):
        row = f"{str(number).rjust(6)}\t{lines[number - 1]}"
        if used + len(row) + 1 > limit:
            if not rows:
                return [row[:limit]], True
            break
        rows.append(row)
        used += len(row) + 1
    return rows, False


def test_numbered_view_fits_the_budget_exactly_as_row_by_row() -> None:
    """The one-pass join of a view that fits is the row-by-row result, at and around the limit,
    for whole files and ranges (including ones past the end and negative ends)."""
    import random
    from types import SimpleNamespace

    from memvault.paths import parse_path
    from memvault.protocol import commands as protocol

    assert protocol.MAX_LINES < 10**protocol._LINE_NUMBER_WIDTH
    path = parse_path("/memories/a.md", StoreSettings())
    rng = random.Random(11)
    checked_fits = checked_cut = 0
    for _ in range(3000):
        big = rng.random() < 0.1  # line numbers around the prepared row prefixes' end (2048)
        n = rng.randint(2030, 2070) if big else rng.randint(0, 30)
        lines = ["".join(rng.choice("ab \r") for _ in range(rng.randint(0, 3 if big else 40))) for _ in range(n)]
        text = "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")
        shown = protocol._lines(text)
        exact = sum(len(x) + 8 for x in shown)
        limit = max(1, exact + rng.randint(-20, 5))
        if big:
            view_range = [rng.randint(2000, n + 2), rng.choice([-1, rng.randint(2000, n + 3)])]
        else:
            view_range = (
                None if rng.random() < 0.4 else [rng.randint(-2, n + 2), rng.choice([-1, -3, rng.randint(0, n + 3)])]
            )
        store = SimpleNamespace(settings=SimpleNamespace(view_max_chars=limit))
        out = protocol._view_file(store, path, text, view_range)  # type: ignore[arg-type]
        header = f"Here's the content of {path.text} with line numbers:\n"
        start, end = (1, len(shown)) if view_range is None else protocol._view_range(view_range, len(shown))
        rows, cut = _view_rows_one_by_one(shown, start, end, limit)
        if not cut and start + len(rows) - 1 >= end:
            assert out == header + "\n".join(rows)
            checked_fits += 1
        else:
            assert out.startswith(header + "\n".join(rows) + "\n[")
            checked_cut += 1
    assert checked_fits > 500 and checked_cut > 500
