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
from warmkernel.types import Generation, KernelState

START_TIMEOUT_S = 60.0
SUBSHELLS = "kernel subshells"
"""The `supported_features` entry of a kernel that has subshells (kernel protocol 5.5)."""
_SUBSHELL_CREATE_S = 5.0
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
        self.content: Mapping[str, object] = {}

    def deliver(self, event: Event) -> None:
        if isinstance(event, Reply):
            self.content = event.content
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
    tracking: str | None = None
    """How a local kernel's processes are found when it is killed: its cgroup, or a scan."""


@dataclass(frozen=True)
class KernelInfo:
    """What python_status reports about the current kernel."""

    generation: Generation
    state: KernelState
    detail: str = ""
    """What the state says further: what a start waits on and for how long (`pending on the
    gateway, 45 s`), why the kernel is stopped, or why its start failed."""
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
        self.has_subshells = False
        """It runs requests in subshells beside the main shell (ipykernel 7, kernel protocol 5.5);
        known once it has answered kernel_info."""
        self._subshell_id: str | None = None
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

    def memory_bytes(self) -> int | None:
        """Resident memory of the kernel and every process it started; None where it cannot be seen
        (a kernel on a Jupyter server)."""
        return None

    def process_stopped(self) -> bool:
        """Whether the kernel's process is stopped by a signal (SIGSTOP, SIGTSTP): it answers
        nothing until it is continued. False where that cannot be seen (a kernel on a server)."""
        return False

    def stop(self) -> None:
        """Stop routing messages of this kernel (after it has exited)."""
        self._scope.cancel()

    async def _handshake(self, timeout_s: float = START_TIMEOUT_S, extend: str = "") -> None:
        """Return once the kernel answers on shell and IOPub; `kernel_start_failed` past `timeout_s`
        (its message names `extend`, the setting that gives more time, if there is one)."""
        # One kernel_info request at a time: a request that reaches ipykernel 7 while it sends
        # a reply could go unread (ipykernel#1554), so the next one waits for the last reply.
        # A SUB socket misses what was published before it joined, so ask again until one
        # request's status reaches IOPub (as jupyter_client's wait_for_ready does).
        answered = False
        with anyio.move_on_after(timeout_s) as deadline:
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
                        features = probe.content.get("supported_features")
                        self.has_subshells = isinstance(features, list) and SUBSHELLS in features
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
                f"the kernel did not answer kernel_info within {timeout_s:.0f} s ({missing}){extend}\n"
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

    async def run_in_subshell(
        self, *, user_expressions: Mapping[str, str], give_up_after_s: float
    ) -> Reply | None:
        """Evaluate `user_expressions` silently in this kernel's subshell (made on first use),
        beside whatever the main shell runs. None if the kernel exited or `give_up_after_s`
        passed first; then the subshell is left to itself and the next call makes another.
        Nothing is interrupted: a SIGINT would reach the main shell's cell."""
        assert self.has_subshells, "only a kernel that said it has subshells is asked to use one"
        waiter = _SilentRun()
        msg_id = None
        with anyio.move_on_after(give_up_after_s):
            # made outside the task group, so that its refusal is raised as itself
            subshell_id = self._subshell_id or await self._create_subshell()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._cancel_on_exit, tg.cancel_scope)
                msg_id = self.channel.execute(
                    "", waiter, silent=True, user_expressions=user_expressions, subshell_id=subshell_id
                )
                await waiter.replied.wait()
                await waiter.idle.wait()
                tg.cancel_scope.cancel()
        if msg_id is not None:
            self.channel.forget(msg_id)
        if waiter.reply is None:
            self._subshell_id = None  # it may still be busy with what we abandoned
        return waiter.reply

    async def _create_subshell(self) -> str:
        waiter = _SilentRun()
        msg_id = self.channel.create_subshell(waiter)
        try:
            with anyio.fail_after(_SUBSHELL_CREATE_S):
                await waiter.replied.wait()
        except TimeoutError:
            raise WarmkernelError(
                "inspection_failed", f"the kernel did not make a subshell within {_SUBSHELL_CREATE_S:g} s"
            ) from None
        finally:
            self.channel.forget(msg_id)
        assert waiter.reply is not None
        subshell_id = waiter.reply.content.get("subshell_id")
        if waiter.reply.status != "ok" or not isinstance(subshell_id, str):
            raise WarmkernelError(
                "inspection_failed", f"the kernel refused a subshell: {waiter.reply.content}"
            )
        self._subshell_id = subshell_id
        return subshell_id

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

    @property
    def step(self) -> str:
        """What a start waits on now, for python_status; "" when it has nothing to tell."""
        ...

    @property
    def spares_ready(self) -> int | None:
        """Spare kernels started and waiting to be handed out; None when it keeps none."""
        ...
