"""Replies about the kernels and their executions: python_status, python_execution_status,
list_python_executions, interrupt_python, reset_python, list_python_kernels and
stop_python_kernel."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from warmkernel.execution.charts import renderers
from warmkernel.execution.record import ExecutionRecord
from warmkernel.kernel.base import KernelInfo
from warmkernel.kernel.inspector import VariableListing
from warmkernel.replies.hints import call
from warmkernel.replies.reads import dropped, images_not_kept
from warmkernel.replies.reply import Reply, clip, duration
from warmkernel.replies.runs import record_facts
from warmkernel.settings.model import Settings
from warmkernel.types import MAIN_KERNEL, Generation
from warmkernel.workspace import Workspace


@dataclass(frozen=True)
class KernelSummary:
    """One kernel as `list_python_kernels` and python_status show it."""

    name: str
    info: KernelInfo
    executions: int
    """Records of this kernel, all generations."""
    running: ExecutionRecord | None
    notebook: str | None
    """The bound notebook, as shown (relative to the workspace)."""
    idle_s: float | None
    """Since its last call or cell; None while a call or a cell uses it."""
    memory_bytes: int | None
    """The kernel's resident memory with every process it started (`Session.memory_bytes`)."""


def execution_status_reply(record: ExecutionRecord) -> Reply:
    output = record.output
    counts = {
        stream: output.line_count(stream)
        for stream in ("combined", "stdout", "stderr", "result", "traceback")
    }
    lines = [
        f"execution {record.number}: {record.state.value}",
        f"started: {record.started_at.isoformat(timespec='milliseconds')}",
        f"elapsed: {duration(record.elapsed())}",
        f"kernel generation: {record.generation}",
    ]
    if record.ended_at is not None:
        lines.insert(2, f"ended: {record.ended_at.isoformat(timespec='milliseconds')}")
    if record.error_name:
        lines.append(f"error: {record.error_name}: {record.error_value}")
    if record.end_reason:
        lines.append(f"reason: {record.end_reason}")
    if record.patch_literals:
        lines.append(f"patch literals converted: {record.patch_literals}")
    if output.dropped:
        lines.append(dropped(record))
    if record.images_not_kept:
        lines.append(images_not_kept(record))
    lines.append("lines: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    data = record_facts(record) | {
        "started_at": record.started_at.isoformat(),
        "ended_at": record.ended_at.isoformat() if record.ended_at else None,
        "line_counts": counts,
        "patch_literals": record.patch_literals,
        "output_dropped": output.dropped,
        "images_not_kept": record.images_not_kept,
    }
    return Reply("\n".join(lines), data)


def status_reply(
    workspace: Workspace,
    settings: Settings,
    name: str,
    kernel: KernelInfo,
    running: ExecutionRecord | None,
    latest: ExecutionRecord | None,
    kernels: Sequence[KernelSummary],
) -> Reply:
    """The kernel the call names, in full, then every kernel of the workspace in a line."""
    resolution = workspace.resolution + (f" ({workspace.config_file})" if workspace.config_file else "")
    place = kernel.place
    lines = [
        f"workspace: {workspace.path}",
        f"workspace resolution: {resolution}",
        f"interpreter: {place.environment or settings.python}"
        if settings.jupyter_url is None
        else f"interpreter: kernelspec {settings.kernel_name!r} of the Jupyter server",
        f"kernel{'' if name == MAIN_KERNEL else f' {name}'}: {kernel.state.value}"
        + (f" ({kernel.detail})" if kernel.detail else "")
        + f", generation {kernel.generation}"
        + (f", pid {place.pid}" if place.pid is not None else "")
        + (f", kernel {place.kernel_id} on {place.server_url}" if place.server_url else ""),
    ]
    if place.connection_file:
        lines.append(f"connection file: {place.connection_file} (attach: jupyter console --existing FILE)")
    if place.tracking:
        lines.append(f"process tracking: {place.tracking} (what reset and stop kill)")
    if kernel.spare_kernels_ready is not None:
        lines.append(f"spare kernels: {kernel.spare_kernels_ready} of {settings.spare_kernels} ready")
    if place.cwd is not None:
        lines.append(f"kernel working directory: {place.cwd} (the Jupyter server's choice, on its machine)")
        if place.cwd != str(workspace.path):
            lines.append(
                "limits: the kernel sees the server's files, not this workspace's; notebook mode needs "
                "the notebook at the same path on both sides"
            )
    if running is not None:
        doing = "awaiting input after" if running.prompt is not None else "running for"
        lines.append(f"busy: execution {running.number} {doing} {duration(running.elapsed())}")
    else:
        lines.append("busy: no")
    if latest is not None:
        lines.append(f"latest execution: {latest.number} ({latest.state.value})")
    charts = renderers()
    lines.append(_charts_line(charts))
    lines.append("kernels: " + ", ".join(f"{k.name} ({_brief(k)})" for k in kernels))
    lines.append(
        "configuration: " + (", ".join(settings.config_files) or "no files (defaults, environment, flags)")
    )
    data = {
        "workspace": str(workspace.path),
        "workspace_resolution": workspace.resolution,
        "interpreter": settings.python,
        "environment": place.environment,
        "kernel_state": kernel.state.value,
        "kernel_starting": kernel.detail or None,
        "kernel_pid": place.pid,
        "connection_file": str(place.connection_file) if place.connection_file else None,
        "process_tracking": place.tracking,
        "kernel_server_url": place.server_url,
        "kernel_id": place.kernel_id,
        "kernel_cwd": place.cwd,
        "generation": kernel.generation,
        "spare_kernels_ready": kernel.spare_kernels_ready,
        "busy": running is not None,
        "running_execution": running.number if running else None,
        "latest_execution": latest.number if latest else None,
        "kernels": [_kernel_facts(k) for k in kernels],
        "charts": {kind: reason or "drawn as pictures" for kind, reason in charts.items()},
        "config_files": list(settings.config_files),
    }
    return Reply("\n".join(lines), data)


