"""All cryptography of memvault, composed from pyca/cryptography primitives.

This is the only module that imports ``cryptography``. It offers a handful of misuse-resistant
operations; callers never choose nonces, never see partial plaintext, and get one generic
:class:`~memvault.errors.IntegrityError` for every authentication failure.

- :func:`seal` / :func:`open_sealed`: AES-256-GCM, fresh random 96-bit nonce per call, output
  ``nonce(12) || ciphertext || tag(16)``; the associated data binds the ciphertext to its context.
  :func:`opener` sets the cipher up once for many records under one key.
- :func:`argon2id` (passphrase -> 32 bytes) and :func:`hkdf` (key -> purpose-specific subkey).
- :func:`mac` / :func:`mac_verify`: HMAC-SHA256 (OpenSSL's through the standard library's
  :mod:`hmac`), constant-time verification; :func:`mac_function` keys it once for many messages.
- :func:`pad` / :func:`unpad`: length-hiding framing applied to plaintext *before* encryption
  (never compression, which would turn ciphertext length into an oracle).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac as _std_hmac
import os
import struct
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import IntegrityError, InternalError

__all__ = [
    "KEY_SIZE",
    "NONCE_SIZE",
    "TAG_SIZE",
    "SEAL_OVERHEAD",
    "random_bytes",
    "new_key",
    "seal",
    "open_sealed",
    "opener",
    "argon2id",
    "hkdf",
    "mac",
    "mac_function",
    "mac_verify",
    "consteq",
    "sha256",
    "pad",
    "unpad",
    "b64encode",
    "b64decode",
    "padded_size",
]

#: AES-256 key length.
KEY_SIZE = 32
#: GCM nonce length; pinned because AESGCM also accepts 8-24 byte nonces.
NONCE_SIZE = 12
TAG_SIZE = 16
SEAL_OVERHEAD = NONCE_SIZE + TAG_SIZE
#: Length prefix of the padded frame (big-endian u32).
_FRAME_HEADER = struct.Struct(">I")
#: Below this size, pad to multiples of 256 bytes; above, PADME buckets (<= 12% overhead).
_SMALL_LIMIT = 4096
_SMALL_STEP = 256


def random_bytes(n: int) -> bytes:
    """Return ``n`` bytes from the OS CSPRNG; refuse an RNG that returns all zeros."""
    data = os.urandom(n)
    if n >= 8 and not any(data):
        # A zeroed RNG (broken VM snapshot, patched os.urandom) would repeat keys and nonces.
        raise InternalError("The system random number generator returned zeros; refusing to write.")
    return data


def new_key() -> bytes:
    """A fresh random 256-bit key."""
    return random_bytes(KEY_SIZE)


def seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """Encrypt and authenticate ``plaintext`` bound to ``aad``: ``nonce || ct || tag``."""
    return _seal_with_nonce(key, random_bytes(NONCE_SIZE), plaintext, aad)


def _seal_with_nonce(key: bytes, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """Deterministic seam for known-answer vectors only; production code calls :func:`seal`."""
    if len(key) != KEY_SIZE or len(nonce) != NONCE_SIZE:
        raise ValueError("seal needs a 32-byte key and a 12-byte nonce")
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def open_sealed(key: bytes, sealed: bytes | memoryview, aad: bytes) -> bytes:
    """Return the plaintext of :func:`seal` output, or raise :class:`IntegrityError`.

    Whole-or-nothing: the tag is verified before any byte is returned.
    """
    if len(key) != KEY_SIZE:
        raise ValueError("open_sealed needs a 32-byte key")
    return _open_with(AESGCM(key), sealed, aad)


def opener(key: bytes) -> Callable[[bytes, bytes], bytes]:
    """:func:`open_sealed` under ``key`` as a function of ``(sealed, aad)``, same results.

    The cipher is set up once: for one key and many records (the wrap key of every data key
    read when a store opens). Safe to call from several threads.
    """
    if len(key) != KEY_SIZE:
        raise ValueError("opener needs a 32-byte key")
    aead = AESGCM(key)

    def open_with(sealed: bytes, aad: bytes) -> bytes:
        return _open_with(aead, sealed, aad)

    return open_with


def _open_with(aead: AESGCM, sealed: bytes | memoryview, aad: bytes) -> bytes:
    if len(sealed) < SEAL_OVERHEAD:
        raise IntegrityError()
    view = memoryview(sealed)  # the nonce and the ciphertext without copying them
    try:
        return aead.decrypt(view[:NONCE_SIZE], view[NONCE_SIZE:], aad)
    except InvalidTag:
        raise IntegrityError() from None


def argon2id(secret: bytes, salt: bytes, *, memory_kib: int, iterations: int, lanes: int) -> bytes:
    """Argon2id (RFC 9106) to a 32-byte key. Parameters must be bounded by the caller first."""
    kdf = Argon2id(salt=salt, length=KEY_SIZE, iterations=iterations, lanes=lanes, memory_cost=memory_kib)
    return kdf.derive(secret)


def hkdf(key: bytes, *, salt: bytes, info: bytes, length: int = KEY_SIZE) -> bytes:
    """HKDF-SHA256 subkey for one purpose (``info``); never reuse one key for two purposes."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(key)


