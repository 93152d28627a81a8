"""The keyring file on disk: made exclusively, given a file of its own when a hard link shares it,
rewritten through a private temporary file (never through a name someone planted), and the
temporaries a crashed rewrite left zeroed and removed. The records' meaning is :mod:`.keyring`'s."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from .. import crypto
from ..fsutil import FILE_MODE, durable_flush, fsync_dir, pwrite_all, wipe_file, write_all
from . import framing as fr

__all__ = ["create", "unshare", "rewrite", "create_temp", "remove_leftovers", "MAX_KEYRING_BYTES"]

#: Largest keyring read (about 80 bytes per file version: tens of millions of versions).
MAX_KEYRING_BYTES = 4 * 1024 * 1024 * 1024
_TEMP_ATTEMPTS = 16


def _temp_suffix() -> str:
    """The random part of a temporary keyring's name."""
    return crypto.random_bytes(8).hex()


def create(path: Path, store_id: bytes, *, durable: bool) -> None:
    """Make a new keyring holding its header only (refused if anything is at ``path``)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        write_all(fd, fr.HEADER.pack(fr.MAGIC, fr.VERSION, store_id))  # a short write is not an error
        if durable:
            durable_flush(fd)
    finally:
        os.close(fd)
    if durable:
        fsync_dir(path.parent)


def unshare(path: Path) -> bool:
    """Give the keyring a file of its own when another hard link shares it (a ``cp -al``
    snapshot), so that appends leave the other copy as it was: copy, fsync, rename over. True when
    it did (the caller reads the file again)."""
    if os.lstat(path).st_nlink <= 1:
        return False
    with open(path, "rb") as f:
        data = f.read(MAX_KEYRING_BYTES + 1)
    tmp, fd = create_temp(path)
    try:
        write_all(fd, data)
        durable_flush(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return True


def rewrite(path: Path, length: int, transform: Callable[[int, bytes], bytes | None], extra: bytes) -> None:
    """Write a new keyring from the first ``length`` bytes of the old one (each record through
    ``transform``; None drops it; ``extra`` appended), rename it over the old one, then overwrite
    every changed or dropped record inside the old, now unlinked, file, so its blocks do not keep
    them on filesystems that write in place (copy-on-write filesystems and SSD remapping may
    still). A crash leaves either keyring whole; readers notice the new inode and re-read."""
    remove_leftovers(path)
    with open(path, "rb") as f:
        data = f.read(length)
    out = [data[: fr.HEADER.size]]
    wipe: list[tuple[int, int]] = []
    pos = fr.HEADER.size
    while pos < len(data):
        rtype, size = fr.RECORD.unpack_from(data, pos)
        end = pos + fr.RECORD.size + size
        record = data[pos:end]
        new = transform(rtype, record)
        if new != record:
            wipe.append((pos, end))
        if new is not None:
            out.append(new)
        pos = end
    out.append(extra)
    tmp, fd = create_temp(path)
    try:
        write_all(fd, b"".join(out))
        durable_flush(fd)
    finally:
        os.close(fd)
    old_fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.replace(tmp, path)
        fsync_dir(path.parent)
        if os.fstat(old_fd).st_nlink == 0:  # another hard link (a snapshot) keeps it whole
            for start, end in wipe:
                pwrite_all(old_fd, bytes(end - start), start)
            durable_flush(old_fd)
    finally:
        os.close(old_fd)


def create_temp(path: Path) -> tuple[Path, int]:
    """A new temporary keyring beside ``path``, opened for writing: created exclusively under a
    random name, never following a link, so nothing found at that name (a file or a symbolic link
    someone put there) is written through or renamed into place."""
    for _attempt in range(_TEMP_ATTEMPTS):
        tmp = path.with_name(f".{path.name}.rewrite-{os.getpid()}-{_temp_suffix()}")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        except FileExistsError:
            continue
    raise FileExistsError(17, "File exists", str(path.parent))


def remove_leftovers(path: Path) -> None:
    """Zero and unlink temporary keyrings left by a rewrite that crashed before its swap (they
    hold wrapped keys a later redaction must not leave behind); anything else found under such a
    name (a symbolic link, a directory entry memvault never made) is unlinked without being
    followed."""
    prefix = f".{path.name}.rewrite-"
    for name in os.listdir(path.parent):
        if not name.startswith(prefix):
            continue
        entry = path.parent / name
        mode = os.lstat(entry).st_mode
        if stat.S_ISREG(mode):
            wipe_file(entry)
        elif not stat.S_ISDIR(mode):
            os.unlink(entry)
