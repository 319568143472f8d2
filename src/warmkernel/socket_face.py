"""The daemon's Unix socket: the one door of every local client (a host's relay, a CLI verb).

A connection opens with a hello, one line of JSON (with the client's version, and in `note` what
its replies should tell it, e.g. that the versions differ), which the daemon answers with one line:
  {"warmkernel": VERSION, "client": "relay"|"cli"|"serve"|"status", "options": {...}, "serve": {...},
   "note": TEXT}
  answered {"ok": true, "version": VERSION, ...} or {"ok": false, "error": {"code": ..., "message": ...}}
After the hello of a relay or a CLI verb the connection carries MCP exactly as stdio does, one
JSON-RPC message a line, so a relay only copies bytes. `options` are the client's reply options
(its kernel options were checked against the daemon's descriptor before it connected).
A `status` hello gets the daemon's state and the connection ends; a `serve` hello opens the
public Streamable HTTP endpoint it names for as long as the connection stays open.
Unknown fields are ignored, so clients and daemons of other versions still understand each other.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.shared.message import SessionMessage

from warmkernel import __version__
from warmkernel.errors import WarmkernelError
from warmkernel.mcp_server import build_server
from warmkernel.named_kernels import Kernels

HELLO_MAX_BYTES = 65_536
MESSAGE_MAX_BYTES = 256 * 1024 * 1024
"""The longest MCP message a line may carry (a cell's source, a reply with images)."""

REPLY_OPTIONS = frozenset(
    {
        "result_mode",
        "default_wait_s",
        "inline_max_lines",
        "inline_max_chars",
        "max_images_per_reply",
        "max_image_bytes",
        "notebook",
    }
)
"""The settings a client may choose for its own replies; every other setting is the daemon's."""


@dataclass(frozen=True)
class Hello:
    """What a client says first."""

    client: str
    options: dict[str, Any] = field(default_factory=dict)
    serve: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    """What the client has to be told about itself in its replies, e.g. that its version differs."""

    @classmethod
    def parse(cls, line: bytes) -> Hello:
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise WarmkernelError("invalid_arguments", "the hello is not JSON") from exc
        if not isinstance(data, dict) or not isinstance(data.get("client"), str):
            raise WarmkernelError("invalid_arguments", 'the hello is a JSON object with a "client" name')
        options = data.get("options") or {}
        unknown = sorted(set(options) - REPLY_OPTIONS)
        if unknown:
            raise WarmkernelError(
                "invalid_arguments",
                f"{', '.join(unknown)} are not reply options; a client may choose "
                + ", ".join(sorted(REPLY_OPTIONS)),
            )
        return cls(
            data["client"],
            dict(options),
            dict(data.get("serve") or {}),
            str(data.get("note") or ""),
        )


Status = Callable[[], Mapping[str, Any]]
Serve = Callable[[Hello, Callable[[Mapping[str, Any]], Awaitable[None]], Awaitable[None]], Awaitable[None]]
"""Serves a `serve` hello: (hello, answer, closed), where `closed` ends when the client leaves."""


@dataclass
class SocketFace:
    """Serves the connections of one daemon's socket; counts its clients."""

    kernels: Kernels
    status: Status
    serve: Serve
    clients: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) whenever the number of clients changes."""

    async def listen(self, listener: anyio.abc.Listener[anyio.abc.SocketStream]) -> None:
        await listener.serve(self._handle)

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            try:
                hello = Hello.parse(await buffered.receive_until(b"\n", HELLO_MAX_BYTES))
            except WarmkernelError as exc:
                await _answer(stream, {"ok": False, "error": {"code": exc.code, "message": exc.message}})
                return
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound):
                return
            if hello.client == "status":
                await _answer(stream, {"ok": True, "version": __version__, **self.status()})
                return
            self._count(+1)
            try:
                if hello.client == "serve":
                    await self.serve(hello, lambda answer: _answer(stream, answer), _closed(buffered))
                else:
                    await _answer(stream, {"ok": True, "version": __version__})
                    await self._serve_mcp(hello, stream, buffered)
            finally:
                self._count(-1)

    def _count(self, delta: int) -> None:
        self.clients += delta
        self.changed.set()
        self.changed = anyio.Event()

    async def _serve_mcp(
        self, hello: Hello, stream: anyio.abc.SocketStream, buffered: BufferedByteReceiveStream
    ) -> None:
        """MCP over the rest of the connection, one JSON-RPC message a line, until the client closes."""
        server = build_server(
            self.kernels,
            hello.options,
            note=hello.note or None,
            tell_joined=hello.client != "cli",
        )
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_client, from_server = anyio.create_memory_object_stream[SessionMessage](0)

        async def read() -> None:
            async with to_server:
                while True:
                    try:
                        line = await buffered.receive_until(b"\n", MESSAGE_MAX_BYTES)
                    except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                        return
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError as exc:
                        await to_server.send(exc)
                        continue
                    await to_server.send(SessionMessage(message))

        async def write() -> None:
            async with from_server:
                async for message in from_server:
                    body = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await stream.send(body.encode() + b"\n")
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the client left; its calls end with the connection

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(write)
            await server.run(from_client, to_client, server.create_initialization_options())
            tg.cancel_scope.cancel()


async def _closed(buffered: BufferedByteReceiveStream) -> None:
    """Return once the client has closed its side (what it sends meanwhile is ignored)."""
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
        while True:
            await buffered.receive()


async def _answer(stream: anyio.abc.SocketStream, answer: Mapping[str, Any]) -> None:
    # A client gone before its answer: nothing to tell.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(json.dumps(answer).encode() + b"\n")
