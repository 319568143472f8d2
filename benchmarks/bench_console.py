"""The console page at scale: a 10,000,000-line execution and 10,000 executions in Chromium.

One daemon (private directories, `bench_core.PrivateDaemons`) continues a journal prefilled with
9,998 small finished executions, then runs a cell that prints 10,000,000 lines and one small
cell, so the page lists 10,000 executions. Chromium (Debian's, through Playwright) opens the
page with a `warmkernel view` link. Measured inside the page with `performance.now()`, from the
action to the frame that shows its result:

1. Page load: from navigating to the link to the newest execution's output and the list's first
   rows on screen.
2. Open the 10,000,000-line execution: a click on its row, until its last line is on screen
   (the page opens an execution at its end). Alternated with clicking the small one.
3. Jump within it: set the scroll position to 10%, 50%, 90%, ... until every line on screen
   is the one its index names (fetched on demand by windows).
4. The list of 10,000 executions: scroll it to its end (the oldest) until those rows show.
5. A window of 256 lines over HTTP (`/lines`), at the end and in the middle, median of 50: what
   the page pays per fetch.

There is no raw jupyter_client counterpart to a page: the table reports each time against the
issue's budget (an execution of 10,000,000 lines opens in 1 s). The Markdown table goes to
stdout, progress to stderr. `--quick` uses 1,000,000 lines and 1,000 executions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2
from bench_core import PrivateDaemons, private_daemons, progress
from playwright.sync_api import sync_playwright

from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.spill import Spill
from warmkernel.session.journal import Journal
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BUDGET_S = 1.0
REPEATS = 5
WINDOW_READS = 50


@dataclass(frozen=True)
class Counts:
    lines: int
    executions: int


FULL = Counts(lines=10_000_000, executions=10_000)
QUICK = Counts(lines=1_000_000, executions=1_000)

# Each snippet polls every 2 ms (at most) until what the user waits for is on screen; ms, or -1.
_UNTIL = """
    async function until(ready) {
        const t0 = performance.now();
        for (;;) {
            if (ready()) return performance.now() - t0;
            if (performance.now() - t0 > 60000) return -1;
            await new Promise((resolve) => setTimeout(resolve, 2));
        }
    }
    const lastText = () => { const all = document.querySelectorAll('#output .line .tx');
                             return all.length ? all[all.length - 1].textContent : null; };
