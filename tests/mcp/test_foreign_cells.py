"""Cells another client of the kernel runs (an IDE, `jupyter console --existing`) become records."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from jupyter_client.asynchronous.client import AsyncKernelClient
from mcp import Client

from tests.gates import Gate
from tests.mcp.calls import call, call_error, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = pytest.mark.anyio


async def facts(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


@asynccontextmanager
async def ide(client: Client) -> AsyncIterator[AsyncKernelClient]:
    """A second client of the kernel, through its connection file, as an IDE attaches."""
    status = await facts(client, "python_status")
    other = AsyncKernelClient()
    other.load_connection_file(status["connection_file"])
    other.start_channels()
    try:
        await other.wait_for_ready(timeout=30)
        yield other
    finally:
        other.stop_channels()


async def ide_run(other: AsyncKernelClient, code: str) -> dict[str, Any]:
    """Run a cell as the IDE does; its execute_reply's content."""
    msg_id = other.execute(code)
    with anyio.fail_after(30):
        while True:
            reply = await other.get_shell_msg()
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"]


async def record_of(client: Client, number: int, *, finished: bool) -> dict[str, Any]:
    """The state of execution `number` once it exists (and, if `finished`, has ended): the IDE's
    cell reaches warmkernel on IOPub, a moment after the IDE sent or saw it."""
    with anyio.fail_after(10):
        while True:
            result = await client.call_tool("python_execution_status", {"execution": number})
            state = result.structured_content
            if not result.is_error and state is not None and not (finished and state["state"] == "running"):
                return state
            await anyio.sleep(0.05)


async def test_a_cell_run_by_another_client_is_a_record(fresh_client: FreshClient) -> None:
    async with fresh_client(result_mode="structured") as client:
        await run(client, "x = 1")
        async with ide(client) as other:
            reply = await ide_run(other, "y = 7\nprint('from the IDE')")
            assert reply["status"] == "ok"
            assert reply["execution_count"] == 2  # the IDE's [2] is warmkernel's In [2]
            assert (await record_of(client, 2, finished=True))["state"] == "completed"
            listing = await facts(client, "list_python_executions")
            ide_record = listing["executions"][0]
            assert ide_record["first_line"] == "y = 7" and "(jupyter session " in ide_record["client"]
            read = await facts(client, "read_python_output", execution=2)
            assert read["text"] == "from the IDE"
            history = (await call(client, "list_python_executions")).splitlines()
            assert history[0].endswith(f"y = 7  · by {ide_record['client']}")
            assert history[1].endswith("x = 1")  # this client's own cell names no one
            number, text = await run(client, "y * 6")
            assert number == 3 and text.endswith("42")

            failed = await ide_run(other, "1 / 0")
            assert failed["status"] == "error" and failed["execution_count"] == 4
            error = await record_of(client, 4, finished=True)
            assert (error["state"], error["error"]["name"]) == ("error", "ZeroDivisionError")


async def test_an_agent_cell_is_busy_while_the_ide_runs_one(fresh_client: FreshClient, gate: Gate) -> None:
    async with fresh_client(result_mode="structured") as client:
        await run(client, "pass")
        async with ide(client) as other:
            msg_id = other.execute(gate.wait)
            assert (await record_of(client, 2, finished=False))["state"] == "running"
            code, message = await call_error(client, "run_python", freeform="1")
            assert code == "busy"
            assert "execution 2 (sent by" in message and "jupyter session" in message
            gate.open()
            with anyio.fail_after(30):
                while (await other.get_shell_msg())["parent_header"].get("msg_id") != msg_id:
                    pass
            waited = await call(client, "wait_python", execution=2, timeout_seconds=10)
            assert waited.startswith("In [2]") and "running" not in waited.splitlines()[0]
            assert (await run(client, "'after'"))[0] == 3
