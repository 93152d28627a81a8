"""Where a store's parts sit in object storage, and the log record that makes a commit
(docs/format.md §12)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .. import crypto
from ..errors import IntegrityError
from ..keys.framing import BRANCH, BRANCH_BODY, RECORD, commit_fields, frame_records, is_dek_record, record_seq

__all__ = [
    "CONFIG",
    "KEYS",
    "LOG",
    "PACKS",
    "DEKS",
    "OBJECT_KINDS",
    "LogRecord",
    "VoidRecord",
    "MAX_LOG_BYTES",
    "MAX_VOID_BYTES",
    "MAX_ATTEMPT",
    "log_key",
    "log_slot",
    "void_key",
    "void_of",
    "wait_key",
    "wait_of",
    "pack_keys",
    "pack_name_of",
    "dek_key",
    "dek_id_of",
    "object_kind",
    "slot_key",
    "encode_log",
    "decode_log",
    "encode_void",
    "decode_void",
    "split_append",
    "log_segments",
    "is_dek_object",
]

CONFIG = "memvault.json"
KEYS = "keys/"
LOG = "log/"
PACKS = "packs/"
DEKS = "deks/"
_SEQ_DIGITS = 20
#: Attempts of one sequence number a log can hold (each past the first follows a void).
MAX_ATTEMPT = 999_999
_LOG_KEY = re.compile(r"\Alog/([0-9]{20})(?:\.r([1-9][0-9]{0,5}))?\Z")
_VOID_KEY = re.compile(r"\Alog/([0-9]{20})\.v(0|[1-9][0-9]{0,5})-[0-9a-f]{16}\Z")
_WAIT_KEY = re.compile(r"\Alog/([0-9]{20})\.wait-([0-9]{20})-([0-9a-f]{16})\Z")
_SLOT_KEY = re.compile(r"\Akeys/([0-9a-f]{32})\.json\Z")
_PACK_KEY = re.compile(r"\Apacks/pack-([0-9a-f]{40})\.(?:pack|idx)\Z")
_DEK_KEY = re.compile(r"\Adeks/([0-9a-f]{32})\Z")
#: The kinds of object a prefix holds (``memvault status``): packs and their indexes (``packs/``),
#: the log (``log/``: records, voids, waiting markers), data key objects (``deks/``), and every
#: other object (``memvault.json``, key slots, anything else).
OBJECT_KINDS = ("packs", "log", "deks", "other")
_MAGIC = b"MVLG"
_VERSION = 1
_HEAD = struct.Struct(">4sB16sH")
_COUNT = struct.Struct(">I")
#: Largest log record read (a commit writing a million files names 16 MB of data key ids).
MAX_LOG_BYTES = 64 * 1024 * 1024
_VOID_MAGIC = b"MVLV"
_VOID_HEAD = struct.Struct(">4sB16sQIQH")
_VOID_MAC = b"memvault/v1/log-void"
_MAX_TAG = 1024
#: Largest void record read.
MAX_VOID_BYTES = _VOID_HEAD.size + _MAX_TAG + 32


def log_key(seq: int, attempt: int = 0) -> str:
    """The key of attempt ``attempt`` at commit ``seq``'s log record: ``log/`` and 20 decimal
    digits (sorts by seq), then ``.r<attempt>`` for an attempt after the first (a void of each
    attempt before it lets a commit use it, docs/format.md §12.6)."""
    if not 0 <= attempt <= MAX_ATTEMPT:
        raise ValueError("attempt out of range")
    return f"{LOG}{seq:0{_SEQ_DIGITS}d}" + (f".r{attempt}" if attempt else "")


def log_slot(key: str) -> tuple[int, int] | None:
    """``(seq, attempt)`` of a log record's key, or None for any other key."""
    match = _LOG_KEY.match(key)
    return (int(match.group(1)), int(match.group(2) or 0)) if match else None


def void_key(seq: int, attempt: int, nonce: str) -> str:
    """The key of a void of the object at ``log_key(seq, attempt)`` (``nonce``: 16 hex, so that
    nobody can take a void's key before a key holder writes it)."""
    return f"{log_key(seq)}.v{attempt}-{nonce}"


def void_of(key: str) -> tuple[int, int] | None:
    """``(seq, attempt)`` a void's key names, or None for any other key."""
    match = _VOID_KEY.match(key)
    return (int(match.group(1)), int(match.group(2))) if match else None


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


def pack_name_of(key: str) -> str | None:
    """The pack name (40 hex) of a pack's or its index's key, or None for any other key."""
    match = _PACK_KEY.match(key)
    return match.group(1) if match else None


def dek_key(dek_id: bytes) -> str:
    """The key of the object holding data key ``dek_id``'s DEK record."""
    return f"{DEKS}{dek_id.hex()}"


def dek_id_of(key: str) -> bytes | None:
    """The data key id a data key object's key names, or None for any other key."""
    match = _DEK_KEY.match(key)
    return bytes.fromhex(match.group(1)) if match else None


