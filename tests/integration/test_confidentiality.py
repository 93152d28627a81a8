"""Someone holding a full copy of the store directory without the key learns no content, no
names, no actors and no commit text: canaries never appear in any byte under the store."""

from __future__ import annotations

import zlib
from pathlib import Path

from dulwich.repo import Repo

import memvault
from conftest import all_store_bytes as _all_bytes
from conftest import make_store
from memvault import crypto
from memvault.settings import StoreSettings

CANARIES = {
    "content": "CANARYcontent7f3a",
    "path": "canarypath91bd",
    "rename": "canaryrename55e0",
    "actor": "CANARYactor2c4d",
    "session": "CANARYsession8e1f",
    "old_text": "CANARYoldtext3b9c",
}


def _variants(text: str) -> list[bytes]:
    return [text.encode("utf-8"), text.encode("utf-16-le"), text.encode("utf-16-be"), text.lower().encode()]


def test_canaries_never_reach_disk(store_path: Path) -> None:
    store = make_store(store_path)
    tool = memvault.MemoryTool(store, actor=CANARIES["actor"], session=CANARIES["session"])
    c = CANARIES
    tool.call({"command": "create", "path": f"/memories/{c['path']}/notes.md", "file_text": f"hello {c['content']}\n"})
    tool.call({"command": "create", "path": "/memories/plain.md", "file_text": f"keep {c['old_text']}\n"})
    tool.call({"command": "str_replace", "path": "/memories/plain.md", "old_str": c["old_text"], "new_str": "gone"})
    tool.call(
        {"command": "insert", "path": f"/memories/{c['path']}/notes.md", "insert_line": 0, "insert_text": c["content"]}
    )
    tool.call({"command": "rename", "old_path": f"/memories/{c['path']}", "new_path": f"/memories/{c['rename']}"})
    tool.call({"command": "view", "path": "/memories"})
    store.close()
    blobs = _all_bytes(store_path)
    assert len(blobs) > 10
    for label, canary in CANARIES.items():
        for variant in _variants(canary):
            for name, data in blobs:
                assert variant not in data, f"{label} canary found in {name}"
    # Sanity: the scan can find things (the commit object text is there once inflated).
    assert any(b"memvault" in data for _n, data in blobs)


def test_git_metadata_is_constant(store: memvault.MemoryStore) -> None:
    tool = memvault.MemoryTool(store, actor="alice", session="s")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "y"})
    repo = Repo(str(store.root / "repo"))
    head = repo.refs[b"refs/heads/main"]
    count = 0
    for entry in repo.get_walker(include=[head]):
        commit = entry.commit
        assert commit.author == commit.committer == b"memvault <memvault@invalid>"
        assert commit.author_time == commit.commit_time == 0
        first_line = commit.message.split(b"\n")[0]
        assert first_line == b"memvault"
        assert b"alice" not in commit.message and b"a.md" not in commit.message
        count += 1
    assert count == 3
    # Git tree names are opaque hex tokens, never memory names.
    tree = repo[repo[head].tree]
    names = [e.path for e in tree.iteritems()]
    assert names and all(len(n) == 1 and n in b"0123456789abcdef" for n in names)  # layout 2: <h0>


def test_blob_sizes_are_padded_to_buckets() -> None:
    sizes = {crypto.padded_size(n) for n in range(0, 4093)}
    assert sizes == {256 * k for k in range(1, 17)}
    assert crypto.padded_size(1000) == crypto.padded_size(1001) == 1024
    big = [crypto.padded_size(n) for n in range(5000, 200_000, 997)]
    assert all(0 <= p - n - 4 <= 0.12 * (n + 4) for p, n in zip(big, range(5000, 200_000, 997)))
    # PADME: at most 2^(bit length of the exponent) buckets per power of two, so ~200k
    # distinct lengths collapse into fewer than 200 observable sizes.
    assert len({crypto.padded_size(n) for n in range(4093, 200_000)}) < 200


def test_no_compression_length_oracle(store: memvault.MemoryStore) -> None:
    """Content = secret + guess (a CRIME-style probe): a guess that repeats the secret, which
    compression would shrink, gives exactly the blob size of an equally long wrong guess."""
    secret = "sk-ant-api03-" + "Qx7Lm2Vb9Rt4Wn8Kp3Zs" * 3
    sizes = {}
    for label, guess in {"right": secret, "wrong": "".join(chr(ord(c) ^ 1) for c in secret)}.items():
        assert len(guess) == len(secret)
        store.put_file(f"/memories/{label}.md", f"token={secret}\nprobe={guess}\n")
        node = store.snapshot().get(f"/memories/{label}.md")
        assert node is not None
        sizes[label] = len(store.git.read_blob(node.blob_id))
    assert sizes["right"] == sizes["wrong"]
    # zlib would tell them apart: the oracle a compressing design would have.
    plain_right = zlib.compress(f"token={secret}\nprobe={secret}\n".encode())
    plain_wrong = zlib.compress(f"token={secret}\nprobe={''.join(chr(ord(c) ^ 1) for c in secret)}\n".encode())
    assert len(plain_right) < len(plain_wrong)


def test_same_content_twice_gives_different_ciphertexts(store: memvault.MemoryStore) -> None:
    store.put_file("/memories/a.md", "same text")
    store.put_file("/memories/b.md", "same text")
    a1 = store.snapshot().get("/memories/a.md")
    store.put_file("/memories/a.md", "same text")
    snap = store.snapshot()
    ids = {a1.blob_id, snap.get("/memories/a.md").blob_id, snap.get("/memories/b.md").blob_id}  # type: ignore[union-attr]
    assert len(ids) == 3


def test_a_commit_writes_its_records_in_an_order_that_says_nothing_of_the_paths(tmp_path: Path) -> None:
    """A renamed subtree re-encrypts every file in it: its data key records (and blobs) must not
    come out in the alphabetical order of the file names an observer cannot read."""
    from conftest import keyring_records

    store = make_store(tmp_path / "s", StoreSettings(durability="none"))
    names = [f"{chr(ord('a') + i)}-note.md" for i in range(16)]
    for name in names:
        store.put_file(f"/memories/dir/{name}", f"{name}\n")
    before = len((tmp_path / "s" / "keyring").read_bytes())
    memvault.MemoryTool(store).call({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/moved"})
    data = (tmp_path / "s" / "keyring").read_bytes()
    appended = [
        data[start + 3 : start + 19] for rtype, start, _end in keyring_records(data) if start >= before and rtype == 1
    ]
    nodes = store.state_at(store.head[0]).nodes
    by_dek = {node.dek_id: path for path, node in nodes.items() if path.startswith("/memories/moved")}
    order = [by_dek[dek_id] for dek_id in appended if dek_id in by_dek]
    files = [p for p in order if p.endswith(".md")]
    assert len(files) == 16
    assert files != sorted(files) and files != sorted(files, reverse=True)
