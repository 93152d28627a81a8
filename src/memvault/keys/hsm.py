"""The ``pkcs11:`` key provider: an AES secret key on a PKCS#11 token (an HSM, a smart card,
SoftHSM) seals a slot's key with AES-GCM on the token, the store and slot as associated data, so
the token key never leaves the token. The only importer of ``pkcs11`` (python-pkcs11).

The URI follows RFC 7512: ``pkcs11:token=<label>;object=<key label>`` (path attributes, which the
slot records), then optionally ``?module-path=...&pin-source=file:/path`` or ``&pin-value=...``
(query attributes, used to open the token and never recorded). Without them the module comes from
``$MEMVAULT_PKCS11_MODULE`` and the PIN from ``$MEMVAULT_PKCS11_PIN``. A wrapped key is
``nonce(12) || AES-GCM(token key, key, AAD = canonical JSON of the context)``.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

import pkcs11  # type: ignore[import-untyped,import-not-found,unused-ignore]
from pkcs11 import exceptions as pkcs11_errors  # type: ignore[import-untyped,import-not-found,unused-ignore]

from ..errors import InvalidInputError, ProviderError

__all__ = ["HsmProvider", "ENV_MODULE", "ENV_PIN"]

ENV_MODULE: Final = "MEMVAULT_PKCS11_MODULE"
ENV_PIN: Final = "MEMVAULT_PKCS11_PIN"  # noqa: S105 - a variable name
_KEY_SIZE: Final = 32
_NONCE: Final = 12
#: The path attributes this provider reads (RFC 7512 defines more; they are refused, not ignored).
_PATH_ATTRS: Final = frozenset({"token", "object"})
_QUERY_ATTRS: Final = frozenset({"module-path", "pin-source", "pin-value"})
#: Loaded PKCS#11 modules by path (a module is initialised once per process).
_LIBS: dict[str, Any] = {}
_LIBS_LOCK = threading.Lock()
#: What each python-pkcs11 error means, in the words of an error message.
_MEANINGS: Final = {
    "NoSuchToken": "no token with that label (removed, or not initialised)",
    "TokenNotPresent": "the token is not present (removed?)",
    "DeviceRemoved": "the token was removed",
    "PinIncorrect": "wrong PIN",
    "PinLenRange": "wrong PIN (not of a length the token accepts)",
    "PinLocked": "the PIN is locked (too many wrong PINs)",
    "PinExpired": "the PIN has expired",
    "NoSuchKey": "no AES secret key with that label on the token",
    "MultipleObjectsReturned": "several keys on the token have that label",
    "KeyFunctionNotPermitted": "the key on the token may not encrypt or decrypt",
    "MechanismInvalid": "the token does not offer AES-GCM",
}


def _split(uri: str) -> tuple[dict[str, str], dict[str, str]]:
    """Path and query attributes of a ``pkcs11:`` URI, percent-decoded."""
    scheme, _, rest = uri.partition(":")
    path, _, query = rest.partition("?")
    attrs: list[dict[str, str]] = [{}, {}]
    for which, text, sep, known in ((0, path, ";", _PATH_ATTRS), (1, query, "&", _QUERY_ATTRS)):
        for part in filter(None, text.split(sep)):
            name, eq, value = part.partition("=")
            if scheme != "pkcs11" or not eq or name not in known or name in attrs[which]:
                raise InvalidInputError(
                    "Error: Not a PKCS#11 key URI memvault reads (RFC 7512): use pkcs11:token=<label>;object=<key "
                    "label>, optionally ?module-path=...&pin-source=file:/path (no other attributes)."
                )
            attrs[which][name] = unquote(value)
    return attrs[0], attrs[1]


class HsmProvider:
    """Seals slot keys with an AES key on a PKCS#11 token.

    Args:
        uri: ``pkcs11:token=...;object=...`` with optional query attributes (see the module).

    Raises:
        InvalidInputError: not such a URI, or one without ``token`` or ``object``.
    """

    def __init__(self, uri: str) -> None:
        path, query = _split(uri)
        if "token" not in path or "object" not in path:
            raise InvalidInputError("Error: A PKCS#11 key URI needs token=<label> and object=<key label>.")
        #: The URI the slot records: the path attributes only (no PIN, no module path).
        self.uri = uri.partition("?")[0]
        self._path = path
        self._query = query

    def _fail(self, action: str, reason: str) -> ProviderError:
        return ProviderError(f"Key provider {self.uri} could not {action} the key: {reason}.")

    def _module(self, action: str) -> Any:
        path = self._query.get("module-path") or os.environ.get(ENV_MODULE)
        if not path:
            raise self._fail(action, f"no PKCS#11 module: set {ENV_MODULE} (or module-path in the URI)")
        with _LIBS_LOCK:
            if path not in _LIBS:
                try:
                    _LIBS[path] = pkcs11.lib(path)
                except Exception as err:  # noqa: BLE001 - a module that does not load, whatever it raises
                    raise self._fail(action, f"the PKCS#11 module cannot be loaded ({type(err).__name__})") from None
            return _LIBS[path]

    def _pin(self, action: str) -> str:
        if "pin-value" in self._query:
            return self._query["pin-value"]
        source = self._query.get("pin-source")
        if source is not None:
            try:
                return Path(source.removeprefix("file:")).read_text().rstrip("\r\n")
            except OSError as err:
                raise self._fail(action, f"the PIN file cannot be read ({err.strerror})") from None
        pin = os.environ.get(ENV_PIN)
        if pin is None:
            raise self._fail(action, f"no PIN: set {ENV_PIN} (or pin-source in the URI)")
        return pin

    def _run(self, action: str, fn: Any) -> bytes:
        """Open a session on the token, find the key, run ``fn(key)``; errors become ProviderError."""
        lib = self._module(action)
        pin = self._pin(action)
        try:
            token = lib.get_token(token_label=self._path["token"])
            with token.open(user_pin=pin) as session:
                key = session.get_key(
                    label=self._path["object"], key_type=pkcs11.KeyType.AES, object_class=pkcs11.ObjectClass.SECRET_KEY
                )
                result: bytes = fn(key)
                return result
        except ProviderError:
            raise
        except pkcs11_errors.PKCS11Error as err:
            name = type(err).__name__
            raise self._fail(action, f"PKCS#11 {name} ({_MEANINGS.get(name, 'the token refused')})") from None

    def wrap(self, key: bytes, context: Mapping[str, str]) -> bytes:
        """Seal ``key`` (32 bytes) on the token, bound to ``context``.

        Raises:
            ProviderError: no module, PIN, token or key, a wrong PIN, or the token refused.
        """
        if len(key) != _KEY_SIZE:
            raise ValueError("a slot key is 32 bytes")
        nonce = secrets.token_bytes(_NONCE)
        params = pkcs11.GCMParams(nonce, _aad(context), 128)
        return nonce + self._run("wrap", lambda k: bytes(k.encrypt(key, mechanism=pkcs11.Mechanism.AES_GCM,
                                                                   mechanism_param=params)))  # fmt: skip

    def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        """Open a key :meth:`wrap` sealed with ``context``.

        Raises:
            ProviderError: as for :meth:`wrap`, or the wrapped key belongs to another context or
                was altered.
        """
        if len(wrapped) != _NONCE + _KEY_SIZE + 16:
            raise self._fail("unwrap", "the wrapped key is not one this provider made")
        params = pkcs11.GCMParams(wrapped[:_NONCE], _aad(context), 128)

        def open_sealed(k: Any) -> bytes:
            try:
                return bytes(k.decrypt(wrapped[_NONCE:], mechanism=pkcs11.Mechanism.AES_GCM, mechanism_param=params))
            except pkcs11_errors.PKCS11Error:
                raise self._fail(
                    "unwrap", "the wrapped key does not belong to this store and slot, or was altered"
                ) from None

        key = self._run("unwrap", open_sealed)
        if len(key) != _KEY_SIZE:
            raise self._fail("unwrap", "the token returned a key of the wrong size")
        return key


def _aad(context: Mapping[str, str]) -> bytes:
    return json.dumps(dict(context), sort_keys=True, separators=(",", ":")).encode()
