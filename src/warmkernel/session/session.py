"""Session: the one owner of the kernel, the execution records and their numbering.

Both faces (MCP tools and CLI verbs) call these methods; nothing else mutates this state.
Numbers are warmkernel's own: they start at 1 and are never reused, also across resets and
kernel deaths. Records outlive the kernel that ran them; with a `Journal` they outlive the
process too: the session loads them at open, numbering and generations go on after them, and
each new record is journaled when it starts and when it finishes.

Helpers with one job each report back through the callbacks they are built with:
`ExecutionTracker` follows the running cell, `OutputBudget` keeps spilled output under the
limit, and `notebook_runner.run_cells` walks a notebook plan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc

from warmkernel.errors import WarmkernelError
from warmkernel.execution.charts import Charts
from warmkernel.execution.directive import kernel_source, parse_directives
from warmkernel.execution.displays import DisplayLog
from warmkernel.execution.line_range import parse_line_range
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.patch_literal import transform_patch_literals
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.execution.search import QueryMode, SearchResult, compile_query, search
from warmkernel.execution.selection import Selection
from warmkernel.execution.spill import OutputDropped
from warmkernel.execution.transcript import Transcript, transcript
from warmkernel.kernel import inspector
from warmkernel.kernel.base import Kernel, KernelInfo, KernelLauncher
from warmkernel.kernel.channel import ExpressionValue, ForeignCell, Reply
from warmkernel.kernel.inspector import Summary, VariableListing
from warmkernel.kernel.launch import RuntimeRoot
from warmkernel.kernel.local import LocalKernel
from warmkernel.notebook.binding import (
    NotebookBinding,
    NotebookRun,
    NotebookView,
    kernel_stamps_expression,
    locate,
    read_cells,
    read_kernel_stamps,
    shown_path,
    stamp_files,
    watched_file,
)
from warmkernel.notebook.cell_outputs import OutputCollector
from warmkernel.notebook.document import NotebookCell
from warmkernel.notebook.export_files import (
    ExportedDocument,
    InsertedCells,
    format_for,
    insert_cells,
    inside_workspace,
    write_document,
)
from warmkernel.notebook.runner import run_cells
from warmkernel.notebook.staleness import FileStamp, evaluate, select_cell, select_cells
from warmkernel.replies import documents, refusals
from warmkernel.replies.runs import memory_ceiling_reason, memory_interrupt_reason
from warmkernel.replies.status import environment_notice, restart_notice
from warmkernel.session.journal import ALIVE_EVERY_S, WRITE_THROUGH_AFTER_S, Journal
from warmkernel.session.output_budget import OutputBudget
from warmkernel.session.running import ExecutionTracker
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionNumber, ExecutionState, ExportFormat, Generation, ReadableStream
from warmkernel.workspace import Workspace

log = logging.getLogger(__name__)

# IOPub messages a kernel sent just before it died may still be in our socket.
_DEATH_DRAIN_S = 0.2
# The kernel-side helper stops an inspection at its budget; past budget + grace the server
# interrupts the kernel, and past that plus the give-up time stops waiting for it.
_INSPECT_GRACE_S = 1.0
_INSPECT_GIVE_UP_S = 5.0
_MEMORY_GRACE_S = 5.0
"""How long a kernel may stay above its memory ceiling after the interrupt before it is killed."""
_MEMORY_SAMPLE_S = 0.5


@dataclass(frozen=True)
class OutputSelection:
    """What a read of an execution's output selected: lines `lo` to `hi` (0-based, half-open) of
    `stream`, or image ordinals when the stream is `images`."""

    record: ExecutionRecord
    stream: ReadableStream | Literal["images"]
    lo: int
    hi: int


@dataclass(frozen=True)
class SearchOutcome:
    """A search of an execution's output; `result` is None when that output was dropped."""

    record: ExecutionRecord
    result: SearchResult | None


