"""Replies to notebook_status, run_notebook_cells and watch_notebook_file: each cell's state and
reasons, the plan and the call that runs it, and a run's cells as run_python shows them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from warmkernel.execution.record import WaitEnd
from warmkernel.notebook.binding import NotebookRun, NotebookView
from warmkernel.notebook.staleness import RAISES_TAG, CellStatus
from warmkernel.replies.hints import call
from warmkernel.replies.reply import Picture, Reply, clip, columns
from warmkernel.replies.runs import execution_reply
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionState

_SAVE_SKIPPED = {
    "cell_missing": "the cell is no longer in the file",
    "source_changed": "its source changed on disk since it ran",
    "file_changed_during_write": "the file changed while it was being written",
}


def notebook_status_reply(view: NotebookView, settings: Settings) -> Reply:
    """Every code cell's state and reasons, then the plan and the call that runs it."""
    cells = view.status.cells
    counts = {
        state: sum(cell.state == state for cell in cells)
        for state in ("fresh", "stale", "never_run", "running", "skipped")
    }
    tally = ", ".join(f"{count} {state.replace('_', ' ')}" for state, count in counts.items() if count)
    lines = [
        f"notebook {view.shown} · {len(cells)} code cell{'s' if len(cells) != 1 else ''}"
        + (f": {tally}" if tally else "")
    ]
    if not view.facts_current:
        lines.append("note: a cell is running; names and files are as of the last finished execution")
    lines.extend(_cell_table(view, settings))
    lines.extend(_why_lines(view, settings))
    for cell_id, (outcome, error) in view.unsaved.items():
        why = _SAVE_SKIPPED.get(outcome, f"writing it failed: {error}" if error else "writing it failed")
        lines.append(f"outputs of cell {cell_id}'s last run are not in the file: {why}")
    lines.append(_plan_line(view))
    return Reply("\n".join(lines), _status_facts(view))


def _cell_table(view: NotebookView, settings: Settings) -> list[str]:
    derived = {cell.id for cell in view.notebook.cells if cell.id_derived}
    rows = [
        (
            str(cell.index),
            cell.id + ("*" if cell.id in derived else ""),
            cell.state,
            str(cell.execution) if cell.execution is not None else "",
            _reasons(cell, view),
            clip(" ".join(cell.defines), 60),
        )
        for cell in view.status.cells
    ]
    table = columns([("#", "id", "state", "In", "reasons", "defines"), *rows])
    if len(table) > settings.inline_max_lines or sum(map(len, table)) > settings.inline_max_chars:
        table = columns([("#", "id", "state", "In", "reasons", "defines"), *_fold_fresh(rows)])
    budget = settings.inline_max_chars
    shown: list[str] = []
    for line in table[: settings.inline_max_lines]:
        budget -= len(line) + 1
        if budget < 0:
            break
        shown.append(line)
    if len(shown) < len(table):
        shown.append(f"... {len(table) - len(shown)} more rows; structured content (--json) lists every cell")
    if derived:
        shown.append("* derived id: the file gives this cell none; it follows the cell's source and position")
    return shown


