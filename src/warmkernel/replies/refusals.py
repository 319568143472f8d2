"""Why a call was refused, and what to call instead: the messages of the session's coded errors."""

from __future__ import annotations

from warmkernel.errors import WarmkernelError
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.selection import Selection, selection_text
from warmkernel.notebook.binding import NotebookRun
from warmkernel.replies.hints import call
from warmkernel.types import ExecutionState


def busy(running: ExecutionRecord, consequence: str) -> WarmkernelError:
    """`busy`: a cell runs (or waits for input), so this call did nothing. Names the client that
    sent the running cell (by name: two clients of one name, two CLI commands, are not told apart)."""
    number = running.number
    who = f"execution {number}" + (f" (sent by {running.client})" if running.client else "")
    if running.state is ExecutionState.AWAITING_INPUT:
        return WarmkernelError(
            "busy",
            f"{who} is waiting for input; {consequence}. Answer it with "
            f"{call('send_python_input', text='...', execution=number)}, "
            f"or {call('interrupt_python')} to stop it.",
        )
    return WarmkernelError(
        "busy",
        f"{who} is still running; {consequence}. Call {call('wait_python', execution=number)} "
        f"to wait for it, or {call('interrupt_python')} to stop it.",
    )


def notebook_busy(run: NotebookRun, consequence: str) -> WarmkernelError:
    """`busy`: a run of notebook cells goes on, so this call did nothing."""
    running = (
        f"execution {run.current[1].number} (cell {run.current[0].id})" if run.current else "between cells"
    )
    return WarmkernelError(
        "busy",
        f"run_notebook_cells is running cells of {run.shown} ({len(run.results)} of {len(run.cells)} done; "
        f"now {running}); {consequence}. Call {call('wait_python')} to wait for the running cell, "
        f"{call('notebook_status', path=run.shown)} to follow the run, or {call('interrupt_python')} "
        "to stop it.",
    )


def not_awaiting(record: ExecutionRecord, execution: int | None) -> WarmkernelError:
    """`not_awaiting_input`: there is no prompt to answer."""
    if execution is None and record.state.finished:
        message = (
            f"no execution is waiting for input (the latest, {record.number}, is {record.state.value}); "
            f"{call('send_python_input', text='...')} answers a cell whose reply shows a prompt"
        )
    elif record.state is ExecutionState.RUNNING:
        message = (
            f"execution {record.number} is running, not waiting for input; "
            f"{call('wait_python', execution=record.number)} replies as soon as it asks"
        )
    else:
        message = f"execution {record.number} is {record.state.value}, not waiting for input"
    return WarmkernelError("not_awaiting_input", message)


def not_found(execution: int | None, count: int, kernel: str) -> WarmkernelError:
    """`execution_not_found`: no such number in `kernel`, or (None) no execution there at all yet.
    The kernel is named: each has its own numbers, and the caller may have meant another's."""
    if execution is None:
        message = f"kernel {kernel} has run no cell yet; run one with {call('run_python', freeform='...')}"
    elif count == 0:
        message = f"execution {execution} does not exist: kernel {kernel} has run no cell yet"
    else:
        message = f"execution {execution} does not exist in kernel {kernel}; executions 1-{count} exist"
    return WarmkernelError("execution_not_found", message)


def already_bound(kernel: str, bound: str, wanted: str) -> WarmkernelError:
    """`notebook_already_bound`: the kernel named explicitly serves another notebook."""
    return WarmkernelError(
        "notebook_already_bound",
        f"kernel {kernel} is bound to {bound}; a kernel serves one notebook. "
        f"{call('notebook_status', path=wanted, kernel=None)} gives {wanted} a kernel of its own, "
        f"or {call('reset_python')} first to bind it to {kernel}",
    )


