"""Output at scale: warmkernel over MCP stdio side by side with a raw jupyter_client baseline.

Measured in one run, on one warmkernel server and one raw kernel alive at the same time:

1. A cell printing 1,000,000 short lines, submission to terminal state, 3 times each,
   alternating; median. The warmkernel server's peak RSS growth during each run (sampled
   every 10 ms; the kernel process is not counted); the largest of the 3.
2. A regex search for one line among those 1,000,000 (median of 10).
3. A cell printing 10,000,000 lines, once each: time, the server's peak RSS growth, the exact
   line count, and `python_status` called every 20 ms from the same client while it runs.
4. `read_python_output` of the last 10 lines and of 20 lines in the middle of that cell
   (median of 50 each), next to the `python_status` round trip as the floor.
5. The same 10,000,000 lines in one `print` (one IOPub message of about 76 MB), with
   `python_status` polled through it: how long the server's event loop is held by one message.

Shares its MCP and raw-kernel helpers with `bench_core.py`. The Markdown table goes to stdout;
progress goes to stderr. `--quick` runs 100,000 and 1,000,000 lines instead.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil
from bench_core import (
    MB,
    Row,
    call,
    flood_row,
    kernel_pid,
    ms,
    p95,
    private_daemons,
    progress,
    raw_execute,
    raw_kernel,
    server_parameters,
    server_process,
    table,
    timed,
    verdict,
)
from jupyter_client.asynchronous.client import AsyncKernelClient
from mcp import Client

RSS_EVERY_S = 0.01
STATUS_EVERY_S = 0.02


@dataclass(frozen=True)
class Counts:
    lines: int
    repetitions: int
    big_lines: int
    reads: int
    searches: int


FULL = Counts(lines=1_000_000, repetitions=3, big_lines=10_000_000, reads=50, searches=10)
QUICK = Counts(lines=100_000, repetitions=3, big_lines=1_000_000, reads=20, searches=5)


def print_loop(lines: int) -> str:
    return f"for i in range({lines}): print(i)"


def one_print(lines: int) -> str:
    """The same lines in one print: ipykernel sends them as one IOPub message."""
    return f"print('\\n'.join(map(str, range({lines}))))"


async def line_count(client: Client, number: int) -> int:
    status = await call(client, "python_execution_status", execution=number)
    match = re.search(r"^lines: combined (\d+),", status, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no line count for execution {number}:\n{status}")
    return int(match.group(1))


@dataclass
class Samples:
    peak_rss: int
    status: list[float]
    """Round trips of python_status, in seconds."""


@asynccontextmanager
async def sampled(server: psutil.Process, client: Client | None) -> AsyncIterator[Samples]:
    """While the block runs: the server's peak RSS, and python_status round trips if given a client."""
    samples = Samples(server.memory_info().rss, [])
    done = anyio.Event()

    async def sample_rss() -> None:
        while not done.is_set():
            samples.peak_rss = max(samples.peak_rss, server.memory_info().rss)
            await anyio.sleep(RSS_EVERY_S)

    async def sample_status(client: Client) -> None:
        while not done.is_set():
            samples.status.append(await timed(lambda: call(client, "python_status")))
            await anyio.sleep(STATUS_EVERY_S)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample_rss)
        if client is not None:
            tg.start_soon(sample_status, client)
        try:
            yield samples
        finally:
            done.set()
    samples.peak_rss = max(samples.peak_rss, server.memory_info().rss)


@dataclass(frozen=True)
class Run:
    execution: int
    seconds: float
    peak_growth_mb: float
    status_samples: list[float]


