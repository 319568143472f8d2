"""ExecutionTracker: the inbox of one execute request, turning kernel events into a record's output and state.

The tracker owns the record while it runs: it appends output, asks for and answers input,
interrupts, and decides when the execution is over. An execution is over when the
execute_reply *and* the idle status are in (output may trail the reply); a request cut short
by an interrupt goes idle without replying, so idle alone ends it after a grace time. A cell
another client sent (`foreign`) replies to that client only: idle ends it, as its events say.
It talks back to the session only through the callbacks it was built with.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from typing import Any

import anyio

from warmkernel.execution.charts import Charts, Found, find_chart, unavailable
from warmkernel.execution.mime import Chart
from warmkernel.execution.progress import line_progress, widget_progress
from warmkernel.execution.record import ExecutionRecord, InputPrompt
from warmkernel.execution.terminal import TerminalNormalizer
from warmkernel.execution.widgets import WIDGET_VIEW
from warmkernel.kernel.base import Kernel
from warmkernel.kernel.channel import (
    ClearOutput,
    Display,
    Error,
    Event,
    ExecuteInput,
    InputRequest,
    Reply,
    Result,
    Status,
    Stream,
    WidgetChanged,
)
from warmkernel.replies.disk import output_not_kept_reason
from warmkernel.replies.runs import output_cap_marker, output_cap_reason
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionState, MsgId

REPLY_AFTER_IDLE_S = 2.0
"""IOPub and shell are separate sockets: a reply may trail the idle status a little. A request
whose handler was cut short by an interrupt publishes idle but never replies at all."""
INPUT_SETTLE_S = 0.05
"""The kernel flushes stdout before it asks for input, but that output travels on IOPub and the
question on stdin: give the output a moment to land, so a reply shows it above the prompt."""

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]
"""Runs a coroutine function in the background, in the session's task group."""


