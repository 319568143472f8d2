"""Session: the one door to a named kernel, its executions and its notebook, made of rooms.

Both faces (MCP tools and CLI verbs) call these methods; nothing else changes this state. The
rooms have one job each: `KernelSlot` (the kernel across generations), `RecordBook` (numbering,
selection, the journal), `Admission` (may a cell start now?), `ExecutionTracker` (the running
cell), `Questions` (questions to the kernel), `NotebookSide`, `Exports`, `Notices`, and an
`IdleClock`. This class sends cells, watches the kernel's life, and hands out the rest.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc

from warmkernel.execution.charts import Charts
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.execution.search import QueryMode, SearchResult, compile_query, search
from warmkernel.execution.selection import Selection
from warmkernel.execution.spill import OutputDropped
from warmkernel.execution.submission import Submission, parse_cell
from warmkernel.idle import IdleClock
from warmkernel.kernel import inspector
from warmkernel.kernel.base import Kernel, KernelInfo, KernelLauncher
from warmkernel.kernel.channel import ForeignCell
from warmkernel.kernel.inspector import Summary, VariableListing
from warmkernel.kernel.launch import RuntimeRoot
from warmkernel.kernel.local import LocalKernel
from warmkernel.notebook.binding import NotebookRun, NotebookView
from warmkernel.notebook.cell_outputs import OutputCollector
from warmkernel.notebook.document import NotebookCell
from warmkernel.notebook.export_files import ExportedDocument, InsertedCells
from warmkernel.replies import refusals
from warmkernel.replies.runs import memory_ceiling_reason, memory_interrupt_reason
from warmkernel.replies.status import environment_notice, kernel_lost_notice, restart_notice
from warmkernel.session.admission import Admission
from warmkernel.session.exports import Exports
from warmkernel.session.journal import ALIVE_EVERY_S, WRITE_THROUGH_AFTER_S, Journal
from warmkernel.session.notebook_side import NotebookSide
from warmkernel.session.notices import Notices
from warmkernel.session.questions import Questions
from warmkernel.session.records import OutputSelection, RecordBook
from warmkernel.session.running import ExecutionTracker
from warmkernel.session.slot import KernelSlot
from warmkernel.settings.declarations import MEMORY_GRACE_S
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionState, ExportFormat, Generation, KernelState, ReadableStream
from warmkernel.workspace import Workspace

log = logging.getLogger(__name__)

_DEATH_DRAIN_S = 0.2
"""IOPub messages a kernel sent just before it died may still be in our socket."""
_MEMORY_SAMPLE_S = 0.5


@dataclass(frozen=True)
class SearchOutcome:
    """A search of an execution's output; `result` is None when that output was dropped."""

    record: ExecutionRecord
    result: SearchResult | None


