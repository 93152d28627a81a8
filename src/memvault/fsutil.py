"""Small durable-filesystem helpers: atomic replace, the platform's durable flush, directory
fsync, the store write lock.

memvault runs on Linux and macOS: it needs ``flock(2)`` and ``O_NOFOLLOW``. Elsewhere (Windows)
importing this module, hence anything that opens a store, raises :class:`ImportError` with
:data:`UNSUPPORTED_PLATFORM`.
"""

from __future__ import annotations

import ctypes
import os
import queue
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import StorageError

#: Why memvault refuses to load where ``fcntl`` (POSIX file locking) is missing, e.g. on Windows.
UNSUPPORTED_PLATFORM = (
    f"memvault runs on Linux and macOS only; this platform ({sys.platform}) lacks the POSIX file locking "
    "(fcntl, flock) it needs to keep a store consistent."
)

try:
    import fcntl
except ImportError:  # Windows
    raise ImportError(UNSUPPORTED_PLATFORM) from None

__all__ = [
    "FILE_MODE",
    "DIR_MODE",
    "atomic_write",
    "write_all",
    "pwrite_all",
    "wipe_file",
    "wipe_leftovers",
    "private_file",
    "private_dir",
    "fsync_dir",
    "close_soon",
    "make_private_dir",
    "restrict_modes",
    "O_DIR",
    "O_READ",
    "O_NEW_FILE",
    "opened",
    "UNSUPPORTED_PLATFORM",
    "durable_flush",
    "flock_exclusive",
    "cache_root",
    "trusted",
    "open_trusted_dir",
    "check_private_dir",
    "check_parent_dir",
    "make_dirs_in_own",
]

