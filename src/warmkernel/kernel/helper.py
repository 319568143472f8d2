"""The server's half of the kernel-side helper: the code that installs it, the questions put to
it, and its answers, parsed once into typed values.

The helper itself (`_kernel_helper_source.py`) runs inside the kernel. It is read here as text
and injected silently at every kernel start, so it works in an interpreter that does not have
warmkernel installed. Questions are user expressions of a silent execute request: they leave
`In`, `Out`, `_`, the history and the execution count untouched.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from warmkernel.errors import WarmkernelError
from warmkernel.kernel import _kernel_helper_source
from warmkernel.kernel.channel import ExpressionValue
from warmkernel.tool_specs import check_path

MODULE_NAME = _kernel_helper_source.MODULE_NAME
_SOURCE_FILE = Path(_kernel_helper_source.__file__)
_HELPER = f"__import__('sys').modules[{MODULE_NAME!r}]"


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
    modules_hidden: int
    summary_status: str
    """`ok`, or `timeout` when sizes and shapes ran out of time (rows past that point lack them)."""


Summary = dict[str, Any]
"""`name`, `type`, `size_bytes`, `summary_status` (`ok` or `timeout`), then `kind` and its facts."""


@functools.cache
def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def install_code(summarizers: Sequence[str]) -> str:
    """Silent code that loads the helper into its own module and starts it; binds no user name."""
    return load_code(_SOURCE_FILE, MODULE_NAME, f"install(get_ipython(), {list(summarizers)!r})")


def load_code(source_file: Path, module_name: str, start: str) -> str:
    """Silent code that runs a kernel-side source file as module `module_name`, then calls
    `module.<start>`; binds no user name."""
    return (
        "(lambda module: (\n"
        f"    exec(compile({_source(source_file)!r}, {str(source_file)!r}, 'exec'), module.__dict__),\n"
        f"    __import__('sys').modules.__setitem__({module_name!r}, module),\n"
        f"    module.{start},\n"
        f"))(__import__('types').ModuleType({module_name!r}))"
    )


def list_expression(include_modules: bool, budget_s: float) -> str:
    return f"{_HELPER}.list_variables({include_modules!r}, {budget_s!r})"


def inspect_expression(path: str, budget_s: float) -> str:
    return f"{_HELPER}.inspect_variable({check_path(path)!r}, {budget_s!r})"


def read_listing(value: ExpressionValue) -> VariableListing:
    answer = _answer(value)
    return VariableListing(
        variables=answer["variables"],
        total=answer["total"],
        modules_hidden=answer["modules_hidden"],
        summary_status=answer["summary_status"],
    )


def read_summary(value: ExpressionValue) -> Summary:
    answer = _answer(value)
    summary = answer["summary"]
    if not isinstance(summary, dict):
        raise WarmkernelError("internal_error", f"the kernel-side helper sent a summary of {type(summary)}")
    return summary


def _answer(value: ExpressionValue) -> dict[str, Any]:
    if value.status != "ok":
        if value.ename == "KeyError" and MODULE_NAME in value.evalue:
            raise WarmkernelError(
                "inspection_failed",
                "the kernel-side helper is not loaded in this kernel (it failed at kernel start; "
                "the server log says why); reset_python() starts a kernel with it",
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
                "variable_not_found", f"{answer['message']}; list_python_variables() lists the names"
            )
        case _:
            raise WarmkernelError("inspection_failed", answer.get("message", "the kernel-side helper failed"))
