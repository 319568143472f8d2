"""What the console page shows, as JSON facts: kernels, pages of executions, one execution, and
windows of its combined output with where each line came from.

The page renders; these functions decide what it gets. Every answer is bounded: a window holds
at most `WINDOW_MAX_LINES` lines of at most `LINE_MAX_CHARS` characters each, so a 10,000,000-line
execution costs the page what one screen costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from warmkernel.execution.record import ExecutionRecord
from warmkernel.kernel.base import KernelInfo
from warmkernel.replies.reads import dropped, images_not_kept
from warmkernel.replies.reply import clip
from warmkernel.replies.status import execution_status_reply
from warmkernel.types import KernelState

WINDOW_MAX_LINES = 2000
"""Most lines one window read returns: a few screens."""
LINE_MAX_CHARS = 2000
"""A longer line is clipped (`...[K chars omitted]`); the tools read it whole."""
PAGE_MAX_EXECUTIONS = 500
"""Most execution rows one page of the list returns."""
SOURCE_MAX_CHARS = 20_000


def kernel_facts(
    name: str,
    kernel: KernelInfo,
    records: Sequence[ExecutionRecord],
    running: ExecutionRecord | None,
    notebook: str | None,
) -> dict[str, Any]:
    """One kernel as the page's header and its live feed show it."""
    return {
        "name": name,
        "state": kernel.state.value,
        "error": kernel.detail if kernel.state is KernelState.FAILED else "",
        "generation": kernel.generation,
        "pid": kernel.place.pid,
        "executions": len(records),
        "latest": records[-1].number if records else None,
        "running": running.number if running is not None else None,
        "running_state": running.state.value if running is not None else None,
        "running_lines": running.output.line_count("combined") if running is not None else 0,
        # Changes with every output, also a progress bar redrawn in place on the same line.
        "running_output_at": round(running.last_output, 3) if running is not None else None,
        "notebook": notebook,
    }


def execution_row(record: ExecutionRecord) -> dict[str, Any]:
    """A row of the list: what `list_python_executions` shows, and who sent the cell."""
    return {
        "execution": record.number,
        "state": record.state.value,
        "elapsed_s": round(record.elapsed(), 3),
        "started_at": record.started_at.isoformat(),
        "client": record.client,
        "first_line": clip(record.first_line, 200),
        "lines": record.output.line_count("combined"),
    }


def execution_page(records: Sequence[ExecutionRecord], offset: int, limit: int) -> dict[str, Any]:
    """Rows `offset` to `offset + limit` of the list, newest first; `total` sizes the page's scroll."""
    total = len(records)
    limit = max(0, min(limit, PAGE_MAX_EXECUTIONS))
    hi = max(total - offset, 0)
    lo = max(hi - limit, 0)
    return {
        "total": total,
        "offset": offset,
        "executions": [execution_row(record) for record in reversed(records[lo:hi])],
    }


def execution_detail(record: ExecutionRecord) -> dict[str, Any]:
    """The selected execution: its status facts, its source, and the combined lines its images sit at."""
    data = execution_status_reply(record).data
    images = [] if record.output.dropped else record.displays.images.images
    notes = [dropped(record)] if record.output.dropped else []
    if record.images_not_kept:
        notes.append(images_not_kept(record))
    return data | {
        "client": record.client,
        "first_line": record.first_line,
        "source": clip(record.source, SOURCE_MAX_CHARS),
        "cell_id": record.cell_id,
        "images": [{"image": image.ordinal, "mime": image.mime, "bytes": image.size} for image in images],
        "image_lines": {str(line): image.ordinal for line, image in record.displays.captions().items()},
        "notes": notes,
    }


def output_window(record: ExecutionRecord, lo: int, hi: int) -> dict[str, Any]:
    """Combined lines `lo` to `hi` (0-based, half-open, already clamped), each with its stream,
    the image its caption stands for, and whether an inline reply folds it away (a display state a
    later one replaced, or the repr of an image)."""
    hi = min(hi, lo + WINDOW_MAX_LINES)
    total = record.output.line_count("combined")
    facts: dict[str, Any] = {"execution": record.number, "state": record.state.value, "total": total}
    if record.output.dropped:
        return facts | {"start": lo, "lines": [], "note": dropped(record)}
    streams = [stream for stream, count in record.output.origins(lo, hi) for _ in range(count)]
    captions = record.displays.captions()
    hidden = record.displays.hidden_lines()
    lines = []
    for index, (text, stream) in enumerate(
        zip(record.output.iter_lines("combined", lo, hi), streams, strict=True), lo
    ):
        line: dict[str, Any] = {"text": clip(text, LINE_MAX_CHARS), "stream": stream}
        image = captions.get(index)
        if image is not None:
            line["image"] = image.ordinal
        elif index in hidden:
            line["folded"] = True
        lines.append(line)
    return facts | {"start": lo, "lines": lines}


def image(record: ExecutionRecord, ordinal: int) -> tuple[str, bytes] | None:
    """The MIME type and bytes of image `ordinal` (1-based); None when there is no such image (or
    no longer: dropped with the output, or not kept across a restart)."""
    images = record.displays.images
    if record.output.dropped or not 1 <= ordinal <= len(images):
        return None
    return images.images[ordinal - 1].mime, images.read(ordinal)
