"""Searching a stream's lines: compiling the query and collecting matches with their context.

Queries run on the third-party `regex` engine for its per-call `timeout=` (a runaway pattern
is stopped, not waited out) and `concurrent=True` (the GIL is released while it matches, so
the worker thread a caller runs `search` in does not stall the event loop).

A line matches when the pattern matches the line on its own, so `^` and `$` anchor at line
ends and a match never spans lines. Most patterns give the same answers searching a block of
lines joined by newlines in MULTILINE mode, which is what makes a million lines take
milliseconds: a match found inside one line is a match of that line alone, and one that
crosses a newline is checked against its first line alone. Patterns that look past the text
they match (lookarounds, `\\A`, `\\Z`, `\\G`, reverse searching, flags switched off inline) are
searched line by line instead.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Literal

import regex

from warmkernel.errors import WarmkernelError
from warmkernel.execution.line_store import TextBlock

QueryMode = Literal["auto", "literal", "regex"]
"""How to read a query: `auto` is a regex if it compiles, else literal text."""


@dataclass(frozen=True)
class SearchLine:
    """One line shown in a search result: a match, or context around one."""

    number: int
    """1-based line number in the stream searched."""
    text: str
    is_match: bool


@dataclass(frozen=True)
class SearchResult:
    """The matches shown, grouped with their context, and how many matches there are."""

    mode: Literal["literal", "regex"]
    """How the query was read (what `auto` turned into)."""
    groups: list[list[SearchLine]]
    """Runs of consecutive lines; a gap in line numbers separates two groups."""
    matches_shown: int
    matches_total: int | None
    """Every matching line, shown or not; None when counting ran out of time."""


@dataclass(frozen=True)
class Query:
    """A compiled query: the pattern a line must match on its own, and how to find such lines."""

    pattern: regex.Pattern[str]
    mode: Literal["literal", "regex"]
    """How the query was read (what `auto` turned into)."""
    finder: regex.Pattern[str] | None
    """The same pattern in MULTILINE mode, to search whole blocks; None to search line by line."""


# Constructs whose outcome depends on text outside the match, so that a line joined with its
# neighbours could answer differently than the line alone: lookarounds, anchors at the ends
# of the searched text, and inline flags switched off (a `(?-m)` would undo MULTILINE).
_CONTEXTUAL = regex.compile(r"\(\?<?[=!]|\\[AZzG]|\(\?[a-zA-Z]*-")


def compile_query(query: str, mode: QueryMode, ignore_case: bool) -> Query:
    """Compile `query` as `mode` says; `invalid_query` if it is empty or not a valid regex."""
    if not query:
        raise WarmkernelError("invalid_query", "query is empty; give the text or regex to look for")
    flags = regex.IGNORECASE if ignore_case else 0
    source, used = regex.escape(query), "literal"
    if mode != "literal":
        try:
            regex.compile(query, flags)
            source, used = query, "regex"
        except regex.error as exc:
            if mode == "regex":
                raise WarmkernelError(
                    "invalid_query",
                    f"query {query!r} is not a valid regex ({exc}); fix it, "
                    'or use query_mode="literal" to search for the text as written',
                ) from exc
    pattern = regex.compile(source, flags)
    if pattern.flags & regex.REVERSE or _CONTEXTUAL.search(source):
        return Query(pattern, used, None)
    # The flags given, not `pattern.flags`: those include inline flags, which act from where
    # they stand and must stay there.
    return Query(pattern, used, regex.compile(source, flags | regex.MULTILINE))


def search(
    blocks: Iterable[TextBlock],
    query: Query,
    *,
    context_before: int,
    context_after: int,
    max_matches: int,
    timeout_s: float,
) -> SearchResult:
    """Find lines matching `pattern` in consecutive blocks of lines, as `OutputLog.blocks` yields.

    Shows up to `max_matches` matches with their context, then counts further matching lines
    until the time budget ends. Trailing context after the last shown match stops before the
    next (unshown) match, so no matching line is ever labelled as context. Raises
    `invalid_query` if the matches to show cannot be found within `timeout_s` seconds.
    """
    for name, value in (("context_before", context_before), ("context_after", context_after)):
        if value < 0:
            raise WarmkernelError("invalid_context", f"{name}={value} is negative; use 0 or more lines")
    if max_matches < 1:
        raise WarmkernelError("invalid_limit", f"max_matches={max_matches}; use 1 or more")
    if timeout_s <= 0:
        raise WarmkernelError("invalid_timeout", f"search timeout_s={timeout_s}; use more than 0 seconds")
    deadline = time.monotonic() + timeout_s
    if query.finder is None:
        hits_in: HitFinder = partial(_line_hits, query.pattern)
    else:
        hits_in = partial(_joined_hits, query.pattern, query.finder)
    grouper = _Grouper(context_before, context_after)
    shown = more = 0
    for block in blocks:
        lines = _Lines(block)
        done = 0  # lines of the block before `done` are handled
        try:
            for hit in hits_in(lines, deadline):
                if shown < max_matches:
                    grouper.skip(lines, done, hit)
                    grouper.match(lines.line(hit))
                    shown += 1
                else:
                    grouper.trail(lines, done, hit)
                    grouper.end_trail()
                    more += 1
                done = hit + 1
        except _OutOfTime as exc:
            if shown < max_matches:
                line = block.first + exc.position + 1
                raise WarmkernelError("invalid_query", _gave_up(query, timeout_s, line)) from None
            grouper.trail(lines, done, exc.position)
            return SearchResult(query.mode, grouper.groups, shown, None)
        if shown < max_matches:
            grouper.skip(lines, done, block.count)
        else:
            grouper.trail(lines, done, block.count)
    return SearchResult(query.mode, grouper.groups, shown, shown + more)


class _OutOfTime(Exception):
    """The time budget ran out; lines of the block before `position` did not match."""

    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


class _Lines:
    """One block's lines, split apart only when a line's own text is needed."""

    def __init__(self, block: TextBlock) -> None:
        self.block = block
        self._texts: list[str] | None = None

    def texts(self) -> list[str]:
        if self._texts is None:
            self._texts = self.block.text.split("\n")
        return self._texts

    def line(self, position: int) -> tuple[int, str]:
        """`(0-based index in the stream, text)` of the line at `position` in the block."""
        return self.block.first + position, self.texts()[position]


HitFinder = Callable[[_Lines, float], Iterator[int]]
"""Yields the positions in a block of the lines that match, within a deadline."""


def _joined_hits(
    pattern: regex.Pattern[str], finder: regex.Pattern[str], lines: _Lines, deadline: float
) -> Iterator[int]:
    """Matching lines found by searching the block as one text with `finder` (MULTILINE).

    A search that takes half the time left has met a line that makes the pattern backtrack:
    the rest of the block is searched line by line, to name that line if time runs out.
    """
    text = lines.block.text
    pos = line = 0  # `pos` is where line `line` starts
    while pos <= len(text):
        half = (deadline - time.monotonic()) / 2
        try:
            found = _search(finder, text, pos, time.monotonic() + half, line)
        except _OutOfTime:
            # The line-by-line search gets its half even when a starved thread overran the
            # block's: else it could not name the line, nor keep the context found before it.
            yield from _line_hits(pattern, lines, max(deadline, time.monotonic() + half), line)
            return
        if found is None:
            return
        start = found.start()
        line += text.count("\n", pos, start)
        begin = max(pos, text.rfind("\n", pos, start) + 1)
        stop = text.find("\n", start)
        stop = len(text) if stop < 0 else stop
        # A match across a newline says nothing about its first line alone: ask that line.
        if found.end() <= stop or _search(pattern, text[begin:stop], 0, deadline, line) is not None:
            yield line
        pos, line = stop + 1, line + 1


def _line_hits(pattern: regex.Pattern[str], lines: _Lines, deadline: float, start: int = 0) -> Iterator[int]:
    """Matching lines from position `start` on, found by searching each line on its own."""
    for position in range(start, lines.block.count):
        if _search(pattern, lines.texts()[position], 0, deadline, position) is not None:
            yield position


def _search(
    pattern: regex.Pattern[str], text: str, pos: int, deadline: float, position: int
) -> regex.Match[str] | None:
    """One search within the time budget; raises `_OutOfTime(position)` when it is spent."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:  # `regex` reads a negative timeout as none at all
        raise _OutOfTime(position)
    try:
        return pattern.search(text, pos, concurrent=True, timeout=remaining)
    except TimeoutError:
        raise _OutOfTime(position) from None


