"""Undo puts nothing back that the store's scrubber policy now masks or rejects.

History may hold what the policy of its time allowed (the policy was ``allow`` for a kind, or the
scrubber was off, and was tightened since). ``revert``, ``restore`` and ``rollback`` (library, CLI
and the MCP tool ``memory_revert``) apply the policy in force now, as a write does: a ``redact``
finding is masked and counted, a ``reject`` finding or a path holding sensitive data refuses the
whole command and writes nothing, and the error names kinds, never values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, make_store
from memvault.admin.config import change_settings
from memvault.cli import main
from memvault.edits import undo
from memvault.errors import InvalidPathError, SensitiveDataError
from memvault.history import log, read_at, resolve, tree_at
from memvault.protocol.commands import run_command
from memvault.settings import ScrubSettings, StoreSettings

#: An AWS access key id of the real shape (not AWS's documented example, which the scrubber knows
#: as a test value), built here so this file holds no credential-shaped literal.
KEY = "AKIA" + "Q3EGTX5RLW7NZ4PB"
KIND = "aws_access_key_id"
CREDS = "/memories/creds.md"
TEXT = f"deploy with {KEY}\nthen wait\n"
MASKED = f"deploy with [REDACTED:{KIND}]\nthen wait\n"
KEY_PATH = f"/memories/{KEY}.md"
SAFE_PATH = "/memories/safe.md"

#: The policy of the store's early days: access key ids allowed.
LAX = StoreSettings(scrub=ScrubSettings(policy={KIND: "allow"}))


def files(store: memvault.MemoryStore) -> dict[str, bytes | None]:
    commit = resolve(store, "HEAD")
    return {e.path: None if e.kind == "dir" else read_at(store, e.path, commit) for e in tree_at(store, commit)}


def agent(store: memvault.MemoryStore, **data: object) -> bytes:
    """One memory tool command by the agent; the commit it made."""
    run_command(store, data, actor="agent", session="s")
    return store.head[0]


def tighten(store: memvault.MemoryStore, policy: str) -> None:
    change_settings(store, {f"scrub.policy.{KIND}": policy})
    assert store.settings.scrub.policy[KIND] == policy


@pytest.fixture
def lax(store_path: Path) -> memvault.MemoryStore:
    return make_store(store_path, LAX)


def deleted_creds(store: memvault.MemoryStore) -> dict[str, bytes]:
    """The credentials file created under the lax policy, then deleted."""
    revs = {"create": agent(store, command="create", path=CREDS, file_text=TEXT)}
    agent(store, command="create", path="/memories/other.md", file_text="plain\n")
    revs["delete"] = agent(store, command="delete", path=CREDS)
    assert read_at(store, CREDS, revs["create"]) == TEXT.encode()  # history holds the key
    return revs


#: Each undo command that would put CREDS back, given the commits of :func:`deleted_creds`.
UNDOS: dict[str, Callable[[memvault.MemoryStore, dict[str, bytes]], undo.UndoResult]] = {
    "revert": lambda s, r: undo.revert(s, r["delete"]),
    "restore": lambda s, r: undo.restore(s, CREDS, r["create"]),
    "rollback": lambda s, r: undo.rollback(s, r["create"]),
}


@pytest.mark.parametrize("command", sorted(UNDOS))
def test_undo_masks_what_the_policy_now_masks(lax: memvault.MemoryStore, command: str) -> None:
    store = lax
    revs = deleted_creds(store)
    tighten(store, "redact")
    result = UNDOS[command](store, revs)
    assert result.changed and result.command == command
    assert read_at(store, CREDS) == MASKED.encode()
    assert result.findings == {KIND: 1}
    assert result.to_json()["findings"] == {KIND: 1}
    assert f"masked in what was put back (1 {KIND})" in result.note and KEY not in result.note
    top = log(store, limit=1)[0]
    assert (top.command, top.findings) == (command, {KIND: 1})
    assert KEY.encode() not in b"".join(v for v in files(store).values() if v is not None)
    assert read_at(store, CREDS, revs["create"]) == TEXT.encode()  # history is not rewritten
    # Nothing left to put back: the masked file is what an undo would write, so no empty commit.
    if command != "revert":  # (a second revert sees the masked file as changed after the commit)
        head = store.head
        again = UNDOS[command](store, revs)
        assert not again.changed and store.head == head


@pytest.mark.parametrize("command", sorted(UNDOS))
def test_undo_refuses_what_the_policy_now_rejects(lax: memvault.MemoryStore, command: str) -> None:
    store = lax
    revs = deleted_creds(store)
    tighten(store, "reject")
    head, before = store.head, files(store)
    with pytest.raises(SensitiveDataError) as err:
        UNDOS[command](store, revs)
    message = str(err.value)
    assert f"({KIND})" in message and CREDS in message and "Nothing was written" in message
    assert KEY not in message
    assert store.head == head and files(store) == before


def test_revert_of_a_rename_refuses_a_path_the_tool_refuses(lax: memvault.MemoryStore) -> None:
    """A file once named after a key id, renamed since: the policy now refuses the old name, for
    the model's rename and for every undo that would bring the name back."""
    store = lax
    created = agent(store, command="create", path=KEY_PATH, file_text="notes\n")
    renamed = agent(store, command="rename", old_path=KEY_PATH, new_path=SAFE_PATH)
    tighten(store, "redact")
    with pytest.raises(SensitiveDataError):  # the tool refuses the name ...
        run_command(store, {"command": "rename", "old_path": SAFE_PATH, "new_path": KEY_PATH}, actor="a", session="")
    head, before = store.head, files(store)
    for attempt in (
        lambda: undo.revert(store, renamed),
        lambda: undo.restore(store, KEY_PATH, created),
        lambda: undo.rollback(store, created),
    ):
        with pytest.raises(SensitiveDataError) as err:  # ... and so does every undo
            attempt()
        message = str(err.value)
        assert f"({KIND})" in message and "a path it would put back" in message and KEY not in message
        assert store.head == head and files(store) == before
    # A directory named after the key, renamed since: its revert is refused too.
    agent(store, command="delete", path=SAFE_PATH)
    tighten(store, "allow")
    agent(store, command="create", path=f"/memories/{KEY}/a.md", file_text="a\n")
    moved = agent(store, command="rename", old_path=f"/memories/{KEY}", new_path="/memories/dir")
    tighten(store, "redact")
    head = store.head
    with pytest.raises(SensitiveDataError, match=KIND):
        undo.revert(store, moved)
    assert store.head == head


