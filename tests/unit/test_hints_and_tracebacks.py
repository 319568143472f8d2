"""Pure parts of replies that fit: CLI spellings of hints, condensed tracebacks, labelled values,
counts, and the line a listing shows for a cell."""

from __future__ import annotations

import pytest

from warmkernel.execution.displays import DisplayLog
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.record import ExecutionRecord
from warmkernel.replies.hints import call, command, spoken_to
from warmkernel.replies.reply import counted
from warmkernel.replies.tracebacks import condense
from warmkernel.types import ExecutionNumber, Generation


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        pytest.param("wait_python", {"execution": 7}, "warmkernel wait 7", id="positional"),
        pytest.param("interrupt_python", {}, "warmkernel interrupt", id="no arguments"),
        pytest.param(
            "read_python_output",
            {"execution": 24, "line_range": "151:299850"},
            "warmkernel read 24 --lines 151:299850",
            id="flag",
        ),
        pytest.param(
            "read_python_output",
            {"execution": 3, "stream": "images", "line_range": "-1:"},
            "warmkernel read 3 --stream images --lines -1:",
            id="choice and a dash value",
        ),
        pytest.param(
            "read_python_output",
            {"execution": 3, "stream": "combined"},
            "warmkernel read 3",
            id="default left out",
        ),
        pytest.param(
            "send_python_input",
            {"text": "...", "execution": 4},
            "warmkernel input ... --execution 4",
            id="execution flag",
        ),
        pytest.param(
            "run_python",
            {"freeform": "x = 'a b'"},
            "warmkernel run 'x = '\"'\"'a b'\"'\"''",
            id="shell quoted",
        ),
        pytest.param(
            "list_python_variables", {"include_imports": True}, "warmkernel vars --imports", id="bool flag"
        ),
        pytest.param("inspect_python_variable", {"name": "NAME"}, "warmkernel inspect NAME", id="name"),
        pytest.param(
            "notebook_status", {"path": "it's.ipynb"}, "warmkernel nb status 'it'\"'\"'s.ipynb'", id="nb verb"
        ),
        pytest.param("run_notebook_cells", {"path": "a.ipynb"}, "warmkernel nb run a.ipynb", id="nb run"),
        pytest.param(
            "wait_python",
            {"execution": 2, "timeout_seconds": 0},
            "warmkernel wait 2 --timeout 0",
            id="not the show verb",
        ),
        pytest.param(
            "search_python_output",
            {"query": "x", "query_mode": "regex"},
            "warmkernel search x --regex",
            id="const",
        ),
    ],
)
def test_a_hint_spelled_for_the_cli_is_the_command_that_makes_the_call(
    tool: str, arguments: dict[str, object], expected: str
) -> None:
    assert command(tool, **arguments) == expected  # pyright: ignore[reportArgumentType]


def test_the_face_decides_the_spelling_only_inside_its_block() -> None:
    assert call("wait_python", execution=7) == "wait_python(execution=7)"
    with spoken_to("cli"):
        assert call("wait_python", execution=7) == "warmkernel wait 7"
    assert call("wait_python", execution=7) == "wait_python(execution=7)"


PANDAS = """\
---------------------------------------------------------------------------
KeyError                                  Traceback (most recent call last)
Cell In[1], line 1
----> 1 df.groupby('a').agg({'zz':'sum'})

File /w/lib/python3.11/site-packages/pandas/core/groupby/generic.py:1432, in DataFrameGroupBy.aggregate(self)
   1430 op = GroupByApply(self, func)
-> 1432 result = op.agg()

File /w/.venv/lib/python3.11/site-packages/pandas/core/apply.py:350, in Apply.agg(self)
    349 if is_dict_like(func):
--> 350     return self.agg_dict_like()
   (...)    352     pass

File pandas/_libs/index.pyx:172, in pandas._libs.index.IndexEngine.get_loc()
--> 172 'Could not get source, probably due dynamically evaluated source code.'
File pandas/_libs/hashtable_class_helper.pxi:7726, in pandas._libs.hashtable.PyObjectHashTable.get_item()
-> 7726 'Could not get source, probably due dynamically evaluated source code.'

File /w/helpers.py:3, in check(frame)
      2 def check(frame):
----> 3     return frame.agg(x)

File ~/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py:353, in JSONDecoder.raw_decode(self, s, idx)
    352 try:
--> 353     obj, end = self.scan_once(s, idx)

KeyError: "Label(s) ['zz'] do not exist"
"""


def test_library_frames_collapse_to_one_line_each_and_the_rest_stays_whole() -> None:
    lines = condense(PANDAS.splitlines(), "READ shows every frame")
    assert lines == [
        "---------------------------------------------------------------------------",
        "KeyError                                  Traceback (most recent call last)",
        "Cell In[1], line 1",
        "----> 1 df.groupby('a').agg({'zz':'sum'})",
        "",
        "[4 library frames, one line each; READ shows every frame]",
        "  site-packages/pandas/core/groupby/generic.py:1432 in DataFrameGroupBy.aggregate",
        "  site-packages/pandas/core/apply.py:350 in Apply.agg",
        "  pandas/_libs/index.pyx:172 in pandas._libs.index.IndexEngine.get_loc",
        "  pandas/_libs/hashtable_class_helper.pxi:7726 in pandas._libs.hashtable.PyObjectHashTable.get_item",
        "",
        "File /w/helpers.py:3, in check(frame)",
        "      2 def check(frame):",
        "----> 3     return frame.agg(x)",
        "",
        "[1 library frame, one line each; READ shows every frame]",
        "  python3.11/json/decoder.py:353 in JSONDecoder.raw_decode",
        "",
        "KeyError: \"Label(s) ['zz'] do not exist\"",
    ]


def test_a_traceback_of_another_shape_passes_through() -> None:
    plain = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "ValueError: no"]
    assert condense(plain, "READ") == plain


def record() -> ExecutionRecord:
    return ExecutionRecord(ExecutionNumber(3), "", Generation(1), output=OutputLog(), displays=DisplayLog())


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        pytest.param("42", ["Out[3]: 42"], id="one line stays on the label's line"),
        pytest.param("   a  b\n0  1  2", ["Out[3]:", "   a  b", "0  1  2"], id="a table starts below it"),
        pytest.param("x\n", ["Out[3]: x"], id="a trailing newline is not a second line"),
    ],
)
def test_a_value_of_several_lines_starts_below_its_label(text: str, lines: list[str]) -> None:
    rec = record()
    rec.displays.show(rec.output, {"text/plain": text}, now=0.0, label="Out[3]: ")
    assert rec.output.lines("combined", 0, rec.output.line_count("combined")) == lines


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("import pandas as pd\nfrom x import y\n\n# load it\ndf = pd.read_csv('a')", "df = pd.read_csv('a')"),
        ("# warmkernel: --wait 5\nimport time\ntime.sleep(1)", "time.sleep(1)"),
        ("import os", "import os"),
        ("   \n", ""),
        ("important = 1", "important = 1"),
    ],
)
def test_a_listing_shows_the_first_line_that_is_not_an_import_or_a_comment(source: str, shown: str) -> None:
    assert ExecutionRecord(ExecutionNumber(1), source, Generation(1)).first_line == shown


@pytest.mark.parametrize(("n", "expected"), [(0, "0 lines"), (1, "1 line"), (2, "2 lines")])
def test_counts_agree_with_their_noun(n: int, expected: str) -> None:
    assert counted(n, "line") == expected
