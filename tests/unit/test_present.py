"""Reply texts without a kernel: the inline budget, clears, and the tool-call hints in them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from warmkernel.execution.directive import Directives
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.kernel.inspector import VariableListing
from warmkernel.notebook.binding import NotebookView
from warmkernel.notebook.document import Notebook, NotebookCell
from warmkernel.notebook.staleness import KernelFacts, evaluate
from warmkernel.replies.cell_states import notebook_status_reply
from warmkernel.replies.hints import call, default_wait
from warmkernel.replies.reply import Reply
from warmkernel.replies.runs import execution_reply
from warmkernel.replies.variables import variables_reply
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

SETTINGS = Settings()
FINISHED = WaitEnd("finished", 0.0)
CLEARED_LINES_1_2 = (
    '[lines 1-2 were cleared by clear_output; read with read_python_output(execution=7, line_range="1:2")]'
)


def record(*, full_output: bool = False) -> ExecutionRecord:
    return ExecutionRecord(ExecutionNumber(7), "work()", Generation(1), Directives(full_output=full_output))


def printed(rec: ExecutionRecord, lines: list[str]) -> None:
    for line in lines:
        rec.output_arrived()
        rec.output.append("stdout", line + "\n")


def finished(lines: list[str], *, full_output: bool = False) -> ExecutionRecord:
    rec = record(full_output=full_output)
    printed(rec, lines)
    rec.finish(ExecutionState.COMPLETED)
    return rec


def body(reply: Reply) -> list[str]:
    """The reply's lines after its `In [N] · T:` header."""
    header, *rest = reply.text.splitlines()
    assert header.startswith("In [7] · ")
    return rest


def numbered(count: int) -> list[str]:
    return [f"line {n}" for n in range(1, count + 1)]


def budget(lines: int = 300, chars: int = 16_000) -> Settings:
    return replace(SETTINGS, inline_max_lines=lines, inline_max_chars=chars)


# -- the inline budget ------------------------------------------------------------------------


def test_an_error_without_a_traceback_says_its_reason_in_the_header() -> None:
    rec = record()
    rec.finish(ExecutionState.ERROR, reason="the kernel went idle without replying")
    header = execution_reply(rec, SETTINGS, waited=FINISHED).text.splitlines()[0]
    assert header.endswith(": error (the kernel went idle without replying)")


def test_output_within_the_budget_is_shown_whole() -> None:
    reply = execution_reply(finished(numbered(10)), budget(lines=10), waited=FINISHED)
    assert body(reply) == numbered(10)
    assert reply.data["omitted_lines"] is None


def test_one_line_over_the_line_budget_shows_head_and_tail_around_the_read_call() -> None:
    reply = execution_reply(finished(numbered(11)), budget(lines=10), waited=FINISHED)
    assert body(reply) == [
        *numbered(5),
        '... lines 6-6 of 11 omitted; read them with read_python_output(execution=7, line_range="6:6") ...',
        "line 7",
        "line 8",
        "line 9",
        "line 10",
        "line 11",
    ]
    assert reply.data["omitted_lines"] == [6, 6]


def test_a_long_output_keeps_half_the_line_budget_at_each_end() -> None:
    reply = execution_reply(finished(numbered(1000)), budget(lines=300), waited=FINISHED)
    lines = body(reply)
    assert lines[:150] == numbered(150)
    assert lines[150] == (
        "... lines 151-850 of 1000 omitted; read them with "
        'read_python_output(execution=7, line_range="151:850") ...'
    )
    assert lines[151:] == [f"line {n}" for n in range(851, 1001)]


def test_the_character_budget_cuts_head_and_tail_and_clips_the_lines_at_its_edges() -> None:
    rec = finished([f"{n}" * 29 + "." for n in range(10)])  # ten lines of 30 characters
    reply = execution_reply(rec, budget(chars=100), waited=FINISHED)
    assert body(reply) == [
        "0" * 29 + ".",
        "1" * 19 + "...[11 chars omitted]",
        '... lines 3-8 of 10 omitted; read them with read_python_output(execution=7, line_range="3:8") ...',
        "8" * 19 + "...[11 chars omitted]",
        "9" * 29 + ".",
    ]


def test_output_exactly_at_the_character_budget_fits_and_one_character_less_is_cut() -> None:
    lines = ["x" * 10, "y" * 70, "z" * 17]  # 97 characters and 3 newlines
    rec = finished(lines)
    assert body(execution_reply(rec, budget(chars=100), waited=FINISHED)) == lines
    # head and tail meet, so no line is omitted, but the head's half of the budget clips its edge
    assert body(execution_reply(rec, budget(chars=99), waited=FINISHED)) == [
        "x" * 10,
        "y" * 38 + "...[32 chars omitted]",
        "z" * 17,
        '... line 2 is cut short; read with read_python_output(execution=7, line_range="2:2") ...',
    ]


def test_one_line_longer_than_the_budget_names_the_call_that_reads_it_whole() -> None:
    reply = execution_reply(finished(["a" * 500]), budget(chars=100), waited=FINISHED)
    assert body(reply) == [
        "a" * 50 + "...[450 chars omitted]",
        '... line 1 is cut short; read with read_python_output(execution=7, line_range="1:1") ...',
    ]


