"""The command-line face: serving verbs (`mcp`, `serve`, `start`, `stop`) and client verbs.

Client verbs are MCP tool calls on the live daemon of the current workspace (started as a
daemon when there is none), and print the same text a model reads, or `--json` facts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from warmkernel import __version__
from warmkernel.client import ToolOutcome, call_tool, connect, locate
from warmkernel.config import Settings, load_summarizers
from warmkernel.discovery import Descriptor, find_daemon, live_descriptors, start_daemon, stop_daemon
from warmkernel.errors import CALLER_MISTAKES, WarmkernelError
from warmkernel.execution.directive import parse_directives
from warmkernel.http_transport import Endpoint, check_bind, new_token
from warmkernel.jupyter_host import check_available
from warmkernel.process import Face, run_server
from warmkernel.scaffold import SNIPPETS, init_project
from warmkernel.workspace import CONFIG_ENV, Workspace, resolve_workspace

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_RUNNING, EXIT_STOPPED = 0, 1, 2, 3, 4
_STATE_EXIT = {
    "completed": EXIT_OK,
    "error": EXIT_ERROR,
    "running": EXIT_RUNNING,
    "awaiting_input": EXIT_RUNNING,
}

EXAMPLES = """\
examples:
  warmkernel run "x = 41; x + 1"        run a cell in this workspace's kernel
  warmkernel run -f analysis.py         run a file as one cell
  warmkernel wait 3 --timeout 120       wait for execution 3
  warmkernel read 3 --lines -20:        the last 20 lines of execution 3
  warmkernel search "Traceback" -A 5    search the latest execution
  warmkernel nb status analysis.ipynb   which notebook cells are stale, and why
  warmkernel nb run analysis.ipynb      re-run exactly the stale cells
  warmkernel start analysis.ipynb       a daemon whose kernel has run the notebook's cells
  warmkernel start --serve              the same, on a Jupyter Server JupyterLab or VS Code attaches to
  warmkernel inspect df                 a typed summary of df, without running a cell
  warmkernel mcp                        serve the tools over stdio (what MCP hosts launch)
  warmkernel serve --port 8801          serve the tools over Streamable HTTP
"""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Show defaults and keep the examples' line breaks."""


@dataclass(frozen=True)
class _KernelOption:
    """A command-line flag that sets one `Settings` field of a server."""

    flag: str
    field: str
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None


