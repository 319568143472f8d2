"""The project's vocabulary: ids, stream names and states, named once and imported everywhere."""

from __future__ import annotations

import re
from enum import Enum
from typing import Literal, NewType

ExecutionNumber = NewType("ExecutionNumber", int)
"""warmkernel's own execution number (1, 2, ...), never IPython's `execution_count`."""

Generation = NewType("Generation", int)
"""Which kernel process ran a record: 1 for the first kernel, +1 for every replacement."""

MsgId = NewType("MsgId", str)
"""A Jupyter message id, used to route replies and IOPub messages to their request."""

MAIN_KERNEL = "main"
"""The kernel a call means when it names none (notebook tools: the notebook's own kernel)."""
KERNEL_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
"""What a kernel's name may be: short, lower case, safe in a path and a command line."""

MAX_PORT = 65535
"""The highest TCP port; an HTTP face asked to listen past it is refused (0: a free one)."""

StreamName = Literal["stdout", "stderr", "result", "traceback"]
"""A stream that output is appended to."""

ReadableStream = Literal["combined", "stdout", "stderr", "result", "traceback"]
"""A stream that can be read or searched: the four appendable ones plus `combined`."""

ExportFormat = Literal["ipynb", "py", "md", "html"]
"""A document executions are exported as: a notebook, a `# %%` script, Markdown, an HTML page."""
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("ipynb", "py", "md", "html")

APPENDABLE_STREAMS: tuple[StreamName, ...] = ("stdout", "stderr", "result", "traceback")
READABLE_STREAMS: tuple[ReadableStream, ...] = ("combined", *APPENDABLE_STREAMS)


class ExecutionState(str, Enum):
    """Lifecycle of one execution: `running` (and `awaiting_input` while it asks), then one terminal state."""

    RUNNING = "running"
    AWAITING_INPUT = "awaiting_input"
    """The cell is blocked in `input()` or `getpass()`; send_python_input answers it."""
    COMPLETED = "completed"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    KILLED = "killed"
    """The kernel was reset while the cell ran."""
    DIED = "died"
    """The kernel process exited while the cell ran."""

    @property
    def finished(self) -> bool:
        return self not in (ExecutionState.RUNNING, ExecutionState.AWAITING_INPUT)


class KernelState(str, Enum):
    """Where a session's kernel is in its life; `session/slot.py` guards the moves between them."""

    STOPPED = "stopped"
    """No kernel and none starting: not started yet, or stopped (a client, the idle stop)."""
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    """The last start failed; the next call that needs a kernel tries again."""
    ENDING = "ending"
    """The kernel is being ended (a reset, a stop, a death, the memory ceiling); cells wait."""
