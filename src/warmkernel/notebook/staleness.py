"""Cell staleness: which notebook cells no longer match the kernel, why, and the plan to fix it.

Owns the pure model: `evaluate(cells, facts) -> NotebookStatus`, with the runtime facts the
session records (`KernelFacts`, `CellRun`, `FileStamp`), plus `source_hash` and
`select_cells`. No I/O and no kernel: the caller hashes files and asks the kernel.

The promise: a cell is fresh when every value it read at its last run is the value a
top-to-bottom run of the current notebook would give it at that point, every file it read has
that content, and it finished without error.

Each code cell gets one state: `running` (it is the running cell), `never_run` (no run of it
is recorded in this kernel), `stale` (it ran, and one of the reasons below holds), `fresh`,
or `skipped`: it is never run, as nbclient and papermill skip it, because it is `empty` (only
whitespace) or tagged `skip-execution` (`skip_execution`); it defines nothing for the cells
below. Reasons of the other states, in the order they are listed (`why` names the value or file
and the execution behind each):

- `source_changed`: `source_hash` of its source differs from that of the source it ran.
  An edit undone is fresh again.
- `never_run`: no recorded run.
- `errored`: its last run raised.
- `file_changed`: a file it read is missing now, or its size or sha256 differs from when it
  was read. A new mtime with the same content changes nothing.
- `changed_outside`: a name its last run rebound or mutated was changed since by an execution
  that ran no cell of this notebook, or deleted while no cell's last run left it unbound.
  Changes by the notebook's own cells are ordinary flow.
- `upstream_changed`: a value it read (with its version v: the execution that last rebound or
  mutated it) came from elsewhere than the cell notebook order gives: v is not the last run of
  a cell above (a cell below, an earlier run of a cell, an execution outside the notebook), or
  a cell between that one and the reader has a current run that changed the name. A name the
  kernel had before any cell ran (IPython's `open`) is fine while no cell above provides it.
- `upstream_stale`: a cell it depends on is not fresh (stale, never run or running).
- `undefined_name`: it reads a name no cell above defines, so a run from the top would
  fail. Names read only inside function bodies are looked up when called, so a definer
  anywhere in the notebook satisfies them.

Dependencies: the provenance of each read (the cell whose last run made the value it saw),
the nearest writer above of each file it read, and, as the fast path and the fallback for what
the kernel did not see, the static analysis of the current sources (`analysis.analyze`): a
read resolves to the nearest cell above that defines or mutates the name, or to the nearest
conservative cell above (`exec`, star import, ...) when that is nearer, as it may define
anything. For a cell whose last run ran its present source without error, what the run did
replaces what its source says: names it rebound or mutated (aliases, method calls, a `global`
set by a function it called) count as its definitions, and names it left unbound (`del`, an
`if` not taken) as none. Dependencies always point up, so one pass in notebook order reaches
the fixpoint. Only `never_run` and the graph reasons apply to a cell that never ran; a running
cell has no reasons but makes its dependents `upstream_stale`.

The plan is the stale and never-run cells in notebook order, plus fresh cells with a why
(`plan_why`): the cell above that provides a name a planned cell reads, when the kernel's value
of it now comes from elsewhere than that cell or the cells between (so the value is made
again first), a cell that reads a planned cell, and a cell that sets again a name a planned
cell above sets; repeated until nothing is added. The running cell is left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from warmkernel.errors import WarmkernelError
from warmkernel.notebook.analysis import CellAnalysis, analyze
from warmkernel.types import ExecutionNumber

CellState = Literal["fresh", "stale", "never_run", "running", "skipped"]
Reason = Literal[
    "empty",
    "skip_execution",
    "source_changed",
    "never_run",
    "errored",
    "file_changed",
    "changed_outside",
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
    observed: bool = False
    """The kernel's account of what the run did (the fields below) has arrived."""
    wrote: frozenset[str] = frozenset()
    """The names it rebound or mutated (aliases and method calls included, as the kernel saw)."""
    unbound: frozenset[str] = frozenset()
    """The names its source uses that were unbound when it ended (deleted, or not assigned)."""
    files_written: frozenset[str] = frozenset()
    """The files it opened for writing."""


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
    notebook_executions: frozenset[ExecutionNumber] = frozenset()
    """Every execution that ran a cell of this notebook (last runs and earlier ones)."""


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
    why: tuple[str, ...] = ()
    """The values and files behind its reasons, and the execution that made each differ."""
    undefined: tuple[str, ...] = ()
    """The names behind `undefined_name`: read, and set by no cell above (a run cannot fix that)."""