def _count(text: str) -> int:
    """A whole number of things, 0 or more (argparse exits with status 2 otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


_KERNEL_OPTIONS = (
    _KernelOption("--python", "python", "interpreter that runs the kernel; it needs ipykernel", "PATH"),
    _KernelOption(
        "--result-mode",
        "result_mode",
        "structured adds structuredContent and output schemas; the text is the same",
        choices=("content", "structured"),
    ),
    _KernelOption(
        "--wait",
        "default_wait_s",
        "how long run_python waits for a cell before replying that it still runs",
        "SECONDS",
        float,
    ),
    _KernelOption(
        "--inline-lines",
        "inline_max_lines",
        "lines of a finished cell shown inline before head and tail",
        "N",
        int,
    ),
    _KernelOption(
        "--inline-chars",
        "inline_max_chars",
        "characters of a finished cell shown inline before head and tail",
        "N",
        int,
    ),
    _KernelOption(
        "--max-output-bytes",
        "max_output_bytes",
        "cap on spilled output; past it the oldest finished executions' output is dropped (and says so)",
        "BYTES",
        int,
    ),
    _KernelOption(
        "--spill-threshold-bytes",
        "spill_threshold_bytes",
        "an execution's output moves from memory to private files past this size",
        "BYTES",
        int,
    ),
    _KernelOption(
        "--spare-kernels",
        "spare_kernels",
        "fresh kernels kept started in the background, so that a reset swaps one in at once "
        "(a spare started before a package was installed is replaced)",
        "N",
        _count,
    ),
    _KernelOption(
        "--jupyter-url",
        "jupyter_url",
        "create the kernel on this Jupyter Server, Kernel Gateway or Enterprise Gateway instead of locally",
        "URL",
    ),
    _KernelOption("--kernel-name", "kernel_name", "kernelspec the Jupyter server starts", "NAME"),
    _KernelOption(
        "--max-images", "max_images_per_reply", "images one reply shows; the rest are named", "N", int
    ),
    _KernelOption("--max-image-bytes", "max_image_bytes", "larger images are named, not shown", "BYTES", int),
)
_JUPYTER_TOKEN_VARIABLE = "WARMKERNEL_JUPYTER_TOKEN"


def _add_kernel_options(parser: argparse.ArgumentParser) -> None:
    defaults = Settings()
    group = parser.add_argument_group("kernel and replies")
    for option in _KERNEL_OPTIONS:
        group.add_argument(
            option.flag,
            dest=option.field,
            default=getattr(defaults, option.field),
            type=option.type,
            metavar=option.metavar,
            choices=option.choices,
            help=option.help,
        )
    group.add_argument(
        "--no-save-outputs",
        dest="save_outputs",
        action="store_false",
        help="do not write the outputs of notebook cells back into the .ipynb",
    )
    group.add_argument(
        "--jupyter-token",
        metavar="TOKEN",
        default=argparse.SUPPRESS,
        help=f"token of --jupyter-url (default: ${_JUPYTER_TOKEN_VARIABLE}, which other users cannot "
        "read in the process list, unlike a flag)",
    )
    group.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="server log level (the log goes to stderr)",
    )


def _kernel_flags(args: argparse.Namespace) -> list[str]:
    """The kernel options given on this command line, to pass on to a daemon (the token goes in
    its environment: see `_kernel_environment`)."""
    flags = [
        item
        for option in _KERNEL_OPTIONS
        if getattr(args, option.field) is not None
        for item in (option.flag, str(getattr(args, option.field)))
    ]
    saving = [] if args.save_outputs else ["--no-save-outputs"]
    return [*flags, *saving, "--log-level", args.log_level]


def _jupyter_token(args: argparse.Namespace) -> str | None:
    return getattr(args, "jupyter_token", None) or os.environ.get(_JUPYTER_TOKEN_VARIABLE) or None


def _kernel_environment(args: argparse.Namespace) -> dict[str, str]:
    """What a daemon inherits beside the flags: the Jupyter token, kept out of its argv."""
    token = _jupyter_token(args)
    return {_JUPYTER_TOKEN_VARIABLE: token} if token else {}


def _settings(args: argparse.Namespace) -> Settings:
    fields = {option.field: getattr(args, option.field) for option in _KERNEL_OPTIONS}
    return Settings(save_outputs=args.save_outputs, jupyter_token=_jupyter_token(args), **fields)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="warmkernel",
        description="A persistent, observable IPython kernel for AI coding agents, over MCP, and the same "
        "kernel from the command line.",
        epilog=EXAMPLES,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"warmkernel {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    client = argparse.ArgumentParser(add_help=False)
    client.add_argument(
        "--daemon",
        "--session",
        dest="daemon",
        metavar="ID",
        help="the daemon to use (see `warmkernel sessions`)",
    )
    client.add_argument("--json", action="store_true", help="print the structured result as JSON")

    def verb(name: str, help: str, description: str = "", *, parents: bool = True) -> argparse.ArgumentParser:
        return verbs.add_parser(
            name,
            help=help,
            description=description or help,
            parents=[client] if parents else [],
            formatter_class=_HelpFormatter,
        )

    run = verb(
        "run",
        "run a cell and wait for it",
        "Run CODE (or a file, or stdin with -) as one cell in this workspace's kernel. Exit status: 0 "
        "completed, 1 error, 2 usage, 3 still running, 4 interrupted/killed/died.",
    )
    run.add_argument("code", nargs="?", metavar="CODE", help="the cell's source; - reads it from stdin")
    run.add_argument("-f", "--file", type=Path, help="read the cell from FILE")
    run.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="wait up to S seconds in all (default: the server's wait, 10 s)",
    )

    wait = verb("wait", "wait for an execution to finish")
    wait.add_argument(
        "execution", nargs="?", type=int, metavar="N", help="default: the running or latest one"
    )
    wait.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds to wait")

    answer = verb("input", "answer the prompt of a cell waiting in input() or getpass()")
    answer.add_argument("text", metavar="TEXT", help="the answer, without a trailing newline")
    answer.add_argument(
        "--execution", type=int, metavar="N", help="the waiting execution (default: the running one)"
    )
    verb("status", "the workspace, interpreter and kernel of the daemon")
    show = verb("show", "an execution's reply, as the model reads it")
    show.add_argument(
        "execution", nargs="?", type=int, metavar="N", help="default: the running or latest one"
    )

    read = verb("read", "read an execution's output by line range")
    read.add_argument(
        "execution", nargs="?", type=int, metavar="N", help="default: the running or latest one"
    )
    read.add_argument(
        "--stream",
        default="combined",
        choices=("combined", "stdout", "stderr", "result", "traceback"),
        help="which stream",
    )
    read.add_argument("--lines", metavar="A:B", help='1-based, inclusive: "20:40", ":10", "-10:"')
    read.add_argument("--max-chars", type=int, metavar="K", help="clip each line to K characters")

    search = verb("search", "search an execution's output")
    search.add_argument("query", metavar="QUERY")
    search.add_argument(
        "execution", nargs="?", type=int, metavar="N", help="default: the running or latest one"
    )
    mode = search.add_mutually_exclusive_group()
    mode.add_argument(
        "--regex", dest="query_mode", action="store_const", const="regex", help="QUERY is a regex"
    )
    mode.add_argument(
        "--literal", dest="query_mode", action="store_const", const="literal", help="QUERY is plain text"
    )
    search.add_argument("-B", "--before", type=int, default=0, metavar="K", help="context lines before")
    search.add_argument("-A", "--after", type=int, default=0, metavar="K", help="context lines after")
    search.add_argument("-i", "--ignore-case", action="store_true", help="match case-insensitively")
    search.add_argument(
        "--stream",
        default="combined",
        choices=("combined", "stdout", "stderr", "result", "traceback"),
        help="which stream",
    )
    search.add_argument("--max-matches", type=int, default=200, metavar="N", help="matching lines to show")

    variables = verb("vars", "the user's variables in the live namespace, without running a cell")
    variables.add_argument("--modules", action="store_true", help="also list imported modules")
    inspect = verb("inspect", "a typed summary of one variable, without running a cell")
    inspect.add_argument("name", metavar="NAME", help='a name or dotted attribute path, e.g. "df.columns"')

    notebook = verb(
        "nb",
        "notebook mode: which cells are stale, re-running them, file watches",
        "Notebook mode on this workspace's kernel: NB is a .ipynb file. A kernel serves one notebook.",
        parents=False,
    )
    nb_verbs = notebook.add_subparsers(dest="nb_verb", metavar="NB_VERB", required=True)

    def nb_verb(name: str, help: str) -> argparse.ArgumentParser:
        parser = nb_verbs.add_parser(
            name, help=help, description=help, parents=[client], formatter_class=_HelpFormatter
        )
        parser.add_argument("notebook", metavar="NB", help="the .ipynb file")
        return parser

    nb_verb("status", "every code cell's state (fresh, stale, never_run, running), the reasons, and the plan")
    nb_run = nb_verb("run", "run the stale cells (or --cells) in notebook order; stops at the first error")
    nb_run.add_argument(
        "--cells", default="stale", metavar="stale|all|ID,...", help="which cells: ids or 0-based indices"
    )
    nb_run.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds to wait for the run"
    )
    nb_watch = nb_verb("watch", "make a cell depend on a file whose reads the kernel cannot see")
    nb_watch.add_argument("file", metavar="FILE")
    nb_watch.add_argument("--cell", required=True, metavar="ID", help="the cell's id or 0-based index")

    history = verb("history", "executions, newest first")
    history.add_argument("--limit", type=int, default=20, metavar="N", help="how many")
    verb("interrupt", "interrupt the running cell (SIGINT)")
    verb("reset", "kill the kernel and everything it started; start a fresh one")
    verb("sessions", "list the live daemons of this user")

    start = verb(
        "start",
        "start a daemon for this workspace (if none is live)",
        "Start a daemon for this workspace (if none is live). With NB, bind its kernel to that "
        "notebook and run every cell that is not fresh once, in order, continuing past errors. With "
        "--serve, the kernel runs on a Jupyter Server of the daemon's own (loopback, with a token), "
        "and the URL to open in JupyterLab or VS Code is printed; `stop` ends both.",
    )
    start.add_argument("notebook", nargs="?", metavar="NB", help="a .ipynb file to warm the kernel with")
    start.add_argument(
        "--serve",
        action="store_true",
        help="run the kernel on a Jupyter Server this daemon owns, for JupyterLab or VS Code to attach "
        "to (in NB's server session when NB is given); needs warmkernel[serve]",
    )
    start.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds to wait for NB's run"
    )
    _add_kernel_options(start)
    verb("stop", "stop the daemon (or serve process) of this workspace")

    mcp = verb(
        "mcp",
        "serve the MCP tools over stdio (what MCP hosts launch)",
        "Serve the MCP tools over stdin/stdout for an MCP host. The workspace is the current directory, "
        f"or what the trusted resolver named by {CONFIG_ENV} (an absolute path) returns. The kernel "
        "starts at once, in the background.",
        parents=False,
    )
    _add_kernel_options(mcp)

    serve = verb(
        "serve",
        "serve the MCP tools over Streamable HTTP",
        "Serve the MCP tools over Streamable HTTP. Every request needs 'Authorization: Bearer TOKEN'; "
        "the token is --token, else $WARMKERNEL_TOKEN, else generated and written to the daemon "
        "descriptor (see `warmkernel sessions --json`).",
        parents=False,
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to bind; beyond loopback needs --allowed-host"
    )
    serve.add_argument("--port", type=int, default=8801, help="port to bind; 0 picks a free one")
    serve.add_argument("--path", default="/mcp", help="URL path of the MCP endpoint")
    serve.add_argument(
        "--token", help="bearer token to require (default: $WARMKERNEL_TOKEN, else a generated one)"
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a Host header to accept (repeatable); required to bind beyond loopback",
    )
    serve.add_argument("--detached", action="store_true", help=argparse.SUPPRESS)
    serve.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--jupyter-server", action="store_true", help=argparse.SUPPRESS)
    serve.add_argument("--jupyter-notebook", type=Path, help=argparse.SUPPRESS)
    _add_kernel_options(serve)

    init = verb(
        "init", "set this project up for agents (.mcp.json, AGENTS.md, a Claude skill)", parents=False
    )
    init.add_argument("--json", action="store_true", help="print what changed as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.verb in ("mcp", "serve"):
            return _serve(args)
        handler = _LOCAL_VERBS.get(args.verb)
        if handler is not None:
            return handler(args)
        return anyio.run(_client_verb, args)
    except WarmkernelError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"error": {"code": exc.code, "message": exc.message}}, indent=2))
        else:
            print(f"warmkernel: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.code in CALLER_MISTAKES else EXIT_ERROR
    except KeyboardInterrupt:
        return 130


# -- serving --------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="warmkernel %(levelname)s %(message)s"
    )
    workspace = resolve_workspace(Path.cwd())
    if args.verb == "mcp":
        face = Face("mcp")
    elif args.detached:
        face = Face("daemon", ready_fd=args.ready_fd)
    else:
        check_bind(args.host, args.allowed_host)
        token = args.token or os.environ.get("WARMKERNEL_TOKEN") or new_token()
        face = Face("serve", Endpoint(args.host, args.port, args.path, token, tuple(args.allowed_host)))
    if getattr(args, "jupyter_server", False):
        face = replace(face, jupyter=True, jupyter_notebook=args.jupyter_notebook)
    settings = replace(_settings(args), summarizers=load_summarizers(workspace.path))
    anyio.run(_serve_until_signalled, settings, workspace, face)
    return EXIT_OK


async def _serve_until_signalled(settings: Settings, workspace: Workspace, face: Face) -> None:
    """Serve until stdin closes (stdio) or a signal asks us to stop; clean up either way."""
    failure: WarmkernelError | None = None
    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        try:
            await run_server(settings, workspace, face)
        except WarmkernelError as exc:
            failure = exc  # raised as itself below, not inside the task group's ExceptionGroup
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


# -- verbs that need no daemon ----------------------------------------------------------------


def _sessions(args: argparse.Namespace) -> int:
    daemons = live_descriptors()
    if args.json:
        print(json.dumps([vars(d) for d in daemons], indent=2))
    elif not daemons:
        print("No live daemons.")
    else:
        for descriptor in daemons:
            print(descriptor.describe())
    return EXIT_OK


def _start(args: argparse.Namespace) -> int:
    descriptor = find_daemon(Path.cwd(), args.daemon)
    started = descriptor is None
    serving = _serve_flags(args, descriptor) if args.serve else []
    if descriptor is None:
        descriptor = start_daemon(Path.cwd(), [*_kernel_flags(args), *serving], _kernel_environment(args))
    outcome = anyio.run(_warm_start, args, descriptor) if args.notebook else None
    if args.json:
        run = {"run": outcome.data} if outcome is not None else {}
        print(json.dumps(vars(descriptor) | {"started": started} | run, indent=2))
    else:
        print(("started " if started else "already running: ") + descriptor.describe())
        for line in _jupyter_lines(descriptor):
            print(line)
        if outcome is not None:
            print(outcome.text, file=sys.stderr if outcome.error_code else sys.stdout)
    return _exit_status("nb run", outcome) if outcome is not None else EXIT_OK


def _serve_flags(args: argparse.Namespace, running: Descriptor | None) -> list[str]:
    """What tells a new daemon to own a Jupyter Server (`start --serve`); refused when that cannot be."""
    check_available()
    if getattr(args, "jupyter_url", None) is not None:
        raise WarmkernelError(
            "invalid_arguments", "--serve runs the kernel on a Jupyter Server of its own; drop --jupyter-url"
        )
    if running is not None and running.jupyter_url is None:
        raise WarmkernelError(
            "daemon_error",
            f"daemon {running.id} already serves {running.workspace} without a Jupyter Server; "
            "`warmkernel stop` it, then `warmkernel start --serve` again",
        )
    if args.notebook is None:
        return ["--jupyter-server"]
    if not Path(args.notebook).is_file():
        raise WarmkernelError("notebook_not_found", f"{_notebook_path(args.notebook)} does not exist")
    return ["--jupyter-server", "--jupyter-notebook", _notebook_path(args.notebook)]


def _jupyter_lines(descriptor: Descriptor) -> list[str]:
    """Where a person attaches to the daemon's kernel, when it runs on a Jupyter Server it owns."""
    if descriptor.jupyter_url is None:
        return []
    lab = descriptor.jupyter_lab_url or "not installed here (`pip install jupyterlab`, then start again)"
    return [
        f"Jupyter Server: {descriptor.jupyter_url}  (VS Code: Connect to existing Jupyter Server)",
        f"JupyterLab:     {lab}",
    ]


