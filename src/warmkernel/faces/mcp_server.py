"""The MCP face: the server over the declared tools, its result modes, and the stdio transport.

`tools/catalog.py` declares every tool (name, parameters, description, annotations) and
`faces/handlers.py` registers a handler for each; every transport serves this one server. A call's
arguments are checked into its tool's arguments (`Tool.parse`) and answered by its handler. A
caller's mistake becomes `isError: true` with the text `<code>: <message>` (and
`{"error": {"code", "message"}}` as structured content in structured mode); a Python error inside
a cell is an ordinary result.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from warmkernel import __version__
from warmkernel.errors import WarmkernelError
from warmkernel.faces.connection import Connection
from warmkernel.faces.handlers import HANDLERS
from warmkernel.replies.hints import Face, default_wait, spoken_to
from warmkernel.replies.reply import Picture
from warmkernel.session.kernels import Kernels
from warmkernel.tools.catalog import TOOLS, TOOLS_BY_NAME
from warmkernel.tools.kinds import WAIT, Annotations

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
            peer = ctx.session  # the MCP SDK's session of this request: the client's end
            with spoken_to(hints):
                reply = await HANDLERS.answer(
                    ctx.lifespan_context, peer, tool, tool.parse(params.arguments or {})
                )
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
