"""`warmkernel mcp`: what an MCP host launches, a relay between the host's stdio and the daemon.

The relay says its hello on the daemon's socket, then replaces itself (exec) with
`relay_pump.py` on a bare interpreter, which copies MCP lines both ways for the whole
conversation and keeps what a new daemon needs to serve the same session. When the daemon ends
under it, the pump answers the requests the daemon took with it and, at the host's next request,
runs this relay again with what it kept (`Resume`): the relay finds or starts the workspace's
daemon, opens the host's session there with the saved `initialize` (under an id of its own, so
its answer stays here) and `initialized`, and becomes the pump again. The host sends no new
`initialize`; its server never goes away.

When the relay ends, the daemon and its kernel stay: the daemon runs in a session of its own
(`discovery.start_daemon`).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from warmkernel.daemon.client import open_socket, read_line
from warmkernel.daemon.discovery import Descriptor
from warmkernel.daemon.relay_pump import RESUME_ENV, RESUME_ID, SERVER_ERROR, Resume
from warmkernel.errors import WarmkernelError

PUMP = Path(__file__).with_name("relay_pump.py")
_HANDSHAKE_S = 30.0


def relay(find_daemon: Callable[[], Descriptor], options: Mapping[str, Any]) -> NoReturn:
    """Connect to the workspace's daemon (`find_daemon` starts one if need be) and become the
    pump (never returns). A failure raises, for `refused`."""
    resume = _resumed()  # first: a daemon started below must not inherit it
    descriptor = find_daemon()
    sock, _ = open_socket(descriptor, "relay", options=dict(options))
    if resume is None:
        resume = Resume(structured=options.get("result_mode") == "structured")
    else:
        _reopen_session(sock, resume, descriptor)
    _become_pump(sock, resume)


def refused(error: WarmkernelError) -> None:
    """`warmkernel mcp` failed before it could relay. On the host's first launch, answer its
    `initialize` with why; on a resume, answer the waiting requests with it and become the pump,
    which waits for the host's next request (then never returns)."""
    resume = _resumed()
    if resume is None:
        _refuse_host(error)
        return
    resume.refusal = str(error)
    _become_pump(None, resume)


@cache
def _resumed() -> Resume | None:
    """What the pump this relay replaced kept (None: the host just launched it). Taken out of the
    environment at once: a daemon this relay starts, and its kernels, must not inherit it."""
    fd = os.environ.pop(RESUME_ENV, None)
    return Resume.taken(int(fd)) if fd is not None else None


def _reopen_session(sock: socket.socket, resume: Resume, descriptor: Descriptor) -> None:
    """The host's session on a new daemon: its saved `initialize` (the answer stays here), then
    its `initialized`."""
    if not resume.initialize:
        return  # the host had not initialized: its own initialize is among the waiting lines
    request = json.loads(resume.initialize)
    request["id"] = RESUME_ID
    sock.settimeout(_HANDSHAKE_S)
    try:
        sock.sendall(json.dumps(request).encode() + b"\n")
        while (answer := json.loads(read_line(sock) or b"null")) is not None:
            if isinstance(answer, dict) and answer.get("id") == RESUME_ID:
                break
        if not isinstance(answer, dict) or "result" not in answer:
            raise ValueError(f"it answered the host's initialize with {answer!r}")
        if resume.initialized:
            sock.sendall(resume.initialized.encode("utf-8", "surrogateescape") + b"\n")
    except (OSError, ValueError) as exc:
        sock.close()
        resume.refusal = (
            f"daemon_error: the daemon of {descriptor.workspace} did not take the host's session: {exc}"
        )
        _become_pump(None, resume)
    sock.settimeout(None)


def _become_pump(sock: socket.socket | None, resume: Resume) -> NoReturn:
    """Replace this process with the pump on a bare interpreter, handing it the socket (None: no
    daemon yet) and what it must keep."""
    fd = "-"
    if sock is not None:
        fd = str(sock.detach())
        os.set_inheritable(int(fd), True)
    argv = [sys.executable, "-S", "-I", str(PUMP), fd, str(resume.handed_on()), "--", *sys.orig_argv[1:]]
    os.execv(sys.executable, argv)


def _refuse_host(error: WarmkernelError) -> None:
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
        message = {"code": SERVER_ERROR, "message": f"{error.code}: {error.message}"}
        reply = {"jsonrpc": "2.0", "id": request["id"], "error": message}
        sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
        sys.stdout.buffer.flush()


def _is_pipe(fd: int) -> bool:
    """A pipe or a socket: what a host gives, never a person's terminal."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
