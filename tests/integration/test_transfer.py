"""Import of plain memory folders, export of a tree, export of the history as plaintext git."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic.tools import BetaLocalFilesystemMemoryTool
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

import memvault
from conftest import make_store
from memvault.cli import main
from memvault.errors import InvalidInputError, LimitExceededError, PathExistsError
from memvault.history import log, read_at, tree_at
from memvault.paths import Reason, parse_path
from memvault.settings import StoreSettings
from memvault.store import Transaction
from memvault.transfer import ImportRefusedError, export_plaintext_git, export_tree, import_dir

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


@pytest.fixture
def umask0() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _files_on_disk(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def _modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(os.lstat(root).st_mode)}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = os.lstat(p).st_mode
    return out


def _store_files(store: memvault.MemoryStore, rev: str = "HEAD") -> dict[str, bytes]:
    return {e.path: read_at(store, e.path, rev) for e in tree_at(store, rev) if e.kind == "file"}


# -- import --------------------------------------------------------------------------------------------


def test_import_sdk_tool_folder(tmp_path: Path, store: memvault.MemoryStore) -> None:
    base = tmp_path / "sdk"
    sdk = BetaLocalFilesystemMemoryTool(base_path=str(base))
    sdk.call({"command": "create", "path": "/memories/prefs.md", "file_text": "likes tea\nhates coffee\n"})
    sdk.call({"command": "str_replace", "path": "/memories/prefs.md", "old_str": "tea", "new_str": "green tea"})
    sdk.call({"command": "insert", "path": "/memories/prefs.md", "insert_line": 0, "insert_text": "# Prefs"})
    sdk.call({"command": "create", "path": "/memories/projects/alpha/notes.md", "file_text": "ünïcode ✓"})
    sdk.call({"command": "create", "path": "/memories/tmp.md", "file_text": "x"})
    sdk.call({"command": "rename", "old_path": "/memories/tmp.md", "new_path": "/memories/projects/moved.md"})
    sdk.call({"command": "create", "path": "/memories/gone/x.md", "file_text": "x"})
    sdk.call({"command": "delete", "path": "/memories/gone/x.md"})
    # A crashed SDK write leaves a temp file; a dot-file is kept but reported.
    leftover = f".tmp-{os.getpid()}-{uuid.uuid4()}"
    (base / "memories" / leftover).write_text("half")
    (base / "memories" / ".hidden.md").write_text("dot")

    before = store.head
    result = import_dir(store, base, session="migration-1")

    assert result.layout == "sdk-base"
    expected = {
        "/memories/prefs.md": b"# Prefs\nlikes green tea\nhates coffee\n",
        "/memories/projects/alpha/notes.md": "ünïcode ✓".encode(),
        "/memories/projects/moved.md": b"x",
        "/memories/.hidden.md": b"dot",
    }
    assert _store_files(store) == expected
    assert result.imported == tuple(sorted(expected))
    assert result.directories == (
        "/memories/gone",
        "/memories/projects",
        "/memories/projects/alpha",
    )
    assert tree_at(store, "HEAD", "/memories/gone")[0].kind == "dir"  # the empty directory came too
    assert result.hidden == ("/memories/.hidden.md",)
    assert [(s.source, s.reason) for s in result.skipped] == [(leftover, "a temporary file of the SDK memory tool")]
    # One commit, attributed to the operator.
    entries = log(store, limit=2)
    assert entries[0].seq == before[1] + 1 and entries[1].commit_id == before[0].decode()
    assert (entries[0].actor, entries[0].session, entries[0].command) == ("operator", "migration-1", "import")
    assert result.commit_id == entries[0].commit_id and result.seq == entries[0].seq
    assert {c.path for c in entries[0].changes if c.kind == "file"} == set(expected)
    with store.reading() as view:
        assert [view.get(p).binary for p in expected] == [False] * 4  # type: ignore[union-attr]


def test_import_root_folder_with_prefix_and_binaries(tmp_path: Path, store: memvault.MemoryStore) -> None:
    src = tmp_path / "memory"  # a Claude Code memory/ folder: imported as is
    (src / "sub").mkdir(parents=True)
    (src / "MEMORY.md").write_text("index\n")
    (src / "sub" / "pic.PNG").write_bytes(PNG)
    (src / "memories").mkdir()  # not the only entry: a plain subdirectory
    (src / "memories" / "m.md").write_text("m")

    result = import_dir(store, src, prefix="/memories/claude-code", actor="me")

    assert result.layout == "root"
    assert _store_files(store) == {
        "/memories/claude-code/MEMORY.md": b"index\n",
        "/memories/claude-code/sub/pic.PNG": PNG,
        "/memories/claude-code/memories/m.md": b"m",
    }
    with store.reading() as view:
        assert view.get("/memories/claude-code/sub/pic.PNG").binary is True  # type: ignore[union-attr]
        assert view.get("/memories/claude-code/MEMORY.md").binary is False  # type: ignore[union-attr]
    assert log(store, limit=1)[0].paths == ("/memories/claude-code",)
    assert log(store, limit=1)[0].actor == "me"


HOSTILE = {
    "cafe\u0301.md": Reason.NOT_NORMALIZED,
    "CON": Reason.DEVICE_NAME,
    "back\\slash.md": Reason.BACKSLASH,
    "bell\x07.md": Reason.CONTROL,
}


def _hostile_folder(root: Path) -> Path:
    root.mkdir()
    (root / "ok.md").write_text("fine")
    for name in HOSTILE:
        (root / name).write_text("bad")
    (root / "bad\x1bdir").mkdir()
    (root / "bad\x1bdir" / "inside.md").write_text("never")
    (root / "latin1.txt").write_bytes(b"caf\xe9")
    return root


def test_invalid_entries_refuse_the_import(tmp_path: Path, store: memvault.MemoryStore) -> None:
    src = _hostile_folder(tmp_path / "src")
    head = store.head
    with pytest.raises(ImportRefusedError) as info:
        import_dir(store, src)
    assert store.head == head  # nothing written
    reasons = {p.source: p.reason for p in info.value.problems}
    assert reasons == {
        "CON": "Invalid path /memories/CON: " + HOSTILE["CON"],
        "back\\\\slash.md": "Invalid path /memories/back\\\\slash.md: " + HOSTILE["back\\slash.md"],
        "bad\\x1bdir": "Invalid path /memories/bad\\x1bdir: "
        + Reason.CONTROL
        + " (the directory and everything in it were not imported)",
        "bell\\x07.md": "Invalid path /memories/bell\\x07.md: " + HOSTILE["bell\x07.md"],
        "cafe\u0301.md": "Invalid path /memories/cafe\u0301.md: " + HOSTILE["cafe\u0301.md"],
        "latin1.txt": "it is not UTF-8 text (only .png, .jpg and .jpeg files may be binary)",
    }
    assert str(info.value).startswith("Error: Nothing was imported: 6 entries cannot be imported (")
    assert info.value.exit_status == 4
    assert "\x1b" not in str(info.value) and "\x07" not in str(info.value)


def test_invalid_entries_skipped_on_request(tmp_path: Path, store: memvault.MemoryStore) -> None:
    src = _hostile_folder(tmp_path / "src")
    result = import_dir(store, src, skip_invalid=True)
    assert result.imported == ("/memories/ok.md",)
    assert _store_files(store) == {"/memories/ok.md": b"fine"}
    assert sorted(s.source for s in result.skipped) == sorted(
        ["CON", "back\\\\slash.md", "bad\\x1bdir", "bell\\x07.md", "cafe\u0301.md", "latin1.txt"]
    )


def test_symlinks_and_special_files_are_skipped(tmp_path: Path, store: memvault.MemoryStore) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("SECRET-OUTSIDE")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "real.md").write_text("real")
    (src / "link.md").symlink_to(outside / "secret.md")
    (src / "d" / "linkdir").symlink_to(outside)
    os.mkfifo(src / "fifo")

    result = import_dir(store, src)

    assert _store_files(store) == {"/memories/real.md": b"real"}
    assert sorted((s.source, s.reason) for s in result.skipped) == [
        ("d/linkdir", "a symbolic link (never followed)"),
        ("fifo", "not a regular file or directory"),
        ("link.md", "a symbolic link (never followed)"),
    ]
    # A symbolic link as the source itself is refused too.
    (tmp_path / "srclink").symlink_to(src)
    with pytest.raises(InvalidInputError, match="not a directory"):
        import_dir(store, tmp_path / "srclink")


def test_existing_files_need_overwrite(tmp_path: Path, store: memvault.MemoryStore) -> None:
    store.put_file("/memories/a.md", "old")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("new")
    (src / "b.md").write_text("b")
    head = store.head
    with pytest.raises(PathExistsError, match=r"1 file\(s\) already exist in the store \(/memories/a.md\)"):
        import_dir(store, src)
    assert store.head == head
    result = import_dir(store, src, overwrite=True)
    assert result.overwritten == ("/memories/a.md",)
    assert _store_files(store) == {"/memories/a.md": b"new", "/memories/b.md": b"b"}


def test_store_limits_are_enforced(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", StoreSettings(max_files=3, max_file_bytes=10))
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.md").write_text("x" * 11)
    (src / "small.md").write_text("x" * 10)
    with pytest.raises(ImportRefusedError, match="big.md: it is larger than the limit of 10 bytes per file"):
        import_dir(store, src)
    assert import_dir(store, src, skip_invalid=True).imported == ("/memories/small.md",)
    many = tmp_path / "many"
    many.mkdir()
    for i in range(4):
        (many / f"f{i}.md").write_text("x")
    with pytest.raises(LimitExceededError, match="more than 3 files"):
        import_dir(store, many)
    for i in range(3):
        (many / f"f{i}.md").unlink()
    (many / "g.md").write_text("x")
    (many / "h.md").write_text("x")
    with pytest.raises(LimitExceededError, match="at most 3 files"):  # 1 stored + 3 new
        import_dir(store, many)
    store.close()


def test_scrub_hook_sees_paths_and_texts(tmp_path: Path, store: memvault.MemoryStore) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("token=sk-123")
    (src / "p.png").write_bytes(PNG)
    seen: list[tuple[str, str]] = []

    def scrub(field: str, value: str) -> str:
        seen.append((field, value))
        return value.replace("sk-123", "[REDACTED]") if field == "file_text" else value.replace("a.md", "b.md")

    import_dir(store, src, scrub=scrub)
    assert _store_files(store) == {"/memories/b.md": b"token=[REDACTED]", "/memories/p.png": PNG}
    assert sorted(seen) == [("file_text", "token=sk-123"), ("path", "/memories/a.md"), ("path", "/memories/p.png")]


# -- export of a tree ----------------------------------------------------------------------------------


def _populate(store: memvault.MemoryStore) -> None:
    tool = memvault.MemoryTool(store, actor="agent", session="s-1")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "first\n"})
    tool.call({"command": "create", "path": "/memories/dir/deep/b.md", "file_text": "ünï\r\nline2"})
    store.put_file("/memories/dir/img.png", PNG, actor="op")
    store.transact(
        lambda txn: txn.make_dirs(parse_path("/memories/empty")),
        command="mkdir",
        paths=("/memories/empty",),
        actor="op",
        session="",
    )
    tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "first", "new_str": "second"})


def test_export_round_trip_with_exact_modes(tmp_path: Path, store: memvault.MemoryStore, umask0: None) -> None:
    _populate(store)
    target = tmp_path / "out"
    result = export_tree(store, target)

    on_disk = _files_on_disk(target)
    assert on_disk == {p.removeprefix("/memories/"): data for p, data in _store_files(store).items()}
    assert on_disk["a.md"] == b"second\n" and on_disk["dir/img.png"] == PNG
    modes = _modes(target)
    assert modes.pop(".") == 0o700
    assert modes == {
        "a.md": stat.S_IFREG | 0o600,
        "dir": stat.S_IFDIR | 0o700,
        "dir/deep": stat.S_IFDIR | 0o700,
        "dir/deep/b.md": stat.S_IFREG | 0o600,
        "dir/img.png": stat.S_IFREG | 0o600,
        "empty": stat.S_IFDIR | 0o700,
    }
    assert result.commit_id == store.head[0].decode()
    assert set(result.files) == set(_store_files(store))
    assert set(result.directories) == {"/memories/dir", "/memories/dir/deep", "/memories/empty"}

    # An older revision, into an existing empty directory (mode forced to 0700).
    older = tmp_path / "older"
    older.mkdir(mode=0o777)
    export_tree(store, older, rev="HEAD~1")
    assert stat.S_IMODE(os.lstat(older).st_mode) == 0o700
    assert _files_on_disk(older)["a.md"] == b"first\n"


def test_export_refuses_unsuitable_targets(tmp_path: Path, store: memvault.MemoryStore) -> None:
    _populate(store)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(PathExistsError, match="not empty"):
        export_tree(store, full)
    assert os.listdir(full) == ["keep.txt"] and (full / "keep.txt").read_text() == "mine"

    only_link = tmp_path / "only_link"
    only_link.mkdir()
    (only_link / "a.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(PathExistsError, match="not empty"):
        export_tree(store, only_link)
    assert not (tmp_path / "elsewhere.md").exists()

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(PathExistsError, match="symbolic link"):
        export_tree(store, tmp_path / "link")
    assert os.listdir(real) == []

    (tmp_path / "file").write_text("x")
    with pytest.raises(PathExistsError, match="not a directory"):
        export_tree(store, tmp_path / "file")


def test_export_symlink_swapped_in_before_open(
    tmp_path: Path, store: memvault.MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between mkdir and open: the new directory is replaced by a link outside."""
    _populate(store)
    outside = tmp_path / "outside"
    outside.mkdir()
    real_mkdir = os.mkdir
    swaps: list[str] = []

    def mkdir_then_swap(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(path, mode, dir_fd=dir_fd)
        if dir_fd is not None:
            os.rename(path, f"{path}.moved", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.symlink(outside, path, dir_fd=dir_fd)
            swaps.append(path)

    monkeypatch.setattr(os, "mkdir", mkdir_then_swap)
    with pytest.raises(PathExistsError, match="changed while exporting"):
        export_tree(store, tmp_path / "out")
    monkeypatch.undo()
    assert swaps == ["dir"]
    assert os.listdir(outside) == []


def test_export_symlink_swapped_in_after_open(
    tmp_path: Path, store: memvault.MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a directory is open, swapping its name for a link does not redirect the writes."""
    _populate(store)
    outside = tmp_path / "outside"
    outside.mkdir()
    real_open = os.open
    swaps: list[str] = []

    def open_then_swap(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if dir_fd is not None and flags & os.O_DIRECTORY and not path.endswith(".moved"):
            os.rename(path, f"{path}.moved", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.symlink(outside, path, dir_fd=dir_fd)
            swaps.append(path)
        return fd

    monkeypatch.setattr(os, "open", open_then_swap)
    export_tree(store, tmp_path / "out")
    monkeypatch.undo()
    assert sorted(swaps) == ["deep", "dir", "empty"]
    assert os.listdir(outside) == []
    files = _files_on_disk(tmp_path / "out")  # os.walk does not follow the planted links
    assert files == {
        "a.md": b"second\n",
        "dir.moved/img.png": PNG,
        "dir.moved/deep.moved/b.md": "ünï\r\nline2".encode(),
    }


def test_export_race_with_a_swapping_thread(tmp_path: Path, store: memvault.MemoryStore) -> None:
    """A concurrent process swaps every new directory for a link outside while the export runs."""

    def fill(txn: Transaction) -> None:
        for d in range(30):
            for f in range(8):
                txn.write_file(parse_path(f"/memories/d{d:02}/f{f}.md"), b"x" * 200)

    store.transact(fill, command="fill", paths=(), actor="t", session="")
    outside = tmp_path / "outside"
    outside.mkdir()
    swapped_during_export = 0
    for attempt in range(10):
        target = tmp_path / f"out{attempt}"
        target.mkdir()  # the pre-existing empty directory case
        running = threading.Event()
        stop = threading.Event()
        swaps: list[str] = []

        def swapper(target: Path = target, running: threading.Event = running, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                running.set()
                try:
                    names = os.listdir(target)
                except OSError:
                    continue
                for name in names:
                    p = target / name
                    if name.endswith(".moved") or p.is_symlink():
                        continue
                    try:
                        os.rename(p, target / f"{name}.moved")
                        os.symlink(outside, p)
                        swaps.append(name)
                    except OSError:
                        pass

        thread = threading.Thread(target=swapper)
        thread.start()
        running.wait()
        try:
            export_tree(store, target)
        except PathExistsError:
            pass
        finally:
            swapped_during_export += len(swaps)
            stop.set()
            thread.join()
        assert list(os.walk(outside)) == [(str(outside), [], [])]
        if swapped_during_export:
            break
    assert swapped_during_export > 0


# -- export of the history as plaintext git ------------------------------------------------------------


def _git_history(path: Path) -> list[Commit]:
    repo = Repo(str(path))
    commits: list[Commit] = []
    commit_id = repo.refs[b"refs/heads/main"]
    while True:
        c = repo[commit_id]
        assert isinstance(c, Commit)
        commits.append(c)
        if not c.parents:
            break
        assert len(c.parents) == 1
        commit_id = c.parents[0]
    commits.reverse()
    return commits


def _git_files(repo: Repo, tree_id: bytes, prefix: str = "") -> dict[str, bytes]:
    tree = repo[tree_id]
    assert isinstance(tree, Tree)
    out: dict[str, bytes] = {}
    for entry in tree.iteritems():
        name = prefix + entry.path.decode()
        obj = repo[entry.sha]
        if isinstance(obj, Tree):
            out.update(_git_files(repo, entry.sha, name + "/"))
        else:
            assert isinstance(obj, Blob) and entry.mode == 0o100644
            out[name] = obj.as_raw_string()
    return out


def test_plaintext_git_export(tmp_path: Path, store: memvault.MemoryStore, umask0: None) -> None:
    _populate(store)
    memvault.MemoryTool(store, actor="other agent", session="s-2").call(
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/z.md"}
    )
    target = tmp_path / "audit"
    with pytest.raises(InvalidInputError, match="plaintext"):
        export_plaintext_git(store, target, i_understand_plaintext=False)
    with pytest.raises(InvalidInputError):
        export_plaintext_git(store, target, i_understand_plaintext="yes")  # type: ignore[arg-type]
    assert not target.exists()

    result = export_plaintext_git(store, target, i_understand_plaintext=True)

    history = list(reversed(log(store)))
    commits = _git_history(target)
    assert [c.id.decode() for c in commits] == list(result.git_commits)
    assert len(commits) == len(history) == 7
    repo = Repo(str(target))
    for c, info in zip(commits, history, strict=True):
        ident = f"{info.actor} <{info.actor.replace(' ', '-')}@memvault.invalid>".encode()
        assert c.author == c.committer == ident
        assert c.author_time == c.commit_time == int(info.time)
        assert c.message.decode() == (
            f"{' '.join((info.command, *info.paths))}\n\nmemvault-commit: {info.commit_id}\n"
            f"memvault-seq: {info.seq}\nmemvault-session: {info.session}\n"
        )
        files = _git_files(repo, c.tree)
        expected = {
            "memories/" + p.removeprefix("/memories/"): d for p, d in _store_files(store, info.commit_id).items()
        }
        assert files == expected
    assert _git_files(repo, commits[-1].tree)["memories/z.md"] == b"second\n"
    assert _git_files(repo, commits[1].tree) == {"memories/a.md": b"first\n"}
    assert commits[-1].author == b"other agent <other-agent@memvault.invalid>"
    assert result.commit_id == store.head[0].decode()
    repo.close()

    modes = _modes(target)
    assert modes.pop(".") == 0o700
    assert modes and all(m in (stat.S_IFREG | 0o600, stat.S_IFDIR | 0o700) for m in modes.values()), modes

    with pytest.raises(PathExistsError, match="not empty"):
        export_plaintext_git(store, target, i_understand_plaintext=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="no git binary")
def test_plaintext_git_export_works_with_git(tmp_path: Path, store: memvault.MemoryStore) -> None:
    _populate(store)
    export_plaintext_git(store, tmp_path / "audit", i_understand_plaintext=True)
    out = subprocess.run(
        ["git", "-C", str(tmp_path / "audit"), "log", "-p", "--format=%an|%s"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert "agent|str_replace /memories/a.md" in out.stdout
    assert "-first\n+second\n" in out.stdout
    fsck = subprocess.run(["git", "-C", str(tmp_path / "audit"), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


# -- CLI -------------------------------------------------------------------------------------------------


def test_cli_import_and_export(env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init"]) == 0
    capsys.readouterr()
    src = tmp_path / "sdk"
    sdk = BetaLocalFilesystemMemoryTool(base_path=str(src))
    sdk.call({"command": "create", "path": "/memories/notes.md", "file_text": "hello\n"})
    (src / "memories" / "link.md").symlink_to(src / "memories" / "notes.md")
    (src / "memories" / "CON").write_text("x")

    assert main(["import", str(src)]) == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("memvault: Nothing was imported: 1 entry cannot be imported (CON: ")

    assert main(["import", str(src), "--skip-invalid", "--actor", "alice", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["imported"] == ["/memories/notes.md"] and out["layout"] == "sdk-base"
    assert out["skipped"] == [
        {"source": "link.md", "reason": "a symbolic link (never followed)"},
        {"source": "CON", "reason": "Invalid path /memories/CON: " + Reason.DEVICE_NAME},
    ]
    assert main(["log", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)[0]
    assert (first["actor"], first["command"], first["commit"]) == ("alice", "import", out["commit"])

    (src / "memories" / "notes.md").write_text("changed\n")
    assert main(["import", str(src), "--skip-invalid"]) == 4
    assert "already exist" in capsys.readouterr().err
    assert main(["import", str(src), "--skip-invalid", "--overwrite"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Imported 1 file(s) into /memories as commit ") and lines[0].endswith("(#2).")
    assert lines[1:] == [
        "  replaced /memories/notes.md",
        "  skipped link.md: a symbolic link (never followed)",
        "  skipped CON: Invalid path /memories/CON: " + Reason.DEVICE_NAME,
    ]

    out_dir = tmp_path / "export"
    assert main(["export", str(out_dir), "--rev", "HEAD~1", "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["files"] == ["/memories/notes.md"] and exported["kind"] == "tree"
    assert (out_dir / "notes.md").read_bytes() == b"hello\n"
    assert main(["export", str(out_dir)]) == 4
    assert capsys.readouterr().err == ("memvault: The export target is not empty; give a new or empty directory.\n")
    assert main(["export", str(tmp_path / "e2")]) == 0
    assert capsys.readouterr().out.startswith("Exported 1 file(s) of commit ")
    assert (tmp_path / "e2" / "notes.md").read_bytes() == b"changed\n"


def test_cli_plaintext_git_needs_confirmation(env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init"]) == 0
    store = memvault.MemoryStore.open(env, passphrase="cli passphrase")
    store.put_file("/memories/a.md", "secret text", actor="bob")
    store.close()
    capsys.readouterr()
    target = tmp_path / "audit"
    warning = (
        f"memvault: warning: --plaintext-git writes every version of every memory, decrypted, to {target}; "
        "anyone who can read it can read them all, and later redactions do not reach it.\n"
    )

    assert main(["export", "--plaintext-git", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == (  # refused before anything: the warning comes only with a real export
        "memvault: --plaintext-git writes the decrypted content of every version to disk; "
        "add --yes-write-plaintext to confirm\n"
    )
    assert not target.exists()
    assert main(["export", str(target), "--yes-write-plaintext"]) == 2
    assert "only goes with --plaintext-git" in capsys.readouterr().err
    assert not target.exists()

    assert main(["export", "--plaintext-git", str(target), "--yes-write-plaintext"]) == 0
    captured = capsys.readouterr()
    assert captured.err == warning
    assert captured.out == f"Wrote 2 commit(s) to the plaintext git repository {target} (bare; try `git log -p`).\n"
    commits = _git_history(target)
    assert [c.author for c in commits] == [b"memvault <memvault@memvault.invalid>", b"bob <bob@memvault.invalid>"]
    repo = Repo(str(target))
    assert _git_files(repo, commits[-1].tree) == {"memories/a.md": b"secret text"}
    repo.close()


def test_text_named_as_an_image_cannot_pass_the_scrubber(tmp_path: Path, store: memvault.MemoryStore) -> None:
    """Images are stored without scanning (the scrubber reads text), so a file named ``.png``
    must be one: a credential in a text file renamed ``notes.png`` is refused, not stored raw; a
    real image is imported and listed as unscanned."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.png").write_text("aws key AKIAQ7VXK2JD4NRP3W6T\n")
    with pytest.raises(ImportRefusedError, match="named as an image but is not a PNG or JPEG"):
        import_dir(store, src)
    assert store.head[1] == 0  # nothing written
    (src / "notes.png").unlink()
    (src / "real.png").write_bytes(PNG)
    result = import_dir(store, src)
    assert result.unscanned == ("/memories/real.png",) and result.to_json()["unscanned"] == ["/memories/real.png"]
