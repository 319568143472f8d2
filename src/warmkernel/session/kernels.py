"""Kernels: the named kernels of one workspace, each a `Session`, and which one a call means.

A daemon (or an `--ephemeral` server) holds one `Kernels`. `main` starts with it; any other
name starts on its first use, in the same workspace and interpreter, with the same kernel
options. The kernels share one launcher (so spare kernels serve them all) and one runtime root.
A notebook used without an explicit kernel gets its own (`nb-<stem>`), so `main` stays free for
scratch work. A kernel other than `main` left idle for `kernel_idle_stop_s` is stopped (its
`IdleClock` says when); a stopped kernel keeps its records and starts again on its next use.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.abc

from warmkernel.errors import WarmkernelError
from warmkernel.execution.charts import Charts
from warmkernel.execution.record import ExecutionRecord
from warmkernel.idle import IdleClock
from warmkernel.kernel.base import KernelLauncher
from warmkernel.kernel.launch import RuntimeRoot
from warmkernel.kernel.local import LocalLauncher
from warmkernel.kernel.spares import SpareLauncher
from warmkernel.notebook.binding import locate, read_cells, shown_path
from warmkernel.notebook.export_files import inside_workspace
from warmkernel.replies import refusals
from warmkernel.replies.status import KernelSummary, idle_stop_notice
from warmkernel.session.journal import Journal
from warmkernel.session.session import Session
from warmkernel.settings.model import Settings
from warmkernel.types import MAIN_KERNEL
from warmkernel.workspace import Workspace

_NOTEBOOK_PREFIX = "nb-"


def _launcher(
    settings: Settings, workspace: Workspace, root: RuntimeRoot, tg: anyio.abc.TaskGroup
) -> KernelLauncher:
    """Where the kernels run, as the settings ask."""
    if settings.jupyter_url is not None:
        from warmkernel.kernel.remote import RemoteLauncher  # here: HTTP and websockets only for a server

        return RemoteLauncher(tg, settings)
    fresh = LocalLauncher(tg, root, settings.python, workspace.path, add_ipykernel=settings.add_ipykernel)
    if settings.spare_kernels > 0:
        return SpareLauncher(fresh, tg, root, workspace.path, settings.spare_kernels)
    return fresh


def notebook_kernel_name(path: Path) -> str:
    """`nb-<stem>` in the kernel-name alphabet (`Sales Q3.ipynb` → `nb-sales-q3`)."""
    stem = re.sub(r"[^a-z0-9_-]+", "-", path.stem.lower()).strip("-_") or "notebook"
    return (_NOTEBOOK_PREFIX + stem)[:32].rstrip("-_")


class Kernels:
    """The workspace's named kernels; look one up with `session` or `for_notebook`."""

    def __init__(
        self,
        settings: Settings,
        workspace: Workspace,
        journal: Journal | None,
        root: RuntimeRoot,
        launcher: KernelLauncher,
        charts: Charts,
        tg: anyio.abc.TaskGroup,
        clock: IdleClock | None,
    ) -> None:
        self.settings = settings
        self.workspace = workspace
        self._journal = journal
        self._root = root
        self._launcher = launcher
        self._charts = charts
        self._tg = tg
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._opening = anyio.Lock()
        self._closing = anyio.Event()
        self.on_notebook_change: Callable[[Path], object] | None = None
        """Told the path of each notebook a kernel binds (the daemon advertises the latest)."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        workspace: Workspace,
        journal: Journal | None = None,
        clock: IdleClock | None = None,
    ) -> AsyncIterator[Kernels]:
        """`main` starting at once, and the kernels `journal` knows of, stopped, with their records.
        Every kernel's calls and cells hold `clock` (the daemon's) while they last."""
        if settings.jupyter_url is not None:
            from warmkernel.kernel.jupyter_api import check_jupyter_settings

            check_jupyter_settings(settings)  # before any task starts: a plain error
        root = RuntimeRoot()
        try:
            async with anyio.create_task_group() as tg:
                launcher = _launcher(settings, workspace, root, tg)
                try:
                    async with (
                        Charts.open(settings.chart_timeout_s) as charts,
                        anyio.create_task_group() as sessions,
                    ):
                        kernels = cls(settings, workspace, journal, root, launcher, charts, sessions, clock)
                        await kernels._open(MAIN_KERNEL, start=True)
                        for name in journal.kernel_names() if journal is not None else ():
                            await kernels._open(name, start=False)
                        try:
                            yield kernels
                        finally:
                            kernels._closing.set()
                            sessions.cancel_scope.cancel()
                finally:
                    with anyio.CancelScope(shield=True):
                        await launcher.aclose()
                    tg.cancel_scope.cancel()
        finally:
            root.remove()

    @property
    def main(self) -> Session:
        return self._sessions[MAIN_KERNEL]

    def by_name(self) -> dict[str, Session]:
        """Every kernel's session by name, `main` first (live or stopped)."""
        return dict(self._sessions)

    def running(self) -> ExecutionRecord | None:
        """A cell running in any kernel, else None."""
        return next((s.running for s in self._sessions.values() if s.running is not None), None)

    def ran_cells(self) -> bool:
        """Whether any kernel ran a cell in this process (records an earlier one journaled aside)."""
        return any(session.ran_cells for session in self._sessions.values())

    async def session(self, name: str | None, *, start: bool = True) -> Session:
        """The kernel `name` (None: `main`), started if it is new or stopped and `start`.

        A call that only reads records (`start=False`) never starts a kernel: it reads a stopped
        one's records, and a name no kernel has is `kernel_not_found`.
        """
        name = name or MAIN_KERNEL
        session = self._sessions.get(name)
        if session is None and not start:
            raise refusals.no_kernel(name, list(self._sessions))
        if session is None:
            session = await self._open(name, start=True)
        elif start and session.stopped is not None:
            self._check_room(name)
            session.start()
        return session

    def refuse_bound(self, path: str) -> None:
        """`invalid_arguments` when `path` is a notebook a kernel of the workspace is bound to (live
        or stopped): an export never replaces one."""
        target = inside_workspace(self.workspace.path, path)
        holder = next((s for s in self._sessions.values() if s.is_bound_to(target)), None)
        if holder is not None:
            raise refusals.export_onto_notebook(path, holder.name)

    async def for_notebook(self, path: str, name: str | None) -> Session:
        """The kernel of a notebook: `name` when given; else the one bound to it, or a new
        `nb-<stem>` (made unique), so each notebook has its own and `main` stays free.

        A notebook has one kernel at a time: another one named while a live kernel holds it is
        refused. A notebook that cannot be read starts no kernel.
        """
        located = locate(self.workspace.path, path)
        bound = [session for session in self._sessions.values() if session.is_bound_to(located)]
        holder = next((s for s in bound if s.bound_notebook is not None and s.stopped is None), None)
        if name is None:
            name = (holder or bound[0]).name if bound else self._free_notebook_name(located)
        elif holder is not None and holder.name != name:
            raise refusals.notebook_has_kernel(holder.name, shown_path(self.workspace.path, located), name)
        session = self._sessions.get(name)
        if session is None or session.stopped is not None:
            await anyio.to_thread.run_sync(read_cells, located)  # `invalid_notebook` before a start
        return await self.session(name)

    async def stop(self, name: str) -> tuple[Session, ExecutionRecord | None]:
        """Stop the kernel `name` (its records stay); the running record it killed, if any."""
        session = await self.session(name, start=False)
        return session, await session.stop("a client stopped the kernel")

    def summaries(self) -> list[KernelSummary]:
        return [
            KernelSummary(
                session.name,
                session.kernel_info(),
                len(session.records),
                session.running,
                session.bound_notebook,
                session.idle_s(),
                session.memory_bytes(),
            )
            for session in self._sessions.values()
        ]

    # -- inside ------------------------------------------------------------------------------

    async def _open(self, name: str, *, start: bool) -> Session:
        async with self._opening:
            if name in self._sessions:
                return self._sessions[name]
            if start:
                self._check_room(name)
            session = await self._tg.start(self._hold, name, start)
            self._sessions[name] = session
            return session

    async def _hold(self, name: str, start: bool, *, task_status: anyio.abc.TaskStatus[Session]) -> None:
        """Keep the kernel's session open until the daemon closes (a stopped kernel stays open)."""
        settings = self.settings if name == MAIN_KERNEL else replace(self.settings, jupyter_notebook=None)
        with contextlib.ExitStack() as stack:
            journal = stack.enter_context(self._journal.kernel(name)) if self._journal is not None else None
            async with (
                Session.open(
                    name,
                    settings,
                    self.workspace,
                    self._root,
                    self._launcher,
                    self._charts,
                    journal,
                    start=start,
                    clock=self._clock,
                ) as session,
                anyio.create_task_group() as tg,
            ):
                session.on_notebook_change = self._notebook_bound
                if name != MAIN_KERNEL and self.settings.kernel_idle_stop_s > 0:
                    tg.start_soon(self._stop_when_idle, session, self.settings.kernel_idle_stop_s)
                task_status.started(session)
                await self._closing.wait()
                tg.cancel_scope.cancel()

    def _notebook_bound(self, path: Path) -> None:
        if self.on_notebook_change is not None:
            self.on_notebook_change(path)

    def _check_room(self, name: str) -> None:
        """`too_many_kernels` when starting `name` would pass `max_kernels` live kernels."""
        live = [s.name for s in self._sessions.values() if s.stopped is None and s.name != name]
        if len(live) >= self.settings.max_kernels:
            raise refusals.too_many_kernels(name, live, self.settings.max_kernels)

    def _free_notebook_name(self, path: Path) -> str:
        """`nb-<stem>`, or `nb-<stem>-2`... when that kernel is bound to another notebook."""
        base = notebook_kernel_name(path)
        for suffix in ("", *(f"-{n}" for n in range(2, 1000))):
            name = base[: 32 - len(suffix)] + suffix
            session = self._sessions.get(name)
            if session is None or not session.has_notebook:
                return name
        raise WarmkernelError("too_many_kernels", f"no free kernel name for {path.name}")

    async def _stop_when_idle(self, session: Session, limit_s: float) -> None:
        """Stop a kernel other than `main` that had no call and no running cell for `limit_s`; a
        stopped kernel waits for its next use."""
        while True:
            await session.clock.idle_for(limit_s)
            if session.stopped is None:
                await session.stop(f"the kernel was stopped after {limit_s:g} s idle")
                session.tell(idle_stop_notice(session.name, limit_s))
            await session.clock.next_use()
