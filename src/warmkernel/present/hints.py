"""Tool-call hints: the one place that writes a call a reply tells the model to make.

Arguments are written as JSON, as the model sends them: strings quoted and escaped
(`path="it's.ipynb"`, `query="a \\"b\\""`), numbers plain, `true`/`false`, `null`.
"""

from __future__ import annotations

import json

from warmkernel.config import Settings

Argument = str | int | float | bool | None


def call(tool: str, /, **arguments: Argument) -> str:
    """`tool(name=value, ...)` with each argument as JSON, in the order given."""
    written = (f"{name}={json.dumps(value, ensure_ascii=False)}" for name, value in arguments.items())
    return f"{tool}({', '.join(written)})"


def default_wait(settings: Settings) -> str:
    """How long run_python waits by default on this server (`10 s`), as text that mentions the wait
    says it, so it follows `--wait` instead of repeating a literal."""
    return f"{settings.default_wait_s:g} s"
