"""The server's half of the kernel-side inspection helper: the code that installs it, the
questions put to it, and the shapes of its answers (read once, by `session.variables`).

The helper itself (`kernel/inside/summaries.py`) runs inside the kernel; `kernel.inside` loads
it silently at every kernel start, as text, so it works in an interpreter that does not have
warmkernel installed. Questions are user expressions of a silent execute request: they leave
`In`, `Out`, `_`, the history and the execution count untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from warmkernel.kernel import inside
from warmkernel.tools.kinds import check_path


class VariableRow(TypedDict):
    """One line of list_python_variables."""

    name: str
    type: str
    size_bytes: int | None
    shape: list[int] | None
    length: int | None
    execution: int | None
    """The execution that last bound the name to a new object; None if bound outside a cell."""


class VariableListing(TypedDict):
    variables: list[VariableRow]
    total: int
    imports_hidden: int
    """Modules, and functions and classes no cell defined, left out unless asked for."""
    modules_hidden: int
    """Of those, the modules."""
    summary_status: str
    """`ok`, or `timeout` when sizes and shapes ran out of time (rows past that point lack them)."""
    during_execution: int | None
    """The execution that was running while the listing was made (its values may be mid-update)."""


Summary = dict[str, Any]
"""`name`, `type`, `size_bytes`, `summary_status` (`ok` or `timeout`), then `kind` and its facts;
`during_execution` when it was made beside a running cell."""


def install_code(summarizers: Sequence[str], sample_rows: int) -> str:
    """Silent code that loads the helper into its own module and starts it; binds no user name."""
    return inside.inspection_install_code(summarizers, sample_rows)


def list_expression(include_imports: bool, budget_s: float) -> str:
    return inside.question("summaries", f"list_variables({include_imports!r}, {budget_s!r})")


def inspect_expression(path: str, budget_s: float) -> str:
    return inside.question("summaries", f"inspect_variable({check_path(path)!r}, {budget_s!r})")
