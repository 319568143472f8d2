"""NotebookSide: the notebook a kernel is bound to, its cells' verdicts, and runs of its cells.

The first notebook call binds the notebook to the kernel; a reset releases it (another may be
bound then). Each notebook cell runs as an execution of the session (`submit`), told to the
kernel-side notebook helper first, so the kernel tracks what the cell reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import anyio
import anyio.abc

from warmkernel.errors import WarmkernelError
from warmkernel.execution.record import ExecutionRecord
from warmkernel.kernel.base import Kernel
from warmkernel.kernel.channel import ExpressionValue
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
from warmkernel.notebook.runner import run_cells
from warmkernel.notebook.staleness import FileStamp, evaluate, select_cell, select_cells
from warmkernel.replies import refusals
from warmkernel.session.admission import Admission
from warmkernel.session.questions import Questions
from warmkernel.session.running import ExecutionTracker
from warmkernel.session.slot import KernelSlot
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionNumber, Generation
from warmkernel.workspace import Workspace

Submit = Callable[[NotebookCell, str], Awaitable[ExecutionRecord]]
"""Runs one cell of the bound notebook as the next execution, for a client."""


class NotebookSide:
    """At most one bound notebook per kernel, and the run of its cells under way, if any."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        workspace: Workspace,
        slot: KernelSlot,
        admission: Admission,
        questions: Questions,
        tg: anyio.abc.TaskGroup,
        on_bind: Callable[[Path], None],
    ) -> None:
        self._name = name
        self._settings = settings
        self._workspace = workspace
        self._slot = slot
        self._admission = admission
        self._questions = questions
        self._tg = tg
        self._on_bind = on_bind
        self.binding: NotebookBinding | None = None

    async def status(self, path: str) -> NotebookView:
        """Bind the notebook on first use; every code cell's verdict, and the plan."""
        located = locate(self._workspace.path, path)
        notebook = await anyio.to_thread.run_sync(read_cells, located)
        binding = self._bind(located)
        current = await self._fetch_facts(binding)
        stamps = await self._stamp_files(*binding.stamp_request())
        running = self._admission.running_record
        status = evaluate(notebook.cells, binding.facts(stamps, running.cell_id if running else None))
        here = {cell.id for cell in notebook.cells}  # a cell no longer in the file has nothing to save
        return NotebookView(
            binding.shown, notebook, status, current, {i: o for i, o in binding.unsaved.items() if i in here}
        )

    async def run(
        self, path: str, cells: str | list[str | int], *, stop_on_error: bool, submit: Submit, client: str
    ) -> NotebookRun:
        """Start running the chosen cells in notebook order, one execution each; `busy` if one runs."""
        view = await self.status(path)
        chosen, skipped = select_cells(view.status, cells)
        self._admission.admit_notebook_run()
        by_id = {cell.id: cell for cell in view.notebook.cells}
        why = {status.id: ", ".join(status.reasons) for status in view.status.cells}
        run = NotebookRun(
            view.shown,
            tuple(by_id[cell_id] for cell_id in chosen),
            stop_on_error,
            skipped=tuple((cell_id, why[cell_id]) for cell_id in skipped),
        )
        if not run.cells:
            run.done.set()
            return run
        self._admission.notebook_run = run
        await self._tg.start(
            partial(
                run_cells,
                run,
                self._bound(),
                submit=lambda cell: submit(cell, client),
                save=self._settings.save_outputs,
                on_done=self._run_done,
            )
        )
        return run

    async def watch(self, path: str, file: str, cell: str | int) -> tuple[str, str]:
        """Make `cell` depend on `file` (read where no audit hook sees it); its id and the file as shown."""
        view = await self.status(path)
        cell_id = select_cell(view.status, cell)
        target = watched_file(self._workspace.path, file)
        self._bound().watch(cell_id, str(target))
        return cell_id, shown_path(self._workspace.path, target)

    def holding(self, path: Path) -> NotebookBinding | None:
        """The binding when `path` is the bound notebook (also one a reset released)."""
        return self.binding if self.binding is not None and self.binding.is_for(path) else None

    @property
    def bound_notebook(self) -> str | None:
        """The bound notebook's path as the tools take it, unless a reset released it."""
        binding = self.binding
        return binding.shown if binding is not None and not binding.released else None

    def new_kernel(self, generation: Generation) -> None:
        """A new generation began: no cell of the notebook has run in it."""
        if self.binding is not None:
            self.binding.forget_kernel(generation)

    def release(self) -> None:
        """The kernel ends: its notebook may be bound to another kernel, and its run starts no cell."""
        if self.binding is not None:
            self.binding.released = True
        self._admission.stop_notebook_run()

    async def begin_cell(self, kernel: Kernel, cell: NotebookCell, number: ExecutionNumber) -> str:
        """Tell the kernel-side notebook helper (loaded on first use) that `cell` runs next as `number`.
        The caller holds the admission turn."""
        code, expression = self._bound().begin_request(cell, number)
        answer = await self._questions.evaluate_silently(kernel, expression, "notebook cell start", code)
        return _notebook_answer(answer)

    def start_run(
        self, cell: NotebookCell, record: ExecutionRecord, begun: str, tracker: ExecutionTracker
    ) -> OutputCollector:
        """`cell` runs as `record` now (`begun`: `begin_cell`'s answer); the inbox of its events."""
        return self._bound().start_run(cell, record, begun, tracker)

    def _bind(self, path: Path) -> NotebookBinding:
        shown = shown_path(self._workspace.path, path)
        binding = self.binding
        if binding is not None and binding.is_for(path):
            binding.released = False
            return binding
        if binding is not None and not binding.released:
            raise refusals.already_bound(self._name, binding.shown, shown)
        self.binding = NotebookBinding(path, shown, self._slot.generation, self._workspace.path)
        self._on_bind(path)
        return self.binding

    def _bound(self) -> NotebookBinding:
        assert self.binding is not None, "notebook cells run only in a bound session"
        return self.binding

    async def _fetch_facts(self, binding: NotebookBinding) -> bool:
        """Bring versions and file reads up to date; False while a cell runs (the last facts stand)."""
        async with self._admission.turn:
            if self._admission.running is not None:
                return False
            request = binding.facts_request()
            if request is None:
                return True
            expression, numbers = request
            kernel = await self._slot.ready()
            answer = await self._questions.evaluate_silently(kernel, expression, "notebook facts")
            binding.absorb(_notebook_answer(answer), numbers)
        return True

    async def _stamp_files(self, paths: set[str], known: dict[str, FileStamp]) -> dict[str, FileStamp | None]:
        """The files' stamps now: here, or for a kernel on a Jupyter server, inside it (on its
        machine). While a cell runs there, the known stamps stand and the rest wait."""
        if self._settings.jupyter_url is None:
            return await anyio.to_thread.run_sync(stamp_files, paths, known)
        async with self._admission.turn:
            if self._admission.running is not None or not paths:
                return {path: known[path] for path in paths if path in known}
            kernel = await self._slot.ready()
            expression = kernel_stamps_expression(paths, known)
            answer = await self._questions.evaluate_silently(kernel, expression, "file stamps")
        return read_kernel_stamps(_notebook_answer(answer))

    def _run_done(self) -> None:
        """The notebook run starts no further cell: other cells may run again."""
        self._admission.notebook_run = None


def _notebook_answer(value: ExpressionValue) -> str:
    if value.status != "ok":
        raise WarmkernelError(
            "internal_error", f"the kernel-side notebook helper raised {value.ename}: {value.evalue}"
        )
    return value.text
