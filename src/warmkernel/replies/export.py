"""Replies to export_python_executions and executions_to_notebook."""

from __future__ import annotations

from warmkernel.notebook.export_files import ExportedDocument, InsertedCells
from warmkernel.replies.documents import ranges
from warmkernel.replies.hints import call
from warmkernel.replies.reply import Reply


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def export_reply(document: ExportedDocument) -> Reply:
    """Where the document went and what it holds; without a path, the document itself."""
    data = {
        "format": document.format,
        "path": document.path,
        "executions": list(document.numbers),
        "cells": len(document.numbers),
        "images": document.images,
        "bytes": document.size,
    }
    if document.text is not None:  # printed as a line by the CLI: without its own final newline
        return Reply(document.text.removesuffix("\n"), data, is_document=True)
    what = _count(len(document.numbers), "cell") + (
        f", {_count(document.images, 'image')}" if document.images else ""
    )
    return Reply(
        f"exported executions {ranges(document.numbers)} ({what}) as {document.format} to {document.path} "
        f"({document.size:,} bytes)",
        data,
    )


def insert_reply(notebook: str, inserted: InsertedCells) -> Reply:
    """Which cells were added where, and what notebook_status will say of them."""
    if inserted.after is not None:
        where = f"after cell {inserted.after}"
    else:
        where = "as its first cells" if inserted.index == 0 else f"after its cell {inserted.index - 1}"
    lines = [
        f"added {_count(len(inserted.ids), 'code cell')} to {notebook} {where} "
        f"(index {inserted.index} among all its cells, markdown too): {', '.join(inserted.ids)}",
        f"{call('notebook_status', path=notebook)} lists them as never_run until "
        f"{call('run_notebook_cells', path=notebook)} runs them.",
    ]
    if inserted.renamed:
        moved = ", ".join(f"{old} -> {new}" for old, new in inserted.renamed.items())
        lines.append(f"cells without ids of their own now have other derived ids: {moved}")
    data = {
        "notebook": notebook,
        "cells": list(inserted.ids),
        "index": inserted.index,
        "after_cell": inserted.after,
        "renamed": inserted.renamed,
    }
    return Reply("\n".join(lines), data)
