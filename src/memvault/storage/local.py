"""The storage seam on a local (or network-mounted) directory: one file per object, created by
``link(2)`` of a complete temporary file (atomic and exclusive, also on NFS), swapped under
``flock(2)``."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ServiceError
from ..fsutil import (
    FILE_MODE,
    O_NEW_FILE,
    durable_flush,
    flock_exclusive,
    fsync_dir,
    make_private_dir,
    opened,
    write_all,
)
from .base import ObjectInfo, check_key

__all__ = ["DirectoryObjects"]

_TMP = ".tmp-"


def _ensure_dir(path: Path) -> None:
    if not path.is_dir():
        try:
            make_private_dir(path, parents=True)
        except FileExistsError:
            pass  # made meanwhile by another writer


def _tag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class DirectoryObjects:
    """Objects as files under ``root`` (created on first write, mode 0700/0600).

    Args:
        root: the directory.
        durable: fsync each new file and its directory before a write returns.
    """

    def __init__(self, root: Path, *, durable: bool = True) -> None:
        self.root = Path(root)
        self.description = f"directory {self.root}"
        self._durable = durable

    def _fail(self, err: OSError, action: str) -> ServiceError:
        return ServiceError(self.description, action, err.strerror or "I/O error")

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def _write_temp(self, directory: Path, data: bytes) -> Path:
        _ensure_dir(directory)
        tmp = directory / f"{_TMP}{secrets.token_hex(8)}"
        with opened(os.open(tmp, O_NEW_FILE, FILE_MODE)) as fd:
            write_all(fd, data)
            if self._durable:
                durable_flush(fd)
        return tmp

    def create(self, key: str, data: bytes) -> str | None:
        path = self._path(key)
        try:
            tmp = self._write_temp(path.parent, data)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return None
            finally:
                os.unlink(tmp)
            if self._durable:
                fsync_dir(path.parent)
        except OSError as err:
            raise self._fail(err, f"create {key}") from None
        return _tag(data)

    def get(self, key: str) -> bytes | None:
        found = self.get_tagged(key)
        return None if found is None else found[0]

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        try:
            data = self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as err:
            raise self._fail(err, f"read {key}") from None
        return data, _tag(data)

    def list(self, prefix: str, *, start_after: str = "") -> list[ObjectInfo]:
        head, _, _ = prefix.rpartition("/")
        base = self.root / head if head else self.root
        out: list[ObjectInfo] = []
        try:
            for dirpath, dirs, files in os.walk(base):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                rel = Path(dirpath).relative_to(self.root).as_posix()
                for name in files:
                    if name.startswith(_TMP) or name.startswith("."):
                        continue
                    key = name if rel == "." else f"{rel}/{name}"
                    if key.startswith(prefix) and key > start_after:
                        data = (Path(dirpath) / name).read_bytes()
                        out.append(ObjectInfo(key, len(data), _tag(data)))
        except FileNotFoundError:
            return []
        except OSError as err:
            raise self._fail(err, f"list {prefix or '/'}") from None
        out.sort(key=lambda info: info.key.encode())
        return out

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            with self._locked(path.parent):
                os.unlink(path)
                if self._durable:
                    fsync_dir(path.parent)
        except FileNotFoundError:
            return
        except OSError as err:
            raise self._fail(err, f"delete {key}") from None

    def swap(self, key: str, data: bytes, expected: str | None) -> str | None:
        if expected is None:
            return self.create(key, data)  # link(2): exclusive against every other writer
        path = self._path(key)
        try:
            with self._locked(path.parent):
                current = self.get_tagged(key)
                if current is None or current[1] != expected:
                    return None
                tmp = self._write_temp(path.parent, data)
                os.replace(tmp, path)
                if self._durable:
                    fsync_dir(path.parent)
        except OSError as err:
            raise self._fail(err, f"replace {key}") from None
        return _tag(data)

    @contextmanager
    def _locked(self, directory: Path) -> Iterator[None]:
        """Hold ``flock(2)`` on the directory's lock file: replacing and deleting objects there
        exclude each other (a delete between a swap's check and its rename would be undone)."""
        _ensure_dir(directory)
        with opened(os.open(directory / ".swap-lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)) as fd:
            flock_exclusive(fd)
            yield

    def versioning(self) -> str | None:
        return None
