"""ExecutionRecord: one accepted cell, its number, lifecycle, timing and output, and the waits on it.

Lifecycle: `running`, then one terminal state. A running cell that calls `input()` or
`getpass()` moves to `awaiting_input` until it is answered (back to `running`) or ends; it is
still the running execution (busy, selected, interruptible), but waits return at once.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import anyio

from warmkernel.execution.directive import Directives
from warmkernel.execution.displays import DisplayLog
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.progress import Progress
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

_PREAMBLE = re.compile(r"#|import\s|from\s+\S+\s+import\s")
"""A comment (directives too) or an import statement: what a cell's first lines usually are."""


@dataclass(frozen=True)
class InputPrompt:
    """What a cell waiting in `input()` or `getpass()` asked."""

    text: str
    password: bool
    """From getpass(): the answer is never written to the output."""


@dataclass(frozen=True)
class WaitEnd:
    """Why a wait on a record ended, and after how long."""

    reason: Literal["finished", "input", "timeout", "silence"]
    waited_s: float
    silence_s: float | None = None
    """The silence that ended the wait (reason `silence`)."""


@dataclass(eq=False)
class ExecutionRecord:
    """A numbered execution; it outlives the kernel that ran it."""

    number: ExecutionNumber
    source: str
    generation: Generation
    directives: Directives = field(default_factory=Directives)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    output: OutputLog = field(default_factory=OutputLog)
    displays: DisplayLog = field(default_factory=DisplayLog)
    state: ExecutionState = ExecutionState.RUNNING
    prompt: InputPrompt | None = None
    """The pending question while `awaiting_input`."""
    error_name: str = ""
    error_value: str = ""
    traceback_lines: tuple[int, int] | None = None
    """The combined lines [first, end) its traceback occupies, so a reply can condense them
    (None: no traceback, or a record reloaded from the journal, which shows it whole)."""
    end_reason: str = ""
    """Why a killed or died execution ended, e.g. `exit code 3` or `signal SIGKILL`."""
    patch_literals: int = 0
    """How many Apply Patch literals were converted before the cell was sent."""
    cell_id: str | None = None
    """The id of the notebook cell this execution ran, if it was one (run_notebook_cells)."""
    client: str = ""
    """Who submitted the cell: an MCP client's name (`claude-code`), `cli`, another client of the
    kernel (`root (jupyter session 1a2b3c4d)`), or "" when unknown."""
    output_dropped_bytes: int = 0
    """Output past the cell's cap (`max_cell_output_bytes`), dropped as it came."""
    images_not_kept: int = 0
    """Images an earlier process showed for this record: the journal keeps their captions, not their bytes."""
    progress_source: Callable[[], Progress | None] | None = None
    """Reads the latest progress display (a widget bar or a `\\r` line) when asked: `progress()`."""
    _start: float = field(default_factory=time.monotonic)
    _end: float | None = None
    last_output: float = field(default_factory=time.monotonic)
    """Monotonic time of the latest output (of acceptance until there is some): silence counts from it."""
    done: anyio.Event = field(default_factory=anyio.Event)
    _paused: anyio.Event = field(default_factory=anyio.Event)
    """Set when the record stops running on its own: it finished or waits for input."""

    @property
    def first_line(self) -> str:
        """The line that says what the cell does, for listings: the first that is not blank, a
        comment, a directive or an import (the first non-blank one if every line is such)."""
        lines = [line.strip() for line in self.source.splitlines() if line.strip()]
        telling = (line for line in lines if not _PREAMBLE.match(line))
        return next(telling, lines[0] if lines else "")

    def elapsed(self) -> float:
        """Seconds from acceptance to the end, or to now while running."""
        end = self._end if self._end is not None else time.monotonic()
        return end - self._start

    @property
    def ended_at(self) -> datetime | None:
        if self._end is None:
            return None
        return datetime.fromtimestamp(self.started_at.timestamp() + self.elapsed(), UTC)

    def progress(self) -> Progress | None:
        """How far the cell got by its latest progress display, if that shows a fraction."""
        return self.progress_source() if self.progress_source is not None else None

    def output_arrived(self) -> None:
        """Output is about to be appended: it restarts the silence, and a waiting clear happens first."""
        self.last_output = time.monotonic()
        self.displays.output_arrived(self.output)

    def ask_input(self, prompt: InputPrompt) -> None:
        """The running code waits in `input()`; every wait on the record returns now."""
        if self.state is not ExecutionState.RUNNING:
            raise RuntimeError(f"execution {self.number} cannot ask for input: it is {self.state.value}")
        self.state, self.prompt = ExecutionState.AWAITING_INPUT, prompt
        self._paused.set()

    def input_answered(self) -> InputPrompt:
        """The prompt was answered (or interrupted): the code runs on. Returns the prompt."""
        if self.state is not ExecutionState.AWAITING_INPUT or self.prompt is None:
            raise RuntimeError(f"execution {self.number} is not awaiting input: it is {self.state.value}")
        prompt = self.prompt
        self.state, self.prompt, self._paused = ExecutionState.RUNNING, None, anyio.Event()
        return prompt

    def finish(self, state: ExecutionState, *, reason: str = "") -> None:
        """Move to a terminal state, exactly once, and release every waiter."""
        self._end_as(state, reason, time.monotonic(), close_output=True)

    def ended_earlier(self, state: ExecutionState, elapsed_s: float, *, reason: str = "") -> None:
        """A record rebuilt from the journal ends as it did in the process that ran it.

        Its output was closed by that process; `elapsed()` is `elapsed_s` from now on.
        """
        self._end_as(state, reason, self._start + elapsed_s, close_output=False)

    def _end_as(self, state: ExecutionState, reason: str, end: float, *, close_output: bool) -> None:
        if self.state.finished:
            raise RuntimeError(f"execution {self.number} already finished ({self.state.value})")
        if not state.finished:
            raise ValueError(f"execution {self.number} cannot finish as {state.value}")
        self.state, self.prompt = state, None
        self.end_reason = reason
        self._end = end
        if close_output:
            self.displays.settle(self.output)
            self.output.close()
        self.done.set()
        self._paused.set()

    async def wait(
        self,
        timeout_s: float,
        *,
        silence_s: float | None = None,
        every: tuple[float, Callable[[], Awaitable[None]]] | None = None,
    ) -> WaitEnd:
        """Wait until the execution finishes or asks for input, at most `timeout_s`; with `silence_s`,
        also until it has printed nothing for that long (counted from the later of the call's
        start and the last output). The execution runs on.

        `every` is (seconds, tick): `tick` is awaited each time that many seconds have passed (a
        waiter that reports progress), in this task: a cell that ends sooner costs no other task.

        A quiet deadline moves only when it is reached: output itself wakes no waiter.
        """
        began = time.monotonic()
        deadline = began + timeout_s
        next_tick = began + every[0] if every is not None else math.inf
        while self.state is ExecutionState.RUNNING:
            now = time.monotonic()
            if every is not None and next_tick <= now:
                await every[1]()
                next_tick = now + every[0]
            wake = min(deadline, next_tick)
            if silence_s is not None:
                quiet_at = max(began, self.last_output) + silence_s
                if quiet_at <= now:
                    return WaitEnd("silence", now - began, silence_s)
                wake = min(wake, quiet_at)
            if deadline <= now:
                return WaitEnd("timeout", now - began)
            with anyio.move_on_after(wake - now):
                await self._paused.wait()
        return WaitEnd("finished" if self.state.finished else "input", time.monotonic() - began)
