"""The store's typed read API for applications (``read_text``, ``read_bytes``, ``list``,
``exists``) and ``MemoryTool.clear_all_memory()``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import memvault
from memvault.agent.tool import CLEARED, AsyncMemoryTool, MemoryTool
from memvault.edits.undo import revert
from memvault.erasure.redact import shred_version
from memvault.errors import (
    InvalidInputError,
    InvalidPathError,
    LockedError,
    PathNotFoundError,
    RedactedError,
)
from memvault.history import log, resolve
from memvault.store.reads import MemoryEntry

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[memvault.MemoryStore]:
    key = tmp_path / "k.bin"
    key.write_bytes(bytes(32))
    key.chmod(0o600)
    with memvault.MemoryStore.create(tmp_path / "s", key_file=key) as s:
        s.put_file("/memories/a.md", "first\n")  # 1
        s.put_file("/memories/dir/b.md", "bee\n")  # 2
        s.put_file("/memories/dir/deep/c.md", "sea\n")  # 3
        s.put_file("/memories/a.md", "second ünïcode\n")  # 4
        s.put_file("/memories/img.png", PNG)  # 5
        yield s


def test_read_text_and_bytes_at_the_head_and_at_revisions(store: memvault.MemoryStore) -> None:
    assert store.read_text("/memories/a.md") == "second ünïcode\n"
    assert store.read_bytes("/memories/a.md") == "second ünïcode\n".encode()
    assert store.read_bytes("/memories/img.png") == PNG
    first = resolve(store, "#1")
    for rev in (1, "#1", first, first.decode(), first.decode()[:7], first[:12]):
        assert store.read_text("/memories/a.md", rev=rev) == "first\n", rev
    assert store.read_text("/memories/a.md", rev=store.head[0]) == store.read_text("/memories/a.md", rev="HEAD")
    assert store.read_text("/memories/dir/deep/c.md", rev=3) == "sea\n"


def test_list_and_exists(store: memvault.MemoryStore) -> None:
    assert store.list() == [
        MemoryEntry("/memories/a.md", "file", len("second ünïcode\n".encode())),
        MemoryEntry("/memories/dir", "dir", 0),
        MemoryEntry("/memories/img.png", "file", len(PNG)),
    ]
    assert store.list("/memories/dir") == [
        MemoryEntry("/memories/dir/b.md", "file", 4),
        MemoryEntry("/memories/dir/deep", "dir", 0),
    ]
    assert [e.path for e in store.list("/memories/dir/", recursive=True)] == [
        "/memories/dir/b.md",
        "/memories/dir/deep",
        "/memories/dir/deep/c.md",
    ]
    assert store.list(rev=1) == [MemoryEntry("/memories/a.md", "file", 6)]
    assert store.list(rev=0) == []
    assert store.exists("/memories") and store.exists("/memories/dir") and store.exists("/memories/dir/deep/c.md")
    assert not store.exists("/memories/nope.md")
    assert not store.exists("/memories/dir", rev=1) and store.exists("/memories/dir", rev=2)


def test_errors(store: memvault.MemoryStore) -> None:
    cases: list[tuple[object, type[Exception], str]] = [
        (lambda: store.read_text("/etc/passwd"), InvalidPathError, "Invalid path /etc/passwd"),
        (lambda: store.read_text("/memories/../x"), InvalidPathError, "Invalid path"),
        (lambda: store.exists("relative.md"), InvalidPathError, "Invalid path"),
        (
            lambda: store.read_text("/memories/nope.md"),
            PathNotFoundError,
            "Error: The file /memories/nope.md does not exist at that revision.",
        ),
        (
            lambda: store.read_text("/memories/dir"),
            InvalidPathError,
            "Error: /memories/dir is a directory, not a file; list it with list().",
        ),
        (
            lambda: store.read_bytes("/memories"),
            InvalidPathError,
            "Error: /memories is a directory, not a file; list it with list().",
        ),
        (
            lambda: store.read_text("/memories/img.png"),
            InvalidInputError,
            "Error: /memories/img.png is a binary file; read it with read_bytes().",
        ),
        (
            lambda: store.list("/memories/a.md"),
            InvalidPathError,
            "Error: /memories/a.md is a file, not a directory; read it with read_text().",
        ),
        (
            lambda: store.list("/memories/gone"),
            PathNotFoundError,
            "Error: The directory /memories/gone does not exist at that revision.",
        ),
        (lambda: store.read_text("/memories/a.md", rev=9), InvalidInputError, "Error: There is no commit #9."),
        (lambda: store.read_text("/memories/a.md", rev=-1), InvalidInputError, "Error: There is no commit #-1."),
        (lambda: store.list(rev="ffffffff"), InvalidInputError, "Error: Unknown revision 'ffffffff'."),
        (lambda: store.list(rev="HEAD~9"), InvalidInputError, "Error: Revision 'HEAD~9' goes back beyond the first"),
        (lambda: store.exists("/memories", rev="@{2000-01-01}"), InvalidInputError, "No commit was made at or before"),
        (lambda: store.exists("/memories", rev="yesterday"), InvalidInputError, "Error: Unknown revision 'yesterday'."),
        (lambda: store.read_text("/memories/dir/b.md", rev=1), PathNotFoundError, "does not exist at that revision"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind) as info:
            call()  # type: ignore[operator]
        assert message in str(info.value), (str(info.value), message)
    with pytest.raises(TypeError):
        store.read_text("/memories/a.md", rev=True)  # type: ignore[arg-type]


def test_the_read_api_takes_the_clis_revision_grammar(
    store: memvault.MemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every revision ``memvault cat --rev`` accepts, the read API accepts and resolves alike:
    ``HEAD~N``, ``HEAD^``, ``@{TIME}``, ``#N~M``, an abbreviation followed by ``^``."""
    from memvault.cli import main

    first = resolve(store, "#1").decode()
    # Commit 4 rewrote a.md: 'first\n' up to #3, the new text from #4 on.
    cases = {
        "HEAD~1": "second ünïcode\n",  # #4
        "HEAD~2": "first\n",  # #3
        "@~2": "first\n",
        "HEAD^^": "first\n",
        "#5~4": "first\n",  # #1
        f"{first[:7]}": "first\n",
        f"{first[:7].upper()}": "first\n",
        "#2^": "first\n",
        "@{2000-01-01T00:00:00Z}~0": None,  # no commit then
        "@{2999-01-01}": "second ünïcode\n",
        "@{2999-01-01 14:30}~1": "second ünïcode\n",
        "HEAD~9": None,
    }
    monkeypatch.setenv("MEMVAULT_STORE", str(store.root))
    monkeypatch.setenv("MEMVAULT_KEY_FILE", str(store.root.parent / "k.bin"))
    for spec, text in cases.items():
        status = main(["cat", "/memories/a.md", "--rev", spec])
        out, err = capsys.readouterr()
        if text is None:
            assert status == 2, (spec, err)
            with pytest.raises(InvalidInputError) as info:
                store.read_text("/memories/a.md", rev=spec)
            assert err == f"memvault: {str(info.value).removeprefix('Error: ')}\n", spec
            continue
        assert (status, out) == (0, text), (spec, err)
        assert store.read_text("/memories/a.md", rev=spec) == text, spec
        assert store.read_bytes("/memories/a.md", rev=spec) == text.encode(), spec
        assert store.exists("/memories/a.md", rev=spec), spec
        assert store.commit_of(spec) == resolve(store, spec), spec
    assert [e.path for e in store.list("/memories", rev="HEAD~3")] == ["/memories/a.md", "/memories/dir"]  # #2
    assert not store.exists("/memories/dir", rev="HEAD~4")  # #1


