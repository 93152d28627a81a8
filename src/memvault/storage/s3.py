"""The storage seam on an S3 (or S3-compatible) bucket: conditional PUTs for create and swap, retried
by memvault itself, with every uncertain write resolved by reading the object back.

This module is the only one that imports ``boto3`` and ``botocore``.
"""

from __future__ import annotations

import collections
import enum
import functools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

import boto3  # type: ignore[import-untyped,import-not-found,unused-ignore]
import botocore.config  # type: ignore[import-untyped,import-not-found,unused-ignore]
import botocore.exceptions as bexc  # type: ignore[import-untyped,import-not-found,unused-ignore]

from ..errors import ServiceError
from .base import ObjectInfo, check_key

__all__ = ["S3Objects"]

_T = TypeVar("_T")

#: S3 error codes worth another attempt (throttling, transient server trouble, a conflicting
#: concurrent conditional write).
_RETRY_CODES: Final = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequests",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "ConditionalRequestConflict",
        "OperationAborted",
    }
)
_RETRY_STATUS: Final = frozenset({429, 500, 502, 503, 504})
#: Error codes of a missing object (``HEAD`` answers carry the bare status as the code).
_MISSING: Final = frozenset({"NoSuchKey", "404", "NotFound"})
#: Connection failures after which the request may have reached S3 (and may still be in flight).
_AFTER_SENDING: Final = (
    bexc.ReadTimeoutError,
    bexc.ConnectionClosedError,
    bexc.ResponseStreamingError,
    bexc.IncompleteReadError,
    bexc.SSLError,
)
#: Connection failures before anything was sent.
_BEFORE_SENDING: Final = (bexc.EndpointConnectionError, bexc.ConnectTimeoutError, bexc.ProxyConnectionError)
_ERRORS: Final = (bexc.ClientError, bexc.BotoCoreError)

_RNG = random.SystemRandom()


class _Outcome(enum.Enum):
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class _Failure:
    """One failed attempt, classified."""

    reason: str  # "HTTP 503 SlowDown" or a botocore error class name: never the service's text
    code: str  # the S3 error code ("" for a connection failure)
    status: int  # the HTTP status (0 for a connection failure)
    retryable: bool
    sent: bool  # the request may have taken effect
    pending: bool  # ...and no answer came, so it may still take effect later


def _classify(err: Exception) -> _Failure:
    if isinstance(err, bexc.ClientError):
        code = str(err.response.get("Error", {}).get("Code", ""))
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        retryable = status in _RETRY_STATUS or code in _RETRY_CODES
        return _Failure(f"HTTP {status} {code}".strip(), code, status, retryable, status >= 500, False)
    name = type(err).__name__
    if isinstance(err, _AFTER_SENDING):
        return _Failure(name, "", 0, True, True, True)
    if isinstance(err, _BEFORE_SENDING):
        return _Failure(name, "", 0, True, False, False)
    if isinstance(err, bexc.HTTPClientError):  # another failure of the HTTP exchange: assume it was sent
        return _Failure(name, "", 0, True, True, True)
    return _Failure(name, "", 0, False, False, False)  # credentials, configuration, parameters


def _code(err: Exception) -> str:
    if isinstance(err, bexc.ClientError):
        return str(err.response.get("Error", {}).get("Code", ""))
    return ""


