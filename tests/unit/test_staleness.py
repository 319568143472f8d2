"""The staleness model: each scenario of issue 7 as a pure script of runs, edits and facts.

`Recorder` stands in for the session: it records each run the way the session must (the
versions of the names a cell reads, taken before it runs; the names it rebinds or mutates
bumped to its execution number afterwards; the files it read, stamped).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warmkernel.errors import WarmkernelError
from warmkernel.notebook.analysis import analyze
from warmkernel.notebook.document import derived_id
from warmkernel.notebook.staleness import (
    CellRun,
    FileStamp,
    KernelFacts,
    NotebookStatus,
    evaluate,
    select_cell,
    select_cells,
    source_hash,
)
from warmkernel.types import ExecutionNumber


@dataclass(frozen=True)
class Cell:
    id: str
    source: str
    tags: tuple[str, ...] = ()


class Recorder:
    """What the session records from the kernel after every execution."""

    def __init__(self) -> None:
        self.number = 0
        self.versions: dict[str, ExecutionNumber] = {}
        self.runs: dict[str, CellRun] = {}
        self.files: dict[str, FileStamp | None] = {}
        self.executions: set[ExecutionNumber] = set()

    def run(
        self,
        cell: Cell,
        *,
        raises: bool = False,
        files: Mapping[str, FileStamp] | None = None,
        changes: Iterable[str] | None = None,
        calls_read: Iterable[str] = (),
    ) -> None:
        """Run a cell; by default it rebinds or mutates what its source says it does. `calls_read`:
        the free globals of the notebook's functions it calls, which the kernel adds to its reads."""
        self.number += 1
        number = ExecutionNumber(self.number)
        analysis = analyze(cell.source)
        names = analysis.reads | analysis.optional_reads | set(calls_read)
        seen = {name: self.versions[name] for name in names if name in self.versions}
        wrote = frozenset(analysis.defines | analysis.mutates if changes is None else changes)
        for name in wrote:
            self.versions[name] = number
        used = names | analysis.defines | analysis.mutates
        self.runs[cell.id] = CellRun(
            source_hash(cell.source),
            number,
            raises,
            seen,
            dict(files or {}),
            observed=True,
            wrote=wrote,
            unbound=frozenset(used - self.versions.keys()),
        )
        self.executions.add(number)
        self.files.update(files or {})

    def run_all(self, cells: Iterable[Cell]) -> None:
        for cell in cells:
            self.run(cell)

    def run_python(self, *, changes: Iterable[str]) -> None:
        """A scratch execution that belongs to no cell."""
        self.number += 1
        for name in changes:
            self.versions[name] = ExecutionNumber(self.number)

    def facts(self, running: str | None = None) -> KernelFacts:
        return KernelFacts(
            dict(self.runs), dict(self.versions), dict(self.files), running, frozenset(self.executions)
        )


def verdicts(status: NotebookStatus) -> dict[str, tuple[str, ...]]:
    """id → (state, *reasons): one value that a scenario states exactly."""
    return {cell.id: (cell.state, *cell.reasons) for cell in status.cells}


def cells(*sources: str) -> list[Cell]:
    return [Cell(chr(ord("a") + index), source) for index, source in enumerate(sources)]


def edit(notebook: Sequence[Cell], cell_id: str, source: str) -> list[Cell]:
    return [replace(cell, source=source) if cell.id == cell_id else cell for cell in notebook]


FRESH = ("fresh",)
STAMP = FileStamp(size=12, mtime_ns=1_000, sha256="aa" * 32)


def test_chain_run_in_order_is_fresh() -> None:
    notebook = cells("x = 1", "y = x + 1", "z = y * 2")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {"a": FRESH, "b": FRESH, "c": FRESH}
    assert status.plan == ()
    assert [cell.depends_on for cell in status.cells] == [(), ("a",), ("b",)]
    assert [cell.execution for cell in status.cells] == [1, 2, 3]
    assert [cell.defines for cell in status.cells] == [("x",), ("y",), ("z",)]


