"""Transcript: one execution as a notebook keeps it, its facts and its outputs as nbformat v4 dicts.

`transcript(record)` reads the record's streams and images (from their spill files when they
moved there), in two steps so that the long one can run in a worker thread while the record
still runs; `notebook_outputs` is the pure part that turns combined lines, with the runs that
say which stream each came from, into outputs:

- consecutive `stdout` (or `stderr`) lines are one `stream` output, each line ended by `\\n`;
- each display state is a `display_data`, or an `execute_result` when it carries the record's
  `Out[N]: ` label (removed; a value of several lines starts on the line after it), with its text
  as `text/plain` and its image base64-encoded beside;
- `traceback` lines are one `error` output with the record's error name and value.

What Jupyter would no longer show is left out, as Jupyter saves a notebook: lines before the last
`clear_output`, and display states a later update of the same display replaced. A record reloaded
from the journal has no display placements: its `result` lines become displays split at each
`Out[N]: ` line, and an image it no longer has keeps its caption as text.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from warmkernel.execution.directive import kernel_source
from warmkernel.execution.displays import Placement
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.spill import OutputDropped
from warmkernel.types import StreamName

Output = dict[str, Any]
"""One nbformat v4 output."""
Run = tuple[StreamName, int, int]
"""Combined lines `first` to `end` (exclusive) that came from one stream."""


@dataclass(frozen=True)
class Transcript:
    """An execution's source, facts and outputs, read at one moment."""

    number: int
    source: str
    """As the kernel ran it: a cell magic without its directive lines, which are not its text."""
    state: str
    generation: int
    started_at: str
    """ISO 8601, UTC."""
    ended_at: str | None
    elapsed_s: float
    outputs: tuple[Output, ...]
    error_name: str = ""
    error_value: str = ""
    end_reason: str = ""
    client: str = ""
    cell_id: str | None = None
    output_dropped: bool = False
    """The output was dropped to stay under the output limit: `outputs` is empty."""
    images_not_kept: int = 0

    def facts(self) -> dict[str, Any]:
        """The facts a notebook cell keeps as its `warmkernel` metadata (empty ones left out)."""
        facts: dict[str, Any] = {
            "execution": self.number,
            "state": self.state,
            "generation": self.generation,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "elapsed_s": self.elapsed_s,
        }
        if self.error_name:
            facts["error"] = {"name": self.error_name, "value": self.error_value}
        optional = {
            "end_reason": self.end_reason,
            "client": self.client,
            "notebook_cell": self.cell_id,
            "output_dropped": self.output_dropped,
            "images_not_kept": self.images_not_kept,
        }
        return facts | {name: value for name, value in optional.items() if value}


def transcript(record: ExecutionRecord, *, outputs: bool = True) -> Callable[[], Transcript]:
    """Take a record's facts, its images and the extent of its output now, on the thread that appends
    to it; the function returned reads the text (all of it: call it in a worker thread).
    `outputs=False`: the facts and source only (for a script)."""
    ended = record.ended_at
    facts = Transcript(
        number=record.number,
        source=kernel_source(record.source),
        state=record.state.value,
        generation=record.generation,
        started_at=record.started_at.isoformat(),
        ended_at=ended.isoformat() if ended is not None else None,
        elapsed_s=round(record.elapsed(), 3),
        outputs=(),
        error_name=record.error_name,
        error_value=record.error_value,
        end_reason=record.end_reason,
        client=record.client,
        cell_id=record.cell_id,
        images_not_kept=record.images_not_kept,
    )
    if not outputs:
        return lambda: facts
    try:
        runs = record.output.runs()
        # The extent and the open lines are fixed here; completed lines never change afterwards.
        blocks = record.output.blocks("combined", 0, runs[-1][2] if runs else 0)
        states = record.displays.states()
        images = {
            placement.image.ordinal: record.displays.images.read(placement.image.ordinal)
            for placement, replaced in states
            if placement.image is not None and not replaced
        }
        error, start = (record.error_name, record.error_value), record.displays.cleared_before
    except OutputDropped:
        return lambda: replace(facts, output_dropped=True)

    def read() -> Transcript:
        try:
            lines = [line for block in blocks for line in block.text.split("\n")]
        except OutputDropped:  # dropped to stay under the output limit since
            return replace(facts, output_dropped=True)
        found = notebook_outputs(lines, runs, states, images, number=record.number, error=error, start=start)
        return replace(facts, outputs=tuple(found))

    return read


