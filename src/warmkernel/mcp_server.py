"""The MCP face: one table of tools, argument checking, result modes, and the stdio transport.

Each tool is declared once in `TOOLS` (name, parameters, description, annotations, handler);
every transport serves that same table. Handlers only check arguments, call `Session` and
hand the outcome to `present`. A caller's mistake becomes `isError: true` with the text
`<code>: <message>`; a Python error inside a cell is an ordinary result.
"""

from __future__ import annotations

import base64
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from warmkernel import __version__, present
from warmkernel.errors import ErrorCode, WarmkernelError
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.kernel.helper import check_path
from warmkernel.present import Picture, Reply
from warmkernel.session import Session
from warmkernel.types import READABLE_STREAMS

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
A persistent IPython kernel. run_python runs a cell; variables, imports and definitions
survive from cell to cell. Every accepted cell gets a number N (In [N]); its output is kept
and can be read by line range, searched, waited on, interrupted, or thrown away by
reset_python without losing the record. A cell submitted while another runs is rejected as
busy, never queued. To learn what a variable holds, use list_python_variables and
inspect_python_variable instead of printing it: they answer without running a cell.
For a Jupyter notebook you edit with your file tools, notebook_status(path) tells which cells
no longer match the kernel and why, and run_notebook_cells(path) re-runs exactly those.
Optional directive lines at column 0 of a cell:
`# warmkernel: --wait SECONDS` (how long run_python waits, default 10),
`# warmkernel: --silence SECONDS` (also return once the cell has printed nothing for that long) and
`# warmkernel: --full-output` (reply with all output instead of head and tail).
Plots and images in a finished cell's reply come as image content. A cell that calls input()
or getpass() replies with its prompt: answer it with send_python_input."""

_MISSING = object()


# -- parameters -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One tool parameter: its JSON schema, default, and the check that turns input into a value."""

    name: str
    schema: Mapping[str, Any]
    description: str
    check: Callable[[str, Any], Any]
    default: Any = _MISSING

    def json_schema(self) -> dict[str, Any]:
        schema = dict(self.schema, description=self.description)
        if self.default is not _MISSING:
            schema["default"] = self.default
        return schema


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


def _int_at_least(code: ErrorCode, minimum: int, *, optional: bool = False) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> int | None:
        if value is None and optional:
            return None
        number = _integer(value)
        if number is None or number < minimum:
            valid = f"an integer >= {minimum}" + (" or null" if optional else "")
            raise _fail(code, name, value, valid)
        return number

    return check


def _text(code: ErrorCode, *, optional: bool = False) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise _fail(code, name, value, "a string" + (" or null" if optional else ""))
        return value

    return check


def _choice(code: ErrorCode, choices: tuple[str, ...]) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> str:
        if value not in choices:
            raise _fail(code, name, value, "one of " + ", ".join(f'"{choice}"' for choice in choices))
        return value

    return check


