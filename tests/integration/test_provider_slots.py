"""Key slots of a key provider (``command:`` here, through a helper written for the test; AWS KMS
in test_key_providers.py): a store created and opened with a provider, a recovery passphrase
beside it, the binding of a wrapped key to its store and slot, and the CLI's ``--key`` and
``MEMVAULT_KEY``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE
from memvault.errors import InvalidInputError, ProviderError, WrongKeyError

HELPER = """
import base64, json, os, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
key = open(os.environ["TEST_HELPER_KEY"], "rb").read()
req = json.load(sys.stdin)
aad = json.dumps(req["context"], sort_keys=True, separators=(",", ":")).encode()
mode = os.environ.get("TEST_HELPER_MODE", "")
if req["op"] == "wrap":
    nonce = os.urandom(12)
    out = {"version": 1, "wrapped": base64.b64encode(nonce + AESGCM(key).encrypt(nonce, base64.b64decode(req["key"]), aad)).decode()}
else:
    blob = base64.b64decode(req["wrapped"])
    try:
        plain = AESGCM(key).decrypt(blob[:12], blob[12:], aad)
    except Exception:
        print(json.dumps({"version": 1, "error": "wrapped for another context"})); sys.exit(1)
    if mode == "lie":
        plain = os.urandom(32)
    out = {"version": 1, "key": base64.b64encode(plain).decode()}
print(json.dumps(out))
"""


@pytest.fixture
def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URI of a ``command:`` provider whose helper wraps with AES-GCM, the context as AAD."""
    script = tmp_path / "helper.py"
    script.write_text(HELPER)
    key = tmp_path / "helper.key"
    key.write_bytes(os.urandom(32))
    monkeypatch.setenv("TEST_HELPER_KEY", str(key))
    return f"command:{sys.executable} {script}"


def test_a_store_opens_with_its_provider_and_a_recovery_passphrase(tmp_path: Path, provider: str) -> None:
    from memvault.admin.keys import add_slot, list_slots

    store = memvault.MemoryStore.create(tmp_path / "s", key=provider)
    store.put_file("/memories/a.md", "kept\n")
    recovery = add_slot(store, passphrase=PASSPHRASE, kdf=FAST_KDF, label="recovery, in the safe")
    slots = {s.slot_id: s for s in list_slots(store)}
    assert {s.kind for s in slots.values()} == {"provider", "passphrase"}
    (fleet,) = [s for s in slots.values() if s.kind == "provider"]
    assert fleet.provider == provider and fleet.in_use and fleet.created
    store.close()
    slot_file = json.loads((tmp_path / "s" / "keys" / f"{fleet.slot_id}.json").read_text())
    assert slot_file["format"] == 3 and slot_file["provider"] == provider and slot_file["kdf"] is None
    with memvault.MemoryStore.open(tmp_path / "s", key=provider) as again:
        assert again.unlocked_slot.hex() == fleet.slot_id
        with again.reading() as txn:
            assert txn.child_names("/memories") == ["a.md"]
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as safe:
        assert safe.unlocked_slot.hex() == recovery.slot_id
    with pytest.raises(WrongKeyError, match="uses the key provider"):
        memvault.MemoryStore.open(tmp_path / "s", key=f"command:{sys.executable} /elsewhere/helper.py")


def test_a_wrapped_key_does_not_move_to_another_store_or_slot(tmp_path: Path, provider: str) -> None:
    from memvault.admin.keys import add_slot

    a = memvault.MemoryStore.create(tmp_path / "a", key=provider)
    b = memvault.MemoryStore.create(tmp_path / "b", key=provider)
    second = add_slot(a, key=provider, label="second")
    a.close()
    b.close()
    slot_a = next(p for p in (tmp_path / "a" / "keys").glob("*.json") if p.stem != second.slot_id)
    slot_b = next((tmp_path / "b" / "keys").glob("*.json"))
    # Store b's slot carrying store a's wrapped key: the provider refuses the context.
    obj = json.loads(slot_b.read_text())
    obj["wrapped_key"] = json.loads(slot_a.read_text())["wrapped_key"]
    slot_b.write_text(json.dumps(obj))
    with pytest.raises(ProviderError, match=f"Key slot {obj['slot_id']}.*another context"):
        memvault.MemoryStore.open(tmp_path / "b", key=provider)
    # Within store a: the second slot carrying the first slot's wrapped key.
    second_file = tmp_path / "a" / "keys" / f"{second.slot_id}.json"
    first = json.loads(slot_a.read_text())
    obj = json.loads(second_file.read_text())
    obj["wrapped_key"] = first["wrapped_key"]
    second_file.write_text(json.dumps(obj))
    slot_a.unlink()  # so only the altered slot can answer
    with pytest.raises(ProviderError, match="another context"):
        memvault.MemoryStore.open(tmp_path / "a", key=provider)


