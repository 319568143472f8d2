"""The MCP face: each declared tool's handler, result modes, and the stdio transport.

`tool_specs.TOOLS` declares every tool (name, parameters, description, annotations); this
module maps each name to a handler, and every transport serves that one table. Handlers get
checked arguments, call `Session` and hand the outcome to `present`. A caller's mistake becomes
`isError: true` with the text `<code>: <message>` (and `{"error": {"code", "message"}}` as
structured content in structured mode); a Python error inside a cell is an ordinary result.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from warmkernel import __version__
from warmkernel.errors import WarmkernelError
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.execution.submission import Submission, parse_cell
from warmkernel.replies.cell_states import notebook_run_reply, notebook_status_reply, notebook_watch_reply
from warmkernel.replies.export import export_reply, insert_reply
from warmkernel.replies.hints import Face, call, default_wait, speaking_of, spoken_to
from warmkernel.replies.reads import dropped_reply, images_reply, read_reply, search_reply
from warmkernel.replies.reply import Picture, Reply
from warmkernel.replies.runs import execution_reply, progress_message
from warmkernel.replies.status import (
    execution_status_reply,
    interrupt_reply,
    joined_reply,
    kernels_reply,
    list_reply,
    reset_reply,
    starting_reply,
    status_reply,
    stop_kernel_reply,
)
from warmkernel.replies.variables import summary_reply, variables_reply
from warmkernel.session.kernels import Kernels
from warmkernel.session.session import Session
from warmkernel.settings.model import Settings
from warmkernel.tools.catalog import KNOWN_KERNEL, NOTEBOOK, NOTEBOOK_KERNEL, TOOLS, TOOLS_BY_NAME
from warmkernel.tools.kinds import WAIT, Annotations, Tool

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
export_python_executions writes executions as a notebook, script, Markdown or HTML page, and
executions_to_notebook adds them as cells of a notebook you keep.
Optional directive lines at column 0 of a cell:
`# warmkernel: --wait SECONDS` (how long run_python waits, default {wait}),
`# warmkernel: --silence SECONDS` (also return once the cell has printed nothing for that long) and
`# warmkernel: --full-output` (reply with all output instead of head and tail).
Plots and images in a finished cell's reply come as image content. A cell that calls input()
or getpass() replies with its prompt: answer it with send_python_input.
Every tool takes an optional kernel name (default main): kernel="train" runs a long job in a
kernel of its own while main stays free; list_python_kernels shows them all. A notebook gets a
kernel of its own (nb-<stem>) unless you name one."""


# -- handlers ---------------------------------------------------------------------------------

KernelHandler = Callable[["Connection", Session, dict[str, Any], ServerRequestContext[Any]], Awaitable[Reply]]
"""A tool that acts on one kernel, found for it by the call's `kernel` (see `_find_kernel`)."""
WorkspaceHandler = Callable[["Connection", dict[str, Any]], Awaitable[Reply]]
"""A tool about the workspace's kernels as a whole."""


@dataclass(eq=False)
class Connection:
    """One client's connection to the workspace's kernels: its reply settings and what it has yet
    to be told.

    Reply options (`--wait`, the inline budget, result mode, image limits) belong to the client,
    so two hosts with different budgets can share one kernel; kernel options are the daemon's.
    """

    kernels: Kernels
    settings: Settings
    """The kernels' settings with this client's reply options."""
    note: str | None = None
    """What the client has to be told about itself (e.g. that its version differs from the
    daemon's): in its first reply, and in every status."""
    greeting: str | None = None
    """The note, until the first reply has said it."""
    tell_joined: bool = True
    """Say, once per kernel, what was there when this client first used it (if it had run cells,
    and the project environment it runs in)."""
    notices_marks: dict[str, int] = field(default_factory=dict)
    """Per kernel, where this connection reads its one-time notices from."""
    told: set[str] = field(default_factory=set)
    """The kernels this client has used (and so was told about, if it had to be)."""

    def with_notices(self, session: Session, reply: Reply) -> Reply:
        """The reply, after the notices this connection has not seen yet (each is said once); a
        document (an export's text) stays as it is, and its notices wait for the next reply."""
        if reply.is_document:
            return reply
        first = session.name not in self.notices_marks
        mark = self.notices_marks.get(session.name, session.notice_mark())
        notices, self.notices_marks[session.name] = session.notices_since(mark)
        environment = session.environment_note
        if first and self.tell_joined and environment is not None and environment not in notices:
            notices = [environment, *notices]  # said to an earlier client: this one is told too
        if self.greeting is not None:
            notices, self.greeting = [self.greeting, *notices], None
        if not notices:
            return reply
        notice = "\n".join(notices)
        return replace(reply, text=f"{notice}\n{reply.text}", data=reply.data | {"notice": notice})


