"""The console page: a live view of the daemon's kernels for the person beside the agent.

`warmkernel view` asks the daemon for a URL; the daemon serves this app on a loopback port for
the rest of its life. Access: the URL carries a one-time token, which the first request trades
for an HttpOnly, SameSite=Strict cookie (named after the port: browsers share cookies across the
ports of a host); every route needs that cookie. The MCP SDK's Host/Origin guard runs first, on
this exact port, and a POST (the one action, interrupt) must carry an allowed Origin. The page
is plain HTML, JS and CSS shipped in `console_page/`, under a Content-Security-Policy that lets
it load nothing from elsewhere.

Routes (all JSON but the page, its two files, the images and the event stream):
  GET  /                  the page (`/?token=T` sets the cookie and redirects here)
  GET  /static/console.js, /static/console.css, /static/favicon.svg
  GET  /events            server-sent events: `kernels`, the facts of every kernel, on each change
  GET  /api/kernels/{k}/executions?offset=&limit=   a page of the list, newest first
  GET  /api/kernels/{k}/executions/{n}              one execution
  GET  /api/kernels/{k}/executions/{n}/lines?start=&stop=   a window of its combined output
  GET  /api/kernels/{k}/executions/{n}/images/{i}
  GET  /api/kernels/{k}/executions/{n}/search?query=&query_mode=&context_before=&...
  GET  /api/kernels/{k}/variables, /api/kernels/{k}/notebook
  POST /api/kernels/{k}/interrupt
"""

from __future__ import annotations

import json
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.applications import Starlette
from starlette.requests import Request, cookie_parser
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from warmkernel.errors import CALLER_MISTAKES, WarmkernelError
from warmkernel.faces.handlers import (
    interrupt_python,
    list_python_variables,
    notebook_status,
    search_python_output,
)
from warmkernel.faces.http_server import Endpoint, security_settings, serve_asgi
from warmkernel.faces.listening import CONSOLE_CONNECTIONS
from warmkernel.faces.registry import KernelCall
from warmkernel.replies.page import (
    LINE_MAX_CHARS,
    execution_detail,
    execution_page,
    image,
    kernel_facts,
    output_window,
)
from warmkernel.session.session import Session
from warmkernel.tools.cell_tools import INTERRUPT_PYTHON
from warmkernel.tools.kernel_tools import LIST_PYTHON_VARIABLES
from warmkernel.tools.notebook_tools import NOTEBOOK_STATUS
from warmkernel.tools.record_tools import SEARCH_PYTHON_OUTPUT

KernelsByName = Callable[[], Mapping[str, Session]]
"""The daemon's kernels by name, as they are now (the page lists what this returns)."""

PAGE_DIR = Path(__file__).parent / "console_page"
_STATIC = {"console.js": "text/javascript", "console.css": "text/css", "favicon.svg": "image/svg+xml"}
FRAME_S = 0.25
"""While a cell runs, the event stream sends the kernels' facts at most this often."""
KEEPALIVE_S = 15.0
"""An idle event stream sends a comment this often, so proxies and browsers keep it open."""
_GRACEFUL_S = 1

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
]
_STATUS = {"execution_not_found": 404, "busy": 409, "not_awaiting_input": 409}


@dataclass
class Access:
    """Who may use the page: one-time tokens not yet traded, and the cookies they were traded for."""

    cookie_name: str
    pending: set[str] = field(default_factory=set)
    cookies: set[str] = field(default_factory=set)

    def new_token(self) -> str:
        token = secrets.token_urlsafe(32)
        self.pending.add(token)
        return token

    def redeem(self, token: str) -> str | None:
        """A new cookie value for a pending token, which is then spent; None for any other."""
        if token not in self.pending:
            return None
        self.pending.discard(token)
        cookie = secrets.token_urlsafe(32)
        self.cookies.add(cookie)
        return cookie

    def admits(self, cookie_header: str) -> bool:
        # Starlette's lenient parser: other sites' odd cookies on this host must not hide ours.
        given = cookie_parser(cookie_header).get(self.cookie_name, "")
        return any(secrets.compare_digest(given, known) for known in self.cookies)


