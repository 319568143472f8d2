"""Session: the one owner of the kernel, the execution records and their numbering.

Both faces (MCP tools and CLI verbs) call these methods; nothing else mutates this state.
Numbers are warmkernel's own: they start at 1 per server process and are never reused,
also across resets and kernel deaths. Records outlive the kernel that ran them.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from warmkernel.config import Settings
from warmkernel.errors import WarmkernelError
from warmkernel.execution.directive import parse_directives
from warmkernel.execution.displays import DisplayLog
from warmkernel.execution.output_log import OutputLog, Spill
from warmkernel.execution.patch_literal import transform_patch_literals
from warmkernel.execution.record import ExecutionRecord, InputPrompt, WaitEnd
from warmkernel.kernel import helper
from warmkernel.kernel.base import Kernel, KernelLauncher, KernelPlace
from warmkernel.kernel.channel import (
    ClearOutput,
    Display,
    Error,
    Event,
    ExecuteInput,
    ExpressionValue,
    InputRequest,
    Reply,
    Result,
    Status,
    Stream,
)
from warmkernel.kernel.helper import Summary, VariableListing
from warmkernel.kernel.launch import RuntimeRoot
from warmkernel.kernel.local import LocalLauncher
from warmkernel.kernel.remote import RemoteLauncher, check_jupyter_url
from warmkernel.kernel.spares import SpareLauncher
from warmkernel.notebook.binding import (
    NotebookBinding,
    NotebookRun,
    NotebookView,
    locate,
    read_cells,
    save_outputs,
    shown_path,
    stamp_files,
    watched_file,
)
from warmkernel.notebook.cell_outputs import OutputCollector
from warmkernel.notebook.document import CellOutputs, NotebookCell
from warmkernel.notebook.staleness import evaluate, select_cells
from warmkernel.types import ExecutionNumber, ExecutionState, Generation, MsgId
from warmkernel.workspace import Workspace

log = logging.getLogger(__name__)

# IOPub messages a kernel sent just before it died may still be in our socket.
_DEATH_DRAIN_S = 0.2
# IOPub and shell are separate sockets: a reply may trail the idle status a little. A request
# whose handler was cut short by an interrupt publishes idle but never replies at all.
_REPLY_AFTER_IDLE_S = 2.0
# The kernel flushes stdout before it asks for input, but that output travels on IOPub and the
# question on stdin: give the output a moment to land, so a reply shows it above the prompt.
_INPUT_SETTLE_S = 0.05
# Outputs of notebook cells are written into the .ipynb at most this often while a run goes on.
_SAVE_EVERY_S = 1.0
# The kernel-side helper stops an inspection at its budget; past budget + grace the server
# interrupts the kernel, and past that plus the give-up time stops waiting for it.
_INSPECT_GRACE_S = 1.0
_INSPECT_GIVE_UP_S = 5.0


@dataclass(frozen=True)
class KernelInfo:
    """What python_status reports about the current kernel."""

    generation: Generation
    state: str
    """`starting`, `ready` or `failed`."""
    error: str = ""
    place: KernelPlace = field(default_factory=KernelPlace)
    spare_kernels_ready: int | None = None
    """Spare kernels started and waiting for a reset; None when the session keeps none."""


class _ExecutionTracker:
    """The inbox of one execute request: turns kernel events into the record's output and state."""

    def __init__(self, session: Session, record: ExecutionRecord, kernel: Kernel) -> None:
        self.session = session
        self.record = record
        self.kernel = kernel
        self.msg_id = MsgId("")
        self.started = False
        self.interrupt_requested = False
        self.interrupts = 0
        self.reply: Reply | None = None
        self.idle = False

    def deliver(self, event: Event) -> None:
        record = self.record
        if record.state.finished:
            return
        match event:
            case Stream(name=name, text=text):
                record.output_arrived()
                record.output.append(name, text)
            case Result(data=data):
                record.output_arrived()
                label = f"Out[{record.number}]: "
                record.displays.show(record.output, data, now=record.last_output, label=label)
            case Display(data=data, update=update, display_id=display_id):
                record.output_arrived()
                record.displays.show(
                    record.output, data, now=record.last_output, display_id=display_id, update=update
                )
            case Error(ename=ename, evalue=evalue, traceback=traceback):
                record.output_arrived()
                record.error_name, record.error_value = ename, evalue
                record.output.append("traceback", _line("\n".join(traceback)))
            case ClearOutput(wait=wait):
                record.displays.clear(record.output, wait=wait)
            case InputRequest(prompt=prompt, password=password):
                self.session._spawn(partial(self._ask_input, InputPrompt(prompt, password), self.interrupts))
            case ExecuteInput():
                self.started = True
                if self.interrupt_requested:
                    self.kernel.interrupt()
            case Status(state="idle"):
                self.idle = True
                if self.reply is None:
                    self.session._spawn(self._finish_without_reply)
            case Reply() as reply:
                self.reply = reply
            case Status():
                pass
        if self.reply is not None and self.idle:
            self.finish(_state_of(self.reply, self.interrupt_requested))

    async def _ask_input(self, prompt: InputPrompt, interrupts: int) -> None:
        await anyio.sleep(_INPUT_SETTLE_S)
        # An interrupt sent meanwhile ends input() before anyone could answer it.
        if self.record.state is ExecutionState.RUNNING and self.interrupts == interrupts:
            self.record.ask_input(prompt)

    async def _finish_without_reply(self) -> None:
        await anyio.sleep(_REPLY_AFTER_IDLE_S)
        if not self.record.state.finished and self.reply is None:
            state = ExecutionState.INTERRUPTED if self.interrupt_requested else ExecutionState.ERROR
            self.finish(state, reason="the kernel went idle without replying")

    def interrupt(self) -> None:
        """Interrupt now if the code is running, else as soon as it starts.

        ipykernel ignores SIGINT between requests, so a signal sent before the kernel
        picked the cell up would be lost.
        """
        self.interrupt_requested = True
        self.interrupts += 1
        if self.record.state is ExecutionState.AWAITING_INPUT:
            self._end_prompt("")  # SIGINT ends input() with KeyboardInterrupt
        if self.started:
            self.kernel.interrupt()

    def answer(self, text: str) -> None:
        """Send the answer to the pending prompt; the transcript shows it unless it is a password."""
        self._end_prompt(text)
        self.kernel.channel.input(text)

    def _end_prompt(self, answer: str) -> None:
        """Write the prompt line as a terminal would show it (a password is never written)."""
        prompt = self.record.input_answered()
        self.record.output_arrived()
        self.record.output.append("stdout", prompt.text + ("" if prompt.password else answer) + "\n")

    def finish(self, state: ExecutionState, reason: str = "") -> None:
        self.kernel.channel.forget(self.msg_id)
        self.record.finish(state, reason=reason)
        self.session._running = None


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _state_of(reply: Reply, interrupt_requested: bool) -> ExecutionState:
    if reply.status == "ok":
        return ExecutionState.COMPLETED
    if reply.ename == "KeyboardInterrupt" or reply.status == "aborted" or interrupt_requested:
        return ExecutionState.INTERRUPTED
    return ExecutionState.ERROR


