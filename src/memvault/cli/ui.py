"""``memvault ui``: review one store in a browser (history, diffs, blame, checks, dreams,
redaction, undo).

``memvault --store S ui [--port N] [--no-browser]`` serves the review UI on 127.0.0.1 and prints
its address with a one-time login token (``http://127.0.0.1:N/?token=...``); the first visit
with it logs that browser in and spends the token. The browser is opened with the address (through
a private temporary file, so the token is not on a command line other users can see) unless
``--no-browser``. Ctrl-C stops it. Needs ``memvault[server]``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shutil
import tempfile
import webbrowser
from pathlib import Path
from typing import Any

from ..errors import ExitStatus, InvalidInputError
from ._common import open_store, port_number, store_path

__all__ = ["register"]

_DEFAULT_PORT = 8765
_EXTRA = ("starlette", "uvicorn", "jinja2", "markupsafe", "httptools", "uvloop")


def _actor() -> str:
    try:
        return "ui:" + getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid
        return f"ui:uid-{os.getuid()}"


def _open_browser(url: str, directory: str) -> None:
    """Open ``url`` in the browser through a redirect file only this user can read."""
    page = Path(directory) / "memvault-ui.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(f'<!doctype html><meta http-equiv="refresh" content="0;url={url}"><title>memvault ui</title>\n')
    webbrowser.open(page.as_uri())


def _cmd_ui(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ..server.run import bind, quiet_server_class
        from ..ui.app import ReviewApp
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] in _EXTRA:
            raise InvalidInputError("memvault ui needs the server extra: pip install 'memvault[server]'.") from None
        raise
    store = open_store(args)
    private = tempfile.mkdtemp(prefix="memvault-ui-")
    try:
        app = ReviewApp.local(store, actor=_actor(), name=str(store_path(args)))
        sock = bind("127.0.0.1", args.port)
        port = sock.getsockname()[1]
        app.allow_port(port)
        assert app.token is not None
        url = f"http://127.0.0.1:{port}/?token={app.token.value}"
        config = uvicorn.Config(app.asgi, log_level="warning", access_log=False, lifespan="off", server_header=False)
        server = quiet_server_class()(config)
        print(f"memvault: reviewing {store_path(args)} at {url}", flush=True)
        print("The address logs in one browser once. Ctrl-C stops.", flush=True)
        if not args.no_browser:
            _open_browser(url, private)
        server.run(sockets=[sock])
    finally:
        shutil.rmtree(private, ignore_errors=True)
        store.close()
    return ExitStatus.SUCCESS


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="review the store in a browser (history, diffs, checks, dreams, redaction)",
        description="Serve the review UI for the store on 127.0.0.1: the file tree at any revision, history "
        "filtered by actor, session, command, path and time, decrypted diffs, versions and blame, verify and "
        "audit results, dreams to merge or discard, redaction and undo behind a preview and a confirmation. "
        "Prints an address with a one-time login token and opens it in the browser. Needs memvault[server].",
    )
    p.add_argument(
        "--port", type=port_number, default=_DEFAULT_PORT, help=f"port (default: {_DEFAULT_PORT}; 0: any free one)"
    )
    p.add_argument("--no-browser", action="store_true", help="only print the address; do not open a browser")
    p.set_defaults(func=_cmd_ui)
