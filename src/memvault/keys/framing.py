"""The keyring file's bytes: header, record framing, record types and the fixed-size bodies
(docs/format.md §3.1). Pure functions; nothing here is authenticated."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .. import crypto

__all__ = [
    "MAGIC", "VERSION", "HEADER", "RECORD", "DEK", "COMMIT", "ABORT", "TOMBSTONE", "COMMIT_RAW", "DESTROY",
    "EPOCH", "ATIMES", "BRANCH_KEYS", "BRANCH", "DEK_HEAD", "DEK_SIZE", "COMMIT_BODY", "COMMIT_RAW_BODY",
    "ABORT_BODY", "BRANCH_ID_SIZE", "BRANCH_BODY", "BRANCH_FORK", "MAX_BRANCH_KEYS", "commit_fields", "record_seq",
    "is_dek_record", "frame_record", "frame_records", "DEK_RECORD", "DEK_RECORD_SIZE", "dek_run",
    "dek_records_of", "newest_dek_epoch",
]  # fmt: skip

MAGIC = b"MVKR"
VERSION = 1
HEADER = struct.Struct(">4sB16s")
RECORD = struct.Struct(">BH")
DEK = 1
COMMIT = 2
ABORT = 3
TOMBSTONE = 4
COMMIT_RAW = 5
DESTROY = 6
EPOCH = 7
ATIMES = 8
BRANCH_KEYS = 9
BRANCH = 10
DEK_HEAD = struct.Struct(">16sI")
DEK_SIZE = DEK_HEAD.size + crypto.KEY_SIZE + crypto.SEAL_OVERHEAD
#: The record header every DEK record starts with, and the size of the whole record.
DEK_RECORD = RECORD.pack(DEK, DEK_SIZE)
DEK_RECORD_SIZE = RECORD.size + DEK_SIZE
COMMIT_BODY = struct.Struct(">Q40s40s32s")
COMMIT_RAW_BODY = struct.Struct(">Q20s20s32s")
ABORT_BODY = struct.Struct(">Q40s32s")
#: A side branch in the keyring: the 16 hex digits of ``dream/<id>`` as 8 bytes.
BRANCH_ID_SIZE = 8
#: BRANCH body: branch id, flags, seq, commit id, parent id (raw), mac.
BRANCH_BODY = struct.Struct(">8sBQ20s20s32s")
#: BRANCH flag: the branch's fork commit (its first commit).
BRANCH_FORK = 1
#: Data key ids one BRANCH_KEYS record names at most (its body is branch id, ids, mac).
MAX_BRANCH_KEYS = (0xFFFF - BRANCH_ID_SIZE - 32) // 16


def commit_fields(rtype: int, body: bytes) -> tuple[int, bytes, bytes, bytes] | None:
    """``(seq, commit_id, parent_id, mac)`` of a COMMIT record body of either type (ids as 40 hex
    ASCII); None for another record type or a body of the wrong length. The mac is not checked."""
    if rtype == COMMIT and len(body) == COMMIT_BODY.size:
        seq, commit_id, parent_id, tag = COMMIT_BODY.unpack(body)
        return seq, commit_id, parent_id, tag
    if rtype == COMMIT_RAW and len(body) == COMMIT_RAW_BODY.size:
        seq, raw_commit, raw_parent, tag = COMMIT_RAW_BODY.unpack(body)
        return seq, raw_commit.hex().encode(), raw_parent.hex().encode(), tag
    return None


def record_seq(rtype: int, body: bytes) -> int | None:
    """The sequence number a COMMIT or ABORT record names (its mac unchecked); None otherwise."""
    fields = commit_fields(rtype, body)
    if fields is not None:
        return fields[0]
    if rtype == ABORT and len(body) == ABORT_BODY.size:
        return int(ABORT_BODY.unpack(body)[0])
    return None


def is_dek_record(rtype: int, body: bytes) -> bool:
    """Whether a framed record is a DEK record (its body starts with the 16-byte ``dek_id``)."""
    return rtype == DEK and len(body) == DEK_SIZE


def frame_record(data: bytes, pos: int) -> tuple[int, int, bytes] | None:
    """The complete record at ``pos`` of ``data`` (bytes after the header) as ``(end offset, type,
    body)``; None at the end, at a torn tail (a record cut short) or at zeros a power loss left.
    Nothing is authenticated here."""
    if pos + RECORD.size > len(data):
        return None
    rtype, length = RECORD.unpack_from(data, pos)
    if rtype == 0 and not any(data[pos:]):
        return None  # zeros after a power loss (delayed allocation): a torn tail, cut on next append
    end = pos + RECORD.size + length
    if end > len(data):
        return None  # torn or still-being-written tail
    return end, rtype, data[pos + RECORD.size : end]


def frame_records(data: bytes) -> tuple[list[tuple[int, int, bytes]], int]:
    """The complete records at the start of ``data`` (:func:`frame_record` one after the other),
    and the offset where framing stopped."""
    out: list[tuple[int, int, bytes]] = []
    pos = 0
    while (framed := frame_record(data, pos)) is not None:
        out.append(framed)
        pos = framed[0]
    return out, pos


def dek_run(data: bytes, pos: int, *, at_least: int = 1) -> int:
    """How many complete DEK records of :data:`DEK_SIZE` follow one another in ``data`` from
    ``pos``; 0 as soon as it is clear there are fewer than ``at_least``. Each record's header is
    checked, a byte column at a time over growing windows, so a long run is measured at the
    speed of a byte copy and a short one costs a few slices."""
    step = DEK_RECORD_SIZE
    if at_least > 1 and not data.startswith(DEK_RECORD, pos + (at_least - 1) * step):
        return 0
    count, window = 0, 16
    while (n := min(window, (len(data) - pos) // step)) > 0:
        end = pos + n * step
        columns = [data[pos + i : end : step] for i in range(RECORD.size)]
        whole = min(len(col) - len(col.lstrip(DEK_RECORD[i : i + 1])) for i, col in enumerate(columns))
        count += whole
        if whole < n:
            break
        pos, window = end, window * 4
    return count if count >= at_least else 0


def dek_records_of(run: bytes, dek_id: bytes) -> Iterator[int]:
    """Where the records of ``dek_id`` start in ``run`` (whole DEK records back to back, as
    :func:`dek_run` measured them), the last first: the id found where a record's id starts, never
    bytes inside a wrapped key that happen to equal it."""
    end = len(run)
    while (at := run.rfind(dek_id, 0, end)) >= 0:
        if at % DEK_RECORD_SIZE == RECORD.size:
            yield at - RECORD.size
        end = at + len(dek_id) - 1


def newest_dek_epoch(run: bytes) -> int:
    """The largest epoch the DEK records of ``run`` name (whole records, as :func:`dek_run`
    measured them; 0 for none): the epoch's four big-endian bytes are read a column at a time."""
    at = RECORD.size + DEK_HEAD.size - 4
    columns = [run[at + i :: DEK_RECORD_SIZE] for i in range(4)]
    if not any(col.strip(b"\0") for col in columns[:3]):
        return max(columns[3], default=0)  # every epoch below 256: the low byte decides
    return int.from_bytes(bytes(max(zip(*columns, strict=True))), "big")
