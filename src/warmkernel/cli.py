"""The command-line face: serving verbs (`mcp`, `serve`, `start`, `stop`) and client verbs.

Client verbs are MCP tool calls on the live daemon of the current workspace (started as a
daemon when there is none), and print the same text a model reads, or `--json` facts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from warmkernel import __version__
from warmkernel.client import ToolOutcome, locate, open_daemon
from warmkernel.config import Settings, load_summarizers
from warmkernel.discovery import Descriptor, find_daemon, live_descriptors, start_daemon, stop_daemon
from warmkernel.errors import CALLER_MISTAKES, WarmkernelError
from warmkernel.execution.directive import PREFIX, parse_directives
from warmkernel.scaffold import SNIPPETS, init_project
from warmkernel.tool_specs import TOOLS, Cells, Choice, Flag, Integer, Kind, Param, Seconds, Text, Tool, Verb
from warmkernel.workspace import CONFIG_ENV, Workspace, resolve_workspace

if TYPE_CHECKING:
    from warmkernel.process import Face

# Server-side modules (the process, the session, the kernel, uvicorn) are imported inside the
# serving verbs only: a client verb is a short-lived process that should load none of them.

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_RUNNING, EXIT_STOPPED = 0, 1, 2, 3, 4
_STATE_EXIT = {
    "completed": EXIT_OK,
    "error": EXIT_ERROR,
    "running": EXIT_RUNNING,
    "awaiting_input": EXIT_RUNNING,
}

_LOCAL_EXAMPLES = {
    "sessions": "warmkernel sessions                     the live daemons of this user",
    "start": "warmkernel start analysis.ipynb        a daemon whose kernel has run the notebook's cells\n"
    "warmkernel start --serve               the same, on a Jupyter Server JupyterLab or VS Code attaches to",
    "stop": "warmkernel stop                        stop this workspace's daemon",
    "mcp": "warmkernel mcp                         serve the tools over stdio (what MCP hosts launch)",
    "serve": "warmkernel serve --port 8801           serve the tools over Streamable HTTP",
    "init": "warmkernel init                        set the project up for agents",
}
_EXAMPLE_WIDTH = 36
_NB_HELP = "notebook mode: which cells are stale, re-running them, file watches"
_NB_DESCRIPTION = (
    "Notebook mode on this workspace's kernel: NB is a .ipynb file. A kernel serves one notebook."
)
_RUN = "run_python"
_STATE_VERBS = frozenset({"run", "input", "wait", "show", "nb run"})
"""Verbs whose exit status follows the execution's state."""
_EXIT_STATUSES = "exit status: 0 completed, 1 error, 2 usage, 3 still running, 4 interrupted/killed/died"


@dataclass(frozen=True)
class _Directive:
    """A `run` flag that becomes a directive line of the cell, unless the cell sets its own."""

    flag: str
    directive: str
    field: str
    """The `Directives` field the directive sets."""
    help: str

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--")


_RUN_DIRECTIVES = (
    _Directive(
        "--timeout",
        "--wait",
        "wait_seconds",
        "wait up to S seconds in all (default: the server's wait, 10 s)",
    ),
    _Directive(
        "--silence",
        "--silence",
        "silence_seconds",
        "also return once the cell has printed nothing for S seconds",
    ),
)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Show the defaults that mean something (not None, not a flag's on/off) and keep line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.nargs == 0:  # a flag's default is its absence
            return action.help
        return super()._get_help_string(action)


def _example(text: str, heading: str = "example") -> str:
    """Example lines, `command  what it does`, the explanations in one column (a long command
    puts its explanation on the next line)."""
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines()]
    width = min(max(len(row[0]) for row in rows), _EXAMPLE_WIDTH) + 2
    lines = [f"{heading}:"]
    for command, *what in rows:
        if len(command) + 2 > width and what:
            lines += [f"  {command}", f"  {'':<{width}}{what[0]}"]
        else:
            lines.append(f"  {command:<{width}}{''.join(what)}".rstrip())
    return "\n".join(lines)


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
    examples = [verb.example for tool in TOOLS for verb in tool.verbs] + list(_LOCAL_EXAMPLES.values())
    parser = argparse.ArgumentParser(
        prog="warmkernel",
        description="A persistent, observable IPython kernel for AI coding agents, over MCP, and the same "
        "kernel from the command line.",
        epilog=_example("\n".join(examples), "examples"),
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
            epilog=_example(_LOCAL_EXAMPLES[name]),
            parents=[client] if parents else [],
            formatter_class=_HelpFormatter,
        )

    nb_verbs: argparse._SubParsersAction[argparse.ArgumentParser] | None = None
    for tool in TOOLS:
        for tool_verb in tool.verbs:
            if tool_verb.words[0] != "nb":
                _add_tool_verb(verbs, tool, tool_verb, client)
                continue
            if nb_verbs is None:
                notebook = verbs.add_parser(
                    "nb",
                    help=_NB_HELP,
                    description=_NB_DESCRIPTION,
                    epilog=_example(
                        "\n".join(v.example for t in TOOLS for v in t.verbs if v.words[0] == "nb")
                    ),
                    formatter_class=_HelpFormatter,
                )
                nb_verbs = notebook.add_subparsers(dest="nb_verb", metavar="NB_VERB", required=True)
            _add_tool_verb(nb_verbs, tool, tool_verb, client)

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


