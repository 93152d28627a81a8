"""Encrypted record formats: content blobs, node records, index shards, commit metadata,
and the commit message that carries the metadata and the chain tag.

Pure encode/decode functions over :mod:`memvault.crypto`; no I/O. Each format binds its
ciphertext to the store and to its identity through the associated data, so a record moved
between paths, versions, shards or stores fails authentication. ``docs/format.md`` restates
every layout here byte for byte.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import crypto
from ..errors import IntegrityError

__all__ = [
    "Node",
    "CommitMeta",
    "BLOB_MAGIC",
    "encode_blob",
    "decode_blob",
    "seal_node",
    "open_node",
    "encode_shard",
    "decode_shard",
    "seal_meta",
    "open_meta",
    "commit_tag",
    "commit_message",
    "parse_commit_message",
]

BLOB_MAGIC = b"MVB1"
_BLOB_HEADER = struct.Struct(">4s16s16sQ16s")
SHARD_MAGIC = b"MVI1"
#: Format version 2 frames index shards in 64-byte steps below 4 KiB (docs/format.md 5.4): every
#: entry holds a node record already padded to 256-byte steps, so coarser steps hide little more.
_SHARD_PAD_STEP = {1: 256, 2: 64}
_SHARD_ENTRY = struct.Struct(">32s16sI")
_NODE_AAD = b"memvault/v1/node"
_NODE_V2_MAGIC = b"N2"
#: Compact node record: magic, kind (0 file, 1 dir), flags (bit 0: binary), file_id, version, size, mtime.
_NODE_V2_HEAD = struct.Struct(">2sBB16sQQd")
#: ...then, for a file only: SHA-256 of the content, raw git id of the content blob, SHA-256 of the blob.
_NODE_V2_FILE = struct.Struct(">32s20s32s")
_SHARD_AAD = b"memvault/v1/index"
_META_AAD = b"memvault/v1/meta"
_COMMIT_TAG = b"memvault/v1/commit"
_BRANCH_TAG = b"memvault/v1/branch-commit"

NodeKind = Literal["file", "dir"]


@dataclass(frozen=True, slots=True)
class Node:
    """One file or directory of a tree state (decrypted view of a node record)."""

    path: str
    kind: NodeKind
    token: bytes  #: HMAC(K_name, path): the opaque identity in git trees and the index
    file_id: bytes  #: random per lineage; kept across edits and renames
    version: int  #: increases by one per change of this lineage
    dek_id: bytes  #: data key of this version (keyring)
    size: int = 0  #: plaintext bytes (files)
    sha256: bytes = b""  #: SHA-256 of the plaintext (files)
    mtime: float = 0.0  #: seconds since the epoch of this version
    blob_id: bytes = b""  #: git id of the content blob (files)
    ct_sha256: bytes = b""  #: SHA-256 of the content blob bytes (files)
    binary: bool = False  #: content was put in as bytes (e.g. an image), not text
    sealed: bytes = b""  #: the node record as stored in the index shard
    redacted: bool = False  #: its data key was destroyed: path, size and content are gone

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


@dataclass(frozen=True, slots=True)
class CommitMeta:
    """What one commit did; stored encrypted in the commit message."""

    seq: int
    time: float
    actor: str
    session: str
    command: str
    paths: tuple[str, ...]
    findings: dict[str, int]
    #: The branch a commit of a side branch belongs to (``dream/<id>``); "" on ``main``.
    branch: str = ""
    #: What a command records beside its paths (a dream's fork point and model, a merge's dream id).
    extra: dict[str, str] = field(default_factory=dict)
    #: The settings MAC of the ``memvault.json`` in force after this commit of ``main`` (b"": none
    #: recorded, as in commits of earlier releases and of side branches; docs/format.md 1.1).
    settings_digest: bytes = b""
    #: ``{"version", "settings"}`` of the ``memvault.json`` this commit put in force (``init``,
    #: ``config``, ``upgrade``), as written; None on every other commit.
    settings_file: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seq": self.seq,
            "time": self.time,
            "actor": self.actor,
            "session": self.session,
            "command": self.command,
            "paths": list(self.paths),
            "findings": self.findings,
        }
        if self.branch:
            out["branch"] = self.branch
        if self.extra:
            out["extra"] = self.extra
        return out

    def record_json(self) -> dict[str, Any]:
        """What :func:`seal_meta` encodes: :meth:`to_json` (what history shows) and the settings record."""
        out = self.to_json()
        if self.settings_digest:
            out["settings"] = crypto.b64encode(self.settings_digest)
        if self.settings_file is not None:
            out["settings_file"] = self.settings_file
        return out


def _json_bytes(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


# -- strict decoding of the JSON inside a record ---------------------------------------------------
#
# Node records and commit metadata are authenticated, but their decoder must still hold against
# a holder of the key (or a bug) writing nonsense: every field is checked for its exact JSON type
# and range here, so no later ``struct.pack``, ``time.gmtime`` or ``int()`` can raise anything but
# IntegrityError. JSON ``true`` is not an integer, ``NaN``/``Infinity`` are not times, and nesting
# deeper than the records ever use is refused before it can exhaust the interpreter's stack.

#: Largest u64 (versions and sequence numbers are u64 in the blob header, keyring and commit tag).
_U64_MAX = 2**64 - 1
#: Largest sizes and sequence numbers (signed 64-bit, what every consumer can pack).
_I64_MAX = 2**63 - 1
#: Times are seconds since the epoch, from 0 up to the year 10000 (what time.gmtime can format).
_MAX_TIME = 253402300800.0
#: Deepest JSON nesting a record may use (metadata: object -> list/object -> scalar).
_MAX_JSON_DEPTH = 8
#: A JSON string (with escapes) or one bracket: enough to measure nesting without recursion.
_JSON_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _no_constant(name: str) -> object:
    raise ValueError(name)  # NaN, Infinity, -Infinity: not JSON, and never written


#: One decoder for every record (``json.loads`` with ``parse_constant`` builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _json_object(data: bytes) -> dict[str, Any]:
    """The JSON object in ``data``, or IntegrityError (not UTF-8, not JSON, too deep, not an object)."""
    # Nesting deeper than _MAX_JSON_DEPTH needs more than that many "[" or "{" bytes, so a record
    # with fewer (every record memvault writes) cannot fail the scan: it runs only when it could.
    if data.count(b"[") + data.count(b"{") > _MAX_JSON_DEPTH:
        depth = 0
        for token in _JSON_STRUCTURE.finditer(data):  # strings are skipped whole
            char = token.group()
            if char in (b"[", b"{"):
                depth += 1
                if depth > _MAX_JSON_DEPTH:
                    raise IntegrityError()
            elif char in (b"]", b"}"):
                depth -= 1
    try:
        obj = _DECODER.decode(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise IntegrityError() from None
    if type(obj) is not dict:
        raise IntegrityError()
    return obj


def _int(value: object, lo: int = 0, hi: int = _U64_MAX) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise ValueError
    return value


def _time(value: object) -> float:
    if type(value) is int:
        value = float(value)
    if type(value) is not float or not math.isfinite(value) or not 0 <= value < _MAX_TIME:
        raise ValueError
    return value


def _str(value: object) -> str:
    if type(value) is not str:
        raise ValueError
    value.encode("utf-8")  # a lone surrogate ("\\ud800" in JSON) is not text: UnicodeEncodeError
    return value


def _hex(value: object, size: int) -> bytes:
    """``size`` bytes written as exactly ``2 * size`` lowercase hex digits, else ValueError.

    ``bytes.fromhex`` refuses any character but ASCII hex digits and whitespace (ValueError); the
    exact round trip then refuses uppercase digits and whitespace. What passes is ASCII, so no
    separate text (surrogate) check is needed.
    """
    if type(value) is not str or len(value) != 2 * size:
        raise ValueError
    data = bytes.fromhex(value)
    if data.hex() != value:
        raise ValueError
    return data


# -- content blobs -------------------------------------------------------------------------------


def _blob_aad(header: bytes, path: str) -> bytes:
    return header + path.encode("utf-8")


def encode_blob(
    dek: bytes, *, store_id: bytes, file_id: bytes, version: int, dek_id: bytes, path: str, data: bytes
) -> bytes:
    """``header || seal(DEK, pad(data), aad=header || path)``."""
    header = _BLOB_HEADER.pack(BLOB_MAGIC, store_id, file_id, version, dek_id)
    return header + crypto.seal(dek, crypto.pad(data), _blob_aad(header, path))


def decode_blob(dek: bytes, blob: bytes, *, store_id: bytes, node: Node) -> bytes:
    """The plaintext of ``node``'s content blob; any mismatch is :class:`IntegrityError`."""
    if len(blob) < _BLOB_HEADER.size + crypto.SEAL_OVERHEAD:
        raise IntegrityError()
    header = blob[: _BLOB_HEADER.size]
    try:
        expected = _BLOB_HEADER.pack(BLOB_MAGIC, store_id, node.file_id, node.version, node.dek_id)
    except struct.error:  # a version outside u64 cannot be any blob's
        raise IntegrityError() from None
    if len(store_id) != 16 or len(node.file_id) != 16 or len(node.dek_id) != 16 or header != expected:
        raise IntegrityError()
    frame = crypto.open_sealed(dek, memoryview(blob)[_BLOB_HEADER.size :], _blob_aad(header, node.path))
    data = crypto.unpad(frame)
    if crypto.sha256(data) != node.sha256 or len(data) != node.size:
        raise IntegrityError()
    return data


