"""Tool-call hints: the one place that writes a call a reply tells the model to make.

Arguments are written as JSON, as the model sends them: strings quoted and escaped
(`path="it's.ipynb"`, `query="a \\"b\\""`), numbers plain, `true`/`false`, `null`.

A reply speaks of one kernel (`speaking_of`, set by the face around each call): every hint it
gives to a tool that takes `kernel` carries that kernel's name, unless it is `main`, so the model
follows up on the kernel it asked about.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from warmkernel.config import Settings
from warmkernel.tool_specs import TOOLS_BY_NAME
from warmkernel.types import MAIN_KERNEL

Argument = str | int | float | bool | None

_KERNEL: ContextVar[str] = ContextVar("kernel", default=MAIN_KERNEL)


@contextmanager
def speaking_of(kernel: str) -> Iterator[None]:
    """Replies written inside are about `kernel`: its name goes into their headers and hints."""
    token = _KERNEL.set(kernel)
    try:
        yield
    finally:
        _KERNEL.reset(token)


def kernel_tag() -> str:
    """` · train` for a header of a kernel other than `main` (`In [3] · train · 1.2 s:`), else ""."""
    kernel = _KERNEL.get()
    return "" if kernel == MAIN_KERNEL else f" · {kernel}"


def call(tool: str, /, **arguments: Argument) -> str:
    """`tool(name=value, ...)` with each argument as JSON, in the order given, then the kernel
    spoken of when the tool takes one. `kernel=None` leaves the kernel out (the tool's default)."""
    if "kernel" not in arguments and _KERNEL.get() != MAIN_KERNEL and _takes_kernel(tool):
        arguments["kernel"] = _KERNEL.get()
    written = (
        f"{name}={json.dumps(value, ensure_ascii=False)}"
        for name, value in arguments.items()
        if not (name == "kernel" and value is None)
    )
    return f"{tool}({', '.join(written)})"


def _takes_kernel(tool: str) -> bool:
    declared = TOOLS_BY_NAME.get(tool)
    return declared is not None and any(param.name == "kernel" for param in declared.params)


def default_wait(settings: Settings) -> str:
    """How long run_python waits by default on this server (`10 s`), as text that mentions the wait
    says it, so it follows `--wait` instead of repeating a literal."""
    return f"{settings.default_wait_s:g} s"
