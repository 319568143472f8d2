"""The daemon's Unix socket: the one door of every local client (a host's relay, a CLI verb).

A connection opens with a hello, one line of JSON (with the client's version, and in `note` what
its replies should tell it, e.g. that the versions differ), which the daemon answers with one line:
  {"warmkernel": VERSION, "client": "relay"|"cli"|"serve"|"status"|"view", "options": {...},
   "serve": {...}, "view": {...}, "note": TEXT}
  answered {"ok": true, "version": VERSION, ...} or {"ok": false, "error": {"code": ..., "message": ...}}
After the hello of a relay or a CLI verb the connection carries MCP exactly as stdio does, one
JSON-RPC message a line (the relay copies the host's lines on: `relay_pump`).
`options` are the client's reply options (its kernel options were checked against the daemon's
descriptor before it connected).
A `status` hello gets the daemon's state and the connection ends; a `serve` hello opens the
public Streamable HTTP endpoint it names for as long as the connection stays open. A `view` hello
gets the URL of the daemon's console page (opened on first use, on the endpoint `view` names, and
kept for the daemon's life) with a new one-time token, and the connection ends.
Unknown fields are ignored, so clients and daemons of other versions still understand each other
(`hello` checks the fields it knows).
Floods of connections end connections, never the daemon: an accept that fails (no descriptor
left) is logged and retried after a pause that doubles up to a second; past the socket's cap
(`listening.SOCKET_CONNECTIONS`) a connection is answered with a refusal and closed at once;
a connection has `FIRST_WORDS_S` to say its hello, and of those still silent only the newest
`SOCKET_HELLOS` are kept (a new one closes the oldest), so a client that speaks at once, as
ours do, is served whatever the idle connections around it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.shared.message import SessionMessage

from warmkernel import __version__
from warmkernel.daemon.hello import Hello
from warmkernel.errors import WarmkernelError
from warmkernel.faces.listening import FIRST_WORDS_S, SOCKET_CONNECTIONS, SOCKET_HELLOS, Episodes, Slots
from warmkernel.faces.mcp_server import build_server
from warmkernel.idle import IdleClock
from warmkernel.session.kernels import Kernels

log = logging.getLogger(__name__)

HELLO_MAX_BYTES = 65_536
MESSAGE_MAX_BYTES = 256 * 1024 * 1024
"""The longest MCP message a line may carry (a cell's source, a reply with images)."""
ACCEPT_PAUSES_S = (0.01, 1.0)
"""After a failed accept, the first pause; each further failure doubles it, up to the second."""


Status = Callable[[], Mapping[str, Any]]
Serve = Callable[[Hello, Callable[[Mapping[str, Any]], Awaitable[None]], Awaitable[None]], Awaitable[None]]
"""Serves a `serve` hello: (hello, answer, closed), where `closed` ends when the client leaves."""
View = Callable[[Hello], Awaitable[Mapping[str, Any]]]
"""Answers a `view` hello: the console page's URL, or a refusal."""


@dataclass
class _Handshakes:
    """The connections that have not said their hello yet, oldest first, at most `cap`: one more
    closes the oldest, whose client has had the longest to speak."""

    cap: int
    waiting: dict[anyio.CancelScope, None] = field(default_factory=dict)
    """Each one's scope for reading its hello (a dict: ordered, and a scope is found at once)."""
    pushed_out: Episodes = field(init=False)

    def __post_init__(self) -> None:
        self.pushed_out = Episodes(
            f"the socket has {self.cap} connections that have not said their hello, its cap; "
            "a new one closes the oldest"
        )

    def open(self) -> anyio.CancelScope:
        """A new connection's scope for its hello, ended by its deadline or by newer connections."""
        if len(self.waiting) >= self.cap:
            oldest = next(iter(self.waiting))
            del self.waiting[oldest]
            oldest.cancel()
            self.pushed_out.happened()
        scope = anyio.CancelScope(deadline=anyio.current_time() + FIRST_WORDS_S)
        self.waiting[scope] = None
        return scope

    def close(self, scope: anyio.CancelScope) -> bool:
        """Its wait is over; whether it was still waiting (not pushed out by newer connections)."""
        if scope not in self.waiting:
            return False
        del self.waiting[scope]
        return True


@dataclass
class SocketFace:
    """Serves the connections of one daemon's socket; counts its clients, who hold its idle clock."""

    kernels: Kernels
    status: Status
    serve: Serve
    view: View
    clock: IdleClock
    clients: int = 0
    connections: Slots = field(default_factory=lambda: Slots.of("the socket", SOCKET_CONNECTIONS))
    handshakes: _Handshakes = field(default_factory=lambda: _Handshakes(SOCKET_HELLOS.now()))
    accept_failed: Episodes = field(
        default_factory=lambda: Episodes("the socket's accept() failed; it retries after a pause")
    )

    async def listen(self, listener: anyio.abc.SocketListener) -> None:
        """Accept connections until cancelled. Not anyio's `serve`: its first failed accept ends it."""
        pause = 0.0
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    stream = await listener.accept()
                except (anyio.BrokenResourceError, OSError) as exc:  # EMFILE, ENFILE, ENOBUFS...
                    self.accept_failed.happened(exc.__cause__ or exc)
                    pause = min(max(2 * pause, ACCEPT_PAUSES_S[0]), ACCEPT_PAUSES_S[1])
                    await anyio.sleep(pause)
                    continue
                pause = 0.0
                if self.connections.take():
                    tg.start_soon(self._handle, stream, self.handshakes.open())
                else:
                    await _refuse_at_once(stream, self.connections.cap)

    async def _handle(self, stream: anyio.abc.SocketStream, hello_scope: anyio.CancelScope) -> None:
        try:
            async with stream:
                try:
                    await self._converse(stream, hello_scope)
                except Exception as exc:  # one connection's failure must not end the listener, or the daemon
                    log.exception("a client's connection failed")
                    message = f"the daemon failed on this request ({exc!r}); its log has the traceback"
                    error = {"code": "daemon_error", "message": message}
                    with contextlib.suppress(Exception):  # the client may be gone already
                        await _answer(stream, {"ok": False, "error": error})
        finally:
            self.handshakes.close(hello_scope)
            self.connections.give()

    async def _converse(self, stream: anyio.abc.SocketStream, hello_scope: anyio.CancelScope) -> None:
        """The hello, then what it asks for, until the client or the daemon ends."""
        buffered = BufferedByteReceiveStream(stream)
        try:
            hello = Hello.parse(await self._hello_line(buffered, hello_scope))
        except WarmkernelError as exc:
            await _answer(stream, {"ok": False, "error": {"code": exc.code, "message": exc.message}})
            return
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            return
        if hello.client == "status":
            await _answer(stream, {"ok": True, "version": __version__, **self.status()})
            return
        if hello.client == "view":
            await _answer(stream, await self.view(hello))
            return
        self.clients += 1
        self.clock.hold()
        try:
            if hello.client == "serve":
                await self.serve(hello, lambda answer: _answer(stream, answer), _closed(buffered))
            else:
                await _answer(stream, {"ok": True, "version": __version__})
                await self._serve_mcp(
                    hello, lambda: buffered.receive_until(b"\n", MESSAGE_MAX_BYTES), stream.send
                )
        finally:
            self.clients -= 1
            self.clock.release()

    async def _hello_line(self, buffered: BufferedByteReceiveStream, scope: anyio.CancelScope) -> bytes:
        """The hello's line, said within its deadline and before newer silent connections push it out."""
        line = None
        try:
            with scope:
                line = await buffered.receive_until(b"\n", HELLO_MAX_BYTES)
        except anyio.DelimiterNotFound as exc:
            raise WarmkernelError(
                "invalid_arguments", f"the hello is one line of JSON, of at most {HELLO_MAX_BYTES} bytes"
            ) from exc
        finally:
            pushed_out = not self.handshakes.close(scope)
        if line is not None:
            return line
        if pushed_out:
            raise WarmkernelError(
                "daemon_error",
                f"closed before its hello: {self.handshakes.cap} newer connections had not said theirs "
                "either, the most the daemon keeps; connect again and say it at once",
            )
        raise WarmkernelError(
            "invalid_arguments",
            f"no hello within {FIRST_WORDS_S:g} s: a client says its one line of JSON as soon as it connects",
        )

    async def _serve_mcp(
        self,
        hello: Hello,
        receive_line: Callable[[], Awaitable[bytes]],
        send: Callable[[bytes], Awaitable[None]],
    ) -> None:
        """MCP one JSON-RPC message a line, from `receive_line` and to `send`, until the client closes."""
        server = build_server(
            self.kernels,
            hello.options,
            note=hello.note or None,
            tell_joined=hello.client != "cli",
            hints="cli" if hello.client == "cli" else "mcp",
        )
        await server.run(_Incoming(receive_line), _Outgoing(send), server.create_initialization_options())


@dataclass(eq=False)
class _Incoming(anyio.abc.ObjectReceiveStream[SessionMessage | Exception]):
    """The client's messages, a line each, parsed in the server's own task (no task in between)."""

    receive_line: Callable[[], Awaitable[bytes]]

    async def receive(self) -> SessionMessage | Exception:
        try:
            line = await self.receive_line()
        except (anyio.IncompleteRead, anyio.BrokenResourceError, anyio.DelimiterNotFound) as exc:
            raise anyio.EndOfStream from exc  # the connection ends (a line past the limit ends it too)
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:  # the server answers it as a parse error
            return exc

    async def aclose(self) -> None:
        pass  # the connection is closed by its owner


@dataclass(eq=False)
class _Outgoing(anyio.abc.ObjectSendStream[SessionMessage]):
    """The server's messages, a line each, written by the task that sends them, one at a time."""

    send_line: Callable[[bytes], Awaitable[None]]
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))

    async def send(self, item: SessionMessage) -> None:
        body = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        async with self.lock:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await self.send_line(body)  # else the client left; its calls end with the connection

    async def aclose(self) -> None:
        pass


async def _closed(buffered: BufferedByteReceiveStream) -> None:
    """Return once the client has closed its side (what it sends meanwhile is ignored)."""
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
        while True:
            await buffered.receive()


async def _refuse_at_once(stream: anyio.abc.SocketStream, cap: int) -> None:
    """Answer a connection past the socket's cap and close it, without waiting on the client."""
    message = (
        f"the daemon holds {cap} connections on its socket, its cap; try again once some have ended "
        "(a relay is one, so is each running CLI verb)"
    )
    answer = {"ok": False, "error": {"code": "daemon_error", "message": message}}
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    with contextlib.suppress(OSError):  # a gone client: the close says enough
        raw.send(json.dumps(answer).encode() + b"\n")
        # What it sent already is read away: closing on unread bytes would reset the connection,
        # and the client would lose the answer.
        raw.recv(HELLO_MAX_BYTES)
    await stream.aclose()


async def _answer(stream: anyio.abc.SocketStream, answer: Mapping[str, Any]) -> None:
    # A client gone before its answer: nothing to tell.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(json.dumps(answer).encode() + b"\n")
