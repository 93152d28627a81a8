"""The commit journal of a store directory in durability ``full`` (format version 5 and later, Linux): a
commit of ``main`` is durable after one flush, of one file (docs/format.md §7.1).

A commit writes its pack and index as before, then one *entry* to ``<store>/journal`` holding the
commit's keyring records and the pack's bytes, MAC'd under the keyring key, and flushes that file
alone; its keyring append and branch move follow unsynced. The kernel keeps those writes through
a process crash; only a power loss or a kernel crash loses them, and both change the boot id, so
the first open after a reboot (:meth:`Journal.recover`) rebuilds the keyring's tail and the packs
from the entries and moves the branch. Every :data:`CAPACITY` bytes of entries a *checkpoint*
(one ``syncfs``) makes everything durable and starts a new generation of entries.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import crypto
from ..errors import IntegrityError, StorageError
from ..fsutil import durable_flush, opened, pwrite_all, sync_filesystem, syncfs_available
from ..git.repo import GitStore
from ..keys.keyring import Keyring
from .lock import StoreLock

__all__ = ["CAPACITY", "FILE_NAME", "Entry", "Journal", "boot_id", "journal_available", "recover_after_reboot"]

_KEYRING = "keyring"

FILE_NAME = "journal"
#: Bytes of the journal file: the header block, then entries, each padded to :data:`BLOCK`.
CAPACITY = 256 * 1024
#: Entries start on this boundary, so that writing one never rewrites a block of another.
BLOCK = 4096
_HEADER = struct.Struct(">4sBQ16s")  # magic, version, generation, boot id
_ENTRY = struct.Struct(">4sIQQII")  # magic, length before the mac, generation, keyring offset, records, pack
_HEADER_MAGIC = b"MVJH"
_ENTRY_MAGIC = b"MVJE"
_VERSION = 1
_MAC = 32
_NO_BOOT = bytes(16)
_BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
_boot: list[bytes | None] = []


def boot_id() -> bytes | None:
    """This kernel's boot id (16 bytes; Linux), None where the platform has none."""
    if not _boot:
        try:
            with open(_BOOT_ID_FILE, "rb") as f:  # a /proc file: its size reads as 0
                text = f.read(64).decode("ascii").strip().replace("-", "")
            _boot.append(bytes.fromhex(text) if len(text) == 32 else None)
        except (OSError, ValueError):
            _boot.append(None)
    return _boot[0]


def journal_available() -> bool:
    """Whether this host writes commits through the journal: Linux with ``syncfs`` and a boot id,
    unless ``MEMVAULT_NO_JOURNAL=1`` (then commits flush twice, as in format version 4)."""
    return os.environ.get("MEMVAULT_NO_JOURNAL") != "1" and syncfs_available() and boot_id() is not None


@dataclass(frozen=True)
class Entry:
    """One journaled commit: where its keyring records go, the records, its pack and index."""

    keyring_offset: int
    records: bytes
    pack: bytes
    index: bytes

    @property
    def pack_name(self) -> str:
        """The pack's name: its SHA-1 trailer in hex."""
        return self.pack[-20:].hex()


