"""What the memory-stores API accepts: its limits on a memory's content and path, checked before a
push sends anything, so a file the API would refuse is listed with the reason instead.

The limits are the API's (docs/cli.md "migrate"): UTF-8 text of at most 102,400 bytes; a path that
starts with ``/``, has 1 to 20 segments, none empty, ``.`` or ``..``, no control or format character
(nor U+2028/U+2029), is in Unicode NFC and is at most 1,024 bytes; no path lies above or below
another (a path is a file or a directory, never both). The character rules are the API grammar of
:func:`memvault.paths.parse_path`.
"""

from __future__ import annotations

from ...errors import InvalidPathError
from ...paths import ROOT, parse_path
from ...settings import StoreSettings

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_PATH_BYTES",
    "MAX_SEGMENTS",
    "content_problem",
    "path_problem",
    "overlap",
]

#: Largest content of one memory, in UTF-8 bytes.
MAX_CONTENT_BYTES = 102_400
#: Longest path of a memory, in UTF-8 bytes.
MAX_PATH_BYTES = 1024
#: Most segments of a memory's path.
MAX_SEGMENTS = 20

#: The API grammar with the API's depth; lengths are checked here first, with the API's numbers.
_API_GRAMMAR = StoreSettings(path_grammar="api", max_depth=MAX_SEGMENTS, max_path_bytes=4096, max_segment_bytes=1024)


def content_problem(data: bytes, *, binary: bool) -> str | None:
    """Why the API would refuse ``data`` as a memory's content, or None if it takes it."""
    if binary:
        return "binary file (the API stores UTF-8 text only)"
    if len(data) > MAX_CONTENT_BYTES:
        return f"{len(data):,} bytes, over the API's limit of {MAX_CONTENT_BYTES:,} bytes per memory"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    return None


def path_problem(path: str) -> str | None:
    """Why the API would refuse ``path`` (an API path: ``/notes/a.md``), or None if it takes it."""
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        return f"the path is {size:,} bytes, over the API's limit of {MAX_PATH_BYTES:,}"
    segments = path.count("/")
    if segments > MAX_SEGMENTS:
        return f"the path has {segments} segments, over the API's limit of {MAX_SEGMENTS}"
    if not path.startswith("/") or path == "/":
        return "the path must start with / and name a memory"
    try:
        parse_path(ROOT + path, _API_GRAMMAR)
    except InvalidPathError as err:
        return "the path: " + err.message.rsplit(": ", 1)[-1]
    return None


def overlap(a: str, b: str) -> bool:
    """Whether two different paths cannot both be memories: one lies below the other."""
    return a != b and (a.startswith(b + "/") or b.startswith(a + "/"))
