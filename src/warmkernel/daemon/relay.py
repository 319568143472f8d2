"""`warmkernel mcp`: what an MCP host launches, a relay between the host's stdio and the daemon.

After its hello the relay hands the host's stdin and stdout to the daemon (SCM_RIGHTS over the
daemon's socket), which then reads and writes the host's pipes itself: no process copies a
message on its way. The relay stays, as the process the host launched and watches, until the
daemon closes the connection (the host closed stdin) or the relay is ended (a signal, a kill of
its process group), which the daemon sees as the connection's end and stops serving those pipes.
Where stdin or stdout is not a pipe or a socket (a terminal, a file), or the daemon does not take
them (another version), the relay copies bytes between stdio and the socket instead: MCP over
stdio and over the socket are framed alike (one JSON-RPC message a line), so progress
notifications and cancellations pass through to and from the right client untouched either way.

To stay small for the whole conversation, the process replaces itself with `relay_pump.py` on a
bare interpreter once the daemon has answered. When the relay ends, the daemon and its kernel
stay: the daemon runs in a session of its own (`discovery.start_daemon`).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from warmkernel.daemon.client import open_socket
from warmkernel.daemon.discovery import Descriptor
from warmkernel.errors import WarmkernelError

PUMP = Path(__file__).with_name("relay_pump.py")


def relay(descriptor: Descriptor, options: Mapping[str, Any]) -> NoReturn:
    """Say hello to the daemon, pass it stdio (or pump), then wait on the socket (never returns)."""
    passable = all(_is_pipe(fd) for fd in (0, 1))
    sock, answer = open_socket(
        descriptor, "relay", options=dict(options), **({"stdio": "fds"} if passable else {})
    )
    mode = "--pump"
    if answer.get("stdio") == "fds":
        try:
            socket.send_fds(sock, [b"\0"], [0, 1])
        except OSError as exc:
            raise WarmkernelError(
                "daemon_error", f"the daemon of {descriptor.workspace} went away during the hello: {exc}"
            ) from exc
        _let_go_of_stdio()
        mode = "--wait"
    fd = sock.detach()
    os.set_inheritable(fd, True)
    os.execv(sys.executable, [sys.executable, "-S", "-I", str(PUMP), str(fd), mode])


def refuse_host(error: WarmkernelError) -> None:
    """Answer the host's first request (its `initialize`) with why there is no daemon to relay to,
    so that the host shows the reason rather than a closed connection. Only a host's pipe is read:
    a person at a terminal sees the error on stderr."""
    if not _is_pipe(0):
        return
    try:
        request = json.loads(sys.stdin.buffer.readline())
    except ValueError:
        return
    if isinstance(request, dict) and "id" in request:
        message = {"code": _SERVER_ERROR, "message": f"{error.code}: {error.message}"}
        reply = {"jsonrpc": "2.0", "id": request["id"], "error": message}
        sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
        sys.stdout.buffer.flush()


_SERVER_ERROR = -32000
"""JSON-RPC's first code for an implementation's own server errors."""


def _is_pipe(fd: int) -> bool:
    """A pipe or a socket: what the daemon can wait on without blocking, and what a host gives."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _let_go_of_stdio() -> None:
    """The daemon holds the host's pipes now: ours go, so the host sees their end when the daemon's do."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
