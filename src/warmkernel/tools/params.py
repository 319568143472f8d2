"""The parameters and reply fields several tools share, each declared once.

A tool's arguments take one of these by its name (`kernel: str | None = arg(KNOWN_KERNEL)`); the
MCP face and the CLI also ask whether a tool has one (`KNOWN_KERNEL in tool.params`: a call
that starts no kernel).
"""

from __future__ import annotations

from dataclasses import replace

from warmkernel.tools.kinds import Choice, Integer, JsonType, KernelName, Param, Spelling, Text
from warmkernel.types import READABLE_STREAMS

_N = Spelling(metavar="N")
NOTEBOOK = Param(
    "path",
    Text(optional=True),
    "The .ipynb file, relative to the workspace. Default: the server's configured notebook.",
    None,
    Spelling(
        metavar="NB",
        from_cwd=True,
        help="the .ipynb file, from the current directory, inside the workspace (default: the configured "
        "notebook)",
    ),
)
EXECUTION = Param(
    "execution",
    Integer("execution_not_found", 1, optional=True),
    "Execution number N. Default: the running execution, else the most recent one.",
    None,
    _N,
)
STREAM = Param(
    "stream",
    Choice("invalid_stream", READABLE_STREAMS),
    "Which stream: combined (everything in order), stdout, stderr, result (values and displays), traceback.",
    "combined",
    Spelling(("--stream",)),
)
MAX_CHARS = Param(
    "max_chars",
    Integer("invalid_max_chars", 1, optional=True),
    "Clip each returned line to this many characters (stored text is unchanged).",
    None,
    Spelling(("--max-chars",), "K"),
)

KERNEL = Param(
    "kernel",
    KernelName(),
    'Which kernel: a short name such as "train"; a new name starts a kernel beside the others '
    "(same workspace and interpreter). Default: main.",
    None,
    Spelling(("--kernel",), "NAME"),
)
KNOWN_KERNEL = replace(
    KERNEL,
    description='Which kernel: one the workspace has (list_python_kernels), such as "train"; this '
    "call starts none. Default: main.",
)
NOTEBOOK_KERNEL = replace(
    KERNEL,
    description="Which kernel runs the notebook. Default: the kernel already bound to it, else a new one "
    "named after it (nb-<stem>), so main stays free.",
)

RECORD_FACTS: dict[str, JsonType] = {
    "execution": "integer",
    "state": "string",
    "elapsed_s": "number",
    "generation": "integer",
    "error": "object",
    "end_reason": "string",
    "lines": "integer",
}
EXECUTION_REPLY: dict[str, JsonType] = {
    **RECORD_FACTS,
    "output": "string",
    "omitted_lines": "array",
    "images": "array",
    "images_not_shown": "array",
    "waited_s": "number",
    "returned_because": "string",
    "last_lines": "array",
    "progress": "object",
    "prompt": "string",
    "password": "boolean",
    "joined": "object",
    "kernel_starting": "string",
}
"""A run or wait reply: the record's facts, then the output, or where a running cell is, or its prompt."""
EXECUTIONS = 'Which executions: numbers and inclusive ranges joined by commas, e.g. "3,5-9", or one number.'
