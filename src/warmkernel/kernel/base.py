"""What a session needs of a kernel wherever it runs: a router, an exit signal, interrupt, kill.

The handshake and silent runs speak only through the router, so they are the same for a local
process and for a kernel on a Jupyter server.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio
import anyio.abc

from warmkernel.errors import WarmkernelError
from warmkernel.kernel.channel import Event, KernelChannel, Reply, Status
from warmkernel.types import Generation

START_TIMEOUT_S = 60.0
_IOPUB_JOIN_WAIT_S = 0.2  # as jupyter_client waits for IOPub after a kernel_info reply


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


@dataclass(frozen=True)
class KernelPlace:
    """Where a kernel runs: a local process, or a kernel on a Jupyter server."""

    pid: int | None = None
    connection_file: Path | None = None
    """0600, in the private runtime root: `jupyter console --existing FILE` attaches to this kernel."""
    server_url: str | None = None
    kernel_id: str | None = None
    cwd: str | None = None
    """The working directory of a kernel on a server, as it reports it (a local kernel's is the workspace)."""
    environment: str | None = None
    """A local kernel's Python environment and why it was chosen (`Environment.describe`)."""


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
    executions: int = 0
    """Cells this kernel has run (its namespace holds what they made)."""
    ready_since: float | None = None
    """When it became ready (`time.time()`); None before."""


class Kernel(ABC):
    """One kernel of a session: started by a launcher, watched until it exits or is killed."""

    def __init__(self, generation: Generation, channel: KernelChannel) -> None:
        self.generation = generation
        self.channel = channel
        self.exited = anyio.Event()
        self.killed_on_purpose = False
        self._scope = anyio.CancelScope()

    @abstractmethod
    def place(self) -> KernelPlace:
        """Where the kernel runs, for python_status."""

    @abstractmethod
    def exit_reason(self) -> str:
        """How the kernel ended, for a kernel that has exited: 'exit code 3', 'signal SIGKILL', …"""

    @abstractmethod
    def start_failure_detail(self) -> str:
        """What to add to a start failure: the kernel's log, or where it ran."""

    @abstractmethod
    def interrupt(self) -> None:
        """Ask the kernel to stop the running code, as Ctrl-C in a terminal would."""

    @abstractmethod
    async def kill(self) -> None:
        """End the kernel and everything it started, then stop routing."""

    def stop(self) -> None:
        """Stop routing messages of this kernel (after it has exited)."""
        self._scope.cancel()

    async def _handshake(self) -> None:
        # One kernel_info request at a time: a request that reaches ipykernel 7 while it sends
        # a reply could go unread (ipykernel#1554), so the next one waits for the last reply.
        # A SUB socket misses what was published before it joined, so ask again until one
        # request's status reaches IOPub (as jupyter_client's wait_for_ready does).
        answered = False
        with anyio.move_on_after(START_TIMEOUT_S) as deadline:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._cancel_on_exit, tg.cancel_scope)
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
        if self.exited.is_set():  # raised here, not in the task group: no ExceptionGroup around it
            raise WarmkernelError(
                "kernel_start_failed",
                f"the kernel exited during start ({self.exit_reason()})\n" + self.start_failure_detail(),
            )
        if deadline.cancelled_caught:
            missing = "nothing reached IOPub" if answered else "no kernel_info reply"
            raise WarmkernelError(
                "kernel_start_failed",
                f"the kernel did not answer within {START_TIMEOUT_S:.0f} s ({missing})\n"
                + self.start_failure_detail(),
            )

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


class KernelLauncher(Protocol):
    """Starts each generation's kernel: a local process, a spare swapped in, or one on a server."""

    async def start(self, generation: Generation) -> Kernel:
        """A kernel that has answered on shell and IOPub; `kernel_start_failed` otherwise."""
        ...

    async def retire(self, kernel: Kernel) -> None:
        """End a kernel that the next `start` replaces (a reset)."""
        ...

    async def aclose(self) -> None:
        """Release what the launcher holds beyond the kernels it handed out."""
        ...
