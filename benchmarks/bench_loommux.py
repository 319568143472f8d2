"""warmkernel beside loommux 0.1.11 and raw jupyter_client on the three paths loommux was faster on.

loommux is an MCP stdio server that owns its kernel; it is installed apart, in an environment of
its own (its dependencies are not ours), and named with `--loommux`:

    python3 -m venv /tmp/loommux && /tmp/loommux/bin/pip install loommux==0.1.11
    python benchmarks/bench_loommux.py --loommux /tmp/loommux/bin/loommux

Measured in one run, from the MCP SDK's stdio client, warmkernel as hosts run it (`warmkernel
mcp`, the relay to a live daemon, private directories as in `bench_core`):

1. Trivial cell round trip (`run_python("pass")`): warmkernel, loommux and raw (execute_request
   until reply and idle) in turn, every round; medians, and each side minus raw.
2. `reset_python` until the next cell's result (`run_python("1")` after it), no spare kernel:
   median of the resets, the two servers in turn.
3. After a cell of 1,000,000 printed lines has finished, the first tool call (`python_status`)
   and the first cell (`run_python("pass")`) after it: median of the repetitions.

The Markdown table goes to stdout, progress to stderr. `--quick` runs fewer repetitions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio
from bench_core import (
    WARM_UP,
    call,
    flood_code,
    ms,
    private_daemons,
    progress,
    raw_execute,
    raw_kernel,
    server_parameters,
    signed_ms,
    timed,
)
from jupyter_client.asynchronous.client import AsyncKernelClient
from mcp import Client, StdioServerParameters


@dataclass(frozen=True)
class Counts:
    round_trips: int
    resets: int
    floods: int


FULL = Counts(round_trips=400, resets=10, floods=3)
QUICK = Counts(round_trips=50, resets=3, floods=1)
FLOOD_LINES = 1_000_000
RESET_S = 0.5
FIRST_CALL_S = 0.010


@dataclass
class Server:
    """One MCP server and how to say its cells."""

    client: Client
    wait_flag: str
    """A cell's first line that lets it run to its end within the call."""

    async def cell(self, code: str) -> None:
        await call(self.client, "run_python", freeform=f"{self.wait_flag}\n{code}")


async def round_trips(servers: dict[str, Server], raw: AsyncKernelClient, n: int) -> dict[str, list[float]]:
    progress(f"round trip: {WARM_UP} warm-up + {n} cells on each of {', '.join(servers)} and raw, in turn")
    samples: dict[str, list[float]] = {name: [] for name in [*servers, "raw"]}
    sides: dict[str, Callable[[], Awaitable[object]]] = {
        **{
            name: (lambda s=server: s.client.call_tool("run_python", {"freeform": "pass"}))
            for name, server in servers.items()
        },
        "raw": lambda: raw_execute(raw, "pass"),
    }
    for index in range(WARM_UP + n):
        order = list(sides.items()) if index % 2 else list(reversed(sides.items()))
        for name, side in order:
            elapsed = await timed(side)
            if index >= WARM_UP:
                samples[name].append(elapsed)
    return samples


async def resets(servers: dict[str, Server], n: int) -> dict[str, list[float]]:
    progress(f"reset_python to the next result: 1 warm-up + {n} on each, in turn")
    samples: dict[str, list[float]] = {name: [] for name in servers}

    async def reset(server: Server) -> None:
        await call(server.client, "reset_python")
        await server.cell("1")

    for index in range(1 + n):
        for name, server in servers.items():
            elapsed = await timed(lambda s=server: reset(s))
            if index:
                samples[name].append(elapsed)
    return samples


async def after_flood(servers: dict[str, Server], n: int) -> dict[str, tuple[list[float], list[float]]]:
    progress(f"first calls after a {FLOOD_LINES:,}-line cell: {n} on each")
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in servers}
    for _ in range(n):
        for name, server in servers.items():
            await server.cell(flood_code(FLOOD_LINES))
            status, cell = samples[name]
            status.append(await timed(lambda s=server: call(s.client, "python_status")))
            cell.append(await timed(lambda s=server: s.cell("pass")))
    return samples


async def benchmark(loommux: str, counts: Counts) -> list[str]:
    median = statistics.median
    with tempfile.TemporaryDirectory(prefix="wk-loom-") as directory, private_daemons() as daemons:
        workspace = Path(directory)
        progress(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        async with AsyncExitStack() as stack:
            ours = Client(server_parameters(workspace, daemons))
            theirs = Client(
                StdioServerParameters(command=loommux, args=[], cwd=workspace, env=dict(os.environ))
            )
            servers = {
                "warmkernel": Server(await stack.enter_async_context(ours), "# warmkernel: --wait 600"),
                "loommux": Server(await stack.enter_async_context(theirs), "# loommux: --wait 600"),
            }
            raw = await stack.enter_async_context(raw_kernel(workspace))
            for server in servers.values():  # warm: a first call's imports are not what is measured
                await server.cell("pass")
                await call(server.client, "python_status")
            trips = await round_trips(servers, raw, counts.round_trips)
            reset = await resets(servers, counts.resets)
            flood = await after_flood(servers, counts.floods)
        progress(f"load average {os.getloadavg()[0]:.2f} at the end")
    raw_median = median(trips["raw"])
    ours_over, theirs_over = (median(trips[n]) - raw_median for n in servers)
    rows = [
        "| case | warmkernel | loommux 0.1.11 | raw jupyter_client | target |",
        "|---|---:|---:|---:|---|",
        f"| trivial cell round trip, MCP SDK client, median of {counts.round_trips} | "
        f"{ms(median(trips['warmkernel']))} (raw {signed_ms(ours_over)}) | "
        f"{ms(median(trips['loommux']))} (raw {signed_ms(theirs_over)}) | {ms(raw_median)} | "
        f"≤ loommux's: {'met' if ours_over <= theirs_over else '**not met**'} |",
        f"| reset_python to the next result, no spare, median of {counts.resets} | "
        f"{ms(median(reset['warmkernel']))} | {ms(median(reset['loommux']))} | — | "
        f"≤ {RESET_S:g} s: {'met' if median(reset['warmkernel']) <= RESET_S else '**not met**'} |",
    ]
    status, cell = (median(flood["warmkernel"][i]) for i in (0, 1))
    rows += [
        f"| first `python_status` after a {FLOOD_LINES:,}-line cell, median of {counts.floods} | "
        f"{ms(status)} | {ms(median(flood['loommux'][0]))} | — | "
        f"≤ {FIRST_CALL_S * 1e3:g} ms: {'met' if status <= FIRST_CALL_S else '**not met**'} |",
        f'| first `run_python("pass")` after it, median of {counts.floods} | '
        f"{ms(cell)} | {ms(median(flood['loommux'][1]))} | — | — |",
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="warmkernel beside loommux 0.1.11 and raw jupyter_client")
    parser.add_argument("--loommux", required=True, help="the loommux executable (installed apart)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    rows = anyio.run(benchmark, args.loommux, QUICK if args.quick else FULL, backend="asyncio")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
