"""Each commit is one git pack (pack + idx): readable by git, dulwich and other store objects;
leftovers of a crashed writer swept; merges in commands bounded and never fatal; packs that
lie about their objects refused."""

from __future__ import annotations

import base64
import errno
import hashlib
import itertools
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
from memvault.errors import IntegrityError
from memvault.git import objects as gitobjects
from memvault.git import pack as gitpack
from memvault.git import packdir, packindex, packread
from memvault.git import repo as gitrepo
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.store import journal
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
    # blob, shard, 4 trees (layout 3), commit
    assert data[:8] == b"PACK\0\0\0\2" and int.from_bytes(data[8:12], "big") == 7
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
    monkeypatch.setattr(packdir, "MERGE_AT", 3)  # some merged packs too
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


@pytest.mark.parametrize("merge_at", [packdir.MERGE_AT, 2])
def test_another_store_object_reads_new_and_merged_packs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_at: int
) -> None:
    """A reader with its own repository handle finds packs written after it opened (dulwich
    rescans the pack directory on a miss), and still reads after merges removed packs it had
    opened (with the commit journal, at its checkpoints: made frequent here)."""
    monkeypatch.setattr(packdir, "MERGE_AT", merge_at)
    monkeypatch.setattr(journal, "CAPACITY", 8 * journal.BLOCK)
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
    old = time.time() - packdir.ORPHAN_PACK_SECONDS - 60
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
    monkeypatch.setattr(packdir, "MERGE_AT", 2)
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    _create(store, 0)
    packs = {p.name for p in _pack_dir(store).iterdir()}

    def full_disk(*_args: object, **_kwargs: object) -> object:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(packdir.PackDirectory, "_copy_entries", full_disk)
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
    monkeypatch.setattr(packdir, "MERGE_AT", 2)
    monkeypatch.setattr(packdir, "geometric_merge", len)
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
    other_id = next(iter(entries.values()))[1]  # a subtree: a tree, but not this one
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
        monkeypatch.setattr(packdir, "geometric_merge", len)
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
    monkeypatch.setattr(gitpack, "COMMIT_LEVEL", 0)
    import io

    from dulwich.object_format import SHA1
    from dulwich.objects import ShaFile
    from dulwich.pack import write_pack_index_v2, write_pack_objects

    objects = [gitrepo.GitStore.blob(os.urandom(n)) for n in (0, 15, 16, 127, 128, 2100, 70000)]
    objects += [gitrepo.GitStore.tree({b"a": (gitobjects.MODE_BLOB, objects[1].id)}), objects[2]]
    objects.append(gitrepo.GitStore.commit(objects[-2].id, None, b"message"))
    pack, idx, name = gitpack.build_pack(objects, level)
    unique = list({o.id: o for o in objects}.values())
    shas = [ShaFile.from_raw_string(gitobjects.PACK_TYPES[o.type_name], o.as_raw_string()) for o in unique]
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
    stream = gitpack.zlib_stored(data)
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

    objects = [gitrepo.GitStore.blob(os.urandom(n)) for n in (10, 200, 3000)]
    pack, idx, _name = gitpack.build_pack(objects, 0)
    entries = packindex.read_pack_index(idx)
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
        assert packindex.read_pack_index(data) is None  # the index checksum or the format catches each
    # a forged index whose checksum is right but whose tables lie (a count beyond the file)
    body = bytearray(idx[:-20])
    body[8 + 255 * 4 : 8 + 256 * 4] = (10**6).to_bytes(4, "big")
    forged = bytes(body) + __import__("hashlib").sha1(bytes(body)).digest()
    assert packindex.read_pack_index(forged) is None


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
    monkeypatch.setattr(packdir, "geometric_merge", len)  # the writer's next commit merges them all
    monkeypatch.setattr(packdir, "MERGE_AT", 2)
    _checkpoint_first(monkeypatch)  # the merged-away packs go at the journal's checkpoint: one in this commit
    before = {p.name for p in _pack_dir(writer).glob("*.pack")}
    _create(writer, 9)
    after = {p.name for p in _pack_dir(writer).glob("*.pack")}
    assert not before & after  # every pack the reader knew is gone
    assert _files(reader) == {**expected, "/memories/n009.md": b"note 9\n"}
    reader.close()
    writer.close()


def _damage_two_packs(store: memvault.MemoryStore) -> tuple[Path, Path]:
    """Of the newest two packs: give the newest's header one object more than its index lists,
    and damage the other's index checksum. Returns both packs."""
    packs = sorted(_pack_dir(store).glob("*.pack"), key=lambda p: p.stat().st_mtime_ns)
    odd, broken_idx = packs[-1], packs[-2].with_suffix(".idx")
    for path in (odd, broken_idx):
        os.chmod(path, 0o600)
    data = bytearray(odd.read_bytes())
    data[11] += 1
    odd.write_bytes(bytes(data))
    idx = bytearray(broken_idx.read_bytes())
    idx[-1] ^= 1
    broken_idx.write_bytes(bytes(idx))
    return odd, broken_idx.with_suffix(".pack")


def test_a_merge_leaves_a_pack_that_is_not_as_git_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack another writer left whose header disagrees with its index (or whose index is
    damaged) is not merged: the others are, and every object stays where it can be read."""
    monkeypatch.setattr(packdir, "MERGE_AT", 10**6)  # no merge in the commands
    writer = make_store(tmp_path / "s", StoreSettings(durability="none"))
    for i in range(3):
        _create(writer, i)
    writer.close()
    odd, other = _damage_two_packs(writer)
    monkeypatch.setattr(packdir, "geometric_merge", len)
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE, check_head=False) as store:
        assert store.git.consolidate_packs() == 2  # the two intact packs
        names = {p.name for p in _pack_dir(store).glob("*.pack")}
        assert odd.name in names and other.name in names and len(names) == 3


def test_a_merge_copies_its_own_packs_by_the_entries_it_wrote_unless_their_header_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packs a process wrote are merged by the entries it recorded when it wrote them (their
    index is not read again), after a check of their size, header and trailer: one whose header
    changed is left alone; one whose index was damaged is merged whole, its objects readable."""
    monkeypatch.setattr(packdir, "MERGE_AT", 10**6)
    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    for i in range(3):
        _create(store, i)
    ids = {}
    for pack in _pack_dir(store).glob("*.pack"):
        entries = packindex.read_pack_index(pack.with_suffix(".idx").read_bytes())
        assert entries is not None
        ids[pack.name] = {raw_id for _offset, raw_id, _crc in entries}
    odd, other = _damage_two_packs(store)
    monkeypatch.setattr(packdir, "geometric_merge", len)
    assert store.git.consolidate_packs() == len(ids) - 1  # all but the one whose header changed
    merged = [p for p in _pack_dir(store).glob("*.pack") if p.name != odd.name]
    assert odd.exists() and len(merged) == 1 and not other.exists()
    entries = packindex.read_pack_index(merged[0].with_suffix(".idx").read_bytes())
    assert entries is not None
    assert {raw_id for _offset, raw_id, _crc in entries} == set().union(*(v for k, v in ids.items() if k != odd.name))
    reader = packread.PackReader(str(_pack_dir(store)), 1 << 20)
    assert all(reader.get(raw_id) is not None for raw_id in ids[other.name])  # read back, checked against the id


