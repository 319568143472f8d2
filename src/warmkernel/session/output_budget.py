"""OutputBudget: the disk space all executions' spilled output may take, and who gives it back.

Each execution's output and images move to disk past a threshold; every byte written there is
counted here. Past the limit, the output of the oldest executions that spilled is dropped
(their counts stay, reads say it was dropped), never the output of the one still writing.
With a journal, the output of every finished execution is on disk, also the output that
earlier processes left there (`adopt`), and each drop is told to the journal (`on_drop`).

The budget also knows whether the directory has room: the first write that fails after one
that succeeded (a spill file, an image, a journal line: `wrote`) is told to `on_full`, once
for each time the disk fills.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path

from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.spill import Spill
from warmkernel.types import ExecutionNumber

log = logging.getLogger(__name__)


def spill_prefix(number: ExecutionNumber) -> str:
    """How the names of execution `number`'s files in the spill directory begin."""
    return f"{number}-"


class OutputBudget:
    """Holds spilled output under `limit_bytes` by dropping the oldest executions' output."""

    def __init__(
        self,
        directory: Path,
        *,
        threshold_bytes: int,
        limit_bytes: int,
        record_of: Callable[[ExecutionNumber], ExecutionRecord],
        on_drop: Callable[[ExecutionRecord], None] | None = None,
        on_full: Callable[[OSError], None] = lambda _: None,
    ) -> None:
        self._directory = directory
        self._threshold_bytes = threshold_bytes
        self._limit_bytes = limit_bytes
        self._record_of = record_of
        """The record numbered N; a log writes to disk only once its record is registered."""
        self._on_drop = on_drop
        """Told each record whose output was dropped, after the drop."""
        self._spilled_bytes = 0
        """Bytes of every execution's output still on disk."""
        self._on_disk: deque[ExecutionRecord] = deque()
        """Records with spilled output, oldest first: the order their output is dropped in."""
        self._on_full = on_full
        self.full: OSError | None = None
        """The error of the latest write to the directory, while no write has succeeded since."""

    def spill(self, number: ExecutionNumber) -> Spill:
        """Where execution `number`'s output and images go past the threshold, counted against the limit."""
        count = partial(self._count, number)
        return Spill(self._directory, self._threshold_bytes, count, spill_prefix(number), self.wrote)

    def wrote(self, error: OSError | None) -> None:
        """A write to the directory ended, and failed with `error` (None: it succeeded)."""
        if error is not None and self.full is None:
            self._on_full(error)
        self.full = error

    def _count(self, writer: ExecutionNumber, written: int) -> None:
        """Count a write; past the limit drop the oldest other executions' output.

        The writer's own output is never dropped here: it is running, or finishing right now.
        """
        if not self._on_disk or self._on_disk[-1].number != writer:
            self._on_disk.append(self._record_of(writer))
        self._spilled_bytes += written
        self.full = None
        self._shrink(writer)

    def adopt(self, records: list[ExecutionRecord]) -> None:
        """Count the output earlier processes left on disk (records oldest first), then keep to the limit."""
        for record in records:
            if record.output.disk_bytes and not record.output.dropped:
                self._on_disk.append(record)
                self._spilled_bytes += record.output.disk_bytes
        self._shrink(None)

    def _shrink(self, writer: ExecutionNumber | None) -> None:
        """Drop the oldest output, never the writer's, until the spilled bytes are within the limit."""
        while self._spilled_bytes > self._limit_bytes and self._on_disk and self._on_disk[0].number != writer:
            oldest = self._on_disk.popleft()
            self._spilled_bytes -= oldest.output.drop() + oldest.displays.drop()
            log.info("dropped the output of execution %d to stay under the output limit", oldest.number)
            if self._on_drop is not None:
                self._on_drop(oldest)
