"""One local kernel process: started, watched for exit, interrupted, killed with its whole tree."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

import anyio
import anyio.abc
import psutil

from warmkernel.errors import WarmkernelError
from warmkernel.kernel.channel import Event, KernelChannel, Reply, Status
from warmkernel.kernel.launch import RuntimeRoot, prepare_launch
from warmkernel.types import Generation

START_TIMEOUT_S = 60.0
_IOPUB_JOIN_WAIT_S = 0.2  # as jupyter_client waits for IOPub after a kernel_info reply
_LOG_TAIL_LINES = 20


class _SilentRun:
    """Waits for a silent request's reply and the idle that follows it."""

    def __init__(self) -> None:
        self.reply: Reply | None = None
        self.idle = anyio.Event()
        self.replied = anyio.Event()

    def deliver(self, event: Event) -> None:
        if isinstance(event, Reply):
            self.reply = event
            self.replied.set()
        elif isinstance(event, Status) and event.state == "idle":
            self.idle.set()


class _Handshake:
    """Collects the kernel_info reply and proof that IOPub is subscribed."""

    def __init__(self) -> None:
        self.reply = anyio.Event()
        self.iopub = anyio.Event()

    def deliver(self, event: Event) -> None:
        if isinstance(event, Reply):
            self.reply.set()
        elif isinstance(event, Status):
            self.iopub.set()


class LocalKernel:
    """A kernel process started by this server, with its router and exit watcher."""

    def __init__(
        self, generation: Generation, pid: int, channel: KernelChannel, log_file: Path, connection_file: Path
    ) -> None:
        self.generation = generation
        self.pid = pid
        self.channel = channel
        self.log_file = log_file
        self.connection_file = connection_file
        """0600, in the private runtime root: `jupyter console --existing FILE` attaches to this kernel."""
        self.exited = anyio.Event()
        self.returncode: int | None = None
        self.killed_on_purpose = False
        self._scope = anyio.CancelScope()

    @classmethod
    async def start(
        cls, tg: anyio.abc.TaskGroup, root: RuntimeRoot, python: str, cwd: Path, generation: Generation
    ) -> LocalKernel:
        """Launch the process, connect, and return once the kernel answers on shell and IOPub."""
        spec = prepare_launch(root, python, cwd, generation)
        with open(spec.log_file, "ab") as log:  # noqa: ASYNC230 (a new file in our private root)
            try:
                process = await anyio.open_process(
                    spec.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=spec.cwd,
                    env=spec.env,
                    start_new_session=True,  # a Ctrl-C in the user's terminal must not reach the kernel
                )
            except OSError as exc:
                raise WarmkernelError("kernel_start_failed", f"could not run {python}: {exc}") from exc
        kernel = cls(
            generation, process.pid, KernelChannel(spec.connection_info), spec.log_file, spec.connection_file
        )
        await tg.start(kernel._supervise, process)
        try:
            await kernel._handshake()
        except BaseException:
            # Also when cancelled (the server shutting down mid-start): never orphan a kernel.
            with anyio.CancelScope(shield=True):
                await kernel.kill()
            raise
        return kernel

    async def _supervise(
        self,
        process: anyio.abc.Process,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        # The router outlives the process on purpose: IOPub messages sent just before a
        # death are still in our socket and are read until `stop()`.
        with self._scope:
            async with anyio.create_task_group() as tg:
                await tg.start(self.channel.run)
                task_status.started()
                self.returncode = await process.wait()
                self.exited.set()
        if not self.exited.is_set():
            # Stopped while the process still ran: reap it so it does not linger as a zombie.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                self.returncode = await process.wait()
            self.exited.set()

    async def _handshake(self) -> None:
        # One kernel_info request at a time: a request that reaches ipykernel 7 while it sends
        # a reply could go unread (ipykernel#1554), so the next one waits for the last reply.
        # A SUB socket misses what was published before it joined, so ask again until one
        # request's status reaches IOPub (as jupyter_client's wait_for_ready does).
        answered = False
        with anyio.move_on_after(START_TIMEOUT_S) as deadline:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._fail_on_exit, tg)
                while True:
                    probe = _Handshake()
                    msg_id = self.channel.kernel_info(probe)
                    try:
                        await probe.reply.wait()
                        answered = True
                        with anyio.move_on_after(_IOPUB_JOIN_WAIT_S):
                            await probe.iopub.wait()
                    finally:
                        self.channel.forget(msg_id)
                    if probe.iopub.is_set():
                        break
                tg.cancel_scope.cancel()
        if deadline.cancelled_caught:
            missing = "nothing reached IOPub" if answered else "no kernel_info reply"
            raise WarmkernelError(
                "kernel_start_failed",
                f"the kernel did not answer within {START_TIMEOUT_S:.0f} s ({missing})\n{self.log_tail()}",
            )

    async def _fail_on_exit(self, tg: anyio.abc.TaskGroup) -> None:
        await self.exited.wait()
        raise WarmkernelError(
            "kernel_start_failed", f"the kernel exited during start ({self.exit_reason()})\n{self.log_tail()}"
        )

    def exit_reason(self) -> str:
        """'exit code 3' or 'signal SIGKILL', for a kernel that has exited."""
        code = self.returncode
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def log_tail(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
        except OSError:
            return "(no kernel log)"
        return "kernel log (last lines):\n" + "\n".join(lines) if lines else "(the kernel log is empty)"

    async def run_silently(
        self,
        code: str,
        *,
        user_expressions: Mapping[str, str] | None = None,
        interrupt_after_s: float | None = None,
    ) -> Reply | None:
        """Run code that leaves no record, history entry or execution count behind.

        None if the kernel exited before replying. Past `interrupt_after_s` the kernel gets one
        SIGINT and the reply is still awaited: the code is stopped, not abandoned while it runs.
        """
        waiter = _SilentRun()
        msg_id = self.channel.execute(code, waiter, silent=True, user_expressions=user_expressions)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._cancel_on_exit, tg.cancel_scope)
                if interrupt_after_s is not None:
                    tg.start_soon(self._interrupt_after, interrupt_after_s)
                await waiter.replied.wait()
                await waiter.idle.wait()
                tg.cancel_scope.cancel()
        finally:
            self.channel.forget(msg_id)
        return waiter.reply

    async def _cancel_on_exit(self, scope: anyio.CancelScope) -> None:
        await self.exited.wait()
        scope.cancel()

    async def _interrupt_after(self, seconds: float) -> None:
        await anyio.sleep(seconds)
        self.interrupt()

    def interrupt(self) -> None:
        """SIGINT to the kernel process, as Ctrl-C in a terminal would send."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)

    async def kill(self) -> None:
        """Kill the kernel and every process it started, then stop routing."""
        self.killed_on_purpose = True
        await anyio.to_thread.run_sync(kill_process_tree, self.pid)
        with anyio.move_on_after(5):
            await self.exited.wait()
        self.stop()

    def stop(self) -> None:
        """Stop routing messages of this kernel (after it has exited)."""
        self._scope.cancel()


def kill_process_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants, including ones that called setsid.

    The tree is read before anything is killed: once a parent dies its children are
    reparented and can no longer be found from here. The root is our own child and is
    reaped by its exit watcher, so only the descendants are waited for here.
    """
    try:
        root = psutil.Process(pid)
        descendants = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for proc in [root, *descendants]:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    # On machines whose PID 1 does not reap orphans, killed grandchildren stay zombies:
    # a zombie is dead for our purposes.
    _, alive = psutil.wait_procs(descendants, timeout=5)
    for proc in alive:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
        except psutil.NoSuchProcess:
            pass
