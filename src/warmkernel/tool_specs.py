"""Every tool's one declaration: name, description, annotations, parameters and CLI verbs.

From a `Param` come its MCP input schema (`Param.json_schema`), its argument check
(`Param.check`) and its command-line spelling (`Spelling`, read by `cli.py`); from a `Tool` come
the tool's input schema, the check of a whole call (`Tool.parse`) and its verbs (`Verb`).
`mcp_server.py` adds the handlers, `cli.py` the argparse parsers. Pure data and checks: the CLI
imports this module, so it loads nothing of the server (no MCP SDK, session or kernel).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from warmkernel.errors import ErrorCode, WarmkernelError
from warmkernel.types import READABLE_STREAMS

REQUIRED: Any = object()
"""The default of a parameter the caller must give."""

MAX_PATH_CHARS = 200
_PATH = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
"""An identifier, or identifiers joined by dots (`df`, `df.columns`, `model.config`)."""


def check_path(name: str) -> str:
    """`name` if it is an identifier or a dotted attribute path; `invalid_name` otherwise."""
    if len(name) > MAX_PATH_CHARS or not _PATH.fullmatch(name):
        raise WarmkernelError(
            "invalid_name",
            f"{name[:MAX_PATH_CHARS]!r} is not a variable name; give an identifier or a dotted attribute "
            'path such as "df" or "df.columns" (nothing else is evaluated)',
        )
    return name


def _fail(code: ErrorCode, name: str, value: Any, valid: str) -> WarmkernelError:
    return WarmkernelError(code, f"{name}={value!r} is not valid; {name} must be {valid}")


def _integer(value: Any) -> int | None:
    """`value` as an int if it is one (JSON may send 5.0 for 5); bools are not integers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _finite(value: Any) -> float | None:
    """`value` as a float if it is a finite JSON number; bools are not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _nullable(json_type: str, optional: bool) -> str | list[str]:
    return [json_type, "null"] if optional else json_type


# -- kinds: what a parameter's value may be --------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A string (or null when optional); any string is valid here, its meaning is checked later."""

    code: ErrorCode = "invalid_arguments"
    optional: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": _nullable("string", self.optional)}

    def check(self, name: str, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str):
            raise _fail(self.code, name, value, "a string" + (" or null" if self.optional else ""))
        return value


@dataclass(frozen=True)
class Integer:
    """A whole number at least `minimum` (or null when optional)."""

    code: ErrorCode
    minimum: int
    optional: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": _nullable("integer", self.optional), "minimum": self.minimum}

    def check(self, name: str, value: Any) -> int | None:
        if value is None and self.optional:
            return None
        number = _integer(value)
        if number is None or number < self.minimum:
            valid = f"an integer >= {self.minimum}" + (" or null" if self.optional else "")
            raise _fail(self.code, name, value, valid)
        return number


@dataclass(frozen=True)
class Seconds:
    """A finite number of seconds, >= 0 (> 0 when `positive`: a silence of 0 would end every wait)."""

    optional: bool = False
    positive: bool = False

    def schema(self) -> dict[str, Any]:
        bound = "exclusiveMinimum" if self.positive else "minimum"
        return {"type": _nullable("number", self.optional), bound: 0}

    def check(self, name: str, value: Any) -> float | None:
        if value is None and self.optional:
            return None
        seconds = _finite(value)
        if seconds is not None and (seconds > 0 if self.positive else seconds >= 0):
            return seconds
        valid = f"a finite number of seconds {'>' if self.positive else '>='} 0"
        raise _fail("invalid_timeout", name, value, valid + (" or null" if self.optional else ""))


@dataclass(frozen=True)
class Flag:
    """True or false."""

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def check(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise _fail("invalid_arguments", name, value, "true or false")
        return value


@dataclass(frozen=True)
class Choice:
    """One of a few strings."""

    code: ErrorCode
    choices: tuple[str, ...]

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.choices)}

    def check(self, name: str, value: Any) -> str:
        if value not in self.choices:
            raise _fail(
                self.code, name, value, "one of " + ", ".join(f'"{choice}"' for choice in self.choices)
            )
        return value


