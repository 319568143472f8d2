"""Notebook mode benchmark: notebook_status and run_notebook_cells on a 500-cell notebook.

One warmkernel server (`python -m warmkernel mcp`, through the MCP SDK's stdio client), one
notebook of N code cells in a temporary workspace: chains of small assignments, a cell in
every 25 that reads a file, and a pandas DataFrame (100,000 rows, or `--megabytes` of them) that a
cell in every 50 reads.
Measured, each a median:

1. `notebook_status` on the never-run notebook: the first call (binding, reading, analysing
   every cell) and the following ones (the analysis is cached by source).
2. `run_notebook_cells` of every cell, from the call to its reply, per cell, next to a plain
   `run_python` round trip.
3. `notebook_status` after the run (it fetches versions and file reads from the kernel and
   stats every file read), and after an edit of the top cell on disk (one cell re-analysed).
4. The `run_python` round trip of `pass` with the notebook bound and run (every name its cells
   read or defined is then checked for in-place changes after each execution), against a
   second server whose kernel ran the same cells as plain `run_python` cells, unbound.

The Markdown table goes to stdout; progress goes to stderr. `--cells N` changes the size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import nbformat
from mcp import Client, StdioServerParameters
from nbformat.v4 import new_code_cell, new_notebook

REPEATS = 20


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def notebook_cells(count: int, megabytes: int) -> list[tuple[str, str]]:
    rows = max(100_000, megabytes * 1024 * 1024 // 8)  # one int64 column
    cells = [("c0", f"import pandas as pd\nframe = pd.DataFrame({{'v': range({rows})}})\nv0 = 0")]
    for index in range(1, count):
        if index % 50 == 0:
            source = f"v{index} = int(frame.v.iloc[{index}])"
        elif index % 25 == 0:
            source = f"v{index} = len(open('data.txt').read()) + v{index - 1}"
        elif index % 10 == 0:
            source = f"def f{index}(x):\n    return x + v{index - 1}\n\nv{index} = f{index}(1)"
        else:
            source = f"v{index} = v{index - 1} + 1"
        cells.append((f"c{index}", source))
    return cells


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> None:
    notebook = new_notebook(cells=[new_code_cell(source, id=cell_id) for cell_id, source in cells])
    path.write_text(nbformat.writes(notebook), encoding="utf-8")


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return result.structured_content


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


async def median(action: Callable[[], Awaitable[object]], repeats: int = REPEATS) -> float:
    return statistics.median([await timed(action) for _ in range(repeats)])


def server(workspace: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "warmkernel", "mcp", "--ephemeral", "--result-mode", "structured"],
        cwd=workspace,
        env=dict(os.environ),  # as launched from this shell (the SDK's default drops PYTHONPATH)
    )


async def trivial_round_trip(client: Client) -> float:
    async def trivial() -> None:
        await call(client, "run_python", freeform="pass")

    return await median(trivial, 50)


async def unbound_round_trip(workspace: Path, cells: list[tuple[str, str]]) -> float:
    """The `pass` round trip in a kernel that ran the notebook's cells as plain run_python cells."""
    async with Client(server(workspace)) as client:
        for _, source in cells:
            await call(client, "run_python", freeform=source)
        return await trivial_round_trip(client)


async def bench(count: int, megabytes: int) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory(prefix="wk-nb-bench-") as directory:
        return await bench_in(Path(directory), count, megabytes)


async def bench_in(workspace: Path, count: int, megabytes: int) -> list[tuple[str, str]]:
    (workspace / "data.txt").write_text("x" * 1000)
    cells = notebook_cells(count, megabytes)
    write_notebook(workspace / "nb.ipynb", cells)
    rows: list[tuple[str, str]] = []
    progress(f"{count} cells as plain run_python cells, on a server of their own")
    unbound = await unbound_round_trip(workspace, cells)
    async with Client(server(workspace)) as client:
        await call(client, "run_python", freeform="import pandas")

        async def status() -> dict[str, Any]:
            return await call(client, "notebook_status", path="nb.ipynb")

        progress(f"notebook_status on {count} never-run cells")
        rows.append((f"notebook_status, first call ({count} cells, never run)", ms(await timed(status))))
        rows.append((f"notebook_status, never run, median of {REPEATS}", ms(await median(status))))
        before = await trivial_round_trip(client)

        progress(f"run_notebook_cells of {count} cells")
        started = time.perf_counter()
        ran = await call(client, "run_notebook_cells", path="nb.ipynb", cells="all", timeout_seconds=600)
        elapsed = time.perf_counter() - started
        if ran["state"] != "completed" or ran["status"]["plan"]:
            raise RuntimeError(f"the run did not leave every cell fresh: {json.dumps(ran)[:500]}")
        rows.append((f"run_notebook_cells of all {count} cells, call to reply", f"{elapsed:.2f} s"))
        rows.append(("  per cell (run_python `pass` round trip: " + ms(before) + ")", ms(elapsed / count)))

        progress("notebook_status after the run")
        rows.append(
            (f"notebook_status after the run (all fresh), median of {REPEATS}", ms(await median(status)))
        )
        path = workspace / "nb.ipynb"

        async def edit_and_status() -> dict[str, Any]:
            raw = json.loads(path.read_text())
            raw["cells"][0]["source"] += "\n# edited"
            path.write_text(json.dumps(raw))
            return await status()

        found = await edit_and_status()
        if len(found["plan"]) != count:
            raise RuntimeError(f"an edit of the top cell left {len(found['plan'])} cells stale, not {count}")
        rows.append(
            (
                f"notebook_status after an edit of the top cell (all stale), median of {REPEATS}",
                ms(await median(edit_and_status)),
            )
        )
        after = await trivial_round_trip(client)
        rows.append(("run_python `pass` round trip, median of 50: before any cell ran", ms(before)))
        rows.append((f"  after the {count} cells ran as plain run_python cells, unbound", ms(unbound)))
        rows.append(("  after run_notebook_cells ran them, bound (their names are checked)", ms(after)))
        rows.append(("  kernel-side cost per execution, bound minus unbound", ms(after - unbound)))
        rows.append(("  ratio bound / unbound", f"{after / unbound:.2f}x"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="notebook_status and run_notebook_cells on a large notebook")
    parser.add_argument("--cells", type=int, default=500, help="code cells in the notebook")
    parser.add_argument("--megabytes", type=int, default=1, help="size of the DataFrame the first cell makes")
    args = parser.parse_args()
    rows = anyio.run(bench, args.cells, args.megabytes)
    print("| case | warmkernel |\n|---|---:|")
    for case, value in rows:
        print(f"| {case} | {value} |")


if __name__ == "__main__":
    main()
