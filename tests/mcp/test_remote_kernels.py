"""Kernels on real Jupyter servers (`--jupyter-url`): Jupyter Server, Kernel Gateway, Enterprise Gateway.

The core cases run against each of the three, each started once for the module on a free loopback
port with a token (`tests/jupyter_servers.py`). Every test reaches its server through a small TCP
relay, so a test can cut warmkernel's connections (the websocket drops) while the server and its
kernel live on. The shared Kernel Gateway culls kernels idle for 2 s that nobody is connected
to, so every test on it also shows that the websocket warmkernel holds keeps its kernel alive.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import nbformat
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client

from tests.gates import Gate
from tests.jupyter_servers import (
    JupyterServer,
    Relay,
    Tls,
    enterprise_gateway,
    jupyter_server,
    kernel_gateway,
    relay_to,
    serve_on_loopback,
)
from tests.mcp.calls import call, call_error, run, text_of
from tests.mcp.conftest import FreshClient
from warmkernel.daemon.jupyter_host import owned_jupyter_server
from warmkernel.errors import WarmkernelError
from warmkernel.session.kernels import Kernels
from warmkernel.settings.model import Settings
from warmkernel.workspace import Workspace

# Enterprise Gateway's own environment is built from PyPI on a machine's first run.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

SERVERS = ("jupyter_server", "kernel_gateway", "enterprise_gateway")
CULL = {"cull_idle_timeout": 2, "cull_interval": 1}
DELETED = "it was deleted on the Jupyter server (shut down there, or culled by it once idle)"


class Servers:
    """The module's servers, each started on first use and stopped with the module."""

    def __init__(self, stack: AsyncExitStack, tmp: pytest.TempPathFactory) -> None:
        self._stack = stack
        self._tmp = tmp
        self._running: dict[str, JupyterServer] = {}

    async def get(self, kind: str) -> JupyterServer:
        if kind not in self._running:
            root = self._tmp.mktemp(kind)
            started: AbstractAsyncContextManager[JupyterServer] = {
                "jupyter_server": lambda: jupyter_server(root),
                "kernel_gateway": lambda: kernel_gateway(root, cull=CULL),
                "enterprise_gateway": lambda: enterprise_gateway(root),
            }[kind]()
            self._running[kind] = await self._stack.enter_async_context(started)
        return self._running[kind]


@pytest.fixture(scope="module")
async def servers(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Servers]:
    async with AsyncExitStack() as stack:
        yield Servers(stack, tmp_path_factory)


@pytest.fixture(params=SERVERS)
async def server(request: pytest.FixtureRequest, servers: Servers) -> JupyterServer:
    return await servers.get(request.param)


@pytest.fixture
async def relay(server: JupyterServer) -> AsyncIterator[Relay]:
    async with relay_to(server) as relay:
        yield relay


def remote(
    fresh_client: FreshClient, relay: Relay, server: JupyterServer, **settings: object
) -> AbstractAsyncContextManager[Client]:
    """A fresh warmkernel server whose kernel lives on `server`, reached through `relay`."""
    given = {"jupyter_url": relay.url, "jupyter_token": server.token} | server.settings | settings
    return fresh_client(**given)


@pytest.fixture
def remote_client(fresh_client: FreshClient, relay: Relay, server: JupyterServer) -> FreshClient:
    def open_client(**settings: object) -> AbstractAsyncContextManager[Client]:
        return remote(fresh_client, relay, server, **settings)

    return open_client


async def kernel_id(client: Client) -> str:
    status = await call(client, "python_status")
    match = re.search(r"kernel ([0-9a-f-]{36}) on ", status)
    assert match, status
    return match.group(1)


async def wait_for_status(client: Client, text: str, timeout_s: float = 30) -> str:
    """Every python_status reply until one says `text` (a notice is said only once)."""
    replies = [""]
    with anyio.fail_after(timeout_s):
        while text not in replies[-1]:
            await anyio.sleep(0.2)
            replies.append(await call(client, "python_status"))
    return "\n".join(replies)


