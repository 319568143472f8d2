"""Domain objects to the text a model reads, and the same facts as a structured dict.

This is the only module that writes text for the model. Every function returns a `Reply`
whose `text` is identical whatever the result mode; `data` carries the same facts for
structured clients.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from warmkernel.config import Settings
from warmkernel.execution.images import StoredImage
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.execution.search import SearchResult
from warmkernel.kernel.base import KernelInfo
from warmkernel.kernel.helper import Summary, VariableListing
from warmkernel.notebook.binding import NotebookRun, NotebookView
from warmkernel.types import ExecutionState, ReadableStream
from warmkernel.workspace import Workspace

RUNNING_LINE_CLIP = 200
EMPTY_READ = "No output lines are available."


@dataclass(frozen=True)
class Picture:
    """An image a reply carries as MCP image content."""

    mime: str
    data: bytes


@dataclass(frozen=True)
class Reply:
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    more: tuple[str | Picture, ...] = ()
    """Content after `text`, in order: pictures, and the text between and after them."""


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


def execution_reply(record: ExecutionRecord, settings: Settings, *, waited: WaitEnd) -> Reply:
    """A run/wait reply: the finished cell's output within budget with its images, where a running
    cell is and why the wait ended, or the prompt a cell waits at."""
    if record.prompt is not None:
        return _awaiting_reply(record, settings)
    if not record.state.finished:
        return _running_reply(record, settings, waited)
    shown, omitted = _inline(record, settings)
    header = f"In [{record.number}] · {duration(record.elapsed())}:{_ending(record)}"
    chunks, delivered, left_out = _with_pictures(record, shown, settings)
    text_lines = [line for chunk in chunks if isinstance(chunk, list) for line in chunk]
    data = _record_facts(record) | {
        "output": "\n".join(text_lines),
        "omitted_lines": omitted,
        "images": delivered,
        "images_not_shown": left_out,
    }
    first, *rest = chunks
    assert isinstance(first, list), "text comes before every picture: its caption"
    more = tuple(chunk if isinstance(chunk, Picture) else "\n".join(chunk) for chunk in rest)
    return Reply("\n".join([header, *first]), data, more)


def _with_pictures(
    record: ExecutionRecord, shown: list[tuple[int | None, str]], settings: Settings
) -> tuple[list[list[str] | Picture], list[int], list[int]]:
    """Shown lines split at each image caption, with the picture after it while within the limits;
    a caption past a limit names the call that reads its image instead."""
    captions = record.displays.captions()
    chunks: list[list[str] | Picture] = [[]]
    delivered: list[int] = []
    left_out: list[int] = []
    for index, line in shown:
        image = captions.get(index) if index is not None else None
        if image is None:
            _last_text(chunks).append(line)
            continue
        refusal = _refusal(image, len(delivered), settings)
        if refusal is None:
            _last_text(chunks).append(line)
            chunks.append(Picture(image.mime, record.displays.images.read(image.ordinal)))
            delivered.append(image.ordinal)
        else:
            _last_text(chunks).append(
                f"{line} not shown ({refusal}); read it with {_image_call(record, image)}"
            )
            left_out.append(image.ordinal)
    return chunks, delivered, left_out


def _last_text(chunks: list[list[str] | Picture]) -> list[str]:
    last = chunks[-1]
    if isinstance(last, Picture):
        chunks.append(last := [])
    return last


def _refusal(image: StoredImage, delivered: int, settings: Settings) -> str | None:
    if image.size > settings.max_image_bytes:
        return f"larger than the {settings.max_image_bytes:,}-byte limit for an image in a reply"
    if delivered >= settings.max_images_per_reply:
        return f"a reply shows at most {settings.max_images_per_reply} images"
    return None


def _image_call(record: ExecutionRecord, image: StoredImage) -> str:
    return _call(
        "read_python_output",
        execution=record.number,
        stream="images",
        line_range=f"{image.ordinal}:{image.ordinal}",
    )


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


def _running_reply(record: ExecutionRecord, settings: Settings, waited: WaitEnd) -> Reply:
    tail = _last_nonblank(record, settings.running_tail_lines)
    number = record.number
    why = (
        f"silent for {duration(waited.silence_s)}"
        if waited.silence_s is not None
        else f"waited {duration(waited.waited_s)}"
    )
    lines = [
        f"In [{number}] · running for {duration(record.elapsed())} ({why})"
        + (f"; last {len(tail)} lines:" if tail else "; no output yet"),
        *(clip(line, RUNNING_LINE_CLIP) for line in tail),
        f"Still running. Next: {_call('wait_python', execution=number)} to keep waiting, "
        f"{_call('read_python_output', execution=number)} to read the output, "
        f"or {_call('interrupt_python')} to stop it.",
    ]
    data = _record_facts(record) | {
        "waited_s": round(waited.waited_s, 3),
        "returned_because": waited.reason,
        "last_lines": tail,
    }
    return Reply("\n".join(lines), data)


def _awaiting_reply(record: ExecutionRecord, settings: Settings) -> Reply:
    assert record.prompt is not None
    tail = _last_nonblank(record, settings.running_tail_lines)
    number = record.number
    prompt = json.dumps(clip(record.prompt.text, RUNNING_LINE_CLIP), ensure_ascii=False)
    what = (
        f"the password prompt {prompt} (the answer is not written to the output)"
        if record.prompt.password
        else f"the prompt {prompt}"
    )
    lines = [
        f"In [{number}] · awaiting input after {duration(record.elapsed())}"
        + (f"; last {len(tail)} lines:" if tail else ":"),
        *(clip(line, RUNNING_LINE_CLIP) for line in tail),
        f"Waiting for input at {what}. Next: "
        f"{_call('send_python_input', text='...', execution=number)} to answer, "
        f"or {_call('interrupt_python')} to stop it.",
    ]
    data = _record_facts(record) | {
        "prompt": record.prompt.text,
        "password": record.prompt.password,
        "last_lines": tail,
    }
    return Reply("\n".join(lines), data)


def progress_message(record: ExecutionRecord) -> str:
    """The message of a progress notification: elapsed time and the latest output line."""
    last = _last_nonblank(record, 1)
    where = f": {clip(last[0], RUNNING_LINE_CLIP)}" if last else "; no output yet"
    return f"In [{record.number}] running for {duration(record.elapsed())}{where}"


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


_Shown = list[tuple[int | None, str]]
"""Lines of an inline reply, each with its 0-based combined line number (None for our notes)."""


def _inline(record: ExecutionRecord, settings: Settings) -> tuple[_Shown, list[int] | None]:
    """The combined lines shown inline, and the omitted [first, last] line numbers if any.

    Only what follows the last clear_output is shown, without the states of a display that a
    later state replaced and without the text/plain of an image (its caption stands for it).
    """
    output = record.output
    if output.dropped:
        return [(None, dropped(record))], None
    total = output.line_count("combined")
    start = min(record.displays.cleared_before, total)
    hidden = record.displays.hidden_lines()

    def visible(lo: int, hi: int) -> _Shown:
        return [(i, line) for i, line in enumerate(output.lines("combined", lo, hi), lo) if i not in hidden]

    cleared: _Shown = []
    if start:
        call = _call("read_python_output", execution=record.number, line_range=f"1:{start}")
        what = "line 1 was" if start == 1 else f"lines 1-{start} were"
        cleared = [(None, f"[{what} cleared by clear_output; read with {call}]")]
    max_lines, max_chars = settings.inline_max_lines, settings.inline_max_chars
    fits = total - start <= max_lines and output.char_count("combined") + total <= max_chars
    if fits or record.directives.full_output:
        return cleared + visible(start, total), None
    head = _fit(visible(start, min(total, start + max_lines // 2)), max_chars // 2)
    head_end = head[-1][0] + 1 if head and head[-1][0] is not None else start
    tail = _fit(visible(max(head_end, total - max_lines // 2), total)[::-1], max_chars // 2)[::-1]
    tail_start = tail[0][0] if tail and tail[0][0] is not None else total
    first, last = head_end + 1, tail_start
    if first > last:
        return cleared + head + tail, None
    note = (
        f"... lines {first}-{last} of {total} omitted; read them with "
        f"{_call('read_python_output', execution=record.number, line_range=f'{first}:{last}')} ..."
    )
    return [*cleared, *head, (None, note), *tail], [first, last]


def _fit(lines: _Shown, budget: int) -> _Shown:
    """Leading lines that fit in `budget` characters; the last one clipped if it overflows."""
    kept: _Shown = []
    for index, line in lines:
        if budget <= 0:
            break
        kept.append((index, clip(line, budget)))
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


def images_reply(record: ExecutionRecord, lo: int, hi: int, settings: Settings) -> Reply:
    """Images lo..hi (0-based, half-open, by ordinal) with their captions, within the per-reply count."""
    images = record.displays.images
    total = len(images)
    facts = {
        "execution": record.number,
        "stream": "images",
        "state": record.state.value,
        "total_images": total,
    }
    if record.output.dropped:
        return dropped_reply(record)
    if lo >= hi:
        empty = f"execution {record.number} has no images" if not total else "No images are selected."
        return Reply(empty, facts | {"images": []})
    chosen = images.images[lo:hi][: settings.max_images_per_reply]
    last = lo + len(chosen)
    parts: list[str | Picture] = []
    for image in chosen:
        parts += [image.caption, Picture(image.mime, images.read(image.ordinal))]
    if last < hi:
        more = _call(
            "read_python_output", execution=record.number, stream="images", line_range=f"{last + 1}:{hi}"
        )
        parts.append(f"[a reply shows at most {settings.max_images_per_reply} images; continue with {more}]")
    header = f"execution {record.number} · images {lo + 1}-{last} of {total} ({record.state.value})"
    first, *rest = parts
    assert isinstance(first, str)
    data = facts | {
        "images": [
            {"image": i.ordinal, "mime": i.mime, "bytes": i.size, "width": i.width, "height": i.height}
            for i in chosen
        ]
    }
    return Reply(f"{header}\n{first}", data, tuple(rest))


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
    place = kernel.place
    lines = [
        f"workspace: {workspace.path}",
        f"workspace resolution: {resolution}",
        f"interpreter: {settings.python}"
        if settings.jupyter_url is None
        else f"interpreter: kernelspec {settings.kernel_name!r} of the Jupyter server",
        f"kernel: {kernel.state}, generation {kernel.generation}"
        + (f", pid {place.pid}" if place.pid is not None else "")
        + (f", kernel {place.kernel_id} on {place.server_url}" if place.server_url else ""),
    ]
    if kernel.error:
        lines.append(f"kernel error: {kernel.error}")
    if place.connection_file:
        lines.append(f"connection file: {place.connection_file} (attach: jupyter console --existing FILE)")
    if kernel.spare_kernels_ready is not None:
        lines.append(f"spare kernels: {kernel.spare_kernels_ready} of {settings.spare_kernels} ready")
    if place.cwd is not None:
        lines.append(f"kernel working directory: {place.cwd} (the Jupyter server's choice, on its machine)")
        if place.cwd != str(workspace.path):
            lines.append(
                "limits: the kernel sees the server's files, not this workspace's; notebook mode needs "
                "the notebook at the same path on both sides"
            )
    if running is not None:
        doing = "awaiting input after" if running.prompt is not None else "running for"
        lines.append(f"busy: execution {running.number} {doing} {duration(running.elapsed())}")
    else:
        lines.append("busy: no")
    if latest is not None:
        lines.append(f"latest execution: {latest.number} ({latest.state.value})")
    data = {
        "workspace": str(workspace.path),
        "workspace_resolution": workspace.resolution,
        "interpreter": settings.python,
        "kernel_state": kernel.state,
        "kernel_pid": place.pid,
        "connection_file": str(place.connection_file) if place.connection_file else None,
        "kernel_server_url": place.server_url,
        "kernel_id": place.kernel_id,
        "kernel_cwd": place.cwd,
        "generation": kernel.generation,
        "spare_kernels_ready": kernel.spare_kernels_ready,
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


# -- notebook -----------------------------------------------------------------------------------

_SAVE_SKIPPED = {
    "cell_missing": "the cell is no longer in the file",
    "source_changed": "its source changed on disk since it ran",
    "file_changed_during_write": "the file changed while it was being written",
}


def notebook_status_reply(view: NotebookView, settings: Settings) -> Reply:
    """Every code cell's state and reasons, then the plan and the call that runs it."""
    cells = view.status.cells
    counts = {
        state: sum(cell.state == state for cell in cells)
        for state in ("fresh", "stale", "never_run", "running")
    }
    tally = ", ".join(f"{count} {state.replace('_', ' ')}" for state, count in counts.items() if count)
    lines = [
        f"notebook {view.shown} · {len(cells)} code cell{'s' if len(cells) != 1 else ''}"
        + (f": {tally}" if tally else "")
    ]
    if not view.facts_current:
        lines.append("note: a cell is running; names and files are as of the last finished execution")
    lines.extend(_cell_table(view, settings))
    for cell_id, outcome in view.unsaved.items():
        why = _SAVE_SKIPPED.get(outcome, "writing it failed")
        lines.append(f"outputs of cell {cell_id}'s last run are not in the file: {why}")
    lines.append(_plan_line(view))
    return Reply("\n".join(lines), _status_facts(view))


