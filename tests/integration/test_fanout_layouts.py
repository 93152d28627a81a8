"""Tree layouts 3 and 4 (format version 6, docs/format.md §5.3): where a new store files its
nodes, what an older store keeps, what `upgrade` moves, and what a commit rewrites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import memvault.store.opening
from conftest import FAST_KDF, PASSPHRASE
from memvault import MemoryStore, MemoryTool, history
from memvault.admin.config import change_settings
from memvault.format import layout
from memvault.settings import StoreSettings
from memvault.store import journal as journal_module
from memvault.store import memorystore as store_mod
from memvault.verify import verify

FILES = {"/memories/a.md": "alpha\n", "/memories/notes/b.md": "bravo\n", "/memories/notes/c.md": "charlie\n"}


def _create(root: Path, max_files: int, version: int = 6, durability: str = "none") -> MemoryStore:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(store_mod, "FORMAT_VERSION", version)
        m.setattr(memvault.store.opening, "FORMAT_VERSION", version)
        settings = StoreSettings(durability=durability, max_files=max_files)  # type: ignore[arg-type]
        store = MemoryStore.create(root, passphrase=PASSPHRASE, kdf=FAST_KDF, settings=settings)
    for path, text in FILES.items():
        store.put_file(path, text)
    return store


def _tree(store: MemoryStore) -> bytes:
    return store.git.read_commit(store.head[0])[0]


def _follow(store: MemoryStore, names: list[bytes]) -> dict[bytes, tuple[int, bytes]]:
    """The entries of the tree at ``names`` below the head's root."""
    entries = store.git.tree_entries(_tree(store))
    for name in names:
        entries = store.git.tree_entries(entries[name][1])
    return entries


@pytest.mark.parametrize(("max_files", "digits"), [(8_192, 2), (8_193, 3), (131_072, 3), (131_073, 4)])
def test_a_new_store_files_each_node_at_the_depth_its_max_files_calls_for(
    tmp_path: Path, max_files: int, digits: int
) -> None:
    with _create(tmp_path / "s", max_files) as store:
        assert store.format_version == 6
        with store.reading() as view:
            node = view.get("/memories/notes/b.md")
        assert node is not None
        h = node.token.hex().encode()
        leaf = _follow(store, [h[k : k + 1] for k in range(digits)])
        assert leaf[h[digits:]][1] == node.blob_id  # the content blob, named by the other 64 - d digits
        blobs = store.index_blobs(_tree(store))
        assert leaf[b"i"][1] == blobs[h[:digits]]  # its shard beside it, named by d hex digits
        assert {len(name) for name in blobs} == {digits}
        assert {store.read_text(p) for p in FILES} == set(FILES.values())
        assert verify(store).ok


def test_a_commit_rewrites_one_small_shard_and_the_trees_on_its_way(tmp_path: Path) -> None:
    """In layout 3 a commit writes its blob, one shard, the four trees from the root to its shard
    tree and the commit; the other shards keep their blob ids."""
    with _create(tmp_path / "s", 100_000) as store:
        before = store.index_blobs(_tree(store))
        written: list[int] = []
        real = store.git.write_pack

        def counting(objects: list[object], **kwargs: object) -> object:
            written.append(len(objects))
            return real(objects, **kwargs)  # type: ignore[arg-type]

        store.git.write_pack = counting  # type: ignore[method-assign]
        store.put_file("/memories/d.md", "delta\n")
        assert written == [7]  # blob, shard, 4 trees, commit
        after = store.index_blobs(_tree(store))
        changed = {s for s in after if before.get(s) != after[s]}
        assert len(changed) == 1 and len(next(iter(changed))) == 3


