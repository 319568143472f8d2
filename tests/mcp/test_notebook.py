"""Notebook mode through MCP: which cells are stale and why, and re-running exactly those.

Each scenario binds a small notebook in its own workspace to a fresh kernel, runs it, edits
the notebook or the files it reads through the file system, and asserts the exact set of
cells that are not fresh, with their reasons.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from mcp import Client
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.gates import Gate
from tests.mcp.calls import call, call_error, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

NB = "nb.ipynb"
KERNEL = "nb-nb"
"""The kernel the notebook gets of its own (its scratch cells run there too, to share its namespace)."""
Verdicts = dict[str, tuple[str, ...]]
"""Cell id -> its reasons, for every cell that is not fresh (never_run cells list `never_run`)."""


def write_notebook(path: Path, cells: list[tuple[str, str]] | list[str]) -> None:
    """(id, source) pairs make an nbformat 4.5 notebook; bare sources a 4.4 one without ids."""
    notebook = new_notebook(cells=[new_markdown_cell("# Notes", id="md")])
    for cell in cells:
        cell_id, source = cell if isinstance(cell, tuple) else (None, cell)
        notebook.cells.append(new_code_cell(source, id=cell_id or "x"))
    if not isinstance(cells[0], tuple):
        for cell in notebook.cells:
            del cell["id"]
        notebook.nbformat_minor = 4
    path.write_text(nbformat.writes(notebook), encoding="utf-8")


def edit_cells(path: Path, edit: Any) -> None:
    """Rewrite the notebook's cell list on disk: `edit(cells) -> cells` (code cells by id)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["cells"] = edit(raw["cells"])
    path.write_text(json.dumps(raw, indent=1), encoding="utf-8")


