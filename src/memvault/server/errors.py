"""The API's errors: :class:`ApiError` (status, type, a message safe to show), the envelope an
error is answered with, and the mapping of memvault's own errors onto the API's types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

from ..errors import (
    ConflictError,
    EditError,
    IntegrityError,
    InvalidInputError,
    InvalidPathError,
    LimitExceededError,
    LockedError,
    MemvaultError,
    NotFoundError,
    PathConflictError,
    PathExistsError,
    PathNotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    RedactedError,
    SensitiveDataError,
    ServiceError,
    StorageError,
    UnlockError,
)

__all__ = ["ApiError", "bad_request", "from_memvault", "error_response"]

#: Statuses a client should not retry unchanged (``x-should-retry: false``).
_FINAL = frozenset({400, 401, 403, 404, 405, 409, 413, 422})


class ApiError(Exception):
    """An error answer: HTTP ``status``, the API's error ``type``, a message safe to show, and
    fields the error object carries beside them (``conflicting_memory_id``...)."""

    def __init__(
        self, status: int, type_: str, message: str, *, fields: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.fields = dict(fields or {})
        self.retry_after = retry_after


def bad_request(message: str) -> ApiError:
    """A 400 ``invalid_request_error``."""
    return ApiError(400, "invalid_request_error", message)


def _strip(message: str) -> str:
    return message[len("Error: ") :] if message.startswith("Error: ") else message


def from_memvault(err: MemvaultError) -> ApiError:
    """The API error for a memvault error (its message is safe to show, by contract)."""
    message = _strip(err.message)
    if isinstance(err, PathConflictError):
        return ApiError(409, "memory_path_conflict_error", message,
                        fields={"conflicting_memory_id": err.memory_id, "conflicting_path": err.path})  # fmt: skip
    if isinstance(err, PreconditionFailedError):
        return ApiError(409, "memory_precondition_failed_error", message)
    if isinstance(err, LockedError):
        return ApiError(503, "overloaded_error", "The memory store is busy; retry shortly.", retry_after=1)
    if isinstance(err, ConflictError):
        return ApiError(409, "conflict_error", message)
    if isinstance(err, (NotFoundError, PathNotFoundError)):
        return ApiError(404, "not_found_error", message)
    if isinstance(err, PermissionDeniedError):
        return ApiError(403, "permission_error", message)
    if isinstance(err, PathExistsError):
        return ApiError(409, "memory_path_conflict_error", message,
                        fields={"conflicting_memory_id": "", "conflicting_path": ""})  # fmt: skip
    if isinstance(err, (InvalidInputError, InvalidPathError, LimitExceededError, SensitiveDataError, EditError,
                        RedactedError)):  # fmt: skip
        return bad_request(message)
    if isinstance(err, ServiceError):
        return ApiError(503, "api_error", f"The storage service failed: {message}", retry_after=2)
    if isinstance(err, StorageError):
        return ApiError(500, "api_error", message)
    if isinstance(err, IntegrityError):
        return ApiError(500, "api_error", "The memory store failed its integrity check; an operator must look at it.")
    if isinstance(err, UnlockError):
        return ApiError(500, "api_error", "The server could not unlock the memory store.")
    return ApiError(500, "api_error", "Internal server error.")


def error_response(err: ApiError, request_id: str) -> JSONResponse:
    """The envelope of ``err`` with its headers."""
    body = {
        "type": "error",
        "error": {"type": err.type, "message": err.message, **err.fields},
        "request_id": request_id,
    }
    headers = {}
    if err.status in _FINAL:
        headers["x-should-retry"] = "false"
    if err.retry_after is not None:
        headers["retry-after"] = str(int(err.retry_after)) if err.retry_after >= 1 else "1"
        headers["retry-after-ms"] = str(int(err.retry_after * 1000))
    return JSONResponse(body, status_code=err.status, headers=headers)
