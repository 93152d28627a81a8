"""Fuzz every decoder of what memvault reads from disk.

Malformed or hostile input must raise nothing but memvault's own errors (here: IntegrityError),
never loop and never allocate without bound. Inputs are structured mutations of valid encodings
(bit flips, truncation, extension, splices, length fields set to extreme values, JSON type
confusion, deep nesting), both of hand-made seeds and of a real store's files. Encrypted formats
are fuzzed twice: the ciphertext (authentication must refuse it) and the plaintext re-sealed
with the key (the parser behind the AEAD must hold against a key holder or a bug).

Runs are derandomized (no example database), so CI sees the same examples every time. Crashers
found are kept in ``tests/fuzz_corpus/<decoder>/`` and replayed by ``test_corpus_replay``, with
the exact error class from ``tests/fuzz_corpus/MANIFEST.json``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import struct
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memvault
from conftest import FAST_KDF, PASSPHRASE, make_odd_file
from memvault import crypto, errors
from memvault.errors import IntegrityError, MemvaultError
from memvault.format import records
from memvault.format.records import CommitMeta, Node
from memvault.git.objects import parse_tree_strict
from memvault.git.repo import GitStore
from memvault.keys import slots as keys
from memvault.keys.keyring import Keyring
from memvault.settings import StoreSettings

#: Examples per fuzz test: 120 in CI; ``MEMVAULT_FUZZ_SCALE=50`` runs fifty times as many, with a
#: seed from ``MEMVAULT_FUZZ_SEED`` instead of the fixed derandomized sequence (benchmarks/long_checks.py).
_SCALE = int(os.environ.get("MEMVAULT_FUZZ_SCALE", "1"))
_SEEDED = "MEMVAULT_FUZZ_SEED" in os.environ
FUZZ = settings(
    max_examples=120 * _SCALE,
    derandomize=not _SEEDED,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FUZZ_FEW = settings(FUZZ, max_examples=40 * _SCALE)

CORPUS = Path(__file__).resolve().parent.parent / "fuzz_corpus"
KEY = bytes(range(32))
STORE_ID = bytes(range(100, 116))
TOKEN = crypto.sha256(b"token")
DEK_ID = bytes(range(16))
SHARD = TOKEN.hex()[:2].encode()


# -- mutation strategies ---------------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """One to three structured edits of ``seed``."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 3))):
        n = len(data)
        op = draw(st.sampled_from(["flip", "truncate", "extend", "splice", "u8", "u16", "u32", "u64", "dup"]))
        if op == "flip" and n:
            data[draw(st.integers(0, n - 1))] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[draw(st.integers(0, n)) :]
        elif op == "extend":
            data += draw(st.binary(max_size=64))
        elif op == "splice":
            i = draw(st.integers(0, n))
            data[i : i + draw(st.integers(0, 16))] = draw(st.binary(max_size=16))
        elif op in ("u8", "u16", "u32", "u64") and n:
            size = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}[op]
            i = draw(st.integers(0, max(0, n - size)))
            top = 2 ** (8 * size) - 1
            value = draw(st.sampled_from([0, 1, top, top // 2 + 1, n, n + 1, max(0, n - 1)])) & top
            data[i : i + size] = value.to_bytes(size, "big")
        elif op == "dup" and n:
            i = draw(st.integers(0, n - 1))
            data[i:i] = data[i : i + draw(st.integers(1, 64))]
    return bytes(data)


HOSTILE_JSON: list[object] = [
    None, True, False, 0, -1, 1, 1.5, -0.0, 2**63, 2**64, -(2**63), 10**30, 1e308, -1e308,
    "", "x", "0" * 64, "0" * 32, "0" * 40, "Z" * 64, "\ud800", "\x00", "/memories/a", [], {}, [1], ["x"],
    {"a": 1}, {"a": "x"}, [[[[[[[[[[]]]]]]]]]],
]  # fmt: skip


@st.composite
def confused_json(draw: st.DrawFn, seed: dict[str, Any]) -> bytes:
    """``seed`` with keys deleted, added, or set to values of the wrong type or range; or raw
    texts JSON readers trip on (NaN, 1e999, deep nesting, duplicate keys, not an object)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(
            st.sampled_from(
                [
                    b"[" * 100_000 + b"]" * 100_000,
                    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
                    b"[" * 100_000,
                    json.dumps(seed).encode().replace(b"1", b"NaN", 1),
                    json.dumps(seed).encode().replace(b"1", b"1e999", 1),
                    json.dumps(seed).encode().replace(b"0", b"-Infinity", 1),
                    json.dumps(seed).encode()[:-1] + b',"v":1,"v":"x"}',
                    b"\xff\xfe" + json.dumps(seed).encode("utf-16-le"),
                    json.dumps(list(seed.items())).encode(),
                    b"1" * 5000,
                    b'"' + b"a" * 1000,
                    b"",
                ]
            )
        )
    obj = dict(seed)
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(obj) + ["zz"]))
        action = draw(st.sampled_from(["set", "set", "set", "delete", "nest"]))
        if action == "delete":
            obj.pop(key, None)
        elif action == "nest":
            obj[key] = [obj.get(key)] * draw(st.integers(1, 3))
        else:
            obj[key] = draw(st.sampled_from(HOSTILE_JSON))
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


def _only_memvault_errors(fn: Callable[[], object], *allowed: type[MemvaultError]) -> object:
    """Run ``fn``; any exception must be one of ``allowed`` (default IntegrityError)."""
    try:
        return fn()
    except allowed or (IntegrityError,):
        return None


# -- hand-made valid encodings ----------------------------------------------------------------------

FILE_NODE = Node(
    "/memories/notes/a.md", "file", TOKEN, bytes(range(16, 32)), 3, DEK_ID, size=5,
    sha256=crypto.sha256(b"hello"), mtime=1732900000.25, blob_id=b"0123456789abcdef0123456789abcdef01234567",
    ct_sha256=bytes(32), binary=False,
)  # fmt: skip
BLOB = records.encode_blob(
    KEY, store_id=STORE_ID, file_id=FILE_NODE.file_id, version=3, dek_id=DEK_ID, path=FILE_NODE.path, data=b"hello"
)
NODE_JSON: dict[str, Any] = {
    "p": FILE_NODE.path, "k": "file", "f": FILE_NODE.file_id.hex(), "v": 3, "s": 5, "h": FILE_NODE.sha256.hex(),
    "t": 1732900000.25, "b": FILE_NODE.blob_id.decode(), "c": bytes(32).hex(), "x": False,
}  # fmt: skip
DIR_JSON: dict[str, Any] = {**NODE_JSON, "k": "dir", "s": 0, "h": "", "b": "", "c": ""}
META = CommitMeta(7, 1732900000.5, "agent", "session-1", "create", ("/memories/a.md",), {"email": 1})
META_JSON: dict[str, Any] = META.to_json()
SEALED_NODE = records.seal_node(KEY, STORE_ID, FILE_NODE).sealed
SHARD_BLOB = records.encode_shard(KEY, STORE_ID, SHARD, [records.seal_node(KEY, STORE_ID, FILE_NODE)])
SEALED_META = records.seal_meta(KEY, STORE_ID, META)


def _seal_node_text(text: bytes) -> bytes:
    return crypto.seal(KEY, crypto.pad(text), b"memvault/v1/node" + STORE_ID + TOKEN + DEK_ID)


def _seal_meta_text(text: bytes) -> bytes:
    return crypto.seal(KEY, crypto.pad(text), b"memvault/v1/meta" + STORE_ID)


def _seal_shard_body(body: bytes) -> bytes:
    return b"MVI1" + crypto.seal(KEY, crypto.pad(body), b"memvault/v1/index" + STORE_ID + SHARD)


def _shard_body(nodes: list[Node]) -> bytes:
    return b"".join(struct.pack(">32s16sI", n.token, n.dek_id, len(n.sealed)) + n.sealed for n in nodes)


# -- a real store's files as seeds -----------------------------------------------------------------


class RealStore:
    """A small real store, built once per session; its files and keys are the seeds."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="memvault-fuzz-")) / "store"
        store = memvault.MemoryStore.create(
            self.root, passphrase=PASSPHRASE, kdf=FAST_KDF, settings=StoreSettings(durability="none")
        )
        store.put_file("/memories/a.md", "alpha\n")
        store.put_file("/memories/notes/b.md", "bravo " * 50)
        store.put_file("/memories/img.bin", bytes(range(256)))
        store.transact(lambda t: None, command="noop", paths=("/memories/a.md",), actor="agent", session="s")
        self.store_id = store.store_id
        self.keys = store._keys
        state = store.state_at(store.head[0])
        self.node = state.nodes["/memories/notes/b.md"]
        self.dek = store.keyring.dek(self.node.dek_id)
        self.blob = store.git.read_blob(self.node.blob_id)
        shard, shard_blob_id = next(iter(store.index_blobs(state.tree_id).items()))
        self.shard_name = shard
        self.shard_blob = store.git.read_blob(shard_blob_id)
        self.commit_raw = store.git._get(store.head[0]).as_raw_string()
        tree_id = store.git.read_commit(store.head[0])[0]
        self.trees = [store.git._raw_tree(tree_id)]
        for _name, (_mode, sub) in store.git.read_tree(tree_id).items():
            self.trees.append(store.git._raw_tree(sub))
        message = store.git.read_commit(store.head[0])[2]
        self.sealed_meta = crypto.b64decode(message.split(b"Memvault-Meta: ")[1].split(b"\n")[0].decode())
        self.slot_file = next((self.root / "keys").iterdir()).read_bytes()
        self.config = (self.root / "memvault.json").read_bytes()
        self.keyring = (self.root / "keyring").read_bytes()
        store.close()


@cache
def real() -> RealStore:
    return RealStore()


@pytest.fixture(scope="module", autouse=True)
def _cleanup_real_store() -> Iterator[None]:
    yield
    if real.cache_info().currsize:
        shutil.rmtree(real().root.parent, ignore_errors=True)


# -- content blobs ---------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_fuzz_blob(data: st.DataObject) -> None:
    """Ciphertext edits of a hand-made and a real blob; plaintext frame edits re-sealed."""
    r = real()
    seed = data.draw(st.sampled_from(["hand", "real", "frame"]))
    if seed == "hand":
        blob, dek, sid, node = data.draw(mutated(BLOB)), KEY, STORE_ID, FILE_NODE
    elif seed == "real":
        blob, dek, sid, node = data.draw(mutated(r.blob)), r.dek, r.store_id, r.node
    else:  # a frame whose length field lies, re-sealed under the blob's own header
        header = BLOB[:60]
        frame = data.draw(mutated(crypto.pad(b"hello")))
        blob, dek, sid, node = (
            header + crypto.seal(KEY, frame, header + FILE_NODE.path.encode()),
            KEY,
            STORE_ID,
            FILE_NODE,
        )
    out = _only_memvault_errors(lambda: records.decode_blob(dek, blob, store_id=sid, node=node))
    assert out is None or isinstance(out, bytes) and len(out) == node.size


# -- node records ----------------------------------------------------------------------------------


def _check_node(node: Node) -> None:
    """A node the decoder accepts is safe to use downstream (header packing, hex, times)."""
    assert type(node.version) is int and 1 <= node.version < 2**64
    assert type(node.size) is int and node.size >= 0
    assert len(node.file_id) == 16 and len(node.sha256) in (0, 32) and len(node.ct_sha256) in (0, 32)
    assert type(node.binary) is bool and math.isfinite(node.mtime)
    node.path.encode("utf-8")
    time.gmtime(node.mtime)
    records.seal_node(KEY, STORE_ID, node)
    _only_memvault_errors(lambda: records.decode_blob(KEY, BLOB, store_id=STORE_ID, node=node))


@FUZZ
@given(text=st.one_of(confused_json(NODE_JSON), confused_json(DIR_JSON)))
def test_fuzz_node_record_json(text: bytes) -> None:
    node = _only_memvault_errors(lambda: records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(text)))
    if node is not None:
        assert isinstance(node, Node)
        _check_node(node)


@FUZZ_FEW
@given(data=st.data())
def test_fuzz_node_record_ciphertext(data: st.DataObject) -> None:
    r = real()
    if data.draw(st.booleans()):
        sealed = data.draw(mutated(SEALED_NODE))
        _only_memvault_errors(lambda: records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, sealed))
    else:
        sealed = data.draw(mutated(r.node.sealed))
        _only_memvault_errors(lambda: records.open_node(r.dek, r.store_id, r.node.token, r.node.dek_id, sealed))


def test_valid_node_records_still_open() -> None:
    """Control for the fuzzers above: the seeds themselves decode."""
    fresh = records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(json.dumps(NODE_JSON).encode()))
    assert dataclasses.replace(fresh, sealed=b"") == dataclasses.replace(FILE_NODE, sealed=b"")
    assert dataclasses.replace(records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, SEALED_NODE), sealed=b"") == (
        dataclasses.replace(FILE_NODE, sealed=b"")
    )
    directory = records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(json.dumps(DIR_JSON).encode()))
    assert directory.is_dir and directory.blob_id == b""
    odd = {**NODE_JSON, "p": "/memories/[[[[[[[[[[{{{{{{{{{{.md", "zz": "a future field"}
    assert records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(json.dumps(odd).encode())).path == odd["p"]


