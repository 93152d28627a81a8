"""OS-level fault injection for the fault tests (imported, never collected).

:class:`Injector` wraps the ``os`` functions memvault and dulwich use to write a store (``open``
for writing, ``write``, ``pwrite``, ``fsync``, ``fdatasync``, ``ftruncate``, ``replace``,
``rename``, ``mkdir``, ``unlink``/``remove``, ``utime``, ``chmod``, and the buffered file objects
dulwich gets from ``os.fdopen``). Every call that touches a path inside the store is one *step*.
With ``fail_at=k`` the k-th step (or with ``fail_on=(step, n)`` the n-th occurrence of that
step) raises ``OSError(errno)`` (a failing ``write`` of more than one
byte first writes half its data, as a disk that fills up mid-write does, and the next write on
that descriptor raises); with ``fail_all=True`` every step raises (a read-only store when chmod
cannot make one, e.g. as root). Paths in the raised errors are real host paths, so a test can
check that they never reach an error message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_HEX_OBJ = re.compile(r"objects/[0-9a-f]{2}/[0-9a-f]{38}")
_HEX_DIR = re.compile(r"objects/[0-9a-f]{2}\b")
_PACK = re.compile(r"objects/pack/pack-[0-9a-f]{40}")
_PACK_TMP = re.compile(r"objects/pack/tmp_(pack|idx)_[0-9a-f]+")
_SLOT = re.compile(r"[0-9a-f]{32}\.json")
_TMP = re.compile(r"tmp-\d+-\d+|rewrite-\d+")


#: The hidden sibling a new store is built in before it is renamed into place.
_BUILDING = re.compile(r"\.([^/]+)\.memvault-init-[0-9a-z_]+")


def label(rel: str) -> str:
    """A step's path without random parts (object and pack ids, temporary names, slot ids,
    pids), for readable reports."""
    rel = _PACK.sub("objects/pack/pack-<id>", rel)
    rel = _PACK_TMP.sub(r"objects/pack/tmp_\1_<n>", rel)
    rel = _HEX_OBJ.sub("objects/<obj>", rel)
    rel = _HEX_DIR.sub("objects/<xx>", rel)
    rel = _SLOT.sub("<slot>.json", rel)
    rel = _BUILDING.sub(r".\1.memvault-init-<n>", rel)
    return _TMP.sub("tmp", rel)


class _File:
    """A buffered file from ``os.fdopen`` whose ``write`` is a step."""

    def __init__(self, injector: Injector, real: Any, rel: str) -> None:
        self._injector, self._real, self._rel = injector, real, rel

    def write(self, data: bytes) -> int:
        self._injector.step("write", self._rel)
        return int(self._real.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc: object) -> None:
        self._real.close()


class Injector:
    def __init__(
        self,
        root: Path,
        *,
        fail_at: int | None = None,
        fail_on: tuple[str, int] | None = None,
        err: int = 5,
        fail_all: bool = False,
        whole_writes: tuple[str, ...] = ("repo/refs/heads/main.lock",),
    ) -> None:
        self.root = os.path.abspath(os.fsdecode(root)) + os.sep
        self.fail_at, self.fail_on, self.err, self.fail_all = fail_at, fail_on, err, fail_all
        self._seen: dict[str, int] = {}
        #: Files whose failing write raises at once instead of writing half first
        #: (``GitStore.compare_and_swap`` ignores a short ``os.write``: see test_faults).
        self.whole_writes = whole_writes
        self.steps: list[str] = []
        self.fired: str | None = None
        self._fds: dict[int, str] = {}
        self._broken_fd: int | None = None
        self.real: dict[str, Any] = {}

    def rel(self, path: Any) -> str | None:
        if isinstance(path, int):
            return None
        p = os.path.abspath(os.fsdecode(os.fspath(path)))
        return p[len(self.root) :] if p.startswith(self.root) else None

    def _error(self, rel: str) -> OSError:
        return OSError(self.err, os.strerror(self.err), self.root + rel)

    def step(self, name: str, rel: str) -> None:
        """Record one step; raise if it is the one to fail (the ``fail_at``-th step, or the
        ``n``-th occurrence of the step ``fail_on=(step, n)``)."""
        step = f"{name} {label(rel)}"
        self.steps.append(step)
        self._seen[step] = n = self._seen.get(step, 0) + 1
        hit = (self.fail_at is not None and len(self.steps) == self.fail_at) or self.fail_on == (step, n)
        if self.fail_all or (hit and self.fired is None):
            self.fired = self.steps[-1]
            raise self._error(rel)

    # -- wrappers ---------------------------------------------------------------------------------

    def _open(self, path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        rel = self.rel(path) if kwargs.get("dir_fd") is None else None
        if rel is not None and flags & _WRITE_FLAGS:
            self.step("open", rel)
        fd = int(self.real["open"](path, flags, mode, *args, **kwargs))
        if rel is not None:
            self._fds[fd] = rel
        return fd

    def _close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        if self._broken_fd == fd:
            self._broken_fd = None
        self.real["close"](fd)

    def _write(self, fd: int, data: Any) -> int:
        rel = self._fds.get(fd)
        if rel is None:
            return int(self.real["write"](fd, data))
        if self._broken_fd == fd:
            raise self._error(rel)
        try:
            self.step("write", rel)
        except OSError:
            if len(data) > 1 and not self.fail_all and rel not in self.whole_writes:
                self._broken_fd = fd  # a short write now, the error on the next call
                return int(self.real["write"](fd, bytes(data[: len(data) // 2])))
            raise
        return int(self.real["write"](fd, data))

    def _fd_step(self, name: str) -> Any:
        real = self.real[name]

        def wrapper(fd: int, *args: Any, **kwargs: Any) -> Any:
            rel = self._fds.get(fd)
            if rel is not None:
                self.step(name, rel)
            return real(fd, *args, **kwargs)

        return wrapper

    def _path_step(self, name: str, *, second: bool = False) -> Any:
        real = self.real[name]

        def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
            rel = self.rel(args[0]) if second and args else None
            rel = rel if rel is not None else self.rel(path)
            if rel is not None and kwargs.get("dir_fd") is None:
                self.step(name, rel)
            return real(path, *args, **kwargs)

        return wrapper

    def _fdopen(self, fd: int, *args: Any, **kwargs: Any) -> Any:
        f = self.real["fdopen"](fd, *args, **kwargs)
        rel = self._fds.get(fd)
        mode = args[0] if args else kwargs.get("mode", "r")
        return _File(self, f, rel) if rel is not None and "w" in mode else f

    @contextmanager
    def active(self) -> Iterator[Injector]:
        names = ["open", "close", "write", "fdopen", "pwrite", "fsync", "fdatasync", "ftruncate"]
        names += ["replace", "rename", "mkdir", "unlink", "remove", "utime", "chmod", "rmdir"]
        for name in names:
            self.real[name] = getattr(os, name)
        wrappers = {
            "open": self._open,
            "close": self._close,
            "write": self._write,
            "fdopen": self._fdopen,
            **{n: self._fd_step(n) for n in ("pwrite", "fsync", "fdatasync", "ftruncate")},
            **{n: self._path_step(n, second=True) for n in ("replace", "rename")},
            **{n: self._path_step(n) for n in ("mkdir", "unlink", "remove", "utime", "chmod", "rmdir")},
        }
        for name, fn in wrappers.items():
            setattr(os, name, fn)
        try:
            yield self
        finally:
            for name, fn in self.real.items():
                setattr(os, name, fn)