def _is_seconds(value: Any) -> bool:
    """A finite JSON number of seconds, not negative (bools are not numbers)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value >= 0


def _seconds(name: str, value: Any) -> float:
    if not _is_seconds(value):
        raise _fail("invalid_timeout", name, value, "a finite number of seconds >= 0")
    return float(value)


def _silence(name: str, value: Any) -> float | None:
    """Null, or seconds > 0: a silence of 0 would end every wait at once."""
    if value is None:
        return None
    if not _is_seconds(value) or value == 0:
        raise _fail("invalid_timeout", name, value, "a finite number of seconds > 0 or null")
    return float(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail("invalid_arguments", name, value, "true or false")
    return value


def _optional_seconds(name: str, value: Any) -> float | None:
    return None if value is None else _seconds(name, value)


def _cells(name: str, value: Any) -> str | list[str | int]:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(_cell(name, item) is not None for item in value):
        return value
    raise _fail(
        "invalid_arguments", name, value, '"stale", "all", or a non-empty list of cell ids and indices'
    )


def _cell(name: str, value: Any) -> str | int:
    if isinstance(value, str):
        return value
    index = _integer(value)
    if index is None:
        raise _fail("invalid_arguments", name, value, "a cell id or a 0-based code-cell index")
    return index


def _variable_path(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(
            "invalid_name", name, value, 'a variable name or dotted attribute path such as "df.columns"'
        )
    return check_path(value)


_OPTIONAL_INT: dict[str, Any] = {"type": ["integer", "null"]}
NOTEBOOK = Param(
    "path", {"type": "string"}, "The .ipynb file, relative to the workspace.", _text("invalid_arguments")
)
EXECUTION = Param(
    "execution",
    _OPTIONAL_INT,
    "Execution number N. Default: the running execution, else the most recent one.",
    _int_at_least("execution_not_found", 1, optional=True),
    None,
)
STREAM = Param(
    "stream",
    {"type": "string", "enum": list(READABLE_STREAMS)},
    "Which stream: combined (everything in order), stdout, stderr, result (values and displays), traceback.",
    _choice("invalid_stream", READABLE_STREAMS),
    "combined",
)
READ_STREAM = Param(
    "stream",
    {"type": "string", "enum": [*READABLE_STREAMS, "images"]},
    STREAM.description + ' "images": the images, by ordinal (line_range "2:3" reads the second and third).',
    _choice("invalid_stream", (*READABLE_STREAMS, "images")),
    "combined",
)
MAX_CHARS = Param(
    "max_chars",
    _OPTIONAL_INT,
    "Clip each returned line to this many characters (stored text is unchanged).",
    _int_at_least("invalid_max_chars", 1, optional=True),
    None,
)


# -- tools ----------------------------------------------------------------------------------

Handler = Callable[[Session, dict[str, Any], ServerRequestContext[Any]], Awaitable[Reply]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...]
    handler: Handler
    annotations: types.ToolAnnotations

    def input_schema(self) -> dict[str, Any]:
        required = [p.name for p in self.params if p.default is _MISSING]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.params},
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        return schema

    def parse(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check every argument; unknown or missing ones are `invalid_arguments`."""
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
                values[param.name] = param.check(param.name, arguments[param.name])
            elif param.default is _MISSING:
                raise WarmkernelError("invalid_arguments", f"{self.name} needs the parameter {param.name}")
            else:
                values[param.name] = param.default
        return values


def _with_notice(session: Session, reply: Reply) -> Reply:
    notice = session.take_notice()
    if notice is None:
        return reply
    return replace(reply, text=f"{notice}\n{reply.text}", data=reply.data | {"notice": notice})


async def _wait(
    session: Session,
    record: ExecutionRecord,
    ctx: ServerRequestContext[Any],
    timeout_s: float,
    silence_s: float | None,
) -> WaitEnd:
    """Wait on the record, telling a client that asked for progress how it goes every few seconds.

    Some hosts drop a call that stays quiet for a minute; each notification resets their timer.
    `report_progress` sends nothing when the client gave no progress token.
    """

    async def report() -> None:
        while True:
            await anyio.sleep(session.settings.progress_interval_s)
            await ctx.session.report_progress(record.elapsed(), None, present.progress_message(record))

    waited: WaitEnd | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(report)
        waited = await session.wait(record, timeout_s, silence_s=silence_s)
        tg.cancel_scope.cancel()
    assert waited is not None, "a task group swallows no exception"
    return waited


async def _reply_after_wait(
    session: Session, record: ExecutionRecord, ctx: ServerRequestContext[Any], wait_s: float | None = None
) -> Reply:
    """Wait as the cell's directives (or the defaults) say, then reply as run_python does."""
    timeout_s = (
        wait_s if wait_s is not None else record.directives.wait_seconds or session.settings.default_wait_s
    )
    waited = await _wait(session, record, ctx, timeout_s, record.directives.silence_seconds)
    return present.execution_reply(record, session.settings, waited=waited)


async def run_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    record = await session.submit(args["freeform"])
    return await _reply_after_wait(session, record, ctx)


