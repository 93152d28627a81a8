"""Known-answer vectors: pin every on-disk byte layout of docs/format.md.

Each vector is (a) opened with the library and checked against its fields, (b) re-encoded with
the pinned nonce (``memvault.crypto.random_bytes`` monkeypatched) to the identical bytes, and
(c) corrupted one byte per region, which must fail authentication.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memvault import crypto
from memvault.errors import IntegrityError, WrongKeyError
from memvault.format import layout, records
from memvault.git.objects import MODE_BLOB, MODE_TREE
from memvault.git.repo import GitStore
from memvault.keys import slots as keys
from memvault.keys.keyring import Keyring
from memvault.settings import KdfParams, StoreSettings

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    return data


BLOBS = _load("blob_v1.json")["cases"]
SLOTS_FILE = _load("keyslot_v1.json")
SLOTS = SLOTS_FILE["cases"]
PADDING = _load("padding_v1.json")
REC = _load("records_v1.json")
NODES_V2 = _load("node_v2.json")["cases"]
TREE_V2 = _load("node_v2.json")["tree_layout_2"]
SHARD_V2 = _load("node_v2.json")["shard"]
KEYRING_V2 = _load("node_v2.json")["keyring"]


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["desc"][:40] for c in cases]


def _flip(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0x01
    return bytes(out)


def _fixed_random(monkeypatch: pytest.MonkeyPatch, values: list[bytes]) -> Iterator[bytes]:
    it = iter(values)

    def fake(n: int) -> bytes:
        value = next(it)
        assert len(value) == n
        return value

    monkeypatch.setattr(crypto, "random_bytes", fake)
    return it


def _sealed_regions(offset: int, length: int) -> dict[str, int]:
    """Byte index of one byte in each region of ``nonce || ct || tag`` starting at ``offset``."""
    return {
        "nonce": offset,
        "ciphertext": offset + crypto.NONCE_SIZE,
        "tag": offset + length - 1,
    }


# -- padding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", PADDING["sizes"], ids=lambda c: str(c["plaintext_len"]))
def test_padded_size_table(case: dict[str, int]) -> None:
    n = case["plaintext_len"]
    assert crypto.padded_size(n) == case["frame_len"]
    if n <= 70_000:
        frame = crypto.pad(bytes([0x41]) * n)
        assert len(frame) == case["frame_len"]
        assert crypto.unpad(frame) == bytes([0x41]) * n


def test_pad_frame_bytes() -> None:
    case = PADDING["frames"][0]
    frame = bytes.fromhex(case["frame"])
    assert crypto.pad(bytes.fromhex(case["plaintext"])) == frame
    with pytest.raises(IntegrityError):
        crypto.unpad(_flip(frame, 3))  # length prefix points past the frame's data
    with pytest.raises(IntegrityError):
        crypto.unpad(_flip(frame, len(frame) - 1))  # non-zero padding


def test_unpad_refuses_any_nonzero_padding_byte() -> None:
    """Every padding byte is checked, the first and the last, and a frame without padding opens."""
    frame = crypto.pad(b"abc")
    for index in (7, 8, len(frame) // 2, len(frame) - 1):
        with pytest.raises(IntegrityError):
            crypto.unpad(_flip(frame, index))
    assert crypto.unpad(struct.pack(">I", 3) + b"abc") == b"abc"
    assert crypto.unpad(struct.pack(">I", 0)) == b""
    with pytest.raises(IntegrityError):
        crypto.unpad(b"\0\0\0")  # shorter than the length prefix


#: RFC 4231 HMAC-SHA256 known answers: test cases 1, 2 and 6 (a key longer than the block).
RFC4231 = [
    (b"\x0b" * 20, b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (b"Jefe", b"what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    (b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
]  # fmt: skip


@pytest.mark.parametrize("key, data, tag", RFC4231, ids=["rfc4231-1", "rfc4231-2", "rfc4231-6"])
def test_mac_known_answers(key: bytes, data: bytes, tag: str) -> None:
    assert crypto.mac(key, data).hex() == tag
    crypto.mac_verify(key, data, bytes.fromhex(tag))
    for wrong in (_flip(bytes.fromhex(tag), 0), bytes.fromhex(tag)[:16], b"", bytes.fromhex(tag) + b"\0"):
        with pytest.raises(IntegrityError):
            crypto.mac_verify(key, data, wrong)
    with pytest.raises(IntegrityError):
        crypto.mac_verify(key, data + b"!", bytes.fromhex(tag))
    # Keyed once, the same function for every message (its keyed state is not consumed).
    mac_of = crypto.mac_function(key)
    assert mac_of(data).hex() == tag and mac_of(b"other") == crypto.mac(key, b"other") and mac_of(data).hex() == tag


# -- content blobs ----------------------------------------------------------------------------


def _blob_node(case: dict[str, Any], **overrides: Any) -> records.Node:
    fields: dict[str, Any] = dict(
        path=case["path"],
        kind="file",
        token=b"",
        file_id=bytes.fromhex(case["file_id"]),
        version=case["version"],
        dek_id=bytes.fromhex(case["dek_id"]),
        size=len(bytes.fromhex(case["plaintext"])),
        sha256=bytes.fromhex(case["plaintext_sha256"]),
    )
    fields.update(overrides)
    return records.Node(**fields)


@pytest.mark.parametrize("case", BLOBS, ids=_ids(BLOBS))
def test_blob_decodes(case: dict[str, Any]) -> None:
    blob = bytes.fromhex(case["blob"])
    store_id = bytes.fromhex(case["store_id"])
    header = struct.pack(">4s16s16sQ16s", b"MVB1", store_id, bytes.fromhex(case["file_id"]), case["version"],
                         bytes.fromhex(case["dek_id"]))  # fmt: skip
    assert blob[:60] == header
    assert blob[60:72] == bytes.fromhex(case["nonce"])
    assert len(blob) == 60 + crypto.SEAL_OVERHEAD + case["padded_size"]
    assert crypto.sha256(blob).hex() == case["blob_sha256"]
    plain = records.decode_blob(bytes.fromhex(case["dek"]), blob, store_id=store_id, node=_blob_node(case))
    assert plain == bytes.fromhex(case["plaintext"])


@pytest.mark.parametrize("case", BLOBS, ids=_ids(BLOBS))
def test_blob_reencodes(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_random(monkeypatch, [bytes.fromhex(case["nonce"])])
    blob = records.encode_blob(
        bytes.fromhex(case["dek"]),
        store_id=bytes.fromhex(case["store_id"]),
        file_id=bytes.fromhex(case["file_id"]),
        version=case["version"],
        dek_id=bytes.fromhex(case["dek_id"]),
        path=case["path"],
        data=bytes.fromhex(case["plaintext"]),
    )
    assert blob.hex() == case["blob"]


_BLOB_REGIONS = {"magic": 0, "store_id": 4, "file_id": 20, "version": 43, "dek_id": 44}


@pytest.mark.parametrize("case", BLOBS, ids=_ids(BLOBS))
def test_blob_tamper(case: dict[str, Any]) -> None:
    blob = bytes.fromhex(case["blob"])
    dek, store_id, node = bytes.fromhex(case["dek"]), bytes.fromhex(case["store_id"]), _blob_node(case)
    regions = {**_BLOB_REGIONS, **_sealed_regions(60, len(blob) - 60)}
    for region, index in regions.items():
        with pytest.raises(IntegrityError):
            records.decode_blob(dek, _flip(blob, index), store_id=store_id, node=node)
            pytest.fail(region)
    # Context bound through the AAD / header: path, version, store, key.
    for bad in (
        _blob_node(case, path=case["path"] + "x"),
        _blob_node(case, version=case["version"] + 1),
        _blob_node(case, sha256=bytes(32)),
    ):
        with pytest.raises(IntegrityError):
            records.decode_blob(dek, blob, store_id=store_id, node=bad)
    with pytest.raises(IntegrityError):
        records.decode_blob(dek, blob, store_id=_flip(store_id, 0), node=node)
    with pytest.raises(IntegrityError):
        records.decode_blob(_flip(dek, 0), blob, store_id=store_id, node=node)
    with pytest.raises(IntegrityError):
        records.decode_blob(dek, blob[:-1], store_id=store_id, node=node)


# -- key slots ---------------------------------------------------------------------------------


def _unlock(case: dict[str, Any], wrong: bool = False) -> keys.Unlock:
    if "passphrase" in case:
        return keys.Unlock(passphrase=case["wrong_passphrase" if wrong else "passphrase"])
    return keys.Unlock(raw_key=bytes.fromhex(case["wrong_keyfile" if wrong else "keyfile"]))


def _slot(case: dict[str, Any]) -> keys.KeySlot:
    return keys.KeySlot.from_json(json.loads(case["slot_file"]))


@pytest.mark.parametrize("case", SLOTS, ids=_ids(SLOTS))
def test_slot_unlocks(case: dict[str, Any]) -> None:
    store_id = bytes.fromhex(case["store_id"])
    slot = _slot(case)
    assert f"{slot.slot_id.hex()}.json" == case["slot_file_name"]
    assert slot.aad(store_id).hex() == case["aad"]
    assert slot.wrapped[: crypto.NONCE_SIZE].hex() == case["nonce"]
    if slot.kind == "passphrase":
        assert slot.kdf is not None
        kek = crypto.argon2id(case["passphrase"].encode("utf-8"), slot.salt, memory_kib=slot.kdf.memory_kib,
                              iterations=slot.kdf.iterations, lanes=slot.kdf.lanes)  # fmt: skip
    else:
        kek = crypto.hkdf(bytes.fromhex(case["keyfile"]), salt=slot.salt, info=b"memvault/v1/keyfile-kek")
    assert kek.hex() == case["kek"]
    assert crypto.open_sealed(kek, slot.wrapped, slot.aad(store_id)).hex() == case["payload"]
    opened, master_keys = keys.unlock_master_keys(store_id, [slot], _unlock(case))
    assert opened == slot
    assert {str(e): k.hex() for e, k in master_keys.items()} == case["master_keys"]


@pytest.mark.parametrize("case", SLOTS, ids=_ids(SLOTS))
def test_slot_wrong_secret(case: dict[str, Any]) -> None:
    with pytest.raises(WrongKeyError):
        keys.unlock_master_keys(bytes.fromhex(case["store_id"]), [_slot(case)], _unlock(case, wrong=True))


@pytest.mark.parametrize("case", SLOTS, ids=_ids(SLOTS))
def test_slot_reencodes(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    original = _slot(case)
    _fixed_random(monkeypatch, [bytes.fromhex(v) for v in case["random_calls"]])
    master_keys = {int(e): bytes.fromhex(k) for e, k in case["master_keys"].items()}
    slot = keys.new_slot(bytes.fromhex(case["store_id"]), _unlock(case), master_keys, original.kdf)
    assert slot == original
    keys.write_slot(tmp_path, slot, durable=False)
    assert (tmp_path / case["slot_file_name"]).read_text(encoding="utf-8") == case["slot_file"]
    assert keys.load_slots(tmp_path) == [original]


def _slot_variants(slot: keys.KeySlot) -> Iterator[tuple[str, keys.KeySlot]]:
    w = slot.wrapped
    for region, index in _sealed_regions(0, len(w)).items():
        yield region, keys.KeySlot(slot.slot_id, slot.kind, slot.salt, slot.kdf, _flip(w, index))
    yield "slot_id", keys.KeySlot(_flip(slot.slot_id, 0), slot.kind, slot.salt, slot.kdf, w)
    yield "salt", keys.KeySlot(slot.slot_id, slot.kind, _flip(slot.salt, 0), slot.kdf, w)
    if slot.kdf is not None:
        weaker = KdfParams(memory_kib=slot.kdf.memory_kib, iterations=slot.kdf.iterations + 1, lanes=slot.kdf.lanes)
        yield "kdf", keys.KeySlot(slot.slot_id, slot.kind, slot.salt, weaker, w)


@pytest.mark.parametrize("case", SLOTS, ids=_ids(SLOTS))
def test_slot_tamper(case: dict[str, Any]) -> None:
    store_id = bytes.fromhex(case["store_id"])
    slot = _slot(case)
    kek = bytes.fromhex(case["kek"])
    for _region, bad in _slot_variants(slot):
        # The AEAD layer reports IntegrityError; unlocking reports the generic WrongKeyError.
        if bad.salt == slot.salt and bad.kdf == slot.kdf:
            with pytest.raises(IntegrityError):
                crypto.open_sealed(kek, bad.wrapped, bad.aad(store_id))
        with pytest.raises(WrongKeyError):
            keys.unlock_master_keys(store_id, [bad], _unlock(case))
    with pytest.raises(WrongKeyError):  # a slot of another store
        keys.unlock_master_keys(_flip(store_id, 0), [slot], _unlock(case))


@pytest.mark.parametrize("case", SLOTS, ids=_ids(SLOTS))
def test_slot_json_malformed(case: dict[str, Any]) -> None:
    obj = json.loads(case["slot_file"])
    bad_values: list[tuple[str, object]] = [
        ("format", 2),
        ("kind", "kms"),
        ("slot_id", obj["slot_id"].upper()),
        ("slot_id", obj["slot_id"][:-2]),
        ("salt", obj["salt"] + "="),
        ("wrapped", "!" + obj["wrapped"][1:]),
    ]
    if obj["kind"] == "passphrase":
        bad_values += [("kdf", {**obj["kdf"], "memory_kib": 5 * 1024 * 1024}), ("kdf", {**obj["kdf"], "alg": "scrypt"}),
                       ("kdf", {**obj["kdf"], "iterations": 11}), ("kdf", None)]  # fmt: skip
    else:
        bad_values.append(("kdf", {"alg": "argon2id", "memory_kib": 8, "iterations": 1, "lanes": 1}))
    for field, value in bad_values:
        with pytest.raises(IntegrityError):
            keys.KeySlot.from_json({**obj, field: value})


def test_subkeys() -> None:
    v = SLOTS_FILE["subkeys"]
    sub = keys.Subkeys(bytes.fromhex(v["master_key"]), bytes.fromhex(v["store_id"]), v["epoch"])
    assert {p: getattr(sub, p).hex() for p in keys.PURPOSES} == v["subkeys"]


# -- tokens, node records, shards ----------------------------------------------------------------


def _name_key() -> bytes:
    return bytes.fromhex(SLOTS_FILE["subkeys"]["subkeys"]["name"])


@pytest.mark.parametrize("case", REC["tokens"], ids=_ids(REC["tokens"]))
def test_token(case: dict[str, Any]) -> None:
    token = crypto.mac(_name_key(), case["path"].encode("utf-8"))
    h = token.hex()
    assert h == case["token"]
    assert h[:2] == case["shard"]
    assert f"c/{h[0]}/{h[1]}/{h[2:]}" == case["content_tree_path"]
    assert f"i/{h[0]}/{h[1]}" == case["index_tree_path"]
    assert crypto.mac_function(_name_key())(case["path"].encode("utf-8")) == token  # the store's way


@pytest.mark.parametrize("case", REC["nodes"], ids=_ids(REC["nodes"]))
def test_opener_matches_open_sealed(case: dict[str, Any]) -> None:
    """``crypto.opener(key)`` opens what ``open_sealed`` opens and refuses what it refuses."""
    dek, store_id, token, dek_id = _node_args(case)
    sealed, aad = bytes.fromhex(case["sealed"]), b"memvault/v1/node" + store_id + token + dek_id
    open_with = crypto.opener(dek)
    assert open_with(sealed, aad) == crypto.open_sealed(dek, sealed, aad)
    assert open_with(sealed, aad) == crypto.open_sealed(dek, sealed, aad)  # reusable
    for bad_sealed, bad_aad in ((_flip(sealed, 0), aad), (_flip(sealed, len(sealed) - 1), aad),
                                (sealed, _flip(aad, 0)), (sealed[:27], aad), (b"", aad)):  # fmt: skip
        with pytest.raises(IntegrityError):
            open_with(bad_sealed, bad_aad)
        with pytest.raises(IntegrityError):
            crypto.open_sealed(dek, bad_sealed, bad_aad)
    with pytest.raises(ValueError):
        crypto.opener(dek[:16])


def _node_args(case: dict[str, Any]) -> tuple[bytes, bytes, bytes, bytes]:
    return (bytes.fromhex(case["dek"]), bytes.fromhex(case["store_id"]), bytes.fromhex(case["token"]),
            bytes.fromhex(case["dek_id"]))  # fmt: skip


def _node_from_record(case: dict[str, Any]) -> records.Node:
    r = case["record"]
    return records.Node(
        path=r["p"], kind=r["k"], token=bytes.fromhex(case["token"]), file_id=bytes.fromhex(r["f"]), version=r["v"],
        dek_id=bytes.fromhex(case["dek_id"]), size=r["s"], sha256=bytes.fromhex(r["h"]), mtime=r["t"],
        blob_id=r["b"].encode("ascii"), ct_sha256=bytes.fromhex(r["c"]), binary=r["x"],
    )  # fmt: skip


@pytest.mark.parametrize("case", REC["nodes"], ids=_ids(REC["nodes"]))
def test_node_opens(case: dict[str, Any]) -> None:
    dek, store_id, token, dek_id = _node_args(case)
    sealed = bytes.fromhex(case["sealed"])
    frame = crypto.open_sealed(dek, sealed, b"memvault/v1/node" + store_id + token + dek_id)
    assert crypto.unpad(frame) == case["record_json"].encode("utf-8")
    assert json.loads(case["record_json"]) == case["record"]
    node = records.open_node(dek, store_id, token, dek_id, sealed)
    assert node == records.Node(**{**_asdict(_node_from_record(case)), "sealed": sealed})
    if "blob" in case:  # the node authenticates its content blob
        blob = bytes.fromhex(case["blob"])
        assert crypto.sha256(blob) == node.ct_sha256
        assert GitStore.blob(blob).id == node.blob_id
        assert crypto.sha256(records.decode_blob(dek, blob, store_id=store_id, node=node)) == node.sha256


def _asdict(node: records.Node) -> dict[str, Any]:
    return {name: getattr(node, name) for name in records.Node.__slots__}


@pytest.mark.parametrize("case", REC["nodes"], ids=_ids(REC["nodes"]))
def test_node_reseals(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    dek, store_id, _, _ = _node_args(case)
    _fixed_random(monkeypatch, [bytes.fromhex(case["nonce"])])
    assert records.seal_node(dek, store_id, _node_from_record(case), encoding=1).sealed.hex() == case["sealed"]


# -- compact node records (encoding 2, format version 2): node_v2.json, made without memvault ------


@pytest.mark.parametrize("case", NODES_V2, ids=_ids(NODES_V2))
def test_node_v2_opens(case: dict[str, Any]) -> None:
    dek, store_id, token, dek_id = _node_args(case)
    sealed = bytes.fromhex(case["sealed"])
    frame = crypto.open_sealed(dek, sealed, b"memvault/v1/node" + store_id + token + dek_id)
    assert len(frame) == case["frame_bytes"]
    assert crypto.unpad(frame) == bytes.fromhex(case["record_bin"])
    node = records.open_node(dek, store_id, token, dek_id, sealed)
    assert node == records.Node(**{**_asdict(_node_from_record(case)), "sealed": sealed})


@pytest.mark.parametrize("case", NODES_V2, ids=_ids(NODES_V2))
def test_node_v2_reseals(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    dek, store_id, _, _ = _node_args(case)
    _fixed_random(monkeypatch, [bytes.fromhex(case["nonce"])])
    assert records.seal_node(dek, store_id, _node_from_record(case), encoding=2).sealed.hex() == case["sealed"]


def test_node_v2_is_smaller_than_json() -> None:
    # The same file nodes: JSON needs the 512-byte step, the compact record fits the first one.
    for v1, v2 in zip(REC["nodes"][1:], NODES_V2[1:3], strict=True):
        assert len(bytes.fromhex(v2["sealed"])) == 256 + 28 < len(bytes.fromhex(v1["sealed"])) == 512 + 28


@pytest.mark.parametrize("case", REC["nodes"] + NODES_V2, ids=_ids(REC["nodes"]) + [f"v2 {i}" for i in _ids(NODES_V2)])
def test_node_tamper(case: dict[str, Any]) -> None:
    """Both record encodings (JSON, compact v2): every region of the sealed record and every
    argument bound into it is authenticated."""
    dek, store_id, token, dek_id = _node_args(case)
    sealed = bytes.fromhex(case["sealed"])
    for index in _sealed_regions(0, len(sealed)).values():
        with pytest.raises(IntegrityError):
            records.open_node(dek, store_id, token, dek_id, _flip(sealed, index))
    for args in (
        (dek, _flip(store_id, 0), token, dek_id),
        (dek, store_id, _flip(token, 0), dek_id),
        (dek, store_id, _flip(token, 31), dek_id),
        (dek, store_id, token, _flip(dek_id, 0)),
        (_flip(dek, 0), store_id, token, dek_id),
    ):
        with pytest.raises(IntegrityError):
            records.open_node(*args, sealed)


def _shard_args(case: dict[str, Any]) -> tuple[bytes, bytes, bytes]:
    return bytes.fromhex(case["index_key"]), bytes.fromhex(case["store_id"]), case["shard"].encode("ascii")


@pytest.mark.parametrize("case", REC["shards"], ids=_ids(REC["shards"]))
def test_shard_decodes(case: dict[str, Any]) -> None:
    key, store_id, shard = _shard_args(case)
    blob = bytes.fromhex(case["blob"])
    assert blob[:4] == b"MVI1"
    entries = records.decode_shard(key, store_id, shard, blob)
    assert [(t.hex(), d.hex(), s.hex()) for t, d, s in entries] == [
        (e["token"], e["dek_id"], e["sealed"]) for e in case["entries"]
    ]
    assert all(t.hex()[:2] == case["shard"] for t, _, _ in entries)


@pytest.mark.parametrize("case", REC["shards"], ids=_ids(REC["shards"]))
def test_shard_reencodes(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    key, store_id, shard = _shard_args(case)
    nodes = [
        records.Node(
            "", "file", bytes.fromhex(e["token"]), b"", 0, bytes.fromhex(e["dek_id"]), sealed=bytes.fromhex(e["sealed"])
        )  # fmt: skip
        for e in reversed(case["entries"])  # the encoder sorts by token
    ]
    _fixed_random(monkeypatch, [bytes.fromhex(case["nonce"])])
    assert records.encode_shard(key, store_id, shard, nodes, version=1).hex() == case["blob"]


@pytest.mark.parametrize("case", REC["shards"], ids=_ids(REC["shards"]))
def test_shard_tamper(case: dict[str, Any]) -> None:
    key, store_id, shard = _shard_args(case)
    blob = bytes.fromhex(case["blob"])
    regions = {"magic": 0, **_sealed_regions(4, len(blob) - 4)}
    for index in regions.values():
        with pytest.raises(IntegrityError):
            records.decode_shard(key, store_id, shard, _flip(blob, index))
    other_shard = b"00" if shard != b"00" else b"01"
    for args in ((key, store_id, other_shard), (key, _flip(store_id, 0), shard), (_flip(key, 0), store_id, shard)):
        with pytest.raises(IntegrityError):
            records.decode_shard(*args, blob)


# -- commit metadata, tag and object --------------------------------------------------------------


@pytest.mark.parametrize("case", REC["meta"], ids=_ids(REC["meta"]))
def test_meta(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    key, store_id, sealed = (
        bytes.fromhex(case["meta_key"]),
        bytes.fromhex(case["store_id"]),
        bytes.fromhex(case["sealed"]),
    )
    meta = records.open_meta(key, store_id, sealed)
    assert meta.to_json() == case["meta"]
    assert crypto.unpad(crypto.open_sealed(key, sealed, b"memvault/v1/meta" + store_id)) == case["meta_json"].encode()
    _fixed_random(monkeypatch, [bytes.fromhex(case["nonce"])])
    assert records.seal_meta(key, store_id, meta) == sealed
    for index in _sealed_regions(0, len(sealed)).values():
        with pytest.raises(IntegrityError):
            records.open_meta(key, store_id, _flip(sealed, index))
    with pytest.raises(IntegrityError):
        records.open_meta(key, _flip(store_id, 0), sealed)


@pytest.mark.parametrize("case", REC["commits"], ids=_ids(REC["commits"]))
def test_commit_tag_and_object(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    key, store_id = bytes.fromhex(case["chain_key"]), bytes.fromhex(case["store_id"])
    seq, parent, tree = case["seq"], case["parent_id"].encode(), case["tree_id"].encode()
    sealed = bytes.fromhex(case["sealed_meta"])
    tag = records.commit_tag(key, store_id, seq, parent, tree, sealed)
    assert tag.hex() == case["tag"]
    msg = b"|".join([b"memvault/v1/commit", store_id, struct.pack(">Q", seq), parent, tree, crypto.sha256(sealed)])
    crypto.mac_verify(key, msg, tag)
    # Every bound input changes the tag.
    for args in (
        (seq + 1, parent, tree, sealed),
        (seq, _flip(parent, 0), tree, sealed),
        (seq, parent, _flip(tree, 0), sealed),
        (seq, parent, tree, _flip(sealed, 0)),
    ):
        assert records.commit_tag(key, store_id, *args) != tag
    with pytest.raises(IntegrityError):
        crypto.mac_verify(key, msg, _flip(tag, 31))
    # The metadata opens and re-seals.
    meta_key = bytes.fromhex(REC["meta"][0]["meta_key"])
    meta = records.open_meta(meta_key, store_id, sealed)
    assert meta.to_json() == case["meta"] and meta.seq == seq
    _fixed_random(monkeypatch, [bytes.fromhex(case["meta_nonce"])])
    assert records.seal_meta(meta_key, store_id, meta) == sealed
    # The message grammar and the git commit object (constant identity and time).
    message = (b"memvault\n\nMemvault-Meta: " + crypto.b64encode(sealed).encode() + b"\nMemvault-Tag: "
               + tag.hex().encode() + b"\n")  # fmt: skip
    assert message.decode() == case["message"]
    git_parent = case["git_parent"].encode() if case["git_parent"] else None
    commit = GitStore.commit(tree, git_parent, message)
    assert commit.as_raw_string().decode() == case["commit_raw"]
    assert commit.id.decode() == case["commit_id"]
    if "trees" in case:
        _check_trees(case)


def _tree_of(entries: dict[tuple[bytes, ...], bytes]) -> bytes:
    """The git tree holding blob ``id`` at each path ``(name, ...)`` (how memvault nests trees)."""
    groups: dict[bytes, dict[tuple[bytes, ...], bytes]] = {}
    items: dict[bytes, tuple[int, bytes]] = {}
    for (head, *rest), blob_id in entries.items():
        if rest:
            groups.setdefault(head, {})[tuple(rest)] = blob_id
        else:
            items[head] = (MODE_BLOB, blob_id)
    for head, sub in groups.items():
        items[head] = (MODE_TREE, _tree_of(sub))
    return GitStore.tree(items).id


def _check_trees(case: dict[str, Any]) -> None:
    content = {
        (b"c", t[:1].encode(), t[1:2].encode(), t[2:].encode()): b.encode() for t, b in case["content_blobs"].items()
    }
    index = {(b"i", s[:1].encode(), s[1:].encode()): b.encode() for s, b in case["index_blobs"].items()}
    assert _tree_of({k[1:]: v for k, v in content.items()}).decode() == case["trees"]["c"]
    assert _tree_of({k[1:]: v for k, v in index.items()}).decode() == case["trees"]["i"]
    assert _tree_of({**content, **index}).decode() == case["trees"]["root"] == case["tree_id"]


def test_shard_v2_decodes_and_reencodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Format version 2 shards: 64-byte framing steps (this 672-byte body: 704, not 768)."""
    case = SHARD_V2
    key, store_id, shard = bytes.fromhex(case["index_key"]), bytes.fromhex(case["store_id"]), case["shard"].encode()
    blob = bytes.fromhex(case["blob"])
    assert len(blob) == 4 + 28 + case["frame_bytes"] and case["frame_bytes"] % 64 == 0
    assert case["frame_bytes"] < crypto.padded_size(case["body_bytes"])  # the 256-byte steps of version 1
    entries = records.decode_shard(key, store_id, shard, blob)
    by_token = {c["token"]: c for c in NODES_V2}
    assert [t.hex() for t, _d, _s in entries] == case["tokens"]
    for token, dek_id, sealed in entries:
        assert (dek_id.hex(), sealed.hex()) == (by_token[token.hex()]["dek_id"], by_token[token.hex()]["sealed"])
    nodes = [records.Node("", "file", t, b"", 0, d, sealed=s) for t, d, s in reversed(entries)]
    _fixed_random(monkeypatch, [bytes.fromhex(case["nonce"])])
    assert records.encode_shard(key, store_id, shard, nodes, version=2).hex() == case["blob"]


