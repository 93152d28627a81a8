"""The MCP server's HTTP transport guards: which address it may bind, the bearer token and its
file, and the Host/Origin allow-list of a loopback bind. :mod:`memvault.agent.mcp` puts these in
front of the MCP SDK's app; nothing here imports the SDK.

- **Bind** (:func:`check_bind`): a loopback address (``localhost``, IPv4 127/8, IPv6 ``::1`` in
  any spelling) unless the operator allows a remote one (then a reverse proxy terminates TLS).
- **Bearer token** (:func:`bearer_guard`): every request needs ``Authorization: Bearer <token>``,
  compared in constant time; anything else gets 401. The token file
  (:func:`load_or_create_token`) is made on first use with 256 random bits and mode 0600; one
  readable by group or others, or not the user's, is refused.
- **Host and Origin** (:func:`host_guard`): on a loopback bind, a request must name this server:
  its ``Host`` is the bound address (any spelling of it) or ``localhost``, with the bound port,
  else 421; an ``Origin``, when present, is ``http://`` a loopback host with the bound port, else
  403. A web page that rebinds its own name to 127.0.0.1 sends its own name as ``Host`` and its
  own origin, so it is refused before the bearer check. The MCP SDK turns its own check on only
  for three exact host strings (``127.0.0.1``, ``localhost``, ``::1``); this one covers every
  loopback bind however it is spelled. A non-loopback bind (``--allow-remote``) is left to the
  reverse proxy in front of it, which names the public host.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..fsutil import O_NEW_FILE, O_READ, durable_flush, make_private_dir, opened, write_all

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "default_token_file",
    "load_or_create_token",
    "bearer_guard",
    "host_guard",
    "is_loopback",
    "check_bind",
]

_TOKEN = re.compile(r"[\x21-\x7e]{32,512}")
_TOKEN_FILE_LIMIT = 4096
_PORT = re.compile(r"[0-9]{1,5}")
#: The port a ``Host`` or ``Origin`` without one names (plain HTTP).
_HTTP_PORT = 80


# -- bind ------------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (other names count as remote)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless ``allow_remote``.

    Raises:
        InvalidInputError: ``host`` is not a loopback address and ``allow_remote`` is false.
    """
    if not allow_remote and not is_loopback(host):
        raise InvalidInputError(
            f"Refusing to serve MCP on {host}, which is not a loopback address: the server speaks plain HTTP. "
            "Put a reverse proxy that terminates TLS in front of it and pass --allow-remote."
        )


# -- bearer token ----------------------------------------------------------------------------------


def default_token_file() -> Path:
    """``$XDG_CONFIG_HOME/memvault/mcp-token`` (``~/.config/memvault/mcp-token``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "memvault" / "mcp-token"


def _read_token(path: Path) -> str:
    with opened(os.open(path, O_READ)) as fd:  # no symbolic link, no FIFO
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_uid != os.getuid():
            raise InvalidInputError(
                f"The token file {path} must be a regular file of yours readable by you only (chmod 600)."
            )
        data = os.read(fd, _TOKEN_FILE_LIMIT + 1)
    token = data.decode("ascii", errors="replace").strip()
    if len(data) > _TOKEN_FILE_LIMIT or not _TOKEN.fullmatch(token):
        raise InvalidInputError(
            f"The token file {path} holds no token (32 to 512 visible ASCII characters); "
            "delete it to have a new one made."
        )
    return token


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The bearer token in ``path`` and whether it was just made (256 random bits, mode 0600).

    Raises:
        InvalidInputError: the file is not private to the user, or holds no token.
    """
    try:
        return _read_token(path), False
    except FileNotFoundError:
        pass
    if not path.parent.exists():
        make_private_dir(path.parent, parents=True)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, O_NEW_FILE, 0o600)
    except FileExistsError:  # made meanwhile by another server
        return _read_token(path), False
    with opened(fd):
        write_all(fd, (token + "\n").encode("ascii"))
        durable_flush(fd)
    return token, True


async def _refuse(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = ('{"error": "' + message + '"}').encode("ascii")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def bearer_guard(app: ASGIApp, token: str) -> ASGIApp:
    """``app`` behind ``Authorization: Bearer <token>``: any other HTTP request gets 401."""
    expected = token.encode("ascii")

    def authorized(scope: Scope) -> bool:
        for key, value in scope.get("headers", ()):
            if key.lower() == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), expected)
        return False

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # nothing else is served
        if authorized(scope):
            await app(scope, receive, send)
            return
        await _refuse(
            send, 401, "unauthorized: a bearer token is required", [(b"www-authenticate", b'Bearer realm="memvault"')]
        )

    return guarded


# -- Host and Origin -------------------------------------------------------------------------------


def _authority(text: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host[:port]`` (an IPv6 address in brackets), else None if malformed."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end], text[end + 1 :]
        try:
            if ipaddress.ip_address(name).version != 6:
                return None
        except ValueError:
            return None
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
    if not name or "%" in name:  # no zone ids
        return None
    if rest == "":
        return name, _HTTP_PORT
    if rest[0] != ":" or not _PORT.fullmatch(rest[1:]):
        return None
    return name, int(rest[1:])


def _names_address(name: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether the host ``name`` is ``localhost`` or a spelling of ``address``."""
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name) == address
    except ValueError:
        return False


def host_guard(app: ASGIApp, address: str, port: int) -> ASGIApp:
    """``app`` answering only requests addressed to a server bound to loopback ``address``:``port``
    (see the module docstring): a wrong or missing ``Host`` gets 421, a foreign ``Origin`` 403.

    Args:
        app: the ASGI app to guard (the bearer guard in front of the SDK's app).
        address: the loopback address the socket is bound to, as ``getsockname`` gives it.
        port: the port it is bound to.

    Raises:
        ValueError: ``address`` is not a loopback address.
    """
    bound = ipaddress.ip_address(address.strip("[]"))
    if not bound.is_loopback:
        raise ValueError("host_guard guards a loopback bind only")

    def host_ok(values: list[str]) -> bool:
        if len(values) != 1:
            return False  # none (HTTP/1.0), or two that could be read either way
        parsed = _authority(values[0])
        return parsed is not None and parsed[1] == port and _names_address(parsed[0], bound)

    def origin_ok(values: list[str]) -> bool:
        if not values:
            return True  # not a browser: same-origin requests and other clients send none
        if len(values) != 1 or not values[0].startswith("http://"):
            return False  # "null" (a sandboxed page, a file), https (not this server), several
        parsed = _authority(values[0][len("http://") :])
        return parsed is not None and parsed[1] == port and is_loopback(parsed[0].lower())

    def header(scope: Scope, name: bytes) -> list[str]:
        return [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if bytes(k).lower() == name]

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # nothing else is served
        if not host_ok(header(scope, b"host")):
            await _refuse(send, 421, "misdirected request: the Host header does not name this server")
            return
        if not origin_ok(header(scope, b"origin")):
            await _refuse(send, 403, "forbidden: the Origin is not a loopback origin of this server")
            return
        await app(scope, receive, send)

    return guarded