def client_name(ctx: ServerRequestContext[Any]) -> str:
    """The name the client gave in `initialize` (`claude-code`, `warmkernel-cli`), or ""."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None else ""


async def _joined(conn: Connection, session: Session) -> Reply | None:
    """What a client that comes to a kernel already in use should know, once: None if nothing."""
    first_use = session.name not in conn.told
    conn.told.add(session.name)
    if not (first_use and conn.tell_joined and session.kernel_info().executions > 0):
        return None
    listing = None
    if session.running is None:
        with contextlib.suppress(WarmkernelError):  # a kernel that cannot list says the rest anyway
            listing = await session.list_variables()
    return joined_reply(session.kernel_info(), session.records, session.running, listing)


def _after(joined: Reply | None, reply: Reply) -> Reply:
    if joined is None:
        return reply
    return replace(reply, text=f"{joined.text}\n{reply.text}", data=reply.data | {"joined": joined.data})


async def _wait(
    conn: Connection,
    session: Session,
    record: ExecutionRecord,
    ctx: ServerRequestContext[Any],
    timeout_s: float,
    silence_s: float | None,
) -> WaitEnd:
    """Wait on the record, telling a client that asked for progress how it goes every few seconds:
    `progress` of `total` from the cell's latest progress bar when it has one, else seconds elapsed.

    Some hosts drop a call that stays quiet for a minute; each notification resets their timer.
    `report_progress` sends nothing when the client gave no progress token.
    """

    async def report() -> None:
        shown = record.progress()  # a bar's fraction when the cell shows one, else elapsed seconds
        done, total = (shown.done, shown.total) if shown is not None else (record.elapsed(), None)
        await ctx.session.report_progress(done, total, progress_message(record))  # this client's session

    every = (conn.settings.progress_interval_s, report)
    return await session.wait(record, timeout_s, silence_s=silence_s, every=every)


async def _reply_after_wait(
    conn: Connection, session: Session, record: ExecutionRecord, ctx: ServerRequestContext[Any]
) -> Reply:
    """Wait as the cell's directives (or the defaults) say, then reply as run_python does."""
    timeout_s = record.directives.wait_seconds or conn.settings.default_wait_s
    silence_s = record.directives.silence_seconds or conn.settings.default_silence_s
    waited = await _wait(conn, session, record, ctx, timeout_s, silence_s)
    return execution_reply(record, conn.settings, waited=waited)


def _start_wait(conn: Connection, submission: Submission) -> float:
    """How long a cell waits for a starting kernel: the longest of the daemon's `--wait`, the
    client's and the cell's own `--wait` directive (a short one is for the cell, not for the
    start: `warmkernel run --timeout 0.3` on a kernel that is starting still runs its cell)."""
    asked = submission.directives.wait_seconds or 0.0
    return max(asked, conn.settings.default_wait_s, conn.kernels.settings.default_wait_s)