async def wait_for_generation(client: Client, generation: int) -> str:
    return await wait_for_status(client, f"ready, generation {generation}")


# -- the core cases, on every server -------------------------------------------------------------


async def test_state_numbering_and_inspection_live_on_the_server(
    remote_client: FreshClient, server: JupyterServer
) -> None:
    async with remote_client() as client:
        assert (await run(client, "import os\nx = 41"))[0] == 1
        number, text = await run(client, "x + 1")
        assert number == 2 and "Out[2]: 42" in text
        status = await call(client, "python_status")
        assert "interpreter: kernelspec 'python3' of the Jupyter server" in status
        assert f"kernel working directory: {server.root}" in status
        assert await kernel_id(client) in server.kernel_ids()
        listing = await call(client, "list_python_variables")  # the kernel-side helper is there too
        assert any(line.split()[:2] == ["x", "int"] for line in listing.splitlines())
        assert '"type": "int"' in await call(client, "inspect_python_variable", name="x")


async def test_interrupt_goes_through_the_server(remote_client: FreshClient, gate: Gate) -> None:
    async with remote_client() as client:
        number, _ = await run(client, f"# warmkernel: --wait 0.5\n{gate.wait}")
        await call(client, "interrupt_python")
        text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert " interrupted" in text.splitlines()[0] and "KeyboardInterrupt" in text
        assert "Out[" in (await run(client, "'still here'"))[1]


async def test_variables_are_inspected_beside_a_running_cell_through_the_server(
    remote_client: FreshClient, server: JupyterServer, gate: Gate
) -> None:
    """Where the kernel has subshells; Enterprise Gateway's kernels (its own environment's older
    ipykernel) have none, and the refusal says why."""
    async with remote_client() as client:
        number, _ = await run(client, f"# warmkernel: --wait 0.5\nprogress = {{'step': 0}}\n{gate.wait}")
        try:
            with anyio.fail_after(30):
                result = await client.call_tool("inspect_python_variable", {"name": "progress"})
            text = text_of(result)
            if server.kind == "enterprise_gateway":
                assert result.is_error and text.startswith("busy:") and "it has no subshells" in text
            else:
                assert (
                    text.splitlines()[0] == f"note: In [{number}] is running; these values may be mid-update"
                )
        finally:
            await call(client, "interrupt_python")
            await call(client, "wait_python", execution=number, timeout_seconds=30)


async def test_reset_replaces_the_kernel_on_the_server(
    remote_client: FreshClient, server: JupyterServer
) -> None:
    async with remote_client() as client:
        await run(client, "a = 1")
        first = await kernel_id(client)
        reset = await call(client, "reset_python")
        assert "generation 2" in reset
        status = await call(client, "python_status")
        cwd = status.split("kernel working directory: ")[1].split(" (the Jupyter server's choice")[0]
        assert f"started in {cwd} with an empty namespace" in reset, "where the server runs it"
        second = await kernel_id(client)
        assert second != first
        kernels = server.kernel_ids()
        assert second in kernels and first not in kernels
        number, text = await run(client, "a")
        assert number == 2 and "NameError" in text
    assert second not in server.kernel_ids()  # deleted with the session


async def test_a_kernel_deleted_on_the_server_died_and_a_new_one_is_created(
    remote_client: FreshClient, server: JupyterServer
) -> None:
    async with remote_client() as client:
        await run(client, "b = 1")
        with server.api() as api:
            api.delete(f"api/kernels/{await kernel_id(client)}").raise_for_status()
        status = await wait_for_generation(client, 2)
        assert f"the kernel (generation 1) died ({DELETED})" in status
        assert "NameError" in (await run(client, "b"))[1]


async def test_a_kernel_deleted_while_it_runs_a_cell_is_not_said_to_be_idle(
    remote_client: FreshClient, server: JupyterServer, gate: Gate
) -> None:
    async with remote_client() as client:
        _, text = await run(client, f"# warmkernel: --wait 1\n{gate.wait}")
        assert "running" in text
        with server.api() as api:
            api.delete(f"api/kernels/{await kernel_id(client)}").raise_for_status()
        status = await wait_for_generation(client, 2)
        assert (
            "died (it was deleted on the Jupyter server (shut down there, or culled by it once idle))"
            in status
        )
        assert " s idle" not in status, "how long it was idle is not known"