def notebook_has_kernel(holder: str, notebook: str, wanted: str) -> WarmkernelError:
    """`notebook_already_bound`: the notebook is bound to a live kernel other than the one named."""
    return WarmkernelError(
        "notebook_already_bound",
        f"{notebook} is bound to kernel {holder}; a notebook has one kernel at a time. "
        f"{call('notebook_status', path=notebook)} uses {holder}, or "
        f"{call('stop_python_kernel', name=holder)} first to bind {notebook} to {wanted}",
    )


def export_onto_notebook(path: str, holder: str) -> WarmkernelError:
    """`invalid_arguments`: an export would replace a notebook a kernel is bound to."""
    return WarmkernelError(
        "invalid_arguments",
        f"{path!r} is the notebook kernel {holder} is bound to, which an export never replaces; "
        f"{call('executions_to_notebook', executions='...', path=path)} adds cells to it without "
        "replacing the others, or export to another path",
    )


def no_notebook_to_add_to(missing: WarmkernelError, path: str, executions: Selection) -> WarmkernelError:
    """`notebook_not_found` for executions_to_notebook, which adds to a notebook that exists."""
    export = call("export_python_executions", executions=selection_text(executions), path=path)
    return WarmkernelError("notebook_not_found", f"{missing.message}. {export} writes them as a new notebook")


def no_kernel(name: str, kernels: list[str]) -> WarmkernelError:
    """`kernel_not_found`: a call that only reads found no kernel of that name (it starts none)."""
    return WarmkernelError(
        "kernel_not_found",
        f"there is no kernel {name}; kernels: {', '.join(kernels)}. "
        f"{call('run_python', freeform='...', kernel=name)} starts it",
    )


def too_many_kernels(name: str, live: list[str], limit: int) -> WarmkernelError:
    """`too_many_kernels`: starting one more would pass the limit."""
    return WarmkernelError(
        "too_many_kernels",
        f"kernel {name} was not started: {len(live)} kernels run ({', '.join(live)}), the most this "
        f"daemon runs (--max-kernels {limit}). Stop one with {call('stop_python_kernel', name=live[-1])} "
        f"(its records stay readable), or see them with {call('list_python_kernels')}",
    )


def no_namespace(kernel: str, stopped: str, done: str) -> WarmkernelError:
    """`inspection_failed`: a stopped kernel has no variables to show, and a look starts none."""
    return WarmkernelError(
        "inspection_failed",
        f"variables cannot be {done}: kernel {kernel} is stopped ({stopped}), so it has no namespace; "
        f"{call('run_python', freeform='...')} starts it again, empty",
    )


def unresponsive(seconds: float, generation: int) -> WarmkernelError:
    """`inspection_failed`: the kernel did not answer a silent question, even when interrupted, and
    was replaced so that no later cell is sent into it."""
    return WarmkernelError(
        "inspection_failed",
        f"the kernel did not answer within {seconds:.0f} s, even after an interrupt (stuck in code that "
        f"ignores interrupts, or in native code); it was restarted as generation {generation + 1}, "
        "and its namespace was lost",
    )


def helper_not_loaded() -> WarmkernelError:
    """`inspection_failed`: the kernel-side helper failed to load at kernel start."""
    return WarmkernelError(
        "inspection_failed",
        "the kernel-side helper is not loaded in this kernel (it failed at kernel start; "
        f"the server log says why); {call('reset_python')} starts a kernel with it",
    )


def variable_not_found(message: str) -> WarmkernelError:
    """`variable_not_found`: the helper found no such name (its `message` says which part)."""
    return WarmkernelError(
        "variable_not_found", f"{message}; {call('list_python_variables')} lists the names"
    )


def not_responding(kernel: str, why: str) -> WarmkernelError:
    """`kernel_not_responding`: the kernel did not answer within the call's wait, so no cell was
    numbered or sent; what would make it answer again."""
    return WarmkernelError(
        "kernel_not_responding",
        f"kernel {kernel} {why}; no cell was run. {call('interrupt_python')} may free it; "
        f"{call('reset_python')} starts a fresh kernel (its namespace is lost)",
    )
