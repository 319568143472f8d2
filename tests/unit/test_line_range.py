"""The `line_range` grammar: every accepted form, every refused one, and clamping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from warmkernel.errors import WarmkernelError
from warmkernel.execution.line_range import LineRange, parse_line_range

TOTAL = 50


def selected(spec: str | None, total: int = TOTAL) -> list[int]:
    """The 1-based line numbers `spec` selects in a stream of `total` lines."""
    lo, hi = parse_line_range(spec).resolve(total)
    return list(range(lo + 1, hi + 1))


@pytest.mark.parametrize(
    ("spec", "total", "expected"),
    [
        pytest.param(None, TOTAL, list(range(1, 51)), id="none is everything"),
        pytest.param(":", TOTAL, list(range(1, 51)), id="colon alone is everything"),
        pytest.param(":10", TOTAL, list(range(1, 11)), id="head"),
        pytest.param("-10:", TOTAL, list(range(41, 51)), id="tail"),
        pytest.param("20:40", TOTAL, list(range(20, 41)), id="both ends inclusive"),
        pytest.param("3:3", TOTAL, [3], id="one line"),
        pytest.param("5:3", TOTAL, [], id="start after stop selects nothing"),
        pytest.param("-5:-2", TOTAL, [46, 47, 48, 49], id="both from the end"),
        pytest.param("-1:", TOTAL, [50], id="last line"),
        pytest.param(":-1", TOTAL, list(range(1, 51)), id="up to the last line"),
        pytest.param("1:1", TOTAL, [1], id="first line"),
        pytest.param("45:", TOTAL, list(range(45, 51)), id="open stop"),
        pytest.param("45:100", TOTAL, list(range(45, 51)), id="stop past the end clamps"),
        pytest.param("60:70", TOTAL, [], id="start past the end selects nothing"),
        pytest.param("60:", TOTAL, [], id="open range past the end selects nothing"),
        pytest.param("-100:", TOTAL, list(range(1, 51)), id="negative start before line 1 clamps"),
        pytest.param("-100:-60", TOTAL, [], id="both before line 1 select nothing"),
        pytest.param(":-60", TOTAL, [], id="negative stop before line 1 selects nothing"),
        pytest.param("-3:48", TOTAL, [48], id="negative start positive stop"),
        pytest.param("49:-1", TOTAL, [49, 50], id="positive start negative stop"),
        pytest.param("10:", 0, [], id="empty stream"),
        pytest.param(":", 0, [], id="everything of an empty stream"),
        pytest.param("-1:", 0, [], id="last line of an empty stream"),
        pytest.param("99999999999999999999:", TOTAL, [], id="huge number"),
        pytest.param("01:03", TOTAL, [1, 2, 3], id="leading zeros"),
        pytest.param("5" * 5000 + ":", TOTAL, [], id="5,000 digits past the end"),
        pytest.param(":" + "5" * 5000, TOTAL, list(range(1, 51)), id="5,000-digit stop clamps"),
        pytest.param("-" + "5" * 5000 + ":", TOTAL, list(range(1, 51)), id="5,000 digits before line 1"),
        pytest.param("0" * 5000 + "7:7", TOTAL, [7], id="5,000 leading zeros"),
    ],
)
def test_valid_line_range_selects_lines(spec: str | None, total: int, expected: list[int]) -> None:
    assert selected(spec, total) == expected


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        pytest.param(None, LineRange(None, None), id="none"),
        pytest.param(":", LineRange(None, None), id="colon"),
        pytest.param("-10:", LineRange(-10, None), id="tail"),
        pytest.param(":10", LineRange(None, 10), id="head"),
        pytest.param("20:40", LineRange(20, 40), id="both"),
    ],
)
def test_parse_keeps_ends_as_written(spec: str | None, parsed: LineRange) -> None:
    assert parse_line_range(spec) == parsed


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("", id="empty string"),
        pytest.param("abc", id="word"),
        pytest.param("1-3", id="dash instead of colon"),
        pytest.param("5", id="single number"),
        pytest.param("1:2:3", id="three parts"),
        pytest.param("1.5:2", id="fraction"),
        pytest.param(" 1:2", id="leading space"),
        pytest.param("1: 2", id="inner space"),
        pytest.param("1:2\n", id="trailing newline"),
        pytest.param("+1:2", id="plus sign"),
        pytest.param("--1:", id="double minus"),
        pytest.param("a:b", id="letters around colon"),
        pytest.param("\u0661:\u0662", id="arabic-indic digits"),
        pytest.param("1..3", id="dots"),
    ],
)
def test_malformed_line_range_is_refused_with_the_valid_forms(spec: str) -> None:
    with pytest.raises(WarmkernelError) as caught:
        parse_line_range(spec)
    assert caught.value.code == "invalid_line_range"
    assert '"20:40", ":10", "-10:" or "3:3"' in caught.value.message
    if spec:
        assert f'"{spec}"' in caught.value.message


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("0:5", id="zero start"),
        pytest.param("5:0", id="zero stop"),
        pytest.param("0:", id="zero open"),
        pytest.param(":0", id="open zero"),
        pytest.param("-0:", id="minus zero"),
        pytest.param("00:3", id="double zero"),
    ],
)
def test_line_zero_is_refused_because_lines_are_one_based(spec: str) -> None:
    with pytest.raises(WarmkernelError) as caught:
        parse_line_range(spec)
    assert caught.value.code == "invalid_line_range"
    assert "1-based" in caught.value.message
    assert "line 0" in caught.value.message


def test_message_for_malformed_range_names_what_was_given() -> None:
    with pytest.raises(WarmkernelError) as caught:
        parse_line_range("1-3")
    assert caught.value.message == (
        'line_range "1-3" is not START:STOP; use 1-based lines like "20:40", ":10", "-10:" or "3:3" '
        "(-1 is the last line)"
    )


def test_message_quotes_a_long_spec_shortened() -> None:
    with pytest.raises(WarmkernelError) as caught:
        parse_line_range("x" * 1000)
    assert f'"{"x" * 40}..."' in caught.value.message
    assert len(caught.value.message) < 200


ends = st.one_of(st.none(), st.integers(1, 80), st.integers(-80, -1))


@given(start=ends, stop=ends, total=st.integers(0, 60))
def test_resolve_selects_lines_between_the_ends(start: int | None, stop: int | None, total: int) -> None:
    """Against a reference that filters line numbers instead of computing indices."""

    def absolute(end: int) -> int:
        return end if end > 0 else total + 1 + end

    spec = f"{'' if start is None else start}:{'' if stop is None else stop}"
    expected = [
        n
        for n in range(1, total + 1)
        if (start is None or n >= absolute(start)) and (stop is None or n <= absolute(stop))
    ]
    lo, hi = parse_line_range(spec).resolve(total)
    assert 0 <= lo <= hi <= total
    assert list(range(lo + 1, hi + 1)) == expected
