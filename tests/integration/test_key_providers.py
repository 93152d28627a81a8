"""The key providers of ``keys/kms`` and ``keys/command`` against a KMS and helper programs.

KMS: moto's server on loopback (the ``s3_endpoint`` fixture runs every moto service, KMS included)
models Encrypt and Decrypt with the encryption context as associated data, aliases, ARNs and
unknown keys. It does not refuse Encrypt or Decrypt with a disabled key or a key pending deletion
(``test_moto_does_not_refuse_a_disabled_key`` checks this, so a moto that starts to will say so),
and it answers a ciphertext of another key with AccessDeniedException where KMS says
IncorrectKeyException. For those errors the tests point ``AWS_ENDPOINT_URL`` at :class:`KmsStandIn`,
a local HTTP server answering KMS's JSON error shape.

command: the example helper ``examples/key_helper.py`` (AES-256-GCM, context as associated data),
and small helpers written to ``tmp_path`` that misbehave one way each.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shlex
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memvault.errors import InvalidInputError, ProviderError
from memvault.keys.command import CommandProvider
from memvault.keys.provider import binding_context, open_provider

EXAMPLE_HELPER = Path(__file__).resolve().parents[2] / "examples" / "key_helper.py"


@pytest.fixture
def context() -> dict[str, str]:
    return binding_context(secrets.token_bytes(16), secrets.token_bytes(16))


@pytest.fixture
def slot_key() -> bytes:
    return secrets.token_bytes(32)


def assert_no_key(message: str, key: bytes, *hidden: str) -> None:
    """``message`` shows neither ``key`` (raw, base64 or hex) nor any of ``hidden``."""
    for form in (base64.b64encode(key).decode(), key.hex(), key.decode("latin-1"), *hidden):
        assert form not in message


# --- AWS KMS ----------------------------------------------------------------------------------


@pytest.fixture
def kms(s3_env: Any) -> Any:
    """A KMS client straight to moto (``s3_env`` has pointed the AWS environment at moto too)."""
    import boto3

    return boto3.session.Session().client("kms", endpoint_url=s3_env.endpoint)


@pytest.fixture
def kms_key(kms: Any) -> dict[str, str]:
    """A fresh symmetric KMS key on moto: its id, ARN, an alias and the alias's ARN."""
    meta = kms.create_key(Description="memvault test")["KeyMetadata"]
    alias = f"alias/memvault-test-{secrets.token_hex(4)}"
    kms.create_alias(AliasName=alias, TargetKeyId=meta["KeyId"])
    alias_arn = meta["Arn"].split(":key/")[0] + ":" + alias
    return {"id": meta["KeyId"], "arn": meta["Arn"], "alias": alias, "alias_arn": alias_arn}


def kms_provider(key: str) -> Any:
    provider = open_provider(f"aws-kms:{key}")
    assert type(provider).__name__ == "KmsProvider"
    assert provider.uri == f"aws-kms:{key}"
    return provider


@pytest.mark.parametrize("name", ["alias", "id", "arn", "alias_arn"])
def test_kms_round_trip(kms_key: dict[str, str], name: str, context: dict[str, str], slot_key: bytes) -> None:
    provider = kms_provider(kms_key[name])
    wrapped = provider.wrap(slot_key, context)
    assert slot_key not in wrapped and len(wrapped) > len(slot_key)
    assert provider.unwrap(wrapped, context) == slot_key
    # the same KMS key named another way unwraps it too
    other = "id" if name != "id" else "alias"
    assert kms_provider(kms_key[other]).unwrap(wrapped, context) == slot_key