async def wk_flood(
    client: Client, server: psutil.Process, code: str, lines: int, *, poll_status: bool = False
) -> Run:
    """Run a flood cell to its end while sampling the server's RSS (and python_status if asked)."""
    before = server.memory_info().rss
    async with sampled(server, client if poll_status else None) as samples:
        start = time.perf_counter()
        text = await call(client, "run_python", freeform=f"# warmkernel: --wait 900\n{code}")
        seconds = time.perf_counter() - start
    match = re.match(r"In \[(\d+)\] · (?!running)", text)
    if match is None:
        raise RuntimeError(f"the flood did not finish: {text[:200]}")
    number = int(match.group(1))
    if (counted := await line_count(client, number)) != lines:
        raise RuntimeError(f"execution {number} kept {counted:,} lines, not {lines:,}")
    return Run(number, seconds, (samples.peak_rss - before) / MB, samples.status)


async def raw_flood(client: AsyncKernelClient, code: str, lines: int) -> tuple[float, int]:
    """A flood cell on the raw kernel, keeping every text: its time and the text's size."""
    start = time.perf_counter()
    text = await raw_execute(client, code)
    seconds = time.perf_counter() - start
    if text.count("\n") != lines:
        raise RuntimeError(f"the raw client received {text.count(chr(10)):,} lines, not {lines:,}")
    return seconds, len(text)


async def median_of(calls: int, action: Callable[[], Awaitable[object]]) -> float:
    return statistics.median([await timed(action) for _ in range(calls)])


async def million(wk: Client, raw: AsyncKernelClient, server: psutil.Process, counts: Counts) -> list[Row]:
    """Case 1 and 2: the short-line flood, alternating with raw, then a search in it."""
    wk_runs: list[Run] = []
    raw_times: list[float] = []
    text_bytes = 0
    for repetition in range(counts.repetitions):
        progress(f"{counts.lines:,}-line flood: repetition {repetition + 1}/{counts.repetitions}")
        wk_runs.append(await wk_flood(wk, server, print_loop(counts.lines), counts.lines))
        seconds, text_bytes = await raw_flood(raw, print_loop(counts.lines), counts.lines)
        raw_times.append(seconds)
    wk_time = statistics.median(run.seconds for run in wk_runs)
    raw_time = statistics.median(raw_times)
    growth = max(run.peak_growth_mb for run in wk_runs)
    n, reps = f"{counts.lines:,}", counts.repetitions
    needle = int(counts.lines * 0.765432)
    progress(f"search for ^{needle}$ ({counts.searches} calls)")
    execution = wk_runs[-1].execution
    query = f"^{needle}$"
    search = await median_of(
        counts.searches,
        lambda: call(wk, "search_python_output", query=query, execution=execution, query_mode="regex"),
    )
    return [
        flood_row(n, reps, wk_time, raw_time),
        Row(
            f"server peak RSS growth in that cell, largest of {reps} (raw: size of the text)",
            f"+{growth:.1f} MB",
            f"{text_bytes / MB:.1f} MB",
            "—",
            f"≤ 24 MB: {verdict(growth <= 24)}" if counts is FULL else "—",
        ),
        Row(
            f'regex search "^{needle}$" among {n} lines, median of {counts.searches}',
            ms(search),
            "—",
            "—",
            f"≤ 100 ms: {verdict(search <= 0.1)}",
        ),
    ]


