"""Admission: the one answer to "may a cell start now?", and the turn that cells and questions take.

A kernel runs one cell at a time; a notebook run holds the kernel between its cells too. A cell
sent meanwhile is refused `busy` (never queued). Questions to the kernel (an inspection, a
notebook's facts) take the same turn as a cell's start, so neither is queued behind the other
inside the kernel.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from warmkernel.execution.record import ExecutionRecord
from warmkernel.notebook.binding import NotebookRun
from warmkernel.replies import refusals
from warmkernel.session.running import ExecutionTracker


class Admission:
    """What holds the kernel: the running cell and the notebook run, if any."""

    def __init__(self) -> None:
        self.running: ExecutionTracker | None = None
        self.notebook_run: NotebookRun | None = None
        self.turn = anyio.Lock(fast_acquire=True)  # a cell never yields to take it free
        """Held while a cell is sent or a question is asked (within the inspection budget)."""

    @asynccontextmanager
    async def turn_by(self, deadline: float, kernel: str) -> AsyncIterator[None]:
        """The turn, taken before `deadline` (anyio's clock); `kernel_not_responding` if another
        call still holds it then (its question to the kernel is still unanswered)."""
        with anyio.CancelScope(deadline=deadline) as waiting:
            await self.turn.acquire()
        if waiting.cancelled_caught:
            raise refusals.not_responding(kernel, "is still answering another call's request, which it took")
        try:
            yield
        finally:
            self.turn.release()

    @property
    def running_record(self) -> ExecutionRecord | None:
        return self.running.record if self.running is not None else None

    def admit_cell(self, *, of_notebook_run: bool) -> None:
        """`busy` unless a cell may start now; a notebook run's own cells pass its hold."""
        run = self.notebook_run
        if run is not None and (not of_notebook_run or run.stop_requested):
            raise refusals.notebook_busy(run, "this cell was not run")
        if self.running is not None:
            raise refusals.busy(self.running.record, "this cell was not run")

    def admit_notebook_run(self) -> None:
        """`busy` unless a run of notebook cells may start now."""
        if self.notebook_run is not None:
            raise refusals.notebook_busy(self.notebook_run, "no other cell was run")
        if self.running is not None:
            raise refusals.busy(self.running.record, "no notebook cell was run")

    def admit_change_of_cells(self) -> None:
        """`busy` while a notebook run holds the kernel: its cells must not move under it."""
        if self.notebook_run is not None:
            raise refusals.notebook_busy(self.notebook_run, "no cell was added")

    def stop_notebook_run(self) -> None:
        """A notebook run under way starts no further cell."""
        if self.notebook_run is not None:
            self.notebook_run.stop_requested = True
