"""Running a notebook plan: the chosen cells one by one, each as an execution, and their outputs saved.

The session decides what runs (`staleness.select_cells`) and owns the executions; this module
only walks the plan through the `submit` it is given, stops where the plan says, and writes
the finished cells' outputs into the `.ipynb` in batches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from warmkernel.errors import WarmkernelError
from warmkernel.execution.record import ExecutionRecord
from warmkernel.notebook.binding import NotebookBinding, NotebookRun, save_outputs
from warmkernel.notebook.document import NotebookCell
from warmkernel.notebook.staleness import RAISES_TAG
from warmkernel.types import ExecutionState

SAVE_EVERY_S = 1.0
"""Outputs of notebook cells are written into the .ipynb at most this often while a run goes on."""


async def run_cells(
    run: NotebookRun,
    binding: NotebookBinding,
    *,
    submit: Callable[[NotebookCell], Awaitable[ExecutionRecord]],
    save: bool,
    on_done: Callable[[], None],
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run the cells one by one; reports started once the first one is accepted (or failed).

    `save` False leaves the file alone (each cell is `not_saved`); `on_done` is called when
    no further cell will start, before `run.done` is set.
    """
    started = False
    next_save = anyio.current_time() + SAVE_EVERY_S
    try:
        for cell in run.cells:
            if run.stop_requested:
                break
            try:
                record = await submit(cell)
            except WarmkernelError as exc:
                if not run.stop_requested:  # an interrupt or a reset came while it was submitted
                    run.failure = exc
                break
            run.current = (cell, record)
            if not started:
                task_status.started()
                started = True
            await record.done.wait()
            outputs = binding.finish_run(cell, record)
            run.results.append((cell, record))
            run.current = None
            if not save:
                run.saves[cell.id] = ("not_saved", "")
            else:
                run.to_save.update(binding.take_updated())  # cells above whose displays it updated
                run.to_save[cell.id] = outputs
                if anyio.current_time() >= next_save:
                    await _save_outputs(run, binding)
                    next_save = anyio.current_time() + SAVE_EVERY_S
            expected = record.state is ExecutionState.ERROR and RAISES_TAG in cell.tags
            if (
                record.state is not ExecutionState.COMPLETED
                and not expected
                and (run.stop_on_error or record.state is not ExecutionState.ERROR)
            ):
                break
    finally:
        with anyio.CancelScope(shield=True):
            await _save_outputs(run, binding)
        on_done()
        run.done.set()
        if not started:
            task_status.started()


async def _save_outputs(run: NotebookRun, binding: NotebookBinding) -> None:
    """Write the outputs waiting in `run.to_save` into the file, off the event loop."""
    batch, run.to_save = run.to_save, {}
    if batch:
        saves = await anyio.to_thread.run_sync(save_outputs, binding, batch)
        run.saves.update(saves)
        binding.record_saves(saves)