# -- compact node records (encoding 2) ---------------------------------------------------------------

_NODE_AAD = b"memvault/v1/node" + STORE_ID + TOKEN + DEK_ID
DIR_NODE = dataclasses.replace(FILE_NODE, path="/memories/notes", kind="dir", size=0, sha256=b"", blob_id=b"",
                               ct_sha256=b"")  # fmt: skip
NODE_V2 = crypto.unpad(crypto.open_sealed(KEY, records.seal_node(KEY, STORE_ID, FILE_NODE).sealed, _NODE_AAD))
DIR_V2 = crypto.unpad(crypto.open_sealed(KEY, records.seal_node(KEY, STORE_ID, DIR_NODE).sealed, _NODE_AAD))
_HEAD = struct.Struct(">2sBB16sQQd")


@FUZZ
@given(text=st.one_of(mutated(NODE_V2), mutated(DIR_V2), st.binary(max_size=300).map(lambda b: b"N2" + b)))
def test_fuzz_node_record_v2(text: bytes) -> None:
    node = _only_memvault_errors(lambda: records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(text)))
    if node is not None:
        assert isinstance(node, Node)
        _check_node(node)
        # What opens re-encodes to the same record: no field is read loosely.
        assert crypto.unpad(crypto.open_sealed(KEY, records.seal_node(KEY, STORE_ID, node).sealed, _NODE_AAD)) == text