def test_kms_key_arn_brings_its_region(
    kms_key: dict[str, str], context: dict[str, str], slot_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.delenv("AWS_REGION", raising=False)
    provider = kms_provider(kms_key["arn"])
    assert provider.unwrap(provider.wrap(slot_key, context), context) == slot_key
    with pytest.raises(ProviderError) as err:
        kms_provider(kms_key["alias"]).wrap(slot_key, context)
    assert "no AWS region configured" in str(err.value)
    assert f"aws-kms:{kms_key['alias']}" in str(err.value)


def test_kms_unwrap_for_another_store_or_slot_fails(
    kms_key: dict[str, str], context: dict[str, str], slot_key: bytes
) -> None:
    provider = kms_provider(kms_key["alias"])
    wrapped = provider.wrap(slot_key, context)
    elsewhere = binding_context(bytes.fromhex(context["memvault:store"]), secrets.token_bytes(16))
    with pytest.raises(ProviderError) as err:
        provider.unwrap(wrapped, elsewhere)
    message = str(err.value)
    assert message == (
        f"Key provider aws-kms:{kms_key['alias']} could not unwrap the key: KMS InvalidCiphertextException "
        "(the wrapped key does not belong to this store and slot, or was altered)."
    )
    assert err.value.exit_status == 12
    assert_no_key(message, slot_key)
    altered = bytearray(wrapped)
    altered[-1] ^= 1
    with pytest.raises(ProviderError, match="InvalidCiphertextException"):
        provider.unwrap(bytes(altered), context)


def test_kms_unwrap_with_another_key_fails(
    kms: Any, kms_key: dict[str, str], context: dict[str, str], slot_key: bytes
) -> None:
    """moto answers AccessDeniedException here; KMS itself says IncorrectKeyException (see the
    stand-in tests): either is a ProviderError naming the code."""
    wrapped = kms_provider(kms_key["id"]).wrap(slot_key, context)
    other = kms.create_key()["KeyMetadata"]["KeyId"]
    with pytest.raises(ProviderError) as err:
        kms_provider(other).unwrap(wrapped, context)
    assert "KMS AccessDeniedException (access denied:" in str(err.value)
    assert_no_key(str(err.value), slot_key)


def test_kms_unknown_alias(kms_key: dict[str, str], context: dict[str, str], slot_key: bytes) -> None:
    with pytest.raises(ProviderError) as err:
        kms_provider("alias/memvault-no-such-alias").wrap(slot_key, context)
    assert str(err.value) == (
        "Key provider aws-kms:alias/memvault-no-such-alias could not wrap the key: KMS NotFoundException "
        "(no such KMS key or alias in this account and region)."
    )


def test_kms_without_credentials(
    kms_key: dict[str, str], context: dict[str, str], slot_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ProviderError) as err:
        kms_provider(kms_key["alias"]).wrap(slot_key, context)
    assert "AWS configuration: no AWS credentials found" in str(err.value)


def test_moto_does_not_refuse_a_disabled_key(
    kms: Any, kms_key: dict[str, str], context: dict[str, str], slot_key: bytes
) -> None:
    """Why the disabled-key tests use the stand-in: if moto starts refusing, move them to moto."""
    provider = kms_provider(kms_key["id"])
    wrapped = provider.wrap(slot_key, context)
    kms.disable_key(KeyId=kms_key["id"])
    assert provider.unwrap(wrapped, context) == slot_key
    kms.enable_key(KeyId=kms_key["id"])
    kms.schedule_key_deletion(KeyId=kms_key["id"], PendingWindowInDays=7)
    assert provider.unwrap(wrapped, context) == slot_key


class KmsStandIn:
    """A local HTTP server speaking just enough of KMS's JSON protocol to refuse every request with
    ``code`` (HTTP ``status``, the ``__type`` body and ``x-amzn-ErrorType`` header of KMS errors).
    ``requests`` holds ``(X-Amz-Target, JSON body)`` of each request received."""

    def __init__(self, code: str, status: int = 400) -> None:
        self.code = code
        self.status = status
        self.requests: list[tuple[str, dict[str, Any]]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                stand_in.requests.append((self.headers.get("X-Amz-Target", ""), json.loads(body)))
                answer = json.dumps({"__type": stand_in.code, "message": "refused by the stand-in"}).encode()
                self.send_response(stand_in.status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("x-amzn-ErrorType", f"{stand_in.code}:")
                self.send_header("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in(s3_env: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``make(code, status)``: a :class:`KmsStandIn` with ``AWS_ENDPOINT_URL`` pointing at it."""
    made: list[KmsStandIn] = []

    def make(code: str, status: int = 400) -> KmsStandIn:
        server = KmsStandIn(code, status)
        made.append(server)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        return server

    yield make
    for server in made:
        server.close()


@pytest.mark.parametrize(
    ("code", "meaning"),
    [
        ("DisabledException", "the KMS key is disabled"),
        ("KMSInvalidStateException", "the KMS key is pending deletion or otherwise unavailable"),
        ("AccessDeniedException", "access denied: the AWS identity in use may not use this KMS key"),
        ("IncorrectKeyException", "the wrapped key was made with another KMS key than this slot names"),
        ("KeyUnavailableException", "the KMS key is unavailable"),
    ],
)
@pytest.mark.parametrize("op", ["wrap", "unwrap"])
def test_kms_refusals(
    stand_in: Any, op: str, code: str, meaning: str, context: dict[str, str], slot_key: bytes
) -> None:
    server = stand_in(code)
    provider = kms_provider("alias/memvault-stand-in")
    wrapped = b"\x01" * 60
    with pytest.raises(ProviderError) as err:
        provider.wrap(slot_key, context) if op == "wrap" else provider.unwrap(wrapped, context)
    message = str(err.value)
    assert message.startswith(f"Key provider aws-kms:alias/memvault-stand-in could not {op} the key: KMS {code} (")
    assert meaning in message
    assert_no_key(message, slot_key, "refused by the stand-in")
    assert len(server.requests) == 1  # a refusal is not retried
    target, body = server.requests[0]
    assert body["KeyId"] == "alias/memvault-stand-in"
    assert body["EncryptionContext"] == context
    if op == "wrap":
        assert target == "TrentService.Encrypt"
        assert base64.b64decode(body["Plaintext"]) == slot_key
    else:
        assert target == "TrentService.Decrypt"
        assert base64.b64decode(body["CiphertextBlob"]) == wrapped


def test_kms_server_errors_are_retried(stand_in: Any, context: dict[str, str], slot_key: bytes) -> None:
    server = stand_in("KMSInternalException", 500)
    with pytest.raises(ProviderError) as err:
        kms_provider("alias/memvault-stand-in").wrap(slot_key, context)
    assert "KMS KMSInternalException (HTTP 500, after 4 attempts)" in str(err.value)
    assert len(server.requests) == 4  # botocore's max_attempts counts retries: 1 + 3


def test_kms_unreachable(
    s3_env: Any, monkeypatch: pytest.MonkeyPatch, context: dict[str, str], slot_key: bytes
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(ProviderError) as err:
        kms_provider("alias/memvault-test").unwrap(b"\x02" * 60, context)
    assert str(err.value) == (
        "Key provider aws-kms:alias/memvault-test could not unwrap the key: KMS unreachable (EndpointConnectionError)."
    )


def test_kms_uri_must_name_a_key() -> None:
    from memvault.keys.kms import KmsProvider

    for uri in ("aws-kms:", "aws-kms:alias/a b", "command:x"):
        with pytest.raises(InvalidInputError):
            KmsProvider(uri)


# --- command: helpers -------------------------------------------------------------------------


@pytest.fixture
def helper_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example helper's key file, named in ``$MEMVAULT_HELPER_KEY_FILE``."""
    path = tmp_path / "helper.key"
    path.write_bytes(secrets.token_bytes(32))
    monkeypatch.setenv("MEMVAULT_HELPER_KEY_FILE", str(path))
    return path


def command_uri(*argv: str | Path) -> str:
    return "command:" + shlex.join(str(a) for a in argv)


EXAMPLE_URI = command_uri(sys.executable, EXAMPLE_HELPER)


def write_helper(tmp_path: Path, body: str) -> Path:
    """A Python helper script: ``request`` is the parsed request, ``b64``/``answer`` helpers."""
    path = tmp_path / f"helper_{secrets.token_hex(3)}.py"
    path.write_text(
        "import base64, json, os, sys, time\n"
        "request = json.loads(sys.stdin.read() or 'null')\n"
        "def b64(data): return base64.b64encode(data).decode()\n"
        "def answer(obj, status=0):\n"
        "    sys.stdout.write(json.dumps(obj)); sys.stdout.flush(); sys.exit(status)\n" + body
    )
    return path


def test_example_helper_round_trip(helper_key: Path, context: dict[str, str], slot_key: bytes) -> None:
    provider = open_provider(EXAMPLE_URI)
    assert isinstance(provider, CommandProvider) and provider.uri == EXAMPLE_URI
    wrapped = provider.wrap(slot_key, context)
    assert len(wrapped) == 12 + 32 + 16 and slot_key not in wrapped
    assert provider.unwrap(wrapped, context) == slot_key
    assert os.access(EXAMPLE_HELPER, os.X_OK)
    assert EXAMPLE_HELPER.read_text().startswith("#!/usr/bin/env python3\n")


def test_example_helper_refuses_another_context_or_key(
    helper_key: Path, context: dict[str, str], slot_key: bytes
) -> None:
    provider = open_provider(EXAMPLE_URI)
    wrapped = provider.wrap(slot_key, context)
    elsewhere = binding_context(secrets.token_bytes(16), bytes.fromhex(context["memvault:slot"]))
    with pytest.raises(ProviderError) as err:
        provider.unwrap(wrapped, elsewhere)
    message = str(err.value)
    assert message.startswith(
        f"Key provider command {os.path.basename(sys.executable)!r} (arguments not shown) could not unwrap the key: "
        "it exited with status 1: the wrapped key does not open with this helper's key for this store and slot"
    )
    assert_no_key(message, slot_key, str(EXAMPLE_HELPER), "key_helper")
    helper_key.write_bytes(secrets.token_bytes(32))  # another operator key
    with pytest.raises(ProviderError, match="status 1: the wrapped key does not open"):
        provider.unwrap(wrapped, context)
    helper_key.write_bytes(b"short")
    with pytest.raises(ProviderError, match="must hold exactly 32 bytes"):
        provider.wrap(slot_key, context)


def test_helper_gets_the_documented_request(
    tmp_path: Path, context: dict[str, str], slot_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "requests.jsonl"
    helper = write_helper(
        tmp_path,
        "with open(sys.argv[1], 'a') as f: f.write(json.dumps([request, os.environ.get('MARK')]) + '\\n')\n"
        "if request['op'] == 'wrap': answer({'version': 1, 'wrapped': b64(b'W' + base64.b64decode(request['key']))})\n"
        "answer({'version': 1, 'key': b64(base64.b64decode(request['wrapped'])[1:]), 'extra': 'ignored'})\n",
    )
    monkeypatch.setenv("MARK", "inherited")
    provider = CommandProvider(command_uri(sys.executable, helper, log))
    wrapped = provider.wrap(slot_key, context)
    assert wrapped == b"W" + slot_key
    assert provider.unwrap(wrapped, context) == slot_key
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    key_b64 = base64.b64encode(slot_key).decode()
    assert lines == [
        [{"version": 1, "op": "wrap", "context": context, "key": key_b64}, "inherited"],
        [
            {"version": 1, "op": "unwrap", "context": context, "wrapped": base64.b64encode(wrapped).decode()},
            "inherited",
        ],
    ]


SECRET_ARG = "--token=s3cr3t-helper-token"

MISBEHAVING = {
    "crash": (
        "sys.stderr.write('vault: permission denied for ' + sys.argv[1] + '\\nsecond line\\n'); sys.exit(3)\n",
        "it exited with status 3: vault: permission denied for [redacted]",
    ),
    "error field": (
        "answer({'version': 1, 'error': 'vault is sealed'}, 2)\n",
        "it exited with status 2: vault is sealed",
    ),
    "error with exit 0": (
        "answer({'version': 1, 'error': 'no such transit key'})\n",
        "it reported an error: no such transit key",
    ),
    "long error": (
        "answer({'version': 1, 'error': 'x' * 5000 + '\\u0007'}, 1)\n",
        "it exited with status 1: " + "x" * 197 + "...",
    ),
    "killed": ("import signal; os.kill(os.getpid(), signal.SIGKILL)\n", "it was killed by signal 9"),
    "garbage": ("sys.stdout.write('hello, memvault'); sys.exit(0)\n", "its output is not one JSON object"),
    "a JSON list": ("answer([1, 2])\n", "its output is not one JSON object"),
    "nothing": ("sys.exit(0)\n", "it printed nothing"),
    "wrong version": (
        "answer({'version': 2, 'key': b64(bytes(32)), 'wrapped': 'AA=='})\n",
        "protocol version 2, not 1",
    ),
    "no version": ("answer({'key': b64(bytes(32)), 'wrapped': 'AA=='})\n", "protocol version null, not 1"),
    "missing field": ("answer({'version': 1})\n", "its answer has no base64 "),
    "not base64": ("answer({'version': 1, 'key': '!!', 'wrapped': '!!'})\n", "its answer has no base64 "),
    "flood": ("while True: sys.stdout.write('x' * 65536)\n", "its output exceeds 64 KiB"),
}


@pytest.mark.parametrize("case", sorted(MISBEHAVING))
@pytest.mark.parametrize("op", ["wrap", "unwrap"])
def test_misbehaving_helpers(tmp_path: Path, case: str, op: str, context: dict[str, str], slot_key: bytes) -> None:
    body, expected = MISBEHAVING[case]
    provider = CommandProvider(command_uri(sys.executable, write_helper(tmp_path, body), SECRET_ARG))
    with pytest.raises(ProviderError) as err:
        provider.wrap(slot_key, context) if op == "wrap" else provider.unwrap(b"wrapped-" + slot_key, context)
    message = str(err.value)
    assert message.startswith(
        f"Key provider command {os.path.basename(sys.executable)!r} (arguments not shown) could not {op} the key: "
    )
    assert expected in message
    assert message.endswith(".")
    assert "second line" not in message and "\x07" not in message
    assert_no_key(message, slot_key, SECRET_ARG, "s3cr3t", str(tmp_path))


def test_helper_echoing_the_key_has_it_redacted(tmp_path: Path, context: dict[str, str], slot_key: bytes) -> None:
    helper = write_helper(tmp_path, "answer({'version': 1, 'error': 'cannot wrap ' + request['key'] + ' now'}, 1)\n")
    with pytest.raises(ProviderError) as err:
        CommandProvider(command_uri(sys.executable, helper)).wrap(slot_key, context)
    assert str(err.value).endswith("could not wrap the key: it exited with status 1: cannot wrap [redacted] now.")
    assert_no_key(str(err.value), slot_key)


def test_helper_key_of_wrong_length(tmp_path: Path, context: dict[str, str]) -> None:
    helper = write_helper(tmp_path, "answer({'version': 1, 'key': b64(b'k' * 16)})\n")
    with pytest.raises(ProviderError) as err:
        CommandProvider(command_uri(sys.executable, helper)).unwrap(b"w", context)
    assert str(err.value).endswith("could not unwrap the key: it returned a key of 16 bytes, not 32.")
    assert "k" * 16 not in str(err.value) and base64.b64encode(b"k" * 16).decode() not in str(err.value)


def test_helper_answering_for_another_context(tmp_path: Path, context: dict[str, str], slot_key: bytes) -> None:
    """A helper that unwraps to another 32-byte key (one wrapped for another store or slot, say) cannot
    be caught by the provider: it returns that key, and the slot's AES-GCM refuses it later."""
    other = bytes(range(32))
    helper = write_helper(
        tmp_path,
        f"if request['op'] == 'wrap': answer({{'version': 1, 'wrapped': 'AQ=='}})\n"
        f"answer({{'version': 1, 'key': {base64.b64encode(other).decode()!r}}})\n",
    )
    provider = CommandProvider(command_uri(sys.executable, helper))
    wrapped = provider.wrap(slot_key, context)
    assert wrapped == b"\x01"
    assert provider.unwrap(wrapped, context) == other != slot_key


def test_helper_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: dict[str, str]) -> None:
    helper = write_helper(tmp_path, "time.sleep(60)\n")
    monkeypatch.setenv("MEMVAULT_KEY_COMMAND_TIMEOUT", "0.5")
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        CommandProvider(command_uri(sys.executable, helper, SECRET_ARG)).unwrap(b"w", context)
    assert time.monotonic() - started < 10
    assert str(err.value).endswith(
        "could not unwrap the key: it did not answer within 0.5 seconds (MEMVAULT_KEY_COMMAND_TIMEOUT)."
    )
    assert SECRET_ARG not in str(err.value)
    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv("MEMVAULT_KEY_COMMAND_TIMEOUT", bad)
        with pytest.raises(InvalidInputError, match="MEMVAULT_KEY_COMMAND_TIMEOUT"):
            CommandProvider(command_uri(sys.executable, helper)).unwrap(b"w", context)


def test_helper_that_does_not_read_its_input(tmp_path: Path, context: dict[str, str], slot_key: bytes) -> None:
    helper = tmp_path / "deaf.py"
    helper.write_text('import sys\nsys.stdout.write(\'{"version": 1, "wrapped": "AQ=="}\')\n')
    big = b"w" * (1024 * 1024)  # more than a pipe holds: the helper exits before reading it
    provider = CommandProvider(command_uri(sys.executable, helper))
    assert provider.wrap(slot_key, context) == b"\x01"
    with pytest.raises(ProviderError, match="no base64 'key' field"):
        provider.unwrap(big, context)


def test_missing_or_unrunnable_program(tmp_path: Path, context: dict[str, str], slot_key: bytes) -> None:
    missing = tmp_path / "no-such-helper"
    with pytest.raises(ProviderError) as err:
        CommandProvider(command_uri(missing, SECRET_ARG)).wrap(slot_key, context)
    assert str(err.value) == (
        "Key provider command 'no-such-helper' (arguments not shown) could not wrap the key: the program was not found."
    )
    with pytest.raises(ProviderError, match="'memvault-no-such-helper-xyz' .* the program was not found"):
        CommandProvider("command:memvault-no-such-helper-xyz").wrap(slot_key, context)
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    with pytest.raises(ProviderError) as err:
        CommandProvider(command_uri(script, SECRET_ARG)).unwrap(b"w", context)
    assert str(err.value).endswith("could not unwrap the key: the program is not executable (permission denied).")
    assert SECRET_ARG not in str(err.value) and str(tmp_path) not in str(err.value)


def test_command_uri_errors_do_not_repeat_the_arguments() -> None:
    for uri in ("command:", "command:   ", "command:helper 'unbalanced " + SECRET_ARG):
        with pytest.raises(InvalidInputError) as err:
            CommandProvider(uri)
        assert SECRET_ARG not in str(err.value)
