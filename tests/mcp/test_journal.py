"""Executions outlive the process that ran them: a new session on the same journal reads,
searches and lists them, numbers after them, and says once that its kernel is new."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

import warmkernel
from tests.gates import Gate
from tests.mcp.calls import body, call, run
from tests.mcp.conftest import memory_server
from tests.mcp.test_rich_output import ONE_PIXEL
from warmkernel.session.journal import Journal

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

FLOOD = "for i in range(3000): print(f'line {i}')"
RAISE = "print('about to fail')\nraise ValueError('boom')"
NOTICE = (
    "note: warmkernel restarted; executions 1-2 are kept and readable, "
    "but the kernel is new and its namespace is empty"
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


async def test_a_new_session_continues_the_journaled_executions(workspace: Path, state: Path) -> None:
    reads = [
        {"execution": 1, "line_range": "1500:1502"},
        {"execution": 1, "line_range": "-2:"},
        {"execution": 2, "stream": "traceback"},
        {"execution": 2, "stream": "stdout"},
    ]
    searches = [
        {"execution": 1, "query": "line 2999"},
        {"execution": 1, "query": r"line 1\d{3}$", "max_matches": 3, "context_before": 1},
        {"execution": 2, "query": "ValueError", "stream": "traceback"},
    ]
    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            assert (await run(client, FLOOD))[0] == 1
            assert (await run(client, RAISE))[0] == 2
            read_before = [await call(client, "read_python_output", **args) for args in reads]
            search_before = [await call(client, "search_python_output", **args) for args in searches]

    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            number, text = await run(client, "print(1 + 1)")
            assert number == 3
            assert text.splitlines()[0] == NOTICE
            assert text.splitlines()[1].startswith("In [3] · ")
            assert body(text) == ["2"]
            assert [await call(client, "read_python_output", **args) for args in reads] == read_before
            assert [await call(client, "search_python_output", **args) for args in searches] == search_before
            listing = await call(client, "list_python_executions")
            assert [line.split()[:2] for line in listing.splitlines()] == [
                ["3", "completed"],
                ["2", "error"],
                ["1", "completed"],
            ]
            status = await call(client, "python_execution_status", execution=2)
            assert "error: ValueError: boom" in status
            second = await run(client, "print('again')")
            assert NOTICE not in second[1]


async def test_the_namespace_of_the_earlier_kernel_is_gone(workspace: Path, state: Path) -> None:
    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            await run(client, "kept = 1")
    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            number, text = await run(client, "kept")
            assert number == 2
            assert "NameError" in text
            status = await call(client, "python_status")
            assert "generation 2" in status


async def test_the_first_call_says_the_kernel_is_new_whichever_tool_it_is(
    workspace: Path, state: Path
) -> None:
    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            await run(client, "kept = 1")
    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            listing = await call(client, "list_python_kernels")
            assert listing.startswith("note: warmkernel restarted; execution 1 is kept and readable")
            assert "restarted" not in await call(client, "python_status"), "said once"


async def test_a_reloaded_execution_says_its_images_were_not_kept(workspace: Path, state: Path) -> None:
    shown = (
        f"import base64\nfrom IPython.display import Image\ndisplay(Image(base64.b64decode('{ONE_PIXEL}')))"
    )
    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            await run(client, shown)
    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            await call(client, "python_status")  # takes the one-time notice
            images = await call(client, "read_python_output", execution=1, stream="images")
            assert images == (
                "the image of execution 1 was not kept when warmkernel restarted; "
                "the result stream keeps its caption"
            )
            result = await call(client, "read_python_output", execution=1, stream="result")
            assert result.splitlines()[-1] == "[image 1: image/png 1x1, 70 bytes]"


KILLED_DAEMON = """
import sys
from pathlib import Path

import anyio

from warmkernel.execution.submission import parse_cell
from warmkernel.session.journal import Journal
from warmkernel.session.kernels import Kernels
from warmkernel.settings.model import Settings
from warmkernel.workspace import Workspace


async def main(workspace: Path, state: Path, cell: str) -> None:
    with Journal.open(workspace, state) as journal:
        async with Kernels.open(Settings(), Workspace(workspace, "launch_cwd"), journal) as kernels:
            await kernels.main.submit(parse_cell(cell), client="test")
            print("submitted", flush=True)
            await anyio.sleep_forever()


anyio.run(main, Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
"""


async def test_a_cell_running_when_its_process_is_killed_reads_back_as_died(
    workspace: Path, state: Path, gate: Gate
) -> None:
    source = str(Path(warmkernel.__file__).parent.parent)
    env = os.environ | {"PYTHONPATH": source}
    async with await anyio.open_process(
        [sys.executable, "-c", KILLED_DAEMON, str(workspace), str(state), gate.wait], env=env
    ) as daemon:
        assert daemon.stdout is not None
        with anyio.fail_after(60):
            said = b""
            async for chunk in daemon.stdout:
                said += chunk
                if b"submitted\n" in said:
                    break
        daemon.kill()
        await daemon.wait()

    with Journal.open(workspace, state) as journal:
        async with memory_server(workspace, journal=journal) as client:
            status = (await call(client, "python_execution_status", execution=1)).splitlines()
            assert status[0].startswith("note: warmkernel restarted; execution 1 is kept and readable")
            assert status[1] == "execution 1: died"
            assert (
                f"reason: the daemon (pid {daemon.pid}) ended while it ran; its output was not kept" in status
            )
            number, text = await run(client, "print('after')")
            assert (number, text.splitlines()[1:]) == (2, ["after"])
