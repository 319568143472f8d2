"""ExecutionRecord: one accepted cell, its number, lifecycle, timing and output."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import anyio

from warmkernel.execution.directive import Directives
from warmkernel.execution.output import OutputLog
from warmkernel.types import ExecutionNumber, ExecutionState, Generation


@dataclass(eq=False)
class ExecutionRecord:
    """A numbered execution; it outlives the kernel that ran it."""

    number: ExecutionNumber
    source: str
    generation: Generation
    directives: Directives = field(default_factory=Directives)
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    output: OutputLog = field(default_factory=OutputLog)
    state: ExecutionState = ExecutionState.RUNNING
    error_name: str = ""
    error_value: str = ""
    end_reason: str = ""
    """Why a killed or died execution ended, e.g. `exit code 3` or `signal SIGKILL`."""
    patch_literals: int = 0
    """How many Apply Patch literals were converted before the cell was sent."""
    _start: float = field(default_factory=time.monotonic)
    _end: float | None = None
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def first_line(self) -> str:
        """The first non-blank source line, for listings."""
        return next((line.strip() for line in self.source.splitlines() if line.strip()), "")

    def elapsed(self) -> float:
        """Seconds from acceptance to the end, or to now while running."""
        end = self._end if self._end is not None else time.monotonic()
        return end - self._start

    @property
    def ended_at(self) -> datetime | None:
        if self._end is None:
            return None
        return datetime.fromtimestamp(self.started_at.timestamp() + self.elapsed(), timezone.utc)

    def finish(self, state: ExecutionState, *, reason: str = "") -> None:
        """Move to a terminal state, exactly once, and release every waiter."""
        if self.state.finished:
            raise RuntimeError(f"execution {self.number} already finished ({self.state.value})")
        if not state.finished:
            raise ValueError(f"execution {self.number} cannot finish as {state.value}")
        self.state = state
        self.end_reason = reason
        self._end = time.monotonic()
        self.output.close()
        self.done.set()
