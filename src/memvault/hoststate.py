"""What a host keeps about the stores it uses, outside every store directory and every cache (the
host state, docs/format.md §14): the **anchor** of each store directory it opened (the newest
commit it saw there, so that an older copy of the whole store put back is noticed), and, for each
object-storage URL it used, the id of the store it saw there, its high-water mark of that store's
log and its read times of the store's files, none of which a writer of the bucket or of the cache
can reach.

The directory is ``$MEMVAULT_ANCHOR_DIR``, else ``$XDG_STATE_HOME/memvault``, else
``~/.local/state/memvault``; ``MEMVAULT_ANCHOR_DIR=off`` turns host state off.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import struct
from collections.abc import Callable, Mapping
from pathlib import Path

from . import crypto
from .errors import IntegrityError, RollbackDetectedError, StorageError
from .fsutil import (
    FILE_MODE,
    O_READ,
    atomic_write,
    check_parent_dir,
    check_private_dir,
    make_dirs_in_own,
    make_private_dir,
    pwrite_all,
    read_bounded,
    trusted,
    wipe_file,
)

__all__ = [
    "ENV",
    "OFF",
    "MARK_FILE",
    "ACCESS_FILE",
    "RESET_HINT",
    "state_dir",
    "host_state",
    "Anchor",
    "anchor_for",
    "anchor_path",
    "recorded_anchor",
    "HighWaterMark",
    "UrlState",
    "url_state",
]

#: The variable that places the host state; :data:`OFF` turns it off.
ENV = "MEMVAULT_ANCHOR_DIR"
OFF = "off"
#: The directory of store directories' anchors, and that of object-storage URLs.
ANCHORS = "anchors"
URLS = "urls"
#: A URL's files: the store id seen there, the high-water mark of its log, the read times.
BINDING_FILE = "store"
MARK_FILE = "remote-mark"
ACCESS_FILE = "access"
#: How an operator accepts on purpose what a check of the host state refused.
RESET_HINT = "If that was done on purpose, run 'memvault anchor reset' for this store to accept it as it is now."

_WHAT = "This host's state directory ($MEMVAULT_ANCHOR_DIR, else ~/.local/state/memvault)"
_ANCHOR_MAGIC = b"MVANCHOR"
_ANCHOR_VERSION = 1
_ANCHOR = struct.Struct(">8sBQ20s32s")
_ANCHOR_MAC = b"memvault/v1/anchor"
_MARK_MAC = b"memvault/v1/remote-mark"
_SEQ = struct.Struct(">Q")
_MAX_BYTES = 4096
#: Largest file moved from a replica into the host state (an access file of 2,000,000 files is ~80 MB).
_MAX_ADOPT_BYTES = 256 * 1024 * 1024


def state_dir() -> Path | None:
    """Where the host state lives: ``$MEMVAULT_ANCHOR_DIR``, else ``$XDG_STATE_HOME/memvault``,
    else ``~/.local/state/memvault``; None when ``$MEMVAULT_ANCHOR_DIR`` is ``off``."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(xdg) / "memvault"


def host_state() -> Path | None:
    """The host-state directory, made (0700, with missing parents) if needed and checked: None
    when it is off, or missing and not makeable (not under a directory of this user's, a
    read-only home), in which case nothing is kept.

    Raises:
        StorageError: it exists but another user could change it or its entries (a symbolic
            link, another owner, writable by group or others; or its parent writable by others
            without the sticky bit).
    """
    root = state_dir()
    if root is None or not make_dirs_in_own(root):
        return None
    check_parent_dir(root.parent, _WHAT, ENV)
    check_private_dir(root, _WHAT, ENV)
    return root


def _subdir(path: Path) -> Path:
    """``path`` (a directory inside the checked host state), made 0700 if missing."""
    try:
        make_private_dir(path)
    except FileExistsError:
        pass
    check_private_dir(path, _WHAT, ENV)
    return path


# -- store directories: the anchor -----------------------------------------------------------------