async def test_a_kernel_the_server_restarted_after_a_crash_counts_as_died(
    remote_client: FreshClient, server: JupyterServer
) -> None:
    async with remote_client() as client:
        await run(client, "import os")
        first = await kernel_id(client)
        number, text = await run(client, "os._exit(3)")
        text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert "died (it died and the Jupyter server restarted it)" in text
        await wait_for_generation(client, 2)
        assert first not in server.kernel_ids()  # the restarted stranger was not left behind


async def test_a_dropped_websocket_reconnects_and_keeps_state_and_output(
    remote_client: FreshClient, relay: Relay
) -> None:
    async with remote_client() as client:
        await run(client, "c = 7")
        # The lines' spacing is the subject: some are written while the connection is gone (the
        # server buffers them), and the cell ends (its reply comes) well after the reconnection.
        counting = "import time\nfor i in range(20):\n    print(i, flush=True); time.sleep(0.1)"
        number, _ = await run(client, "# warmkernel: --wait 0.3\n" + counting)
        await relay.cut()
        text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert f"execution {number}: completed" in await call(client, "python_execution_status")
        # What the server wrote into the dropping connection is lost; what it buffered is replayed,
        # in order and once.
        printed = [int(line) for line in text.splitlines()[1:] if line.strip()]
        assert printed == sorted(set(printed)) and printed[-1] == 19 and len(printed) >= 10
        assert "Out[" in (await run(client, "c"))[1]
        assert "generation 1" in await call(client, "python_status")


async def test_a_wrong_token_is_refused_with_the_fix(remote_client: FreshClient) -> None:
    async with remote_client(jupyter_token="wrong") as client:
        code, message = await call_error(client, "run_python", freeform="1")
        assert code == "jupyter_server_refused"
        assert "(401)" in message or "(403" in message
        assert "--jupyter-token" in message


async def test_an_unknown_kernelspec_is_refused_with_the_ones_there_are(remote_client: FreshClient) -> None:
    async with remote_client(kernel_name="no-such-spec") as client:
        code, message = await call_error(client, "run_python", freeform="1")
        assert code == "jupyter_server_failed"
        assert "has no kernelspec 'no-such-spec'; it has " in message and "python3" in message
        assert "--kernel-name" in message


# -- Enterprise Gateway: who the kernel runs as ---------------------------------------------------


