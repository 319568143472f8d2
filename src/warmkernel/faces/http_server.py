"""Streamable HTTP: the tool table behind a bearer token and the SDK's Host/Origin guard.

Every request must carry `Authorization: Bearer <token>` (401 otherwise). Behind that, the
MCP SDK's transport security refuses a Host header that is not allowed (421) and a foreign
Origin (403), which keeps browsers on other sites away from a loopback server. Each server
holds at most its share of the daemon's descriptors (`listening`): a connection past its cap is
closed at once, and one that sends no request's headers within a few seconds is closed then.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
import socket
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from warmkernel.errors import WarmkernelError
from warmkernel.faces.listening import BACKLOG, FIRST_WORDS_S, SERVE_CONNECTIONS, Share, Slots
from warmkernel.faces.mcp_server import build_server
from warmkernel.session.kernels import Kernels
from warmkernel.types import MAX_PORT

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_SHUTDOWN_S = 5.0


def new_token() -> str:
    return secrets.token_urlsafe(32)


def check_token(token: str, origin: str) -> None:
    """Refuse a bearer token that lets anyone in (an empty one matches `Bearer` with nothing
    after it) or that no request can carry (a header's value is one line, trimmed)."""
    if not token.strip():
        raise WarmkernelError(
            "invalid_arguments",
            f"{origin} gives an empty bearer token, which would let in a request with no token; "
            "give a token, or none at all for a generated one",
        )
    if token != token.strip() or not token.isprintable():
        raise WarmkernelError(
            "invalid_arguments",
            f"{origin} gives a bearer token with whitespace at an end or a control character, which "
            "no Authorization header carries; give printable characters with no space at either end",
        )


class BearerAuth:
    """ASGI middleware: 401 for any request without the exact bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The scheme is case-insensitive (RFC 9110 11.1): `bearer TOKEN` is as good as `Bearer TOKEN`.
        scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").strip().partition(b" ")
        given = given.strip()
        if scheme.lower() == b"bearer" and given and secrets.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        body = (
            b"401 Unauthorized: send the token `warmkernel serve` was given (--token, --token-file, "
            b"$WARMKERNEL_TOKEN), else the public_token of `warmkernel sessions --json`, as "
            b"'Authorization: Bearer <token>'\n"
        )
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"www-authenticate", b'Bearer realm="warmkernel"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True)
class Endpoint:
    """Where an HTTP face listens and who may talk to it."""

    host: str
    port: int
    path: str
    token: str
    allowed_hosts: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, port: int, allowed_hosts: Sequence[str]) -> None:
    """Refuse a port that does not exist, and to listen beyond loopback unless the Host names to
    accept are given."""
    if not 0 <= port <= MAX_PORT:
        raise WarmkernelError(
            "invalid_arguments", f"--port {port} is not a port: give 1 to {MAX_PORT}, or 0 for a free one"
        )
    if not is_loopback(host) and not allowed_hosts:
        raise WarmkernelError(
            "invalid_arguments",
            f"--host {host} is not a loopback address; binding beyond loopback needs "
            "--allowed-host NAME[:PORT] (repeatable) for every Host header clients will send",
        )


def security_settings(allowed_hosts: Sequence[str], port: str = "*") -> TransportSecuritySettings:
    """The Host/Origin guard: loopback names and `allowed_hosts`, on `port` (`*`: any port)."""
    hosts = [f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    origins = [f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    for name in allowed_hosts:
        hosts.append(name if ":" in name else f"{name}:{port}")
        origins.append(f"http://{name}" if ":" in name else f"http://{name}:{port}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free one (read it back from the socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, TypeError, ValueError) as exc:  # TypeError: a NUL or a lone surrogate in the host
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise WarmkernelError("invalid_arguments", f"cannot listen on {host}:{port}: {reason}") from exc
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: the CLI owns signals and stops us itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _capped(slots: Slots) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 within `slots`, and closing a connection silent for `FIRST_WORDS_S`.
    uvicorn's own `limit_concurrency` answers a request past it with 503 but keeps every
    connection, and one that never sends a request stays open for good."""

    class Capped(H11Protocol):
        held = False
        silence: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if not slots.take():
                transport.abort()
                return
            self.held = True
            self.silence = self.loop.call_later(FIRST_WORDS_S, self._close_if_silent)

        def _close_if_silent(self) -> None:
            if self.cycle is None:  # no request's headers yet
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.silence is not None:
                self.silence.cancel()
            if self.held:
                self.held = False
                slots.give()
            super().connection_lost(exc)

    return Capped


@contextlib.asynccontextmanager
async def serve_asgi(
    app: ASGIApp, sock: socket.socket, name: str, connections: Share, *, graceful_s: int | None = None
) -> AsyncIterator[None]:
    """Serve an ASGI app (`name`, as the log says it) on `sock` while the block runs, with at most
    `connections` at once; on exit, wait at most `_SHUTDOWN_S` for it to stop (`graceful_s`: how
    long open requests, e.g. event streams, get to end). An accept that fails for lack of
    descriptors is asyncio's to retry (`listening.quiet_accept_errors`)."""
    slots = Slots.of(f"{name} on port {sock.getsockname()[1]}", connections)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=graceful_s,
        http=_capped(slots),
        backlog=BACKLOG,
    )
    server = _Uvicorn(config)
    stopped = anyio.Event()

    async def run() -> None:
        # Shielded: uvicorn stops through should_exit, so its lifespan shuts down cleanly.
        with anyio.CancelScope(shield=True):
            await server.serve([sock])
        stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            yield
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True), anyio.move_on_after(_SHUTDOWN_S):
                await stopped.wait()
            server.force_exit = True


@contextlib.asynccontextmanager
async def serve_http(
    kernels: Kernels, sock: socket.socket, endpoint: Endpoint, options: Mapping[str, Any] | None = None
) -> AsyncIterator[Endpoint]:
    """Serve the tools on `sock` while the block runs, with these reply options (see `build_server`);
    yields the endpoint actually bound."""
    port = sock.getsockname()[1]
    bound = Endpoint(endpoint.host, port, endpoint.path, endpoint.token, endpoint.allowed_hosts)
    app = build_server(kernels, options).streamable_http_app(
        streamable_http_path=endpoint.path,
        transport_security=security_settings(endpoint.allowed_hosts),
        host=endpoint.host,
    )
    async with serve_asgi(BearerAuth(app, endpoint.token), sock, "serve's endpoint", SERVE_CONNECTIONS):
        yield bound