def _brief(kernel: KernelSummary) -> str:
    """`ready`, `running In [4]`, `stopped`: a kernel in a word or two."""
    if kernel.running is not None:
        return f"running In [{kernel.running.number}]"
    return kernel.info.state.value


def _kernel_facts(kernel: KernelSummary) -> dict[str, object]:
    return {
        "name": kernel.name,
        "state": kernel.info.state.value,
        "generation": kernel.info.generation,
        "pid": kernel.info.place.pid,
        "memory_bytes": kernel.memory_bytes,
        "executions": kernel.executions,
        "running_execution": kernel.running.number if kernel.running is not None else None,
        "notebook": kernel.notebook,
        "idle_s": round(kernel.idle_s, 1) if kernel.idle_s is not None else None,
    }


def kernels_reply(kernels: Sequence[KernelSummary]) -> Reply:
    """list_python_kernels: a row per kernel, `main` first."""
    rows = [
        f"{'kernel':<14} {'state':<18} {'gen':>3} {'pid':>7} {'memory':>9} {'runs':>5}  idle      notebook"
    ]
    for k in kernels:
        memory = f"{k.memory_bytes / 2**20:.0f} MiB" if k.memory_bytes is not None else "-"
        idle = duration(k.idle_s) if k.idle_s is not None else "-"
        rows.append(
            f"{k.name:<14} {_brief(k):<18} {k.info.generation:>3} {k.info.place.pid or '-':>7} "
            f"{memory:>9} {k.executions:>5}  {idle:<9} {k.notebook or '-'}"
        )
    rows.append(
        f"{call('run_python', freeform='...', kernel='NAME')} runs a cell in kernel NAME (a new name "
        f"starts one); {call('stop_python_kernel', name='NAME')} stops one."
    )
    return Reply("\n".join(rows), {"kernels": [_kernel_facts(k) for k in kernels]})


def stop_kernel_reply(name: str, killed: ExecutionRecord | None, records: int) -> Reply:
    what = f"execution {killed.number} was killed" if killed else "no execution was running"
    text = (
        f"stopped: kernel {name}; {what}. {_records_stay(records)}; "
        "its next use starts a fresh kernel with an empty namespace"
    )
    return Reply(text, {"kernel": name, "killed_execution": killed.number if killed else None})


def _records_stay(count: int) -> str:
    if count <= 1:
        return "Its record stays readable" if count else "It has no records"
    return f"Its {count} records stay readable"


def idle_stop_notice(name: str, limit_s: float) -> str:
    """The one-time note that a named kernel was stopped for being idle."""
    return (
        f"note: kernel {name} was stopped after {limit_s:g} s without a call or a running cell "
        "(--kernel-idle-stop); its namespace was lost and its records stay readable; its next use "
        "starts a fresh kernel"
    )


def _charts_line(charts: dict[str, str | None]) -> str:
    """Which charts replies show as pictures, and why not the others."""
    drawn = [kind for kind, reason in charts.items() if reason is None]
    if not drawn and len(set(charts.values())) == 1:
        return f"charts as pictures: none ({next(iter(charts.values()))})"
    missing = "; ".join(f"not {kind}: {reason}" for kind, reason in charts.items() if reason is not None)
    return f"charts as pictures: {', '.join(drawn) or 'none'}" + (f" ({missing})" if missing else "")


def starting_reply(kernel: KernelInfo, waited_s: float) -> Reply:
    """run_python while the kernel is still starting: nothing was run, and what to do next."""
    text = (
        f"the kernel (generation {kernel.generation}) is still starting ({kernel.detail}); "
        f"waited {duration(waited_s)} and ran nothing. Send the cell again once {call('python_status')} "
        "says ready"
    )
    return Reply(text, {"kernel_starting": kernel.detail})


