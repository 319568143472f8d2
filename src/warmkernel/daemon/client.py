"""The client side of a daemon's socket: the hello, and the small MCP client of the CLI verbs.

A CLI verb is one short MCP session (initialize, one tools/call) over the daemon's Unix socket,
with plain `socket` and `json`: no event loop, no HTTP stack and no schema validation, so a verb
costs little more than the interpreter's start. The protocol is in `socket_face`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from warmkernel import __version__
from warmkernel.daemon.discovery import Descriptor
from warmkernel.errors import WarmkernelError

_PROTOCOL_VERSION = "2025-11-25"
_PROGRESS_TOKEN = "cli"
_CONNECT_S = 30.0


@dataclass(frozen=True)
class Image:
    """An image a reply carries, as the CLI writes it to a file."""

    mime: str
    data: bytes


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's reply as the CLI prints it: the model's text, or the structured facts."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None
    blocks: tuple[str | Image, ...] = ()
    """The reply's content in order: its texts, and the images between them."""


def open_socket(descriptor: Descriptor, client: str, **fields: Any) -> tuple[socket.socket, dict[str, Any]]:
    """A connection to the daemon after its answer to our hello; a refusal raises with its code."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(_CONNECT_S)
    hello = {"warmkernel": __version__, "client": client, "note": version_note(descriptor), **fields}
    try:
        sock.connect(descriptor.socket)
        with contextlib.suppress(BrokenPipeError):  # refused at once (the socket's cap): its answer waits
            sock.sendall(json.dumps(hello).encode() + b"\n")
        answer = json.loads(read_line(sock) or b"null")
    except (OSError, ValueError) as exc:
        sock.close()
        raise WarmkernelError(
            "daemon_error", f"cannot reach the daemon of {descriptor.workspace} (pid {descriptor.pid}): {exc}"
        ) from exc
    if not isinstance(answer, dict) or not answer.get("ok"):
        sock.close()
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        raise WarmkernelError(
            error.get("code", "daemon_error"), error.get("message", f"the daemon said {answer!r}")
        )
    sock.settimeout(None)
    return sock, answer


def version_note(descriptor: Descriptor) -> str:
    """What a client of another version than its daemon says in its replies: it keeps working,
    and how to align them."""
    if descriptor.version == __version__:
        return ""
    return (
        f"note: this client is warmkernel {__version__}, and the daemon of this workspace runs "
        f"warmkernel {descriptor.version or 'of an unknown version'}. They understand each other; to run "
        f"{__version__}, `warmkernel stop` the daemon (its kernel's namespace is lost, its records are "
        "kept) and connect again."
    )


def read_line(sock: socket.socket) -> bytes:
    """One line, byte by byte: nothing after it may be taken from the socket (a relay copies it on)."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = sock.recv(1)
        if not byte:
            break
        line += byte
    return bytes(line)


class DaemonClient:
    """One MCP session with a daemon, as a CLI verb needs it: initialize, then tool calls."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lines = sock.makefile("rb")
        self._ids = count(1)

    def initialize(self) -> None:
        self._request(
            "initialize",
            {
                "protocolVersion": _PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "cli", "version": __version__},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call_tool(
        self, tool: str, arguments: Mapping[str, Any], on_progress: Callable[[str], None] | None = None
    ) -> ToolOutcome:
        """The tool's reply; a coded tool error comes back as an outcome with `error_code`.
        `on_progress` is told the message of each progress notification meanwhile."""
        _refuse_non_utf8(arguments)
        params: dict[str, Any] = {"name": tool, "arguments": dict(arguments)}
        if on_progress is not None:
            params["_meta"] = {"progressToken": _PROGRESS_TOKEN}
        result = self._request("tools/call", params, on_progress)
        blocks = tuple(block for block in map(_block, result.get("content", [])) if block is not None)
        text = "\n".join(block for block in blocks if isinstance(block, str))
        data = result.get("structuredContent")
        if not result.get("isError"):
            return ToolOutcome(text, dict(data or {}), blocks=blocks)
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            error = data["error"]
        else:  # a daemon that sent no structured content: the code is the text's prefix
            code, _, message = text.partition(": ")
            error = {"code": code, "message": message}
        return ToolOutcome(text, {"error": error}, error_code=error["code"])

    def close(self) -> None:
        self._lines.close()
        self._sock.close()

    def _send(self, message: Mapping[str, Any]) -> None:
        self._sock.sendall(json.dumps(message).encode() + b"\n")

    def _request(
        self, method: str, params: Mapping[str, Any], on_progress: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send a request and read lines until its answer; of the notifications on the way, progress
        goes to `on_progress` and the rest are skipped."""
        message_id = next(self._ids)
        try:
            self._send({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})
            for line in self._lines:
                answer = json.loads(line)
                if answer.get("id") == message_id:
                    break
                if on_progress is not None and answer.get("method") == "notifications/progress":
                    on_progress(str(answer.get("params", {}).get("message", "")))
            else:
                raise WarmkernelError("daemon_error", f"the daemon closed the connection during {method}")
        except (OSError, ValueError) as exc:
            raise WarmkernelError(
                "daemon_error", f"the daemon connection broke during {method}: {exc}"
            ) from exc
        if "error" in answer:
            raise WarmkernelError(
                "daemon_error", f"the daemon refused {method}: {answer['error'].get('message')}"
            )
        return answer["result"]


def _refuse_non_utf8(arguments: Mapping[str, Any]) -> None:
    """`invalid_arguments` for text JSON cannot carry: a command-line word with a byte that is
    not UTF-8 (Python holds it as a lone surrogate). The daemon could not parse the request, and
    could not answer it."""
    for name, value in arguments.items():
        try:
            if isinstance(value, str):
                value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise WarmkernelError(
                "invalid_arguments",
                f"{name} {value[:200]!r} is not UTF-8 text (position {exc.start}); give it as UTF-8",
            ) from exc


def _block(block: Mapping[str, Any]) -> str | Image | None:
    """A content block as text or an image; other kinds (none are sent today) are skipped."""
    match block.get("type"):
        case "text":
            return str(block.get("text", ""))
        case "image":
            try:
                return Image(str(block.get("mimeType", "")), base64.b64decode(block.get("data", "")))
            except ValueError:
                return None
        case _:
            return None


@contextmanager
def open_daemon(descriptor: Descriptor, options: Mapping[str, Any] | None = None) -> Iterator[DaemonClient]:
    """An initialized MCP session with the daemon, its replies with structured facts and these
    reply options (`settings.model.REPLY_SETTINGS`)."""
    sock, _ = open_socket(descriptor, "cli", options={"result_mode": "structured", **(options or {})})
    client = DaemonClient(sock)
    try:
        client.initialize()
        yield client
    finally:
        client.close()
