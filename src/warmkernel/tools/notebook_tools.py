"""The tools for a Jupyter notebook beside the kernel: which cells are stale and why, a run of them
in notebook order, a file a cell depends on, and executions added as its cells."""

from __future__ import annotations

from warmkernel.execution.selection import Selection
from warmkernel.tools.kinds import (
    WAIT,
    Annotations,
    Cell,
    Cells,
    Executions,
    Flag,
    Seconds,
    Spelling,
    Text,
    Tool,
    Verb,
    arg,
    arguments,
)
from warmkernel.tools.params import EXECUTIONS, KNOWN_KERNEL, NOTEBOOK, NOTEBOOK_KERNEL


@arguments
class NotebookStatusArgs:
    path: str | None = arg(NOTEBOOK)
    kernel: str | None = arg(NOTEBOOK_KERNEL)


NOTEBOOK_STATUS = Tool(
    "notebook_status",
    "Which code cells of a Jupyter notebook no longer match the kernel, and why, without running "
    "anything. Without `kernel`, the notebook gets a kernel of its own (nb-<stem>) on first use, so main "
    "stays free for scratch cells. Lists each "
    "code cell in order: index, id, state (fresh, stale, never_run, running, skipped: empty or tagged "
    "skip-execution), reasons (source_changed, never_run, errored, file_changed, changed_outside, "
    "upstream_changed, upstream_stale, undefined_name; empty, skip_execution) with why (the value or "
    "file and the execution that made it differ), the names it "
    "defines and the execution (In [N]) of its last run; then the plan: the cells to re-run, in order, "
    "each fresh one with why it must run again. Fresh means a top-to-bottom run of the notebook would "
    "give the same values.",
    NotebookStatusArgs,
    Annotations(read_only=True),
    (
        Verb(
            ("nb", "status"),
            "every code cell's state (fresh, stale, never_run, running, skipped), the reasons, and the plan",
            "warmkernel nb status analysis.ipynb    which notebook cells are stale, and why",
        ),
    ),
    output={
        "notebook": "string",
        "cells": "array",
        "plan": "array",
        "plan_why": "object",
        "facts_current": "boolean",
        "outputs_not_saved": "object",
    },
)


@arguments
class RunNotebookCellsArgs:
    path: str | None = arg(NOTEBOOK)
    cells: str | list[str | int] = arg(
        Cells(),
        '"stale" (the plan), "all", or cell ids and/or 0-based code-cell indices: a list, one, or '
        '"0,3,load".',
        "stale",
        Spelling(("--cells",), "stale|all|ID,..."),
    )
    stop_on_error: bool = arg(
        Flag(),
        "Stop at the first cell that raises.",
        True,
        Spelling(("--no-stop-on-error",), help="go on past cells that raise (default: stop at one)"),
    )
    timeout_seconds: float | None = arg(
        Seconds(optional=True),
        "How long to wait for the run before replying; null: the server's wait.",
        None,
        Spelling(("--timeout",), "S", help="seconds to wait for the run before printing; it goes on"),
    )
    kernel: str | None = arg(NOTEBOOK_KERNEL)


RUN_NOTEBOOK_CELLS = Tool(
    "run_notebook_cells",
    "Run cells of the bound notebook in notebook order, each as an ordinary numbered execution, and "
    "reply with each cell's output as run_python does, then what is still stale. Stops at the first "
    "error unless stop_on_error is false or the cell is tagged raises-exception; empty cells and cells "
    "tagged skip-execution are not run. Outputs are written into the .ipynb as Jupyter writes them "
    "(outputs and execution counts only) unless the cell's source changed on disk meanwhile. Waits up "
    "to timeout_seconds "
    f"(default: the server's wait, {WAIT}); the run goes on after that.",
    RunNotebookCellsArgs,
    Annotations(read_only=False, destructive=True, idempotent=False),
    (
        Verb(
            ("nb", "run"),
            "run the stale cells (or --cells) in notebook order; stops at the first error",
            "warmkernel nb run analysis.ipynb       re-run exactly the stale cells\n"
            "warmkernel nb run analysis.ipynb --cells all --no-stop-on-error   every cell, past errors",
            defaults={"timeout_seconds": 120.0},
        ),
    ),
    output={
        "notebook": "string",
        "state": "string",
        "cells": "array",
        "not_run": "array",
        "skipped": "array",
        "failure": "object",
        "status": "object",
    },
    starts_daemon=True,
)


@arguments
class WatchNotebookFileArgs:
    path: str | None = arg(NOTEBOOK)
    file: str = arg(
        Text(),
        "The file, relative to the workspace.",
        cli=Spelling(metavar="FILE", from_cwd=True, help="the file, from the current directory"),
    )
    cell: str | int = arg(
        Cell(), "The cell's id or 0-based code-cell index.", cli=Spelling(("--cell",), "ID")
    )
    kernel: str | None = arg(NOTEBOOK_KERNEL)


WATCH_NOTEBOOK_FILE = Tool(
    "watch_notebook_file",
    "Declare that a cell depends on a file whose reads the kernel cannot see (e.g. a C library opens "
    "it): when the file's content changes, the cell becomes stale.",
    WatchNotebookFileArgs,
    Annotations(read_only=False),
    (
        Verb(
            ("nb", "watch"),
            "make a cell depend on a file whose reads the kernel cannot see",
            "warmkernel nb watch analysis.ipynb data.bin --cell load   cell load reads data.bin",
        ),
    ),
    output={
        "notebook": "string",
        "cell": "string",
        "file": "string",
        "state": "string",
        "reasons": "array",
    },
    starts_daemon=True,
)


@arguments
class ExecutionsToNotebookArgs:
    executions: Selection = arg(Executions(), EXECUTIONS, cli=Spelling(("--executions",), "3,5-9"))
    path: str | None = arg(NOTEBOOK)
    after_cell: str | int | None = arg(
        Cell(optional=True),
        "The cell (id, or 0-based code-cell index) the new cells follow. Default: after the last cell.",
        None,
        Spelling(("--after",), "ID"),
    )
    kernel: str | None = arg(KNOWN_KERNEL)


EXECUTIONS_TO_NOTEBOOK = Tool(
    "executions_to_notebook",
    "Add executions as code cells of an existing notebook, with their outputs, after the cell "
    "after_cell (or at the end), to keep exploration in the notebook. Only the new cells are written: "
    "every other cell stays byte for byte as it was.",
    ExecutionsToNotebookArgs,
    Annotations(read_only=False, idempotent=False),
    (
        Verb(
            ("nb", "add"),
            "add executions as code cells of a notebook, after a cell or at the end",
            "warmkernel nb add analysis.ipynb --executions 3,5-9 --after load   after cell load",
        ),
    ),
    output={
        "notebook": "string",
        "cells": "array",
        "index": "integer",
        "after_cell": "string",
        "renamed": "object",
    },
)
