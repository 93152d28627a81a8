"""Small durable-filesystem helpers: atomic replace, the platform's durable flush, directory
fsync, the store write lock.

memvault runs on Linux and macOS: it needs ``flock(2)`` and ``O_NOFOLLOW``. Elsewhere (Windows)
importing this module, hence anything that opens a store, raises :class:`ImportError` with
:data:`UNSUPPORTED_PLATFORM`.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import LockedError, StorageError

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
    "StoreLock",
    "make_private_dir",
    "restrict_modes",
    "DEFAULT_LOCK_TIMEOUT",
    "O_DIR",
    "O_READ",
    "O_NEW_FILE",
    "opened",
    "UNSUPPORTED_PLATFORM",
    "durable_flush",
    "flock_exclusive",
    "LockHolder",
    "set_lock_wait_notice",
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
#: Seconds a writer waits for the store lock before :class:`~memvault.errors.LockedError`
#: (``MemoryStore.open(..., lock_timeout=...)`` overrides it per store object).
DEFAULT_LOCK_TIMEOUT = 30.0
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
_closing_pid = 0
_closing_lock = threading.Lock()


def close_soon(*fds: int) -> None:
    """Close ``fds`` on a thread of their own, soon, without waiting for it: the last close of a
    removed file frees its blocks, which after a sync costs ext4 about 0.1 ms a file, and
    nothing needs to wait for that (a merge retires a dozen files). Where no thread can be
    started (interpreter shutdown), they are closed here and now."""
    global _closing, _closing_pid
    with _closing_lock:
        if _closing is None or _closing_pid != os.getpid():  # first use, or a forked child
            fresh: queue.SimpleQueue[int] = queue.SimpleQueue()
            try:
                threading.Thread(target=_close_queued, args=(fresh,), name="memvault-close", daemon=True).start()
            except RuntimeError:
                for fd in fds:
                    _close_quietly(fd)
                return
            _closing, _closing_pid = fresh, os.getpid()
        for fd in fds:
            _closing.put(fd)


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


@dataclass(frozen=True)
class LockHolder:
    """Who holds a store's writer lock, as its lock file says: a process id and a host name."""

    pid: int
    host: str

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"


#: Most bytes of a lock file that are read for its holder (one short JSON line).
_HOLDER_MAX_BYTES = 512

#: The line naming this process in a lock file, by process id.
_holder_lines: dict[int, bytes] = {}

#: ``(callback, after)`` of :func:`set_lock_wait_notice`, or None.
_wait_notice: tuple[Callable[[LockHolder | None, float], None], float] | None = None


def set_lock_wait_notice(callback: Callable[[LockHolder | None, float], None] | None, *, after: float = 1.0) -> None:
    """Have ``callback(holder, timeout)`` called once whenever a writer of this process has
    waited ``after`` seconds for a store's writer lock and still waits (``holder``: who the lock
    file names, or None; ``timeout``: seconds the writer waits in all). The library never prints:
    the command line installs one that tells the person at the terminal. None removes it. The
    callback runs on the waiting thread; an exception it raises ends the wait."""
    global _wait_notice
    _wait_notice = None if callback is None else (callback, after)


def _host_name() -> str:
    return os.uname().nodename


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


