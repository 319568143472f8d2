"""Searching a stream's lines: compiling the query and collecting matches with their context.

Queries run on the third-party `regex` engine for its per-call `timeout=` (a runaway pattern
is stopped, not waited out) and `concurrent=True` (the GIL is released while it matches, so
the worker thread a caller runs `search` in does not stall the event loop). Each line is
searched on its own, so `^` and `$` anchor at line ends and a match never spans lines; a
plain query (text without regex syntax or newlines) gives the same answers searching many
lines joined as one text, so it does, being about fifteen times faster that way.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, islice, repeat
from operator import add, itemgetter
from typing import Literal

import regex

from warmkernel.errors import WarmkernelError

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


def compile_query(
    query: str, mode: QueryMode, ignore_case: bool
) -> tuple[regex.Pattern[str], Literal["literal", "regex"]]:
    """Compile `query` as `mode` says; returns the pattern and the mode actually used."""
    if not query:
        raise WarmkernelError("invalid_query", "query is empty; give the text or regex to look for")
    flags = regex.IGNORECASE if ignore_case else 0
    if mode != "literal":
        try:
            return regex.compile(query, flags), "regex"
        except regex.error as exc:
            if mode == "regex":
                raise WarmkernelError(
                    "invalid_query",
                    f"query {query!r} is not a valid regex ({exc}); fix it, "
                    'or use query_mode="literal" to search for the text as written',
                ) from exc
    return regex.compile(regex.escape(query), flags), "literal"


def search(
    lines: Iterable[tuple[int, str]],
    pattern: regex.Pattern[str],
    *,
    mode: Literal["literal", "regex"],
    context_before: int,
    context_after: int,
    max_matches: int,
    timeout_s: float,
) -> SearchResult:
    """Find lines matching `pattern` in `(0-based index, text)` pairs, as `OutputLog.iter_lines` yields.

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
    hits_in = _plain_hits if _is_plain(pattern, mode) else _line_hits
    grouper = _Grouper(context_before, context_after)
    shown = more = 0
    source = iter(lines)
    while batch := list(islice(source, _BATCH)):
        done = 0  # lines of the batch before `done` are handled
        try:
            for hit in hits_in(pattern, list(map(itemgetter(1), batch)), deadline):
                if shown < max_matches:
                    grouper.skip(batch[done:hit])
                    grouper.match(batch[hit])
                    shown += 1
                else:
                    grouper.trail(batch[done:hit])
                    grouper.end_trail()
                    more += 1
                done = hit + 1
        except _OutOfTime as exc:
            if shown < max_matches:
                line = batch[exc.position][0] + 1
                raise WarmkernelError("invalid_query", _gave_up(pattern, mode, timeout_s, line)) from None
            grouper.trail(batch[done : exc.position])
            return SearchResult(mode, grouper.groups, shown, None)
        if shown < max_matches:
            grouper.skip(batch[done:])
        else:
            grouper.trail(batch[done:])
    return SearchResult(mode, grouper.groups, shown, shown + more)


_BATCH = 4096
"""Lines taken from the input at a time: plain queries search them as one text."""

_METACHARACTERS = frozenset("\\.^$*+?{}[]|()")


class _OutOfTime(Exception):
    """The time budget ran out; lines of the batch before `position` did not match."""

    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


def _is_plain(pattern: regex.Pattern[str], mode: str) -> bool:
    """Whether `pattern` is a literal that cannot match a newline, so lines may be joined.

    Each call with a `timeout=` costs a clock read (two system calls), about 2 µs, so a
    plain query searches a batch of lines as one text instead of calling once per line.
    """
    source = pattern.pattern
    return "\n" not in source and (mode == "literal" or _METACHARACTERS.isdisjoint(source))


def _plain_hits(pattern: regex.Pattern[str], texts: list[str], deadline: float) -> Iterator[int]:
    """Positions in `texts` of the lines that match, searching them joined by newlines."""
    joined = "\n".join(texts)
    starts = list(accumulate(map(add, map(len, texts), repeat(1)), initial=0))
    at = 0
    while at < len(starts) - 1:
        found = _search(pattern, joined, starts[at], deadline, at)
        if found is None:
            return
        at = bisect_right(starts, found.start()) - 1
        yield at
        at += 1


def _line_hits(pattern: regex.Pattern[str], texts: list[str], deadline: float) -> Iterator[int]:
    """Positions in `texts` of the lines that match, searching each line on its own."""
    for position, text in enumerate(texts):
        if _search(pattern, text, 0, deadline, position) is not None:
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
        self._before: deque[tuple[int, str]] = deque(maxlen=before)
        self._after = after
        self._owed = 0  # context lines still owed to the last match

    def skip(self, lines: list[tuple[int, str]]) -> None:
        """Lines that do not match: after-context still owed, else possible before-context."""
        rest = lines[self.trail(lines) :]
        if self._before.maxlen:
            self._before.extend(rest[-self._before.maxlen :])

    def match(self, line: tuple[int, str]) -> None:
        for before in self._before:
            self._add(before, is_match=False)
        self._before.clear()
        self._add(line, is_match=True)
        self._owed = self._after

    def trail(self, lines: list[tuple[int, str]]) -> int:
        """Lines that do not match: as many as are owed become after-context; returns how many."""
        paid = lines[: self._owed]
        for line in paid:
            self._add(line, is_match=False)
        self._owed -= len(paid)
        return len(paid)

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


def _gave_up(pattern: regex.Pattern[str], mode: str, timeout_s: float, number: int) -> str:
    if mode == "regex":
        return (
            f"regex {pattern.pattern!r} gave up after {timeout_s:g} s at line {number}; "
            'simplify it or use query_mode="literal"'
        )
    return (
        f"literal search for {pattern.pattern!r} gave up after {timeout_s:g} s at line {number}; "
        "search a smaller line_range"
    )