@dataclass(frozen=True)
class NotebookStatus:
    cells: tuple[CellStatus, ...]
    plan: tuple[str, ...]
    """Ids of the cells to run, in notebook order: the stale and never-run ones, and the fresh
    ones `plan_why` names."""
    plan_why: Mapping[str, str] = field(default_factory=dict)
    """Fresh cell in the plan -> why it must run again."""


def source_hash(source: str) -> str:
    """The sha256 of a cell's source, which decides `source_changed`."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def evaluate(cells: Sequence[Cell], facts: KernelFacts) -> NotebookStatus:
    """Decide every code cell's state and reasons, and the plan; see the module docstring."""
    ids = [cell.id for cell in cells]
    if len(set(ids)) != len(ids):
        raise ValueError(f"cell ids must be unique, got {ids}")
    # a skipped cell is never run: it defines and reads nothing
    analyses = [analyze("" if skipped_because(cell) else cell.source) for cell in cells]
    everywhere = {name for analysis in analyses for name in analysis.defines | analysis.mutates}
    position = {cell_id: index for index, cell_id in enumerate(ids)}
    # execution number -> position of the cell whose last run it is
    made_by = {run.execution: position[cell_id] for cell_id, run in facts.runs.items() if cell_id in position}
    graph = _Graph(ids, made_by, facts)
    deleted = frozenset(name for run in facts.runs.values() for name in run.unbound)
    not_fresh: list[bool] = []
    statuses: list[CellStatus] = []
    for index, (cell, analysis) in enumerate(zip(cells, analyses, strict=True)):
        skipped = skipped_because(cell)
        if skipped is not None:  # never run, so it defines nothing for the cells below
            statuses.append(CellStatus(index, cell.id, "skipped", (skipped,), (), None, ()))
            not_fresh.append(False)
            continue
        depends, undefined = graph.static_depends(index, analysis, everywhere)
        run = facts.runs.get(cell.id)
        reasons: list[Reason] = []
        why: list[str] = []
        changed = _changed_files(run, facts) if run is not None else ()
        if cell.id == facts.running:
            state: CellState = "running"
        else:
            if run is None:
                reasons.append("never_run")
            else:
                reasons.extend(_run_reasons(cell, run, facts, deleted, why, changed))
                if graph.check_reads(index, run, depends, why):
                    reasons.append("upstream_changed")
                depends.update(
                    graph.file_writer[path] for path in run.files_read if path in graph.file_writer
                )
            upstream = [statuses[dependency] for dependency in sorted(depends) if not_fresh[dependency]]
            if upstream:
                reasons.append("upstream_stale")
                why.extend(f"{above.id} is {above.state.replace('_', ' ')}" for above in upstream)
            if undefined:
                reasons.append("undefined_name")
                why.extend(f"{name} is set by no cell above it" for name in undefined)
            state = "never_run" if run is None else "stale" if reasons else "fresh"
        not_fresh.append(state != "fresh")
        read = analysis.reads | analysis.mutates | (run.read_versions.keys() if run else set())
        graph.note_needs(index, sorted(read))
        current = (
            run is not None
            and run.observed
            and not run.raised
            and run.source_hash == source_hash(cell.source)
        )
        graph.add(index, analysis, run if current else None, run)
        statuses.append(
            CellStatus(
                index=index,
                id=cell.id,
                state=state,
                reasons=tuple(reasons),
                defines=tuple(sorted(analysis.defines)),
                execution=run.execution if run else None,
                depends_on=tuple(ids[dependency] for dependency in sorted(depends)),
                changed_files=changed if state != "running" else (),
                why=tuple(why),
                undefined=tuple(undefined) if "undefined_name" in reasons else (),
            )
        )
    plan, plan_why = _plan(statuses, analyses, graph)
    return NotebookStatus(cells=tuple(statuses), plan=plan, plan_why=plan_why)