class _Grouper:
    """Builds the groups shown: each match with its context, merged when windows touch."""

    def __init__(self, before: int, after: int) -> None:
        self.groups: list[list[SearchLine]] = []
        self._before_count = before
        # A deque's bound is a C integer; a larger count (2**63) asks for every line anyway.
        self._before: deque[tuple[int, str]] = deque(maxlen=min(before, sys.maxsize))
        self._after = after
        self._owed = 0  # context lines still owed to the last match

    def skip(self, lines: _Lines, lo: int, hi: int) -> None:
        """Lines lo..hi do not match: after-context still owed, else possible before-context."""
        start = lo + self.trail(lines, lo, hi)
        for position in range(max(start, hi - self._before_count), hi):
            self._before.append(lines.line(position))

    def match(self, line: tuple[int, str]) -> None:
        for before in self._before:
            self._add(before, is_match=False)
        self._before.clear()
        self._add(line, is_match=True)
        self._owed = self._after

    def trail(self, lines: _Lines, lo: int, hi: int) -> int:
        """Lines lo..hi do not match: as many as are owed become after-context; returns how many."""
        paid = min(self._owed, hi - lo)
        for position in range(lo, lo + paid):
            self._add(lines.line(position), is_match=False)
        self._owed -= paid
        return paid

    def end_trail(self) -> None:
        """An unshown match: trailing context stops before it."""
        self._owed = 0

    def _add(self, line: tuple[int, str], *, is_match: bool) -> None:
        """Append to the last group if the line follows it directly, else open a new group."""
        number = line[0] + 1
        if self.groups and self.groups[-1][-1].number + 1 == number:
            self.groups[-1].append(SearchLine(number, line[1], is_match))
        else:
            self.groups.append([SearchLine(number, line[1], is_match)])


def _gave_up(query: Query, timeout_s: float, number: int) -> str:
    pattern = query.pattern
    if query.mode == "regex":
        return (
            f"regex {pattern.pattern!r} gave up after {timeout_s:g} s at line {number}; "
            'simplify it or use query_mode="literal"'
        )
    return (
        f"literal search for {pattern.pattern!r} gave up after {timeout_s:g} s at line {number}; "
        "search one stream rather than combined, or read the output by line_range"
    )
