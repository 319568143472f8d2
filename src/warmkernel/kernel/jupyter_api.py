"""The doors of one Jupyter server (Jupyter Server, Kernel Gateway or Enterprise Gateway): its REST
API and its kernel websockets, with the token, extra headers and TLS trust that both share.

REST goes through httpx2 (the HTTP client the MCP SDK already brings), websockets through the
`websockets` library's asyncio client. Both honour the environment's proxy settings for a remote
server and ignore them for a loopback one. One `ssl.SSLContext`, built once from the CA bundle
and client certificate, serves both, so an https server is trusted the same way on either door.
A 401 makes the token be read again (from its file, else `WARMKERNEL_JUPYTER_TOKEN`) and the
request retried once when it changed: a rotated token is picked up without a restart. A refusal
says what the server said.
"""

from __future__ import annotations

import getpass
import ipaddress
import json
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx2
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidProxy, InvalidStatus, ProxyError

from warmkernel.errors import WarmkernelError
from warmkernel.settings.model import Settings

TOKEN_VARIABLE = "WARMKERNEL_JUPYTER_TOKEN"
REQUEST_TIMEOUT_S = 30.0
_PING_INTERVAL_S = 20.0
_CLOSE_TIMEOUT_S = 2.0
"""How long closing a websocket waits for the server's close frame before dropping the connection."""
_MAX_MESSAGE_BYTES = 1 << 30  # a cell's output can be large; the server sends it as one message
_SAID_MAX_CHARS = 500


class ServerTimeout(WarmkernelError):
    """A request the server did not answer in time (`jupyter_server_unreachable`); a caller that
    knows which step it was can say so."""

    def __init__(self, message: str) -> None:
        super().__init__("jupyter_server_unreachable", message)


def is_loopback(url: str) -> bool:
    """Whether `url` names this machine's loopback interface."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_jupyter_url(url: str) -> None:
    """`invalid_arguments` unless `url` is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WarmkernelError(
            "invalid_arguments", f"--jupyter-url takes an http:// or https:// URL, not {url!r}"
        )


def split_assignment(text: str, flag: str) -> tuple[str, str]:
    """`NAME=VALUE` as (NAME, VALUE); `invalid_arguments` (naming `flag`) without a name and `=`."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip() or name != name.strip():
        raise WarmkernelError("invalid_arguments", f"{flag} takes NAME=VALUE, not {text!r}")
    return name, value


def kernel_environment(settings: Settings, environ: Mapping[str, str], user: str) -> dict[str, str]:
    """The `env` of a create request, as Jupyter Server's gateway client sends it.

    Every `KERNEL_*` variable of our environment, then `KERNEL_USERNAME` (Enterprise Gateway
    authorizes and impersonates by it), `KERNEL_WORKING_DIR`, `KERNEL_LAUNCH_TIMEOUT` (so the
    gateway waits as long as we do) and finally `--kernel-env`, which wins.
    """
    env = {name: value for name, value in environ.items() if name.startswith("KERNEL_")}
    env["KERNEL_USERNAME"] = settings.kernel_username or env.get("KERNEL_USERNAME") or user
    if settings.kernel_working_dir is not None:
        env["KERNEL_WORKING_DIR"] = settings.kernel_working_dir
    env.setdefault("KERNEL_LAUNCH_TIMEOUT", f"{settings.kernel_launch_timeout_s:.0f}")
    env.update(split_assignment(item, "--kernel-env") for item in settings.kernel_env)
    return env


def local_user() -> str:
    """The name of the user this process runs as (the default `KERNEL_USERNAME`)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a bare container): name the uid
        return str(os.getuid())


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    """The one trust configuration of REST and websocket; None: each client's default trust."""
    if settings.jupyter_ca_bundle is None and settings.jupyter_client_cert is None:
        return None
    try:
        context = ssl.create_default_context(cafile=settings.jupyter_ca_bundle)
        if settings.jupyter_client_cert is not None:
            context.load_cert_chain(settings.jupyter_client_cert, settings.jupyter_client_key)
    except (OSError, ssl.SSLError) as exc:
        raise WarmkernelError(
            "invalid_arguments",
            "the CA bundle or client certificate of --jupyter-url cannot be used "
            f"(--jupyter-ca-bundle {settings.jupyter_ca_bundle}, --jupyter-client-cert "
            f"{settings.jupyter_client_cert}): {exc}",
        ) from exc
    return context


