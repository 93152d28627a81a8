#!/usr/bin/env python3
"""An example key helper for memvault's ``command:`` key provider: it wraps slot keys with AES-256-GCM
under a key kept in a local file, the store and slot (the request's context) as associated data.

It shows the helper protocol (version 1, described in ``memvault.keys.command``) and stands in for
a real key service: a production helper would call HashiCorp Vault's transit engine, Google Cloud
KMS or Azure Key Vault here instead of holding the key itself.

Usage::

    head -c 32 /dev/urandom > ~/.memvault-helper.key && chmod 600 ~/.memvault-helper.key
    export MEMVAULT_HELPER_KEY_FILE=~/.memvault-helper.key
    memvault init --key "command:python3 examples/key_helper.py"

memvault writes one JSON request to standard input and reads one JSON answer from standard output:
``{"version": 1, "wrapped": <base64>}`` for a wrap, ``{"version": 1, "key": <base64>}`` for an
unwrap, or ``{"version": 1, "error": <message>}`` with exit status 1. A key wrapped for one store
and slot does not unwrap for another (AES-GCM authenticates the context).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VERSION = 1
KEY_SIZE = 32
NONCE_SIZE = 12


class HelperError(Exception):
    """A failure reported to memvault as ``{"error": ...}`` (never holding key material)."""


def load_key() -> bytes:
    """The 32-byte wrapping key from the file ``$MEMVAULT_HELPER_KEY_FILE`` names."""
    path = os.environ.get("MEMVAULT_HELPER_KEY_FILE", "")
    if not path:
        raise HelperError("MEMVAULT_HELPER_KEY_FILE is not set")
    try:
        with open(path, "rb") as f:
            key = f.read(KEY_SIZE + 1)
    except OSError as err:
        raise HelperError(f"the key file named by MEMVAULT_HELPER_KEY_FILE cannot be read ({err.strerror})") from None
    if len(key) != KEY_SIZE:
        raise HelperError(f"the key file named by MEMVAULT_HELPER_KEY_FILE must hold exactly {KEY_SIZE} bytes")
    return key


def associated_data(context: Any) -> bytes:
    """The context as canonical JSON (sorted keys, no spaces): what a wrap is bound to."""
    if not isinstance(context, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in context.items()):
        raise HelperError("the request's context is not a map of strings")
    return json.dumps(context, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def field(request: dict[str, Any], name: str) -> bytes:
    """The bytes of the request's base64 field ``name``."""
    value = request.get(name)
    try:
        if isinstance(value, str):
            return base64.b64decode(value, validate=True)
    except ValueError:
        pass
    raise HelperError(f"the request has no base64 {name!r} field")


def handle(request: Any) -> dict[str, Any]:
    """The answer to one request."""
    if not isinstance(request, dict) or request.get("version") != VERSION:
        raise HelperError(f"unsupported request (this helper speaks protocol version {VERSION})")
    aad = associated_data(request.get("context"))
    aead = AESGCM(load_key())
    if request.get("op") == "wrap":
        key = field(request, "key")
        if len(key) != KEY_SIZE:
            raise HelperError(f"the key to wrap must be {KEY_SIZE} bytes")
        nonce = os.urandom(NONCE_SIZE)
        wrapped = nonce + aead.encrypt(nonce, key, aad)
        return {"version": VERSION, "wrapped": base64.b64encode(wrapped).decode()}
    if request.get("op") == "unwrap":
        wrapped = field(request, "wrapped")
        try:
            key = aead.decrypt(wrapped[:NONCE_SIZE], wrapped[NONCE_SIZE:], aad)
        except (InvalidTag, ValueError):
            raise HelperError(
                "the wrapped key does not open with this helper's key for this store and slot "
                "(another store or slot, another key file, or altered)"
            ) from None
        return {"version": VERSION, "key": base64.b64encode(key).decode()}
    raise HelperError("unknown op (expected wrap or unwrap)")


def main() -> int:
    """Answer the request on standard input; 0 on success, 1 on failure."""
    try:
        try:
            request = json.loads(sys.stdin.buffer.read(1024 * 1024))
        except ValueError:
            raise HelperError("the request is not JSON") from None
        answer, status = handle(request), 0
    except HelperError as err:
        answer, status = {"version": VERSION, "error": str(err)}, 1
    sys.stdout.write(json.dumps(answer) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