async def wait_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    record = session.select(args["execution"])
    waited = await _wait(session, record, ctx, args["timeout_seconds"], args["silence_seconds"])
    return present.execution_reply(record, session.settings, waited=waited)


async def send_python_input(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    record = session.send_input(args["text"], args["execution"])
    return await _reply_after_wait(session, record, ctx)


async def python_status(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    records = session.records
    return present.status_reply(
        session.workspace,
        session.settings,
        session.kernel_info(),
        session.running,
        records[-1] if records else None,
    )


async def python_execution_status(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return present.execution_status_reply(session.select(args["execution"]))


async def read_python_output(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    chosen = session.select_output(args["execution"], args["stream"], args["line_range"])
    if chosen.stream == "images":
        return present.images_reply(chosen.record, chosen.lo, chosen.hi, session.settings)
    return present.read_reply(
        chosen.record, chosen.stream, chosen.lo, chosen.hi, args["max_chars"], session.settings
    )


async def search_python_output(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    found = await session.search_output(
        args["execution"],
        args["stream"],
        args["query"],
        args["query_mode"],
        args["ignore_case"],
        args["context_before"],
        args["context_after"],
        args["max_matches"],
    )
    if found.result is None:
        return present.dropped_reply(found.record)
    return present.search_reply(found.record, args["stream"], args["query"], found.result, args["max_chars"])


async def interrupt_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    return present.interrupt_reply(session.interrupt())


async def reset_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    killed = await session.reset()
    return present.reset_reply(killed, session.kernel_info(), session.workspace.path)


async def list_python_executions(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return present.list_reply(session.records, args["limit"])


async def notebook_status(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    return present.notebook_status_reply(await session.notebook_status(args["path"]), session.settings)


async def run_notebook_cells(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    run = await session.run_notebook_cells(args["path"], args["cells"], stop_on_error=args["stop_on_error"])
    wait_s = (
        args["timeout_seconds"] if args["timeout_seconds"] is not None else session.settings.default_wait_s
    )
    with anyio.move_on_after(wait_s):
        await run.done.wait()
    view = await session.notebook_status(args["path"]) if run.done.is_set() else None
    return present.notebook_run_reply(run, view, session.settings, waited_s=wait_s)


async def watch_notebook_file(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    cell_id, file = await session.watch_notebook_file(args["path"], args["file"], args["cell"])
    return present.notebook_watch_reply(await session.notebook_status(args["path"]), cell_id, file)


async def list_python_variables(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return present.variables_reply(await session.list_variables(include_modules=args["include_modules"]))


async def inspect_python_variable(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return present.summary_reply(await session.inspect_variable(args["name"]))


def _annotations(
    *, read_only: bool, destructive: bool = False, idempotent: bool = True
) -> types.ToolAnnotations:
    return types.ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "run_python",
        "Run a cell of Python (IPython syntax) in the persistent kernel and wait up to 10 s for it "
        "(or `# warmkernel: --wait SECONDS`). Replies `In [N] · 1.2 s:` and the output; a long output is "
        "shown as head and tail with the call that reads the rest. A cell still running after the wait "
        "keeps running: use wait_python. Rejected as busy while another cell runs.",
        (Param("freeform", {"type": "string"}, "The cell's source code.", _text("invalid_arguments")),),
        run_python,
        _annotations(read_only=False, destructive=True, idempotent=False),
    ),
    ToolSpec(
        "python_status",
        "The workspace, how it was resolved, the interpreter, the kernel's pid and generation, "
        "and whether a cell is running.",
        (),
        python_status,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "python_execution_status",
        "An execution's state, times, error name and value, and line counts per stream, without its output.",
        (EXECUTION,),
        python_execution_status,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "read_python_output",
        "Read an execution's output by line range: `START:STOP`, 1-based, STOP inclusive, either end "
        'may be empty, negatives count from the end (":10", "-10:", "20:40", "3:3"). '
        'stream="images" reads its images by ordinal in the same grammar.',
        (
            EXECUTION,
            READ_STREAM,
            Param(
                "line_range",
                {"type": ["string", "null"]},
                'Lines to read, e.g. "20:40", ":10", "-10:". Default: all (up to the reply limit).',
                _text("invalid_line_range", optional=True),
                None,
            ),
            MAX_CHARS,
        ),
        read_python_output,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "search_python_output",
        "Search an execution's output. Replies `M n | text` for matching lines, `C n | text` for context, "
        "`--` between separate groups.",
        (
            Param("query", {"type": "string"}, "Text or regex to find.", _text("invalid_query")),
            EXECUTION,
            STREAM,
            Param(
                "query_mode",
                {"type": "string", "enum": ["auto", "literal", "regex"]},
                "auto: a regex if it compiles, else literal text.",
                _choice("invalid_query", ("auto", "literal", "regex")),
                "auto",
            ),
            Param(
                "context_before",
                {"type": "integer", "minimum": 0},
                "Context lines before each match.",
                _int_at_least("invalid_context", 0),
                0,
            ),
            Param(
                "context_after",
                {"type": "integer", "minimum": 0},
                "Context lines after each match.",
                _int_at_least("invalid_context", 0),
                0,
            ),
            Param("ignore_case", {"type": "boolean"}, "Match case-insensitively.", _flag, False),
            MAX_CHARS,
            Param(
                "max_matches",
                {"type": "integer", "minimum": 1},
                "Show at most this many matching lines; the reply counts the rest.",
                _int_at_least("invalid_limit", 1),
                200,
            ),
        ),
        search_python_output,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "wait_python",
        "Wait for an execution to finish, up to timeout_seconds, then reply as run_python does. "
        "Waiting ends this call, never the cell; it also ends when the cell asks for input.",
        (
            EXECUTION,
            Param(
                "timeout_seconds",
                {"type": "number", "minimum": 0},
                "How long to wait, in seconds.",
                _seconds,
                30,
            ),
            Param(
                "silence_seconds",
                {"type": ["number", "null"], "exclusiveMinimum": 0},
                "Also return once the cell has printed nothing for this long, counted from the later of "
                "this call's start and the last output. Default: no such limit.",
                _silence,
                None,
            ),
        ),
        wait_python,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "send_python_input",
        "Answer the prompt of a cell waiting in input() or getpass(), then reply as run_python does. "
        "The answer is written to the output after its prompt, except for a password prompt.",
        (
            Param(
                "text",
                {"type": "string"},
                "The answer, without a trailing newline.",
                _text("invalid_arguments"),
            ),
            EXECUTION,
        ),
        send_python_input,
        _annotations(read_only=False, idempotent=False),
    ),
    ToolSpec(
        "interrupt_python",
        "Send SIGINT (KeyboardInterrupt) to the running cell, also one waiting for input. "
        "Replies interrupt_sent or idle.",
        (),
        interrupt_python,
        _annotations(read_only=False, idempotent=False),
    ),
    ToolSpec(
        "reset_python",
        "Kill the kernel and every process it started, and start a fresh one in the same workspace. "
        "A running cell becomes `killed`; earlier records and numbering stay readable.",
        (),
        reset_python,
        _annotations(read_only=False, destructive=True, idempotent=False),
    ),
    ToolSpec(
        "list_python_executions",
        "Executions, newest first: number, state, elapsed time, line count and first source line.",
        (
            Param(
                "limit",
                {"type": "integer", "minimum": 1},
                "How many to list.",
                _int_at_least("invalid_limit", 1),
                20,
            ),
        ),
        list_python_executions,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "list_python_variables",
        "The user's variables in the live namespace, without running a cell: name, type, size, shape or "
        "length, and the execution (In [N]) that last bound each. No `_` names or IPython internals; "
        "modules only with include_modules. Busy while a cell runs.",
        (Param("include_modules", {"type": "boolean"}, "Also list imported modules.", _flag, False),),
        list_python_variables,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "inspect_python_variable",
        "A compact typed summary of one variable as JSON, without running a cell (In, Out, _ and the "
        "numbering stay untouched). DataFrames: shape, column dtypes, nulls, describe, sample rows, memory; "
        "arrays: shape, dtype, min/max/mean, sample; containers: length, element types, first items; "
        "functions and classes: signature and doc. Past the time budget (5 s), type and size only. "
        "Busy while a cell runs.",
        (
            Param(
                "name",
                {"type": "string"},
                'A variable name or a dotted attribute path, e.g. "df" or "df.columns"; nothing else is '
                "evaluated.",
                _variable_path,
            ),
        ),
        inspect_python_variable,
        _annotations(read_only=True),
    ),
    ToolSpec(
        "notebook_status",
        "Which code cells of a Jupyter notebook no longer match the kernel, and why, without running "
        "anything. Binds this session's kernel to the notebook on first use (one per session). Lists each "
        "code cell in order: index, id, state (fresh, stale, never_run, running), reasons (source_changed, "
        "never_run, errored, file_changed, upstream_changed, upstream_stale, undefined_name), the names it "
        "defines and the execution (In [N]) of its last run; then the plan: the cells to re-run, in order.",
        (NOTEBOOK,),
        notebook_status,
        _annotations(read_only=True),
    ),
    ToolSpec(
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
                {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": ["string", "integer"]}}]},
                '"stale" (the plan), "all", or a list of cell ids and/or 0-based code-cell indices.',
                _cells,
                "stale",
            ),
            Param("stop_on_error", {"type": "boolean"}, "Stop at the first cell that raises.", _flag, True),
            Param(
                "timeout_seconds",
                {"type": ["number", "null"], "minimum": 0},
                "How long to wait for the run before replying; null: the server's wait.",
                _optional_seconds,
                None,
            ),
        ),
        run_notebook_cells,
        _annotations(read_only=False, destructive=True, idempotent=False),
    ),
    ToolSpec(
        "watch_notebook_file",
        "Declare that a cell depends on a file whose reads the kernel cannot see (e.g. a C library opens "
        "it): when the file's content changes, the cell becomes stale.",
        (
            NOTEBOOK,
            Param(
                "file",
                {"type": "string"},
                "The file, relative to the workspace.",
                _text("invalid_arguments"),
            ),
            Param(
                "cell", {"type": ["string", "integer"]}, "The cell's id or 0-based code-cell index.", _cell
            ),
        ),
        watch_notebook_file,
        _annotations(read_only=False),
    ),
)

_BY_NAME = {tool.name: tool for tool in TOOLS}


# -- server -----------------------------------------------------------------------------------


def build_server(session: Session, *, structured: bool) -> Server[Any]:
    """An MCP server over an open session; any transport can serve it.

    `structured` adds structuredContent and output schemas; the text stays the same.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema(),
                    output_schema={"type": "object"} if structured else None,
                    annotations=tool.annotations,
                )
                for tool in TOOLS
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            tool = _BY_NAME.get(params.name)
            if tool is None:
                raise WarmkernelError(
                    "invalid_arguments", f"there is no tool {params.name!r}; tools: {', '.join(_BY_NAME)}"
                )
            reply = _with_notice(
                session, await tool.handler(session, tool.parse(params.arguments or {}), ctx)
            )
        except WarmkernelError as exc:
            return _error_result(str(exc))
        except Exception as exc:
            log.exception("tool %s failed", params.name)
            return _error_result(
                f"internal_error: {type(exc).__name__}: {exc} (details are in the server log)"
            )
        return types.CallToolResult(
            content=[_content(reply.text), *(_content(part) for part in reply.more)],
            structured_content=reply.data if structured else None,
        )

    return Server(
        "warmkernel",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _content(part: str | Picture) -> types.TextContent | types.ImageContent:
    if isinstance(part, Picture):
        return types.ImageContent(
            type="image", data=base64.b64encode(part.data).decode(), mime_type=part.mime
        )
    return types.TextContent(type="text", text=part)


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def serve_stdio(session: Session) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes stdin."""
    server = build_server(session, structured=session.settings.result_mode == "structured")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
