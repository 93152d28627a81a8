"""The one exception family of memvault, and the exit code of each member.

Every error memvault raises on purpose is a :class:`MemvaultError`. Its ``str()`` is the
message shown to Claude (as a tool error) or to a person (on the CLI), so it is written to be
safe to show: it never contains memory content the caller did not supply, another file's
content, a host path, or key material. Library misuse (wrong argument types in Python code)
raises the ordinary ``TypeError``/``ValueError`` instead and is not part of this family.
"""

from __future__ import annotations

import enum
import errno

__all__ = [
    "ExitStatus",
    "MemvaultError",
    "InvalidInputError",
    "InvalidPathError",
    "PathNotFoundError",
    "PathExistsError",
    "EditError",
    "LimitExceededError",
    "SensitiveDataError",
    "RedactedError",
    "ConflictError",
    "PreconditionFailedError",
    "PathConflictError",
    "NotFoundError",
    "PermissionDeniedError",
    "CommandError",
    "KeyRotatedError",
    "LockedError",
    "IntegrityError",
    "RollbackDetectedError",
    "LogBlockedError",
    "SettingsMismatchError",
    "StoreNotFoundError",
    "StoreExistsError",
    "UnlockError",
    "WrongKeyError",
    "KeyUnavailableError",
    "ProviderError",
    "InternalError",
    "StorageError",
    "ServiceError",
    "read_failure",
]


class ExitStatus(enum.IntEnum):
    """CLI exit codes: one table, shared by every command (10-12 match restic's)."""

    SUCCESS = 0
    ERROR = 1
    USAGE = 2
    INTEGRITY = 3
    REFUSED = 4
    CONFLICT = 5
    NO_STORE = 10
    LOCKED = 11
    NO_KEY = 12
    INTERRUPTED = 130


class MemvaultError(Exception):
    """Base of every deliberate memvault error. ``str(err)`` is safe to show the model."""

    exit_status: ExitStatus = ExitStatus.ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidInputError(MemvaultError):
    """The command itself is malformed: unknown command, missing or mistyped field."""

    exit_status = ExitStatus.USAGE


class InvalidPathError(MemvaultError):
    """A path broke the grammar in :mod:`memvault.paths`; nothing touched storage."""

    exit_status = ExitStatus.REFUSED


class PathNotFoundError(MemvaultError):
    """The path names no file (or no file or directory, depending on the command)."""

    exit_status = ExitStatus.REFUSED


class PathExistsError(MemvaultError):
    """The target of a create or rename exists, or collides with a sibling's name."""

    exit_status = ExitStatus.REFUSED


class EditError(MemvaultError):
    """A str_replace or insert could not be applied (no match, several matches, bad line)."""

    exit_status = ExitStatus.REFUSED


class LimitExceededError(MemvaultError):
    """A configured limit (file size, number of files, depth, path length) would be exceeded."""

    exit_status = ExitStatus.REFUSED


class SensitiveDataError(MemvaultError):
    """The scrubber policy rejects the write; the message names the kind, never the value."""

    exit_status = ExitStatus.REFUSED


class RedactedError(MemvaultError):
    """The requested version was redacted: its data key is destroyed, its content is gone."""

    exit_status = ExitStatus.REFUSED


class ConflictError(MemvaultError):
    """A concurrent writer changed what this command depended on."""

    exit_status = ExitStatus.CONFLICT


class PreconditionFailedError(ConflictError):
    """A write's precondition (the content's SHA-256 it expected) no longer holds: someone else
    changed the memory first. Nothing was written."""


class PathConflictError(PathExistsError):
    """A memory cannot take a path: it is taken, or a file lies above or below it (a path is a
    file or a directory, never both). ``memory_id`` names the memory in the way ("" when it is
    no memory of the API, such as a binary file), ``path`` its path (memory-stores form, ``/a/b``)."""

    exit_status = ExitStatus.CONFLICT

    def __init__(self, message: str, *, memory_id: str, path: str) -> None:
        super().__init__(message)
        self.memory_id = memory_id
        self.path = path


class NotFoundError(MemvaultError):
    """An id (a memory store, a memory, a version, an API key) names nothing here."""

    exit_status = ExitStatus.REFUSED


class PermissionDeniedError(MemvaultError):
    """The caller is known but may not do this (an API key without the right)."""

    exit_status = ExitStatus.REFUSED


class CommandError(MemvaultError):
    """A memory command run elsewhere (on a memvault server) failed; the message is the text the
    memory tool gives the model for it, as the local tool gives it."""

    exit_status = ExitStatus.REFUSED


class KeyRotatedError(ConflictError):
    """The master key was rotated by another process since this store object was opened: it
    cannot write data keys under the new key, and must not write them under the retired one."""


class LockedError(MemvaultError):
    """The store's write lock could not be taken in time (another writer held it throughout).

    ``waited`` is how long the caller waited, in seconds; nothing was written.
    """

    exit_status = ExitStatus.LOCKED

    def __init__(self, message: str, *, waited: float = 0.0) -> None:
        super().__init__(message)
        self.waited = waited