class StoreLock:
    """The store-wide writer lock: ``flock`` on a lock file, plus a thread lock.

    ``flock`` is released by the kernel when a process dies, so a crashed writer never leaves a
    stale lock behind, and a live holder is never overridden: there is no age or PID heuristic
    that could steal it. Separate ``open()`` calls get separate lock descriptions, so threads of
    one process exclude each other too; the thread lock keeps them from spinning.

    A writer that takes the lock makes the lock file name it, one line of JSON
    (``{"host": ..., "pid": ...}``) written only when the file names someone else, and left there
    after the lock is released: only to tell a waiting writer (:func:`set_lock_wait_notice`) and
    ``memvault status`` who holds it (:meth:`holder`, which first checks that someone does). The
    lock never depends on it; an empty file (older memvault versions) names nobody.

    Waiting is bounded by ``timeout`` seconds in all (thread lock and ``flock`` together); then
    :class:`~memvault.errors.LockedError` says how long the caller waited. A lock file that
    cannot be opened (read-only store, no space) is a :class:`~memvault.errors.StorageError`.
    """

    def __init__(self, path: Path, timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        self._path = path
        self.timeout = timeout
        self._thread_lock = threading.Lock()

    def _locked(self, start: float) -> LockedError:
        waited = time.monotonic() - start
        return LockedError(
            f"The memory store is locked by another writer (waited {waited:.1f} s); retry shortly.",
            waited=waited,
        )

    def held(self) -> bool:
        """Whether a writer holds the lock now, probed with a non-blocking shared ``flock`` taken
        and released at once (a writer trying to take the lock meanwhile tries once more).
        Advisory: it may be taken or released right after."""
        try:
            fd = os.open(self._path, O_READ)
        except OSError:
            return False
        try:
            return self._held(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _held(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def holder(self) -> LockHolder | None:
        """Who holds the lock, as the lock file names it: None if nobody holds it now
        (:meth:`held`), or the file names nobody (a file that does not parse, a writer of an older
        memvault version when no writer of this one held the lock before it) or a process of this
        host that no longer exists. Advisory: the holder may have finished meanwhile, and the file
        names a new holder only once it has taken the lock."""
        try:
            fd = os.open(self._path, O_READ)
        except OSError:
            return None
        try:
            if not self._held(fd):
                return None  # free: the file names the last holder
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = os.pread(fd, _HOLDER_MAX_BYTES + 1, 0)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > _HOLDER_MAX_BYTES:
            return None
        try:
            obj = json.loads(data)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        pid, host = obj.get("pid"), obj.get("host")
        if not (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and isinstance(host, str) and host):
            return None
        if host == _host_name() and not _alive(pid):
            return None
        return LockHolder(pid, host[:255])

    @contextmanager
    def hold(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock, waiting at most ``timeout`` seconds (default: the lock's timeout)."""
        start = time.monotonic()
        limit = self.timeout if timeout is None else timeout
        if not self._thread_lock.acquire(timeout=min(max(limit, 0.0), threading.TIMEOUT_MAX)):
            raise self._locked(start)
        try:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
            except OSError as err:
                raise StorageError.from_os_error(err) from None
            try:
                self._acquire(fd, start, limit)
                try:
                    self._name_holder(fd)
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        finally:
            self._thread_lock.release()

    @staticmethod
    def _name_holder(fd: int) -> None:
        """Write this process's pid and host into the lock file unless it names them already (best
        effort, never synced). The name stays after the lock is released: a file written at every
        acquire and release would be one more file for each durable commit's ``syncfs`` to flush."""
        pid = os.getpid()
        line = _holder_lines.get(pid)
        if line is None:  # (once per process: a forked child has another pid)
            line = json.dumps({"host": _host_name(), "pid": pid}, sort_keys=True).encode() + b"\n"
            _holder_lines[pid] = line
        try:
            if os.pread(fd, _HOLDER_MAX_BYTES, 0) == line:
                return
            os.ftruncate(fd, 0)
            pwrite_all(fd, line, 0)
        except OSError:
            pass  # no space, a read-only file: the lock itself holds

    def _acquire(self, fd: int, start: float, timeout: float) -> None:
        deadline = start + timeout
        delay = 0.0005
        notice = _wait_notice
        tries = 0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                tries += 1
                now = time.monotonic()
                if now >= deadline and tries > 1:
                    raise self._locked(start) from None
                if now >= deadline:  # (once more: a probe of :meth:`held` holds it for microseconds)
                    time.sleep(0.001)
                    continue
                if notice is not None and now - start >= notice[1]:
                    callback, notice = notice[0], None
                    callback(self.holder(), timeout)
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 0.02)
