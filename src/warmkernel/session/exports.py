"""Exports: a kernel's executions as a document in the workspace, or as cells added to a notebook.

Records are read whole in a worker thread (each one's extent fixed first), so a long export
never holds the event loop.
"""

from __future__ import annotations

from functools import partial

import anyio

from warmkernel.errors import WarmkernelError
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.selection import Selection
from warmkernel.execution.transcript import Transcript, transcript
from warmkernel.notebook.binding import locate, shown_path
from warmkernel.notebook.export_files import (
    ExportedDocument,
    InsertedCells,
    format_for,
    insert_cells,
    inside_workspace,
    write_document,
)
from warmkernel.replies import documents, refusals
from warmkernel.session.admission import Admission
from warmkernel.session.notebook_side import NotebookSide
from warmkernel.session.records import RecordBook
from warmkernel.types import ExportFormat
from warmkernel.workspace import Workspace


class Exports:
    """Writes the records of one kernel out, for a person to open, rerun or keep."""

    def __init__(
        self, workspace: Workspace, book: RecordBook, notebook: NotebookSide, admission: Admission
    ) -> None:
        self._workspace = workspace
        self._book = book
        self._notebook = notebook
        self._admission = admission

    async def document(
        self, selection: Selection | None, path: str | None, format: ExportFormat | None
    ) -> ExportedDocument:
        """The executions as a document in the workspace at `path`, or as text when `path` is None."""
        records = self._book.select_many(selection)
        root = self._workspace.path
        target = inside_workspace(root, path) if path is not None else None
        chosen = format or format_for(target)
        transcripts = await _transcripts(records, outputs=chosen != "py")
        title = f"{root.name}: executions {documents.ranges([t.number for t in transcripts])}"
        text = await anyio.to_thread.run_sync(documents.render, transcripts, chosen, title)
        size = len(text.encode("utf-8"))
        if target is not None:
            size = await anyio.to_thread.run_sync(write_document, root, target, text)
        return ExportedDocument(
            numbers=tuple(t.number for t in transcripts),
            format=chosen,
            path=shown_path(root, target) if target is not None else None,
            text=None if target is not None else text,
            size=size,
            images=documents.image_count(transcripts),
        )

    async def to_notebook(
        self, selection: Selection, path: str, after_cell: str | int | None
    ) -> tuple[str, InsertedCells]:
        """Add the executions as code cells of the notebook at `path`; the notebook as shown, and what
        was added. A notebook this kernel is bound to keeps its cells' facts; not while its cells run."""
        records = self._book.select_many(selection)
        root = self._workspace.path
        try:
            located = locate(root, str(inside_workspace(root, path)))
        except WarmkernelError as exc:
            if exc.code != "notebook_not_found":
                raise
            raise refusals.no_notebook_to_add_to(exc, path, selection) from None
        binding = self._notebook.holding(located)
        if binding is not None:
            self._admission.admit_change_of_cells()
        transcripts = await _transcripts(records)
        inserted = await anyio.to_thread.run_sync(
            insert_cells, root, located, partial(documents.new_cells, transcripts), after_cell
        )
        if binding is not None:
            binding.rename_cells(inserted.renamed)
        return shown_path(root, located), inserted


async def _transcripts(records: list[ExecutionRecord], *, outputs: bool = True) -> list[Transcript]:
    """The records read whole: each one's extent is fixed here, its text read in a worker thread."""
    readers = [transcript(record, outputs=outputs) for record in records]
    return await anyio.to_thread.run_sync(lambda: [read() for read in readers])
