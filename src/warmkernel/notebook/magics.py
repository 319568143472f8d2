"""What a magic or `!command` in a cell does to the namespace, read from the call that IPython's
input transforms make of it (`%time f(x)` runs as `get_ipython().run_line_magic("time", "f(x)")`).

`magic_effect(call)` decides it as a frozen `MagicEffect`, which the cell analysis applies.
The rules, each pinned by a row in tests/unit/test_analysis.py:

- `%time`, `%prun` and the bodies of `%%time`, `%%prun`, `%%capture` run as code of the cell;
  `%timeit`/`%%timeit` as code whose bindings do not persist. Other cell magic bodies are
  opaque. `%%capture out` and `--out`/`--err` of script magics (`%%bash --out v`) bind names.
- `$name` and `{name}` in shell commands and magic lines are optional reads, as IPython
  expands them only when the name exists; so is `x` in `x?` and the other help magics.
- `%run`, `%store`, `%reset`, `%rerun` and the shell's own doors to the namespace
  (`get_ipython().user_ns`, `run_cell`, `push`) may read and define anything.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_CONSERVATIVE_MAGICS = frozenset({"run", "store", "reset", "reset_selective", "rerun"})
_CONSERVATIVE_SHELL_ATTRS = frozenset({"user_ns", "user_global_ns", "run_cell", "ex", "ev", "push"})
_HELP_MAGICS = frozenset({"pinfo", "pinfo2", "psource", "pdef", "pdoc", "pfile"})
_CODE_MAGIC_VALUED_OPTIONS = {
    "time": frozenset[str](),
    "prun": frozenset({"-l", "-s", "-T", "-D"}),
    "timeit": frozenset({"-n", "-r", "-p"}),
}
"""Magics whose argument is Python code, with the options that take a separate value."""
_SCRIPT_MAGICS = frozenset({"bash", "sh", "script", "perl", "ruby", "python", "python2", "python3", "pypy"})
_SCRIPT_OUTPUT = re.compile(r"--(?:out|err)\s+([^\W\d]\w*)")
_OPTION = re.compile(r"\s*(--[\w-]+|-\w)(\S*)")
_OPTION_VALUE = re.compile(r"\s+\S+")
_IDENTIFIER = re.compile(r"\s*([^\W\d]\w*)")
_INTERPOLATION = re.compile(r"(?<!\$)\$([^\W\d]\w*)|\{([^\W\d]\w*)[^{}]*\}")
"""`$name`, `{name}` and `{name.attr}` as IPython's var_expand reads them; `$$` escapes."""


@dataclass(frozen=True)
class MagicEffect:
    """What one magic or `!command` does, in the order it does it: mentions, code, binds."""

    mentions: tuple[str, ...] = ()
    """Names it reads only if some cell binds them: interpolated names, a help magic's target."""
    code: str | None = None
    """Python it runs in the user namespace, to analyse in the cell's state."""
    persists: bool = True
    """Whether the bindings of `code` outlive the magic (not for `%timeit`)."""
    binds: tuple[str, ...] = ()
    """Names it binds once its code ran (`%%capture out`, `%%bash --out v`)."""
    conservative: bool = False
    """It may read and define any name (`%run`, `%store`, ...)."""


def magic_effect(call: ast.Call) -> MagicEffect | None:
    """What a call does if IPython's transforms made it of a magic or `!command`; None for any
    other call."""
    match _shell_call(call):
        case "run_line_magic", [name, line]:
            return _line_magic(name, line)
        case "run_cell_magic", [name, line, body]:
            return _cell_magic(name, line, body)
        case "system" | "getoutput", [command]:
            return MagicEffect(mentions=_interpolated(command))
        case _:
            return None


def opens_the_namespace(node: ast.Attribute) -> bool:
    """`get_ipython().user_ns` and the shell's other doors: code through them may read and
    define anything."""
    return node.attr in _CONSERVATIVE_SHELL_ATTRS and _is_get_ipython(node.value)


def _line_magic(name: str, line: str) -> MagicEffect:
    if name in _CONSERVATIVE_MAGICS:
        return MagicEffect(conservative=True)
    if name in _HELP_MAGICS:
        target = _IDENTIFIER.match(line)
        return MagicEffect(mentions=(target.group(1),) if target else ())
    if name in _CODE_MAGIC_VALUED_OPTIONS:
        return MagicEffect(
            code=_code_after_options(line, _CODE_MAGIC_VALUED_OPTIONS[name]), persists=name != "timeit"
        )
    return MagicEffect(mentions=_interpolated(line))


def _cell_magic(name: str, line: str, body: str) -> MagicEffect:
    if name == "capture":
        output = _capture_output(line)
        return MagicEffect(code=body, binds=(output,) if output else ())
    if name == "timeit":  # the line after the options is setup code
        setup = _code_after_options(line, _CODE_MAGIC_VALUED_OPTIONS[name])
        return MagicEffect(code=f"{setup}\n{body}", persists=False)
    if name in _CODE_MAGIC_VALUED_OPTIONS:
        return MagicEffect(code=body)
    outputs = _SCRIPT_OUTPUT.finditer(line) if name in _SCRIPT_MAGICS else ()
    return MagicEffect(mentions=_interpolated(line), binds=tuple(output.group(1) for output in outputs))


def _interpolated(text: str) -> tuple[str, ...]:
    return tuple(match.group(1) or match.group(2) for match in _INTERPOLATION.finditer(text))


def _code_after_options(line: str, valued: frozenset[str]) -> str:
    """`-n 10 -q f(x)` → `f(x)`: the code a code magic runs, after its options."""
    pos = 0
    while option := _OPTION.match(line, pos):
        pos = option.end()
        if option.group(1) in valued and not option.group(2) and (value := _OPTION_VALUE.match(line, pos)):
            pos = value.end()
    return line[pos:].strip()


def _capture_output(line: str) -> str | None:
    """The name `%%capture`'s line binds its output to, if it names one."""
    return next((word for word in line.split() if not word.startswith("-")), None)


def _shell_call(node: ast.Call) -> tuple[str, list[str]] | None:
    """`get_ipython().METHOD("text", ...)`, as IPython's transforms write a magic or `!command`:
    the method and its texts; None for any other call."""
    func = node.func
    if not isinstance(func, ast.Attribute) or not _is_get_ipython(func.value) or node.keywords:
        return None
    texts = [text for arg in node.args if (text := _text(arg)) is not None]
    return (func.attr, texts) if len(texts) == len(node.args) else None


def _is_get_ipython(node: ast.expr) -> bool:
    """`get_ipython()`, the receiver of every call IPython's transforms make."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "get_ipython"
        and not node.args
        and not node.keywords
    )


def _text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
