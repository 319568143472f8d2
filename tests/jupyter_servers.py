"""Real Jupyter servers as test fixtures: Jupyter Server, Kernel Gateway and Enterprise Gateway.

Each runs as a subprocess on a free loopback port with a fresh token, sees no user configuration
and is stopped with its kernels. Kernel Gateway installs beside warmkernel (the dev extra).
Enterprise Gateway pins an older jupyter_server, jupyter_client and pyzmq, so it gets a
virtual environment of its own, created once per machine from PyPI under the user's cache
directory (about half a minute, the first time only) and shared by every later run.

`Relay` stands between warmkernel and a server: it can cut the open connections, and delay
every kernel create by some seconds (a gateway pulling an image, made fast enough for a test).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import trustme

from warmkernel.daemon.jupyter_host import owned_jupyter_server, stop_server

ENTERPRISE_GATEWAY = "jupyter-enterprise-gateway==3.3.0"
_EG_PACKAGES = (ENTERPRISE_GATEWAY, "ipykernel>=6.29,<7")
_START_TIMEOUT_S = 60.0


@dataclass
class JupyterServer:
    """A running server: where it answers, its token, its root, and the settings warmkernel needs."""

    kind: str
    url: str
    token: str
    root: Path
    settings: dict[str, Any] = field(default_factory=dict)
    """What a warmkernel session needs beside the URL and token (EG: a user it authorizes)."""
    log_file: Path | None = None

    def api(self) -> httpx2.Client:
        headers = {"Authorization": f"token {self.token}"}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30, trust_env=False)

    def kernel_ids(self) -> list[str]:
        with self.api() as api:
            return [kernel["id"] for kernel in api.get("api/kernels").raise_for_status().json()]

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file else ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _isolated_environment(home: Path) -> dict[str, str]:
    """No Jupyter or IPython configuration of the user reaches the server or its kernels."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("JUPYTER_", "KERNEL_", "EG_", "KG_", "IPYTHON", "PYTHON"))
    }
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[name] = str(home / name.lower())
    return env


@dataclass(frozen=True)
class Tls:
    """A test certificate authority's files: a server certificate for 127.0.0.1, and a client's."""

    ca: Path
    server_cert: Path
    server_key: Path
    client: Path
    """The client's certificate and key in one PEM file."""

    @classmethod
    def create(cls, directory: Path) -> Tls:
        authority = trustme.CA()
        server = authority.issue_cert("127.0.0.1")
        client = authority.issue_cert("warmkernel-client@example.org")
        tls = cls(
            directory / "ca.pem", directory / "server.pem", directory / "server.key", directory / "client.pem"
        )
        authority.cert_pem.write_to_path(str(tls.ca))
        server.cert_chain_pems[0].write_to_path(str(tls.server_cert))
        server.private_key_pem.write_to_path(str(tls.server_key))
        client.private_key_and_cert_chain_pem.write_to_path(str(tls.client))
        return tls

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client))
        return context


@asynccontextmanager
async def _server_process(
    kind: str,
    argv: list[str],
    env: Mapping[str, str],
    root: Path,
    token: str,
    port: int,
    tls: Tls | None = None,
) -> AsyncIterator[JupyterServer]:
    log_file = root.parent / f"{root.name}-{kind}.log"
    with open(log_file, "ab") as log:  # noqa: ASYNC230 (a new file of this test)
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=dict(env),
            cwd=root,
            start_new_session=True,
        )
    scheme = "https" if tls else "http"
    server = JupyterServer(kind, f"{scheme}://127.0.0.1:{port}/", token, root, log_file=log_file)
    try:
        await _until_ready(process, server, tls.client_context() if tls else True)
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            await stop_server(process)


