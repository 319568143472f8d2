"""ExecutionTracker without a kernel: scripted kernel events in, the record's output and state out.

The kernel here has no process: a real KernelChannel over a transport that only records what
is sent, so interrupts, input replies and the end of routing can be checked. Messages are the
typed events the channel's parsers make, or plain dicts recorded from ipykernel 6 run through
those parsers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import pytest

from warmkernel.execution.charts import Charts
from warmkernel.execution.record import ExecutionRecord
from warmkernel.kernel.base import Kernel, KernelPlace
from warmkernel.kernel.channel import (
    Display,
    Error,
    Event,
    ExecuteInput,
    InputRequest,
    KernelChannel,
    Outgoing,
    Reply,
    Route,
    Status,
    Stream,
    parse_iopub,
    parse_reply,
)
from warmkernel.session.running import ExecutionTracker
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

pytestmark = pytest.mark.anyio

GRACE_S = 0.05
"""The tracker's wait for a reply after idle, short so that no test sleeps for long."""

# One cell, `print('hello')\n6 * 7`, as ipykernel 6 published it (IOPub, then the shell reply).
RECORDED_IOPUB: list[Mapping[str, Any]] = [
    {"header": {"msg_type": "status"}, "content": {"execution_state": "busy"}},
    {
        "header": {"msg_type": "execute_input"},
        "content": {"code": "print('hello')\n6 * 7", "execution_count": 1},
    },
    {"header": {"msg_type": "stream"}, "content": {"name": "stdout", "text": "hello\n"}},
    {
        "header": {"msg_type": "execute_result"},
        "content": {"data": {"text/plain": "42"}, "metadata": {}, "execution_count": 1},
    },
    {"header": {"msg_type": "status"}, "content": {"execution_state": "idle"}},
]
RECORDED_REPLY: Mapping[str, Any] = {
    "header": {"msg_type": "execute_reply"},
    "content": {"status": "ok", "execution_count": 1, "user_expressions": {}, "payload": []},
}