#: Owner read/write only: memory stores hold regulated data, and container umasks are often 0.
FILE_MODE = 0o600
#: Owner only, for the same reason.
DIR_MODE = 0o700
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: ``os.open`` flags that never follow a symbolic link: a directory, a file to read (a FIFO does
#: not block), a new file (exclusive).
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC
O_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC


@contextmanager
def opened(fd: int) -> Iterator[int]:
    """Close the descriptor ``fd`` when the block ends."""
    try:
        yield fd
    finally:
        os.close(fd)


_closing: queue.SimpleQueue[int] | None = None
_closing_lock = threading.RLock()  # re-entered when a finalizer runs during the thread's start


def close_soon(*fds: int) -> None:
    """Close ``fds`` on a thread of their own, soon, without waiting for it: the last close of a
    removed file frees its blocks, which after a sync costs ext4 about 0.1 ms a file, and
    nothing needs to wait for that (a merge retires a dozen files). Where no thread can be
    started (interpreter shutdown), they are closed here and now."""
    global _closing
    with _closing_lock:
        if _closing is None:  # first use, or a forked child
            fresh: queue.SimpleQueue[int] = queue.SimpleQueue()
            _closing = fresh
            try:
                threading.Thread(target=_close_queued, args=(fresh,), name="memvault-close", daemon=True).start()
            except RuntimeError:
                _closing = None
                _drain(fresh)
                for fd in fds:
                    _close_quietly(fd)
                return
        for fd in fds:
            _closing.put(fd)


def _drain(fds: queue.SimpleQueue[int]) -> None:
    while True:
        try:
            _close_quietly(fds.get_nowait())
        except queue.Empty:
            return


def _after_fork_in_child() -> None:
    """A forked child has no closing thread: close what its parent had queued, start afresh."""
    global _closing, _closing_lock
    _closing_lock = threading.RLock()
    if _closing is not None:
        _drain(_closing)
    _closing = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_queued(fds: queue.SimpleQueue[int]) -> None:
    while True:
        _close_quietly(fds.get())


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass  # a descriptor of a removed file: nothing is lost


def durable_flush(fd: int, *, data_only: bool = False) -> None:
    """Make what was written to ``fd`` durable, the way this platform can.

    ``fcntl(F_FULLFSYNC)`` where it exists (macOS, where ``fsync`` leaves the data in the drive's
    volatile cache); else, with ``data_only`` (the data and the file's size matter, not its times),
    ``fdatasync`` where it exists; else ``fsync``. A filesystem that refuses ``F_FULLFSYNC`` (some
    network and FUSE ones) gets ``fsync``. OSError if the flush fails.
    """
    full = getattr(fcntl, "F_FULLFSYNC", None)
    if full is not None:
        try:
            fcntl.fcntl(fd, full)
            return
        except OSError:
            pass  # not supported on this filesystem: fsync below reports real I/O errors
    fdatasync = getattr(os, "fdatasync", None) if data_only else None
    if fdatasync is not None:
        fdatasync(fd)
    else:
        os.fsync(fd)


def flock_exclusive(fd: int) -> None:
    """Wait for an exclusive ``flock(2)`` on ``fd`` (released when the descriptor is closed)."""
    fcntl.flock(fd, fcntl.LOCK_EX)


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs`` on Linux 5.8 or later (before 5.8 it did not report write-back errors),
    unless ``MEMVAULT_NO_SYNCFS=1``; else None."""
    if sys.platform != "linux" or os.environ.get("MEMVAULT_NO_SYNCFS") == "1":
        return None
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (5, 8):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_LIBC_SYNCFS = _load_syncfs()


def _syncfs(fd: int) -> None:
    """``syncfs(2)`` on ``fd``; OSError on failure (tests replace this to inject faults)."""
    if _LIBC_SYNCFS is None:
        raise OSError(38, "syncfs is not available")  # ENOSYS
    if _LIBC_SYNCFS(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def syncfs_available() -> bool:
    """Whether :func:`sync_filesystem` can be used (Linux 5.8+, not disabled)."""
    return _LIBC_SYNCFS is not None


def sync_filesystem(path: Path) -> None:
    """Make every completed write on the filesystem holding ``path`` durable, file data and
    directory entries alike, with one ``syncfs(2)``: the cost of about one fsync, where a commit
    would otherwise fsync each of its files and directories. It also flushes other programs'
    pending writes on that filesystem (the price: a commit can wait for them)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _syncfs(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or create inside it survives a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        durable_flush(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """Write every byte of ``data`` at ``offset`` (``os.pwrite`` may write less than asked)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def wipe_file(path: Path) -> None:
    """Overwrite a file with zeros (fsynced), then unlink it and fsync its directory, so key
    material does not linger in freed blocks of filesystems that write in place (best effort:
    copy-on-write filesystems, snapshots and SSD remapping may keep old blocks).

    The file is first renamed to ``.<name>.wipe`` (fsynced), so a crash or an I/O error midway
    never leaves a zeroed or half-zeroed file under its real name (a key slot that would no
    longer parse): the real name is either the intact file or gone. A leftover ``.wipe`` file is
    finished by :func:`wipe_leftovers`. A file with other hard links (a ``cp -al`` snapshot shares
    its blocks) is only unlinked: zeroing it would destroy the other copy.
    """
    doomed = path.with_name(f".{path.name}.wipe") if not path.name.endswith(".wipe") else path
    if doomed != path:
        os.replace(path, doomed)
        fsync_dir(path.parent)
    fd = os.open(doomed, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if st.st_nlink == 1:
            pwrite_all(fd, bytes(st.st_size), 0)
            durable_flush(fd)
    finally:
        os.close(fd)
    os.unlink(doomed)
    fsync_dir(path.parent)


def wipe_leftovers(directory: Path, markers: tuple[str, ...]) -> int:
    """Wipe hidden files in ``directory`` left by an interrupted atomic write or wipe (names
    starting with ``.`` that contain one of ``markers`` or end in ``.wipe``); return how many.
    Caller holds the store lock, so no live writer owns them."""
    count = 0
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    for name in names:
        if name.startswith(".") and (name.endswith(".wipe") or any(m in name for m in markers)):
            try:
                wipe_file(directory / name)
            except FileNotFoundError:
                continue
            count += 1
    return count


def cache_root() -> Path:
    """The directory memvault keeps its caches under (replicas of stores in object storage, the
    scrubber's compiled patterns): ``$MEMVAULT_CACHE_DIR``, else ``$XDG_CACHE_HOME/memvault``,
    else ``~/.cache/memvault``."""
    root = os.environ.get("MEMVAULT_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "memvault")
    return Path(root)


def trusted(st: os.stat_result, kind: int) -> bool:
    """Whether a file memvault keeps for this user (a cache entry, a replica, host state) may be
    used: of file type ``kind``, owned by the effective user and writable by no one else (another
    user who could write it could change what memvault reads there, or rename what is in it); a
    regular file also has no other name (a hard link to a file of the user's that someone else
    chose)."""
    return (
        stat.S_IFMT(st.st_mode) == kind
        and st.st_uid == os.geteuid()
        and not st.st_mode & 0o022
        and (kind != stat.S_IFREG or st.st_nlink == 1)
    )


def open_trusted_dir(directory: Path) -> int | None:
    """A descriptor of ``directory`` (not followed if a symbolic link) if it is :func:`trusted`,
    else None. Every later step goes through it, so the directory cannot be swapped between check
    and use."""
    try:
        fd = os.open(directory, O_DIR)
    except OSError:
        return None
    try:
        if trusted(os.fstat(fd), stat.S_IFDIR):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


#: Why a directory of host data was refused, and what to do (no path: messages never name one).
_UNTRUSTED = (
    " is not private to this user (a symbolic link, owned by another user, or writable by group or others), "
    "so another user could change or move what memvault keeps there: memvault does not use it. Make it a "
    "directory of yours with mode 0700, or point {env} at another one."
)


def check_private_dir(path: Path, what: str, env: str) -> None:
    """Refuse ``path`` unless it is a :func:`trusted` directory (not a symbolic link).

    Args:
        what: the directory's role, starting a sentence ("The cache directory of this store").
        env: the variable that chooses another place, for the message.

    Raises:
        StorageError: it is not (or cannot be examined).
    """
    try:
        st = os.lstat(path)
    except OSError as err:
        raise StorageError.from_read_error(err, what=what) from None
    if not trusted(st, stat.S_IFDIR):
        raise StorageError(what + _UNTRUSTED.format(env=env))


def check_parent_dir(path: Path, what: str, env: str) -> None:
    """Refuse ``path``, the directory holding directories memvault keeps for this user, unless
    no other user can rename or replace its entries: owned by the effective user or root, and
    writable by group or others only with the sticky bit (as ``/tmp``). Symbolic links to it are
    followed (its entries are checked with :func:`check_private_dir`).

    Raises:
        StorageError: it is not (or cannot be examined).
    """
    try:
        st = os.stat(path)
    except OSError as err:
        raise StorageError.from_read_error(err, what=what) from None
    if (
        not stat.S_ISDIR(st.st_mode)
        or st.st_uid not in (os.geteuid(), 0)
        or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX)
    ):
        raise StorageError(what + _UNTRUSTED.format(env=env))


def make_dirs_in_own(path: Path) -> bool:
    """Make ``path`` (0700) and its missing parents, but only under a directory the effective
    user owns (root running with another user's ``HOME`` leaves that home alone); True if it
    exists afterwards (made here or meanwhile by someone else)."""
    if os.path.lexists(path):
        return True
    ancestor = path.parent
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    try:
        if os.stat(ancestor).st_uid != os.geteuid():
            return False
        make_private_dir(path, parents=True)
    except FileExistsError:
        pass  # made meanwhile
    except OSError:
        return False
    return True


def make_private_dir(path: Path, *, parents: bool = False) -> None:
    """Create ``path`` with mode 0700 regardless of umask; with ``parents``, also each missing
    ancestor, 0700 too (existing ones are left as they are)."""
    if parents:
        missing: list[Path] = []
        for ancestor in path.parents:
            if ancestor.exists():
                break
            missing.append(ancestor)
        for ancestor in reversed(missing):
            try:
                make_private_dir(ancestor)
            except FileExistsError:
                pass  # made meanwhile by someone else: theirs to keep as it is
    os.mkdir(path, DIR_MODE)
    os.chmod(path, DIR_MODE)


def restrict_modes(root: Path) -> None:
    """Take group and other permissions off everything under ``root`` (directories become 0700,
    files keep at most their owner bits), whatever the umask was when they were created."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, DIR_MODE)
        for name in filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if (st.st_mode & 0o077) and not os.path.islink(p):
                os.chmod(p, st.st_mode & 0o700)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]


def private_file(path: str | Path, mode: int = FILE_MODE) -> None:
    """Drop group/other bits of one file created by code that honours the umask (``mode`` is
    the most it may keep)."""
    st = os.lstat(path)
    if st.st_mode & 0o077:
        os.chmod(path, st.st_mode & mode)


def private_dir(path: str | Path) -> None:
    """Make one directory created by code that honours the umask 0700."""
    st = os.lstat(path)
    if st.st_mode & 0o777 != DIR_MODE:
        os.chmod(path, DIR_MODE)


def read_bounded(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, which must hold at most ``limit`` bytes:
    FileNotFoundError if absent, OSError for a FIFO, a device, a directory or a bigger file
    (opened without blocking, so a FIFO never hangs). Symbolic links are followed."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise OSError("not a regular file of bounded size")
        # Ask for what fstat saw, plus one byte to notice growth: read(n) allocates n bytes first.
        data = os.pread(fd, st.st_size + 1, 0)
        while len(data) > st.st_size and len(data) <= limit:  # it grew meanwhile
            more = os.pread(fd, min(1 << 20, limit + 1 - len(data)), len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError("file grew past its bound")
    return data


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: temp file, fsync, rename, directory fsync."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    install_file(fd, tmp, path, data, fsync=durable)
    if durable:
        fsync_dir(path.parent)


def install_file(fd: int, tmp: str | Path, final: str | Path, data: bytes, *, fsync: bool) -> None:
    """Write ``data`` to the file just created at ``tmp`` (open at ``fd``, which this closes),
    fsync it if asked, and rename it to ``final``, which then holds ``data`` whole. On any error
    ``tmp`` is removed (best effort), ``final`` is as it was, and the error propagates."""
    try:
        try:
            write_all(fd, data)
            if fsync:
                durable_flush(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