def test_chain_never_run_propagates_upstream_stale() -> None:
    status = evaluate(cells("x = 1", "y = x + 1", "z = y * 2"), KernelFacts())
    assert verdicts(status) == {
        "a": ("never_run", "never_run"),
        "b": ("never_run", "never_run", "upstream_stale"),
        "c": ("never_run", "never_run", "upstream_stale"),
    }
    assert status.plan == ("a", "b", "c")
    assert [cell.execution for cell in status.cells] == [None, None, None]


def test_edited_cell_makes_its_chain_stale_and_leaves_an_independent_cell_fresh() -> None:
    notebook = cells("x = 1", "y = x + 1", "z = y * 2", "w = 5")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(edit(notebook, "a", "x = 2"), kernel.facts())
    assert verdicts(status) == {
        "a": ("stale", "source_changed"),
        "b": ("stale", "upstream_stale"),
        "c": ("stale", "upstream_stale"),
        "d": FRESH,
    }
    assert [cell.why for cell in status.cells] == [
        ("its source was edited after In [1]",),
        ("a is stale",),
        ("b is stale",),
        (),
    ]
    assert status.plan == ("a", "b", "c")


def test_rerun_of_a_changed_upstream_cell_makes_its_readers_upstream_changed() -> None:
    notebook = cells("x = 1", "y = x + 1", "z = y * 2", "w = 5")
    kernel = Recorder()
    kernel.run_all(notebook)
    notebook = edit(notebook, "a", "x = 2")
    kernel.run(notebook[0])
    assert verdicts(evaluate(notebook, kernel.facts())) == {
        "a": FRESH,
        "b": ("stale", "upstream_changed"),
        "c": ("stale", "upstream_stale"),
        "d": FRESH,
    }


def test_in_place_mutation_below_a_reader_matches_a_run_from_the_top() -> None:
    notebook = cells("items = []", "n = len(items)", "items.append(1)", "m = len(items)")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {"a": FRESH, "b": FRESH, "c": FRESH, "d": FRESH}
    assert status.cells[3].depends_on == ("c",)  # the mutating cell is the nearest definer


def test_mutating_cell_run_twice_read_its_own_leftover_and_the_plan_restores_its_input() -> None:
    notebook = cells("items = []", "n = len(items)", "items.append(1)", "m = len(items)")
    kernel = Recorder()
    kernel.run_all(notebook)
    kernel.run(notebook[2])  # appends again: a run from the top appends once
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {
        "a": FRESH,
        "b": FRESH,
        "c": ("stale", "upstream_changed"),
        "d": ("stale", "upstream_changed", "upstream_stale"),
    }
    assert status.cells[2].why == ("items came from In [3], not the last run of any cell here",)
    assert status.plan == ("a", "b", "c", "d")
    assert status.plan_why == {"a": "restores items for c", "b": "reads a, which runs again"}


def test_in_place_mutation_by_run_python_makes_its_definers_changed_outside() -> None:
    notebook = cells("items = []", "n = len(items)", "items.append(1)", "m = len(items)")
    kernel = Recorder()
    kernel.run_all(notebook)
    kernel.run_python(changes={"items"})
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {
        "a": ("stale", "changed_outside"),
        "b": ("stale", "upstream_stale"),
        "c": ("stale", "changed_outside", "upstream_stale"),
        "d": ("stale", "upstream_stale"),
    }
    assert status.cells[0].why == ("items changed by In [5]",)


def test_mutation_the_kernel_saw_without_a_static_hint_makes_readers_stale() -> None:
    notebook = cells("items = []", "alias = items", "n = len(items)")
    kernel = Recorder()
    kernel.run_all(notebook)
    kernel.run_python(changes={"alias", "items"})  # `alias.append(1)`: the change check saw both
    assert verdicts(evaluate(notebook, kernel.facts())) == {
        "a": ("stale", "changed_outside"),
        "b": ("stale", "changed_outside", "upstream_stale"),
        "c": ("stale", "upstream_stale"),
    }


def test_redefinition_below_a_reader_matches_a_run_from_the_top() -> None:
    notebook = cells("df = [3, 1]", "print(df)", "df = sorted(df)", "print(df)")
    kernel = Recorder()
    kernel.run_all(notebook)
    assert verdicts(evaluate(notebook, kernel.facts())) == {"a": FRESH, "b": FRESH, "c": FRESH, "d": FRESH}
    kernel.run_all(notebook)  # a second pass sees the same versions in the same order
    assert evaluate(notebook, kernel.facts()).plan == ()


