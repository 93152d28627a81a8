"""API paths (``/notes/todo.md``) and the store paths below ``/memories`` they name.

An API path starts with ``/``, names at least one segment and has no trailing ``/``; the rest of
its grammar is the store's (:func:`memvault.paths.parse_path`: the API grammar for stores made by
the server, memvault's stricter one for others). A listing prefix ends with ``/`` (``/`` is the
whole store) and matches whole segments.
"""

from __future__ import annotations

from ..errors import InvalidPathError
from ..paths import MemoryPath, display, parse_path
from ..settings import StoreSettings
from .model import API_ROOT

__all__ = ["to_store_path", "to_store_prefix"]


def _refuse(raw: object, reason: str) -> InvalidPathError:
    return InvalidPathError(f"Error: Invalid path {display(raw)}: {reason}")


def _parse(raw: str, settings: StoreSettings) -> MemoryPath:
    try:
        return parse_path(API_ROOT + raw, settings)
    except InvalidPathError as err:
        # The store's message names the store path; the caller gave the API path.
        raise InvalidPathError(err.message.replace(display(API_ROOT + raw), display(raw), 1)) from None


def to_store_path(raw: object, settings: StoreSettings) -> MemoryPath:
    """The store path of the memory at API path ``raw``.

    Raises:
        InvalidPathError: ``raw`` is no string, does not start with ``/``, names no segment, ends
            with ``/`` or breaks the store's grammar or limits.
    """
    if type(raw) is not str:
        raise InvalidPathError("Error: Invalid path: expected a string")
    if not raw.startswith("/"):
        raise _refuse(raw, "it must start with /")
    if raw == "/" or raw.endswith("/"):
        raise _refuse(raw, "it must name a memory, not end with /")
    return _parse(raw, settings)


def to_store_prefix(raw: object, settings: StoreSettings) -> MemoryPath:
    """The store directory a listing prefix names (``/`` is ``/memories`` itself).

    Raises:
        InvalidPathError: ``raw`` is no string, does not start and end with ``/``, or breaks the
            store's grammar.
    """
    if type(raw) is not str:
        raise InvalidPathError("Error: Invalid path prefix: expected a string")
    if not raw.startswith("/") or not raw.endswith("/"):
        raise _refuse(raw, "a path prefix must start and end with /")
    if raw == "/":
        return MemoryPath(())
    return _parse(raw[:-1], settings)