class Journal:
    """The journal of one store directory. The caller holds the store's writer lock for every
    method but :meth:`needs_recovery`.

    Args:
        root: the store directory.
        store_id: the store's id (bound into every MAC).
        mac_key: the keyring's MAC key (``Subkeys.keyring``).
    """

    def __init__(self, root: Path, store_id: bytes, mac_key: bytes) -> None:
        self._root = root
        self._path = root / FILE_NAME
        self._store_id = store_id
        self._mac = crypto.mac_function(mac_key)
        #: ``(generation, next entry's position, keyring size after the last entry)`` as this
        #: object last wrote them; checked against the file before use.
        self._cursor: tuple[int, int, int] | None = None
        self._last = BLOCK  #: position of the entry written last
        #: Called after each checkpoint's sync (every earlier write is durable then): the pack
        #: directory removes the packs its merges replaced (PackDirectory.retire_synced).
        self.after_checkpoint: Callable[[], None] | None = None

    # -- encoding -------------------------------------------------------------------------------

    def _header(self, generation: int, boot: bytes) -> bytes:
        body = _HEADER.pack(_HEADER_MAGIC, _VERSION, generation, boot)
        return body + self._mac(b"memvault/v1/journal-header" + self._store_id + body)

    def _read_header(self, fd: int) -> tuple[int, bytes] | None:
        """``(generation, boot id)`` of a header that verifies, else None (no file, torn, other store)."""
        data = os.pread(fd, _HEADER.size + _MAC, 0)
        if len(data) != _HEADER.size + _MAC:
            return None
        body, tag = data[: _HEADER.size], data[_HEADER.size :]
        magic, version, generation, boot = _HEADER.unpack(body)
        if magic != _HEADER_MAGIC or version != _VERSION:
            return None
        if not crypto.consteq(tag, self._mac(b"memvault/v1/journal-header" + self._store_id + body)):
            return None
        return generation, boot

    def _entry(self, generation: int, entry: Entry) -> bytes:
        length = _ENTRY.size + len(entry.records) + len(entry.pack) + len(entry.index)
        head = _ENTRY.pack(_ENTRY_MAGIC, length, generation, entry.keyring_offset, len(entry.records), len(entry.pack))
        body = b"".join((head, entry.records, entry.pack, entry.index))
        tag = self._mac(b"memvault/v1/journal" + self._store_id + body)
        data = body + tag
        return data + bytes(-len(data) % BLOCK)

    def _entries(self, fd: int, generation: int) -> Iterator[tuple[int, Entry]]:
        """``(position after, entry)`` of each entry of ``generation`` that verifies, in order,
        up to the first that does not (a torn or retracted entry, or one of an older generation)."""
        pos = BLOCK
        while pos + _ENTRY.size + _MAC <= CAPACITY:
            head = os.pread(fd, _ENTRY.size, pos)
            if len(head) != _ENTRY.size:
                return
            magic, length, gen, offset, n_records, n_pack = _ENTRY.unpack(head)
            if magic != _ENTRY_MAGIC or gen != generation or length + _MAC > CAPACITY - pos:
                return
            if n_records + n_pack > length - _ENTRY.size:
                return
            data = os.pread(fd, length + _MAC, pos)
            body, tag = data[:length], data[length:]
            if len(tag) != _MAC or not crypto.consteq(tag, self._mac(b"memvault/v1/journal" + self._store_id + body)):
                return
            start = _ENTRY.size
            records = body[start : start + n_records]
            pack = body[start + n_records : start + n_records + n_pack]
            index = body[start + n_records + n_pack :]
            pos += length + _MAC + (-(length + _MAC) % BLOCK)
            yield pos, Entry(offset, records, pack, index)

    # -- writing --------------------------------------------------------------------------------

    def _open(self) -> int:
        return os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)

    def _start(self, fd: int, generation: int) -> None:
        """Begin ``generation`` after a ``syncfs`` made every earlier write durable: the file at
        its full size (written once, so that entries overwrite allocated blocks) and a new header."""
        if syncfs_available():
            sync_filesystem(self._root)
        else:  # recovering, on a host that does not journal (macOS, older Linux)
            os.sync()
        if os.fstat(fd).st_size < CAPACITY:
            pwrite_all(fd, bytes(CAPACITY), 0)
        pwrite_all(fd, self._header(generation, boot_id() or _NO_BOOT).ljust(BLOCK, b"\0"), 0)
        durable_flush(fd, data_only=True)
        self._cursor = (generation, BLOCK, -1)
        if self.after_checkpoint is not None:
            try:
                self.after_checkpoint()
            except OSError:
                pass  # best effort: what was not removed stays, holding duplicates

    def append(self, entry: Entry) -> bool:
        """Write ``entry`` and flush the journal: the commit is durable when this returns True.
        False: the entry is larger than a journal holds (the caller makes the commit durable
        the old way, with two flushes).

        Raises:
            OSError: the entry could not be written; it was retracted, nothing is recorded.
            StorageError: the entry could not be written nor retracted (outcome unknown).
        """
        with opened(self._open()) as fd:
            header = self._read_header(fd)
            if header is None:
                self._start(fd, 1)
                header = (1, b"")
            generation = header[0]
            data = self._entry(generation, entry)
            if BLOCK + len(data) > CAPACITY:
                return False
            cursor = self._cursor
            if cursor is not None and cursor[0] == generation and cursor[2] == entry.keyring_offset:
                pos = cursor[1]
            else:  # another process wrote, or a writer died after its entry: find the end
                pos = BLOCK
                for end, _ in self._entries(fd, generation):
                    pos = end
            if pos + len(data) > CAPACITY:
                generation += 1
                self._start(fd, generation)
                data, pos = self._entry(generation, entry), BLOCK
            try:
                pwrite_all(fd, data, pos)
                durable_flush(fd, data_only=True)
            except OSError as err:
                self._cursor = None
                if not self._retract_at(fd, pos):
                    raise StorageError.from_os_error(err, outcome_unknown=True) from None
                raise
            self._cursor = (generation, pos + len(data), entry.keyring_offset + len(entry.records))
            self._last = pos
        return True

    def retract(self) -> bool:
        """Withdraw the entry :meth:`append` wrote last (its commit's keyring append failed);
        False if that could not be made durable (then the entry may be replayed after a reboot)."""
        self._cursor = None
        try:
            with opened(self._open()) as fd:
                return self._retract_at(fd, self._last)
        except OSError:
            return False

    @staticmethod
    def _retract_at(fd: int, pos: int) -> bool:
        try:
            pwrite_all(fd, bytes(BLOCK), pos)
            durable_flush(fd, data_only=True)
        except OSError:
            return False
        return True

    def checkpoint(self, *, wipe: bool = False) -> None:
        """Make every write on the store's filesystem durable and begin a new generation, so no
        entry is needed any more; with ``wipe`` also overwrite every old entry with zeros (before
        the keyring is rewritten: no entry may keep a destroyed key's record or an offset of the
        old file). No-op when there is no journal file.

        Raises:
            OSError: the sync or the write failed.
        """
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            return
        with opened(fd):
            header = self._read_header(fd)
            if wipe:
                pwrite_all(fd, bytes(CAPACITY), 0)
            self._start(fd, (header[0] if header else 0) + 1)

    # -- recovery -------------------------------------------------------------------------------

    def needs_recovery(self) -> bool:
        """Whether this journal was last written under another boot (a host without a boot id
        counts as one boot of its own), so writes after its last flush may be lost:
        :meth:`recover` must run first."""
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return False
        with opened(fd):
            header = self._read_header(fd)
        return header is not None and header[1] != (boot_id() or _NO_BOOT)

    def recover(self, keyring: Path, install: Callable[[Entry], object]) -> int:
        """After a reboot: rebuild the keyring file's tail from the entries (docs/format.md §7.1)
        and ``install`` each entry's pack. Returns the number of entries whose commits stand. The
        caller then moves the branch to the keyring's high-water mark and checkpoints (until
        then, :meth:`needs_recovery` stays true: a recovery cut short is run again whole).

        Raises:
            IntegrityError: the entries do not fit the keyring (it is shorter than what they
                extend, or an entry starts inside another).
            OSError: a file could not be read or written.
        """
        with opened(self._open()) as fd:
            header = self._read_header(fd)
            if header is None:
                return 0
            kept: list[Entry] = []
            for _, entry in self._entries(fd, header[0]):
                while kept and kept[-1].keyring_offset >= entry.keyring_offset:
                    kept.pop()  # written by a writer that died before its keyring append
                if kept and kept[-1].keyring_offset + len(kept[-1].records) > entry.keyring_offset:
                    raise IntegrityError("The store's journal does not fit its keyring.")
                kept.append(entry)
            if kept:
                self._rebuild_keyring(keyring, kept)
                for entry in kept:
                    install(entry)
            self._cursor = None
        return len(kept)

    @staticmethod
    def _rebuild_keyring(path: Path, kept: list[Entry]) -> None:
        """The keyring as the kernel held it before the reboot: its bytes before the first entry,
        each entry's records at its offset, the file's own bytes between and after them (appends
        outside the journal are flushed as they are written)."""
        with opened(os.open(path, os.O_RDWR | os.O_NOFOLLOW)) as fd:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0)
            out, pos = [data[: kept[0].keyring_offset]], kept[0].keyring_offset
            if size < pos:
                raise IntegrityError("The store's journal does not fit its keyring.")
            for entry in kept:
                if entry.keyring_offset > pos:
                    if size < entry.keyring_offset:
                        raise IntegrityError("The store's journal does not fit its keyring.")
                    out.append(data[pos : entry.keyring_offset])
                out.append(entry.records)
                pos = entry.keyring_offset + len(entry.records)
            out.append(data[pos:])
            rebuilt = b"".join(out)
            if rebuilt != data:
                first = kept[0].keyring_offset  # the bytes before it are the file's own
                pwrite_all(fd, rebuilt[first:], first)
                os.ftruncate(fd, len(rebuilt))
                durable_flush(fd, data_only=True)


