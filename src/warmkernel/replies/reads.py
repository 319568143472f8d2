"""Replies to read_python_output and search_python_output: lines and images of an execution,
within the per-reply limits, and what a read says once the output was dropped."""

from __future__ import annotations

from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.search import SearchLine, SearchResult
from warmkernel.replies.hints import call
from warmkernel.replies.reply import Picture, Reply, clip
from warmkernel.settings.model import Settings
from warmkernel.types import ReadableStream

EMPTY_READ = "No output lines are available."


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
        text = (
            EMPTY_READ
            if total == 0
            else f"No lines in that range: the {stream} output has {total} (1-{total})."
        )
        return Reply(text, facts | {"first_line": None, "last_line": None, "text": ""})
    budget = settings.read_max_chars
    shown: list[str] = []
    too_long: tuple[int, int] | None = None
    """A line longer than the whole reply: its number and length (only its head is shown)."""
    for line in record.output.iter_lines(stream, lo, hi):  # read lazily: the budget ends it
        line = clip(line, max_chars) if max_chars is not None else line
        if shown and len(line) + 1 > budget:
            break
        if len(line) > budget:
            too_long = (lo + len(shown) + 1, len(line))
        shown.append(clip(line, budget))
        budget -= len(line) + 1
    last = lo + len(shown)
    header = f"execution {record.number} · {stream} · lines {lo + 1}-{last} of {total} ({record.state.value})"
    parts = [header, *shown]
    if too_long is not None:
        number, length = too_long
        parts.append(
            f"[line {number} has {length:,} characters, more than a reply carries, and a read cannot start "
            "inside a line: to see it whole, have the kernel write the value to a file]"
        )
    if last < hi:
        more = call(
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
        empty = "No images are selected."
        if record.images_not_kept:
            empty = images_not_kept(record)
        elif not total:
            empty = f"execution {record.number} has no images"
        return Reply(empty, facts | {"images": [], "images_not_kept": record.images_not_kept})
    chosen = images.images[lo:hi][: settings.max_images_per_reply]
    last = lo + len(chosen)
    parts: list[str | Picture] = []
    for image in chosen:
        parts += [image.caption, Picture(image.mime, images.read(image.ordinal))]
    if last < hi:
        more = call(
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


def images_not_kept(record: ExecutionRecord) -> str:
    """What reads of a reloaded record's images say: the journal keeps captions, not image bytes."""
    count = record.images_not_kept
    what, was, its = (
        ("the image", "was", "its caption")
        if count == 1
        else (f"the {count} images", "were", "their captions")
    )
    return (
        f"{what} of execution {record.number} {was} not kept when warmkernel restarted; "
        f"the result stream keeps {its}"
    )


def dropped_reply(record: ExecutionRecord) -> Reply:
    """A read or search of an execution whose output was dropped."""
    return Reply(dropped(record), {"execution": record.number, "state": record.state.value, "dropped": True})


def search_reply(
    record: ExecutionRecord,
    stream: ReadableStream,
    query: str,
    result: SearchResult,
    max_chars: int | None,
    reply_chars: int,
) -> Reply:
    """The matches with their context, within `reply_chars` (a read's limit): see `_fitted`."""
    count = result.matches_total if result.matches_total is not None else f"at least {result.matches_shown}"
    header = (
        f"search {query!r} ({result.mode}) in execution {record.number} · {stream}: "
        f"{count} matching line{'s' if result.matches_total != 1 else ''}"
    )
    groups = _fitted(result.groups, max_chars, reply_chars - len(header) - _NOTES_CHARS)
    body: list[str] = []
    for group in groups:
        body.extend(["--"] if body else [])
        body.extend(f"{'M' if line.is_match else 'C'} {line.number} | {text}" for line, text in group)
    shown = sum(line.is_match for group in groups for line, _ in group)
    if shown < result.matches_shown:
        left = result.matches_shown - shown
        body.append(
            f"{left} more {'match' if left == 1 else 'matches'} found {'was' if left == 1 else 'were'} left "
            f"out to keep the reply under {reply_chars:,} characters: lower max_matches, the context or "
            "max_chars, or narrow the query"
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
        "matches_shown": shown,
        "groups": [
            [{"line": line.number, "text": text, "match": line.is_match} for line, text in group]
            for group in groups
        ],
    }
    return Reply("\n".join([header, *body]), data)


_NOTES_CHARS = 400
"""Room kept for a search reply's closing notes."""
_LINE_CHARS = 16
"""What a shown line adds beside its text: `M 1234567 | `, a newline, a group's `--`."""


def _fitted(
    groups: list[list[SearchLine]], max_chars: int | None, budget: int
) -> list[list[tuple[SearchLine, str]]]:
    """Each line with its text as shown (clipped to `max_chars`): the groups that fit in `budget`
    characters whole; of the first that does not, its matches alone, so that context never
    crowds a match out. A first match longer than the budget is clipped to it."""
    fitted: list[list[tuple[SearchLine, str]]] = []
    for group in groups:
        shown = [(line, clip(line.text, max_chars) if max_chars is not None else line.text) for line in group]
        size = sum(len(text) + _LINE_CHARS for _, text in shown)
        if size <= budget:
            fitted.append(shown)
            budget -= size
            continue
        matches: list[tuple[SearchLine, str]] = []
        for line, text in shown:
            if not line.is_match:
                continue
            if len(text) + _LINE_CHARS > budget:
                if fitted or matches:
                    break
                text = clip(text, max(budget - _LINE_CHARS, 0))
            matches.append((line, text))
            budget -= len(text) + _LINE_CHARS
        if matches:
            fitted.append(matches)
        break
    return fitted
