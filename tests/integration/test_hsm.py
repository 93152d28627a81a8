"""The ``pkcs11:`` key provider against SoftHSM2, a real PKCS#11 module (Debian package
``softhsm2``; skipped where it is missing, unless ``MEMVAULT_TEST_REQUIRE`` lists ``softhsm``, as
``.ci/run``, which installs it, does): a throwaway token in a temporary directory
(``SOFTHSM2_CONF``), an AES key made on it, stores created and opened with it, and each failure
(wrong PIN, missing key, missing token, no module) a clear ``ProviderError``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import memvault
import needs
from conftest import PASSPHRASE
from memvault.errors import ExitStatus, InvalidInputError, ProviderError
from memvault.keys.hsm import ENV_MODULE, ENV_PIN, HsmProvider
from memvault.keys.provider import binding_context

PIN = "4711-0815"
MODULES = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/local/lib/softhsm/libsofthsm2.so",
    "/opt/homebrew/lib/softhsm/libsofthsm2.so",
)
CONTEXT = binding_context(b"\x01" * 16, b"\x02" * 16)


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The SoftHSM2 module path, with one initialised token ``memvault-test`` holding the AES key
    ``fleet`` (SOFTHSM2_CONF points at a temporary token directory for the whole session: the
    module reads it once per process)."""
    module = next((m for m in MODULES if os.path.exists(m)), None)
    util = shutil.which("softhsm2-util")
    if module is None or util is None:
        needs.missing("softhsm")
    base = tmp_path_factory.mktemp("softhsm")
    (base / "tokens").mkdir()
    conf = base / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {base / 'tokens'}\nobjectstore.backend = file\nlog.level = ERROR\n")
    old = os.environ.get("SOFTHSM2_CONF")
    os.environ["SOFTHSM2_CONF"] = str(conf)
    subprocess.run(
        [util, "--init-token", "--free", "--label", "memvault-test", "--pin", PIN, "--so-pin", "so-pin-1234"],
        check=True,
        capture_output=True,
    )
    import pkcs11

    token = pkcs11.lib(module).get_token(token_label="memvault-test")
    with token.open(user_pin=PIN, rw=True) as session:
        session.generate_key(pkcs11.KeyType.AES, 256, label="fleet", store=True)
    yield module
    if old is None:
        os.environ.pop("SOFTHSM2_CONF", None)
    else:
        os.environ["SOFTHSM2_CONF"] = old


@pytest.fixture
def hsm_env(softhsm: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(ENV_MODULE, softhsm)
    monkeypatch.setenv(ENV_PIN, PIN)
    return "pkcs11:token=memvault-test;object=fleet"


def test_wrap_and_unwrap_on_the_token(hsm_env: str) -> None:
    provider = HsmProvider(hsm_env)
    key = os.urandom(32)
    wrapped = provider.wrap(key, CONTEXT)
    assert key not in wrapped and len(wrapped) == 12 + 32 + 16
    assert provider.unwrap(wrapped, CONTEXT) == key
    with pytest.raises(ProviderError, match="does not belong to this store and slot"):
        provider.unwrap(wrapped, binding_context(b"\x01" * 16, b"\x03" * 16))
    altered = wrapped[:-1] + bytes([wrapped[-1] ^ 1])
    with pytest.raises(ProviderError, match="does not belong to this store and slot"):
        provider.unwrap(altered, CONTEXT)


def test_the_pin_comes_from_the_uri_a_file_or_the_environment(hsm_env: str, tmp_path: Path, monkeypatch) -> None:
    key = os.urandom(32)
    wrapped = HsmProvider(hsm_env).wrap(key, CONTEXT)
    monkeypatch.delenv(ENV_PIN)
    with pytest.raises(ProviderError, match=f"no PIN: set {ENV_PIN}"):
        HsmProvider(hsm_env).unwrap(wrapped, CONTEXT)
    pin_file = tmp_path / "pin"
    pin_file.write_text(PIN + "\n")
    by_file = HsmProvider(f"{hsm_env}?pin-source=file:{pin_file}")
    assert by_file.uri == hsm_env  # what a slot records: no PIN source
    assert by_file.unwrap(wrapped, CONTEXT) == key
    assert HsmProvider(f"{hsm_env}?pin-value={PIN}").unwrap(wrapped, CONTEXT) == key


def test_each_failure_is_a_clear_provider_error(hsm_env: str, monkeypatch, tmp_path: Path) -> None:
    wrapped = HsmProvider(hsm_env).wrap(os.urandom(32), CONTEXT)
    cases = {
        "wrong PIN": ("pkcs11:token=memvault-test;object=fleet?pin-value=0000-0000", {}),
        "no AES secret key with that label": ("pkcs11:token=memvault-test;object=nobody", {}),
        "no token with that label": ("pkcs11:token=no-such-token;object=fleet", {}),
        "no PKCS#11 module": (hsm_env, {ENV_MODULE: None}),
        "cannot be loaded": (hsm_env, {ENV_MODULE: str(tmp_path / "missing.so")}),
    }
    for expected, (uri, env) in cases.items():
        with monkeypatch.context() as m:
            for name, value in env.items():
                if value is None:
                    m.delenv(name)
                else:
                    m.setenv(name, value)
            with pytest.raises(ProviderError, match=expected) as info:
                HsmProvider(uri).unwrap(wrapped, CONTEXT)
        assert "0000-0000" not in str(info.value) and PIN not in str(info.value)
        assert info.value.exit_status == ExitStatus.NO_KEY
    with pytest.raises(InvalidInputError, match="RFC 7512"):
        HsmProvider("pkcs11:token=memvault-test;object=fleet;colour=blue")
    with pytest.raises(InvalidInputError, match="needs token"):
        HsmProvider("pkcs11:object=fleet")


def test_a_store_on_the_token(hsm_env: str, tmp_path: Path, monkeypatch, capsys) -> None:
    from memvault.admin.keys import add_slot, list_slots
    from memvault.cli import main

    store = memvault.MemoryStore.create(tmp_path / "s", key=hsm_env)
    store.put_file("/memories/a.md", "sealed by the token\n")
    add_slot(store, passphrase=PASSPHRASE, label="recovery")
    store.close()
    (hsm_slot,) = [
        json.loads(p.read_text()) for p in (tmp_path / "s" / "keys").glob("*.json") if "pkcs11" in p.read_text()
    ]
    assert hsm_slot["provider"] == hsm_env and PIN not in json.dumps(hsm_slot)
    with memvault.MemoryStore.open(tmp_path / "s", key=hsm_env) as again:
        assert sorted(s.kind for s in list_slots(again)) == ["passphrase", "provider"]
        with again.reading() as txn:
            assert txn.child_names("/memories") == ["a.md"]
    # The CLI: MEMVAULT_KEY names the token key; a wrong PIN cannot unlock (exit 12), never "damaged".
    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMVAULT_KEY", hsm_env)
    assert main(["--store", str(tmp_path / "s"), "log"]) == 0
    capsys.readouterr()
    monkeypatch.setenv(ENV_PIN, "0000-0000")
    assert main(["--store", str(tmp_path / "s"), "log"]) == ExitStatus.NO_KEY
    err = capsys.readouterr().err
    assert "wrong PIN" in err and "Key slot" in err and "0000-0000" not in err