def test_tree_layout_2() -> None:
    """Layout 2 (format version 2): the same blobs as <h0>/<h1>/<h[2:]> and <h0>/<h1>/i."""
    case = TREE_V2
    paths = {layout.content_path(bytes.fromhex(t), 2): b.encode() for t, b in case["content_blobs"].items()}
    paths.update({(s[:1].encode(), s[1:].encode(), b"i"): b.encode() for s, b in case["index_blobs"].items()})
    assert _tree_of(paths).decode() == case["trees"]["root"]
    for token, blob in case["content_blobs"].items():
        assert layout.content_path(bytes.fromhex(token), 2) == (token[:1].encode(), token[1:2].encode(),
                                                                    token[2:].encode())  # fmt: skip
        assert layout.content_path(bytes.fromhex(token), 1)[0] == b"c"
    for name, tree_id in case["trees"].items():  # every subtree, e.g. "2" and "2/1"
        if name != "root":
            parts = tuple(p.encode() for p in name.split("/"))
            sub = {k[len(parts) :]: v for k, v in paths.items() if k[: len(parts)] == parts}
            assert _tree_of(sub).decode() == tree_id


# -- keyring -------------------------------------------------------------------------------------


def _keyring(path: Path, case: dict[str, Any], data: bytes) -> Keyring:
    path.write_bytes(data)
    return Keyring(path, bytes.fromhex(case["store_id"]), {1: bytes.fromhex(case["wrap_key"])},
                   bytes.fromhex(case["mac_key"]))  # fmt: skip


