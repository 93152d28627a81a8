"""The user guide's PKCS#11 walkthrough (docs/guide.md, "Keys"), run as written (its install lines aside) in a shell on a
pseudo-terminal, PINs typed at the prompts, with a home directory of its own: SoftHSM2's token goes
to a private token directory, the key is made by OpenSC's ``pkcs11-tool``, and ``memvault init`` and
``log`` open the store with it."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import termios
import time
from pathlib import Path

import needs

README = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
SO_PIN, USER_PIN = "so-pin-8642", "user-pin-1357"
MODULE = "/usr/lib/softhsm/libsofthsm2.so"  # the walkthrough's (Debian's and Ubuntu's path)


def walkthrough() -> list[str]:
    """The shell lines of the guide's PKCS#11 walkthrough, without the install lines."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if "softhsm2-util --init-token" in b]
    return [line for line in block.splitlines() if not line.startswith(("sudo apt-get ", "pip install "))]


def _controlling_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_the_walkthrough_keeps_its_install_lines() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if "softhsm2-util --init-token" in b]
    assert block.startswith("sudo apt-get install softhsm2 opensc ") and "\npip install 'memvault[pkcs11]'\n" in block


def test_the_readme_pkcs11_walkthrough_runs_as_written(tmp_path: Path) -> None:
    if not os.path.exists(MODULE) or shutil.which("softhsm2-util") is None:
        needs.missing("softhsm")
    if shutil.which("pkcs11-tool") is None:
        needs.missing("opensc")
    home = tmp_path / "home"
    home.mkdir()
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "memvault").write_text(f'#!/bin/sh\nexec {sys.executable} -m memvault.cli "$@"\n')
    (shim / "memvault").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMVAULT_", "SOFTHSM2_"))}
    # A terminal of its own: no pager for log (it would wait for a key), no colour.
    env.update(HOME=str(home), PATH=f"{shim}{os.pathsep}{env.get('PATH', '')}", TERM="dumb", PAGER="cat")
    script = "\n".join(walkthrough()) + "\n"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=home,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=_controlling_terminal,  # pkcs11-tool and getpass read the PIN from /dev/tty
    )
    os.close(slave)
    shown, answered = b"", 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the shell is gone
                    break
                if not chunk:
                    break
                shown += chunk
                prompts = re.findall(rb"(SO PIN: |user PIN: |User PIN:)", shown, re.I)
                for prompt in prompts[answered:]:
                    time.sleep(0.5)  # the program turns echo off after its prompt: type once it has
                    os.write(master, (SO_PIN if prompt.startswith(b"SO") else USER_PIN).encode() + b"\n")
                answered = len(prompts)
            elif proc.poll() is not None:
                break
        status = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = shown.decode("utf-8", "replace")
    assert status == 0, text
    assert answered == 6, text  # SO PIN twice, user PIN twice, pkcs11-tool's login, the PIN file
    assert "Created an empty memory store in agent-memory" in text, text
    assert re.search(r"[0-9a-f]{10}  #0 .* memvault +init", text), text
    tokens = home / ".softhsm" / "tokens"
    assert len(list(tokens.iterdir())) == 1  # the token went to the private directory
    assert (home / ".softhsm" / "pin").read_text() == USER_PIN + "\n"
    assert (home / ".softhsm" / "pin").stat().st_mode & 0o077 == 0
    assert USER_PIN not in text and SO_PIN not in text  # typed without echo
