"""The data keys of a replica that a pull found missing (or damaged) in object storage, in a file
of the replica's own, so that each later pull looks for them again (docs/format.md §12.4)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ..fsutil import atomic_write, read_bounded

__all__ = ["LostKeys"]

_DEK_ID = re.compile(r"\A[0-9a-f]{32}\Z")
_MAX_BYTES = 1 << 24


class LostKeys:
    """The file ``path``: one data key id (32 hex) a line; absent when none is lost. A cache:
    a line too many costs one request, a line lost leaves that key to ``verify`` (``missing-key``).

    Args:
        path: the file (mode 0600).
        durable: sync it when it changes.
    """

    def __init__(self, path: Path, *, durable: bool) -> None:
        self._path = path
        self._durable = durable

    def any(self) -> bool:
        """Whether the file lists any key (without reading it)."""
        return self._path.exists()

    def update(self, *, add: Iterable[bytes] = (), remove: Iterable[bytes] = ()) -> set[bytes]:
        """The ids the file lists, after adding ``add`` and removing ``remove`` (a damaged file
        counts as empty)."""
        try:
            lines = read_bounded(self._path, _MAX_BYTES).decode("ascii").split()
        except (OSError, UnicodeDecodeError):
            lines = []
        ids = {bytes.fromhex(line) for line in lines if _DEK_ID.match(line)}
        new = (ids | set(add)) - set(remove)
        if new != ids or (not new and lines):
            if new:
                atomic_write(self._path, "".join(f"{d.hex()}\n" for d in sorted(new)).encode(), durable=self._durable)
            else:
                self._path.unlink(missing_ok=True)
        return new
