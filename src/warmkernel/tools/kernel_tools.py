"""The tools that tell what the workspace's kernels are and hold, without running a cell: the status,
the list of kernels, the variables and one variable's summary; and the one that stops a kernel."""

from __future__ import annotations

from warmkernel.settings.declarations import DECLARED
from warmkernel.tools.kinds import (
    Annotations,
    Flag,
    KernelName,
    Spelling,
    Tool,
    VariablePath,
    Verb,
    arg,
    arguments,
)
from warmkernel.tools.params import KNOWN_KERNEL

_BESIDE_A_CELL = (
    "While a cell runs, it answers beside the cell where the kernel has subshells (ipykernel 7 or "
    "later), saying which execution ran meanwhile (values may be mid-update); other kernels answer busy."
)


@arguments
class PythonStatusArgs:
    kernel: str | None = arg(KNOWN_KERNEL)


PYTHON_STATUS = Tool(
    "python_status",
    "The workspace, how it was resolved, the interpreter and why it was chosen, the kernel's pid "
    "and generation, whether a cell is running, every kernel of the workspace in brief, and the "
    "configuration files in use.",
    PythonStatusArgs,
    Annotations(read_only=True),
    (
        Verb(
            ("status",),
            "the workspace, interpreter and kernel of the daemon",
            "warmkernel status                      is a cell running, and in which kernel",
        ),
    ),
    output={
        "workspace": "string",
        "workspace_resolution": "string",
        "interpreter": "string",
        "environment": "string",
        "kernel_state": "string",
        "kernel_starting": "string",
        "kernel_pid": "integer",
        "connection_file": "string",
        "process_tracking": "string",
        "kernel_server_url": "string",
        "kernel_id": "string",
        "kernel_cwd": "string",
        "generation": "integer",
        "spare_kernels_ready": "integer",
        "busy": "boolean",
        "running_execution": "integer",
        "latest_execution": "integer",
        "kernels": "array",
        "charts": "object",
        "config_files": "array",
        "joined": "object",
    },
)


@arguments
class ListPythonVariablesArgs:
    include_imports: bool = arg(
        Flag(),
        "Also list imports: modules, and functions and classes defined outside the cells.",
        False,
        Spelling(("--imports",)),
    )
    include_modules: bool = arg(
        Flag(), "The same as include_imports (its earlier name, kept).", False, Spelling(("--modules",))
    )
    kernel: str | None = arg(KNOWN_KERNEL)


LIST_PYTHON_VARIABLES = Tool(
    "list_python_variables",
    "The user's variables in the live namespace, without running a cell: name, type, size, shape or "
    "length, shallow size, and the execution (In [N]) that last bound each. No `_` names or IPython "
    "internals; imports (modules, and functions and classes no cell defined) only with "
    f"include_imports. {_BESIDE_A_CELL}",
    ListPythonVariablesArgs,
    Annotations(read_only=True),
    (
        Verb(
            ("vars",),
            "the user's variables in the live namespace, without running a cell",
            "warmkernel vars --imports              every variable, imported modules, functions and "
            "classes too",
        ),
    ),
    output={
        "variables": "array",
        "total": "integer",
        "imports_hidden": "integer",
        "modules_hidden": "integer",
        "summary_status": "string",
        "during_execution": "integer",
    },
)


@arguments
class InspectPythonVariableArgs:
    name: str = arg(
        VariablePath(),
        'A variable name or a dotted attribute path, e.g. "df" or "df.columns"; nothing else is evaluated.',
        cli=Spelling(metavar="NAME"),
    )
    kernel: str | None = arg(KNOWN_KERNEL)


INSPECT_PYTHON_VARIABLE = Tool(
    "inspect_python_variable",
    "A compact typed summary of one variable as JSON, without running a cell (In, Out, _ and the "
    "numbering stay untouched). DataFrames: shape, column dtypes, nulls, describe, sample rows; "
    "arrays: shape, dtype, min/max/mean, sample; containers: length, element types, first items (a "
    "dict's with their values); functions and classes: signature and doc. size_bytes is the shallow "
    "size, as list_python_variables says it; deep_size_bytes (pandas) counts what object columns "
    f"hold too. Past the time budget ({DECLARED['inspect_timeout_s'].default:g} s), type and size only. "
    f"{_BESIDE_A_CELL}",
    InspectPythonVariableArgs,
    Annotations(read_only=True),
    (
        Verb(
            ("inspect",),
            "a typed summary of one variable, without running a cell",
            "warmkernel inspect df.columns          a typed summary of df.columns",
        ),
    ),
    # Beside these, a summary carries the facts of its kind (shape, dtypes, sample, ...).
    output={
        "name": "string",
        "type": "string",
        "size_bytes": "integer",
        "size_kind": "string",
        "deep_size_bytes": "integer",
        "summary_status": "string",
        "kind": "string",
        "execution": "integer",
        "during_execution": "integer",
    },
)


@arguments
class ListPythonKernelsArgs:
    """None: the tool is about every kernel."""


LIST_PYTHON_KERNELS = Tool(
    "list_python_kernels",
    "The workspace's kernels: name, state, generation, pid, memory, executions, the running cell, "
    "the bound notebook and idle time. main always exists; any tool's kernel parameter starts "
    "another by name.",
    ListPythonKernelsArgs,
    Annotations(read_only=True),
    (
        Verb(
            ("kernels",),
            "the workspace's kernels: state, memory, executions, notebook, idle time",
            "warmkernel kernels                     which kernels run, and what each is doing",
        ),
    ),
    output={"kernels": "array"},
)


@arguments
class StopPythonKernelArgs:
    name: str = arg(
        KernelName(optional=False), 'The kernel to stop, e.g. "train".', cli=Spelling(metavar="NAME")
    )


STOP_PYTHON_KERNEL = Tool(
    "stop_python_kernel",
    "Stop one kernel and every process it started; a running cell becomes `killed`. Its records stay "
    "readable; its next use starts a fresh kernel (main too).",
    StopPythonKernelArgs,
    Annotations(read_only=False, destructive=True),
    (
        Verb(
            ("stop-kernel",),
            "stop one kernel; its records stay readable (`warmkernel stop` stops the daemon)",
            "warmkernel stop-kernel train           end the kernel train and its processes",
        ),
    ),
    output={"kernel": "string", "killed_execution": "integer"},
)
