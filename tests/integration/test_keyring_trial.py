"""A keyring's trial of records (what a replica's pull asks before it appends a log's records)
changes nothing: the data keys, marks and branch records it read stay as the file has them."""

from __future__ import annotations

import shutil
from pathlib import Path

import memvault
from conftest import PASSPHRASE, make_store


def test_a_trial_of_records_leaves_the_keyring_as_the_file_has_it(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s")
    store.put_file("/memories/a.md", "one\n")
    store.put_file("/memories/b.md", "two\n")
    store.close()
    shutil.copytree(tmp_path / "s", tmp_path / "older")
    before = (tmp_path / "s" / "keyring").read_bytes()
    store = memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE)
    store.put_file("/memories/c.md", "three\n")
    new_dek = store.state_at(store.head[0]).nodes["/memories/c.md"].dek_id
    run = (tmp_path / "s" / "keyring").read_bytes()[len(before) :]
    store.close()

    older = memvault.MemoryStore.open(tmp_path / "older", passphrase=PASSPHRASE)
    ring = older.keyring
    ring.refresh()
    old_dek = older.state_at(older.head[0]).nodes["/memories/b.md"].dek_id
    mark = ring.high_water
    assert mark is not None
    assert ring.accepts([run]) == 1  # the later command's records, whole
    assert not ring.has(new_dek)  # the trial's data key record was not kept
    assert ring.has(old_dek)
    assert ring.high_water == mark
    assert older.read_text("/memories/b.md") == "two\n"
    older.close()
