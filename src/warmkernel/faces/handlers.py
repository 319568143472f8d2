"""Each declared tool's handler: its typed arguments in, a call to `Session`, and its reply out.

Every handler is registered for its tool's declaration in `HANDLERS`, which refuses, as this
module is imported, a declared tool left without one. The MCP server calls them through the
registry; the console page calls those it mirrors (`on_kernel`) directly, with a `KernelCall`.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import anyio

from warmkernel.errors import WarmkernelError
from warmkernel.execution.record import ExecutionRecord, WaitEnd
from warmkernel.execution.submission import Submission, parse_cell
from warmkernel.faces.connection import Connection
from warmkernel.faces.registry import ClientCall, Handlers, KernelCall, notebook_path
from warmkernel.replies.cell_states import notebook_run_reply, notebook_status_reply, notebook_watch_reply
from warmkernel.replies.export import export_reply, insert_reply
from warmkernel.replies.reads import dropped_reply, images_reply, read_reply, search_reply
from warmkernel.replies.reply import Reply
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
from warmkernel.session.session import Session
from warmkernel.tools.catalog import TOOLS
from warmkernel.tools.cell_tools import (
    INTERRUPT_PYTHON,
    RESET_PYTHON,
    RUN_PYTHON,
    SEND_PYTHON_INPUT,
    WAIT_PYTHON,
    InterruptPythonArgs,
    ResetPythonArgs,
    RunPythonArgs,
    SendPythonInputArgs,
    WaitPythonArgs,
)
from warmkernel.tools.kernel_tools import (
    INSPECT_PYTHON_VARIABLE,
    LIST_PYTHON_KERNELS,
    LIST_PYTHON_VARIABLES,
    PYTHON_STATUS,
    STOP_PYTHON_KERNEL,
    InspectPythonVariableArgs,
    ListPythonKernelsArgs,
    ListPythonVariablesArgs,
    PythonStatusArgs,
    StopPythonKernelArgs,
)
from warmkernel.tools.notebook_tools import (
    EXECUTIONS_TO_NOTEBOOK,
    NOTEBOOK_STATUS,
    RUN_NOTEBOOK_CELLS,
    WATCH_NOTEBOOK_FILE,
    ExecutionsToNotebookArgs,
    NotebookStatusArgs,
    RunNotebookCellsArgs,
    WatchNotebookFileArgs,
)
from warmkernel.tools.record_tools import (
    EXPORT_PYTHON_EXECUTIONS,
    LIST_PYTHON_EXECUTIONS,
    PYTHON_EXECUTION_STATUS,
    READ_PYTHON_OUTPUT,
    SEARCH_PYTHON_OUTPUT,
    ExportPythonExecutionsArgs,
    ListPythonExecutionsArgs,
    PythonExecutionStatusArgs,
    ReadPythonOutputArgs,
    SearchPythonOutputArgs,
)

HANDLERS = Handlers()


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
    call: ClientCall, record: ExecutionRecord, timeout_s: float, silence_s: float | None
) -> WaitEnd:
    """Wait on the record, telling a client that asked for progress how it goes every few seconds:
    `progress` of `total` from the cell's latest progress bar when it has one, else seconds elapsed.

    Some hosts drop a call that stays quiet for a minute; each notification resets their timer.
    `report_progress` sends nothing when the client gave no progress token.
    """

    async def report() -> None:
        shown = record.progress()  # a bar's fraction when the cell shows one, else elapsed seconds
        done, total = (shown.done, shown.total) if shown is not None else (record.elapsed(), None)
        await call.peer.report_progress(done, total, progress_message(record))

    every = (call.settings.progress_interval_s, report)
    return await call.session.wait(record, timeout_s, silence_s=silence_s, every=every)


async def _reply_after_wait(call: ClientCall, record: ExecutionRecord) -> Reply:
    """Wait as the cell's directives (or the defaults) say, then reply as run_python does."""
    timeout_s = record.directives.wait_seconds or call.settings.default_wait_s
    silence_s = record.directives.silence_seconds or call.settings.default_silence_s
    waited = await _wait(call, record, timeout_s, silence_s)
    return execution_reply(record, call.settings, waited=waited)


