"""Reading and searching an execution's output through MCP, and the argument errors of both."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.mcp.calls import call, call_error, run
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

FIFTY = "for i in range(1, 51): print(f'row {i}')"


def rows(*numbers: int) -> list[str]:
    return [f"row {i}" for i in numbers]


async def read(client: Client, number: int, line_range: str | None, **extra: object) -> list[str]:
    text = await call(client, "read_python_output", execution=number, line_range=line_range, **extra)
    if text in (
        "No output lines are available.",
        "No lines in that range: the combined output has 50 (1-50).",
    ):
        return []
    return text.splitlines()[1:]


@pytest.mark.parametrize(
    ("line_range", "expected"),
    [
        pytest.param(":10", rows(*range(1, 11)), id="first-ten"),
        pytest.param("-10:", rows(*range(41, 51)), id="last-ten"),
        pytest.param("20:40", rows(*range(20, 41)), id="middle"),
        pytest.param("3:3", rows(3), id="single-line"),
        pytest.param("5:3", [], id="reversed-selects-nothing"),
        pytest.param(":", rows(*range(1, 51)), id="everything"),
        pytest.param(None, rows(*range(1, 51)), id="default-everything"),
        pytest.param("45:99", rows(*range(45, 51)), id="stop-clamped"),
        pytest.param("-99:2", rows(1, 2), id="negative-start-clamped"),
        pytest.param("-3:-2", rows(48, 49), id="both-negative"),
        pytest.param("60:70", [], id="past-the-end"),
    ],
)
async def test_line_range_selects_lines(client: Client, line_range: str | None, expected: list[str]) -> None:
    number, _ = await run(client, FIFTY)
    assert await read(client, number, line_range) == expected


async def test_read_header_names_range_total_and_state(client: Client) -> None:
    number, _ = await run(client, FIFTY)
    text = await call(client, "read_python_output", execution=number, line_range="20:40")
    assert text.splitlines()[0] == f"execution {number} · combined · lines 20-40 of 50 (completed)"


async def test_empty_selection_says_no_lines(client: Client) -> None:
    number, _ = await run(client, "x = 1")
    assert await call(client, "read_python_output", execution=number) == "No output lines are available."
    number, _ = await run(client, FIFTY)
    for line_range in ("5:3", "60:70"):
        text = await call(client, "read_python_output", execution=number, line_range=line_range)
        assert text == "No lines in that range: the combined output has 50 (1-50)."


@pytest.mark.parametrize("line_range", ["abc", "1-3", "0:5", "1:2:3", "5", "", " 1:2", "1.5:2"])
async def test_invalid_line_range_is_a_coded_error(client: Client, line_range: str) -> None:
    number, _ = await run(client, FIFTY)
    code, message = await call_error(client, "read_python_output", execution=number, line_range=line_range)
    assert code == "invalid_line_range"
    assert '"20:40"' in message


async def test_streams_are_kept_apart_and_combined_keeps_order(client: Client) -> None:
    code = (
        "import sys\n"
        "print('out 1', flush=True)\n"
        "print('err 1', file=sys.stderr, flush=True)\n"
        "print('out 2')\n"
        "'value'"
    )
    number, _ = await run(client, code)
    assert await read(client, number, None, stream="stdout") == ["out 1", "out 2"]
    assert await read(client, number, None, stream="stderr") == ["err 1"]
    assert await read(client, number, None, stream="result") == [f"Out[{number}]: 'value'"]
    assert await read(client, number, None, stream="traceback") == []
    assert await read(client, number, None) == ["out 1", "err 1", "out 2", f"Out[{number}]: 'value'"]


async def test_max_chars_clips_each_line_without_changing_numbering(client: Client) -> None:
    number, _ = await run(client, "print('a' * 50); print('short')")
    assert await read(client, number, None, max_chars=10) == ["aaaaaaaaaa...[40 chars omitted]", "short"]
    assert await read(client, number, "1:1") == ["a" * 50]


async def test_read_reply_limit_names_the_continuing_call(fresh_client: object) -> None:
    async with fresh_client(read_max_chars=1000) as client:  # type: ignore[operator]
        number, _ = await run(client, "for i in range(100): print('x' * 99)")
        text = await call(client, "read_python_output", execution=number)
        lines = text.splitlines()
        assert lines[0] == f"execution {number} · combined · lines 1-10 of 100 (completed)"
        assert lines[-1].endswith(
            f'read_python_output(execution={number}, stream="combined", line_range="11:100")]'
        )


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        pytest.param({"stream": "stdoot"}, "invalid_stream", id="stream"),
        pytest.param({"max_chars": 0}, "invalid_max_chars", id="max-chars"),
        pytest.param({"execution": 0}, "execution_not_found", id="execution-zero"),
        pytest.param({"execution": 10**6}, "execution_not_found", id="execution-missing"),
        pytest.param({"line_range": 5}, "invalid_line_range", id="line-range-type"),
        pytest.param({"bogus": 1}, "invalid_arguments", id="unknown-parameter"),
    ],
)
async def test_read_argument_errors_have_stable_codes(
    client: Client, arguments: dict[str, object], code: str
) -> None:
    await run(client, "1")
    assert (await call_error(client, "read_python_output", **arguments))[0] == code


async def test_missing_execution_names_what_exists(client: Client) -> None:
    number, _ = await run(client, "1")
    _, message = await call_error(client, "python_execution_status", execution=number + 1000)
    assert f"execution {number + 1000} does not exist in kernel main; executions 1-{number} exist" == message


async def test_search_marks_matches_and_context_with_separators(client: Client) -> None:
    number, _ = await run(client, FIFTY)
    text = await call(
        client,
        "search_python_output",
        query=r"row (10|40)$",
        execution=number,
        context_before=1,
        context_after=1,
    )
    assert text.splitlines() == [
        f"search 'row (10|40)$' (regex) in execution {number} · combined: 2 matching lines",
        "C 9 | row 9",
        "M 10 | row 10",
        "C 11 | row 11",
        "--",
        "C 39 | row 39",
        "M 40 | row 40",
        "C 41 | row 41",
    ]


async def test_search_caps_matches_and_counts_the_rest(client: Client) -> None:
    number, _ = await run(client, FIFTY)
    text = await call(client, "search_python_output", query="row", execution=number, max_matches=3)
    lines = text.splitlines()
    assert lines[1:] == ["M 1 | row 1", "M 2 | row 2", "M 3 | row 3", "47 more matches"]


async def test_a_search_reply_keeps_under_a_reads_limit_and_says_what_it_left_out(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client(read_max_chars=2000) as client:
        number, _ = await run(client, "for i in range(500): print(f'match {i:03}', 'x' * 50)")
        reply = await call(client, "search_python_output", query="match", execution=number, max_matches=500)
        lines = reply.splitlines()
        assert len(reply) < 2000 + 200
        assert lines[1].startswith("M 1 | match 000")
        shown = sum(line.startswith("M ") for line in lines)
        assert lines[-1] == (
            f"{500 - shown} more matches found were left out to keep the reply under 2,000 characters: "
            "lower max_matches, the context or max_chars, or narrow the query"
        )
        # context never crowds a match out: the one match shows, without the context that does not fit
        crowded = await call(
            client, "search_python_output", query="match 400 ", execution=number, context_before=300
        )
        assert len(crowded) < 2000 and "\nM 401 | match 400 " in crowded
        # a line longer than the reply is clipped to it
        long, _ = await run(client, "print('A' * 5000 + 'END')")
        clipped = await call(client, "search_python_output", query="END", execution=long)
        assert len(clipped) < 2000 and clipped.splitlines()[1].startswith("M 1 | AAAA")


async def test_search_auto_falls_back_to_literal_and_says_so(client: Client) -> None:
    number, _ = await run(client, "print('f((x'); print('other')")
    text = await call(client, "search_python_output", query="f((", execution=number)
    assert "(literal)" in text.splitlines()[0]
    assert text.splitlines()[1:] == ["M 1 | f((x"]


async def test_search_ignore_case_and_stream(client: Client) -> None:
    number, _ = await run(client, "import sys\nprint('Alpha')\nprint('alpha', file=sys.stderr)")
    text = await call(
        client, "search_python_output", query="ALPHA", execution=number, ignore_case=True, stream="stderr"
    )
    assert text.splitlines()[1:] == ["M 1 | alpha"]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        pytest.param({"query": "(", "query_mode": "regex"}, "invalid_query", id="invalid-regex"),
        pytest.param({"query": ""}, "invalid_query", id="empty-query"),
        pytest.param({"query": "x", "query_mode": "fuzzy"}, "invalid_query", id="unknown-mode"),
        pytest.param({"query": "x", "context_before": -1}, "invalid_context", id="negative-context"),
        pytest.param({"query": "x", "max_matches": 0}, "invalid_limit", id="zero-matches"),
    ],
)
async def test_search_argument_errors_have_stable_codes(
    client: Client, arguments: dict[str, object], code: str
) -> None:
    await run(client, "print('x')")
    assert (await call_error(client, "search_python_output", **arguments))[0] == code


async def test_invalid_regex_error_suggests_literal_mode(client: Client) -> None:
    await run(client, "print('x')")
    _, message = await call_error(client, "search_python_output", query="(", query_mode="regex")
    assert 'query_mode="literal"' in message
