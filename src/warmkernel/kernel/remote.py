"""Kernels on a Jupyter Server, Kernel Gateway or Enterprise Gateway.

The kernel is created, interrupted and deleted through the server's REST API (`/api/kernels`,
`/api/sessions`), with httpx2, the HTTP client the MCP SDK already brings. Its channels travel
over the server's kernel websocket in the JSON message format every server and gateway speaks,
with tornado's websocket client (already required by jupyter_client; jupyter_server's own
gateway client uses it too). jupyter_server's gateway classes are not used: they are
server-side managers configured through a running server application, not a client.

A lost websocket reconnects with the same session id, so the server replays what it buffered
meanwhile. A kernel deleted or culled on the server, or one the server had to restart after it
died, ends this kernel's generation: the session reports it as died and starts a new one.
"""

from __future__ import annotations

import ast
import ipaddress
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import anyio
import anyio.abc
import httpx2
from jupyter_client.jsonutil import json_default
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, WebSocketClosedError, websocket_connect

from warmkernel.config import Settings
from warmkernel.errors import WarmkernelError
from warmkernel.kernel.base import Kernel, KernelPlace
from warmkernel.kernel.channel import KernelChannel, Outgoing, Route
from warmkernel.types import Generation

log = logging.getLogger(__name__)

_REQUEST_TIMEOUT_S = 30.0
_RECONNECT_GIVE_UP_S = 60.0
"""How long an unreachable server may stay unreachable before its kernel counts as lost."""
_RECONNECT_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 5.0)
_PING_INTERVAL_S = 20.0
_LIVENESS_POLL_S = 3.0
_DELETED = "it was deleted on the Jupyter server (culled, or shut down there)"
_MAX_MESSAGE_BYTES = 1 << 30  # a cell's output can be large; the server sends it as one message
_GONE_STATES = {
    "restarting": "it died and the Jupyter server restarted it",
    "dead": "it died and the Jupyter server could not restart it",
}