class _Guard:
    """ASGI middleware: the Host/Origin guard, Origin on every POST, then the token or the cookie;
    the security headers on every answer."""

    def __init__(self, app: ASGIApp, access: Access, endpoint: Endpoint) -> None:
        self.app = app
        self.access = access
        self.security = TransportSecurityMiddleware(
            security_settings(endpoint.allowed_hosts, str(endpoint.port))
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_HEADERS]}
            await send(message)

        response = await self._refusal(Request(scope))
        if response is not None:
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    async def _refusal(self, request: Request) -> Response | None:
        """The answer that ends the request here, or None to let it through."""
        post = request.method not in ("GET", "HEAD")
        refused = await self.security.validate_request(request, is_post=post)
        if refused is not None:
            return refused
        if post and not request.headers.get("origin"):
            return PlainTextResponse("403 Forbidden: a POST needs the page's Origin\n", 403)
        token = request.query_params.get("token")
        if request.url.path == "/" and token is not None:
            cookie = self.access.redeem(token)
            if cookie is None:
                return PlainTextResponse(
                    "403 Forbidden: this link was used already or is not valid; "
                    "`warmkernel view` prints a new one\n",
                    403,
                )
            redirect = RedirectResponse("/", 303)
            redirect.set_cookie(self.access.cookie_name, cookie, httponly=True, samesite="strict", path="/")
            return redirect
        if not self.access.admits(request.headers.get("cookie", "")):
            return PlainTextResponse(
                "401 Unauthorized: open the link `warmkernel view` prints (it is good for one use)\n", 401
            )
        return None


def routes(kernels: KernelsByName) -> list[Route]:
    """Every route of the page, over these kernels."""
    api = _Api(kernels)
    return [
        Route("/", _page),
        Route("/static/{name}", _static),
        Route("/events", api.events),
        Route("/api/kernels/{kernel}/executions", api.executions),
        Route("/api/kernels/{kernel}/executions/{n:int}", api.execution),
        Route("/api/kernels/{kernel}/executions/{n:int}/lines", api.lines),
        Route("/api/kernels/{kernel}/executions/{n:int}/images/{ordinal:int}", api.image),
        Route("/api/kernels/{kernel}/executions/{n:int}/search", api.search),
        Route("/api/kernels/{kernel}/variables", api.variables),
        Route("/api/kernels/{kernel}/notebook", api.notebook),
        Route("/api/kernels/{kernel}/interrupt", api.interrupt, methods=["POST"]),
    ]


def build_app(kernels: KernelsByName, access: Access, endpoint: Endpoint) -> ASGIApp:
    """The page's routes behind the guard."""
    return _Guard(Starlette(routes=routes(kernels)), access, endpoint)


async def _page(request: Request) -> Response:
    return Response((PAGE_DIR / "index.html").read_bytes(), media_type="text/html; charset=utf-8")


async def _static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in _STATIC:
        return PlainTextResponse("404 Not Found\n", 404)
    return Response((PAGE_DIR / name).read_bytes(), media_type=f"{_STATIC[name]}; charset=utf-8")


def _error(exc: WarmkernelError) -> JSONResponse:
    status = _STATUS.get(exc.code, 400 if exc.code in CALLER_MISTAKES else 500)
    return JSONResponse({"error": {"code": exc.code, "message": exc.message}}, status)


