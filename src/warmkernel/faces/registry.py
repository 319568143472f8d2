"""Which handler answers each declared tool, and how a call reaches it.

A handler is registered for its tool's declaration (`@HANDLERS.on_kernel(WAIT_PYTHON)`), so no
second list of names exists; `Handlers.check` refuses a declared tool without a handler. A tool
with a `kernel` parameter acts on that kernel: the call finds it (the notebook's own, only one that
exists, or one started, as the parameter's declaration says) and carries its one-time notices. A
tool without one is about the workspace's kernels as a whole, and carries main's notices.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mcp.server.session import ServerSession

from warmkernel.errors import WarmkernelError
from warmkernel.faces.connection import Connection
from warmkernel.replies.hints import call, speaking_of
from warmkernel.replies.reply import Reply
from warmkernel.session.session import Session
from warmkernel.settings.model import Settings
from warmkernel.tools.kinds import A, DeclarationError, Tool
from warmkernel.tools.params import KERNEL, KNOWN_KERNEL, NOTEBOOK, NOTEBOOK_KERNEL

Peer = ServerSession
"""The MCP SDK's session of one request: the client's end, which knows its name and takes its
progress notifications. (A `Session` is always ours: one kernel's.)"""


@dataclass(frozen=True)
class KernelCall:
    """A call of a tool on one kernel, as far as a handler the console calls too may see it: the
    kernel's session and the caller's reply settings."""

    session: Session
    settings: Settings


@dataclass(frozen=True)
class ClientCall(KernelCall):
    """A call of a tool on one kernel from an MCP client: also its connection (what it was told)
    and its peer."""

    conn: Connection
    peer: Peer

    @property
    def client(self) -> str:
        """The name the client gave in `initialize` (`claude-code`, `warmkernel-cli`), or ""."""
        params = self.peer.client_params
        return params.client_info.name if params is not None else ""


KernelHandler = Callable[[KernelCall, A], Awaitable[Reply]]
ClientHandler = Callable[[ClientCall, A], Awaitable[Reply]]
WorkspaceHandler = Callable[[Connection, A], Awaitable[Reply]]
_Answer = Callable[[Connection, Peer, Any], Awaitable[Reply]]
"""A registered handler as a call reaches it: the connection, the peer and the checked arguments."""


class Handlers:
    """The registry: one handler per declared tool, each registered by a decorator that takes the tool."""

    def __init__(self) -> None:
        self._answers: dict[str, tuple[Tool[Any], _Answer]] = {}

    def on_kernel(self, tool: Tool[A]) -> Callable[[KernelHandler[A]], KernelHandler[A]]:
        """The handler of a tool on one kernel that needs only the kernel and the reply settings."""

        def register(handler: KernelHandler[A]) -> KernelHandler[A]:
            self._add(tool, _on_kernel(tool, handler), on_kernel=True)
            return handler

        return register

    def from_client(self, tool: Tool[A]) -> Callable[[ClientHandler[A]], ClientHandler[A]]:
        """The handler of a tool on one kernel that also needs the client: its connection or its peer."""

        def register(handler: ClientHandler[A]) -> ClientHandler[A]:
            self._add(tool, _on_kernel(tool, handler), on_kernel=True)
            return handler

        return register

    def on_workspace(self, tool: Tool[A]) -> Callable[[WorkspaceHandler[A]], WorkspaceHandler[A]]:
        """The handler of a tool about the workspace's kernels as a whole."""

        def register(handler: WorkspaceHandler[A]) -> WorkspaceHandler[A]:
            async def answer(conn: Connection, peer: Peer, args: A) -> Reply:
                # main's notices: a restart or a joined kernel is said by whatever call comes first
                return conn.with_notices(conn.kernels.main, await handler(conn, args))

            self._add(tool, answer, on_kernel=False)
            return handler

        return register

    def _add(self, tool: Tool[Any], answer: _Answer, *, on_kernel: bool) -> None:
        if tool.name in self._answers:
            raise DeclarationError(f"{tool.name} has a handler already; a tool has one")
        if on_kernel != any(param.name == KERNEL.name for param in tool.params):
            wanted = "on_workspace" if on_kernel else "on_kernel or from_client"
            has = "has no" if on_kernel else "has a"
            raise DeclarationError(
                f"{tool.name} {has} kernel parameter; its handler is registered with {wanted}"
            )
        self._answers[tool.name] = (tool, answer)

    def tools(self) -> list[Tool[Any]]:
        """The tools with a handler, in the order they were registered."""
        return [tool for tool, _ in self._answers.values()]

    def check(self, tools: Iterable[Tool[Any]]) -> None:
        """Refuses a declared tool without a handler, and a handler of a tool not declared."""
        declared = {tool.name: tool for tool in tools}
        missing = [name for name in declared if name not in self._answers]
        stray = [name for name, (tool, _) in self._answers.items() if declared.get(name) is not tool]
        problems = []
        if missing:
            problems.append(f"without one: {', '.join(missing)}")
        if stray:
            problems.append(f"a handler of no declared tool: {', '.join(stray)}")
        if problems:
            raise DeclarationError("every declared tool has exactly one handler; " + "; ".join(problems))

    async def answer(self, conn: Connection, peer: Peer, tool: Tool[A], args: A) -> Reply:
        """One call, its arguments checked (`tool.parse`), answered by the tool's handler."""
        _, answer = self._answers[tool.name]
        return await answer(conn, peer, args)


def _on_kernel(tool: Tool[A], handler: ClientHandler[A]) -> _Answer:
    """How a call of a tool on one kernel reaches its handler: on the kernel it names, whose
    notices the reply then carries."""

    async def answer(conn: Connection, peer: Peer, args: A) -> Reply:
        session = await _find_kernel(conn, tool, args)
        with speaking_of(session.name), session.in_use():
            return conn.with_notices(
                session, await handler(ClientCall(session, conn.settings, conn, peer), args)
            )

    return answer


async def _find_kernel(conn: Connection, tool: Tool[A], args: A) -> Session:
    """The kernel a call names, as the tool's `kernel` parameter says: the notebook's own, only
    one that exists (the tool reads records, or answers a running cell), else started if new or
    stopped. A notebook tool that names no notebook, with none configured, is refused first."""
    kernel = getattr(args, KERNEL.name)
    if NOTEBOOK in tool.params:
        path = notebook_path(conn.settings, tool, getattr(args, NOTEBOOK.name))
        if NOTEBOOK_KERNEL in tool.params:
            return await conn.kernels.for_notebook(path, kernel)
    return await conn.kernels.session(kernel, start=KNOWN_KERNEL not in tool.params)


def notebook_path(settings: Settings, tool: Tool[Any], path: str | None) -> str:
    """The notebook a call of a notebook tool names, else the configured one (`notebook`)."""
    if path is not None:
        return path
    if settings.notebook is None:
        raise WarmkernelError(
            "invalid_arguments",
            f"which notebook? {call(tool.name, path='NAME.ipynb')} names one, or set notebook in the "
            "configuration (warmkernel.toml, [tool.warmkernel] of pyproject.toml, or the --notebook "
            "flag of mcp, serve and start)",
        )
    return settings.notebook