class Session:
    """One named kernel at a time, and every execution it was asked to run.

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
    ):
        self.name = name
        self.settings = settings
        self.workspace = workspace
        self._tg = tg
        self._launcher = launcher
        self._charts = charts
        self._records: dict[ExecutionNumber, ExecutionRecord] = {}
        self._running: ExecutionTracker | None = None
        self._generation = Generation(0)
        self._generation_began = ExecutionNumber(1)
        """The number of the generation's first cell: numbers run on, so it has run the cells from here."""
        self._kernel: Kernel | None = None
        self._start_error: WarmkernelError | None = None
        self._ready = anyio.Event()
        self._ready.set()  # nothing is starting
        self.stopped: str | None = "not started yet"
        """Why there is no kernel and none starting (`stop_python_kernel`, idle); None while there is."""
        self._last_used = time.monotonic()
        """When a call last used this kernel or its last cell ended."""
        self._calls = 0
        """Calls using this kernel right now."""
        self._reset_lock = anyio.Lock()
        self._inspection_lock = anyio.Lock(fast_acquire=True)  # a cell never yields to take it free
        self._ready_since = 0.0
        self._notices: list[str] = []
        """One-time messages (e.g. that the namespace was lost), each shown once to every connection."""
        self._notices_shown = 0
        """Notices before this index reached some connection; later ones wait for the next reply."""
        self._counter_unsure = False
        """A cell ended without a reply: IPython's counter may lag, and is set before the next one."""
        self._changed = anyio.Event()
        """Set (and replaced) when an execution starts or ends, a kernel starts, or a notebook is bound."""
        self.environment_note: str | None = None
        """Which project environment the kernels run in, once known: a one-time notice, and said
        again to each MCP client that comes later (`Connection.with_notices`)."""
        self._journal = journal
        self._budget = OutputBudget(
            journal.output_directory if journal is not None else root.subdirectory(f"output-{name}"),
            threshold_bytes=settings.spill_threshold_bytes,
            limit_bytes=settings.max_output_bytes,
            record_of=self._records.__getitem__,
            on_drop=journal.dropped if journal is not None else None,
        )
        if journal is not None:
            self._restore(journal.load())
        self._notebook: NotebookBinding | None = None
        self._notebook_run: NotebookRun | None = None
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
    ) -> AsyncIterator[Session]:
        """A session (its kernel starting at once, in the background, if `start`); torn down on exit.

        `root`, `launcher` and `charts` are the daemon's, shared by its named kernels (`Kernels`). With
        `journal` (opened and closed by the caller), the session continues the journaled records
        and journals its own.
        """
        async with anyio.create_task_group() as tg:
            session = cls(name, settings, workspace, root, tg, launcher, charts, journal)
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

    def _restore(self, records: list[ExecutionRecord]) -> None:
        """Take over the records an earlier process journaled; the first reply says the kernel is new."""
        if not records:
            return
        self._records.update((record.number, record) for record in records)
        self._budget.adopt(records)
        self._generation = Generation(max(record.generation for record in records))
        self._notices.append(restart_notice(records[0].number, records[-1].number))

    def _next_number(self) -> ExecutionNumber:
        """The number the next accepted cell gets: one past the latest."""
        return ExecutionNumber(next(reversed(self._records), 0) + 1)

    # -- kernel lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start a kernel if there is none: a stopped session's next use, or the next call after a
        failed start (its cause may be fixed since, e.g. ipykernel installed). It boots in the
        background."""
        if self.stopped is not None or (self._start_error is not None and self._ready.is_set()):
            self.stopped = None
            self._begin_kernel_start()

    def _announce(self) -> None:
        """Wake those waiting in `changed` (the console page)."""
        self._changed.set()
        self._changed = anyio.Event()

    async def changed(self) -> None:
        """Return at the next change: an execution started or ended, a kernel started, a notebook was bound.

        Output is not a change here: a watcher of a running cell reads it at its own pace.
        """
        await self._changed.wait()

    def _begin_kernel_start(self) -> None:
        self._announce()
        self._generation = Generation(self._generation + 1)
        self._generation_began = self._next_number()
        if self._notebook is not None:
            self._notebook.forget_kernel(self._generation)
        self._kernel, self._start_error, self._ready = None, None, anyio.Event()
        self._start_began = time.monotonic()
        self._tg.start_soon(self._start_kernel, self._generation, self._ready)

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

    async def _start_kernel(self, generation: Generation, ready: anyio.Event) -> None:
        try:
            kernel = await self._launcher.start(generation)
            try:
                await self._prepare(kernel)
            except BaseException:
                # Also when cancelled (the server shutting down): a kernel no one holds is never left.
                with anyio.CancelScope(shield=True):
                    await self._launcher.retire(kernel)
                raise
        except WarmkernelError as exc:  # its code says what to fix, e.g. python_not_usable
            self._start_error = exc
        except Exception as exc:
            log.exception("kernel start failed")
            self._start_error = WarmkernelError("kernel_start_failed", f"{type(exc).__name__}: {exc}")
        else:
            self._kernel, self._ready_since = kernel, time.time()
            kernel.channel.on_foreign = partial(self._adopt, kernel)
            self._tg.start_soon(self._watch_exit, kernel)
            if self.settings.max_kernel_memory_bytes is not None:
                self._tg.start_soon(self._watch_memory, kernel, self.settings.max_kernel_memory_bytes)
            self._tell_environment(kernel)
        finally:
            ready.set()
            self._announce()

    def _tell_environment(self, kernel: Kernel) -> None:
        """Say once which project environment the kernels run in (warmkernel's own needs no word)."""
        if (
            self.environment_note is None
            and isinstance(kernel, LocalKernel)
            and kernel.environment.kind != "server"
        ):
            self.environment_note = environment_notice(kernel.environment.describe())
            self._notices.append(self.environment_note)

    async def _watch_exit(self, kernel: Kernel) -> None:
        await kernel.exited.wait()
        if kernel.killed_on_purpose:
            return
        await anyio.sleep(_DEATH_DRAIN_S)
        kernel.stop()
        reason = kernel.exit_reason()
        if self._running is not None:
            self._running.finish(ExecutionState.DIED, reason=reason)
        self._notices.append(
            f"note: the kernel (generation {kernel.generation}) died ({reason}); its namespace was lost. "
            f"A fresh kernel (generation {kernel.generation + 1}) was started."
        )
        self._begin_kernel_start()

    async def _watch_memory(self, kernel: Kernel, ceiling: int) -> None:
        """Hold the kernel under its memory ceiling: past it the running cell is interrupted; still
        above it `_MEMORY_GRACE_S` later, the kernel is killed and a fresh one started.

        Memory has no event to wait on: it is sampled every `_MEMORY_SAMPLE_S`."""
        above_since: float | None = None
        while not kernel.exited.is_set():
            used = await anyio.to_thread.run_sync(kernel.memory_bytes)
            if used is None or used <= ceiling:
                above_since = None
            elif above_since is None:
                above_since = time.monotonic()
                if self._running is not None and self._running.kernel is kernel:
                    self._running.interrupt(memory_interrupt_reason(ceiling, used, _MEMORY_GRACE_S))
            elif time.monotonic() - above_since >= _MEMORY_GRACE_S:
                await self._kill_over_ceiling(kernel, memory_ceiling_reason(ceiling, used))
                return
            await anyio.sleep(_MEMORY_SAMPLE_S)

    async def _kill_over_ceiling(self, kernel: Kernel, reason: str) -> None:
        async with self._reset_lock:
            if self._kernel is not kernel:
                return  # a reset or a death replaced it meanwhile
            # A cell sent from now on waits for the fresh kernel, never reaches the dying one.
            pause = self._ready = anyio.Event()
            try:
                await self._launcher.retire(kernel)
                if self._running is not None:
                    self._running.finish(ExecutionState.DIED, reason=reason)
                self._notices.append(
                    f"note: the kernel (generation {kernel.generation}) was killed: {reason}; its "
                    f"namespace was lost. A fresh kernel (generation {kernel.generation + 1}) was started."
                )
                self._begin_kernel_start()
            finally:
                pause.set()

    async def kernel(self) -> Kernel:
        """The current kernel, once it is ready (started now if stopped, or if its last start
        failed); else the error its start failed with."""
        while True:
            self.start()
            ready = self._ready
            if not ready.is_set():  # a ready kernel is returned without a turn of the event loop
                await ready.wait()
            if ready is self._ready and self.stopped is None:  # not replaced or stopped meanwhile
                break
        if self._start_error is not None:
            raise self._start_error
        assert self._kernel is not None
        return self._kernel

    async def kernel_within(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the kernel to be ready (or its start to fail); False if it is
        still starting then."""
        with anyio.move_on_after(timeout_s):
            await self.kernel()
            return True
        return False

    def _starting(self) -> str:
        """How the kernel start goes: the step a remote start waits on, and for how long."""
        step = self._launcher.step
        elapsed = f"{time.monotonic() - self._start_began:.0f} s"
        return f"{step}, {elapsed}" if step else elapsed

    @property
    def starting(self) -> bool:
        """A kernel is on its way: none yet, none stopped, and its start has not failed."""
        return self._kernel is None and self.stopped is None and self._start_error is None

    def memory_bytes(self) -> int | None:
        """The live kernel's resident memory with every process it started: what
        `--max-kernel-memory` holds it to; None when none is live or it cannot be seen."""
        return self._kernel.memory_bytes() if self._kernel is not None and self.stopped is None else None

    def kernel_info(self) -> KernelInfo:
        spares = self._launcher.spares_ready
        if self.stopped is not None:
            return KernelInfo(self._generation, "stopped", self.stopped, spare_kernels_ready=spares)
        if self._start_error is not None:
            return KernelInfo(
                self._generation, "failed", self._start_error.message, spare_kernels_ready=spares
            )
        if self._kernel is None:
            return KernelInfo(
                self._generation, "starting", spare_kernels_ready=spares, starting=self._starting()
            )
        return KernelInfo(
            self._generation,
            "ready",
            place=self._kernel.place(),
            spare_kernels_ready=spares,
            executions=self._next_number() - self._generation_began,
            ready_since=self._ready_since,
        )

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Around a call that uses this kernel: meanwhile, and until its end, the kernel is not idle."""
        self._calls += 1
        try:
            yield
        finally:
            self._calls -= 1
            self._last_used = time.monotonic()

    def idle_s(self) -> float | None:
        """How long the kernel has had no call and no running cell; None while it has one, or is
        stopped (a stopped kernel is not idle)."""
        if self._calls or self._running is not None or self.stopped is not None:
            return None
        return time.monotonic() - self._last_used

    def tell(self, notice: str) -> None:
        """A one-time message about this kernel for the next reply of every connection that uses it."""
        self._notices.append(notice)

    def notice_mark(self) -> int:
        """Where a new connection starts reading notices: it sees those no connection has seen yet."""
        return self._notices_shown

    def notices_since(self, mark: int) -> tuple[list[str], int]:
        """The notices after `mark`, and the mark to read from next time."""
        self._notices_shown = len(self._notices)
        return self._notices[mark:], len(self._notices)

    async def _shutdown(self) -> None:
        if self._running is not None:
            self._running.finish(ExecutionState.KILLED, reason="the server shut down")
        if self._kernel is not None:
            await self._kernel.kill()

    # -- executions ---------------------------------------------------------------------

    @property
    def running(self) -> ExecutionRecord | None:
        return self._running.record if self._running is not None else None

    @property
    def records(self) -> list[ExecutionRecord]:
        """Every record, oldest first."""
        return list(self._records.values())

    async def _align_counter(self, kernel: Kernel) -> None:
        """Tracebacks say `Cell In[N]`: make IPython's N match warmkernel's next number."""
        await kernel.run_silently(f"get_ipython().execution_count = {self._next_number()}")
        self._counter_unsure = False

    async def _keep_running_cell(self, journal: Journal) -> None:
        """While a cell runs, mark the journal alive, and once it has run a while, write its output
        through to the journal as it comes: if the daemon is killed, the record's time runs until
        then and its lines until then stay readable (`Journal.load`)."""
        while True:
            running = self._running
            if running is None:
                await self.changed()  # nothing to mark until a cell starts
                continue
            await anyio.sleep(ALIVE_EVERY_S)
            if self._running is not running:
                continue
            try:
                if running.record.elapsed() >= WRITE_THROUGH_AFTER_S:
                    running.record.output.write_through()
                journal.alive()
            except OSError:  # a full disk, say: logged, and the cell goes on
                log.exception("execution %d could not be written through", running.record.number)

    def _finished(self, tracker: ExecutionTracker) -> None:
        """The running execution ended: the next cell may start."""
        self._counter_unsure |= tracker.unanswered
        if self._journal is not None:
            self._journal.finished(tracker.record)
        self._last_used = time.monotonic()
        if self._running is tracker:
            self._running = None
        self._announce()

    async def submit(
        self, source: str, *, cell: NotebookCell | None = None, client: str = ""
    ) -> ExecutionRecord:
        """Accept a cell and send it to the kernel; `busy` if another cell runs.

        With `cell`, the execution is a run of that cell of the bound notebook: the kernel
        tracks what it reads, and its outputs are collected for the `.ipynb`. `client` names who
        sent it (an MCP client's name, or `cli`), for records and for the busy refusals others get.
        """
        # Directives are read after the patch transform: a patch body may hold an odd
        # number of quotes, which would hide a later directive line from the scanner.
        transformed = transform_patch_literals(source)
        directives = parse_directives(transformed.source)
        # A variable inspection in flight ends first (within its budget): the cell is not queued
        # behind it in the kernel, and the inspection's deadline interrupt can never hit the cell.
        async with self._inspection_lock:
            kernel = await self.kernel()
            if self._notebook_run is not None and (cell is None or self._notebook_run.stop_requested):
                raise refusals.notebook_busy(self._notebook_run, "this cell was not run")
            if self._running is not None:
                raise refusals.busy(self._running.record, "this cell was not run")
            if self._counter_unsure:
                await self._align_counter(kernel)
            number = self._next_number()
            begun = await self._begin_cell(kernel, cell, number) if cell is not None else ""
            record = ExecutionRecord(
                number,
                source,
                kernel.generation,
                directives=directives,
                patch_literals=transformed.converted,
                output=OutputLog(spill := self._budget.spill(number)),
                displays=DisplayLog(spill),
                client=client,
            )
            tracker = ExecutionTracker(
                record,
                kernel,
                spawn=self._tg.start_soon,
                on_finish=self._finished,
                max_output_bytes=self.settings.max_cell_output_bytes,
                charts=self._charts,
            )
            self._records[number] = record
            self._running = tracker
            inbox: ExecutionTracker | OutputCollector = tracker
            if cell is not None:
                record.cell_id = cell.id
                inbox = self._bound().start_run(cell, record, begun, tracker)
            runs = kernel_source(transformed.source)
            tracker.msg_id = kernel.channel.execute(runs, inbox, allow_stdin=True)
            if self._journal is not None:  # while the kernel runs the cell, before any of its output
                self._journal.started(record)
        self._announce()
        return record

    def _adopt(self, kernel: Kernel, cell: ForeignCell) -> ExecutionTracker | None:
        """A cell another client of the kernel sent (an IDE, `jupyter console --existing`): a
        record of its own, numbered in turn, so the agent sees what the person ran (and IPython's
        counter, which the IDE shows, stays equal to warmkernel's numbers)."""
        if kernel is not self._kernel:
            return None
        number = self._next_number()
        spill = self._budget.spill(number)
        who = f"{cell.username or 'jupyter'} (jupyter session {cell.session[:8]})"
        record = ExecutionRecord(
            number,
            cell.code,
            kernel.generation,
            output=OutputLog(spill),
            displays=DisplayLog(spill),
            client=who,
        )
        tracker = ExecutionTracker(
            record,
            kernel,
            spawn=self._tg.start_soon,
            on_finish=self._finished,
            foreign=True,
            charts=self._charts,
        )
        self._records[number] = record
        if self._running is None:
            self._running = tracker
        if self._journal is not None:
            self._journal.started(record)
        self._announce()
        return tracker

    def select(self, execution: int | None) -> ExecutionRecord:
        """The given execution, else the running one, else the latest."""
        if execution is not None:
            record = self._records.get(ExecutionNumber(execution))
            if record is None:
                raise refusals.not_found(execution, self._next_number() - 1, self.name)
            return record
        if self._running is not None:
            return self._running.record
        if self._records:
            return next(reversed(self._records.values()))
        raise refusals.not_found(None, 0, self.name)

    def select_output(
        self, execution: int | None, stream: ReadableStream | Literal["images"], line_range: str | None
    ) -> OutputSelection:
        """The selected execution and the lines (for `images`, the image ordinals) `line_range` picks;
        None picks them all."""
        record = self.select(execution)
        parsed = parse_line_range(line_range)
        if stream == "images":
            lo, hi = parsed.resolve(len(record.displays.images))
            return OutputSelection(record, "images", lo, hi)
        lo, hi = parsed.resolve(record.output.line_count(stream))
        return OutputSelection(record, stream, lo, hi)

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
        running = self._running
        if running is None or running.record is not record or record.prompt is None:
            raise refusals.not_awaiting(record, execution)
        running.answer(text)
        return record

    def interrupt(self) -> ExecutionRecord | None:
        """Interrupt the running execution (or the one about to start); None when idle.

        A run of notebook cells starts no further cell.
        """
        if self._notebook_run is not None:
            self._notebook_run.stop_requested = True
        if self._running is None:
            return None
        self._running.interrupt()
        return self._running.record

    async def reset(self) -> ExecutionRecord | None:
        """Kill the kernel and everything it started, and start a fresh one.

        A running execution becomes `killed`; it is returned. Records and numbering stay.
        """
        async with self._reset_lock:
            await self._ready.wait()
            pause = self._ready = anyio.Event()  # a cell sent meanwhile waits for the fresh kernel
            try:
                killed = await self._end_kernel("reset_python killed the kernel")
                self.stopped = None
                self._begin_kernel_start()
            finally:
                pause.set()
        await self.kernel()
        return killed

    async def stop(self, reason: str) -> ExecutionRecord | None:
        """End the kernel and everything it started, without starting another; the records stay.
        `reason` says who stopped it (`a client stopped the kernel`).

        A running execution becomes `killed` and is returned. The next call that needs a kernel
        starts a fresh one (generation + 1), with the numbering going on.
        """
        async with self._reset_lock:
            await self._ready.wait()
            if self.stopped is not None:
                return None
            pause = self._ready = anyio.Event()  # a cell sent meanwhile starts the next kernel
            try:
                killed = await self._end_kernel(reason)
                self._start_error, self.stopped = None, reason
            finally:
                pause.set()
        return killed

    async def _end_kernel(self, reason: str) -> ExecutionRecord | None:
        """Kill the kernel and everything it started; the running execution, if any, becomes
        `killed` for `reason` and is returned. The caller holds the reset lock and has paused new
        cells, so none reaches the dying kernel."""
        killed = None
        if self._running is not None:
            killed = self._running.record
            self._running.finish(ExecutionState.KILLED, reason=reason)
        if self._kernel is not None:
            await self._launcher.retire(self._kernel)
            self._kernel = None
        if self._notebook is not None:
            self._notebook.released = True
        if self._notebook_run is not None:
            self._notebook_run.stop_requested = True
        return killed

    # -- export ---------------------------------------------------------------------------------

    def select_many(self, selection: Selection | None) -> list[ExecutionRecord]:
        """The records a selection names, in its order, each once (None: every record, oldest first);
        `execution_not_found` names the first number that does not exist."""
        if selection is None:
            if not self._records:
                raise refusals.not_found(None, 0, self.name)
            return self.records
        latest = self._next_number() - 1
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

    async def _transcripts(self, records: list[ExecutionRecord], *, outputs: bool = True) -> list[Transcript]:
        """The records read whole: each one's extent is fixed here, its text read in a worker thread."""
        readers = [transcript(record, outputs=outputs) for record in records]
        return await anyio.to_thread.run_sync(lambda: [read() for read in readers])

    async def export_executions(
        self, selection: Selection | None, path: str | None, format: ExportFormat | None
    ) -> ExportedDocument:
        """The executions as a document in the workspace at `path`, or as text when `path` is None."""
        records = self.select_many(selection)
        target = inside_workspace(self.workspace.path, path) if path is not None else None
        chosen = format or format_for(target)
        transcripts = await self._transcripts(records, outputs=chosen != "py")
        title = f"{self.workspace.path.name}: executions {documents.ranges([t.number for t in transcripts])}"
        text = await anyio.to_thread.run_sync(documents.render, transcripts, chosen, title)
        size = len(text.encode("utf-8"))
        if target is not None:
            size = await anyio.to_thread.run_sync(write_document, target, text)
        return ExportedDocument(
            numbers=tuple(t.number for t in transcripts),
            format=chosen,
            path=shown_path(self.workspace.path, target) if target is not None else None,
            text=None if target is not None else text,
            size=size,
            images=documents.image_count(transcripts),
        )

    async def executions_to_notebook(
        self, selection: Selection, path: str, after_cell: str | int | None
    ) -> tuple[str, InsertedCells]:
        """Add the executions as code cells of the notebook at `path`; the notebook as shown, and what
        was added. A notebook this kernel is bound to keeps its cells' facts; not while its cells run."""
        records = self.select_many(selection)
        try:
            located = locate(self.workspace.path, str(inside_workspace(self.workspace.path, path)))
        except WarmkernelError as exc:
            if exc.code != "notebook_not_found":
                raise
            raise refusals.no_notebook_to_add_to(exc, path, selection) from None
        binding = self._notebook if self._notebook is not None and self._notebook.is_for(located) else None
        if binding is not None and self._notebook_run is not None:
            raise refusals.notebook_busy(self._notebook_run, "no cell was added")
        transcripts = await self._transcripts(records)
        inserted = await anyio.to_thread.run_sync(
            insert_cells, located, partial(documents.new_cells, transcripts), after_cell
        )
        if binding is not None:
            binding.rename_cells(inserted.renamed)
        return shown_path(self.workspace.path, located), inserted

    # -- variable inspection --------------------------------------------------------------

    async def list_variables(self, *, include_imports: bool = False) -> VariableListing:
        """The user's variables: type, size, shape or length, and the execution that bound them."""
        budget_s = self.settings.inspect_timeout_s
        answer, during = await self._ask_helper(
            inspector.list_expression(include_imports, budget_s), "listed"
        )
        listing = inspector.read_listing(answer)
        listing["during_execution"] = during
        return listing

    async def inspect_variable(self, name: str) -> Summary:
        """A bounded typed summary of a name or dotted attribute path (nothing else is evaluated)."""
        expression = inspector.inspect_expression(name, self.settings.inspect_timeout_s)
        answer, during = await self._ask_helper(expression, "inspected")
        summary = inspector.read_summary(answer)
        return summary | {"during_execution": during} if during is not None else summary

    async def _ask_helper(self, expression: str, done: str) -> tuple[ExpressionValue, ExecutionNumber | None]:
        """Evaluate one question to the kernel-side helper, silently, and the execution it ran
        beside: while a cell runs, in a subshell where the kernel has them, else `busy` at once."""
        if self.stopped is not None:
            raise refusals.no_namespace(self.name, self.stopped, done)
        async with self._inspection_lock:
            kernel = await self.kernel()
            if self._running is None:
                return await self._evaluate_silently(kernel, expression, "inspection"), None
            running = self._running.record
            if not kernel.has_subshells:
                raise refusals.busy(
                    running,
                    f"variables cannot be {done} while a cell runs in this kernel (it has no subshells, "
                    "which ipykernel 7 and later have)",
                )
            return await self._evaluate_in_subshell(kernel, expression), running.number

    async def _evaluate_in_subshell(self, kernel: Kernel, expression: str) -> ExpressionValue:
        """Evaluate `expression` beside the running cell, within the same budget as any inspection
        (the helper stops itself; the running cell is never interrupted for it)."""
        budget_s = self.settings.inspect_timeout_s
        give_up_s = budget_s + _INSPECT_GRACE_S + _INSPECT_GIVE_UP_S
        reply = await kernel.run_in_subshell(
            user_expressions={"answer": expression}, give_up_after_s=give_up_s
        )
        if reply is None:
            if kernel.exited.is_set():
                raise WarmkernelError("inspection_failed", "the kernel exited during the inspection")
            raise WarmkernelError(
                "inspection_failed",
                f"the inspection beside the running cell did not end within {give_up_s:g} s (its subshell "
                "may be stuck in native code); it was abandoned, the running cell goes on",
            )
        answer = reply.user_expressions.get("answer")
        if answer is None:
            raise WarmkernelError("inspection_failed", f"the kernel replied {reply.status} without an answer")
        return answer

    async def _evaluate_silently(
        self, kernel: Kernel, expression: str, what: str, code: str = ""
    ) -> ExpressionValue:
        """Run `code`, then evaluate `expression`, leaving no trace; stopped past the inspection budget."""
        budget_s = self.settings.inspect_timeout_s
        reply: Reply | None = None
        with anyio.move_on_after(budget_s + _INSPECT_GRACE_S + _INSPECT_GIVE_UP_S):
            reply = await kernel.run_silently(
                code, user_expressions={"answer": expression}, interrupt_after_s=budget_s + _INSPECT_GRACE_S
            )
        if reply is None:
            if kernel.exited.is_set():
                raise WarmkernelError(
                    "inspection_failed", f"the kernel exited during the {what}; its namespace is gone"
                )
            await self._replace_wedged(kernel)
            raise refusals.unresponsive(budget_s + _INSPECT_GRACE_S + _INSPECT_GIVE_UP_S, kernel.generation)
        answer = reply.user_expressions.get("answer")
        if answer is None:
            raise WarmkernelError("inspection_failed", f"the kernel replied {reply.status} without an answer")
        return answer

    async def _replace_wedged(self, kernel: Kernel) -> None:
        """Kill a kernel that answers no interrupt and start a fresh one: a cell sent into it would
        be numbered and never run. Called with no cell running (inspections hold the kernel)."""
        async with self._reset_lock:
            if self._kernel is not kernel:
                return  # a reset or a death replaced it meanwhile
            await self._launcher.retire(kernel)
            self._notices.append(
                f"note: the kernel (generation {kernel.generation}) answered neither an inspection nor "
                f"an interrupt and was restarted; its namespace was lost. A fresh kernel (generation "
                f"{kernel.generation + 1}) was started."
            )
            self._begin_kernel_start()

    # -- notebook ---------------------------------------------------------------------------------

    async def notebook_status(self, path: str) -> NotebookView:
        """Bind the notebook on first use; every code cell's verdict, and the plan."""
        located = locate(self.workspace.path, path)
        notebook = await anyio.to_thread.run_sync(read_cells, located)
        binding = self._bind(located)
        current = await self._fetch_notebook_facts(binding)
        stamps = await self._stamp_files(*binding.stamp_request())
        running = self._running.record.cell_id if self._running is not None else None
        status = evaluate(notebook.cells, binding.facts(stamps, running))
        here = {cell.id for cell in notebook.cells}  # a cell no longer in the file has nothing to save
        return NotebookView(
            binding.shown, notebook, status, current, {i: o for i, o in binding.unsaved.items() if i in here}
        )

    async def _stamp_files(self, paths: set[str], known: dict[str, FileStamp]) -> dict[str, FileStamp | None]:
        """The files' stamps now: here, or for a kernel on a Jupyter server, inside it (on its
        machine). While a cell runs there, the known stamps stand and the rest wait."""
        if self.settings.jupyter_url is None:
            return await anyio.to_thread.run_sync(stamp_files, paths, known)
        async with self._inspection_lock:
            if self._running is not None or not paths:
                return {path: known[path] for path in paths if path in known}
            kernel = await self.kernel()
            expression = kernel_stamps_expression(paths, known)
            answer = await self._evaluate_silently(kernel, expression, "file stamps")
        return read_kernel_stamps(_notebook_answer(answer))

    async def run_notebook_cells(
        self, path: str, cells: str | list[str | int], *, stop_on_error: bool, client: str = ""
    ) -> NotebookRun:
        """Start running the chosen cells in notebook order, one execution each; `busy` if one runs."""
        view = await self.notebook_status(path)
        chosen, skipped = select_cells(view.status, cells)
        if self._notebook_run is not None:
            raise refusals.notebook_busy(self._notebook_run, "no other cell was run")
        if self._running is not None:
            raise refusals.busy(self._running.record, "no notebook cell was run")
        by_id = {cell.id: cell for cell in view.notebook.cells}
        why = {status.id: ", ".join(status.reasons) for status in view.status.cells}
        run = NotebookRun(
            view.shown,
            tuple(by_id[cell_id] for cell_id in chosen),
            stop_on_error,
            skipped=tuple((cell_id, why[cell_id]) for cell_id in skipped),
        )
        if run.cells:
            self._notebook_run = run
            await self._tg.start(
                partial(
                    run_cells,
                    run,
                    self._bound(),
                    submit=partial(self._submit_cell, client=client),
                    save=self.settings.save_outputs,
                    on_done=self._notebook_run_done,
                )
            )
        else:
            run.done.set()
        return run

    async def watch_notebook_file(self, path: str, file: str, cell: str | int) -> tuple[str, str]:
        """Make `cell` depend on `file` (read where no audit hook sees it); its id and the file as shown."""
        view = await self.notebook_status(path)
        cell_id = select_cell(view.status, cell)
        target = watched_file(self.workspace.path, file)
        self._bound().watch(cell_id, str(target))
        return cell_id, shown_path(self.workspace.path, target)

    @property
    def has_notebook(self) -> bool:
        """Whether a notebook was ever bound to this kernel (also one a reset released since)."""
        return self._notebook is not None

    def is_bound_to(self, path: Path) -> bool:
        return self._notebook is not None and self._notebook.is_for(path)

    def _bind(self, path: Path) -> NotebookBinding:
        shown = shown_path(self.workspace.path, path)
        binding = self._notebook
        if binding is not None and binding.is_for(path):
            binding.released = False
            return binding
        if binding is not None and not binding.released:
            raise refusals.already_bound(self.name, binding.shown, shown)
        self._notebook = NotebookBinding(path, shown, self._generation)
        if self.on_notebook_change is not None:
            self.on_notebook_change(path)
        self._announce()
        return self._notebook

    @property
    def bound_notebook(self) -> str | None:
        """The bound notebook's path as the tools take it, unless a reset released it."""
        binding = self._notebook
        return binding.shown if binding is not None and not binding.released else None

    def _bound(self) -> NotebookBinding:
        assert self._notebook is not None, "notebook cells run only in a bound session"
        return self._notebook

    async def _begin_cell(self, kernel: Kernel, cell: NotebookCell, number: ExecutionNumber) -> str:
        """Tell the kernel-side notebook helper (loaded on first use) that `cell` runs next."""
        code, expression = self._bound().begin_request(cell, number)
        return _notebook_answer(
            await self._evaluate_silently(kernel, expression, "notebook cell start", code)
        )

    async def _fetch_notebook_facts(self, binding: NotebookBinding) -> bool:
        """Bring versions and file reads up to date; False while a cell runs (the last facts stand)."""
        async with self._inspection_lock:
            if self._running is not None:
                return False
            request = binding.facts_request()
            if request is None:
                return True
            expression, numbers = request
            kernel = await self.kernel()
            answer = await self._evaluate_silently(kernel, expression, "notebook facts")
            binding.absorb(_notebook_answer(answer), numbers)
        return True

    async def _submit_cell(self, cell: NotebookCell, *, client: str) -> ExecutionRecord:
        """Run one cell of the bound notebook as the next execution (for the notebook runner)."""
        return await self.submit(cell.source, cell=cell, client=client)

    def _notebook_run_done(self) -> None:
        """The notebook run starts no further cell: other cells may run again."""
        self._notebook_run = None


def _notebook_answer(value: ExpressionValue) -> str:
    if value.status != "ok":
        raise WarmkernelError(
            "internal_error", f"the kernel-side notebook helper raised {value.ename}: {value.evalue}"
        )
    return value.text
