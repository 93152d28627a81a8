"""Key slots, the master key and the per-purpose subkeys derived from it.

Hierarchy (see ``docs/format.md``)::

    passphrase --Argon2id--> KEK --AES-GCM unwrap--> master key (random, 256 bit, per epoch)
    key file (32 raw bytes) --HKDF--> KEK ----------^
    key provider (KMS, HSM, helper) --unwrap--> KEK -^
    master key --HKDF-SHA256(salt=store_id, info="memvault/v1/<purpose>")--> subkeys

A key slot is a small JSON file ``keys/<slot_id>.json`` holding the KDF parameters, a salt and
the wrapped master key (a provider slot: the provider's URI and the KEK wrapped by it, bound to the
store and slot). The parameters, salt, slot id and store id are the associated data of the wrap,
so a slot edited to weaker parameters no longer unlocks. Changing a passphrase only rewrites a
slot: no data is re-encrypted.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import crypto
from ..crypto import b64decode, b64encode
from ..errors import IntegrityError, InvalidInputError, KeyUnavailableError, ProviderError, WrongKeyError, read_failure
from ..fsutil import read_bounded
from ..settings import DEFAULT_KDF, KdfParams
from .provider import KeyProvider, binding_context, mismatch, open_provider, shown_uri

__all__ = [
    "Unlock",
    "Subkeys",
    "KeySlot",
    "new_slot",
    "write_slot",
    "load_slots",
    "unlock_master_key",
    "read_key_file",
    "read_slot_file",
    "slot_file_names",
    "MAX_SLOT_FILE_BYTES",
    "MIN_PASSPHRASE_CHARS",
    "check_new_passphrase",
    "PURPOSES",
]

_SLOT_FORMAT = 1
_SLOT_AAD_PREFIX = b"memvault/v1/keyslot"
_KEYFILE_INFO = b"memvault/v1/keyfile-kek"
#: Subkey purposes; each is HKDF(master key, salt=store_id, info="memvault/v1/" + purpose).
PURPOSES = ("wrap", "index", "meta", "chain", "name", "keyring", "config", "access")
_EPOCH_ENTRY = struct.Struct(">I32s")
_SALT_SIZE = 16
_SLOT_KEYS = frozenset({"format", "slot_id", "kind", "kdf", "salt", "wrapped"})
#: Slot format 2 (written for format version 3 stores) adds a label and a creation time, both in
#: the wrap's associated data.
_SLOT_KEYS_2 = _SLOT_KEYS | {"label", "created"}
#: Slot format 3: a key provider's slot (kind "provider"), always with a label and creation time.
_SLOT_KEYS_3 = _SLOT_KEYS_2 | {"provider", "wrapped_key"}
#: Longest provider URI and wrapped provider key a slot may hold.
_MAX_URI_CHARS = 1000
_MAX_WRAPPED_KEY = 8192
#: Longest slot label, in characters.
MAX_LABEL_CHARS = 100
#: Largest key slot file read (a slot holds 36 bytes per master-key epoch, base64: about 48;
#: 64 KiB is over a thousand rotations). A bigger file, or anything but a regular file (a FIFO,
#: /dev/zero through a symlink), is refused before it is read.
MAX_SLOT_FILE_BYTES = 64 * 1024
#: Largest key file read: 32 raw bytes or 64 hex digits with some whitespace.
_MAX_KEY_FILE_BYTES = 4096


@dataclass(frozen=True)
class Unlock:
    """How to unlock a store: exactly one of a passphrase, a raw 32-byte key or a key provider's URI."""

    passphrase: str | None = None
    raw_key: bytes | None = None
    provider: str | None = None

    def __post_init__(self) -> None:
        if [self.passphrase, self.raw_key, self.provider].count(None) != 2:
            raise KeyUnavailableError("Give exactly one of a passphrase, a key file or a key provider.")
        if self.passphrase is not None and not self.passphrase:
            raise KeyUnavailableError("The passphrase is empty.")
        if self.raw_key is not None and len(self.raw_key) != crypto.KEY_SIZE:
            raise KeyUnavailableError("A key file must hold exactly 32 bytes.")

    @classmethod
    def of(cls, passphrase: str | None, key_file: str | os.PathLike[str] | None, key: str | None = None) -> Unlock:
        """From the arguments of ``MemoryStore.open``: a passphrase, the key in ``key_file``
        (:func:`read_key_file`) or a key provider's URI; KeyUnavailableError unless exactly one."""
        if key is not None:
            if passphrase is not None or key_file is not None:
                raise KeyUnavailableError("Give exactly one of a passphrase, a key file or a key provider.")
            return cls(provider=key)
        if key_file is None:
            return cls(passphrase=passphrase)
        return (
            cls(passphrase=passphrase, raw_key=b"") if passphrase is not None else cls(raw_key=read_key_file(key_file))
        )

    @property
    def kind(self) -> Literal["passphrase", "keyfile", "provider"]:
        if self.provider is not None:
            return "provider"
        return "passphrase" if self.passphrase is not None else "keyfile"

    def __repr__(self) -> str:  # never show the secret
        return f"Unlock(kind={self.kind!r})"


