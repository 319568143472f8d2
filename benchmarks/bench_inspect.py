"""Variable inspection benchmark: the summary of a 1,000,000-row, 10-column DataFrame.

Over MCP stdio, as an agent sees it, on one warmkernel server:

1. `inspect_python_variable("df")`: the typed JSON summary (dtypes, nulls, describe, sample
   rows, deep memory usage), median and max of the repetitions, and the reply's size.
2. The visible cell an agent would otherwise run for the same facts (`df.dtypes`,
   `df.isna().sum()`, `df.describe()`, `df.head()`), which also takes an execution number.
3. `list_python_variables()` with that DataFrame in the namespace.
4. `python_status`, the round trip floor of any tool call.

The frame has 6 float64 columns (one with 0.1 % NaN), 2 int64 columns, a string column and a
datetime column. The Markdown table goes to stdout; progress goes to stderr. `--quick` runs
fewer repetitions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from bench_core import progress
from mcp import Client, StdioServerParameters

FRAME = """\
import numpy as np, pandas as pd
rng = np.random.default_rng(0)
rows = 1_000_000
df = pd.DataFrame({f"f{i}": rng.normal(size=rows) for i in range(6)})
df.loc[rng.integers(0, rows, 1000), "f0"] = np.nan
df["i0"] = rng.integers(0, 100, rows)
df["i1"] = np.arange(rows)
df["s"] = rng.choice(["alpha", "beta", "gamma", "delta"], rows)
df["t"] = pd.date_range("2024-01-01", periods=rows, freq="s")
"""
VISIBLE_CELL = "print(df.dtypes); print(df.isna().sum()); print(df.describe()); print(df.head())"


@dataclass(frozen=True)
class Row:
    case: str
    median: str
    worst: str
    reply_chars: str


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


async def call(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must succeed; return its text."""
    result = await client.call_tool(tool, arguments)
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    if result.is_error or (text.startswith("In [") and "running for" in text.splitlines()[0]):
        raise RuntimeError(f"{tool} did not finish: {text[:300]}")
    return text


async def measure(client: Client, repetitions: int, case: str, tool: str, **arguments: Any) -> Row:
    samples: list[float] = []
    text = ""
    for _ in range(repetitions):
        start = time.perf_counter()
        text = await call(client, tool, **arguments)
        samples.append(time.perf_counter() - start)
    if '"summary_status": "timeout"' in text:
        raise RuntimeError(f"{case}: the summary ran out of time")
    return Row(
        f"{case}, {repetitions} runs", ms(statistics.median(samples)), ms(max(samples)), f"{len(text):,}"
    )


async def benchmark(repetitions: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="wk-bench-") as directory:
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-m", "warmkernel", "mcp", "--ephemeral", "--wait", "120"],
            cwd=Path(directory),
        )
        progress(
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; other work skews the numbers"
        )
        async with Client(parameters) as client:
            progress("building the 1,000,000 x 10 DataFrame")
            await call(client, "run_python", freeform=FRAME)
            await call(client, "inspect_python_variable", name="df")  # warm-up: first-use imports
            progress("measuring")
            return [
                await measure(
                    client, repetitions, 'inspect_python_variable("df")', "inspect_python_variable", name="df"
                ),
                await measure(
                    client,
                    repetitions,
                    "visible cell with the same facts",
                    "run_python",
                    freeform=VISIBLE_CELL,
                ),
                await measure(client, repetitions, "list_python_variables()", "list_python_variables"),
                await measure(client, repetitions, "python_status (floor)", "python_status"),
            ]


def table(rows: list[Row]) -> str:
    lines = ["| case | median | max | reply chars |", "|---|---:|---:|---:|"]
    lines += [f"| {r.case} | {r.median} | {r.worst} | {r.reply_chars} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="warmkernel variable inspection benchmark")
    parser.add_argument("--quick", action="store_true", help="3 repetitions instead of 10")
    rows = anyio.run(benchmark, 3 if parser.parse_args().quick else 10, backend="asyncio")
    print(table(rows))


if __name__ == "__main__":
    main()
