"""The pack directory ``objects/pack``: install a commit's pack, list, merge, sweep.

Each file is written under a temporary name with its final mode and renamed into place, the
index last, so a pack appears whole or not at all; packs are merged geometrically so there are
logarithmically many (docs/format.md §7).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import secrets
import stat
import struct
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import IntegrityError
from ..fsutil import DIR_MODE, O_NEW_FILE, durable_flush, fsync_dir, install_file, opened, private_dir, write_all
from .objects import MAX_OBJECT_BYTES, TYPE_NAMES, GitObject
from .pack import build_pack, entry_header, pack_index
from .packindex import checked_pack_entries, read_pack_index
from .packread import PackReader

__all__ = ["PackDirectory", "geometric_merge", "MERGE_AT", "MERGE_BYTES", "ORPHAN_PACK_SECONDS"]

#: A command merges the smallest packs (:meth:`PackDirectory.write`) once this many of them break
#: the geometric progression (:func:`geometric_merge`), so the fixed cost of a merge (two files,
#: removals) is paid about once per this many commits.
MERGE_AT = 8
#: ... and only packs that together hold at most this many bytes: bigger merges wait for
#: ``close``/``memvault gc`` (:meth:`PackDirectory.consolidate`), so a command's merge stays small.
MERGE_BYTES = 2 * 1024 * 1024
#: A pack without its index is removed once it is this old (:meth:`PackDirectory.sweep_leftovers`).
ORPHAN_PACK_SECONDS = 600.0
_PACK_PREFIX = "pack-"
_PACK_NAME = re.compile(r"\Apack-[0-9a-f]{40}\.pack\Z")
#: memvault's temporary names of packs and indexes being written (git's prefixes, 16 random hex
#: digits where git uses 6 characters).
_TMP_NAME = re.compile(r"\Atmp_(pack|idx)_[0-9a-f]{16}\Z")
#: Files that belong to a pack ``pack-<id>`` besides ``.pack`` and ``.idx`` (written by git).
_PACK_EXTRAS = (".rev", ".bitmap", ".mtimes")
_MERGE_CHUNK = 1024 * 1024
#: First bytes an undeltified entry can start with (type 1-4 in bits 4-6, the size's low bits).
_PLAIN_TYPE_BYTES = frozenset(b for b in range(256) if (b >> 4) & 7 in (1, 2, 3, 4))


def geometric_merge(sizes: list[int]) -> int:
    """How many of the smallest packs (``sizes`` sorted ascending) to merge into one so that every
    pack is at least twice as large as all smaller ones together; 0 for none.

    That invariant keeps the number of packs logarithmic in the number of objects, and an object
    is rewritten only into a pack at least 1.5 times as large as the one it leaves, so at most
    logarithmically often in all. Merging the smallest ``k`` (the last index where the invariant
    fails, plus one) restores it in one step."""
    k, total = 0, 0
    for i, size in enumerate(sizes):
        if i and size < 2 * total:
            k = i + 1
        total += size
    return k


class PackDirectory:
    """The packs of one repository, written and merged by memvault. The caller holds the store's
    writer lock for every method that writes.

    Args:
        objects_dir: the repository's ``objects`` directory.
        reader: the repository's pack reader (told which packs a merge retired).
        durable: make writes durable (durability ``full``).
        syncfs: ``sync`` makes new files durable with one ``syncfs`` (no fsync per file).
        compression: zlib level of blobs and trees (0 for stores memvault creates).
        sync: makes files just renamed into the given directories durable.
        on_retired: called after packs were removed (to drop them from other caches).
    """

    def __init__(
        self,
        objects_dir: Path,
        reader: PackReader,
        *,
        durable: bool,
        syncfs: bool,
        compression: int,
        sync: Callable[[list[str]], None],
        on_retired: Callable[[], None],
    ) -> None:
        self._objects_dir = objects_dir
        self._pack_base = os.fspath(objects_dir / "pack")
        self._reader = reader
        self._durable = durable
        self._fsync_each = durable and not syncfs
        self._compression = compression
        self._sync_dirs = sync
        self._on_retired = on_retired
        #: Sizes of packs seen, by file name (``pack-<checksum>.pack``: fixed for a name).
        self._pack_sizes: dict[str, int] = {}
        #: Commit packs written since the last merge (:meth:`write`); the first commit looks for
        #: a merge (a process may write only one commit).
        self._packs_written = MERGE_AT
        #: Index bytes and size of the packs this object wrote, by path without extension: a merge
        #: copies them by that index, not the file's (their size, header and trailer are checked).
        self._own: dict[str, tuple[bytes, int]] = {}
        #: Packs a merge replaced whose removal waits for the next sync (:meth:`retire_synced`);
        #: left in place they only hold duplicates, and no merge plan takes them again here.
        self._retiring: list[str] = []

    def write(
        self, objects: Iterable[GitObject], *, merge: bool = False, sync: bool = True
    ) -> tuple[str, bytes, bytes]:
        """Write ``objects`` as one pack and its index, durable in durability ``full`` unless not
        ``sync`` (the caller makes it durable: the commit journal); return the pack's name (its
        checksum in hex), its bytes and its index's bytes.

        With ``merge``, first merge the smallest packs when at least :data:`MERGE_AT` of them
        break the geometric progression and hold at most :data:`MERGE_BYTES` together (looked
        for once every :data:`MERGE_AT` - 1 packs); a failed merge is skipped. docs/format.md §7
        says what a crash at each step leaves.

        Raises:
            OSError: the pack could not be written (only unreferenced files can be left).
        """
        fsync_each = self._fsync_each
        data, idx, name = build_pack(objects, self._compression)
        merged: tuple[str, list[str], bytes, int] | None = None
        if merge and self._packs_written >= MERGE_AT - 1:
            try:
                plan = self._merge_plan(MERGE_AT, MERGE_BYTES)
                merged = self._write_merged(plan, fsync=fsync_each) if plan else None
            except (OSError, IntegrityError, ValueError):
                merged = None  # optional: the packs stay as they are
        # The packs a merge replaces go once the merged pack is durable: now when this commit
        # syncs its own pack; after the caller's next sync (retire_synced) when it does not.
        retire_now = merged is not None and (sync or not self._durable)
        try:
            base = self.install(data, idx, name)
            if self._durable and (sync or retire_now):
                self.sync()
        except BaseException:
            if merged is not None:
                self._remove_pack_files(merged[0])
            raise
        self._packs_written += 1
        self._remember(base, idx, len(data))
        if merged is not None:
            self._packs_written = 0
            if retire_now:
                self._retire(merged[1])
            else:
                self._retiring.extend(merged[1])  # still read until removed (retire_synced)
            self._remember(merged[0], merged[2], merged[3])
        return name, data, idx

    def retire_synced(self) -> None:
        """Remove the packs that merges replaced since the last sync, now that one made every
        merged pack durable (the commit journal calls this after its checkpoint). The caller
        holds the store's writer lock."""
        if self._retiring:
            bases, self._retiring = self._retiring, []
            self._retire(bases)

    def _remember(self, base: str, idx: bytes, size: int) -> None:
        """Tell the reader about the pack ``base`` this process just wrote (index ``idx``,
        ``size`` bytes), and keep its index for the merge that will copy it (not read again)."""
        self._reader.adopt(base, idx)
        self._own[base] = (idx, size)

    def install(self, data: bytes, idx: bytes, name: str) -> str:
        """Write a pack and then its index under their final names (each through a temporary
        file, fsynced first where each file is synced); return the pack's path without extension."""
        fsync = self._fsync_each
        base = f"{self._pack_base}/{_PACK_PREFIX}{name}"
        self._write_pack_file(data, base + ".pack", "tmp_pack_", fsync=fsync)
        try:
            self._write_pack_file(idx, base + ".idx", "tmp_idx_", fsync=fsync)
        except BaseException:
            if not os.path.exists(base + ".idx"):  # else the same pack was already complete
                try:
                    os.unlink(base + ".pack")
                except OSError:
                    pass
            raise
        return base

    def restore(self, data: bytes, idx: bytes, name: str) -> bool:
        """Put back a pack and its index (from the commit journal after a reboot) unless both are
        there with exactly these bytes; True if they were written (unsynced: the caller syncs)."""
        base = f"{self._pack_base}/{_PACK_PREFIX}{name}"
        try:
            with open(base + ".pack", "rb") as f_pack, open(base + ".idx", "rb") as f_idx:
                if f_pack.read() == data and f_idx.read() == idx:
                    return False
        except OSError:
            pass  # missing or unreadable: written again below
        self.install(data, idx, name)
        return True

    def _open_pack_tmp(self, prefix: str) -> tuple[int, str]:
        """Create ``objects/pack/<prefix><random>`` exclusively with mode 0400 (making the pack
        directory, 0700, if it is missing); return its descriptor and path."""
        tmp = f"{self._pack_base}/{prefix}{secrets.token_hex(8)}"
        try:
            return os.open(tmp, O_NEW_FILE, 0o400), tmp
        except FileNotFoundError:
            try:
                os.mkdir(self._pack_base, DIR_MODE)
            except FileExistsError:
                pass
            else:
                private_dir(self._pack_base)
                if self._durable:
                    fsync_dir(self._objects_dir)
        return os.open(tmp, O_NEW_FILE, 0o400), tmp

    def _write_pack_file(self, data: bytes, final: str, prefix: str, *, fsync: bool) -> None:
        fd, tmp = self._open_pack_tmp(prefix)
        install_file(fd, tmp, final, data, fsync=fsync)

    def sync(self) -> None:
        """Make the packs just renamed into place durable (durable mode only), then remove the
        packs that merges replaced (:meth:`retire_synced`)."""
        self._sync_dirs([self._pack_base])
        self.retire_synced()

    def pack_files(self) -> list[tuple[str, bytes, bytes]]:
        """``(name, pack bytes, index bytes)`` of every pack named by its checksum that has an
        index (to copy a repository's objects elsewhere)."""
        try:
            names = sorted(os.listdir(self._pack_base))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if _PACK_NAME.match(name) and name[:-5] + ".idx" in names:
                base = f"{self._pack_base}/{name[:-5]}"
                with open(base + ".pack", "rb") as f, open(base + ".idx", "rb") as g:
                    out.append((name[5:-5], f.read(), g.read()))
        return out

    def _packs(self) -> list[tuple[int, str]]:
        """``(size, path without extension)`` of every pack with an index (a ``.keep`` file
        excludes one, as in git), smallest first."""
        try:
            names = set(os.listdir(self._pack_base))
        except FileNotFoundError:
            return []
        out = []
        sizes = self._pack_sizes
        for name in names:
            if name.endswith(".pack"):
                stem = name[:-5]
                if stem + ".idx" in names and stem + ".keep" not in names:
                    size = sizes.get(name)
                    if size is None:
                        try:
                            size = os.stat(f"{self._pack_base}/{name}").st_size
                        except FileNotFoundError:
                            continue
                        if _PACK_NAME.match(name):  # named by its checksum: its size is fixed
                            sizes[name] = size
                    out.append((size, f"{self._pack_base}/{stem}"))
        if len(sizes) > 4 * len(out) + 64:
            for name in [n for n in sizes if n not in names]:
                del sizes[name]
        out.sort()
        return out

    def _merge_plan(self, min_packs: int, max_bytes: int | None) -> list[str]:
        """The packs to merge now (smallest first): the :func:`geometric_merge` of the packs that
        together hold at most ``max_bytes``, if it names at least ``min_packs``."""
        retiring = set(self._retiring)
        packs = [(size, base) for size, base in self._packs() if base not in retiring]
        listed = {base for _size, base in packs}
        self._own = {base: own for base, own in self._own.items() if base in listed}  # others merged them
        if max_bytes is not None:
            total, n = 0, 0
            for size, _base in packs:
                if total + size > max_bytes:
                    break
                total, n = total + size, n + 1
            packs = packs[:n]
        k = geometric_merge([size for size, _base in packs])
        return [base for _size, base in packs[:k]] if k >= max(min_packs, 2) else []

    def _write_merged(self, bases: list[str], *, fsync: bool) -> tuple[str, list[str], bytes, int] | None:
        """Write one pack holding every object of the packs ``bases`` (each id once) and its
        index; return its path, the packs it holds, its index and its size, or None when fewer than two could be read
        (a pack whose index or entries are not as git writes them is left out). Undeltified
        entries are copied as they are (with their index CRC); a delta (a pack ``git gc`` wrote)
        is resolved and stored whole. Not synced here (``fsync``: each file, no directory)."""
        sources: list[tuple[str, list[tuple[int, bytes, int]], int]] = []
        for base in bases:
            own = self._own.get(base)
            if own is not None:
                own_entries, size = read_pack_index(own[0]), own[1]
                if own_entries is None or not self._as_written(base, len(own_entries), size, own[0][-40:-20]):
                    continue  # changed since this process wrote it: left alone
                entries = own_entries
            else:
                try:  # the checks the pack reader makes before it uses a pack
                    entries, size = checked_pack_entries(base, MAX_OBJECT_BYTES)
                except (OSError, IntegrityError):
                    continue  # gone, not a regular file, damaged or foreign (e.g. index version 1): left alone
            if entries:
                sources.append((base, entries, size))
        if len(sources) < 2:
            return None
        seen: set[bytes] = set()
        for _base, entries, _size in sources:
            seen.update(raw_id for _offset, raw_id, _crc in entries)
        count = len(seen)
        seen.clear()
        fd, tmp = self._open_pack_tmp("tmp_pack_")
        try:
            try:
                new_index, checksum = self._copy_entries(fd, sources, count, seen)
                if fsync:
                    durable_flush(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            base = f"{self._pack_base}/{_PACK_PREFIX}{checksum.hex()}"
            if base in bases:  # the merge is one of the packs already (same bytes): nothing to do
                os.unlink(tmp)
                return None
            os.replace(tmp, base + ".pack")
        except BaseException as err:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(err, OSError) or not isinstance(err, Exception):
                raise
            return None  # an entry not as git writes it (a damaged pack): no merge
        idx = pack_index(new_index, checksum)
        try:
            self._write_pack_file(idx, base + ".idx", "tmp_idx_", fsync=fsync)
        except BaseException:
            self._remove_pack_files(base)
            raise
        return base, [b for b, _e, _s in sources], idx, size

    def _copy_entries(
        self, fd: int, sources: list[tuple[str, list[tuple[int, bytes, int]], int]], count: int, seen: set[bytes]
    ) -> tuple[list[tuple[bytes, int, int]], bytes]:
        """Stream the entries of ``sources`` into the pack open at ``fd``: header, entries (each
        id once), SHA-1 trailer. Returns the new index entries and the trailer."""
        digest = hashlib.sha1(usedforsecurity=False)
        chunks: list[bytes] = []
        pending = 0

        def emit(data: bytes) -> None:
            nonlocal pending
            digest.update(data)
            chunks.append(data)
            pending += len(data)
            if pending >= _MERGE_CHUNK:
                write_all(fd, b"".join(chunks))
                chunks.clear()
                pending = 0

        emit(b"PACK" + struct.pack(">II", 2, count))
        offset = 12
        index: list[tuple[bytes, int, int]] = []
        for base, entries, size in sources:
            with open(base + ".pack", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if len(data) != size or data[:4] != b"PACK":
                    raise IntegrityError()
                plain = _PLAIN_TYPE_BYTES
                if not any(raw_id in seen or data[start] not in plain for start, raw_id, _crc in entries):
                    # neither duplicates nor deltas: the entries as one block, offsets shifted
                    shift = offset - entries[0][0]
                    index.extend((raw_id, crc, start + shift) for start, raw_id, crc in entries)
                    seen.update(raw_id for _start, raw_id, _crc in entries)
                    block = data[entries[0][0] : size - 20]
                    emit(block)
                    offset += len(block)
                    continue
                for i, (start, raw_id, crc) in enumerate(entries):
                    if raw_id in seen:
                        continue
                    seen.add(raw_id)
                    end = entries[i + 1][0] if i + 1 < len(entries) else size - 20
                    entry = data[start:end]
                    if (entry[0] >> 4) & 7 not in TYPE_NAMES:  # a delta: resolved (bounded, id-checked), stored whole
                        found = self._reader.get(raw_id)
                        if found is None and self._reader.rescan():
                            found = self._reader.get(raw_id)
                        if found is None:
                            raise IntegrityError()
                        type_num, body = found
                        entry = entry_header(type_num, len(body)) + zlib.compress(body, self._compression)
                        crc = zlib.crc32(entry)
                    index.append((raw_id, crc, offset))
                    emit(entry)
                    offset += len(entry)
        if len(index) != count:
            raise IntegrityError()
        if chunks:
            write_all(fd, b"".join(chunks))
        checksum = digest.digest()
        write_all(fd, checksum)
        return index, checksum

    @staticmethod
    def _as_written(base: str, count: int, size: int, trailer: bytes) -> bool:
        """Whether the pack ``base`` this process wrote still has the size, the header (git's
        signature, ``count`` entries) and the trailer (the one its index records) it was written with."""
        try:
            with opened(os.open(base + ".pack", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)) as fd:
                st = os.fstat(fd)
                head, tail = os.pread(fd, 12, 0), os.pread(fd, 20, size - 20)
        except OSError:
            return False
        return (
            stat.S_ISREG(st.st_mode)
            and st.st_size == size
            and head == b"PACK" + struct.pack(">II", 2, count)
            and tail == trailer
        )

    def _remove_pack_files(self, base: str, extras: Iterable[str] = _PACK_EXTRAS) -> None:
        """Remove a pack, its index first (so no reader starts using it), and those of ``extras``
        (file name endings) it has, best effort."""
        for ext in (".idx", ".pack", *extras):
            try:
                os.unlink(base + ext)
            except FileNotFoundError:
                continue
            except OSError:
                if ext == ".idx":
                    return  # still indexed: leave the pack whole

    def _retire(self, bases: list[str]) -> None:
        """Remove packs whose objects a durable merged pack now holds (best effort: a pack left
        behind only holds duplicates), and drop them from dulwich's cache."""
        try:  # git's extra files, if any: one listing, not a failed removal per pack and kind
            names = [n for n in os.listdir(self._pack_base) if n.endswith(_PACK_EXTRAS)]
        except OSError:
            names = []
        for base in bases:
            stem = os.path.basename(base)
            self._remove_pack_files(base, [e for e in _PACK_EXTRAS if stem + e in names])
        self._reader.forget(bases)
        for base in bases:
            self._own.pop(base, None)
        self._on_retired()

    def sweep_leftovers(self) -> int:
        """Remove what a crashed or failed pack writer left in ``objects/pack``: memvault's
        temporary files (``tmp_pack_<16 hex>``, ``tmp_idx_<16 hex>``), and a ``.pack`` without its
        ``.idx`` (never used by git or dulwich; its objects are unreferenced, or also in a durable
        merged pack) once it is :data:`ORPHAN_PACK_SECONDS` old: a ``git gc`` run alongside may be
        between renaming its new pack and its index. git's own temporary files (6 random
        characters) are left to git. Returns how many files were removed. The caller holds the
        store's writer lock."""
        try:
            names = set(os.listdir(self._pack_base))
        except FileNotFoundError:
            return 0
        cutoff = time.time() - ORPHAN_PACK_SECONDS
        removed = 0
        for name in names:
            path = f"{self._pack_base}/{name}"
            if not _TMP_NAME.match(name):
                if not name.endswith(".pack") or name[:-5] + ".idx" in names:
                    continue
                try:
                    if os.lstat(path).st_mtime > cutoff:
                        continue
                except OSError:
                    continue
            try:
                os.unlink(path)
            except OSError:
                continue
            removed += 1
        return removed

    def count(self) -> int:
        """How many packs (with their index) the repository holds."""
        return len(self._packs())

    def evict(self, target_bytes: int) -> int:
        """Remove the least recently written packs (never the newest, nor one with a ``.keep``
        file) until the packs hold at most ``target_bytes``; return how many were removed. Only
        for a cache whose objects can be fetched again (a replica of a store in object storage)."""
        packs = []
        for size, base in self._packs():
            try:
                packs.append((os.stat(base + ".pack").st_mtime_ns, size, base))
            except FileNotFoundError:
                continue
        packs.sort()
        total = sum(size for _t, size, _b in packs)
        removed: list[str] = []
        for _mtime, size, base in packs[:-1]:
            if total <= target_bytes:
                break
            self._remove_pack_files(base)
            removed.append(base)
            total -= size
        if removed:
            self._reader.forget(removed)
            self._on_retired()
        return len(removed)

    def total_bytes(self) -> int:
        """Bytes of every pack (with its index) the repository holds (pack files only)."""
        return sum(size for size, _base in self._packs())

    def consolidate(self, *, max_bytes: int | None = None) -> int:
        """Merge the smallest packs into one where they break the geometric progression
        (:func:`geometric_merge`; only packs holding at most ``max_bytes`` together, if given);
        return how many packs were merged. The new pack is durable (in durability ``full``)
        before the old ones are removed. The caller holds the store's writer lock."""
        plan = self._merge_plan(2, max_bytes)
        if not plan:
            return 0
        merged = self._write_merged(plan, fsync=self._fsync_each)
        if merged is None:
            return 0
        try:
            if self._durable:
                self.sync()
        except BaseException:
            self._remove_pack_files(merged[0])
            raise
        self._retire(merged[1])
        self._remember(merged[0], merged[2], merged[3])
        return len(merged[1])
