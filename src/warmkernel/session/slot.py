"""KernelSlot: a session's kernel across its generations, in one `KernelState` with guarded moves.

Every change of kernel goes through `replace`: a reset, a stop, a death, the memory ceiling and a
kernel that answers nothing all end the kernel there (the running cell learns it from `end`) and
either start the next generation or stop. A start runs in the background; `ready` waits for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from warmkernel.errors import WarmkernelError
from warmkernel.kernel.base import Kernel, KernelInfo, KernelLauncher
from warmkernel.types import ExecutionNumber, Generation, KernelState

log = logging.getLogger(__name__)

_MOVES: dict[KernelState, tuple[frozenset[KernelState], str]] = {
    KernelState.STOPPED: (
        frozenset({KernelState.STARTING, KernelState.ENDING}),
        "a stopped kernel starts, or is ended again by a reset",
    ),
    KernelState.STARTING: (
        frozenset({KernelState.READY, KernelState.FAILED}),
        "a starting kernel becomes ready or fails; whoever would end it waits for that",
    ),
    KernelState.READY: (
        frozenset({KernelState.ENDING}),
        "a ready kernel is ended before anything else happens to it",
    ),
    KernelState.FAILED: (
        frozenset({KernelState.STARTING, KernelState.ENDING}),
        "a failed start is tried again, or ended by a reset or a stop",
    ),
    KernelState.ENDING: (
        frozenset({KernelState.STARTING, KernelState.STOPPED}),
        "an ending kernel is followed by the next generation or by none",
    ),
}
"""Where each state may go, and the sentence that refuses any other move."""


def check_move(current: KernelState, to: KernelState) -> None:
    """Refuse a move the table does not allow, saying why (our bug, never a caller's)."""
    allowed, refusal = _MOVES[current]
    if to not in allowed:
        raise RuntimeError(f"the kernel cannot go from {current.value} to {to.value}: {refusal}")


class KernelSlot:
    """At most one kernel, its generation and its state; the session's only way to change kernels.

    `generation` is the latest that ran (0: none). `prepare` readies a new kernel before any cell
    reaches it (numbering, the inspection helper); `on_ready` hears of each ready kernel;
    `on_generation` of each new generation, as it begins; `on_move` of every move.
    `first_number` is the number the next cell will get.
    """

    def __init__(
        self,
        launcher: KernelLauncher,
        tg: anyio.abc.TaskGroup,
        *,
        first_number: Callable[[], ExecutionNumber],
        prepare: Callable[[Kernel], Awaitable[None]],
        on_ready: Callable[[Kernel], None],
        on_generation: Callable[[Generation], None],
        on_move: Callable[[], None],
        generation: Generation,
    ) -> None:
        self._launcher = launcher
        self._tg = tg
        self._first_number = first_number
        self._prepare = prepare
        self._on_ready = on_ready
        self._on_generation = on_generation
        self._on_move = on_move
        self.state = KernelState.STOPPED
        self.generation = generation
        self.generation_began = ExecutionNumber(1)
        """The number of the generation's first cell: numbers run on, so it has run the cells from here."""
        self._kernel: Kernel | None = None
        self._error: WarmkernelError | None = None
        self.stopped_reason = "not started yet"
        """Why there is no kernel, while STOPPED."""
        self.unresponsive: str | None = None
        """Why the ready kernel is taken not to answer (a request it took went unanswered); None
        while it answers."""
        self._start_began = 0.0
        self._ready_since = 0.0
        self._moved = anyio.Event()
        self._replacing = anyio.Lock()

    @property
    def kernel(self) -> Kernel | None:
        """The kernel while it is ready or being ended; None otherwise."""
        return self._kernel

    def start(self) -> None:
        """Start a kernel if there is none: a stopped kernel's next use, or the next call after a
        failed start (its cause may be fixed since, e.g. ipykernel installed)."""
        if self.state in (KernelState.STOPPED, KernelState.FAILED):
            self._begin_start()

    async def ready(self) -> Kernel:
        """The kernel, once ready (started now if stopped or if its last start failed); else the
        error its start failed with. A cell sent while a kernel ends waits for the next one."""
        self.start()
        while True:
            match self.state:
                case KernelState.READY:
                    assert self._kernel is not None
                    return self._kernel
                case KernelState.FAILED:
                    assert self._error is not None
                    raise self._error
                case KernelState.STOPPED:  # stopped while this call waited: it starts the next
                    self.start()
                case _:
                    await self._moved.wait()

    async def ready_within(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the kernel to be ready (or its start to fail); False if it is
        still starting then."""
        with anyio.move_on_after(timeout_s):
            await self.ready()
            return True
        return False

    async def replace(
        self,
        end: Callable[[Kernel | None], None],
        *,
        expected: Kernel | None = None,
        stop: str | None = None,
    ) -> bool:
        """End the kernel and start the next generation, or with `stop` (why) start none.

        Waits for a start under way to settle first. With `expected`, only that kernel is ended:
        False when another replace ended it meanwhile (or, with `stop`, when it is stopped
        already). `end` hears of the kernel being ended (None: there was none) before it is
        killed; a kernel that exited by itself is only closed.
        """
        async with self._replacing:
            while self.state is KernelState.STARTING:
                await self._moved.wait()
            kernel = self._kernel
            if (expected is not None and kernel is not expected) or (
                stop is not None and self.state is KernelState.STOPPED
            ):
                return False
            self._move(KernelState.ENDING)
            end(kernel)
            if kernel is not None:
                if kernel.exited.is_set():
                    kernel.stop()
                else:
                    await self._launcher.retire(kernel)
                self._kernel = None
            if stop is None:
                self._begin_start()
            else:
                self.stopped_reason = stop
                self._move(KernelState.STOPPED)
            return True

    async def kill(self) -> None:
        """The daemon shuts down: kill the kernel at once, with everything it started."""
        if self._kernel is not None:
            await self._kernel.kill()

    def info(self, next_number: ExecutionNumber) -> KernelInfo:
        """What python_status says of the kernel; `next_number` is the next cell's."""
        spares = self._launcher.spares_ready
        match self.state:
            case KernelState.READY | KernelState.ENDING if self._kernel is not None:
                return KernelInfo(
                    self.generation,
                    self.state,
                    self.not_answering(self._kernel) or "",
                    place=self._kernel.place(),
                    spare_kernels_ready=spares,
                    executions=next_number - self.generation_began,
                    ready_since=self._ready_since,
                )
            case KernelState.STOPPED:
                detail = self.stopped_reason
            case KernelState.FAILED:
                detail = self._error.message if self._error is not None else ""
            case _:
                detail = self._starting()
        return KernelInfo(self.generation, self.state, detail, spare_kernels_ready=spares)

    def not_answering(self, kernel: Kernel) -> str | None:
        """Why the kernel answers nothing now (its process is stopped, or a request went
        unanswered); None while it answers as far as can be seen."""
        if kernel.process_stopped():
            return "not responding: its process is stopped (SIGSTOP); `kill -CONT` continues it"
        return self.unresponsive

    def _starting(self) -> str:
        """How the kernel start goes: the step a remote start waits on, and for how long."""
        step = self._launcher.step
        elapsed = f"{time.monotonic() - self._start_began:.0f} s"
        return f"{step}, {elapsed}" if step else elapsed

    def _begin_start(self) -> None:
        self.generation = Generation(self.generation + 1)
        self.generation_began = self._first_number()
        self._error = None
        self.unresponsive = None
        self._start_began = time.monotonic()
        self._move(KernelState.STARTING)
        self._on_generation(self.generation)
        self._tg.start_soon(self._start, self.generation)

    async def _start(self, generation: Generation) -> None:
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
            self._error = exc
            self._move(KernelState.FAILED)
        except Exception as exc:
            log.exception("kernel start failed")
            self._error = WarmkernelError("kernel_start_failed", f"{type(exc).__name__}: {exc}")
            self._move(KernelState.FAILED)
        else:
            self._kernel, self._ready_since = kernel, time.time()
            self._move(KernelState.READY)
            self._on_ready(kernel)

    def _move(self, to: KernelState) -> None:
        check_move(self.state, to)
        self.state = to
        self._moved.set()
        self._moved = anyio.Event()
        self._on_move()