def object_kind(key: str) -> str:
    """Which of :data:`OBJECT_KINDS` the object at ``key`` (relative to the prefix) is, by its
    place alone."""
    for kind, prefix in (("packs", PACKS), ("log", LOG), ("deks", DEKS)):
        if key.startswith(prefix):
            return kind
    return "other"


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
    of ``main``'s commit ``seq`` or, for a commit of a side branch, that commit's BRANCH record.

    Attributes:
        seq: the commit's sequence number (on ``main``, or on its side branch).
        commit_id: the commit's id (40 hex digits).
        branch: the side branch's 8-byte id for a commit of a side branch, else None (``main``).
    """

    seq: int
    commit_id: bytes
    packs: tuple[str, ...]
    dek_ids: tuple[bytes, ...]
    chained: bytes
    branch: bytes | None = None


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


def log_segments(data: bytes) -> list[tuple[int, bytes]]:
    """Cut keyring records into one log record's records per commit: everything up to the last
    record about sequence number ``n`` (its COMMIT, an ABORT of it, a replacement) before the first
    COMMIT of ``n + 1``; DEK records after the last commit's (data keys a replica fetched again)
    join its run. Other records after it (a torn tail, an access-file record) are left."""
    out: list[tuple[int, bytes]] = []
    records, _ = frame_records(data)
    start = close = 0
    current: int | None = None
    for end, rtype, body in records:
        seq = record_seq(rtype, body)
        if seq is not None:
            if current is not None and seq == current + 1:
                out.append((current, data[start:close]))
                start = close
            if current is None or seq >= current:
                current = seq
            close = end
    if current is not None:
        tail = [
            data[end - RECORD.size - len(body) : end]
            for end, rtype, body in records
            if end > close and is_dek_record(rtype, body)
        ]
        out.append((current, data[start:close] + b"".join(tail)))
    return out


def is_dek_object(record: bytes, dek_id: bytes) -> bool:
    """Whether ``record`` (a ``deks/`` object) is exactly one DEK record of ``dek_id``."""
    records, end = frame_records(record)
    return end == len(record) and len(records) == 1 and is_dek_record(*records[0][1:]) and records[0][2][:16] == dek_id


def encode_log(store_id: bytes, packs: tuple[str, ...], dek_ids: tuple[bytes, ...], chained: bytes) -> bytes:
    """``"MVLG" || u8 1 || store_id(16) || u16 n || n * pack checksum(20) || u32 m || m * dek_id(16)
    || chained records``."""
    out = [_HEAD.pack(_MAGIC, _VERSION, store_id, len(packs))]
    out += [bytes.fromhex(name) for name in packs]
    out.append(_COUNT.pack(len(dek_ids)))
    out += list(dek_ids)
    out.append(chained)
    return b"".join(out)


def decode_log(data: bytes, store_id: bytes, position: int) -> LogRecord:
    """Parse the log record stored at ``log_key(position)``: a commit of ``main`` (its last chained
    record is a COMMIT record) or of a side branch (its last chained record is a BRANCH record).

    The chained records are not authenticated here: the keyring checks their MAC chain when the
    replica appends them. Each log position holds one commit, of ``main`` or of a side branch, so
    ``main``'s sequence numbers equal log positions until the first commit of a side branch and
    stay at or below them after it.

    Raises:
        IntegrityError: not a log record of this store, its last record is neither a COMMIT record
            nor a BRANCH record, or it names a commit of ``main`` numbered after ``position``.
    """
    damaged = IntegrityError(f"The log record #{position} in object storage is damaged or belongs to another store.")
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
    if end != len(chained) or not records or len(set(dek_ids)) != len(dek_ids):
        raise damaged
    rtype, body = records[-1][1], records[-1][2]
    if rtype == BRANCH and len(body) == BRANCH_BODY.size:
        branch, _flags, seq, commit_id, _parent, _mac = BRANCH_BODY.unpack(body)
        return LogRecord(seq, commit_id.hex().encode(), packs, dek_ids, chained, branch)
    fields = commit_fields(rtype, body)
    if fields is None or fields[0] > position:
        raise damaged
    return LogRecord(fields[0], fields[1], packs, dek_ids, chained)


@dataclass(frozen=True)
class VoidRecord:
    """A key holder's statement that the object of version tag ``tag`` and ``size`` bytes at
    ``log_key(seq, attempt)`` is no commit: commit ``seq`` may take the next attempt."""

    seq: int
    attempt: int
    tag: str
    size: int


def _void_message(key: bytes, body: bytes) -> bytes:
    return crypto.mac(key, _VOID_MAC + body)


def encode_void(key: bytes, store_id: bytes, void: VoidRecord) -> bytes:
    """``"MVLV" || u8 1 || store_id(16) || u64 seq || u32 attempt || u64 size || u16 t || tag(t,
    UTF-8) || mac``, ``mac = HMAC(key, "memvault/v1/log-void" || every byte before it)``.

    Args:
        key: the store's keyring key (K_keyring).
    """
    tag = void.tag.encode("utf-8")
    if len(tag) > _MAX_TAG:
        raise ValueError("version tag too long")
    body = _VOID_HEAD.pack(_VOID_MAGIC, _VERSION, store_id, void.seq, void.attempt, void.size, len(tag)) + tag
    return body + _void_message(key, body)


def decode_void(data: bytes, key: bytes, store_id: bytes, seq: int, attempt: int) -> VoidRecord:
    """The void record of the object at ``log_key(seq, attempt)`` that ``data`` holds, authenticated.

    Raises:
        IntegrityError: not a void of that object in this store written with this store's key.
    """
    bad = IntegrityError(f"A void record of commit #{seq} in object storage does not verify.")
    if not _VOID_HEAD.size + 32 <= len(data) <= MAX_VOID_BYTES:
        raise bad
    body, mac = data[:-32], data[-32:]
    magic, version, sid, vseq, vattempt, size, length = _VOID_HEAD.unpack_from(body)
    if (magic, version, sid, vseq, vattempt) != (_VOID_MAGIC, _VERSION, store_id, seq, attempt):
        raise bad
    if len(body) != _VOID_HEAD.size + length or not crypto.consteq(_void_message(key, body), mac):
        raise bad
    try:
        tag = body[_VOID_HEAD.size :].decode("utf-8")
    except UnicodeDecodeError:
        raise bad from None
    return VoidRecord(seq, attempt, tag, size)
