"""Core benchmarks: warmkernel over MCP stdio side by side with a raw jupyter_client baseline.

warmkernel is measured as hosts run it: `python -m warmkernel mcp`, a relay to the workspace's
daemon, which it starts when there is none. Every warmkernel process of the run gets private
runtime and state directories (`PrivateDaemons`), so the run finds only its own daemons and
stops them at its end, also when a case fails.

Measured in one run, on one daemon (through its relay) and one raw kernel alive at the same time:

1. Round trip of a trivial cell (`pass`): median and p95, warmkernel minus raw.
2. A cell printing many short lines, from submission to terminal state (median of 3).
3. The daemon's RSS growth for that cell (the kernel process is not counted).
4. `read_python_output` of the last 10 and of 20 middle lines of that cell, next to the
   `python_status` round trip as a floor.
5. A regex search for one line among them.
6. Startup with no live daemon: launching `python -m warmkernel mcp` (which starts the daemon)
   until the first `run_python("1")` reply, against `AsyncKernelManager.start_kernel()` plus
   `wait_for_ready()`; the daemon is stopped between runs.

The raw baseline uses jupyter_client's `python3` kernelspec with this interpreter, the IPC
transport and warmkernel's kernel environment and flags, and counts a cell as done when both
its `execute_reply` and its IOPub `idle` status have arrived, keeping every stream text.
The Markdown table goes to stdout; progress goes to stderr. `--quick` runs smaller counts.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import psutil
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from mcp import Client, StdioServerParameters

import warmkernel
from warmkernel.daemon.discovery import RUNTIME_DIR_ENV, Descriptor, live_descriptors, stop_daemon

# The raw kernel gets the same environment and flags as warmkernel's own kernels.
from warmkernel.kernel.launch import _KERNEL_FLAGS, kernel_environment
from warmkernel.session.journal import STATE_DIR_ENV

MB = 1024 * 1024
WARM_UP = 20
START_TIMEOUT_S = 60.0
IDLE_STOP_S = 900.0
"""A daemon of a benchmark that was killed before it could stop it stops by itself after this."""


@dataclass(frozen=True)
class Counts:
    round_trips: int
    lines: int
    flood_repetitions: int
    reads: int
    searches: int
    startups: int


FULL = Counts(round_trips=200, lines=1_000_000, flood_repetitions=3, reads=50, searches=10, startups=3)
QUICK = Counts(round_trips=50, lines=100_000, flood_repetitions=3, reads=20, searches=5, startups=1)


@dataclass(frozen=True)
class Row:
    case: str
    warmkernel: str
    raw: str
    comparison: str
    target: str


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def signed_ms(seconds: float) -> str:
    return f"{seconds * 1000:+.2f} ms"


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[18]


def verdict(met: bool) -> str:
    return "met" if met else "**not met**"


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


# -- private daemons -----------------------------------------------------------------------------


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` in this process's environment for a while: discovery reads its directory from there."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class PrivateDaemons:
    """The runtime and state directories of one benchmark run: daemons outlive their clients, so
    a run must find only its own daemons (never a user's) and stop every one of them."""

    root: Path

    def env(self) -> dict[str, str]:
        """The environment every warmkernel process of the run gets. It carries our PYTHONPATH
        too: the MCP SDK gives a server only a few variables of ours (HOME, PATH, ...)."""
        values = {RUNTIME_DIR_ENV: str(self.root / "rt"), STATE_DIR_ENV: str(self.root / "st")}
        if "PYTHONPATH" in os.environ:
            values["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return values

    def new_workspace(self) -> Path:
        """A fresh directory for a workspace, removed with the run's directories."""
        return Path(tempfile.mkdtemp(prefix="ws-", dir=self.root))

    def live(self) -> list[Descriptor]:
        with _environment({RUNTIME_DIR_ENV: self.env()[RUNTIME_DIR_ENV]}):
            return live_descriptors()

    def stop_all(self) -> int:
        """Stop every live daemon of the run and wait until each has cleaned up; how many there were.
        A daemon that fails to stop does not keep the others running: the first failure is raised
        once all were tried."""
        daemons = self.live()
        failures: list[Exception] = []
        for descriptor in daemons:
            try:
                stop_daemon(descriptor)
            except Exception as exc:  # raised below, after the others were tried
                failures.append(exc)
        if failures:
            raise failures[0]
        return len(daemons)


@contextmanager
def private_daemons() -> Iterator[PrivateDaemons]:
    """Private daemon directories, short (socket paths are limited to about 107 bytes); on exit,
    also after a failure, every daemon started under them is stopped and they are removed.

    warmkernel's bytecode is written first, as installing a wheel writes it: a checkout whose
    sources changed, run under PYTHONDONTWRITEBYTECODE, would otherwise compile those modules again
    in every process measured (with none written: 65 ms more for a CLI verb's imports, 0.2 s for
    a daemon's)."""
    compileall.compile_dir(Path(warmkernel.__file__).parent, quiet=1)
    daemons = PrivateDaemons(Path(tempfile.mkdtemp(prefix="wkb-")))
    try:
        yield daemons
    finally:
        try:
            if stopped := daemons.stop_all():
                progress(f"stopped {stopped} daemon(s)")
        finally:
            shutil.rmtree(daemons.root, ignore_errors=True)


# -- warmkernel over MCP stdio -------------------------------------------------------------------


def server_parameters(workspace: Path, daemons: PrivateDaemons, *flags: str) -> StdioServerParameters:
    """`python -m warmkernel mcp FLAGS` in `workspace`, as a host launches it, with the run's
    private daemon directories; a daemon it starts stops by itself if the run dies without
    stopping it."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "warmkernel", "mcp", "--idle-stop", f"{IDLE_STOP_S:g}", *flags],
        cwd=workspace,
        env=daemons.env(),
    )


async def call(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must succeed; return its text."""
    result = await client.call_tool(tool, arguments)
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {text}")
    return text


async def run_cell(client: Client, code: str) -> int:
    """Run a cell to its end; return its execution number. A note may come first (a new daemon
    in a workspace with journaled records says that its kernel is new)."""
    text = await call(client, "run_python", freeform=code)
    match = re.search(r"^In \[(\d+)\] · (?!running)", text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"the cell did not finish: {text[:200]}")
    return int(match.group(1))


def server_process(kernel_pid: int) -> psutil.Process:
    """The process that owns the kernel and the records, the parent of the kernel: the daemon
    (or a `--ephemeral` server)."""
    parent = psutil.Process(kernel_pid).parent()
    if parent is None:
        raise RuntimeError(f"the kernel {kernel_pid} has no parent process")
    return parent


async def kernel_pid(client: Client) -> int:
    status = await call(client, "python_status")
    match = re.search(r"^kernel: ready, generation \d+, pid (\d+)$", status, re.MULTILINE)
    if match is None:
        raise RuntimeError("python_status did not name a ready kernel")
    return int(match.group(1))


# -- raw jupyter_client -------------------------------------------------------------------------


@asynccontextmanager
async def raw_kernel(workspace: Path) -> AsyncIterator[AsyncKernelClient]:
    """A kernel started and connected the plain jupyter_client way; shut down on exit."""
    with tempfile.TemporaryDirectory(prefix="wkb-") as root:  # short: IPC socket paths are limited
        manager = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=f"{root}/k")
        await manager.start_kernel(
            env=kernel_environment(Path(root)),
            cwd=str(workspace),
            extra_arguments=list(_KERNEL_FLAGS),
            stdout=subprocess.DEVNULL,  # warmkernel sends its kernel's own output to a log file
            stderr=subprocess.DEVNULL,
        )
        client = manager.client()
        try:
            client.start_channels()
            await client.wait_for_ready(timeout=START_TIMEOUT_S)
            yield client
        finally:
            client.stop_channels()
            with anyio.CancelScope(shield=True):
                await manager.shutdown_kernel(now=True)


async def raw_execute(client: AsyncKernelClient, code: str) -> str:
    """Run a cell; return once both its reply and its idle status arrived, with all its stream text."""
    msg_id = client.execute(code, allow_stdin=False, stop_on_error=False)
    texts: list[str] = []
    while True:
        msg = await client.get_iopub_msg()
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            texts.append(msg["content"]["text"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while (await client.get_shell_msg())["parent_header"].get("msg_id") != msg_id:
        pass
    return "".join(texts)


# -- cases ---------------------------------------------------------------------------------------


async def round_trip(wk: Client, raw: AsyncKernelClient, counts: Counts) -> list[Row]:
    """Trivial cells, alternating between the two so drift hits both alike."""
    progress(f"round trip: {WARM_UP} warm-up + {counts.round_trips} cells each")
    wk_samples: list[float] = []
    raw_samples: list[float] = []
    for index in range(WARM_UP + counts.round_trips):
        wk_time = await timed(lambda: run_cell(wk, "pass"))
        raw_time = await timed(lambda: raw_execute(raw, "pass"))
        if index >= WARM_UP:
            wk_samples.append(wk_time)
            raw_samples.append(raw_time)
    median_wk, median_raw = statistics.median(wk_samples), statistics.median(raw_samples)
    p95_wk, p95_raw = p95(wk_samples), p95(raw_samples)
    n = counts.round_trips
    return [
        Row(
            f"trivial cell round trip, median of {n}",
            ms(median_wk),
            ms(median_raw),
            signed_ms(median_wk - median_raw),
            f"≤ raw + 1 ms: {verdict(median_wk - median_raw <= 0.001)}",
        ),
        Row(
            f"trivial cell round trip, p95 of {n}", ms(p95_wk), ms(p95_raw), signed_ms(p95_wk - p95_raw), "—"
        ),
    ]


def flood_code(lines: int) -> str:
    return f"for i in range({lines}): print(i)"


async def wk_flood(client: Client, lines: int) -> int:
    """Run the flood cell to its end; check every line was recorded; return its number."""
    number = await run_cell(client, f"# warmkernel: --wait 600\n{flood_code(lines)}")
    status = await call(client, "python_execution_status", execution=number)
    if f"stdout {lines}," not in status:
        raise RuntimeError(f"execution {number} did not record {lines} lines:\n{status}")
    return number


async def raw_flood(client: AsyncKernelClient, lines: int) -> int:
    """Run the flood cell keeping all its text; return the text's size in bytes."""
    text = await raw_execute(client, flood_code(lines))
    if text.count("\n") != lines:
        raise RuntimeError(f"the raw client received {text.count(chr(10))} lines, not {lines}")
    return len(text)


@dataclass(frozen=True)
class Flood:
    rows: list[Row]
    execution: int


def flood_row(lines: str, repetitions: int, wk_time: float, raw_time: float) -> Row:
    """The flood's time beside raw's, against the 1.1x target."""
    return Row(
        f"{lines}-line cell, submit to done, median of {repetitions}",
        f"{wk_time:.2f} s",
        f"{raw_time:.2f} s",
        f"{wk_time / raw_time:.2f}x",
        f"≤ 1.1x raw: {verdict(wk_time <= 1.1 * raw_time)}",
    )


async def flood(wk: Client, raw: AsyncKernelClient, counts: Counts) -> Flood:
    """The many-lines cell on both, alternating, with the daemon's RSS around each warmkernel run."""
    server = server_process(await kernel_pid(wk))
    wk_times: list[float] = []
    raw_times: list[float] = []
    growth: list[float] = []
    execution = text_bytes = 0
    for repetition in range(counts.flood_repetitions):
        progress(f"flood of {counts.lines:,} lines: repetition {repetition + 1}/{counts.flood_repetitions}")
        rss_before = server.memory_info().rss
        start = time.perf_counter()
        execution = await wk_flood(wk, counts.lines)
        wk_times.append(time.perf_counter() - start)
        growth.append((server.memory_info().rss - rss_before) / MB)
        start = time.perf_counter()
        text_bytes = await raw_flood(raw, counts.lines)
        raw_times.append(time.perf_counter() - start)
    wk_time, raw_time = statistics.median(wk_times), statistics.median(raw_times)
    n, reps = f"{counts.lines:,}", counts.flood_repetitions
    rows = [
        flood_row(n, reps, wk_time, raw_time),
        Row(
            f"daemon RSS growth per {n}-line cell, median of {reps} (raw: size of the text)",
            f"+{statistics.median(growth):.1f} MB",
            f"{text_bytes / MB:.1f} MB",
            f"{statistics.median(growth) * MB / text_bytes:.2f}x the text",
            "—",
        ),
    ]
    return Flood(rows, execution)


async def median_call(client: Client, calls: int, tool: str, **arguments: Any) -> float:
    return statistics.median([await timed(lambda: call(client, tool, **arguments)) for _ in range(calls)])


async def reads_and_search(wk: Client, execution: int, counts: Counts) -> list[Row]:
    """Reads and a regex search on the flood execution, with the python_status floor."""
    progress(f"reads ({counts.reads} each) and search ({counts.searches}) on execution {execution}")
    middle = counts.lines // 2
    needle = int(counts.lines * 0.765432)
    floor = await median_call(wk, counts.reads, "python_status")
    rows = [Row(f"python_status round trip (floor), median of {counts.reads}", ms(floor), "—", "—", "—")]
    for line_range in ("-10:", f"{middle}:{middle + 20}"):
        seconds = await median_call(
            wk, counts.reads, "read_python_output", execution=execution, line_range=line_range
        )
        case = f'read_python_output "{line_range}", median of {counts.reads}'
        rows.append(Row(case, ms(seconds), "—", f"floor {signed_ms(seconds - floor)}", "—"))
    seconds = await median_call(
        wk,
        counts.searches,
        "search_python_output",
        query=f"^{needle}$",
        execution=execution,
        query_mode="regex",
    )
    case = f'search_python_output "^{needle}$" (regex), median of {counts.searches}'
    rows.append(Row(case, ms(seconds), "—", f"floor {signed_ms(seconds - floor)}", "—"))
    return rows


async def first_reply(workspace: Path, daemons: PrivateDaemons, *flags: str) -> float:
    """Launch a host's `warmkernel mcp`, initialize and run `1`; the time until the reply (closing
    it is not counted)."""
    start = time.perf_counter()
    async with Client(server_parameters(workspace, daemons, *flags)) as client:
        await run_cell(client, "1")
        return time.perf_counter() - start


async def wk_startup(workspace: Path, daemons: PrivateDaemons) -> float:
    """`first_reply` with no live daemon, so it includes the daemon's start; the daemon is stopped
    afterwards (not counted), so the next run starts one too."""
    if daemons.live():
        raise RuntimeError("a daemon is live: this start would not include the daemon's")
    try:
        return await first_reply(workspace, daemons)
    finally:
        daemons.stop_all()


async def raw_startup(workspace: Path) -> float:
    """Start a kernel and wait until it is ready; the time until then (shutdown is not counted)."""
    start = time.perf_counter()
    async with raw_kernel(workspace):
        return time.perf_counter() - start


async def startup(workspace: Path, daemons: PrivateDaemons, counts: Counts) -> list[Row]:
    wk_times: list[float] = []
    raw_times: list[float] = []
    daemons.stop_all()  # the daemon of the other cases
    for repetition in range(counts.startups):
        progress(f"startup with no live daemon: repetition {repetition + 1}/{counts.startups}")
        wk_times.append(await wk_startup(workspace, daemons))
        raw_times.append(await raw_startup(workspace))
    wk_time, raw_time = statistics.median(wk_times), statistics.median(raw_times)
    case = f"startup with no live daemon to first reply / kernel ready, median of {counts.startups}"
    return [Row(case, f"{wk_time:.2f} s", f"{raw_time:.2f} s", f"{wk_time / raw_time:.2f}x", "—")]


# -- running and printing ------------------------------------------------------------------------


async def benchmark(counts: Counts) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="wk-bench-") as directory, private_daemons() as daemons:
        workspace = Path(directory)
        async with AsyncExitStack() as stack:
            load = os.getloadavg()[0]
            progress(f"load average {load:.2f} on {os.cpu_count()} CPUs; other work skews the numbers")
            progress("starting a warmkernel daemon (through its relay) and a raw kernel")
            wk = await stack.enter_async_context(Client(server_parameters(workspace, daemons)))
            raw = await stack.enter_async_context(raw_kernel(workspace))
            await run_cell(wk, "pass")  # the daemon's kernel starts in the background
            rows = await round_trip(wk, raw, counts)
            outcome = await flood(wk, raw, counts)
            rows += outcome.rows
            rows += await reads_and_search(wk, outcome.execution, counts)
        with tempfile.TemporaryDirectory(prefix="wk-start-") as fresh:  # no records to take over
            return rows + await startup(Path(fresh), daemons, counts)


def table(rows: list[Row]) -> str:
    lines = [
        "| case | warmkernel | raw jupyter_client | ratio/difference | target |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [f"| {r.case} | {r.warmkernel} | {r.raw} | {r.comparison} | {r.target} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="warmkernel core benchmarks against raw jupyter_client")
    parser.add_argument("--quick", action="store_true", help="100k lines and 50 round trips")
    counts = QUICK if parser.parse_args().quick else FULL
    rows = anyio.run(benchmark, counts, backend="asyncio")
    print(table(rows))


if __name__ == "__main__":
    main()
