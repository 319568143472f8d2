"""Daemon benchmarks: what the relay, a daemon's start and the CLI verbs cost a host or a shell.

`warmkernel mcp` is a relay to the workspace's daemon (started if there is none); CLI verbs are
short MCP sessions on the daemon's socket. Measured in one run, with private daemon directories
(`bench_core.PrivateDaemons`) and every daemon stopped at the end:

1. Round trip of a trivial cell (`run_python("pass")`) through the relay to a live daemon, from
   the MCP SDK's stdio client and from a host speaking JSON lines itself (no SDK: what the path
   costs without the Python SDK client's own work), and through `warmkernel mcp --ephemeral` (a
   process that owns its kernel: no relay); each alternating with a raw kernel (execute_request
   until reply and idle), in blocks of its own taken in turn. Beside them, a tool that does
   nothing on a server made of the MCP SDK alone (`noop_server.py`), from both clients: the least
   a call costs on any server built with the SDK.
2. The relay's RSS once connected and idle, beside the daemon's and an `--ephemeral` server's.
3. Host start to first reply with a live daemon: launch `warmkernel mcp`, initialize, reply to
   `run_python("1")`.
4. CLI verbs against the live daemon, as subprocesses: `status` and `read --lines=-10:`, wall
   time and peak RSS (GNU time's `%M`), beside `python -c pass` and the verbs' imports alone.
5. Host start to first reply with no live daemon (the relay starts one; it is stopped between
   runs), from the MCP SDK's client and from the JSON-lines host, beside raw `start_kernel()`
   plus `wait_for_ready()`.

The Markdown table goes to stdout; progress and the load average go to stderr. `--quick` runs
fewer repetitions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil
from bench_core import (
    MB,
    WARM_UP,
    PrivateDaemons,
    Row,
    first_reply,
    kernel_pid,
    ms,
    p95,
    private_daemons,
    progress,
    raw_execute,
    raw_kernel,
    raw_startup,
    run_cell,
    server_parameters,
    server_process,
    signed_ms,
    table,
    timed,
    verdict,
    wk_startup,
)
from bench_transport import Host, launched, open_host
from jupyter_client.asynchronous.client import AsyncKernelClient
from mcp import Client, StdioServerParameters

from warmkernel.daemon.relay import PUMP

ROUND_TRIP_EXTRA_S = 0.001
LIVE_START_S = 0.3
DAEMON_START_EXTRA_S = 0.3
VERB_S = 0.150
VERB_MB = 40.0
RELAY_MB = 15.0


@dataclass(frozen=True)
class Counts:
    round_trips: int
    starts: int
    verb_runs: int


FULL = Counts(round_trips=400, starts=5, verb_runs=20)
QUICK = Counts(round_trips=50, starts=2, verb_runs=5)


def seconds(value: float) -> str:
    return f"{value:.2f} s"


def megabytes(value: float) -> str:
    return f"{value:.1f} MB"


# -- 1. round trips ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pairs:
    """One side's trivial cells and raw's, alternating: raw is as warm as the side it is beside."""

    side: list[float]
    raw: list[float]

    def over(self, statistic: Callable[[list[float]], float]) -> float:
        return statistic(self.side) - statistic(self.raw)


def p10(samples: list[float]) -> float:
    """On a shared machine the median moves with the load; the fastest tenth is what the path
    costs when nothing else is scheduled in its way."""
    return statistics.quantiles(samples, n=10)[0]


async def alternate(
    side: Callable[[], Awaitable[float]], raw: AsyncKernelClient, n: int, pairs: Pairs
) -> None:
    """`n` cells on the side, each followed by one on raw, added to `pairs`."""
    for _ in range(n):
        pairs.side.append(await side())
        pairs.raw.append(await timed(lambda: raw_execute(raw, "pass")))


BLOCKS = 4


async def round_trips(
    relay: Client, host: Host, ephemeral: Client, raw: AsyncKernelClient, counts: Counts
) -> list[Row]:
    """Each side alternates with raw, in blocks of its own taken in turn (`BLOCKS` of each), so
    that drift and background load hit a side and raw alike, each kernel runs one cell in two
    (with all sides in one round, raw's kernel would idle three cells long and the daemon's,
    serving two sides, one), and a slow stretch of the machine falls on every side."""
    n = counts.round_trips

    async def sdk_cell() -> float:
        return await timed(lambda: run_cell(relay, "pass"))

    async def host_cell() -> float:
        return host.call("run_python")  # blocking: nothing else of ours runs meanwhile

    async def owned_cell() -> float:
        return await timed(lambda: run_cell(ephemeral, "pass"))

    sides = {
        "relay, MCP SDK client": sdk_cell,
        "relay, JSON-lines host": host_cell,
        "--ephemeral": owned_cell,
    }
    progress(f"round trip: {WARM_UP} warm-up + {n} cells on each of {', '.join(sides)}, each beside raw")
    for cell in sides.values():
        await alternate(cell, raw, WARM_UP, Pairs([], []))
    sdk, lines, owned = (Pairs([], []) for _ in sides)
    for _ in range(BLOCKS):
        for cell, pairs in zip(sides.values(), (sdk, lines, owned), strict=True):
            await alternate(cell, raw, n // BLOCKS, pairs)
    median = statistics.median

    def row(case: str, pairs: Pairs, statistic: Callable[[list[float]], float], target: bool) -> Row:
        over = pairs.over(statistic)
        met = f"≤ raw + 1 ms: {verdict(over <= ROUND_TRIP_EXTRA_S)}" if target else "—"
        return Row(case, ms(statistic(pairs.side)), ms(statistic(pairs.raw)), signed_ms(over), met)

    return [
        row(
            f"trivial cell round trip through the relay (live daemon), MCP SDK client, median of {n}",
            sdk,
            median,
            True,
        ),
        row(f"the same from a host speaking JSON lines itself (no SDK), median of {n}", lines, median, True),
        Row(
            "the MCP SDK client's own cost: the two rows above, difference of their differences",
            signed_ms(sdk.over(median) - lines.over(median)),
            "—",
            "—",
            "—",
        ),
        row(f"trivial cell round trip through the relay, MCP SDK client, p95 of {n}", sdk, p95, False),
        row(f"trivial cell round trip through the relay, MCP SDK client, p10 of {n}", sdk, p10, False),
        row(
            f"trivial cell round trip through `mcp --ephemeral` (no relay), median of {n}",
            owned,
            median,
            False,
        ),
        row(f"trivial cell round trip through `mcp --ephemeral`, p95 of {n}", owned, p95, False),
        Row(
            "the relay's own cost: relay (SDK client) over raw minus --ephemeral over raw, medians",
            signed_ms(sdk.over(median) - owned.over(median)),
            "—",
            "—",
            "—",
        ),
    ]


NOOP_SERVER = Path(__file__).with_name("noop_server.py")


async def noop_calls(workspace: Path, counts: Counts) -> list[Row]:
    """A tool that does nothing, on a server made of the MCP SDK alone (its stdio transport):
    what a call costs on any server built with the SDK, from the SDK's client and from the
    JSON-lines host, alternating."""
    n = counts.round_trips
    progress(f"no-op tool on the SDK's own server: {WARM_UP} warm-up + {n} calls from each client, in turn")
    argv = [sys.executable, str(NOOP_SERVER)]
    sdk: list[float] = []
    lines: list[float] = []
    async with Client(StdioServerParameters(command=argv[0], args=argv[1:])) as client:
        with launched(argv, workspace, dict(os.environ)) as host:
            for index in range(WARM_UP + n):
                sdk_s = await timed(lambda: client.call_tool("noop", {}))
                lines_s = host.call("noop")
                if index >= WARM_UP:
                    sdk.append(sdk_s)
                    lines.append(lines_s)
    median = statistics.median
    return [
        Row(
            "a tool that does nothing, on a server of the MCP SDK alone (stdio), MCP SDK client, "
            f"median of {n}: any SDK server's least cost per call",
            ms(median(sdk)),
            "—",
            "—",
            "—",
        ),
        Row(f"the same from the JSON-lines host, median of {n}", ms(median(lines)), "—", "—", "—"),
    ]


# -- 2. memory -----------------------------------------------------------------------------------


def our_server(ephemeral: bool) -> psutil.Process:
    """The `warmkernel mcp` process this benchmark launched (the SDK runs the command itself, so
    it is our child): the `--ephemeral` server, or the relay, which execs `relay_pump.py` once the
    daemon has answered its hello."""
    for child in psutil.Process().children():
        argv = child.cmdline()
        if ("--ephemeral" in argv) if ephemeral else (str(PUMP) in argv):
            return child
    raise RuntimeError(f"no {'--ephemeral server' if ephemeral else 'relay'} among our children")


def memory_row(case: str, process: psutil.Process, target_mb: float | None) -> Row:
    """RSS (what the target is about), with USS beside it: what the process alone holds, without
    the pages of shared libraries it maps."""
    info = process.memory_full_info()
    target = f"≤ {target_mb:g} MB: {verdict(info.rss / MB <= target_mb)}" if target_mb is not None else "—"
    return Row(case, megabytes(info.rss / MB), "—", f"USS {megabytes(info.uss / MB)}", target)


async def memory(relay: Client, ephemeral: Client) -> list[Row]:
    progress("RSS of the relay, the daemon and the --ephemeral server")
    for _ in range(3):  # a few calls, then idle
        await run_cell(relay, "pass")
    await anyio.sleep(0.5)
    daemon = server_process(await kernel_pid(relay))
    return [
        memory_row("relay (`warmkernel mcp`) RSS, connected and idle", our_server(ephemeral=False), RELAY_MB),
        memory_row("daemon RSS, for scale (its kernel not counted)", daemon, None),
        memory_row("`mcp --ephemeral` RSS, for scale (kernel not counted)", our_server(ephemeral=True), None),
    ]


# -- 3. host start with a live daemon ------------------------------------------------------------


async def live_starts(workspace: Path, daemons: PrivateDaemons, counts: Counts) -> list[Row]:
    progress(f"host start with a live daemon: {counts.starts} runs")
    if not daemons.live():
        raise RuntimeError("no live daemon: this start would include the daemon's")
    times = [await first_reply(workspace, daemons) for _ in range(counts.starts)]
    median = statistics.median(times)
    return [
        Row(
            f"host start to first reply, live daemon, median of {counts.starts}",
            seconds(median),
            "—",
            f"max {seconds(max(times))}",
            f"≤ {LIVE_START_S:g} s: {verdict(median <= LIVE_START_S)}",
        )
    ]


# -- 4. CLI verbs --------------------------------------------------------------------------------


GNU_TIME = Path("/usr/bin/time")


def wall_time(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    """A command's wall time from spawn to exit; it must succeed."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stdout[-2000:]!r}")
    return elapsed


