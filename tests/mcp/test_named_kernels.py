"""Named kernels: several kernels in one workspace, each with its own numbering, records and notebook."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from mcp import Client

from tests.gates import Gate
from tests.mcp.calls import call, call_error, run, text_of
from tests.mcp.conftest import FreshClient
from warmkernel.tools.catalog import KNOWN_KERNEL, TOOLS

pytestmark = pytest.mark.anyio


def held(gate: Gate) -> str:
    """A cell that still runs when its reply comes, until `gate` opens."""
    return f"# warmkernel: --wait 0.2\n{gate.wait}"


async def facts(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


def kernel_row(listing: dict[str, Any], name: str) -> dict[str, Any]:
    return next(row for row in listing["kernels"] if row["name"] == name)


async def test_a_second_kernel_runs_while_the_first_is_busy(fresh_client: FreshClient, gate: Gate) -> None:
    async with fresh_client() as client:
        number, text = await run(client, held(gate), kernel="train")
        assert number == 1
        assert text.startswith("In [1] · train · running for")
        assert 'wait_python(execution=1, kernel="train")' in text
        assert 'interrupt_python(kernel="train")' in text
        # main is free, and numbers its own cells from 1
        number, text = await run(client, "21 * 2")
        assert (number, text.splitlines()[0].split(" · ")[0]) == (1, "In [1]")
        assert "train" not in text and text.endswith("42")
        # within train, busy, naming the way to wait for it in train
        code, message = await call_error(client, "run_python", freeform="1", kernel="train")
        assert code == "busy"
        assert 'wait_python(execution=1, kernel="train")' in message
        assert (await call(client, "interrupt_python", kernel="train")).startswith("interrupt_sent")
        waited = await call(client, "wait_python", execution=1, timeout_seconds=30, kernel="train")
        assert waited.startswith("In [1] · train ·") and "KeyboardInterrupt" in waited
        number, text = await run(client, "'second'", kernel="train")
        assert number == 2 and text.endswith("'second'")
        main_history = await call(client, "list_python_executions")
        assert "21 * 2" in main_history and gate.wait not in main_history


async def test_state_lives_per_kernel(fresh_client: FreshClient) -> None:
    async with fresh_client(result_mode="structured") as client:
        await run(client, "x = 'main'")
        await run(client, "x = 'side'", kernel="side")
        assert (await run(client, "x"))[1].endswith("'main'")
        assert (await run(client, "x", kernel="side"))[1].endswith("'side'")
        variables = await facts(client, "list_python_variables", kernel="side")
        assert [row["name"] for row in variables["variables"]] == ["x"]
        summary = await facts(client, "inspect_python_variable", name="x", kernel="side")
        assert summary["type"] == "str"
        read = await facts(client, "read_python_output", execution=2, kernel="side")
        assert read["text"] == "Out[2]: 'side'"
        status = await facts(client, "python_status", kernel="side")
        assert status["latest_execution"] == 2
        assert [row["name"] for row in status["kernels"]] == ["main", "side"]
        text = await call(client, "python_status", kernel="side")
        assert "kernel side: ready" in text
        assert "kernels: main (ready), side (ready)" in text


HOLD_IN_A_CHILD = """
import subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", "import time; held = b'x' * (150 << 20); print(flush=True); time.sleep(600)"],
    stdout=subprocess.PIPE,
)
child.stdout.readline()
"""


async def test_a_kernels_memory_counts_what_it_started(fresh_client: FreshClient) -> None:
    """The measure `--max-kernel-memory` holds a kernel to: a process it started counts as its."""
    async with fresh_client(result_mode="structured") as client:
        await run(client, HOLD_IN_A_CHILD)
        row = kernel_row(await facts(client, "list_python_kernels"), "main")
        assert row["memory_bytes"] > 150 << 20, row
        status = await facts(client, "python_status")
        assert kernel_row(status, "main")["memory_bytes"] > 150 << 20, status["kernels"]


async def test_list_stop_and_reuse(fresh_client: FreshClient, gate: Gate) -> None:
    async with fresh_client(result_mode="structured") as client:
        await run(client, "import os; pid = os.getpid(); data = list(range(10))", kernel="train")
        listing = await facts(client, "list_python_kernels")
        row = kernel_row(listing, "train")
        assert row["state"] == "ready" and row["executions"] == 1 and row["generation"] == 1
        assert row["pid"] > 0 and row["memory_bytes"] > 10_000_000 and row["idle_s"] >= 0
        assert kernel_row(listing, "main")["executions"] == 0
        text = await call(client, "list_python_kernels")
        assert text.splitlines()[0].split()[:3] == ["kernel", "state", "gen"]
        assert 'stop_python_kernel(name="NAME")' in text

        await run(client, held(gate), kernel="train")
        stopped = await facts(client, "stop_python_kernel", name="train")
        assert stopped == {"kernel": "train", "killed_execution": 2}
        stopped_row = kernel_row(await facts(client, "list_python_kernels"), "train")
        assert (stopped_row["state"], stopped_row["idle_s"]) == ("stopped", None), "stopped, not idle"
        # records stay readable, and reading them starts no kernel
        state = await facts(client, "python_execution_status", execution=2, kernel="train")
        assert state["state"] == "killed" and "a client stopped the kernel" in state["end_reason"], state
        assert kernel_row(await facts(client, "list_python_kernels"), "train")["state"] == "stopped"
        # the next run starts a fresh kernel: numbering goes on, the namespace is new
        reply = await facts(client, "run_python", freeform="'data' in dir()", kernel="train")
        assert (reply["execution"], reply["generation"], reply["output"]) == (3, 2, "Out[3]: False")
        # main may be stopped too, and starts again on its next use
        await run(client, "y = 1")
        assert (await facts(client, "stop_python_kernel", name="main"))["killed_execution"] is None
        reply = await facts(client, "run_python", freeform="'y' in dir()")
        assert (reply["execution"], reply["generation"], reply["output"]) == (2, 2, "Out[2]: False")


async def test_the_kernel_limit(fresh_client: FreshClient) -> None:
    async with fresh_client(max_kernels=2) as client:
        await run(client, "1", kernel="a")
        code, message = await call_error(client, "run_python", freeform="1", kernel="b")
        assert code == "too_many_kernels"
        assert "2 kernels run (main, a)" in message and "--max-kernels 2" in message
        assert 'stop_python_kernel(name="a")' in message
        await call(client, "stop_python_kernel", name="a")
        assert (await run(client, "'b'", kernel="b"))[1].endswith("'b'")
        # a stopped kernel counts again once it would start
        code, _ = await call_error(client, "run_python", freeform="1", kernel="a")
        assert code == "too_many_kernels"
        assert "1" in await call(client, "read_python_output", execution=1, kernel="a")


async def test_an_idle_named_kernel_is_stopped(fresh_client: FreshClient) -> None:
    async with fresh_client(kernel_idle_stop_s=0.5) as client:
        await run(client, "v = 1", kernel="scratch")
        await run(client, "import time; time.sleep(1.5)")  # main is never stopped for idling
        with anyio.fail_after(20):
            while "scratch        stopped" not in await call(client, "list_python_kernels"):  # noqa: ASYNC110
                await anyio.sleep(0.2)
        assert "main           ready" in await call(client, "list_python_kernels")
        number, text = await run(client, "'v' in dir()", kernel="scratch")
        assert number == 2 and text.endswith("False")
        assert "note: kernel scratch was stopped after 0.5 s without a call or a running cell" in text


async def test_a_stopped_kernel_has_no_variables_to_show_and_a_look_starts_none(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client() as client:
        await run(client, "x = 1", kernel="side")
        await call(client, "stop_python_kernel", name="side")
        for tool, arguments in (("list_python_variables", {}), ("inspect_python_variable", {"name": "x"})):
            code, message = await call_error(client, tool, kernel="side", **arguments)
            assert code == "inspection_failed", (tool, message)
            assert "kernel side is stopped (" in message
            assert 'run_python(freeform="...", kernel="side") starts it again' in message
        assert "side           stopped" in await call(client, "list_python_kernels")


async def test_kernel_names_are_checked(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        for bad in ("Train", "", "-x", "a" * 33, "a b", "../etc", 7):
            code, message = await call_error(client, "run_python", freeform="1", kernel=bad)
            assert code == "invalid_kernel", (bad, message)
            assert "a-z, 0-9, _ and -" in message
        code, message = await call_error(client, "stop_python_kernel", name="Main")
        assert code == "invalid_kernel"
        code, message = await call_error(client, "read_python_output", kernel="nothere")
        assert code == "kernel_not_found"
        assert "kernels: main" in message and 'run_python(freeform="...", kernel="nothere")' in message
        required = {"search_python_output": {"query": "x"}, "send_python_input": {"text": "x"}}
        required["executions_to_notebook"] = {"executions": "1", "path": "new.ipynb"}
        required["inspect_python_variable"] = {"name": "x"}
        for tool in TOOLS:  # a tool whose `kernel` says it starts none starts none
            if KNOWN_KERNEL in tool.params:
                arguments = required.get(tool.name, {}) | {"kernel": "nothere"}
                assert (await call_error(client, tool.name, **arguments))[0] == "kernel_not_found", tool.name
        assert "nothere" not in await call(client, "list_python_kernels")
        code, _ = await call_error(client, "stop_python_kernel", name="nothere")
        assert code == "kernel_not_found"


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source, id=cell_id) for cell_id, source in cells]
    nbformat.write(notebook, path)


def not_fresh(status: dict[str, Any]) -> dict[str, list[str]]:
    return {cell["id"]: cell["reasons"] for cell in status["cells"] if cell["state"] != "fresh"}


async def test_each_notebook_gets_its_own_kernel(tmp_path: Path, fresh_client: FreshClient) -> None:
    write_notebook(tmp_path / "sales.ipynb", [("load", "n = 10"), ("double", "m = n * 2")])
    write_notebook(tmp_path / "Costs Q3.ipynb", [("load", "n = 3"), ("double", "m = n * 2")])
    async with fresh_client(result_mode="structured") as client:
        for path in ("sales.ipynb", "Costs Q3.ipynb"):
            ran = await facts(client, "run_notebook_cells", path=path, timeout_seconds=60)
            assert ran["state"] == "completed" and not_fresh(ran["status"]) == {}
        listing = await facts(client, "list_python_kernels")
        notebooks = {row["name"]: row["notebook"] for row in listing["kernels"]}
        assert notebooks == {"main": None, "nb-sales": "sales.ipynb", "nb-costs-q3": "Costs Q3.ipynb"}
        assert (await run(client, "m", kernel="nb-sales"))[1].endswith("20")
        assert (await run(client, "m", kernel="nb-costs-q3"))[1].endswith("6")
        assert "NameError" in (await call(client, "run_python", freeform="m"))  # main is untouched

        # an edit in one notebook makes only its own chain stale
        notebook = nbformat.read(tmp_path / "sales.ipynb", as_version=4)
        notebook.cells[0].source = "n = 11"
        nbformat.write(notebook, tmp_path / "sales.ipynb")
        sales = await facts(client, "notebook_status", path="sales.ipynb")
        assert not_fresh(sales) == {"load": ["source_changed"], "double": ["upstream_stale"]}
        assert not_fresh(await facts(client, "notebook_status", path="Costs Q3.ipynb")) == {}
        text = await call(client, "notebook_status", path="sales.ipynb")
        assert 'run_notebook_cells(path="sales.ipynb", kernel="nb-sales")' in text

        # an explicit kernel binds explicitly; a kernel bound to another notebook refuses
        code, message = await call_error(client, "notebook_status", path="sales.ipynb", kernel="nb-costs-q3")
        assert code == "notebook_already_bound"
        assert 'notebook_status(path="sales.ipynb")' in message
        write_notebook(tmp_path / "scratch.ipynb", [("one", "q = 1")])
        bound = await facts(client, "notebook_status", path="scratch.ipynb", kernel="main")
        assert bound["notebook"] == "scratch.ipynb"
        assert kernel_row(await facts(client, "list_python_kernels"), "main")["notebook"] == "scratch.ipynb"


async def test_a_notebook_has_one_kernel_and_one_that_cannot_be_read_starts_none(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    write_notebook(tmp_path / "sales.ipynb", [("load", "n = 10")])
    (tmp_path / "broken.ipynb").write_text("{not json")
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    async with fresh_client(result_mode="structured") as client:
        assert (await facts(client, "notebook_status", path="sales.ipynb"))["notebook"] == "sales.ipynb"
        code, message = await call_error(client, "notebook_status", path="sales.ipynb", kernel="main")
        assert code == "notebook_already_bound"
        assert "sales.ipynb is bound to kernel nb-sales" in message
        assert 'stop_python_kernel(name="nb-sales")' in message
        for path in ("broken.ipynb", "data.csv", "broken.ipynb"):
            assert (await call_error(client, "notebook_status", path=path))[0] == "invalid_notebook"
        listing = await facts(client, "list_python_kernels")
        assert [row["name"] for row in listing["kernels"]] == ["main", "nb-sales"]
        # once its kernel is stopped, the notebook may move, and its new kernel serves it
        await facts(client, "stop_python_kernel", name="nb-sales")
        assert (await facts(client, "notebook_status", path="sales.ipynb", kernel="main"))["notebook"]
        ran = await facts(client, "run_notebook_cells", path="sales.ipynb", timeout_seconds=60)
        assert ran["state"] == "completed"
        listing = await facts(client, "list_python_kernels")
        assert kernel_row(listing, "main")["notebook"] == "sales.ipynb"
        assert kernel_row(listing, "nb-sales")["state"] == "stopped"
        assert (await run(client, "n"))[1].endswith("10")


async def test_kernels_over_every_transport(client: Client) -> None:
    """The shared servers (in-memory, stdio through a daemon, HTTP) serve named kernels alike."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    number, text = await run(client, "k = 'named'", kernel=name)
    assert number == 1 and text.startswith(f"In [1] · {name} ·")
    assert name in await call(client, "list_python_kernels")
    stopped = await call(client, "stop_python_kernel", name=name)
    assert stopped.startswith(f"stopped: kernel {name}")
    listing = json.dumps(await client.call_tool("list_python_kernels", {}), default=str)
    assert name in listing