async def _warm_start(args: argparse.Namespace, descriptor: Descriptor) -> ToolOutcome:
    """Run the notebook's cells that are not fresh (all of them in a new daemon), past errors."""
    arguments = {
        "path": _notebook_path(args.notebook),
        "cells": "stale",
        "stop_on_error": False,
        "timeout_seconds": args.timeout,
    }
    async with connect(descriptor.url, descriptor.token) as client:
        return await call_tool(client, "run_notebook_cells", arguments)


def _stop(args: argparse.Namespace) -> int:
    descriptor = find_daemon(Path.cwd(), args.daemon)
    if descriptor is None:
        raise WarmkernelError("daemon_not_found", f"no live daemon serves {Path.cwd()}")
    stop_daemon(descriptor)
    print(json.dumps({"stopped": descriptor.id}) if args.json else f"stopped {descriptor.describe()}")
    return EXIT_OK


def _init(args: argparse.Namespace) -> int:
    changes = init_project(Path.cwd())
    if args.json:
        print(json.dumps({"changes": changes, "snippets": SNIPPETS}, indent=2))
    else:
        print("\n".join([*changes, "", SNIPPETS]))
    return EXIT_OK


_LOCAL_VERBS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sessions": _sessions,
    "start": _start,
    "stop": _stop,
    "init": _init,
}