def test_commits_are_compressed_in_stored_packs_and_read_back(tmp_path: Path) -> None:
    """With the repository's level 0 (stores memvault creates), a pack stores blobs and trees as
    they are (ciphertext does not compress) and deflates commits; dulwich and memvault read each
    object back, checked against its id."""
    from dulwich.object_format import SHA1
    from dulwich.pack import Pack

    blob = gitrepo.GitStore.blob(os.urandom(3000))
    tree = gitrepo.GitStore.tree({b"a": (gitobjects.MODE_BLOB, blob.id)})
    commit = gitrepo.GitStore.commit(tree.id, None, b"memvault\n\n" + b"Memvault-Meta: " + b"QUJD" * 120 + b"\n")
    pack, idx, name = gitpack.build_pack([blob, tree, commit], 0)
    stored = gitpack.build_pack([blob, tree], 0)[0]
    assert len(pack) - len(stored) < len(commit.as_raw_string()) * 0.5  # the commit entry shrank
    (tmp_path / f"pack-{name}.pack").write_bytes(pack)
    (tmp_path / f"pack-{name}.idx").write_bytes(idx)
    with Pack(str(tmp_path / f"pack-{name}"), object_format=SHA1) as p:
        for obj in (blob, tree, commit):
            type_num, raw = p.get_raw(bytes.fromhex(obj.id.decode()))
            assert gitobjects.TYPE_NAMES[type_num] == obj.type_name and raw == obj.as_raw_string()


# -- memvault's own pack reader (memvault.git.packread) ------------------------------------------------


def _raw_id(obj: gitobjects.GitObject) -> bytes:
    return bytes.fromhex(obj.id.decode())


def _install(pack_dir: Path, pack: bytes, idx: bytes, name: str | None = None) -> Path:
    """Write a pack and its index as ``pack-<name>`` (default: its checksum); return the base."""
    pack_dir.mkdir(parents=True, exist_ok=True)
    base = pack_dir / f"pack-{name or pack[-20:].hex()}"
    base.with_suffix(".pack").write_bytes(pack)
    base.with_suffix(".idx").write_bytes(idx)
    return base


