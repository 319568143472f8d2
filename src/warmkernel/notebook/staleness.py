"""Cell staleness: which notebook cells no longer match the kernel, why, and the plan to fix it.

Owns the pure model: `evaluate(cells, facts) -> NotebookStatus`, with the runtime facts the
session records (`KernelFacts`, `CellRun`, `FileStamp`), plus `source_hash` and
`select_cells`. No I/O and no kernel: the caller hashes files and asks the kernel.

Each code cell gets one state: `running` (it is the running cell), `never_run` (no run of it
is recorded in this kernel), `stale` (it ran, and one of the reasons below holds), `fresh`,
or `skipped`: it is never run, as nbclient and papermill skip it, because it is `empty` (only
whitespace) or tagged `skip-execution` (`skip_execution`); it defines nothing for the cells
below. Reasons of the other states, in the order they are listed:

- `source_changed`: `source_hash` of its source differs from that of the source it ran.
  An edit undone is fresh again.
- `never_run`: no recorded run.
- `errored`: its last run raised.
- `file_changed`: a file it read is missing now, or its size or sha256 differs from when it
  was read. A new mtime with the same content changes nothing.
- `upstream_changed`: a name it read was bound at version v when it ran (v: the execution
  number that last rebound or mutated it) and now is unbound or at another version, made by
  `run_python`, by a cell above it, or by no cell's last run. A change made by its own run
  or by the last run of a cell below it does not count: a run from the top would give it
  the value it saw. So `x = 1`, `print(x)`, `x = 2` run in order is all fresh, where "any
  later rebinding" would flag `print(x)` and the plan would rerun it on the wrong x. A name
  unbound when it ran counts for nothing here; the graph covers it.
- `upstream_stale`: a cell it depends on is not fresh (stale, never run or running).
- `undefined_name`: it reads a name no cell above defines, so a run from the top would
  fail. Names read only inside function bodies are looked up when called, so a definer
  anywhere in the notebook satisfies them.

Dependencies, from the static analysis of the current sources (`analysis.analyze`): a read
resolves to the nearest cell above that defines or mutates the name, or to the nearest
conservative cell above (`exec`, star import, ...) when that is nearer, as it may define
anything. A builtin or interpolated name depends on a cell above only if one binds it. A
conservative cell depends on every cell above. Dependencies always point up, so one pass in
notebook order reaches the fixpoint. Only `never_run` and the graph reasons apply to a cell
that never ran; a running cell has no reasons but makes its dependents `upstream_stale`.

The plan is the stale and never-run cells in notebook order; the running cell is left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from warmkernel.errors import WarmkernelError
from warmkernel.notebook.analysis import analyze
from warmkernel.types import ExecutionNumber

CellState = Literal["fresh", "stale", "never_run", "running", "skipped"]
Reason = Literal[
    "empty",
    "skip_execution",
    "source_changed",
    "never_run",
    "errored",
    "file_changed",
    "upstream_changed",
    "upstream_stale",
    "undefined_name",
]
_LISTED_IDS = 20
"""How many valid ids an error message names before it says how many more there are."""


class Cell(Protocol):
    """A code cell as the model needs it (`document.NotebookCell` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def tags(self) -> tuple[str, ...]: ...


SKIP_TAG = "skip-execution"
"""A cell with this tag is never run (nbclient's and papermill's `skip_cells_with_tag`)."""
RAISES_TAG = "raises-exception"
"""A cell with this tag is expected to raise: its error does not stop a run, nor make it stale."""


def skipped_because(cell: Cell) -> Reason | None:
    """Why a cell is not run, as Jupyter's runners do it: it is empty, or tagged skip-execution."""
    if not cell.source.strip():
        return "empty"
    return "skip_execution" if SKIP_TAG in cell.tags else None


@dataclass(frozen=True)
class FileStamp:
    """A file's state: when a cell read it, or now."""

    size: int
    mtime_ns: int
    """Kept so the caller can skip re-hashing a file whose size and mtime did not change."""
    sha256: str


@dataclass(frozen=True)
class CellRun:
    """The last run of one cell, as the session recorded it."""

    source_hash: str
    """`source_hash` of the source that ran."""
    execution: ExecutionNumber
    raised: bool
    read_versions: Mapping[str, ExecutionNumber] = field(default_factory=dict)
    """For each name it read that was bound when it ran: the version it saw."""
    files_read: Mapping[str, FileStamp] = field(default_factory=dict)
    """Each file it opened for reading, by absolute path, stamped when read."""


@dataclass(frozen=True)
class KernelFacts:
    """Everything the model knows about the kernel, taken at one moment."""

    runs: Mapping[str, CellRun] = field(default_factory=dict)
    """The last run of each cell id in the current kernel (none from an earlier kernel)."""
    versions: Mapping[str, ExecutionNumber] = field(default_factory=dict)
    """Every bound name's version: the execution that last rebound or mutated it."""
    files: Mapping[str, FileStamp | None] = field(default_factory=dict)
    """The current stamp of every path in any run's `files_read`; None or absent: missing."""
    running: str | None = None
    """The id of the cell running now, if a notebook cell is running."""


@dataclass(frozen=True)
class CellStatus:
    """One code cell's verdict."""

    index: int
    """0-based among the code cells."""
    id: str
    state: CellState
    reasons: tuple[Reason, ...]
    defines: tuple[str, ...]
    """The names its current source binds, sorted."""
    execution: ExecutionNumber | None
    """warmkernel's number of its last run."""
    depends_on: tuple[str, ...]
    """Ids of the cells above whose definitions it reads, in notebook order."""
    changed_files: tuple[str, ...] = ()
    """The files behind `file_changed`: read by its last run, missing or different now."""


@dataclass(frozen=True)
class NotebookStatus:
    cells: tuple[CellStatus, ...]
    plan: tuple[str, ...]
    """Ids of the stale and never-run cells, in notebook order."""


def source_hash(source: str) -> str:
    """The sha256 of a cell's source, which decides `source_changed`."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def evaluate(cells: Sequence[Cell], facts: KernelFacts) -> NotebookStatus:
    """Decide every code cell's state and reasons, and the plan; see the module docstring."""
    ids = [cell.id for cell in cells]
    if len(set(ids)) != len(ids):
        raise ValueError(f"cell ids must be unique, got {ids}")
    everywhere = {name for cell in cells for name in _provided(cell.source)}
    position = {cell_id: index for index, cell_id in enumerate(ids)}
    # execution number -> position of the cell whose last run it is
    made_by = {run.execution: position[cell_id] for cell_id, run in facts.runs.items() if cell_id in position}
    definer: dict[str, int] = {}  # name -> the nearest cell so far that defines or mutates it
    last_conservative = -1
    not_fresh: list[bool] = []
    statuses: list[CellStatus] = []
    for index, cell in enumerate(cells):
        skipped = skipped_because(cell)
        if skipped is not None:  # never run, so it defines nothing for the cells below
            statuses.append(CellStatus(index, cell.id, "skipped", (skipped,), (), None, ()))
            not_fresh.append(False)
            continue
        analysis = analyze(cell.source)
        undefined = False
        if analysis.conservative:
            depends = list(range(index))
        else:
            found: set[int] = set()
            for name in analysis.reads:
                nearest = max(definer.get(name, -1), last_conservative)
                if nearest >= 0:
                    found.add(nearest)
                elif name not in analysis.deferred_reads or name not in everywhere:
                    undefined = True
            for name in analysis.optional_reads:
                if name in definer:
                    found.add(max(definer[name], last_conservative))
            depends = sorted(found)
        run = facts.runs.get(cell.id)
        reasons: list[Reason] = []
        changed = _changed_files(run, facts) if run is not None else ()
        if cell.id == facts.running:
            state: CellState = "running"
        else:
            if run is None:
                reasons.append("never_run")
            else:
                reasons.extend(_run_reasons(cell, index, run, facts, made_by, changed))
            if any(not_fresh[dependency] for dependency in depends):
                reasons.append("upstream_stale")
            if undefined:
                reasons.append("undefined_name")
            state = "never_run" if run is None else "stale" if reasons else "fresh"
        not_fresh.append(state != "fresh")
        for name in analysis.defines | analysis.mutates:
            definer[name] = index
        if analysis.conservative:
            last_conservative = index
        statuses.append(
            CellStatus(
                index=index,
                id=cell.id,
                state=state,
                reasons=tuple(reasons),
                defines=tuple(sorted(analysis.defines)),
                execution=run.execution if run else None,
                depends_on=tuple(ids[dependency] for dependency in depends),
                changed_files=changed if state != "running" else (),
            )
        )
    plan = tuple(status.id for status in statuses if status.state in ("stale", "never_run"))
    return NotebookStatus(cells=tuple(statuses), plan=plan)


def _provided(source: str) -> frozenset[str]:
    analysis = analyze(source)
    return analysis.defines | analysis.mutates


def _run_reasons(
    cell: Cell,
    index: int,
    run: CellRun,
    facts: KernelFacts,
    made_by: Mapping[ExecutionNumber, int],
    changed_files: tuple[str, ...],
) -> list[Reason]:
    """The reasons that compare the last run of the cell at `index` with now."""
    reasons: list[Reason] = []
    if source_hash(cell.source) != run.source_hash:
        reasons.append("source_changed")
    if run.raised:
        reasons.append("errored")
    if changed_files:
        reasons.append("file_changed")
    for name, seen in run.read_versions.items():
        now = facts.versions.get(name)
        if now != seen and now != run.execution and (now is None or made_by.get(now, -1) <= index):
            reasons.append("upstream_changed")
            break
    return reasons


def _changed_files(run: CellRun, facts: KernelFacts) -> tuple[str, ...]:
    """The files the run read that are missing now, or differ in size or content, sorted."""
    changed = []
    for path, then in run.files_read.items():
        now = facts.files.get(path)
        if now is None or now.size != then.size or now.sha256 != then.sha256:
            changed.append(path)
    return tuple(sorted(changed))


def select_cells(status: NotebookStatus, cells: str | Sequence[str | int]) -> tuple[str, ...]:
    """The ids `run_notebook_cells` runs, in notebook order.

    `cells` is `"stale"` (the plan), `"all"`, or ids and 0-based code-cell indices (an
    id, or a string of digits naming an index). Unknown ones raise `invalid_arguments`.
    """
    if cells == "stale":
        return status.plan
    if cells == "all":
        return tuple(cell.id for cell in status.cells if cell.state != "skipped")
    wanted = [cells] if isinstance(cells, str) else list(cells)
    by_id = {cell.id: cell.index for cell in status.cells}
    chosen: set[int] = set()
    unknown: list[str | int] = []
    for item in wanted:
        index = _index_of(item, by_id, len(status.cells))
        if index is None:
            unknown.append(item)
        else:
            chosen.add(index)
    if unknown:
        raise WarmkernelError("invalid_arguments", _unknown_cells_message(unknown, status))
    # A skipped cell (empty, or tagged skip-execution) is not run even when named.
    return tuple(status.cells[i].id for i in sorted(chosen) if status.cells[i].state != "skipped")


def _index_of(item: str | int, by_id: Mapping[str, int], count: int) -> int | None:
    if isinstance(item, str):
        if item in by_id:
            return by_id[item]
        item = int(item) if item.isascii() and item.isdigit() else -1
    if isinstance(item, bool) or not 0 <= item < count:
        return None
    return item


def _unknown_cells_message(unknown: Sequence[str | int], status: NotebookStatus) -> str:
    named = ", ".join(repr(item) for item in unknown)
    if not status.cells:
        return f"unknown cells {named}: this notebook has no code cells"
    ids = [cell.id for cell in status.cells]
    listed = ", ".join(ids[:_LISTED_IDS])
    more = f" and {len(ids) - _LISTED_IDS} more" if len(ids) > _LISTED_IDS else ""
    return (
        f"unknown cells {named}: give 'stale', 'all', or code-cell indices 0-{len(ids) - 1} "
        f"or ids ({listed}{more})"
    )
