"""The command-line face: `warmkernel mcp` serves the tools over stdio."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from warmkernel import __version__
from warmkernel.config import Settings
from warmkernel.errors import WarmkernelError
from warmkernel.mcp_server import serve_stdio
from warmkernel.session import Session
from warmkernel.workspace import CONFIG_ENV, Workspace, resolve_workspace

EXAMPLES = """\
examples:
  warmkernel mcp                          serve the tools over stdio (what MCP hosts launch)
  warmkernel mcp --python .venv/bin/python
                                          run the kernel in another environment
  warmkernel mcp --result-mode structured add structuredContent to every result
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="warmkernel",
        description="A persistent, observable IPython kernel for AI coding agents, over MCP.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"warmkernel {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    mcp = verbs.add_parser(
        "mcp",
        help="serve the MCP tools over stdio",
        description=(
            "Serve the MCP tools over stdin/stdout for an MCP host. The workspace is the current "
            f"directory, or what the trusted resolver named by {CONFIG_ENV} (an absolute path) returns. "
            "The kernel starts at once, in the background."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    defaults = Settings()
    mcp.add_argument(
        "--python",
        default=defaults.python,
        metavar="PATH",
        help="interpreter that runs the kernel; it needs ipykernel",
    )
    mcp.add_argument(
        "--result-mode",
        choices=("content", "structured"),
        default=defaults.result_mode,
        help="structured adds structuredContent and output schemas; the text is the same",
    )
    mcp.add_argument(
        "--wait",
        type=float,
        default=defaults.default_wait_s,
        metavar="SECONDS",
        help="how long run_python waits for a cell before replying that it still runs",
    )
    mcp.add_argument(
        "--inline-lines",
        type=int,
        default=defaults.inline_max_lines,
        metavar="N",
        help="lines of a finished cell shown inline before head and tail are used",
    )
    mcp.add_argument(
        "--inline-chars",
        type=int,
        default=defaults.inline_max_chars,
        metavar="N",
        help="characters of a finished cell shown inline before head and tail are used",
    )
    mcp.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="server log level (the log goes to stderr)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="warmkernel %(levelname)s %(message)s"
    )
    settings = Settings(
        python=args.python,
        result_mode=args.result_mode,
        default_wait_s=args.wait,
        inline_max_lines=args.inline_lines,
        inline_max_chars=args.inline_chars,
    )
    try:
        workspace = resolve_workspace(Path.cwd())
    except WarmkernelError as exc:
        print(f"warmkernel: {exc}", file=sys.stderr)
        return 2
    anyio.run(_serve_until_signalled, settings, workspace)
    return 0


async def _serve_until_signalled(settings: Settings, workspace: Workspace) -> None:
    """Serve stdio until the host closes stdin or a signal asks us to stop, then clean up."""
    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        async with Session.open(settings, workspace) as session:
            await serve_stdio(session)
        tg.cancel_scope.cancel()
