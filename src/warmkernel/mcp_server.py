"""The MCP face: each declared tool's handler, result modes, and the stdio transport.

`tool_specs.TOOLS` declares every tool (name, parameters, description, annotations); this
module maps each name to a handler, and every transport serves that one table. Handlers get
checked arguments, call `Session` and hand the outcome to `present`. A caller's mistake becomes
`isError: true` with the text `<code>: <message>` (and `{"error": {"code", "message"}}` as
structured content in structured mode); a Python error inside a cell is an ordinary result.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from warmkernel import __version__
from warmkernel.errors import WarmkernelError
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.present.execution import execution_reply, progress_message
from warmkernel.present.hints import default_wait
from warmkernel.present.notebook import notebook_run_reply, notebook_status_reply, notebook_watch_reply
from warmkernel.present.reads import dropped_reply, images_reply, read_reply, search_reply
from warmkernel.present.reply import Picture, Reply
from warmkernel.present.status import (
    execution_status_reply,
    interrupt_reply,
    list_reply,
    reset_reply,
    status_reply,
)
from warmkernel.present.variables import summary_reply, variables_reply
from warmkernel.session import Session
from warmkernel.tool_params import WAIT, Annotations
from warmkernel.tool_specs import TOOLS, TOOLS_BY_NAME

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
`# warmkernel: --wait SECONDS` (how long run_python waits, default {wait}),
`# warmkernel: --silence SECONDS` (also return once the cell has printed nothing for that long) and
`# warmkernel: --full-output` (reply with all output instead of head and tail).
Plots and images in a finished cell's reply come as image content. A cell that calls input()
or getpass() replies with its prompt: answer it with send_python_input."""


# -- handlers ---------------------------------------------------------------------------------

Handler = Callable[[Session, dict[str, Any], ServerRequestContext[Any]], Awaitable[Reply]]


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
            await ctx.session.report_progress(record.elapsed(), None, progress_message(record))

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
    return execution_reply(record, session.settings, waited=waited)


async def run_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    record = await session.submit(args["freeform"])
    return await _reply_after_wait(session, record, ctx)


async def wait_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    record = session.select(args["execution"])
    waited = await _wait(session, record, ctx, args["timeout_seconds"], args["silence_seconds"])
    return execution_reply(record, session.settings, waited=waited)


async def send_python_input(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    record = session.send_input(args["text"], args["execution"])
    return await _reply_after_wait(session, record, ctx)


async def python_status(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    records = session.records
    return status_reply(
        session.workspace,
        session.settings,
        session.kernel_info(),
        session.running,
        records[-1] if records else None,
    )


async def python_execution_status(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return execution_status_reply(session.select(args["execution"]))


async def read_python_output(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    chosen = session.select_output(args["execution"], args["stream"], args["line_range"])
    if chosen.stream == "images":
        return images_reply(chosen.record, chosen.lo, chosen.hi, session.settings)
    return read_reply(chosen.record, chosen.stream, chosen.lo, chosen.hi, args["max_chars"], session.settings)


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
        return dropped_reply(found.record)
    return search_reply(found.record, args["stream"], args["query"], found.result, args["max_chars"])


async def interrupt_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    return interrupt_reply(session.interrupt())


async def reset_python(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    killed = await session.reset()
    return reset_reply(killed, session.kernel_info(), session.workspace.path)


async def list_python_executions(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return list_reply(session.records, args["limit"])


async def notebook_status(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    return notebook_status_reply(await session.notebook_status(args["path"]), session.settings)


async def run_notebook_cells(session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    run = await session.run_notebook_cells(args["path"], args["cells"], stop_on_error=args["stop_on_error"])
    wait_s = (
        args["timeout_seconds"] if args["timeout_seconds"] is not None else session.settings.default_wait_s
    )
    with anyio.move_on_after(wait_s):
        await run.done.wait()
    view = await session.notebook_status(args["path"]) if run.done.is_set() else None
    return notebook_run_reply(run, view, session.settings, waited_s=wait_s)


async def watch_notebook_file(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    cell_id, file = await session.watch_notebook_file(args["path"], args["file"], args["cell"])
    return notebook_watch_reply(await session.notebook_status(args["path"]), cell_id, file)


async def list_python_variables(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return variables_reply(await session.list_variables(include_modules=args["include_modules"]))


async def inspect_python_variable(
    session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return summary_reply(await session.inspect_variable(args["name"]))


_HANDLERS: dict[str, Handler] = {
    "run_python": run_python,
    "python_status": python_status,
    "python_execution_status": python_execution_status,
    "read_python_output": read_python_output,
    "search_python_output": search_python_output,
    "wait_python": wait_python,
    "send_python_input": send_python_input,
    "interrupt_python": interrupt_python,
    "reset_python": reset_python,
    "list_python_executions": list_python_executions,
    "list_python_variables": list_python_variables,
    "inspect_python_variable": inspect_python_variable,
    "notebook_status": notebook_status,
    "run_notebook_cells": run_notebook_cells,
    "watch_notebook_file": watch_notebook_file,
}
"""What each declared tool does; `tool_specs.TOOLS` says everything else about it."""
assert set(_HANDLERS) == set(TOOLS_BY_NAME), "every declared tool has exactly one handler"


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
                    description=tool.describe(default_wait(session.settings)),
                    input_schema=tool.input_schema(),
                    output_schema={"type": "object"} if structured else None,
                    annotations=_annotations(tool.annotations),
                )
                for tool in TOOLS
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            tool = TOOLS_BY_NAME.get(params.name)
            if tool is None:
                raise WarmkernelError(
                    "invalid_arguments",
                    f"there is no tool {params.name!r}; tools: {', '.join(TOOLS_BY_NAME)}",
                )
            handler = _HANDLERS[tool.name]
            reply = _with_notice(session, await handler(session, tool.parse(params.arguments or {}), ctx))
        except WarmkernelError as exc:
            if exc.code == "internal_error":
                log.exception("tool %s failed", params.name)
            return _error_result(exc, structured=structured)
        except Exception as exc:
            log.exception("tool %s failed", params.name)
            error = WarmkernelError(
                "internal_error", f"{type(exc).__name__}: {exc} (details are in the server log)"
            )
            return _error_result(error, structured=structured)
        return types.CallToolResult(
            content=[_content(reply.text), *(_content(part) for part in reply.more)],
            structured_content=reply.data if structured else None,
        )

    return Server(
        "warmkernel",
        version=__version__,
        instructions=INSTRUCTIONS.replace(WAIT, default_wait(session.settings)),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _annotations(annotations: Annotations) -> types.ToolAnnotations:
    return types.ToolAnnotations(
        read_only_hint=annotations.read_only,
        destructive_hint=annotations.destructive,
        idempotent_hint=annotations.idempotent,
        open_world_hint=False,
    )


def _content(part: str | Picture) -> types.TextContent | types.ImageContent:
    if isinstance(part, Picture):
        return types.ImageContent(
            type="image", data=base64.b64encode(part.data).decode(), mime_type=part.mime
        )
    return types.TextContent(type="text", text=part)


def _error_result(error: WarmkernelError, *, structured: bool) -> types.CallToolResult:
    """`<code>: <message>` as text; the same two facts as data when the client gets structured content."""
    data = {"error": {"code": error.code, "message": error.message}} if structured else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=str(error))], structured_content=data, is_error=True
    )


async def serve_stdio(session: Session) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes stdin."""
    server = build_server(session, structured=session.settings.result_mode == "structured")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
