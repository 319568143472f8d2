"""The relay once connected: copies MCP between the host's stdio and the daemon's socket, and keeps
the host's session across the daemon's end.

`relay.relay` says its hello, then replaces itself (exec) with this file run by a bare
interpreter (`-S -I`, standard library only), so the process a host keeps for the whole
conversation holds little more than an interpreter and a socket. MCP over stdio and over the
socket are framed alike (one JSON-RPC message a line), so progress notifications and
cancellations pass through untouched. The pump moves whole lines only, so a daemon that ends in
the middle of a message never leaves half of it in either stream, and remembers what a new
daemon needs (`Resume`): the host's `initialize` request and `initialized` notification, and the
host's requests not answered yet.

When the daemon's side ends while the host's is open (SIGKILL, a crash, `warmkernel stop`, an
upgrade), each open request is answered `daemon_restarted` (a tool call as a tool error), and the
pump waits, reading the host's lines. The host's next request replaces the pump with the relay
again (the command the host launched, `RELAY_ARGV`), which finds or starts the workspace's
daemon, opens the session there with the saved `initialize` and hands the waiting lines on: the
host never sees its server go. A `warmkernel stop` thus stays stopped until the host asks for
something. Once the host closes stdin, the daemon sees the connection end and the pump exits.

Usage: `relay_pump.py SOCKET_FD|- RESUME_FD -- RELAY_ARGV...` (`-`: no daemon, wait for a request).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import socket
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, NoReturn

CHUNK = 65_536
RESUME_ENV = "WARMKERNEL_RELAY_RESUME"
"""Names the descriptor of the saved `Resume` the relay inherits when it replaces the pump."""
RESUME_ID = "warmkernel-relay-resume"
"""The id of the saved `initialize` as the relay sends it again: its answer is not the host's."""
SERVER_ERROR = -32000
"""JSON-RPC's first code for an implementation's own server errors."""
_ANSWER = re.compile(rb'\{"jsonrpc":"2\.0","id":("(?:[^"\\]|\\.)*"|-?\d+),"(?:result|error)"')
"""The start of an answer as the daemon writes it (pydantic's compact JSON, fields in order)."""
_NOT_AN_ANSWER = b'{"jsonrpc":"2.0","method"'


@dataclass
class Resume:
    """What a daemon needs to serve the host's session, passed from process to process."""

    initialize: str = ""
    """The host's `initialize` request, its line as the host wrote it ("" until it has)."""
    initialized: str = ""
    waiting: str = ""
    """Lines the host wrote that no daemon has read yet."""
    refusal: str = ""
    """Why the last attempt to reach a daemon failed: the waiting requests are answered with it."""
    structured: bool = False
    """The host's replies carry structured content (its `--result-mode`)."""

    def handed_on(self) -> int:
        """An inheritable descriptor of an unlinked file that holds it, for the next process."""
        import tempfile  # here: a pump that never hands on never loads it

        fd, path = tempfile.mkstemp(prefix="warmkernel-relay-")
        os.unlink(path)
        _write_all(fd, json.dumps(asdict(self)).encode())
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
        return fd

    @classmethod
    def taken(cls, fd: int) -> Resume:
        """What `handed_on` saved, also by another version (an upgrade between the two): a field
        this one does not know is left out, one it lacks keeps its default."""
        with open(fd, "rb") as saved:
            kept = json.loads(saved.read())
        return cls(**{name: kept[name] for name in cls.__dataclass_fields__ if name in kept})


