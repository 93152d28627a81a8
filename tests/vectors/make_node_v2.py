"""Regenerate ``node_v2.json``: compact (format version 2) node records, docs/format.md 5.2.

Independent of memvault on purpose: the record is packed with ``struct`` from the layout in
docs/format.md, framed as in §4 and sealed with ``cryptography``'s AES-GCM directly, so the vectors
check memvault's encoder and decoder against the document, not against themselves. The first
three cases reuse the fields, keys and nonces of the JSON node records in ``records_v1.json``.

    python tests/vectors/make_node_v2.py > tests/vectors/node_v2.json
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HERE = Path(__file__).resolve().parent


def frame(data: bytes, step: int = 256) -> bytes:
    total = len(data) + 4
    assert total <= 4096  # these records stay in the small steps of §4
    size = max(256, -(-total // step) * step)
    return struct.pack(">I", len(data)) + data + bytes(size - total)


def record(r: dict[str, object]) -> bytes:
    is_file = r["k"] == "file"
    out = b"N2" + bytes([0 if is_file else 1, 1 if r["x"] else 0]) + bytes.fromhex(str(r["f"]))
    out += struct.pack(">QQd", r["v"], r["s"], r["t"])
    if is_file:
        out += bytes.fromhex(str(r["h"])) + bytes.fromhex(str(r["b"])) + bytes.fromhex(str(r["c"]))
    return out + str(r["p"]).encode("utf-8")


def git_tree(entries: dict[bytes, tuple[bytes, bytes]]) -> bytes:
    """Git tree id of {name: (mode text, 20-byte id)}: entries in git's order (a subtree sorts as name + "/")."""
    order = sorted(entries, key=lambda n: n + (b"/" if entries[n][0] == b"40000" else b""))
    body = b"".join(entries[n][0] + b" " + n + b"\0" + entries[n][1] for n in order)
    return hashlib.sha1(b"tree " + str(len(body)).encode() + b"\0" + body).digest()


def layout2_tree(content: dict[str, str], shards: dict[str, str]) -> dict[str, str]:
    """Layout 2 (format.md 5.3): <h0>/<h1>/<h[2:]> content blobs and <h0>/<h1>/i shard blobs."""
    leaves: dict[bytes, dict[bytes, tuple[bytes, bytes]]] = {}
    for token, blob in content.items():
        leaves.setdefault(token[:2].encode(), {})[token[2:].encode()] = (b"100644", bytes.fromhex(blob))
    for shard, blob in shards.items():
        leaves.setdefault(shard.encode(), {})[b"i"] = (b"100644", bytes.fromhex(blob))
    trees = {"/".join(chr(c) for c in h): git_tree(e) for h, e in leaves.items()}
    mids: dict[bytes, dict[bytes, tuple[bytes, bytes]]] = {}
    for h, e in leaves.items():
        mids.setdefault(h[:1], {})[h[1:]] = (b"40000", git_tree(e))
    trees.update({h.decode(): git_tree(e) for h, e in mids.items()})
    trees["root"] = git_tree({h: (b"40000", git_tree(e)) for h, e in mids.items()})
    return {k: v.hex() for k, v in sorted(trees.items())}