class Anchor:
    """The anchor of one store directory on this host: the sequence number and id of the newest
    published commit this host saw there, MAC'd (docs/format.md §14.2). Checked against the
    keyring's high-water mark whenever a store object of this host reads it, moved forward after
    each commit; never durable by itself (a commit's own flush, or none, makes it so).

    Args:
        path: the anchor file.
        key: the MAC key (the store's keyring key; the message is domain-separated).
        store_id: the store's id, bound into the MAC.
        lineage: the commits the keyring records, ``commit id -> (seq, parent id)`` (read only
            when the keyring moved more than one commit past the anchor).
    """

    def __init__(
        self, path: Path, key: bytes, store_id: bytes, lineage: Callable[[], Mapping[bytes, tuple[int, bytes]]]
    ) -> None:
        self.path = path
        self._key = key
        self._store_id = store_id
        self._lineage = lineage
        self._fd: int | None = None
        #: The record this object verified or wrote last, and what it says.
        self._raw = b""
        self._last: tuple[int, bytes] | None = None

    def _mac(self, seq: int, commit: bytes) -> bytes:
        return crypto.mac(self._key, _ANCHOR_MAC + self._store_id + _SEQ.pack(seq) + commit)

    def _decode(self, data: bytes) -> tuple[int, bytes] | None:
        if not data:
            return None  # made, never written
        try:
            magic, version, seq, commit, mac = _ANCHOR.unpack(data)
        except struct.error:
            raise IntegrityError(f"This host's anchor of the store is damaged. {RESET_HINT}") from None
        if magic != _ANCHOR_MAGIC or version != _ANCHOR_VERSION or not crypto.consteq(self._mac(seq, commit), mac):
            raise IntegrityError(f"This host's anchor of the store does not verify. {RESET_HINT}")
        return seq, commit.hex().encode()

    def read(self) -> tuple[int, bytes] | None:
        """``(seq, commit id)`` this host saw last, or None (no anchor yet).

        Raises:
            IntegrityError: the file is damaged or was not written with this store's key.
            StorageError: it is not a file of this user's alone.
        """
        try:
            fd = os.open(self.path, O_READ)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise StorageError.from_read_error(err, what=_WHAT) from None
        try:
            return self._decode(self._pread(fd))
        finally:
            os.close(fd)

    def _pread(self, fd: int) -> bytes:
        st = os.fstat(fd)
        if not trusted(st, stat.S_IFREG):
            raise StorageError(f"This host's anchor of the store is not a file of this user's alone. {RESET_HINT}")
        return os.pread(fd, _ANCHOR.size + 1, 0)

    def problem(self, seq: int, commit_id: bytes, parent_id: bytes) -> IntegrityError | None:
        """What is wrong with a keyring whose newest commit is ``seq``, ``commit_id`` (parent
        ``parent_id``), given the anchor; None if nothing (no write).

        Raises:
            IntegrityError, StorageError: as :meth:`read`.
        """
        return self._compare(self.read(), seq, commit_id, parent_id)

    def _compare(
        self, seen: tuple[int, bytes] | None, seq: int, commit_id: bytes, parent_id: bytes
    ) -> IntegrityError | None:
        if seen is None:
            return None
        at, commit = seen
        if seq < at:
            return RollbackDetectedError(
                f"Rollback detected: this host saw commit #{at} of this store here, but the store's newest commit is "
                f"#{seq}: an older copy of the whole store was put back (or, in durability none, a power loss lost "
                f"its last commits). {RESET_HINT}"
            )
        if seq == at:
            if commit_id == commit:
                return None
            return RollbackDetectedError(
                f"Fork detected: the store's commit #{seq} is not the one this host saw here (the store was replaced "
                f"by another copy of it). {RESET_HINT}"
            )
        if seq == at + 1 and parent_id == commit:
            return None
        if self._lineage().get(commit, (-1, b""))[0] != at:
            return RollbackDetectedError(
                f"Fork detected: the store's history no longer holds commit #{at}, which this host saw here (the "
                f"store was replaced by another copy of it, which went on from an older commit). {RESET_HINT}"
            )
        return None

    def _handle(self) -> int | None:
        """The anchor file, open for reading and writing (made if missing) and kept open for the
        store object's life: opened again when the operator removed it meanwhile; None when it
        cannot be opened for writing (a read-only file system)."""
        if self._fd is not None:
            if os.fstat(self._fd).st_nlink:
                return self._fd
            self.close()  # removed (`memvault anchor reset`): the path names another file, or none
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        except OSError:
            return None
        return self._fd

    def _seen(self, fd: int) -> tuple[int, bytes] | None:
        """The anchor in ``fd``; bytes this object verified or wrote last are not verified again."""
        data = self._pread(fd)
        if data != self._raw:
            decoded = self._decode(data)
            self._raw, self._last = data, decoded
        return self._last

    def observe(self, seq: int, commit_id: bytes, parent_id: bytes, *, published: bool) -> None:
        """Check the keyring's newest commit against the anchor and, when the branch points at it
        (``published``), move the anchor to it. A host state that cannot be written (no space, a
        read-only file system) leaves the anchor where it was.

        Raises:
            RollbackDetectedError: the keyring is behind the anchor, or beside it (a fork).
            IntegrityError, StorageError: as :meth:`read`.
        """
        try:
            fd = self._handle()
            seen = self.read() if fd is None else self._seen(fd)
        except OSError:
            return  # the host state cannot be read now: nothing to check against
        except StorageError:
            if fd is None:
                return
            raise
        problem = self._compare(seen, seq, commit_id, parent_id)
        if problem is not None:
            raise problem
        if fd is not None and published and (seen is None or seq > seen[0]):
            commit = bytes.fromhex(commit_id.decode())
            data = _ANCHOR.pack(_ANCHOR_MAGIC, _ANCHOR_VERSION, seq, commit, self._mac(seq, commit))
            try:
                pwrite_all(fd, data, 0)
            except OSError:
                return  # advisory: the next commit or read moves it
            self._raw, self._last = data, (seq, commit_id)

    def close(self) -> None:
        """Close the anchor file (:meth:`observe` opens it again if needed)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __del__(self) -> None:  # a store object dropped without close()
        try:
            self.close()
        except OSError:
            pass

    def forget(self) -> None:
        """Remove the anchor (the operator accepts the store as it is; the next read anchors it)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def anchor_path(root: Path, store_dir: Path, store_id: bytes) -> Path:
    """Where the anchor of the store ``store_id`` in directory ``store_dir`` lives under the host
    state ``root``: named by the store's id and a digest of the directory's absolute path (as
    given, symbolic links not resolved), so a copy of the store elsewhere has an anchor of its own."""
    where = hashlib.sha256(os.fsencode(os.path.abspath(store_dir))).hexdigest()[:32]
    return root / ANCHORS / f"{store_id.hex()}-{where}"