async def run_python(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    session.start()  # a stopped kernel starts with this cell
    submission = parse_cell(args["freeform"])  # a bad directive is refused before any wait
    if session.starting:
        # A kernel still starting (a gateway pulling an image) is waited for within the cell's wait.
        wait_s = _start_wait(conn, submission)
        if not await session.kernel_within(wait_s):
            return starting_reply(session.kernel_info(), wait_s)
    joined = await _joined(conn, session)  # what was there before this cell
    try:
        wait_s = submission.directives.wait_seconds or conn.settings.default_wait_s
        record = await session.submit(submission, client=client_name(ctx), within_s=wait_s)
    except WarmkernelError:
        if joined is not None:  # a refusal (busy) does not carry it: the next reply does
            conn.told.discard(session.name)
        raise
    return _after(joined, await _reply_after_wait(conn, session, record, ctx))


async def wait_python(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    record = session.select(args["execution"])
    waited = await _wait(conn, session, record, ctx, args["timeout_seconds"], args["silence_seconds"])
    return execution_reply(record, conn.settings, waited=waited)


async def send_python_input(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    record = session.send_input(args["text"], args["execution"])
    return await _reply_after_wait(conn, session, record, ctx)


async def python_status(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    joined = await _joined(conn, session)
    if conn.note is not None and conn.greeting is None:  # the first reply says it anyway
        joined = _after(Reply(conn.note, {"note": conn.note}), joined) if joined else Reply(conn.note)
    records = session.records
    return _after(
        joined,
        status_reply(
            session.workspace,
            conn.settings,
            session.name,
            session.kernel_info(),
            session.running,
            records[-1] if records else None,
            conn.kernels.summaries(),
        ),
    )


async def python_execution_status(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return execution_status_reply(session.select(args["execution"]))


async def read_python_output(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    chosen = session.select_output(args["execution"], args["stream"], args["line_range"])
    if chosen.stream == "images":
        return images_reply(chosen.record, chosen.lo, chosen.hi, conn.settings)
    return read_reply(chosen.record, chosen.stream, chosen.lo, chosen.hi, args["max_chars"], conn.settings)


async def search_python_output(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
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
    return search_reply(
        found.record,
        args["stream"],
        args["query"],
        found.result,
        args["max_chars"],
        conn.settings.read_max_chars,
    )


async def interrupt_python(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return interrupt_reply(session.interrupt())


async def reset_python(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    killed = await session.reset()
    return reset_reply(killed, session.kernel_info(), session.workspace.path)


async def list_python_executions(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return list_reply(session.records, args["limit"], client_name(ctx))


async def notebook_status(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return notebook_status_reply(await session.notebook_status(args["path"]), conn.settings)


async def run_notebook_cells(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    run = await session.run_notebook_cells(
        args["path"], args["cells"], stop_on_error=args["stop_on_error"], client=client_name(ctx)
    )
    wait_s = args["timeout_seconds"] if args["timeout_seconds"] is not None else conn.settings.default_wait_s
    with anyio.move_on_after(wait_s):
        await run.done.wait()
    view = await session.notebook_status(args["path"]) if run.done.is_set() else None
    return notebook_run_reply(run, view, conn.settings, waited_s=wait_s)


async def watch_notebook_file(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    cell_id, file = await session.watch_notebook_file(args["path"], args["file"], args["cell"])
    return notebook_watch_reply(await session.notebook_status(args["path"]), cell_id, file)


async def list_python_variables(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    include_imports = args["include_imports"] or args["include_modules"]  # the older, narrower name
    return variables_reply(await session.list_variables(include_imports=include_imports))


async def inspect_python_variable(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    return summary_reply(await session.inspect_variable(args["name"]))


async def export_python_executions(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    if args["path"] is not None:
        conn.kernels.refuse_bound(args["path"])
    return export_reply(await session.export_executions(args["executions"], args["path"], args["format"]))


async def executions_to_notebook(
    conn: Connection, session: Session, args: dict[str, Any], ctx: ServerRequestContext[Any]
) -> Reply:
    notebook, inserted = await session.executions_to_notebook(
        args["executions"], args["path"], args["after_cell"]
    )
    return insert_reply(notebook, inserted)


async def list_python_kernels(conn: Connection, args: dict[str, Any]) -> Reply:
    return kernels_reply(conn.kernels.summaries())


async def stop_python_kernel(conn: Connection, args: dict[str, Any]) -> Reply:
    session, killed = await conn.kernels.stop(args["name"])
    return stop_kernel_reply(session.name, killed, len(session.records))


_KERNEL_HANDLERS: dict[str, KernelHandler] = {
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
    "export_python_executions": export_python_executions,
    "executions_to_notebook": executions_to_notebook,
}
"""What each declared tool that acts on a kernel does; `tool_specs.TOOLS` says everything else
about it, how it finds its kernel too (`_find_kernel`)."""
_WORKSPACE_HANDLERS: dict[str, WorkspaceHandler] = {
    "list_python_kernels": list_python_kernels,
    "stop_python_kernel": stop_python_kernel,
}
assert set(_KERNEL_HANDLERS) | set(_WORKSPACE_HANDLERS) == set(TOOLS_BY_NAME), (
    "every declared tool has exactly one handler"
)


def _notebook_path(conn: Connection, tool: str, path: str | None) -> str:
    """The notebook a call names, else the configured one (`notebook`)."""
    if path is not None:
        return path
    if conn.settings.notebook is None:
        raise WarmkernelError(
            "invalid_arguments",
            f"which notebook? {call(tool, path='NAME.ipynb')} names one, or set notebook in the "
            "configuration (warmkernel.toml, [tool.warmkernel] of pyproject.toml, or the --notebook "
            "flag of mcp, serve and start)",
        )
    return conn.settings.notebook


async def _find_kernel(conn: Connection, tool: Tool, args: dict[str, Any]) -> Session:
    """The kernel a call names, as the tool's `kernel` parameter says: the notebook's own, only
    one that exists (the tool reads records, or answers a running cell), else started if new or
    stopped."""
    if NOTEBOOK_KERNEL in tool.params:
        return await conn.kernels.for_notebook(args["path"], args["kernel"])
    return await conn.kernels.session(args["kernel"], start=KNOWN_KERNEL not in tool.params)


async def _call(conn: Connection, name: str, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Reply:
    """Run one checked call: on the kernel it names (whose notices it then carries), or on all
    (carrying main's: a restart or a joined kernel is said by whatever call comes first)."""
    if name in _WORKSPACE_HANDLERS:
        return conn.with_notices(conn.kernels.main, await _WORKSPACE_HANDLERS[name](conn, args))
    tool = TOOLS_BY_NAME[name]
    if NOTEBOOK in tool.params:  # a notebook tool: its path defaults to the configured one
        args = args | {"path": _notebook_path(conn, name, args["path"])}
    session = await _find_kernel(conn, tool, args)
    with speaking_of(session.name), session.in_use():
        return conn.with_notices(session, await _KERNEL_HANDLERS[name](conn, session, args, ctx))


# -- server -----------------------------------------------------------------------------------


def build_server(
    kernels: Kernels,
    options: Mapping[str, Any] | None = None,
    *,
    note: str | None = None,
    tell_joined: bool = True,
    hints: Face = "mcp",
) -> Server[Any]:
    """An MCP server over the workspace's kernels; any transport can serve it, to any number of clients.

    `options` are reply options of these clients (`Settings` fields), over the kernels' own;
    `note` is said to each in its first reply and in every status; `tell_joined`: a client that
    comes to a kernel in use is told, once, what is there (a CLI verb, one call long, is not);
    `hints`: how replies spell the calls they suggest (`wait_python(execution=7)`, or for the
    CLI's verbs `warmkernel wait 7`).
    A `structured` result mode adds structuredContent and output schemas; the text is the same.
    """
    settings = replace(kernels.settings, **(options or {}))
    structured = settings.result_mode == "structured"

    @asynccontextmanager
    async def connection(_: Server[Any]) -> AsyncIterator[Connection]:
        """Entered once per `Server.run`: one client over stdio or a socket. Streamable HTTP
        enters it once for the whole endpoint, so its clients share one connection."""
        yield Connection(kernels, settings, note, note, tell_joined)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.describe(default_wait(settings)),
                    input_schema=tool.input_schema(),
                    output_schema=tool.output_schema() if structured else None,
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
            with spoken_to(hints):
                reply = await _call(ctx.lifespan_context, tool.name, tool.parse(params.arguments or {}), ctx)
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
        instructions=INSTRUCTIONS.replace(WAIT, default_wait(settings)),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        lifespan=connection,
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


async def serve_stdio(kernels: Kernels) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes stdin."""
    server = build_server(kernels)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