def set_source(path: Path, cell_id: str, source: str) -> None:
    def change(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for cell in cells:
            if cell.get("id") == cell_id:
                cell["source"] = source
        return cells

    edit_cells(path, change)


async def facts(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


async def verdicts(client: Client) -> Verdicts:
    status = await facts(client, "notebook_status", path=NB)
    repairs = status["plan_why"]
    assert [cell for cell in status["plan"] if cell not in repairs] == [
        cell["id"] for cell in status["cells"] if cell["state"] != "fresh"
    ]
    return {cell["id"]: tuple(cell["reasons"]) for cell in status["cells"] if cell["state"] != "fresh"}


async def run_cells(
    client: Client, cells: str | list[str | int] = "stale", **arguments: Any
) -> dict[str, Any]:
    with anyio.fail_after(60):
        return await facts(
            client, "run_notebook_cells", path=NB, cells=cells, timeout_seconds=60, **arguments
        )


async def value(client: Client, expression: str) -> str:
    _, text = await run(client, expression, kernel=KERNEL)
    return text.splitlines()[-1].partition(": ")[2]


@pytest.fixture
def open_notebook(fresh_client: FreshClient) -> Any:
    """A fresh kernel with structured results, in the test's own workspace."""
    return fresh_client(result_mode="structured")


# -- the dependency graph --------------------------------------------------------------------------


async def test_edit_makes_its_chain_stale_and_leaves_an_independent_cell_fresh(
    tmp_path: Path, open_notebook: Any
) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = y * 2"), ("d", "w = 5")])
    async with open_notebook as client:
        assert await verdicts(client) == {
            "a": ("never_run",),
            "b": ("never_run", "upstream_stale"),
            "c": ("never_run", "upstream_stale"),
            "d": ("never_run",),
        }
        ran = await run_cells(client)
        assert [(cell["id"], cell["state"]) for cell in ran["cells"]] == [
            ("a", "completed"),
            ("b", "completed"),
            ("c", "completed"),
            ("d", "completed"),
        ]
        assert ran["status"]["plan"] == []
        set_source(tmp_path / NB, "a", "x = 10")
        assert await verdicts(client) == {
            "a": ("source_changed",),
            "b": ("upstream_stale",),
            "c": ("upstream_stale",),
        }
        ran = await run_cells(client)
        assert [cell["id"] for cell in ran["cells"]] == ["a", "b", "c"]
        assert await verdicts(client) == {}
        assert await value(client, "z") == "22"


async def test_rerun_of_a_changed_upstream_cell_makes_its_readers_stale(
    tmp_path: Path, open_notebook: Any
) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = y * 2")])
    async with open_notebook as client:
        await run_cells(client)
        set_source(tmp_path / NB, "a", "x = 2")
        await run_cells(client, ["a"])
        assert await verdicts(client) == {"b": ("upstream_changed",), "c": ("upstream_stale",)}


async def test_redefinition_later_in_the_notebook_shadows_the_earlier_one(
    tmp_path: Path, open_notebook: Any
) -> None:
    cells = [("a", "x = 1"), ("b", "first = x"), ("c", "x = 2"), ("d", "second = x")]
    write_notebook(tmp_path / NB, cells)
    async with open_notebook as client:
        await run_cells(client)
        assert await verdicts(client) == {}
        set_source(tmp_path / NB, "a", "x = 3")
        assert await verdicts(client) == {"a": ("source_changed",), "b": ("upstream_stale",)}


async def test_a_function_that_reads_a_global_depends_on_the_cell_defining_it(
    tmp_path: Path, open_notebook: Any
) -> None:
    cells = [("a", "factor = 2"), ("b", "def scale(v):\n    return v * factor"), ("c", "out = scale(3)")]
    write_notebook(tmp_path / NB, cells)
    async with open_notebook as client:
        await run_cells(client)
        set_source(tmp_path / NB, "a", "factor = 3")
        assert await verdicts(client) == {
            "a": ("source_changed",),
            "b": ("upstream_stale",),
            "c": ("upstream_stale",),
        }
        await run_cells(client)
        assert await value(client, "out") == "9"


async def test_magics_parse_and_count_as_code(tmp_path: Path, open_notebook: Any) -> None:
    cells = [
        ("a", "%time x = 1"),
        ("b", "%%capture captured\nprint(x)"),
        ("c", "!echo $x\ny = x + 1"),
        ("d", "z = 0"),
    ]
    write_notebook(tmp_path / NB, cells)
    async with open_notebook as client:
        ran = await run_cells(client)
        assert {cell["state"] for cell in ran["cells"]} == {"completed"}
        assert await verdicts(client) == {}
        set_source(tmp_path / NB, "a", "%time x = 2")
        assert await verdicts(client) == {
            "a": ("source_changed",),
            "b": ("upstream_stale",),
            "c": ("upstream_stale",),
        }


async def test_edit_then_undo_is_fresh_again(tmp_path: Path, open_notebook: Any) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x")])
    async with open_notebook as client:
        await run_cells(client)
        set_source(tmp_path / NB, "a", "x = 1  # changed")
        assert await verdicts(client) == {"a": ("source_changed",), "b": ("upstream_stale",)}
        set_source(tmp_path / NB, "a", "x = 1")
        assert await verdicts(client) == {}


# -- runtime facts ---------------------------------------------------------------------------------


async def test_scratch_run_python_that_rebinds_a_name_makes_its_readers_stale(
    tmp_path: Path, open_notebook: Any
) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = y"), ("d", "w = 1")])
    async with open_notebook as client:
        await run_cells(client)
        number, _ = await run(client, "x = 100", kernel=KERNEL)
        expected = {"a": ("changed_outside",), "b": ("upstream_stale",), "c": ("upstream_stale",)}
        assert await verdicts(client) == expected
        status = await facts(client, "notebook_status", path=NB)
        assert status["cells"][0]["why"] == [f"x changed by In [{number}]"]
        assert f"a: x changed by In [{number}]" in text_of(
            await client.call_tool("notebook_status", {"path": NB})
        )
        await run(client, "unrelated = 1", kernel=KERNEL)
        assert await verdicts(client) == expected
        await run_cells(client)
        assert await verdicts(client) == {} and await value(client, "y") == "2"


async def test_one_hook_pair_serves_inspection_and_notebook_after_a_rebind(
    tmp_path: Path, open_notebook: Any
) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1\n_seed = 2"), ("b", "y = x + 1"), ("c", "z = _seed")])
    async with open_notebook as client:
        await run_cells(client)
        number, _ = await run(client, "x = 100", kernel=KERNEL)
        await run(client, "_seed = 3", kernel=KERNEL)  # `_` names a cell reads are versioned too
        assert await verdicts(client) == {
            "a": ("changed_outside",),
            "b": ("upstream_stale",),
            "c": ("upstream_stale",),
        }
        listing = await facts(client, "list_python_variables", kernel=KERNEL)
        assert {row["name"]: row["execution"] for row in listing["variables"]}["x"] == number
        for event in ("pre_run_cell", "post_run_cell"):
            hooks = await value(
                client,
                f"[f.__module__ for f in get_ipython().events.callbacks[{event!r}]"
                " if f.__module__.startswith('_warmkernel')]",
            )
            assert hooks == "['_warmkernel_common']", event


async def test_in_place_mutation_is_seen_for_lists_and_big_dataframes(
    tmp_path: Path, open_notebook: Any
) -> None:
    cells = [
        ("a", "import pandas as pd\nframe = pd.DataFrame({'v': range(1_000_000)})\nitems = [1, 2]"),
        ("b", "total = frame.v.sum()"),
        ("c", "count = len(items)"),
    ]
    write_notebook(tmp_path / NB, cells)
    async with open_notebook as client:
        await run_cells(client)
        appended, _ = await run(client, "items.append(3)", kernel=KERNEL)
        expected = {"a": ("changed_outside",), "b": ("upstream_stale",), "c": ("upstream_stale",)}
        assert await verdicts(client) == expected
        changed, _ = await run(client, "frame.loc[0, 'v'] = -1", kernel=KERNEL)
        assert await verdicts(client) == expected
        status = await facts(client, "notebook_status", path=NB)
        assert status["cells"][0]["why"] == [
            f"frame changed by In [{changed}]",
            f"items changed by In [{appended}]",
        ]
        await run_cells(client)
        assert await verdicts(client) == {}


async def test_erroring_cell_stops_the_run_and_stays_stale(tmp_path: Path, open_notebook: Any) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x / 0"), ("c", "z = x")])
    async with open_notebook as client:
        reply = await client.call_tool("run_notebook_cells", {"path": NB, "timeout_seconds": 60})
        text = text_of(reply)
        assert "[cell 1 · b]" in text and "ZeroDivisionError" in text
        assert "stopped after cell b (error); not run: c" in text
        assert reply.structured_content is not None and reply.structured_content["state"] == "error"
        assert await verdicts(client) == {"b": ("errored",), "c": ("never_run",)}
        ran = await run_cells(client, "all", stop_on_error=False)
        assert [cell["state"] for cell in ran["cells"]] == ["completed", "error", "completed"]
        assert await verdicts(client) == {"b": ("errored",)}


async def test_inserted_moved_and_deleted_cells(tmp_path: Path, open_notebook: Any) -> None:
    path = tmp_path / NB
    write_notebook(path, [("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = y + 1")])
    async with open_notebook as client:
        await run_cells(client)

        def insert(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [*cells[:3], dict(new_code_cell("y = 100", id="n")), *cells[3:]]  # after b

        edit_cells(path, insert)
        assert await verdicts(client) == {"n": ("never_run",), "c": ("upstream_stale",)}
        edit_cells(path, lambda cells: [cell for cell in cells if cell.get("id") != "n"])
        assert await verdicts(client) == {}
        edit_cells(path, lambda cells: [cells[0], cells[2], cells[1], cells[3]])  # b above a
        moved = {"b": ("upstream_changed", "undefined_name"), "c": ("upstream_stale",)}
        assert await verdicts(client) == moved  # it read x from a, below it now
        edit_cells(path, lambda cells: [cell for cell in cells if cell.get("id") != "a"])
        assert await verdicts(client) == moved
        plan = (await call(client, "notebook_status", path=NB)).splitlines()[-1]
        unfixable = "cannot make fresh what reads a name no cell above sets (b reads x): edit the notebook"
        assert plan.endswith(unfixable)
        ran = await call(client, "run_notebook_cells", path=NB, timeout_seconds=60)
        assert ran.splitlines()[-1].endswith(unfixable), "the call an agent loops on says it too"


async def test_cells_without_ids_get_stable_derived_ids(tmp_path: Path, open_notebook: Any) -> None:
    path = tmp_path / NB
    write_notebook(path, ["x = 1", "y = x + 1"])
    async with open_notebook as client:
        status = await facts(client, "notebook_status", path=NB)
        first, second = (cell["id"] for cell in status["cells"])
        assert all(cell["id_derived"] for cell in status["cells"]) and first.startswith("wk-")
        assert "* derived id" in text_of(await client.call_tool("notebook_status", {"path": NB}))
        await run_cells(client)
        assert await verdicts(client) == {}
        edit_cells(
            path, lambda cells: [cells[0], *[{**cell, "source": "x = 2"} for cell in cells[1:2]], cells[2]]
        )
        changed = await verdicts(client)
        assert list(changed.values()) == [("never_run",), ("upstream_changed", "upstream_stale")]
        assert second in changed and first not in changed  # an edited id-less cell is a new cell


# -- files ----------------------------------------------------------------------------------------


async def test_files_read_through_a_literal_a_variable_and_import(tmp_path: Path, open_notebook: Any) -> None:
    (tmp_path / "data.txt").write_text("1")
    (tmp_path / "other.txt").write_text("2")
    (tmp_path / "helpers_mod.py").write_text("VALUE = 1\n")
    cells = [
        ("a", "text = open('data.txt').read()"),
        ("b", "name = 'oth' + 'er.txt'"),
        ("c", "with open(name) as handle:\n    more = handle.read()"),
        ("d", "import helpers_mod\nval = helpers_mod.VALUE"),
        ("e", "w = 1"),
    ]
    write_notebook(tmp_path / NB, cells)
    async with open_notebook as client:
        await run_cells(client)
        assert await verdicts(client) == {}
        (tmp_path / "data.txt").write_text("11")
        assert await verdicts(client) == {"a": ("file_changed",)}
        (tmp_path / "other.txt").write_text("22")
        assert await verdicts(client) == {"a": ("file_changed",), "c": ("file_changed",)}
        (tmp_path / "helpers_mod.py").write_text("VALUE = 2\n")
        assert await verdicts(client) == {
            "a": ("file_changed",),
            "c": ("file_changed",),
            "d": ("file_changed",),
        }
        await run_cells(client)
        # the old module stays loaded, so re-running `import helpers_mod` does not make d fresh
        assert await verdicts(client) == {"d": ("file_changed",)}
        set_source(
            tmp_path / NB, "d", "import importlib, helpers_mod\nhelpers_mod = importlib.reload(helpers_mod)"
        )
        await run_cells(client)
        assert await verdicts(client) == {}
        assert await value(client, "helpers_mod.VALUE") == "2"


async def test_file_touched_with_the_same_content_changes_nothing(tmp_path: Path, open_notebook: Any) -> None:
    data = tmp_path / "data.txt"
    data.write_text("same")
    write_notebook(tmp_path / NB, [("a", "text = open('data.txt').read()")])
    async with open_notebook as client:
        await run_cells(client)
        before = data.stat().st_mtime_ns
        os.utime(data, ns=(before + 5_000_000_000, before + 5_000_000_000))
        assert await verdicts(client) == {}
        data.write_text("diff")
        assert await verdicts(client) == {"a": ("file_changed",)}
        data.write_text("same")
        assert await verdicts(client) == {}


async def test_watched_file_makes_its_cell_stale_when_it_changes(tmp_path: Path, open_notebook: Any) -> None:
    (tmp_path / "model.bin").write_bytes(b"\x00\x01")
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x")])
    async with open_notebook as client:
        await run_cells(client)
        reply = await call(client, "watch_notebook_file", path=NB, file="model.bin", cell=0)
        assert (
            reply.startswith("cell a of nb.ipynb now depends on model.bin") and "The cell is fresh." in reply
        )
        (tmp_path / "model.bin").write_bytes(b"\x00\x02")
        assert await verdicts(client) == {"a": ("file_changed",), "b": ("upstream_stale",)}
        await run_cells(client)
        assert await verdicts(client) == {}
        code, message = await call_error(client, "watch_notebook_file", path=NB, file="nope.bin", cell="a")
        assert code == "invalid_arguments" and "'nope.bin' does not exist" in message
        for cell in ("stale", "nocell", 5):  # one cell: 'stale' and 'all' name none
            code, message = await call_error(
                client, "watch_notebook_file", path=NB, file="model.bin", cell=cell
            )
            assert code == "invalid_arguments"
            assert message == f"unknown cell {cell!r}: give a code-cell index 0-1 or id (a, b)"


# -- outputs in the file ----------------------------------------------------------------------------


async def test_outputs_and_execution_counts_are_written_back(tmp_path: Path, open_notebook: Any) -> None:
    path = tmp_path / NB
    write_notebook(path, [("a", "print('hello')\n6 * 7"), ("b", ""), ("c", "1 / 0")])
    async with open_notebook as client:
        await run(client, "scratch = 1", kernel=KERNEL)
        ran = await run_cells(client, "all", stop_on_error=False)
        assert [cell["outputs_saved"] for cell in ran["cells"]] == ["saved", "saved"]  # b is empty
        a, b, c = nbformat.read(path, as_version=4).cells[1:]
        assert a.execution_count == ran["cells"][0]["execution"] == 2
        assert a.outputs == [
            {"output_type": "stream", "name": "stdout", "text": "hello\n"},
            {
                "output_type": "execute_result",
                "execution_count": 2,
                "data": {"text/plain": "42"},
                "metadata": {},
            },
        ]
        assert (b.execution_count, b.outputs) == (None, [])  # an empty cell is not run, as in Jupyter
        assert c.execution_count == 3
        assert c.outputs[0]["output_type"] == "error" and c.outputs[0]["ename"] == "ZeroDivisionError"
        # IPython's count stays in step with warmkernel's
        number, _ = await run(client, "after_blank = 1", kernel=KERNEL)
        listing = await facts(client, "list_python_variables", kernel=KERNEL)
        assert {row["name"]: row["execution"] for row in listing["variables"]}["after_blank"] == number == 4


async def test_outputs_are_not_saved_when_the_source_changed_on_disk_while_the_cell_ran(
    tmp_path: Path, open_notebook: Any
) -> None:
    path = tmp_path / NB
    rewrite = (
        "import json\n"
        "with open('nb.ipynb') as handle:\n"
        "    raw = json.load(handle)\n"
        "raw['cells'][1]['source'] = 'edited = True'\n"
        "with open('nb.ipynb', 'w') as handle:\n"
        "    json.dump(raw, handle)\n"
        "print('rewrote')"
    )
    write_notebook(path, [("a", rewrite), ("b", "print('b ran')")])
    async with open_notebook as client:
        reply = await call(client, "run_notebook_cells", path=NB, timeout_seconds=60)
        assert "outputs of cell a not saved to nb.ipynb: its source changed on disk since it ran" in reply
        assert reply.endswith("still stale: a (source_changed)")
        a, b = nbformat.read(path, as_version=4).cells[1:]
        assert (a.source, a.outputs, a.execution_count) == ("edited = True", [], None)
        assert (b.outputs[0]["text"], b.execution_count) == ("b ran\n", 2)
        status = await call(client, "notebook_status", path=NB)
        assert (
            "outputs of cell a's last run are not in the file: its source changed on disk since it ran"
            in status
        )
        write_notebook(path, [("b", "print('b ran')")])  # cell a is gone from the file
        assert "are not in the file" not in await call(client, "notebook_status", path=NB)


async def test_a_running_cell_shows_as_running_and_the_run_goes_on_after_the_call(
    tmp_path: Path, open_notebook: Any, gate: Gate
) -> None:
    path = tmp_path / NB
    source = f"{gate.wait}\nprint('done')\nx = 1"
    write_notebook(path, [("a", source), ("b", "after = x")])
    async with open_notebook as client:
        started = await facts(client, "run_notebook_cells", path=NB, cells=["a"], timeout_seconds=0)
        assert started["state"] == "running" and started["cells"][0]["state"] == "running"
        status = await facts(client, "notebook_status", path=NB)
        assert [(cell["id"], cell["state"]) for cell in status["cells"]] == [
            ("a", "running"),
            ("b", "never_run"),
        ]
        assert status["plan"] == ["b"]  # b reads what the running a will set
        assert status["facts_current"] is False
        code, message = await call_error(client, "run_python", freeform="1", kernel=KERNEL)
        assert code == "busy" and "run_notebook_cells is running cells of nb.ipynb" in message
        assert 'wait_python(kernel="nb-nb")' in message
        assert "In [1]" in await call(client, "run_python", freeform="1")  # main is free meanwhile
        set_source(path, "a", source + "  # edited")
        gate.open()
        with anyio.fail_after(60):
            waited = await call(client, "wait_python", timeout_seconds=60, kernel=KERNEL)
        assert "done" in waited
        assert await verdicts(client) == {"a": ("source_changed",), "b": ("never_run", "upstream_stale")}
        cell = nbformat.read(path, as_version=4).cells[1]
        assert (cell.outputs, cell.execution_count) == ([], None) and cell.source.endswith("# edited")


async def test_interrupt_stops_the_run(tmp_path: Path, open_notebook: Any, gate: Gate) -> None:
    write_notebook(tmp_path / NB, [("a", gate.wait), ("b", "after = 1")])
    async with open_notebook as client:
        started = await facts(client, "run_notebook_cells", path=NB, timeout_seconds=0)
        assert started["state"] == "running"
        assert (await call(client, "interrupt_python", kernel=KERNEL)).startswith("interrupt_sent")
        with anyio.fail_after(60):
            await call(client, "wait_python", timeout_seconds=60, kernel=KERNEL)
        assert await verdicts(client) == {"a": ("errored",), "b": ("never_run",)}


async def test_no_save_outputs_leaves_the_file_alone(tmp_path: Path, fresh_client: FreshClient) -> None:
    path = tmp_path / NB
    write_notebook(path, [("a", "print('x')")])
    before = path.read_bytes()
    async with fresh_client(result_mode="structured", save_outputs=False) as client:
        ran = await run_cells(client)
        assert ran["cells"][0]["outputs_saved"] == "not_saved" and ran["state"] == "completed"
    assert path.read_bytes() == before


# -- binding ---------------------------------------------------------------------------------------


async def test_a_kernel_serves_one_notebook_until_a_reset(tmp_path: Path, open_notebook: Any) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1")])
    write_notebook(tmp_path / "other.ipynb", [("o", "y = 1")])
    (tmp_path / "broken.ipynb").write_text("{not json")
    async with open_notebook as client:
        code, message = await call_error(client, "notebook_status", path="missing.ipynb")
        assert code == "notebook_not_found" and "relative to the workspace" in message
        code, _ = await call_error(client, "notebook_status", path="broken.ipynb")
        assert code == "invalid_notebook"
        await run_cells(client)
        code, message = await call_error(client, "notebook_status", path="other.ipynb", kernel=KERNEL)
        assert code == "notebook_already_bound" and f"kernel {KERNEL} is bound to nb.ipynb" in message
        await call(client, "reset_python", kernel=KERNEL)
        status = await facts(client, "notebook_status", path="other.ipynb", kernel=KERNEL)
        assert [(cell["id"], cell["state"]) for cell in status["cells"]] == [("o", "never_run")]


async def test_reset_makes_every_cell_never_run(tmp_path: Path, open_notebook: Any) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x")])
    async with open_notebook as client:
        await run_cells(client)
        await call(client, "reset_python", kernel=KERNEL)
        assert await verdicts(client) == {"a": ("never_run",), "b": ("never_run", "upstream_stale")}


async def test_kernel_death_during_a_run_makes_every_cell_never_run(
    tmp_path: Path, open_notebook: Any
) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "import os\nos._exit(3)"), ("c", "y = x")])
    async with open_notebook as client:
        ran = await run_cells(client)
        assert [(cell["id"], cell["state"]) for cell in ran["cells"]] == [("a", "completed"), ("b", "died")]
        assert ran["state"] == "died" and ran["not_run"] == ["c"]
        assert await verdicts(client) == {
            "a": ("never_run",),
            "b": ("never_run",),
            "c": ("never_run", "upstream_stale"),
        }