def recorded_anchor(store_dir: Path, store_id: bytes) -> tuple[Path, int | None] | None:
    """Where this host's anchor of the store ``store_id`` in ``store_dir`` is, and the sequence
    number it names (None: no anchor yet), read without the store's key (so not verified: for an
    operator, ``memvault anchor``); None when there is no host state.

    Raises:
        StorageError: the host state is not private to this user.
    """
    root = host_state()
    if root is None:
        return None
    path = anchor_path(root, store_dir, store_id)
    try:
        data = read_bounded(path, _ANCHOR.size)
        _magic, _version, seq, _commit, _mac = _ANCHOR.unpack(data)
    except FileNotFoundError:
        return path, None
    except (OSError, struct.error):
        return path, -1
    return path, seq


def anchor_for(
    store_dir: Path, store_id: bytes, key: bytes, lineage: Callable[[], Mapping[bytes, tuple[int, bytes]]]
) -> Anchor | None:
    """This host's anchor of the store ``store_id`` in ``store_dir`` (see :class:`Anchor`), or None
    when there is no host state (off, or not makeable).

    Raises:
        StorageError: the host state is not private to this user.
    """
    root = host_state()
    if root is None:
        return None
    _subdir(root / ANCHORS)
    return Anchor(anchor_path(root, store_dir, store_id), key, store_id, lineage)


# -- stores in object storage ------------------------------------------------------------------------


class HighWaterMark:
    """The host's high-water mark of a store in object storage: the newest log record it has
    seen and that record's version tag, authenticated, so a bucket served older or altered is
    noticed. The file ``path`` (JSON: ``seq``, ``tag``, ``mac``; mode 0600).

    Args:
        path: where the mark lives (:attr:`UrlState.mark_path`).
        key: the MAC key (the store's keyring key; the message is domain-separated).
        store_id: the store's id, bound into the MAC.
    """

    def __init__(self, path: Path, key: bytes, store_id: bytes) -> None:
        self._path = path
        self._key = key
        self._store_id = store_id

    @property
    def key(self) -> bytes:
        """The MAC key (the store's keyring key): the log's void records are authenticated with it too."""
        return self._key

    def _message(self, seq: int, tag: str) -> bytes:
        return _MARK_MAC + self._store_id + _SEQ.pack(seq) + tag.encode("utf-8")

    def read(self) -> tuple[int, str] | None:
        """``(seq, tag)`` of the newest log record this host saw, or None before the first.

        Raises:
            IntegrityError: the mark file is damaged or was not written with this store's key.
        """
        try:
            obj = json.loads(read_bounded(self._path, _MAX_BYTES))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            raise IntegrityError("The host's high-water mark of the remote store is damaged.") from None
        try:
            seq, tag, mac = obj["seq"], obj["tag"], crypto.b64decode(obj["mac"])
            if type(seq) is not int or not 0 <= seq < 2**64 or not isinstance(tag, str) or len(obj) != 3:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise IntegrityError("The host's high-water mark of the remote store is damaged.") from None
        if not crypto.consteq(crypto.mac(self._key, self._message(seq, tag)), mac):
            raise IntegrityError("The host's high-water mark of the remote store does not verify.")
        return seq, tag

    def write(self, seq: int, tag: str, *, durable: bool) -> None:
        """Record that this host has seen the log record of ``seq`` with version tag ``tag``."""
        mac = crypto.b64encode(crypto.mac(self._key, self._message(seq, tag)))
        data = json.dumps({"seq": seq, "tag": tag, "mac": mac}, sort_keys=True).encode()
        atomic_write(self._path, data, durable=durable)