def test_plan_run_in_order_leaves_everything_fresh() -> None:
    notebook = cells("x = [1]", "print(x)", "x.append(2)", "y = len(x)")
    kernel = Recorder()
    kernel.run_all(notebook)
    notebook = edit(notebook, "a", "x = [5]")
    plan = evaluate(notebook, kernel.facts()).plan
    assert plan == ("a", "b", "c", "d")
    for cell in notebook:
        if cell.id in plan:
            kernel.run(cell)
    assert evaluate(notebook, kernel.facts()).plan == ()


def test_rerun_of_a_cell_below_keeps_an_earlier_reader_fresh_but_not_a_later_one() -> None:
    notebook = cells("x = 1", "a = x", "x = 2", "b = x")
    kernel = Recorder()
    kernel.run_all(notebook)
    kernel.run(notebook[2])
    assert verdicts(evaluate(notebook, kernel.facts())) == {
        "a": FRESH,
        "b": FRESH,
        "c": FRESH,
        "d": ("stale", "upstream_changed"),
    }


def test_cell_that_rebinds_what_it_read_stays_fresh() -> None:
    notebook = cells("x = 0", "x += 1")
    kernel = Recorder()
    kernel.run_all(notebook)
    assert verdicts(evaluate(notebook, kernel.facts())) == {"a": FRESH, "b": FRESH}


def test_later_redefinition_shadows_an_earlier_one() -> None:
    notebook = cells("x = 1", "x = 2", "print(x)")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(edit(notebook, "a", "x = 10"), kernel.facts())
    assert verdicts(status) == {"a": ("stale", "source_changed"), "b": FRESH, "c": FRESH}
    assert status.cells[2].depends_on == ("b",)
    assert verdicts(evaluate(edit(notebook, "b", "x = 20"), kernel.facts()))["c"] == (
        "stale",
        "upstream_stale",
    )


def test_erroring_cell_is_stale_and_so_are_its_readers() -> None:
    notebook = cells("x = 1", "y = 1 / 0", "print(x)", "z = y")
    kernel = Recorder()
    kernel.run(notebook[0])
    kernel.run(notebook[1], raises=True, changes=())
    kernel.run(notebook[2])
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {
        "a": FRESH,
        "b": ("stale", "errored"),
        "c": FRESH,
        "d": ("never_run", "never_run", "upstream_stale"),
    }
    assert status.cells[1].why == ("its last run (In [2]) raised an error",)
    assert status.plan == ("b", "d")


def test_function_reading_a_global_is_stale_when_the_global_changes() -> None:
    notebook = cells("rate = 0.1", "def cost(v):\n    return v * rate", "total = cost(100)")
    kernel = Recorder()
    kernel.run_all(notebook)
    assert evaluate(notebook, kernel.facts()).cells[1].depends_on == ("a",)
    kernel.run_python(changes={"rate"})
    assert verdicts(evaluate(notebook, kernel.facts())) == {
        "a": ("stale", "changed_outside"),
        "b": ("stale", "upstream_stale"),
        "c": ("stale", "upstream_stale"),
    }


def test_function_reading_a_name_a_later_cell_defines_is_fine() -> None:
    notebook = cells("def f():\n    return helper()", "def helper():\n    return 1", "f()")
    kernel = Recorder()
    kernel.run_all(notebook)  # helper was unbound when the first cell ran
    assert verdicts(evaluate(notebook, kernel.facts())) == {"a": FRESH, "b": FRESH, "c": FRESH}
    deleted = [notebook[0], notebook[2]]
    assert verdicts(evaluate(deleted, kernel.facts()))["a"] == ("stale", "undefined_name")


def test_inserted_cell_that_redefines_a_name_takes_over_its_readers() -> None:
    notebook = cells("x = 1", "y = x")
    kernel = Recorder()
    kernel.run_all(notebook)
    inserted = [notebook[0], Cell("new", "x = 5"), notebook[1]]
    status = evaluate(inserted, kernel.facts())
    assert verdicts(status) == {
        "a": FRESH,
        "new": ("never_run", "never_run"),
        "b": ("stale", "upstream_stale"),
    }
    assert status.cells[2].depends_on == ("a", "new")  # it read a's x; new's comes first now
    assert [cell.index for cell in status.cells] == [0, 1, 2]


