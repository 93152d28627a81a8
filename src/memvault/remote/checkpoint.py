"""Checkpoints of a store's log in object storage and their data key bundles (docs/format.md §12.8):
the log compacted up to a position, authenticated with the store's keyring key."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .. import crypto
from ..errors import IntegrityError
from ..keys.framing import frame_records, is_dek_record
from .layout import DEKS, MAX_LOG_BYTES, LogRecord, decode_log, encode_log, log_key

__all__ = [
    "Checkpoint",
    "MAX_CHECKPOINT_BYTES",
    "checkpoint_key",
    "checkpoint_of",
    "bundle_key",
    "bundle_of",
    "encode_checkpoint",
    "decode_checkpoint",
    "encode_bundle",
    "decode_bundle",
]

_MAGIC = b"MVCP"
_VERSION = 1
_HEAD = struct.Struct(">4sB16sQQH")
_U32 = struct.Struct(">I")
_MAC_LABEL = b"memvault/v1/checkpoint"
_CKPT_KEY = re.compile(r"\Alog/([0-9]{20})\.ckpt\Z")
_BUNDLE_KEY = re.compile(r"\Adeks/upto-([0-9]{20})\Z")
#: Largest checkpoint read (as many log records as fit; a checkpoint of a million commits is far less).
MAX_CHECKPOINT_BYTES = 4 * MAX_LOG_BYTES


def checkpoint_key(position: int) -> str:
    """The key of the checkpoint of log positions 0 to ``position`` (``log/<P>.ckpt``)."""
    return f"{log_key(position)}.ckpt"


def checkpoint_of(key: str) -> int | None:
    """The position a checkpoint's key names, or None for any other key."""
    match = _CKPT_KEY.match(key)
    return int(match.group(1)) if match else None


def bundle_key(position: int) -> str:
    """The key of the data key bundle of checkpoint ``position`` (``deks/upto-<P>``)."""
    return f"{DEKS}upto-{position:020d}"


def bundle_of(key: str) -> int | None:
    """The checkpoint position a bundle's key names, or None for any other key."""
    match = _BUNDLE_KEY.match(key)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Checkpoint:
    """The log compacted up to ``position``: the packs holding its commits' objects, one log
    record per position ``0..position`` (no packs of their own), and when it was written
    (``time``: the writer's clock, Unix seconds)."""

    position: int
    time: int
    packs: tuple[str, ...]
    records: tuple[LogRecord, ...]

    def dek_ids(self) -> list[bytes]:
        """Every data key id its records name, in log order."""
        return [dek_id for record in self.records for dek_id in record.dek_ids]


def _mac(key: bytes, body: bytes) -> bytes:
    return crypto.mac(key, _MAC_LABEL + body)


def encode_checkpoint(key: bytes, store_id: bytes, checkpoint: Checkpoint) -> bytes:
    """``"MVCP" || u8 1 || store_id || u64 P || u64 time || u16 n || n * pack(20) || u32 k ||
    k * (u32 len || log record) || mac``, ``mac = HMAC(key, "memvault/v1/checkpoint" || every byte
    before it)``.

    Args:
        key: the store's keyring key (K_keyring).
        store_id: the store's id.
        checkpoint: positions ``0..position``, one record each, in order.

    Raises:
        ValueError: the records are not one per position from 0 to ``position``.
    """
    if len(checkpoint.records) != checkpoint.position + 1:
        raise ValueError("a checkpoint holds one record per position")
    out = [_HEAD.pack(_MAGIC, _VERSION, store_id, checkpoint.position, checkpoint.time, len(checkpoint.packs))]
    out += [bytes.fromhex(name) for name in checkpoint.packs]
    out.append(_U32.pack(len(checkpoint.records)))
    for record in checkpoint.records:
        data = encode_log(store_id, (), record.dek_ids, record.chained)
        out += [_U32.pack(len(data)), data]
    body = b"".join(out)
    return body + _mac(key, body)


def decode_checkpoint(data: bytes, key: bytes, store_id: bytes, position: int) -> Checkpoint:
    """The checkpoint stored at ``checkpoint_key(position)``, authenticated (its chained records are
    checked against the keyring's MAC chain when they are applied).

    Raises:
        IntegrityError: not a checkpoint of that position of this store written with this store's key.
    """
    bad = IntegrityError(f"The checkpoint of log position {position} in object storage does not verify.")
    if not _HEAD.size + _U32.size + 32 <= len(data) <= MAX_CHECKPOINT_BYTES:
        raise bad
    body, mac = data[:-32], data[-32:]
    if not crypto.consteq(_mac(key, body), mac):
        raise bad
    magic, version, sid, pos, written, npacks = _HEAD.unpack_from(body)
    if (magic, version, sid, pos) != (_MAGIC, _VERSION, store_id, position):
        raise bad
    at = _HEAD.size
    if at + 20 * npacks + _U32.size > len(body):
        raise bad
    packs = tuple(body[at + 20 * i : at + 20 * (i + 1)].hex() for i in range(npacks))
    at += 20 * npacks
    (count,) = _U32.unpack_from(body, at)
    at += _U32.size
    if count != position + 1:
        raise bad
    records: list[LogRecord] = []
    for i in range(count):
        if at + _U32.size > len(body):
            raise bad
        (length,) = _U32.unpack_from(body, at)
        at += _U32.size
        if at + length > len(body):
            raise bad
        record = decode_log(body[at : at + length], store_id, i)
        if record.packs:
            raise bad
        records.append(record)
        at += length
    if at != len(body):
        raise bad
    return Checkpoint(position, written, packs, tuple(records))


def encode_bundle(records: dict[bytes, bytes]) -> bytes:
    """A data key bundle: the DEK records (``dek_id -> framed record``), in ascending id order."""
    return b"".join(records[dek_id] for dek_id in sorted(records))


def decode_bundle(data: bytes) -> dict[bytes, bytes]:
    """The DEK records of a bundle by data key id; anything else in it is ignored (each DEK record
    is authenticated when it is used, as a ``deks/`` object's is).

    Raises:
        IntegrityError: the bundle is not whole framed records.
    """
    records, end = frame_records(data)
    if end != len(data):
        raise IntegrityError("A data key bundle in object storage is damaged.")
    out: dict[bytes, bytes] = {}
    start = 0
    for stop, rtype, body in records:
        if is_dek_record(rtype, body):
            out[body[:16]] = data[start:stop]
        start = stop
    return out
