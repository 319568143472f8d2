"""Kernels on a Jupyter Server, Kernel Gateway or Enterprise Gateway.

The kernel is created, interrupted and deleted through the server's REST API (`jupyter_api`);
its channels travel over the server's kernel websocket in the JSON message format every server
and gateway speaks. jupyter_server's gateway classes are not used: they are server-side managers
configured through a running server application, not a client.

Creating a kernel on a gateway can take minutes (Kubernetes pulls an image): the create, the
websocket and the first `kernel_info` share one launch timeout, and the launcher says which step
it is waiting on. The websocket stays open while the kernel is held, so a server that culls only
unconnected kernels spares it. A lost websocket reconnects with the same session id, so the
server replays what it buffered meanwhile. A kernel deleted or culled on the server, or one the
server had to restart after it died, ends this kernel's generation: the session reports it as
died and starts a new one.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from jupyter_client.jsonutil import json_default
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from warmkernel.errors import WarmkernelError
from warmkernel.kernel.base import Kernel, KernelPlace
from warmkernel.kernel.channel import KernelChannel, Outgoing, Route
from warmkernel.kernel.jupyter_api import (
    REQUEST_TIMEOUT_S,
    JupyterApi,
    ServerTimeout,
    kernel_environment,
    local_user,
)
from warmkernel.settings.model import Settings
from warmkernel.types import Generation

log = logging.getLogger(__name__)

_RECONNECT_GIVE_UP_S = 60.0
"""How long an unreachable server may stay unreachable before its kernel counts as lost."""
_RECONNECT_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 5.0)
_LIVENESS_POLL_S = 3.0
_EXTEND = "; raise --kernel-launch-timeout (a gateway may be pulling the kernel's image)"
_GONE_STATES = {
    "restarting": "it died and the Jupyter server restarted it",
    "dead": "it died and the Jupyter server could not restart it",
}


class WebsocketTransport:
    """A kernel's channels over its server's websocket, reconnected when the connection drops.

    Messages to the kernel wait in one queue, in order, for a writer task that sends them over
    the connection of the moment; while there is none (reconnecting), they wait for the next.
    """

    def __init__(self, api: JupyterApi, kernel_id: str, connect_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._api = api
        self._kernel_id = kernel_id
        self._connect_timeout_s = connect_timeout_s
        """How long the first connection may take (part of the launch timeout)."""
        self._channel_session = uuid.uuid4().hex  # the same on every reconnect: the server replays its buffer
        self._connection: ClientConnection | None = None
        self._unsent: deque[str] = deque()
        self._wake_writer = anyio.Event()
        """Set when a message is queued or a connection opens; the writer waits on a fresh one."""
        self.gone_reason = ""
        """Why the kernel is gone, once `run` has returned by itself."""

    async def run(self, route: Route, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._connection = await self._api.connect_channels(
            self._kernel_id, self._channel_session, self._connect_timeout_s
        )
        task_status.started()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_kernel, tg.cancel_scope)
                tg.start_soon(self._write)
                await self._read(route)
                tg.cancel_scope.cancel()
        finally:
            if self._connection is not None:
                with anyio.CancelScope(shield=True):
                    await self._connection.close()
            self._connection = None

    async def _read(self, route: Route) -> None:
        """Route messages until the kernel is gone (the server said so, or reconnecting failed)."""
        while True:
            assert self._connection is not None
            try:
                text = await self._connection.recv()
            except ConnectionClosed:
                if not await self._reconnect():
                    return
                continue
            msg = json.loads(text)
            content = msg.get("content") or {}
            if msg.get("msg_type") == "status" and content.get("execution_state") in _GONE_STATES:
                self.gone_reason = _GONE_STATES[content["execution_state"]]
                return
            route(str(msg.get("channel", "")), msg)

    async def _write(self) -> None:
        """Send the queued messages in order while a connection is open. One that a connection
        takes as it drops is lost, as on any transport; the rest wait for the next connection."""
        while True:
            while self._unsent and self._connection is not None and self._connection.state is State.OPEN:
                with contextlib.suppress(ConnectionClosed):
                    await self._connection.send(self._unsent.popleft())
            self._wake_writer = anyio.Event()
            await self._wake_writer.wait()

    @staticmethod
    def _deleted() -> str:
        # Servers do not say why they deleted a kernel, nor for how long it was idle: shutting a
        # kernel down (a culler's, or a person's while a cell runs) sends its last messages itself.
        return "it was deleted on the Jupyter server (shut down there, or culled by it once idle)"

    async def _watch_kernel(self, scope: anyio.CancelScope) -> None:
        """A server keeps the websocket open when it deletes or culls the kernel: ask it now and then."""
        while True:
            await anyio.sleep(_LIVENESS_POLL_S)
            try:
                exists = await self._api.kernel_exists(self._kernel_id)
            except WarmkernelError:
                continue  # unreachable: the websocket closes too, and reconnecting decides
            if not exists:
                self.gone_reason = self._deleted()
                scope.cancel()
                return

    async def _reconnect(self) -> bool:
        """Connect again while the kernel exists; False (with `gone_reason`) once it does not."""
        assert self._connection is not None
        await self._connection.close()  # already closed by the peer; this releases it
        self._connection = None
        with anyio.move_on_after(_RECONNECT_GIVE_UP_S):
            attempt = 0
            while True:
                try:
                    if not await self._api.kernel_exists(self._kernel_id):
                        self.gone_reason = self._deleted()
                        return False
                    self._connection = await self._api.connect_channels(
                        self._kernel_id, self._channel_session
                    )
                except (WarmkernelError, TimeoutError) as exc:
                    log.warning("kernel %s: reconnecting: %s", self._kernel_id, exc)
                    await anyio.sleep(_RECONNECT_DELAYS_S[min(attempt, len(_RECONNECT_DELAYS_S) - 1)])
                    attempt += 1
                    continue
                log.info("kernel %s: channels reconnected", self._kernel_id)
                self._wake_writer.set()  # what was queued meanwhile goes now
                return True
        self.gone_reason = (
            f"the Jupyter server at {self._api.url} was unreachable for {_RECONNECT_GIVE_UP_S:.0f} s"
        )
        return False

    def send(self, channel: Outgoing, msg: dict[str, Any]) -> None:
        """Queue a message for the writer (sent at once while connected, else once reconnected)."""
        self._unsent.append(json.dumps({**msg, "channel": channel}, default=json_default))
        self._wake_writer.set()


class RemoteKernel(Kernel):
    """A kernel that lives on a Jupyter server; this process holds only its channels."""

    def __init__(
        self,
        generation: Generation,
        tg: anyio.abc.TaskGroup,
        api: JupyterApi,
        kernel_id: str,
        transport: WebsocketTransport,
    ) -> None:
        super().__init__(generation, KernelChannel(transport))
        self._tg = tg
        self._api = api
        self.kernel_id = kernel_id
        self._transport = transport
        self.cwd: str | None = None
        """The kernel's working directory on the server's machine, as the kernel reports it."""

    def place(self) -> KernelPlace:
        return KernelPlace(server_url=self._api.url, kernel_id=self.kernel_id, cwd=self.cwd)

    @classmethod
    async def connect(
        cls,
        tg: anyio.abc.TaskGroup,
        api: JupyterApi,
        kernel_id: str,
        generation: Generation,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        on_step: Callable[[str], None] | None = None,
    ) -> RemoteKernel:
        """Open the kernel's channels and return once it answers on shell and IOPub, within `timeout_s`.

        `on_step(name)` is told each step as it begins (`websocket`, then `kernel_info`).
        """
        deadline = time.monotonic() + timeout_s
        kernel = cls(generation, tg, api, kernel_id, WebsocketTransport(api, kernel_id, timeout_s))
        try:
            if on_step is not None:
                on_step("websocket")
            try:
                await tg.start(kernel._supervise)
            except TimeoutError:
                raise WarmkernelError(
                    "kernel_start_failed",
                    f"the Jupyter server at {api.url} did not open kernel {kernel_id}'s websocket "
                    f"within {timeout_s:.0f} s of its launch (step: websocket){_EXTEND}",
                ) from None
            if on_step is not None:
                on_step("kernel_info")
            await kernel._handshake(max(deadline - time.monotonic(), 1.0), _EXTEND + " (step: kernel_info)")
            reply = await kernel.run_silently("", user_expressions={"cwd": "__import__('os').getcwd()"})
        except BaseException:
            with anyio.CancelScope(shield=True):
                await kernel.kill()
            raise
        cwd = reply.user_expressions.get("cwd") if reply is not None else None
        if cwd is not None and cwd.status == "ok":
            kernel.cwd = ast.literal_eval(cwd.text)
        return kernel

    async def _supervise(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            with self._scope:
                await self.channel.run(task_status=task_status)
                # The transport returned by itself: the kernel is gone. A restarted one is
                # a stranger with an empty namespace; it is not left running on the server.
                with anyio.CancelScope(shield=True), anyio.move_on_after(REQUEST_TIMEOUT_S):
                    await self._delete()
        finally:
            self.exited.set()

    async def _delete(self) -> None:
        # A server refuses to delete a kernel it is restarting: ask again a few times.
        for delay in (*_RECONNECT_DELAYS_S, None):
            try:
                await self._api.delete(self.kernel_id)
                return
            except WarmkernelError as exc:
                if delay is None:
                    log.warning("kernel %s was not deleted: %s", self.kernel_id, exc.message)
                    return
            await anyio.sleep(delay)

    def exit_reason(self) -> str:
        return self._transport.gone_reason or "its channels were closed"

    def start_failure_detail(self) -> str:
        return f"(kernel {self.kernel_id} on the Jupyter server at {self._api.url})"

    def interrupt(self) -> None:
        """Interrupt through the server's API (a signal would not reach another machine)."""
        self._tg.start_soon(self._interrupt)

    async def _interrupt(self) -> None:
        try:
            await self._api.interrupt(self.kernel_id)
        except WarmkernelError as exc:
            log.warning("kernel %s was not interrupted: %s", self.kernel_id, exc.message)

    async def kill(self) -> None:
        """Stop routing, then delete the kernel on the server."""
        await self.detach()
        with anyio.move_on_after(REQUEST_TIMEOUT_S):
            await self._delete()

    async def detach(self) -> None:
        """Stop routing and let the kernel be: the server is about to replace it itself."""
        self.killed_on_purpose = True
        self.stop()
        await self.exited.wait()