class _Graph:
    """Where each name and file comes from in notebook order, built up one cell at a time."""

    def __init__(
        self, ids: Sequence[str], made_by: Mapping[ExecutionNumber, int], facts: KernelFacts
    ) -> None:
        self.ids = ids
        self.made_by = made_by
        self.facts = facts
        self.definer: dict[str, int] = {}
        """Name -> the nearest cell so far that defines or mutates it (statically, or as its run did)."""
        self.writer: dict[str, int] = {}
        """Name -> the nearest cell so far whose current run rebound or mutated it."""
        self.file_writer: dict[str, int] = {}
        """Path -> the nearest cell so far whose last run wrote the file."""
        self.last_conservative = -1
        self.needs: dict[int, dict[int, str]] = {}
        """Cell index -> the cells above it that must run first if it runs, and why."""

    def static_depends(
        self, index: int, analysis: CellAnalysis, everywhere: set[str]
    ) -> tuple[set[int], list[str]]:
        """The cells above that the source's reads resolve to, and the names that resolve to none."""
        if analysis.conservative:
            return set(range(index)), []
        found: set[int] = set()
        undefined: list[str] = []
        for name in sorted(analysis.reads):
            nearest = max(self.definer.get(name, -1), self.last_conservative)
            if nearest >= 0:
                found.add(nearest)
            elif name not in analysis.deferred_reads or name not in everywhere:
                undefined.append(name)
        for name in analysis.optional_reads:
            if name in self.definer:
                found.add(max(self.definer[name], self.last_conservative))
        return found, undefined

    def check_reads(self, index: int, run: CellRun, depends: set[int], why: list[str]) -> bool:
        """Whether a value the run read came from anywhere but the cell notebook order gives
        (noting why, and the cell above to run again); links the reads that did."""
        wrong = False
        for name, seen in sorted(run.read_versions.items()):
            source = self.made_by.get(seen)
            writer = self.writer.get(name, -1)
            if source is not None and source < index and writer <= source:
                depends.add(source)
                continue
            if seen == 0 and name not in self.definer:
                continue  # the kernel's own (IPython's `open`, `In`), as a fresh kernel has it
            wrong = True
            why.append(f"{name} {self._origin(seen, source, index, writer)}")
        return wrong

    def note_needs(self, index: int, names: Iterable[str]) -> None:
        """The cells above that must run before the cell at `index` can run again: the provider of
        each name it reads whose value in the kernel now is not one notebook order gives there."""
        for name in names:
            provider = self.definer.get(name)
            if provider is None:
                continue
            now = self.made_by.get(self.facts.versions.get(name, ExecutionNumber(0)))
            if now is None or not provider <= now < index:
                self.needs.setdefault(index, {}).setdefault(
                    provider, f"restores {name} for {self.ids[index]}"
                )

    def _origin(self, seen: ExecutionNumber, source: int | None, index: int, writer: int) -> str:
        if source is None:
            if seen in self.facts.notebook_executions:
                return f"came from In [{seen}], not the last run of any cell here"
            return (
                f"came from In [{seen}], outside the notebook" if seen else "was set before the notebook ran"
            )
        if source >= index:
            return f"came from {self.ids[source]} below (In [{seen}])"
        return f"came from {self.ids[source]} (In [{seen}]) but {self.ids[writer]} sets it later"

    def add(self, index: int, analysis: CellAnalysis, current: CellRun | None, last: CellRun | None) -> None:
        """Take in the cell at `index`; `current` is its last run when that ran its present source
        without error and the kernel's account of it arrived."""
        provides = analysis.defines | analysis.mutates
        if current is not None:
            provides = (provides | current.wrote) - current.unbound
            for name in current.wrote:
                self.writer[name] = index
            for name in current.unbound & analysis.defines:  # deleted, or its assignment did not run
                self.definer.pop(name, None)
                self.writer.pop(name, None)
        for name in provides:
            self.definer[name] = index
        if last is not None:
            self.file_writer.update(dict.fromkeys(last.files_written, index))
        if analysis.conservative:
            self.last_conservative = index


def _plan(
    statuses: Sequence[CellStatus], analyses: Sequence[CellAnalysis], graph: _Graph
) -> tuple[tuple[str, ...], Mapping[str, str]]:
    """The cells to run, in notebook order: those not fresh, the cells above that restore a value
    a planned cell reads, and every cell that reads from a planned cell or sets again a name one
    sets; repeated until nothing is added. A provider is asked for once: one that cannot be
    planned (running, skipped) stays out of the plan rather than being asked for again."""
    repairs: dict[int, str] = {}
    while True:
        planned, why = _closure(statuses, analyses, repairs)
        chosen = set(planned)
        more = {
            provider: reason
            for status in statuses
            if status.id in chosen
            for provider, reason in graph.needs.get(status.index, {}).items()
            if provider not in repairs and statuses[provider].id not in chosen
        }
        if not more:
            return planned, why
        repairs.update(more)


def _closure(
    statuses: Sequence[CellStatus], analyses: Sequence[CellAnalysis], repairs: Mapping[int, str]
) -> tuple[tuple[str, ...], Mapping[str, str]]:
    planned: list[str] = []
    why: dict[str, str] = {}
    set_by: dict[str, str] = {}  # name -> the last planned cell so far that sets it
    for status, analysis in zip(statuses, analyses, strict=True):
        if status.state in ("running", "skipped"):
            continue
        provides = analysis.defines | analysis.mutates
        if status.state == "fresh":
            reason = repairs.get(status.index) or _follows(status, provides, set(planned), set_by)
            if reason is None:
                continue
            why[status.id] = reason
        planned.append(status.id)
        set_by.update(dict.fromkeys(provides, status.id))
    return tuple(planned), why


