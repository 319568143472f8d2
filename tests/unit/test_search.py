"""Search: query modes, match and context markers, grouping, the match cap and the time budget."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Literal

import pytest
import regex
from hypothesis import given, reject
from hypothesis import strategies as st

from warmkernel.errors import WarmkernelError
from warmkernel.execution.line_store import TextBlock
from warmkernel.execution.search import QueryMode, SearchResult, compile_query, search

# A pattern that backtracks exponentially in `regex` on a run of "a" followed by "b".
RUNAWAY = r"(a|aa)+$"
RUNAWAY_LINE = "a" * 40 + "b"
# Time for a search that meets the runaway line: half of it goes to searching its block whole,
# the rest to searching line by line to name it; ample, so a loaded machine still gets there.
POSITION_BUDGET_S = 2.0
TRIES = 5


def blocks_of(texts: list[str], size: int) -> Iterator[TextBlock]:
    """The lines as `OutputLog.blocks` would give them, `size` lines to a block."""
    for first in range(0, len(texts), size):
        part = texts[first : first + size]
        yield TextBlock(first, "\n".join(part), len(part))


def run(
    texts: list[str],
    query: str,
    *,
    mode: QueryMode = "auto",
    ignore_case: bool = False,
    before: int = 0,
    after: int = 0,
    max_matches: int = 100,
    timeout_s: float = 5.0,
    block_lines: int = 4096,
) -> SearchResult:
    return search(
        blocks_of(texts, block_lines),
        compile_query(query, mode, ignore_case),
        context_before=before,
        context_after=after,
        max_matches=max_matches,
        timeout_s=timeout_s,
    )


def marked(result: SearchResult) -> list[list[str]]:
    """Groups as `M n` / `C n` markers, the way a reply shows them."""
    return [[f"{'M' if line.is_match else 'C'} {line.number}" for line in group] for group in result.groups]


TEN = [f"line {n}" for n in range(1, 11)]  # "line 1" is line 1


@pytest.mark.parametrize(
    ("query", "before", "after", "expected"),
    [
        pytest.param("line 5$", 0, 0, [["M 5"]], id="one match no context"),
        pytest.param("line 5$", 2, 1, [["C 3", "C 4", "M 5", "C 6"]], id="context before and after"),
        pytest.param("line 1$", 3, 0, [["M 1"]], id="context before line 1 is cut"),
        pytest.param("line 10", 0, 3, [["M 10"]], id="context after the last line is cut"),
        pytest.param(
            "line (2|9)$", 1, 1, [["C 1", "M 2", "C 3"], ["C 8", "M 9", "C 10"]], id="distant groups"
        ),
        pytest.param(
            "line (3|6)$", 1, 1, [["C 2", "M 3", "C 4", "C 5", "M 6", "C 7"]], id="adjacent windows merge"
        ),
        pytest.param("line (3|5)$", 2, 2, [["C 1", "C 2", "M 3", "C 4", "M 5", "C 6", "C 7"]], id="overlap"),
        pytest.param("line (4|5)$", 1, 1, [["C 3", "M 4", "M 5", "C 6"]], id="consecutive matches"),
        pytest.param("line (3|5)$", 0, 0, [["M 3"], ["M 5"]], id="gap of one line separates"),
        pytest.param("nothing", 2, 2, [], id="no match"),
    ],
)
def test_matches_and_context_are_marked_and_grouped(
    query: str, before: int, after: int, expected: list[list[str]]
) -> None:
    result = run(TEN, query, before=before, after=after)
    assert marked(result) == expected
    assert result.matches_total == result.matches_shown == sum(m.startswith("M") for g in expected for m in g)


def test_a_context_larger_than_any_output_takes_every_line() -> None:
    result = run(TEN, "line 5$", before=2**63, after=2**63)
    assert marked(result) == [[f"{'M' if n == 5 else 'C'} {n}" for n in range(1, 11)]]


def test_lines_carry_their_text_and_one_based_numbers() -> None:
    result = run(["alpha", "beta", "gamma"], "beta", before=1)
    assert [(line.number, line.text, line.is_match) for line in result.groups[0]] == [
        (1, "alpha", False),
        (2, "beta", True),
    ]


def test_cap_shows_max_matches_and_counts_the_rest() -> None:
    texts = [f"hit {n}" if n % 10 == 0 else f"miss {n}" for n in range(100)]
    result = run(texts, "hit", max_matches=3)
    assert result.matches_shown == 3
    assert result.matches_total == 10
    assert marked(result) == [["M 1"], ["M 11"], ["M 21"]]


def test_context_after_the_last_shown_match_is_still_included() -> None:
    result = run(TEN, "line [12]$", after=2, max_matches=1)
    assert marked(result) == [["M 1"]]  # line 2 is the next match: never labelled as context
    assert result.matches_total == 2
    result = run(TEN, "line [15]$", after=2, max_matches=1)
    assert marked(result) == [["M 1", "C 2", "C 3"]]
    assert result.matches_total == 2


def test_ignore_case() -> None:
    texts = ["Error: one", "error: two", "ERROR: three", "fine"]
    assert run(texts, "error").matches_total == 1
    assert run(texts, "error", ignore_case=True).matches_total == 3
    assert run(texts, "ERROR", mode="literal", ignore_case=True).matches_total == 3


@pytest.mark.parametrize(
    ("query", "mode", "used", "expected"),
    [
        pytest.param("((", "auto", "literal", [["M 2"]], id="auto falls back to literal"),
        pytest.param(".*", "literal", "literal", [["M 3"]], id="literal escapes regex syntax"),
        pytest.param("a.c", "auto", "regex", [["M 1"], ["M 4"]], id="auto uses a regex that compiles"),
        pytest.param("a.c", "literal", "literal", [["M 4"]], id="literal dot is a dot"),
        pytest.param("^f", "regex", "regex", [["M 2"]], id="anchors work per line"),
    ],
)
def test_query_modes(
    query: str, mode: QueryMode, used: Literal["literal", "regex"], expected: list[list[str]]
) -> None:
    texts = ["abc", "f((x))", "x = .*", "a.c"]
    result = run(texts, query, mode=mode)
    assert result.mode == used
    assert marked(result) == expected


def test_invalid_regex_is_refused_with_the_compiler_message_and_a_hint() -> None:
    with pytest.raises(WarmkernelError) as caught:
        compile_query("((", "regex", ignore_case=False)
    assert caught.value.code == "invalid_query"
    assert "missing )" in caught.value.message
    assert 'query_mode="literal"' in caught.value.message


@pytest.mark.parametrize("mode", ["auto", "literal", "regex"])
def test_empty_query_is_refused(mode: QueryMode) -> None:
    with pytest.raises(WarmkernelError) as caught:
        compile_query("", mode, ignore_case=False)
    assert caught.value.code == "invalid_query"
    assert "empty" in caught.value.message


@pytest.mark.parametrize(
    ("before", "after", "max_matches", "timeout_s", "code", "words"),
    [
        pytest.param(-1, 0, 10, 1.0, "invalid_context", "context_before=-1", id="negative context before"),
        pytest.param(0, -2, 10, 1.0, "invalid_context", "context_after=-2", id="negative context after"),
        pytest.param(0, 0, 0, 1.0, "invalid_limit", "max_matches=0", id="zero max matches"),
        pytest.param(0, 0, 10, 0.0, "invalid_timeout", "timeout_s=0", id="zero timeout"),
    ],
)
def test_invalid_search_arguments_are_refused(
    before: int, after: int, max_matches: int, timeout_s: float, code: str, words: str
) -> None:
    with pytest.raises(WarmkernelError) as caught:
        run(TEN, "line", before=before, after=after, max_matches=max_matches, timeout_s=timeout_s)
    assert caught.value.code == code
    assert words in caught.value.message


def _runaway_message() -> str:
    with pytest.raises(WarmkernelError) as caught:
        run(["ok", RUNAWAY_LINE, "ok"], RUNAWAY, mode="regex", timeout_s=POSITION_BUDGET_S)
    assert caught.value.code == "invalid_query"
    assert 'use query_mode="literal"' in caught.value.message
    return caught.value.message


def test_runaway_regex_gives_up_with_a_hint() -> None:
    # A starved machine can overrun the block search's half of the budget, leaving none to name
    # the line: the line is named in one of a few tries.
    named = f"gave up after {POSITION_BUDGET_S:g} s at line 2"
    assert any(named in _runaway_message() for _ in range(TRIES))


# A million lines: far more than 10 ms of searching, though no single line is slow.
HAYSTACK = ["x" * 200] * 1_000_000
# Ten times the text: about a second of searching, far more than the 50 ms counting budget.
LONG_HAYSTACK = ["x" * 2000] * 1_000_000


@pytest.mark.parametrize(
    ("query", "mode"),
    [
        pytest.param("needle", "literal", id="plain text searched in batches"),
        pytest.param("need[l]e", "regex", id="regex searched line by line"),
    ],
)
def test_time_budget_covers_the_whole_search_not_each_line(query: str, mode: QueryMode) -> None:
    with pytest.raises(WarmkernelError, match=r"gave up after 0\.01 s"):
        run([*HAYSTACK, "needle"], query, mode=mode, timeout_s=0.01)


@pytest.mark.parametrize(
    ("texts", "query", "mode"),
    [
        pytest.param(["x", "x", RUNAWAY_LINE, "x"], f"^x$|{RUNAWAY}", "regex", id="runaway regex"),
        pytest.param(["needle", *LONG_HAYSTACK, "needle"], "needle", "literal", id="many lines"),
    ],
)
def test_counting_past_the_cap_stops_when_the_budget_runs_out(
    texts: list[str], query: str, mode: QueryMode
) -> None:
    result = run(texts, query, mode=mode, after=1, max_matches=1, timeout_s=0.05)
    assert result.matches_shown == 1
    assert result.matches_total is None
    assert marked(result)[0][0] == "M 1"


def _trailing_context() -> list[list[str]]:
    result = run(
        ["x", "y", RUNAWAY_LINE, "z"],
        f"^x$|{RUNAWAY}",
        mode="regex",
        after=3,
        max_matches=1,
        timeout_s=POSITION_BUDGET_S,
    )
    assert result.matches_total is None
    return marked(result)


def test_trailing_context_seen_before_the_budget_ran_out_is_kept() -> None:
    # As above: on a starved machine the context is kept in one of a few tries.
    assert any(_trailing_context() == [["M 1", "C 2"]] for _ in range(TRIES))


@pytest.mark.parametrize(
    ("query", "mode"),
    [
        pytest.param("a\nb", "literal", id="literal with a newline"),
        pytest.param("a\nb", "regex", id="regex with a newline character"),
        pytest.param(r"a\nb", "regex", id="regex with a newline escape"),
        pytest.param(r"a\sb", "regex", id="regex with a space class"),
    ],
)
def test_a_match_never_spans_lines(query: str, mode: QueryMode) -> None:
    assert run(["a", "b"], query, mode=mode).matches_total == 0


@pytest.mark.parametrize(
    ("query", "mode"),
    [
        pytest.param("hit", "auto", id="plain text searched in batches"),
        pytest.param("h[i]t", "auto", id="regex searched line by line"),
    ],
)
@given(
    flags=st.lists(st.booleans(), max_size=40),
    before=st.integers(0, 4),
    after=st.integers(0, 4),
    max_matches=st.integers(1, 12),
    batch=st.integers(1, 6),
)
def test_shown_lines_are_the_windows_around_the_first_matches(
    query: str, mode: QueryMode, flags: list[bool], before: int, after: int, max_matches: int, batch: int
) -> None:
    """Against a reference built from line numbers, with batches small enough to cut windows."""
    texts = ["a hit" if flag else "a miss" for flag in flags]
    result = run(
        texts, query, mode=mode, before=before, after=after, max_matches=max_matches, block_lines=batch
    )
    hits = [n for n, flag in enumerate(flags, start=1) if flag]
    shown_hits = hits[:max_matches]
    first_unshown = hits[max_matches] if len(hits) > max_matches else len(flags) + 1
    windows = sorted(
        {n for hit in shown_hits for n in range(hit - before, hit + after + 1) if 1 <= n < first_unshown}
    )
    assert [line.number for group in result.groups for line in group] == windows
    assert [line.number for group in result.groups for line in group if line.is_match] == shown_hits
    assert all(line.text == texts[line.number - 1] for group in result.groups for line in group)
    for group in result.groups:
        assert [line.number for line in group] == list(range(group[0].number, group[-1].number + 1))
    for first, second in pairwise(result.groups):
        assert second[0].number > first[-1].number + 1
    assert result.matches_shown == len(shown_hits)
    assert result.matches_total == len(hits)


# Fragments of patterns whose answers could differ between a line alone and a line joined with
# its neighbours: anchors, classes and quantifiers that reach a newline, `(?s)`, lookarounds,
# word boundaries, and text anchors that force searching line by line.
PATTERN_PARTS = [
    "a", "b", "ab", " ", "^", "$", ".", r"\s", r"\S", "[^a]", r"\n", "a*", "b+", "x?", "|", "(a|b)",
    r"\b", r"\B", "(?s)", "(?i)", "(?=b)", "(?<=a)", "(?!a)", r"\A", r"\Z", ".*", "[ab]{2}",
]  # fmt: skip


@given(
    parts=st.lists(st.sampled_from(PATTERN_PARTS), min_size=1, max_size=5),
    texts=st.lists(st.text(alphabet="abAB \t", max_size=6), min_size=1, max_size=30),
    ignore_case=st.booleans(),
    block_lines=st.integers(1, 8),
)
def test_a_line_matches_exactly_when_the_pattern_matches_the_line_alone(
    parts: list[str], texts: list[str], ignore_case: bool, block_lines: int
) -> None:
    query = "".join(parts)
    try:
        alone = regex.compile(query, regex.IGNORECASE if ignore_case else 0)
    except regex.error:
        reject()
    expected = [number for number, text in enumerate(texts, start=1) if alone.search(text)]
    result = run(
        texts, query, mode="regex", ignore_case=ignore_case, max_matches=len(texts), block_lines=block_lines
    )
    assert [line.number for group in result.groups for line in group] == expected
    assert result.matches_total == len(expected)
