"""The daemon: one per workspace, the owner of its kernel, its records and its clients.

Every client reaches it through its Unix socket (`socket_face`): a host's `warmkernel mcp` is a
relay that hands over the host's stdin and stdout (the daemon serves MCP on them), a CLI verb is
a short MCP session, `warmkernel serve` asks it to open a public Streamable HTTP endpoint for as
long as it runs, `warmkernel view` for the URL of its console page (served from the first such
request to the daemon's end). The daemon advertises itself in a
descriptor (`discovery`), and lives on when its clients go: it stops on `warmkernel stop`, or by
itself once it has had no client and no running cell for its `idle_stop` time.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Container, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import psutil

from warmkernel import __version__
from warmkernel.daemon.discovery import (
    SOCKET_DIR_PREFIX,
    Descriptor,
    new_daemon_id,
    remove_descriptor,
    write_descriptor,
)
from warmkernel.errors import WarmkernelError
from warmkernel.faces.listening import quiet_accept_errors, raise_open_files_limit
from warmkernel.idle import IdleClock
from warmkernel.kernel.environment import prepare_environment
from warmkernel.settings.model import Settings
from warmkernel.workspace import Workspace

if TYPE_CHECKING:
    from warmkernel.daemon.hello import Hello
    from warmkernel.daemon.jupyter_host import JupyterHost
    from warmkernel.daemon.local_socket import SocketFace
    from warmkernel.faces.console import Console
    from warmkernel.faces.http_server import Endpoint
    from warmkernel.session.journal import Journal
    from warmkernel.session.kernels import Kernels

SOCKET_NAME = "mcp.sock"


@dataclass(frozen=True)
class DaemonOptions:
    """How the daemon process runs, beside the kernel's `Settings`."""

    idle_stop_s: float
    idle_stop_unused_s: float
    """The idle stop of a daemon that has run no cell yet (0: `idle_stop_s` throughout)."""
    """Stop after this long with no client and no running cell; 0: never (`--idle-stop`)."""
    state_dir: Path | None = None
    """Where the journal is kept; None: the per-user default (`journal.state_dir`)."""
    ready_fd: int | None = None
    """A pipe to write the daemon id to once the descriptor exists (`discovery.start_daemon`)."""
    jupyter: bool = False
    """Run the kernel on a Jupyter Server the daemon owns, for an IDE to attach to (`start --serve`)."""
    jupyter_port: int | None = None
    """With `jupyter`: the loopback port of that server; None: a free one."""
    jupyter_notebook: Path | None = None
    """With `jupyter`: the notebook (inside the workspace) whose server session the kernel joins."""
    kernel_options: Mapping[str, Any] = field(default_factory=dict)
    """The kernel options as clients compare them (see `discovery.check_kernel_options`)."""


async def run_daemon(settings: Settings, workspace: Workspace, options: DaemonOptions) -> None:
    """Serve the workspace until cancelled (a signal, `warmkernel stop`) or idle for `idle_stop_s`."""
    # The start imports the session's modules and then the MCP SDK's: many objects that live as
    # long as the daemon. Collecting while they are made frees nothing and costs about a tenth of
    # the start; once the daemon serves, they are frozen out of every later collection (`_serve`).
    gc.disable()
    from warmkernel.kernel import leftovers
    from warmkernel.session.journal import Journal

    raise_open_files_limit()  # before any listener: its cap is a share of this limit

    notebook = _jupyter_notebook(workspace, options.jupyter_notebook)
    await anyio.to_thread.run_sync(leftovers.sweep)
    # A short private directory: a Unix socket path must stay under about 107 bytes.
    socket_dir = Path(tempfile.mkdtemp(prefix=SOCKET_DIR_PREFIX))
    try:
        # Held for the daemon's life: a workspace's journal has one writer.
        with Journal.open(workspace.path, options.state_dir) as journal:
            await _serve(settings, workspace, options, notebook, socket_dir, journal)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