@pytest.mark.parametrize("case", REC["keyring"], ids=_ids(REC["keyring"]))
def test_keyring_reads(case: dict[str, Any], tmp_path: Path) -> None:
    store_id = bytes.fromhex(case["store_id"])
    assert bytes.fromhex(case["header"]) == b"MVKR\x01" + store_id
    kr = _keyring(tmp_path / "keyring", case, bytes.fromhex(case["file"]))
    kr.refresh()
    d = case["dek_record"]
    assert kr.dek(bytes.fromhex(d["dek_id"])).hex() == d["dek"]
    last = case["commit_records"][-1]
    assert kr.high_water is not None
    assert (kr.high_water.seq, kr.high_water.commit_id.decode(), kr.high_water.parent_id.decode()) == (
        last["seq"], last["commit_id"], last["parent_id"],
    )  # fmt: skip
    # A torn tail (crash mid-append) is ignored.
    kr2 = _keyring(tmp_path / "torn", case, bytes.fromhex(case["file"]) + bytes.fromhex(d["record"])[:-5])
    kr2.refresh()
    assert kr2.high_water == kr.high_water


@pytest.mark.parametrize("case", REC["keyring"], ids=_ids(REC["keyring"]))
def test_keyring_reencodes(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    Keyring.create(tmp_path / "keyring", bytes.fromhex(case["store_id"]), durable=False)
    assert (tmp_path / "keyring").read_bytes() == bytes.fromhex(case["header"])
    kr = _keyring(tmp_path / "keyring", case, bytes.fromhex(case["header"]))
    d = case["dek_record"]
    _fixed_random(monkeypatch, [bytes.fromhex(d["nonce"])])
    assert kr.dek_record(bytes.fromhex(d["dek_id"]), bytes.fromhex(d["dek"]), d["epoch"]).hex() == d["record"]
    c0, c1 = case["commit_records"]
    assert kr.commit_record(c0["seq"], c0["commit_id"].encode(), c0["parent_id"].encode()).hex() == c0["record"]
    kr.append(bytes.fromhex(c0["record"]) + bytes.fromhex(d["record"]), durable=False)
    # The second high-water mac chains the first record's mac.
    assert kr.commit_record(c1["seq"], c1["commit_id"].encode(), c1["parent_id"].encode()).hex() == c1["record"]
    kr.append(bytes.fromhex(c1["record"]), durable=False)
    assert (tmp_path / "keyring").read_bytes().hex() == case["file"]


@pytest.mark.parametrize("case", REC["keyring"], ids=_ids(REC["keyring"]))
def test_keyring_tamper(case: dict[str, Any], tmp_path: Path) -> None:
    data = bytes.fromhex(case["file"])
    header = bytes.fromhex(case["header"])
    dek_id = bytes.fromhex(case["dek_record"]["dek_id"])
    c0 = bytes.fromhex(case["commit_records"][0]["record"])
    dek_at = len(header) + len(c0)
    # Header: magic, version, store id.
    for index in (0, 4, 5):
        with pytest.raises(IntegrityError):
            _keyring(tmp_path / "k", case, _flip(data, index)).refresh()
    # DEK record: id, epoch, nonce, ciphertext, tag -> the key is absent or does not authenticate.
    body = dek_at + 3
    for index in (body, body + 19, body + 20, body + 20 + 12, body + 80 - 1):
        kr = _keyring(tmp_path / "k", case, _flip(data, index))
        kr.refresh()
        with pytest.raises(IntegrityError):
            kr.dek(dek_id)
    # COMMIT record: seq, commit id, parent id, mac.
    for index in (len(header) + 3 + 7, len(header) + 3 + 8, len(header) + 3 + 48, len(header) + len(c0) - 1):
        with pytest.raises(IntegrityError):
            _keyring(tmp_path / "k", case, _flip(data, index)).refresh()
    # Unknown record type.
    with pytest.raises(IntegrityError):
        _keyring(tmp_path / "k", case, data[:dek_at] + b"\x07" + data[dek_at + 1 :]).refresh()


def test_keyring_type_5_commit_records(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Format version 2 keyrings: COMMIT records with raw ids (type 5) read, chain and re-encode."""
    case = KEYRING_V2
    v1 = REC["keyring"][0]
    kr = _keyring(tmp_path / "keyring", case, bytes.fromhex(case["file"]))
    kr.refresh()
    kr_v1 = _keyring(tmp_path / "v1", v1, bytes.fromhex(v1["file"]))
    kr_v1.refresh()
    assert kr.high_water == kr_v1.high_water is not None
    assert len(bytes.fromhex(case["file"])) == len(bytes.fromhex(v1["file"])) - 2 * 40
    # re-encoded from an empty keyring: identical bytes
    fresh = _keyring(tmp_path / "fresh", case, bytes.fromhex(case["header"]))
    c0, c1 = case["commit_records"]
    assert (
        fresh.commit_record(c0["seq"], c0["commit_id"].encode(), c0["parent_id"].encode(), raw_ids=True).hex()
        == (c0["record"])
    )
    fresh.append(bytes.fromhex(c0["record"]) + bytes.fromhex(case["dek_record"]["record"]), durable=False)
    assert (
        fresh.commit_record(c1["seq"], c1["commit_id"].encode(), c1["parent_id"].encode(), raw_ids=True).hex()
        == (c1["record"])
    )
    # A type 2 record may follow a type 5 one (and the reverse): one mac chain.
    mixed = bytes.fromhex(case["file"])[: -len(bytes.fromhex(c1["record"]))] + bytes.fromhex(
        v1["commit_records"][1]["record"]
    )
    kr_mixed = _keyring(tmp_path / "mixed", case, mixed)
    kr_mixed.refresh()
    assert kr_mixed.high_water == kr.high_water
    # Tampering: seq, commit id, parent id, mac, the length.
    data = bytes.fromhex(case["file"])
    at = len(bytes.fromhex(case["header"]))
    for index in (at + 3 + 7, at + 3 + 8, at + 3 + 28, at + 3 + 48 + 31):
        with pytest.raises(IntegrityError):
            _keyring(tmp_path / "k", case, _flip(data, index)).refresh()
    longer = data[:at] + b"\x05\x00\x51" + data[at + 3 : at + 83] + b"\x00" + data[at + 83 :]
    with pytest.raises(IntegrityError):
        _keyring(tmp_path / "k", case, longer).refresh()


# -- store configuration -------------------------------------------------------------------------


@pytest.mark.parametrize("case", REC["config"], ids=_ids(REC["config"]))
def test_config_mac(case: dict[str, Any]) -> None:
    store_id = bytes.fromhex(case["store_id"])
    cfg = case["config"]
    assert StoreSettings(**cfg["settings"]).model_dump() == cfg["settings"]
    body = json.dumps({k: cfg[k] for k in ("format", "version", "store_id", "settings")}, sort_keys=True,
                      separators=(",", ":"))  # fmt: skip
    msg = b"memvault/v1/config" + store_id + body.encode()
    assert msg.hex() == case["mac_message"]
    key = bytes.fromhex(case["config_key"])
    tag = crypto.b64decode(case["settings_mac"])
    crypto.mac_verify(key, msg, tag)
    changed = {**cfg, "settings": {**cfg["settings"], "max_file_bytes": cfg["settings"]["max_file_bytes"] + 1}}
    body2 = json.dumps(changed, sort_keys=True, separators=(",", ":"))
    with pytest.raises(IntegrityError):
        crypto.mac_verify(key, b"memvault/v1/config" + store_id + body2.encode(), tag)


def test_vectors_are_self_consistent() -> None:
    """The records vectors use the subkeys of the key slot vector's master key."""
    sub = SLOTS_FILE["subkeys"]["subkeys"]
    assert REC["shards"][0]["index_key"] == sub["index"]
    assert REC["meta"][0]["meta_key"] == sub["meta"]
    assert REC["commits"][0]["chain_key"] == sub["chain"]
    assert REC["keyring"][0]["wrap_key"] == sub["wrap"]
    assert REC["keyring"][0]["mac_key"] == sub["keyring"]
    assert REC["config"][0]["config_key"] == sub["config"]
    assert SLOTS[0]["master_keys"]["1"] == SLOTS_FILE["subkeys"]["master_key"]


def test_destroy_and_epoch_records_chain_as_format_md_says(tmp_path: Path) -> None:
    """Version 3 keyring records, recomputed here with hmac/hashlib from docs/format.md §3.1: the
    DESTROY, EPOCH and ATIMES macs, each chaining to the record before it."""
    import hashlib
    import hmac
    import struct

    from conftest import FAST_KDF, PASSPHRASE, keyring_records
    from memvault import MemoryStore
    from memvault.admin import keys as keymgmt
    from memvault.erasure.redact import shred_file

    store = MemoryStore.create(tmp_path / "s", passphrase=PASSPHRASE, kdf=FAST_KDF)
    store.put_file("/memories/a.md", "a\n")
    store.put_file("/memories/b.md", "b\n")
    store.put_file("/memories/a.md", "a2\n")
    shred_file(store, "/memories/b.md")
    keymgmt.rotate(store, passphrase=PASSPHRASE, kdf=FAST_KDF)
    key, store_id = store._keys.keyring, store.store_id  # K_keyring: first epoch, HKDF "keyring"
    data = (tmp_path / "s" / "keyring").read_bytes()
    store.close()
    prev = bytes(32)
    seen: dict[int, int] = {}
    for rtype, start, end in keyring_records(data):
        body = data[start + 3 : end]
        if rtype == 5:
            seq, commit_id, parent_id, mac = struct.unpack(">Q20s20s32s", body)
            msg = (
                b"memvault/v1/hw"
                + store_id
                + struct.pack(">Q", seq)
                + commit_id.hex().encode()
                + parent_id.hex().encode()
            )
        elif rtype == 6:
            dek_id, sealed, mac = body[:16], body[16:-32], body[-32:]
            msg = b"memvault/v1/destroy" + store_id + dek_id + hashlib.sha256(sealed).digest()
        elif rtype == 7:
            (epoch,), mac = struct.unpack(">I", body[:4]), body[4:]
            assert epoch == 2 and len(body) == 36
            msg = b"memvault/v1/epoch" + store_id + struct.pack(">I", epoch)
        elif rtype == 8:
            digest, mac = body[:32], body[32:]
            msg = b"memvault/v1/atimes" + store_id + digest
        else:
            continue
        assert hmac.new(key, msg + prev, hashlib.sha256).digest() == mac, rtype
        prev = mac
        seen[rtype] = seen.get(rtype, 0) + 1
    assert seen == {5: 6, 6: 1, 7: 1, 8: 1}  # init, three puts, the redaction, the rotation; the empty access file