def _start_wait(conn: Connection, submission: Submission) -> float:
    """How long a cell waits for a starting kernel: the longest of the daemon's `--wait`, the
    client's and the cell's own `--wait` directive (a short one is for the cell, not for the
    start: `warmkernel run --timeout 0.3` on a kernel that is starting still runs its cell)."""
    asked = submission.directives.wait_seconds or 0.0
    return max(asked, conn.settings.default_wait_s, conn.kernels.settings.default_wait_s)


@HANDLERS.from_client(RUN_PYTHON)
async def run_python(call: ClientCall, args: RunPythonArgs) -> Reply:
    session = call.session
    session.start()  # a stopped kernel starts with this cell
    submission = parse_cell(args.freeform)  # a bad directive is refused before any wait
    if session.starting:
        # A kernel still starting (a gateway pulling an image) is waited for within the cell's wait.
        wait_s = _start_wait(call.conn, submission)
        if not await session.kernel_within(wait_s):
            return starting_reply(session.kernel_info(), wait_s)
    joined = await _joined(call.conn, session)  # what was there before this cell
    try:
        wait_s = submission.directives.wait_seconds or call.settings.default_wait_s
        record = await session.submit(submission, client=call.client, within_s=wait_s)
    except WarmkernelError:
        if joined is not None:  # a refusal (busy) does not carry it: the next reply does
            call.conn.told.discard(session.name)
        raise
    return _after(joined, await _reply_after_wait(call, record))


@HANDLERS.from_client(WAIT_PYTHON)
async def wait_python(call: ClientCall, args: WaitPythonArgs) -> Reply:
    record = call.session.select(args.execution)
    waited = await _wait(call, record, args.timeout_seconds, args.silence_seconds)
    return execution_reply(record, call.settings, waited=waited)


@HANDLERS.from_client(SEND_PYTHON_INPUT)
async def send_python_input(call: ClientCall, args: SendPythonInputArgs) -> Reply:
    record = call.session.send_input(args.text, args.execution)
    return await _reply_after_wait(call, record)


@HANDLERS.from_client(PYTHON_STATUS)
async def python_status(call: ClientCall, args: PythonStatusArgs) -> Reply:
    session, conn = call.session, call.conn
    joined = await _joined(conn, session)
    if conn.note is not None and conn.greeting is None:  # the first reply says it anyway
        joined = _after(Reply(conn.note, {"note": conn.note}), joined) if joined else Reply(conn.note)
    records = session.records
    return _after(
        joined,
        status_reply(
            session.workspace,
            call.settings,
            session.name,
            session.kernel_info(),
            session.running,
            records[-1] if records else None,
            conn.kernels.summaries(),
        ),
    )


@HANDLERS.on_kernel(PYTHON_EXECUTION_STATUS)
async def python_execution_status(call: KernelCall, args: PythonExecutionStatusArgs) -> Reply:
    return execution_status_reply(call.session.select(args.execution))


@HANDLERS.on_kernel(READ_PYTHON_OUTPUT)
async def read_python_output(call: KernelCall, args: ReadPythonOutputArgs) -> Reply:
    chosen = call.session.select_output(args.execution, args.stream, args.line_range)
    if chosen.stream == "images":
        return images_reply(chosen.record, chosen.lo, chosen.hi, call.settings)
    return read_reply(chosen.record, chosen.stream, chosen.lo, chosen.hi, args.max_chars, call.settings)


@HANDLERS.on_kernel(SEARCH_PYTHON_OUTPUT)
async def search_python_output(call: KernelCall, args: SearchPythonOutputArgs) -> Reply:
    found = await call.session.search_output(
        args.execution,
        args.stream,
        args.query,
        args.query_mode,
        args.ignore_case,
        args.context_before,
        args.context_after,
        args.max_matches,
    )
    if found.result is None:
        return dropped_reply(found.record)
    return search_reply(
        found.record, args.stream, args.query, found.result, args.max_chars, call.settings.read_max_chars
    )


