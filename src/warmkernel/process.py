"""One warmkernel server process: a Session, the face it was started for, and its descriptor.

Whatever the face (MCP over stdio for an agent's host, Streamable HTTP for `serve`, nothing
more for a daemon), the process also serves the same tools on a loopback endpoint with its
own token and advertises it in a daemon descriptor, so the CLI reaches the very same kernel.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import anyio

from warmkernel.config import Settings
from warmkernel.discovery import DaemonKind, Descriptor, new_daemon_id, remove_descriptor, write_descriptor
from warmkernel.errors import WarmkernelError
from warmkernel.http_transport import Endpoint, bind, new_token, serve_http
from warmkernel.jupyter_host import JupyterHost, owned_jupyter_server
from warmkernel.mcp_server import serve_stdio
from warmkernel.session import Session
from warmkernel.workspace import Workspace


@dataclass(frozen=True)
class Face:
    """What the process serves besides its loopback endpoint."""

    kind: DaemonKind
    public: Endpoint | None = None
    """The `serve` endpoint (host, port, path, token), when kind is `serve`."""
    ready_fd: int | None = None
    """A pipe to write the daemon id to once the descriptor exists (daemon start-up)."""
    jupyter: bool = False
    """Run the kernel on a Jupyter Server this process owns, for an IDE to attach to (`start --serve`)."""
    jupyter_notebook: Path | None = None
    """With `jupyter`: the notebook (inside the workspace) whose server session the kernel joins."""


async def run_server(settings: Settings, workspace: Workspace, face: Face) -> None:
    """Serve until stdin closes (stdio) or the task is cancelled (HTTP, daemon)."""
    # Bind before anything else so a busy port fails fast, before a kernel starts.
    public_socket = bind(face.public.host, face.public.port) if face.public else None
    if face.public is not None and public_socket is not None:
        # stderr: this is `serve`, never the stdio face, but stdout stays free for scripts.
        print(
            f"warmkernel: serving MCP at {_public_url(face.public, public_socket)}",
            file=sys.stderr,
            flush=True,
        )
    notebook = _jupyter_notebook(workspace, face.jupyter_notebook)
    async with (
        _ide_server(face, workspace, settings.python) as jupyter,
        Session.open(_on_server(settings, jupyter, notebook), workspace) as session,
    ):
        local = Endpoint("127.0.0.1", 0, "/mcp", new_token())
        async with serve_http(session, bind(local.host, 0), local, {"result_mode": "structured"}) as endpoint:
            descriptor = Descriptor(
                id=new_daemon_id(),
                pid=os.getpid(),
                workspace=str(workspace.path),
                url=endpoint.url,
                token=endpoint.token,
                kind=face.kind,
                started_at=time.time(),
                public_url=_public_url(face.public, public_socket),
                public_token=face.public.token if face.public else None,
                jupyter_url=jupyter.server_url if jupyter else None,
                jupyter_lab_url=jupyter.lab_url(notebook) if jupyter else None,
            )
            path = write_descriptor(descriptor)
            session.on_notebook_change = lambda notebook: write_descriptor(
                replace(descriptor, notebook=str(notebook))
            )
            try:
                if face.ready_fd is not None:
                    os.write(face.ready_fd, f"{descriptor.id}\n".encode())
                    os.close(face.ready_fd)
                if face.kind == "mcp":
                    await serve_stdio(session)
                elif face.public is not None and public_socket is not None:
                    async with serve_http(session, public_socket, face.public):
                        await anyio.sleep_forever()
                else:
                    await anyio.sleep_forever()
            finally:
                remove_descriptor(path)


def _public_url(public: Endpoint | None, sock: socket.socket | None) -> str | None:
    if public is None or sock is None:
        return None
    return replace(public, port=sock.getsockname()[1]).url


@asynccontextmanager
async def _ide_server(face: Face, workspace: Workspace, python: str) -> AsyncIterator[JupyterHost | None]:
    """The Jupyter Server the kernel runs on, when the face asks for one; it outlives the session."""
    if not face.jupyter:
        yield None
        return
    async with owned_jupyter_server(workspace.path, python) as jupyter:
        yield jupyter


def _on_server(settings: Settings, jupyter: JupyterHost | None, notebook: str | None) -> Settings:
    if jupyter is None:
        return settings
    return replace(settings, jupyter_url=jupyter.url, jupyter_token=jupyter.token, jupyter_notebook=notebook)


def _jupyter_notebook(workspace: Workspace, notebook: Path | None) -> str | None:
    """The notebook as the Jupyter Server names it: relative to the workspace, its root."""
    if notebook is None:
        return None
    path = notebook.resolve()
    if not path.is_relative_to(workspace.path):
        raise WarmkernelError(
            "invalid_notebook",
            f"{path} is outside the workspace {workspace.path}; the Jupyter server serves only "
            "files inside it",
        )
    return path.relative_to(workspace.path).as_posix()