async def test_status_text_names_states_reasons_and_the_plan(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = x")])
    async with fresh_client() as client:
        await call(client, "run_notebook_cells", path=NB, cells=["a"], timeout_seconds=60)
        text = await call(client, "notebook_status", path=NB)
        assert text.splitlines() == [
            "notebook nb.ipynb · 2 code cells: 1 fresh, 1 never run",
            "#  id  state      In  reasons    defines",
            "0  a   fresh      1              x",
            "1  b   never_run      never_run  y",
            'plan: b. run_notebook_cells(path="nb.ipynb", kernel="nb-nb") runs them in order',
        ]


async def test_names_bound_inside_magics_keep_their_readers_fresh_run_after_run(
    tmp_path: Path, open_notebook: Any
) -> None:
    # %%capture runs its body as a cell of its own, inside the cell; %%time binds the same small
    # int again on every run.
    write_notebook(
        tmp_path / NB,
        [
            ("timing", "%%time\ntimed = 5"),
            ("uses_timed", "print(timed)"),
            ("capturing", "%%capture cap\nprint('hello')"),
            ("uses_cap", "print(cap.stdout.strip())"),
        ],
    )
    async with open_notebook as client:
        for _ in range(2):
            await run_cells(client, "all")
            assert await verdicts(client) == {}


async def test_cells_may_be_one_cell_or_a_comma_separated_string(tmp_path: Path, open_notebook: Any) -> None:
    write_notebook(tmp_path / NB, [("a", "x = 1"), ("b", "y = 2"), ("c", "z = 3")])
    async with open_notebook as client:
        ran = await run_cells(client, "0, c")  # type: ignore[arg-type]
        assert [cell["id"] for cell in ran["cells"]] == ["a", "c"]
        ran = await run_cells(client, 1)  # type: ignore[arg-type]
        assert [cell["id"] for cell in ran["cells"]] == ["b"]
        code, message = await call_error(client, "run_notebook_cells", path=NB, cells=[])
        assert code == "invalid_arguments" and '"0,3,load"' in message


# -- confinement and ownership -------------------------------------------------------------------


async def test_paths_outside_the_workspace_are_refused_without_saying_what_is_there(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, open_notebook: Any
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write_notebook(elsewhere / "other.ipynb", [("a", "1")])
    original = (elsewhere / "other.ipynb").read_text()
    (elsewhere / "plain.txt").write_text("not json")
    (tmp_path / "link.ipynb").symlink_to(elsewhere / "other.ipynb")
    write_notebook(tmp_path / NB, [("a", "1")])
    async with open_notebook as client:
        messages = set()
        for given in (
            str(elsewhere / "other.ipynb"),  # an existing notebook
            str(elsewhere / "plain.txt"),  # an existing file that is not JSON
            str(elsewhere / "missing.ipynb"),  # nothing at all
            "../" * 12 + str(elsewhere / "other.ipynb").lstrip("/"),
            "link.ipynb",  # a symlink inside that leads out
        ):
            code, message = await call_error(client, "notebook_status", path=given)
            assert code == "path_outside_workspace", message
            assert f"outside the workspace {tmp_path}" in message
            messages.add(message.replace(given, "PATH"))
        assert len(messages) == 1  # the same words whatever is there: no oracle
        code, message = await call_error(client, "watch_notebook_file", path=NB, file="/etc/passwd", cell="a")
        assert code == "path_outside_workspace"
        assert (elsewhere / "other.ipynb").read_text() == original


async def test_write_back_keeps_the_files_inode_owner_group_and_mode(
    tmp_path: Path, open_notebook: Any
) -> None:
    path = tmp_path / NB
    write_notebook(path, [("a", "print('hello')")])
    path.chmod(0o664)
    if os.getuid() == 0:
        os.chown(path, 1000, 1001)
    os.link(path, tmp_path / "hard-link.ipynb")
    before = path.stat()
    async with open_notebook as client:
        ran = await run_cells(client, "all")
        assert ran["cells"][0]["outputs_saved"] == "saved"
    after = path.stat()
    assert (after.st_ino, after.st_uid, after.st_gid, after.st_mode) == (
        before.st_ino,
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )
    linked = nbformat.read(tmp_path / "hard-link.ipynb", as_version=4)
    assert linked.cells[1].outputs[0]["text"] == "hello\n"
