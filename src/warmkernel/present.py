"""Domain objects to the text a model reads, and the same facts as a structured dict.

This is the only module that writes text for the model. Every function returns a `Reply`
whose `text` is identical whatever the result mode; `data` carries the same facts for
structured clients.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warmkernel.config import Settings
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.search import SearchResult
from warmkernel.kernel.helper import Summary, VariableListing
from warmkernel.session import KernelInfo
from warmkernel.types import ExecutionState, ReadableStream
from warmkernel.workspace import Workspace

RUNNING_LINE_CLIP = 200
EMPTY_READ = "No output lines are available."


@dataclass(frozen=True)
class Reply:
    text: str
    data: dict[str, Any] = field(default_factory=dict)


def duration(seconds: float) -> str:
    """`850 ms` below a second, `1.2 s` above."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def clip(text: str, max_chars: int) -> str:
    """`text...[K chars omitted]` when longer than `max_chars`."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}...[{len(text) - max_chars} chars omitted]"


def _call(name: str, **kwargs: object) -> str:
    args = ", ".join(
        f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}" for key, value in kwargs.items()
    )
    return f"{name}({args})".replace("'", '"')


# -- run_python / wait_python ---------------------------------------------------------------


def execution_reply(record: ExecutionRecord, settings: Settings, *, waited_s: float) -> Reply:
    """A run/wait reply: the finished cell's output within budget, or where a running cell is."""
    if not record.state.finished:
        return _running_reply(record, settings, waited_s)
    lines, omitted = _inline(record, settings)
    header = f"In [{record.number}] · {duration(record.elapsed())}:{_ending(record)}"
    text = "\n".join([header, *lines])
    data = _record_facts(record) | {"output": "\n".join(lines), "omitted_lines": omitted}
    return Reply(text, data)


def _ending(record: ExecutionRecord) -> str:
    match record.state:
        case ExecutionState.INTERRUPTED:
            return " interrupted"
        case ExecutionState.KILLED:
            return f" killed ({record.end_reason})"
        case ExecutionState.DIED:
            return f" died ({record.end_reason}); its namespace was lost and a fresh kernel was started"
        case _:
            return ""


def _running_reply(record: ExecutionRecord, settings: Settings, waited_s: float) -> Reply:
    tail = _last_nonblank(record, settings.running_tail_lines)
    number = record.number
    lines = [
        f"In [{number}] · running for {duration(record.elapsed())} (waited {duration(waited_s)})"
        + (f"; last {len(tail)} lines:" if tail else "; no output yet"),
        *(clip(line, RUNNING_LINE_CLIP) for line in tail),
        f"Still running. Next: {_call('wait_python', execution=number)} to keep waiting, "
        f"{_call('read_python_output', execution=number)} to read the output, "
        f"or {_call('interrupt_python')} to stop it.",
    ]
    data = _record_facts(record) | {"waited_s": round(waited_s, 3), "last_lines": tail}
    return Reply("\n".join(lines), data)


def _last_nonblank(record: ExecutionRecord, count: int) -> list[str]:
    output = record.output
    total = output.line_count("combined")
    found: list[str] = []
    stop = total
    while stop > 0 and len(found) < count:
        start = max(0, stop - 64)
        found[:0] = [line for line in output.lines("combined", start, stop) if line.strip()]
        stop = start
    return found[-count:] if count else []