def test_scrubber_turned_on_later(store_path: Path) -> None:
    """History written with the scrubber off comes back through the scrubber once it is on."""
    store = make_store(store_path, StoreSettings(scrub=ScrubSettings(enabled=False)))
    revs = deleted_creds(store)
    change_settings(store, {"scrub.enabled": True})
    result = undo.revert(store, revs["delete"])
    assert read_at(store, CREDS) == MASKED.encode() and result.findings == {KIND: 1}


def test_restore_checks_paths_against_the_current_limits(store: memvault.MemoryStore) -> None:
    """A path longer than the store now allows does not come back by a restore."""
    long = "/memories/" + "n" * 80 + ".md"
    created = agent(store, command="create", path=long, file_text="x\n")
    deleted = agent(store, command="delete", path=long)
    change_settings(store, {"max_path_bytes": 64})
    head = store.head
    for attempt in (
        lambda: undo.revert(store, deleted),
        lambda: undo.restore(store, "/memories", created),
        lambda: undo.rollback(store, created),
    ):
        with pytest.raises(InvalidPathError, match="64"):
            attempt()
        assert store.head == head


def test_binary_files_come_back_as_they_were(lax: memvault.MemoryStore) -> None:
    """The scrubber reads text only: an image is put back byte for byte."""
    store = lax
    png = b"\x89PNG\r\n\x1a\n" + KEY.encode() + b"\x00\x01"
    store.put_file("/memories/shot.png", png)
    created = store.head[0]
    agent(store, command="delete", path="/memories/shot.png")
    tighten(store, "reject")
    result = undo.restore(store, "/memories/shot.png", created)
    assert result.changed and result.findings == {}
    assert read_at(store, "/memories/shot.png") == png


# -- the command line ----------------------------------------------------------------------------------


@pytest.fixture
def cli_lax(env: Path) -> memvault.MemoryStore:
    return memvault.MemoryStore.create(env, passphrase="cli passphrase", kdf=FAST_KDF, settings=LAX)


def test_cli_revert_masks_and_refuses(cli_lax: memvault.MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    store = cli_lax
    revs = deleted_creds(store)
    tighten(store, "reject")
    head = store.head
    assert main(["revert", revs["delete"].decode()]) == 4
    err = capsys.readouterr().err
    assert f"({KIND})" in err and CREDS in err and KEY not in err
    store.close()
    reopened = memvault.MemoryStore.open(store.root, passphrase="cli passphrase")
    assert reopened.head == head
    tighten(reopened, "redact")
    reopened.close()

    assert main(["restore", CREDS, "--rev", revs["create"].decode()]) == 0
    out = capsys.readouterr().out
    assert f"Masked by the scrubber (1 {KIND})" in out and KEY not in out
    assert main(["rollback", revs["create"].decode(), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    # creds.md is already as a rollback would put it back (masked alike): only other.md goes.
    assert result["changes"] == [{"op": "deleted", "path": "/memories/other.md", "kind": "file"}]
    assert result["findings"] == {}
    reopened = memvault.MemoryStore.open(store.root, passphrase="cli passphrase")
    assert read_at(reopened, CREDS) == MASKED.encode()
    rollback, restore = log(reopened, limit=2)
    assert (restore.command, restore.findings) == ("restore", {KIND: 1})
    assert (rollback.command, rollback.findings) == ("rollback", {})
    reopened.close()