def test_inserted_independent_cell_leaves_the_rest_fresh() -> None:
    notebook = cells("x = 1", "y = x")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate([notebook[0], Cell("new", "w = 0"), notebook[1]], kernel.facts())
    assert verdicts(status) == {"a": FRESH, "new": ("never_run", "never_run"), "b": FRESH}
    assert status.plan == ("new",)


def test_cell_moved_above_its_definer_reads_an_undefined_name() -> None:
    notebook = cells("x = 1", "y = x", "z = y")
    kernel = Recorder()
    kernel.run_all(notebook)
    moved = [notebook[1], notebook[0], notebook[2]]
    assert verdicts(evaluate(moved, kernel.facts())) == {
        "b": ("stale", "upstream_changed", "undefined_name"),
        "a": FRESH,
        "c": ("stale", "upstream_stale"),
    }


def test_deleted_definer_leaves_its_readers_with_an_undefined_name() -> None:
    notebook = cells("x = 1", "y = x", "w = 2")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(notebook[1:], kernel.facts())
    assert verdicts(status) == {"b": ("stale", "upstream_changed", "undefined_name"), "c": FRESH}
    assert status.cells[0].why[-1] == "x is set by no cell above it"
    assert status.cells[0].undefined == ("x",) and status.cells[1].undefined == ()
    assert [cell.index for cell in status.cells] == [0, 1]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("text = open('data.csv').read()", id="literal path"),
        pytest.param("path = 'data.csv'\ntext = open(path).read()", id="path in a variable"),
        pytest.param("import data_loader\ntext = data_loader.TEXT", id="import of a local module"),
    ],
)
def test_file_read_by_literal_path_variable_or_import_is_one_recorded_read_stale_on_new_content(
    source: str,
) -> None:
    """The kernel sees these reads differently; the model gets the same recorded file read."""
    notebook = cells(source, "n = len(text)")
    kernel = Recorder()
    kernel.run(notebook[0], files={"/project/data": STAMP})
    kernel.run(notebook[1])
    kernel.files["/project/data"] = FileStamp(size=13, mtime_ns=2_000, sha256="bb" * 32)
    assert verdicts(evaluate(notebook, kernel.facts())) == {
        "a": ("stale", "file_changed"),
        "b": ("stale", "upstream_stale"),
    }


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param(STAMP, FRESH, id="unchanged"),
        pytest.param(replace(STAMP, mtime_ns=9_000), FRESH, id="touched with the same content"),
        pytest.param(
            replace(STAMP, sha256="cc" * 32), ("stale", "file_changed"), id="same size, new content"
        ),
        pytest.param(replace(STAMP, size=99), ("stale", "file_changed"), id="new size"),
        pytest.param(None, ("stale", "file_changed"), id="deleted"),
    ],
)
def test_file_state_decides_file_changed(now: FileStamp | None, expected: tuple[str, ...]) -> None:
    notebook = cells("text = open('data.csv').read()")
    kernel = Recorder()
    kernel.run(notebook[0], files={"/project/data.csv": STAMP})
    kernel.files["/project/data.csv"] = now
    assert verdicts(evaluate(notebook, kernel.facts())) == {"a": expected}


def test_file_the_caller_did_not_stamp_counts_as_missing() -> None:
    notebook = cells("text = open('data.csv').read()")
    kernel = Recorder()
    kernel.run(notebook[0], files={"/project/data.csv": STAMP})
    facts = replace(kernel.facts(), files={})
    assert verdicts(evaluate(notebook, facts)) == {"a": ("stale", "file_changed")}


def test_edit_then_undo_is_fresh() -> None:
    notebook = cells("x = 1", "y = x")
    kernel = Recorder()
    kernel.run_all(notebook)
    assert verdicts(evaluate(edit(notebook, "a", "x = 1  # try"), kernel.facts()))["a"] == (
        "stale",
        "source_changed",
    )
    assert verdicts(evaluate(edit(notebook, "a", "x = 1"), kernel.facts())) == {"a": FRESH, "b": FRESH}


