"""The server's half of the kernel-side inspection helper: the code that installs it, the
questions put to it, and its answers, parsed once into typed values.

The helper itself (`kernel/inside/summaries.py`) runs inside the kernel; `kernel.inside` loads
it silently at every kernel start, as text, so it works in an interpreter that does not have
warmkernel installed. Questions are user expressions of a silent execute request: they leave
`In`, `Out`, `_`, the history and the execution count untouched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypedDict

from warmkernel.errors import WarmkernelError
from warmkernel.kernel import inside
from warmkernel.kernel.channel import ExpressionValue
from warmkernel.replies.hints import call
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


def read_listing(value: ExpressionValue) -> VariableListing:
    answer = _answer(value)
    return VariableListing(
        variables=answer["variables"],
        total=answer["total"],
        imports_hidden=answer["imports_hidden"],
        modules_hidden=answer["modules_hidden"],
        summary_status=answer["summary_status"],
        during_execution=None,
    )


def read_summary(value: ExpressionValue) -> Summary:
    answer = _answer(value)
    summary = answer["summary"]
    if not isinstance(summary, dict):
        raise WarmkernelError("internal_error", f"the kernel-side helper sent a summary of {type(summary)}")
    return summary


def _answer(value: ExpressionValue) -> dict[str, Any]:
    if value.status != "ok":
        if inside.is_not_loaded(value.ename, value.evalue, "summaries"):
            raise WarmkernelError(
                "inspection_failed",
                "the kernel-side helper is not loaded in this kernel (it failed at kernel start; "
                f"the server log says why); {call('reset_python')} starts a kernel with it",
            )
        raise WarmkernelError("inspection_failed", f"the inspection raised {value.ename}: {value.evalue}")
    try:
        answer = json.loads(value.text)
    except ValueError as exc:
        raise WarmkernelError(
            "internal_error", f"the kernel-side helper sent no JSON: {value.text[:200]!r}"
        ) from exc
    match answer.get("status"):
        case "ok":
            return answer
        case "not_found":
            raise WarmkernelError(
                "variable_not_found", f"{answer['message']}; {call('list_python_variables')} lists the names"
            )
        case _:
            raise WarmkernelError("inspection_failed", answer.get("message", "the kernel-side helper failed"))
