"""memvault's own reader of git packs (``objects/pack``): bounded, checked, and flat in cost.

:class:`PackReader` reads an object from the packs of a repository by id. Every byte of a pack
and its index is treated as hostile:

- a pack and its index are used only once :class:`~memvault.git.packindex.IndexedPack` has
  checked them (its module says how);
- an entry's declared size is checked against the reader's bound *before* it is inflated, and
  the zlib stream is inflated to at most that size plus one byte (a zlib bomb stops there) and
  must end exactly at it (a stream of one stored block that lies whole in the first read of the
  entry, as memvault writes a small object, is taken apart without an inflater:
  :func:`_stored_block`, which accepts only what zlib would);
- a delta (``OFS_DELTA``/``REF_DELTA``, in packs ``git gc`` wrote) is resolved here too, with
  its base in the same pack, through at most :data:`MAX_DELTA_DEPTH` bases and
  :data:`MAX_DELTA_BYTES` of delta instructions, every step bounded the same way and all the
  intermediate results together to four times the object bound (so a crafted chain costs
  seconds of CPU, not minutes);
- what is returned hashes to the id asked for (SHA-1 of git's object header and body), or,
  where the caller knows the body's SHA-256 from an authenticated record (a file view: the node
  record's ``c``), to that digest instead.

The pack is checked with one ``fstat`` before each read, so a pack that was removed (fewer
links) is never read, and one whose file changed (size or time) is validated again before it is
used. Packs another writer added are found by :meth:`PackReader.rescan`, which the caller runs
when the packs it knows do not hold an object; a pack this process wrote is handed over with
:meth:`PackReader.adopt`. Any damage raises :class:`~memvault.errors.IntegrityError` and never
names the bytes it found.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import threading
import zlib

from ..errors import IntegrityError, StorageError
from .objects import TYPE_NAMES
from .packindex import IndexedPack, StalePack, file_signature

__all__ = ["PackReader", "MAX_DELTA_DEPTH", "MAX_DELTA_BYTES"]

#: Longest delta chain resolved (git's own maximum ``pack.depth``).
MAX_DELTA_DEPTH = 250
#: Most delta bytes (inflated) one lookup may apply: a hostile chain of tiny copy instructions
#: costs ~2 us each in Python, so this bounds the CPU time of a lookup (memvault never writes
#: deltas; those ``git gc`` makes of memvault's trees are a few hundred bytes, and ciphertext
#: does not delta).
MAX_DELTA_BYTES = 16 * 1024 * 1024
_OFS_DELTA = 6
_REF_DELTA = 7
#: Packs written by this process whose index bytes :meth:`PackReader.adopt` keeps at most (a
#: merge retires them long before: one in seven commits).
_WRITTEN_NOTES = 256
#: Bytes read at an entry's offset first: a small object (a note, a tree) needs no second read.
_FIRST_READ = 4096
#: Compressed bytes read per step when an entry's stream is longer than expected.
_CHUNK = 1 << 20
#: A zlib header, a stored block's header, LEN and NLEN; the Adler-32 after the data.
_STORED_HEAD = struct.Struct("<BBBHH")
_ADLER32 = struct.Struct(">I")


class PackReader:
    """The packs of one ``objects/pack`` directory, read by id with bounded memory.

    ``max_bytes`` bounds every object inflated (and every delta and intermediate result) and the
    size of an index read. Thread-safe: reads and :meth:`rescan` take one lock, so a pack file
    is never closed while it is read. :meth:`close` closes the pack files.
    """

    def __init__(self, pack_dir: str, max_bytes: int) -> None:
        self._dir = pack_dir
        self._max = max_bytes
        self._lock = threading.Lock()
        #: Validated packs by path without extension; ``_order``: the same, most objects first.
        self._packs: dict[str, IndexedPack] = {}
        self._order: tuple[IndexedPack, ...] = ()
        #: Packs refused, by base, with the identity of the index refused (not read again).
        self._refused: dict[str, tuple[int, int, int, int, int]] = {}
        #: Why a pack listed at the last rescan could not be opened (out of descriptors, EIO,
        #: permission), if one could not: an object not found is then not known to be absent.
        self._unreadable: OSError | None = None
        self._scanned = False
        #: Index bytes of packs this process wrote and no rescan has opened yet (:meth:`adopt`).
        self._written: dict[str, bytes] = {}

    def close(self) -> None:
        """Close every pack file; a later read lists the directory again."""
        with self._lock:
            self._set({})
            self._scanned = False

    def _set(self, packs: dict[str, IndexedPack]) -> None:
        """Use ``packs`` from now on; close the files of the packs left out (lock held)."""
        for base, pack in self._packs.items():
            if packs.get(base) is not pack:
                pack.close()
        self._packs = packs
        self._order = tuple(sorted(packs.values(), key=lambda p: -p.count))

    def forget(self, bases: list[str]) -> None:
        """Stop using the packs ``bases`` (paths without extension; removed by the caller) and
        close their files now rather than at the next read that finds them gone."""
        with self._lock:
            self._set({b: p for b, p in self._packs.items() if b not in bases})
            for base in bases:
                self._written.pop(base, None)

    def adopt(self, base: str, idx: bytes) -> None:
        """Note that this process just wrote the pack ``base`` (path without extension) with the
        index bytes ``idx``: when a rescan finds it, its index is compared with them instead of
        parsed and checked again (a pack that is not as written is checked as any other)."""
        with self._lock:
            if len(self._written) >= _WRITTEN_NOTES:  # a writer whose reads never miss: drop the oldest
                del self._written[next(iter(self._written))]
            self._written[base] = idx

    def rescan(self) -> bool:
        """List the pack directory again: forget packs that are gone or whose file changed,
        validate new ones (a pack refused as malformed is not read again until its index
        changes; one that could not be opened is tried again at the next rescan). True if the
        set of packs changed."""
        with self._lock:
            return self._rescan()

    def _rescan(self) -> bool:
        self._scanned = True
        self._unreadable = None
        try:
            names = set(os.listdir(self._dir))
        except FileNotFoundError:
            names = set()
        except OSError as err:
            raise _storage_error(err) from None
        bases = {f"{self._dir}/{n[:-5]}" for n in names if n.endswith(".pack") and n[:-5] + ".idx" in names}
        packs = {b: p for b, p in self._packs.items() if b in bases and file_signature(os.fstat(p.fd)) == p.sig}
        changed = len(packs) != len(self._packs)
        for base in bases - packs.keys():
            try:
                sig = file_signature(os.stat(base + ".idx"))
            except FileNotFoundError:
                continue  # gone meanwhile
            except OSError as err:
                if err.errno not in _NOT_A_FILE_WE_WROTE:
                    self._unreadable = err
                continue
            if self._refused.get(base) == sig:
                continue
            try:
                packs[base] = IndexedPack(base, self._max, known_index=self._written.pop(base, None))
            except FileNotFoundError:
                continue  # gone meanwhile
            except OSError as err:
                if err.errno in _NOT_A_FILE_WE_WROTE:  # a FIFO, a directory, an oversized index
                    self._refused[base] = sig
                else:
                    self._unreadable = err  # unreadable for now (e.g. out of descriptors): retried
                continue
            except (IntegrityError, ValueError, struct.error):
                self._refused[base] = sig
                continue
            self._refused.pop(base, None)
            changed = True
        for base in [b for b in self._refused if b not in bases]:
            del self._refused[base]
        for base in [b for b in self._written if b not in bases]:
            del self._written[base]  # gone before it was needed (merged by another writer)
        self._set(packs)
        return changed

    def contains(self, raw_id: bytes) -> bool:
        """Whether a pack this reader knows lists ``raw_id`` (its index only; the directory is
        listed only at the first use)."""
        with self._lock:  # the index files are read: none may be closed meanwhile
            if not self._scanned:
                self._rescan()
            for _attempt in range(3):
                try:
                    if any(self._find(pack, raw_id) >= 0 for pack in self._order):
                        return True
                except StalePack as stale:
                    self._drop_stale(stale.args[0])
                    continue
                self._not_found()
                return False
        raise IntegrityError()  # the packs keep changing under this reader

    @staticmethod
    def _find(pack: IndexedPack, raw_id: bytes) -> int:
        """``pack.find(raw_id)``; StalePack naming the pack if its index changed, StorageError if it
        cannot be read (lock held)."""
        try:
            return pack.find(raw_id)
        except StalePack:
            raise StalePack(pack) from None
        except OSError as err:
            raise _storage_error(err) from None

    def _drop_stale(self, pack: IndexedPack) -> None:
        """Forget ``pack`` (found removed or changed) and list the directory again (lock held)."""
        base = pack.path[:-5]
        self._set({b: p for b, p in self._packs.items() if b != base})
        self._rescan()

    def _not_found(self) -> None:
        """Raise :class:`StorageError` if a pack could not be opened at the last rescan: the
        object may be in it, and "absent" would read as a rollback or as damage."""
        err = self._unreadable
        if err is not None:
            raise _storage_error(err)

    def get(self, raw_id: bytes, sha256: bytes | None = None, want_type: int | None = None) -> tuple[int, bytes] | None:
        """``(type number, body)`` of the object ``raw_id`` from the packs this reader knows,
        checked against its id (a damaged copy in one pack is passed over for an intact one in
        another); None if none of them lists it. A pack found removed or changed
        is dropped, the directory listed again and the lookup made again. The directory is
        otherwise listed only at the first use (and by :meth:`rescan`).

        ``sha256``: the SHA-256 the body must have, known from an authenticated record (a node
        record's ``c``). The body is then checked against it *instead of* against its id: the
        caller's check subsumes git's, so one hash over the body instead of two. ``want_type``:
        the git type number the object must have; a copy of another type is damaged (passed over
        like any damaged copy; with ``sha256`` nothing else checks the type)."""
        with self._lock:
            if not self._scanned:
                self._rescan()
            for _attempt in range(3):
                damaged, stale = False, None
                for pack in self._order:
                    try:
                        offset = self._find(pack, raw_id)
                        if offset < 0:
                            continue
                        type_num, body = self._read(pack, offset)
                    except StalePack:
                        stale = pack
                        break
                    except IntegrityError:
                        damaged = True
                        continue  # another pack (e.g. the sources of a merge) may hold it intact
                    if want_type is not None and type_num != want_type:
                        damaged = True  # e.g. the type bits of the entry header changed
                        continue
                    if sha256 is not None:
                        if hashlib.sha256(body).digest() != sha256:
                            damaged = True  # not the content the caller's record names
                            continue
                    else:
                        digest = hashlib.sha1(TYPE_NAMES[type_num] + b" %d\0" % len(body), usedforsecurity=False)
                        digest.update(body)
                        if digest.digest() != raw_id:
                            damaged = True  # the content does not match its id
                            continue
                    return type_num, body
                if stale is not None:
                    self._drop_stale(stale)
                    continue
                if damaged:
                    raise IntegrityError()  # every copy the packs hold is damaged
                self._not_found()
                return None
        raise IntegrityError()  # the packs keep changing under this reader

    # -- entries ------------------------------------------------------------------------------

    def _read(self, pack: IndexedPack, offset: int) -> tuple[int, bytes]:
        """The object at ``offset`` (lock held); StalePack if the pack file was removed (fewer
        links than when it was validated) or changed."""
        try:
            if file_signature(os.fstat(pack.fd)) != pack.sig:
                raise StalePack()
            return self._resolve(pack.fd, pack, offset)
        except OSError as err:
            raise _storage_error(err) from None  # EIO and the like: the disk's fault, not damage

    def _resolve(self, fd: int, pack: IndexedPack, offset: int) -> tuple[int, bytes]:
        """The type and body at ``offset``, following delta bases within the pack."""
        deltas: list[tuple[int, int]] = []  # (offset of a delta's zlib stream, its size)
        delta_bytes = 0
        while True:
            type_num, size, head, at, base_offset, base_id = self._entry(fd, pack, offset)
            if type_num in TYPE_NAMES:
                stored = _stored_block(head, at, size)
                body = self._inflate(fd, pack, offset + at, size, memoryview(head)[at:]) if stored is None else stored
                break
            delta_bytes += size
            if len(deltas) >= MAX_DELTA_DEPTH or delta_bytes > MAX_DELTA_BYTES:
                raise IntegrityError()  # too long a chain, a cycle of REF_DELTA bases, or a delta bomb
            deltas.append((offset + at, size))
            offset = base_offset if type_num == _OFS_DELTA else pack.find(base_id)
            if offset < 0:
                raise IntegrityError()  # a base outside this pack (a thin pack is never stored)
        budget = 4 * self._max  # all intermediate results: a chain must not rebuild a large one again and again
        for start, size in reversed(deltas):
            body = _apply_delta(body, self._inflate(fd, pack, start, size, b""), min(self._max, budget))
            budget -= len(body)
        return type_num, body

    def _entry(self, fd: int, pack: IndexedPack, offset: int) -> tuple[int, int, bytes, int, int, bytes]:
        """Parse the entry header at ``offset``: ``(type, inflated size, the bytes read at
        offset, where its zlib stream starts in them, base offset (OFS_DELTA), base id
        (REF_DELTA))``."""
        end = pack.size - 20
        if not 12 <= offset < end:
            raise IntegrityError()
        head = os.pread(fd, min(_FIRST_READ, end - offset), offset)
        if not head:
            raise IntegrityError()
        c = head[0]
        type_num = (c >> 4) & 7
        size = c & 0x0F
        shift, i = 4, 1
        while c & 0x80:
            if i >= len(head) or i > 10:
                raise IntegrityError()
            c = head[i]
            size |= (c & 0x7F) << shift
            shift += 7
            i += 1
        if size > self._max:
            raise IntegrityError()  # refused before inflating it
        base_offset, base_id = -1, b""
        if type_num == _OFS_DELTA:
            if i >= len(head):
                raise IntegrityError()
            c = head[i]
            i += 1
            rel = c & 0x7F
            while c & 0x80:
                if i >= len(head) or i > 20:
                    raise IntegrityError()
                c = head[i]
                i += 1
                rel = ((rel + 1) << 7) | (c & 0x7F)
            base_offset = offset - rel
            if not 12 <= base_offset < offset:
                raise IntegrityError()
        elif type_num == _REF_DELTA:
            base_id = head[i : i + 20]
            i += 20
            if len(base_id) != 20:
                raise IntegrityError()
        elif type_num not in TYPE_NAMES:
            raise IntegrityError()
        return type_num, size, head, i, base_offset, base_id

    def _inflate(self, fd: int, pack: IndexedPack, start: int, size: int, prefix: bytes | memoryview) -> bytes:
        """Inflate the zlib stream at ``start`` (``prefix``: its first bytes, already read) to
        exactly ``size`` bytes, never producing more than ``size + 1``; IntegrityError if it is
        truncated, longer, or not zlib."""
        end = pack.size - 20
        # zlib's bound on the stream of ``size`` bytes: the usual entry is read once, or twice
        want = size + (size >> 12) + (size >> 14) + 64
        buf: bytes | memoryview
        if len(prefix) >= want:
            buf = prefix[:want]
        else:
            buf = bytes(prefix) + os.pread(
                fd, max(0, min(want - len(prefix), end - start - len(prefix))), start + len(prefix)
            )
        pos = start + len(buf)
        inflater = zlib.decompressobj()
        parts: list[bytes] = []
        produced = 0
        try:
            while True:
                piece = inflater.decompress(buf, size + 1 - produced)
                produced += len(piece)
                parts.append(piece)
                if produced > size or inflater.unconsumed_tail:
                    raise IntegrityError()  # longer than its header says (or a bomb)
                if inflater.eof:
                    break
                if pos >= end:
                    raise IntegrityError()  # truncated
                buf = os.pread(fd, min(_CHUNK, end - pos), pos)
                if not buf:
                    raise IntegrityError()
                pos += len(buf)
        except zlib.error:
            raise IntegrityError() from None
        if produced != size:
            raise IntegrityError()
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _stored_block(data: bytes, at: int, size: int) -> bytes | None:
    """The ``size`` bytes of the zlib stream at ``data[at:]`` if it is one final stored block
    (how memvault writes an object under 64 KiB: :func:`memvault.git.pack.zlib_stored`) that
    ``data`` holds whole, its Adler-32 included; None if it is anything else (or damaged), for
    zlib to decide. No inflater is set up for such a stream.

    Accepts exactly what zlib accepts of such a stream: a valid zlib header (deflate, window at
    most 32 KiB, header check, no preset dictionary), a block header with BFINAL set and type 00
    (the five bits up to the byte boundary are ignored, as zlib ignores them), LEN and its
    complement NLEN, LEN == ``size``, and the Adler-32 of the data after it."""
    if len(data) < at + size + 11 or size > 0xFFFF:  # 2 + 1 + 4 header bytes, 4 Adler-32 bytes
        return None
    cmf, flg, block, length, complement = _STORED_HEAD.unpack_from(data, at)
    if (
        cmf & 0x8F != 0x08  # deflate, CINFO <= 7
        or (cmf << 8 | flg) % 31
        or flg & 0x20  # FDICT
        or block & 0x07 != 0x01  # BFINAL, BTYPE 00
        or length != size
        or complement != size ^ 0xFFFF
    ):
        return None
    at += 7
    body = data[at : at + size]
    if _ADLER32.unpack_from(data, at + size)[0] != zlib.adler32(body):
        return None
    return body


def _delta_size(delta: bytes, i: int) -> tuple[int, int]:
    """A size in a delta's header (little-endian base-128) and the index after it."""
    size, shift = 0, 0
    while True:
        if i >= len(delta) or shift > 63:
            raise IntegrityError()
        c = delta[i]
        i += 1
        size |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return size, i


#: errno values (None: raised by memvault for a file that is not regular or too large) that
#: say a pack file is not one a writer made, rather than that the disk refused to read it.
_NOT_A_FILE_WE_WROTE = frozenset({None, errno.ELOOP, errno.EISDIR, errno.ENOTDIR, errno.ENXIO})


def _storage_error(err: OSError) -> StorageError:
    return StorageError.from_read_error(err, what="The store's git objects")


def _apply_delta(base: bytes, delta: bytes, max_bytes: int) -> bytes:
    """git's delta ``delta`` applied to ``base``: every copy inside ``base``, every insert inside
    ``delta``, the result exactly the size the delta declares (at most ``max_bytes``)."""
    i, n = 0, len(delta)
    source_size, i = _delta_size(delta, i)
    target_size, i = _delta_size(delta, i)
    if source_size != len(base) or target_size > max_bytes:
        raise IntegrityError()
    out = bytearray()
    view = memoryview(base)
    while i < n:
        c = delta[i]
        i += 1
        if c & 0x80:  # copy from the base: offset and size bytes present per the flag bits
            start = length = 0
            for k in range(7):
                if c & (1 << k):
                    if i >= n:
                        raise IntegrityError()
                    if k < 4:
                        start |= delta[i] << (8 * k)
                    else:
                        length |= delta[i] << (8 * (k - 4))
                    i += 1
            length = length or 0x10000
            if start + length > len(base) or len(out) + length > target_size:
                raise IntegrityError()
            out += view[start : start + length]
        elif c:  # insert the next c bytes of the delta
            if i + c > n or len(out) + c > target_size:
                raise IntegrityError()
            out += delta[i : i + c]
            i += c
        else:
            raise IntegrityError()  # opcode 0 is reserved
    if len(out) != target_size:
        raise IntegrityError()
    return bytes(out)