def test_scratch_run_python_that_rebinds_a_name_makes_its_definer_changed_outside() -> None:
    notebook = cells("x = 1", "y = x", "z = 3")
    kernel = Recorder()
    kernel.run_all(notebook)
    kernel.run_python(changes={"x"})
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {
        "a": ("stale", "changed_outside"),
        "b": ("stale", "upstream_stale"),
        "c": FRESH,
    }
    assert status.cells[0].why == ("x changed by In [4]",)
    assert status.plan == ("a", "b")


def test_scratch_run_python_that_binds_an_unread_name_changes_nothing() -> None:
    notebook = cells("x = 1", "y = x")
    kernel = Recorder()
    kernel.run_all(notebook)
    kernel.run_python(changes={"scratch"})
    assert verdicts(evaluate(notebook, kernel.facts())) == {"a": FRESH, "b": FRESH}


def test_name_deleted_by_a_scratch_run_makes_its_definer_changed_outside() -> None:
    notebook = cells("x = 1", "y = x")
    kernel = Recorder()
    kernel.run_all(notebook)
    del kernel.versions["x"]
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {"a": ("stale", "changed_outside"), "b": ("stale", "upstream_stale")}
    assert status.cells[0].why == ("x deleted outside the notebook",)


def test_magics_in_cells_link_like_code() -> None:
    notebook = cells(
        "import json",
        "%time data = json.loads('[1, 2]')",
        "%%capture out\nprint(data)",
        "!echo {data}",
        "%matplotlib inline",
    )
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(notebook, kernel.facts())
    assert [cell.depends_on for cell in status.cells] == [(), ("a",), ("b",), ("b",), ()]
    assert verdicts(evaluate(edit(notebook, "b", "%time data = json.loads('[3]')"), kernel.facts())) == {
        "a": FRESH,
        "b": ("stale", "source_changed"),
        "c": ("stale", "upstream_stale"),
        "d": ("stale", "upstream_stale"),
        "e": FRESH,
    }


def test_cells_with_derived_ids_keep_their_runs_across_moves_and_undo() -> None:
    sources = ["x = 1", "y = x", "x = 1"]
    repeats = [0, 0, 1]
    notebook = [Cell(derived_id(source, n), source) for source, n in zip(sources, repeats, strict=True)]
    kernel = Recorder()
    kernel.run_all(notebook)
    assert {cell.state for cell in evaluate(notebook, kernel.facts()).cells} == {"fresh"}
    edited = [notebook[0], Cell(derived_id("y = x + 1", 0), "y = x + 1"), notebook[2]]
    assert [cell.state for cell in evaluate(edited, kernel.facts()).cells] == ["fresh", "never_run", "fresh"]
    assert {cell.state for cell in evaluate(notebook, kernel.facts()).cells} == {"fresh"}


def test_running_cell_is_running_without_reasons_and_out_of_the_plan() -> None:
    notebook = cells("x = 1", "y = x", "z = 1")
    kernel = Recorder()
    kernel.run_all(notebook)
    notebook = edit(notebook, "a", "x = 2")
    status = evaluate(notebook, kernel.facts(running="a"))
    assert verdicts(status) == {"a": ("running",), "b": ("stale", "upstream_stale"), "c": FRESH}
    assert status.plan == ("b",)


def test_a_first_run_still_running_plans_the_cells_that_read_it() -> None:
    """The cells below read what the running cell will provide: planned, not waited on forever."""
    status = evaluate(cells("x = 1", "y = x + 1", "z = y * 2"), KernelFacts(running="a"))
    assert verdicts(status)["a"] == ("running",)
    assert status.plan == ("b", "c")


def test_conservative_cell_may_define_anything_and_depends_on_everything_above() -> None:
    notebook = cells("x = 1", "from helpers import *", "print(x, q)", "w = 2")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status) == {"a": FRESH, "b": FRESH, "c": FRESH, "d": FRESH}
    assert [cell.depends_on for cell in status.cells] == [(), ("a",), ("a", "b"), ()]
    assert verdicts(evaluate(edit(notebook, "a", "x = 2"), kernel.facts())) == {
        "a": ("stale", "source_changed"),
        "b": ("stale", "upstream_stale"),
        "c": ("stale", "upstream_stale"),
        "d": FRESH,
    }


