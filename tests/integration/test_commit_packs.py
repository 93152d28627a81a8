"""Each commit is one git pack (pack + idx): readable by git, dulwich and other store objects;
leftovers of a crashed writer swept; merges in commands bounded and never fatal; packs that
lie about their objects refused."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
import zlib
from pathlib import Path

import pytest
from dulwich.repo import Repo

import memvault
from conftest import PASSPHRASE, make_store, rewrite_packed_object
from memvault import gitstore
from memvault.errors import IntegrityError
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.verify import verify

GIT = shutil.which("git")


def _files(store: memvault.MemoryStore) -> dict[str, bytes]:
    snap = store.snapshot()
    root = parse_path("/memories", store.settings)
    return {p.text: snap.read(p) for p in snap.descendants(root) if not snap.is_dir(p)}


def _pack_dir(store: memvault.MemoryStore) -> Path:
    return store.root / "repo" / "objects" / "pack"


def _create(store: memvault.MemoryStore, i: int) -> None:
    memvault.MemoryTool(store).call({"command": "create", "path": f"/memories/n{i:03}.md", "file_text": f"note {i}\n"})


def test_a_commit_is_one_pack_and_its_index(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    before = sorted(p.name for p in _pack_dir(store).iterdir())
    _create(store, 1)
    after = sorted(p.name for p in _pack_dir(store).iterdir())
    new = sorted(set(after) - set(before))
    assert len(new) == 2 and new[0].endswith(".idx") and new[1].endswith(".pack")
    assert new[0][:-4] == new[1][:-5]  # pack-<checksum>.pack and .idx
    assert store.git.loose_count() == 0
    data = (_pack_dir(store) / new[1]).read_bytes()
    assert data[:8] == b"PACK\0\0\0\2" and int.from_bytes(data[8:12], "big") == 9  # blob, shard, 6 trees, commit
    assert new[1] == f"pack-{data[-20:].hex()}.pack"  # named by its checksum, as git does
    for name in new:
        assert (_pack_dir(store) / name).stat().st_mode & 0o777 == 0o400
    # dulwich (a fresh repository object) reads every object of the commit
    repo = Repo(str(tmp_path / "s" / "repo"))
    try:
        commit = repo[store.head[0]]
        assert commit.type_name == b"commit" and repo[commit.tree].type_name == b"tree"
    finally:
        repo.close()


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_git_accepts_the_packs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitstore, "MERGE_AT", 3)  # some merged packs too
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    for i in range(12):
        _create(store, i)
    repo = str(tmp_path / "s" / "repo")
    for idx in _pack_dir(store).glob("*.idx"):
        proc = subprocess.run([GIT, "verify-pack", "-v", str(idx)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert "non delta" in proc.stdout
    proc = subprocess.run([GIT, "--git-dir", repo, "fsck", "--full", "--strict"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    count = subprocess.run([GIT, "--git-dir", repo, "rev-list", "--count", "main"], capture_output=True, text=True)
    assert count.stdout.strip() == "13"


@pytest.mark.parametrize("merge_at", [gitstore.MERGE_AT, 2])
def test_another_store_object_reads_new_and_merged_packs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_at: int
) -> None:
    """A reader with its own repository handle finds packs written after it opened (dulwich
    rescans the pack directory on a miss), and still reads after merges removed packs it had
    opened."""
    monkeypatch.setattr(gitstore, "MERGE_AT", merge_at)
    writer = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _create(writer, 0)
    reader = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    assert _files(reader) == {"/memories/n000.md": b"note 0\n"}
    seen_packs = set()
    for i in range(1, 20):
        _create(writer, i)
        reader.forget_cached_plaintext()
        assert _files(reader) == {f"/memories/n{j:03}.md": f"note {j}\n".encode() for j in range(i + 1)}
        seen_packs.update(p.name for p in _pack_dir(writer).glob("*.pack"))
    current = {p.name for p in _pack_dir(writer).glob("*.pack")}
    assert seen_packs - current  # packs the reader had used were merged away meanwhile
    memvault.MemoryTool(reader).call({"command": "create", "path": "/memories/r.md", "file_text": "r\n"})
    writer.forget_cached_plaintext()
    assert _files(writer)["/memories/r.md"] == b"r\n"
    assert verify(reader).ok
    reader.close()
    writer.close()


def test_leftovers_of_a_crashed_pack_writer_are_swept_by_the_next_writer(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _create(store, 0)
    store.close()
    pack_dir = tmp_path / "s" / "repo" / "objects" / "pack"
    real = sorted(p.name for p in pack_dir.iterdir())
    orphan = pack_dir / ("pack-" + "ab" * 20 + ".pack")
    young = pack_dir / ("pack-" + "cd" * 20 + ".pack")  # maybe a `git gc` between its renames
    git_tmp = pack_dir / "tmp_pack_Xy12Zw"  # git's own temporary name
    leftovers = [pack_dir / "tmp_pack_0123456789abcdef", pack_dir / "tmp_idx_fedcba9876543210", orphan]
    for p in [*leftovers, young, git_tmp]:
        p.write_bytes(b"PACK torn")
    old = time.time() - gitstore.ORPHAN_PACK_SECONDS - 60
    os.utime(orphan, (old, old))
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as reader:
        assert _files(reader) == {"/memories/n000.md": b"note 0\n"}
    assert all(p.exists() for p in leftovers)  # a reader leaves them (it holds no lock)
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as writer:
        _create(writer, 1)
        assert not any(p.exists() for p in leftovers)
        assert young.exists() and git_tmp.exists()  # left: git may be writing them
        assert set(real) <= {p.name for p in pack_dir.iterdir()}  # the real packs stay
        assert len(_files(writer)) == 2


def test_a_failing_merge_does_not_fail_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitstore, "MERGE_AT", 2)
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _create(store, 0)
    packs = {p.name for p in _pack_dir(store).iterdir()}

    def full_disk(*_args: object, **_kwargs: object) -> object:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(gitstore.GitStore, "_copy_entries", full_disk)
    _create(store, 1)
    after = {p.name for p in _pack_dir(store).iterdir()}
    assert packs < after and len(after - packs) == 2  # only the commit's pack and index
    monkeypatch.undo()
    store.forget_cached_plaintext()
    assert len(_files(store)) == 2 and verify(store).ok


def test_a_failing_commit_removes_the_merged_pack_and_keeps_the_old_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge is written first; when the commit's own pack then fails, the merged pack is
    removed again and the packs it would have replaced stay: the store is as before."""
    monkeypatch.setattr(gitstore, "MERGE_AT", 2)
    monkeypatch.setattr(gitstore, "geometric_merge", len)
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _create(store, 0)
    before_files, before_packs = _files(store), sorted(p.name for p in _pack_dir(store).iterdir())
    real = os.replace
    renames: list[str] = []

    def fail_second_pack(src: object, dst: object) -> None:
        if str(dst).endswith(".pack"):
            renames.append(str(dst))
            if len(renames) == 2:  # the merged pack went in; the commit's pack cannot
                raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", fail_second_pack)
    with pytest.raises(Exception, match="Input/output error"):
        _create(store, 1)
    monkeypatch.setattr(os, "replace", real)
    assert len(renames) == 2
    assert sorted(p.name for p in _pack_dir(store).iterdir()) == before_packs
    store.forget_cached_plaintext()
    assert _files(store) == before_files