def _forge_pack(entries: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    """A pack of raw entries ``(20-byte id the index claims, entry bytes)`` and its index (both
    well-formed: checksums right, so only what the entries say can be wrong)."""
    import hashlib
    import struct
    import zlib

    parts, index, offset = [], [], 12
    for raw_id, entry in entries:
        index.append((raw_id, zlib.crc32(entry), offset))
        parts.append(entry)
        offset += len(entry)
    body = b"PACK" + struct.pack(">II", 2, len(entries)) + b"".join(parts)
    checksum = hashlib.sha1(body).digest()
    return body + checksum, gitpack.pack_index(index, checksum)


def _entry(type_num: int, body: bytes, *, declared: int | None = None, stream: bytes | None = None) -> bytes:
    import zlib

    size = len(body) if declared is None else declared
    return gitpack.entry_header(type_num, size) + (zlib.compress(body, 0) if stream is None else stream)


def test_pack_reader_reads_every_object_and_nothing_else(tmp_path: Path) -> None:
    from memvault.git.packread import PackReader

    objects = [gitrepo.GitStore.blob(os.urandom(n)) for n in (0, 10, 5000, 200_000)]
    objects.append(gitrepo.GitStore.tree({b"a": (gitobjects.MODE_BLOB, objects[1].id)}))
    objects.append(gitrepo.GitStore.commit(objects[-1].id, None, b"message"))
    for level in (0, 9):
        pack, idx, _name = gitpack.build_pack(objects, level)
        reader = PackReader(str(tmp_path / f"l{level}"), 1 << 20)
        _install(tmp_path / f"l{level}", pack, idx)
        for obj in objects:
            assert reader.get(_raw_id(obj)) == (gitobjects.PACK_TYPES[obj.type_name], obj.as_raw_string())
            assert reader.contains(_raw_id(obj))
        assert reader.get(b"\0" * 20) is None and reader.get(b"\xff" * 20) is None
        assert not reader.contains(_raw_id(gitrepo.GitStore.blob(b"absent")))
        reader.close()


def test_pack_reader_refuses_hostile_entries(tmp_path: Path) -> None:
    """Each entry lies in one way; the index and pack checksums are right. Every read is an
    IntegrityError, and none inflates more than the entry's bound."""
    import tracemalloc
    import zlib

    from memvault.git.packread import PackReader

    good = gitrepo.GitStore.blob(b"x" * 1000)
    gid = _raw_id(good)
    bomb = zlib.compress(b"\0" * (64 << 20), 9)  # 64 MiB of zeros in about 64 KiB
    cases = {
        "wrong id": [(gid, _entry(3, b"y" * 1000))],
        "huge declared size": [(gid, _entry(3, b"x" * 1000, declared=(1 << 20) + 1))],
        "zlib bomb": [(gid, _entry(3, b"", declared=1000, stream=bomb))],
        "shorter than declared": [(gid, _entry(3, b"x" * 999, declared=1000))],
        "not zlib": [(gid, _entry(3, b"", declared=1000, stream=os.urandom(1100)))],
        "truncated stream": [(gid, _entry(3, b"", declared=1000, stream=zlib.compress(b"x" * 1000)[:-6]))],
        "reserved type 5": [(gid, b"\x50" + zlib.compress(b""))],
        "size varint runs on": [(gid, b"\xb0" + b"\xff" * 40)],
        "delta base before the pack": [(gid, b"\x60\x7f" + zlib.compress(b"\0\0"))],
        "ref delta to itself": [(gid, b"\x72" + gid + zlib.compress(b"\x00\x00"))],
        "ref delta to a missing base": [(gid, b"\x72" + b"\1" * 20 + zlib.compress(b"\x00\x00"))],
    }
    for name, entries in cases.items():
        d = tmp_path / name.replace(" ", "_")
        pack, idx = _forge_pack(entries)
        _install(d, pack, idx)
        reader = PackReader(str(d), 1 << 20)
        tracemalloc.start()
        try:
            with pytest.raises(IntegrityError):
                reader.get(gid)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            reader.close()
        assert peak < 4 << 20, name  # never the bomb's 64 MiB


def _ofs_entry(delta: bytes, distance: int) -> bytes:
    """An OFS_DELTA entry whose base starts ``distance`` bytes before it (git's encoding)."""
    import zlib

    encoded = [distance & 0x7F]
    rest = distance >> 7
    while rest:
        rest -= 1
        encoded.insert(0, 0x80 | (rest & 0x7F))
        rest >>= 7
    return gitpack.entry_header(6, len(delta)) + bytes(encoded) + zlib.compress(delta)


def test_pack_reader_resolves_deltas_and_refuses_hostile_ones(tmp_path: Path) -> None:
    """OFS_DELTA and REF_DELTA entries (as ``git gc`` writes them) resolve, bounded; a delta
    that copies outside its base, inserts past its end or misstates a size is refused."""
    import zlib

    from memvault.git.packread import PackReader

    base = gitrepo.GitStore.blob(b"0123456789" * 100)
    target_body = b"0123456789" * 50 + b"NEW" + b"0123456789" * 50
    target = gitrepo.GitStore.blob(target_body)
    # copy 500 bytes from 0, insert "NEW", copy 500 bytes from 500
    ops = b"\xb1\x00\xf4\x01" + b"\x03NEW" + b"\xb3\xf4\x01\xf4\x01"
    delta = b"\xe8\x07" + bytes([len(target_body) & 0x7F | 0x80, len(target_body) >> 7]) + ops
    base_entry = _entry(3, base.as_raw_string())
    ofs_entry = _ofs_entry(delta, len(base_entry))  # the base is the entry right before
    ref_entry = gitpack.entry_header(7, len(delta)) + _raw_id(base) + zlib.compress(delta)
    for kind, entry in (("ofs", ofs_entry), ("ref", ref_entry)):
        pack, idx = _forge_pack([(_raw_id(base), base_entry), (_raw_id(target), entry)])
        _install(tmp_path / kind, pack, idx)
        reader = PackReader(str(tmp_path / kind), 1 << 20)
        assert reader.get(_raw_id(target)) == (3, target_body)
        reader.close()
    hostile = {
        "copy past the base": b"\xe8\x07\x05" + b"\x93\xe6\x03\x05",  # copy 5 bytes at 998 of 1000
        "insert past the delta": b"\xe8\x07\x05" + b"\x05AB",
        "more than declared": b"\xe8\x07\x02" + b"\x03ABC",
        "less than declared": b"\xe8\x07\x04" + b"\x03ABC",
        "wrong base size": b"\xe7\x07\x03" + b"\x03ABC",
        "opcode 0": b"\xe8\x07\x03" + b"\x00\x03ABC",
        "huge target": b"\xe8\x07\x80\x80\x80\x80\x01" + b"\x03ABC",
    }
    for name, bad in hostile.items():
        claimed = gitrepo.GitStore.blob(b"ABC")
        entry = gitpack.entry_header(7, len(bad)) + _raw_id(base) + zlib.compress(bad)
        d = tmp_path / name.replace(" ", "_")
        pack, idx = _forge_pack([(_raw_id(base), base_entry), (_raw_id(claimed), entry)])
        _install(d, pack, idx)
        reader = PackReader(str(d), 1 << 20)
        with pytest.raises(IntegrityError):
            reader.get(_raw_id(claimed))
        assert reader.get(_raw_id(base)) == (3, base.as_raw_string())  # the rest of the pack reads on
        reader.close()


def test_pack_reader_refuses_hostile_indexes_and_packs(tmp_path: Path) -> None:
    """An index whose checksum is right but whose tables lie, or a pack that is not the one its
    index was written for, is never used: its objects are absent (None), nothing raises."""
    import hashlib
    import struct

    from memvault.git.packread import PackReader

    objects = [gitrepo.GitStore.blob(bytes([i]) * 100) for i in range(40)]
    pack, idx, _name = gitpack.build_pack(objects, 0)
    n = len(objects)
    offsets_at = 1032 + 24 * n

    def resigned(body: bytearray) -> bytes:
        return bytes(body[:-20]) + hashlib.sha1(bytes(body[:-20])).digest()

    def with_offset(value: int) -> bytes:
        body = bytearray(idx)
        struct.pack_into(">I", body, offsets_at, value)
        return resigned(body)

    swapped = bytearray(idx)  # two ids out of order
    swapped[1032 : 1032 + 40] = idx[1052:1072] + idx[1032:1052]
    fan = bytearray(idx)  # a fan-out that goes down
    struct.pack_into(">I", fan, 8 + 4 * 100, 0xFFFF)
    cases = {
        "offset past the pack": (pack, with_offset(len(pack))),
        "offset into the header": (pack, with_offset(4)),
        "large offset out of range": (pack, with_offset(0x80000005)),
        "duplicate offset": (pack, with_offset(struct.unpack_from(">I", idx, offsets_at + 4)[0])),
        "ids out of order": (pack, resigned(swapped)),
        "fan-out not monotonic": (pack, resigned(fan)),
        "truncated pack": (pack[:-100], idx),
        "pack of another index": (gitpack.build_pack(objects[:-1], 0)[0], idx),
        "empty pack": (b"", idx),
        "truncated index": (pack, idx[:-1]),
    }
    for name, (data, index) in cases.items():
        d = tmp_path / name.replace(" ", "_")
        _install(d, data, index, name=pack[-20:].hex())
        reader = PackReader(str(d), 1 << 20)
        for obj in objects:
            assert reader.get(_raw_id(obj)) is None, name
        assert not reader.rescan(), name  # refused once, not read again until the index changes
        reader.close()


def test_pack_reader_never_reads_a_removed_pack(tmp_path: Path) -> None:
    """A reader holding a pack open stops reading it once it is removed (even though the open
    file could still be read); a pack that replaced it is found by the lookup's rescan."""
    from memvault.git.packread import PackReader

    objects = [gitrepo.GitStore.blob(os.urandom(100)) for _ in range(5)]
    pack, idx, _name = gitpack.build_pack(objects, 0)
    d = tmp_path / "pack"
    base = _install(d, pack, idx)
    reader = PackReader(str(d), 1 << 20)
    assert reader.get(_raw_id(objects[0])) is not None
    base.with_suffix(".idx").unlink()
    base.with_suffix(".pack").unlink()
    assert reader.get(_raw_id(objects[1])) is None  # not served from the file still open
    merged, merged_idx, _name = gitpack.build_pack(list(reversed(objects)), 0)  # same objects, other pack
    _install(d, merged, merged_idx)
    assert reader.rescan()
    assert reader.get(_raw_id(objects[1])) == (3, objects[1].as_raw_string())
    # replaced in place under the same name (another inode): validated again before use
    other = [gitrepo.GitStore.blob(os.urandom(100)) for _ in range(3)]
    again, again_idx, _name = gitpack.build_pack(other, 0)
    merged_base = d / f"pack-{merged[-20:].hex()}"
    for path in (merged_base.with_suffix(".pack"), merged_base.with_suffix(".idx")):
        path.unlink()
    _install(d, again, again_idx, name=merged[-20:].hex())
    assert reader.get(_raw_id(other[1])) is None  # not in the index this reader checked
    assert reader.rescan()  # the file under that name changed: validated again
    assert reader.get(_raw_id(other[1])) == (3, other[1].as_raw_string())
    assert reader.get(_raw_id(objects[2])) is None
    assert reader.get(_raw_id(other[0])) == (3, other[0].as_raw_string())
    reader.close()


@pytest.mark.skipif(GIT is None, reason="needs git")
@pytest.mark.parametrize("offsets", [True, False])
def test_pack_reader_reads_deltas_git_wrote(tmp_path: Path, offsets: bool) -> None:
    """git's own deltified packs (OFS_DELTA, or REF_DELTA without delta base offsets) read back
    byte for byte as ``git cat-file`` shows them."""
    from memvault.git.packread import PackReader

    repo = tmp_path / "r.git"
    subprocess.run([GIT, "init", "-q", "--bare", str(repo)], check=True)
    texts = [b"".join(b"line %d of a note that changes a little\n" % (i * j) for i in range(200)) for j in range(1, 9)]
    ids = []
    for text in texts:
        out = subprocess.run([GIT, "--git-dir", str(repo), "hash-object", "-w", "--stdin"], input=text,
                             capture_output=True, check=True)  # fmt: skip
        ids.append(out.stdout.strip())
    flags = ["--delta-base-offset"] if offsets else []
    subprocess.run([GIT, "--git-dir", str(repo), "pack-objects", "-q", "--window=50", "--depth=50", *flags,
                    str(repo / "objects" / "pack" / "pack")], input=b"\n".join(ids) + b"\n", check=True)  # fmt: skip
    pack_dir = repo / "objects" / "pack"
    [idx_path] = pack_dir.glob("*.idx")
    listing = subprocess.run([GIT, "verify-pack", "-v", str(idx_path)], capture_output=True, text=True, check=True)
    assert sum(len(line.split()) == 7 for line in listing.stdout.splitlines()) >= 4  # deltas (depth, base)
    reader = PackReader(str(pack_dir), 1 << 20)
    for obj_id, text in zip(ids, texts, strict=True):
        assert reader.get(bytes.fromhex(obj_id.decode())) == (3, text)
    reader.close()


def test_a_store_refuses_a_packed_blob_larger_than_the_bound_before_inflating_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack entry that declares more than MAX_OBJECT_BYTES is an integrity error of the file
    read, found from the entry's header: nothing near its size is allocated."""
    import tracemalloc

    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    _create(store, 1)
    path = parse_path("/memories/n001.md", store.settings)
    node = store.snapshot().get(path)
    assert node is not None
    store.close()
    rewrite_packed_object(tmp_path / "s", node.blob_id, b"\0" * (8 << 20))
    monkeypatch.setattr(gitrepo, "MAX_OBJECT_BYTES", 1 << 20)
    fresh = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    snap = fresh.snapshot()
    tracemalloc.start()
    try:
        with pytest.raises(IntegrityError, match="n001"):
            snap.read(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        fresh.close()
    assert peak < 1 << 20


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_pack_reader_closes_its_pack_files(tmp_path: Path) -> None:
    """Two descriptors per pack while it is used (the pack and its index); none after close, or
    once the reader is gone."""
    import gc

    from memvault.git.packread import PackReader

    objects = [gitrepo.GitStore.blob(os.urandom(100)) for _ in range(3)]
    for chunk in (objects[:2], objects[2:]):
        pack, idx, _name = gitpack.build_pack(chunk, 0)
        _install(tmp_path / "p", pack, idx)

    def open_packs() -> int:
        """Descriptors of this process open on a file of the test's pack directory."""
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / "p"))
            except OSError:
                continue  # closed meanwhile
        return n

    reader = PackReader(str(tmp_path / "p"), 1 << 20)
    assert reader.get(_raw_id(objects[2])) is not None
    assert open_packs() == 4
    reader.close()
    assert open_packs() == 0
    assert reader.get(_raw_id(objects[0])) is not None  # usable again: lists the directory again
    assert open_packs() == 4
    del reader
    gc.collect()
    assert open_packs() == 0