def test_shadowed_builtin_links_its_readers() -> None:
    notebook = cells("len = lambda value: 0", "n = len([1])", "print(n)")
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(edit(notebook, "a", "len = lambda value: 1"), kernel.facts())
    assert status.cells[1].depends_on == ("a",)
    assert verdicts(status)["b"] == ("stale", "upstream_stale")


def test_cell_that_does_not_parse_is_errored_when_run() -> None:
    notebook = cells("x = (", "y = 1")
    kernel = Recorder()
    kernel.run(notebook[0], raises=True, changes=())
    kernel.run(notebook[1])
    assert verdicts(evaluate(notebook, kernel.facts())) == {"a": ("stale", "errored"), "b": FRESH}


def test_every_reason_at_once_is_listed_in_order() -> None:
    notebook = cells("x = 1", "y = x + q")
    kernel = Recorder()
    kernel.run(notebook[0])
    kernel.run_python(changes={"x"})
    kernel.run(notebook[1], raises=True, files={"/f": STAMP})
    kernel.files["/f"] = None
    kernel.run_python(changes={"y"})
    notebook = edit(edit(notebook, "a", "x = 2"), "b", "y = x + q + 1")
    assert verdicts(evaluate(notebook, kernel.facts()))["b"] == (
        "stale",
        "source_changed",
        "errored",
        "file_changed",
        "changed_outside",
        "upstream_changed",
        "upstream_stale",
        "undefined_name",
    )


def test_runs_of_cells_no_longer_in_the_notebook_are_ignored() -> None:
    kernel = Recorder()
    kernel.run(Cell("gone", "x = 1"))
    assert verdicts(evaluate(cells("y = 2"), kernel.facts())) == {"a": ("never_run", "never_run")}


def test_duplicate_cell_ids_are_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="unique"):
        evaluate([Cell("a", "x = 1"), Cell("a", "y = 2")], KernelFacts())


def test_source_hash_is_sha256_of_the_utf8_source() -> None:
    assert source_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert source_hash("x = 'é'") != source_hash("x = 'e'")
    assert len(source_hash("\ud800")) == 64  # a lone surrogate from JSON does not raise


def test_caller_of_a_function_is_linked_to_a_helper_defined_between_them() -> None:
    notebook = cells("def f():\n    return helper()", "def helper():\n    return 1", "print(f())")
    kernel = Recorder()
    kernel.run_all(notebook[:2])
    kernel.run(notebook[2], calls_read={"helper"})
    status = evaluate(edit(notebook, "b", "def helper():\n    return 2"), kernel.facts())
    assert status.cells[2].depends_on == ("a", "b")
    assert verdicts(status)["c"] == ("stale", "upstream_stale")


def test_cell_that_saw_a_value_from_a_cell_below_it_is_stale_and_the_plan_converges() -> None:
    notebook = cells("x = 1", "print(x)", "x = 2")
    kernel = Recorder()
    kernel.run(notebook[0])
    kernel.run(notebook[2])
    kernel.run(notebook[1])  # out of order: it printed 2, a run from the top prints 1
    status = evaluate(notebook, kernel.facts())
    assert verdicts(status)["b"] == ("stale", "upstream_changed")
    assert status.cells[1].why == ("x came from c below (In [2])",)
    assert status.plan == ("a", "b", "c")
    assert status.plan_why == {"a": "restores x for b", "c": "sets x again after a"}
    for cell in notebook:
        kernel.run(cell)
    assert evaluate(notebook, kernel.facts()).plan == ()


# selection for run_notebook_cells

SELECTION_NOTEBOOK = cells("x = 1", "y = x", "z = 3", "w = y")