def _inline(record: ExecutionRecord, settings: Settings) -> tuple[list[str], list[int] | None]:
    """The combined lines shown inline, and the omitted [first, last] line numbers if any."""
    output = record.output
    if output.dropped:
        return [dropped(record)], None
    total = output.line_count("combined")
    if record.directives.full_output:
        return output.lines("combined", 0, total), None
    max_lines, max_chars = settings.inline_max_lines, settings.inline_max_chars
    if total <= max_lines and output.char_count("combined") + total <= max_chars:
        return output.lines("combined", 0, total), None
    head = _fit(output.lines("combined", 0, min(total, max_lines // 2)), max_chars // 2)
    tail_start = max(len(head), total - max_lines // 2)
    tail = _fit(output.lines("combined", tail_start, total)[::-1], max_chars // 2)[::-1]
    first, last = len(head) + 1, total - len(tail)
    if first > last:
        return head + tail, None
    note = (
        f"... lines {first}-{last} of {total} omitted; read them with "
        f"{_call('read_python_output', execution=record.number, line_range=f'{first}:{last}')} ..."
    )
    return [*head, note, *tail], [first, last]


def _fit(lines: list[str], budget: int) -> list[str]:
    """Leading lines that fit in `budget` characters; the last one clipped if it overflows."""
    kept: list[str] = []
    for line in lines:
        if budget <= 0:
            break
        kept.append(clip(line, budget))
        budget -= len(line) + 1
    return kept


def _record_facts(record: ExecutionRecord) -> dict[str, Any]:
    return {
        "execution": record.number,
        "state": record.state.value,
        "elapsed_s": round(record.elapsed(), 3),
        "generation": record.generation,
        "error": {"name": record.error_name, "value": record.error_value} if record.error_name else None,
        "end_reason": record.end_reason or None,
        "lines": record.output.line_count("combined"),
    }


# -- read / search ----------------------------------------------------------------------------


def read_reply(
    record: ExecutionRecord,
    stream: ReadableStream,
    lo: int,
    hi: int,
    max_chars: int | None,
    settings: Settings,
) -> Reply:
    """Lines lo..hi (0-based, half-open) of a stream, within the per-reply character cap."""
    total = record.output.line_count(stream)
    facts = {"execution": record.number, "stream": stream, "state": record.state.value, "total_lines": total}
    if record.output.dropped:
        return dropped_reply(record)
    if lo >= hi:
        return Reply(EMPTY_READ, facts | {"first_line": None, "last_line": None, "text": ""})
    budget = settings.read_max_chars
    shown: list[str] = []
    for line in record.output.iter_lines(stream, lo, hi):  # read lazily: the budget ends it
        line = clip(line, max_chars) if max_chars is not None else line
        if shown and len(line) + 1 > budget:
            break
        shown.append(clip(line, budget))
        budget -= len(line) + 1
    last = lo + len(shown)
    header = f"execution {record.number} · {stream} · lines {lo + 1}-{last} of {total} ({record.state.value})"
    parts = [header, *shown]
    if last < hi:
        more = _call(
            "read_python_output", execution=record.number, stream=stream, line_range=f"{last + 1}:{hi}"
        )
        parts.append(f"[reply limit of {settings.read_max_chars:,} characters reached; continue with {more}]")
    data = facts | {"first_line": lo + 1, "last_line": last, "text": "\n".join(shown)}
    return Reply("\n".join(parts), data)


def dropped(record: ExecutionRecord) -> str:
    """What every later read of an execution says once its output was dropped."""
    return f"output of execution {record.number} was dropped to stay under the output limit"


def dropped_reply(record: ExecutionRecord) -> Reply:
    """A read or search of an execution whose output was dropped."""
    return Reply(dropped(record), {"execution": record.number, "state": record.state.value, "dropped": True})


def search_reply(
    record: ExecutionRecord, stream: ReadableStream, query: str, result: SearchResult, max_chars: int | None
) -> Reply:
    count = result.matches_total if result.matches_total is not None else f"at least {result.matches_shown}"
    header = (
        f"search {query!r} ({result.mode}) in execution {record.number} · {stream}: "
        f"{count} matching line{'s' if result.matches_total != 1 else ''}"
    )
    body: list[str] = []
    for index, group in enumerate(result.groups):
        if index:
            body.append("--")
        body.extend(
            f"{'M' if line.is_match else 'C'} {line.number} | "
            + (clip(line.text, max_chars) if max_chars is not None else line.text)
            for line in group
        )
    if result.matches_total is None:
        body.append("more matches exist; counting stopped at the time budget")
    elif result.matches_total > result.matches_shown:
        body.append(f"{result.matches_total - result.matches_shown} more matches")
    data = {
        "execution": record.number,
        "stream": stream,
        "query": query,
        "mode": result.mode,
        "matches_total": result.matches_total,
        "matches_shown": result.matches_shown,
        "groups": [
            [{"line": line.number, "text": line.text, "match": line.is_match} for line in g]
            for g in result.groups
        ],
    }
    return Reply("\n".join([header, *body]), data)


# -- status and lists ---------------------------------------------------------------------------


def execution_status_reply(record: ExecutionRecord) -> Reply:
    output = record.output
    counts = {
        stream: output.line_count(stream)
        for stream in ("combined", "stdout", "stderr", "result", "traceback")
    }
    lines = [
        f"execution {record.number}: {record.state.value}",
        f"started: {record.started_at.isoformat(timespec='milliseconds')}",
        f"elapsed: {duration(record.elapsed())}",
        f"kernel generation: {record.generation}",
    ]
    if record.ended_at is not None:
        lines.insert(2, f"ended: {record.ended_at.isoformat(timespec='milliseconds')}")
    if record.error_name:
        lines.append(f"error: {record.error_name}: {record.error_value}")
    if record.end_reason:
        lines.append(f"reason: {record.end_reason}")
    if record.patch_literals:
        lines.append(f"patch literals converted: {record.patch_literals}")
    if output.dropped:
        lines.append(dropped(record))
    lines.append("lines: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    data = _record_facts(record) | {
        "started_at": record.started_at.isoformat(),
        "ended_at": record.ended_at.isoformat() if record.ended_at else None,
        "line_counts": counts,
        "patch_literals": record.patch_literals,
        "output_dropped": output.dropped,
    }
    return Reply("\n".join(lines), data)


def status_reply(
    workspace: Workspace,
    settings: Settings,
    kernel: KernelInfo,
    running: ExecutionRecord | None,
    latest: ExecutionRecord | None,
) -> Reply:
    resolution = workspace.resolution + (f" ({workspace.config_file})" if workspace.config_file else "")
    lines = [
        f"workspace: {workspace.path}",
        f"workspace resolution: {resolution}",
        f"interpreter: {settings.python}",
        f"kernel: {kernel.state}, generation {kernel.generation}"
        + (f", pid {kernel.pid}" if kernel.pid is not None else ""),
    ]
    if kernel.error:
        lines.append(f"kernel error: {kernel.error}")
    if kernel.connection_file:
        lines.append(f"connection file: {kernel.connection_file} (attach: jupyter console --existing FILE)")
    if running is not None:
        lines.append(f"busy: execution {running.number} running for {duration(running.elapsed())}")
    else:
        lines.append("busy: no")
    if latest is not None:
        lines.append(f"latest execution: {latest.number} ({latest.state.value})")
    data = {
        "workspace": str(workspace.path),
        "workspace_resolution": workspace.resolution,
        "interpreter": settings.python,
        "kernel_state": kernel.state,
        "kernel_pid": kernel.pid,
        "connection_file": kernel.connection_file,
        "generation": kernel.generation,
        "busy": running is not None,
        "running_execution": running.number if running else None,
        "latest_execution": latest.number if latest else None,
    }
    return Reply("\n".join(lines), data)


def list_reply(records: Sequence[ExecutionRecord], limit: int) -> Reply:
    newest = list(reversed(records))[:limit]
    if not newest:
        return Reply("No executions yet.", {"executions": [], "total": 0})
    rows = [
        f"{r.number:>4}  {r.state.value:<11} {duration(r.elapsed()):>9}  "
        f"{r.output.line_count('combined'):>7} lines  {clip(r.first_line, 80)}"
        for r in newest
    ]
    more = len(records) - len(newest)
    if more:
        rows.append(f"({more} older executions; raise limit to see them)")
    data = {
        "executions": [
            {
                "execution": r.number,
                "state": r.state.value,
                "elapsed_s": round(r.elapsed(), 3),
                "first_line": r.first_line,
                "lines": r.output.line_count("combined"),
            }
            for r in newest
        ],
        "total": len(records),
    }
    return Reply("\n".join(rows), data)


def interrupt_reply(record: ExecutionRecord | None) -> Reply:
    if record is None:
        return Reply(
            "idle: no execution is running; nothing was interrupted", {"status": "idle", "execution": None}
        )
    text = (
        f"interrupt_sent: SIGINT for execution {record.number}; "
        f"call {_call('wait_python', execution=record.number)} to see how it ended"
    )
    return Reply(text, {"status": "interrupt_sent", "execution": record.number})


def reset_reply(killed: ExecutionRecord | None, kernel: KernelInfo, workspace: Path) -> Reply:
    what = f"execution {killed.number} was killed" if killed else "no execution was running"
    text = (
        f"reset: kernel generation {kernel.generation} started in {workspace} with an empty namespace; "
        f"{what}; earlier records stay readable"
    )
    return Reply(
        text, {"generation": kernel.generation, "killed_execution": killed.number if killed else None}
    )


# -- variables ----------------------------------------------------------------------------------


def size(n_bytes: int | None) -> str:
    """`512 B`, `1.5 KiB`, `76.3 MiB`; `?` when unknown."""
    if n_bytes is None:
        return "?"
    if n_bytes < 1024:
        return f"{n_bytes} B"
    value = float(n_bytes)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def _extent(facts: dict[str, Any]) -> str:
    shape, length = facts.get("shape"), facts.get("length")
    if isinstance(shape, list):
        return "x".join(str(n) for n in shape) or "scalar"
    return f"len {length}" if isinstance(length, int) else ""


def variables_reply(listing: VariableListing) -> Reply:
    """A table of the user's variables, one per line."""
    rows = listing["variables"]
    table = [("name", "type", "size", "shape/len", "In")] + [
        (
            row["name"],
            clip(row["type"], 48),
            size(row["size_bytes"]),
            _extent(dict(row)),
            str(row["execution"]) if row["execution"] is not None else "",
        )
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]
    notes = [f"{listing['total']} variable{'s' if listing['total'] != 1 else ''}"]
    if listing["total"] > len(rows):
        notes.append(f"the first {len(rows)} by name are shown")
    if listing["modules_hidden"]:
        more = _call("list_python_variables", include_modules=True)
        notes.append(f"{listing['modules_hidden']} modules not listed ({more} lists them)")
    if listing["summary_status"] == "timeout":
        notes.append("sizes and shapes ran out of time; the rows without them show ?")
    if not rows:
        lines = []
    footer = "; ".join(notes) + '. inspect_python_variable(name="NAME") summarizes one.'
    return Reply("\n".join([*lines, footer]), dict(listing))


def summary_reply(summary: Summary) -> Reply:
    """A one-line gist of a variable summary, then the summary itself as JSON."""
    gist = [f"{summary['name']}: {summary['type']}"]
    if extent := _extent(summary):
        gist.append(extent)
    gist.append(size(summary["size_bytes"]))
    if summary.get("execution") is not None:
        gist.append(f"bound by In [{summary['execution']}]")
    if summary["summary_status"] == "timeout":
        gist.append(f"summary timed out after {summary.get('budget_s')} s: type and size only")
    return Reply(" · ".join(gist) + "\n" + _json_text(summary), summary)


def _json_text(data: dict[str, Any]) -> str:
    """Valid JSON with one top-level key per line, and one item per line for lists and dicts of
    containers; everything deeper stays on its line."""

    def compact(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    def nested(value: Any) -> str:
        if isinstance(value, dict) and any(isinstance(item, dict | list) for item in value.values()):
            items = [f"  {compact(key)}: {compact(item)}" for key, item in value.items()]
            return "{\n" + ",\n".join(items) + "\n }"
        if isinstance(value, list) and any(isinstance(item, dict | list) for item in value):
            return "[\n" + ",\n".join(f"  {compact(item)}" for item in value) + "\n ]"
        return compact(value)

    return "{\n" + ",\n".join(f" {compact(key)}: {nested(item)}" for key, item in data.items()) + "\n}"