def _why_lines(view: NotebookView, settings: Settings) -> list[str]:
    """What made each stale cell differ (the values and files, and the executions), one line each."""
    lines = [f"{cell.id}: {clip('; '.join(cell.why), 160)}" for cell in view.status.cells if cell.why]
    shown = lines[: max(1, settings.inline_max_lines // 4)]
    if len(shown) < len(lines):
        shown.append(
            f"... and {len(lines) - len(shown)} more; structured content (--json) has every cell's why"
        )
    return shown


def _fold_fresh(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Runs of fresh cells as one row each, so a long notebook's table shows what is not fresh."""
    folded: list[tuple[str, ...]] = []
    run: list[tuple[str, ...]] = []
    for row in [*rows, None]:
        if row is not None and row[2] == "fresh":
            run.append(row)
            continue
        if len(run) > 1:
            folded.append((f"{run[0][0]}-{run[-1][0]}", f"({len(run)} cells)", "fresh", "", "", ""))
        else:
            folded.extend(run)
        run = []
        if row is not None:
            folded.append(row)
    return folded


def _plan_line(view: NotebookView) -> str:
    plan = view.status.plan
    if not plan:
        running = [cell.id for cell in view.status.cells if cell.state == "running"]
        return f"plan: empty; cell {running[0]} is running" if running else "plan: empty; every cell is fresh"
    why = view.status.plan_why
    named = ", ".join(f"{cell_id} ({why[cell_id]})" if cell_id in why else cell_id for cell_id in plan)
    runs = call("run_notebook_cells", path=view.shown)
    return f"plan: {named}. {runs} runs them in order{_unfixable(view)}"


def _unfixable(view: NotebookView) -> str:
    """What no run can make fresh: cells that read a name no cell above sets."""
    unset = [cell for cell in view.status.cells if cell.undefined]
    if not unset:
        return ""
    reads = "; ".join(f"{cell.id} reads {', '.join(cell.undefined)}" for cell in unset)
    return f", but cannot make fresh what reads a name no cell above sets ({reads}): edit the notebook"


def _reasons(cell: CellStatus, view: NotebookView) -> str:
    """The reasons, `file_changed` with the files it means (`file_changed: data.csv`)."""
    if not cell.changed_files:
        return ", ".join(cell.reasons)
    files = [_file_shown(path, view) for path in cell.changed_files]
    named = f"file_changed: {', '.join(files[:3])}" + (
        f" and {len(files) - 3} more" if len(files) > 3 else ""
    )
    return ", ".join(named if reason == "file_changed" else reason for reason in cell.reasons)


def _file_shown(path: str, view: NotebookView) -> str:
    """A file as the notebook's reader knows it: relative to the notebook's folder when inside it."""
    folder = view.notebook.path.parent
    file = Path(path)
    return str(file.relative_to(folder)) if file.is_relative_to(folder) else path


def _status_facts(view: NotebookView) -> dict[str, Any]:
    derived = {cell.id for cell in view.notebook.cells if cell.id_derived}
    return {
        "notebook": view.shown,
        "cells": [
            {
                "index": cell.index,
                "id": cell.id,
                "id_derived": cell.id in derived,
                "state": cell.state,
                "reasons": list(cell.reasons),
                "defines": list(cell.defines),
                "execution": cell.execution,
                "depends_on": list(cell.depends_on),
                "changed_files": list(cell.changed_files),
                "why": list(cell.why),
            }
            for cell in view.status.cells
        ],
        "plan": list(view.status.plan),
        "plan_why": dict(view.status.plan_why),
        "facts_current": view.facts_current,
        "outputs_not_saved": {cell_id: outcome for cell_id, (outcome, _) in view.unsaved.items()},
    }


def notebook_run_reply(
    run: NotebookRun, view: NotebookView | None, settings: Settings, *, waited_s: float
) -> Reply:
    """Each cell's reply as run_python gives it (images included), then how the run ended and what
    is still stale. The cells share the inline budget. `view` is the notebook after the run; None
    while a cell still runs."""
    entries = list(run.results)
    if run.current is not None:
        entries.append(run.current)
    share = max(1, len(entries))
    per_cell = replace(
        settings,
        inline_max_lines=max(20, settings.inline_max_lines // share),
        inline_max_chars=max(1000, settings.inline_max_chars // share),
        max_images_per_reply=max(1, settings.max_images_per_reply // share),
    )
    names = ", ".join(cell.id for cell in run.cells) or "none"
    parts: list[str | Picture] = [
        f"run_notebook_cells {run.shown} · {len(run.cells)} cell{'s' if len(run.cells) != 1 else ''}: {names}"
    ]
    cells: list[dict[str, Any]] = []
    skipped: list[str] = []
    for cell, record in entries:
        waited = WaitEnd("finished" if record.state.finished else "timeout", waited_s)
        reply = execution_reply(record, per_cell, waited=waited)
        for part in (f"[cell {cell.index} · {cell.id}]", reply.text, *reply.more):
            _add_part(parts, part)
        saved, error = run.saves.get(cell.id, ("pending", ""))
        cells.append({"index": cell.index, "id": cell.id} | reply.data | {"outputs_saved": saved})
        if saved not in ("saved", "pending", "not_saved"):
            why = _SAVE_SKIPPED.get(saved, error)
            skipped.append(f"outputs of cell {cell.id} not saved to {run.shown}: {why}")
    lines = [*_run_ending(run), *skipped]
    if run.skipped:
        listed = ", ".join(f"{cell_id} ({why})" for cell_id, why in run.skipped)
        lines.append(f"not run, as Jupyter's runners would not: {listed}")
    data: dict[str, Any] = {
        "notebook": run.shown,
        "state": _run_state(run),
        "cells": cells,
        "not_run": [cell.id for cell in run.not_run],
        "skipped": [{"id": cell_id, "why": why} for cell_id, why in run.skipped],
        "failure": {"code": run.failure.code, "message": run.failure.message} if run.failure else None,
    }
    if view is not None:
        still = [cell for cell in view.status.cells if cell.state not in ("fresh", "skipped")]
        listed = ", ".join(f"{cell.id} ({', '.join(cell.reasons) or cell.state})" for cell in still)
        lines.append(f"still stale: {listed}{_unfixable(view)}" if still else "every cell is fresh")
        data["status"] = _status_facts(view)
    for line in lines:
        _add_part(parts, line)
    first, *more = parts
    assert isinstance(first, str), "a run reply starts with its header line"
    return Reply(first, data, tuple(more))


def _add_part(parts: list[str | Picture], part: str | Picture) -> None:
    """Text joins the text before it as new lines; a picture starts a new content block."""
    if isinstance(part, str) and parts and isinstance(parts[-1], str):
        parts[-1] = f"{parts[-1]}\n{part}"
    else:
        parts.append(part)


def _run_ending(run: NotebookRun) -> list[str]:
    not_run = ", ".join(cell.id for cell in run.not_run)
    if run.current is not None:
        cell, record = run.current
        number = record.number
        rest = f"; then {not_run}" if not_run else ""
        return [
            f"Still running: cell {cell.id} as In [{number}]{rest}. Next: "
            f"{call('wait_python', execution=number)} waits for it, "
            f"{call('notebook_status', path=run.shown)} follows the run, "
            f"{call('interrupt_python')} stops it."
        ]
    if run.failure is not None:
        return [f"stopped: {run.failure}" + (f"; not run: {not_run}" if not_run else "")]
    if not_run and run.results and (last := run.results[-1])[1].state is not ExecutionState.COMPLETED:
        return [f"stopped after cell {last[0].id} ({last[1].state.value}); not run: {not_run}"]
    if not_run:
        return [f"stopped by an interrupt or a reset; not run: {not_run}"]
    return []


def _run_state(run: NotebookRun) -> str:
    """The run's state for exit statuses: running, completed, or the worst state a cell ended in
    (the error of a cell tagged raises-exception is how that cell completes)."""
    if not run.done.is_set():
        return "running"
    if run.failure is not None:
        return "error"
    states = {
        record.state
        for cell, record in run.results
        if not (record.state is ExecutionState.ERROR and RAISES_TAG in cell.tags)
    }
    for state in (
        ExecutionState.DIED,
        ExecutionState.KILLED,
        ExecutionState.INTERRUPTED,
        ExecutionState.ERROR,
    ):
        if state in states:
            return state.value
    return "interrupted" if run.not_run else "completed"


def notebook_watch_reply(view: NotebookView, cell_id: str, file: str) -> Reply:
    cell = next(cell for cell in view.status.cells if cell.id == cell_id)
    verdict = cell.state + (f" ({', '.join(cell.reasons)})" if cell.reasons else "")
    text = (
        f"cell {cell_id} of {view.shown} now depends on {file}: when its content changes, the cell is stale "
        f"(file_changed). The cell is {verdict}."
    )
    return Reply(
        text,
        {
            "notebook": view.shown,
            "cell": cell_id,
            "file": file,
            "state": cell.state,
            "reasons": list(cell.reasons),
        },
    )
