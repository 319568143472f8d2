"""Client verbs: each one MCP tool call on the live daemon of the current workspace (started
when there is none), printing the text a model reads, or `--json` facts.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warmkernel.cli.exits import exit_status
from warmkernel.cli.options import live_daemon, workspace_daemon
from warmkernel.client import open_daemon
from warmkernel.errors import WarmkernelError
from warmkernel.execution.directive import PREFIX, parse_directives
from warmkernel.tool_params import Param, Tool, Verb
from warmkernel.tool_specs import NOTEBOOK

RUN = "run_python"


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


RUN_DIRECTIVES = (
    _Directive(
        "--timeout",
        "--wait",
        "wait_seconds",
        "wait up to S seconds in all (default: the daemon's --wait, 10 s unless it was started with another)",
    ),
    _Directive(
        "--silence",
        "--silence",
        "silence_seconds",
        "also return once the cell has printed nothing for S seconds",
    ),
)


def offered(tool: Tool, verb: Verb) -> list[Param]:
    """The tool's parameters a verb lets the caller set."""
    return [param for param in tool.params if param.name not in verb.fixed]


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
        for directive in RUN_DIRECTIVES
        if getattr(args, directive.dest) is not None and getattr(own, directive.field) is None
    ]
    return "\n".join([source.rstrip("\n"), *lines]) if lines else source


def _tool_call(args: argparse.Namespace) -> tuple[Tool, dict[str, Any]]:
    """The tool a client verb stands for, and its checked arguments."""
    tool: Tool = args.tool
    verb: Verb = args.tool_verb
    arguments = dict(verb.fixed)
    for param in offered(tool, verb):
        value = getattr(args, param.name)
        if value is None and param is NOTEBOOK:
            value = getattr(args, "notebook", None)  # the configured notebook
        arguments[param.name] = str(Path.cwd() / value) if param.cli.from_cwd and value is not None else value
    if tool.name == RUN:
        arguments["freeform"] = _with_directives(_source(args), args)
    tool.parse(arguments)  # a bad value is refused here, before a daemon is found or started
    return tool, arguments


def run_tool_verb(args: argparse.Namespace) -> int:
    """Call the verb's tool on the workspace's daemon (started if there is none) and print the reply."""
    tool, arguments = _tool_call(args)
    if tool.starts_daemon and args.daemon is None:
        descriptor, _ = workspace_daemon(args)
    else:
        descriptor = live_daemon(args.daemon)
    live_line = tool.name == RUN and sys.stdout.isatty() and not args.json
    with open_daemon(descriptor) as client, _elapsed_line(enabled=live_line):
        outcome = client.call_tool(tool.name, arguments)
    attach = tool.name == "python_status" and outcome.error_code is None
    if args.json:
        where = {"jupyter_url": descriptor.jupyter_url, "jupyter_lab_url": descriptor.jupyter_lab_url}
        print(json.dumps(outcome.data | (where if attach else {}), indent=2))
    elif outcome.error_code is not None:
        print(f"warmkernel: {outcome.text}", file=sys.stderr)
    else:
        print("\n".join([outcome.text, *(descriptor.jupyter_lines() if attach else [])]))
    return exit_status(args.tool_verb.name, outcome)


@contextmanager
def _elapsed_line(*, enabled: bool) -> Iterator[None]:
    """On a terminal, a live `running 3.2 s` line on stderr while a cell is waited for."""
    if not enabled:
        yield
        return
    start = time.monotonic()
    done = threading.Event()

    def redraw() -> None:
        while not done.wait(0.1):
            sys.stderr.write(f"\r\x1b[Krunning {time.monotonic() - start:.1f} s")
            sys.stderr.flush()

    drawer = threading.Thread(target=redraw, daemon=True)
    drawer.start()
    try:
        yield
    finally:
        done.set()
        drawer.join()
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
