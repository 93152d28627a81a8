"""``memvault migrate`` as a command (subprocesses): ``--json`` and the text summary, exit statuses,
the API key taken from the environment only and never shown, what a dry run leaves (nothing), and
the round trip: pull from one API, push to ``memvault serve``, pull that into a new store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from fake_memory_stores import FakeMemoryStores
from migratesupport import KEY, cli_env, files, key_file, opened, run_cli, summary

if TYPE_CHECKING:
    from serversupport import Served

SESSION = {"type": "session_actor", "session_id": "sesn_0123"}
API = {"type": "api_actor", "api_key_id": "apikey_0456"}


@pytest.fixture
def fake() -> Iterator[FakeMemoryStores]:
    with FakeMemoryStores() as served:
        yield served


def test_json_text_and_exit_statuses(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/a.md", "one", actor=API)
    fake.write(sid, "/b.md", "bee", actor=SESSION)
    store = tmp_path / "new-store"  # does not exist yet: the pull makes it
    env = cli_env(key_file(tmp_path))

    pulled = run_cli(store, env, "migrate", "pull", "--api-url", fake.url, "--memory-store", sid, "--json")
    assert pulled.returncode == 0, pulled.stderr
    shape = summary(pulled)
    assert set(shape) == {"command", "memory_store_id", "dry_run", "ok", "created", "updated", "deleted", "unchanged",
                          "adopted", "refused", "conflicts", "commits", "requests", "retries", "waited_seconds",
                          "versions", "masked"}  # fmt: skip
    assert (shape["command"], shape["ok"], shape["created"], shape["versions"]) == ("pull", True, ["/a.md", "/b.md"], 2)

    fake.write(sid, "/a.md", "changed on the API")
    with opened(store, tmp_path / "store.key") as opened_store:
        opened_store.put_file("/memories/a.md", "changed here", actor="me")
    pushed = run_cli(store, env, "migrate", "push", "--api-url", fake.url, "--memory-store", sid, "--json")
    assert pushed.returncode == 5, pushed.stderr
    result = summary(pushed)
    assert result["conflicts"] == [{"path": "/a.md", "reason": "changed on the API since the last sync",
                                    "memory_id": fake.memory_at(sid, "/a.md").id}]  # type: ignore[union-attr]  # fmt: skip
    assert set(result) >= {"kept", "new_store"} and result["ok"] is False

    text = run_cli(store, env, "migrate", "pull", "--api-url", fake.url, "--memory-store", sid)
    assert text.returncode == 5
    assert "conflict /a.md: changed in the store since the last sync" in text.stdout
    assert "hint: " in text.stdout and "--force" in text.stdout

    log = run_cli(store, env, "log")
    assert "api:apikey_0456" in log.stdout and "session" in log.stdout

    usage = run_cli(store, env, "migrate", "push", "--api-url", fake.url)
    assert usage.returncode == 2  # neither --memory-store nor --new-store


def test_the_api_key_comes_from_the_environment_and_is_never_shown(tmp_path: Path) -> None:
    with FakeMemoryStores(keys=("sk-the-right-one-0123456789",), echo_key=True) as fake:
        sid = fake.create_store()
        fake.write(sid, "/a.md", "one")
        store = tmp_path / "s"
        leaky = {"ANTHROPIC_CUSTOM_HEADERS": "x-leak: custom-header-secret", "ANTHROPIC_AUTH_TOKEN": "auth-token-secret",
                 "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_LOG": "debug", "MEMVAULT_DEBUG": "1"}  # fmt: skip

        assert run_cli(store, cli_env(key_file(tmp_path)), "migrate", "pull", "--api-url", fake.url, "--memory-store",
                       sid, "--api-key", "sk-the-right-one-0123456789").returncode == 2  # no such option  # fmt: skip
        missing = run_cli(store, cli_env(tmp_path / "store.key", api_key=None), "migrate", "pull", "--api-url",
                          fake.url, "--memory-store", sid)  # fmt: skip
        assert missing.returncode == 2 and "No API key: set $ANTHROPIC_API_KEY" in missing.stderr

        wrong = run_cli(store, cli_env(tmp_path / "store.key", api_key=KEY, **leaky), "-v", "migrate", "pull",
                        "--api-url", fake.url, "--memory-store", sid)  # fmt: skip
        assert wrong.returncode == 1
        assert "refused to read the memory store (401 authentication_error)" in wrong.stderr
        assert "[API key]" in wrong.stderr  # what the server quoted back, cut out
        for secret in (KEY, "custom-header-secret", "auth-token-secret"):
            assert secret not in wrong.stderr + wrong.stdout

        env = cli_env(tmp_path / "store.key", api_key="sk-not-this-one", MY_KEY="sk-the-right-one-0123456789", **leaky)
        right = run_cli(store, env, "migrate", "pull", "--api-url", fake.url, "--memory-store", sid,
                        "--api-key-env", "MY_KEY")  # fmt: skip
        assert right.returncode == 0, right.stderr
        assert "sk-the-right-one" not in right.stderr + right.stdout
        sent = [headers for _method, _target, headers in fake.requests]
        assert sent and all(h["authorization"] == "Bearer sk-the-right-one-0123456789" for h in sent[2:])
        assert not [h for h in sent if "x-leak" in h or "auth-token-secret" in json.dumps(h)]
        assert all(h["anthropic-beta"] == "agent-memory-2026-07-22" for h in sent)


def test_a_dry_run_leaves_nothing_on_either_side(fake: FakeMemoryStores, tmp_path: Path) -> None:
    sid = fake.create_store()
    fake.write(sid, "/a.md", "one")
    env = cli_env(key_file(tmp_path))
    store = tmp_path / "absent"

    dry = run_cli(store, env, "migrate", "pull", "--api-url", fake.url, "--memory-store", sid, "--history", "--dry-run")
    assert dry.returncode == 0 and not store.exists()
    assert "Dry run, nothing written: pull" in dry.stdout and "1 would be created" in dry.stdout

    assert run_cli(store, env, "migrate", "pull", "--api-url", fake.url, "--memory-store", sid).returncode == 0
    with opened(store, tmp_path / "store.key") as opened_store:
        opened_store.put_file("/memories/b.md", "bee", actor="me")
        head = opened_store.head
    api_before = (fake.files(sid), len(fake.versions(sid)))
    pushed = run_cli(store, env, "migrate", "push", "--api-url", fake.url, "--memory-store", sid, "--dry-run", "--json")
    assert pushed.returncode == 0 and summary(pushed)["created"] == ["/b.md"] and summary(pushed)["dry_run"]
    with opened(store, tmp_path / "store.key") as opened_store:
        assert opened_store.head == head
    assert (fake.files(sid), len(fake.versions(sid))) == api_before


def test_round_trip_from_one_api_through_memvault_serve_into_a_new_store(
    fake: FakeMemoryStores, served: Served, tmp_path: Path
) -> None:
    a = fake.create_store()
    fake.write(a, "/notes/plan.md", "draft", actor=API)
    fake.write(a, "/notes/plan.md", "final plan", actor=SESSION)
    fake.write(a, "/people/ada.md", "likes tea", actor={"type": "user_actor", "user_id": "user_ada"})
    fake.write(a, "/tmp.md", "scratch", actor=API)
    fake.delete(a, "/tmp.md", actor=SESSION)
    env = cli_env(key_file(tmp_path))
    first, second = tmp_path / "first", tmp_path / "second"

    pulled = run_cli(first, env, "migrate", "pull", "--api-url", fake.url, "--memory-store", a, "--history", "--json")
    assert pulled.returncode == 0 and summary(pulled)["versions"] == 5
    served_env = {**env, "SERVED_KEY": served.admin_key}
    pushed = run_cli(first, served_env, "migrate", "push", "--api-url", served.url, "--new-store", "copy of A",
                     "--api-key-env", "SERVED_KEY", "--json")  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    b = summary(pushed)["new_store"]["id"]
    assert b.startswith("memstore_") and sorted(summary(pushed)["created"]) == ["/notes/plan.md", "/people/ada.md"]
    again = run_cli(second, served_env, "migrate", "pull", "--api-url", served.url, "--memory-store", b, "--history",
                    "--api-key-env", "SERVED_KEY", "--json")  # fmt: skip
    assert again.returncode == 0, again.stderr

    with opened(first, tmp_path / "store.key") as one, opened(second, tmp_path / "store.key") as two:
        assert files(one) == files(two) == {"/notes/plan.md": "final plan", "/people/ada.md": "likes tea"}

    log_a = [e for e in json.loads(run_cli(first, env, "log", "--json").stdout) if e["command"] == "migrate-pull"]
    originals = {v.id: v.to_json("basic") for v in fake.versions(a)}
    assert [e["extra"]["version"] for e in reversed(log_a)] == list(originals)
    for entry in log_a:
        version = originals[entry["extra"]["version"]]
        assert json.loads(entry["extra"]["actor"]) == version["created_by"]
        assert entry["extra"]["time"] == version["created_at"] and entry["extra"]["op"] == version["operation"]
    text_a = run_cli(first, env, "log").stdout
    assert "api:apikey_0456" in text_a and "user:user_ada" in text_a
    log_b = [e for e in json.loads(run_cli(second, env, "log", "--json").stdout) if e["command"] == "migrate-pull"]
    assert {e["actor"] for e in log_b} == {f"api:{served.admin_id}"} and len(log_b) == 2
