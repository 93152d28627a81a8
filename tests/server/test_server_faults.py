"""The server when its storage fails: an S3 root whose bucket stops answering (503s, resets)
answers 503 with ``retry-after`` and changes nothing, and works again when the bucket does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the server needs memvault[server]")

import anthropic  # noqa: E402

from conftest import FAST_KDF, PASSPHRASE  # noqa: E402
from memvault.keys.slots import Unlock  # noqa: E402
from memvault.server.root import ServerRoot  # noqa: E402
from serversupport import serve_root  # noqa: E402


@pytest.mark.parametrize("kind", ["503", "reset_before"])
def test_an_unreachable_bucket_is_503_with_retry_after_and_nothing_half_written(
    s3_faulty: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "cache"))
    root = ServerRoot.init(s3_faulty.url("root"), Unlock(passphrase=PASSPHRASE), kdf=FAST_KDF)
    _record, key = root.create_key("admin", admin=True)
    store_id = root.create_store("s").id
    server, thread, port, _app = serve_root(root)
    try:
        client = anthropic.Anthropic(api_key=key, base_url=f"http://127.0.0.1:{port}", max_retries=0)
        memories = client.beta.memory_stores.memories
        memories.create(store_id, path="/before.md", content="x")
        s3_faulty.proxy.add_fault(kind, times=10_000)  # every request to the bucket fails from now on
        with pytest.raises(anthropic.APIStatusError) as err:
            memories.create(store_id, path="/during.md", content="y")
        assert err.value.status_code == 503
        assert err.value.response.headers.get("retry-after")
        assert err.value.response.headers.get("x-should-retry") != "false"
        assert "S3" in err.value.message or "storage" in err.value.message
        s3_faulty.proxy.clear()
        assert [m.path for m in memories.list(store_id)] == ["/before.md"]
        memories.create(store_id, path="/after.md", content="z")
        assert [m.path for m in memories.list(store_id)] == ["/after.md", "/before.md"]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
