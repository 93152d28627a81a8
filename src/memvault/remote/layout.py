"""Where a store's parts sit in object storage, and the log record that makes a commit
(docs/format.md §12)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from ..errors import IntegrityError
from ..keys.framing import commit_fields, frame_records, is_dek_record

__all__ = [
    "CONFIG",
    "KEYS",
    "LOG",
    "PACKS",
    "DEKS",
    "LogRecord",
    "log_key",
    "log_seq",
    "wait_key",
    "wait_of",
    "pack_keys",
    "dek_key",
    "slot_key",
    "encode_log",
    "decode_log",
    "split_append",
]

CONFIG = "memvault.json"
KEYS = "keys/"
LOG = "log/"
PACKS = "packs/"
DEKS = "deks/"
_SEQ_DIGITS = 20
_LOG_KEY = re.compile(r"\Alog/([0-9]{20})\Z")
_WAIT_KEY = re.compile(r"\Alog/([0-9]{20})\.wait-([0-9]{20})-([0-9a-f]{16})\Z")
_SLOT_KEY = re.compile(r"\Akeys/([0-9a-f]{32})\.json\Z")
_MAGIC = b"MVLG"
_VERSION = 1
_HEAD = struct.Struct(">4sB16sH")
_COUNT = struct.Struct(">I")
#: Largest log record read (a commit writing a million files names 16 MB of data key ids).
MAX_LOG_BYTES = 64 * 1024 * 1024


def log_key(seq: int) -> str:
    """The key of commit ``seq``'s log record: ``log/`` and 20 decimal digits (sorts by seq)."""
    return f"{LOG}{seq:0{_SEQ_DIGITS}d}"


def log_seq(key: str) -> int | None:
    """The sequence number a log key names, or None for any other key."""
    match = _LOG_KEY.match(key)
    return int(match.group(1)) if match else None


def wait_key(seq: int, since: int, host: str) -> str:
    """The key of host ``host``'s (16 hex) marker saying it waits to commit ``seq``, having lost
    the race for ``since`` first (it sorts right after ``log_key(seq)``)."""
    return f"{log_key(seq)}.wait-{since:0{_SEQ_DIGITS}d}-{host}"


def wait_of(key: str) -> tuple[int, int, str] | None:
    """``(seq, since, host)`` of a waiting marker's key, or None for any other key."""
    match = _WAIT_KEY.match(key)
    return (int(match.group(1)), int(match.group(2)), match.group(3)) if match else None


def pack_keys(name: str) -> tuple[str, str]:
    """The keys of the pack ``pack-<name>`` and its index (``name``: 40 hex, the pack checksum)."""
    return f"{PACKS}pack-{name}.pack", f"{PACKS}pack-{name}.idx"


def dek_key(dek_id: bytes) -> str:
    """The key of the object holding data key ``dek_id``'s DEK record."""
    return f"{DEKS}{dek_id.hex()}"


def slot_key(slot_id: str) -> str:
    """The key of a key slot (``slot_id``: 32 hex)."""
    return f"{KEYS}{slot_id}.json"


def slot_id_of(key: str) -> str | None:
    """The slot id a key-slot key names, or None."""
    match = _SLOT_KEY.match(key)
    return match.group(1) if match else None


@dataclass(frozen=True)
class LogRecord:
    """One commit's log record: the packs it added (names), the data keys it wrapped (ids; their
    DEK records are separate objects), and its chained keyring records, the last a COMMIT record
    of ``seq``."""

    seq: int
    commit_id: bytes
    packs: tuple[str, ...]
    dek_ids: tuple[bytes, ...]
    chained: bytes


def split_append(append: bytes) -> tuple[dict[bytes, bytes], bytes]:
    """Split the keyring records a commit appends into its DEK records (``dek_id -> record``) and
    the rest (the chained records, in order)."""
    records, end = frame_records(append)
    if end != len(append):
        raise ValueError("not whole keyring records")
    deks: dict[bytes, bytes] = {}
    chained: list[bytes] = []
    start = 0
    for stop, rtype, body in records:
        if is_dek_record(rtype, body):
            deks[body[:16]] = append[start:stop]
        else:
            chained.append(append[start:stop])
        start = stop
    return deks, b"".join(chained)


def encode_log(store_id: bytes, packs: tuple[str, ...], dek_ids: tuple[bytes, ...], chained: bytes) -> bytes:
    """``"MVLG" || u8 1 || store_id(16) || u16 n || n * pack checksum(20) || u32 m || m * dek_id(16)
    || chained records``."""
    out = [_HEAD.pack(_MAGIC, _VERSION, store_id, len(packs))]
    out += [bytes.fromhex(name) for name in packs]
    out.append(_COUNT.pack(len(dek_ids)))
    out += list(dek_ids)
    out.append(chained)
    return b"".join(out)


def decode_log(data: bytes, store_id: bytes, seq: int) -> LogRecord:
    """Parse the log record stored at ``log_key(seq)``.

    The chained records are not authenticated here: the keyring checks their MAC chain when the
    replica appends them.

    Raises:
        IntegrityError: not a log record of this store, or its last record is not the COMMIT
            record of ``seq``.
    """
    damaged = IntegrityError(
        f"The log record of commit #{seq} in object storage is damaged or belongs to another store."
    )
    if len(data) < _HEAD.size + _COUNT.size or len(data) > MAX_LOG_BYTES:
        raise damaged
    magic, version, sid, npacks = _HEAD.unpack_from(data)
    if magic != _MAGIC or version != _VERSION or sid != store_id:
        raise damaged
    pos = _HEAD.size
    packs = tuple(data[pos + 20 * i : pos + 20 * (i + 1)].hex() for i in range(npacks))
    pos += 20 * npacks
    if pos + _COUNT.size > len(data):
        raise damaged
    (ndeks,) = _COUNT.unpack_from(data, pos)
    pos += _COUNT.size
    if pos + 16 * ndeks > len(data):
        raise damaged
    dek_ids = tuple(data[pos + 16 * i : pos + 16 * (i + 1)] for i in range(ndeks))
    pos += 16 * ndeks
    chained = data[pos:]
    records, end = frame_records(chained)
    if end != len(chained) or not records:
        raise damaged
    fields = commit_fields(records[-1][1], records[-1][2])
    if fields is None or fields[0] != seq or len(set(dek_ids)) != len(dek_ids):
        raise damaged
    return LogRecord(seq, fields[1], packs, dek_ids, chained)
