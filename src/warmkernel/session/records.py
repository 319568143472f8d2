"""RecordBook: every execution of one kernel by number, how a new one is opened, and which one a call means.

Numbers are warmkernel's own: one past the latest, never reused, also across resets, deaths
and (with a journal) daemon restarts. Each record is journaled when it starts and when it ends,
and a cell of ours whose start cannot be journaled (a full disk) gets no number:
`journal_unavailable`, so the number is still free after a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from warmkernel.execution.directive import Directives
from warmkernel.execution.displays import DisplayLog
from warmkernel.execution.line_range import parse_line_range
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.selection import Selection
from warmkernel.replies import refusals
from warmkernel.replies.disk import disk_full_notice, journal_unavailable
from warmkernel.session.journal import Journal
from warmkernel.session.output_budget import OutputBudget
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionNumber, Generation, ReadableStream


@dataclass(frozen=True)
class OutputSelection:
    """What a read of an execution's output selected: lines `lo` to `hi` (0-based, half-open) of
    `stream`, or image ordinals when the stream is `images`."""

    record: ExecutionRecord
    stream: ReadableStream | Literal["images"]
    lo: int
    hi: int


class RecordBook:
    """The records of kernel `name`, oldest first; with a journal, those of earlier processes too.

    Output past the spill threshold goes to files in `directory` (the journal's, with one). When
    that disk fills, `tell` is given the notice once."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        directory: Path,
        journal: Journal | None,
        tell: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.name = name
        self._records: dict[ExecutionNumber, ExecutionRecord] = {}
        self._journal = journal
        where = journal.directory if journal is not None else directory
        self._budget = OutputBudget(
            directory,
            threshold_bytes=settings.spill_threshold_bytes,
            limit_bytes=settings.max_output_bytes,
            record_of=self._records.__getitem__,
            on_drop=journal.dropped if journal is not None else None,
            on_full=lambda error: tell(disk_full_notice(where, error, journaled=journal is not None)),
        )
        if journal is not None:
            journal.on_write = self._budget.wrote
        self.restored = self._restore()
        """The records an earlier process journaled, oldest first (none without a journal)."""

    def _restore(self) -> list[ExecutionRecord]:
        records = self._journal.load() if self._journal is not None else []
        self._records.update((record.number, record) for record in records)
        self._budget.adopt(records)
        return records

    @property
    def records(self) -> list[ExecutionRecord]:
        """Every record, oldest first."""
        return list(self._records.values())

    def __len__(self) -> int:
        return len(self._records)

    def next_number(self) -> ExecutionNumber:
        """The number the next accepted cell gets: one past the latest."""
        return ExecutionNumber(next(reversed(self._records), 0) + 1)

    def open(
        self,
        source: str,
        generation: Generation,
        *,
        client: str,
        directives: Directives | None = None,
        patch_literals: int = 0,
        cell_id: str | None = None,
        adopted: bool = False,
    ) -> ExecutionRecord:
        """A new record, its start journaled: for a cell of ours before it is sent (else
        `journal_unavailable`, and no number is given out), or for one another Jupyter client
        sent (`adopted`: the kernel runs it already, and its start is journaled once there is room)."""
        number = self.next_number()
        spill = self._budget.spill(number)
        record = ExecutionRecord(
            number,
            source,
            generation,
            directives=directives or Directives(),
            patch_literals=patch_literals,
            output=OutputLog(spill),
            displays=DisplayLog(spill),
            cell_id=cell_id,
            client=client,
        )
        if self._journal is not None:
            try:
                self._journal.started(record, refusable=not adopted)
            except OSError as exc:
                raise journal_unavailable(self.name, self._journal.directory, exc) from exc
        self._records[number] = record
        return record

    def finished(self, record: ExecutionRecord) -> None:
        if self._journal is not None:
            self._journal.finished(record)

    def select(self, execution: int | None, running: ExecutionRecord | None) -> ExecutionRecord:
        """The given execution, else the running one, else the latest."""
        if execution is not None:
            record = self._records.get(ExecutionNumber(execution))
            if record is None:
                raise refusals.not_found(execution, self.next_number() - 1, self.name)
            return record
        if running is not None:
            return running
        if self._records:
            return next(reversed(self._records.values()))
        raise refusals.not_found(None, 0, self.name)

    def select_output(
        self,
        record: ExecutionRecord,
        stream: ReadableStream | Literal["images"],
        line_range: str | None,
    ) -> OutputSelection:
        """The lines (for `images`, the image ordinals) of `record` that `line_range` picks; None
        picks them all."""
        parsed = parse_line_range(line_range)
        if stream == "images":
            lo, hi = parsed.resolve(len(record.displays.images))
            return OutputSelection(record, "images", lo, hi)
        lo, hi = parsed.resolve(record.output.line_count(stream))
        return OutputSelection(record, stream, lo, hi)

    def select_many(self, selection: Selection | None) -> list[ExecutionRecord]:
        """The records a selection names, in its order, each once (None: every record, oldest first);
        `execution_not_found` names the first number that does not exist."""
        if selection is None:
            if not self._records:
                raise refusals.not_found(None, 0, self.name)
            return self.records
        latest = self.next_number() - 1
        chosen: dict[ExecutionNumber, ExecutionRecord] = {}
        for first, last in selection:
            if last > latest:
                raise refusals.not_found(max(first, latest + 1), latest, self.name)
            for number in map(ExecutionNumber, range(first, last + 1)):
                record = self._records.get(number)
                if record is None:
                    raise refusals.not_found(number, latest, self.name)
                chosen.setdefault(number, record)
        return list(chosen.values())
