"""The relay once connected: waits on the daemon's socket, or copies bytes between stdio and it.

`relay.relay` says its hello, then replaces itself (exec) with this file run by a bare
interpreter (`-S -I`, standard library only), so the process a host keeps for the whole
conversation holds no more than an interpreter and a socket. With `--wait` the daemon serves the
host's pipes itself and this process only lives as long as the connection; with `--pump` it
copies each direction.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

CHUNK = 65_536


def wait(sock: socket.socket) -> None:
    """Until the daemon closes the connection (it has nothing to say on it)."""
    with contextlib.suppress(OSError):
        while sock.recv(CHUNK):
            pass


def pump(sock: socket.socket) -> None:
    """Daemon to stdout until the daemon closes; stdin to the daemon in a thread."""
    threading.Thread(target=_host_to_daemon, args=(sock,), daemon=True).start()
    with contextlib.suppress(OSError):  # the host closed our stdout, or the daemon went away
        while chunk := sock.recv(CHUNK):
            _write_all(1, chunk)


def _host_to_daemon(sock: socket.socket) -> None:
    """Copy stdin to the daemon; at its end, tell the daemon this client is done."""
    with contextlib.suppress(OSError):  # the daemon went away: the other direction sees it
        while chunk := os.read(0, CHUNK):
            sock.sendall(chunk)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


if __name__ == "__main__":
    with socket.socket(fileno=int(sys.argv[1])) as connected:
        (wait if sys.argv[2:] == ["--wait"] else pump)(connected)