async def test_enterprise_gateway_refuses_an_unauthorized_user_and_says_its_rule(
    fresh_client: FreshClient, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    eg = await servers.get("enterprise_gateway")
    monkeypatch.delenv("KERNEL_USERNAME", raising=False)
    async with relay_to(eg) as relay, fresh_client(jupyter_url=relay.url, jupyter_token=eg.token) as client:
        code, message = await call_error(client, "run_python", freeform="1")
    assert code == "jupyter_server_refused"
    assert "(403: User '" in message and "is not authorized" in message and "KERNEL_USERNAME" in message


async def test_enterprise_gateway_gets_the_username_and_the_kernel_environment(
    fresh_client: FreshClient, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    eg = await servers.get("enterprise_gateway")
    monkeypatch.setenv("KERNEL_TEAM", "blue")  # every KERNEL_* variable of ours goes along
    async with (
        relay_to(eg) as relay,
        fresh_client(
            jupyter_url=relay.url,
            jupyter_token=eg.token,
            kernel_username="agent",
            kernel_env=("KERNEL_PROJECT=demo=1",),
        ) as client,
    ):
        _, text = await run(
            client,
            "import os; [os.environ.get(n) for n in ('KERNEL_USERNAME', 'KERNEL_TEAM', 'KERNEL_PROJECT')]",
        )
    assert "['agent', 'blue', 'demo=1']" in text


# -- slow starts ----------------------------------------------------------------------------------


async def test_a_slow_create_shows_its_step_and_a_cell_waits_for_it(
    fresh_client: FreshClient, servers: Servers
) -> None:
    kg = await servers.get("kernel_gateway")
    async with (
        relay_to(kg, create_delay_s=3) as relay,
        fresh_client(jupyter_url=relay.url, jupyter_token=kg.token, default_wait_s=0.5) as client,
    ):
        text = await call(client, "run_python", freeform="1")
        assert "is still starting (pending on the gateway, " in text and "ran nothing" in text
        assert "kernel: starting (pending on the gateway, " in await call(client, "python_status")
        number, text = await run(client, "# warmkernel: --wait 30\n40 + 2")  # waits within its wait
        assert number == 1 and "Out[1]: 42" in text


@pytest.mark.parametrize(
    ("delays", "expected"),
    [
        pytest.param(
            {"create_delay_s": 6}, "did not create a 'python3' kernel within 3 s (step: create)", id="create"
        ),
        pytest.param(
            {"channels_delay_s": 6}, "websocket within 3 s of its launch (step: websocket)", id="websocket"
        ),
    ],
)
async def test_a_start_past_the_launch_timeout_names_the_step_and_the_setting(
    fresh_client: FreshClient, servers: Servers, delays: dict[str, float], expected: str
) -> None:
    kg = await servers.get("kernel_gateway")
    async with (
        relay_to(kg, **delays) as relay,
        fresh_client(jupyter_url=relay.url, jupyter_token=kg.token, kernel_launch_timeout_s=3) as client,
    ):
        code, message = await call_error(client, "run_python", freeform="# warmkernel: --wait 30\n1")
        assert code == "kernel_start_failed"
        assert expected in message and "raise --kernel-launch-timeout" in message
        assert "kernel: failed" in await call(client, "python_status")


# -- culling ----------------------------------------------------------------------------------------


async def test_a_held_kernel_is_spared_by_a_culler_of_unconnected_kernels(
    fresh_client: FreshClient, servers: Servers
) -> None:
    kg = await servers.get("kernel_gateway")  # culls idle kernels nobody is connected to
    async with relay_to(kg) as relay, remote(fresh_client, relay, kg) as client:
        await run(client, "held = 1")
        with kg.api() as api:
            unheld = api.post("api/kernels", json={"name": "python3"}).raise_for_status().json()["id"]
        with anyio.fail_after(30):  # the culler has run past the idle timeout once this is gone
            while True:
                if unheld not in kg.kernel_ids():
                    break
                await anyio.sleep(0.5)
        _, text = await run(client, "held")
        assert "Out[2]: 1" in text
        assert "ready, generation 1" in await call(client, "python_status")


async def test_a_culled_kernel_died_and_is_replaced(fresh_client: FreshClient, tmp_path: Path) -> None:
    root = tmp_path / "culling"
    root.mkdir()
    async with (
        kernel_gateway(root, cull={**CULL, "cull_connected": True}) as kg,
        fresh_client(jupyter_url=kg.url, jupyter_token=kg.token) as client,
    ):
        await run(client, "gone = 1")
        status = await wait_for_generation(client, 2)
        assert (
            "died (it was deleted on the Jupyter server (shut down there, or culled by it once idle))"
            in status
        )
        assert "NameError" in (await run(client, "gone"))[1]


# -- notebook mode --------------------------------------------------------------------------------


async def stale_cells(client: Client, notebook: str) -> dict[str, tuple[str, ...]]:
    result = await client.call_tool("notebook_status", {"path": notebook})
    assert not result.is_error and result.structured_content is not None, result
    cells = result.structured_content["cells"]
    return {cell["id"]: tuple(cell["reasons"]) for cell in cells if cell["state"] != "fresh"}


async def test_files_a_remote_kernel_read_are_stamped_by_it_and_make_their_readers_stale(
    fresh_client: FreshClient, servers: Servers, tmp_path: Path
) -> None:
    js = await servers.get("jupyter_server")
    data = tmp_path / "data.txt"
    data.write_text("one")
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(f"text = open({str(data)!r}).read()", id="reads"),
            nbformat.v4.new_code_cell("n = 1", id="other"),
        ]
    )
    (tmp_path / "nb.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")
    async with relay_to(js) as relay, remote(fresh_client, relay, js, result_mode="structured") as client:
        ran = await client.call_tool("run_notebook_cells", {"path": "nb.ipynb", "timeout_seconds": 60})
        assert not ran.is_error, ran
        assert await stale_cells(client, "nb.ipynb") == {}
        data.write_text("two")
        assert await stale_cells(client, "nb.ipynb") == {"reads": ("file_changed",)}
        data.write_text("one")  # the content it read, with a new mtime: fresh again
        assert await stale_cells(client, "nb.ipynb") == {}