# -- node records --------------------------------------------------------------------------------


def _node_aad(store_id: bytes, token: bytes, dek_id: bytes) -> bytes:
    return _NODE_AAD + store_id + token + dek_id


def seal_node(dek: bytes, store_id: bytes, node: Node, *, encoding: int = 2) -> Node:
    """Return ``node`` with ``sealed`` set: ``seal(DEK, pad(record), aad=prefix||store||token||dek_id)``.

    ``encoding`` 2 (format version 2 stores): the compact binary record of docs/format.md 5.2;
    1 (format version 1 stores): canonical JSON. :func:`open_node` reads both.
    """
    if encoding == 2:
        is_file = node.kind == "file"
        if len(node.file_id) != 16 or is_file and (len(node.sha256) != 32 or len(node.ct_sha256) != 32):
            raise ValueError("a node record needs a 16-byte file id and, for a file, two 32-byte digests")
        record = _NODE_V2_HEAD.pack(
            _NODE_V2_MAGIC, 0 if is_file else 1, 1 if node.binary else 0, node.file_id, node.version, node.size,
            node.mtime,
        )  # fmt: skip
        if is_file:
            record += _NODE_V2_FILE.pack(node.sha256, bytes.fromhex(node.blob_id.decode("ascii")), node.ct_sha256)
        record += node.path.encode("utf-8")
    elif encoding == 1:
        record = _json_bytes(
            {
                "p": node.path,
                "k": node.kind,
                "f": node.file_id.hex(),
                "v": node.version,
                "s": node.size,
                "h": node.sha256.hex(),
                "t": node.mtime,
                "b": node.blob_id.decode("ascii"),
                "c": node.ct_sha256.hex(),
                "x": node.binary,
            }
        )
    else:
        raise ValueError(f"unknown node record encoding {encoding!r}")
    sealed = crypto.seal(dek, crypto.pad(record), _node_aad(store_id, node.token, node.dek_id))
    return Node(
        node.path, node.kind, node.token, node.file_id, node.version, node.dek_id, node.size,
        node.sha256, node.mtime, node.blob_id, node.ct_sha256, node.binary, sealed,
    )  # fmt: skip


