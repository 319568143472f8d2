"""Launch `warmkernel mcp` the way an MCP host does and run a few cells through it.

    python examples/smoke.py

Prints each reply exactly as a model would read it. The kernel lives in the directory's daemon
and stays warm after the script ends (run it twice: the numbering continues); `warmkernel stop`
ends it.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


CELLS = [
    "import sys\nprint(sys.version.split()[0])",
    "answer = 6 * 7\nanswer",
    "for i in range(101):\n    print(f'\\r{i}%', end='')\nprint()",
    "answer / 0",
]


async def main() -> None:
    # The SDK passes a server only a few variables of ours unless told: the whole environment
    # keeps WARMKERNEL_RUNTIME_DIR and the like, so the shell's `warmkernel` finds this daemon.
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "warmkernel", "mcp"], env=dict(os.environ)
    )
    async with Client(server) as client:
        for cell in CELLS:
            result = await client.call_tool("run_python", {"freeform": cell})
            print(">>> run_python", repr(cell))
            print(text_of(result), end="\n\n")
        status = await client.call_tool("list_python_executions", {})
        print(">>> list_python_executions")
        print(text_of(status))


if __name__ == "__main__":
    anyio.run(main)