class RemoteLauncher:
    """Creates each generation's kernel on the Jupyter server named by the settings.

    With `spare_kernels`, that many kernels are created and connected ahead of need (not in a
    notebook's server session), so a reset takes a round trip instead of a launch; they are
    deleted at exit.
    """

    def __init__(self, tg: anyio.abc.TaskGroup, settings: Settings) -> None:
        self._tg = tg
        self._api = JupyterApi(settings)
        self._kernel_name = settings.kernel_name
        self._env = kernel_environment(settings, os.environ, local_user())
        self._launch_timeout_s = settings.kernel_launch_timeout_s
        self._notebook = settings.jupyter_notebook
        self._notebook_session: str | None = None
        """The notebook's server session, once opened: an IDE showing the notebook follows it."""
        self._successor: str | None = None
        """The kernel the session got when the last one was retired, for the next start."""
        self._spare_count = settings.spare_kernels if self._notebook is None else 0
        self._spares: list[RemoteKernel] = []
        """Spare kernels connected and waiting, oldest first."""
        self._spares_starting = 0
        self._launches: set[anyio.CancelScope] = set()
        """The launches under way; `aclose` cancels them, and their clean-up deletes their kernels."""
        self._no_launches = anyio.Event()
        self._no_launches.set()
        self._closed = False
        self.step = ""
        """What the kernel start waits on now, for python_status; "" when none is under way."""

    @property
    def spares_ready(self) -> int | None:
        """Spare kernels connected and alive, waiting for a reset; None when it keeps none."""
        if not self._spare_count:
            return None
        return sum(1 for kernel in self._spares if not kernel.exited.is_set())

    async def start(self, generation: Generation) -> RemoteKernel:
        try:
            kernel = self._take_spare() or await self._launch(generation, self._set_step)
        finally:
            self.step = ""
            self._refill()
        kernel.generation = generation
        return kernel

    def _set_step(self, step: str) -> None:
        self.step = {
            "create": "pending on the gateway",
            "websocket": "opening the kernel's websocket",
            "kernel_info": "waiting for the kernel's first reply",
        }[step]

    async def _launch(
        self, generation: Generation, on_step: Callable[[str], None] | None = None
    ) -> RemoteKernel:
        """Create (or take over) a kernel and connect to it, all within the launch timeout."""
        if self._closed:
            raise WarmkernelError("kernel_start_failed", "warmkernel is shutting down")
        with anyio.CancelScope() as scope:
            self._launches.add(scope)
            self._no_launches = anyio.Event()
            try:
                return await self._create_and_connect(generation, on_step)
            finally:
                self._launches.discard(scope)
                if not self._launches:
                    self._no_launches.set()
        raise WarmkernelError("kernel_start_failed", "warmkernel shut down while the kernel started")

    async def _create_and_connect(
        self, generation: Generation, on_step: Callable[[str], None] | None
    ) -> RemoteKernel:
        began = time.monotonic()
        if on_step is not None:
            on_step("create")
        if self._successor is not None:
            kernel_id, self._successor = self._successor, None
        elif self._notebook is not None:
            self._notebook_session, kernel_id = await self._api.open_notebook_session(
                self._notebook, self._kernel_name
            )
        else:
            kernel_id = await self._create()
        remaining = max(self._launch_timeout_s - (time.monotonic() - began), 1.0)
        return await RemoteKernel.connect(
            self._tg, self._api, kernel_id, generation, timeout_s=remaining, on_step=on_step
        )

    async def _create(self) -> str:
        try:
            return await self._api.create_kernel(self._kernel_name, self._env, self._launch_timeout_s)
        except ServerTimeout:
            raise WarmkernelError(
                "kernel_start_failed",
                f"the Jupyter server at {self._api.url} did not create a {self._kernel_name!r} kernel "
                f"within {self._launch_timeout_s:.0f} s (step: create){_EXTEND}",
            ) from None

    def _take_spare(self) -> RemoteKernel | None:
        while self._spares:
            kernel = self._spares.pop(0)
            if not kernel.exited.is_set():
                return kernel
            log.warning("spare kernel %s is gone (%s)", kernel.kernel_id, kernel.exit_reason())
        return None

    def _refill(self) -> None:
        missing = self._spare_count - len(self._spares) - self._spares_starting
        for _ in range(0 if self._closed else missing):
            self._spares_starting += 1
            self._tg.start_soon(self._make_spare)

    async def _make_spare(self) -> None:
        try:
            kernel = await self._launch(Generation(0))
            if self._closed:
                await kernel.kill()
            else:
                self._spares.append(kernel)
        except WarmkernelError as exc:
            log.warning("a spare kernel was not created: %s", exc.message)
        except Exception:
            log.exception("a spare kernel was not created")
        finally:
            self._spares_starting -= 1

    async def retire(self, kernel: Kernel) -> None:
        """In a notebook's session, swap the kernel through the session, so an IDE stays attached."""
        if self._notebook_session is None or not isinstance(kernel, RemoteKernel):
            await kernel.kill()
            return
        await kernel.detach()
        try:
            self._successor = await self._api.replace_session_kernel(
                self._notebook_session, self._kernel_name
            )
        except WarmkernelError as exc:  # the session is gone: the next start opens a new one
            log.warning("session %s kept no kernel: %s", self._notebook_session, exc.message)
            self._notebook_session = None
            await kernel.kill()

    async def aclose(self) -> None:
        """Stop the launches under way (deleting their kernels), delete the spares, close the API."""
        self._closed = True
        for scope in self._launches:
            scope.cancel()
        await self._no_launches.wait()
        spares, self._spares = self._spares, []
        for kernel in spares:
            await kernel.kill()
        await self._api.aclose()