async def _serve(
    settings: Settings,
    workspace: Workspace,
    options: DaemonOptions,
    notebook: str | None,
    socket_dir: Path,
    journal: Journal,
) -> None:
    """The daemon proper, once it holds the workspace's journal."""
    from warmkernel.session.kernels import Kernels

    clock = IdleClock()  # held by each client and, through the kernels, by every call and cell
    clock.hold()  # and by the start itself: the idle time runs from when the daemon serves
    async with (
        _ide_server(options, workspace, settings) as jupyter,
        Kernels.open(_on_server(settings, jupyter, notebook), workspace, journal, clock) as kernels,
    ):
        # The kernel is starting: the MCP SDK's import (about 0.4 s) overlaps its boot, in a thread.
        socket_face = await anyio.to_thread.run_sync(
            importlib.import_module, "warmkernel.daemon.local_socket"
        )
        gc.freeze()
        gc.enable()
        quiet_accept_errors(asyncio.get_running_loop())
        listener = await anyio.create_unix_listener(socket_dir / SOCKET_NAME)
        descriptor = Descriptor(
            id=new_daemon_id(),
            pid=os.getpid(),
            workspace=str(workspace.path),
            socket=str(socket_dir / SOCKET_NAME),
            started_at=time.time(),
            version=__version__,
            kernel_options=dict(options.kernel_options),
            idle_stop_s=options.idle_stop_s,
            jupyter_url=jupyter.server_url if jupyter else None,
            jupyter_lab_url=jupyter.lab_url(notebook) if jupyter else None,
        )
        daemon = _Daemon(kernels, descriptor, write_descriptor(descriptor), clock)
        kernels.on_notebook_change = lambda path: daemon.advertise(notebook=str(path))
        face: SocketFace = socket_face.SocketFace(
            kernels, daemon.status, daemon.serve_public, daemon.view, clock
        )
        daemon.face = face
        try:
            if options.ready_fd is not None:
                with contextlib.suppress(BrokenPipeError):  # the command that started it is gone: it stays
                    os.write(options.ready_fd, f"{descriptor.id}\n".encode())
                os.close(options.ready_fd)
            async with listener, anyio.create_task_group() as tg:
                daemon.tg = tg
                tg.start_soon(face.listen, listener)
                clock.release()
                await _until_idle(clock, kernels, options)
                tg.cancel_scope.cancel()
        finally:
            remove_descriptor(daemon.descriptor_path)


async def _until_idle(clock: IdleClock, kernels: Kernels, options: DaemonOptions) -> None:
    """Return once there has been no client and no running cell for the idle stop (0: never): the
    shorter `idle_stop_unused_s` while no cell has run, so a host that only lists its servers
    leaves no kernel running for long."""
    if options.idle_stop_s <= 0:
        await anyio.sleep_forever()

    def limit() -> float:
        unused = options.idle_stop_unused_s
        ran = kernels.ran_cells()
        return options.idle_stop_s if ran or unused <= 0 else min(unused, options.idle_stop_s)

    while True:
        waited = limit()
        await clock.idle_for(waited)
        if limit() <= waited:  # no cell ran meanwhile to lengthen it
            return


@dataclass
class _Daemon:
    """The daemon's own state: its descriptor, and when it last had something to do."""

    kernels: Kernels
    descriptor: Descriptor
    descriptor_path: Path
    clock: IdleClock
    """Idle while there is no client and no running cell."""
    face: SocketFace | None = None
    tg: anyio.abc.TaskGroup | None = None
    """Where the daemon's own servers run (the console page), set once it serves."""
    console: Console | None = None

    def advertise(self, **changes: Any) -> None:
        self.descriptor = replace(self.descriptor, **changes)
        write_descriptor(self.descriptor)

    def status(self) -> Mapping[str, Any]:
        main = self.kernels.main
        kernel = main.kernel_info()
        running = main.running
        kernels = self.kernels.summaries()
        known = [k.memory_bytes for k in kernels if k.memory_bytes is not None]
        return {
            "workspace": self.descriptor.workspace,
            "pid": os.getpid(),
            "clients": self.face.clients if self.face is not None else 0,
            "kernel": {"state": kernel.state.value, "generation": kernel.generation, "pid": kernel.place.pid},
            "executions": len(main.records),
            "running": running.number if running is not None else None,
            "idle_s": round(self.clock.idle_s() or 0.0, 1),
            "kernels": [
                {
                    "name": k.name,
                    "state": k.info.state.value,
                    "pid": k.info.place.pid,
                    "memory_bytes": k.memory_bytes,
                }
                for k in kernels
            ],
            "memory_bytes": {
                "daemon": _own_memory({k.info.place.pid for k in kernels}),
                "kernels": sum(known) if known else None,
            },
        }

    async def serve_public(
        self, hello: Hello, answer: Callable[[Mapping[str, Any]], Awaitable[None]], closed: Awaitable[None]
    ) -> None:
        """`warmkernel serve`: the tools on a public Streamable HTTP endpoint until its connection closes."""
        from warmkernel.faces.http_server import bind, serve_http  # uvicorn: only for `serve`

        try:
            endpoint = _public_endpoint(hello.serve)
            sock = bind(endpoint.host, endpoint.port)
        except WarmkernelError as exc:
            await answer({"ok": False, "error": {"code": exc.code, "message": exc.message}})
            return
        async with serve_http(self.kernels, sock, endpoint, hello.options) as bound:
            self.advertise(public_url=bound.url, public_token=bound.token)
            try:
                await answer({"ok": True, "version": __version__, "url": bound.url})
                await closed
            finally:
                self.advertise(public_url=None, public_token=None)

    async def view(self, hello: Hello) -> Mapping[str, Any]:
        """`warmkernel view`: the console page's URL with a new one-time token; the page is served
        from the first request on, on the endpoint it names, until the daemon ends."""
        from warmkernel.faces.console import open_console, serve_console  # uvicorn: only once asked for
        from warmkernel.faces.http_server import bind

        assert self.tg is not None, "the daemon serves before any hello arrives"
        try:
            endpoint = _view_endpoint(hello.view)
            if self.console is None:
                sock = bind(endpoint.host, endpoint.port)
                self.console = open_console(replace(endpoint, port=sock.getsockname()[1]))
                self.tg.start_soon(serve_console, self.console, self.kernels.by_name, sock)
                self.advertise(console_url=self.console.endpoint.url)
            else:
                _check_same_console(self.console.endpoint, endpoint)
        except WarmkernelError as exc:
            return {"ok": False, "error": {"code": exc.code, "message": exc.message}}
        return {"ok": True, "version": __version__, "url": self.console.url()}


