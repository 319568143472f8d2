"""The programs that run inside the user's kernel (or beside it), and the code that installs them.

Each program is a file of this package that imports only the standard library: the kernel's
interpreter may not have warmkernel installed, so the server reads the file as text and sends
it. In the kernel each program is its own module in `sys.modules`, outside the user's namespace:
`common` (the JSON answer format and the one pair of cell hooks) is loaded first, once per
kernel, and hands what the others need (`common.rebound`, `common.follow`) to their `install`;
`summaries` (variable inspection) at every kernel start, `cell_facts` (notebook mode) when the
first notebook cell runs in a kernel.
`parent_watch` runs beside the kernel, as the owned Jupyter Server's main program. `stamps` runs
once per question in a namespace of its own (`run_once`) and stays nowhere.

Code sent from here is silent and one expression: it binds no user name.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

Program = Literal["common", "summaries", "cell_facts", "parent_watch", "stamps"]
Part = Literal["summaries", "cell_facts"]
"""A program that answers the server's questions."""
Resident = Literal["common", "summaries", "cell_facts"]
"""A program that lives in a module of the kernel."""

MODULES: dict[Resident, str] = {
    "common": "_warmkernel_common",
    # The inspection program keeps its first name: a warmkernel installed in the kernel, of any
    # version, finds the summarizer registry by it (`warmkernel.inspection`).
    "summaries": "_warmkernel_helper",
    "cell_facts": "_warmkernel_notebook",
}
"""Where each program lives in the kernel's `sys.modules`."""
INSPECTION_MODULE = MODULES["summaries"]
_SYS_MODULES = "_warmkernel_modules"
"""`sys.modules`, put among the builtins when the inspection program loads (a fresh namespace):
the user's own names (`__import__ = None`, a variable `sys`) cannot hide it from later questions."""
_PUBLISH_MODULES = (
    f"__import__('builtins').__dict__.setdefault({_SYS_MODULES!r}, __import__('sys').modules)\n"
)


def _path(program: Program) -> Path:
    return Path(__file__).with_name(f"{program}.py")


def run_by_path(program: Program) -> str:
    """`python -c` text that runs the program as `__main__` from its file: short in `ps`, and,
    unlike `python FILE`, it does not put the file's directory first on `sys.path`, where
    a program's file name could shadow a package the user imports."""
    return f"import runpy; runpy.run_path({str(_path(program))!r}, run_name='__main__')"


@functools.cache
def text(program: Program) -> str:
    """The program's source, as sent to the kernel (or run beside it)."""
    return _path(program).read_text(encoding="utf-8")


def inspection_install_code(summarizers: Sequence[str], sample_rows: int) -> str:
    """Silent code that loads the inspection program (with `common`) and starts it."""
    return _PUBLISH_MODULES + _install_code(
        "summaries", f"part.install(shell, common.rebound, {list(summarizers)!r}, {sample_rows!r})"
    )


def notebook_install_code() -> str:
    """Silent code that loads the notebook program (with `common`, if not there yet) and starts it."""
    return _install_code(
        "cell_facts",
        "part.install(shell, common.rebound), common.follow(part.cell_started, part.cell_ended)",
    )


def run_once(program: Program, call: str) -> str:
    """An expression: `call` (e.g. `stamp([...])`) evaluated in a fresh namespace that ran the
    program's text; nothing of it stays in the kernel."""
    return (
        "(lambda namespace: (\n"
        f"    exec(compile({text(program)!r}, {str(_path(program))!r}, 'exec'), namespace),\n"
        f"    eval({call!r}, namespace),\n"
        "))({})[-1]"
    )


def question(part: Part, call: str) -> str:
    """The expression that asks `part` `call` (e.g. `facts([3])`) and reads as its JSON answer."""
    return f"{_module(MODULES['common'])}.answer({_module(MODULES[part])}.{call})"


def is_not_loaded(ename: str, evalue: str, part: Part) -> bool:
    """Whether a question to `part` failed because it (or `common`) is not in the kernel."""
    if ename == "NameError":  # a kernel warmkernel did not start (restarted from an IDE)
        return _SYS_MODULES in evalue
    return ename == "KeyError" and any(repr(MODULES[name]) in evalue for name in ("common", part))


def _install_code(part: Part, start: str) -> str:
    """`common` (unless loaded), then `part`, then `start` over the names `common`, `part`, `shell`.

    `common.install` hooks into executions once, whichever part comes first."""
    return (
        f"(lambda common, part, shell: (common.install(shell), {start}))(\n"
        f"    {_SYS_MODULES}.get({MODULES['common']!r}) or {_loaded('common')},\n"
        f"    {_loaded(part)},\n"
        "    get_ipython(),\n"
        ")"
    )


def _loaded(program: Resident) -> str:
    """An expression: a new module `MODULES[program]` that ran the program's text, registered."""
    name = MODULES[program]
    return (
        "(lambda module: (\n"
        f"    exec(compile({text(program)!r}, {str(_path(program))!r}, 'exec'), module.__dict__),\n"
        f"    {_SYS_MODULES}.__setitem__({name!r}, module),\n"
        "    module,\n"
        f"))({_SYS_MODULES}['sys'].__class__({name!r}))[-1]"
    )


def _module(name: str) -> str:
    return f"{_SYS_MODULES}[{name!r}]"