def _v2(kind: int = 0, flags: int = 0, version: int = 3, size: int = 5, mtime: float = 1.5, tail: bytes | None = None,
        path: bytes = b"/memories/a.md") -> bytes:  # fmt: skip
    head = _HEAD.pack(b"N2", kind, flags, bytes(16), version, size, mtime)
    return head + (bytes(84) if tail is None else tail) + path


def test_v2_seeds_open() -> None:
    """Control for the hostile records below: the same builder makes records that open."""
    node = records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(_v2()))
    assert (node.kind, node.version, node.size, node.mtime, node.path) == ("file", 3, 5, 1.5, "/memories/a.md")
    assert node.blob_id == b"0" * 40 and node.binary is False
    directory = records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(_v2(kind=1, size=0, tail=b"")))
    assert directory.is_dir and directory.sha256 == directory.blob_id == b""
    binary = records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(_v2(flags=1)))
    assert binary.binary is True
    assert dataclasses.replace(records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, SEALED_NODE), sealed=b"") == (
        dataclasses.replace(FILE_NODE, sealed=b"")
    )


@pytest.mark.parametrize(
    "record",
    [
        _v2(kind=2),  # neither file nor directory
        _v2(kind=1, size=5, tail=b""),  # a directory with content
        _v2(flags=2),
        _v2(flags=0x81),
        _v2(version=0),
        _v2(size=2**63),
        _v2(mtime=float("nan")),
        _v2(mtime=float("inf")),
        _v2(mtime=-1.0),
        _v2(mtime=253402300800.0),  # the year 10000
        _v2(path=b""),  # no path
        _v2(path=b"/memories/\xff.md"),  # not UTF-8
        _v2(path=b"/memories/\xed\xa0\x80.md"),  # an encoded surrogate
        _v2()[:40],  # truncated head
        _v2(tail=bytes(50), path=b""),  # truncated digests
        b"N2",
        b"N3" + _v2()[2:],  # another magic is read as JSON, which it is not
    ],
    ids=lambda r: r[:4].hex() + f"-{len(r)}",
)
def test_v2_hostile_records_refused(record: bytes) -> None:
    with pytest.raises(IntegrityError):
        records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(record))


# -- index shards ----------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_fuzz_shard(data: st.DataObject) -> None:
    r = real()
    seed = data.draw(st.sampled_from(["hand", "real", "body"]))
    if seed == "hand":
        args = (KEY, STORE_ID, SHARD, data.draw(mutated(SHARD_BLOB)))
    elif seed == "real":
        args = (r.keys.index, r.store_id, r.shard_name, data.draw(mutated(r.shard_blob)))
    else:  # entry framing edited behind the AEAD (entry length fields, truncation)
        nodes = [records.seal_node(KEY, STORE_ID, FILE_NODE)] * data.draw(st.integers(0, 3))
        args = (KEY, STORE_ID, SHARD, _seal_shard_body(data.draw(mutated(_shard_body(nodes)))))
    out = _only_memvault_errors(lambda: records.decode_shard(*args))
    if out is not None:
        total = sum(52 + len(sealed) for _t, _d, sealed in out)  # type: ignore[attr-defined]
        assert total <= len(args[3])  # entries are slices of the body, nothing invented