def test_full_output_directive_lifts_the_budget() -> None:
    rec = finished(numbered(50), full_output=True)
    assert body(execution_reply(rec, budget(lines=10), waited=FINISHED)) == numbered(50)


# -- clear_output -------------------------------------------------------------------------------


def test_a_clear_leaves_what_came_after_it_and_names_the_call_that_reads_the_rest() -> None:
    rec = record()
    printed(rec, ["frame 0", "frame 1"])
    rec.displays.clear(rec.output, wait=False)
    printed(rec, ["frame 2"])
    rec.finish(ExecutionState.COMPLETED)
    assert body(execution_reply(rec, SETTINGS, waited=FINISHED)) == [
        CLEARED_LINES_1_2,
        "frame 2",
    ]


def test_a_waiting_clear_takes_effect_at_the_next_output_and_one_cleared_line_is_singular() -> None:
    rec = record()
    printed(rec, ["frame 0"])
    rec.displays.clear(rec.output, wait=True)
    printed(rec, ["frame 1"])
    rec.finish(ExecutionState.COMPLETED)
    assert body(execution_reply(rec, SETTINGS, waited=FINISHED)) == [
        '[line 1 was cleared by clear_output; read with read_python_output(execution=7, line_range="1:1")]',
        "frame 1",
    ]


def test_the_budget_counts_from_the_last_clear_and_the_omitted_range_is_of_all_lines() -> None:
    rec = record()
    printed(rec, ["old 1", "old 2"])
    rec.displays.clear(rec.output, wait=False)
    printed(rec, [f"line {n}" for n in range(3, 13)])
    rec.finish(ExecutionState.COMPLETED)
    assert body(execution_reply(rec, budget(lines=4), waited=FINISHED)) == [
        CLEARED_LINES_1_2,
        "line 3",
        "line 4",
        '... lines 5-10 of 12 omitted; read them with read_python_output(execution=7, line_range="5:10") ...',
        "line 11",
        "line 12",
    ]


# -- hints --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        pytest.param(call("reset_python"), "reset_python()", id="no arguments"),
        pytest.param(
            call("notebook_status", path="it's.ipynb"), 'notebook_status(path="it\'s.ipynb")', id="apostrophe"
        ),
        pytest.param(
            call("search_python_output", query='a "b" \\d'),
            r'search_python_output(query="a \"b\" \\d")',
            id="quotes and backslashes",
        ),
        pytest.param(
            call("notebook_status", path="données\n.ipynb"),
            'notebook_status(path="données\\n.ipynb")',
            id="unicode and a newline",
        ),
        pytest.param(
            call("wait_python", execution=3, timeout_seconds=2.5, silence_seconds=None),
            "wait_python(execution=3, timeout_seconds=2.5, silence_seconds=null)",
            id="numbers and null",
        ),
        pytest.param(
            call("list_python_variables", include_modules=True),
            "list_python_variables(include_modules=true)",
            id="bool",
        ),
        pytest.param(
            call("read_python_output", line_range="1:2", execution=4),
            'read_python_output(line_range="1:2", execution=4)',
            id="argument order",
        ),
    ],
)
def test_hints_write_arguments_as_json_in_the_order_given(hint: str, expected: str) -> None:
    assert hint == expected


def test_the_plan_hint_quotes_a_path_with_an_apostrophe() -> None:
    cells = (NotebookCell(0, "a", "x = 1", False), NotebookCell(1, "b", "print(x)", False))
    notebook = Notebook(Path("/w/it's.ipynb"), 5, cells)
    view = NotebookView("it's.ipynb", notebook, evaluate(cells, KernelFacts()), facts_current=True)
    reply = notebook_status_reply(view, SETTINGS)
    plan = reply.text.splitlines()[-1]
    assert plan == 'plan: a, b. run_notebook_cells(path="it\'s.ipynb") runs them in order'


def test_a_running_cell_names_the_calls_that_follow_it() -> None:
    rec = record()
    printed(rec, ["working"])
    reply = execution_reply(rec, SETTINGS, waited=WaitEnd("timeout", 10.0))
    assert reply.text.splitlines()[1:] == [
        "working",
        "Still running. Next: wait_python(execution=7) to keep waiting, "
        "read_python_output(execution=7) to read the output, or interrupt_python() to stop it.",
    ]


@pytest.mark.parametrize(("wait_s", "expected"), [(10.0, "10 s"), (60.0, "60 s"), (2.5, "2.5 s")])
def test_the_wait_a_hint_mentions_follows_the_settings(wait_s: float, expected: str) -> None:
    assert default_wait(replace(SETTINGS, default_wait_s=wait_s)) == expected


def test_variable_listing_hints_are_built_by_the_hint_function() -> None:
    listing = VariableListing(
        variables=[], total=0, imports_hidden=2, modules_hidden=1, summary_status="ok", during_execution=None
    )
    reply = variables_reply(listing)
    assert reply.text == (
        "0 variables; 2 imports not listed (list_python_variables(include_imports=true) lists them). "
        'inspect_python_variable(name="NAME") summarizes one.'
    )
