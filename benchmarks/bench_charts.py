"""Plotly figures as pictures: a cell whose value is a figure, through warmkernel (the daemon draws
it with kaleido and Chromium), next to the same cell on a raw kernel, which draws nothing.

warmkernel is measured as hosts run it (`python -m warmkernel mcp`, a relay to the workspace's
daemon, MCP SDK client): from submission to the reply, which carries the PNG. The first figure
opens the daemon's Chromium; the later ones reuse it (`execution.charts.Charts`). For scale, the
same figure drawn by `kaleido.calc_fig` in this process, which opens and closes a browser per
figure, as warmkernel did before. Cells alternate with raw; medians. The Markdown table goes to
stdout, progress to stderr. `--quick` draws 4 figures instead of 10. It needs the `plots` extra
and a Chromium (Debian's `chromium`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from bench_core import (
    Row,
    call,
    ms,
    private_daemons,
    progress,
    raw_execute,
    raw_kernel,
    run_cell,
    server_parameters,
    table,
)
from mcp import Client

from warmkernel.execution.charts import PLOTLY, unavailable


def figure_cell(index: int) -> str:
    """A cell whose value is a figure (each a little different)."""
    return f"go.Figure(go.Scatter(x=list(range(50)), y=[(i * {index + 1}) % 17 for i in range(50)]))"


async def one_shot_figures(count: int) -> list[float]:
    """`kaleido.calc_fig` on the figure of `figure_cell`, a browser opened and closed each time."""
    import kaleido
    import plotly.graph_objects as go

    times = []
    for index in range(count):
        figure = json.loads(eval(figure_cell(index), {"go": go}).to_json())
        start = time.perf_counter()
        await kaleido.calc_fig(figure, opts={"format": "png", "width": 800, "height": 500})
        times.append(time.perf_counter() - start)
    return times


async def benchmark(figures: int) -> list[Row]:
    reason = unavailable(PLOTLY)
    if reason is not None:
        raise SystemExit(f"bench_charts: {reason}")
    with tempfile.TemporaryDirectory(prefix="wk-bench-") as directory, private_daemons() as daemons:
        workspace = Path(directory)
        progress(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        async with Client(server_parameters(workspace, daemons)) as wk, raw_kernel(workspace) as raw:
            await run_cell(wk, "import plotly.graph_objects as go")
            await raw_execute(raw, "import plotly.graph_objects as go")
            wk_times, raw_times = [], []
            for index in range(figures):
                progress(f"figure {index + 1} of {figures}")
                code = figure_cell(index)
                start = time.perf_counter()
                text = await call(wk, "run_python", freeform=code)
                wk_times.append(time.perf_counter() - start)
                if "[image 1: image/png" not in text:
                    raise RuntimeError(f"figure {index + 1} was not drawn: {text[:300]}")
                start = time.perf_counter()
                await raw_execute(raw, code)
                raw_times.append(time.perf_counter() - start)
        progress("kaleido.calc_fig, a browser per figure")
        shots = await one_shot_figures(3)
    later, raw_median = statistics.median(wk_times[1:]), statistics.median(raw_times)
    return [
        Row(
            "Plotly figure cell, the first (opens the daemon's Chromium)",
            ms(wk_times[0]),
            ms(raw_times[0]),
            f"+{(wk_times[0] - raw_times[0]) * 1000:.0f} ms",
            "—",
        ),
        Row(
            f"Plotly figure cell, the later ones (the same Chromium), median of {figures - 1}",
            ms(later),
            ms(raw_median),
            f"+{(later - raw_median) * 1000:.0f} ms",
            "—",
        ),
        Row(
            "one figure by `kaleido.calc_fig`, a browser per figure (warmkernel before), median of 3",
            ms(statistics.median(shots)),
            "—",
            f"{statistics.median(shots) / later:.1f}x the later cells",
            "—",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="Plotly figures drawn by the daemon, beside raw")
    parser.add_argument("--quick", action="store_true", help="4 figures instead of 10")
    figures = 4 if parser.parse_args().quick else 10
    print(table(anyio.run(benchmark, figures, backend="asyncio")))


if __name__ == "__main__":
    main()
