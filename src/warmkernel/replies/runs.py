"""Replies to run_python, wait_python and send_python_input: a finished cell's output with its
images, a running cell's tail, a cell waiting for input; and the progress message meanwhile."""

from __future__ import annotations

import json
from typing import Any

from warmkernel.execution.images import StoredImage
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.replies.hints import call, kernel_tag
from warmkernel.replies.inline import Shown, inline
from warmkernel.replies.reply import Picture, Reply, clip, counted, duration
from warmkernel.settings.model import Settings
from warmkernel.sizes import format_size
from warmkernel.types import ExecutionState

RUNNING_LINE_CLIP = 200


def execution_reply(record: ExecutionRecord, settings: Settings, *, waited: WaitEnd) -> Reply:
    """A run/wait reply: the finished cell's output within budget with its images, where a running
    cell is and why the wait ended, or the prompt a cell waits at."""
    if record.prompt is not None:
        return _awaiting_reply(record, settings)
    if not record.state.finished:
        return _running_reply(record, settings, waited)
    shown, omitted = inline(record, settings)
    header = f"In [{record.number}]{kernel_tag()} · {duration(record.elapsed())}:{_ending(record)}"
    chunks, delivered, left_out = _with_pictures(record, shown, settings)
    text_lines = [line for chunk in chunks if isinstance(chunk, list) for line in chunk]
    data = record_facts(record) | {
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
    record: ExecutionRecord, shown: Shown, settings: Settings
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
    return call(
        "read_python_output",
        execution=record.number,
        stream="images",
        line_range=f"{image.ordinal}:{image.ordinal}",
    )


def _ending(record: ExecutionRecord) -> str:
    match record.state:
        case ExecutionState.INTERRUPTED:
            return f" interrupted ({record.end_reason})" if record.end_reason else " interrupted"
        case ExecutionState.KILLED:
            return f" killed ({record.end_reason})"
        case ExecutionState.DIED:
            return f" died ({record.end_reason}); its namespace was lost and a fresh kernel was started"
        case ExecutionState.ERROR if record.end_reason:  # no traceback says it
            return f" error ({record.end_reason})"
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
    shown = record.progress()
    lines = [
        f"In [{number}]{kernel_tag()} · running for {duration(record.elapsed())} ({why})"
        + (f"; last {counted(len(tail), 'line')}:" if tail else "; no output yet"),
        *(clip(line, RUNNING_LINE_CLIP) for line in tail),
        *([f"Progress now: {clip(shown.line, RUNNING_LINE_CLIP)}"] if shown is not None else []),
        f"Still running. Next: {call('wait_python', execution=number)} to keep waiting, "
        f"{call('read_python_output', execution=number)} to read the output, "
        f"or {call('interrupt_python')} to stop it.",
    ]
    data = record_facts(record) | {
        "waited_s": round(waited.waited_s, 3),
        "returned_because": waited.reason,
        "last_lines": tail,
        "progress": {"done": shown.done, "total": shown.total, "line": shown.line} if shown else None,
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
        f"In [{number}]{kernel_tag()} · awaiting input after {duration(record.elapsed())}"
        + (f"; last {counted(len(tail), 'line')}:" if tail else ":"),
        *(clip(line, RUNNING_LINE_CLIP) for line in tail),
        f"Waiting for input at {what}. Next: "
        f"{call('send_python_input', text='...', execution=number)} to answer, "
        f"or {call('interrupt_python')} to stop it.",
    ]
    data = record_facts(record) | {
        "prompt": record.prompt.text,
        "password": record.prompt.password,
        "last_lines": tail,
    }
    return Reply("\n".join(lines), data)


def progress_message(record: ExecutionRecord) -> str:
    """The message of a progress notification: elapsed time and the latest progress display (a
    widget bar, a tqdm line), else the latest output line."""
    shown = record.progress()
    last = [shown.line] if shown is not None else _last_nonblank(record, 1)
    where = f": {clip(last[0], RUNNING_LINE_CLIP)}" if last else "; no output yet"
    return f"In [{record.number}]{kernel_tag()} running for {duration(record.elapsed())}{where}"


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


def record_facts(record: ExecutionRecord) -> dict[str, Any]:
    """The facts of one execution that its run, wait and status replies all carry."""
    return {
        "execution": record.number,
        "state": record.state.value,
        "elapsed_s": round(record.elapsed(), 3),
        "generation": record.generation,
        "error": {"name": record.error_name, "value": record.error_value} if record.error_name else None,
        "end_reason": record.end_reason or None,
        "lines": record.output.line_count("combined"),
    }


def output_cap_marker(cap: int) -> str:
    """The one line a cell's output gets where it passes the cell's cap."""
    return (
        f"[warmkernel: this cell's output passed --max-cell-output-bytes ({format_size(cap)}); "
        "further output is dropped and counted, and the cell runs on]\n"
    )


def output_cap_reason(dropped: int, cap: int) -> str:
    """What a record that passed its output cap says at its end."""
    return f"{dropped:,} bytes of output dropped past --max-cell-output-bytes ({format_size(cap)})"


def memory_ceiling_reason(ceiling: int, used: int) -> str:
    """Why a kernel over its memory ceiling was killed (the record of its running cell says it)."""
    return f"memory ceiling {format_size(ceiling)} exceeded ({format_size(used)})"


def memory_interrupt_reason(ceiling: int, used: int, grace_s: float) -> str:
    """Why a cell was interrupted at the memory ceiling, and what follows if memory stays above it."""
    return (
        f"{memory_ceiling_reason(ceiling, used)}; unless the kernel's memory drops below it within "
        f"{grace_s:g} s, the kernel is killed and its namespace lost"
    )
