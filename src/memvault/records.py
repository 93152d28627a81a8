"""Encrypted record formats: content blobs, node records, index shards, commit metadata.

Pure encode/decode functions over :mod:`memvault.crypto`; no I/O. Each format binds its
ciphertext to the store and to its identity through the associated data, so a record moved
between paths, versions, shards or stores fails authentication. ``docs/format.md`` restates
every layout here byte for byte.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Literal

from . import crypto
from .errors import IntegrityError

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
]

BLOB_MAGIC = b"MVB1"
_BLOB_HEADER = struct.Struct(">4s16s16sQ16s")
SHARD_MAGIC = b"MVI1"
_SHARD_ENTRY = struct.Struct(">32s16sI")
_NODE_AAD = b"memvault/v1/node"
_SHARD_AAD = b"memvault/v1/index"
_META_AAD = b"memvault/v1/meta"
_COMMIT_TAG = b"memvault/v1/commit"

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

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time,
            "actor": self.actor,
            "session": self.session,
            "command": self.command,
            "paths": list(self.paths),
            "findings": self.findings,
        }


def _json_bytes(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


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
    if header != _BLOB_HEADER.pack(BLOB_MAGIC, store_id, node.file_id, node.version, node.dek_id):
        raise IntegrityError()
    frame = crypto.open_sealed(dek, blob[_BLOB_HEADER.size :], _blob_aad(header, node.path))
    data = crypto.unpad(frame)
    if crypto.sha256(data) != node.sha256 or len(data) != node.size:
        raise IntegrityError()
    return data


# -- node records --------------------------------------------------------------------------------


def _node_aad(store_id: bytes, token: bytes, dek_id: bytes) -> bytes:
    return _NODE_AAD + store_id + token + dek_id


def seal_node(dek: bytes, store_id: bytes, node: Node) -> Node:
    """Return ``node`` with ``sealed`` set: ``seal(DEK, pad(json), aad=prefix||store||token||dek_id)``."""
    record = {
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
    sealed = crypto.seal(dek, crypto.pad(_json_bytes(record)), _node_aad(store_id, node.token, node.dek_id))
    return Node(
        node.path, node.kind, node.token, node.file_id, node.version, node.dek_id, node.size,
        node.sha256, node.mtime, node.blob_id, node.ct_sha256, node.binary, sealed,
    )  # fmt: skip


def open_node(dek: bytes, store_id: bytes, token: bytes, dek_id: bytes, sealed: bytes) -> Node:
    """Decrypt and validate a node record."""
    frame = crypto.open_sealed(dek, sealed, _node_aad(store_id, token, dek_id))
    try:
        r = json.loads(crypto.unpad(frame))
        kind = r["k"]
        if kind not in ("file", "dir"):
            raise ValueError
        node = Node(
            path=str(r["p"]),
            kind=kind,
            token=token,
            file_id=bytes.fromhex(r["f"]),
            version=int(r["v"]),
            dek_id=dek_id,
            size=int(r["s"]),
            sha256=bytes.fromhex(r["h"]),
            mtime=float(r["t"]),
            blob_id=str(r["b"]).encode("ascii"),
            ct_sha256=bytes.fromhex(r["c"]),
            binary=bool(r["x"]),
            sealed=sealed,
        )
    except (ValueError, KeyError, TypeError, UnicodeError):
        raise IntegrityError() from None
    return node


# -- index shards --------------------------------------------------------------------------------


def encode_shard(key: bytes, store_id: bytes, shard: bytes, nodes: list[Node]) -> bytes:
    """``"MVI1" || seal(K_index, pad(entries), aad=prefix||store||shard)``, entries sorted by token.

    Entry: ``token(32) || dek_id(16) || u32 len || sealed node record``.
    """
    body = b"".join(
        _SHARD_ENTRY.pack(n.token, n.dek_id, len(n.sealed)) + n.sealed for n in sorted(nodes, key=lambda n: n.token)
    )
    return SHARD_MAGIC + crypto.seal(key, crypto.pad(body), _SHARD_AAD + store_id + shard)


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
    return crypto.seal(key, crypto.pad(_json_bytes(meta.to_json())), _META_AAD + store_id)


def open_meta(key: bytes, store_id: bytes, sealed: bytes) -> CommitMeta:
    frame = crypto.open_sealed(key, sealed, _META_AAD + store_id)
    try:
        r = json.loads(crypto.unpad(frame))
        return CommitMeta(
            seq=int(r["seq"]),
            time=float(r["time"]),
            actor=str(r["actor"]),
            session=str(r["session"]),
            command=str(r["command"]),
            paths=tuple(str(p) for p in r["paths"]),
            findings={str(k): int(v) for k, v in r["findings"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise IntegrityError() from None


def commit_tag(key: bytes, store_id: bytes, seq: int, parent_id: bytes, tree_id: bytes, sealed_meta: bytes) -> bytes:
    """HMAC chain link: binds seq, parent, tree and the sealed metadata of a commit."""
    msg = b"|".join([_COMMIT_TAG, store_id, struct.pack(">Q", seq), parent_id, tree_id, crypto.sha256(sealed_meta)])
    return crypto.mac(key, msg)
