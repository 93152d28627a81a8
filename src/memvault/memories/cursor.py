"""Page cursors of the memory-stores listings: opaque, encrypted and authenticated.

A cursor carries where the previous page ended (a path, or a version's place) and a digest of
the query it belongs to, sealed with AES-256-GCM under a cursor key: a client cannot read the
path in it (cursors travel in URLs, which proxies log), forge one, or replay it on another query
or another store.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from .. import crypto
from ..errors import IntegrityError, InvalidInputError

__all__ = ["CursorSealer"]

_AAD = b"memvault/v1/page-cursor"
_BAD = "Error: The page cursor is not valid for this listing; start again without `page`."


class CursorSealer:
    """Seals and opens cursors for one store.

    Args:
        key: 32-byte cursor key (the server derives one shared by its processes; default: a
            random key, so cursors are valid for this object only).
        scope: bytes bound into every cursor (the store's id).
    """

    def __init__(self, key: bytes | None, scope: bytes) -> None:
        self._key = key if key is not None else crypto.new_key()
        self._scope = scope

    def seal(self, query: dict[str, Any], position: Any) -> str:
        """A cursor for the page after ``position`` of the listing ``query``."""
        body = json.dumps({"q": query, "p": position}, sort_keys=True, separators=(",", ":")).encode("utf-8")
        sealed = crypto.seal(self._key, body, _AAD + self._scope)
        return base64.urlsafe_b64encode(sealed).decode("ascii").rstrip("=")

    def open(self, cursor: str, query: dict[str, Any]) -> Any:
        """The position a cursor of the listing ``query`` carries.

        Raises:
            InvalidInputError: the cursor is malformed, forged, of another store or another query.
        """
        if not isinstance(cursor, str) or not cursor.isascii() or len(cursor) > 8192:
            raise InvalidInputError(_BAD)
        try:
            sealed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            raise InvalidInputError(_BAD) from None
        try:
            body = json.loads(crypto.open_sealed(self._key, sealed, _AAD + self._scope))
        except (ValueError, IntegrityError):
            raise InvalidInputError(_BAD) from None
        if not isinstance(body, dict) or body.get("q") != query or "p" not in body:
            raise InvalidInputError(_BAD)
        return body["p"]