def open_node(dek: bytes, store_id: bytes, token: bytes, dek_id: bytes, sealed: bytes) -> Node:
    """Decrypt and validate a node record of either encoding (every field's type and range,
    docs/format.md 5.2); anything else is :class:`IntegrityError`.

    A record starting with ``N2`` is compact binary; any other is JSON, where keys other than the
    ten of format version 1 are ignored.
    """
    frame = crypto.open_sealed(dek, sealed, _NODE_AAD + store_id + token + dek_id)
    data = crypto.unpad(frame)
    if data[:2] == _NODE_V2_MAGIC:
        return _open_node_v2(data, token, dek_id, sealed)
    r = _json_object(data)
    try:
        kind = r["k"]
        if kind == "file":
            is_file = True
        elif kind == "dir":
            is_file = False
        else:
            raise ValueError
        path = r["p"]
        if type(path) is not str or not path:
            raise ValueError
        path.encode("utf-8")  # a lone surrogate is not text: UnicodeEncodeError
        size = r["s"]
        if type(size) is not int or not 0 <= size <= _I64_MAX:
            raise ValueError
        blob_text = r["b"]
        if type(blob_text) is not str:
            raise ValueError
        if is_file:
            _hex(blob_text, 20)  # a file's content blob is a git object id (40 hex)
            sha256 = _hex(r["h"], 32)
            ct_sha256 = _hex(r["c"], 32)
        else:
            # A directory has no content: no blob, size 0, empty digests.
            if blob_text or size or r["h"] != "" or r["c"] != "":
                raise ValueError
            sha256 = ct_sha256 = b""
        binary = r["x"]
        if type(binary) is not bool:
            raise ValueError
        version = r["v"]
        if type(version) is not int or not 1 <= version <= _U64_MAX:
            raise ValueError
        return Node(
            path, kind, token, _hex(r["f"], 16), version, dek_id, size, sha256, _time(r["t"]),
            blob_text.encode("ascii"), ct_sha256, binary, sealed,
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, UnicodeError):
        raise IntegrityError() from None


