"""The command line's side of a daemon: find or start it, then call its tools over HTTP.

`DaemonClient` speaks just enough MCP over Streamable HTTP for a short-lived CLI verb (initialize,
tools/call, end the session) with httpx2 and json. The MCP SDK's client would import the SDK's
server half (starlette, uvicorn) and validate every result with jsonschema, which costs seconds
where jupyter_server's format checkers are installed (DESIGN.md §8).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import httpx2

from warmkernel import __version__
from warmkernel.discovery import Descriptor, find_daemon, start_daemon
from warmkernel.errors import WarmkernelError

_PROTOCOL_VERSION = "2025-11-25"
_CONNECT_S = 30.0


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's reply as the CLI prints it: the model's text, or the structured facts."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None


def locate(cwd: Path, daemon_id: str | None) -> Descriptor:
    """The daemon for `cwd`, or the one named; with none, a new daemon for `cwd`."""
    return find_daemon(cwd, daemon_id) or start_daemon(cwd, [])


class DaemonClient:
    """One MCP session with a daemon's loopback endpoint."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url
        self._ids = count(1)
        self._session_headers: dict[str, str] = {}

    async def initialize(self) -> None:
        result = await self._request(
            "initialize",
            {
                "protocolVersion": _PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "warmkernel-cli", "version": __version__},
            },
        )
        self._session_headers["mcp-protocol-version"] = result.get("protocolVersion", _PROTOCOL_VERSION)
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """The tool's reply; a coded tool error comes back as an outcome with `error_code`."""
        result = await self._request("tools/call", {"name": tool, "arguments": arguments})
        blocks = result.get("content", [])
        text = "\n".join(block["text"] for block in blocks if block.get("type") == "text")
        data = result.get("structuredContent")
        if not result.get("isError"):
            return ToolOutcome(text, dict(data or {}))
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            error = data["error"]
        else:  # a server without structured content: the code is the text's prefix
            code, _, message = text.partition(": ")
            error = {"code": code, "message": message}
        return ToolOutcome(text, {"error": error}, error_code=error["code"])

    async def close(self) -> None:
        """End the session, so the daemon frees it now rather than at its idle timeout."""
        if "mcp-session-id" in self._session_headers:
            with suppress(httpx2.HTTPError):  # the daemon is gone or going: nothing is left to free
                await self._http.delete(self._url, headers=self._session_headers)

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message_id = next(self._ids)
        answer = await self._post({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})
        if answer is None or "error" in answer:
            error = (answer or {}).get("error", {})
            raise WarmkernelError(
                "daemon_error", f"the daemon at {self._url} refused {method}: {error.get('message', answer)}"
            )
        return answer["result"]

    async def _post(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send one JSON-RPC message; the answer to a request, from a JSON body or an SSE stream."""
        headers = {"accept": "application/json, text/event-stream", **self._session_headers}
        try:
            async with self._http.stream("POST", self._url, json=message, headers=headers) as response:
                if response.status_code == 202 or "id" not in message:
                    return None
                if response.status_code != 200:
                    body = (await response.aread()).decode(errors="replace")[:300]
                    raise WarmkernelError(
                        "daemon_error",
                        f"the daemon at {self._url} answered HTTP {response.status_code}: {body}",
                    )
                if "mcp-session-id" in response.headers:
                    self._session_headers["mcp-session-id"] = response.headers["mcp-session-id"]
                if response.headers.get("content-type", "").startswith("application/json"):
                    return json.loads(await response.aread())
                return await _answer_in_stream(response, message["id"])
        except httpx2.HTTPError as exc:
            raise WarmkernelError("daemon_error", f"cannot reach the daemon at {self._url}: {exc}") from exc


async def _answer_in_stream(response: httpx2.Response, message_id: int) -> dict[str, Any]:
    """The JSON-RPC answer to `message_id` among the server-sent events (notifications are skipped)."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            event = json.loads("\n".join(data))
            data.clear()
            if event.get("id") == message_id:
                return event
    raise WarmkernelError(
        "daemon_error", f"the daemon closed the stream before answering request {message_id}"
    )


@asynccontextmanager
async def open_daemon(url: str, token: str) -> AsyncIterator[DaemonClient]:
    """An initialized MCP session with a daemon endpoint that wants this bearer token.

    No read timeout: a tool call lasts as long as the wait it was asked for.
    """
    timeout = httpx2.Timeout(_CONNECT_S, read=None)
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=timeout) as http:
        client = DaemonClient(http, url)
        try:
            await client.initialize()
            yield client
        finally:
            await client.close()
