"""Small helpers for calling tools and reading their replies in tests."""

from __future__ import annotations

import re
from typing import Any

import mcp_types as types
from mcp import Client


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def call(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must succeed; return its text."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def call_error(client: Client, tool: str, **arguments: Any) -> tuple[str, str]:
    """Call a tool that must fail; return (code, message)."""
    result = await client.call_tool(tool, arguments)
    text = text_of(result)
    assert result.is_error, text
    code, _, message = text.partition(": ")
    return code, message


async def run(client: Client, code: str, **arguments: Any) -> tuple[int, str]:
    """Run a cell (with more arguments, e.g. `kernel`); return its execution number and the reply text."""
    text = await call(client, "run_python", freeform=code, **arguments)
    match = re.search(r"^In \[(\d+)\]", text, re.MULTILINE)
    assert match, text
    return int(match.group(1)), text


def body(text: str) -> list[str]:
    """The reply's lines after the `In [N] ...:` header (and any one-time notice)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("In ["))
    return lines[start + 1 :]
