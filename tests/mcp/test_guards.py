"""Per-kernel guards against a runaway cell: its output cap and the kernel's memory ceiling."""

from __future__ import annotations

import re

import anyio
import pytest

from tests.conftest import gone, needs_cgroups, unmarked_grandchild_cell
from tests.gates import Gate
from tests.mcp.calls import body, call, run
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_output_past_the_cells_cap_is_dropped_with_one_marker_and_the_cell_runs_on(
    fresh_client: FreshClient,
) -> None:
    flood = "for i in range(20_000):\n    print('x' * 99)\nafter_the_flood = 'ran'\nprint('the end')"
    async with fresh_client(max_cell_output_bytes=100_000) as client:
        with anyio.fail_after(60):
            number, _ = await run(client, f"# warmkernel: --wait 60\n{flood}")
        marker = "[warmkernel: this cell's output passed --max-cell-output-bytes (97.7K)"
        stderr = await call(client, "read_python_output", execution=number, stream="stderr")
        assert stderr.count(marker) == 1
        stdout = await call(client, "read_python_output", execution=number, stream="stdout")
        assert 900 <= stdout.count("x" * 99) <= 1000 and "the end" not in stdout
        stdout_bytes = ("x" * 99 + "\n") * stdout.count("x" * 99)
        status = await call(client, "python_execution_status", execution=number)
        assert status.startswith(f"execution {number}: completed")
        dropped = re.search(
            r"reason: ([0-9,]+) bytes of output dropped past --max-cell-output-bytes \(97.7K\)", status
        )
        assert dropped and int(dropped.group(1).replace(",", "")) == 20_000 * 100 + len("the end\n") - len(
            stdout_bytes
        )
        assert "Out[2]: 'ran'" in (await run(client, "after_the_flood"))[1]


async def test_a_kernel_over_its_memory_ceiling_is_interrupted_then_killed_with_the_reason(
    fresh_client: FreshClient,
) -> None:
    hog = (
        "# warmkernel: --wait 60\n"
        "import time\n"
        "hog = []\n"
        "while True:\n"
        "    try:\n"
        "        hog = hog or [b'x' * (400 << 20)]\n"
        "        time.sleep(0.1)\n"
        "    except KeyboardInterrupt:\n"
        "        print('interrupted, and staying')\n"
    )
    async with fresh_client(max_kernel_memory_bytes=300 << 20) as client:
        with anyio.fail_after(60):
            number, text = await run(client, hog)
        assert "interrupted, and staying" in text
        header = next(line for line in text.splitlines() if line.startswith(f"In [{number}]"))
        assert "died (memory ceiling 300M exceeded (" in header
        status = await call(client, "python_execution_status", execution=number)
        assert (
            status.startswith(f"execution {number}: died")
            and "reason: memory ceiling 300M exceeded (" in status
        )
        assert "was killed: memory ceiling 300M exceeded" in text  # the notice, once
        number, text = await run(client, "'fresh'")
        assert "Out[2]: 'fresh'" in text


async def test_a_cell_interrupted_by_the_memory_ceiling_says_why(
    fresh_client: FreshClient, gate: Gate
) -> None:
    freed_when_interrupted = (
        f"# warmkernel: --wait 60\nhog = b'x' * (400 << 20)\ntry:\n    {gate.wait}\nfinally:\n    del hog\n"
    )
    async with fresh_client(max_kernel_memory_bytes=300 << 20) as client:
        with anyio.fail_after(60):
            number, text = await run(client, freed_when_interrupted)
        header = next(line for line in text.splitlines() if line.startswith(f"In [{number}]"))
        assert "interrupted (memory ceiling 300M exceeded (" in header, header
        status = await call(client, "python_execution_status", execution=number)
        assert "reason: memory ceiling 300M exceeded (" in status
        assert "unless the kernel's memory drops below it within 5 s, the kernel is killed" in status
        assert "Out[2]: 'same kernel'" in (await run(client, "'same kernel'"))[1]


async def test_a_kernel_under_its_memory_ceiling_runs_untouched(fresh_client: FreshClient) -> None:
    async with fresh_client(max_kernel_memory_bytes=4 << 30) as client:
        assert "Out[1]: 3" in (await run(client, "import time; time.sleep(1.5); len(b'abc' * 1)"))[1]


@needs_cgroups
async def test_the_memory_of_a_process_that_left_the_kernels_tree_counts_against_its_ceiling(
    fresh_client: FreshClient,
) -> None:
    hog = "import time; hog = b'x' * (300 << 20); time.sleep(600)"
    async with fresh_client(max_kernel_memory_bytes=200 << 20) as client:
        _, text = await run(client, unmarked_grandchild_cell(hog))
        grandchild = int(body(text)[0].split(":", 1)[1])
        replies = ""
        with anyio.fail_after(60):
            # The ceiling is watched by the server; the test can only ask until it has acted.
            while "was killed: memory ceiling 200M exceeded" not in replies:
                replies += await call(client, "python_status")
                await anyio.sleep(0.2)
        assert gone(grandchild)
