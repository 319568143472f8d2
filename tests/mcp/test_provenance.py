"""Staleness a top-to-bottom run would confirm: each kind of wrong "fresh" that dependencies from
source names alone give, as a case table run against a real kernel through MCP.

Each case runs a small notebook, then edits, reorders, re-runs or changes things from outside,
and is checked two ways: the reported states (every cell that is not fresh, with its reasons)
and the plan; and, after running the plan, every cell is fresh and the named values in the
notebook's kernel equal those of a top-to-bottom run of the current notebook in a fresh kernel.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.mcp.calls import text_of
from tests.mcp.conftest import FreshClient
from tests.mcp.test_notebook import KERNEL, NB, edit_cells, facts, run_cells, set_source, write_notebook

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

TOP_DOWN = "topdown"
"""A second kernel in the same workspace, that runs the current notebook from the top once."""
Step = tuple[str, Any]
"""("run", cells) runs notebook cells; ("edit", (id, source)); ("order", ids); ("scratch", code)."""


@dataclass(frozen=True)
class Case:
    cells: list[tuple[str, str]]
    steps: list[Step]
    verdicts: dict[str, tuple[str, ...]]
    """Every cell that is not fresh after the steps, with its reasons."""
    plan: list[str]
    names: list[str]
    """The values compared with a top-down run after the plan ran."""
    after_plan: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """The verdicts after running the plan (empty: all fresh)."""


CASES = {
    "alias": Case(
        [("a", "a = [1, 2]"), ("b", "b = a"), ("c", "b[0] = 5"), ("d", "s = sum(a)")],
        [("run", "all"), ("edit", ("c", "b[0] = 7"))],
        {"c": ("source_changed",), "d": ("upstream_stale",)},
        ["a", "b", "c", "d"],  # c changed a through b in place: both are made again first
        ["a", "s"],
    ),
    "mutating method": Case(
        [
            (
                "a",
                "class M:\n    def __init__(self):\n        self.rate = 0\n\n"
                "    def tune(self, r):\n        self.rate = r",
            ),
            ("b", "m = M()"),
            ("c", "m.tune(5)"),
            ("d", "r = m.rate"),
        ],
        [("run", "all"), ("edit", ("c", "m.tune(7)"))],
        {"c": ("source_changed",), "d": ("upstream_stale",)},
        ["b", "c", "d"],
        ["r"],
    ),
    "free name of a function": Case(
        [("a", "def f(x):\n    return x * k"), ("b", "k = 2"), ("c", "y = f(3)")],
        [("run", "all"), ("edit", ("b", "k = 3")), ("run", ["b"])],
        {"c": ("upstream_changed",)},
        ["c"],
        ["k", "y"],
    ),
    "global set by a called function": Case(
        [
            ("a", "def bump():\n    global counter\n    counter = base * 2"),
            ("b", "base = 1"),
            ("c", "bump()"),
            ("d", "z = counter"),
        ],
        [("run", "all"), ("edit", ("b", "base = 2")), ("run", ["b"])],
        {"c": ("upstream_changed",), "d": ("upstream_stale",)},
        ["c", "d"],
        ["counter", "z"],
    ),
    "del": Case(
        [("a", "x = 1"), ("b", "del x"), ("c", "y = x")],
        [("run", ["a", "b"])],
        {"c": ("never_run", "undefined_name")},
        ["c"],
        ["x", "y"],
        after_plan={"c": ("errored", "undefined_name")},  # a run from the top raises NameError too
    ),
    "conditional definition": Case(
        [("a", "y = 0"), ("b", "flag = False"), ("c", "if flag:\n    y = 1"), ("d", "z = y")],
        [("run", "all"), ("edit", ("a", "y = 2"))],
        {"a": ("source_changed",), "d": ("upstream_stale",)},
        ["a", "c", "d"],  # c may set y: it runs again after a
        ["y", "z"],
    ),
    "file written and read": Case(
        [
            ("a", "with open('out.txt', 'w') as sink:\n    sink.write('1')"),
            ("b", "with open('out.txt') as source:\n    t = source.read()"),
        ],
        [("run", "all"), ("edit", ("a", "with open('out.txt', 'w') as sink:\n    sink.write('2')"))],
        {"a": ("source_changed",), "b": ("upstream_stale",)},
        ["a", "b"],
        ["t"],
    ),
    "moved cell": Case(
        [("a1", "a = 1"), ("a2", "a = 2"), ("b", "b = a * 10")],
        [("run", "all"), ("order", ["a1", "b", "a2"])],
        {"b": ("upstream_changed",)},
        ["a1", "b", "a2"],
        ["a", "b"],
    ),
    "partial state after an error": Case(
        [("a", "lst = []"), ("b", "lst.append(1)\nraise ValueError('boom')")],
        [("run", "all"), ("edit", ("b", "lst.append(1)")), ("run", ["b"])],
        {"b": ("upstream_changed",)},
        ["a", "b"],
        ["lst"],
    ),
    "upper cell re-run after a lower one mutated its input": Case(
        [("a", "lst = [1]"), ("b", "n = len(lst)"), ("c", "lst.append(2)")],
        [("run", "all"), ("run", ["b"])],
        {"b": ("upstream_changed",)},
        ["a", "b", "c"],
        ["lst", "n"],
    ),
    "mutated by a later notebook cell": Case(
        [("a", "df = {'revenue': [1, 2]}"), ("b", "df['extra'] = 0"), ("c", "total = sum(df['revenue'])")],
        [("run", "all")],
        {},
        [],
        ["df", "total"],
    ),
    "mutated outside the notebook": Case(
        [("a", "df = {'revenue': [1, 2]}"), ("b", "df['extra'] = 0"), ("c", "total = sum(df['revenue'])")],
        [("run", "all"), ("scratch", "df['revenue'] = [v * 2 for v in df['revenue']]")],
        {"a": ("changed_outside",), "b": ("changed_outside", "upstream_stale"), "c": ("upstream_stale",)},
        ["a", "b", "c"],
        ["df", "total"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_case(name: str, tmp_path: Path, fresh_client: FreshClient) -> None:
    case = CASES[name]
    write_notebook(tmp_path / NB, case.cells)
    async with fresh_client(result_mode="structured") as client:
        for step, argument in case.steps:
            await _step(client, tmp_path / NB, step, argument)
        status = await facts(client, "notebook_status", path=NB)
        assert _verdicts(status) == case.verdicts
        assert status["plan"] == case.plan
        assert all(cell["why"] for cell in status["cells"] if "upstream_changed" in cell["reasons"])
        await run_cells(client)
        assert _verdicts(await facts(client, "notebook_status", path=NB)) == case.after_plan
        order = [cell["id"] for cell in status["cells"]]
        sources = {cell_id: source for cell_id, source in _current_sources(tmp_path / NB)}
        for cell_id in order:
            await client.call_tool("run_python", {"freeform": sources[cell_id], "kernel": TOP_DOWN})
        assert await _values(client, KERNEL, case.names) == await _values(client, TOP_DOWN, case.names)


async def test_plan_reply_says_why_each_fresh_cell_runs_again(
    tmp_path: Path, fresh_client: FreshClient
) -> None:
    write_notebook(tmp_path / NB, [("a1", "a = 1"), ("a2", "a = 2"), ("b", "b = a * 10")])
    async with fresh_client(result_mode="structured") as client:
        await run_cells(client, "all")
        edit_cells(tmp_path / NB, lambda cells: [cells[0], cells[1], cells[3], cells[2]])
        text = text_of(await client.call_tool("notebook_status", {"path": NB}))
        assert "b: a came from a2 below (In [2])" in text
        assert "plan: a1 (restores a for b), b, a2 (sets a again after a1)." in text
        status = await facts(client, "notebook_status", path=NB)
        assert status["plan_why"] == {"a1": "restores a for b", "a2": "sets a again after a1"}


async def _step(client: Client, path: Path, step: str, argument: Any) -> None:
    if step == "run":
        await run_cells(client, argument, stop_on_error=False)
    elif step == "edit":
        set_source(path, *argument)
    elif step == "order":
        edit_cells(
            path, lambda cells: [cells[0], *sorted(cells[1:], key=lambda cell: argument.index(cell["id"]))]
        )
    else:
        result = await client.call_tool("run_python", {"freeform": argument, "kernel": KERNEL})
        assert not result.is_error, text_of(result)


def _verdicts(status: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    return {cell["id"]: tuple(cell["reasons"]) for cell in status["cells"] if cell["state"] != "fresh"}


def _current_sources(path: Path) -> list[tuple[str, str]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [
        (cell["id"], "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])
        for cell in raw["cells"]
        if cell["cell_type"] == "code"
    ]


async def _values(client: Client, kernel: str, names: list[str]) -> str:
    expression = f"repr({{n: globals().get(n, '<unbound>') for n in {names!r}}})"
    result = await client.call_tool("run_python", {"freeform": expression, "kernel": kernel})
    assert not result.is_error, text_of(result)
    return text_of(result).splitlines()[-1].partition(": ")[2]
