"""Searching a stream's lines: compiling the query and collecting matches with their context.

Queries run on the third-party `regex` engine for its per-call `timeout=` (a runaway pattern
is stopped, not waited out) and `concurrent=True` (the GIL is released while it matches, so
the worker thread a caller runs `search` in does not stall the event loop). Each line is
searched on its own, so `^` and `$` anchor at line ends and a match never spans lines.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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

    Shows up to `max_matches` matches with their context, then keeps counting further matches
    until the time budget ends. Trailing context after the last shown match stops before the
    next (unshown) match, so no matching line is ever labelled as context. Raises
    `invalid_query` if the shown matches cannot be found within `timeout_s` seconds.
    """
    for name, value in (("context_before", context_before), ("context_after", context_after)):
        if value < 0:
            raise WarmkernelError("invalid_context", f"{name}={value} is negative; use 0 or more lines")
    if max_matches < 1:
        raise WarmkernelError("invalid_limit", f"max_matches={max_matches}; use 1 or more")
    if timeout_s <= 0:
        raise WarmkernelError("invalid_timeout", f"search timeout_s={timeout_s}; use more than 0 seconds")
    deadline = time.monotonic() + timeout_s
    groups: list[list[SearchLine]] = []
    before: deque[tuple[int, str]] = deque(maxlen=context_before)
    after = 0  # context lines still owed to the last match
    shown = 0
    numbered = ((index + 1, text) for index, text in lines)
    for number, text in numbered:
        found = _search_line(pattern, text, deadline)
        if found is None:
            raise WarmkernelError("invalid_query", _gave_up(pattern, mode, timeout_s, number))
        if found:
            for line_number, line_text in before:
                _add(groups, SearchLine(line_number, line_text, is_match=False))
            before.clear()
            _add(groups, SearchLine(number, text, is_match=True))
            shown += 1
            after = context_after
            if shown == max_matches:
                break
        elif after:
            _add(groups, SearchLine(number, text, is_match=False))
            after -= 1
        else:
            before.append((number, text))
    else:
        return SearchResult(mode, groups, shown, shown)
    more = _count_rest(numbered, pattern, deadline, groups, after)
    return SearchResult(mode, groups, shown, None if more is None else shown + more)


def _count_rest(
    numbered: Iterator[tuple[int, str]],
    pattern: regex.Pattern[str],
    deadline: float,
    groups: list[list[SearchLine]],
    after: int,
) -> int | None:
    """Past the cap: add trailing context up to the next match, then count matching lines.

    Returns None when the time budget runs out first; this is not an error, since every
    match to be shown has been found.
    """
    more = 0
    for number, text in numbered:
        found = _search_line(pattern, text, deadline)
        if found is None:
            return None
        if found:
            more += 1
            after = 0
        elif after:
            _add(groups, SearchLine(number, text, is_match=False))
            after -= 1
    return more


def _search_line(pattern: regex.Pattern[str], text: str, deadline: float) -> bool | None:
    """Whether `text` matches; None once the deadline has passed."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:  # `regex` reads a negative timeout as none at all
        return None
    try:
        return pattern.search(text, concurrent=True, timeout=remaining) is not None
    except TimeoutError:
        return None


def _add(groups: list[list[SearchLine]], line: SearchLine) -> None:
    """Append `line` to the last group if it follows it directly, else open a new group."""
    if groups and groups[-1][-1].number + 1 == line.number:
        groups[-1].append(line)
    else:
        groups.append([line])


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