@dataclass(frozen=True)
class Cell:
    """A notebook cell: its id, or its 0-based index among the code cells."""

    def schema(self) -> dict[str, Any]:
        return {"type": ["string", "integer"]}

    def check(self, name: str, value: Any) -> str | int:
        if isinstance(value, str):
            return value
        index = _integer(value)
        if index is None:
            raise _fail("invalid_arguments", name, value, "a cell id or a 0-based code-cell index")
        return index


@dataclass(frozen=True)
class Cells:
    """Which notebook cells: "stale", "all", or a non-empty list of cells."""

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": ["string", "integer"]}}]}

    def check(self, name: str, value: Any) -> str | list[str | int]:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(Cell().check(name, item) is not None for item in value):
            return value
        raise _fail(
            "invalid_arguments", name, value, '"stale", "all", or a non-empty list of cell ids and indices'
        )


@dataclass(frozen=True)
class VariablePath:
    """A variable name or a dotted attribute path; nothing else is ever evaluated."""

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}

    def check(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise _fail(
                "invalid_name", name, value, 'a variable name or dotted attribute path such as "df.columns"'
            )
        return check_path(value)


Kind = Text | Integer | Seconds | Flag | Choice | Cell | Cells | VariablePath


# -- parameters, tools and verbs -----------------------------------------------------------------


@dataclass(frozen=True)
class Spelling:
    """How a parameter is written on the command line.

    No `flags`: a positional argument named `metavar`. `consts`: flags that each store one choice
    (`--regex` for query_mode="regex"). `from_cwd`: a path the CLI makes absolute, because the
    tools resolve relative paths against the workspace, not the caller's directory.
    """

    flags: tuple[str, ...] = ()
    metavar: str | None = None
    consts: tuple[tuple[str, str, str], ...] = ()
    """(flag, value, help) per flag."""
    from_cwd: bool = False


@dataclass(frozen=True)
class Param:
    """One tool parameter, declared once."""

    name: str
    kind: Kind
    description: str
    default: Any = REQUIRED
    cli: Spelling = Spelling()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def json_schema(self) -> dict[str, Any]:
        schema = self.kind.schema() | {"description": self.description}
        if not self.required:
            schema["default"] = self.default
        return schema

    def check(self, value: Any) -> Any:
        return self.kind.check(self.name, value)


@dataclass(frozen=True)
class Annotations:
    """MCP tool annotations as plain data (the world a tool touches is always closed)."""

    read_only: bool
    destructive: bool = False
    idempotent: bool = True


@dataclass(frozen=True)
class Verb:
    """A CLI verb that calls the tool: `words` like ("read",) or ("nb", "run").

    `fixed` are arguments the verb always sends (its parser does not offer them); `defaults`
    replace a tool default on the command line only.
    """

    words: tuple[str, ...]
    help: str
    example: str
    """`warmkernel ...` lines, each with what it does."""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return " ".join(self.words)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: tuple[Param, ...]
    annotations: Annotations
    verbs: tuple[Verb, ...]

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.params},
            "additionalProperties": False,
        }
        required = [p.name for p in self.params if p.required]
        if required:
            schema["required"] = required
        return schema

    def parse(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check every argument and fill in defaults; unknown or missing ones are `invalid_arguments`."""
        known = {p.name for p in self.params}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise WarmkernelError(
                "invalid_arguments",
                f"{self.name} has no parameter {', '.join(unknown)}; its parameters are "
                + (", ".join(sorted(known)) or "none"),
            )
        values: dict[str, Any] = {}
        for param in self.params:
            if param.name in arguments:
                values[param.name] = param.check(arguments[param.name])
            elif param.required:
                raise WarmkernelError("invalid_arguments", f"{self.name} needs the parameter {param.name}")
            else:
                values[param.name] = param.default
        return values


# -- the table -------------------------------------------------------------------------------

_N = Spelling(metavar="N")
NOTEBOOK = Param(
    "path", Text(), "The .ipynb file, relative to the workspace.", cli=Spelling(metavar="NB", from_cwd=True)
)
EXECUTION = Param(
    "execution",
    Integer("execution_not_found", 1, optional=True),
    "Execution number N. Default: the running execution, else the most recent one.",
    None,
    _N,
)
STREAM = Param(
    "stream",
    Choice("invalid_stream", READABLE_STREAMS),
    "Which stream: combined (everything in order), stdout, stderr, result (values and displays), traceback.",
    "combined",
    Spelling(("--stream",)),
)
MAX_CHARS = Param(
    "max_chars",
    Integer("invalid_max_chars", 1, optional=True),
    "Clip each returned line to this many characters (stored text is unchanged).",
    None,
    Spelling(("--max-chars",), "K"),
)

TOOLS: tuple[Tool, ...] = (
    Tool(
        "run_python",
        "Run a cell of Python (IPython syntax) in the persistent kernel and wait up to 10 s for it "
        "(or `# warmkernel: --wait SECONDS`). Replies `In [N] · 1.2 s:` and the output; a long output is "
        "shown as head and tail with the call that reads the rest. A cell still running after the wait "
        "keeps running: use wait_python. Rejected as busy while another cell runs.",
        (Param("freeform", Text(), "The cell's source code.", cli=Spelling(metavar="CODE")),),
        Annotations(read_only=False, destructive=True, idempotent=False),
        (
            Verb(
                ("run",),
                "run a cell and wait for it",
                'warmkernel run "x = 41; x + 1"          run a cell in this workspace\'s kernel\n'
                "warmkernel run -f analysis.py --timeout 60   run a file as one cell, wait up to 60 s",
            ),
        ),
    ),
    Tool(
        "python_status",
        "The workspace, how it was resolved, the interpreter, the kernel's pid and generation, "
        "and whether a cell is running.",
        (),
        Annotations(read_only=True),
        (
            Verb(
                ("status",),
                "the workspace, interpreter and kernel of the daemon",
                "warmkernel status                      is a cell running, and in which kernel",
            ),
        ),
    ),
    Tool(
        "python_execution_status",
        "An execution's state, times, error name and value, and line counts per stream, without its output.",
        (EXECUTION,),
        Annotations(read_only=True),
        (
            Verb(
                ("state",),
                "an execution's state, times, error and line counts, without its output",
                "warmkernel state 3                     how execution 3 ended, and how long its output is",
            ),
        ),
    ),
    Tool(
        "read_python_output",
        "Read an execution's output by line range: `START:STOP`, 1-based, STOP inclusive, either end "
        'may be empty, negatives count from the end (":10", "-10:", "20:40", "3:3"). '
        'stream="images" reads its images by ordinal in the same grammar.',
        (
            EXECUTION,
            replace(
                STREAM,
                kind=Choice("invalid_stream", (*READABLE_STREAMS, "images")),
                description=STREAM.description
                + ' "images": the images, by ordinal (line_range "2:3" reads the second and third).',
            ),
            Param(
                "line_range",
                Text("invalid_line_range", optional=True),
                'Lines to read, e.g. "20:40", ":10", "-10:". Default: all (up to the reply limit).',
                None,
                Spelling(("--lines",), "A:B"),
            ),
            MAX_CHARS,
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("read",),
                "read an execution's output by line range",
                "warmkernel read 3 --lines -20:         the last 20 lines of execution 3\n"
                "warmkernel read --stream images        the images of the latest execution",
            ),
        ),
    ),
    Tool(
        "search_python_output",
        "Search an execution's output. Replies `M n | text` for matching lines, `C n | text` for context, "
        "`--` between separate groups.",
        (
            Param("query", Text("invalid_query"), "Text or regex to find.", cli=Spelling(metavar="QUERY")),
            EXECUTION,
            STREAM,
            Param(
                "query_mode",
                Choice("invalid_query", ("auto", "literal", "regex")),
                "auto: a regex if it compiles, else literal text.",
                "auto",
                Spelling(
                    consts=(
                        ("--regex", "regex", "QUERY is a regex"),
                        ("--literal", "literal", "QUERY is plain text"),
                    )
                ),
            ),
            Param(
                "context_before",
                Integer("invalid_context", 0),
                "Context lines before each match.",
                0,
                Spelling(("-B", "--before"), "K"),
            ),
            Param(
                "context_after",
                Integer("invalid_context", 0),
                "Context lines after each match.",
                0,
                Spelling(("-A", "--after"), "K"),
            ),
            Param(
                "ignore_case", Flag(), "Match case-insensitively.", False, Spelling(("-i", "--ignore-case"))
            ),
            MAX_CHARS,
            Param(
                "max_matches",
                Integer("invalid_limit", 1),
                "Show at most this many matching lines; the reply counts the rest.",
                200,
                Spelling(("--max-matches",), "N"),
            ),
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("search",),
                "search an execution's output",
                'warmkernel search "Traceback" -A 5     the latest execution, 5 lines after each match',
            ),
        ),
    ),
    Tool(
        "wait_python",
        "Wait for an execution to finish, up to timeout_seconds, then reply as run_python does. "
        "Waiting ends this call, never the cell; it also ends when the cell asks for input.",
        (
            EXECUTION,
            Param(
                "timeout_seconds",
                Seconds(),
                "How long to wait, in seconds.",
                30,
                Spelling(("--timeout",), "S"),
            ),
            Param(
                "silence_seconds",
                Seconds(optional=True, positive=True),
                "Also return once the cell has printed nothing for this long, counted from the later of "
                "this call's start and the last output. Default: no such limit.",
                None,
                Spelling(("--silence",), "S"),
            ),
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("wait",),
                "wait for an execution to finish",
                "warmkernel wait 3 --timeout 120        wait up to 2 minutes for execution 3",
            ),
            Verb(
                ("show",),
                "an execution's reply, as the model reads it",
                "warmkernel show 3                      execution 3's reply, as run_python gave it",
                fixed={"timeout_seconds": 0, "silence_seconds": None},
            ),
        ),
    ),
    Tool(
        "send_python_input",
        "Answer the prompt of a cell waiting in input() or getpass(), then reply as run_python does. "
        "The answer is written to the output after its prompt, except for a password prompt.",
        (
            Param("text", Text(), "The answer, without a trailing newline.", cli=Spelling(metavar="TEXT")),
            replace(EXECUTION, cli=Spelling(("--execution",), "N")),
        ),
        Annotations(read_only=False, idempotent=False),
        (
            Verb(
                ("input",),
                "answer the prompt of a cell waiting in input() or getpass()",
                "warmkernel input Ada                   answer the running cell's input() prompt",
            ),
        ),
    ),
    Tool(
        "interrupt_python",
        "Send SIGINT (KeyboardInterrupt) to the running cell, also one waiting for input. "
        "Replies interrupt_sent or idle.",
        (),
        Annotations(read_only=False, idempotent=False),
        (
            Verb(
                ("interrupt",),
                "interrupt the running cell (SIGINT)",
                "warmkernel interrupt                   KeyboardInterrupt in the running cell",
            ),
        ),
    ),
    Tool(
        "reset_python",
        "Kill the kernel and every process it started, and start a fresh one in the same workspace. "
        "A running cell becomes `killed`; earlier records and numbering stay readable.",
        (),
        Annotations(read_only=False, destructive=True, idempotent=False),
        (
            Verb(
                ("reset",),
                "kill the kernel and everything it started; start a fresh one",
                "warmkernel reset                       a fresh kernel; the records stay readable",
            ),
        ),
    ),
    Tool(
        "list_python_executions",
        "Executions, newest first: number, state, elapsed time, line count and first source line.",
        (
            Param(
                "limit",
                Integer("invalid_limit", 1),
                "How many to list.",
                20,
                Spelling(("--limit",), "N"),
            ),
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("history",),
                "executions, newest first",
                "warmkernel history --limit 5           the last five executions",
            ),
        ),
    ),
    Tool(
        "list_python_variables",
        "The user's variables in the live namespace, without running a cell: name, type, size, shape or "
        "length, and the execution (In [N]) that last bound each. No `_` names or IPython internals; "
        "modules only with include_modules. Busy while a cell runs.",
        (Param("include_modules", Flag(), "Also list imported modules.", False, Spelling(("--modules",))),),
        Annotations(read_only=True),
        (
            Verb(
                ("vars",),
                "the user's variables in the live namespace, without running a cell",
                "warmkernel vars --modules              every variable, imported modules too",
            ),
        ),
    ),
    Tool(
        "inspect_python_variable",
        "A compact typed summary of one variable as JSON, without running a cell (In, Out, _ and the "
        "numbering stay untouched). DataFrames: shape, column dtypes, nulls, describe, sample rows, memory; "
        "arrays: shape, dtype, min/max/mean, sample; containers: length, element types, first items; "
        "functions and classes: signature and doc. Past the time budget (5 s), type and size only. "
        "Busy while a cell runs.",
        (
            Param(
                "name",
                VariablePath(),
                'A variable name or a dotted attribute path, e.g. "df" or "df.columns"; nothing else is '
                "evaluated.",
                cli=Spelling(metavar="NAME"),
            ),
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("inspect",),
                "a typed summary of one variable, without running a cell",
                "warmkernel inspect df.columns          a typed summary of df.columns",
            ),
        ),
    ),
    Tool(
        "notebook_status",
        "Which code cells of a Jupyter notebook no longer match the kernel, and why, without running "
        "anything. Binds this session's kernel to the notebook on first use (one per session). Lists each "
        "code cell in order: index, id, state (fresh, stale, never_run, running), reasons (source_changed, "
        "never_run, errored, file_changed, upstream_changed, upstream_stale, undefined_name), the names it "
        "defines and the execution (In [N]) of its last run; then the plan: the cells to re-run, in order.",
        (NOTEBOOK,),
        Annotations(read_only=True),
        (
            Verb(
                ("nb", "status"),
                "every code cell's state (fresh, stale, never_run, running), the reasons, and the plan",
                "warmkernel nb status analysis.ipynb    which notebook cells are stale, and why",
            ),
        ),
    ),
    Tool(
        "run_notebook_cells",
        "Run cells of the bound notebook in notebook order, each as an ordinary numbered execution, and "
        "reply with each cell's output as run_python does, then what is still stale. Stops at the first "
        "error unless stop_on_error is false. Outputs are written into the .ipynb (outputs and execution "
        "counts only) unless the cell's source changed on disk meanwhile. Waits up to timeout_seconds "
        "(default: the server's wait, 10 s); the run goes on after that.",
        (
            NOTEBOOK,
            Param(
                "cells",
                Cells(),
                '"stale" (the plan), "all", or a list of cell ids and/or 0-based code-cell indices.',
                "stale",
                Spelling(("--cells",), "stale|all|ID,..."),
            ),
            Param(
                "stop_on_error",
                Flag(),
                "Stop at the first cell that raises.",
                True,
                Spelling(("--no-stop-on-error",)),
            ),
            Param(
                "timeout_seconds",
                Seconds(optional=True),
                "How long to wait for the run before replying; null: the server's wait.",
                None,
                Spelling(("--timeout",), "S"),
            ),
        ),
        Annotations(read_only=False, destructive=True, idempotent=False),
        (
            Verb(
                ("nb", "run"),
                "run the stale cells (or --cells) in notebook order; stops at the first error",
                "warmkernel nb run analysis.ipynb       re-run exactly the stale cells\n"
                "warmkernel nb run analysis.ipynb --cells all --no-stop-on-error   every cell, past errors",
                defaults={"timeout_seconds": 120.0},
            ),
        ),
    ),
    Tool(
        "watch_notebook_file",
        "Declare that a cell depends on a file whose reads the kernel cannot see (e.g. a C library opens "
        "it): when the file's content changes, the cell becomes stale.",
        (
            NOTEBOOK,
            Param(
                "file",
                Text(),
                "The file, relative to the workspace.",
                cli=Spelling(metavar="FILE", from_cwd=True),
            ),
            Param(
                "cell",
                Cell(),
                "The cell's id or 0-based code-cell index.",
                cli=Spelling(("--cell",), "ID"),
            ),
        ),
        Annotations(read_only=False),
        (
            Verb(
                ("nb", "watch"),
                "make a cell depend on a file whose reads the kernel cannot see",
                "warmkernel nb watch analysis.ipynb data.bin --cell load   cell load reads data.bin",
            ),
        ),
    ),
)

TOOLS_BY_NAME: Mapping[str, Tool] = {tool.name: tool for tool in TOOLS}
