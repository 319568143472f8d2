"""Export through MCP: executions as a notebook that reruns to the same outputs, as a script,
Markdown and HTML, and as new cells of an existing (also a bound) notebook."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from mcp import Client
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.gates import Gate
from tests.mcp.calls import call, call_error, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ONE_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
CELLS = [
    "print('hello')\n21 * 2",
    f"from IPython.display import Image, display\nimport base64\n"
    f"display(Image(base64.b64decode('{ONE_PIXEL}')))",
    "import sys\nprint('careful', file=sys.stderr)\nprint('done')",
    "{'a': [1, 2]}",
    "{f'key_{i}': 'x' * 20 for i in range(4)}",  # a value of several lines
    "1 / 0",
    "print('after the error')",  # a rerun reaches it: the failed cell is tagged raises-exception
]


async def facts(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


def comparable(outputs: list[Any]) -> list[dict[str, Any]]:
    """Outputs as both sides must agree on: images as bytes, tracebacks (coloured by Jupyter) left out."""
    kept: list[dict[str, Any]] = []
    for output in outputs:
        output = dict(output)
        if output["output_type"] == "error":
            output.pop("traceback")
        if "data" in output:
            output["data"] = {
                mime: base64.b64decode(value) if mime.startswith("image/") else value
                for mime, value in output["data"].items()
            }
        kept.append(output)
    return kept


async def test_the_notebook_validates_and_reruns_with_nbclient_to_the_same_outputs(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    async with fresh_client(result_mode="structured") as client:
        for source in CELLS:
            await run(client, source)
        done = await facts(client, "export_python_executions", path="session.ipynb")
    assert done == {
        "format": "ipynb",
        "path": "session.ipynb",
        "executions": [1, 2, 3, 4, 5, 6, 7],
        "cells": 7,
        "images": 1,
        "bytes": (tmp_path / "session.ipynb").stat().st_size,
    }
    exported = nbformat.read(tmp_path / "session.ipynb", as_version=4)
    nbformat.validate(exported)
    assert [cell.source for cell in exported.cells] == CELLS
    states = [*["completed"] * 5, "error", "completed"]
    assert [cell.metadata["warmkernel"]["state"] for cell in exported.cells] == states
    assert [cell.metadata.get("tags") for cell in exported.cells] == [*[None] * 5, ["raises-exception"], None]
    assert base64.b64decode(exported.cells[1].outputs[0].data["image/png"]) == base64.b64decode(ONE_PIXEL)

    rerun = nbformat.reads(nbformat.writes(exported), as_version=4)
    for cell in rerun.cells:
        cell.outputs = []
    runner = NotebookClient(rerun, timeout=60, kernel_name="python3")
    with anyio.fail_after(90):
        await runner.async_execute(cwd=str(tmp_path))
    assert [comparable(cell.outputs) for cell in rerun.cells] == [
        comparable(cell.outputs) for cell in exported.cells
    ]
    assert [cell.execution_count for cell in rerun.cells] == [cell.execution_count for cell in exported.cells]


async def test_every_format_comes_back_as_the_reply_without_a_path(client: Client) -> None:
    number, _ = await run(
        client,
        "print('<marker>')\n"
        f"from IPython.display import Image, display\nimport base64\n"
        f"display(Image(base64.b64decode('{ONE_PIXEL}')))",
    )
    script = await call(client, "export_python_executions", executions=str(number), format="py")
    assert script.startswith(f"# %% In [{number}] · completed · ")
    assert "<marker>" in script and "'<marker>'" in script.splitlines()[1]
    markdown = await call(client, "export_python_executions", executions=number, format="md")
    assert f"## In [{number}]" in markdown and "```text\n<marker>\n```" in markdown
    assert f"(data:image/png;base64,{ONE_PIXEL})" in markdown
    page = await call(client, "export_python_executions", executions=f"{number}-{number}", format="html")
    assert page.startswith("<!DOCTYPE html>") and "&lt;marker&gt;" in page
    assert f'src="data:image/png;base64,{ONE_PIXEL}"' in page
    notebook = nbformat.reads(await call(client, "export_python_executions", executions=number), as_version=4)
    nbformat.validate(notebook)
    assert [cell.execution_count for cell in notebook.cells] == [number]


async def test_bad_selections_paths_and_formats_are_refused_with_their_codes(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    async with fresh_client() as client:
        assert (await call_error(client, "export_python_executions"))[0] == "execution_not_found"
        await run(client, "1")
        await run(client, "2")
        code, message = await call_error(client, "export_python_executions", executions="2-1")
        assert code == "invalid_executions" and "write 1-2" in message and '"3,5-9"' in message
        code, message = await call_error(client, "export_python_executions", executions="1,2-7")
        missing = "execution 3 does not exist in kernel main; executions 1-2 exist"
        assert (code, message) == ("execution_not_found", missing)
        code, message = await call_error(client, "export_python_executions", path="../out.ipynb")
        assert code == "path_outside_workspace" and str(tmp_path) in message
        code, _ = await call_error(client, "export_python_executions", format="pdf")
        assert code == "invalid_arguments"
        code, message = await call_error(client, "export_python_executions", path="no/such/dir.md")
        assert code == "write_failed" and "dir.md" in message
        assert "exported executions 1-2 (2 cells) as md to notes.md" in await call(
            client, "export_python_executions", path="notes.md"
        )
    assert (tmp_path / "notes.md").read_text().count("## In [") == 2
    assert sorted(os.listdir(tmp_path)) == ["notes.md"]


def write_notebook(path: Path) -> str:
    notebook = new_notebook(
        cells=[
            new_markdown_cell("# Analysis", id="intro"),
            new_code_cell("base = 10", id="load"),
            new_code_cell("total = base * 2\ntotal", id="use"),
        ]
    )
    text = nbformat.writes(notebook)
    path.write_text(text, encoding="utf-8")
    return text


async def test_executions_join_a_bound_notebook_leaving_its_cells_and_their_facts_alone(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    path = tmp_path / "nb.ipynb"
    write_notebook(path)
    async with fresh_client(result_mode="structured") as client:
        with anyio.fail_after(60):
            ran = await facts(client, "run_notebook_cells", path="nb.ipynb", timeout_seconds=60)
        assert ran["state"] == "completed"
        before = path.read_text(encoding="utf-8")
        # the notebook's own kernel, nb-nb, holds its values: the scratch cell runs there
        number, _ = await run(client, "ratio = total / base\nprint('ratio', ratio)", kernel="nb-nb")
        added = await facts(
            client,
            "executions_to_notebook",
            executions=str(number),
            path="nb.ipynb",
            after_cell="load",
            kernel="nb-nb",
        )
        assert added == {
            "notebook": "nb.ipynb",
            "cells": [f"execution-{number}"],
            "index": 2,
            "after_cell": "load",
            "renamed": {},
        }
        status = await facts(client, "notebook_status", path="nb.ipynb")
        assert [(cell["id"], cell["state"]) for cell in status["cells"]] == [
            ("load", "fresh"),
            (f"execution-{number}", "never_run"),
            ("use", "fresh"),
        ]
        code, message = await call_error(client, "export_python_executions", path="nb.ipynb", kernel="nb-nb")
        assert code == "invalid_arguments" and "executions_to_notebook" in message
        code, message = await call_error(client, "export_python_executions", path="./nb.ipynb")
        assert code == "invalid_arguments" and "kernel nb-nb is bound to" in message, "nor from main"
        code, _ = await call_error(
            client,
            "executions_to_notebook",
            executions=str(number),
            path="nb.ipynb",
            after_cell="gone",
            kernel="nb-nb",
        )
        assert code == "invalid_arguments"
        code, message = await call_error(
            client, "executions_to_notebook", executions="1,2-3", path="missing.ipynb", kernel="nb-nb"
        )
        assert code == "notebook_not_found"
        export = 'export_python_executions(executions="1,2-3", path="missing.ipynb", kernel="nb-nb")'
        assert message.endswith(f". {export} writes them as a new notebook"), message
    after = path.read_text(encoding="utf-8")
    new_cell = json.loads(after)["cells"][2]
    assert new_cell["outputs"] == [{"name": "stdout", "output_type": "stream", "text": ["ratio 2.0\n"]}]
    assert new_cell["metadata"]["warmkernel"]["execution"] == number
    # The old text is the new one without the new cell: every other byte is where it was.
    start = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
    assert after[:start] + after[start + len(after) - len(before) :] == before
    nbformat.validate(nbformat.reads(after, as_version=4))


async def test_a_running_execution_is_exported_as_far_as_it_got(client: Client, gate: Gate) -> None:
    # The reply comes once the cell has printed and then fallen silent: it is still running.
    source = f"# warmkernel: --wait 60 --silence 0.5\nprint('started', flush=True)\n{gate.wait}"
    number, text = await run(client, source)
    assert "running" in text and "started" in text
    try:
        exported = json.loads(await call(client, "export_python_executions", executions=number))
    finally:
        await call(client, "interrupt_python")
        await call(client, "wait_python", execution=number, timeout_seconds=30)
    (cell,) = exported["cells"]
    assert cell["metadata"]["warmkernel"]["state"] == "running"
    assert cell["metadata"]["warmkernel"]["ended_at"] is None
    assert cell["outputs"] == [{"name": "stdout", "output_type": "stream", "text": ["started\n"]}]
