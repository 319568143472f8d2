"""`warmkernel mcp`: what an MCP host launches, a relay between the host's stdio and the daemon.

After its hello the relay copies bytes both ways and parses nothing: MCP over stdio and over the
daemon's socket are framed alike (one JSON-RPC message a line), so progress notifications and
cancellations pass through to and from the right client untouched. When the host closes stdin,
or ends the relay with a signal or a kill of its process group, the daemon and its kernel stay:
the daemon runs in a session of its own (`discovery.start_daemon`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Mapping
from typing import Any

from warmkernel.client import open_socket
from warmkernel.discovery import Descriptor

_CHUNK = 65_536


def relay(descriptor: Descriptor, options: Mapping[str, Any]) -> None:
    """Relay this process's stdin and stdout to the daemon until either side closes."""
    sock, _ = open_socket(descriptor, "relay", options=dict(options))
    with sock:
        threading.Thread(target=_host_to_daemon, args=(sock,), daemon=True).start()
        with contextlib.suppress(OSError):  # the host closed our stdout: it is done with us
            while chunk := _receive(sock):
                _write_all(1, chunk)


def _host_to_daemon(sock: socket.socket) -> None:
    """Copy stdin to the daemon; at its end, tell the daemon this client is done."""
    # An OSError: the daemon went away; the other direction sees it and ends the relay.
    with contextlib.suppress(OSError):
        while chunk := os.read(0, _CHUNK):
            sock.sendall(chunk)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _receive(sock: socket.socket) -> bytes:
    try:
        return sock.recv(_CHUNK)
    except OSError:
        return b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