async def _until_ready(
    process: anyio.abc.Process, server: JupyterServer, verify: ssl.SSLContext | bool
) -> None:
    headers = {"Authorization": f"token {server.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=5.0, trust_env=False, verify=verify) as http:
        with anyio.move_on_after(_START_TIMEOUT_S):
            while process.returncode is None:
                with contextlib.suppress(httpx2.TransportError):
                    if (await http.get(f"{server.url}api/kernelspecs")).status_code == 200:
                        return
                await anyio.sleep(0.2)
    raise RuntimeError(f"{server.kind} did not start at {server.url}; its log:\n{server.log()[-3000:]}")


@asynccontextmanager
async def jupyter_server(root: Path) -> AsyncIterator[JupyterServer]:
    """warmkernel's own Jupyter Server, as `start --serve` runs it."""
    async with owned_jupyter_server(root) as host:
        yield JupyterServer("jupyter_server", host.url, host.token, root)


def _cull_flags(cull: Mapping[str, object]) -> list[str]:
    return [f"--MappingKernelManager.{name}={value}" for name, value in cull.items()]


@asynccontextmanager
async def kernel_gateway(
    root: Path, *, cull: Mapping[str, object] | None = None, tls: Tls | None = None
) -> AsyncIterator[JupyterServer]:
    """Jupyter Kernel Gateway (its websocket personality, as JupyterLab and Jupyter Server's gateway
    client use it); `cull` sets the kernel manager's culling (`cull_idle_timeout=2`, ...). With
    `tls` it serves https and wants a client certificate its authority issued."""
    token, port = secrets.token_hex(16), free_port()
    env = _isolated_environment(root.parent / f"{root.name}-kg-home") | {"KG_AUTH_TOKEN": token}
    argv = [
        sys.executable,
        "-m",
        "kernel_gateway",
        "--KernelGatewayApp.ip=127.0.0.1",
        f"--KernelGatewayApp.port={port}",
        "--KernelGatewayApp.port_retries=0",
        "--JupyterWebsocketPersonality.list_kernels=True",
        *_cull_flags(cull or {}),
    ]
    if tls is not None:
        argv += [
            f"--KernelGatewayApp.certfile={tls.server_cert}",
            f"--KernelGatewayApp.keyfile={tls.server_key}",
            f"--KernelGatewayApp.client_ca={tls.ca}",
        ]
    async with _server_process("kernel_gateway", argv, env, root, token, port, tls) as server:
        yield server


@asynccontextmanager
async def enterprise_gateway(root: Path, *, authorized_user: str = "agent") -> AsyncIterator[JupyterServer]:
    """Jupyter Enterprise Gateway with its default local process proxy, in its own environment.

    Only `authorized_user` may start kernels (as `KERNEL_USERNAME`), so the username rule holds
    for whoever runs the tests, root or not.
    """
    python = await anyio.to_thread.run_sync(enterprise_gateway_python)
    token, port = secrets.token_hex(16), free_port()
    env = _isolated_environment(root.parent / f"{root.name}-eg-home") | {
        "EG_AUTH_TOKEN": token,
        "EG_AUTHORIZED_USERS": authorized_user,
        "EG_LIST_KERNELS": "True",
    }
    argv = [
        str(python),
        "-m",
        "enterprise_gateway",
        "--EnterpriseGatewayApp.ip=127.0.0.1",
        f"--EnterpriseGatewayApp.port={port}",
        "--EnterpriseGatewayApp.port_retries=0",
    ]
    async with _server_process("enterprise_gateway", argv, env, root, token, port) as server:
        server.settings = {"kernel_username": authorized_user}
        yield server


def _cache_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "warmkernel-tests"


def enterprise_gateway_python() -> Path:
    """The interpreter of Enterprise Gateway's own environment, created once under the cache.

    A lock makes concurrent test workers create it once; a marker written last tells a finished
    environment from one whose creation was interrupted (which is made again).
    """
    version = f"py{sys.version_info.major}{sys.version_info.minor}"
    home = _cache_root() / f"{ENTERPRISE_GATEWAY.replace('==', '-')}-{version}"
    finished = home / "warmkernel-tests-complete"
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f"{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not finished.exists():
            shutil.rmtree(home, ignore_errors=True)
            base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
            subprocess.run([str(base), "-m", "venv", str(home)], check=True, capture_output=True)
            installed = subprocess.run(
                [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", *_EG_PACKAGES],
                capture_output=True,
                text=True,
            )
            if installed.returncode != 0:
                raise RuntimeError(f"installing {ENTERPRISE_GATEWAY} failed:\n{installed.stderr[-3000:]}")
            finished.write_text(" ".join(_EG_PACKAGES) + "\n")
    return home / "bin" / "python"


@dataclass
class Relay:
    """Forwards loopback TCP connections to a server; `cut()` drops the open ones, and with
    `create_delay_s` every kernel create (`POST .../api/kernels`) is held that long first."""

    target_port: int
    create_delay_s: float = 0.0
    channels_delay_s: float = 0.0
    """Each kernel websocket's upgrade request is held this long."""
    port: int = 0
    heads: list[str] = field(default_factory=list)
    """The request line and headers of every request that passed, in order."""
    _streams: list[anyio.abc.SocketStream] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def relay(self, incoming: anyio.abc.SocketStream) -> None:
        async with incoming, await anyio.connect_tcp("127.0.0.1", self.target_port) as outgoing:
            self._streams += [incoming, outgoing]
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pipe, incoming, outgoing, tg.cancel_scope, True)
                await self._pipe(outgoing, incoming, tg.cancel_scope, False)

    async def _pipe(
        self,
        source: anyio.abc.SocketStream,
        sink: anyio.abc.SocketStream,
        scope: anyio.CancelScope,
        requests: bool,
    ) -> None:
        try:
            async for chunk in source:
                if requests and chunk.split(b" ", 1)[0] in (b"GET", b"POST", b"DELETE", b"PATCH"):
                    head = chunk.partition(b"\r\n\r\n")[0].decode(errors="replace")
                    self.heads.append(head)
                    request_line = head.partition("\r\n")[0]
                    if request_line.startswith("POST ") and "/api/kernels " in request_line:
                        await anyio.sleep(self.create_delay_s)
                    elif "/channels?" in request_line:
                        await anyio.sleep(self.channels_delay_s)
                await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        scope.cancel()

    async def cut(self) -> None:
        streams, self._streams = self._streams, []
        for stream in streams:
            await stream.aclose()


async def serve_on_loopback(
    handler: Callable[[anyio.abc.SocketStream], Awaitable[None]],
    *,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `handler` on a free loopback port, which `await task_group.start(...)` returns."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    task_status.started(listener.extra(anyio.abc.SocketAttribute.local_port))
    async with listener:
        await listener.serve(handler)


@asynccontextmanager
async def relay_to(
    server: JupyterServer, create_delay_s: float = 0.0, channels_delay_s: float = 0.0
) -> AsyncIterator[Relay]:
    relay = Relay(int(server.url.rsplit(":", 1)[1].strip("/")), create_delay_s, channels_delay_s)
    async with anyio.create_task_group() as tg:
        relay.port = await tg.start(serve_on_loopback, relay.relay)
        yield relay
        tg.cancel_scope.cancel()