def test_a_provider_that_returns_another_key_is_refused(tmp_path: Path, provider: str, monkeypatch) -> None:
    memvault.MemoryStore.create(tmp_path / "s", key=provider).close()
    monkeypatch.setenv("TEST_HELPER_MODE", "lie")
    with pytest.raises(ProviderError, match="does not open key slot"):
        memvault.MemoryStore.open(tmp_path / "s", key=provider)


def test_an_edited_slot_provider_no_longer_opens(tmp_path: Path, provider: str) -> None:
    memvault.MemoryStore.create(tmp_path / "s", key=provider).close()
    (slot,) = (tmp_path / "s" / "keys").glob("*.json")
    obj = json.loads(slot.read_text())
    # The same helper under another URI (an extra argument it ignores): the URI is in the slot's AAD.
    obj["provider"] = provider + " --ignored"
    slot.write_text(json.dumps(obj))
    with pytest.raises(ProviderError, match="does not open key slot"):
        memvault.MemoryStore.open(tmp_path / "s", key=provider + " --ignored")


def test_bad_provider_uris_are_clear(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="Not a key provider URI"):
        memvault.MemoryStore.create(tmp_path / "s", key="vault:transit/memvault")
    assert not (tmp_path / "s" / "memvault.json").exists()


def test_rotation_keeps_the_provider(tmp_path: Path, provider: str) -> None:
    from memvault.admin.keys import list_slots, rotate

    store = memvault.MemoryStore.create(tmp_path / "s", key=provider)
    store.put_file("/memories/a.md", "a\n")
    result = rotate(store, key=provider)
    assert result.epoch == 2 and result.slot.provider == provider
    store.close()
    with memvault.MemoryStore.open(tmp_path / "s", key=provider) as again:
        assert [s.kind for s in list_slots(again)] == ["provider"]
        with again.reading() as txn:
            assert txn.child_names("/memories") == ["a.md"]