class UrlState:
    """What this host keeps about the store at one object-storage URL: the store id it saw there
    (:meth:`store_id`), its high-water mark (:attr:`mark_path`) and its read times
    (:attr:`access_path`). The caller holds the replica's writer lock.

    Args:
        directory: the URL's directory in the host state; with host state off, the replica
            itself (which then keeps mark and read times, and no store id of its own).
        kept: whether ``directory`` is in the host state.
    """

    def __init__(self, directory: Path, *, kept: bool) -> None:
        self.directory = directory
        self.kept = kept
        self.mark_path = directory / MARK_FILE
        self.access_path = directory / ACCESS_FILE

    def store_id(self) -> bytes | None:
        """The id of the store this host saw at the URL, or None (none recorded, or host state off).

        Raises:
            IntegrityError: the record is damaged.
        """
        if not self.kept:
            return None
        try:
            obj = json.loads(read_bounded(self.directory / BINDING_FILE, _MAX_BYTES))
            store_id = bytes.fromhex(obj["store_id"])
            if len(store_id) != 16:
                raise ValueError
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            raise IntegrityError(f"This host's record of the store at this URL is damaged. {RESET_HINT}") from None
        return store_id

    def bind(self, store_id: bytes, url: str) -> None:
        """Record (durably) that the store at ``url`` is ``store_id`` (nothing with host state off,
        or when it is recorded already)."""
        if self.kept and self.store_id() != store_id:
            data = json.dumps({"store_id": store_id.hex(), "url": url}, sort_keys=True).encode() + b"\n"
            atomic_write(self.directory / BINDING_FILE, data, durable=True)

    def adopt(self, replica: Path) -> None:
        """Move a high-water mark and read times that an older release kept in the replica
        directory ``replica`` into the host state (each only if the host state has none)."""
        if not self.kept:
            return
        for name in (MARK_FILE, ACCESS_FILE):
            old, new = replica / name, self.directory / name
            if not os.path.lexists(old):
                continue
            if not os.path.lexists(new):
                atomic_write(new, read_bounded(old, _MAX_ADOPT_BYTES), durable=True)
            wipe_file(old)

    def seen_seq(self) -> int | None:
        """The sequence number the high-water mark names, read without the store's key (not
        verified: for an operator, ``memvault anchor``); None if there is none, -1 if damaged."""
        try:
            seq = json.loads(read_bounded(self.mark_path, _MAX_BYTES))["seq"]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return -1
        return seq if type(seq) is int else -1

    def forget(self, *, read_times: bool) -> None:
        """Forget the high-water mark and, with ``read_times``, the read times and the store id
        (the store at the URL was replaced on purpose)."""
        for path in (self.mark_path, *((self.access_path,) if read_times else ())):
            if os.path.lexists(path):
                wipe_file(path)
        if read_times and self.kept and self.directory.is_dir():
            shutil.rmtree(self.directory)


def url_state(url: str, replica: Path) -> UrlState:
    """What this host keeps about the store at ``url`` (whose replica is ``replica``): a directory
    of the host state named by a digest of the URL, or, with host state off or not makeable, the
    replica itself.

    Raises:
        StorageError: the host state is not private to this user.
    """
    root = host_state()
    if root is None:
        return UrlState(replica, kept=False)
    directory = _subdir(root / URLS) / hashlib.sha256(url.encode()).hexdigest()[:32]
    return UrlState(_subdir(directory), kept=True)
