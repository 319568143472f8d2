"""The one router between a kernel's sockets and the requests waiting on them.

Each Jupyter message is parsed here, exactly once, into a typed event; nothing past this
module indexes `msg["content"]`. A transport (the kernel's ZeroMQ sockets, or a Jupyter
server's websocket) hands over every message with its channel name; the router delivers it to
the inbox registered for its parent msg_id. Events for unknown parents are logged and dropped,
so the wrong waiter never swallows a message, except a cell another client of the kernel (an
IDE, `jupyter console --existing`) sent: its `execute_input` is offered to `on_foreign`, whose
inbox then gets that cell's events as if we had sent it.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

import anyio
import anyio.abc
import anyio.lowlevel
import zmq
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session as JupyterSession

from warmkernel.execution.widgets import WidgetModels
from warmkernel.types import MsgId

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stream:
    name: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True)
class Display:
    """display_data or update_display_data: a MIME bundle shown without an `Out[N]:` label."""

    data: Mapping[str, Any]
    update: bool = False
    display_id: str | None = None
    """Set when the display can be updated in place (`display(..., display_id=True)`, progress bars)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The bundle's metadata (an image's width, ...), which a notebook saves beside its data."""


@dataclass(frozen=True)
class Result:
    """execute_result: the value of the cell's last expression."""

    data: Mapping[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Error:
    ename: str
    evalue: str
    traceback: list[str]


@dataclass(frozen=True)
class Status:
    state: str


@dataclass(frozen=True)
class ExecuteInput:
    """The kernel began running the code (its SIGINT handler is now armed)."""


@dataclass(frozen=True)
class ClearOutput:
    wait: bool


@dataclass(frozen=True)
class InputRequest:
    """The code called `input()` or `getpass()` and waits for an `input_reply` on stdin."""

    prompt: str
    password: bool


@dataclass(frozen=True)
class ExpressionValue:
    """One user expression of an execute_reply: its text/plain form, or the error it raised."""

    status: str
    text: str = ""
    ename: str = ""
    evalue: str = ""


@dataclass(frozen=True)
class Reply:
    """A shell reply (execute_reply, kernel_info_reply)."""

    msg_type: str
    status: str
    ename: str = ""
    evalue: str = ""
    content: Mapping[str, Any] = field(default_factory=dict)
    user_expressions: Mapping[str, ExpressionValue] = field(default_factory=dict)
    pages: tuple[Mapping[str, Any], ...] = ()
    """What the kernel asks a frontend's pager to show (`obj?`, `%pinfo`, `%magic`): mime bundles."""


@dataclass(frozen=True)
class WidgetChanged:
    """A comm message of the request opened or changed the widget model `model_id`."""

    model_id: str


Event = (
    Stream
    | Display
    | Result
    | Error
    | Status
    | ExecuteInput
    | ClearOutput
    | InputRequest
    | Reply
    | WidgetChanged
)


@dataclass(frozen=True)
class ForeignCell:
    """A cell another client of the kernel sent, as its `execute_input` shows it."""

    code: str
    jupyter_session: str
    """The sending client's Jupyter session id (the protocol's `header.session`)."""
    username: str


class Inbox(Protocol):
    """Whatever waits on one request: receives every event whose parent is that request."""

    def deliver(self, event: Event) -> None: ...


def parse_iopub(msg: Mapping[str, Any]) -> Event | None:
    """Turn one IOPub message into an event, or None for types nobody here needs."""
    msg_type = msg["header"]["msg_type"]
    content = msg["content"]
    match msg_type:
        case "stream":
            name = "stderr" if content.get("name") == "stderr" else "stdout"
            return Stream(name, content.get("text", ""))
        case "display_data" | "update_display_data":
            # `transient` may be present and None
            display_id = (content.get("transient") or {}).get("display_id")
            return Display(
                content.get("data") or {},
                update=msg_type == "update_display_data",
                display_id=str(display_id) if display_id is not None else None,
                metadata=content.get("metadata") or {},
            )
        case "execute_result":
            return Result(content.get("data") or {}, content.get("metadata") or {})
        case "error":
            return Error(content.get("ename", ""), content.get("evalue", ""), content.get("traceback") or [])
        case "status":
            return Status(content.get("execution_state", ""))
        case "execute_input":
            return ExecuteInput()
        case "clear_output":
            return ClearOutput(bool(content.get("wait")))
        case _:
            return None


def parse_stdin(msg: Mapping[str, Any]) -> Event | None:
    """An input_request from the kernel; nothing else arrives on stdin."""
    if msg["header"]["msg_type"] != "input_request":
        return None
    content = msg["content"]
    return InputRequest(str(content.get("prompt", "")), bool(content.get("password")))


def parse_reply(msg: Mapping[str, Any]) -> Reply:
    content = msg["content"]
    return Reply(
        msg_type=msg["header"]["msg_type"],
        status=content.get("status", ""),
        ename=content.get("ename", ""),
        evalue=content.get("evalue", ""),
        content=content,
        user_expressions={
            key: ExpressionValue(
                status=value.get("status", ""),
                text=(value.get("data") or {}).get("text/plain", ""),
                ename=value.get("ename", ""),
                evalue=value.get("evalue", ""),
            )
            for key, value in (content.get("user_expressions") or {}).items()
        },
        pages=tuple(
            payload["data"]
            for payload in content.get("payload") or ()
            if isinstance(payload, Mapping)
            and payload.get("source") == "page"
            and isinstance(payload.get("data"), Mapping)
        ),
    )


Route = Callable[[str, Mapping[str, Any]], None]
"""Takes one message and the name of the channel it came on: `shell`, `iopub`, `stdin` or `control`."""

Outgoing = Literal["shell", "stdin", "control"]
"""The channels requests go out on (`control` for subshells, kernel protocol 5.5)."""


class Transport(Protocol):
    """How Jupyter messages reach one kernel and come back: ZeroMQ sockets, or a server's websocket."""

    async def run(self, route: Route, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Deliver every incoming message to `route` until cancelled; started once connected."""
        ...

    def send(self, channel: Outgoing, msg: dict[str, Any]) -> None: ...


class ZmqTransport:
    """The kernel's own sockets, as named in its connection file (jupyter_client's channels)."""

    def __init__(self, connection_info: Mapping[str, Any]) -> None:
        self._client = AsyncKernelClient()
        self._client.load_connection_info(dict(connection_info))  # pyright: ignore[reportArgumentType]

    async def run(self, route: Route, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._client.start_channels(shell=True, iopub=True, stdin=True, hb=False, control=True)
        try:
            async with anyio.create_task_group() as tg:
                for name, channel in (
                    ("shell", self._client.shell_channel),
                    ("stdin", self._client.stdin_channel),
                    ("control", self._client.control_channel),
                ):
                    tg.start_soon(self._read, name, channel, route)
                tg.start_soon(self._read_iopub, route)
                task_status.started()
        finally:
            self._client.stop_channels()

    @staticmethod
    async def _read(name: str, channel: AsyncZMQSocketChannel, route: Route) -> None:
        while True:
            route(name, await channel.get_msg())

    async def _read_iopub(self, route: Route) -> None:
        """IOPub carries the floods (prints, widget updates), so waking up is what costs most.
        Each wake-up takes every message already waiting, up to `_IOPUB_BATCH`; once
        `_IOPUB_STREAK` wake-ups in a row found several messages or came less than
        `_IOPUB_STREAMING_S` apart, the next one waits `_IOPUB_GATHER_S` (the few messages of an
        ordinary cell are read at once). A
        message is unpacked without jupyter_client's parsing of header dates, which nothing
        here reads."""
        socket = self._client.iopub_channel.socket
        waiting = zmq.Socket.shadow(socket.underlying)
        jupyter_session = self._client.session
        woke, streak = 0.0, 0
        while True:
            batch: list[list[bytes]] = [await socket.recv_multipart()]
            with contextlib.suppress(zmq.Again):
                while len(batch) < _IOPUB_BATCH:
                    batch.append(waiting.recv_multipart(_DONTWAIT))
            idle = False
            for frames in batch:
                msg = _unpack(jupyter_session, frames)
                if msg is not None:
                    route("iopub", msg)
                    idle = idle or _is_idle(msg)
            previous, woke = woke, time.monotonic()
            streaming = len(batch) > 1 or woke - previous < _IOPUB_STREAMING_S  # more came meanwhile
            # A request that ended is no stream: cells sent back to back are never held back.
            streak = 0 if idle else streak + 1 if streaming else 0
            if streak >= _IOPUB_STREAK and len(batch) < _IOPUB_BATCH:
                await anyio.sleep(_IOPUB_GATHER_S)  # messages keep coming: let a few gather
            else:
                await anyio.lowlevel.checkpoint()  # a flood never holds the event loop

    def send(self, channel: Outgoing, msg: dict[str, Any]) -> None:
        targets = {
            "shell": self._client.shell_channel,
            "stdin": self._client.stdin_channel,
            "control": self._client.control_channel,
        }
        targets[channel].send(msg)


_IOPUB_BATCH = 256
"""Most IOPub messages taken in one wake-up of the event loop (a full batch never waits)."""
_IOPUB_STREAMING_S = 0.005
_IOPUB_STREAK = 8
_IOPUB_GATHER_S = 0.02
"""What a message arriving within a stream of them can be delayed by: 10,000 widget updates in
10 s then wake the server about 50 times a second, not 1,000."""
_DONTWAIT = int(zmq.DONTWAIT)  # a plain int: pyzmq's flag enum costs more per call than the receive


def _is_idle(msg: Mapping[str, Any]) -> bool:
    return msg["header"].get("msg_type") == "status" and msg["content"].get("execution_state") == "idle"


def _unpack(jupyter_session: JupyterSession, frames: list[bytes]) -> dict[str, Any] | None:
    """A signed IOPub message as a dict of header, parent_header and content (dates left as
    text); None, logged, when its signature is wrong."""
    parts = cast("list[bytes]", jupyter_session.feed_identities(frames, copy=True)[1])
    signature, header, parent, metadata, content = parts[:5]
    auth = cast("hmac.HMAC | None", jupyter_session.auth)
    if auth is not None:
        check = auth.copy()
        for part in (header, parent, metadata, content):
            check.update(part)
        if not hmac.compare_digest(check.hexdigest().encode(), signature):
            log.warning("dropping an IOPub message with a wrong signature")
            return None
    return {
        "header": jupyter_session.unpack(header),
        "parent_header": jupyter_session.unpack(parent),
        "content": jupyter_session.unpack(content),
        "buffers": parts[5:],
    }


_COMMS = frozenset({"comm_open", "comm_msg", "comm_close"})
"""Comm messages on IOPub: the channel follows the widget models they carry."""

_PARSERS: dict[str, Callable[[Mapping[str, Any]], Event | None]] = {
    "shell": parse_reply,
    "iopub": parse_iopub,
    "stdin": parse_stdin,
    "control": parse_reply,
}


class KernelChannel:
    """Sends requests to one kernel and routes what comes back by parent msg_id."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._messages = JupyterSession()  # builds headers; the transport signs or serializes
        self._inboxes: dict[MsgId, Inbox] = {}
        self.on_foreign: Callable[[ForeignCell], Inbox | None] | None = None
        """Offered each cell another client sent; the inbox it returns follows that cell."""
        self._sent: set[MsgId] = set()
        """Every request we sent: its late messages, after `forget`, are ours, never a foreign cell."""
        self.widgets = WidgetModels()
        """The kernel's widget models, whichever request opened or changed them."""

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Route what the kernel sends until cancelled."""
        await self._transport.run(self._route, task_status=task_status)

    def _route(self, channel: str, msg: Mapping[str, Any]) -> None:
        parent_header = msg.get("parent_header") or {}
        parent = MsgId(parent_header.get("msg_id", ""))
        inbox = self._inboxes.get(parent)
        if inbox is None and channel == "iopub" and msg["header"]["msg_type"] == "execute_input":
            inbox = self._adopt(parent, parent_header, msg["content"])
        if channel == "iopub" and msg["header"]["msg_type"] in _COMMS:
            changed = self._follow_comm(msg["header"]["msg_type"], msg["content"])
            if changed is not None and inbox is not None:
                inbox.deliver(WidgetChanged(changed))
            return
        parse = _PARSERS.get(channel)
        if inbox is None or parse is None:
            log.debug("dropping %s on %s for unknown parent %r", msg["header"]["msg_type"], channel, parent)
            return
        event = parse(msg)
        if event is not None:
            inbox.deliver(event)

    def _adopt(self, parent: MsgId, header: Mapping[str, Any], content: Mapping[str, Any]) -> Inbox | None:
        if self.on_foreign is None or not parent or parent in self._sent:
            return None
        cell = ForeignCell(
            str(content.get("code", "")), str(header.get("session", "")), str(header.get("username", ""))
        )
        inbox = self.on_foreign(cell)
        if inbox is not None:
            self._inboxes[parent] = inbox
        return inbox

    def _follow_comm(self, msg_type: str, content: Mapping[str, Any]) -> str | None:
        """Keep the widget models up to date; the id of the model that opened or changed, if any."""
        comm_id = str(content.get("comm_id", ""))
        data = content.get("data")
        data = data if isinstance(data, Mapping) else {}
        if msg_type == "comm_open":
            return comm_id if self.widgets.open(comm_id, str(content.get("target_name", "")), data) else None
        if msg_type == "comm_msg":
            return comm_id if self.widgets.update(comm_id, data) else None
        self.widgets.close(comm_id)
        return None

    def _send(
        self, channel: Outgoing, msg_type: str, content: dict[str, Any], subshell_id: str | None = None
    ) -> MsgId:
        msg = self._messages.msg(msg_type, content)
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id  # kernel protocol 5.5
        self._transport.send(channel, msg)
        msg_id = MsgId(msg["header"]["msg_id"])
        self._sent.add(msg_id)
        return msg_id

    def execute(
        self,
        code: str,
        inbox: Inbox,
        *,
        silent: bool = False,
        user_expressions: Mapping[str, str] | None = None,
        allow_stdin: bool = False,
        subshell_id: str | None = None,
    ) -> MsgId:
        """Send an execute_request, to the main shell or to a subshell.

        A silent request leaves no trace in the kernel's history or execution count. User
        expressions are evaluated after the code; their values come back in the Reply. Without
        `allow_stdin`, `input()` fails at once; with it, the inbox gets an `InputRequest` and
        the code waits for `input()` below. A subshell runs it beside the main shell's cell.
        """
        msg_id = self._send(
            "shell",
            "execute_request",
            {
                "code": code,
                "silent": silent,
                "store_history": not silent,
                "user_expressions": dict(user_expressions or {}),
                "allow_stdin": allow_stdin,
                "stop_on_error": False,
            },
            subshell_id,
        )
        self._inboxes[msg_id] = inbox
        return msg_id

    def create_subshell(self, inbox: Inbox) -> MsgId:
        """Ask for a new subshell (control channel); its id comes in the reply's content."""
        msg_id = self._send("control", "create_subshell_request", {})
        self._inboxes[msg_id] = inbox
        return msg_id

    def input(self, text: str) -> None:
        """Answer the kernel's pending input_request (there is at most one: the kernel blocks on it)."""
        self._send("stdin", "input_reply", {"value": text})

    def kernel_info(self, inbox: Inbox) -> MsgId:
        msg_id = self._send("shell", "kernel_info_request", {})
        self._inboxes[msg_id] = inbox
        return msg_id

    def forget(self, msg_id: MsgId) -> None:
        """Stop routing events of a finished request; later ones are dropped."""
        self._inboxes.pop(msg_id, None)
