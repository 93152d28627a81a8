"""Times in JSON output, one form everywhere: ISO 8601 in UTC with its offset, to the second
(``2026-11-01T13:30:00+00:00``), with the exact seconds since the epoch alongside.

``memvault log --json`` (and the other ``--json`` outputs of the CLI) and the MCP server's
history tools both use these, so a client reads the same time whichever way it asked.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["iso_utc", "json_times"]


def iso_utc(t: float) -> str:
    """``t`` (seconds since the epoch) as ISO 8601 in UTC, to the second: ``2026-11-01T13:30:00+00:00``."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def json_times(obj: dict[str, Any], key: str = "time", exact: str = "timestamp") -> dict[str, Any]:
    """``obj`` with its number ``key`` as :func:`iso_utc` and the number itself right after it as
    ``exact``; the ``redacted`` record of each of its ``changes`` likewise.

    Args:
        obj: a JSON object (a commit's ``to_json()``, a blame line, a tree entry).
        key: the field holding a time as a number.
        exact: the name under which the number is kept.

    Returns:
        A new dict (``obj`` is not changed); a ``key`` that is not a number is left as it is.
    """
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k == key and isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = iso_utc(float(v))
            out[exact] = v
        elif k == "changes" and isinstance(v, list):
            out[k] = [_change_times(c) for c in v]
        else:
            out[k] = v
    return out


def _change_times(change: Any) -> Any:
    if isinstance(change, dict) and isinstance(change.get("redacted"), dict):
        return {**change, "redacted": json_times(change["redacted"])}
    return change