class RecordingTransport:
    """Sends nowhere; keeps what the channel sent, by channel."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def run(self, route: Route, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()

    def send(self, channel: Outgoing, msg: dict[str, Any]) -> None:
        self.sent.append((channel, msg))


class ScriptedKernel(Kernel):
    """A kernel with no process behind it: counts interrupts, records what its channel sends."""

    def __init__(self) -> None:
        self.transport = RecordingTransport()
        super().__init__(Generation(1), KernelChannel(self.transport))
        self.interrupts = 0

    def place(self) -> KernelPlace:
        return KernelPlace()

    def exit_reason(self) -> str:
        return "signal SIGKILL"

    def start_failure_detail(self) -> str:
        return ""

    def interrupt(self) -> None:
        self.interrupts += 1

    async def kill(self) -> None:
        self.exited.set()


@dataclass
class Cell:
    """One execute request under a tracker, and what the tracker told back."""

    tracker: ExecutionTracker
    kernel: ScriptedKernel
    finished: list[ExecutionTracker] = field(default_factory=list)

    @property
    def record(self) -> ExecutionRecord:
        return self.tracker.record

    def deliver(self, *events: Event) -> None:
        for event in events:
            self.tracker.deliver(event)

    def lines(self, stream: Literal["combined", "stdout", "traceback"] = "combined") -> list[str]:
        return list(self.record.output.iter_lines(stream))

    async def done(self) -> None:
        with anyio.fail_after(5):
            await self.record.done.wait()


@pytest.fixture
async def cell() -> AsyncIterator[Cell]:
    """A tracked request whose background tasks (input settle, reply grace) all end with the test."""
    kernel = ScriptedKernel()
    record = ExecutionRecord(ExecutionNumber(3), "cell", kernel.generation)
    async with anyio.create_task_group() as tg:
        finished: list[ExecutionTracker] = []
        tracker = ExecutionTracker(
            record,
            kernel,
            spawn=tg.start_soon,
            on_finish=finished.append,
            reply_after_idle_s=GRACE_S,
            charts=Charts(),  # no chart here: no browser is opened
        )
        tracker.msg_id = kernel.channel.execute("cell", tracker, allow_stdin=True)
        yield Cell(tracker, kernel, finished)


def ok() -> Reply:
    return Reply("execute_reply", "ok")


async def test_reply_before_idle_finishes_at_idle_with_the_output_that_trailed_the_reply(cell: Cell) -> None:
    cell.deliver(Status("busy"), ExecuteInput(), Stream("stdout", "a\n"), ok(), Stream("stdout", "late\n"))
    assert cell.record.state is ExecutionState.RUNNING  # output may trail execute_reply
    cell.deliver(Status("idle"))
    assert cell.record.state is ExecutionState.COMPLETED
    assert cell.lines() == ["a", "late"]
    assert cell.finished == [cell.tracker]


async def test_idle_before_reply_finishes_at_the_reply(cell: Cell) -> None:
    for msg in RECORDED_IOPUB:
        event = parse_iopub(msg)
        assert event is not None
        cell.deliver(event)
    assert cell.record.state is ExecutionState.RUNNING
    cell.deliver(parse_reply(RECORDED_REPLY))
    assert cell.record.state is ExecutionState.COMPLETED
    assert cell.lines() == ["hello", "Out[3]: 42"]  # warmkernel's number, not IPython's 1
    assert cell.lines("stdout") == ["hello"]
    assert cell.finished == [cell.tracker] and cell.record.end_reason == ""
    # The grace task started at idle ends with the fixture; finishing the record twice would raise there.


async def test_error_reply_keeps_the_traceback_and_the_error_name(cell: Cell) -> None:
    cell.deliver(
        ExecuteInput(),
        Error("ZeroDivisionError", "division by zero", ["Traceback:", "ZeroDivisionError: division by zero"]),
        Status("idle"),
        Reply("execute_reply", "error", "ZeroDivisionError", "division by zero"),
    )
    assert cell.record.state is ExecutionState.ERROR
    assert (cell.record.error_name, cell.record.error_value) == ("ZeroDivisionError", "division by zero")
    assert cell.lines("traceback") == ["Traceback:", "ZeroDivisionError: division by zero"]


async def test_interrupt_before_the_code_starts_is_sent_when_it_starts(cell: Cell) -> None:
    cell.tracker.interrupt()
    assert cell.kernel.interrupts == 0  # ipykernel ignores SIGINT between requests
    cell.deliver(Status("busy"), ExecuteInput())
    assert cell.kernel.interrupts == 1


async def test_idle_without_reply_after_an_interrupt_is_interrupted_after_the_grace(cell: Cell) -> None:
    cell.deliver(ExecuteInput(), Stream("stdout", "working\n"))
    cell.tracker.interrupt()
    assert cell.kernel.interrupts == 1
    cell.deliver(Status("idle"))
    assert cell.record.state is ExecutionState.RUNNING  # a reply may still trail the idle
    await cell.done()
    assert cell.record.state is ExecutionState.INTERRUPTED
    assert cell.record.end_reason == "the kernel went idle without replying"
    assert cell.lines() == ["working"]


async def test_idle_without_reply_and_without_interrupt_is_an_error(cell: Cell) -> None:
    cell.deliver(ExecuteInput(), Status("idle"))
    await cell.done()
    assert cell.record.state is ExecutionState.ERROR
    assert cell.record.end_reason == "the kernel went idle without replying"


async def test_death_mid_cell_is_died_with_the_reason_and_later_events_are_dropped(cell: Cell) -> None:
    cell.deliver(ExecuteInput(), Stream("stdout", "before\n"))
    cell.tracker.finish(ExecutionState.DIED, reason=cell.kernel.exit_reason())
    assert (cell.record.state, cell.record.end_reason) == (ExecutionState.DIED, "signal SIGKILL")
    assert cell.finished == [cell.tracker]
    cell.deliver(Stream("stdout", "after\n"), Status("idle"), ok())
    assert cell.record.state is ExecutionState.DIED
    assert cell.lines() == ["before"]
    assert cell.finished == [cell.tracker]


async def test_death_while_a_reply_is_awaited_after_idle_stays_died(cell: Cell) -> None:
    cell.deliver(ExecuteInput(), Status("idle"))
    cell.tracker.finish(ExecutionState.DIED, reason=cell.kernel.exit_reason())
    with anyio.fail_after(5):
        await anyio.sleep(GRACE_S * 2)  # the grace after idle ends without finishing the record again
    assert (cell.record.state, cell.record.end_reason) == (ExecutionState.DIED, "signal SIGKILL")
    assert cell.finished == [cell.tracker]


async def test_input_request_waits_then_the_answer_is_sent_and_shown_after_the_prompt(cell: Cell) -> None:
    cell.deliver(ExecuteInput(), InputRequest("name? ", password=False))
    with anyio.fail_after(5):
        waited = await cell.record.wait(5)
    assert waited.reason == "input"
    assert cell.record.state is ExecutionState.AWAITING_INPUT
    cell.tracker.answer("Ada")
    assert cell.record.state is ExecutionState.RUNNING
    channel, msg = cell.kernel.transport.sent[-1]
    assert (channel, msg["header"]["msg_type"], msg["content"]) == ("stdin", "input_reply", {"value": "Ada"})
    cell.deliver(Status("idle"), ok())
    assert cell.record.state is ExecutionState.COMPLETED
    assert cell.lines() == ["name? Ada"]


async def test_a_password_is_never_written_to_the_output(cell: Cell) -> None:
    cell.deliver(ExecuteInput(), InputRequest("secret: ", password=True))
    with anyio.fail_after(5):
        await cell.record.wait(5)
    cell.tracker.answer("hunter2")
    assert cell.lines() == ["secret: "]


def iopub(cell: Cell, msg_type: str, content: Mapping[str, Any]) -> None:
    """An IOPub message of the cell's request, routed by the kernel's real channel."""
    message = {"header": {"msg_type": msg_type}, "parent_header": {"msg_id": cell.tracker.msg_id}}
    cell.kernel.channel._route("iopub", {**message, "content": content})  # pyright: ignore[reportPrivateUsage]


BAR_STATE = {"_model_name": "IntProgressModel", "value": 0, "min": 0, "max": 200, "description": "epochs"}


async def test_a_widget_view_follows_its_model_and_is_the_progress_display(cell: Cell) -> None:
    cell.deliver(ExecuteInput())
    iopub(
        cell, "comm_open", {"comm_id": "bar", "target_name": "jupyter.widget", "data": {"state": BAR_STATE}}
    )
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "bar"}, "text/plain": "IntProgress()"}
    iopub(cell, "display_data", {"data": view, "transient": {}})
    quiet_since = cell.record.last_output
    for value in range(1, 121):
        iopub(cell, "comm_msg", {"comm_id": "bar", "data": {"method": "update", "state": {"value": value}}})
    assert cell.record.last_output > quiet_since  # an update is output, for --silence
    progress = cell.record.progress()
    assert progress is not None and (progress.done, progress.total) == (120, 200)
    assert progress.line == "epochs  60%|██████    | 120/200"
    cell.deliver(ok(), Status("idle"))
    assert cell.lines() == ["epochs   0%|          | 0/200", "epochs  60%|██████    | 120/200"]


async def test_a_chart_is_drawn_before_what_came_after_it(cell: Cell) -> None:
    pytest.importorskip("resvg_py")  # the SVG renderer of the plots extra
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50"><rect width="100" height="50"/>'
    svg += "</svg>"
    cell.deliver(
        ExecuteInput(),
        Stream("stdout", "before\n"),
        Display({"image/svg+xml": svg}),
        Stream("stdout", "after\n"),
        ok(),
        Status("idle"),
    )
    await cell.done()
    assert cell.lines()[0] == "before"
    assert cell.lines()[1].startswith("[image 1: image/png 800x400, ")
    assert cell.lines()[2:] == ["after"]