def list_reply(records: Sequence[ExecutionRecord], limit: int, caller: str) -> Reply:
    """The newest `limit` records, a row each; a cell another client sent (a person in JupyterLab,
    another agent) names that client."""
    newest = list(reversed(records))[:limit]
    if not newest:
        return Reply("No executions yet.", {"executions": [], "total": 0})
    rows = [
        f"{r.number:>4}  {r.state.value:<11} {duration(r.elapsed()):>9}  "
        f"{r.output.line_count('combined'):>7} {_lines_word(r):<5}  {clip(r.first_line, 80)}"
        + (f"  · by {r.client}" if r.client and r.client != caller else "")
        for r in newest
    ]
    more = len(records) - len(newest)
    if more:
        older = f"{more} older execution{'s' if more != 1 else ''}"
        rows.append(f"({older}; {call('list_python_executions', limit=len(records))} lists them all)")
    data = {
        "executions": [
            {
                "execution": r.number,
                "state": r.state.value,
                "elapsed_s": round(r.elapsed(), 3),
                "first_line": r.first_line,
                "lines": r.output.line_count("combined"),
                "client": r.client or None,
            }
            for r in newest
        ],
        "total": len(records),
    }
    return Reply("\n".join(rows), data)


def _lines_word(record: ExecutionRecord) -> str:
    return "line" if record.output.line_count("combined") == 1 else "lines"


def environment_notice(environment: str) -> str:
    """The one-time note that the kernel runs in a project environment `--python auto` found."""
    return f"note: the kernel runs in the project's environment, {environment}"


def restart_notice(first: int, last: int) -> str:
    """The one-time note after a restart that found journaled executions `first` to `last`."""
    kept = f"execution {first} is" if first == last else f"executions {first}-{last} are"
    return (
        f"note: warmkernel restarted; {kept} kept and readable, "
        "but the kernel is new and its namespace is empty"
    )


def kernel_lost_notice(generation: Generation, what_happened: str) -> str:
    """The one-time note that a kernel's namespace was lost and a fresh kernel started:
    `what_happened` to it, e.g. `died (signal SIGKILL)`."""
    return (
        f"note: the kernel (generation {generation}) {what_happened}; its namespace was lost. "
        f"A fresh kernel (generation {generation + 1}) was started."
    )


def interrupt_reply(record: ExecutionRecord | None) -> Reply:
    if record is None:
        return Reply(
            "idle: no execution is running; nothing was interrupted", {"status": "idle", "execution": None}
        )
    text = (
        f"interrupt_sent: SIGINT for execution {record.number}; "
        f"call {call('wait_python', execution=record.number)} to see how it ended"
    )
    return Reply(text, {"status": "interrupt_sent", "execution": record.number})


def reset_reply(killed: ExecutionRecord | None, kernel: KernelInfo, workspace: Path) -> Reply:
    what = f"execution {killed.number} was killed" if killed else "no execution was running"
    where = kernel.place.cwd or workspace  # a kernel on a server runs where the server chose
    text = (
        f"reset: kernel generation {kernel.generation} started in {where} with an empty namespace; "
        f"{what}; earlier records stay readable"
    )
    return Reply(
        text, {"generation": kernel.generation, "killed_execution": killed.number if killed else None}
    )


JOINED_VARIABLES = 12
"""Questions a joined-kernel note names; list_python_variables shows them all."""


def joined_reply(
    kernel: KernelInfo,
    records: Sequence[ExecutionRecord],
    running: ExecutionRecord | None,
    listing: VariableListing | None,
) -> Reply:
    """What a client that comes to a kernel already in use should know first."""
    age = f", up {duration(time.time() - kernel.ready_since)}" if kernel.ready_since else ""
    lines = [
        f"note: you joined a live kernel (generation {kernel.generation}{age}): {kernel.executions} "
        f"execution{'s' if kernel.executions != 1 else ''} in its namespace, {len(records)} kept in all; "
        f"{call('list_python_executions')} lists them."
    ]
    if running is not None:
        sender = f" (sent by {running.client})" if running.client else ""
        lines.append(
            f"In [{running.number}]{sender} is running: {call('wait_python', execution=running.number)}."
        )
    variables: list[dict[str, str]] = []
    if listing is not None and listing["variables"]:
        variables = [{"name": row["name"], "type": row["type"]} for row in listing["variables"]]
        shown = ", ".join(f"{row['name']} ({row['type']})" for row in variables[:JOINED_VARIABLES])
        more = len(variables) - JOINED_VARIABLES
        tail = f", and {more} more" if more > 0 else ""
        lines.append(f"variables: {shown}{tail}; {call('inspect_python_variable', name='NAME')} shows one.")
    data = {
        "generation": kernel.generation,
        "executions": kernel.executions,
        "records": len(records),
        "running": running.number if running is not None else None,
        "variables": variables,
    }
    return Reply("\n".join(lines), data)
