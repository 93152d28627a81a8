"""The branch ``refs/heads/main`` (and side branches such as ``refs/heads/dream/<id>``): read
one, move it by compare-and-swap.

Why a move is a single in-place ``pwrite`` and when it is durable: docs/format.md §7.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from ..errors import IntegrityError
from ..fsutil import DIR_MODE, durable_flush, fsync_dir, private_dir, pwrite_all, read_bounded, write_all
from .objects import is_hex_id

__all__ = ["BRANCH_NAME", "Branch"]

#: The one branch of a store's repository.
BRANCH_NAME = b"refs/heads/main"
_MAX_REF_BYTES = 4096
#: Size of a loose ref file as git and memvault write it: 40 hex digits and a newline.
_REF_SIZE = 41
_O_REF_WRITE = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class Branch:
    """The loose ref file of one of the store's branches.

    Args:
        repo: the repository directory.
        packed: returns the branch's value from ``packed-refs`` (None if absent); raises
            IntegrityError for a damaged file.
        durable: make moves durable (durability ``full``).
        syncfs: the next object write's ``syncfs`` makes a move durable (no fsync here).
        name: the ref (default :data:`BRANCH_NAME`); its parts are checked by the caller.
    """

    def __init__(
        self,
        repo: Path,
        packed: Callable[[], bytes | None],
        *,
        durable: bool,
        syncfs: bool,
        name: bytes = BRANCH_NAME,
    ) -> None:
        self.name = name
        self._repo = repo
        self._file = repo.joinpath(*name.decode("ascii").split("/"))
        self._path = os.fspath(self._file)
        self._lock = self._path + ".lock"
        self._packed = packed
        self._durable = durable
        self._syncfs = syncfs
        self._lock_swept = False

    @property
    def directory(self) -> Path:
        """``refs/heads``."""
        return self._file.parent

    def head(self) -> bytes | None:
        """The branch's commit id (40 hex bytes), or None before the first commit.

        Raises:
            IntegrityError: the branch file is damaged or not a regular file.
        """
        try:
            data = read_bounded(self._path, _MAX_REF_BYTES).strip()
        except FileNotFoundError:
            # `git pack-refs` (run by `git gc`) moves the branch into packed-refs.
            packed = self._packed()
            if packed is None:
                return None
            data = packed
        except OSError:  # a FIFO, a device, a directory or an oversized file
            raise IntegrityError("The store's branch is damaged.") from None
        if not is_hex_id(data):
            raise IntegrityError("The store's branch is damaged.")
        return data

    def compare_and_swap(self, old: bytes | None, new: bytes) -> bool:
        """Move the branch from ``old`` to ``new``; False if it no longer points at ``old``.

        The caller holds the store's writer lock. A move overwrites the ref in place when it
        can, else goes through git's ``main.lock`` protocol (docs/format.md §7).

        Raises:
            OSError: the ref could not be written (the branch is left at ``old``).
        """
        if self.head() != old:
            return False
        if old is not None and self._move_in_place(old, new):
            return True
        self._replace(new, sync=self._durable and (old is None or not self._syncfs))
        return True

    def reset(self, new: bytes) -> None:
        """Point the branch at ``new`` whatever it holds now, through the lock protocol, unsynced
        (the commit journal's recovery after a reboot, which then syncs the filesystem: the branch
        on disk may be behind, or torn). The caller holds the writer lock.

        Raises:
            OSError: the ref could not be written.
        """
        self._replace(new, sync=False)

    def _replace(self, new: bytes, *, sync: bool) -> None:
        """Write ``new`` to ``main.lock`` and rename it over the branch (git's protocol)."""
        lock = self._lock
        fd = self._create_lock(lock)
        try:
            try:
                write_all(fd, new + b"\n")  # a short write (disk filling up) must not truncate the branch
                if sync:
                    durable_flush(fd)
            finally:
                os.close(fd)
        except BaseException:
            try:
                os.unlink(lock)
            except OSError:
                pass
            raise
        os.replace(lock, self._path)
        if sync:
            fsync_dir(self._file.parent)

    def remove_lock(self) -> None:
        """Remove a ``main.lock`` left behind (best effort; the caller holds the writer lock)."""
        try:
            os.unlink(self._lock)
        except OSError:
            pass

    def _move_in_place(self, old: bytes, new: bytes) -> bool:
        """Overwrite the loose branch file's one line in place (one ``pwrite`` of 41 bytes into a
        block the file already has): no new file, no rename, no block freed. False, with nothing
        written, unless the branch file is a regular file with one link (so no other name shares
        the write), exactly one ref line long, and writable; the caller then uses the lock
        protocol, which also replaces a value a failed write left torn (the old value is first
        written back, so that it stands if the lock protocol fails too)."""
        try:
            fd = os.open(self._path, _O_REF_WRITE)
        except OSError:  # missing (a packed branch), read-only, a FIFO without reader, a symlink
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != _REF_SIZE:
                return False
            if not self._lock_swept:
                # A ``main.lock`` a crashed writer left would stop git clients from moving the
                # branch; the lock protocol removes it, so does the first move in place.
                try:
                    os.unlink(self._lock)
                except FileNotFoundError:
                    pass
                self._lock_swept = True
            try:
                pwrite_all(fd, new + b"\n", 0)
                if self._durable and not self._syncfs:
                    durable_flush(fd, data_only=True)
            except OSError:
                try:  # put the old value back, so that a failing lock protocol leaves it too
                    pwrite_all(fd, old + b"\n", 0)
                except OSError:
                    pass  # the lock protocol replaces the file whole, or the command fails
                return False
        finally:
            os.close(fd)
        return True

    def _create_lock(self, lock: str) -> int:
        """Create ``main.lock`` exclusively (mode 0600), first removing one a crashed writer left
        (the caller holds the store lock) or making ``refs/heads`` if it is missing."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            return os.open(lock, flags, 0o600)
        except FileExistsError:
            os.unlink(lock)
        except FileNotFoundError:
            # refs, refs/heads, and for a side branch its own directories
            for directory in list(reversed(self._file.parents))[len(self._repo.parts) :]:
                try:
                    os.mkdir(directory, DIR_MODE)
                except FileExistsError:
                    continue
                private_dir(directory)  # mkdir honours the umask, which may take owner bits
        return os.open(lock, flags, 0o600)