def recover_after_reboot(root: Path, store_id: bytes, mac_key: bytes, git: GitStore, lock_timeout: float) -> int:
    """Replay the journal of the store directory ``root`` if it was last written under another
    boot (docs/format.md §7.1): under the writer lock, the keyring's tail and the packs as the
    entries say, the branch moved to the keyring's high-water mark, then a checkpoint. Returns
    the number of entries whose commits stand (0: nothing to do). Every open of a store
    directory calls this first; it reads one header when there is nothing to do.

    Raises:
        IntegrityError: the entries do not fit the keyring, or the rebuilt keyring does not verify.
        LockedError: the writer lock could not be taken in ``lock_timeout`` seconds.
        OSError: a file could not be read or written (a reader without write access cannot
            recover a store: the error says which file).
    """
    journal = Journal(root, store_id, mac_key)
    if not journal.needs_recovery():
        return 0
    with StoreLock(root / "lock", lock_timeout).hold():
        if not journal.needs_recovery():
            return 0  # another process recovered it meanwhile
        count = journal.recover(root / _KEYRING, lambda e: git.packs.restore(e.pack, e.index, e.pack_name))
        keyring = Keyring(root / _KEYRING, store_id, {}, mac_key)
        keyring.refresh()
        hw = keyring.high_water
        if hw is not None and git.contains(hw.commit_id):
            try:
                head = git.head()
            except IntegrityError:
                head = None  # a torn branch: set below
            if head != hw.commit_id:
                git.branch.reset(hw.commit_id)
        journal.checkpoint()
    return count
