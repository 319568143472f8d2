"""Reset: `reset_python` with and without a spare kernel, next to a raw jupyter_client restart.

Measured one after the other, so that no kernel starting in one case takes CPU from another:

1. `reset_python` round trips through the in-process MCP client, `spare_kernels=0`: each one
   kills the kernel and starts a fresh one (the reply comes once it answers).
2. The same with `spare_kernels=1`, each reset once the spare is ready (python_status says
   so): the spare is swapped in and a replacement starts in the background.
3. With `spare_kernels=1`, resets back to back: the spare is still starting and is awaited.
4. Raw jupyter_client: `AsyncKernelManager.restart_kernel(now=True)` plus `wait_for_ready()`,
   with the same kernel environment and flags as warmkernel's kernels.

Each case runs one reset as warm-up, then N (10, or 3 with `--quick`); medians. The Markdown
table goes to stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import anyio
from bench_core import START_TIMEOUT_S, call, progress, raw_kernel, run_cell, timed
from jupyter_client.manager import AsyncKernelManager
from mcp import Client

from warmkernel.faces.mcp_server import build_server
from warmkernel.session.kernels import Kernels
from warmkernel.settings.model import Settings
from warmkernel.workspace import Workspace

WARM_UP = 1


@dataclass(frozen=True)
class Row:
    case: str
    samples: list[float]


@asynccontextmanager
async def warmkernel(workspace: Path, spare_kernels: int) -> AsyncIterator[Client]:
    """An in-process server and its MCP client, as the tests use them."""
    settings = Settings(spare_kernels=spare_kernels)
    async with (
        Kernels.open(settings, Workspace(workspace, "launch_cwd")) as kernels,
        Client(build_server(kernels)) as client,
    ):
        await run_cell(client, "pass")
        yield client


async def spare_ready(client: Client) -> None:
    with anyio.fail_after(START_TIMEOUT_S):
        # A client can only ask: python_status is what it sees.
        while "spare kernels: 1 of 1 ready" not in await call(client, "python_status"):  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def reset(client: Client) -> None:
    await call(client, "reset_python")


async def samples(
    repetitions: int, action: Callable[[], Awaitable[object]], before: Callable[[], Awaitable[object]]
) -> list[float]:
    """Time `action` WARM_UP + `repetitions` times, each after `before` (not timed); keep the last ones."""
    times = []
    for _ in range(WARM_UP + repetitions):
        await before()
        times.append(await timed(action))
    return times[WARM_UP:]


async def nothing() -> None:
    pass


async def raw_restarts(workspace: Path, repetitions: int) -> list[float]:
    """restart_kernel(now=True) until the new kernel answers, on a kernel started the plain way."""
    async with raw_kernel(workspace) as client:
        manager = cast(AsyncKernelManager, client.parent)  # the manager that made this client

        async def restart() -> None:
            await manager.restart_kernel(now=True)
            await client.wait_for_ready(timeout=START_TIMEOUT_S)

        return await samples(repetitions, restart, nothing)


async def benchmark(repetitions: int) -> list[Row]:
    progress(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; other work skews the numbers")
    with tempfile.TemporaryDirectory(prefix="wk-bench-") as directory:
        workspace = Path(directory)
        progress(f"reset_python, spare_kernels=0: {WARM_UP} + {repetitions}")
        async with warmkernel(workspace, 0) as client:
            cold = await samples(repetitions, lambda: reset(client), nothing)
        progress(f"reset_python, spare_kernels=1, spare ready: {WARM_UP} + {repetitions}")
        async with warmkernel(workspace, 1) as client:
            spare = await samples(repetitions, lambda: reset(client), lambda: spare_ready(client))
            progress(f"reset_python, spare_kernels=1, back to back: {WARM_UP} + {repetitions}")
            back_to_back = await samples(repetitions, lambda: reset(client), nothing)
        progress(f"raw restart_kernel: {WARM_UP} + {repetitions}")
        raw = await raw_restarts(workspace, repetitions)
    return [
        Row("reset_python, spare_kernels=0", cold),
        Row("reset_python, spare_kernels=1, spare ready", spare),
        Row("reset_python, spare_kernels=1, back to back (spare still starting)", back_to_back),
        Row("raw jupyter_client restart_kernel(now=True) + wait_for_ready", raw),
    ]


def table(rows: list[Row]) -> str:
    baseline = statistics.median(rows[0].samples)
    lines = [
        f"| case | median of {len(rows[0].samples)} | min | max | speed-up over spare_kernels=0 |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        median = statistics.median(row.samples)
        lines.append(
            f"| {row.case} | {median * 1000:.0f} ms | {min(row.samples) * 1000:.0f} ms "
            f"| {max(row.samples) * 1000:.0f} ms | {baseline / median:.1f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="reset_python with and without spare kernels, and raw restart"
    )
    parser.add_argument("--quick", action="store_true", help="3 resets per case instead of 10")
    rows = anyio.run(benchmark, 3 if parser.parse_args().quick else 10, backend="asyncio")
    print(table(rows))


if __name__ == "__main__":
    main()
