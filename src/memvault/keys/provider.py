"""The key provider seam: something outside memvault (a KMS, an HSM, an external key service)
that wraps and unwraps a slot's 32-byte key, bound to the store and slot (docs/format.md §2.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..errors import InvalidInputError

__all__ = ["KeyProvider", "open_provider", "binding_context", "shown_uri", "mismatch", "SCHEMES"]

#: URI schemes of the providers this release has, and the module of each.
SCHEMES = {"aws-kms": "kms", "command": "command", "pkcs11": "hsm"}


class KeyProvider(Protocol):
    """Wraps and unwraps 32-byte keys with a key memvault never sees.

    ``context`` binds a wrap to one store and slot (an AWS KMS encryption context, AES-GCM
    associated data, a helper's JSON field): unwrapping with another context must fail.
    Failures raise :class:`~memvault.errors.ProviderError` with the provider's reason.
    """

    #: The provider's URI, as the key slot records it.
    uri: str

    def wrap(self, key: bytes, context: Mapping[str, str]) -> bytes:
        """The wrapped form of ``key`` (opaque bytes the slot stores)."""
        ...

    def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        """The 32-byte key ``wrapped`` holds, if it was wrapped with ``context``."""
        ...


def shown_uri(uri: str) -> str:
    """``uri`` as messages show it: a ``command:`` URI as its program's file name only (its
    arguments may hold tokens)."""
    scheme, _, rest = uri.partition(":")
    if scheme != "command":
        return uri
    program = rest.strip().split(maxsplit=1)[0] if rest.strip() else ""
    return f"command:{program.rsplit('/', 1)[-1]} (arguments not shown)"


def mismatch(given: str, recorded: Sequence[tuple[str, str]]) -> str:
    """What to tell someone whose key provider URI ``given`` matches none of a store's provider
    slots ``recorded`` (``(slot id, URI)`` each): how it differs from each ``command:`` slot
    (:func:`memvault.keys.command.difference`; no argument that may hold a secret), or which
    providers the slots use. "" when the store has no provider slot.
    """
    from .command import difference

    if not recorded:
        return ""
    if given.partition(":")[0] == "command":
        found = [(slot, difference(given, uri)) for slot, uri in recorded if uri.partition(":")[0] == "command"]
        told = [f"key slot {slot}: {how}" for slot, how in found if how]
        if told:
            return f"Compared with the store's command: slots ({'; '.join(told)})."
    uris = sorted({shown_uri(uri) for _slot, uri in recorded})
    return f"The store's key slots use {', '.join(uris)}."


def binding_context(store_id: bytes, slot_id: bytes) -> dict[str, str]:
    """The context of a slot's wrap: ``{"memvault:store": <hex>, "memvault:slot": <hex>}`` (it also
    names the store and slot in the provider's audit log)."""
    return {"memvault:store": store_id.hex(), "memvault:slot": slot_id.hex()}


def open_provider(uri: str) -> KeyProvider:
    """The provider a URI names: ``aws-kms:<key id | arn | alias/name>``,
    ``pkcs11:token=<label>;object=<key label>`` (RFC 7512) or ``command:<program> [args]``.

    Raises:
        InvalidInputError: an unknown scheme or a malformed URI, or the provider's optional
            dependency (boto3 for ``aws-kms``, python-pkcs11 for ``pkcs11``) is not installed.
    """
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme not in SCHEMES or not rest.strip():
        raise InvalidInputError(
            "Error: Not a key provider URI (use aws-kms:<key id, ARN or alias/name>, "
            "pkcs11:token=<label>;object=<key label> or command:<program> [args])."
        )
    if scheme == "command":
        from .command import CommandProvider

        return CommandProvider(uri)
    if scheme == "pkcs11":
        try:
            from .hsm import HsmProvider
        except ImportError:
            raise InvalidInputError(
                "Error: pkcs11: keys need python-pkcs11: install memvault with the pkcs11 extra "
                "(pip install 'memvault[pkcs11]')."
            ) from None
        return HsmProvider(uri)
    try:
        from .kms import KmsProvider
    except ImportError:
        raise InvalidInputError(
            "Error: aws-kms: keys need boto3: install memvault with the kms extra (pip install 'memvault[kms]')."
        ) from None
    return KmsProvider(uri)
