"""memvault.edits.batch: many writes as one commit, scrubbed, all or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import memvault
from conftest import make_store
from memvault import history
from memvault.edits.batch import Batch
from memvault.errors import (
    ConflictError,
    InvalidInputError,
    InvalidPathError,
    PathNotFoundError,
    SensitiveDataError,
)
from memvault.settings import StoreSettings

AWS_KEY = "AKIAQ7VXK2JD4NRP3W6T"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


@pytest.fixture
def store(store_path: Path) -> memvault.MemoryStore:
    s = make_store(store_path)
    s.put_file("/memories/old/a.md", "old a\n")
    s.put_file("/memories/keep.md", "keep\n")
    return s


def _state(store: memvault.MemoryStore) -> tuple[tuple[bytes, int], dict[str, bytes | None]]:
    """The head and every path with its content (None for a directory)."""
    entries = store.list("/memories", recursive=True)
    return store.head, {e.path: store.read_bytes(e.path) if e.kind == "file" else None for e in entries}


def test_many_writes_and_deletes_are_one_commit(store: memvault.MemoryStore) -> None:
    _, seq = store.head
    with Batch(store, actor="loader", session="sync-1") as batch:
        for i in range(500):
            batch.put(f"/memories/customers/c{i:03d}.md", f"customer {i}\n")
        batch.put("/memories/img/logo.png", PNG)
        batch.delete("/memories/old", recursive=True)
    result = batch.result
    assert result.seq == seq + 1 and store.head[1] == seq + 1
    assert len(result.written) == 501 and result.deleted == ("/memories/old",)
    [entry] = history.log(store, limit=1)
    assert (entry.command, entry.actor, entry.session, entry.seq) == ("batch", "loader", "sync-1", seq + 1)
    assert store.read_text("/memories/customers/c007.md") == "customer 7\n"
    assert store.read_bytes("/memories/img/logo.png") == PNG
    assert not store.exists("/memories/old/a.md") and not store.exists("/memories/old")
    assert store.read_text("/memories/keep.md") == "keep\n"
    # the commit before the batch still reads as it was
    assert store.read_text("/memories/old/a.md", rev=seq) == "old a\n"


def test_texts_are_scrubbed_and_the_findings_recorded(store: memvault.MemoryStore) -> None:
    with Batch(store) as batch:
        batch.put("/memories/creds.md", f"the key is {AWS_KEY}\n")
        batch.put("/memories/plain.md", "nothing here\n")
    assert store.read_text("/memories/creds.md") == "the key is [REDACTED:aws_access_key_id]\n"
    assert batch.result.findings == {"/memories/creds.md": {"aws_access_key_id": 1}}
    [entry] = history.log(store, limit=1)
    assert entry.findings == {"aws_access_key_id": 1}


def test_a_rejected_text_or_path_is_refused_when_added(store_path: Path) -> None:
    settings = StoreSettings.model_validate({"scrub": {"policy": {"aws_access_key_id": "reject"}}})
    store = make_store(store_path, settings)
    before = _state(store)
    batch = Batch(store)
    batch.put("/memories/fine.md", "fine\n")
    with pytest.raises(SensitiveDataError) as err:
        batch.put("/memories/creds.md", f"key {AWS_KEY}\n")
    assert AWS_KEY not in str(err.value)
    with pytest.raises(SensitiveDataError):
        batch.put(f"/memories/{AWS_KEY}.md", "x\n")
    assert len(batch) == 1  # the refused writes were not added
    assert _state(store) == before  # nothing is written before the commit
    batch.commit()
    assert store.read_text("/memories/fine.md") == "fine\n"


@pytest.mark.parametrize(
    ("last", "error"),
    [
        (lambda b: b.put("/memories/keep.md", "x\n", expected_sha256="0" * 64), ConflictError),
        (lambda b: b.put("/memories/keep.md", "x\n", must_not_exist=True), ConflictError),
        (lambda b: b.delete("/memories/missing.md"), PathNotFoundError),
        (lambda b: b.delete("/memories/new"), InvalidInputError),  # a directory, without recursive
        (lambda b: b.put("/memories/keep.md/below.md", "x\n"), memvault.errors.PathExistsError),
    ],
)
def test_one_failing_operation_writes_nothing(store: memvault.MemoryStore, last: object, error: type) -> None:
    before = _state(store)
    batch = Batch(store)
    for i in range(20):
        batch.put(f"/memories/new/{i}.md", f"{i}\n")
    batch.delete("/memories/old/a.md")
    last(batch)  # type: ignore[operator]
    with pytest.raises(error):
        batch.commit()
    assert _state(store) == before


def test_preconditions_that_hold_are_applied(store: memvault.MemoryStore) -> None:
    import hashlib

    digest = hashlib.sha256(b"keep\n").hexdigest()  # the content the caller read
    with Batch(store) as batch:
        batch.put("/memories/keep.md", "kept, edited\n", expected_sha256=digest)
        batch.put("/memories/brand-new.md", "new\n", must_not_exist=True)
    assert store.read_text("/memories/keep.md") == "kept, edited\n"
    assert store.read_text("/memories/brand-new.md") == "new\n"


def test_an_exception_in_the_block_discards_the_batch(store: memvault.MemoryStore) -> None:
    before = _state(store)
    with pytest.raises(RuntimeError, match="stop"):
        with Batch(store) as batch:
            batch.put("/memories/x.md", "x\n")
            raise RuntimeError("stop")
    assert _state(store) == before
    with pytest.raises(RuntimeError, match="not been committed"):
        _ = batch.result


def test_an_empty_batch_writes_no_commit_and_a_committed_one_takes_nothing_more(
    store: memvault.MemoryStore,
) -> None:
    head = store.head
    with Batch(store) as batch:
        pass
    assert batch.result.commit_id is None and store.head == head
    with pytest.raises(RuntimeError, match="already committed"):
        batch.put("/memories/late.md", "late\n")


def test_bad_input_is_refused_when_added(store: memvault.MemoryStore) -> None:
    batch = Batch(store)
    with pytest.raises(InvalidPathError):
        batch.put("/memories/../etc/passwd", "x\n")
    with pytest.raises(InvalidPathError):
        batch.delete("/memories")
    with pytest.raises(InvalidInputError):
        batch.put("/memories/fake.png", "not an image")
    with pytest.raises(InvalidInputError):
        batch.put("/memories/bin.md", b"\xff\xfe")
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        batch.put("/memories/s.md", "\ud800")
    with pytest.raises(InvalidInputError):
        batch.put("/memories/a.md", "x", expected_sha256="abc")
    with pytest.raises(memvault.errors.LimitExceededError):
        batch.put("/memories/big.md", "x" * (store.settings.max_file_bytes + 1))
    assert len(batch) == 0