def _follows(
    status: CellStatus, provides: frozenset[str], planned: set[str], set_by: Mapping[str, str]
) -> str | None:
    """Why a fresh cell must run after the planned cells above it, if it must."""
    for cell_id in status.depends_on:
        if cell_id in planned:
            return f"reads {cell_id}, which runs again"
    again = sorted(provides & set_by.keys())
    return f"sets {again[0]} again after {set_by[again[0]]}" if again else None


def _run_reasons(
    cell: Cell,
    run: CellRun,
    facts: KernelFacts,
    deleted: frozenset[str],
    why: list[str],
    changed_files: tuple[str, ...],
) -> list[Reason]:
    """The reasons that compare the last run of `cell` with now (`deleted`: names unbound by the
    last run of some cell, which are the notebook's own doing)."""
    reasons: list[Reason] = []
    if source_hash(cell.source) != run.source_hash:
        reasons.append("source_changed")
        why.append(f"its source was edited after In [{run.execution}]")
    if run.raised:
        reasons.append("errored")
        why.append(f"its last run (In [{run.execution}]) raised an error")
    if changed_files:
        reasons.append("file_changed")
        why.extend(f"{path} changed" for path in changed_files)
    changed = []
    for name in sorted(run.wrote):
        now = facts.versions.get(name)
        if now is None and name not in deleted:
            changed.append(f"{name} deleted outside the notebook")
        elif now is not None and now != run.execution and now not in facts.notebook_executions:
            changed.append(f"{name} changed by In [{now}]")
    if changed:
        reasons.append("changed_outside")
        why.extend(changed)
    return reasons


def _changed_files(run: CellRun, facts: KernelFacts) -> tuple[str, ...]:
    """The files the run read that are missing now, or differ in size or content, sorted."""
    changed = []
    for path, then in run.files_read.items():
        now = facts.files.get(path)
        if now is None or now.size != then.size or now.sha256 != then.sha256:
            changed.append(path)
    return tuple(sorted(changed))


def select_cells(
    status: NotebookStatus, cells: str | Sequence[str | int]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ids `run_notebook_cells` runs, in notebook order; and those it was asked for but does
    not run, as Jupyter's runners do not (empty, or tagged skip-execution).

    `cells` is `"stale"` (the plan), `"all"`, or ids and 0-based code-cell indices (an
    id, or a string of digits naming an index). Unknown ones raise `invalid_arguments`.
    """
    if cells == "stale":
        return status.plan, ()
    if cells == "all":
        chosen = set(range(len(status.cells)))
    else:
        wanted = [cells] if isinstance(cells, str) else list(cells)
        by_id = {cell.id: cell.index for cell in status.cells}
        chosen = set()
        unknown: list[str | int] = []
        for item in wanted:
            index = _index_of(item, by_id, len(status.cells))
            if index is None:
                unknown.append(item)
            else:
                chosen.add(index)
        if unknown:
            raise WarmkernelError("invalid_arguments", _unknown_cells_message(unknown, status, one=False))
    named = [status.cells[i] for i in sorted(chosen)]
    return (
        tuple(cell.id for cell in named if cell.state != "skipped"),
        tuple(cell.id for cell in named if cell.state == "skipped"),
    )


def select_cell(status: NotebookStatus, cell: str | int) -> str:
    """The id of one code cell (skipped or not), named by id or 0-based code-cell index."""
    index = _index_of(cell, {each.id: each.index for each in status.cells}, len(status.cells))
    if index is None:
        raise WarmkernelError("invalid_arguments", _unknown_cells_message([cell], status, one=True))
    return status.cells[index].id


def _index_of(item: str | int, by_id: Mapping[str, int], count: int) -> int | None:
    if isinstance(item, str):
        if item in by_id:
            return by_id[item]
        item = int(item) if item.isascii() and item.isdigit() else -1
    if isinstance(item, bool) or not 0 <= item < count:
        return None
    return item


def _unknown_cells_message(unknown: Sequence[str | int], status: NotebookStatus, *, one: bool) -> str:
    """`one`: a single cell was asked for (where 'stale' and 'all' mean nothing)."""
    named = ", ".join(repr(item) for item in unknown)
    noun = "cell" if len(unknown) == 1 else "cells"
    if not status.cells:
        return f"unknown {noun} {named}: this notebook has no code cells"
    ids = [cell.id for cell in status.cells]
    listed = ", ".join(ids[:_LISTED_IDS])
    more = f" and {len(ids) - _LISTED_IDS} more" if len(ids) > _LISTED_IDS else ""
    last = len(ids) - 1
    forms = (
        f"a code-cell index 0-{last} or id"
        if one
        else f"'stale', 'all', or code-cell indices 0-{last} or ids"
    )
    return f"unknown {noun} {named}: give {forms} ({listed}{more})"