def notebook_outputs(
    lines: Sequence[str],
    runs: Sequence[Run],
    displays: Sequence[tuple[Placement, bool]],
    images: Mapping[int, bytes],
    *,
    number: int,
    error: tuple[str, str],
    start: int = 0,
) -> list[Output]:
    """The outputs of combined `lines` from line `start` on; see the module docstring. `runs` say
    which stream each line came from, `displays` are the display states with whether each was
    replaced, `images` the bytes of the shown ones by ordinal."""
    shown = {placement.first: placement for placement, replaced in displays if not replaced}
    replaced_lines = {
        line for placement, replaced in displays if replaced for line in range(placement.first, placement.end)
    }
    label = f"Out[{number}]: "
    outputs: list[Output] = []
    continued: StreamName | None = None
    """The stream of the last output, while the next run of that stream adds to it."""
    for stream, first, end in runs:
        first = max(first, start)
        if first >= end:
            continue
        if stream != "result":
            if stream == continued:
                _extend(outputs[-1], lines[first:end])
            else:
                outputs.append(_plain(stream, lines[first:end], error))
            continued = stream
            continue
        continued = None
        group: list[str] = []
        index = first
        while index < end:
            placement = shown.get(index)
            if group and (placement is not None or _labelled(lines[index], label)):
                outputs.append(_bundle(group, label, number))
                group = []
            if placement is not None:
                outputs.append(_display(lines, placement, images, label, number))
                index = placement.end
                continue
            if index not in replaced_lines:
                group.append(lines[index])
            index += 1
        if group:
            outputs.append(_bundle(group, label, number))
    return outputs


def _display(
    lines: Sequence[str], placement: Placement, images: Mapping[int, bytes], label: str, number: int
) -> Output:
    image = placement.image
    text_end = placement.end - 1 if image is not None else placement.end
    text = list(lines[placement.first : text_end])
    bundle = _bundle(text, label, number)
    if image is not None and image.ordinal in images:
        bundle["data"][image.mime] = base64.b64encode(images[image.ordinal]).decode("ascii")
    return bundle


def _plain(stream: StreamName, group: Sequence[str], error: tuple[str, str]) -> Output:
    """A `stream` output, or for traceback lines the `error` output."""
    if stream == "traceback":
        name, value = error
        return {"output_type": "error", "ename": name or "Error", "evalue": value, "traceback": list(group)}
    return {"output_type": "stream", "name": stream, "text": "\n".join(group) + "\n"}


def _extend(output: Output, group: Sequence[str]) -> None:
    """More lines of the stream (or traceback) the output holds."""
    if output["output_type"] == "error":
        output["traceback"].extend(group)
    else:
        output["text"] += "\n".join(group) + "\n"


def _labelled(line: str, label: str) -> bool:
    """Whether a result line starts with the `Out[N]: ` label: before a one-line value, or alone
    on its line before a value of several lines (`displays._labelled`)."""
    return line.startswith(label) or line == label.rstrip()


def _bundle(text: list[str], label: str, number: int) -> Output:
    """A display_data, or the execute_result that the label marks (the label itself removed)."""
    result = bool(text) and _labelled(text[0], label)
    if result:
        text = text[1:] if text[0] == label.rstrip() else [text[0].removeprefix(label), *text[1:]]
    data: dict[str, Any] = {"text/plain": "\n".join(text)} if text else {}
    if result:
        return {"output_type": "execute_result", "execution_count": number, "data": data, "metadata": {}}
    return {"output_type": "display_data", "data": data, "metadata": {}}