def _open_node_v2(data: bytes, token: bytes, dek_id: bytes, sealed: bytes) -> Node:
    try:
        _, kind_code, flags, file_id, version, size, mtime = _NODE_V2_HEAD.unpack_from(data)
        pos = _NODE_V2_HEAD.size
        if kind_code == 0:
            sha256, blob_raw, ct_sha256 = _NODE_V2_FILE.unpack_from(data, pos)
            pos += _NODE_V2_FILE.size
            kind: NodeKind = "file"
            blob_text = blob_raw.hex().encode("ascii")
        elif kind_code == 1 and size == 0:  # a directory has no content: no blob, size 0, no digests
            kind, sha256, ct_sha256, blob_text = "dir", b"", b"", b""
        else:
            raise ValueError
        if flags > 1 or version < 1 or size > _I64_MAX or pos == len(data):
            raise ValueError
        path = data[pos:].decode("utf-8")  # strict: refuses invalid UTF-8 and encoded surrogates
        return Node(
            path, kind, token, file_id, version, dek_id, size, sha256, _time(mtime), blob_text, ct_sha256,
            flags == 1, sealed,
        )  # fmt: skip
    except (ValueError, struct.error):  # UnicodeDecodeError is a ValueError
        raise IntegrityError() from None


# -- index shards --------------------------------------------------------------------------------


def encode_shard(key: bytes, store_id: bytes, shard: bytes, nodes: list[Node], *, version: int = 2) -> bytes:
    """``"MVI1" || seal(K_index, pad(entries), aad=prefix||store||shard)``, entries sorted by token,
    framed in the padding steps of format ``version`` (1: 256 bytes, 2: 64 bytes below 4 KiB).

    Entry: ``token(32) || dek_id(16) || u32 len || sealed node record``.
    """
    body = b"".join(
        _SHARD_ENTRY.pack(n.token, n.dek_id, len(n.sealed)) + n.sealed for n in sorted(nodes, key=lambda n: n.token)
    )
    frame = crypto.pad(body, _SHARD_PAD_STEP[version])
    return SHARD_MAGIC + crypto.seal(key, frame, _SHARD_AAD + store_id + shard)


