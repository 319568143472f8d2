"""MCP clients against real kernels: a shared in-memory and a shared stdio server, and fresh ones.

The shared servers keep one kernel for the whole run; tests on them must not depend on
absolute execution numbers or leave a cell running. Tests that need numbering from 1, a
dead kernel or special settings open a fresh server with `fresh_client`.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TypeVar

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import daemon_env, private_root, stop_daemons
from warmkernel.faces.http_server import Endpoint, bind, new_token, serve_http
from warmkernel.faces.mcp_server import build_server
from warmkernel.session.journal import Journal
from warmkernel.session.kernels import Kernels
from warmkernel.settings.model import Settings
from warmkernel.workspace import Workspace

FreshClient = Callable[..., AbstractAsyncContextManager[Client]]
T = TypeVar("T")

OPEN_AND_CLOSE_S = 60
"""How long a server or client may take to open (a kernel or a daemon starts) and to close."""


@asynccontextmanager
async def bounded(
    opened: AbstractAsyncContextManager[T], seconds: float = OPEN_AND_CLOSE_S
) -> AsyncIterator[T]:
    """`opened`, entered and left within `seconds` each (a TimeoutError, not a hang), and no
    deadline while the tests use it."""
    with anyio.fail_after(seconds) as scope:
        async with opened as value:
            scope.deadline = math.inf
            try:
                yield value
            finally:
                scope.deadline = anyio.current_time() + seconds


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Client]:
    """The MCP SDK's client for a Streamable HTTP endpoint that wants this bearer token."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=None)
        ) as http,
        bounded(Client(streamable_http_client(url, http_client=http))) as client,
    ):
        yield client


@asynccontextmanager
async def memory_server(
    workspace: Path, *, journal: Journal | None = None, **settings: object
) -> AsyncIterator[Client]:
    config = Settings(**settings)  # type: ignore[arg-type]
    async with (
        bounded(Kernels.open(config, Workspace(workspace, "launch_cwd"), journal)) as kernels,
        bounded(Client(build_server(kernels))) as client,
    ):
        yield client


def stdio_parameters(workspace: Path, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """`warmkernel mcp` as a host launches it, in this test's environment (and its daemon
    directories) plus `env`."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "warmkernel", "mcp", *args],
        cwd=workspace,
        env={**os.environ, **(env or {})},
    )


Host = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture
def host(private_daemons: Path) -> Iterator[Host]:
    """Opens `warmkernel mcp` as an MCP host does (`host(workspace, *args, env=...)`); the daemons
    its relays started are stopped when the test ends."""
    yield lambda workspace, *args, env=None: bounded(Client(stdio_parameters(workspace, *args, env=env)))
    stop_daemons(private_daemons)


@pytest.fixture(scope="session")
async def memory_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    async with memory_server(tmp_path_factory.mktemp("memory-ws")) as client:
        yield client


@pytest.fixture(scope="session")
async def stdio_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """A host's `warmkernel mcp`: a relay to a daemon of its own directories, stopped at the end."""
    root = private_root()
    workspace = tmp_path_factory.mktemp("stdio-ws")
    try:
        async with bounded(Client(stdio_parameters(workspace, env=daemon_env(root)))) as client:
            yield client
    finally:
        stop_daemons(root)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
async def http_endpoint(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Endpoint]:
    """A shared server on a loopback port, behind a bearer token."""
    workspace = Workspace(tmp_path_factory.mktemp("http-ws"), "launch_cwd")
    endpoint = Endpoint("127.0.0.1", 0, "/mcp", new_token())
    async with (
        bounded(Kernels.open(Settings(), workspace)) as kernels,
        bounded(serve_http(kernels, bind("127.0.0.1", 0), endpoint)) as bound,
    ):
        yield bound


@pytest.fixture(scope="session")
async def http_client(http_endpoint: Endpoint) -> AsyncIterator[Client]:
    async with connect(http_endpoint.url, http_endpoint.token) as client:
        yield client


@pytest.fixture(params=["memory", "stdio", "http"])
def client(request: pytest.FixtureRequest) -> Client:
    """A shared client; the test body runs once per transport."""
    return request.getfixturevalue(f"{request.param}_client")


@pytest.fixture
def fresh_client(tmp_path: Path) -> FreshClient:
    """Open a server of its own (own kernel, numbering from 1) with optional Settings overrides."""

    def open_client(**settings: object) -> AbstractAsyncContextManager[Client]:
        return memory_server(tmp_path, journal=None, **settings)

    return open_client