# -- commit metadata -------------------------------------------------------------------------------


@FUZZ
@given(text=confused_json(META_JSON))
def test_fuzz_commit_meta_json(text: bytes) -> None:
    meta = _only_memvault_errors(lambda: records.open_meta(KEY, STORE_ID, _seal_meta_text(text)))
    if meta is not None:
        assert isinstance(meta, CommitMeta)
        assert type(meta.seq) is int and meta.seq >= 0 and math.isfinite(meta.time)
        assert all(type(p) is str for p in meta.paths) and all(type(v) is int for v in meta.findings.values())
        records.commit_tag(KEY, STORE_ID, meta.seq, b"0" * 40, b"0" * 40, b"")
        time.gmtime(meta.time)
        json.dumps(meta.to_json(), ensure_ascii=False).encode("utf-8")


@FUZZ_FEW
@given(data=st.data())
def test_fuzz_commit_meta_ciphertext(data: st.DataObject) -> None:
    r = real()
    if data.draw(st.booleans()):
        _only_memvault_errors(lambda: records.open_meta(KEY, STORE_ID, data.draw(mutated(SEALED_META))))
    else:
        sealed = data.draw(mutated(r.sealed_meta))
        _only_memvault_errors(lambda: records.open_meta(r.keys.meta, r.store_id, sealed))


# -- the record decoders against the ones first written (same verdict, same result) ---------------
#
# records.py decodes node records and metadata with shortcuts (the nesting scan only when a record
# holds more than _MAX_JSON_DEPTH "[" or "{" bytes, one shared JSON decoder, fused field checks).
# These are the decoders as first written, kept verbatim as the specification the fast ones must
# match on every input: the same accept/refuse verdict and, when accepted, the same value.

_OLD_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OLD_HEX = re.compile(r"[0-9a-f]*")


def _old_no_constant(name: str) -> object:
    raise ValueError(name)


def _old_json_object(data: bytes) -> dict[str, Any]:
    depth = 0
    for token in _OLD_STRUCTURE.finditer(data):
        char = token.group()
        if char in (b"[", b"{"):
            depth += 1
            if depth > 8:
                raise IntegrityError()
        elif char in (b"]", b"}"):
            depth -= 1
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_old_no_constant)
    except (ValueError, RecursionError):
        raise IntegrityError() from None
    if not isinstance(obj, dict):
        raise IntegrityError()
    return obj


def _old_int(value: object, lo: int = 0, hi: int = 2**64 - 1) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise ValueError
    return value


def _old_time(value: object) -> float:
    if type(value) is int:
        value = float(value)
    if type(value) is not float or not math.isfinite(value) or not 0 <= value < 253402300800.0:
        raise ValueError
    return value


def _old_str(value: object) -> str:
    if type(value) is not str:
        raise ValueError
    value.encode("utf-8")
    return value


def _old_hex(value: object, size: int, *, empty: bool = False) -> bytes:
    text = _old_str(value)
    if empty and text == "":
        return b""
    if len(text) != 2 * size or not _OLD_HEX.fullmatch(text):
        raise ValueError
    return bytes.fromhex(text)


def _old_node(text: bytes) -> Node:
    """The node record plaintext ``text`` as the first decoder read it (``sealed`` left empty)."""
    r = _old_json_object(text)
    try:
        kind = r["k"]
        if kind not in ("file", "dir"):
            raise ValueError
        is_file = kind == "file"
        path = _old_str(r["p"])
        size = _old_int(r["s"], 0, 2**63 - 1)
        blob_text = _old_str(r["b"])
        if is_file and not (len(blob_text) == 40 and _OLD_HEX.fullmatch(blob_text)):
            raise ValueError
        if not is_file and blob_text:
            raise ValueError
        blob_id = blob_text.encode("ascii")
        binary = r["x"]
        if type(binary) is not bool:
            raise ValueError
        node = Node(
            path=path, kind=kind, token=TOKEN, file_id=_old_hex(r["f"], 16), version=_old_int(r["v"], 1),
            dek_id=DEK_ID, size=size, sha256=_old_hex(r["h"], 32, empty=not is_file), mtime=_old_time(r["t"]),
            blob_id=blob_id, ct_sha256=_old_hex(r["c"], 32, empty=not is_file), binary=binary,
        )  # fmt: skip
        if not path or (not is_file and (size or node.sha256 or node.ct_sha256)):
            raise ValueError
    except (ValueError, KeyError, TypeError, UnicodeError):
        raise IntegrityError() from None
    return node


def _old_meta(text: bytes) -> CommitMeta:
    r = _old_json_object(text)
    try:
        paths, findings = r["paths"], r["findings"]
        if type(paths) is not list or type(findings) is not dict:
            raise ValueError
        return CommitMeta(
            seq=_old_int(r["seq"], 0, 2**63 - 1),
            time=_old_time(r["time"]),
            actor=_old_str(r["actor"]),
            session=_old_str(r["session"]),
            command=_old_str(r["command"]),
            paths=tuple(_old_str(p) for p in paths),
            findings={_old_str(k): _old_int(v, 0, 2**63 - 1) for k, v in findings.items()},
        )
    except (ValueError, KeyError, TypeError):
        raise IntegrityError() from None


def _verdict(fn: Callable[[], object]) -> object:
    """What ``fn`` returns, or the class of the exception it raises (anything, not only ours)."""
    try:
        out = fn()
    except Exception as err:  # noqa: BLE001 - the class itself is compared
        return type(err)
    if isinstance(out, Node):
        return dataclasses.replace(out, sealed=b"")
    return out


def _new_node(text: bytes) -> object:
    return _verdict(lambda: records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(text)))