def peak_rss_mb(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    """A command's peak RSS, from GNU time's `%M` (kB), in a run of its own.

    Not `ru_maxrss` of our own child: Linux carries the high-water mark across `exec`, so a child
    spawned by this ~80 MB process reports at least that. GNU time is a small process.
    """
    with tempfile.NamedTemporaryFile("r") as report:
        wall_time([str(GNU_TIME), "-f", "%M", "-o", report.name, *argv], cwd, env)
        return int(report.read().split()[-1]) / 1024


def verbs(workspace: Path, daemons: PrivateDaemons, counts: Counts) -> list[Row]:
    """The two verbs, and what any Python command costs, in turn, `verb_runs` times each; peak RSS
    from separate runs under GNU time, so that its own start is not in the wall times."""
    progress(f"CLI verbs against the live daemon: {counts.verb_runs} runs of each command, in turn")
    if not GNU_TIME.exists():
        raise RuntimeError(f"{GNU_TIME} (GNU time) measures the peak RSS of the verbs; install it")
    env = {**os.environ, **daemons.env()}
    python = sys.executable
    commands = {
        "status": [python, "-m", "warmkernel", "status"],
        "read": [python, "-m", "warmkernel", "read", "--lines=-10:"],
        "floor": [python, "-c", "pass"],
        "imports": [python, "-c", "import warmkernel.cli"],
    }
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(counts.verb_runs):
        for name, argv in commands.items():
            walls[name].append(wall_time(argv, workspace, env))
            peaks[name].append(peak_rss_mb(argv, workspace, env))
    wall = {name: statistics.median(values) for name, values in walls.items()}
    peak = {name: max(values) for name, values in peaks.items()}
    n = counts.verb_runs

    def verb_rows(name: str, label: str) -> list[Row]:
        return [
            Row(
                f"`{label}` against a live daemon, wall time, median of {n}",
                ms(wall[name]),
                "—",
                f"`python -c pass` {signed_ms(wall[name] - wall['floor'])}",
                f"≤ {VERB_S * 1000:g} ms: {verdict(wall[name] <= VERB_S)}",
            ),
            Row(
                f"`{label}` peak RSS (GNU time), largest of {n}",
                megabytes(peak[name]),
                "—",
                f"`python -c pass` {peak[name] - peak['floor']:+.1f} MB",
                f"≤ {VERB_MB:g} MB: {verdict(peak[name] <= VERB_MB)}",
            ),
        ]

    return [
        *verb_rows("status", "warmkernel status"),
        *verb_rows("read", "warmkernel read --lines=-10:"),
        Row(
            f"`python -c pass` (the interpreter's start), median of {n}; peak RSS",
            ms(wall["floor"]),
            "—",
            megabytes(peak["floor"]),
            "—",
        ),
        Row(
            f"`python -c 'import warmkernel.cli'` (a verb's imports, no daemon), median of {n}; peak RSS",
            ms(wall["imports"]),
            "—",
            f"`python -c pass` {signed_ms(wall['imports'] - wall['floor'])}; {megabytes(peak['imports'])}",
            "—",
        ),
    ]


# -- 5. host start with no live daemon -----------------------------------------------------------


async def cold_starts(workspace: Path, daemons: PrivateDaemons, counts: Counts) -> list[Row]:
    """Each host's start in turn with raw's; the daemon is stopped after each run (not counted)."""
    daemons.stop_all()
    sdk_times: list[float] = []
    host_times: list[float] = []
    raw_times: list[float] = []
    for run in range(counts.starts):
        progress(f"host start with no live daemon: run {run + 1}/{counts.starts}")
        sdk_times.append(await wk_startup(workspace, daemons))
        host_times.append(lines_host_startup(workspace, daemons))
        raw_times.append(await raw_startup(workspace))
    raw = statistics.median(raw_times)

    def row(case: str, times: list[float]) -> Row:
        wk = statistics.median(times)
        target = f"≤ raw + {DAEMON_START_EXTRA_S:g} s: {verdict(wk - raw <= DAEMON_START_EXTRA_S)}"
        return Row(case, seconds(wk), seconds(raw), f"{(wk - raw) * 1000:+.0f} ms", target)

    return [
        row(
            "host start to first reply, no live daemon (it starts), MCP SDK client, "
            f"median of {counts.starts} (raw: start_kernel + wait_for_ready)",
            sdk_times,
        ),
        row(f"the same from a host speaking JSON lines itself, median of {counts.starts}", host_times),
    ]


def lines_host_startup(workspace: Path, daemons: PrivateDaemons) -> float:
    """Launch `warmkernel mcp` from the JSON-lines host with no live daemon, initialize and run a
    trivial cell: the time until its reply; the daemon is stopped afterwards (not counted)."""
    start = time.perf_counter()
    with open_host(workspace, daemons) as host:
        host.call("run_python")
        elapsed = time.perf_counter() - start
    daemons.stop_all()
    return elapsed


# -- running -------------------------------------------------------------------------------------


async def benchmark(counts: Counts) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="wk-bench-") as directory, private_daemons() as daemons:
        workspace = Path(directory)
        load = os.getloadavg()[0]
        progress(f"load average {load:.2f} on {os.cpu_count()} CPUs; other work skews the numbers")
        async with AsyncExitStack() as stack:
            progress("starting a daemon (through a relay), an --ephemeral server and a raw kernel")
            relay = await stack.enter_async_context(Client(server_parameters(workspace, daemons)))
            ephemeral = await stack.enter_async_context(
                Client(server_parameters(workspace, daemons, "--ephemeral"))
            )
            raw = await stack.enter_async_context(raw_kernel(workspace))
            await run_cell(relay, "pass")  # the kernels start in the background
            host = stack.enter_context(open_host(workspace, daemons))
            await run_cell(ephemeral, "pass")
            rows = await round_trips(relay, host, ephemeral, raw, counts)
            rows += await noop_calls(workspace, counts)
            rows += await memory(relay, ephemeral)
        # Only the daemon's clients are closed: it lives on, as it does between conversations.
        rows += await live_starts(workspace, daemons, counts)
        await run_cell_once(workspace, daemons, "for i in range(100): print(i)")  # something to read
        rows += verbs(workspace, daemons, counts)
        with tempfile.TemporaryDirectory(prefix="wk-start-") as fresh:  # no records to take over
            rows += await cold_starts(Path(fresh), daemons, counts)
        progress(f"load average {os.getloadavg()[0]:.2f} at the end")
        return rows


async def run_cell_once(workspace: Path, daemons: PrivateDaemons, code: str) -> None:
    """One cell through a short host session on the live daemon."""
    async with Client(server_parameters(workspace, daemons)) as client:
        await run_cell(client, code)


def main() -> None:
    parser = argparse.ArgumentParser(description="warmkernel daemon, relay and CLI benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions: about 20 s")
    counts = QUICK if parser.parse_args().quick else FULL
    print(table(anyio.run(benchmark, counts, backend="asyncio")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