class Session:
    """One named kernel across its generations (and while stopped), and every execution it ran.

    The kernel may be stopped (`stop`, or never started yet): the records stay readable, and
    the next call that needs a kernel starts a fresh one.
    """

    def __init__(
        self,
        name: str,
        settings: Settings,
        workspace: Workspace,
        root: RuntimeRoot,
        tg: anyio.abc.TaskGroup,
        launcher: KernelLauncher,
        charts: Charts,
        journal: Journal | None = None,
        clock: IdleClock | None = None,
    ):
        self.name = name
        self.settings = settings
        self.workspace = workspace
        self._tg = tg
        self._charts = charts
        self.clock = IdleClock(clock)
        """Held by every call that uses this kernel and by its running cell."""
        self._changed = anyio.Event()
        """Set (and replaced) when an execution starts or ends, the kernel moves, or a notebook is bound."""
        self._counter_unsure = False
        """A cell ended without a reply: IPython's counter may lag, and is set before the next one."""
        self.notices = Notices()
        self._admission = Admission()
        directory = journal.output_directory if journal is not None else root.subdirectory(f"output-{name}")
        self._book = RecordBook(name, settings, directory, journal, self.notices.tell)
        restored = self._book.restored
        if restored:
            self.notices.tell(restart_notice(restored[0].number, restored[-1].number))
        self._slot = KernelSlot(
            launcher,
            tg,
            first_number=self._book.next_number,
            prepare=self._prepare,
            on_ready=self._kernel_ready,
            on_generation=self._new_generation,
            on_move=self._announce,
            generation=Generation(max((record.generation for record in restored), default=0)),
        )
        self._questions = Questions(name, settings, self._slot, self._admission, self.notices)
        self._notebook = NotebookSide(
            name, settings, workspace, self._slot, self._admission, self._questions, tg, self._notebook_bound
        )
        self._exports = Exports(workspace, self._book, self._notebook, self._admission)
        self.on_notebook_change: Callable[[Path], object] | None = None
        """Told the path of each notebook the session binds (the server advertises it)."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        name: str,
        settings: Settings,
        workspace: Workspace,
        root: RuntimeRoot,
        launcher: KernelLauncher,
        charts: Charts,
        journal: Journal | None = None,
        *,
        start: bool = True,
        clock: IdleClock | None = None,
    ) -> AsyncIterator[Session]:
        """A session (its kernel starting at once, in the background, if `start`); torn down on exit.

        `root`, `launcher` and `charts` are the daemon's, shared by its named kernels (`Kernels`), and
        `clock` the daemon's idle clock, which this kernel's calls and cells keep awake. With `journal`
        (opened and closed by the caller), the session continues the journaled records and
        journals its own.
        """
        async with anyio.create_task_group() as tg:
            session = cls(name, settings, workspace, root, tg, launcher, charts, journal, clock)
            if start:
                session.start()
            if journal is not None:
                tg.start_soon(session._keep_running_cell, journal)
            try:
                yield session
            finally:
                with anyio.CancelScope(shield=True):
                    await session._shutdown()
                tg.cancel_scope.cancel()

    # -- the kernel's life --------------------------------------------------------------

    def start(self) -> None:
        """Start a kernel if there is none (a stopped kernel's next use, or after a failed start); it
        boots in the background."""
        self._slot.start()

    @property
    def starting(self) -> bool:
        """A kernel is on its way: none yet, none stopped, and its start has not failed."""
        return self._slot.state is KernelState.STARTING

    @property
    def stopped(self) -> str | None:
        """Why there is no kernel and none starting (`stop_python_kernel`, idle); None while there is."""
        return self._slot.stopped_reason if self._slot.state is KernelState.STOPPED else None

    async def kernel_within(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the kernel to be ready (or its start to fail); False if it is
        still starting then."""
        return await self._slot.ready_within(timeout_s)

    def kernel_info(self) -> KernelInfo:
        return self._slot.info(self._book.next_number())

    def memory_bytes(self) -> int | None:
        """The live kernel's resident memory with every process it started: what
        `--max-kernel-memory` holds it to; None when none is live or it cannot be seen."""
        kernel = self._slot.kernel
        return kernel.memory_bytes() if kernel is not None else None

    async def _prepare(self, kernel: Kernel) -> None:
        """Ready a new kernel for the session's cells: numbering, and the inspection helper."""
        await self._align_counter(kernel)
        installed = await kernel.run_silently(
            inspector.install_code(self.settings.summarizers, self.settings.inspect_sample_rows)
        )
        if installed is not None and installed.status != "ok":
            log.warning(
                "the kernel-side helper did not load (%s: %s); variables cannot be inspected",
                installed.ename,
                installed.evalue,
            )

    async def _align_counter(self, kernel: Kernel, deadline: float = math.inf) -> None:
        """Tracebacks say `Cell In[N]`: make IPython's N match warmkernel's next number; by
        `deadline`, or the kernel is taken not to answer (`kernel_not_responding`)."""
        with anyio.CancelScope(deadline=deadline) as waiting:
            await kernel.run_silently(f"get_ipython().execution_count = {self._book.next_number()}")
        if waiting.cancelled_caught:
            self._slot.unresponsive = "not responding: a request it took went unanswered"
            raise refusals.not_responding(
                self.name, "did not answer a silent request in time (its last cell ended without a reply)"
            )
        self._counter_unsure = False
        self._slot.unresponsive = None

    def _kernel_ready(self, kernel: Kernel) -> None:
        kernel.channel.on_foreign = partial(self._adopt, kernel)
        self._tg.start_soon(self._watch_exit, kernel)
        if self.settings.max_kernel_memory_bytes is not None:
            self._tg.start_soon(self._watch_memory, kernel, self.settings.max_kernel_memory_bytes)
        # Say once which project environment the kernels run in (warmkernel's own needs no word).
        if isinstance(kernel, LocalKernel) and kernel.environment.kind != "server":
            self.notices.tell_environment(environment_notice(kernel.environment.describe()))

    def _new_generation(self, generation: Generation) -> None:
        self._notebook.new_kernel(generation)

    async def _watch_exit(self, kernel: Kernel) -> None:
        await kernel.exited.wait()
        if kernel.killed_on_purpose:
            return
        await anyio.sleep(_DEATH_DRAIN_S)
        kernel.stop()
        reason = kernel.exit_reason()
        await self._slot.replace(
            partial(self._lose, ExecutionState.DIED, reason, f"died ({reason})"), expected=kernel
        )

    async def _watch_memory(self, kernel: Kernel, ceiling: int) -> None:
        """Hold the kernel under its memory ceiling: past it the running cell is interrupted; still
        above it `MEMORY_GRACE_S` later, the kernel is killed and a fresh one started.

        Memory has no event to wait on: it is sampled every `_MEMORY_SAMPLE_S`."""
        above_since: float | None = None
        while not kernel.exited.is_set():
            used = await anyio.to_thread.run_sync(kernel.memory_bytes)
            if used is None or used <= ceiling:
                above_since = None
            elif above_since is None:
                above_since = time.monotonic()
                running = self._admission.running
                if running is not None and running.kernel is kernel:
                    running.interrupt(memory_interrupt_reason(ceiling, used, MEMORY_GRACE_S))
            elif time.monotonic() - above_since >= MEMORY_GRACE_S:
                reason = memory_ceiling_reason(ceiling, used)
                lose = partial(self._lose, ExecutionState.DIED, reason, f"was killed: {reason}")
                await self._slot.replace(lose, expected=kernel)
                return
            await anyio.sleep(_MEMORY_SAMPLE_S)

    def _lose(self, state: ExecutionState, reason: str, what_happened: str, kernel: Kernel | None) -> None:
        """A kernel's namespace is lost by no caller's wish: its running cell ends in `state`, and every
        connection is told once."""
        self._finish_running(state, reason)
        if kernel is not None:
            self.notices.tell(kernel_lost_notice(kernel.generation, what_happened))

    def _end(self, reason: str) -> ExecutionRecord | None:
        """A caller ends the kernel: the running cell, if any, is `killed` for `reason` and returned,
        and the notebook is released."""
        killed = self._finish_running(ExecutionState.KILLED, reason)
        self._notebook.release()
        return killed

    def _finish_running(self, state: ExecutionState, reason: str) -> ExecutionRecord | None:
        running = self._admission.running
        if running is None:
            return None
        running.finish(state, reason=reason)
        return running.record

    async def reset(self) -> ExecutionRecord | None:
        """Kill the kernel and everything it started, and start a fresh one.

        A running execution becomes `killed`; it is returned. Records and numbering stay.
        """
        killed = await self._replace("reset_python killed the kernel", stop=False)
        await self._slot.ready()
        return killed

    async def stop(self, reason: str) -> ExecutionRecord | None:
        """End the kernel and everything it started, without starting another; the records stay.
        `reason` says who stopped it (`a client stopped the kernel`).

        A running execution becomes `killed` and is returned. The next call that needs a kernel
        starts a fresh one (generation + 1), with the numbering going on.
        """
        return await self._replace(reason, stop=True)

    async def _replace(self, reason: str, *, stop: bool) -> ExecutionRecord | None:
        """End the kernel for `reason` and start the next (or, with `stop`, none); the cell it killed."""
        killed: list[ExecutionRecord | None] = [None]

        def end(_: Kernel | None) -> None:
            killed[0] = self._end(reason)

        await self._slot.replace(end, stop=reason if stop else None)
        return killed[0]

    async def _shutdown(self) -> None:
        running = self._admission.running
        if running is not None:
            running.finish(ExecutionState.KILLED, reason="the server shut down")
        await self._slot.kill()

    # -- changes, idleness, notices --------------------------------------------------------

    def _announce(self) -> None:
        """Wake those waiting in `changed` (the console page)."""
        self._changed.set()
        self._changed = anyio.Event()

    async def changed(self) -> None:
        """Return at the next change: an execution started or ended, the kernel moved, a notebook was bound.

        Output is not a change here: a watcher of a running cell reads it at its own pace.
        """
        await self._changed.wait()

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Around a call that uses this kernel: meanwhile, and until its end, the kernel is not idle."""
        with self.clock.held():
            yield

    def idle_s(self) -> float | None:
        """How long the kernel has had no call and no running cell; None while it has one, or is
        stopped (a stopped kernel is not idle)."""
        return None if self.stopped is not None else self.clock.idle_s()

    def tell(self, notice: str) -> None:
        """A one-time message about this kernel for the next reply of every connection that uses it."""
        self.notices.tell(notice)

    def notice_mark(self) -> int:
        """Where a new connection starts reading notices: it sees those no connection has seen yet."""
        return self.notices.mark()

    def notices_since(self, mark: int) -> tuple[list[str], int]:
        """The notices after `mark`, and the mark to read from next time."""
        return self.notices.since(mark)

    @property
    def environment_note(self) -> str | None:
        """Which project environment the kernels run in, once known (said to each MCP client once)."""
        return self.notices.environment

    # -- executions ---------------------------------------------------------------------

    @property
    def running(self) -> ExecutionRecord | None:
        return self._admission.running_record

    @property
    def records(self) -> list[ExecutionRecord]:
        """Every record, oldest first."""
        return self._book.records

    @property
    def ran_cells(self) -> bool:
        """Whether this kernel ran a cell in this process (journaled records of earlier ones aside)."""
        return len(self._book) > len(self._book.restored)

    async def submit(
        self,
        submission: Submission,
        *,
        cell: NotebookCell | None = None,
        client: str = "",
        within_s: float | None = None,
    ) -> ExecutionRecord:
        """Accept a cell and send it to the kernel; `busy` if another cell runs.

        With `cell`, the execution is a run of that cell of the bound notebook: the kernel
        tracks what it reads, and its outputs are collected for the `.ipynb`. `client` names who
        sent it (an MCP client's name, or `cli`), for records and for the busy refusals others get.
        A kernel that does not take the cell within `within_s` (the call's wait; default the
        settings') is `kernel_not_responding`, and no number is given out.
        """
        deadline = anyio.current_time() + (within_s if within_s is not None else self.settings.default_wait_s)
        # A variable inspection in flight ends first (within its budget): the cell is not queued
        # behind it in the kernel, and the inspection's deadline interrupt can never hit the cell.
        async with self._admission.turn_by(deadline, self.name):
            kernel = await self._slot.ready()
            self._admission.admit_cell(of_notebook_run=cell is not None)
            if kernel.process_stopped():
                raise refusals.not_responding(self.name, "is stopped (SIGSTOP); `kill -CONT` continues it")
            if self._counter_unsure:
                await self._align_counter(kernel, deadline)
            number = self._book.next_number()
            begun = await self._notebook.begin_cell(kernel, cell, number) if cell is not None else ""
            # Journaled before it is sent: `journal_unavailable` if it cannot be, and nothing runs.
            record = self._book.open(
                submission.source,
                kernel.generation,
                client=client,
                directives=submission.directives,
                patch_literals=submission.patch_literals,
                cell_id=cell.id if cell is not None else None,
            )
            tracker = self._track(record, kernel)
            inbox: ExecutionTracker | OutputCollector = tracker
            if cell is not None:
                inbox = self._notebook.start_run(cell, record, begun, tracker)
            tracker.msg_id = kernel.channel.execute(submission.runs, inbox, allow_stdin=True)
        self._announce()
        return record

    def _adopt(self, kernel: Kernel, cell: ForeignCell) -> ExecutionTracker | None:
        """A cell another client of the kernel sent (an IDE, `jupyter console --existing`): a
        record of its own, numbered in turn, so the agent sees what the person ran (and IPython's
        counter, which the IDE shows, stays equal to warmkernel's numbers)."""
        if kernel is not self._slot.kernel:
            return None
        who = f"{cell.username or 'jupyter'} (jupyter session {cell.jupyter_session[:8]})"
        record = self._book.open(cell.code, kernel.generation, client=who, adopted=True)
        tracker = self._track(record, kernel, foreign=True)
        self._announce()
        return tracker

    def _track(self, record: ExecutionRecord, kernel: Kernel, *, foreign: bool = False) -> ExecutionTracker:
        """The tracker of a record the kernel runs now; it is the running cell unless one runs already
        (a foreign cell the kernel queues behind ours)."""
        tracker = ExecutionTracker(
            record,
            kernel,
            spawn=self._tg.start_soon,
            on_finish=self._finished,
            foreign=foreign,
            max_output_bytes=self.settings.max_cell_output_bytes,
            charts=self._charts,
        )
        if self._admission.running is None:
            self._admission.running = tracker
            self.clock.hold()
        return tracker

    def _finished(self, tracker: ExecutionTracker) -> None:
        """The execution ended: the next cell may start."""
        self._counter_unsure |= tracker.unanswered
        self._book.finished(tracker.record)
        if self._admission.running is tracker:
            self._admission.running = None
            self.clock.release()
        self._announce()

    async def _keep_running_cell(self, journal: Journal) -> None:
        """While a cell runs, mark the journal alive, and once it has run a while, write its output
        through to the journal as it comes: if the daemon is killed, the record's time runs until
        then and its lines until then stay readable (`Journal.load`). A write that fails (a full
        disk) ends what the output keeps, never the cell (`OutputLog`)."""
        while True:
            running = self._admission.running
            if running is None:
                await self.changed()  # nothing to mark until a cell starts
                continue
            await anyio.sleep(ALIVE_EVERY_S)
            if self._admission.running is not running:
                continue
            if running.record.elapsed() >= WRITE_THROUGH_AFTER_S:
                running.record.output.write_through()
            try:
                journal.alive()
            except OSError:  # the events file's time; logged, and the cell goes on
                log.exception("the journal of execution %d could not be marked alive", running.record.number)

    def select(self, execution: int | None) -> ExecutionRecord:
        """The given execution, else the running one, else the latest."""
        return self._book.select(execution, self.running)

    def select_output(
        self, execution: int | None, stream: ReadableStream | Literal["images"], line_range: str | None
    ) -> OutputSelection:
        """The selected execution and the lines (for `images`, the image ordinals) `line_range` picks;
        None picks them all."""
        return self._book.select_output(self.select(execution), stream, line_range)

    async def search_output(
        self,
        execution: int | None,
        stream: ReadableStream,
        query: str,
        query_mode: QueryMode,
        ignore_case: bool,
        context_before: int,
        context_after: int,
        max_matches: int,
    ) -> SearchOutcome:
        """Search one stream of the selected execution, within `settings.search_timeout_s`.

        The result is None when the output was dropped to stay under the output limit.
        """
        record = self.select(execution)
        compiled = compile_query(query, query_mode, ignore_case)
        if record.output.dropped:
            return SearchOutcome(record, None)
        find = partial(
            search,
            record.output.blocks(stream),
            compiled,
            context_before=context_before,
            context_after=context_after,
            max_matches=max_matches,
            timeout_s=self.settings.search_timeout_s,
        )
        # A worker thread keeps a long search from blocking other tools (regex releases the GIL).
        try:
            return SearchOutcome(record, await anyio.to_thread.run_sync(find))
        except OutputDropped:  # dropped to stay under the output limit while the search ran
            return SearchOutcome(record, None)

    async def wait(
        self,
        record: ExecutionRecord,
        timeout_s: float,
        *,
        silence_s: float | None = None,
        every: tuple[float, Callable[[], Awaitable[None]]] | None = None,
    ) -> WaitEnd:
        """Wait up to `timeout_s` for the record to finish or ask for input, or (with `silence_s`)
        until it has printed nothing for that long, awaiting `every`'s tick meanwhile
        (`ExecutionRecord.wait`). The cell runs on."""
        return await record.wait(timeout_s, silence_s=silence_s, every=every)

    def send_input(self, text: str, execution: int | None) -> ExecutionRecord:
        """Answer the prompt of the execution waiting in `input()`; `not_awaiting_input` otherwise."""
        record = self.select(execution)
        running = self._admission.running
        if running is None or running.record is not record or record.prompt is None:
            raise refusals.not_awaiting(record, execution)
        running.answer(text)
        return record

    def interrupt(self) -> ExecutionRecord | None:
        """Interrupt the running execution (or the one about to start); None when idle.

        A run of notebook cells starts no further cell.
        """
        self._admission.stop_notebook_run()
        running = self._admission.running
        if running is None:
            return None
        running.interrupt()
        return running.record

    # -- exports ---------------------------------------------------------------------------

    def select_many(self, selection: Selection | None) -> list[ExecutionRecord]:
        """The records a selection names, in its order, each once (None: every record, oldest first)."""
        return self._book.select_many(selection)

    async def export_executions(
        self, selection: Selection | None, path: str | None, format: ExportFormat | None
    ) -> ExportedDocument:
        """The executions as a document in the workspace at `path`, or as text when `path` is None."""
        return await self._exports.document(selection, path, format)

    async def executions_to_notebook(
        self, selection: Selection, path: str, after_cell: str | int | None
    ) -> tuple[str, InsertedCells]:
        """Add the executions as code cells of the notebook at `path`; the notebook as shown, and what
        was added."""
        return await self._exports.to_notebook(selection, path, after_cell)

    # -- variables ---------------------------------------------------------------------------

    async def list_variables(self, *, include_imports: bool = False) -> VariableListing:
        """The user's variables: type, size, shape or length, and the execution that bound them."""
        return await self._questions.list(include_imports=include_imports)

    async def inspect_variable(self, name: str) -> Summary:
        """A bounded typed summary of a name or dotted attribute path (nothing else is evaluated)."""
        return await self._questions.inspect(name)

    # -- notebook ----------------------------------------------------------------------------

    async def notebook_status(self, path: str) -> NotebookView:
        """Bind the notebook on first use; every code cell's verdict, and the plan."""
        return await self._notebook.status(path)

    async def run_notebook_cells(
        self, path: str, cells: str | list[str | int], *, stop_on_error: bool, client: str = ""
    ) -> NotebookRun:
        """Start running the chosen cells in notebook order, one execution each; `busy` if one runs."""
        return await self._notebook.run(
            path, cells, stop_on_error=stop_on_error, submit=self._submit_cell, client=client
        )

    async def watch_notebook_file(self, path: str, file: str, cell: str | int) -> tuple[str, str]:
        """Make `cell` depend on `file` (read where no audit hook sees it); its id and the file as shown."""
        return await self._notebook.watch(path, file, cell)

    @property
    def has_notebook(self) -> bool:
        """Whether a notebook was ever bound to this kernel (also one a reset released since)."""
        return self._notebook.binding is not None

    def is_bound_to(self, path: Path) -> bool:
        return self._notebook.holding(path) is not None

    @property
    def bound_notebook(self) -> str | None:
        """The bound notebook's path as the tools take it, unless a reset released it."""
        return self._notebook.bound_notebook

    async def _submit_cell(self, cell: NotebookCell, client: str) -> ExecutionRecord:
        """Run one cell of the bound notebook as the next execution (for the notebook runner)."""
        return await self.submit(parse_cell(cell.source), cell=cell, client=client)

    def _notebook_bound(self, path: Path) -> None:
        if self.on_notebook_change is not None:
            self.on_notebook_change(path)
        self._announce()