def _new_meta(text: bytes) -> object:
    return _verdict(lambda: records.open_meta(KEY, STORE_ID, _seal_meta_text(text)))


def _same(new: object, old: object) -> bool:
    """Equal verdicts; a float that is NaN (never accepted by either) would not compare equal."""
    return new == old and type(new) is type(old)


#: Raw pieces of JSON text that stress the nesting scan and the parser: brackets in and out of
#: strings, escaped and unterminated quotes, constants the decoders refuse.
_JSON_PIECES = [
    b"[", b"]", b"{", b"}", b'"', b"\\", b'\\"', b":", b",", b"1", b'"a"', b'"[[[["', b'"{\\"{"', b"NaN",
    b"Infinity", b"-Infinity", b"true", b"null", b'"\\ud800"', b"\xff", b" ",
]  # fmt: skip


@st.composite
def nested_json(draw: st.DrawFn, seed: dict[str, Any]) -> bytes:
    """``seed`` with one field nested 0-12 levels deep ("[" or "{"), and brackets in strings."""
    obj = dict(seed)
    value: object = draw(st.sampled_from(HOSTILE_JSON))
    for _ in range(draw(st.integers(0, 12))):
        value = [value] if draw(st.booleans()) else {"a": value}
    obj[draw(st.sampled_from(sorted(obj) + ["zz"]))] = value
    if draw(st.booleans()):  # brackets inside strings are not nesting; escaped quotes inside too
        key = draw(st.sampled_from(sorted(obj) + ["zz"]))
        obj[key] = "/memories/" + draw(st.text(alphabet='[]{}"\\a', max_size=24))
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


def _raw_json(seed: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """Raw byte soup of JSON pieces, alone or spliced into the seed's text."""
    soup = st.lists(st.sampled_from(_JSON_PIECES), max_size=40).map(b"".join)
    text = json.dumps(seed).encode()
    return st.one_of(soup, st.tuples(st.integers(0, len(text)), soup).map(lambda t: text[: t[0]] + t[1] + text[t[0] :]))


@FUZZ
@given(
    text=st.one_of(
        confused_json(NODE_JSON), confused_json(DIR_JSON), nested_json(NODE_JSON), nested_json(DIR_JSON),
        _raw_json(NODE_JSON), mutated(json.dumps(NODE_JSON).encode()),
    )
)  # fmt: skip
def test_node_decoder_matches_the_first_one(text: bytes) -> None:
    assert _same(_new_node(text), _verdict(lambda: _old_node(text)))


@FUZZ
@given(text=st.one_of(confused_json(META_JSON), nested_json(META_JSON), _raw_json(META_JSON)))
def test_meta_decoder_matches_the_first_one(text: bytes) -> None:
    assert _same(_new_meta(text), _verdict(lambda: _old_meta(text)))


@FUZZ
@given(text=st.one_of(_raw_json(NODE_JSON), nested_json(NODE_JSON), nested_json(META_JSON)))
def test_json_object_matches_the_first_one(text: bytes) -> None:
    assert _same(_verdict(lambda: records._json_object(text)), _verdict(lambda: _old_json_object(text)))


def _old_unpad(frame: bytes) -> bytes:
    if len(frame) < 4:
        raise IntegrityError()
    (n,) = struct.unpack_from(">I", frame)
    if 4 + n > len(frame) or any(frame[4 + n :]):
        raise IntegrityError()
    return frame[4 : 4 + n]


@FUZZ
@given(frame=st.one_of(mutated(crypto.pad(b"hello")), mutated(crypto.pad(bytes(300))), st.binary(max_size=40)))
def test_unpad_matches_the_first_one(frame: bytes) -> None:
    assert _same(_verdict(lambda: crypto.unpad(frame)), _verdict(lambda: _old_unpad(frame)))


def _node_text(**changes: object) -> bytes:
    return json.dumps({**NODE_JSON, **changes}).encode()


def _dir_text(**changes: object) -> bytes:
    return json.dumps({**DIR_JSON, **changes}).encode()


#: Hostile node records with the verdict both decoders must give (None: accepted).
HOSTILE_NODES: dict[str, tuple[bytes, type[Exception] | None]] = {
    "depth 9: 8 lists in a future field": (_node_text(zz=[[[[[[[[]]]]]]]]), IntegrityError),
    "depth 8: 7 lists in a future field": (_node_text(zz=[[[[[[[]]]]]]]), None),
    "9 mixed levels": (_node_text(zz={"a": [{"a": [{"a": [{"a": []}]}]}]}), IntegrityError),
    "30 brackets inside the path": (_node_text(p="/memories/" + "[{" * 15), None),
    "9 openers, all in strings": (_node_text(zz=["[[[[", "{{{{", "["]), None),
    "escaped quote then 9 openers": (_node_text(p='/memories/a"' + "[" * 9), None),
    "9 openers after an unterminated string": (b'{"p":"/memories/a' + b"[" * 9, IntegrityError),
    "depth 9 in raw text": (b'{"zz":' + b"[" * 8 + b"]" * 8 + b"}", IntegrityError),
    "100,000 levels": (b"[" * 100_000 + b"]" * 100_000, IntegrityError),
    "NaN time": (_node_text(t=1.5).replace(b"1.5", b"NaN"), IntegrityError),
    "Infinity time": (_node_text(t=1.5).replace(b"1.5", b"Infinity"), IntegrityError),
    "-Infinity in a future field": (_node_text(zz=1).replace(b'"zz": 1', b'"zz": -Infinity'), IntegrityError),
    "1e999 time": (_node_text(t=1.5).replace(b"1.5", b"1e999"), IntegrityError),
    "lone surrogate in the path": (_node_text(p="/memories/\ud800"), IntegrityError),
    "lone surrogate in a digest": (json.dumps({**NODE_JSON, "h": "\udc00" * 64}).encode(), IntegrityError),
    "true as version": (_node_text(v=True), IntegrityError),
    "false as size": (_node_text(s=False), IntegrityError),
    "1 as binary": (_node_text(x=1), IntegrityError),
    "float version": (_node_text(v=3.0), IntegrityError),
    "version 0": (_node_text(v=0), IntegrityError),
    "version 2**64": (_node_text(v=2**64), IntegrityError),
    "version 2**64 - 1": (_node_text(v=2**64 - 1), None),
    "size 2**63": (_node_text(s=2**63), IntegrityError),
    "negative time": (_node_text(t=-1.0), IntegrityError),
    "integer time": (_node_text(t=5), None),
    "uppercase digest": (_node_text(h=NODE_JSON["h"].upper()), IntegrityError),
    "digest with a space": (_node_text(h=" " + NODE_JSON["h"][1:]), IntegrityError),
    "digest one byte short": (_node_text(h=NODE_JSON["h"][:-2]), IntegrityError),
    "digest with spaces between bytes": (_node_text(h="00 " * 20 + "0000"), IntegrityError),
    "digest with a tab": (_node_text(h="\t" + NODE_JSON["h"][1:]), IntegrityError),
    "uppercase blob id": (_node_text(b=NODE_JSON["b"].upper()), IntegrityError),
    "blob id with a space": (_node_text(b="01 " * 13 + "0"), IntegrityError),
    "file id 17 bytes": (_node_text(f="ab" * 17), IntegrityError),
    "fullwidth digit in blob id": (_node_text(b="\uff10" + NODE_JSON["b"][1:]), IntegrityError),
    "empty digest of a file": (_node_text(h=""), IntegrityError),
    "empty path": (_node_text(p=""), IntegrityError),
    "path not a string": (_node_text(p=["/memories/a"]), IntegrityError),
    "kind list": (_node_text(k=["file"]), IntegrityError),
    "kind missing": (json.dumps({k: v for k, v in NODE_JSON.items() if k != "k"}).encode(), IntegrityError),
    "directory with a blob": (_dir_text(b=NODE_JSON["b"]), IntegrityError),
    "directory with a size": (_dir_text(s=1), IntegrityError),
    "directory with a digest": (_dir_text(c=NODE_JSON["c"]), IntegrityError),
    "directory with an uppercase-hex digest": (_dir_text(h="AB" * 32), IntegrityError),
    "directory": (_dir_text(), None),
    "a list, not an object": (json.dumps([NODE_JSON]).encode(), IntegrityError),
    "UTF-8 BOM": (b"\xef\xbb\xbf" + _node_text(), IntegrityError),
    "invalid UTF-8 in the path": (_node_text(p="/memories/a").replace(b"/a", b"/\xff"), IntegrityError),
    "trailing data": (_node_text() + b"{}", IntegrityError),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_NODES))
