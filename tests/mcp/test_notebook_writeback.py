"""Notebook write-back as Jupyter writes it: the same notebook run by run_notebook_cells and by
nbclient (what `jupyter execute` and papermill use) leaves the same outputs and execution counts
in every cell, compared as nbclient's own tests compare notebooks (streams coalesced, metadata,
colours and memory addresses normalised away).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from mcp import Client
from nbclient import NotebookClient
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.mcp.calls import call, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

NB = "nb.ipynb"

CELLS: list[tuple[str, str, list[str]]] = [
    ("prints", "print('a')\nprint('b')", []),
    ("cleared", "from IPython.display import clear_output\nprint('gone')\nclear_output()\nprint('kept')", []),
    ("waited", "print('one')\nclear_output(wait=True)\nprint('two')\n6 * 7", []),
    ("waited_last", "print('stays')\nclear_output(wait=True)", []),
    (
        "updated",
        "from IPython.display import display\n"
        "h = display('first', display_id=True)\n"
        "print('between')\n"
        "h.update('second')",
        [],
    ),
    ("shown_early", "early = display('early', display_id=True)", []),
    ("updates_early", "early.update('late')\nprint('updated')", []),
    ("empty", "", []),
    ("blank", "  \n\n", []),
    ("skipped", "print('must not run')\nskipped = 1", ["skip-execution"]),
    ("expected", "raise ValueError('meant to fail')", ["raises-exception"]),
    ("after", "print('after')\n'skipped' in globals()", []),
]


def notebook() -> NotebookNode:
    nb = new_notebook(cells=[new_markdown_cell("# Write-back", id="md")])
    for cell_id, source, tags in CELLS:
        cell = new_code_cell(source, id=cell_id)
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


# -- normalised as nbclient's tests normalise (tests/test_client.py: normalize_output) ---------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _coalesced(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive stream outputs of one name joined, as nbconvert's coalesce_streams does."""
    joined: list[dict[str, Any]] = []
    for output in outputs:
        last = joined[-1] if joined else None
        if (
            last
            and output["output_type"] == last["output_type"] == "stream"
            and last["name"] == output["name"]
        ):
            last["text"] += output["text"]
        else:
            joined.append(dict(output))
    return joined


def _normalised(output: dict[str, Any]) -> dict[str, Any]:
    output = {key: value for key, value in output.items() if key not in ("metadata", "transient")}
    if "text" in output:
        output["text"] = _ADDRESS.sub("<HEXADDR>", output["text"])
    if "data" in output:
        output["data"] = {key: _ADDRESS.sub("<HEXADDR>", str(value)) for key, value in output["data"].items()}
    if "traceback" in output:
        output["traceback"] = [_ANSI.sub("", line) for line in output["traceback"]]
    return output


def cells_as_saved(nb: NotebookNode) -> dict[str, tuple[int | None, list[dict[str, Any]]]]:
    return {
        cell.id: (cell.get("execution_count"), [_normalised(o) for o in _coalesced(cell.get("outputs", []))])
        for cell in nb.cells
        if cell.cell_type == "code"
    }


async def run_notebook(client: Client, cells: str | list[str] = "stale") -> dict[str, Any]:
    with anyio.fail_after(90):
        result = await client.call_tool(
            "run_notebook_cells", {"path": NB, "cells": cells, "timeout_seconds": 60}
        )
    assert not result.is_error and result.structured_content is not None, text_of(result)
    return result.structured_content


async def run_with_nbclient(nb: NotebookNode, folder: Path) -> NotebookNode:
    executed = copy.deepcopy(nb)
    client = NotebookClient(
        executed, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    with anyio.fail_after(90):
        await client.async_execute()
    return executed


async def test_a_run_writes_the_outputs_nbclient_writes_for_the_same_notebook(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    nb = notebook()
    (tmp_path / NB).write_text(nbformat.writes(nb), encoding="utf-8")
    async with fresh_client(result_mode="structured") as client:
        await run_notebook(client, cells="all")
    ours = cells_as_saved(nbformat.read(tmp_path / NB, as_version=4))
    theirs = cells_as_saved(await run_with_nbclient(nb, tmp_path))
    assert list(ours) == list(theirs)
    for cell_id in theirs:
        assert ours[cell_id] == theirs[cell_id], cell_id
    # what the comparison rests on, said outright
    assert ours["cleared"][1] == [{"output_type": "stream", "name": "stdout", "text": "kept\n"}]
    assert ours["waited_last"][1] == [{"output_type": "stream", "name": "stdout", "text": "stays\n"}]
    assert ours["updated"][1][0]["data"] == {"text/plain": "'second'"}
    assert ours["shown_early"][1][0]["data"] == {"text/plain": "'late'"}  # updated by a later cell
    assert ours["empty"] == ours["blank"] == ours["skipped"] == (None, [])
    assert ours["expected"][1][0]["ename"] == "ValueError"
    assert ours["after"][1][-1]["data"] == {"text/plain": "False"}


async def test_tagged_and_empty_cells_in_status_plan_and_runs(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    (tmp_path / NB).write_text(nbformat.writes(notebook()), encoding="utf-8")
    async with fresh_client(result_mode="structured") as client:
        before = (await client.call_tool("notebook_status", {"path": NB})).structured_content
        assert before is not None
        states = {cell["id"]: (cell["state"], cell["reasons"]) for cell in before["cells"]}
        assert states["empty"] == states["blank"] == ("skipped", ["empty"])
        assert states["skipped"] == ("skipped", ["skip_execution"])
        assert not {"empty", "blank", "skipped"} & set(before["plan"])
        # the expected error does not stop the run, and leaves its cell fresh
        ran = await run_notebook(client)
        assert [cell["id"] for cell in ran["cells"]][-2:] == ["expected", "after"]
        after = (await client.call_tool("notebook_status", {"path": NB})).structured_content
        assert after is not None and after["plan"] == []
        assert {cell["id"]: cell["state"] for cell in after["cells"]}["expected"] == "fresh"
        # named explicitly, a skipped cell is still not run
        named = await run_notebook(client, cells=["skipped"])
        assert named["cells"] == []
        assert named["skipped"] == [{"id": "skipped", "why": "skip_execution"}]
        said = await call(client, "run_notebook_cells", path=NB, cells=["skipped", "empty"])
        assert "not run, as Jupyter's runners would not: empty (empty), skipped (skip_execution)" in said
        text = await call(client, "notebook_status", path=NB)
        assert "skip_execution" in text and "3 skipped" in text


async def test_an_untagged_error_still_stops_the_run(tmp_path: Path, fresh_client: FreshClient) -> None:
    nb = notebook()
    next(cell for cell in nb.cells if cell.get("id") == "expected").metadata["tags"] = []
    (tmp_path / NB).write_text(nbformat.writes(nb), encoding="utf-8")
    async with fresh_client(result_mode="structured") as client:
        ran = await run_notebook(client)
        assert ran["cells"][-1]["id"] == "expected" and "after" in ran["not_run"]


async def test_history_is_kept_in_memory(tmp_path: Path, fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        await run(client, "first = 1")
        _, text = await run(client, "%history -n")
        assert "first = 1" in text
        _, text = await run(client, "In[1]")
        assert "first = 1" in text
        _, text = await run(client, "get_ipython().history_manager.hist_file")
        assert ":memory:" in text
