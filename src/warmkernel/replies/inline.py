"""The inline budget: which lines of a finished cell's combined output its reply shows.

Within `inline_max_lines` and `inline_max_chars` everything after the last clear_output is
shown; past either, the head and the tail, with one line between them naming the omitted
range and the call that reads it.
"""

from __future__ import annotations

from warmkernel.execution.record import ExecutionRecord
from warmkernel.replies.hints import call
from warmkernel.replies.reads import dropped
from warmkernel.replies.reply import clip
from warmkernel.replies.tracebacks import condense
from warmkernel.settings.model import Settings

Shown = list[tuple[int | None, str]]
"""Lines of an inline reply, each with its 0-based combined line number (None for our notes)."""


def inline(record: ExecutionRecord, settings: Settings) -> tuple[Shown, list[int] | None]:
    """The combined lines shown inline, and the omitted [first, last] line numbers if any.

    Only what follows the last clear_output is shown, without the states of a display that a
    later state replaced and without the text/plain of an image (its caption stands for it); a
    display shown in place (a widget view) shows its latest state where it was first written.
    """
    output = record.output
    if output.dropped:
        return [(None, dropped(record))], None
    total = output.line_count("combined")
    start = min(record.displays.cleared_before, total)
    hidden = record.displays.hidden_lines()
    moved = record.displays.moved()

    condensed = None if record.directives.full_output else _condensed_traceback(record)

    def visible(lo: int, hi: int) -> Shown:
        shown: Shown = []
        for i, line in enumerate(output.lines("combined", lo, hi), lo):
            if i in moved:  # a display shown in place: its latest state stands here
                latest = moved[i]
                shown.extend(enumerate(output.lines("combined", latest.start, latest.stop), latest.start))
            elif i not in hidden:
                shown.append((i, line))
        if condensed is None or not lo <= condensed[0] < condensed[1] <= hi:
            return shown
        first, end, lines = condensed
        before = [(i, line) for i, line in shown if i is not None and i < first]
        after = [(i, line) for i, line in shown if i is not None and i >= end]
        return [*before, *((None, line) for line in lines), *after]

    cleared: Shown = []
    if start:
        read = call("read_python_output", execution=record.number, line_range=f"1:{start}")
        what = "line 1 was" if start == 1 else f"lines 1-{start} were"
        cleared = [(None, f"[{what} cleared by clear_output; read with {read}]")]
    max_lines, max_chars = settings.inline_max_lines, settings.inline_max_chars
    fits = total - start <= max_lines and output.char_count("combined") + total <= max_chars
    if fits or record.directives.full_output:
        return cleared + visible(start, total), None
    head, head_cut = _fit(visible(start, min(total, start + max_lines // 2)), max_chars // 2)
    head_end = head[-1][0] + 1 if head and head[-1][0] is not None else start
    tail, tail_cut = _fit(visible(max(head_end, total - max_lines // 2), total)[::-1], max_chars // 2)
    tail = tail[::-1]
    tail_start = tail[0][0] if tail and tail[0][0] is not None else total
    first, last = head_end + 1, tail_start
    if first > last:
        cut = [n + 1 for n in (head_cut, tail_cut) if n is not None]
        if not cut:
            return cleared + head + tail, None
        # No line is left out, but one is cut short (a line longer than the budget): name its read.
        what = f"line {cut[0]} is" if len(set(cut)) == 1 else f"lines {cut[0]} and {cut[-1]} are"
        read = call("read_python_output", execution=record.number, line_range=f"{cut[0]}:{cut[-1]}")
        note = f"... {what} cut short; read with {read} ..."
        return [*cleared, *head, *tail, (None, note)], None
    note = (
        f"... lines {first}-{last} of {total} omitted; read them with "
        f"{call('read_python_output', execution=record.number, line_range=f'{first}:{last}')} ..."
    )
    return [*cleared, *head, (None, note), *tail], [first, last]


def _condensed_traceback(record: ExecutionRecord) -> tuple[int, int, list[str]] | None:
    """The traceback's combined lines and what the reply shows instead, if that is shorter."""
    if record.traceback_lines is None:
        return None
    first, end = record.traceback_lines
    whole = call("read_python_output", execution=record.number, stream="traceback")
    lines = condense(record.output.lines("combined", first, end), f"{whole} shows every frame")
    return (first, end, lines) if len(lines) < end - first else None


def _fit(lines: Shown, budget: int) -> tuple[Shown, int | None]:
    """Leading lines that fit in `budget` characters, the last one clipped if it overflows; and
    the index of the line clipped, if one was."""
    kept: Shown = []
    cut = None
    for index, line in lines:
        if budget <= 0:
            break
        if len(line) > budget:
            cut = index
        kept.append((index, clip(line, budget)))
        budget -= len(line) + 1
    return kept, cut
