"""The ``command:`` key provider: a helper program wraps and unwraps slot keys, so any key service
(HashiCorp Vault transit, Google Cloud KMS, Azure Key Vault, an HSM) can guard a store without
memvault knowing it. This module is the one place where the library runs a subprocess.

URI: ``command:<program> [args]``. The text after ``command:`` is split with :func:`shlex.split`
(POSIX quoting, no expansion); the program runs without a shell (found on ``PATH`` when it has no
``/``), with memvault's environment and working directory. The URI is recorded in the key slot as
written. Error messages name the program (its file name) but never show its arguments, which may
hold tokens; best effort, the helper's own error text is shown with any argument of 6 or more
characters and the key it was sent replaced by ``[redacted]``. A URI that matches no key slot is
told how it differs from the slots' (:func:`difference`: option names and words under 6 characters
at most).

Helper protocol, version 1 (the contract a helper implements):

- memvault runs the program once per wrap or unwrap, writes one JSON object (UTF-8) to its standard
  input, closes it, and reads its standard output to the end. Byte strings are base64 (RFC 4648
  standard alphabet, with padding).
- Wrap request::

      {"version": 1, "op": "wrap", "context": {"memvault:store": "<hex>", "memvault:slot": "<hex>"},
       "key": "<base64 of the 32-byte key>"}

  Unwrap request::

      {"version": 1, "op": "unwrap", "context": {...}, "wrapped": "<base64 of what wrap returned>"}

  ``context`` maps strings to strings. The helper must bind a wrap to it (as AEAD associated data,
  a KMS encryption context, ...): an unwrap with another context than the wrap's must fail. A
  helper ignores request fields it does not know (later versions may add some).
- Success: exit status 0 and one JSON object on standard output, ``{"version": 1, "wrapped":
  "<base64>"}`` for a wrap (opaque to memvault, at least 1 byte) or ``{"version": 1, "key":
  "<base64>"}`` for an unwrap (exactly 32 bytes). Other fields are ignored.
- Failure: a non-zero exit status, ideally with ``{"version": 1, "error": "<message>"}`` on
  standard output; without one, the first line of standard error is shown instead. The message is
  shown to the user (first line, up to 200 printable characters), so it must never hold key material.
  An answer with an ``error`` field is a failure whatever the exit status.
- Limits: standard output at most 64 KiB (the helper is stopped beyond that); the whole exchange
  within ``$MEMVAULT_KEY_COMMAND_TIMEOUT`` seconds (default 30), after which the helper is killed.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import math
import os
import re
import selectors
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidInputError, ProviderError

__all__ = ["CommandProvider", "PROTOCOL_VERSION", "MAX_OUTPUT", "DEFAULT_TIMEOUT", "KEY_SIZE", "difference"]

PROTOCOL_VERSION: Final = 1
#: Length of the keys the helper wraps and unwraps (a slot key).
KEY_SIZE: Final = 32
#: Most bytes of standard output read from a helper.
MAX_OUTPUT: Final = 64 * 1024
#: Seconds a helper has to answer unless ``$MEMVAULT_KEY_COMMAND_TIMEOUT`` says otherwise.
DEFAULT_TIMEOUT: Final = 30.0
#: Longest helper message shown, in characters.
_MESSAGE_CHARS: Final = 200
#: Arguments at least this long are taken out of the helper's messages.
_SECRET_ARG_CHARS: Final = 6
_CHUNK: Final = 4096  # at most PIPE_BUF: a write to a pipe select() calls writable does not block


#: An option's name (``-v``, ``--key-id``, the part of ``--key-id=...`` before ``=``): shown.
_OPTION = re.compile(r"--?[A-Za-z][A-Za-z0-9_-]{0,39}")
#: Differing arguments named in a message, at most.
_SHOWN_DIFFERENCES: Final = 3


class _Timeout(Exception):
    pass


class _TooLong(Exception):
    pass


def timeout_seconds() -> float:
    """The helper timeout: ``$MEMVAULT_KEY_COMMAND_TIMEOUT`` seconds, else :data:`DEFAULT_TIMEOUT`.

    Raises:
        InvalidInputError: the variable is set but not a number of seconds above 0.
    """
    raw = os.environ.get("MEMVAULT_KEY_COMMAND_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError("MEMVAULT_KEY_COMMAND_TIMEOUT must be a number of seconds greater than 0.")
    return value


def difference(given: str, recorded: str) -> str:
    """How the command line of the ``command:`` URI ``given`` differs from ``recorded`` (a key
    slot's), for a message: the programs where they differ, the number of arguments, and which
    arguments differ, are missing or are extra (numbered from 1 after the program). An argument
    itself is shown only when it cannot hold a secret: an option's name (``--key-id``; of
    ``--key-id=VALUE`` the name only), or a word shorter than 6 characters, as the helper's own
    messages are cleaned.

    Returns:
        A clause such as ``"the same program; argument 2 is '-v' where you gave '-q'"``, or ""
        when either URI is not a ``command:`` URI that splits.
    """
    if given.partition(":")[0] != "command" or recorded.partition(":")[0] != "command":
        return ""
    try:
        mine, theirs = (shlex.split(uri.partition(":")[2]) for uri in (given, recorded))
    except ValueError:
        return ""
    if not mine or not theirs:
        return ""
    if mine == theirs:
        return "the same program and arguments written otherwise (spacing or quoting): give the URI as the slot has it"
    programs = [os.path.basename(p.rstrip("/")) or p for p in (theirs[0], mine[0])]
    if programs[0] == programs[1]:  # the same file name in other directories: the paths tell them apart
        programs = [theirs[0], mine[0]]
    parts = ["the same program" if mine[0] == theirs[0] else f"program {programs[0]!r} where you gave {programs[1]!r}"]
    if len(mine) != len(theirs):
        parts.append(f"{_count(len(theirs) - 1)} where you gave {len(mine) - 1}")
    told: list[str] = []
    matcher = difflib.SequenceMatcher(None, theirs[1:], mine[1:], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "replace" and i2 - i1 == j2 - j1:
            told += [_replaced(i1 + k + 1, theirs[i1 + k + 1], mine[j1 + k + 1]) for k in range(i2 - i1)]
            continue
        if tag in ("replace", "delete"):
            told += [
                f"argument {i + 1} of the slot's ({_in_brackets(theirs[i + 1])}) is missing" for i in range(i1, i2)
            ]
        if tag in ("replace", "insert"):
            told += [f"your argument {j + 1} ({_in_brackets(mine[j + 1])}) is extra" for j in range(j1, j2)]
    parts += told[:_SHOWN_DIFFERENCES]
    if len(told) > _SHOWN_DIFFERENCES:
        parts.append(f"{len(told) - _SHOWN_DIFFERENCES} more difference(s)")
    return "; ".join(parts)


def _replaced(n: int, slot_has: str, you_gave: str) -> str:
    shown = _shown_arg(slot_has), _shown_arg(you_gave)
    if shown == (None, None):
        return f"argument {n} differs (neither is shown: they may hold secrets)"
    if shown[0] == shown[1]:  # an option's value
        return f"argument {n} differs in its value ({shown[0]})"
    return f"argument {n} is {_shown_or_not(slot_has)} where you gave {_shown_or_not(you_gave)}"


def _shown_or_not(arg: str) -> str:
    return _shown_arg(arg) or "one not shown (it may hold a secret)"


def _in_brackets(arg: str) -> str:
    return _shown_arg(arg) or "not shown: it may hold a secret"


def _count(n: int) -> str:
    return f"{n} argument{'' if n == 1 else 's'}"


def _shown_arg(arg: str) -> str | None:
    """An argument as :func:`difference` shows it; None where it may hold a secret."""
    name, eq, _value = arg.partition("=")
    if _OPTION.fullmatch(name):
        return repr(name + "=...") if eq else repr(name)
    if len(arg) < _SECRET_ARG_CHARS and arg.isprintable():
        return repr(arg)
    return None


class CommandProvider:
    """Wraps slot keys by running a helper program (the protocol is in the module docstring).

    Args:
        uri: ``command:<program> [args]``.

    Raises:
        InvalidInputError: the URI is not a ``command:`` URI naming a program, or its quoting is
            unbalanced (the message does not repeat the URI: its arguments may hold secrets).
    """

    def __init__(self, uri: str) -> None:
        scheme, _, rest = uri.partition(":")
        if scheme != "command":
            raise InvalidInputError("Error: Not a command: key provider URI (use command:<program> [args]).")
        try:
            argv = shlex.split(rest)
        except ValueError:
            raise InvalidInputError("Error: The command: key provider URI has an unbalanced quote.") from None
        if not argv or not argv[0]:
            raise InvalidInputError("Error: The command: key provider URI names no program (command:<program> [args]).")
        self.uri = uri
        self.argv: tuple[str, ...] = tuple(argv)
        #: The program's file name, the only part of the command line error messages show.
        self.program = os.path.basename(argv[0].rstrip("/")) or argv[0]

    def wrap(self, key: bytes, context: Mapping[str, str]) -> bytes:
        """Have the helper wrap ``key`` for ``context``.

        Args:
            key: the 32-byte key.
            context: the binding context (:func:`~memvault.keys.provider.binding_context`).

        Returns:
            The helper's wrapped key (opaque bytes).

        Raises:
            ProviderError: the helper could not be run, failed, timed out or answered out of protocol.
            InvalidInputError: ``$MEMVAULT_KEY_COMMAND_TIMEOUT`` is malformed.
            ValueError: ``key`` is not 32 bytes.
        """
        if len(key) != KEY_SIZE:
            raise ValueError(f"a slot key is {KEY_SIZE} bytes")
        key_b64 = base64.b64encode(key).decode("ascii")
        answer = self._exchange("wrap", {"key": key_b64}, context, secret=key_b64)
        wrapped = self._bytes_field(answer, "wrapped", "wrap")
        if not wrapped:
            raise ProviderError(self._message("wrap", "it returned an empty wrapped key"))
        return wrapped

    def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        """Have the helper unwrap ``wrapped`` for ``context``.

        Args:
            wrapped: what :meth:`wrap` returned.
            context: the binding context it was wrapped with.

        Returns:
            The 32-byte key. (A helper that answers with another 32-byte key cannot be caught here;
            the slot's authenticated encryption catches it.)

        Raises:
            ProviderError: as for :meth:`wrap`, or the helper returned a key of another length.
            InvalidInputError: ``$MEMVAULT_KEY_COMMAND_TIMEOUT`` is malformed.
        """
        answer = self._exchange("unwrap", {"wrapped": base64.b64encode(wrapped).decode("ascii")}, context, secret="")
        key = self._bytes_field(answer, "key", "unwrap")
        if len(key) != KEY_SIZE:
            raise ProviderError(self._message("unwrap", f"it returned a key of {len(key)} bytes, not {KEY_SIZE}"))
        return key

    def _message(self, action: str, reason: str) -> str:
        return f"Key provider command {self.program!r} (arguments not shown) could not {action} the key: {reason}."

    def _exchange(self, op: str, fields: dict[str, str], context: Mapping[str, str], *, secret: str) -> dict[str, Any]:
        """Run the helper with one request; its answer, checked for protocol version and errors."""
        timeout = timeout_seconds()
        request = {"version": PROTOCOL_VERSION, "op": op, "context": dict(context), **fields}
        try:
            status, out, err = _run(self.argv, json.dumps(request).encode(), timeout)
        except FileNotFoundError:
            raise ProviderError(self._message(op, "the program was not found")) from None
        except PermissionError:
            raise ProviderError(self._message(op, "the program is not executable (permission denied)")) from None
        except OSError as exc:
            raise ProviderError(self._message(op, f"the program could not be started ({exc.strerror})")) from None
        except _Timeout:
            raise ProviderError(
                self._message(op, f"it did not answer within {timeout:g} seconds (MEMVAULT_KEY_COMMAND_TIMEOUT)")
            ) from None
        except _TooLong:
            raise ProviderError(self._message(op, f"its output exceeds {MAX_OUTPUT // 1024} KiB")) from None
        hidden = [secret, *(a for a in self.argv[1:] if len(a) >= _SECRET_ARG_CHARS)]
        answer = _parse(out)
        said = answer.get("error") if answer is not None else None
        if status != 0:
            detail = _shown(said if isinstance(said, str) else err.decode("utf-8", "replace"), hidden)
            how = f"it exited with status {status}" if status > 0 else f"it was killed by signal {-status}"
            raise ProviderError(self._message(op, f"{how}: {detail}" if detail else how))
        if answer is None:
            what = "it printed nothing" if not out.strip() else "its output is not one JSON object"
            raise ProviderError(self._message(op, what))
        if said is not None:
            detail = _shown(said if isinstance(said, str) else "", hidden)
            reason = f"it reported an error: {detail}" if detail else "it reported an error"
            raise ProviderError(self._message(op, reason))
        version = answer.get("version")
        if version != PROTOCOL_VERSION or isinstance(version, bool):
            shown = _shown(json.dumps(version), [])
            raise ProviderError(self._message(op, f"it answered protocol version {shown}, not {PROTOCOL_VERSION}"))
        return answer

    def _bytes_field(self, answer: Mapping[str, Any], name: str, op: str) -> bytes:
        """The bytes of the answer's base64 field ``name``."""
        value = answer.get(name)
        try:
            if isinstance(value, str):
                return base64.b64decode(value.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error):
            pass
        raise ProviderError(self._message(op, f"its answer has no base64 {name!r} field"))


def _parse(out: bytes) -> dict[str, Any] | None:
    """The JSON object ``out`` holds; None if it holds anything else."""
    try:
        value = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _shown(text: str, hidden: Sequence[str]) -> str:
    """The first non-blank line of a helper's message, without ``hidden`` strings, in at most
    200 printable characters."""
    for secret in hidden:
        if secret:
            text = text.replace(secret, "[redacted]")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = "".join(c if c.isprintable() else "?" for c in line)
    return line if len(line) <= _MESSAGE_CHARS else line[: _MESSAGE_CHARS - 3] + "..."


def _run(argv: Sequence[str], request: bytes, timeout: float) -> tuple[int, bytes, bytes]:
    """Run ``argv`` without a shell, ``request`` on its standard input; ``(exit status, stdout, first
    64 KiB of stderr)``. The helper is killed if it outlasts ``timeout`` or floods its output.

    Raises:
        OSError: the program could not be started.
        _Timeout: no end of output and exit within ``timeout`` seconds.
        _TooLong: more than :data:`MAX_OUTPUT` bytes on standard output.
    """
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = _communicate(proc, request, deadline)
        try:
            status = proc.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            raise _Timeout from None
        return status, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _communicate(proc: subprocess.Popen[bytes], request: bytes, deadline: float) -> tuple[bytes, bytes]:
    """Write ``request`` to the helper and read its output to the end, bounded in time and size."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    pending = memoryview(request)
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdin, selectors.EVENT_WRITE)
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Timeout
            for ready, _events in sel.select(left):
                pipe = ready.fileobj
                if pipe is proc.stdin:
                    try:
                        pending = pending[os.write(ready.fd, pending[:_CHUNK]) :]
                    except BrokenPipeError:  # the helper stopped reading: its exit status says why
                        pending = pending[len(pending) :]
                    if not pending:
                        sel.unregister(pipe)
                        proc.stdin.close()
                    continue
                chunk = os.read(ready.fd, 32768)
                if not chunk:
                    sel.unregister(pipe)
                elif pipe is proc.stdout:
                    out += chunk
                    if len(out) > MAX_OUTPUT:
                        raise _TooLong
                elif len(err) < MAX_OUTPUT:
                    err += chunk[: MAX_OUTPUT - len(err)]
    return bytes(out), bytes(err)