# -- spares, headers, tokens --------------------------------------------------------------------------


async def test_spare_kernels_on_a_gateway_make_a_reset_a_swap_and_are_deleted_at_exit(
    fresh_client: FreshClient, servers: Servers
) -> None:
    kg = await servers.get("kernel_gateway")
    async with relay_to(kg) as relay:
        async with remote(fresh_client, relay, kg, spare_kernels=1) as client:
            await run(client, "z = 1")
            await wait_for_status(client, "spare kernels: 1 of 1 ready")
            held = set(kg.kernel_ids())
            assert "kernel generation 2 started" in await call(client, "reset_python")
            assert await kernel_id(client) in held  # the spare, created before the reset
            assert "NameError" in (await run(client, "z"))[1]
            await wait_for_status(client, "spare kernels: 1 of 1 ready")
            ours = set(kg.kernel_ids()) - held | {await kernel_id(client)}
        assert not ours & set(kg.kernel_ids())  # the kernel and its spare were deleted


async def test_extra_headers_go_with_every_request_and_the_websocket(
    fresh_client: FreshClient, servers: Servers
) -> None:
    kg = await servers.get("kernel_gateway")
    async with relay_to(kg) as relay:
        async with remote(fresh_client, relay, kg, jupyter_headers=("X-Proxy-Auth=let me in",)) as client:
            await run(client, "1")
        assert any(head.startswith("POST /api/kernels ") for head in relay.heads)
        assert any("/channels?" in head.split("\r\n")[0] for head in relay.heads)
        assert all("x-proxy-auth: let me in" in head.lower() for head in relay.heads)


async def test_a_rotated_token_is_read_again_from_its_file_after_a_401(
    fresh_client: FreshClient, servers: Servers, tmp_path: Path
) -> None:
    kg = await servers.get("kernel_gateway")  # answers a wrong token with 401
    token_file = tmp_path / "token"
    token_file.write_text("expired\n")
    async with (
        relay_to(kg) as relay,
        fresh_client(jupyter_url=relay.url, jupyter_token_file=str(token_file)) as client,
    ):
        code, message = await call_error(client, "run_python", freeform="1")
        assert code == "jupyter_server_refused"
        assert f"the token in {token_file} was read again and is still refused" in message
        token_file.write_text(kg.token + "\n")  # rotated
        assert "kernel generation 2 started" in await call(client, "reset_python")
        assert "Out[1]: 2" in (await run(client, "1 + 1"))[1]