def test_a_packed_tree_holding_another_tree_is_refused(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _create(store, 0)
    _create(store, 1)
    tree_id = store.git.read_commit(store.head[0])[0]
    entries = store.git.read_tree(tree_id)
    other_id = entries[b"c"][1]
    rewrite_packed_object(store.root, tree_id, store.git._raw_tree(other_id))
    fresh = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE, check_head=False)
    with pytest.raises(IntegrityError):
        fresh.git.read_tree(tree_id)
    assert not verify(fresh).ok
    fresh.close()


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_packs_git_gc_wrote_are_read_and_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``git gc`` (one pack, maybe with deltas, a .rev file) the store reads on, and its
    pack is merged with the commits' packs like any other."""
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    for i in range(6):
        _create(store, i)
    store.close()
    repo = str(tmp_path / "s" / "repo")
    proc = subprocess.run(
        [GIT, "--git-dir", repo, "-c", "pack.writeReverseIndex=true", "repack", "-a", "-d", "-f", "--window=50"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as again:
        assert again.git.pack_count() == 1
        before = _files(again)
        monkeypatch.setattr(gitstore, "geometric_merge", len)
        for i in range(6, 9):
            _create(again, i)
        again.maintain()
        assert again.git.pack_count() == 1
        again.forget_cached_plaintext()
        assert _files(again) == {**before, **{f"/memories/n{i:03}.md": f"note {i}\n".encode() for i in range(6, 9)}}
        assert verify(again).ok
    assert not list((tmp_path / "s" / "repo" / "objects" / "pack").glob("*.rev"))


@pytest.mark.parametrize("level", [0, 6])
def test_pack_bytes_are_what_dulwich_writes(level: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """memvault's own pack writer (cheaper per commit) writes byte for byte the pack and version
    2 index dulwich writes for the same undeltified objects, duplicates stored once (commits at
    the same level as the rest here: dulwich has one level per pack)."""
    monkeypatch.setattr(gitstore, "COMMIT_LEVEL", 0)
    import io

    from dulwich.object_format import SHA1
    from dulwich.objects import ShaFile
    from dulwich.pack import write_pack_index_v2, write_pack_objects

    objects = [gitstore.GitStore.blob(os.urandom(n)) for n in (0, 15, 16, 127, 128, 2100, 70000)]
    objects += [gitstore.GitStore.tree({b"a": (gitstore.MODE_BLOB, objects[1].id)}), objects[2]]
    objects.append(gitstore.GitStore.commit(objects[-2].id, None, b"message"))
    pack, idx, name = gitstore.build_pack(objects, level)
    unique = list({o.id: o for o in objects}.values())
    shas = [ShaFile.from_raw_string(gitstore._PACK_TYPES[o.type_name], o.as_raw_string()) for o in unique]
    out = io.BytesIO()
    entries, checksum = write_pack_objects(
        out.write, [(s, None) for s in shas], compression_level=level, object_format=SHA1
    )
    index = io.BytesIO()
    write_pack_index_v2(index, sorted((k, v[0], v[1]) for k, v in entries.items()), checksum)
    assert pack == out.getvalue() and idx == index.getvalue() and name == checksum.hex()
    assert int.from_bytes(pack[8:12], "big") == len(unique) == len(objects) - 1


@pytest.mark.parametrize("size", [0, 1, 100, 5208, 32 * 1024 - 1, 65531, 65532, 65535, 65536, 200_000])
def test_stored_zlib_streams(size: int) -> None:
    """memvault's level-0 zlib framing decodes back to the data (zlib checks the Adler-32 too), and
    is zlib's own bytes wherever build_pack uses it (below 32 KiB)."""
    data = os.urandom(size)
    stream = gitstore.zlib_stored(data)
    assert zlib.decompress(stream) == data
    assert len(stream) == size + 2 + 4 + 5 * max(1, -(-size // 0xFFFF))
    if size < 32 * 1024:
        assert stream == zlib.compress(data, 0)
    damaged = bytearray(stream)
    damaged[-1] ^= 1
    with pytest.raises(zlib.error):
        zlib.decompress(bytes(damaged))


def test_read_pack_index_refuses_damaged_indexes_without_raising() -> None:
    """The merge reads indexes itself: a truncated, mutated or foreign index is refused (None)
    and never raises; a good one gives back what was written."""
    import random

    objects = [gitstore.GitStore.blob(os.urandom(n)) for n in (10, 200, 3000)]
    pack, idx, _name = gitstore.build_pack(objects, 0)
    entries = gitstore.read_pack_index(idx)
    assert entries is not None and sorted(e[1].hex().encode() for e in entries) == sorted(o.id for o in objects)
    assert [e[0] for e in entries] == sorted(e[0] for e in entries) and entries[0][0] == 12
    rng = random.Random(7)
    candidates = [idx[:n] for n in range(0, len(idx), 37)] + [b"", b"\377tOc\0\0\0\1" + idx[8:], os.urandom(2000)]
    for _ in range(300):
        mutated = bytearray(idx)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] ^= 1 << rng.randrange(8)
        candidates.append(bytes(mutated))
    for data in candidates:
        assert gitstore.read_pack_index(data) is None  # the index checksum or the format catches each
    # a forged index whose checksum is right but whose tables lie (a count beyond the file)
    body = bytearray(idx[:-20])
    body[8 + 255 * 4 : 8 + 256 * 4] = (10**6).to_bytes(4, "big")
    forged = bytes(body) + __import__("hashlib").sha1(bytes(body)).digest()
    assert gitstore.read_pack_index(forged) is None


def test_a_reader_whose_packs_were_merged_away_mid_use_reads_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader has opened the indexes of packs (a lookup that missed) but not their data when
    another writer merges them away: dulwich finds the files gone, rescans and reads from the
    merged pack."""
    writer = make_store(tmp_path / "s", StoreSettings(durability="full"))
    for i in range(4):
        _create(writer, i)
    reader = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    expected = _files(reader)
    reader.forget_cached_plaintext()
    assert not reader.git.contains(b"0" * 40)  # every pack's index looked at, no data read
    monkeypatch.setattr(gitstore, "geometric_merge", len)  # the writer's next commit merges them all
    monkeypatch.setattr(gitstore, "MERGE_AT", 2)
    before = {p.name for p in _pack_dir(writer).glob("*.pack")}
    _create(writer, 9)
    after = {p.name for p in _pack_dir(writer).glob("*.pack")}
    assert not before & after  # every pack the reader knew is gone
    assert _files(reader) == {**expected, "/memories/n009.md": b"note 9\n"}
    reader.close()
    writer.close()


def test_a_merge_leaves_a_pack_that_is_not_as_git_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack whose header disagrees with its index (or whose index is damaged) is not merged:
    the others are, and every object stays where it can be read."""
    monkeypatch.setattr(gitstore, "MERGE_AT", 10**6)  # no merge in the commands
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    for i in range(3):
        _create(store, i)
    packs = sorted(_pack_dir(store).glob("*.pack"), key=lambda p: p.stat().st_mtime_ns)
    odd, broken_idx = packs[-1], packs[-2].with_suffix(".idx")
    for path in (odd, broken_idx):
        os.chmod(path, 0o600)
    data = bytearray(odd.read_bytes())
    data[11] += 1  # one object more than its index lists
    odd.write_bytes(bytes(data))
    idx = bytearray(broken_idx.read_bytes())
    idx[-1] ^= 1  # the index's own checksum
    broken_idx.write_bytes(bytes(idx))
    monkeypatch.setattr(gitstore, "geometric_merge", len)
    assert store.git.consolidate_packs() == 2  # the two intact packs
    names = {p.name for p in _pack_dir(store).glob("*.pack")}
    assert odd.name in names and broken_idx.with_suffix(".pack").name in names and len(names) == 3


def test_commits_are_compressed_in_stored_packs_and_read_back(tmp_path: Path) -> None:
    """With the repository's level 0 (stores memvault creates), a pack stores blobs and trees as
    they are (ciphertext does not compress) and deflates commits; dulwich and memvault read each
    object back, checked against its id."""
    from dulwich.object_format import SHA1
    from dulwich.pack import Pack

    blob = gitstore.GitStore.blob(os.urandom(3000))
    tree = gitstore.GitStore.tree({b"a": (gitstore.MODE_BLOB, blob.id)})
    commit = gitstore.GitStore.commit(tree.id, None, b"memvault\n\n" + b"Memvault-Meta: " + b"QUJD" * 120 + b"\n")
    pack, idx, name = gitstore.build_pack([blob, tree, commit], 0)
    stored = gitstore.build_pack([blob, tree], 0)[0]
    assert len(pack) - len(stored) < len(commit.as_raw_string()) * 0.5  # the commit entry shrank
    (tmp_path / f"pack-{name}.pack").write_bytes(pack)
    (tmp_path / f"pack-{name}.idx").write_bytes(idx)
    with Pack(str(tmp_path / f"pack-{name}"), object_format=SHA1) as p:
        for obj in (blob, tree, commit):
            type_num, raw = p.get_raw(bytes.fromhex(obj.id.decode()))
            assert gitstore._TYPE_NAMES[type_num] == obj.type_name and raw == obj.as_raw_string()