def test_cli_init_with_key_and_memvault_key(tmp_path: Path, provider: str, monkeypatch, capsys) -> None:
    from memvault.cli import main

    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    store = str(tmp_path / "cli")
    assert main(["--store", store, "init", "--key", provider]) == 0
    capsys.readouterr()
    monkeypatch.setenv("MEMVAULT_KEY", provider)
    assert main(["--store", store, "key", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["kind"] == "provider" and listed["provider"] == provider and listed["in_use"]
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    assert main(["--store", store, "log"]) == 12  # two keys set
    assert "Set only one of MEMVAULT_KEY" in capsys.readouterr().err


def test_a_store_on_aws_kms(s3_env, tmp_path: Path) -> None:
    """AWS KMS through moto's server: create with an alias, reopen, rotate, add a recovery
    passphrase, open with the passphrase only; a slot moved to another store is refused (KMS
    checks the encryption context)."""
    import boto3

    from memvault.admin.keys import add_slot, list_slots, rotate

    kms = boto3.client("kms")
    key_id = kms.create_key(Description="memvault test")["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName="alias/memvault-fleet", TargetKeyId=key_id)
    uri = "aws-kms:alias/memvault-fleet"
    store = memvault.MemoryStore.create(tmp_path / "s", key=uri)
    store.put_file("/memories/a.md", "on kms\n")
    assert rotate(store, key=uri).epoch == 2
    add_slot(store, passphrase=PASSPHRASE, kdf=FAST_KDF, label="recovery")
    store.close()
    with memvault.MemoryStore.open(tmp_path / "s", key=uri) as again:
        assert sorted(s.kind for s in list_slots(again)) == ["passphrase", "provider"]
    with memvault.MemoryStore.open(tmp_path / "s", passphrase=PASSPHRASE) as safe:
        with safe.reading() as txn:
            assert txn.child_names("/memories") == ["a.md"]
    other = memvault.MemoryStore.create(tmp_path / "other", key=uri)
    other.close()
    (kms_slot,) = [
        p for p in (tmp_path / "s" / "keys").glob("*.json") if json.loads(p.read_text())["kind"] == "provider"
    ]
    (target,) = (tmp_path / "other" / "keys").glob("*.json")
    obj = json.loads(target.read_text())
    obj["wrapped_key"] = json.loads(kms_slot.read_text())["wrapped_key"]
    target.write_text(json.dumps(obj))
    with pytest.raises(ProviderError, match="InvalidCiphertextException"):
        memvault.MemoryStore.open(tmp_path / "other", key=uri)


def test_a_failing_provider_at_create_leaves_nothing(tmp_path: Path) -> None:
    from memvault.cli import main

    target = tmp_path / "new"
    with pytest.raises(ProviderError):
        memvault.MemoryStore.create(target, key=f"command:{sys.executable} -c 'import sys; sys.exit(3)'")
    assert not target.exists()
    with pytest.raises(InvalidInputError):
        memvault.MemoryStore.create(target, key="vault:transit/x")
    assert not target.exists()
    # The CLI alike: exit 12, nothing left.
    assert (
        main(["--store", str(target), "init", "--key", f"command:{sys.executable} -c 'import sys; sys.exit(3)'"]) == 12
    )
    assert not target.exists()


def test_a_command_uri_that_matches_no_slot_is_told_how_it_differs(tmp_path: Path, provider: str) -> None:
    """Opened with a ``command:`` URI other than the slot's: the message says how the command line
    differs (the program, how many arguments, which ones), and shows no argument that may hold a
    secret. (The helper script is argument 1.)"""
    secret, other = "sk-live-4f9a2c7e1b", "sk-live-0000ffff99"
    recorded = f"{provider} --key-id prod --token={secret} {secret}"
    memvault.MemoryStore.create(tmp_path / "s", key=recorded).close()
    slot = json.loads(next((tmp_path / "s" / "keys").iterdir()).read_text())["slot_id"]
    python = os.path.basename(sys.executable)
    script = provider.partition(" ")[2]
    hidden = "one not shown (it may hold a secret)"
    cases = {
        # a token's value, as an option's and as a word of its own
        f"{provider} --key-id prod --token={other} {other}": "the same program; argument 4 differs in its value "
        "('--token=...'); argument 5 differs (neither is shown: they may hold secrets)",
        # one argument more
        f"{recorded} -v": "the same program; 5 arguments where you gave 6; your argument 6 ('-v') is extra",
        # one fewer
        f"{provider} --key-id --token={secret} {secret}": "the same program; 5 arguments where you gave 4; argument 3 "
        "of the slot's ('prod') is missing",
        # a word for a secret
        f"{provider} --key-id {other} --token={secret} {secret}": f"the same program; argument 3 is 'prod' where you "
        f"gave {hidden}",
        # another program, given the old one as its argument
        f"command:/usr/bin/env {provider.partition(':')[2]} --key-id prod --token={secret} {secret}": (
            f"program {python!r} where you gave 'env'; 5 arguments where you gave 6; your argument 1 (not shown: it "
            "may hold a secret) is extra"
        ),
        # the same file name elsewhere
        f"command:/opt/bin/{python} {script} --key-id prod --token={secret} {secret}": (
            f"program {sys.executable!r} where you gave '/opt/bin/{python}'"
        ),
        # the same command line, spaced otherwise
        f"{provider}  --key-id prod --token={secret} '{secret}'": "the same program and arguments written otherwise "
        "(spacing or quoting): give the URI as the slot has it",
    }
    for uri, how in cases.items():
        with pytest.raises(WrongKeyError) as info:
            memvault.MemoryStore.open(tmp_path / "s", key=uri)
        shown = "env" if "/usr/bin/env" in uri else python
        assert str(info.value) == (
            f"No key slot of this memory store uses the key provider command:{shown} (arguments not shown). "
            f"Compared with the store's command: slots (key slot {slot}: {how})."
        ), uri
        assert "sk-live" not in str(info.value)
    with pytest.raises(WrongKeyError) as info:
        memvault.MemoryStore.open(tmp_path / "s", key="aws-kms:alias/memvault")
    assert str(info.value) == (
        "No key slot of this memory store uses the key provider aws-kms:alias/memvault. "
        f"The store's key slots use command:{python} (arguments not shown)."
    )
