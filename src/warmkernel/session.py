"""Session: the one owner of the kernel, the execution records and their numbering.

Both faces (MCP tools and CLI verbs) call these methods; nothing else mutates this state.
Numbers are warmkernel's own: they start at 1 per server process and are never reused,
also across resets and kernel deaths. Records outlive the kernel that ran them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from warmkernel.config import Settings
from warmkernel.errors import WarmkernelError
from warmkernel.execution.directive import parse_directives
from warmkernel.execution.mime import bundle_text
from warmkernel.execution.patch_literal import transform_patch_literals
from warmkernel.execution.record import ExecutionRecord
from warmkernel.kernel.channel import (
    ClearOutput,
    Display,
    Error,
    Event,
    ExecuteInput,
    Reply,
    Result,
    Status,
    Stream,
)
from warmkernel.kernel.launch import RuntimeRoot, check_interpreter
from warmkernel.kernel.local import LocalKernel
from warmkernel.types import ExecutionNumber, ExecutionState, Generation, MsgId
from warmkernel.workspace import Workspace

log = logging.getLogger(__name__)

# IOPub messages a kernel sent just before it died may still be in our socket.
_DEATH_DRAIN_S = 0.2
# IOPub and shell are separate sockets: a reply may trail the idle status a little. A request
# whose handler was cut short by an interrupt publishes idle but never replies at all.
_REPLY_AFTER_IDLE_S = 2.0


@dataclass(frozen=True)
class KernelInfo:
    """What python_status reports about the current kernel."""

    generation: Generation
    pid: int | None
    state: str
    """`starting`, `ready` or `failed`."""
    error: str = ""


class _ExecutionTracker:
    """The inbox of one execute request: turns kernel events into the record's output and state."""

    def __init__(self, session: Session, record: ExecutionRecord, kernel: LocalKernel) -> None:
        self.session = session
        self.record = record
        self.kernel = kernel
        self.msg_id = MsgId("")
        self.started = False
        self.interrupt_requested = False
        self.reply: Reply | None = None
        self.idle = False

    def deliver(self, event: Event) -> None:
        record = self.record
        if record.state.finished:
            return
        match event:
            case Stream(name=name, text=text):
                record.output.append(name, text)
            case Result(data=data):
                record.output.append("result", f"Out[{record.number}]: {_line(bundle_text(data))}")
            case Display(data=data):
                record.output.append("result", _line(bundle_text(data)))
            case Error(ename=ename, evalue=evalue, traceback=traceback):
                record.error_name, record.error_value = ename, evalue
                record.output.append("traceback", _line("\n".join(traceback)))
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
            case ClearOutput() | Status():
                pass
        if self.reply is not None and self.idle:
            self.finish(_state_of(self.reply, self.interrupt_requested))

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
        if self.started:
            self.kernel.interrupt()

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


class Session:
    """One kernel per session, and every execution it was asked to run."""

    def __init__(self, settings: Settings, workspace: Workspace, root: RuntimeRoot, tg: anyio.abc.TaskGroup):
        self.settings = settings
        self.workspace = workspace
        self._root = root
        self._tg = tg
        self._records: dict[ExecutionNumber, ExecutionRecord] = {}
        self._running: _ExecutionTracker | None = None
        self._generation = Generation(0)
        self._kernel: LocalKernel | None = None
        self._start_error: WarmkernelError | None = None
        self._ready = anyio.Event()
        self._reset_lock = anyio.Lock()
        self._notice: str | None = None

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: Settings, workspace: Workspace) -> AsyncIterator[Session]:
        """A session whose first kernel starts at once, in the background; torn down on exit."""
        root = RuntimeRoot()
        try:
            async with anyio.create_task_group() as tg:
                session = cls(settings, workspace, root, tg)
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
        self._kernel, self._start_error, self._ready = None, None, anyio.Event()
        self._tg.start_soon(self._start_kernel, self._generation, self._ready)

    async def _start_kernel(self, generation: Generation, ready: anyio.Event) -> None:
        try:
            python = self.settings.python
            if python != sys.executable:
                await anyio.to_thread.run_sync(check_interpreter, python)
            kernel = await LocalKernel.start(self._tg, self._root, python, self.workspace.path, generation)
            # Tracebacks say `Cell In[N]`: make IPython's N match warmkernel's next number.
            await kernel.run_silently(f"get_ipython().execution_count = {len(self._records) + 1}")
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

    async def _watch_exit(self, kernel: LocalKernel) -> None:
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

    async def kernel(self) -> LocalKernel:
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
        if self._start_error is not None:
            return KernelInfo(self._generation, None, "failed", self._start_error.message)
        if self._kernel is None:
            return KernelInfo(self._generation, None, "starting")
        return KernelInfo(self._generation, self._kernel.pid, "ready")

    def take_notice(self) -> str | None:
        """A one-time message for the next reply (e.g. that the namespace was lost)."""
        notice, self._notice = self._notice, None
        return notice

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

    async def submit(self, source: str) -> ExecutionRecord:
        """Accept a cell and send it to the kernel; `busy` if another cell runs."""
        # Directives are read after the patch transform: a patch body may hold an odd
        # number of quotes, which would hide a later directive line from the scanner.
        transformed = transform_patch_literals(source)
        directives = parse_directives(transformed.source)
        kernel = await self.kernel()
        if self._running is not None:
            number = self._running.record.number
            raise WarmkernelError(
                "busy",
                f"execution {number} is still running; this cell was not run. "
                f"Call wait_python(execution={number}) to wait for it, or interrupt_python() to stop it.",
            )
        number = ExecutionNumber(len(self._records) + 1)
        record = ExecutionRecord(
            number, source, kernel.generation, directives=directives, patch_literals=transformed.converted
        )
        tracker = _ExecutionTracker(self, record, kernel)
        self._records[number] = record
        self._running = tracker
        tracker.msg_id = kernel.channel.execute(transformed.source, tracker)
        return record

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

    async def wait(self, record: ExecutionRecord, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the record to finish; True if it did. The cell runs on."""
        with anyio.move_on_after(timeout_s):
            await record.done.wait()
        return record.state.finished

    def interrupt(self) -> ExecutionRecord | None:
        """Interrupt the running execution (or the one about to start); None when idle."""
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
                await self._kernel.kill()
            self._begin_kernel_start()
        await self.kernel()
        return killed


def _not_found(execution: int, count: int) -> str:
    if count == 0:
        return f"execution {execution} does not exist; no execution exists yet"
    return f"execution {execution} does not exist; executions 1-{count} exist"