async def test_an_https_server_is_trusted_by_the_ca_bundle_and_given_the_client_certificate(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    tls = Tls.create(tmp_path)
    root = tmp_path / "tls-root"
    root.mkdir()
    async with kernel_gateway(root, tls=tls) as kg:
        trusted = {"jupyter_ca_bundle": str(tls.ca), "jupyter_client_cert": str(tls.client)}
        async with fresh_client(jupyter_url=kg.url, jupyter_token=kg.token, **trusted) as client:
            assert "Out[1]: 2" in (await run(client, "1 + 1"))[1]  # REST and websocket, both over TLS
        for untrusted in ({}, {"jupyter_ca_bundle": str(tls.ca)}):  # no trust; no client certificate
            async with fresh_client(jupyter_url=kg.url, jupyter_token=kg.token, **untrusted) as client:
                code, message = await call_error(client, "run_python", freeform="1")
            assert code == "jupyter_server_unreachable" and kg.url in message


async def test_a_server_that_does_not_answer_is_unreachable(fresh_client: FreshClient) -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        async with fresh_client(jupyter_url=url, jupyter_token="t") as client:
            code, message = await call_error(client, "run_python", freeform="1")
    assert code == "jupyter_server_unreachable"
    assert url in message


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        pytest.param({"jupyter_url": "localhost:8888"}, "http:// or https:// URL", id="url"),
        pytest.param({"kernel_env": ("NOEQUALS",)}, "--kernel-env takes NAME=VALUE", id="env"),
        pytest.param({"jupyter_headers": ("=x",)}, "--jupyter-header takes NAME=VALUE", id="header"),
        pytest.param({"jupyter_ca_bundle": "/no/such.pem"}, "cannot be used", id="ca-bundle"),
    ],
)
async def test_settings_that_cannot_work_are_refused_at_start(
    tmp_path: Path, settings: dict[str, object], expected: str
) -> None:
    config = Settings(**({"jupyter_url": "http://127.0.0.1:1/"} | settings))  # type: ignore[arg-type]
    with pytest.raises(WarmkernelError) as caught:
        async with Kernels.open(config, Workspace(tmp_path, "launch_cwd")):
            pass
    assert caught.value.code == "invalid_arguments"
    assert expected in caught.value.message


_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "WS_PROXY", "WSS_PROXY")