class IntegrityError(MemvaultError):
    """Authentication of stored data failed. One generic message; no partial plaintext."""

    exit_status = ExitStatus.INTEGRITY

    def __init__(self, message: str = "Memory store integrity check failed.") -> None:
        super().__init__(message)


class RollbackDetectedError(IntegrityError):
    """The branch points at an older commit than the store's high-water mark (or a fork)."""


class LogBlockedError(IntegrityError):
    """A store in object storage: the log holds an object no commit can be made past (not an
    authentic record, or one beyond a gap) and no void of it; what is committed can be read.
    ``seq`` is the commit number a key holder voids (``memvault repair-log --void SEQ``)."""

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class SettingsMismatchError(IntegrityError):
    """``memvault.json`` is not the settings file the history records as in force (an older copy
    put back, or a settings change that stopped between its two writes)."""


class StoreNotFoundError(MemvaultError):
    """No memvault store exists at the given location."""

    exit_status = ExitStatus.NO_STORE


class StoreExistsError(MemvaultError):
    """``create`` was asked to make a store where one (or other data) already exists."""

    exit_status = ExitStatus.REFUSED


class UnlockError(MemvaultError):
    """Base for failures to unlock a store: no key given, or the wrong one."""

    exit_status = ExitStatus.NO_KEY


class WrongKeyError(UnlockError):
    """The passphrase or key file unlocks no key slot of this store."""


class KeyUnavailableError(UnlockError):
    """No passphrase or key was given, or a key file is unreadable or malformed."""


class ProviderError(UnlockError):
    """A key provider (a KMS, an HSM, an external helper) could not wrap or unwrap a key: the key is
    disabled, deleted or denied, the token or helper is missing, failed or timed out, or it answered
    for another context. The message names the provider (and the slot, when unlocking) and the
    provider's own reason, never a key; it says nothing about the store's integrity.
    """


class InternalError(MemvaultError):
    """An unexpected failure, reported without details that could leak data."""

    def __init__(self, message: str = "Internal memory store error.") -> None:
        super().__init__(message)


class StorageError(InternalError):
    """The filesystem refused a write (no space, read-only, permission, I/O error).

    The message names the operating system's reason (``strerror``), never a host path or
    content. ``outcome_unknown`` is False when the store is known to be exactly as before the
    command; True in the rare case where undoing a half-done write failed too, so the command
    may still take effect (the message then says so).
    """

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        super().__init__(message)
        self.outcome_unknown = outcome_unknown

    @classmethod
    def from_os_error(
        cls, err: OSError, *, what: str = "The memory store", outcome_unknown: bool = False
    ) -> StorageError:
        reason = err.strerror or "I/O error"
        if outcome_unknown:
            return cls(
                f"{what} could not be written ({reason}); the command may or may not have been saved. "
                "View the file before retrying.",
                outcome_unknown=True,
            )
        return cls(f"{what} could not be written ({reason}).")

    @classmethod
    def from_read_error(cls, err: OSError, *, what: str) -> StorageError:
        """A read the filesystem refused for a reason that says nothing about the data (out of
        file descriptors, permission, I/O error): not an integrity failure."""
        return cls(f"{what} could not be read ({err.strerror or 'I/O error'}).")


class ServiceError(StorageError):
    """A storage or key service failed or could not be reached (S3, a KMS, a directory used as an
    object store), after retries. The message names the service, the operation and its reason (an
    HTTP status or error code), never credentials or content; it says nothing about the store's
    integrity. ``outcome_unknown`` as for :class:`StorageError`.
    """

    def __init__(self, service: str, action: str, reason: str, *, outcome_unknown: bool = False) -> None:
        tail = " The command may or may not have been saved." if outcome_unknown else ""
        super().__init__(f"{service} failed to {action}: {reason}.{tail}", outcome_unknown=outcome_unknown)
        self.service = service
        self.action = action
        self.reason = reason


#: errno values of a refused read that mean the path is not a file memvault wrote there (``None``:
#: a read of something that is not a regular file of bounded size, see ``fsutil.read_bounded``).
_NOT_OUR_FILE = (None, errno.EISDIR, errno.ELOOP, errno.ENOTDIR, errno.ENXIO)


def read_failure(err: OSError, *, what: str, damaged: str) -> MemvaultError:
    """What a refused read of one of the store's files means.

    Args:
        err: the error of the open or read.
        what: the file's role, for a storage error ("The store's keyring").
        damaged: the message when the path is not a file memvault wrote (a directory, a FIFO, a
            symbolic-link loop, an oversized file).

    Returns:
        :class:`IntegrityError` with ``damaged`` for those; otherwise (permission, I/O error, out
        of descriptors) a :class:`StorageError` naming ``what``: the storage's fault, which says
        nothing about the data.
    """
    if err.errno in _NOT_OUR_FILE:
        return IntegrityError(damaged)
    return StorageError.from_read_error(err, what=what)