def test_an_abbreviation_needs_four_digits(store: memvault.MemoryStore) -> None:
    first = resolve(store, "#1").decode()
    assert store.list(rev=first[:4]) == [MemoryEntry("/memories/a.md", "file", 6)]
    with pytest.raises(InvalidInputError, match="Unknown revision"):
        store.list(rev=first[:3])


def test_a_redacted_version_raises_redacted_error(store: memvault.MemoryStore) -> None:
    shred_version(store, "/memories/a.md", "#1", actor="carol")
    with pytest.raises(RedactedError, match=r"^This version was redacted by carol at .* UTC; its content is gone\.$"):
        store.read_text("/memories/a.md", rev=1)
    with pytest.raises(RedactedError):
        store.read_bytes("/memories/a.md", rev="#1")
    assert store.exists("/memories/a.md", rev=1)  # there, but unreadable
    assert store.list(rev=1) == []  # its name went with its key
    assert store.read_text("/memories/a.md") == "second ünïcode\n"


# -- clear_all_memory ------------------------------------------------------------------------------


def test_clear_all_memory_is_one_commit_undone_by_revert(store: memvault.MemoryStore) -> None:
    tool = MemoryTool(store, actor="agent-7", session="s-1")
    head = store.head
    assert tool.clear_all_memory() == CLEARED == "All memory cleared"
    assert store.list() == [] and store.head[1] == head[1] + 1
    last = log(store, limit=1)[0]
    assert (last.actor, last.session, last.command, last.paths) == ("agent-7", "s-1", "clear", ("/memories",))
    assert sorted((c.op, c.path) for c in last.changes) == [
        ("deleted", "/memories/a.md"),
        ("deleted", "/memories/dir"),
        ("deleted", "/memories/dir/b.md"),
        ("deleted", "/memories/dir/deep"),
        ("deleted", "/memories/dir/deep/c.md"),
        ("deleted", "/memories/img.png"),
    ]
    # Empty already: no commit, same answer.
    assert tool.clear_all_memory() == CLEARED and store.head[1] == head[1] + 1
    # The model's view of an empty memory, through the same tool.
    assert "/memories" in str(tool.call({"command": "view", "path": "/memories"}))

    done = revert(store, last.commit_id)
    assert done.commit_id is not None
    assert store.read_text("/memories/dir/deep/c.md") == "sea\n" and store.read_bytes("/memories/img.png") == PNG
    assert [e.path for e in store.list(recursive=True)] == [
        "/memories/a.md",
        "/memories/dir",
        "/memories/dir/b.md",
        "/memories/dir/deep",
        "/memories/dir/deep/c.md",
        "/memories/img.png",
    ]


def test_async_clear_all_memory(store: memvault.MemoryStore) -> None:
    tool = AsyncMemoryTool(store, actor="async-agent", session="s-2")
    assert asyncio.run(tool.clear_all_memory()) == CLEARED
    assert store.list() == []
    last = log(store, limit=1)[0]
    assert (last.actor, last.command) == ("async-agent", "clear")


def test_clear_all_memory_raises_store_errors_to_the_application(store: memvault.MemoryStore) -> None:
    tool = MemoryTool(store)
    store.lock_timeout = 0.05
    other = memvault.MemoryStore.open(store.root, key_file=store.root.parent / "k.bin")
    try:
        with other.writing():
            start = time.monotonic()
            with pytest.raises(LockedError):
                tool.clear_all_memory()
            assert time.monotonic() - start < 5
    finally:
        other.close()
    assert len(store.list()) == 3


def test_tool_init_documents_its_arguments() -> None:
    doc = MemoryTool.__doc__ or ""
    for name in ("store:", "actor:", "session:", "cache_control:"):
        assert name in doc
    assert MemoryTool.clear_all_memory.__doc__ and "revert" in MemoryTool.clear_all_memory.__doc__