def check_jupyter_settings(settings: Settings) -> None:
    """Refuse, before anything starts, a server URL, header, variable or certificate that cannot work."""
    assert settings.jupyter_url is not None
    check_jupyter_url(settings.jupyter_url)
    for header in settings.jupyter_headers:
        split_assignment(header, "--jupyter-header")
    for item in settings.kernel_env:
        split_assignment(item, "--kernel-env")
    tls_context(settings)


def server_says(response: httpx2.Response) -> str:
    """What the server said about a failed request: its JSON `message`, else its `reason`, else its text."""
    try:
        model = response.json()
    except ValueError:
        model = None
    if isinstance(model, dict):
        said = [str(model.get(key) or "").strip() for key in ("message", "reason")]
        generic = {"", response.reason_phrase, "Unknown server error", "Internal Server Error"}
        specific = [text for text in said if text not in generic]
        text = specific[0] if specific else next((text for text in said if text), "")
    else:
        text = response.text.strip()
    return text[:_SAID_MAX_CHARS]


class JupyterApi:
    """The REST calls and websockets warmkernel opens on one Jupyter server."""

    def __init__(self, settings: Settings) -> None:
        assert settings.jupyter_url is not None
        url = settings.jupyter_url
        self.url = url if url.endswith("/") else url + "/"
        self._token = settings.jupyter_token
        self._token_file = settings.jupyter_token_file
        if self._token_file is not None:
            self._token = self._read_token_file() or self._token
        self._extra_headers = dict(split_assignment(h, "--jupyter-header") for h in settings.jupyter_headers)
        self._tls = tls_context(settings)
        # A proxy from the environment serves a remote server, never a loopback one: it would see
        # the token, and it cannot reach this machine's loopback anyway.
        self._use_proxy = not is_loopback(self.url)
        self._http = httpx2.AsyncClient(
            base_url=self.url,
            timeout=REQUEST_TIMEOUT_S,
            verify=self._tls if self._tls is not None else True,
            trust_env=self._use_proxy,
        )

    # -- authentication -----------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        token = {"Authorization": f"token {self._token}"} if self._token else {}
        return self._extra_headers | token

    def _read_token_file(self) -> str | None:
        assert self._token_file is not None
        try:
            return Path(self._token_file).read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def _token_rotated(self) -> bool:
        """Read the token again after a 401; True when it changed (the request is worth retrying)."""
        fresh = self._read_token_file() if self._token_file is not None else os.environ.get(TOKEN_VARIABLE)
        if fresh and fresh != self._token:
            self._token = fresh
            return True
        return False

    def _refused(self, status: int, said: str) -> WarmkernelError:
        if status == 401:
            fix = (
                f"the token in {self._token_file} was read again and is still refused"
                if self._token_file is not None
                else "give its token with --jupyter-token or WARMKERNEL_JUPYTER_TOKEN"
            )
            what = "did not accept the token" if self._token else "wants a token"
            return WarmkernelError(
                "jupyter_server_refused", f"the Jupyter server at {self.url} {what} (401); {fix}"
            )
        # A Jupyter Server treats a request with a wrong token as anonymous, and its XSRF check
        # refuses it: then the token is the cause, whatever the message says.
        token_hint = not said or said == "Forbidden" or "xsrf" in said.lower()
        return WarmkernelError(
            "jupyter_server_refused",
            f"the Jupyter server at {self.url} refused the request (403{': ' + said if said else ''})"
            + ("; check its token (--jupyter-token or WARMKERNEL_JUPYTER_TOKEN)" if token_hint else ""),
        )

    # -- REST -------------------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> httpx2.Response:
        for retry in (True, False):
            try:
                response = await self._http.request(
                    method, path, json=body, headers=self._headers(), timeout=timeout_s
                )
            except httpx2.TimeoutException as exc:
                raise ServerTimeout(
                    f"the Jupyter server at {self.url} did not answer {method} {path} "
                    f"within {timeout_s:.0f} s"
                ) from exc
            except httpx2.HTTPError as exc:
                raise WarmkernelError(
                    "jupyter_server_unreachable", f"could not reach the Jupyter server at {self.url}: {exc}"
                ) from exc
            if response.status_code == 401 and retry and self._token_rotated():
                continue
            if response.status_code in (401, 403):
                raise self._refused(response.status_code, server_says(response))
            return response
        raise AssertionError("unreachable: the second try returns or raises")

    def _check(self, response: httpx2.Response, what: str) -> dict[str, Any]:
        if response.is_success:
            return response.json() if response.content else {}
        raise WarmkernelError(
            "jupyter_server_failed",
            f"{what} failed on {self.url}: {response.status_code} {server_says(response)}".strip(),
        )

    async def kernelspec_names(self) -> list[str]:
        response = await self._call("GET", "api/kernelspecs")
        return sorted(self._check(response, "listing the kernelspecs").get("kernelspecs", {}))

    async def create_kernel(self, kernel_name: str, env: Mapping[str, str], timeout_s: float) -> str:
        """Start a kernel; `ServerTimeout` past `timeout_s`."""
        # path "" is the server's root directory, its notion of the workspace; without it a
        # Jupyter Server starts the kernel wherever the server process happens to run.
        body = {"name": kernel_name, "path": "", "env": dict(env)}
        response = await self._call("POST", "api/kernels", body, timeout_s=timeout_s)
        if not response.is_success:
            await self._check_kernelspec(kernel_name)
        return str(self._check(response, f"starting a {kernel_name!r} kernel")["id"])

    async def _check_kernelspec(self, kernel_name: str) -> None:
        """After a failed create: `jupyter_server_failed` naming the kernelspecs there are, if
        `kernel_name` is not one (servers answer 404 or 500 for it, with a traceback)."""
        try:
            names = await self.kernelspec_names()
        except (WarmkernelError, ValueError):
            return  # the create's own failure says the rest
        if kernel_name not in names:
            raise WarmkernelError(
                "jupyter_server_failed",
                f"the Jupyter server at {self.url} has no kernelspec {kernel_name!r}; it has "
                f"{', '.join(names) or 'none'} (choose one with --kernel-name)",
            )

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

    # -- websocket ---------------------------------------------------------------------------------

    async def connect_channels(
        self, kernel_id: str, channel_session: str, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> ClientConnection:
        """The kernel's websocket; `TimeoutError` past `timeout_s` (the caller names the step)."""
        parts = urlsplit(self.url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        path = f"{parts.path}api/kernels/{kernel_id}/channels?session_id={quote(channel_session)}"
        for retry in (True, False):
            try:
                return await connect(
                    urlunsplit((scheme, parts.netloc, path, "", "")),
                    additional_headers=self._headers(),
                    proxy=True if self._use_proxy else None,  # True: the environment's
                    open_timeout=timeout_s,
                    ping_interval=_PING_INTERVAL_S,
                    close_timeout=_CLOSE_TIMEOUT_S,
                    max_size=_MAX_MESSAGE_BYTES,
                    ssl=(self._tls or True) if scheme == "wss" else None,  # True: the default trust
                )
            except TimeoutError:
                raise  # an OSError too, but one the caller names
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status == 401 and retry and self._token_rotated():
                    continue
                said = _websocket_says(exc.response.body)
                if status in (401, 403):
                    raise self._refused(status, said) from exc
                raise WarmkernelError(
                    "jupyter_server_failed",
                    f"opening kernel {kernel_id}'s channels failed on {self.url}: {status} {said}".strip(),
                ) from exc
            except (OSError, ProxyError, InvalidProxy) as exc:
                raise WarmkernelError(
                    "jupyter_server_unreachable",
                    f"could not open kernel {kernel_id}'s channels on {self.url}: {exc}",
                ) from exc
            except InvalidHandshake as exc:
                raise WarmkernelError(
                    "jupyter_server_failed",
                    f"opening kernel {kernel_id}'s channels failed on {self.url}: {exc}",
                ) from exc
        raise AssertionError("unreachable: the second try returns or raises")

    async def aclose(self) -> None:
        await self._http.aclose()


def _websocket_says(body: bytes | bytearray | None) -> str:
    """What the server said in its answer to a refused websocket: its JSON `message` or `reason`."""
    try:
        model = json.loads(body or b"null")
    except ValueError:
        return (body or b"").decode(errors="replace").strip()[:_SAID_MAX_CHARS]
    if isinstance(model, dict):
        return str(model.get("message") or model.get("reason") or "")[:_SAID_MAX_CHARS]
    return ""