class ExecutionTracker:
    """Follows one execute request of `kernel` into `record`, until the record finishes."""

    def __init__(
        self,
        record: ExecutionRecord,
        kernel: Kernel,
        *,
        spawn: Spawn,
        on_finish: Callable[[ExecutionTracker], None],
        reply_after_idle_s: float = REPLY_AFTER_IDLE_S,
        input_settle_s: float = INPUT_SETTLE_S,
        foreign: bool = False,
        max_output_bytes: int = Settings.max_cell_output_bytes,
        charts: Charts,
    ) -> None:
        self.record = record
        self.kernel = kernel
        self.msg_id = MsgId("")
        """Set once the request is sent; the channel stops routing it when the record finishes."""
        self._spawn = spawn
        self._on_finish = on_finish
        self._reply_after_idle_s = reply_after_idle_s
        self._input_settle_s = input_settle_s
        self._started = False
        self._interrupt_requested = False
        self._interrupt_reason = ""
        """Why it was interrupted when not by a caller (the memory ceiling): its record says so."""
        self._interrupts = 0
        self._reply: Reply | None = None
        self._idle = False
        self._foreign = foreign
        self._max_output_bytes = max_output_bytes
        self._output_bytes = 0
        self._charts = charts
        self._too_slow = ""
        """Set once a chart of this execution was not drawn in time: the later ones are not tried."""
        self._queued: list[Event] | None = None
        """Events that arrived while a chart was drawn (None: no chart is being drawn)."""
        self._views: set[str] = set()
        """Root models of the widget views this execution displayed."""
        self._view_texts: dict[str, str] = {}
        self._progress_view: str | None = None
        """The widget view that is the latest progress display, if one is."""

    def deliver(self, event: Event) -> None:
        if self.record.state.finished:
            return
        if self._queued is not None:  # a chart is being drawn: what follows waits its turn
            self._queued.append(event)
            return
        self._handle(event)

    def _handle(self, event: Event) -> None:
        record = self.record
        if self._over_output_cap(event):
            return
        match event:
            case Stream(name=name, text=text):
                record.output_arrived()
                record.output.append(name, text)
                if "\r" in text:
                    self._progress_line(text)
            case Result(data=data):
                self._show(data, label=f"Out[{record.number}]: ")
            case Display(data=data, update=update, display_id=display_id):
                self._show(data, display_id=display_id, update=update)
            case WidgetChanged(model_id=model_id):
                record.output_arrived()
                self._widget_changed(model_id)
            case Error(ename=ename, evalue=evalue, traceback=traceback):
                record.output_arrived()
                record.error_name, record.error_value = ename, evalue
                first = record.output.completed_count()
                record.output.append("traceback", _line("\n".join(traceback)))
                record.traceback_lines = (first, record.output.completed_count())
            case ClearOutput(wait=wait):
                record.displays.clear(record.output, wait=wait)
            case InputRequest(prompt=prompt, password=password):
                self._spawn(partial(self._ask_input, InputPrompt(prompt, password), self._interrupts))
            case ExecuteInput():
                self._started = True
                if self._interrupt_requested:
                    self.kernel.interrupt()
            case Status(state="idle") if self._foreign:
                self.finish(_state_of_foreign(record.error_name))
                return
            case Status(state="idle"):
                self._idle = True
                if self._reply is None:
                    self._spawn(self._finish_without_reply)
            case Reply() as reply:
                self._reply = reply
                for page in reply.pages:  # a terminal pages it, Jupyter shows it in its pager
                    self._show(page)
            case Status():
                pass
        if self._reply is not None and self._idle and not record.state.finished:
            state = _state_of(self._reply, self._interrupt_requested)
            self.finish(state, reason=self._interrupt_reason if state is ExecutionState.INTERRUPTED else "")

    def _over_output_cap(self, event: Event) -> bool:
        """Count the event's output; past the cell's cap, drop it (one marker line says so).

        A stream message that crosses the cap keeps its whole lines below it."""
        match event:
            case Stream(text=text):
                size = len(text.encode("utf-8", "replace"))
            case Result(data=data) | Display(data=data):
                size = sum(len(value) for value in data.values() if isinstance(value, str))
            case _:  # a traceback is never dropped: it says how the cell ended
                return False
        room = self._max_output_bytes - self._output_bytes
        self._output_bytes += size
        if size <= room:
            return False
        record = self.record
        if not record.output_dropped_bytes:
            record.output_arrived()
            if isinstance(event, Stream) and room > 0:
                kept = event.text.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
                kept = kept[: kept.rfind("\n") + 1]
                record.output.append(event.name, kept)
                size -= len(kept.encode("utf-8"))
            record.output.append("stderr", output_cap_marker(self._max_output_bytes))
        record.output_dropped_bytes += size
        return True

    def _show(
        self, data: Mapping[str, Any], *, label: str = "", display_id: str | None = None, update: bool = False
    ) -> None:
        """Write a display: a widget view as its text, a chart once drawn (events after it wait)."""
        record = self.record
        record.output_arrived()
        view = data.get(WIDGET_VIEW)
        model_id = str(view.get("model_id", "")) if isinstance(view, Mapping) else ""
        widgets = self.kernel.channel.widgets
        if model_id in widgets:
            self._views.add(model_id)
            self._widget_progress(model_id)
            bundle = partial(self._view_bundle, model_id)
            record.displays.show(
                record.output, bundle, now=record.last_output, display_id=f"widget:{model_id}", in_place=True
            )
            return
        found = find_chart(data)
        reason = (self._too_slow or unavailable(found.mime)) if found is not None else None
        if found is None or reason is not None:
            chart = Chart(found.source, reason) if found is not None and reason is not None else None
            self._write_display(data, label, display_id, update, chart)
            return
        self._queued = []
        self._spawn(partial(self._draw, data, found, label, display_id, update))

    def _write_display(
        self, data: Mapping[str, Any], label: str, display_id: str | None, update: bool, chart: Chart | None
    ) -> None:
        record = self.record
        record.displays.show(
            record.output,
            data,
            now=record.last_output,
            label=label,
            display_id=display_id,
            update=update,
            chart=chart,
        )

    async def _draw(
        self, data: Mapping[str, Any], found: Found, label: str, display_id: str | None, update: bool
    ) -> None:
        """Draw the chart, write its display, then handle what arrived meanwhile, in order."""
        picture = await self._charts.render(found.mime, found.value)
        if isinstance(picture, str) and picture == self._charts.timed_out():
            self._too_slow = f"not drawn: an earlier chart of this cell {picture.removeprefix('rendering ')}"
        if self.record.state.finished:  # the kernel died or was killed meanwhile
            return
        self._write_display(data, label, display_id, update, Chart(found.source, picture))
        waiting, self._queued = self._queued or [], None
        for at, event in enumerate(waiting):
            if self.record.state.finished:
                return
            self._handle(event)
            if self._queued is not None:  # another chart: the rest waits for it too
                self._queued.extend(waiting[at + 1 :])
                return

    def _widget_changed(self, model_id: str) -> None:
        """A model changed: every view of this execution that shows it is updated."""
        record = self.record
        widgets = self.kernel.channel.widgets
        for root in self._views:
            if widgets.contains(root, model_id):
                self._widget_progress(root)
                bundle = partial(self._view_bundle, root)
                record.displays.show(
                    record.output, bundle, now=record.last_output, display_id=f"widget:{root}", update=True
                )

    def _view_bundle(self, root: str) -> Mapping[str, Any]:
        """A widget view's text now; once its model is closed, the text it last had."""
        widgets = self.kernel.channel.widgets
        if root in widgets:
            self._view_texts[root] = widgets.render(root)
        return {"text/plain": self._view_texts.get(root, "")}

    def _widget_progress(self, root: str) -> None:
        """A view with a bar becomes the latest progress display (unless it already is)."""
        widgets = self.kernel.channel.widgets
        if self._progress_view != root and widgets.fraction(root) is not None:
            self.record.progress_source = partial(widget_progress, widgets, root)
            self._progress_view = root

    def _progress_line(self, text: str) -> None:
        """A `\\r` redraw: its latest line, as a terminal shows it (colours and other escapes
        applied), is the progress display if it shows a fraction."""
        rendered = TerminalNormalizer()
        rendered.feed(text.rstrip("\n").rsplit("\r", 1)[-1])
        line = rendered.flush() or ""
        if line_progress(line) is not None:
            self.record.progress_source = partial(line_progress, line)
            self._progress_view = None

    async def _ask_input(self, prompt: InputPrompt, interrupts: int) -> None:
        await anyio.sleep(self._input_settle_s)
        # An interrupt sent meanwhile ends input() before anyone could answer it.
        if self.record.state is ExecutionState.RUNNING and self._interrupts == interrupts:
            self.record.ask_input(prompt)

    @property
    def unanswered(self) -> bool:
        """A cell of ours the kernel never answered (one that fails inside ipykernel sends no reply,
        and IPython's counter may then not have moved); a foreign cell's reply goes to its sender."""
        return not self._foreign and self._reply is None

    async def _finish_without_reply(self) -> None:
        await anyio.sleep(self._reply_after_idle_s)
        if not self.record.state.finished and self._reply is None:
            state = ExecutionState.INTERRUPTED if self._interrupt_requested else ExecutionState.ERROR
            self.finish(state, reason="the kernel went idle without replying")

    def interrupt(self, reason: str = "") -> None:
        """Interrupt now if the code is running, else as soon as it starts; `reason` says why
        when no caller asked (the memory ceiling).

        ipykernel ignores SIGINT between requests, so a signal sent before the kernel
        picked the cell up would be lost.
        """
        self._interrupt_requested = True
        self._interrupt_reason = reason or self._interrupt_reason
        self._interrupts += 1
        if self.record.state is ExecutionState.AWAITING_INPUT:
            self._end_prompt("")  # SIGINT ends input() with KeyboardInterrupt
        if self._started:
            self.kernel.interrupt()

    def answer(self, text: str) -> None:
        """Send the answer to the pending prompt; the transcript shows it unless it is a password."""
        self._end_prompt(text)
        self.kernel.channel.input(text)

    def _end_prompt(self, answer: str) -> None:
        """Write the prompt line as a terminal would show it (a password is never written)."""
        prompt = self.record.input_answered()
        self.record.output_arrived()
        self.record.output.append("stdout", prompt.text + ("" if prompt.password else answer) + "\n")

    def finish(self, state: ExecutionState, reason: str = "") -> None:
        """End the record as `state` (e.g. `died` with the exit reason); later events are dropped.
        Its reason also says how much output was not kept: past the cap, or on a full disk."""
        self.kernel.channel.forget(self.msg_id)
        record, output = self.record, self.record.output
        reasons = [reason] if reason else []
        if record.output_dropped_bytes:
            reasons.append(output_cap_reason(record.output_dropped_bytes, self._max_output_bytes))
        if output.unwritable is not None:
            reasons.append(output_not_kept_reason(output.not_kept_bytes, output.unwritable))
        record.finish(state, reason="; ".join(reasons))
        self._on_finish(self)


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _state_of_foreign(error_name: str) -> ExecutionState:
    """How a cell we saw only on IOPub ended: by the error it published, if any."""
    if not error_name:
        return ExecutionState.COMPLETED
    return ExecutionState.INTERRUPTED if error_name == "KeyboardInterrupt" else ExecutionState.ERROR


def _state_of(reply: Reply, interrupt_requested: bool) -> ExecutionState:
    if reply.status == "ok":
        return ExecutionState.COMPLETED
    if reply.ename == "KeyboardInterrupt" or reply.status == "aborted" or interrupt_requested:
        return ExecutionState.INTERRUPTED
    return ExecutionState.ERROR