@dataclass
class Pump:
    """The two directions, whole lines at a time, and the host's requests still open."""

    resume: Resume
    relay_argv: list[str]
    open: dict[Any, tuple[str, str | None]] = field(default_factory=dict)
    """Each open request's id, with its method and, for a tool call, the tool's name."""
    from_host: bytearray = field(default_factory=bytearray)
    from_daemon: bytearray = field(default_factory=bytearray)

    def run(self, sock: socket.socket | None) -> NoReturn:
        waiting = self.resume.waiting.encode("utf-8", "surrogateescape")
        self.resume.waiting = ""
        lines = self._host_lines(waiting)
        if sock is not None:
            sock.sendall(lines)  # the daemon just answered: a failure shows as its end below
            if self._connected(sock):
                sys.exit(0)  # the host closed stdin and the daemon saw it
            sock.close()
            self._answer_open(None)
        else:
            self._answer_open(self.resume.refusal)
        self._detached()

    def _connected(self, sock: socket.socket) -> bool:
        """Copy both ways until the daemon's side ends; whether the host had closed stdin first."""
        host_open = True
        with selectors.DefaultSelector() as selector:
            selector.register(0, selectors.EVENT_READ, "host")
            selector.register(sock, selectors.EVENT_READ, "daemon")
            while True:
                for key, _ in selector.select():
                    if key.data == "daemon":
                        chunk = _received(sock)
                        if not chunk:
                            return not host_open
                        self._to_host(chunk)
                        continue
                    chunk = _read(0)
                    if not chunk:
                        host_open = False
                        selector.unregister(0)
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_WR)
                        continue
                    if lines := self._host_lines(chunk):
                        try:
                            sock.sendall(lines)
                        except OSError:  # the daemon is gone: what it wrote before is still read
                            selector.unregister(0)

    def _detached(self) -> NoReturn:
        """No daemon: keep the host's lines until a request asks for one, then become the relay."""
        while chunk := _read(0):
            self.resume.waiting += self._host_lines(chunk).decode("utf-8", "surrogateescape")
            if self.open:
                self.resume.refusal = ""
                self.resume.waiting += self.from_host.decode("utf-8", "surrogateescape")
                fd = self.resume.handed_on()
                os.environ[RESUME_ENV] = str(fd)
                os.execv(sys.executable, [sys.executable, *self.relay_argv])
        sys.exit(0)  # the host is done

    def _host_lines(self, chunk: bytes) -> bytes:
        """The complete lines so far (the rest waits for its newline), each request noted as open."""
        end = chunk.rfind(b"\n")
        if end < 0:
            self.from_host += chunk
            return b""
        lines = bytes(self.from_host) + chunk[: end + 1]
        self.from_host[:] = chunk[end + 1 :]
        for line in lines.splitlines():
            self._note(line)
        return lines

    def _note(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return  # the daemon answers it as a parse error
        if not isinstance(message, dict) or not isinstance(method := message.get("method"), str):
            return
        if method == "initialize":
            self.resume.initialize = line.decode("utf-8", "surrogateescape")
        elif method == "notifications/initialized":
            self.resume.initialized = line.decode("utf-8", "surrogateescape")
        if _is_id(request := message.get("id")):
            params = message.get("params")
            tool = params.get("name") if isinstance(params, dict) and method == "tools/call" else None
            self.open[request] = (method, tool if isinstance(tool, str) else None)

    def _to_host(self, chunk: bytes) -> None:
        """Write the complete lines to the host; each answer closes its request."""
        end = chunk.rfind(b"\n")
        if end < 0:
            self.from_daemon += chunk
            return
        lines = bytes(self.from_daemon) + chunk[: end + 1]
        self.from_daemon[:] = chunk[end + 1 :]
        if self.open:
            for line in lines.splitlines():
                self._close(line)
        _write_all(1, lines)

    def _close(self, line: bytes) -> None:
        if (answer := _ANSWER.match(line)) is not None:
            self.open.pop(json.loads(answer[1]), None)
        elif not line.startswith(_NOT_AN_ANSWER):  # another daemon's JSON: read it all
            with contextlib.suppress(ValueError, RecursionError):
                message = json.loads(line)
                if isinstance(message, dict) and ("result" in message or "error" in message):
                    with contextlib.suppress(TypeError):  # an id that is not a key
                        self.open.pop(message.get("id"), None)

    def _answer_open(self, refusal: str | None) -> None:
        """Answer each open request, which the daemon it went to will not: that daemon ended (None),
        or the `refusal` (`code: message`) of the one it waited for."""
        for request, (method, tool) in self.open.items():
            if refusal is None:
                code = "daemon_restarted"
                message = (
                    f"the daemon of this workspace ended while {tool or method} ran: its kernel's namespace "
                    "is lost, the records it kept stay readable; the next call starts or finds the "
                    "workspace's new daemon"
                )
            else:
                code, _, message = refusal.partition(": ")
            _write_all(1, json.dumps(self._answer(request, tool, code, message)).encode() + b"\n")
        self.open.clear()

    def _answer(self, request: Any, tool: str | None, code: str, message: str) -> dict[str, Any]:
        """A tool call's answer is a tool error, as the daemon's own are; another request's, an error."""
        if tool is None:
            error = {"code": SERVER_ERROR, "message": f"{code}: {message}"}
            return {"jsonrpc": "2.0", "id": request, "error": error}
        text = {"type": "text", "text": f"{code}: {message}"}
        result: dict[str, Any] = {"content": [text], "isError": True, "resultType": "complete"}
        if self.resume.structured:
            result["structuredContent"] = {"error": {"code": code, "message": message}}
        return {"jsonrpc": "2.0", "id": request, "result": result}


def _is_id(value: Any) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _received(sock: socket.socket) -> bytes:
    try:
        return sock.recv(CHUNK)
    except OSError:  # reset: the daemon is gone
        return b""


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main(argv: list[str]) -> NoReturn:
    socket_fd, resume_fd, separator, *relay_argv = argv
    assert separator == "--", "usage: relay_pump.py SOCKET_FD|- RESUME_FD -- RELAY_ARGV..."
    pump = Pump(Resume.taken(int(resume_fd)), relay_argv)
    try:
        pump.run(None if socket_fd == "-" else socket.socket(fileno=int(socket_fd)))
    except BrokenPipeError:  # the host closed our stdout: it is gone
        sys.exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
