"""Tests of the memory path grammar (memvault.paths)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.errors import InvalidPathError
from memvault.paths import (
    ROOT,
    MemoryPath,
    Reason,
    _name_reason,
    _name_suspect,
    _names_dotgit,
    display,
    fold_key,
    parse_path,
)
from memvault.settings import StoreSettings

VECTORS_FILE = Path(__file__).resolve().parent.parent / "vectors" / "hostile_paths.json"
HOSTILE: list[dict[str, str]] = json.loads(VECTORS_FILE.read_text(encoding="ascii"))

PREFIX = "Error: Invalid path "
BAD_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _all_reasons(s: StoreSettings) -> set[str]:
    limits = {
        Reason.PATH_TOO_LONG: s.max_path_bytes,
        Reason.SEGMENT_TOO_LONG: s.max_segment_bytes,
        Reason.TOO_DEEP: s.max_depth,
    }
    reasons = set()
    for name, value in vars(Reason).items():
        if name.isupper() and name != "NOT_A_STRING":
            reasons.add(value.format(limit=limits[value]) if value in limits else value)
    return reasons


REASONS = _all_reasons(StoreSettings())


def _reason_of(raw: object, s: StoreSettings | None = None) -> str:
    with pytest.raises(InvalidPathError) as info:
        parse_path(raw, s)
    message = str(info.value)
    head = f"{PREFIX}{display(raw)}: "
    assert message.startswith(head)
    return message[len(head) :]


def _check_message(raw: str, message: str, reasons: set[str] = REASONS) -> None:
    assert message.startswith("Error: Invalid path")
    assert message.isprintable(), message
    assert not any(unicodedata.category(c) in BAD_CATEGORIES for c in message)
    assert len(message) <= 400
    # Nothing but the displayed input and one reason.
    head = f"{PREFIX}{display(raw)}: "
    assert message.startswith(head)
    assert message[len(head) :] in reasons


# --------------------------------------------------------------------------- vectors


def test_vector_file_is_large_ascii_and_unique() -> None:
    assert VECTORS_FILE.read_bytes().isascii()
    assert len(HOSTILE) >= 70
    assert all(set(v) == {"path", "desc"} and v["desc"] for v in HOSTILE)
    assert len({v["path"] for v in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize("vector", HOSTILE, ids=[f"{i:03d}-{v['desc']}" for i, v in enumerate(HOSTILE)])
def test_hostile_vector_rejected(vector: dict[str, str]) -> None:
    raw = vector["path"]
    with pytest.raises(InvalidPathError) as info:
        parse_path(raw)
    _check_message(raw, str(info.value))
    assert info.value.message == str(info.value)


REQUIRED_VECTORS = [
    "../",
    "..\\",
    "%2e%2e%2f",
    "%252e%252e%252f",
    "..%c0%af",
    "/memories/../x",
    "/memories/a/../../x",
    "/memoriesX/a",
    "/memories_evil",
    "memories/a",
    "/etc/passwd",
    "//memories",
    "/memories//a",
    "/memories/./a",
    "",
    "/",
    "/Memories/a",
    "/memories/a//",
]


@pytest.mark.parametrize("raw", REQUIRED_VECTORS)
def test_required_vectors_present(raw: str) -> None:
    assert raw in {v["path"] for v in HOSTILE}


@pytest.mark.parametrize(
    "needle",
    [
        "\x00", "\r", "\n", "\t", "\x85", "\u202e", "\u200b", "\ufeff", "\u2025", "\uff0e\uff0e",
        "\uff0f", "\uff3c", "\ufe52", "\ud800", "\ue000", "\u0378", "\u2028", "e\u0301", ":",
        "*", "?", "<", ">", "|", '"', "COM\u00b9", "GIT~1", ".GIT", "nul.txt", "LPT1",
    ],
)  # fmt: skip
def test_required_characters_covered(needle: str) -> None:
    assert any(needle in v["path"] for v in HOSTILE)


# --------------------------------------------------------------------------- accepted

ACCEPTED: list[tuple[str, tuple[str, ...]]] = [
    ("/memories", ()),
    ("/memories/", ()),
    ("/memories/notes.md", ("notes.md",)),
    ("/memories/dir/", ("dir",)),
    ("/memories/a/b/c.txt", ("a", "b", "c.txt")),
    ("/memories/caf\u00e9.md", ("caf\u00e9.md",)),
    ("/memories/\u65e5\u672c\u8a9e.md", ("\u65e5\u672c\u8a9e.md",)),
    ("/memories/M\u00fcnchen/\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac.txt",
     ("M\u00fcnchen", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac.txt")),
    ("/memories/\U0001f4ddnotes.md", ("\U0001f4ddnotes.md",)),
    ("/memories/.hidden", (".hidden",)),
    ("/memories/node_modules", ("node_modules",)),
    ("/memories/.gitignore", (".gitignore",)),
    ("/memories/.github/workflows", (".github", "workflows")),
    ("/memories/git~2", ("git~2",)),
    ("/memories/console.md", ("console.md",)),
    ("/memories/COM10", ("COM10",)),
    ("/memories/auxiliary/nullable", ("auxiliary", "nullable")),
    ("/memories/..a/...b", ("..a", "...b")),
    ("/memories/a b", ("a b",)),
    ("/memories/100%/50%off/a%2", ("100%", "50%off", "a%2")),
    ("/memories/a.b.c", ("a.b.c",)),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "parts"), ACCEPTED)
def test_accepted(raw: str, parts: tuple[str, ...]) -> None:
    path = parse_path(raw)
    assert path == MemoryPath(parts)
    assert path.parts == parts
    expected_text = ROOT + "".join("/" + p for p in parts)
    assert path.text == expected_text
    assert str(path) == expected_text
    assert parse_path(path.text) == path


def test_max_segment_accepted() -> None:
    seg = "a" * 255
    assert parse_path(f"/memories/{seg}").parts == (seg,)
    seg2 = "\u00e9" * 127 + "a"  # 255 bytes, 128 characters
    assert len(seg2.encode()) == 255
    assert parse_path(f"/memories/{seg2}").parts == (seg2,)
    assert _reason_of(f"/memories/{seg2}a") == "a segment is longer than 255 bytes"


def test_max_path_accepted() -> None:
    raw = "/memories/" + "/".join(["a" * 200] * 5) + "/" + "b" * 9
    assert len(raw.encode()) == 1024
    path = parse_path(raw)
    assert path.text == raw
    assert len(path.parts) == 6
    # A tolerated trailing slash does not count: the canonical text is still 1024 bytes.
    assert parse_path(raw + "/") == path
    assert _reason_of(raw + "b") == "it is longer than 1024 bytes"
    wide = "/memories/" + "/".join(["\u00e9" * 100] * 5) + "/" + "x" * 9
    assert len(wide.encode()) == 1024
    assert parse_path(wide).text == wide
    assert _reason_of(wide + "x") == "it is longer than 1024 bytes"


def test_max_depth_accepted() -> None:
    raw = "/memories/" + "/".join(f"d{i}" for i in range(16))
    assert len(parse_path(raw).parts) == 16
    assert _reason_of(raw + "/d16") == "it is nested deeper than 16 levels"


def test_root_forms_equal() -> None:
    assert parse_path("/memories") == parse_path("/memories/") == MemoryPath(())
    assert parse_path("/memories").is_root


# --------------------------------------------------------------------------- reasons


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", Reason.EMPTY),
        ("/memoriesX/a", Reason.OUTSIDE_ROOT),
        ("/memories//a", Reason.EMPTY_SEGMENT),
        ("/memories/a:b/../x", Reason.DOT_SEGMENT),
        ("/memories/a\\b/c\x00", Reason.CONTROL),
        ("/memories/a%2e/b\\c", Reason.BACKSLASH),
        ("/memories/a:b/%2e", Reason.PERCENT),
        ("/memories/nul/a:b", Reason.RESERVED_CHAR),
        ("/memories/CON/\uff41", Reason.NOT_NORMALIZED),
        ("/memories/.git.", Reason.DOTGIT),
        ("/memories/.git ", Reason.DOTGIT),
        ("/memories/nul/.git", Reason.DOTGIT),
        ("/memories/a./nul", Reason.DEVICE_NAME),
        ("/memories/nul ", Reason.DEVICE_NAME),
        ("/memories/nul .txt", Reason.DEVICE_NAME),
        ("/memories/ a/b.", Reason.TRAILING_DOT_OR_SPACE),
        ("/memories/ a", Reason.LEADING_SPACE),
        ("/memories/" + "a" * 256 + "/b.", Reason.TRAILING_DOT_OR_SPACE),
    ],
)
def test_reason_order(raw: str, reason: str) -> None:
    assert _reason_of(raw) == reason


@pytest.mark.parametrize(
    ("seg", "expected"),
    [
        (".git", True),
        (".GiT", True),
        ("gIt~1", True),
        (".git. .", True),
        (".git::$INDEX_ALLOCATION", True),
        (".git:stream", True),
        (".\u200cgit", True),  # HFS+ ignores U+200C
        (".gitignore", False),
        (".git~1", False),
        ("git~2", False),
        (".git x", False),
        ("git", False),
        ("x.git", False),
    ],
)
def test_dotgit_mirror_of_dulwich(seg: str, expected: bool) -> None:
    # The grammar refuses ':' and U+200C earlier; the mirror itself must still match dulwich.
    assert _names_dotgit(seg) is expected


def test_exact_message_format() -> None:
    with pytest.raises(InvalidPathError) as info:
        parse_path("/memories/../x")
    assert str(info.value) == "Error: Invalid path /memories/../x: it contains a '.' or '..' segment"
    with pytest.raises(InvalidPathError) as info:
        parse_path("/memories/a\u202eb")
    assert str(info.value) == (
        "Error: Invalid path /memories/a\\u202eb: it contains a control, format, invisible or unassigned character"
    )


@pytest.mark.parametrize("raw", [None, b"/memories/a", 5, ["/memories"], MemoryPath(()), 1.5])
def test_non_string_rejected(raw: object) -> None:
    with pytest.raises(InvalidPathError) as info:
        parse_path(raw)
    assert str(info.value) == "Error: Invalid path: expected a string"


def test_str_subclass_cannot_subvert() -> None:
    class Sneaky(str):
        def split(self, *args: Any, **kwargs: Any) -> list[str]:
            return ["ok"]

        def startswith(self, *args: Any, **kwargs: Any) -> bool:
            return True

    assert parse_path(Sneaky("/memories/a/b")) == MemoryPath(("a", "b"))
    assert type(parse_path(Sneaky("/memories/a")).parts[0]) is str
    assert _reason_of(Sneaky("/etc/passwd")) == Reason.OUTSIDE_ROOT
    assert _reason_of(Sneaky("/memories/../x")) == Reason.DOT_SEGMENT


def test_custom_settings_limits() -> None:
    s = StoreSettings(max_path_bytes=30, max_segment_bytes=5, max_depth=2)
    assert parse_path("/memories/abcde/fghij", s).parts == ("abcde", "fghij")
    assert _reason_of("/memories/abcdef", s) == "a segment is longer than 5 bytes"
    assert _reason_of("/memories/a/b/c", s) == "it is nested deeper than 2 levels"
    # The total length is checked first, even before the depth and segment rules.
    assert _reason_of("/memories/abcde/abcde/abcde/abcd", s) == "it is longer than 30 bytes"
    assert _reason_of("/memories/abcdefghijklmnopqrstu", s) == "it is longer than 30 bytes"
    assert _reason_of("/memories/\u00e9\u00e9\u00e9", s) == "a segment is longer than 5 bytes"
    with pytest.raises(InvalidPathError) as info:
        parse_path("/memories/" + "a/" * 40, s)
    _check_message("/memories/" + "a/" * 40, str(info.value), _all_reasons(s))


def test_huge_input_rejected_quickly() -> None:
    raw = "/memories/" + "\u202e" * 2_000_000
    assert _reason_of(raw) == "it is longer than 1024 bytes"
    with pytest.raises(InvalidPathError) as info:
        parse_path(raw)
    assert len(str(info.value)) <= 400


def test_error_is_invalid_path_error() -> None:
    with pytest.raises(InvalidPathError) as info:
        parse_path("/memories/a\x00")
    assert info.value.exit_status == InvalidPathError.exit_status


# --------------------------------------------------------------------------- MemoryPath


def test_memory_path_helpers() -> None:
    root = parse_path("/memories")
    a = parse_path("/memories/a")
    ab = parse_path("/memories/a/b.md")
    ax = parse_path("/memories/ax")
    assert root.is_root and not a.is_root
    assert root.name == "" and a.name == "a" and ab.name == "b.md"
    assert root.parent == root
    assert ab.parent == a and a.parent == root
    assert a.child("b.md") == ab
    assert root.child("a") == a
    assert ab.is_within(a) and ab.is_within(root) and ab.is_within(ab)
    assert not a.is_within(ab)
    assert not ax.is_within(a)  # segment match, not a string prefix
    assert not a.is_within(ax)
    assert ab.relative_to(root) == ("a", "b.md")
    assert ab.relative_to(a) == ("b.md",)
    assert ab.relative_to(ab) == ()
    with pytest.raises(ValueError):
        a.relative_to(ab)
    with pytest.raises(ValueError):
        ax.relative_to(a)
    assert str(ab) == "/memories/a/b.md" == ab.text
    assert root.text == "/memories"


def test_memory_path_is_frozen_hashable_and_slotted() -> None:
    a = parse_path("/memories/a")
    with pytest.raises(AttributeError):
        a.parts = ("b",)  # type: ignore[misc]
    assert {a, parse_path("/memories/a/")} == {a}
    assert not hasattr(a, "__dict__")


# --------------------------------------------------------------------------- fold_key


def test_fold_key() -> None:
    assert fold_key("Notes.md") == fold_key("notes.md") == fold_key("NOTES.MD")
    assert fold_key("Stra\u00dfe") == fold_key("STRASSE")
    assert fold_key("\uff4e\uff4f\uff54\uff45\uff53") == fold_key("notes")
    assert fold_key("cafe\u0301") == fold_key("caf\u00e9")
    assert fold_key("a") != fold_key("b")
    assert fold_key("notes.md") != fold_key("notes.txt")


# --------------------------------------------------------------------------- display


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("abc", "abc"),
        ("/memories/caf\u00e9 \u65e5\u672c", "/memories/caf\u00e9 \u65e5\u672c"),
        ("a\\b", "a\\\\b"),
        ("a\x00b", "a\\x00b"),
        ("\r\n\t\x1b\x7f\x85", "\\x0d\\x0a\\x09\\x1b\\x7f\\x85"),
        ("\u202e", "\\u202e"),
        ("\u200b\ufeff\u2028\u2029", "\\u200b\\ufeff\\u2028\\u2029"),
        ("\ud800", "\\ud800"),
        ("\ue000\u0378", "\\ue000\\u0378"),
        ("\U000f0000", "\\U000f0000"),
        ("a\u00a0b", "a\\xa0b"),
        (5, "5"),
        (b"x", "b'x'"),
        ("", ""),
    ],
)
def test_display(raw: object, shown: str) -> None:
    assert display(raw) == shown


def test_display_truncates() -> None:
    assert display("x" * 200) == "x" * 200
    assert display("x" * 201) == "x" * 200 + "..."
    assert display("x" * 1_000_000) == "x" * 200 + "..."
    assert display("\x00" * 100) == "\\x00" * 50 + "..."
    # Never cut inside an escape.
    assert display("ab" + "\u202e" * 100) == "ab" + "\\u202e" * 33 + "..."
    assert display("\\" * 150) == "\\\\" * 100 + "..."


def test_display_hostile_str() -> None:
    class Bad:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    assert display(Bad()) == "<unprintable>"


# --------------------------------------------------------------------------- properties

ANY_CHAR = st.characters(codec=None, exclude_categories=())
TRICKY_CHAR = st.sampled_from(
    list("aAbz09._- /\\%:~$eEgGiItTnNuUlLcCoOpPrRxX")
    + ["\x00", "\n", "\u202e", "\u200b", "\u200c", "\ufeff", "\u2025", "\uff0e", "\uff0f", "\ufe52"]
    + ["\u0301", "\u00e9", "\u00b9", "\ud800", "\ue000", "\u0378", "\u2028", "\u0131", "\u212a"]
)
SEGMENT = st.one_of(
    st.sampled_from(["", ".", "..", ".git", "GIT~1", "nul", "Con.md", "com1", "a.", " a", "%2e", "\u2025"]),
    st.text(TRICKY_CHAR, max_size=8),
    st.text(ANY_CHAR, max_size=6),
)
STRUCTURED = st.builds(
    lambda segs, slash: "/memories/" + "/".join(segs) + ("/" if slash else ""),
    st.lists(SEGMENT, max_size=6),
    st.booleans(),
)
ANY_PATH = st.one_of(st.text(ANY_CHAR, max_size=40), STRUCTURED, st.text(TRICKY_CHAR, max_size=30))


def _check_outcome(raw: str) -> MemoryPath | None:
    try:
        path = parse_path(raw)
    except InvalidPathError as exc:
        _check_message(raw, str(exc))
        return None
    assert isinstance(path, MemoryPath)
    assert parse_path(path.text) == path
    assert path.text == raw.rstrip("/") or (path.is_root and raw == "/memories/") or raw == path.text + "/"
    assert path.text == ROOT or path.text.startswith(ROOT + "/")
    assert len(path.text.encode("utf-8")) <= 1024 and len(path.parts) <= 16
    for seg in path.parts:
        assert seg not in ("", ".", "..")
        assert "/" not in seg and "\\" not in seg and not any(c in seg for c in ':*?"<>|')
        assert not any(unicodedata.category(c) in BAD_CATEGORIES for c in seg)
        assert unicodedata.normalize("NFKC", seg) == seg == unicodedata.normalize("NFC", seg)
        assert seg.lower().rstrip(". ") not in (".git", "git~1")
        assert seg[-1] not in ". " and seg[0] != " "
        assert len(seg.encode("utf-8")) <= 255
    return path


@settings(max_examples=1500, deadline=None)
@given(ANY_PATH)
def test_property_parse_is_total_and_canonical(raw: str) -> None:
    _check_outcome(raw)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b.md", "caf\u00e9", "\u65e5", ".x", "n o"]), max_size=8), st.booleans())
def test_property_valid_paths_round_trip(segs: list[str], slash: bool) -> None:
    raw = "/memories/" + "/".join(segs) + ("/" if slash and segs else "")
    path = _check_outcome(raw)
    assert path is not None
    assert path.parts == tuple(segs)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(st.text(TRICKY_CHAR, min_size=1, max_size=8), st.text(ANY_CHAR, min_size=1, max_size=6)))
def test_property_name_filter_is_sound(seg: str) -> None:
    # The fast filter may only skip segments on which the exact name rules find nothing.
    assert _name_reason([seg]) is None or _name_suspect([seg])


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.text(TRICKY_CHAR, min_size=1, max_size=8), st.text(ANY_CHAR, min_size=1, max_size=6)))
def test_property_accepted_segments_pass_dulwich(seg: str) -> None:
    dulwich_index = pytest.importorskip("dulwich.index")
    try:
        parse_path("/memories/" + seg)
    except InvalidPathError:
        return
    element = seg.encode("utf-8")
    assert dulwich_index.validate_path_element_ntfs(element)
    assert dulwich_index.validate_path_element_hfs(element)
