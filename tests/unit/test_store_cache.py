"""The decrypted-content cache stays within its byte budget, whatever path fills it."""

from __future__ import annotations

from pathlib import Path

import memvault
from conftest import make_store
from memvault import store as store_module
from memvault.paths import parse_path
from memvault.settings import StoreSettings


def test_content_cache_is_bounded_after_a_bulk_transaction(tmp_path: Path) -> None:
    s = make_store(tmp_path / "s", StoreSettings(durability="none", max_file_bytes=1024 * 1024))
    budget = store_module._CONTENT_CACHE_BYTES
    chunk = b"x" * (budget // 16)

    def bulk(txn: memvault.store.Transaction) -> None:
        for i in range(64):  # 4x the budget in one commit
            txn.write_file(parse_path(f"/memories/f{i}.bin"), chunk + bytes([i]))

    s.transact(bulk, command="put", paths=(), actor="t", session="")
    assert s._content_cache_size <= budget
    assert s._content_cache_size == sum(len(v) for v in s._content_cache.values())
    assert len(s._content_cache) == budget // len(chunk + b"0")
    # Reads still return the right bytes, cached or not.
    snap = s.snapshot()
    assert snap.read(parse_path("/memories/f0.bin")) == chunk + b"\x00"
    assert snap.read(parse_path("/memories/f63.bin")) == chunk + bytes([63])