def test_an_index_changed_under_an_open_reader_never_yields_a_wrong_object(tmp_path: Path) -> None:
    """The reader keeps only an index's fan-out and reads its ids from the file at each lookup:
    an index cut short or rewritten in place after it was checked makes a lookup find nothing
    (the pack is checked again and refused), never an error of another kind or a wrong object."""
    from memvault.git.packread import PackReader

    def entry(obj: gitobjects.GitObject) -> tuple[int, bytes]:
        return gitobjects.PACK_TYPES[obj.type_name], obj.as_raw_string()

    objects = [gitrepo.GitStore.blob(os.urandom(100)) for _ in range(40)]
    pack, idx, _name = gitpack.build_pack(objects, 0)
    base = _install(tmp_path / "p", pack, idx)
    reader = PackReader(str(tmp_path / "p"), 1 << 20)
    assert reader.get(_raw_id(objects[0])) == entry(objects[0])
    index = base.with_suffix(".idx")
    with open(index, "r+b") as f:  # in place: the reader's descriptor sees it
        f.truncate(len(idx) // 2)
    assert reader.get(_raw_id(objects[1])) is None
    assert not reader.contains(_raw_id(objects[2]))
    other = [gitrepo.GitStore.blob(os.urandom(100)) for _ in range(40)]
    _pack2, idx2, _name2 = gitpack.build_pack(other, 0)
    index.write_bytes(idx)
    reader = PackReader(str(tmp_path / "p"), 1 << 20)
    assert reader.get(_raw_id(objects[3])) == entry(objects[3])
    with open(index, "r+b") as f:  # another pack's index, same size, written over this one's
        f.write(idx2)
    for obj in objects + other:
        try:
            found = reader.get(_raw_id(obj))
        except IntegrityError:
            continue
        assert found is None or found == entry(obj)


def test_pack_reader_on_randomly_damaged_packs_raises_only_integrity_errors(tmp_path: Path) -> None:
    """Flipped bits anywhere in a pack (undeltified and OFS_DELTA entries) or its index: every
    read gives the object intact, None (an index refused), or IntegrityError; never anything else
    and never a wrong object."""
    import random
    import zlib

    from memvault.git.packread import PackReader

    base = gitrepo.GitStore.blob(b"0123456789" * 100)
    target_body = b"0123456789" * 50 + b"NEW" + b"0123456789" * 50
    target = gitrepo.GitStore.blob(target_body)
    delta = b"\xe8\x07\xeb\x07" + b"\xb1\x00\xf4\x01" + b"\x03NEW" + b"\xb3\xf4\x01\xf4\x01"
    base_entry = _entry(3, base.as_raw_string())
    ofs = len(base_entry)
    ofs_entry = (
        gitpack.entry_header(6, len(delta)) + bytes([0x80 | ((ofs >> 7) - 1), ofs & 0x7F]) + zlib.compress(delta)
    )
    others = [gitrepo.GitStore.blob(os.urandom(n)) for n in (0, 30, 3000)]
    pack, idx = _forge_pack(
        [(_raw_id(base), base_entry), (_raw_id(target), ofs_entry)]
        + [(_raw_id(o), _entry(3, o.as_raw_string())) for o in others]
    )
    expected = {_raw_id(o): (3, o.as_raw_string()) for o in [base, *others]} | {_raw_id(target): (3, target_body)}
    good = PackReader(str(_install(tmp_path / "good", pack, idx).parent), 1 << 20)
    assert all(good.get(k) == v for k, v in expected.items())  # the forged delta itself is right
    good.close()
    rng = random.Random(5)
    outcomes: dict[str, int] = {}
    for trial in range(300):
        damaged_pack, damaged_idx = bytearray(pack), bytearray(idx)
        target_file = damaged_pack if rng.random() < 0.7 else damaged_idx
        for _ in range(rng.randint(1, 3)):
            target_file[rng.randrange(len(target_file))] ^= 1 << rng.randrange(8)
        d = tmp_path / f"t{trial}"
        _install(d, bytes(damaged_pack), bytes(damaged_idx), name=pack[-20:].hex())
        reader = PackReader(str(d), 1 << 20)
        for raw_id, value in expected.items():
            try:
                got = reader.get(raw_id)
            except IntegrityError:
                outcomes["refused"] = outcomes.get("refused", 0) + 1
                continue
            assert got in (None, value)
            outcomes["none" if got is None else "intact"] = outcomes.get("none" if got is None else "intact", 0) + 1
        reader.close()
    assert set(outcomes) == {"refused", "none", "intact"}


def _delta_size(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _copy_chain(tmp_path: Path, name: str, base_size: int, links: int) -> tuple[Path, bytes, bytes]:
    """A pack: a blob of ``base_size`` zeros, then ``links`` OFS_DELTAs, each copying the whole
    previous object, the last one appending b"X". Returns (directory, final id, final body)."""
    base = gitrepo.GitStore.blob(bytes(base_size))
    ops = b""
    for start in range(0, base_size, 0x10000):  # copy 64 KiB at offset `start` (offset bytes 2 and 3)
        ops += b"\x8c" + bytes([(start >> 16) & 0xFF, (start >> 24) & 0xFF])
    same = _delta_size(base_size) + _delta_size(base_size) + ops
    final_body = bytes(base_size) + b"X"
    last = _delta_size(base_size) + _delta_size(base_size + 1) + ops + b"\x01X"
    entries = [(_raw_id(base), _entry(3, base.as_raw_string()))]
    for i in range(links):
        delta = last if i == links - 1 else same
        raw_id = _raw_id(gitrepo.GitStore.blob(final_body)) if i == links - 1 else bytes([i + 1]) * 20
        entries.append((raw_id, _ofs_entry(delta, len(entries[-1][1]))))
    pack, idx = _forge_pack(entries)
    _install(tmp_path / name, pack, idx)
    return tmp_path / name, entries[-1][0], final_body


def test_pack_reader_bounds_the_work_of_a_delta_chain(tmp_path: Path) -> None:
    """A chain that rebuilds a large object again and again stops once its intermediate results
    together pass four times the object bound; a shorter one of the same kind reads."""
    from memvault.git.packread import PackReader

    bound = 1 << 20  # 256 KiB objects: four times the bound is 16 of them
    ok_dir, ok_id, ok_body = _copy_chain(tmp_path, "short", 256 * 1024, 12)
    reader = PackReader(str(ok_dir), bound)
    assert reader.get(ok_id) == (3, ok_body)
    reader.close()
    bad_dir, bad_id, _ = _copy_chain(tmp_path, "long", 256 * 1024, 20)
    reader = PackReader(str(bad_dir), bound)
    with pytest.raises(IntegrityError):
        reader.get(bad_id)
    reader.close()


def test_pack_reader_bounds_the_delta_bytes_of_a_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memvault.git.packread import PackReader

    monkeypatch.setattr(packread, "MAX_DELTA_BYTES", 64 * 1024)
    ok_dir, ok_id, ok_body = _copy_chain(tmp_path, "few", 64 * 1024, 3)  # ~3 bytes of instructions per link
    reader = PackReader(str(ok_dir), 1 << 20)
    assert reader.get(ok_id) == (3, ok_body)
    reader.close()
    base = gitrepo.GitStore.blob(b"")
    big = bytes(70 * 1024)  # inserted, 127 bytes per instruction: more than 64 KiB of delta
    ops = b"".join(bytes([len(big[i : i + 127])]) + big[i : i + 127] for i in range(0, len(big), 127))
    delta = _delta_size(0) + _delta_size(len(big)) + ops
    target = gitrepo.GitStore.blob(big)
    base_entry = _entry(3, base.as_raw_string())
    pack, idx = _forge_pack([(_raw_id(base), base_entry), (_raw_id(target), _ofs_entry(delta, len(base_entry)))])
    _install(tmp_path / "big", pack, idx)
    reader = PackReader(str(tmp_path / "big"), 1 << 20)
    with pytest.raises(IntegrityError):
        reader.get(_raw_id(target))
    monkeypatch.setattr(packread, "MAX_DELTA_BYTES", 1 << 20)
    assert reader.get(_raw_id(target)) == (3, big)  # the same delta under a larger budget
    reader.close()


def test_pack_reader_reports_a_pack_it_cannot_open_as_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of descriptors (or EIO, EACCES) while opening a pack: an object not found in the other
    packs is not "absent" (which a store would read as a rollback or damage) but a StorageError;
    a failed read of a pack is one too. Both work again once the fault is gone."""
    import errno

    from memvault.errors import StorageError
    from memvault.git.packread import PackReader

    blob = gitrepo.GitStore.blob(b"content")
    pack, idx, _ = gitpack.build_pack([blob], 0)
    _install(tmp_path / "p", pack, idx)
    real_init = packindex.IndexedPack.__init__

    def emfile(self: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(packindex.IndexedPack, "__init__", emfile)
    reader = PackReader(str(tmp_path / "p"), 1 << 20)
    with pytest.raises(StorageError, match="could not be read"):
        reader.contains(_raw_id(blob))
    with pytest.raises(StorageError):
        reader.get(_raw_id(blob))
    monkeypatch.setattr(packindex.IndexedPack, "__init__", real_init)
    reader.rescan()
    assert reader.get(_raw_id(blob)) == (3, b"content")

    def eio(*args: object) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(packread.os, "pread", eio)
    with pytest.raises(StorageError) as caught:
        reader.get(_raw_id(blob))
    assert not isinstance(caught.value, IntegrityError)
    monkeypatch.undo()
    assert reader.get(_raw_id(blob)) == (3, b"content")
    reader.close()


def test_a_damaged_copy_in_one_pack_is_passed_over_for_an_intact_one(tmp_path: Path) -> None:
    """The pack asked first (most objects) holds a damaged copy of an object, another pack (or a
    loose file) an intact one: the intact copy is read; with no intact copy, IntegrityError."""
    from memvault.git.packread import PackReader

    blob = gitrepo.GitStore.blob(b"intact content")
    fillers = [gitrepo.GitStore.blob(b"filler %d" % i) for i in range(5)]
    damaged = [(_raw_id(f), _entry(3, f.as_raw_string())) for f in fillers] + [
        (_raw_id(blob), _entry(3, b"damaged content"))
    ]
    pack_dir = tmp_path / "repo" / "objects" / "pack"
    _install(pack_dir, *_forge_pack(sorted(damaged)))
    reader = PackReader(str(pack_dir), 1 << 20)
    with pytest.raises(IntegrityError):
        reader.get(_raw_id(blob))  # the only copy is damaged
    intact_pack, intact_idx, _ = gitpack.build_pack([blob], 0)
    _install(pack_dir, intact_pack, intact_idx)
    reader.rescan()
    assert reader.get(_raw_id(blob)) == (3, b"intact content")
    reader.close()
    # a loose copy stands in for a damaged packed one too
    (pack_dir / f"pack-{intact_pack[-20:].hex()}.idx").unlink()
    (pack_dir / f"pack-{intact_pack[-20:].hex()}.pack").unlink()
    git = gitrepo.GitStore.init(tmp_path / "repo2", durable=False)
    git.close()
    shutil.rmtree(tmp_path / "repo2" / "objects")
    shutil.copytree(tmp_path / "repo" / "objects", tmp_path / "repo2" / "objects")
    git = gitrepo.GitStore(tmp_path / "repo2", durable=False)
    try:
        with pytest.raises(IntegrityError):
            git.read_blob(blob.id)
        git.write([blob])  # the loose writer
        assert git.read_blob(blob.id) == b"intact content"
    finally:
        git.close()


def test_a_pack_whose_index_is_not_a_file_memvault_wrote_is_ignored_not_a_storage_error(tmp_path: Path) -> None:
    """An index that is too large (or a directory, a FIFO) is refused as before: its objects are
    absent, the other packs read, and nothing is reported as the disk's fault."""
    from memvault.git.packread import PackReader

    good = gitrepo.GitStore.blob(b"good")
    other = gitrepo.GitStore.blob(b"other")
    pack_dir = tmp_path / "p"
    _install(pack_dir, *gitpack.build_pack([good], 0)[:2])
    big_pack, big_idx, _ = gitpack.build_pack([other], 0)
    base = _install(pack_dir, big_pack, big_idx)
    base.with_suffix(".idx").write_bytes(big_idx + bytes(4096))  # larger than the reader's bound
    reader = PackReader(str(pack_dir), 2048)
    assert reader.get(_raw_id(good)) == (3, b"good")
    assert not reader.contains(_raw_id(other)) and reader.get(_raw_id(other)) is None
    reader.close()


# -- the read path of a file view: one stored block, one hash -------------------------------------


def _inflated(stream: bytes, size: int) -> bytes | None:
    """What zlib makes of ``stream`` as packread's inflater takes it: exactly ``size`` bytes
    and a complete stream (the bytes after it are the next entry's), else None."""
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(stream, size + 1)
    except zlib.error:
        return None
    return body if len(body) == size and inflater.eof and not inflater.unconsumed_tail else None


def test_the_stored_block_shortcut_accepts_only_what_zlib_accepts() -> None:
    """packread takes a stream of one final stored block apart without an inflater: the data of
    every such stream memvault or zlib writes, and for every altered header, block header,
    length or Adler-32 either nothing (zlib decides) or exactly what zlib makes of it."""
    from memvault.git.packread import _stored_block

    for size in (0, 1, 60, 2437, 0xFFFF, 0x10000):
        data = os.urandom(size)
        for stream in {gitpack.zlib_stored(data), zlib.compress(data, 0)}:
            framed = b"entry header" + stream + b"next entry"
            if size > 0xFFFF or (stream != gitpack.zlib_stored(data) and size >= 32 * 1024):
                assert _stored_block(framed, 12, size) is None  # more than one block: zlib's work
                continue
            assert _stored_block(framed, 12, size) == data
            assert _stored_block(framed, 12, size - 1) is None and _stored_block(framed, 12, size + 1) is None
            assert _stored_block(framed[: 12 + len(stream) - 1], 12, size) is None  # the Adler-32 cut off
    data = os.urandom(300)
    stream = zlib.compress(data, 0)
    variants = [bytes([cmf, flg]) + stream[2:] for cmf in range(256) for flg in range(256)]
    variants += [stream[:2] + bytes([b]) + stream[3:] for b in range(256)]
    variants += [
        stream[:3] + n.to_bytes(2, "little") + (n ^ 0xFFFF).to_bytes(2, "little") + stream[7:] for n in (0, 299, 301)
    ]
    variants += [
        stream[:i] + bytes([stream[i] ^ (1 << bit)]) + stream[i + 1 :] for i in range(3, 7) for bit in range(8)
    ]
    n = len(stream)
    variants += [stream[: n - 4 + i] + bytes([stream[n - 4 + i] ^ 1]) + stream[n - 3 + i :] for i in range(4)]
    variants += [zlib.compress(data, 9), zlib.compress(b"x" * 300, 9)]
    accepted = 0
    for variant in variants:
        got = _stored_block(variant + b"next", 0, 300)
        if got is not None:
            accepted += 1
            assert got == _inflated(variant + b"next", 300)
    assert accepted > 1  # header bytes zlib takes as well (another FCHECK, CINFO, the padding bits)


def test_a_packed_blob_is_read_without_an_inflater_and_checked_by_one_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blob memvault packed (stored) is read without setting up zlib's inflater; given the
    SHA-256 its record names, the body is checked against that instead of its SHA-1 id, and a
    body that does not have it is damaged (another pack's intact copy read, else IntegrityError)."""
    import hashlib

    from memvault.git.packread import PackReader

    blob = gitrepo.GitStore.blob(os.urandom(2400))
    digest = hashlib.sha256(blob.as_raw_string()).digest()
    pack_dir = tmp_path / "p"
    _install(pack_dir, *gitpack.build_pack([blob], 0)[:2])
    reader = PackReader(str(pack_dir), 1 << 20)
    reader.rescan()  # the index is validated (its SHA-1 checksum) when the pack is first listed

    def refused(*args: object, **kwargs: object) -> object:
        raise AssertionError("not on this path")

    with monkeypatch.context() as m:
        m.setattr(packread.zlib, "decompressobj", refused)
        m.setattr(packread.hashlib, "sha1", refused)
        assert reader.get(_raw_id(blob), digest) == (3, blob.as_raw_string())
        with pytest.raises(IntegrityError):
            reader.get(_raw_id(blob), bytes(32))  # not the content the record names
    assert reader.get(_raw_id(blob)) == (3, blob.as_raw_string())  # without a digest: its id
    reader.close()
    # a copy with the right id and size but other content, in the pack asked first
    damaged = [(_raw_id(blob), _entry(3, os.urandom(2400)))]
    damaged += [
        (_raw_id(f), _entry(3, f.as_raw_string())) for f in (gitrepo.GitStore.blob(b"%d" % i) for i in range(3))
    ]
    other = tmp_path / "q"
    _install(other, *_forge_pack(sorted(damaged)))
    reader = PackReader(str(other), 1 << 20)
    with pytest.raises(IntegrityError):
        reader.get(_raw_id(blob), digest)
    _install(other, *gitpack.build_pack([blob], 0)[:2])
    reader.rescan()
    assert reader.get(_raw_id(blob), digest) == (3, blob.as_raw_string())
    reader.close()


def test_read_blob_checks_a_loose_blob_against_the_digest_too(tmp_path: Path) -> None:
    import hashlib

    blob = gitrepo.GitStore.blob(b"loose content")
    git = gitrepo.GitStore.init(tmp_path / "repo", durable=False)
    try:
        git.write([blob])
        assert git.read_blob(blob.id, hashlib.sha256(b"loose content").digest()) == b"loose content"
        with pytest.raises(IntegrityError):
            git.read_blob(blob.id, hashlib.sha256(b"other content").digest())
    finally:
        git.close()


def test_commit_objects_are_deflated_with_a_small_window() -> None:
    """A commit is deflated (its hex ids and base64 shrink) with a 4 KiB window: zlib's default
    32 KiB window costs ~85 us to set up per commit. Any inflater reads it; the body round-trips."""
    tree = gitrepo.GitStore.tree({b"a": (gitobjects.MODE_BLOB, gitrepo.GitStore.blob(b"x").id)})
    message = (
        b"memvault\n\nMemvault-Meta: " + base64.b64encode(os.urandom(284)) + b"\nMemvault-Tag: " + b"ab" * 32 + b"\n"
    )
    commit = gitrepo.GitStore.commit(tree.id, b"1" * 40, message)
    pack, _idx, _name = gitpack.build_pack([commit], 0)
    body = commit.as_raw_string()
    head = 12 + 2  # pack header, then a two-byte entry header (type commit, size < 2048)
    assert pack[12] >> 4 & 7 == 1
    stream = pack[head:-20]
    assert stream[0] == 0x48  # CMF: deflate, CINFO 4 (a 4 KiB window)
    assert zlib.decompress(stream) == body
    assert len(stream) < 0.85 * len(body)


@pytest.mark.parametrize("checked_by", ["sha1", "sha256"])
def test_a_packed_copy_of_the_wrong_type_is_passed_over(tmp_path: Path, checked_by: str) -> None:
    """A packed copy whose entry header names another type (a flipped bit) is damaged on both
    paths: with the node record's SHA-256 (a file view) nothing else checks the type, so the
    intact loose copy must still be found, as with the git id."""
    blob = gitrepo.GitStore.blob(os.urandom(500))
    body = blob.as_raw_string()
    repo = tmp_path / "repo"
    git = gitrepo.GitStore.init(repo, durable=False)
    try:
        _install(repo / "objects" / "pack", *_forge_pack([(_raw_id(blob), _entry(1, body))]))  # type 1: commit
        with pytest.raises(IntegrityError):  # the only copy: refused, not served as a blob
            git.read_blob(blob.id, hashlib.sha256(body).digest() if checked_by == "sha256" else None)
        git.write([blob])  # an intact loose copy
        assert git.read_blob(blob.id, hashlib.sha256(body).digest() if checked_by == "sha256" else None) == body
    finally:
        git.close()


def _fake_pack_with_index(
    directory: Path, n: int, *, swap_at: int | None = None, first_byte: int | None = None
) -> tuple[int, bytes]:
    """A pack of ``n`` one-byte entries (never read) and a well-formed version 2 index of ``n``
    random ids for it (all starting with ``first_byte`` if given: one fan-out bucket); ``swap_at``:
    those two neighbouring ids exchanged. Returns the index size and its first id."""
    import struct

    prefix = b"" if first_byte is None else bytes([first_byte])
    ids = sorted(prefix + os.urandom(20 - len(prefix)) for _ in range(n))
    if swap_at is not None:
        ids[swap_at], ids[swap_at + 1] = ids[swap_at + 1], ids[swap_at]
    trailer = os.urandom(20)
    pack = b"PACK" + struct.pack(">II", 2, n) + bytes(n) + trailer
    fanout = [0] * 256
    for raw in ids:
        fanout[raw[0]] += 1
    fanout = list(itertools.accumulate(fanout))
    body = b"\377tOc\0\0\0\2" + struct.pack(">256I", *fanout) + b"".join(ids) + bytes(4 * n)
    body += struct.pack(f">{n}I", *range(12, 12 + n)) + trailer
    idx = body + hashlib.sha1(body).digest()
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / f"pack-{trailer.hex()}"
    base.with_suffix(".pack").write_bytes(pack)
    base.with_suffix(".idx").write_bytes(idx)
    return len(idx), ids[0]


def test_checking_a_large_index_holds_a_bounded_share_of_it_in_memory(tmp_path: Path) -> None:
    """Validating an index (ids ascending a slice at a time, offsets sorted in place) peaks at
    about 3x the index's size, not the ~6x a list of every id and a set of every offset took
    (a hostile 256 MiB index then cost ~1.6 GB)."""
    import tracemalloc

    size, first = _fake_pack_with_index(tmp_path / "big", 200_000)
    tracemalloc.start()
    try:
        pack = packindex.IndexedPack(str(next((tmp_path / "big").glob("*.idx")))[:-4], 1 << 30)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pack.count == 200_000 and pack.find(first) == 12
    pack.close()
    assert peak < 4 * size, (peak, size)


@pytest.mark.parametrize("swap_at", [2, 3, 4, 7])
def test_ids_out_of_order_are_found_across_the_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_at: int
) -> None:

    monkeypatch.setattr(packindex, "_ID_CHUNK", 4)  # slices of 4 ids: 3/4 and 7/8 straddle them
    _fake_pack_with_index(tmp_path / "ok", 10, first_byte=7)
    pack = packindex.IndexedPack(str(next((tmp_path / "ok").glob("*.idx")))[:-4], 1 << 20)
    assert pack.count == 10
    pack.close()
    _fake_pack_with_index(tmp_path / "bad", 10, swap_at=swap_at, first_byte=7)  # the fan-out cannot tell
    with pytest.raises(IntegrityError):
        packindex.IndexedPack(str(next((tmp_path / "bad").glob("*.idx")))[:-4], 1 << 20)


def test_the_merge_leaves_alone_a_pack_the_reader_would_not_use(tmp_path: Path) -> None:
    """The merge checks its source packs as the pack reader does (checked_pack_entries): a pack
    whose file is not the one its index was written for (same object count, other trailer) is
    neither merged nor removed; the good packs are merged."""
    git = gitrepo.GitStore.init(tmp_path / "repo", durable=False)
    try:
        pack_dir = tmp_path / "repo" / "objects" / "pack"
        groups = [[gitrepo.GitStore.blob(os.urandom(50)) for _ in range(3)] for _ in range(3)]
        for group in groups:
            git.write_pack(group)
        odd = [gitrepo.GitStore.blob(os.urandom(50)) for _ in range(3)]
        pack, idx, name = gitpack.build_pack(odd, 0)
        other_pack = gitpack.build_pack([gitrepo.GitStore.blob(os.urandom(50)) for _ in range(3)], 0)[0]
        _install(pack_dir, other_pack, idx, name=name)  # this index beside another pack's bytes
        mismatched = pack_dir / f"pack-{name}.pack"
        bases = sorted(str(p)[:-5] for p in pack_dir.glob("*.pack"))
        assert str(mismatched)[:-5] in bases and len(bases) == 4
        merged = git.packs._write_merged(bases, fsync=False)
        assert merged is not None
        assert sorted(merged[1]) == sorted(b for b in bases if b != str(mismatched)[:-5])
        assert mismatched.exists()
    finally:
        git.close()


def _spy_on_full_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the packs whose index the reader checks in full from now on (not compared)."""
    checked: list[str] = []
    real_check = packindex.IndexedPack._check

    def spy(self: packindex.IndexedPack, base: str, idx: bytes) -> None:
        checked.append(os.path.basename(base))
        real_check(self, base, idx)

    monkeypatch.setattr(packindex.IndexedPack, "_check", spy)
    return checked


def _checkpoint_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every journal append begin with a checkpoint (the packs merges replaced go then)."""
    real_append = journal.Journal.append

    def append(self: journal.Journal, entry: journal.Entry) -> bool:
        self.checkpoint()
        return real_append(self, entry)

    monkeypatch.setattr(journal.Journal, "append", append)


def test_a_pack_this_process_wrote_is_opened_by_comparing_its_index_not_checking_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader opens a pack its own process just wrote by comparing the index file with the
    bytes it wrote (no parse); one whose index file differs from them is checked as any other,
    and a damaged one is refused."""
    checked = _spy_on_full_checks(monkeypatch)
    git = gitrepo.GitStore.init(tmp_path / "repo", durable=False)
    try:
        blobs = [gitrepo.GitStore.blob(os.urandom(40)) for _ in range(2)]
        own = git.write_pack([blobs[0]])[0]
        assert git.read_blob(blobs[0].id) and checked == []  # found by a rescan, index compared
        other = git.write_pack([blobs[1]])[0]
        idx_path = tmp_path / "repo" / "objects" / "pack" / f"pack-{other}.idx"
        os.chmod(idx_path, 0o600)
        data = bytearray(idx_path.read_bytes())
        data[-1] ^= 1  # no longer the bytes written: checked, and refused
        idx_path.write_bytes(bytes(data))
        with pytest.raises(IntegrityError):
            git.read_blob(blobs[1].id)
        assert checked == [f"pack-{other}"] and own != other
    finally:
        git.close()


@pytest.mark.skipif(not journal.journal_available(), reason="the commit journal needs Linux syncfs and a boot id")
def test_with_the_journal_the_packs_a_merge_replaced_go_at_its_next_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A durable commit that merges packs does not sync for the merge: the packs it replaced stay
    (holding duplicates; no later merge takes them again) until the journal's next checkpoint
    has made the merged pack durable, and every file reads throughout."""
    store = make_store(tmp_path / "s", StoreSettings(durability="full"))
    for i in range(3):
        _create(store, i)
    replaced = {p.name for p in _pack_dir(store).glob("*.pack")}
    monkeypatch.setattr(packdir, "MERGE_AT", 2)
    monkeypatch.setattr(packdir, "geometric_merge", len)
    _create(store, 3)
    on_disk = {p.name for p in _pack_dir(store).glob("*.pack")}
    assert replaced <= on_disk and len(on_disk) == len(replaced) + 2  # + the merged pack and the commit's
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as other:
        assert set(_files(other)) == {f"/memories/n{i:03}.md" for i in range(4)}
    _create(store, 4)  # no merge (one pack since the last)
    assert replaced <= {p.name for p in _pack_dir(store).glob("*.pack")}
    _checkpoint_first(monkeypatch)
    _create(store, 5)  # a merge of the three packs written since, then a checkpoint: all replaced go
    on_disk = {p.name for p in _pack_dir(store).glob("*.pack")}
    assert not replaced & on_disk and len(on_disk) == 2  # the checkpoint removed every replaced pack
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as other:
        assert _files(other) == {f"/memories/n{i:03}.md": f"note {i}\n".encode() for i in range(6)}
        assert verify(other).ok


def test_a_pack_named_otherwise_than_by_its_checksum_is_merged_too(tmp_path: Path) -> None:
    """git and dulwich may name a pack by something else than its trailer (dulwich by its object
    ids): such a pack passes the reader's checks, and a merge takes it like any other."""
    git = gitrepo.GitStore.init(tmp_path / "repo", durable=False)
    try:
        blobs = [gitrepo.GitStore.blob(os.urandom(60)) for _ in range(4)]
        names = [git.write_pack([blob])[0] for blob in blobs]
        pack_dir = tmp_path / "repo" / "objects" / "pack"
        odd = "ab" * 20
        for ext in (".pack", ".idx"):
            os.rename(pack_dir / f"pack-{names[0]}{ext}", pack_dir / f"pack-{odd}{ext}")
    finally:
        git.close()
    again = gitrepo.GitStore(tmp_path / "repo", durable=False)
    try:
        assert again.consolidate_packs() == 4
        assert len(list(pack_dir.glob("*.pack"))) == 1
        assert all(again.read_blob(blob.id) == blob.as_raw_string() for blob in blobs)
    finally:
        again.close()


def test_a_written_pack_the_reader_forgot_is_checked_like_any_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The note of a pack this process wrote goes with the pack (PackReader.forget): a pack of
    that name found later is checked in full."""
    checked = _spy_on_full_checks(monkeypatch)
    blob = gitrepo.GitStore.blob(b"forgotten")
    pack, idx, name = gitpack.build_pack([blob], 0)
    _install(tmp_path / "p", pack, idx)
    base = str(tmp_path / "p" / f"pack-{name}")
    reader = packread.PackReader(str(tmp_path / "p"), 1 << 20)
    reader.adopt(base, idx)
    reader.forget([base])
    assert reader.get(bytes.fromhex(blob.id.decode())) is not None and checked == [f"pack-{name}"]
