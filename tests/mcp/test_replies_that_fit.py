"""Replies that fit: tracebacks with library frames collapsed (every frame kept in the traceback
stream and shown by --full-output), values below their `Out[N]:` label, listings that show what a
cell does, and a notebook status that names the changed file."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from mcp import Client
from nbformat.v4 import new_code_cell, new_notebook

from tests.mcp.calls import body, call, run
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

PANDAS_TYPO = (
    "import pandas as pd\nsales = pd.DataFrame({'a': [1, 2], 'b': [3.0, 4.0]})\n"
    "sales.groupby('a').agg({'zz': 'sum'})"
)


async def test_a_pandas_traceback_collapses_its_library_frames(client: Client) -> None:
    number, text = await run(client, PANDAS_TYPO)
    lines = body(text)
    assert lines[-1] == "KeyError: \"Label(s) ['zz'] do not exist\""  # the exception line stays last
    (header,) = [i for i, line in enumerate(lines) if "library frames" in line]
    count = int(lines[header].strip("[").split()[0])
    collapsed = lines[header + 1 : header + 1 + count]
    assert count >= 2 and all(line.startswith("  site-packages/pandas/") for line in collapsed)
    assert any(line.endswith(" in DataFrameGroupBy.aggregate") for line in collapsed)
    assert f'read_python_output(execution={number}, stream="traceback") shows every frame' in lines[header]
    assert f"Cell In[{number}], line 3" in lines  # the user's frame stays whole
    assert "----> 3 sales.groupby('a').agg({'zz': 'sum'})" in lines
    full = await call(client, "read_python_output", execution=number, stream="traceback")
    assert len(full.splitlines()) > len(lines) + count  # the stream keeps every frame's source
    assert "site-packages/pandas/core/groupby/generic.py" in full


async def test_full_output_shows_every_frame(client: Client) -> None:
    _, text = await run(client, "# warmkernel: --full-output\n" + PANDAS_TYPO)
    assert "library frames" not in text and "File " in text and "-> " in text


async def test_a_workspace_module_frame_stays_whole(tmp_path: Path, fresh_client: FreshClient) -> None:
    (tmp_path / "helpers.py").write_text("import json\n\n\ndef load(text):\n    return json.loads(text)\n")
    async with fresh_client() as client:
        _, text = await run(client, "import helpers\nhelpers.load('{')")
    lines = body(text)
    start = next(i for i, line in enumerate(lines) if line.startswith("File ") and "helpers.py:5" in line)
    assert lines[start + 1 : start + 3] == ["      4 def load(text):", "----> 5     return json.loads(text)"]
    (header,) = [line for line in lines if "library frames" in line or "library frame," in line]
    assert lines.index(header) > start
    assert all("helpers.py" not in line for line in lines[lines.index(header) :])
    assert lines[-1].startswith("JSONDecodeError: Expecting property name")


async def test_a_value_of_several_lines_starts_below_its_label(client: Client) -> None:
    number, text = await run(client, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3.5, 4.5]})")
    assert body(text) == [f"Out[{number}]:", "   a    b", "0  1  3.5", "1  2  4.5"]
    number, text = await run(client, "6 * 7")
    assert body(text) == [f"Out[{number}]: 42"]


async def test_history_shows_what_each_cell_does(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        await run(client, "import os\n# the data\nrows = [1, 2, 3]")
        await run(client, "print('one')")
        text = await call(client, "list_python_executions")
    first, second = (line.split("  ", 2)[-1].split() for line in text.splitlines())
    assert first[-3:] == ["1", "line", "print('one')"]
    assert second[-7:] == ["0", "lines", "rows", "=", "[1,", "2,", "3]"]


async def test_file_changed_names_the_file(tmp_path: Path, fresh_client: FreshClient) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prices.csv").write_text("a\n1\n")
    notebook = new_notebook(cells=[new_code_cell("text = open('data/prices.csv').read()", id="load")])
    (tmp_path / "nb.ipynb").write_text(nbformat.writes(notebook))
    async with fresh_client(result_mode="structured") as client:
        await call(client, "run_notebook_cells", path="nb.ipynb", timeout_seconds=60)
        (tmp_path / "data" / "prices.csv").write_text("a\n2\n")
        result = await client.call_tool("notebook_status", {"path": "nb.ipynb"})
    assert result.structured_content is not None
    (cell,) = result.structured_content["cells"]
    assert cell["reasons"] == ["file_changed"]
    assert cell["changed_files"] == [str(tmp_path / "data" / "prices.csv")]
    text = result.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
    assert "file_changed: data/prices.csv" in text
