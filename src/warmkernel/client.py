"""The command line's side of a daemon: find or start it, then call its tools over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from warmkernel.discovery import Descriptor, find_daemon, start_daemon


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's reply as the CLI prints it: the model's text, or the structured facts."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None


def locate(cwd: Path, daemon_id: str | None) -> Descriptor:
    """The daemon for `cwd`, or the one named; with none, a new daemon for `cwd`."""
    return find_daemon(cwd, daemon_id) or start_daemon(cwd, [])


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Client]:
    """An MCP client for a Streamable HTTP endpoint that wants this bearer token."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def call_tool(client: Client, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
    result = await client.call_tool(tool, arguments)
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    if result.is_error:
        code, _, message = text.partition(": ")
        return ToolOutcome(text, {"error": {"code": code, "message": message}}, error_code=code)
    return ToolOutcome(text, dict(result.structured_content or {}))