def set_proxy(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Make `url` every proxy of the environment, in both spellings, with no exceptions."""
    for name in _PROXY_VARIABLES:
        monkeypatch.setenv(name, url)
        monkeypatch.setenv(name.lower(), url)
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")


@dataclass
class ProxyTrap:
    """A listener set as every proxy of the environment: it keeps each request line it gets and
    answers 502."""

    port: int = 0
    requests: list[str] = field(default_factory=list)

    async def answer(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                self.requests.append((await stream.receive()).split(b"\r\n", 1)[0].decode())
                await stream.send(_BAD_GATEWAY)


@pytest.fixture
async def proxy_trap(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ProxyTrap]:
    trap = ProxyTrap()
    async with anyio.create_task_group() as tg:
        trap.port = await tg.start(serve_on_loopback, trap.answer)
        set_proxy(monkeypatch, f"http://127.0.0.1:{trap.port}")
        yield trap
        tg.cancel_scope.cancel()


@dataclass
class ForwardingProxy:
    """An HTTP forward proxy to host names no DNS knows: `hosts` maps each `host:port` to a
    loopback port. It tunnels a CONNECT (unless not `tunnels`: then it refuses it), and forwards a
    plain-http request (absolute-form rewritten to origin-form, one request per connection); it
    keeps each request line it gets."""

    hosts: dict[str, int]
    tunnels: bool = True
    port: int = 0
    requests: list[str] = field(default_factory=list)

    async def forward(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            incoming = BufferedByteReceiveStream(client)
            try:
                head = (await incoming.receive_until(b"\r\n\r\n", 65536)).decode("latin-1")
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound):
                return
            request_line, _, headers = head.partition("\r\n")
            self.requests.append(request_line)
            method, target, version = request_line.split(" ")
            authority = target if method == "CONNECT" else urlsplit(target).netloc
            if authority not in self.hosts or (method == "CONNECT" and not self.tunnels):
                await client.send(_BAD_GATEWAY)
                return
            async with await anyio.connect_tcp("127.0.0.1", self.hosts[authority]) as server:
                if method == "CONNECT":
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    parts = urlsplit(target)
                    origin_form = parts.path + (f"?{parts.query}" if parts.query else "")
                    kept = [
                        line
                        for line in headers.split("\r\n")
                        if line.partition(":")[0].lower()
                        not in ("connection", "proxy-connection", "keep-alive")
                    ]
                    forwarded = [f"{method} {origin_form} {version}", *kept, "Connection: close", "", ""]
                    await server.send("\r\n".join(forwarded).encode("latin-1"))
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_pipe, incoming, server, tg.cancel_scope)
                    await _pipe(server, client, tg.cancel_scope)


async def _pipe(
    source: anyio.abc.ByteReceiveStream, sink: anyio.abc.ByteSendStream, scope: anyio.CancelScope
) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        while True:
            await sink.send(await source.receive())
    scope.cancel()


async def test_a_loopback_jupyter_server_is_reached_without_the_environments_proxy(
    proxy_trap: ProxyTrap, remote_client: FreshClient
) -> None:
    async with remote_client() as client:
        assert "Out[1]: 2" in (await run(client, "1 + 1"))[1]  # REST and websocket
        await call(client, "reset_python")
    assert proxy_trap.requests == []


def name_no_dns_knows(server: JupyterServer) -> str:
    """`host:port` for `server` that only a `ForwardingProxy` can reach."""
    return f"jupyter.example.invalid:{urlsplit(server.url).port}"


@asynccontextmanager
async def behind_a_proxy(
    server: JupyterServer, monkeypatch: pytest.MonkeyPatch, *, tunnels: bool = True
) -> AsyncIterator[ForwardingProxy]:
    """The environment's proxy: it alone reaches `server` by `name_no_dns_knows(server)`."""
    port = urlsplit(server.url).port
    assert port is not None
    proxy = ForwardingProxy({name_no_dns_knows(server): port}, tunnels)
    async with anyio.create_task_group() as tg:
        proxy.port = await tg.start(serve_on_loopback, proxy.forward)
        set_proxy(monkeypatch, f"http://127.0.0.1:{proxy.port}")
        yield proxy
        tg.cancel_scope.cancel()


async def test_a_remote_jupyter_server_is_reached_through_the_environments_proxy(
    fresh_client: FreshClient, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's host name resolves nowhere: only the proxy, which maps it to the real Kernel
    Gateway, can reach it, for the REST calls and for the kernel's websocket alike."""
    kg = await servers.get("kernel_gateway")
    remote_name = name_no_dns_knows(kg)
    async with (
        behind_a_proxy(kg, monkeypatch) as proxy,
        fresh_client(jupyter_url=f"http://{remote_name}/", jupyter_token=kg.token) as client,
    ):
        assert "Out[1]: 2" in (await run(client, "1 + 1"))[1]
    assert f"POST http://{remote_name}/api/kernels HTTP/1.1" in proxy.requests
    assert f"CONNECT {remote_name} HTTP/1.1" in proxy.requests  # the kernel's websocket


async def test_a_proxy_that_refuses_the_websocket_is_reported(
    fresh_client: FreshClient, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    kg = await servers.get("kernel_gateway")
    remote_name = name_no_dns_knows(kg)
    async with (
        behind_a_proxy(kg, monkeypatch, tunnels=False),
        fresh_client(jupyter_url=f"http://{remote_name}/", jupyter_token=kg.token) as client,
    ):
        code, message = await call_error(client, "run_python", freeform="1")
    assert code == "jupyter_server_unreachable"
    assert f"channels on http://{remote_name}/: proxy rejected connection: HTTP 502" in message


async def test_a_proxy_that_cannot_reach_the_server_is_reported(
    proxy_trap: ProxyTrap, fresh_client: FreshClient
) -> None:
    async with fresh_client(jupyter_url="http://jupyter.example.invalid:8888/", jupyter_token="t") as client:
        code, message = await call_error(client, "run_python", freeform="1")
    assert code == "jupyter_server_failed" and "502" in message
    assert proxy_trap.requests[0].startswith("POST http://jupyter.example.invalid:8888/api/")


async def test_the_owned_servers_token_is_not_in_its_kernels_environment(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    async with (
        owned_jupyter_server(tmp_path) as host,
        fresh_client(jupyter_url=host.url, jupyter_token=host.token) as client,
    ):
        token = host.token
        held = f"sorted(k for k, v in os.environ.items() if {token!r} in v or k.endswith('_TOKEN'))"
        assert "Out[1]: []" in (await run(client, f"import os; {held}"))[1]
        file = "os.path.exists(os.environ.get('JUPYTER_TOKEN_FILE', ''))"  # read at start, then removed
        assert "Out[2]: False" in (await run(client, file))[1]
