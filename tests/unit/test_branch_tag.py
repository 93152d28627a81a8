"""The chain tag of a side-branch commit (docs/format.md §5.6), computed here from the document's
formula with the standard library only, and its domain separation from ``main``'s tag."""

from __future__ import annotations

import hashlib
import hmac
import struct

import pytest

from memvault.format.records import CommitMeta, commit_tag, open_meta, seal_meta

KEY = bytes(range(32))
STORE = bytes.fromhex("00112233445566778899aabbccddeeff")
PARENT = b"a" * 40
TREE = b"b" * 40
SEALED = b"sealed metadata bytes"


def _doc_tag(domain: bytes, *fields: bytes) -> bytes:
    return hmac.digest(KEY, b"|".join([domain, STORE, *fields]), hashlib.sha256)


def test_branch_tag_follows_the_document() -> None:
    name = b"dream/0123456789abcdef"
    expected = _doc_tag(
        b"memvault/v1/branch-commit", struct.pack(">H", len(name)) + name, struct.pack(">Q", 7), PARENT, TREE,
        hashlib.sha256(SEALED).digest(),
    )  # fmt: skip
    assert commit_tag(KEY, STORE, 7, PARENT, TREE, SEALED, branch=name.decode()) == expected


def test_main_tag_is_unchanged_and_differs_from_every_branch_tag() -> None:
    expected = _doc_tag(b"memvault/v1/commit", struct.pack(">Q", 7), PARENT, TREE, hashlib.sha256(SEALED).digest())
    main = commit_tag(KEY, STORE, 7, PARENT, TREE, SEALED)
    assert main == expected
    a = commit_tag(KEY, STORE, 7, PARENT, TREE, SEALED, branch="dream/0000000000000001")
    b = commit_tag(KEY, STORE, 7, PARENT, TREE, SEALED, branch="dream/0000000000000002")
    assert len({main, a, b}) == 3


@pytest.mark.parametrize(
    ("branch", "extra"),
    [("", {}), ("dream/0123456789abcdef", {}), ("dream/0123456789abcdef", {"fork": "f" * 40, "model": "m"})],
)
def test_metadata_round_trips_branch_and_extra(branch: str, extra: dict[str, str]) -> None:
    meta = CommitMeta(3, 1.5, "dream", "s", "fork", (), {}, branch=branch, extra=extra)
    assert open_meta(KEY, STORE, seal_meta(KEY, STORE, meta)) == meta


def test_main_metadata_has_no_new_keys() -> None:
    meta = CommitMeta(3, 1.5, "agent", "s", "create", ("/memories/a",), {})
    assert set(meta.to_json()) == {"seq", "time", "actor", "session", "command", "paths", "findings"}
