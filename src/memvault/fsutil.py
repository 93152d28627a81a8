"""Small durable-filesystem helpers: atomic replace, directory fsync, the store write lock."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import LockedError

__all__ = [
    "FILE_MODE",
    "DIR_MODE",
    "atomic_write",
    "write_all",
    "wipe_file",
    "fsync_dir",
    "StoreLock",
    "make_private_dir",
]

#: Owner read/write only: memory stores hold regulated data, and container umasks are often 0.
FILE_MODE = 0o600
#: Owner only, for the same reason.
DIR_MODE = 0o700


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or create inside it survives a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def wipe_file(path: Path) -> None:
    """Overwrite a file with zeros (fsynced), then unlink it and fsync its directory, so key
    material does not linger in freed blocks of filesystems that write in place (best effort:
    copy-on-write filesystems, snapshots and SSD remapping may keep old blocks)."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.pwrite(fd, bytes(os.fstat(fd).st_size), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.unlink(path)
    fsync_dir(path.parent)


def make_private_dir(path: Path) -> None:
    """Create ``path`` (not its parents) with mode 0700 regardless of umask."""
    os.mkdir(path, DIR_MODE)
    os.chmod(path, DIR_MODE)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: temp file, fsync, rename, directory fsync."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


class StoreLock:
    """The store-wide writer lock: ``flock`` on a lock file, plus a thread lock.

    ``flock`` is released by the kernel when a process dies, so a crashed writer never leaves a
    stale lock behind. Separate ``open()`` calls get separate lock descriptions, so threads of
    one process exclude each other too; the thread lock keeps them from spinning.
    """

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self._path = path
        self._timeout = timeout
        self._thread_lock = threading.Lock()

    @contextmanager
    def hold(self) -> Iterator[None]:
        if not self._thread_lock.acquire(timeout=self._timeout):
            raise LockedError("The memory store is locked by another writer; retry shortly.")
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
            try:
                self._acquire(fd)
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        finally:
            self._thread_lock.release()

    def _acquire(self, fd: int) -> None:
        deadline = time.monotonic() + self._timeout
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockedError("The memory store is locked by another writer; retry shortly.") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