def check_jupyter_url(url: str) -> None:
    """`invalid_arguments` unless `url` is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WarmkernelError(
            "invalid_arguments", f"--jupyter-url takes an http:// or https:// URL, not {url!r}"
        )


def is_loopback(url: str) -> bool:
    """Whether `url` names this machine's loopback interface."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class JupyterApi:
    """The REST calls warmkernel makes on one Jupyter server, with its token."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self._headers = {"Authorization": f"token {token}"} if token else {}
        # A proxy from the environment serves a remote server, never a loopback one: it would see
        # the token, and it cannot reach this machine's loopback anyway.
        self._http = httpx2.AsyncClient(
            base_url=self.url,
            headers=self._headers,
            timeout=_REQUEST_TIMEOUT_S,
            trust_env=not is_loopback(self.url),
        )

    async def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> httpx2.Response:
        try:
            response = await self._http.request(method, path, json=body)
        except httpx2.HTTPError as exc:
            raise WarmkernelError(
                "jupyter_server_unreachable", f"could not reach the Jupyter server at {self.url}: {exc}"
            ) from exc
        if response.status_code in (401, 403):
            raise WarmkernelError(
                "jupyter_server_refused",
                f"the Jupyter server at {self.url} refused the request ({response.status_code}); "
                "give its token with --jupyter-token or WARMKERNEL_JUPYTER_TOKEN",
            )
        return response

    def _check(self, response: httpx2.Response, what: str) -> dict[str, Any]:
        if response.is_success:
            return response.json() if response.content else {}
        try:
            reason = response.json().get("message") or response.text
        except ValueError:
            reason = response.text
        raise WarmkernelError(
            "jupyter_server_failed", f"{what} failed on {self.url}: {response.status_code} {reason}".strip()
        )

    async def create_kernel(self, kernel_name: str) -> str:
        # path "" is the server's root directory, its notion of the workspace; without it a
        # Jupyter Server starts the kernel wherever the server process happens to run.
        response = await self._call("POST", "api/kernels", {"name": kernel_name, "path": ""})
        return str(self._check(response, f"starting a {kernel_name!r} kernel")["id"])

    async def open_notebook_session(self, notebook: str, kernel_name: str) -> tuple[str, str]:
        """(session id, kernel id) of the notebook's server session, created if there is none."""
        body = {"path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": kernel_name}}
        response = await self._call("POST", "api/sessions", body)
        model = self._check(response, f"opening a session for {notebook}")
        return str(model["id"]), str(model["kernel"]["id"])

    async def replace_session_kernel(self, session_id: str, kernel_name: str) -> str:
        """Give the session a new kernel (the server shuts the old one down); its id."""
        response = await self._call("PATCH", f"api/sessions/{session_id}", {"kernel": {"name": kernel_name}})
        return str(self._check(response, f"replacing the kernel of session {session_id}")["kernel"]["id"])

    async def kernel_exists(self, kernel_id: str) -> bool:
        response = await self._call("GET", f"api/kernels/{kernel_id}")
        if response.status_code == 404:
            return False
        self._check(response, f"looking up kernel {kernel_id}")
        return True

    async def interrupt(self, kernel_id: str) -> None:
        self._check(await self._call("POST", f"api/kernels/{kernel_id}/interrupt"), "interrupting the kernel")

    async def delete(self, kernel_id: str) -> None:
        response = await self._call("DELETE", f"api/kernels/{kernel_id}")
        if response.status_code != 404:
            self._check(response, f"deleting kernel {kernel_id}")

    async def connect_channels(self, kernel_id: str, channel_session: str) -> WebSocketClientConnection:
        parts = urlsplit(self.url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        path = f"{parts.path}api/kernels/{kernel_id}/channels?session_id={quote(channel_session)}"
        request = HTTPRequest(
            urlunsplit((scheme, parts.netloc, path, "", "")),
            headers=self._headers,
            connect_timeout=_REQUEST_TIMEOUT_S,
        )
        try:
            return await websocket_connect(
                request,
                ping_interval=_PING_INTERVAL_S,
                max_message_size=_MAX_MESSAGE_BYTES,
            )
        except (OSError, HTTPClientError) as exc:
            raise WarmkernelError(
                "jupyter_server_unreachable",
                f"could not open kernel {kernel_id}'s channels on {self.url}: {exc}",
            ) from exc

    async def aclose(self) -> None:
        await self._http.aclose()


class WebsocketTransport:
    """A kernel's channels over its server's websocket, reconnected when the connection drops."""

    def __init__(self, api: JupyterApi, kernel_id: str) -> None:
        self._api = api
        self._kernel_id = kernel_id
        self._channel_session = uuid.uuid4().hex  # the same on every reconnect: the server replays its buffer
        self._connection: WebSocketClientConnection | None = None
        self._unsent: list[str] = []
        self.gone_reason = ""
        """Why the kernel is gone, once `run` has returned by itself."""

    async def run(self, route: Route, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._connection = await self._api.connect_channels(self._kernel_id, self._channel_session)
        task_status.started()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_kernel, tg.cancel_scope)
                await self._read(route)
                tg.cancel_scope.cancel()
        finally:
            if self._connection is not None:
                self._connection.close()
            self._connection = None

    async def _read(self, route: Route) -> None:
        """Route messages until the kernel is gone (the server said so, or reconnecting failed)."""
        while True:
            assert self._connection is not None
            text = await self._connection.read_message()
            if text is None:
                if not await self._reconnect():
                    return
                continue
            msg = json.loads(text)
            content = msg.get("content") or {}
            if msg.get("msg_type") == "status" and content.get("execution_state") in _GONE_STATES:
                self.gone_reason = _GONE_STATES[content["execution_state"]]
                return
            route(str(msg.get("channel", "")), msg)

    async def _watch_kernel(self, scope: anyio.CancelScope) -> None:
        """A server keeps the websocket open when it deletes or culls the kernel: ask it now and then."""
        while True:
            await anyio.sleep(_LIVENESS_POLL_S)
            try:
                exists = await self._api.kernel_exists(self._kernel_id)
            except WarmkernelError:
                continue  # unreachable: the websocket closes too, and reconnecting decides
            if not exists:
                self.gone_reason = _DELETED
                scope.cancel()
                return

    async def _reconnect(self) -> bool:
        """Connect again while the kernel exists; False (with `gone_reason`) once it does not."""
        assert self._connection is not None
        self._connection.close()  # already closed by the peer; this releases it
        self._connection = None
        with anyio.move_on_after(_RECONNECT_GIVE_UP_S):
            attempt = 0
            while True:
                try:
                    if not await self._api.kernel_exists(self._kernel_id):
                        self.gone_reason = _DELETED
                        return False
                    self._connection = await self._api.connect_channels(
                        self._kernel_id, self._channel_session
                    )
                except WarmkernelError as exc:
                    log.warning("kernel %s: reconnecting: %s", self._kernel_id, exc.message)
                    await anyio.sleep(_RECONNECT_DELAYS_S[min(attempt, len(_RECONNECT_DELAYS_S) - 1)])
                    attempt += 1
                    continue
                log.info("kernel %s: channels reconnected", self._kernel_id)
                for text in self._unsent:
                    self._connection.write_message(text)
                self._unsent.clear()
                return True
        self.gone_reason = (
            f"the Jupyter server at {self._api.url} was unreachable for {_RECONNECT_GIVE_UP_S:.0f} s"
        )
        return False

    def send(self, channel: Outgoing, msg: dict[str, Any]) -> None:
        text = json.dumps({**msg, "channel": channel}, default=json_default)
        if self._connection is None:
            self._unsent.append(text)  # sent once the channels reconnect
            return
        try:
            self._connection.write_message(text)
        except WebSocketClosedError:
            self._unsent.append(text)


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
        cls, tg: anyio.abc.TaskGroup, api: JupyterApi, kernel_id: str, generation: Generation
    ) -> RemoteKernel:
        """Open the kernel's channels and return once it answers on shell and IOPub."""
        kernel = cls(generation, tg, api, kernel_id, WebsocketTransport(api, kernel_id))
        try:
            await tg.start(kernel._supervise)
            await kernel._handshake()
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
                with anyio.CancelScope(shield=True), anyio.move_on_after(_REQUEST_TIMEOUT_S):
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
        with anyio.move_on_after(_REQUEST_TIMEOUT_S):
            await self._delete()

    async def detach(self) -> None:
        """Stop routing and let the kernel be: the server is about to replace it itself."""
        self.killed_on_purpose = True
        self.stop()
        await self.exited.wait()


class RemoteLauncher:
    """Creates each generation's kernel on the Jupyter server named by the settings."""

    def __init__(self, tg: anyio.abc.TaskGroup, settings: Settings) -> None:
        assert settings.jupyter_url is not None
        self._tg = tg
        self._api = JupyterApi(settings.jupyter_url, settings.jupyter_token)
        self._kernel_name = settings.kernel_name
        self._notebook = settings.jupyter_notebook
        self._notebook_session: str | None = None
        """The notebook's server session, once opened: an IDE showing the notebook follows it."""
        self._successor: str | None = None
        """The kernel the session got when the last one was retired, for the next start."""

    async def start(self, generation: Generation) -> RemoteKernel:
        if self._successor is not None:
            kernel_id, self._successor = self._successor, None
        elif self._notebook is not None:
            self._notebook_session, kernel_id = await self._api.open_notebook_session(
                self._notebook, self._kernel_name
            )
        else:
            kernel_id = await self._api.create_kernel(self._kernel_name)
        return await RemoteKernel.connect(self._tg, self._api, kernel_id, generation)

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
        await self._api.aclose()
