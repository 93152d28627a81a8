"""A new store's directory, built so that no failure leaves a half-made store behind.

A store directory that does not exist yet is built in a hidden sibling on the same filesystem
(``.NAME.memvault-init-XXXXXXXX``) and renamed into place once it is complete: an interrupted
``init`` (Ctrl-C, a failing key provider, a full disk, even a killed process) leaves the target
absent, so ``init`` runs again. An existing empty directory (one the operator made, perhaps a
mount point, or in a parent they may not write) is built in place instead. Either way a failure,
``KeyboardInterrupt`` included, removes what the build made and only that: the hidden sibling and
the parents it made, or, in place, the store's own entries, with the directory's mode put back.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreExistsError
from ..fsutil import DIR_MODE, fsync_dir, make_private_dir
from .config import STORE_ENTRIES, check_new_store_dir

__all__ = ["new_store_dir", "BUILD_MARKER"]

#: Part of the name of the hidden sibling a new store directory is built in.
BUILD_MARKER = ".memvault-init-"


@contextmanager
def new_store_dir(root: Path, *, durable: bool, own: bool = False) -> Iterator[Path]:
    """The directory to build a new store for ``root`` in; when the block ends normally, the
    store is at ``root`` (renamed into place, and the rename made durable with ``durable``).

    ``own``: ``root`` is memvault's own (a replica's cache directory): it is built in place and a
    failure removes everything in it.

    Raises:
        StoreExistsError: ``root`` is a symbolic link, not a directory, a store, or not empty
            (checked first; also when something else took ``root`` while the store was built).
    """
    existed = check_new_store_dir(root)
    if existed or own:
        with _in_place(root, existed, own):
            yield root
        return
    absolute = Path(os.path.abspath(root))
    made = _make_parents(absolute.parent)
    work = absolute.parent / f".{absolute.name}{BUILD_MARKER}{secrets.token_hex(4)}"
    try:
        make_private_dir(work)
        yield work
        try:
            os.rename(work, root)  # an empty directory made meanwhile at root is replaced: nothing is lost
        except OSError as err:
            if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise StoreExistsError(
                    "Something else was put at the store location while the store was made."
                ) from None
            raise
        if durable:
            fsync_dir(absolute.parent)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for parent in made:  # deepest first; one someone else filled meanwhile stays
            try:
                os.rmdir(parent)
            except OSError:
                break
        raise


@contextmanager
def _in_place(root: Path, existed: bool, own: bool) -> Iterator[None]:
    mode = stat.S_IMODE(os.stat(root).st_mode) if existed else None
    if existed:
        os.chmod(root, DIR_MODE)
    else:
        make_private_dir(root, parents=True)
    try:
        yield
    except BaseException:
        for name in os.listdir(root):
            if own or _made_by_build(name):
                path = root / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        if mode is not None:
            os.chmod(root, mode)
        elif not any(root.iterdir()):
            root.rmdir()
        raise


def _made_by_build(name: str) -> bool:
    """Whether ``name`` is an entry building a store makes: one of ``STORE_ENTRIES``, or the
    hidden temporary file of an atomic write of one (``.memvault.json.tmp-...``)."""
    return name in STORE_ENTRIES or any(name.startswith(f".{entry}.") for entry in STORE_ENTRIES)


def _make_parents(parent: Path) -> list[Path]:
    """Make the missing ancestors of a new store directory, mode 0700; return them deepest first."""
    missing: list[Path] = []
    for path in (parent, *parent.parents):
        if path.exists():
            break
        missing.append(path)
    made: list[Path] = []
    for path in reversed(missing):
        try:
            make_private_dir(path)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs to keep
        made.insert(0, path)
    return made