def _add_tool_verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    tool: Tool,
    verb: Verb,
    client: argparse.ArgumentParser,
) -> None:
    """A verb's parser, made from the declaration of the tool it calls."""
    notes = [f"{verb.help[0].upper()}{verb.help[1:]}.", f"Calls the MCP tool {tool.name}: {tool.description}"]
    if verb.name in _STATE_VERBS:
        notes.append(_EXIT_STATUSES)
    parser = verbs.add_parser(
        verb.words[-1],
        help=verb.help,
        description="\n\n".join(textwrap.fill(note, 100) for note in notes),
        epilog=_example(verb.example),
        parents=[client],
        formatter_class=_HelpFormatter,
    )
    parser.set_defaults(tool=tool, tool_verb=verb)
    for param in _offered(tool, verb):
        _add_param(parser, param, verb.defaults.get(param.name, param.default), optional=tool.name == _RUN)
    if tool.name == _RUN:
        parser.add_argument("-f", "--file", type=Path, help="read the cell from FILE (CODE - reads stdin)")
        for directive in _RUN_DIRECTIVES:
            parser.add_argument(directive.flag, type=float, metavar="S", help=directive.help)


def _offered(tool: Tool, verb: Verb) -> list[Param]:
    """The tool's parameters a verb lets the caller set."""
    return [param for param in tool.params if param.name not in verb.fixed]


def _add_param(parser: argparse.ArgumentParser, param: Param, default: Any, *, optional: bool) -> None:
    """One parameter as its spelling says; a positional the tool needs is optional only when told."""
    spelling = param.cli
    if spelling.consts:
        group = parser.add_mutually_exclusive_group()
        for flag, value, help in spelling.consts:
            group.add_argument(flag, dest=param.name, action="store_const", const=value, help=help)
        parser.set_defaults(**{param.name: default})
        return
    if isinstance(param.kind, Flag):
        action = "store_false" if default else "store_true"
        parser.add_argument(*spelling.flags, dest=param.name, action=action, help=param.description)
        return
    choices = param.kind.choices if isinstance(param.kind, Choice) else None
    value_of = _value_of(param.kind)
    if not spelling.flags:
        parser.add_argument(
            param.name,
            nargs="?" if optional or not param.required else None,
            default=None if param.required else default,
            type=value_of,
            choices=choices,
            metavar=spelling.metavar,
            help=param.description,
        )
        return
    parser.add_argument(
        *spelling.flags,
        dest=param.name,
        required=param.required,
        default=None if param.required else default,
        type=value_of,
        choices=choices,
        metavar=spelling.metavar,
        help=param.description,
    )


def _value_of(kind: Kind) -> Callable[[str], Any]:
    """What a command-line word means for a parameter of this kind (the tool checks the value)."""
    match kind:
        case Integer():
            return _whole_number
        case Seconds():
            return float
        case Cells():
            return lambda text: text if text in ("stale", "all") else text.split(",")
        case _:
            return str


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None


_DASH_VALUE_FLAGS = frozenset(
    flag
    for tool in TOOLS
    for param in tool.params
    if isinstance(param.kind, Text)
    for flag in param.cli.flags
)
"""Flags whose value may start with "-" (`--lines -20:`), which argparse would take for an option."""