def _whole(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise WarmkernelError("invalid_arguments", f"{name} is a whole number, 0 or more, not {text!r}")
    return value


@dataclass
class _Api:
    """The routes: each reads one kernel's session. Those a tool mirrors call its handler, with
    the kernel's own reply settings, and answer with its facts; the others hand what the session
    gives to the page's facts (`replies/page.py`)."""

    kernels: KernelsByName

    def _call(self, request: Request) -> KernelCall:
        """A call on the kernel the route names, as the tools' handlers take it."""
        session = self._session(request)
        return KernelCall(session, session.settings)

    def _session(self, request: Request) -> Session:
        name = request.path_params["kernel"]
        kernels = self.kernels()
        session = kernels.get(name)
        if session is None:
            raise WarmkernelError(
                "invalid_arguments", f"there is no kernel {name!r}; kernels: {', '.join(kernels)}"
            )
        return session

    def _facts(self) -> list[dict[str, Any]]:
        return [
            kernel_facts(name, s.kernel_info(), s.records, s.running, s.bound_notebook)
            for name, s in self.kernels().items()
        ]

    async def events(self, request: Request) -> Response:
        return StreamingResponse(self._stream(), media_type="text/event-stream")

    async def _stream(self) -> AsyncIterator[str]:
        """The kernels' facts whenever they change; while a cell runs, at most every `FRAME_S`."""
        last: list[dict[str, Any]] | None = None
        while True:
            facts = self._facts()
            if facts != last:
                yield f"event: kernels\ndata: {json.dumps({'kernels': facts})}\n\n"
                last = facts
            busy = any(kernel["running"] is not None for kernel in facts)
            changed = False
            with anyio.move_on_after(FRAME_S if busy else KEEPALIVE_S):
                await _any_change(list(self.kernels().values()))
                changed = True
            if not changed and not busy:
                yield ": keepalive\n\n"

    async def executions(self, request: Request) -> Response:
        try:
            session = self._session(request)
            page = execution_page(
                session.records, _whole(request, "offset", 0), _whole(request, "limit", 100)
            )
        except WarmkernelError as exc:
            return _error(exc)
        return JSONResponse(page)

    async def execution(self, request: Request) -> Response:
        try:
            record = self._session(request).select(request.path_params["n"])
        except WarmkernelError as exc:
            return _error(exc)
        return JSONResponse(execution_detail(record))

    async def lines(self, request: Request) -> Response:
        try:
            start, stop = _whole(request, "start", 0), _whole(request, "stop", 0)
            chosen = self._session(request).select_output(
                request.path_params["n"], "combined", f"{start + 1}:{stop}"
            )
        except WarmkernelError as exc:
            return _error(exc)
        return JSONResponse(output_window(chosen.record, chosen.lo, chosen.hi))

    async def image(self, request: Request) -> Response:
        ordinal = request.path_params["ordinal"]
        try:
            record = self._session(request).select(request.path_params["n"])
        except WarmkernelError as exc:
            return _error(exc)
        found = image(record, ordinal)
        if found is None:
            return PlainTextResponse(
                f"404 Not Found: execution {record.number} has no image {ordinal}\n", 404
            )
        mime, data = found
        return Response(data, media_type=mime)

    async def search(self, request: Request) -> Response:
        """`search_python_output`, with the same checks, on the combined stream; lines clipped as
        the page's windows clip them."""
        given: dict[str, Any] = {"execution": request.path_params["n"], "max_chars": LINE_MAX_CHARS}
        for name in ("query", "query_mode"):
            if name in request.query_params:
                given[name] = request.query_params[name]
        try:
            for name in ("context_before", "context_after", "max_matches"):
                if name in request.query_params:
                    given[name] = _whole(request, name, 0)
            given["ignore_case"] = request.query_params.get("ignore_case") in ("1", "true")
            args = SEARCH_PYTHON_OUTPUT.parse(given)
            reply = await search_python_output(self._call(request), args)
        except WarmkernelError as exc:
            return _error(exc)
        return JSONResponse(reply.data)

    async def variables(self, request: Request) -> Response:
        try:
            reply = await list_python_variables(self._call(request), LIST_PYTHON_VARIABLES.parse({}))
        except WarmkernelError as exc:
            return _error(exc)
        return JSONResponse(reply.data)

    async def notebook(self, request: Request) -> Response:
        """`notebook_status` of the notebook bound to the kernel, with its text; null without one."""
        try:
            call = self._call(request)
            path = call.session.bound_notebook
            if path is None:
                return JSONResponse({"notebook": None})
            reply = await notebook_status(call, NOTEBOOK_STATUS.parse({"path": path}))
        except WarmkernelError as exc:
            return _error(exc)
        return JSONResponse(reply.data | {"text": reply.text})

    async def interrupt(self, request: Request) -> Response:
        try:
            reply = await interrupt_python(self._call(request), INTERRUPT_PYTHON.parse({}))
        except WarmkernelError as exc:
            return _error(exc)
        return JSONResponse(reply.data)


async def _any_change(sessions: list[Session]) -> None:
    """Return when any of the sessions changes."""
    async with anyio.create_task_group() as tg:

        async def one(session: Session) -> None:
            await session.changed()
            tg.cancel_scope.cancel()

        for session in sessions:
            tg.start_soon(one, session)


@dataclass
class Console:
    """The page of one daemon: where it listens and who may use it."""

    endpoint: Endpoint
    """Where it listens (its `token` is unused: the page's tokens are `access`'s, one per link)."""
    access: Access

    def url(self) -> str:
        """A link for one browser: the page with a fresh one-time token."""
        return f"{self.endpoint.url}?token={self.access.new_token()}"


def open_console(endpoint: Endpoint) -> Console:
    """The console of a bound endpoint (its port known), with no token issued yet."""
    return Console(endpoint, Access(f"warmkernel-console-{endpoint.port}"))


async def serve_console(console: Console, kernels: KernelsByName, sock: socket.socket) -> None:
    """Serve the page on `sock` until cancelled (the daemon's end)."""
    app = build_app(kernels, console.access, console.endpoint)
    async with serve_asgi(app, sock, "the console page", CONSOLE_CONNECTIONS, graceful_s=_GRACEFUL_S):
        await anyio.sleep_forever()