#: Fewest characters a new passphrase may have unless the operator insists (docs/format.md §2.1):
#: Argon2id slows each guess, it cannot make a short passphrase long.
MIN_PASSPHRASE_CHARS = 12


def check_new_passphrase(passphrase: str, *, allow_weak: bool = False) -> None:
    """Refuse a new passphrase shorter than :data:`MIN_PASSPHRASE_CHARS` characters.

    Raises:
        InvalidInputError: it is shorter and ``allow_weak`` is false (the message never shows it).
    """
    if len(passphrase) < MIN_PASSPHRASE_CHARS and not allow_weak:
        raise InvalidInputError(
            f"Error: A new passphrase needs at least {MIN_PASSPHRASE_CHARS} characters: a shorter one falls to "
            "an offline guessing attack on a stolen copy of the store. Choose a longer one (or insist with "
            "allow_weak_passphrase / --allow-weak-passphrase)."
        )


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """Read a key file: 32 raw bytes, or 64 hex digits with an optional trailing newline.

    Raises:
        KeyUnavailableError: it does not exist, may not be read (permission), is not a file (a
            directory), cannot be read, holds something else, or is a regular file that group or
            others may access (as ssh refuses such a private key: ``chmod 600`` it).
    """
    try:
        with open(path, "rb") as f:  # may be a pipe (process substitution): no mode to check then
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
                raise KeyUnavailableError(
                    f"The key file's permissions {stat.S_IMODE(st.st_mode):04o} let group or others access it; "
                    "make it private to its owner (chmod 600) and try again."
                )
            data = f.read(_MAX_KEY_FILE_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise KeyUnavailableError("The key file does not exist.") from None
    except PermissionError:
        raise KeyUnavailableError("The key file cannot be read: permission denied.") from None
    except IsADirectoryError:
        raise KeyUnavailableError("The key file is a directory, not a file.") from None
    except OSError as err:
        raise KeyUnavailableError(f"The key file cannot be read ({err.strerror or 'I/O error'}).") from None
    if len(data) == crypto.KEY_SIZE:
        return data
    text = data.strip()
    if len(text) == 2 * crypto.KEY_SIZE:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            pass
    raise KeyUnavailableError("A key file must hold exactly 32 raw bytes or 64 hex digits.")


@dataclass(frozen=True)
class KeySlot:
    """One way to unlock the master key(s)."""

    slot_id: bytes
    kind: Literal["passphrase", "keyfile", "provider"]
    salt: bytes
    kdf: KdfParams | None
    wrapped: bytes
    #: A name for people (slot formats 2 and 3; "" in format 1).
    label: str = ""
    #: Creation time, whole seconds since the epoch (slot formats 2 and 3; None: a format 1 slot).
    created: int | None = None
    #: The key provider's URI (slot format 3, kind "provider"; "" otherwise).
    provider: str = ""
    #: The KEK as the provider wrapped it (slot format 3).
    wrapped_key: bytes = b""

    def aad(self, store_id: bytes) -> bytes:
        params = _kdf_json(self.kdf)
        parts = [_SLOT_AAD_PREFIX, store_id, self.slot_id, self.kind.encode(), self.salt, params.encode()]
        if self.created is not None:
            parts += [self.label.encode("utf-8"), str(self.created).encode()]
        if self.kind == "provider":
            parts.append(self.provider.encode("utf-8"))
        return b"|".join(parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": 3 if self.kind == "provider" else _SLOT_FORMAT if self.created is None else 2,
            "slot_id": self.slot_id.hex(),
            "kind": self.kind,
            "kdf": None if self.kdf is None else {"alg": "argon2id", **self.kdf.model_dump()},
            "salt": b64encode(self.salt),
            "wrapped": b64encode(self.wrapped),
        }
        if self.created is not None:
            out["label"], out["created"] = self.label, self.created
        if self.kind == "provider":
            out["provider"], out["wrapped_key"] = self.provider, b64encode(self.wrapped_key)
        return out

    @classmethod
    def from_json(cls, obj: object) -> KeySlot:
        """Parse a slot strictly: exact keys, exact types, bounded KDF parameters."""
        try:
            if not isinstance(obj, dict) or type(obj.get("format")) is not int:
                raise ValueError
            if frozenset(obj) != {_SLOT_FORMAT: _SLOT_KEYS, 2: _SLOT_KEYS_2, 3: _SLOT_KEYS_3}.get(obj["format"]):
                raise ValueError
            label, created, provider, wrapped_key = "", None, "", b""
            if obj["format"] == 3:
                provider, wrapped_key = obj["provider"], b64decode(obj["wrapped_key"])
                if obj["kind"] != "provider" or obj["kdf"] is not None or not isinstance(provider, str):
                    raise ValueError
                if not 0 < len(provider) <= _MAX_URI_CHARS or not provider.isprintable():
                    raise ValueError
                if not 0 < len(wrapped_key) <= _MAX_WRAPPED_KEY:
                    raise ValueError
            if obj["format"] in (2, 3):
                label, created = obj["label"], obj["created"]
                if not isinstance(label, str) or not valid_label(label) or type(created) is not int or created < 0:
                    raise ValueError
            kind = obj["kind"]
            kdf_obj = obj["kdf"]
            kdf: KdfParams | None = None
            if kind == "passphrase":
                if not isinstance(kdf_obj, dict) or kdf_obj.get("alg") != "argon2id":
                    raise ValueError
                # Strict types and bounds, checked before any KDF runs: a hostile slot cannot
                # ask for 1 TiB of memory or smuggle "8" for 8.
                kdf = KdfParams.model_validate({k: v for k, v in kdf_obj.items() if k != "alg"}, strict=True)
            elif kind not in ("keyfile", "provider") or (kind == "provider") != (obj["format"] == 3) or kdf_obj:
                raise ValueError
            slot_id = bytes.fromhex(obj["slot_id"])
            if len(slot_id) != 16 or slot_id.hex() != obj["slot_id"]:
                raise ValueError
            salt, wrapped = b64decode(obj["salt"]), b64decode(obj["wrapped"])
            if len(salt) != _SALT_SIZE or (len(wrapped) - crypto.SEAL_OVERHEAD) % _EPOCH_ENTRY.size:
                raise ValueError
            return cls(slot_id, kind, salt, kdf, wrapped, label, created, provider, wrapped_key)
        except Exception:
            raise IntegrityError("A key slot is malformed.") from None


def _kdf_json(kdf: KdfParams | None) -> str:
    return "null" if kdf is None else json.dumps(kdf.model_dump(), sort_keys=True, separators=(",", ":"))


def _derive_kek(slot_kind: str, salt: bytes, kdf: KdfParams | None, unlock: Unlock) -> bytes:
    if slot_kind == "passphrase":
        assert kdf is not None and unlock.passphrase is not None
        return crypto.argon2id(
            unlock.passphrase.encode("utf-8"),
            salt,
            memory_kib=kdf.memory_kib,
            iterations=kdf.iterations,
            lanes=kdf.lanes,
        )
    assert unlock.raw_key is not None
    return crypto.hkdf(unlock.raw_key, salt=salt, info=_KEYFILE_INFO)


def _encode_master_keys(keys: dict[int, bytes]) -> bytes:
    return b"".join(_EPOCH_ENTRY.pack(epoch, key) for epoch, key in sorted(keys.items()))


def _decode_master_keys(data: bytes) -> dict[int, bytes]:
    """``u32 epoch || MK(32)`` per epoch, epochs from 1 in strictly ascending order."""
    if not data or len(data) % _EPOCH_ENTRY.size:
        raise IntegrityError()
    keys: dict[int, bytes] = {}
    for epoch, key in _EPOCH_ENTRY.iter_unpack(data):
        if epoch < 1 or (keys and epoch <= max(keys)):
            raise IntegrityError()
        keys[epoch] = key
    return keys


def valid_label(label: str) -> bool:
    """Whether ``label`` may name a key slot: at most :data:`MAX_LABEL_CHARS` printable characters."""
    return len(label) <= MAX_LABEL_CHARS and label.isprintable()


def new_slot(
    store_id: bytes,
    unlock: Unlock,
    master_keys: dict[int, bytes],
    kdf: KdfParams | None = None,
    *,
    label: str | None = None,
    created: int | None = None,
) -> KeySlot:
    """A new key slot wrapping ``master_keys`` (epoch -> key) for ``unlock``.

    Args:
        label, created: a slot of format 2 (stores of format version 3) with this label and
            creation time; None for both writes a format 1 slot.

    Raises:
        InvalidInputError: the label is too long or not printable.
    """
    if label is not None and not valid_label(label):
        raise InvalidInputError(f"Error: A key slot label is at most {MAX_LABEL_CHARS} printable characters.")
    slot_kdf = (kdf or DEFAULT_KDF) if unlock.kind == "passphrase" else None
    provider = None if unlock.provider is None else open_provider(unlock.provider)
    slot = KeySlot(crypto.random_bytes(16), unlock.kind, crypto.random_bytes(_SALT_SIZE), slot_kdf, b"",
                   label or "", created, provider.uri if provider else "")  # fmt: skip
    wrapped_key = b""
    if provider is not None:
        if created is None:
            raise InvalidInputError("Error: Key provider slots need a store of format version 3: run memvault upgrade.")
        kek = crypto.new_key()
        wrapped_key = provider.wrap(kek, binding_context(store_id, slot.slot_id))
    else:
        kek = _derive_kek(slot.kind, slot.salt, slot.kdf, unlock)
    wrapped = crypto.seal(kek, _encode_master_keys(master_keys), slot.aad(store_id))
    return KeySlot(slot.slot_id, slot.kind, slot.salt, slot.kdf, wrapped, slot.label, slot.created,
                   slot.provider, wrapped_key)  # fmt: skip


def write_slot(keys_dir: Path, slot: KeySlot, *, durable: bool = True) -> None:
    """Write a slot atomically (temp file, fsync, rename, directory fsync), mode 0600."""
    from ..fsutil import atomic_write

    data = json.dumps(slot.to_json(), indent=2, sort_keys=True).encode() + b"\n"
    atomic_write(keys_dir / f"{slot.slot_id.hex()}.json", data, durable=durable)


def read_slot_file(path: Path) -> KeySlot:
    """Parse one key slot file; :class:`IntegrityError` ("A key slot is malformed.") for anything
    but a regular file of at most :data:`MAX_SLOT_FILE_BYTES` holding a valid slot named
    ``<slot_id>.json``. Symbolic links are followed (the target must be a regular file)."""
    malformed = IntegrityError("A key slot is malformed.")
    try:
        obj = json.loads(read_bounded(path, MAX_SLOT_FILE_BYTES))
    except OSError as err:  # permission, I/O error: not damage
        name = "".join(ch if ch.isprintable() else "?" for ch in path.name)  # a name planted in keys/
        raise read_failure(err, what=f"The key slot file keys/{name}", damaged=malformed.message) from None
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deep
        raise malformed from None
    slot = KeySlot.from_json(obj)
    if f"{slot.slot_id.hex()}.json" != path.name:
        raise malformed
    return slot


def slot_file_names(keys_dir: Path) -> list[str]:
    """Names of the key slot files (``*.json``) in ``keys_dir``, sorted; IntegrityError if unreadable."""
    try:
        return sorted(p for p in os.listdir(keys_dir) if p.endswith(".json"))
    except FileNotFoundError:
        raise IntegrityError("The store's key slot directory keys/ is missing.") from None
    except OSError as err:
        raise read_failure(
            err, what="The store's key slot directory keys/", damaged="The store's key slot directory keys/ is damaged."
        ) from None


def load_slots(keys_dir: Path) -> list[KeySlot]:
    """All key slots of a store, in a stable order."""
    return [read_slot_file(keys_dir / name) for name in slot_file_names(keys_dir)]


def unlock_master_keys(store_id: bytes, slots: list[KeySlot], unlock: Unlock) -> tuple[KeySlot, dict[int, bytes]]:
    """Try each slot of the right kind; return the slot that opened and the master keys.

    Raises:
        IntegrityError: there is no key slot at all (nothing could unlock the store).
        WrongKeyError: no slot of the unlock's kind opens with it.
    """
    if not slots:
        raise IntegrityError("The store has no key slot (keys/ holds none): no passphrase or key can unlock it.")
    # A provider's URI may carry what opens it (a PIN source): the slot records the rest.
    provider = None if unlock.provider is None else open_provider(unlock.provider)
    failure: ProviderError | None = None  # a slot of the provider that did not open; others may
    for slot in slots:
        if slot.kind != unlock.kind or (provider is not None and slot.provider != provider.uri):
            continue
        try:
            kek = _provider_kek(store_id, slot, provider) if provider is not None else _derive_kek(
                slot.kind, slot.salt, slot.kdf, unlock)  # fmt: skip
            data = crypto.open_sealed(kek, slot.wrapped, slot.aad(store_id))
        except ProviderError as err:
            failure = failure or err
            continue
        except IntegrityError:
            if provider is not None:
                failure = failure or ProviderError(
                    f"The key provider {shown_uri(slot.provider)} returned a key that does not open key slot "
                    f"{slot.slot_id.hex()} (the slot was altered, or the provider unwrapped for another context)."
                )
            continue
        return slot, _decode_master_keys(data)
    if failure is not None:
        raise failure
    if provider is not None:
        recorded = [(slot.slot_id.hex(), slot.provider) for slot in slots if slot.kind == unlock.kind]
        hint = mismatch(provider.uri, recorded)
        raise WrongKeyError(
            f"No key slot of this memory store uses the key provider {shown_uri(provider.uri)}."
            + (f" {hint}" if hint else "")
        )
    raise WrongKeyError("The passphrase or key does not unlock this memory store.")


def _provider_kek(store_id: bytes, slot: KeySlot, provider: KeyProvider) -> bytes:
    """The KEK of a provider slot, unwrapped by its provider (bound to the store and slot)."""
    try:
        kek = provider.unwrap(slot.wrapped_key, binding_context(store_id, slot.slot_id))
    except ProviderError as err:
        raise ProviderError(f"Key slot {slot.slot_id.hex()}: {err.message}") from None
    if len(kek) != crypto.KEY_SIZE:
        raise ProviderError(f"Key slot {slot.slot_id.hex()}: the key provider returned a key of the wrong size.")
    return kek


def unlock_master_key(store_id: bytes, slots: list[KeySlot], unlock: Unlock) -> dict[int, bytes]:
    """The master keys (epoch -> key) that ``unlock`` opens, or :class:`WrongKeyError`."""
    return unlock_master_keys(store_id, slots, unlock)[1]


class Subkeys:
    """Per-purpose keys of one epoch, derived once at open."""

    __slots__ = ("epoch",) + PURPOSES

    wrap: bytes
    index: bytes
    meta: bytes
    chain: bytes
    name: bytes
    keyring: bytes
    config: bytes
    access: bytes  #: the access-time file (memvault.store.atimes)

    def __init__(self, master_key: bytes, store_id: bytes, epoch: int) -> None:
        self.epoch = epoch
        for purpose in PURPOSES:
            key = crypto.hkdf(master_key, salt=store_id, info=b"memvault/v1/" + purpose.encode())
            object.__setattr__(self, purpose, key)

    def __repr__(self) -> str:  # never show key bytes
        return f"Subkeys(epoch={self.epoch})"