def test_an_older_store_keeps_layout_2_until_upgrade_moves_it_to_layout_3(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with _create(root, 100_000, version=4) as store:
        assert {len(s) for s in store.index_blobs(_tree(store))} == {2}
        store.put_file("/memories/e.md", "echo\n")  # an older store writes its own layout
        first = store.head[0]
        assert {len(s) for s in store.index_blobs(_tree(store))} == {2}
        seq = store.head[1]
        assert store.upgrade_format() == (4, 6)
        assert store.head[1] == seq + 1  # one commit: the same nodes, filed in layout 3
        assert {len(s) for s in store.index_blobs(_tree(store))} == {3}
        (info,) = history.log(store, limit=1)
        assert (info.command, info.paths) == ("upgrade", ())
        assert history.changes(store, "HEAD") == ()  # no file changed across the two layouts
        texts = {**FILES, "/memories/e.md": "echo\n"}
        assert {p: store.read_text(p) for p in texts} == texts
        tool = MemoryTool(store)
        assert "has been edited" in tool.call(
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "after"}
        )
        (d,) = history.diff(store, first, "HEAD")  # from layout 2 to layout 3
        assert (d.path, d.old, d.new) == ("/memories/a.md", b"alpha\n", b"after\n")
        assert verify(store).ok  # every commit, in either layout
        assert store.upgrade_format() == (6, 6) and store.head[1] == seq + 2  # nothing more to do
    with MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        assert store.read_text("/memories/a.md") == "after\n" and store.read_text("/memories/e.md") == "echo\n"
        assert len(store.list(recursive=True)) == len(texts) + 1  # and the directory /memories/notes


