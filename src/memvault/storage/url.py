"""Store addresses: a plain path is an embedded local store; ``s3://bucket/prefix`` a store in an
S3-compatible bucket; ``file:///path`` a directory holding a store's objects in the same layout
(for a shared filesystem)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError
from .base import ObjectStore

__all__ = ["StoreURL", "is_remote", "parse_url", "open_backend"]

_SCHEME = re.compile(r"\A([a-z][a-z0-9+.-]*)://")
#: S3 bucket names (the rules shared by AWS and the compatible services).
_BUCKET = re.compile(r"\A[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_PREFIX_PART = re.compile(r"\A[A-Za-z0-9._-]+\Z")


@dataclass(frozen=True)
class StoreURL:
    """A parsed remote store address."""

    scheme: str
    #: The bucket (``s3``) or the directory (``file``).
    location: str
    #: The key prefix inside the bucket, without a trailing ``/`` ("" for the bucket's root).
    prefix: str

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file://{self.location}"
        return f"s3://{self.location}/{self.prefix}" if self.prefix else f"s3://{self.location}"


def is_remote(address: str | os.PathLike[str]) -> bool:
    """Whether ``address`` is a URL (``scheme://``) rather than a local path."""
    return isinstance(address, str) and _SCHEME.match(address) is not None


def parse_url(address: str) -> StoreURL:
    """Parse ``s3://bucket[/prefix]`` or ``file:///absolute/path``.

    Raises:
        InvalidInputError: another scheme, or a malformed bucket name or prefix.
    """
    match = _SCHEME.match(address)
    if match is None:
        raise InvalidInputError(f"Error: Not a store URL: {address!r}.")
    scheme, rest = match.group(1), address[match.end() :]
    if scheme == "file":
        if not rest.startswith("/"):
            raise InvalidInputError("Error: A file:// store URL needs an absolute path (file:///srv/memory).")
        return StoreURL("file", str(Path(rest)), "")
    if scheme != "s3":
        raise InvalidInputError(f"Error: Unknown store URL scheme {scheme!r} (use a path, s3:// or file://).")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise InvalidInputError(f"Error: {bucket!r} is not a valid S3 bucket name.")
    if prefix and not all(_PREFIX_PART.match(part) and part not in (".", "..") for part in prefix.split("/")):
        raise InvalidInputError(
            "Error: An S3 store prefix may hold only letters, digits, '.', '_' and '-' between '/' separators."
        )
    return StoreURL("s3", bucket, prefix)


def open_backend(url: StoreURL, *, durable: bool = True) -> ObjectStore:
    """The backend for ``url`` (the S3 one needs the ``memvault[s3]`` extra: boto3).

    Raises:
        InvalidInputError: boto3 is not installed for an ``s3://`` URL.
    """
    if url.scheme == "file":
        from .local import DirectoryObjects

        return DirectoryObjects(Path(url.location), durable=durable)
    try:
        from .s3 import S3Objects
    except ImportError:
        raise InvalidInputError(
            "Error: s3:// stores need boto3: install memvault with the s3 extra (pip install 'memvault[s3]')."
        ) from None
    return S3Objects(url.location, url.prefix)