def test_hostile_node_records(name: str) -> None:
    """Each decoder gives the stated verdict, so agreement above is not agreement on nonsense."""
    text, expected = HOSTILE_NODES[name]
    new, old = _new_node(text), _verdict(lambda: _old_node(text))
    assert _same(new, old)
    if expected is None:
        assert isinstance(new, Node)
    else:
        assert new is expected


# -- key slots -------------------------------------------------------------------------------------

SLOT_JSON: dict[str, Any] = {
    "format": 1,
    "kdf": {"alg": "argon2id", "iterations": 3, "lanes": 4, "memory_kib": 65536},
    "kind": "passphrase",
    "salt": crypto.b64encode(bytes(16)),
    "slot_id": "ab" * 16,
    "wrapped": crypto.b64encode(bytes(28 + 36)),
}
KDF_JSON: dict[str, Any] = SLOT_JSON["kdf"]


@FUZZ
@given(data=st.data())
def test_fuzz_key_slot_file(data: st.DataObject, tmp_path: Path) -> None:
    """Slot files as read from keys/: raw edits of a real one, JSON confusion of the slot and of
    its KDF parameters. A slot that parses has bounded KDF parameters."""
    seed = data.draw(st.sampled_from(["real", "slot", "kdf"]))
    if seed == "real":
        text = data.draw(mutated(real().slot_file))
    elif seed == "slot":
        text = data.draw(confused_json(SLOT_JSON))
    else:  # the confused KDF text spliced in as is (it may not even be JSON)
        text = (
            json.dumps({**SLOT_JSON, "kdf": None})
            .encode()
            .replace(b"null", data.draw(confused_json(KDF_JSON)) or b"null")
        )
    path = tmp_path / ("ab" * 16 + ".json")
    path.write_bytes(text)
    slot = _only_memvault_errors(lambda: keys.read_slot_file(path))
    if slot is not None:
        assert isinstance(slot, keys.KeySlot)
        if slot.kdf is not None:
            assert 8 * slot.kdf.lanes <= slot.kdf.memory_kib <= 4 * 1024 * 1024
            assert 1 <= slot.kdf.iterations <= 10 and 1 <= slot.kdf.lanes <= 16
        assert len(slot.salt) == 16 and (len(slot.wrapped) - 28) % 36 == 0
    path.unlink()