def _attach_dash_values(argv: Sequence[str]) -> list[str]:
    """`--lines -20:` as `--lines=-20:`, so that argparse reads it as the flag's value."""
    words = list(argv)
    for i in range(len(words) - 1):
        if words[i] in _DASH_VALUE_FLAGS and words[i + 1].startswith("-") and words[i + 1] != "--":
            words[i : i + 2] = [f"{words[i]}={words[i + 1]}", ""]
    return [word for word in words if word != ""]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(_attach_dash_values(sys.argv[1:] if argv is None else argv))
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

    from warmkernel.http_transport import Endpoint, check_bind, new_token
    from warmkernel.process import Face

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
    from warmkernel.process import run_server

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
    from warmkernel.jupyter_host import check_available

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
    async with open_daemon(descriptor.url, descriptor.token) as client:
        return await client.call_tool("run_notebook_cells", arguments)


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
    if args.file is not None and args.freeform is not None:
        raise WarmkernelError("invalid_arguments", "give CODE or -f FILE, not both")
    if args.file is not None:
        try:
            return args.file.read_text()
        except OSError as exc:
            raise WarmkernelError("invalid_arguments", f"cannot read {args.file}: {exc.strerror}") from exc
    if args.freeform == "-":
        return sys.stdin.read()
    if args.freeform is None:
        raise WarmkernelError(
            "invalid_arguments", 'give the cell: warmkernel run "CODE", -f FILE, or - for stdin'
        )
    return args.freeform


def _with_directives(source: str, args: argparse.Namespace) -> str:
    """`run --timeout S --silence S` as the cell's directives, except those the cell sets itself."""
    try:
        own = parse_directives(source)
    except WarmkernelError:
        return source  # the server reports the bad directive
    lines = [
        f"{PREFIX} {directive.directive} {getattr(args, directive.dest):g}"
        for directive in _RUN_DIRECTIVES
        if getattr(args, directive.dest) is not None and getattr(own, directive.field) is None
    ]
    return "\n".join([source.rstrip("\n"), *lines]) if lines else source


def _tool_call(args: argparse.Namespace) -> tuple[Tool, dict[str, Any]]:
    """The tool a client verb stands for, and its checked arguments."""
    tool: Tool = args.tool
    verb: Verb = args.tool_verb
    arguments = dict(verb.fixed)
    for param in _offered(tool, verb):
        value = getattr(args, param.name)
        arguments[param.name] = str(Path.cwd() / value) if param.cli.from_cwd else value
    if tool.name == _RUN:
        arguments["freeform"] = _with_directives(_source(args), args)
    tool.parse(arguments)  # a bad value is refused here, before a daemon is found or started
    return tool, arguments


def _notebook_path(given: str) -> str:
    """An absolute path: the tools resolve relative paths against the workspace, not this directory."""
    return str(Path.cwd() / given)


async def _client_verb(args: argparse.Namespace) -> int:
    tool, arguments = _tool_call(args)
    descriptor = locate(Path.cwd(), args.daemon)
    live_line = tool.name == _RUN and sys.stdout.isatty() and not args.json
    async with open_daemon(descriptor.url, descriptor.token) as client, _elapsed_line(enabled=live_line):
        outcome = await client.call_tool(tool.name, arguments)
    attach = tool.name == "python_status" and outcome.error_code is None
    if args.json:
        where = {"jupyter_url": descriptor.jupyter_url, "jupyter_lab_url": descriptor.jupyter_lab_url}
        print(json.dumps(outcome.data | (where if attach else {}), indent=2))
    elif outcome.error_code is not None:
        print(f"warmkernel: {outcome.text}", file=sys.stderr)
    else:
        print("\n".join([outcome.text, *(_jupyter_lines(descriptor) if attach else [])]))
    return _exit_status(args.tool_verb.name, outcome)


def _exit_status(verb: str, outcome: ToolOutcome) -> int:
    if outcome.error_code is not None:
        if outcome.error_code == "busy":
            return EXIT_RUNNING
        return EXIT_USAGE if outcome.error_code in CALLER_MISTAKES else EXIT_ERROR
    if verb not in _STATE_VERBS:
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
