"""The path between a host and its daemon, measured so that a loaded machine disturbs it little.

On a shared machine the medians of `bench_daemon.py` move with the load. This script measures
what the load disturbs less, for the code here and, with `--baseline SRC`, for another source
tree (e.g. an older commit's `src`, from `git archive`), the two in turn:

1. The `python_status` and `run_python("pass")` round trips of a host that speaks JSON lines
   itself (no MCP SDK, whose own cost would hide the path's) to `warmkernel mcp` attached to a
   live daemon, the trees' calls interleaved: p5, p25 and median.
2. CPU per call of the daemon and of the relay (psutil, over interleaved blocks of 50 calls).
3. CPU the daemon spends from its spawn until it is ready (`warmkernel start` has returned).

Every daemon runs in private directories (`bench_core.private_daemons`) and is stopped at the
end. The Markdown table goes to stdout, progress and the load average to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import psutil
from bench_core import PrivateDaemons, private_daemons, progress

BLOCK = 50
WARM_UP = 20
INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"},
}
ARGUMENTS: dict[str, dict[str, str]] = {"python_status": {}, "run_python": {"freeform": "pass"}}


@dataclass
class Host:
    """A host speaking MCP to `warmkernel mcp` over its stdio, a JSON line a message, no SDK."""

    process: subprocess.Popen[bytes]
    ids: Iterator[int] = field(default_factory=lambda: count(1))
    daemon: psutil.Process | None = None

    def request(self, method: str, params: dict[str, Any]) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        number = next(self.ids)
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while json.loads(self.process.stdout.readline()).get("id") != number:
            pass  # a notification

    def call(self, tool: str) -> float:
        start = time.perf_counter()
        self.request("tools/call", {"name": tool, "arguments": ARGUMENTS.get(tool, {})})
        return time.perf_counter() - start

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far of the daemon and of the relay."""
        assert self.daemon is not None
        return _cpu(self.daemon), _cpu(psutil.Process(self.process.pid))


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _environment(daemons: PrivateDaemons, src: Path | None) -> dict[str, str]:
    """The run's private directories; `src` first on the path (None: the code here)."""
    return {**os.environ, **daemons.env(), **({"PYTHONPATH": str(src)} if src is not None else {})}


@contextmanager
def connected_host(src: Path | None) -> Iterator[Host]:
    """`warmkernel mcp` of the tree `src` in a fresh workspace, its daemon started, initialized."""
    with private_daemons() as daemons, open_host(daemons.new_workspace(), daemons, src) as host:
        yield host


@contextmanager
def open_host(workspace: Path, daemons: PrivateDaemons, src: Path | None = None) -> Iterator[Host]:
    """`warmkernel mcp` of the tree `src` in `workspace`, attached to its daemon (started if there
    is none), initialized."""
    argv = [sys.executable, "-m", "warmkernel", "mcp", "--idle-stop", "900"]
    with launched(argv, workspace, _environment(daemons, src)) as host:
        (descriptor,) = daemons.live()
        host.daemon = psutil.Process(descriptor.pid)
        yield host


@contextmanager
def launched(argv: list[str], cwd: Path, env: dict[str, str]) -> Iterator[Host]:
    """The MCP server `argv` on a host's pipes, initialized; its stdin closed at the end."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    host = Host(process)
    try:
        host.request("initialize", INITIALIZE)
        assert process.stdin is not None
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        process.stdin.flush()
        yield host
    finally:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(30)


def round_trips(hosts: dict[str, Host], tool: str, calls: int) -> dict[str, list[float]]:
    """`calls` of `tool` on each host, interleaved (the order flips every round)."""
    progress(f"{tool}: {WARM_UP} warm-up + {calls} calls on each of {', '.join(hosts)}")
    samples: dict[str, list[float]] = {name: [] for name in hosts}
    for index in range(WARM_UP + calls):
        order = list(hosts.items()) if index % 2 else list(reversed(hosts.items()))
        for name, host in order:
            elapsed = host.call(tool)
            if index >= WARM_UP:
                samples[name].append(elapsed)
    return samples


def cpu_per_call(hosts: dict[str, Host], tool: str, calls: int) -> dict[str, tuple[float, float]]:
    """CPU seconds per call of the daemon and of the relay, over interleaved blocks of calls."""
    progress(f"{tool}: CPU over {calls} calls on each, in blocks of {BLOCK}")
    spent = {name: [0.0, 0.0] for name in hosts}
    for _ in range(max(1, calls // BLOCK)):
        for name, host in hosts.items():
            daemon, relay = host.cpu()
            for _ in range(BLOCK):
                host.call(tool)
            after = host.cpu()
            spent[name][0] += after[0] - daemon
            spent[name][1] += after[1] - relay
    blocks = max(1, calls // BLOCK) * BLOCK
    return {name: (daemon / blocks, relay / blocks) for name, (daemon, relay) in spent.items()}


def start_cpu(trees: dict[str, Path | None], starts: int) -> dict[str, list[float]]:
    """CPU seconds of each tree's daemon from its spawn until `warmkernel start` has returned."""
    progress(f"daemon start: {starts} on each of {', '.join(trees)}, in turn")
    spent: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(starts):
        for name, src in trees.items():
            with private_daemons() as daemons:
                subprocess.run(
                    [sys.executable, "-m", "warmkernel", "start", "--idle-stop", "900"],
                    cwd=daemons.new_workspace(),
                    env=_environment(daemons, src),
                    stdout=subprocess.DEVNULL,
                    check=True,
                )
                (descriptor,) = daemons.live()
                spent[name].append(_cpu(psutil.Process(descriptor.pid)))
    return spent


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


def table(trees: dict[str, Path | None], calls: int, starts: int) -> str:
    names = list(trees)
    lines = [f"| measure | {' | '.join(names)} |", "|---|" + "---:|" * len(names)]
    with ExitStack() as stack:
        hosts = {name: stack.enter_context(connected_host(src)) for name, src in trees.items()}
        for tool in ARGUMENTS:
            samples = round_trips(hosts, tool, calls)
            quantiles = {name: statistics.quantiles(values, n=20) for name, values in samples.items()}
            cells = [
                f"{_ms(quantiles[n][0])} / {_ms(quantiles[n][4])} / {_ms(statistics.median(samples[n]))}"
                for n in names
            ]
            lines.append(
                f"| `{tool}` round trip, JSON-lines host, {calls} interleaved: p5 / p25 / median | "
                + " | ".join(cells)
                + " |"
            )
            cpu = cpu_per_call(hosts, tool, calls)
            cells = [f"{_us(cpu[n][0])} + {_us(cpu[n][1])}" for n in names]
            lines.append(f"| CPU per `{tool}` call: daemon + relay | " + " | ".join(cells) + " |")
    spent = start_cpu(trees, starts)
    cells = [f"{statistics.median(spent[n]) * 1e3:.0f} ms (min {min(spent[n]) * 1e3:.0f} ms)" for n in names]
    lines.append(f"| daemon CPU from spawn to ready, median of {starts} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="the host-to-daemon path, measured to resist load")
    parser.add_argument("--baseline", type=Path, help="another tree's src directory, measured in turn")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    trees: dict[str, Path | None] = {"this tree": None}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), **trees}
    progress(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(table(trees, args.calls, args.starts))
    progress(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