@FUZZ_FEW
@given(payload=st.one_of(mutated(struct.pack(">I32s", 1, KEY) + struct.pack(">I32s", 2, KEY)), st.binary(max_size=120)))
def test_fuzz_master_key_payload(payload: bytes) -> None:
    out = _only_memvault_errors(lambda: keys._decode_master_keys(payload))
    if out is not None:
        assert isinstance(out, dict) and out and min(out) >= 1 and list(out) == sorted(out)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kdf",
    [
        {"memory_kib": 2**40, "iterations": 3, "lanes": 4},
        {"memory_kib": 4 * 1024 * 1024 + 1, "iterations": 1, "lanes": 1},
        {"memory_kib": 65536, "iterations": 10**9, "lanes": 4},
        {"memory_kib": 65536, "iterations": 3, "lanes": 2**24},
        {"memory_kib": 8, "iterations": 1, "lanes": 2},  # below 8 KiB per lane
        {"memory_kib": "65536", "iterations": 3, "lanes": 4},
        {"memory_kib": 65536.0, "iterations": 3, "lanes": 4},
        {"memory_kib": True, "iterations": 3, "lanes": 4},
    ],
)
def test_huge_kdf_parameters_are_refused_before_the_kdf_runs(
    kdf: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    monkeypatch.setattr(crypto, "argon2id", lambda *a, **k: calls.append(k) or bytes(32))
    path = tmp_path / ("ab" * 16 + ".json")
    path.write_text(json.dumps({**SLOT_JSON, "kdf": {"alg": "argon2id", **kdf}}))
    with pytest.raises(IntegrityError, match="key slot is malformed"):
        keys.read_slot_file(path)
    with pytest.raises(IntegrityError):
        keys.unlock_master_keys(STORE_ID, keys.load_slots(tmp_path), keys.Unlock(passphrase="x"))
    assert calls == []


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge", "directory"])
def test_key_slot_that_is_not_a_small_regular_file(kind: str, tmp_path: Path) -> None:
    """Never blocks on a FIFO, never reads /dev/zero or a huge file into memory."""
    path = tmp_path / ("ab" * 16 + ".json")
    make_odd_file(path, kind, b" " * (keys.MAX_SLOT_FILE_BYTES + 1) + json.dumps(SLOT_JSON).encode())
    tracemalloc.start()
    try:
        with pytest.raises(IntegrityError, match="key slot is malformed"):
            keys.load_slots(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * keys.MAX_SLOT_FILE_BYTES


def test_key_file_from_dev_zero_is_bounded() -> None:
    with pytest.raises(errors.KeyUnavailableError):
        keys.read_key_file("/dev/zero")


# -- git trees and commits -------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_fuzz_tree_parser(data: st.DataObject) -> None:
    """The strict tree parser never raises: it returns entries and a problem (or None)."""
    raw = data.draw(mutated(data.draw(st.sampled_from(real().trees))))
    entries, problem = parse_tree_strict(raw)
    if problem is None:
        for name, (mode, sha) in entries.items():
            assert mode in (0o100644, 0o040000) and len(sha) == 40 and name.isalnum()
    else:
        assert problem.isprintable() and len(problem) < 100


def _loose(root: Path, kind: bytes, body: bytes) -> bytes:
    import hashlib
    import zlib

    data = kind + b" " + str(len(body)).encode() + b"\0" + body
    obj_id = hashlib.sha1(data).hexdigest().encode()
    path = root / "objects" / obj_id[:2].decode() / obj_id[2:].decode()
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(zlib.compress(data))
    return obj_id


@cache
def _scratch_repo() -> GitStore:
    return GitStore.init(Path(tempfile.mkdtemp(prefix="memvault-fuzz-git-")) / "repo", durable=False)


@FUZZ
@given(data=st.data())
def test_fuzz_git_objects(data: st.DataObject) -> None:
    """Trees and commits written as loose objects and read through GitStore."""
    git = _scratch_repo()
    if data.draw(st.booleans()):
        obj_id = _loose(git.path, b"tree", data.draw(mutated(data.draw(st.sampled_from(real().trees)))))
        out = _only_memvault_errors(lambda: git.read_tree(obj_id))
        assert out is None or all(len(k) <= 64 for k in out)  # type: ignore[union-attr]
    else:
        obj_id = _loose(git.path, b"commit", data.draw(mutated(real().commit_raw)))
        out = _only_memvault_errors(lambda: git.read_commit(obj_id))
        if out is not None:
            tree, parents, message = out  # type: ignore[misc]
            assert isinstance(message, bytes) and len(parents) <= 1


@FUZZ_FEW
@given(body=st.binary(max_size=200), kind=st.sampled_from([b"blob", b"tree", b"commit", b"tag", b"bogus"]))
def test_fuzz_damaged_loose_object_files(body: bytes, kind: bytes) -> None:
    """Loose object files that are not zlib, are truncated, or whose content is not their id."""
    git = _scratch_repo()
    obj_id = _loose(git.path, kind, body)
    path = git.path / "objects" / obj_id[:2].decode() / obj_id[2:].decode()
    path.write_bytes(path.read_bytes()[: len(body) // 2])
    for read in (git.read_blob, git.read_tree, git.read_commit):
        _only_memvault_errors(lambda: read(obj_id))
    assert git.tree_problem(obj_id) is None


def test_zlib_bomb_loose_object_is_refused_without_inflating_it(tmp_path: Path) -> None:
    import zlib

    git = GitStore.init(tmp_path / "repo", durable=False)
    size = 300 * 1024 * 1024  # more than MAX_OBJECT_BYTES once inflated; about 300 KiB on disk
    compressor = zlib.compressobj(9)
    chunks = [compressor.compress(b"tree " + str(size).encode() + b"\0")]
    zero = bytes(1 << 20)
    chunks += [compressor.compress(zero) for _ in range(size >> 20)]
    chunks.append(compressor.flush())
    obj_id = b"ab" * 20
    path = git.path / "objects" / "ab" / ("ab" * 19)
    path.parent.mkdir()
    path.write_bytes(b"".join(chunks))
    tracemalloc.start()
    try:
        with pytest.raises(IntegrityError):
            git.read_tree(obj_id)
        with pytest.raises(IntegrityError):
            git.read_blob(obj_id)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < size  # the whole object was never held in memory


# -- keyring (decoder owned by keys/keyring.py) -----------------------------------------------------


@FUZZ_FEW
@given(data=st.data())
def test_fuzz_keyring_records(data: st.DataObject, tmp_path: Path) -> None:
    r = real()
    path = tmp_path / "keyring"
    path.write_bytes(data.draw(mutated(r.keyring)))
    ring = Keyring(path, r.store_id, {1: r.keys.wrap}, r.keys.keyring, tombstone_key=r.keys.meta)
    _only_memvault_errors(ring.refresh)
    for dek_id in list(ring.scan(parsed_only=True).deks)[:4]:
        _only_memvault_errors(lambda: ring.dek(dek_id))
    path.unlink()


def _keyring_with_tombstone(path: Path, info: bytes) -> Keyring:
    dek_id = bytes(16)
    body = dek_id + crypto.seal(KEY, info, b"memvault/v1/tombstone" + STORE_ID + dek_id)
    path.write_bytes(b"MVKR\x01" + STORE_ID + struct.pack(">BH", 4, len(body)) + body)
    ring = Keyring(path, STORE_ID, {1: KEY}, KEY, tombstone_key=KEY)
    ring.refresh()
    return ring


@pytest.mark.parametrize("info", [b"5", b"[1, 2]", b'"ab"', b"[" * 30_000])
def test_tombstone_info_that_is_not_an_object(info: bytes, tmp_path: Path) -> None:
    ring = _keyring_with_tombstone(tmp_path / "keyring", info)
    with pytest.raises(IntegrityError):
        ring.tombstone(bytes(16))


# -- memvault.json (decoder owned by store/config.py / settings.py) -----------------------------------


def _open_with_config(text: bytes) -> None:
    r = real()
    config = r.root / "memvault.json"
    try:
        config.write_bytes(text)
        memvault.MemoryStore.open(r.root, passphrase=PASSPHRASE, check_head=False).close()
    finally:
        config.write_bytes(r.config)


@FUZZ_FEW
@given(data=st.data())
def test_fuzz_settings_file(data: st.DataObject) -> None:
    """memvault.json edited (shallow JSON confusion; deep nesting is tested below): the store
    refuses to open with a memvault error, or opens (an edit the MAC does not cover, e.g. spacing)."""
    r = real()
    config = json.loads(r.config)
    if data.draw(st.booleans()):
        text = data.draw(mutated(r.config))
        if b"[[[[[[[[" in text or b"{{{{{{{{" in text:
            text = r.config
    else:
        obj = dict(config)
        key = data.draw(st.sampled_from(sorted(config)))
        obj[key] = data.draw(st.sampled_from(HOSTILE_JSON[:-1]))
        if data.draw(st.booleans()):
            obj["settings"] = {
                **config["settings"],
                data.draw(st.sampled_from(sorted(config["settings"]))): data.draw(st.sampled_from(HOSTILE_JSON[:-1])),
            }
        text = json.dumps(obj).encode("utf-8", "surrogatepass")
    _only_memvault_errors(lambda: _open_with_config(text), MemvaultError)


@pytest.mark.parametrize("text", [b"[" * 100_000, b'{"a":' * 50_000])
def test_deeply_nested_settings_file(text: bytes) -> None:
    with pytest.raises(IntegrityError):
        _open_with_config(text)


# -- the regression corpus -------------------------------------------------------------------------


def _replay(decoder: str, data: bytes, tmp_path: Path) -> None:
    """Feed one corpus file to its decoder (the directory name says which)."""
    if decoder == "node_json":
        records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(data))
    elif decoder == "node_blob":  # a node record that decodes, then its use in decode_blob
        node = records.open_node(KEY, STORE_ID, TOKEN, DEK_ID, _seal_node_text(data))
        records.decode_blob(KEY, BLOB, store_id=STORE_ID, node=node)
    elif decoder == "meta_json":
        meta = records.open_meta(KEY, STORE_ID, _seal_meta_text(data))
        records.commit_tag(KEY, STORE_ID, meta.seq, b"0" * 40, b"0" * 40, b"")
    elif decoder == "key_slot":
        path = tmp_path / ("ab" * 16 + ".json")
        path.write_bytes(data)
        keys.read_slot_file(path)
    elif decoder == "commit":
        git = GitStore.init(tmp_path / "repo", durable=False)
        tree, parents, message = git.read_commit(_loose(git.path, b"commit", data))
        records.parse_commit_message(message)
    elif decoder == "tree":
        git = GitStore.init(tmp_path / "repo", durable=False)
        git.read_tree(_loose(git.path, b"tree", data))
    elif decoder == "settings_json":
        _open_with_config(data)
    elif decoder == "tombstone_info":
        _keyring_with_tombstone(tmp_path / "keyring", data).tombstone(bytes(16))
    else:
        raise AssertionError(f"no replay for {decoder}")


def _manifest() -> dict[str, dict[str, str]]:
    manifest: dict[str, dict[str, str]] = json.loads((CORPUS / "MANIFEST.json").read_text())
    return manifest


def test_corpus_manifest_lists_every_file() -> None:
    files = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file() and p.name != "MANIFEST.json"}
    assert files == set(_manifest())
    assert len(files) >= 10


def _corpus_params() -> list[object]:
    out = []
    for name, entry in sorted(_manifest().items()):
        marks = [pytest.mark.xfail(strict=True, reason=entry["xfail"])] if entry.get("xfail") else []
        out.append(pytest.param(name, entry["error"], marks=marks, id=name))
    return out


@pytest.mark.parametrize(("name", "error"), _corpus_params())
def test_corpus_replay(name: str, error: str, tmp_path: Path) -> None:
    """Every crasher ever found raises exactly the error class the manifest names."""
    decoder = name.split("/")[0]
    expected = getattr(errors, error)
    with pytest.raises(MemvaultError) as info:
        _replay(decoder, (CORPUS / name).read_bytes(), tmp_path)
    assert type(info.value) is expected


@pytest.mark.parametrize(
    "change",
    [{"file_id": bytes(15)}, {"sha256": bytes(31)}, {"ct_sha256": bytes(33)}, {"blob_id": b"0" * 39}],
    ids=["file_id", "sha256", "ct_sha256", "blob_id"],
)
def test_v2_writer_refuses_fields_of_the_wrong_length(change: dict[str, bytes]) -> None:
    """struct would pad or cut them silently; a record memvault writes must open to the same node."""
    with pytest.raises(ValueError):
        records.seal_node(KEY, STORE_ID, dataclasses.replace(FILE_NODE, **change))  # type: ignore[arg-type]