def _view_endpoint(spec: Mapping[str, Any]) -> Endpoint:
    """Where a `view` hello asks the console to listen; refused beyond loopback without allowed Host names."""
    from warmkernel.faces.http_server import Endpoint, check_bind

    try:
        allowed = tuple(str(name) for name in spec.get("allowed_hosts", ()))
        endpoint = Endpoint(str(spec.get("host", "127.0.0.1")), int(spec.get("port", 0)), "/", "", allowed)
    except (TypeError, ValueError) as exc:
        raise WarmkernelError("invalid_arguments", f"the view hello is malformed: {exc}") from exc
    check_bind(endpoint.host, endpoint.port, endpoint.allowed_hosts)
    return endpoint


def _check_same_console(running: Endpoint, asked: Endpoint) -> None:
    """A console already listens: another address cannot be asked for while the daemon lives."""
    if (
        asked.host != running.host
        or asked.port not in (0, running.port)
        or (asked.allowed_hosts and asked.allowed_hosts != running.allowed_hosts)
    ):
        raise WarmkernelError(
            "invalid_arguments",
            f"this daemon's console page already listens at {running.url}; run `warmkernel view` "
            "without --host, --port and --allowed-host, or `warmkernel stop` the daemon to move it",
        )


def _public_endpoint(spec: Mapping[str, Any]) -> Endpoint:
    """The endpoint a `serve` hello names; refused beyond loopback without allowed Host names, and
    with a token that would let anyone in."""
    from warmkernel.faces.http_server import Endpoint, check_bind, check_token

    try:
        allowed = tuple(str(name) for name in spec.get("allowed_hosts", ()))
        endpoint = Endpoint(
            str(spec["host"]), int(spec["port"]), str(spec["path"]), str(spec["token"]), allowed
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise WarmkernelError("invalid_arguments", f"the serve hello lacks {exc}") from exc
    check_bind(endpoint.host, endpoint.port, endpoint.allowed_hosts)
    check_token(endpoint.token, "the serve hello")
    return endpoint


@asynccontextmanager
async def _ide_server(
    options: DaemonOptions, workspace: Workspace, settings: Settings
) -> AsyncIterator[JupyterHost | None]:
    """The Jupyter Server the kernel runs on, when asked for (`start --serve`); it outlives the session."""
    if not options.jupyter:
        yield None
        return
    from warmkernel.daemon.jupyter_host import Kernelspec, owned_jupyter_server

    environment = await anyio.to_thread.run_sync(
        lambda: prepare_environment(settings.python, workspace.path, add_ipykernel=settings.add_ipykernel)
    )
    kernelspec = Kernelspec.of_notebook(options.jupyter_notebook)
    async with owned_jupyter_server(
        workspace.path, environment.command, kernelspec, options.jupyter_port
    ) as jupyter:
        yield jupyter


def _on_server(settings: Settings, jupyter: JupyterHost | None, notebook: str | None) -> Settings:
    if jupyter is None:
        return settings
    return replace(
        settings,
        jupyter_url=jupyter.url,
        jupyter_token=jupyter.token,
        jupyter_notebook=notebook,
        kernel_name=jupyter.kernel_name,
    )


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


def _own_memory(kernel_pids: Container[int | None]) -> int:
    """Resident memory of the daemon and its helpers (a chart browser, spare kernels): every
    process it started but its named kernels and what they started, which count as theirs."""
    daemon = psutil.Process()
    total = 0
    for process in [daemon, *daemon.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # ended meanwhile
            if not any(each.pid in kernel_pids for each in [process, *process.parents()]):
                total += process.memory_info().rss
    return total