# -- verbs that are tool calls --------------------------------------------------------------------


def _source(args: argparse.Namespace) -> str:
    if args.file is not None and args.code is not None:
        raise WarmkernelError("invalid_arguments", "give CODE or -f FILE, not both")
    if args.file is not None:
        try:
            return args.file.read_text()
        except OSError as exc:
            raise WarmkernelError("invalid_arguments", f"cannot read {args.file}: {exc.strerror}") from exc
    if args.code == "-":
        return sys.stdin.read()
    if args.code is None:
        raise WarmkernelError(
            "invalid_arguments", 'give the cell: warmkernel run "CODE", -f FILE, or - for stdin'
        )
    return args.code


def _with_wait(source: str, timeout: float | None) -> str:
    """`run --timeout S` is the cell's `--wait` directive, unless the cell has its own."""
    try:
        if timeout is None or parse_directives(source).wait_seconds is not None:
            return source
    except WarmkernelError:
        return source  # the server reports the bad directive
    return f"{source.rstrip(chr(10))}\n# warmkernel: --wait {timeout:g}"


def _tool_call(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The tool and arguments a client verb stands for."""
    match args.verb:
        case "run":
            return "run_python", {"freeform": _with_wait(_source(args), args.timeout)}
        case "wait":
            return "wait_python", {"execution": args.execution, "timeout_seconds": args.timeout}
        case "status":
            return "python_status", {}
        case "show":
            return "wait_python", {"execution": args.execution, "timeout_seconds": 0}
        case "read":
            return "read_python_output", {
                "execution": args.execution,
                "stream": args.stream,
                "line_range": args.lines,
                "max_chars": args.max_chars,
            }
        case "search":
            return "search_python_output", {
                "query": args.query,
                "execution": args.execution,
                "stream": args.stream,
                "query_mode": args.query_mode or "auto",
                "context_before": args.before,
                "context_after": args.after,
                "ignore_case": args.ignore_case,
                "max_matches": args.max_matches,
            }
        case "history":
            return "list_python_executions", {"limit": args.limit}
        case "vars":
            return "list_python_variables", {"include_modules": args.modules}
        case "inspect":
            return "inspect_python_variable", {"name": args.name}
        case "nb":
            return _notebook_call(args)
        case "input":
            return "send_python_input", {"text": args.text, "execution": args.execution}
        case "interrupt":
            return "interrupt_python", {}
        case "reset":
            return "reset_python", {}
    raise AssertionError(args.verb)


def _notebook_call(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    path = _notebook_path(args.notebook)
    match args.nb_verb:
        case "status":
            return "notebook_status", {"path": path}
        case "run":
            cells = args.cells if args.cells in ("stale", "all") else args.cells.split(",")
            return "run_notebook_cells", {"path": path, "cells": cells, "timeout_seconds": args.timeout}
        case "watch":
            return "watch_notebook_file", {
                "path": path,
                "file": str(Path.cwd() / args.file),
                "cell": args.cell,
            }
    raise AssertionError(args.nb_verb)


def _notebook_path(given: str) -> str:
    """An absolute path: the tools resolve relative paths against the workspace, not this directory."""
    return str(Path.cwd() / given)


async def _client_verb(args: argparse.Namespace) -> int:
    tool, arguments = _tool_call(args)
    descriptor = locate(Path.cwd(), args.daemon)
    live_line = tool == "run_python" and sys.stdout.isatty() and not args.json
    async with connect(descriptor.url, descriptor.token) as client, _elapsed_line(enabled=live_line):
        outcome = await call_tool(client, tool, arguments)
    attach = args.verb == "status" and outcome.error_code is None
    if args.json:
        where = {"jupyter_url": descriptor.jupyter_url, "jupyter_lab_url": descriptor.jupyter_lab_url}
        print(json.dumps(outcome.data | (where if attach else {}), indent=2))
    elif outcome.error_code is not None:
        print(f"warmkernel: {outcome.text}", file=sys.stderr)
    else:
        print("\n".join([outcome.text, *(_jupyter_lines(descriptor) if attach else [])]))
    return _exit_status(f"nb {args.nb_verb}" if args.verb == "nb" else args.verb, outcome)


def _exit_status(verb: str, outcome: ToolOutcome) -> int:
    if outcome.error_code is not None:
        if outcome.error_code == "busy":
            return EXIT_RUNNING
        return EXIT_USAGE if outcome.error_code in CALLER_MISTAKES else EXIT_ERROR
    if verb not in ("run", "input", "wait", "show", "nb run"):
        return EXIT_OK
    return _STATE_EXIT.get(outcome.data.get("state", ""), EXIT_STOPPED)


@asynccontextmanager
async def _elapsed_line(*, enabled: bool) -> AsyncIterator[None]:
    """On a terminal, a live `running 3.2 s` line on stderr while a cell is waited for."""
    if not enabled:
        yield
        return
    start = time.monotonic()

    async def redraw() -> None:
        while True:
            await anyio.sleep(0.1)
            sys.stderr.write(f"\r\x1b[Krunning {time.monotonic() - start:.1f} s")
            sys.stderr.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(redraw)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