@HANDLERS.on_kernel(INTERRUPT_PYTHON)
async def interrupt_python(call: KernelCall, args: InterruptPythonArgs) -> Reply:
    return interrupt_reply(call.session.interrupt())


@HANDLERS.on_kernel(RESET_PYTHON)
async def reset_python(call: KernelCall, args: ResetPythonArgs) -> Reply:
    killed = await call.session.reset()
    return reset_reply(killed, call.session.kernel_info(), call.session.workspace.path)


@HANDLERS.from_client(LIST_PYTHON_EXECUTIONS)
async def list_python_executions(call: ClientCall, args: ListPythonExecutionsArgs) -> Reply:
    return list_reply(call.session.records, args.limit, call.client)


@HANDLERS.on_kernel(LIST_PYTHON_VARIABLES)
async def list_python_variables(call: KernelCall, args: ListPythonVariablesArgs) -> Reply:
    include_imports = args.include_imports or args.include_modules  # the older, narrower name
    return variables_reply(await call.session.list_variables(include_imports=include_imports))


@HANDLERS.on_kernel(INSPECT_PYTHON_VARIABLE)
async def inspect_python_variable(call: KernelCall, args: InspectPythonVariableArgs) -> Reply:
    return summary_reply(await call.session.inspect_variable(args.name))


@HANDLERS.on_workspace(LIST_PYTHON_KERNELS)
async def list_python_kernels(conn: Connection, args: ListPythonKernelsArgs) -> Reply:
    return kernels_reply(conn.kernels.summaries())


@HANDLERS.on_workspace(STOP_PYTHON_KERNEL)
async def stop_python_kernel(conn: Connection, args: StopPythonKernelArgs) -> Reply:
    session, killed = await conn.kernels.stop(args.name)
    return stop_kernel_reply(session.name, killed, len(session.records))


@HANDLERS.on_kernel(NOTEBOOK_STATUS)
async def notebook_status(call: KernelCall, args: NotebookStatusArgs) -> Reply:
    path = notebook_path(call.settings, NOTEBOOK_STATUS, args.path)
    return notebook_status_reply(await call.session.notebook_status(path), call.settings)


@HANDLERS.from_client(RUN_NOTEBOOK_CELLS)
async def run_notebook_cells(call: ClientCall, args: RunNotebookCellsArgs) -> Reply:
    session, path = call.session, notebook_path(call.settings, RUN_NOTEBOOK_CELLS, args.path)
    run = await session.run_notebook_cells(
        path, args.cells, stop_on_error=args.stop_on_error, client=call.client
    )
    wait_s = args.timeout_seconds if args.timeout_seconds is not None else call.settings.default_wait_s
    with anyio.move_on_after(wait_s):
        await run.done.wait()
    view = await session.notebook_status(path) if run.done.is_set() else None
    return notebook_run_reply(run, view, call.settings, waited_s=wait_s)


@HANDLERS.on_kernel(WATCH_NOTEBOOK_FILE)
async def watch_notebook_file(call: KernelCall, args: WatchNotebookFileArgs) -> Reply:
    path = notebook_path(call.settings, WATCH_NOTEBOOK_FILE, args.path)
    cell_id, file = await call.session.watch_notebook_file(path, args.file, args.cell)
    return notebook_watch_reply(await call.session.notebook_status(path), cell_id, file)


@HANDLERS.from_client(EXPORT_PYTHON_EXECUTIONS)
async def export_python_executions(call: ClientCall, args: ExportPythonExecutionsArgs) -> Reply:
    if args.path is not None:
        call.conn.kernels.refuse_bound(args.path)
    return export_reply(await call.session.export_executions(args.executions, args.path, args.format))


@HANDLERS.on_kernel(EXECUTIONS_TO_NOTEBOOK)
async def executions_to_notebook(call: KernelCall, args: ExecutionsToNotebookArgs) -> Reply:
    path = notebook_path(call.settings, EXECUTIONS_TO_NOTEBOOK, args.path)
    notebook, inserted = await call.session.executions_to_notebook(args.executions, path, args.after_cell)
    return insert_reply(notebook, inserted)


HANDLERS.check(TOOLS)