def decode_shard(key: bytes, store_id: bytes, shard: bytes, blob: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """``[(token, dek_id, sealed)]`` of a shard blob."""
    if not blob.startswith(SHARD_MAGIC):
        raise IntegrityError()
    body = crypto.unpad(crypto.open_sealed(key, blob[len(SHARD_MAGIC) :], _SHARD_AAD + store_id + shard))
    out = []
    pos = 0
    while pos < len(body):
        if pos + _SHARD_ENTRY.size > len(body):
            raise IntegrityError()
        token, dek_id, n = _SHARD_ENTRY.unpack_from(body, pos)
        pos += _SHARD_ENTRY.size
        if pos + n > len(body):
            raise IntegrityError()
        out.append((token, dek_id, body[pos : pos + n]))
        pos += n
    return out


# -- commit metadata and tag -------------------------------------------------------------------


def seal_meta(key: bytes, store_id: bytes, meta: CommitMeta) -> bytes:
    return crypto.seal(key, crypto.pad(_json_bytes(meta.record_json())), _META_AAD + store_id)


def open_meta(key: bytes, store_id: bytes, sealed: bytes) -> CommitMeta:
    """Decrypt and validate commit metadata (exact JSON types and ranges, docs/format.md 5.5).

    ``branch``, ``extra``, ``settings`` and ``settings_file`` are optional; other keys are ignored.
    """
    frame = crypto.open_sealed(key, sealed, _META_AAD + store_id)
    r = _json_object(crypto.unpad(frame))
    try:
        paths, findings = r["paths"], r["findings"]
        if type(paths) is not list or type(findings) is not dict:
            raise ValueError
        return CommitMeta(
            seq=_int(r["seq"], 0, _I64_MAX),
            time=_time(r["time"]),
            actor=_str(r["actor"]),
            session=_str(r["session"]),
            command=_str(r["command"]),
            paths=tuple(_str(p) for p in paths),
            findings={_str(k): _int(v, 0, _I64_MAX) for k, v in findings.items()},
            branch=_str(r.get("branch", "")),
            extra=_str_map(r.get("extra", {})),
            settings_digest=_settings_digest(r.get("settings")),
            settings_file=_settings_file(r.get("settings_file")),
        )
    except (ValueError, KeyError, TypeError):
        raise IntegrityError() from None


def _settings_digest(value: object) -> bytes:
    if value is None:
        return b""
    mac = crypto.b64decode(value)  # canonical base64, else IntegrityError
    if len(mac) != 32:
        raise ValueError
    return mac


def _settings_file(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if type(value) is not dict or set(value) != {"version", "settings"} or type(value["settings"]) is not dict:
        raise ValueError
    _int(value["version"], 1, _I64_MAX)
    return value


def _str_map(value: object) -> dict[str, str]:
    if type(value) is not dict:
        raise ValueError
    return {_str(k): _str(v) for k, v in value.items()}


def commit_tag(
    key: bytes, store_id: bytes, seq: int, parent_id: bytes, tree_id: bytes, sealed_meta: bytes, *, branch: str = ""
) -> bytes:
    """HMAC chain link: binds seq, parent, tree and the sealed metadata of a commit, and for a
    commit of a side branch (``branch`` not empty) that branch's name, in another domain, so a
    branch commit never authenticates on ``main`` or on another branch (docs/format.md §5.6)."""
    if not 0 <= seq <= _U64_MAX:
        raise IntegrityError()
    head = [_COMMIT_TAG, store_id]
    if branch:
        name = branch.encode("utf-8")
        head = [_BRANCH_TAG, store_id, struct.pack(">H", len(name)) + name]
    msg = b"|".join([*head, struct.pack(">Q", seq), parent_id, tree_id, crypto.sha256(sealed_meta)])
    return crypto.mac(key, msg)


_MESSAGE_RE = re.compile(rb"\Amemvault\n\nMemvault-Meta: ([A-Za-z0-9+/=]+)\nMemvault-Tag: ([0-9a-f]{64})\n\Z")


def commit_message(sealed_meta: bytes, tag: bytes) -> bytes:
    """The message of a memvault commit: its sealed metadata and chain tag (docs/format.md §5.6)."""
    return (
        b"memvault\n\nMemvault-Meta: "
        + crypto.b64encode(sealed_meta).encode()
        + b"\nMemvault-Tag: "
        + tag.hex().encode()
        + b"\n"
    )


def parse_commit_message(message: bytes) -> tuple[bytes, bytes]:
    """``(sealed metadata, chain tag)`` of a commit message :func:`commit_message` wrote.

    Raises:
        IntegrityError: the message does not follow the grammar.
    """
    m = _MESSAGE_RE.match(message)
    if m is None:
        raise IntegrityError()
    return crypto.b64decode(m.group(1).decode()), bytes.fromhex(m.group(2).decode())
