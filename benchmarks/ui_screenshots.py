#!/usr/bin/env python
"""Screenshots of the review UI's main pages into docs/img/ (PNG, 1200x800).

Builds a small demo store in a temporary directory (an agent's notes over a few sessions, a
dream that consolidates them), serves ``memvault ui``'s application on 127.0.0.1, logs in with
its token and saves: the file tree, the history, a commit's diff, the dream review and the
redaction confirmation. Needs ``memvault[server]``, Playwright (``pip install playwright``) and
Chromium at /usr/bin/chromium (Debian: ``apt-get install chromium``); nothing is downloaded.

    python benchmarks/ui_screenshots.py            # writes docs/img/ui-*.png
    python benchmarks/ui_screenshots.py --dark     # the same in dark mode, ui-*-dark.png
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

import memvault
from memvault.protocol.commands import run_command
from memvault.settings import KdfParams, StoreSettings
from memvault.ui.app import ReviewApp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from serversupport import serve_asgi, stop_server  # noqa: E402  (the tests' loopback server)

OUT = Path(__file__).parent.parent / "docs" / "img"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
DREAM = "5f1c0ffee0ddba11"


def _run(target: object, actor: str, session: str, **command: str) -> None:
    run_command(target, command, actor=actor, session=session)  # type: ignore[arg-type]


def build(path: Path) -> memvault.MemoryStore:
    """A demo store: what an assistant learned about a project over three sessions, and a dream."""
    store = memvault.MemoryStore.create(path, passphrase="screenshots only, not a secret",
                                        kdf=KdfParams(memory_kib=8, iterations=1, lanes=1),
                                        settings=StoreSettings(durability="none"))  # fmt: skip
    a, b = "support-agent", "planning-agent"
    _run(store, a, "2026-11-02-a", command="create", path="/memories/MEMORY.md",
         file_text="# Memory index\n- [customer](customer/acme.md): Acme Corp, the account\n"
                   "- [decisions](project/decisions.md)\n- [people](people.md)\n")  # fmt: skip
    _run(store, a, "2026-11-02-a", command="create", path="/memories/customer/acme.md",
         file_text="# Acme Corp\n\n- plan: enterprise, renews in March\n- main contact: Dana (ops lead)\n"
                   "- prefers email over calls\n- open issue: SSO login loops on Safari\n")  # fmt: skip
    _run(store, a, "2026-11-02-a", command="create", path="/memories/people.md",
         file_text="# People\n\n- Dana: ops lead at Acme, decides on renewals\n- Sam: our account owner\n")  # fmt: skip
    _run(store, b, "2026-11-03-b", command="create", path="/memories/project/decisions.md",
         file_text="# Decisions\n\n1. Ship the SSO fix in 4.2 (not a hotfix).\n2. Keep weekly syncs with Acme.\n"
                   "3. Draft the renewal offer by 2026-12-01.\n")  # fmt: skip
    _run(store, a, "2026-11-04-a", command="str_replace", path="/memories/customer/acme.md",
         old_str="- open issue: SSO login loops on Safari\n",
         new_str="- SSO login loop on Safari: fixed in 4.2, confirmed by Dana on 2026-11-04\n")  # fmt: skip
    _run(
        store,
        b,
        "2026-11-04-b",
        command="str_replace",
        path="/memories/project/decisions.md",
        old_str="2. Keep weekly syncs with Acme.",
        new_str="2. Move Acme syncs to every other week (Dana's ask).",
    )
    _run(store, a, "2026-11-04-a", command="create", path="/memories/scratch/call-notes.md",
         file_text="call with Dana: renewal in March, wants volume pricing\n")  # fmt: skip
    branch = store.branch(f"dream/{DREAM}")
    branch.create(actor="dream", session=DREAM, extra={"model": "claude-sonnet-4-5"})
    _run(branch, "dream", DREAM, command="delete", path="/memories/scratch/call-notes.md")
    _run(branch, "dream", DREAM, command="str_replace", path="/memories/customer/acme.md",
         old_str="- plan: enterprise, renews in March\n",
         new_str="- plan: enterprise, renews in March; asks for volume pricing (call, 2026-11-04)\n")  # fmt: skip
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dark", action="store_true", help="dark colour scheme (files end in -dark)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp) / "store")
        app = ReviewApp.local(store, actor="ui:reviewer", name="~/agents/acme-memory")
        server, thread, port = serve_asgi(app.asgi)
        app.allow_port(port)
        base = f"http://127.0.0.1:{port}"
        suffix = "-dark" if args.dark else ""
        assert app.token is not None
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
                context = browser.new_context(viewport={"width": 1200, "height": 800},
                                              color_scheme="dark" if args.dark else "light")  # fmt: skip
                page = context.new_page()
                page.goto(f"{base}/?token={app.token.value}")
                edit = store.head[0].decode()
                for _ in range(3):
                    edit = store.commit(edit.encode())[2].decode()  # the edit of acme.md, 3 commits back
                shots = {
                    "tree": f"{base}/tree?path=/memories/customer",
                    "history": f"{base}/history",
                    "commit": f"{base}/commit/{edit}",
                    "dream": f"{base}/dreams/{DREAM}",
                }
                for name, url in shots.items():
                    page.goto(url)
                    page.wait_for_selector("main h1, main nav.crumbs, main table")
                    page.screenshot(path=str(OUT / f"ui-{name}{suffix}.png"))
                page.goto(f"{base}/redact?path=/memories/scratch/call-notes.md&scope=file")
                page.click("button:has-text('Dry run')")
                page.wait_for_selector("h1:has-text('Confirm the redaction')")
                page.screenshot(path=str(OUT / f"ui-redact{suffix}.png"))
                browser.close()
        finally:
            stop_server(server, thread)
            store.close()
    print(f"wrote {OUT}/ui-*{suffix}.png")


if __name__ == "__main__":
    main()
