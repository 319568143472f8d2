"""Every tool's declaration, in the order `tools/list` gives them, and each by its name.

The declarations are by group (`cell_tools`, `record_tools`, `kernel_tools`, `notebook_tools`), the
parameters several share in `params`. The faces give each tool a handler (`faces/handlers.py`); the
CLI builds its verbs from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from warmkernel.tools.cell_tools import (
    INTERRUPT_PYTHON,
    RESET_PYTHON,
    RUN_PYTHON,
    SEND_PYTHON_INPUT,
    WAIT_PYTHON,
)
from warmkernel.tools.kernel_tools import (
    INSPECT_PYTHON_VARIABLE,
    LIST_PYTHON_KERNELS,
    LIST_PYTHON_VARIABLES,
    PYTHON_STATUS,
    STOP_PYTHON_KERNEL,
)
from warmkernel.tools.kinds import DeclarationError, Tool
from warmkernel.tools.notebook_tools import (
    EXECUTIONS_TO_NOTEBOOK,
    NOTEBOOK_STATUS,
    RUN_NOTEBOOK_CELLS,
    WATCH_NOTEBOOK_FILE,
)
from warmkernel.tools.params import KERNEL, KNOWN_KERNEL, NOTEBOOK, NOTEBOOK_KERNEL
from warmkernel.tools.record_tools import (
    EXPORT_PYTHON_EXECUTIONS,
    LIST_PYTHON_EXECUTIONS,
    PYTHON_EXECUTION_STATUS,
    READ_PYTHON_OUTPUT,
    SEARCH_PYTHON_OUTPUT,
)

__all__ = ["KERNEL", "KNOWN_KERNEL", "NOTEBOOK", "NOTEBOOK_KERNEL", "TOOLS", "TOOLS_BY_NAME"]

TOOLS: tuple[Tool[Any], ...] = (
    RUN_PYTHON,
    PYTHON_STATUS,
    PYTHON_EXECUTION_STATUS,
    READ_PYTHON_OUTPUT,
    SEARCH_PYTHON_OUTPUT,
    WAIT_PYTHON,
    SEND_PYTHON_INPUT,
    INTERRUPT_PYTHON,
    RESET_PYTHON,
    LIST_PYTHON_EXECUTIONS,
    LIST_PYTHON_VARIABLES,
    INSPECT_PYTHON_VARIABLE,
    LIST_PYTHON_KERNELS,
    STOP_PYTHON_KERNEL,
    NOTEBOOK_STATUS,
    RUN_NOTEBOOK_CELLS,
    WATCH_NOTEBOOK_FILE,
    EXPORT_PYTHON_EXECUTIONS,
    EXECUTIONS_TO_NOTEBOOK,
)

TOOLS_BY_NAME: Mapping[str, Tool[Any]] = {tool.name: tool for tool in TOOLS}
if len(TOOLS_BY_NAME) != len(TOOLS):
    raise DeclarationError(f"two tools have one name: {sorted(t.name for t in TOOLS)}")