"""
OPEN_BY_CLICK = (
    """async ([row, expected]) => {"""
    + _UNTIL
    + """
    const t0 = performance.now();
    document.querySelector(`#executions .row[data-index='${row}']`).click();
    const waited = await until(() => lastText() === expected);
    return waited < 0 ? -1 : performance.now() - t0;
}"""
)
JUMP = (
    """async ([fraction, total]) => {"""
    + _UNTIL
    + """
    const output = document.getElementById('output');
    const t0 = performance.now();
    output.scrollTop = fraction * (output.scrollHeight - output.clientHeight);
    const waited = await until(() => {
        const lines = [...document.querySelectorAll('#output .line')];
        return lines.length > 10
            && Math.abs(lines[0].dataset.index - fraction * total) < total / 50
            && lines.every((line) => line.querySelector('.tx').textContent === 'line ' + line.dataset.index);
    });
    return waited < 0 ? -1 : performance.now() - t0;
}"""
)
LIST_END = (
    """async (oldest) => {"""
    + _UNTIL
    + """
    const list = document.getElementById('executions');
    const t0 = performance.now();
    list.scrollTop = list.scrollHeight;
    const waited = await until(() => [...document.querySelectorAll('#executions .row .num')]
        .some((num) => num.textContent === `[${oldest}]`));
    return waited < 0 ? -1 : performance.now() - t0;
}"""
)
LOADED = (
    """async ([expected, rows]) => {"""
    + _UNTIL
    + """
    const waited = await until(() => lastText() === expected
        && document.querySelectorAll('#executions .row .num').length >= rows);
    return waited < 0 ? -1 : performance.now();
}"""
)


def prefill_journal(workspace: Path, daemons: PrivateDaemons, count: int) -> None:
    """`count` small finished executions, as a daemon that ran them would have journaled them."""
    with Journal.open(workspace, daemons.root / "st") as journal:
        spill = Spill(journal.output_directory, 1_000_000, lambda _: None)
        for number in range(1, count + 1):
            record = ExecutionRecord(
                ExecutionNumber(number),
                f"step_{number}()",
                Generation(1),
                output=OutputLog(spill),
                client="bench",
            )
            journal.started(record)
            record.output.append("stdout", f"step {number} done\n")
            record.finish(ExecutionState.COMPLETED)
            journal.finished(record)


def warmkernel(workspace: Path, daemons: PrivateDaemons, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", *args],
        cwd=workspace,
        env={**os.environ, **daemons.env()},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"warmkernel {args[0]} failed: {done.stdout}{done.stderr}")
    return done.stdout


def flood_code(lines: int) -> str:
    """`line 0` ... `line N-1`, written in chunks of 100,000 lines."""
    return (
        "import sys\n"
        f"for start in range(0, {lines}, 100_000):\n"
        f"    stop = min(start + 100_000, {lines})\n"
        "    _ = sys.stdout.write(''.join(f'line {i}\\n' for i in range(start, stop)))\n"
    )


def median_max(samples: list[float]) -> str:
    return f"{statistics.median(samples):.0f} ms (max {max(samples):.0f})"


def ratio(samples: list[float]) -> str:
    return f"{max(samples) / 1000 / BUDGET_S:.2f}x of 1 s"


def measure(counts: Counts) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    with private_daemons() as daemons, tempfile.TemporaryDirectory(prefix="wk-console-") as tmp:
        workspace = Path(tmp).resolve()
        prefill = counts.executions - 2
        progress(f"journaling {prefill:,} executions")
        prefill_journal(workspace, daemons, prefill)
        warmkernel(workspace, daemons, "start")
        progress(f"running a cell of {counts.lines:,} lines")
        began = time.perf_counter()
        warmkernel(workspace, daemons, "run", "--timeout", "3600", flood_code(counts.lines))
        progress(f"  done in {time.perf_counter() - began:.1f} s")
        warmkernel(workspace, daemons, "run", "print('small')")
        link = warmkernel(workspace, daemons, "view", "--no-open").strip()

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(link)
            loaded = page.evaluate(LOADED, ["small", 20])  # ms since navigation started
            rows.append((f"page load, {counts.executions:,} executions listed", f"{loaded:.0f} ms", "-"))

            opens: list[float] = []
            for _ in range(REPEATS):
                opens.append(page.evaluate(OPEN_BY_CLICK, [1, f"line {counts.lines - 1}"]))
                page.evaluate(OPEN_BY_CLICK, [0, "small"])
            page.evaluate(OPEN_BY_CLICK, [1, f"line {counts.lines - 1}"])
            rows.append(
                (
                    f"open the {counts.lines:,}-line execution (click to last line shown)",
                    median_max(opens),
                    ratio(opens),
                )
            )

            jumps = [page.evaluate(JUMP, [fraction, counts.lines]) for fraction in (0.1, 0.5, 0.9, 0.3, 0.7)]
            rows.append(
                ("jump within it (scroll to 10-90%, lines on screen)", median_max(jumps), ratio(jumps))
            )

            to_end = page.evaluate(LIST_END, 1)
            rows.append((f"scroll the list to its oldest of {counts.executions:,}", f"{to_end:.0f} ms", "-"))

            cookies = {c.get("name", ""): c.get("value", "") for c in page.context.cookies()}
            base = link.split("?")[0]
            number = counts.executions - 1
            with httpx2.Client(base_url=base, cookies=cookies, trust_env=False, timeout=30) as http:
                for where, start in (("end", counts.lines - 256), ("middle", counts.lines // 2)):
                    samples = []
                    for _ in range(WINDOW_READS):
                        t0 = time.perf_counter()
                        answer = http.get(
                            f"/api/kernels/main/executions/{number}/lines?start={start}&stop={start + 256}"
                        )
                        samples.append((time.perf_counter() - t0) * 1000)
                        assert answer.json()["lines"][0]["text"] == f"line {start}"
                    rows.append((f"window of 256 lines over HTTP, at the {where}", median_max(samples), "-"))
            browser.close()
    return rows


def table(rows: list[tuple[str, str, str]]) -> str:
    lines = ["| case | measured (median, max) | against the 1 s budget |", "|---|---:|---:|"]
    lines += [f"| {case} | {value} | {against} |" for case, value, against in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="the console page at scale, in Chromium")
    parser.add_argument("--quick", action="store_true", help="1,000,000 lines and 1,000 executions")
    counts = QUICK if parser.parse_args().quick else FULL
    progress(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(table(measure(counts)))


if __name__ == "__main__":
    main()