def main() -> None:
    v1 = json.loads((HERE / "records_v1.json").read_text(encoding="utf-8"))
    name_key = bytes.fromhex(
        json.loads((HERE / "keyslot_v1.json").read_text(encoding="utf-8"))["subkeys"]["subkeys"]["name"]
    )
    cases = []
    for c in v1["nodes"]:
        cases.append({k: c[k] for k in ("desc", "dek", "dek_id", "store_id", "token", "nonce", "record")})
    # A path of 155 UTF-8 bytes: the record outgrows the first 256-byte step.
    long_path = "/memories/" + "é" * 70 + "/x.md"
    first = v1["nodes"][1]
    cases.append(
        {
            "desc": f"file node with a {len(long_path.encode())}-byte path (framed to 512 bytes), extreme integers",
            "dek": "11" * 32,
            "dek_id": "22" * 16,
            "store_id": first["store_id"],
            "token": hmac.digest(name_key, long_path.encode("utf-8"), hashlib.sha256).hex(),
            "nonce": "33" * 12,
            "record": {**first["record"], "p": long_path, "v": 2**64 - 1, "s": 2**63 - 1, "t": 0.0},
        }
    )
    for c in cases:
        rec = record(c["record"])
        aad = (
            b"memvault/v1/node" + bytes.fromhex(c["store_id"]) + bytes.fromhex(c["token"]) + bytes.fromhex(c["dek_id"])
        )
        nonce = bytes.fromhex(c["nonce"])
        c["record_bin"] = rec.hex()
        c["frame_bytes"] = len(frame(rec))
        c["sealed"] = (nonce + AESGCM(bytes.fromhex(c["dek"])).encrypt(nonce, frame(rec), aad)).hex()
    # An index shard of format version 2: the two file nodes above (both in shard "21"), framed
    # in 64-byte steps.
    index_key = bytes.fromhex(
        json.loads((HERE / "keyslot_v1.json").read_text(encoding="utf-8"))["subkeys"]["subkeys"]["index"]
    )
    members = sorted(cases[1:3], key=lambda c: c["token"])
    assert {c["token"][:2] for c in members} == {"21"}
    body = b"".join(
        bytes.fromhex(c["token"])
        + bytes.fromhex(c["dek_id"])
        + struct.pack(">I", len(bytes.fromhex(c["sealed"])))
        + bytes.fromhex(c["sealed"])
        for c in members
    )
    shard_nonce = bytes.fromhex("44" * 12)
    shard_frame = frame(body, 64)
    shard = {
        "desc": "index shard 21 holding the two file node records above, framed in 64-byte steps",
        "index_key": index_key.hex(),
        "store_id": members[0]["store_id"],
        "shard": "21",
        "nonce": shard_nonce.hex(),
        "tokens": [c["token"] for c in members],
        "body_bytes": len(body),
        "frame_bytes": len(shard_frame),
        "blob": (
            b"MVI1"
            + shard_nonce
            + AESGCM(index_key).encrypt(
                shard_nonce, shard_frame, b"memvault/v1/index" + bytes.fromhex(members[0]["store_id"]) + b"21"
            )
        ).hex(),
    }
    # The keyring vector of records_v1.json with its COMMIT records as type 5 (ids as 20 raw bytes;
    # the macs, computed over the hex ids, are the same bytes).
    kv1 = v1["keyring"][0]
    commits5 = []
    for c in kv1["commit_records"]:
        rec = bytes.fromhex(c["record"])
        assert rec[0] == 2 and struct.unpack(">H", rec[1:3])[0] == 120
        seq, mac = rec[3:11], rec[-32:]
        body = seq + bytes.fromhex(c["commit_id"]) + bytes.fromhex(c["parent_id"]) + mac
        commits5.append({**c, "record": (b"\x05" + struct.pack(">H", len(body)) + body).hex()})
    c0, c1 = (bytes.fromhex(c["record"]) for c in commits5)
    keyring = {
        "desc": "records_v1.json's keyring with type 5 COMMIT records: header, COMMIT, DEK, COMMIT",
        **{k: kv1[k] for k in ("store_id", "wrap_key", "mac_key", "header", "dek_record")},
        "commit_records": commits5,
        "file": (bytes.fromhex(kv1["header"]) + c0 + bytes.fromhex(kv1["dek_record"]["record"]) + c1).hex(),
    }
    commit = next(c for c in v1["commits"] if "content_blobs" in c)
    tree = {
        "desc": "layout 2 tree of the blobs of the records_v1.json commit vector (its trees are layout 1)",
        "content_blobs": commit["content_blobs"],
        "index_blobs": commit["index_blobs"],
        "trees": layout2_tree(commit["content_blobs"], commit["index_blobs"]),
    }
    doc = {
        "format": "memvault node records, encoding 2, and tree layout 2 (format version 2)",
        "note": "Generated by make_node_v2.py with struct, hashlib and cryptography only (not memvault).",
        "cases": cases,
        "shard": shard,
        "keyring": keyring,
        "tree_layout_2": tree,
    }
    print(json.dumps(doc, indent=1, ensure_ascii=True))


if __name__ == "__main__":
    main()