async def ten_million(
    wk: Client, raw: AsyncKernelClient, server: psutil.Process, counts: Counts
) -> list[Row]:
    """Cases 3 and 4: the big flood with python_status polled through it, then reads."""
    n = f"{counts.big_lines:,}"
    progress(f"{n}-line flood on warmkernel, polling python_status")
    run = await wk_flood(wk, server, print_loop(counts.big_lines), counts.big_lines, poll_status=True)
    progress(f"{n}-line flood on raw")
    raw_time, text_bytes = await raw_flood(raw, print_loop(counts.big_lines), counts.big_lines)
    progress(f"reads ({counts.reads} each) on execution {run.execution}")
    floor = await median_of(counts.reads, lambda: call(wk, "python_status"))

    async def read(line_range: str) -> float:
        return await median_of(
            counts.reads,
            lambda: call(wk, "read_python_output", execution=run.execution, line_range=line_range),
        )

    middle = counts.big_lines // 2
    reads = {line_range: await read(line_range) for line_range in ("-10:", f"{middle}:{middle + 20}")}
    full = counts is FULL
    statuses = run.status_samples
    return [
        Row(
            f"{n}-line cell, submit to done, once",
            f"{run.seconds:.2f} s",
            f"{raw_time:.2f} s",
            f"{run.seconds / raw_time:.2f}x",
            "line count exact: met",
        ),
        Row(
            "server peak RSS growth in that cell (raw: size of the text)",
            f"+{run.peak_growth_mb:.1f} MB",
            f"{text_bytes / MB:.1f} MB",
            "—",
            f"≤ 64 MB: {verdict(run.peak_growth_mb <= 64)}" if full else "—",
        ),
        Row(
            f"python_status during that cell, p95 of {len(statuses)} (max {ms(max(statuses))})",
            ms(p95(statuses)),
            "—",
            f"median {ms(statistics.median(statuses))}",
            f"≤ 50 ms: {verdict(p95(statuses) <= 0.05)}",
        ),
        Row(
            f"python_status round trip when idle (floor), median of {counts.reads}", ms(floor), "—", "—", "—"
        ),
        *(
            Row(
                f'read_python_output "{line_range}" on {n} lines, median of {counts.reads}',
                ms(seconds),
                "—",
                f"floor {(seconds - floor) * 1000:+.2f} ms",
                f"≤ {limit} ms: {verdict(seconds <= limit / 1000)}",
            )
            for (line_range, seconds), limit in zip(reads.items(), (10, 20), strict=True)
        ),
    ]


async def one_message(
    wk: Client, raw: AsyncKernelClient, server: psutil.Process, counts: Counts
) -> list[Row]:
    """Case 5 (no target): the big flood in one print, so one IOPub message carries it all."""
    n = f"{counts.big_lines:,}"
    progress(f"{n} lines in one print, on warmkernel polling python_status, then on raw")
    code = one_print(counts.big_lines)
    run = await wk_flood(wk, server, code, counts.big_lines, poll_status=True)
    raw_time, text_bytes = await raw_flood(raw, code, counts.big_lines)
    statuses = run.status_samples
    return [
        Row(
            f"{n} lines in one print (one {text_bytes / MB:.0f} MB message), submit to done",
            f"{run.seconds:.2f} s",
            f"{raw_time:.2f} s",
            f"{run.seconds / raw_time:.2f}x",
            "—",
        ),
        Row(
            f"python_status during that cell, max of {len(statuses)}",
            ms(max(statuses)),
            "—",
            f"median {ms(statistics.median(statuses))}",
            "—",
        ),
    ]


async def benchmark(counts: Counts) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="wk-bench-") as directory, private_daemons() as daemons:
        workspace = Path(directory)
        async with AsyncExitStack() as stack:
            load = os.getloadavg()[0]
            progress(f"load average {load:.2f} on {os.cpu_count()} CPUs; other work skews the numbers")
            wk = await stack.enter_async_context(Client(server_parameters(workspace, daemons)))
            raw = await stack.enter_async_context(raw_kernel(workspace))
            await call(wk, "run_python", freeform="pass")  # the server's kernel starts in the background
            await raw_execute(raw, "pass")
            server = server_process(await kernel_pid(wk))
            rows = await million(wk, raw, server, counts)
            rows += await ten_million(wk, raw, server, counts)
            return rows + await one_message(wk, raw, server, counts)


def main() -> None:
    parser = argparse.ArgumentParser(description="warmkernel output benchmarks against raw jupyter_client")
    parser.add_argument("--quick", action="store_true", help="100,000 and 1,000,000 lines")
    counts = QUICK if parser.parse_args().quick else FULL
    print(table(anyio.run(benchmark, counts, backend="asyncio")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