def _selection_status() -> NotebookStatus:
    kernel = Recorder()
    kernel.run_all(SELECTION_NOTEBOOK)
    return evaluate(edit(SELECTION_NOTEBOOK, "b", "y = x + 1"), kernel.facts())


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        pytest.param("stale", ("b", "d"), id="stale is the plan"),
        pytest.param("all", ("a", "b", "c", "d"), id="all"),
        pytest.param(["c", "a"], ("a", "c"), id="ids run in notebook order"),
        pytest.param([3, 0], ("a", "d"), id="indices"),
        pytest.param(["2"], ("c",), id="digit string is an index"),
        pytest.param(["a", 0, "a"], ("a",), id="repeats collapse"),
        pytest.param("c", ("c",), id="a single id"),
        pytest.param([], (), id="nothing"),
    ],
)
def test_select_cells(which: str | list[str | int], expected: tuple[str, ...]) -> None:
    assert select_cells(_selection_status(), which) == (expected, ())


@pytest.mark.parametrize(
    "which",
    [
        pytest.param(["zz"], id="unknown id"),
        pytest.param([4], id="index past the end"),
        pytest.param([-1], id="negative index"),
        pytest.param([True], id="bool is not an index"),
        pytest.param("stal", id="misspelt keyword"),
    ],
)
def test_select_unknown_cells_names_the_valid_ones(which: str | list[str | int]) -> None:
    with pytest.raises(WarmkernelError) as raised:
        select_cells(_selection_status(), which)
    assert raised.value.code == "invalid_arguments"
    assert "'stale', 'all', or code-cell indices 0-3 or ids (a, b, c, d)" in raised.value.message


def test_select_one_cell_by_id_or_index_and_name_the_valid_ones() -> None:
    status = _selection_status()
    assert [select_cell(status, which) for which in ("c", 2, "2")] == ["c", "c", "c"]
    with pytest.raises(WarmkernelError) as raised:
        select_cell(status, "all")
    assert raised.value.message == "unknown cell 'all': give a code-cell index 0-3 or id (a, b, c, d)"
    skipping = evaluate(cells("x = 1", "", "y = x"), KernelFacts())  # an empty cell is skipped
    assert skipping.cells[1].state == "skipped" and select_cell(skipping, 1) == "b"  # still one to watch


def test_cells_asked_for_but_skipped_are_told_apart() -> None:
    skipping = evaluate(cells("x = 1", "", "y = x"), KernelFacts())  # an empty cell is skipped
    assert select_cells(skipping, [1, 2]) == (("c",), ("b",))
    assert select_cells(skipping, "all") == (("a", "c"), ("b",))
    assert select_cells(skipping, "stale") == (("a", "c"), ()), "the plan never holds a skipped cell"


def test_select_unknown_cells_in_a_long_notebook_lists_twenty_ids() -> None:
    status = evaluate([Cell(f"c{index}", f"v{index} = 1") for index in range(25)], KernelFacts())
    with pytest.raises(WarmkernelError, match=r"indices 0-24 or ids \(c0, .*, c19 and 5 more\)"):
        select_cells(status, ["nope"])


def test_select_in_an_empty_notebook_says_so() -> None:
    with pytest.raises(WarmkernelError, match="this notebook has no code cells"):
        select_cells(evaluate([], KernelFacts()), [0])


# properties


@st.composite
def notebooks(draw: st.DrawFn) -> list[tuple[str, set[str]]]:
    """Cells as (source, names it reads), each reading only names bound above it."""
    bound: list[str] = []
    made: list[tuple[str, set[str]]] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["assign", "mutate", "print"] if bound else ["assign"]))
        reads = set(draw(st.lists(st.sampled_from(bound), max_size=2))) if bound else set()
        if kind == "assign":
            target = draw(st.sampled_from(["a", "b", "c", "d", "e"]))
            expression = " + ".join(sorted(reads)) or str(len(made))
            made.append((f"{target} = [{expression}]", reads))
            bound.append(target)
        elif kind == "mutate":
            target = draw(st.sampled_from(bound))
            made.append((f"{target}.append([{', '.join(sorted(reads)) or len(made)}])", {target} | reads))
        else:
            made.append((f"print({', '.join(sorted(reads)) or len(made)})", reads))
    return made


def _defined(source: str) -> set[str]:
    return (
        {source.split(" = ")[0]}
        if " = " in source
        else {source.split(".")[0]}
        if ".append" in source
        else set()
    )