class S3Objects:
    """Objects under ``prefix`` in an S3 bucket, through a client from the standard AWS
    configuration (environment, profiles, instance roles; ``AWS_ENDPOINT_URL`` for a compatible
    service). Safe to share between threads.

    Args:
        bucket: the bucket.
        prefix: the key prefix inside it, without a trailing ``/`` ("" for the bucket's root).
        client: an S3 client to use instead (its own retries should be off).
        attempts: attempts per operation before giving up.
        backoff: first delay between attempts, in seconds (doubled each time, fully jittered).
        max_backoff: longest delay between attempts.
        connect_timeout: seconds to wait for a connection.
        read_timeout: seconds to wait for an answer.

    Raises:
        ServiceError: the AWS configuration is unusable (an unknown profile, say).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        client: Any = None,
        attempts: int = 6,
        backoff: float = 0.05,
        max_backoff: float = 2.0,
        connect_timeout: float = 5,
        read_timeout: float = 20,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.description = f"S3 bucket {bucket}"
        #: Objects per ListObjectsV2 page (tests set it low to exercise paging).
        self.page_size = 1000
        #: HTTP requests sent, by S3 operation ("PutObject"), retries included.
        self.requests: collections.Counter[str] = collections.Counter()
        self._root = f"{self.prefix}/" if self.prefix else ""
        self._attempts = max(1, attempts)
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._lock = threading.Lock()
        if client is None:
            config = botocore.config.Config(
                retries={"total_max_attempts": 1},  # memvault retries, resolving uncertain writes first
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                max_pool_connections=32,
            )
            try:
                client = boto3.session.Session().client("s3", config=config)
            except (bexc.BotoCoreError, ValueError) as err:  # an unknown profile, a malformed endpoint URL
                raise ServiceError(self.description, "set up its client", type(err).__name__) from None
        self._client: Any = client
        self._client.meta.events.register("before-send.s3", self._count)

    def _count(self, event_name: str = "", **_: Any) -> None:
        with self._lock:
            self.requests[event_name.rpartition(".")[2]] += 1

    def _full(self, key: str) -> str:
        return self._root + check_key(key)

    def _pause(self, attempt: int) -> None:
        time.sleep(_RNG.uniform(0, min(self._max_backoff, self._backoff * 2 ** (attempt - 1))))

    def _error(self, action: str, failure: _Failure, attempts: int, *, outcome_unknown: bool = False) -> ServiceError:
        reason = failure.reason if attempts == 1 else f"{failure.reason} after {attempts} attempts"
        if failure.code == "NoSuchBucket":  # memvault makes no bucket: say where one comes from
            reason += (
                f": the bucket does not exist; create it first (aws s3 mb s3://{self.bucket}, or in the S3 console),"
                " memvault does not create buckets"
            )
        return ServiceError(self.description, action, reason, outcome_unknown=outcome_unknown)

    def _retrying(self, action: str, call: Callable[[], _T], *, write: bool = False) -> _T:
        """``call()``, attempted again after transient failures."""
        sent = False
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except _ERRORS as err:
                failure = _classify(err)
            sent = sent or failure.sent
            if not failure.retryable or attempt >= self._attempts:
                raise self._error(action, failure, attempt, outcome_unknown=write and sent)
            self._pause(attempt)

    def create(self, key: str, data: bytes) -> str | None:
        """Write ``data`` at ``key`` only if no object is there (``If-None-Match: *``).

        Returns:
            The new object's ETag if this call created it, or an earlier attempt of it did (its
            bytes are there); None if another object was there first.

        Raises:
            ServiceError: S3 refused or kept failing; ``outcome_unknown`` if a write may still land.
        """
        return self._write(key, data, None, "create")

    def get(self, key: str) -> bytes | None:
        """The object at ``key``, or None if there is none.

        Raises:
            ServiceError: S3 refused or kept failing.
        """
        found = self.get_tagged(key)
        return None if found is None else found[0]

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        """The object at ``key`` and its ETag, or None if there is none.

        Raises:
            ServiceError: S3 refused or kept failing.
        """
        full = self._full(key)

        def once() -> tuple[bytes, str] | None:
            try:
                reply = self._client.get_object(Bucket=self.bucket, Key=full)
            except bexc.ClientError as err:
                if _code(err) in _MISSING:
                    return None
                raise
            body = reply["Body"]
            try:
                data = body.read()
            finally:
                body.close()
            return bytes(data), str(reply["ETag"])

        return self._retrying(f"read {key}", once)

    def list(self, prefix: str, *, start_after: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix`` and sorts after ``start_after``, in
        ascending byte order of key, following every page (``folder/`` marker objects are skipped).

        Raises:
            ServiceError: S3 refused or kept failing.
        """
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self._root + prefix, "MaxKeys": self.page_size}
        if start_after:
            args["StartAfter"] = self._root + start_after
        out: list[ObjectInfo] = []
        while True:
            page = self._retrying(f"list {prefix or '/'}", functools.partial(self._client.list_objects_v2, **args))
            for item in page.get("Contents", []):
                key = str(item["Key"])[len(self._root) :]
                if key and not key.endswith("/"):
                    out.append(ObjectInfo(key, int(item["Size"]), str(item["ETag"])))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
            args["ContinuationToken"] = token
        out.sort(key=lambda info: info.key.encode())
        return out

    def delete(self, key: str) -> None:
        """Remove the object at ``key`` (no error if it is absent).

        Raises:
            ServiceError: S3 refused or kept failing; ``outcome_unknown`` if a delete may have landed.
        """
        full = self._full(key)
        self._retrying(f"delete {key}", lambda: self._client.delete_object(Bucket=self.bucket, Key=full), write=True)

    def swap(self, key: str, data: bytes, expected: str | None) -> str | None:
        """Replace the object at ``key`` if its ETag is ``expected`` (``If-Match``; None: only if it
        is absent, ``If-None-Match: *``).

        Returns:
            The new ETag, or None if the object had another tag (or none, for an ``expected`` tag).

        Raises:
            ServiceError: S3 refused or kept failing; ``outcome_unknown`` if a write may still land.
        """
        return self._write(key, data, expected, "replace")

    def versioning(self) -> str | None:
        """The bucket's versioning status: ``"Enabled"``, ``"Suspended"`` or None (never enabled,
        and also when the caller may not read it: AccessDenied).

        Raises:
            ServiceError: S3 refused for another reason or kept failing.
        """

        def once() -> str | None:
            try:
                reply = self._client.get_bucket_versioning(Bucket=self.bucket)
            except bexc.ClientError as err:
                if _code(err) == "AccessDenied":
                    return None
                raise
            status = reply.get("Status")
            return status if status in ("Enabled", "Suspended") else None

        return self._retrying("read its versioning status", once)

    def _write(self, key: str, data: bytes, expected: str | None, verb: str) -> str | None:
        """One conditional PUT, attempted again after transient failures; the new ETag, or None
        if the condition failed for another writer's object."""
        full = self._full(key)
        action = f"{verb} {key}"
        condition = {"IfNoneMatch": "*"} if expected is None else {"IfMatch": expected}
        sent = pending = False  # an earlier attempt may have landed / may still land
        attempt = 0
        while True:
            attempt += 1
            try:
                reply = self._client.put_object(Bucket=self.bucket, Key=full, Body=data, **condition)
                return str(reply["ETag"])
            except _ERRORS as err:
                failure = _classify(err)
            if failure.status == 412 or (expected is not None and failure.code in _MISSING):
                if not sent:
                    return None
                outcome = self._settle(key, data, expected, action, failure)
            elif failure.sent:
                sent = True
                pending = pending or failure.pending
                outcome = self._settle(key, data, expected, action, failure) if failure.pending else _Outcome.UNCHANGED
            elif failure.retryable:
                outcome = _Outcome.UNCHANGED
            else:
                break
            if outcome is not _Outcome.UNCHANGED:
                return outcome
            if attempt >= self._attempts:
                break
            self._pause(attempt)
        if sent and not failure.pending:  # a 5xx answer: did it land after all?
            outcome = self._settle(key, data, expected, action, failure)
            if outcome is not _Outcome.UNCHANGED:
                return outcome
        raise self._error(action, failure, attempt, outcome_unknown=pending)

    def _settle(
        self, key: str, data: bytes, expected: str | None, action: str, failure: _Failure
    ) -> str | None | Literal[_Outcome.UNCHANGED]:
        """Read ``key`` back after an uncertain write: its ETag if it holds ``data``; UNCHANGED
        if it still has the ``expected`` tag (the write did not land); None if another writer's."""
        try:
            current = self.get_tagged(key)
        except ServiceError as err:
            raise ServiceError(
                self.description,
                action,
                f"{failure.reason}, then reading it back failed ({err.reason})",
                outcome_unknown=True,
            ) from None
        if current is not None and current[0] == data:
            return current[1]
        if (None if current is None else current[1]) == expected:
            return _Outcome.UNCHANGED
        return None