@pytest.mark.skipif(not journal_module.journal_available(), reason="the commit journal needs Linux 5.8+")
def test_a_version_5_store_journals_in_layout_2_and_upgrade_deepens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 5 is the journal with the old layouts: its commits flush only the journal and keep
    layout 2; `upgrade` moves it to version 6 and layout 3, and its commits still flush only the
    journal."""
    root = tmp_path / "s"
    flushed: list[str] = []
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (flushed.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                     real_fdatasync(fd))[1])  # fmt: skip
    with _create(root, 100_000, version=5, durability="full") as store:
        assert store.format_version == 5
        flushed.clear()
        store.put_file("/memories/e.md", "echo\n")
        assert flushed == [str(root / "journal")]
        assert {len(s) for s in store.index_blobs(_tree(store))} == {2}
    with MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        assert store.format_version == 5 and store.read_text("/memories/e.md") == "echo\n"
        assert store.upgrade_format() == (5, 6)
        assert {len(s) for s in store.index_blobs(_tree(store))} == {3}
        flushed.clear()
        store.put_file("/memories/f.md", "foxtrot\n")
        assert flushed == [str(root / "journal")]
        assert {len(s) for s in store.index_blobs(_tree(store))} == {3}
    with MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        texts = {**FILES, "/memories/e.md": "echo\n", "/memories/f.md": "foxtrot\n"}
        assert store.format_version == 6 and {p: store.read_text(p) for p in texts} == texts
        assert verify(store).ok


def test_a_store_that_outgrows_its_layout_keeps_it_until_upgrade_deepens_it(tmp_path: Path) -> None:
    """A version 6 store made for 100 files is in layout 2; with max_files raised it keeps
    layout 2 (correct, with larger shards) until `upgrade`, which refiles it in layout 4 with one
    commit, in the same process that raised it."""
    root = tmp_path / "s"
    with _create(root, 100) as store:
        assert {len(s) for s in store.index_blobs(_tree(store))} == {2}
        change_settings(store, {"max_files": 200_000})
        texts = dict(FILES)
        for i in range(150):  # more files than the store was made for
            texts[f"/memories/more/m{i}.md"] = f"more {i}\n"
            store.put_file(f"/memories/more/m{i}.md", f"more {i}\n")
        assert {len(s) for s in store.index_blobs(_tree(store))} == {2}
        seq = store.head[1]
        assert store.upgrade_format() == (6, 6)
        assert store.head[1] == seq + 1 and history.log(store, limit=1)[0].command == "upgrade"
        assert {len(s) for s in store.index_blobs(_tree(store))} == {4}
        store.put_file("/memories/after.md", "after\n")
        texts["/memories/after.md"] = "after\n"
        assert {len(s) for s in store.index_blobs(_tree(store))} == {4}
        assert store.upgrade_format() == (6, 6) and store.head[1] == seq + 2  # nothing more to do
    with MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        assert {p: store.read_text(p) for p in texts} == texts
        assert verify(store).ok


def test_a_handle_opened_before_an_upgrade_reads_and_writes_after_it(tmp_path: Path) -> None:
    """Another store object's upgrade changes every shard's name under a handle that holds some
    decoded: it follows, reads and writes in the new layout."""
    root = tmp_path / "s"
    _create(root, 100_000, version=4).close()
    early = MemoryStore.open(root, passphrase=PASSPHRASE)
    assert early.read_text("/memories/notes/b.md") == "bravo\n"  # decodes a shard of layout 2
    with MemoryStore.open(root, passphrase=PASSPHRASE) as other:
        assert other.upgrade_format() == (4, 6)
    assert early.read_text("/memories/notes/c.md") == "charlie\n"
    early.put_file("/memories/notes/f.md", "foxtrot\n")
    assert {len(s) for s in early.index_blobs(_tree(early))} == {3}
    assert len(early.list(recursive=True)) == len(FILES) + 2
    early.close()
    with MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        assert store.read_text("/memories/notes/f.md") == "foxtrot\n" and verify(store).ok


def test_an_emptied_tree_takes_the_layout_of_a_new_store(tmp_path: Path) -> None:
    """A store whose tree is empty files its next node in the layout its version and
    ``max_files`` call for, whatever the tree held before (here layout 2, emptied, then the store
    upgraded: an empty tree needs no refiling commit)."""
    root = tmp_path / "s"
    with _create(root, 100_000, version=4) as store:
        assert {len(s) for s in store.index_blobs(_tree(store))} == {2}
        tool = MemoryTool(store)
        for path in ("/memories/a.md", "/memories/notes"):
            assert tool.call({"command": "delete", "path": path}).startswith("Successfully deleted")
        assert store.git.tree_entries(_tree(store)) == {}
        seq = store.head[1]
        assert store.upgrade_format() == (4, 6) and store.head[1] == seq
        store.put_file("/memories/g.md", "golf\n")
        assert {len(s) for s in store.index_blobs(_tree(store))} == {3}
        assert store.read_text("/memories/g.md") == "golf\n" and len(store.list(recursive=True)) == 1
    with MemoryStore.open(root, passphrase=PASSPHRASE) as store:
        assert store.read_text("/memories/g.md") == "golf\n" and verify(store).ok


def test_an_emptied_tree_follows_max_files_as_changed_in_the_same_process(tmp_path: Path) -> None:
    """The layout of a commit on the empty tree follows ``max_files`` as the store's settings have
    it now: raised by ``change_settings`` on this very handle, not as it was at open."""
    with _create(tmp_path / "s", 100) as store:
        assert {len(s) for s in store.index_blobs(_tree(store))} == {2}
        change_settings(store, {"max_files": 200_000})
        tool = MemoryTool(store)
        for path in ("/memories/a.md", "/memories/notes"):
            assert tool.call({"command": "delete", "path": path}).startswith("Successfully deleted")
        assert store.git.tree_entries(_tree(store)) == {}
        store.put_file("/memories/h.md", "hotel\n")
        assert {len(s) for s in store.index_blobs(_tree(store))} == {4}
        assert store.read_text("/memories/h.md") == "hotel\n" and verify(store).ok


def test_layout_paths_and_choices() -> None:
    token = bytes.fromhex("0123456789abcdef" * 4)
    assert layout.content_path(token, 1) == (b"c", b"0", b"1", b"23456789abcdef" + b"0123456789abcdef" * 3)
    assert layout.content_path(token, 3) == (b"0", b"1", b"2", b"3456789abcdef" + b"0123456789abcdef" * 3)
    assert layout.shard_path(b"012", 3) == (b"0", b"1", b"2", b"i")
    assert layout.shard_path(b"0123", 4) == (b"0", b"1", b"2", b"3", b"i")
    assert layout.shard_path(b"01", 1) == (b"i", b"0", b"1")
    assert [layout.fresh_layout(v, 100_000) for v in (1, 2, 3, 4, 5, 6)] == [1, 2, 2, 2, 2, 3]
    assert [layout.fresh_layout(6, n) for n in (1, 8_192, 8_193, 131_072, 131_073, 10**7)] == [2, 2, 3, 3, 4, 4]