def _cell_table(view: NotebookView, settings: Settings) -> list[str]:
    derived = {cell.id for cell in view.notebook.cells if cell.id_derived}
    rows = [
        (
            str(cell.index),
            cell.id + ("*" if cell.id in derived else ""),
            cell.state,
            str(cell.execution) if cell.execution is not None else "",
            ", ".join(cell.reasons),
            clip(" ".join(cell.defines), 60),
        )
        for cell in view.status.cells
    ]
    table = _columns([("#", "id", "state", "In", "reasons", "defines"), *rows])
    if len(table) > settings.inline_max_lines or sum(map(len, table)) > settings.inline_max_chars:
        table = _columns([("#", "id", "state", "In", "reasons", "defines"), *_fold_fresh(rows)])
    budget = settings.inline_max_chars
    shown: list[str] = []
    for line in table[: settings.inline_max_lines]:
        budget -= len(line) + 1
        if budget < 0:
            break
        shown.append(line)
    if len(shown) < len(table):
        shown.append(f"... {len(table) - len(shown)} more rows; structured content (--json) lists every cell")
    if derived:
        shown.append("* derived id: the file gives this cell none; it follows the cell's source and position")
    return shown


def _fold_fresh(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Runs of fresh cells as one row each, so a long notebook's table shows what is not fresh."""
    folded: list[tuple[str, ...]] = []
    run: list[tuple[str, ...]] = []
    for row in [*rows, None]:
        if row is not None and row[2] == "fresh":
            run.append(row)
            continue
        if len(run) > 1:
            folded.append((f"{run[0][0]}-{run[-1][0]}", f"({len(run)} cells)", "fresh", "", "", ""))
        else:
            folded.extend(run)
        run = []
        if row is not None:
            folded.append(row)
    return folded


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _plan_line(view: NotebookView) -> str:
    plan = view.status.plan
    if not plan:
        running = [cell.id for cell in view.status.cells if cell.state == "running"]
        return f"plan: empty; cell {running[0]} is running" if running else "plan: empty; every cell is fresh"
    return f"plan: {', '.join(plan)}. {_call('run_notebook_cells', path=view.shown)} runs them in order"


def _status_facts(view: NotebookView) -> dict[str, Any]:
    derived = {cell.id for cell in view.notebook.cells if cell.id_derived}
    return {
        "notebook": view.shown,
        "cells": [
            {
                "index": cell.index,
                "id": cell.id,
                "id_derived": cell.id in derived,
                "state": cell.state,
                "reasons": list(cell.reasons),
                "defines": list(cell.defines),
                "execution": cell.execution,
                "depends_on": list(cell.depends_on),
            }
            for cell in view.status.cells
        ],
        "plan": list(view.status.plan),
        "facts_current": view.facts_current,
        "outputs_not_saved": dict(view.unsaved),
    }


def notebook_run_reply(
    run: NotebookRun, view: NotebookView | None, settings: Settings, *, waited_s: float
) -> Reply:
    """Each cell's reply as run_python gives it (images included), then how the run ended and what
    is still stale. The cells share the inline budget. `view` is the notebook after the run; None
    while a cell still runs."""
    entries = list(run.results)
    if run.current is not None:
        entries.append(run.current)
    share = max(1, len(entries))
    per_cell = replace(
        settings,
        inline_max_lines=max(20, settings.inline_max_lines // share),
        inline_max_chars=max(1000, settings.inline_max_chars // share),
        max_images_per_reply=max(1, settings.max_images_per_reply // share),
    )
    names = ", ".join(cell.id for cell in run.cells) or "none"
    parts: list[str | Picture] = [
        f"run_notebook_cells {run.shown} · {len(run.cells)} cell{'s' if len(run.cells) != 1 else ''}: {names}"
    ]
    cells: list[dict[str, Any]] = []
    skipped: list[str] = []
    for cell, record in entries:
        waited = WaitEnd("finished" if record.state.finished else "timeout", waited_s)
        reply = execution_reply(record, per_cell, waited=waited)
        for part in (f"[cell {cell.index} · {cell.id}]", reply.text, *reply.more):
            _add_part(parts, part)
        saved, error = run.saves.get(cell.id, ("pending", ""))
        cells.append({"index": cell.index, "id": cell.id} | reply.data | {"outputs_saved": saved})
        if saved not in ("saved", "pending", "not_saved"):
            why = _SAVE_SKIPPED.get(saved, error)
            skipped.append(f"outputs of cell {cell.id} not saved to {run.shown}: {why}")
    lines = [*_run_ending(run), *skipped]
    data: dict[str, Any] = {
        "notebook": run.shown,
        "state": _run_state(run),
        "cells": cells,
        "not_run": [cell.id for cell in run.not_run],
        "failure": {"code": run.failure.code, "message": run.failure.message} if run.failure else None,
    }
    if view is not None:
        still = [cell for cell in view.status.cells if cell.state != "fresh"]
        listed = ", ".join(f"{cell.id} ({', '.join(cell.reasons) or cell.state})" for cell in still)
        lines.append(f"still stale: {listed}" if still else "every cell is fresh")
        data["status"] = _status_facts(view)
    for line in lines:
        _add_part(parts, line)
    first, *more = parts
    assert isinstance(first, str), "a run reply starts with its header line"
    return Reply(first, data, tuple(more))


def _add_part(parts: list[str | Picture], part: str | Picture) -> None:
    """Text joins the text before it as new lines; a picture starts a new content block."""
    if isinstance(part, str) and parts and isinstance(parts[-1], str):
        parts[-1] = f"{parts[-1]}\n{part}"
    else:
        parts.append(part)


def _run_ending(run: NotebookRun) -> list[str]:
    not_run = ", ".join(cell.id for cell in run.not_run)
    if run.current is not None:
        cell, record = run.current
        number = record.number
        rest = f"; then {not_run}" if not_run else ""
        return [
            f"Still running: cell {cell.id} as In [{number}]{rest}. Next: "
            f"{_call('wait_python', execution=number)} waits for it, "
            f"{_call('notebook_status', path=run.shown)} follows the run, "
            f"{_call('interrupt_python')} stops it."
        ]
    if run.failure is not None:
        return [f"stopped: {run.failure}" + (f"; not run: {not_run}" if not_run else "")]
    if not_run and run.results and (last := run.results[-1])[1].state is not ExecutionState.COMPLETED:
        return [f"stopped after cell {last[0].id} ({last[1].state.value}); not run: {not_run}"]
    if not_run:
        return [f"stopped by an interrupt or a reset; not run: {not_run}"]
    return []


def _run_state(run: NotebookRun) -> str:
    """The run's state for exit statuses: running, completed, or the worst state a cell ended in."""
    if not run.done.is_set():
        return "running"
    if run.failure is not None:
        return "error"
    states = {record.state for _, record in run.results}
    for state in (
        ExecutionState.DIED,
        ExecutionState.KILLED,
        ExecutionState.INTERRUPTED,
        ExecutionState.ERROR,
    ):
        if state in states:
            return state.value
    return "interrupted" if run.not_run else "completed"


def notebook_watch_reply(view: NotebookView, cell_id: str, file: str) -> Reply:
    cell = next(cell for cell in view.status.cells if cell.id == cell_id)
    verdict = cell.state + (f" ({', '.join(cell.reasons)})" if cell.reasons else "")
    text = (
        f"cell {cell_id} of {view.shown} now depends on {file}: when its content changes, the cell is stale "
        f"(file_changed). The cell is {verdict}."
    )
    return Reply(
        text,
        {
            "notebook": view.shown,
            "cell": cell_id,
            "file": file,
            "state": cell.state,
            "reasons": list(cell.reasons),
        },
    )