def mac(key: bytes, data: bytes) -> bytes:
    """HMAC-SHA256 of ``data``."""
    return _std_hmac.digest(key, data, hashlib.sha256)


def mac_function(key: bytes) -> Callable[[bytes], bytes]:
    """HMAC-SHA256 under ``key`` as a function of the message, equal to ``mac(key, message)``.

    The key schedule is computed once and copied per call: for one key and many messages (the
    path tokens of every node when a store opens). Safe to call from several threads.
    """
    keyed = _std_hmac.new(key, digestmod=hashlib.sha256)

    def mac_of(data: bytes) -> bytes:
        h = keyed.copy()
        h.update(data)
        return h.digest()

    return mac_of


def mac_verify(key: bytes, data: bytes, tag: bytes) -> None:
    """Raise :class:`IntegrityError` unless ``tag`` is the HMAC-SHA256 of ``data`` (constant time)."""
    if not _std_hmac.compare_digest(mac(key, data), tag):
        raise IntegrityError()


def consteq(a: bytes, b: bytes) -> bool:
    """Whether ``a == b``, in time independent of where they differ."""
    return _std_hmac.compare_digest(a, b)


def sha256(data: bytes) -> bytes:
    """SHA-256 digest."""
    return hashlib.sha256(data).digest()


def padded_size(n: int, step: int = _SMALL_STEP) -> int:
    """Size of the padded frame for an ``n``-byte plaintext (what an observer can learn):
    at least 256 bytes, a multiple of ``step`` (256 unless a format says otherwise) up to 4096,
    PADME above."""
    total = n + _FRAME_HEADER.size
    if total <= _SMALL_LIMIT:
        return max(_SMALL_STEP, -(-total // step) * step)
    # PADME (Nikitin et al. 2019): keep the top bits of the length, round up the rest.
    e = total.bit_length() - 1
    s = e.bit_length()
    mask = (1 << (e - s)) - 1
    return (total + mask) & ~mask


def pad(data: bytes, step: int = _SMALL_STEP) -> bytes:
    """Frame ``data`` as ``len(u32) || data || zeros`` up to :func:`padded_size`."""
    size = padded_size(len(data), step)
    return _FRAME_HEADER.pack(len(data)) + data + bytes(size - len(data) - _FRAME_HEADER.size)


def unpad(frame: bytes) -> bytes:
    """Inverse of :func:`pad`; a malformed frame is an integrity failure."""
    if len(frame) < _FRAME_HEADER.size:
        raise IntegrityError()
    (n,) = _FRAME_HEADER.unpack_from(frame)
    end = _FRAME_HEADER.size + n
    if end > len(frame) or frame.count(0, end) != len(frame) - end:  # only zero bytes after the data
        raise IntegrityError()
    return frame[_FRAME_HEADER.size : end]


# -- canonical encodings --------------------------------------------------------------------------


def b64encode(data: bytes) -> str:
    """Standard base64 with padding."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: object) -> bytes:
    """Strict, canonical base64: ``encode(decode(s)) == s`` or :class:`IntegrityError`.

    Python's decoder accepts non-zero trailing bits (``AQIDBAV=`` == ``AQIDBAU=``); such
    malleable spellings are refused.
    """
    if not isinstance(text, str):
        raise IntegrityError()
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise IntegrityError() from None
    if b64encode(data) != text:
        raise IntegrityError()
    return data
