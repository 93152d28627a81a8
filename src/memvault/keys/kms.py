"""The ``aws-kms:`` key provider: AWS KMS Encrypt and Decrypt wrap a slot's key under a KMS key, with
the store and slot as the encryption context (so a wrapped key opens only the slot it was made for).

The URI is ``aws-kms:<key id | key ARN | alias/name | alias ARN>``. The client comes from the standard
AWS configuration (environment, profiles, instance roles; ``AWS_ENDPOINT_URL`` for another endpoint),
in the region of the key's ARN when the URI is an ARN. With ``storage/s3``, this is the only module
that imports ``boto3`` and ``botocore``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any, Final

import boto3  # type: ignore[import-untyped,import-not-found,unused-ignore]
import botocore.config  # type: ignore[import-untyped,import-not-found,unused-ignore]
import botocore.exceptions as bexc  # type: ignore[import-untyped,import-not-found,unused-ignore]

from ..errors import InvalidInputError, ProviderError

__all__ = ["KmsProvider", "KEY_SIZE"]

#: Length of the keys this provider wraps and unwraps (a slot key).
KEY_SIZE: Final = 32
#: Retries botocore makes after a failed request (throttling, a 5xx, a connection failure).
_RETRIES: Final = 3

#: What each KMS error code means for a slot key, in the words of the error message.
_MEANINGS: Final = {
    "DisabledException": "the KMS key is disabled",
    "KMSInvalidStateException": "the KMS key is pending deletion or otherwise unavailable in its current state",
    "NotFoundException": "no such KMS key or alias in this account and region",
    "AccessDeniedException": (
        "access denied: the AWS identity in use may not use this KMS key, or the wrapped key belongs to a KMS key "
        "it may not use"
    ),
    "InvalidCiphertextException": "the wrapped key does not belong to this store and slot, or was altered",
    "IncorrectKeyException": "the wrapped key was made with another KMS key than this slot names",
    "KeyUnavailableException": "the KMS key is unavailable (its key store is disconnected)",
    "InvalidKeyUsageException": "the KMS key is not a symmetric encryption key",
    "UnrecognizedClientException": "the AWS credentials are not valid",
    "InvalidSignatureException": "the AWS credentials are not valid",
    "ExpiredTokenException": "the AWS session credentials have expired",
    "ValidationException": "KMS rejected the request as malformed",
}
#: Connection failures: no answer from KMS.
_UNREACHABLE: Final = (bexc.HTTPClientError, bexc.ConnectionError)
#: Configuration failures before any request, and what each means.
_CONFIG: Final = (
    (bexc.NoCredentialsError, "no AWS credentials found (environment, profile, or instance role)"),
    (bexc.PartialCredentialsError, "the AWS credentials are incomplete"),
    (bexc.NoRegionError, "no AWS region configured (set AWS_REGION, or name the key by its ARN)"),
    (bexc.ProfileNotFound, "the AWS profile configured does not exist"),
)


#: KMS clients by region and the AWS environment they were made in (credentials, profile,
#: endpoint): a process opening many stores makes one.
_CLIENTS: dict[tuple[str | None, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()
_CLIENT_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_KMS",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)


def _region(key: str) -> str | None:
    """The region of a key or alias ARN (``arn:<partition>:kms:<region>:...``); None otherwise."""
    parts = key.split(":")
    if len(parts) >= 6 and parts[0] == "arn" and parts[2] == "kms" and parts[3]:
        return parts[3]
    return None


class KmsProvider:
    """Wraps slot keys with an AWS KMS key. Safe to share between threads.

    Args:
        uri: ``aws-kms:<key id | key ARN | alias/name | alias ARN>``.
        client: a KMS client to use instead of one from the AWS configuration (tests).

    Raises:
        InvalidInputError: the URI is not an ``aws-kms:`` URI naming a key.
    """

    def __init__(self, uri: str, *, client: Any = None) -> None:
        scheme, _, key = uri.partition(":")
        key = key.strip()
        if scheme != "aws-kms" or not key or any(c.isspace() for c in key):
            raise InvalidInputError(
                f"Error: Not an AWS KMS key provider URI: {uri!r} (use aws-kms:<key id, key ARN, alias/name or "
                "alias ARN>)."
            )
        self.uri = f"aws-kms:{key}"
        self.key_id = key
        self._client: Any = client
        self._lock = threading.Lock()

    def wrap(self, key: bytes, context: Mapping[str, str]) -> bytes:
        """Encrypt ``key`` under the KMS key, bound to ``context`` (the KMS encryption context).

        Args:
            key: the 32-byte key.
            context: the binding context (:func:`~memvault.keys.provider.binding_context`).

        Returns:
            The KMS ciphertext blob.

        Raises:
            ProviderError: KMS refused (disabled, deleted or unknown key, access denied), could not be
                reached, or the AWS configuration is unusable.
            ValueError: ``key`` is not 32 bytes.
        """
        if len(key) != KEY_SIZE:
            raise ValueError(f"a slot key is {KEY_SIZE} bytes")
        answer = self._call("wrap", "encrypt", KeyId=self.key_id, Plaintext=key, EncryptionContext=dict(context))
        blob = answer.get("CiphertextBlob")
        if not isinstance(blob, bytes) or not blob:
            raise ProviderError(f"Key provider {self.uri} could not wrap the key: KMS returned no ciphertext.")
        return blob

    def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        """Decrypt ``wrapped`` with the KMS key, if it was wrapped with ``context``.

        Args:
            wrapped: what :meth:`wrap` returned.
            context: the binding context it was wrapped with.

        Returns:
            The 32-byte key.

        Raises:
            ProviderError: as for :meth:`wrap`; also when the wrapped key belongs to another store,
                slot or KMS key, was altered, or does not hold a 32-byte key.
        """
        if not wrapped:
            raise ProviderError(f"Key provider {self.uri} could not unwrap the key: the wrapped key is empty.")
        answer = self._call(
            "unwrap", "decrypt", CiphertextBlob=bytes(wrapped), KeyId=self.key_id, EncryptionContext=dict(context)
        )
        plaintext = answer.get("Plaintext")
        if not isinstance(plaintext, bytes) or len(plaintext) != KEY_SIZE:
            size = len(plaintext) if isinstance(plaintext, bytes) else 0
            raise ProviderError(
                f"Key provider {self.uri} could not unwrap the key: KMS returned {size} bytes, "
                f"not a {KEY_SIZE}-byte key."
            )
        return plaintext

    def _kms(self) -> Any:
        """The KMS client, made on first use (so opening a provider needs no AWS configuration) and
        shared by every provider of this process with the same region and AWS environment (a new
        client costs tens of ms and, on AWS, a new TLS connection)."""
        with self._lock:
            if self._client is None:
                region = _region(self.key_id)
                key = (region, *(os.environ.get(name) for name in _CLIENT_ENV))
                with _CLIENTS_LOCK:
                    if key not in _CLIENTS:
                        config = botocore.config.Config(
                            retries={"mode": "standard", "max_attempts": _RETRIES},  # Encrypt, Decrypt may repeat
                            connect_timeout=5,
                            read_timeout=10,
                        )
                        _CLIENTS[key] = boto3.session.Session().client("kms", region_name=region, config=config)
                    self._client = _CLIENTS[key]
            return self._client

    def _call(self, action: str, operation: str, **params: Any) -> dict[str, Any]:
        """The client's ``operation`` with ``params``; every failure as a :class:`ProviderError` naming the URI."""
        try:
            answer: dict[str, Any] = getattr(self._kms(), operation)(**params)
        except bexc.ClientError as err:
            raise ProviderError(self._message(action, _client_reason(err))) from None
        except _UNREACHABLE as err:
            raise ProviderError(self._message(action, f"KMS unreachable ({type(err).__name__})")) from None
        except (bexc.BotoCoreError, ValueError) as err:  # configuration; a malformed endpoint URL
            raise ProviderError(self._message(action, _config_reason(err))) from None
        return answer

    def _message(self, action: str, reason: str) -> str:
        return f"Key provider {self.uri} could not {action} the key: {reason}."


def _client_reason(err: Any) -> str:
    """``KMS <code> (<meaning>)`` of a refused request; never the request's content."""
    error = err.response.get("Error", {})
    code = str(error.get("Code", "")) or "error"
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    meaning = _MEANINGS.get(code)
    if meaning is None:
        meaning = f"HTTP {status}" if status else "unexpected error"
        if isinstance(status, int) and (status >= 500 or "Throttl" in code):
            meaning += f", after {_RETRIES + 1} attempts"
    return f"KMS {code} ({meaning})"


def _config_reason(err: Exception) -> str:
    """What a failure before any request (credentials, region, profile, endpoint) means."""
    for kind, meaning in _CONFIG:
        if isinstance(err, kind):
            return f"AWS configuration: {meaning}"
    return f"AWS configuration: {type(err).__name__}"