@settings(max_examples=60, deadline=None)
@given(notebooks())
def test_notebook_run_in_order_is_all_fresh(made: list[tuple[str, set[str]]]) -> None:
    notebook = [Cell(f"c{index}", source) for index, (source, _) in enumerate(made)]
    kernel = Recorder()
    kernel.run_all(notebook)
    status = evaluate(notebook, kernel.facts())
    assert {cell.state for cell in status.cells} == {"fresh"}
    assert status.plan == ()


@settings(max_examples=60, deadline=None)
@given(notebooks(), st.data())
def test_an_edit_makes_exactly_the_edited_cell_and_its_downstream_stale(
    made: list[tuple[str, set[str]]], data: st.DataObject
) -> None:
    notebook = [Cell(f"c{index}", source) for index, (source, _) in enumerate(made)]
    kernel = Recorder()
    kernel.run_all(notebook)
    assert evaluate(notebook, kernel.facts()).plan == ()
    edited = data.draw(st.integers(0, len(made) - 1))
    notebook[edited] = replace(notebook[edited], source=notebook[edited].source + "  # edited")
    status = evaluate(notebook, kernel.facts())
    start = {f"c{edited}"}
    assert {cell.id for cell in status.cells if cell.state != "fresh"} == _downstream_closure(made, start)
    assert set(status.plan) == _plan_model(made, start)


def _plan_model(made: list[tuple[str, set[str]]], start: set[str]) -> set[str]:
    """A reference model of the plan after a run in order: the downstream closure (with cells that
    set a planned name again), plus, for each planned cell, the cell above that provides a name
    it reads when the kernel's value of that name now comes from that cell or one below it;
    repeated until nothing is added."""
    plan = set(start)
    while True:
        plan = _downstream_closure(made, plan, sets_again=True)
        more = set()
        for index, (_, reads) in enumerate(made):
            for name in reads if f"c{index}" in plan else ():
                provider = max(i for i in range(index) if name in _defined(made[i][0]))
                last = max(i for i in range(len(made)) if name in _defined(made[i][0]))
                if not provider <= last < index:
                    more.add(f"c{provider}")
        if more <= plan:
            return plan
        plan |= more


def _downstream_closure(
    made: list[tuple[str, set[str]]], start: set[str], *, sets_again: bool = False
) -> set[str]:
    """A reference model: each read links to the nearest cell above that binds or mutates it; with
    `sets_again`, a cell that binds or mutates what a cell in the closure does joins it too."""
    closure = set(start)
    for index, (source, reads) in enumerate(made):
        for name in reads:
            definer = max(i for i in range(index) if name in _defined(made[i][0]))
            if f"c{definer}" in closure:
                closure.add(f"c{index}")
        if sets_again and any(
            f"c{above}" in closure and _defined(made[above][0]) & _defined(source) for above in range(index)
        ):
            closure.add(f"c{index}")
    return closure


@settings(max_examples=60, deadline=None)
@given(notebooks(), st.data())
def test_any_cell_running_leaves_it_out_of_a_plan_that_ends(
    made: list[tuple[str, set[str]]], data: st.DataObject
) -> None:
    notebook = [Cell(f"c{index}", source) for index, (source, _) in enumerate(made)]
    kernel = Recorder()
    kernel.run_all(notebook[: data.draw(st.integers(0, len(made)))])
    running = f"c{data.draw(st.integers(0, len(made) - 1))}"
    status = evaluate(notebook, kernel.facts(running=running))
    assert next(cell.state for cell in status.cells if cell.id == running) == "running"
    assert running not in status.plan


@settings(max_examples=40, deadline=None)
@given(notebooks())
def test_evaluate_is_deterministic_and_ignores_mapping_order(made: list[tuple[str, set[str]]]) -> None:
    notebook = [Cell(f"c{index}", source) for index, (source, _) in enumerate(made)]
    kernel = Recorder()
    kernel.run_all(notebook[::2])
    kernel.run_python(changes={"a"})
    facts = kernel.facts()
    reordered = KernelFacts(
        dict(reversed(list(facts.runs.items()))),
        dict(reversed(list(facts.versions.items()))),
        dict(reversed(list(facts.files.items()))),
        notebook_executions=facts.notebook_executions,
    )
    assert evaluate(notebook, facts) == evaluate(notebook, facts) == evaluate(notebook, reordered)
