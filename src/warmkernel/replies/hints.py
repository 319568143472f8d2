"""Tool-call hints: the one place that writes a call a reply tells the reader to make.

A model reads MCP calls, with arguments written as JSON, as the model sends them: strings quoted
and escaped (`path="it's.ipynb"`, `query="a \\"b\\""`), numbers plain, `true`/`false`, `null`.
A person or a shell-only agent at the command line reads the same call as the `warmkernel`
command that makes it (`warmkernel wait 7`), spelled from the tool's declaration: its verb, its
positional arguments and its flags, each word quoted for a POSIX shell. The face a reply goes to
is set for the length of one tool call (`spoken_to`).

A reply speaks of one kernel (`speaking_of`, set by the face around each call): every hint it
gives to a tool that takes `kernel` carries that kernel's name, unless it is `main`, so the reader
follows up on the kernel it asked about.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from warmkernel.settings.model import Settings
from warmkernel.tools.catalog import TOOLS_BY_NAME
from warmkernel.tools.kinds import Flag, Tool, Verb
from warmkernel.types import MAIN_KERNEL

Argument = str | int | float | bool | None
Face = Literal["mcp", "cli"]

_face: ContextVar[Face] = ContextVar("warmkernel_hint_face", default="mcp")


@contextmanager
def spoken_to(face: Face) -> Iterator[None]:
    """Hints written inside this block are spelled for `face`."""
    token = _face.set(face)
    try:
        yield
    finally:
        _face.reset(token)


_kernel: ContextVar[str] = ContextVar("kernel", default=MAIN_KERNEL)


@contextmanager
def speaking_of(kernel: str) -> Iterator[None]:
    """Replies written inside are about `kernel`: its name goes into their headers and hints."""
    token = _kernel.set(kernel)
    try:
        yield
    finally:
        _kernel.reset(token)


def kernel_tag() -> str:
    """` · train` for a header of a kernel other than `main` (`In [3] · train · 1.2 s:`), else ""."""
    kernel = _kernel.get()
    return "" if kernel == MAIN_KERNEL else f" · {kernel}"


def call(tool: str, /, **arguments: Argument) -> str:
    """The call as the current face spells it: `tool(name=value, ...)`, or `warmkernel VERB ...`;
    with the kernel spoken of when the tool takes one (`kernel=None` leaves it out)."""
    if "kernel" not in arguments and _kernel.get() != MAIN_KERNEL and _takes_kernel(tool):
        arguments["kernel"] = _kernel.get()
    if arguments.get("kernel", "") is None:
        del arguments["kernel"]
    if _face.get() == "cli":
        return command(tool, **arguments)
    written = (f"{name}={json.dumps(value, ensure_ascii=False)}" for name, value in arguments.items())
    return f"{tool}({', '.join(written)})"


def command(tool_name: str, /, **arguments: Argument) -> str:
    """The `warmkernel` command that makes this call: the tool's verb (the first one whose fixed
    arguments agree), positional arguments in declaration order, then flags. An argument at its
    default (or None) is left out."""
    tool = TOOLS_BY_NAME[tool_name]
    verb = _verb(tool, arguments)
    positional: list[str] = []
    flags: list[str] = []
    for param in tool.params:
        if param.name not in arguments or param.name in verb.fixed:
            continue
        value = arguments[param.name]
        default = verb.defaults.get(param.name, param.default)
        if value is None or (value == default and not param.required):
            continue
        if param.cli.consts:
            flags += [flag for flag, const, _ in param.cli.consts if const == value]
        elif isinstance(param.kind, Flag):
            flags.append(param.cli.flags[-1])
        elif param.cli.flags:
            flags += [param.cli.flags[-1], _word(value)]
        else:
            positional.append(_word(value))
    return " ".join(["warmkernel", *verb.words, *positional, *flags])


def _verb(tool: Tool, arguments: Mapping[str, Any]) -> Verb:
    for verb in tool.verbs:
        if all(arguments.get(name, value) == value for name, value in verb.fixed.items()):
            return verb
    return tool.verbs[0]


def _word(value: Argument) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return shlex.quote(text)


def _takes_kernel(tool: str) -> bool:
    declared = TOOLS_BY_NAME.get(tool)
    return declared is not None and any(param.name == "kernel" for param in declared.params)


def default_wait(settings: Settings) -> str:
    """How long run_python waits by default on this server (`10 s`), as text that mentions the wait
    says it, so it follows `--wait` instead of repeating a literal."""
    return f"{settings.default_wait_s:g} s"
