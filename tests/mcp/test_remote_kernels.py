"""Kernels on a real Jupyter Server (`--jupyter-url`): the core cases, deletion, restarts, reconnects.

The server (warmkernel's own, as `start --serve` runs it) serves the whole module on a free
loopback port with a token. Every test reaches it
through a small TCP relay, so a test can cut warmkernel's connections (the websocket drops) while
the server and its kernel live on.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import pytest
from mcp import Client

from tests.mcp.calls import call, call_error, run
from tests.mcp.conftest import FreshClient
from warmkernel.config import Settings
from warmkernel.errors import WarmkernelError
from warmkernel.jupyter_host import owned_jupyter_server
from warmkernel.named_kernels import Kernels
from warmkernel.workspace import Workspace

pytestmark = pytest.mark.anyio


@dataclass
class JupyterServer:
    url: str
    token: str
    root: Path

    def api(self) -> httpx2.Client:
        headers = {"Authorization": f"token {self.token}"}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30, trust_env=False)

    def kernel_ids(self) -> list[str]:
        with self.api() as api:
            return [kernel["id"] for kernel in api.get("api/kernels").raise_for_status().json()]


@pytest.fixture(scope="module")
async def jupyter_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[JupyterServer]:
    root = tmp_path_factory.mktemp("jupyter-root")
    async with owned_jupyter_server(root) as host:
        yield JupyterServer(host.url, host.token, root)


@dataclass
class Relay:
    """Forwards loopback TCP connections to the Jupyter server; `cut()` drops the open ones."""

    target_port: int
    port: int = 0
    _streams: list[anyio.abc.SocketStream] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started()
        async with listener:
            await listener.serve(self._relay)

    async def _relay(self, incoming: anyio.abc.SocketStream) -> None:
        async with incoming, await anyio.connect_tcp("127.0.0.1", self.target_port) as outgoing:
            self._streams += [incoming, outgoing]
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pipe, incoming, outgoing, tg.cancel_scope)
                await self._pipe(outgoing, incoming, tg.cancel_scope)

    @staticmethod
    async def _pipe(
        source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream, scope: anyio.CancelScope
    ) -> None:
        try:
            async for chunk in source:
                await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        scope.cancel()

    async def cut(self) -> None:
        streams, self._streams = self._streams, []
        for stream in streams:
            await stream.aclose()


@pytest.fixture
async def relay(jupyter_server: JupyterServer) -> AsyncIterator[Relay]:
    port = int(jupyter_server.url.rsplit(":", 1)[1].strip("/"))
    relay = Relay(port)
    async with anyio.create_task_group() as tg:
        await tg.start(relay.serve)
        yield relay
        tg.cancel_scope.cancel()


@pytest.fixture
def remote_client(fresh_client: FreshClient, relay: Relay, jupyter_server: JupyterServer) -> FreshClient:
    """A fresh server whose kernel lives on the Jupyter server."""

    def open_client(**settings: object) -> object:
        return fresh_client(jupyter_url=relay.url, jupyter_token=jupyter_server.token, **settings)

    return open_client  # type: ignore[return-value]


async def kernel_id(client: Client) -> str:
    status = await call(client, "python_status")
    match = re.search(r"kernel ([0-9a-f-]{36}) on ", status)
    assert match, status
    return match.group(1)


async def wait_for_generation(client: Client, generation: int) -> str:
    """Every python_status reply until that generation is ready (a notice is said only once)."""
    replies = []
    with anyio.fail_after(30):
        while f"ready, generation {generation}" not in (replies or [""])[-1]:
            await anyio.sleep(0.2)
            replies.append(await call(client, "python_status"))
    return "\n".join(replies)


async def test_state_and_numbering_persist_on_the_server(
    remote_client: FreshClient, jupyter_server: JupyterServer
) -> None:
    async with remote_client() as client:
        assert (await run(client, "import os\nx = 41"))[0] == 1
        number, text = await run(client, "x + 1")
        assert number == 2 and "Out[2]: 42" in text
        status = await call(client, "python_status")
        assert "interpreter: kernelspec 'python3' of the Jupyter server" in status
        assert f"kernel working directory: {jupyter_server.root}" in status
        assert await kernel_id(client) in jupyter_server.kernel_ids()
        listing = await call(client, "list_python_variables")  # the kernel-side helper is there too
        assert any(line.split()[:2] == ["x", "int"] for line in listing.splitlines())


async def test_interrupt_goes_through_the_server(remote_client: FreshClient) -> None:
    async with remote_client() as client:
        number, _ = await run(
            client, "# warmkernel: --wait 0.5\nimport time\nfor _ in range(600): time.sleep(0.1)"
        )
        await call(client, "interrupt_python")
        text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert " interrupted" in text.splitlines()[0] and "KeyboardInterrupt" in text
        assert "Out[" in (await run(client, "'still here'"))[1]


async def test_variables_are_inspected_beside_a_running_cell_through_the_server(
    remote_client: FreshClient,
) -> None:
    async with remote_client() as client:
        number, _ = await run(
            client,
            "# warmkernel: --wait 0.5\nimport time\nprogress = {'step': 0}\n"
            "for step in range(600):\n    progress['step'] = step\n    time.sleep(0.1)",
        )
        try:
            with anyio.fail_after(30):
                text = await call(client, "inspect_python_variable", name="progress")
            assert text.splitlines()[0] == f"note: In [{number}] is running; these values may be mid-update"
        finally:
            await call(client, "interrupt_python")
            await call(client, "wait_python", execution=number, timeout_seconds=30)


async def test_reset_replaces_the_kernel_on_the_server(
    remote_client: FreshClient, jupyter_server: JupyterServer
) -> None:
    async with remote_client() as client:
        await run(client, "a = 1")
        first = await kernel_id(client)
        reset = await call(client, "reset_python")
        assert "generation 2" in reset
        second = await kernel_id(client)
        assert second != first
        kernels = jupyter_server.kernel_ids()
        assert second in kernels and first not in kernels
        number, text = await run(client, "a")
        assert number == 2 and "NameError" in text
    assert second not in jupyter_server.kernel_ids()  # the server session ended with its kernel


async def test_a_kernel_deleted_on_the_server_died_and_a_new_one_is_created(
    remote_client: FreshClient, jupyter_server: JupyterServer
) -> None:
    async with remote_client() as client:
        await run(client, "b = 1")
        with jupyter_server.api() as api:
            api.delete(f"api/kernels/{await kernel_id(client)}").raise_for_status()
        status = await wait_for_generation(client, 2)
        assert "the kernel (generation 1) died (it was deleted on the Jupyter server" in status
        assert "NameError" in (await run(client, "b"))[1]


async def test_a_kernel_the_server_restarted_after_a_crash_counts_as_died(
    remote_client: FreshClient, jupyter_server: JupyterServer
) -> None:
    async with remote_client() as client:
        await run(client, "import os")
        first = await kernel_id(client)
        number, text = await run(client, "os._exit(3)")
        text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert "died (it died and the Jupyter server restarted it)" in text
        await wait_for_generation(client, 2)
        assert first not in jupyter_server.kernel_ids()  # the restarted stranger was not left behind


async def test_a_dropped_websocket_reconnects_and_keeps_state_and_output(
    remote_client: FreshClient, relay: Relay
) -> None:
    async with remote_client() as client:
        await run(client, "c = 7")
        counting = "import time\nfor i in range(20):\n    print(i, flush=True); time.sleep(0.1)"
        number, _ = await run(client, "# warmkernel: --wait 0.3\n" + counting)
        await relay.cut()
        text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert f"execution {number}: completed" in await call(client, "python_execution_status")
        assert [line for line in text.splitlines()[1:] if line.strip()] == [str(i) for i in range(20)]
        assert "Out[" in (await run(client, "c"))[1]
        assert "generation 1" in await call(client, "python_status")


async def test_a_wrong_token_is_refused_with_the_fix(fresh_client: FreshClient, relay: Relay) -> None:
    async with fresh_client(jupyter_url=relay.url, jupyter_token="wrong") as client:
        code, message = await call_error(client, "run_python", freeform="1")
        assert code == "jupyter_server_refused"
        assert "refused" in message and "--jupyter-token" in message


async def test_a_server_that_does_not_answer_is_unreachable(fresh_client: FreshClient) -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        async with fresh_client(jupyter_url=url, jupyter_token="t") as client:
            code, message = await call_error(client, "run_python", freeform="1")
    assert code == "jupyter_server_unreachable"
    assert url in message


async def test_a_jupyter_url_that_is_not_http_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(WarmkernelError) as caught:
        async with Kernels.open(Settings(jupyter_url="localhost:8888"), Workspace(tmp_path, "launch_cwd")):
            pass
    assert caught.value.code == "invalid_arguments"
    assert "http:// or https:// URL" in caught.value.message


_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


@dataclass
class ProxyTrap:
    """A listener set as every proxy of the environment: it keeps each request line it gets and
    answers 502."""

    port: int = 0
    requests: list[str] = field(default_factory=list)

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started()
        async with listener:
            await listener.serve(self._answer)

    async def _answer(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                self.requests.append((await stream.receive()).split(b"\r\n", 1)[0].decode())
                await stream.send(
                    b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )


@pytest.fixture
async def proxy_trap(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ProxyTrap]:
    trap = ProxyTrap()
    async with anyio.create_task_group() as tg:
        await tg.start(trap.serve)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{trap.port}")
        monkeypatch.setenv("NO_PROXY", "")
        monkeypatch.setenv("no_proxy", "")
        yield trap
        tg.cancel_scope.cancel()


async def test_a_loopback_jupyter_server_is_reached_without_the_environments_proxy(
    proxy_trap: ProxyTrap, remote_client: FreshClient
) -> None:
    async with remote_client() as client:
        assert "Out[1]: 2" in (await run(client, "1 + 1"))[1]
        await call(client, "reset_python")
    assert proxy_trap.requests == []


async def test_a_remote_jupyter_server_is_reached_through_the_environments_proxy(
    proxy_trap: ProxyTrap, fresh_client: FreshClient
) -> None:
    async with fresh_client(jupyter_url="http://jupyter.example.invalid:8888/", jupyter_token="t") as client:
        code, message = await call_error(client, "run_python", freeform="1")
    assert code == "jupyter_server_failed" and "502" in message
    assert proxy_trap.requests[0].startswith("POST http://jupyter.example.invalid:8888/api/")


async def test_the_owned_servers_token_is_not_in_its_kernels_environment(
    remote_client: FreshClient, jupyter_server: JupyterServer
) -> None:
    async with remote_client() as client:
        token = jupyter_server.token
        held = f"sorted(k for k, v in os.environ.items() if {token!r} in v or k.endswith('_TOKEN'))"
        assert "Out[1]: []" in (await run(client, f"import os; {held}"))[1]
        file = "os.path.exists(os.environ.get('JUPYTER_TOKEN_FILE', ''))"  # read at start, then removed
        assert "Out[2]: False" in (await run(client, file))[1]
