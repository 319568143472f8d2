"""The host keeps its connection when the daemon ends under its relay: the relay answers what the
daemon took with it, and the host's next request goes to the workspace's next daemon, with no new
`initialize` from the host.

Hosts are `warmkernel mcp` launched by the SDK's stdio client, or by a test that speaks JSON lines
itself where it must see each message (cancellation, the relay's own end).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.cli.conftest import Cli
from tests.cli.hosts import gone, live_daemon, mcp_host
from tests.gates import Gate
from tests.mcp.calls import call, run, text_of

pytestmark = [pytest.mark.timeout(120)]


def _kill_daemon(cli: Cli) -> int:
    """SIGKILL the workspace's daemon; its pid, once it and its kernel are gone."""
    daemon = live_daemon(cli)
    os.kill(daemon["pid"], signal.SIGKILL)
    assert gone(daemon["pid"]) and gone(daemon["kernel"]["pid"])
    return daemon["pid"]


def test_a_daemon_killed_between_two_calls_leaves_the_host_connected_to_the_next(
    cli: Cli, gate: Gate
) -> None:
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)
        gate.open()

    async def conversation() -> tuple[str, str, str]:
        async with mcp_host(cli) as host:
            await run(host, "x = 1")
            killed = await anyio.to_thread.run_sync(_kill_daemon, cli)
            _, after = await run(host, "x")  # no reconnect, no new initialize: the same session
            assert live_daemon(cli)["pid"] != killed
            waited = await host.call_tool(
                "run_python",
                {"freeform": f"# warmkernel: --wait 60\n{gate.wait}\n'waited'"},
                progress_callback=on_progress,
            )
            return after, text_of(waited), await call(host, "python_status")

    after, waited, status = anyio.run(conversation)
    assert "warmkernel restarted; executions 1-1 are kept" in after or "execution 1 is kept" in after
    assert "the kernel is new and its namespace is empty" in after
    assert "In [2]" in after and "NameError" in after
    assert reported, "progress reached the host from the new daemon"
    assert waited.splitlines()[-1] == "Out[3]: 'waited'"
    assert "warmkernel restarted" not in status, "the loss is said once"


def test_a_call_in_flight_when_the_daemon_dies_is_a_tool_error_and_the_next_call_works(
    cli: Cli, gate: Gate
) -> None:
    async def conversation() -> tuple[types.CallToolResult, str]:
        outcome: list[types.CallToolResult] = []
        answered = anyio.Event()
        after = ""
        async with mcp_host(cli, "--result-mode", "structured") as host, anyio.create_task_group() as tg:

            async def in_flight() -> None:
                cell = {"freeform": f"# warmkernel: --wait 60\nvalue = 40\n{gate.wait}"}
                outcome.append(await host.call_tool("run_python", cell))
                answered.set()

            tg.start_soon(in_flight)
            for _ in range(600):  # until the cell runs (a new daemon's kernel takes a second)
                status = await host.call_tool("python_execution_status", {})
                if text_of(status).startswith("execution 1: running"):
                    break
                await anyio.sleep(0.1)
            await anyio.to_thread.run_sync(_kill_daemon, cli)
            with anyio.fail_after(30):
                await answered.wait()
            _, after = await run(host, "'value' in globals()")
        return outcome[0], after

    lost, after = anyio.run(conversation)
    assert lost.is_error
    text = text_of(lost)
    assert text.startswith("daemon_restarted: the daemon of this workspace ended while run_python ran")
    assert "namespace is lost" in text
    assert lost.structured_content == {
        "error": {"code": "daemon_restarted", "message": text.partition(": ")[2]}
    }
    assert "In [2]" in after, "the number of the cell the daemon took with it is not handed out again"
    assert after.splitlines()[-1] == "Out[2]: False"
    assert cli("read", "1").returncode == 0, "the lost cell's record is kept"


@contextmanager
def _lines_host(cli: Cli) -> Iterator[_LinesHost]:
    """`warmkernel mcp` driven by JSON lines, initialized; stdin closed at the end."""
    with subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "mcp"],
        cwd=cli.workspace,
        env=cli.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as relay:
        host = _LinesHost(relay)
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        host.send({"id": 0, "method": "initialize", "params": params})
        host.answer(0)
        host.send({"method": "notifications/initialized"})
        yield host
        if relay.stdin is not None and not relay.stdin.closed:
            relay.stdin.close()


class _LinesHost:
    def __init__(self, relay: subprocess.Popen[bytes]) -> None:
        self.relay = relay

    def send(self, message: dict[str, Any]) -> None:
        assert self.relay.stdin is not None
        self.relay.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.relay.stdin.flush()

    def answer(self, number: int) -> dict[str, Any]:
        assert self.relay.stdout is not None
        while (message := json.loads(self.relay.stdout.readline())).get("id") != number:
            assert message.get("id") is None, f"an answer to a request that was cancelled: {message}"
        return message

    def call(self, number: int, tool: str, **arguments: Any) -> str:
        self.send({"id": number, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        return self.answer(number)["result"]["content"][0]["text"]


def test_a_stopped_daemon_stays_stopped_until_the_host_asks_and_cancellation_works_after(
    cli: Cli, gate: Gate
) -> None:
    with _lines_host(cli) as host:
        assert host.call(1, "run_python", freeform="1").endswith("Out[1]: 1")
        assert cli("stop").returncode == 0
        time.sleep(0.5)  # time enough for a relay that would start one at once
        assert json.loads(cli("sessions", "--json").stdout) == []
        host.send(
            {
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "run_python",
                    "arguments": {"freeform": f"# warmkernel: --wait 60\n{gate.wait}\nprint('ran on')"},
                },
            }
        )
        for number in range(3, 200):  # until the cell runs on the new daemon (the call waits on)
            if host.call(number, "python_execution_status").startswith("execution 2: running"):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the cell never started running")
        host.send({"method": "notifications/cancelled", "params": {"requestId": 2, "reason": "moved on"}})
        host.call(200, "python_status")  # read after the cancel: the cell may end now
        gate.open()
        assert host.call(201, "wait_python", timeout_seconds=30).endswith("ran on")
        host.call(202, "python_status")  # an answer to the cancelled call would have come by now


def test_a_host_that_leaves_while_no_daemon_runs_ends_its_relay_and_starts_none(cli: Cli) -> None:
    with _lines_host(cli) as host:
        assert host.call(1, "run_python", freeform="1").endswith("Out[1]: 1")
        _kill_daemon(cli)
        assert host.relay.stdin is not None
        host.relay.stdin.close()
        assert host.relay.wait(30) == 0
    assert json.loads(cli("sessions", "--json").stdout) == []


def test_a_next_daemon_that_cannot_start_is_the_answer_and_the_call_after_the_fix_works(cli: Cli) -> None:
    with _lines_host(cli) as host:
        assert host.call(1, "run_python", freeform="1").endswith("Out[1]: 1")
        _kill_daemon(cli)
        (cli.workspace / "warmkernel.toml").write_text("idle_stop = -1\n")
        host.send({"id": 2, "method": "tools/call", "params": {"name": "python_status", "arguments": {}}})
        refused = host.answer(2)["result"]
        assert refused["isError"]
        assert "warmkernel.toml:1: idle_stop = -1" in refused["content"][0]["text"]
        (cli.workspace / "warmkernel.toml").unlink()
        assert host.call(3, "run_python", freeform="2").splitlines()[-1] == "Out[2]: 2"
