"""``memvault ui`` as a process: the address it prints logs in once, the browser is given a private
redirect file (the token is on no command line), Ctrl-C stops it with status 0, the writes of
its session are attributed to ``ui:<OS user>``."""

from __future__ import annotations

import getpass
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the review UI needs memvault[server]")
pytest.importorskip("jinja2", reason="the review UI needs memvault[server]")
pytest.register_assert_rewrite("uisupport")

from uisupport import Client, run  # noqa: E402

from conftest import PASSPHRASE, make_store  # noqa: E402
from memvault.settings import StoreSettings  # noqa: E402

MEMVAULT = [sys.executable, "-m", "memvault.cli"]


def _start(tmp_path: Path, *extra: str, browser: str | None = None) -> tuple[subprocess.Popen[str], str]:
    store = make_store(tmp_path / "store", StoreSettings(durability="none"))
    run(store, command="create", path="/memories/notes.md", file_text="the user likes tea\n")
    store.close()
    env = {**os.environ, "MEMVAULT_PASSPHRASE": PASSPHRASE, "MEMVAULT_STORE": str(tmp_path / "store")}
    env.pop("MEMVAULT_KEY", None)
    env.pop("MEMVAULT_KEY_FILE", None)
    if browser is not None:
        env["BROWSER"] = browser
    proc = subprocess.Popen([*MEMVAULT, "ui", "--port", "0", *extra], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"(http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{64}))", line)
    if found is None:
        proc.kill()
        raise AssertionError(f"no address in {line!r}: {proc.communicate()}")
    return proc, found.group(1)


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=60)


def test_the_printed_address_logs_in_once_and_ctrl_c_stops(tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--no-browser")
    try:
        port = int(url.split(":")[2].split("/")[0])
        token = url.rsplit("=", 1)[1]
        client = Client(port)
        assert client.get("/tree").status == 401
        assert client.get("/?token=" + token).status == 303
        assert "notes.md" in client.get("/tree").text
        assert Client(port).get("/?token=" + token).status == 401
        # A write of this session is attributed to ui:<OS user>.
        created = re.search(r'title="([0-9a-f]{40})">#1<', client.get("/history").text).group(1)
        preview = client.get(f"/revert/{created}")
        plan = re.search(r'name="plan" value="([0-9a-f]{32})"', preview.text).group(1)
        assert client.post(f"/revert/{created}", {"csrf": client.csrf("/tree"), "plan": plan}).status == 200
    finally:
        status = _stop(proc)
    assert status == 0
    assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    import memvault

    with memvault.MemoryStore.open(tmp_path / "store", passphrase=PASSPHRASE) as store:
        meta = store.commit_meta(store.head[0])
        assert (meta.command, meta.actor) == ("revert", "ui:" + getpass.getuser())


def test_the_browser_gets_a_private_redirect_file_not_the_token(tmp_path: Path) -> None:
    record = tmp_path / "browser-args"
    fake = tmp_path / "fake-browser"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a" >> {record}; done\n'
                    f'f=$(echo "$1" | sed "s|^file://||"); stat -c %a "$f" >> {record}; cat "$f" >> {record}\n')  # fmt: skip
    fake.chmod(0o700)
    proc, url = _start(tmp_path, browser=f"{fake} %s")
    try:
        deadline = time.monotonic() + 30
        while not (record.exists() and "token=" in record.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        lines = record.read_text().splitlines()
    finally:
        assert _stop(proc) == 0
    argument = lines[0]
    assert argument.startswith("file://") and "token" not in argument
    assert lines[1] == "600"
    assert url in lines[2]  # the file redirects to the address
    assert not Path(argument.removeprefix("file://")).exists()  # removed when the UI stopped