def _launcher(
    settings: Settings, workspace: Workspace, root: RuntimeRoot, tg: anyio.abc.TaskGroup
) -> KernelLauncher:
    """Where this session's kernels run, as the settings ask."""
    if settings.jupyter_url is not None:
        return RemoteLauncher(tg, settings)
    if settings.spare_kernels > 0:
        return SpareLauncher(tg, root, settings.python, workspace.path, settings.spare_kernels)
    return LocalLauncher(tg, root, settings.python, workspace.path)


class Session:
    """One kernel per session, and every execution it was asked to run."""

    def __init__(
        self,
        settings: Settings,
        workspace: Workspace,
        root: RuntimeRoot,
        tg: anyio.abc.TaskGroup,
        launcher: KernelLauncher,
    ):
        self.settings = settings
        self.workspace = workspace
        self._root = root
        self._tg = tg
        self._launcher = launcher
        self._records: dict[ExecutionNumber, ExecutionRecord] = {}
        self._running: _ExecutionTracker | None = None
        self._generation = Generation(0)
        self._kernel: Kernel | None = None
        self._start_error: WarmkernelError | None = None
        self._ready = anyio.Event()
        self._reset_lock = anyio.Lock()
        self._inspection_lock = anyio.Lock()
        self._notice: str | None = None
        self._spill_directory = root.subdirectory("output")
        self._output_bytes = 0
        """Bytes of every execution's spilled output, held under `settings.max_output_bytes`."""
        self._on_disk: deque[ExecutionRecord] = deque()
        """Records with spilled output, oldest first: the order their output is dropped in."""
        self._notebook: NotebookBinding | None = None
        self._notebook_run: NotebookRun | None = None
        self.on_notebook_change: Callable[[Path], object] | None = None
        """Told the path of each notebook the session binds (the server advertises it)."""

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: Settings, workspace: Workspace) -> AsyncIterator[Session]:
        """A session whose first kernel starts at once, in the background; torn down on exit."""
        if settings.jupyter_url is not None:
            check_jupyter_url(settings.jupyter_url)  # before any task starts: a plain error
        root = RuntimeRoot()
        try:
            async with anyio.create_task_group() as tg:
                session = cls(settings, workspace, root, tg, _launcher(settings, workspace, root, tg))
                session._begin_kernel_start()
                try:
                    yield session
                finally:
                    with anyio.CancelScope(shield=True):
                        await session._shutdown()
                    tg.cancel_scope.cancel()
        finally:
            root.remove()

    # -- kernel lifecycle ---------------------------------------------------------------

    def _spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._tg.start_soon(fn)

    def _begin_kernel_start(self) -> None:
        self._generation = Generation(self._generation + 1)
        if self._notebook is not None:
            self._notebook.forget_kernel(self._generation)
        self._kernel, self._start_error, self._ready = None, None, anyio.Event()
        self._tg.start_soon(self._start_kernel, self._generation, self._ready)

    async def _start_kernel(self, generation: Generation, ready: anyio.Event) -> None:
        try:
            kernel = await self._launcher.start(generation)
            # Tracebacks say `Cell In[N]`: make IPython's N match warmkernel's next number.
            await kernel.run_silently(f"get_ipython().execution_count = {len(self._records) + 1}")
            installed = await kernel.run_silently(helper.install_code(self.settings.summarizers))
            if installed is not None and installed.status != "ok":
                log.warning(
                    "the kernel-side helper did not load (%s: %s); variables cannot be inspected",
                    installed.ename,
                    installed.evalue,
                )
        except WarmkernelError as exc:
            self._start_error = WarmkernelError("kernel_start_failed", exc.message)
        except Exception as exc:
            log.exception("kernel start failed")
            self._start_error = WarmkernelError("kernel_start_failed", f"{type(exc).__name__}: {exc}")
        else:
            self._kernel = kernel
            self._tg.start_soon(self._watch_exit, kernel)
        finally:
            ready.set()

    async def _watch_exit(self, kernel: Kernel) -> None:
        await kernel.exited.wait()
        if kernel.killed_on_purpose:
            return
        await anyio.sleep(_DEATH_DRAIN_S)
        kernel.stop()
        reason = kernel.exit_reason()
        if self._running is not None:
            self._running.finish(ExecutionState.DIED, reason=reason)
        self._notice = (
            f"note: the kernel (generation {kernel.generation}) died ({reason}); its namespace was lost. "
            f"A fresh kernel (generation {kernel.generation + 1}) was started."
        )
        self._begin_kernel_start()

    async def kernel(self) -> Kernel:
        """The current kernel, once it is ready; `kernel_start_failed` if it could not start."""
        while True:
            ready = self._ready
            await ready.wait()
            if ready is self._ready:  # not replaced by a restart meanwhile
                break
        if self._start_error is not None:
            raise self._start_error
        assert self._kernel is not None
        return self._kernel

    def kernel_info(self) -> KernelInfo:
        spares = self._launcher.ready if isinstance(self._launcher, SpareLauncher) else None
        if self._start_error is not None:
            return KernelInfo(
                self._generation, "failed", self._start_error.message, spare_kernels_ready=spares
            )
        if self._kernel is None:
            return KernelInfo(self._generation, "starting", spare_kernels_ready=spares)
        return KernelInfo(self._generation, "ready", place=self._kernel.place(), spare_kernels_ready=spares)

    def take_notice(self) -> str | None:
        """A one-time message for the next reply (e.g. that the namespace was lost)."""
        notice, self._notice = self._notice, None
        return notice

    async def _shutdown(self) -> None:
        if self._running is not None:
            self._running.finish(ExecutionState.KILLED, reason="the server shut down")
        if self._kernel is not None:
            await self._kernel.kill()
        await self._launcher.aclose()

    # -- executions ---------------------------------------------------------------------

    @property
    def running(self) -> ExecutionRecord | None:
        return self._running.record if self._running is not None else None

    @property
    def records(self) -> list[ExecutionRecord]:
        """Every record, oldest first."""
        return list(self._records.values())

    async def submit(self, source: str, *, cell: NotebookCell | None = None) -> ExecutionRecord:
        """Accept a cell and send it to the kernel; `busy` if another cell runs.

        With `cell`, the execution is a run of that cell of the bound notebook: the kernel
        tracks what it reads, and its outputs are collected for the `.ipynb`.
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
                raise _notebook_busy(self._notebook_run, "this cell was not run")
            if self._running is not None:
                raise _busy(self._running.record, "this cell was not run")
            number = ExecutionNumber(len(self._records) + 1)
            begun = await self._begin_cell(kernel, cell, number) if cell is not None else ""
            record = ExecutionRecord(
                number,
                source,
                kernel.generation,
                directives=directives,
                patch_literals=transformed.converted,
                output=OutputLog(spill := self._spill(number)),
                displays=DisplayLog(spill),
            )
            tracker = _ExecutionTracker(self, record, kernel)
            self._records[number] = record
            self._running = tracker
            inbox: _ExecutionTracker | OutputCollector = tracker
            if cell is not None:
                record.cell_id = cell.id
                inbox = self._bound().start_run(cell, record, begun, tracker)
            tracker.msg_id = kernel.channel.execute(transformed.source, inbox, allow_stdin=True)
        return record

    def _spill(self, number: ExecutionNumber) -> Spill:
        """Where an execution's output and images go past the threshold, counted against the limit."""
        return Spill(
            self._spill_directory, self.settings.spill_threshold_bytes, partial(self._count_spilled, number)
        )

    def _count_spilled(self, writer: ExecutionNumber, written: int) -> None:
        """Keep spilled output under the limit by dropping the oldest finished executions' output.

        The writer's own output is never dropped here: it is running, or finishing right now.
        """
        if not self._on_disk or self._on_disk[-1].number != writer:
            self._on_disk.append(self._records[writer])
        self._output_bytes += written
        while self._output_bytes > self.settings.max_output_bytes and self._on_disk[0].number != writer:
            oldest = self._on_disk.popleft()
            self._output_bytes -= oldest.output.drop() + oldest.displays.drop()
            log.info("dropped the output of execution %d to stay under the output limit", oldest.number)

    def select(self, execution: int | None) -> ExecutionRecord:
        """The given execution, else the running one, else the latest."""
        if execution is not None:
            record = self._records.get(ExecutionNumber(execution))
            if record is None:
                raise WarmkernelError("execution_not_found", _not_found(execution, len(self._records)))
            return record
        if self._running is not None:
            return self._running.record
        if self._records:
            return next(reversed(self._records.values()))
        raise WarmkernelError(
            "execution_not_found", "no execution exists yet; run a cell with run_python first"
        )

    async def wait(
        self, record: ExecutionRecord, timeout_s: float, *, silence_s: float | None = None
    ) -> WaitEnd:
        """Wait up to `timeout_s` for the record to finish or ask for input, or (with `silence_s`)
        until it has printed nothing for that long. The cell runs on."""
        return await record.wait(timeout_s, silence_s=silence_s)

    def send_input(self, text: str, execution: int | None) -> ExecutionRecord:
        """Answer the prompt of the execution waiting in `input()`; `not_awaiting_input` otherwise."""
        record = self.select(execution)
        running = self._running
        if running is None or running.record is not record or record.prompt is None:
            raise WarmkernelError("not_awaiting_input", _not_awaiting(record, execution))
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
            killed = None
            if self._running is not None:
                killed = self._running.record
                self._running.finish(ExecutionState.KILLED, reason="reset_python killed the kernel")
            if self._kernel is not None:
                await self._launcher.retire(self._kernel)
            self._begin_kernel_start()
            if self._notebook is not None:
                self._notebook.released = True
            if self._notebook_run is not None:
                self._notebook_run.stop_requested = True
        await self.kernel()
        return killed

    # -- variable inspection --------------------------------------------------------------

    async def list_variables(self, *, include_modules: bool = False) -> VariableListing:
        """The user's variables: type, size, shape or length, and the execution that bound them."""
        budget_s = self.settings.inspect_timeout_s
        answer = await self._ask_helper(helper.list_expression(include_modules, budget_s), "listed")
        return helper.read_listing(answer)

    async def inspect_variable(self, name: str) -> Summary:
        """A bounded typed summary of a name or dotted attribute path (nothing else is evaluated)."""
        expression = helper.inspect_expression(name, self.settings.inspect_timeout_s)
        return helper.read_summary(await self._ask_helper(expression, "inspected"))

    async def _ask_helper(self, expression: str, done: str) -> ExpressionValue:
        """Evaluate one question to the kernel-side helper, silently; `busy` at once while a cell runs."""
        async with self._inspection_lock:
            kernel = await self.kernel()
            if self._running is not None:
                raise _busy(self._running.record, f"variables cannot be {done} while a cell runs")
            return await self._evaluate_silently(kernel, expression, "inspection")

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
            raise WarmkernelError(
                "inspection_failed",
                f"the kernel did not answer within {budget_s + _INSPECT_GRACE_S + _INSPECT_GIVE_UP_S:.0f} s, "
                "even after an interrupt; it may be stuck in native code; reset_python() starts a fresh one",
            )
        answer = reply.user_expressions.get("answer")
        if answer is None:
            raise WarmkernelError("inspection_failed", f"the kernel replied {reply.status} without an answer")
        return answer

    # -- notebook ---------------------------------------------------------------------------------

    async def notebook_status(self, path: str) -> NotebookView:
        """Bind the notebook on first use; every code cell's verdict, and the plan."""
        located = locate(self.workspace.path, path)
        notebook = await anyio.to_thread.run_sync(read_cells, located)
        binding = self._bind(located)
        current = await self._fetch_notebook_facts(binding)
        paths, known = binding.stamp_request()
        stamps = await anyio.to_thread.run_sync(stamp_files, paths, known)
        running = self._running.record.cell_id if self._running is not None else None
        status = evaluate(notebook.cells, binding.facts(stamps, running))
        return NotebookView(binding.shown, notebook, status, current, dict(binding.unsaved))

    async def run_notebook_cells(
        self, path: str, cells: str | list[str | int], *, stop_on_error: bool
    ) -> NotebookRun:
        """Start running the chosen cells in notebook order, one execution each; `busy` if one runs."""
        view = await self.notebook_status(path)
        chosen = select_cells(view.status, cells)
        if self._notebook_run is not None:
            raise _notebook_busy(self._notebook_run, "no other cell was run")
        if self._running is not None:
            raise _busy(self._running.record, "no notebook cell was run")
        by_id = {cell.id: cell for cell in view.notebook.cells}
        run = NotebookRun(view.shown, tuple(by_id[cell_id] for cell_id in chosen), stop_on_error)
        if run.cells:
            self._notebook_run = run
            await self._tg.start(self._run_cells, run)
        else:
            run.done.set()
        return run

    async def watch_notebook_file(self, path: str, file: str, cell: str | int) -> tuple[str, str]:
        """Make `cell` depend on `file` (read where no audit hook sees it); its id and the file as shown."""
        view = await self.notebook_status(path)
        (cell_id,) = select_cells(view.status, [cell])
        target = watched_file(self.workspace.path, file)
        self._bound().watch(cell_id, str(target))
        return cell_id, shown_path(self.workspace.path, target)

    def _bind(self, path: Path) -> NotebookBinding:
        shown = shown_path(self.workspace.path, path)
        binding = self._notebook
        if binding is not None and binding.is_for(path):
            binding.released = False
            return binding
        if binding is not None and not binding.released:
            raise WarmkernelError(
                "notebook_already_bound",
                f"this session is bound to {binding.shown}; a session serves one notebook. "
                f"reset_python() first to bind {shown}, or use another session",
            )
        self._notebook = NotebookBinding(path, shown, self._generation)
        if self.on_notebook_change is not None:
            self.on_notebook_change(path)
        return self._notebook

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

    async def _run_cells(
        self, run: NotebookRun, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the cells one by one; reports started once the first one is accepted (or failed)."""
        binding = self._bound()
        started = False
        next_save = anyio.current_time() + _SAVE_EVERY_S
        try:
            for cell in run.cells:
                if run.stop_requested:
                    break
                try:
                    record = await self.submit(cell.source, cell=cell)
                except WarmkernelError as exc:
                    if not run.stop_requested:  # an interrupt or a reset came while it was submitted
                        run.failure = exc
                    break
                run.current = (cell, record)
                if not started:
                    task_status.started()
                    started = True
                await record.done.wait()
                outputs = binding.finish_run(record)
                run.results.append((cell, record))
                run.current = None
                if not self.settings.save_outputs:
                    run.saves[cell.id] = ("not_saved", "")
                else:
                    run.to_save[cell.id] = CellOutputs(cell.source, record.number, outputs)
                    if anyio.current_time() >= next_save:
                        await self._save_outputs(run, binding)
                        next_save = anyio.current_time() + _SAVE_EVERY_S
                if record.state is not ExecutionState.COMPLETED and (
                    run.stop_on_error or record.state is not ExecutionState.ERROR
                ):
                    break
        finally:
            with anyio.CancelScope(shield=True):
                await self._save_outputs(run, binding)
            self._notebook_run = None
            run.done.set()
            if not started:
                task_status.started()

    async def _save_outputs(self, run: NotebookRun, binding: NotebookBinding) -> None:
        batch, run.to_save = run.to_save, {}
        if batch:
            saves = await anyio.to_thread.run_sync(save_outputs, binding.path, batch)
            run.saves.update(saves)
            binding.record_saves(saves)


def _busy(running: ExecutionRecord, consequence: str) -> WarmkernelError:
    number = running.number
    if running.state is ExecutionState.AWAITING_INPUT:
        return WarmkernelError(
            "busy",
            f"execution {number} is waiting for input; {consequence}. Answer it with "
            f'send_python_input(text="...", execution={number}), or interrupt_python() to stop it.',
        )
    return WarmkernelError(
        "busy",
        f"execution {number} is still running; {consequence}. "
        f"Call wait_python(execution={number}) to wait for it, or interrupt_python() to stop it.",
    )


def _not_awaiting(record: ExecutionRecord, execution: int | None) -> str:
    if execution is None and record.state.finished:
        return (
            f"no execution is waiting for input (the latest, {record.number}, is {record.state.value}); "
            "send_python_input answers a cell whose reply shows a prompt"
        )
    if record.state is ExecutionState.RUNNING:
        return (
            f"execution {record.number} is running, not waiting for input; "
            f"wait_python(execution={record.number}) replies as soon as it asks"
        )
    return f"execution {record.number} is {record.state.value}, not waiting for input"


def _notebook_busy(run: NotebookRun, consequence: str) -> WarmkernelError:
    running = (
        f"execution {run.current[1].number} (cell {run.current[0].id})" if run.current else "between cells"
    )
    return WarmkernelError(
        "busy",
        f"run_notebook_cells is running cells of {run.shown} ({len(run.results)} of {len(run.cells)} done; "
        f"now {running}); {consequence}. Call wait_python() to wait for the running cell, "
        f'notebook_status(path="{run.shown}") to follow the run, or interrupt_python() to stop it.',
    )


def _notebook_answer(value: ExpressionValue) -> str:
    if value.status != "ok":
        raise WarmkernelError(
            "internal_error", f"the kernel-side notebook helper raised {value.ename}: {value.evalue}"
        )
    return value.text


def _not_found(execution: int, count: int) -> str:
    if count == 0:
        return f"execution {execution} does not exist; no execution exists yet"
    return f"execution {execution} does not exist; executions 1-{count} exist"
