"""Verbs about daemons rather than tool calls: list, start and stop them, their console page, and `init`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from warmkernel.cli.completion import completion
from warmkernel.cli.config_verb import config
from warmkernel.cli.configured import workspace_of
from warmkernel.cli.exits import EXIT_ERROR, EXIT_OK, exit_status
from warmkernel.cli.options import chosen_daemon, state_dir_of, workspace_daemon
from warmkernel.cli.tool_verbs import run_tool_verb
from warmkernel.daemon.client import ToolOutcome, open_daemon, open_socket
from warmkernel.daemon.discovery import Descriptor, find_daemon, live_descriptors, stop_daemon
from warmkernel.errors import WarmkernelError
from warmkernel.tools.catalog import TOOLS_BY_NAME


def sessions(args: argparse.Namespace) -> int:
    """Every live daemon of this user (or the one --daemon names), with what it is doing."""
    daemons = live_descriptors() if args.daemon is None else [chosen_daemon(args)]
    rows = [_daemon_state(descriptor) for descriptor in daemons]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("No live daemons.")
    else:
        for row in rows:
            print(_describe(row))
    return EXIT_OK


def _daemon_state(descriptor: Descriptor) -> dict[str, Any]:
    """The descriptor, with the daemon's own status."""
    state: dict[str, Any] = {**vars(descriptor)}
    try:
        sock, status = open_socket(descriptor, "status")
        sock.close()
    except WarmkernelError as exc:
        return state | {"status_error": exc.message}
    return state | {key: value for key, value in status.items() if key not in ("ok", "version")}


def _describe(row: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["started_at"]))
    if "status_error" in row:
        return (
            f"{row['id']}  pid {row['pid']:<7} since {started}  {row['workspace']}  ({row['status_error']})"
        )
    kernel = row["kernel"]
    memory = row.get("memory_bytes", {})  # an older daemon does not send it
    parts = [part for part in ("daemon", "kernels") if memory.get(part) is not None]
    sizes = [f"{part} {memory[part] / 2**20:.0f} MiB" for part in parts]
    running = f", running In [{row['running']}]" if row.get("running") else ""
    others = [k["name"] for k in row.get("kernels", []) if k["name"] != "main" and k["state"] != "stopped"]
    more = f"; kernels {', '.join(others)} too" if others else ""
    pid = f", pid {kernel['pid']}" if kernel["pid"] is not None else ""  # none on a Jupyter server
    executions = f"{row['executions']} execution{'' if row['executions'] == 1 else 's'}"
    return (
        f"{row['id']}  pid {row['pid']:<7} since {started}  {row['workspace']}\n"
        f"    clients {row['clients']}, kernel {kernel['state']} (generation {kernel['generation']}{pid})"
        f"{running}, {executions}{more}, memory {', '.join(sizes) or 'unknown'}, idle {row['idle_s']:.0f} s"
    )


def start(args: argparse.Namespace) -> int:
    """Start the workspace's daemon if none is live; with NB (or a configured notebook), warm its
    kernel with the notebook."""
    args = argparse.Namespace(**vars(args) | {"notebook": args.warm_notebook or args.notebook})
    if args.notebook is not None and not Path(args.notebook).is_file():  # before a daemon starts for it
        raise WarmkernelError("notebook_not_found", f"{notebook_path(args.notebook)} does not exist")
    descriptor, started = workspace_daemon(args, _serve_flags(args) if args.serve else [])
    if args.serve and descriptor.jupyter_url is None:
        raise WarmkernelError(
            "daemon_error",
            f"daemon {descriptor.id} already serves {descriptor.workspace} without a Jupyter Server; "
            "`warmkernel stop` it, then `warmkernel start --serve` again",
        )
    outcome = _warm_start(args, descriptor) if args.notebook else None
    if args.json:
        run = {"run": outcome.data} if outcome is not None else {}
        print(json.dumps(vars(descriptor) | {"started": started} | run, indent=2))
    else:
        print(("started " if started else "already running: ") + descriptor.describe())
        for line in descriptor.jupyter_lines():
            print(line)
        if outcome is not None and outcome.error_code is not None:
            print(f"warmkernel: {outcome.text}", file=sys.stderr)
        elif outcome is not None:
            print(outcome.text)
    return exit_status("nb run", outcome) if outcome is not None else EXIT_OK


def _serve_flags(args: argparse.Namespace) -> list[str]:
    """What tells a new daemon to own a Jupyter Server (`start --serve`); refused when that cannot be."""
    from warmkernel.daemon.jupyter_host import check_available

    check_available()
    if getattr(args, "jupyter_url", None) is not None:
        raise WarmkernelError(
            "invalid_arguments", "--serve runs the kernel on a Jupyter Server of its own; drop --jupyter-url"
        )
    port = [] if args.server_port is None else ["--jupyter-port", str(args.server_port)]
    if args.notebook is None:
        return ["--jupyter-server", *port]
    return ["--jupyter-server", *port, "--jupyter-notebook", notebook_path(args.notebook)]


def _warm_start(args: argparse.Namespace, descriptor: Descriptor) -> ToolOutcome:
    """Run the notebook's cells that are not fresh (all of them in a new daemon), past errors."""
    arguments = {
        "path": notebook_path(args.notebook),
        "cells": "stale",
        "stop_on_error": False,
        "timeout_seconds": args.timeout,
        "kernel": args.kernel or ("main" if args.serve else None),  # an IDE attaches to main
    }
    with open_daemon(descriptor) as client:
        return client.call_tool("run_notebook_cells", arguments)


def stop(args: argparse.Namespace) -> int:
    """Stop this workspace's daemon (or the one named), or with --all every daemon of this user;
    with --kernel, only that kernel of the daemon."""
    if args.all and (args.daemon is not None or args.kernel is not None):
        refusal = "--all stops every daemon of this user: give it without --daemon and --kernel"
        raise WarmkernelError("invalid_arguments", refusal)
    if args.kernel is not None:
        return _stop_kernel(args)
    if args.all:
        stopping = live_descriptors()
    else:
        descriptor = find_daemon(Path.cwd(), args.daemon)
        if descriptor is None:
            raise WarmkernelError("daemon_not_found", f"no live daemon serves {Path.cwd()}")
        stopping = [descriptor]
    stopped: list[Descriptor] = []
    failures: list[str] = []
    for descriptor in stopping:  # one that does not stop keeps none of the others running
        try:
            stop_daemon(descriptor)
        except WarmkernelError as exc:
            failures.append(exc.message)
            continue
        stopped.append(descriptor)
        if not args.json:
            print(f"stopped {descriptor.describe()}")
    if args.json:
        print(json.dumps({"stopped": [descriptor.id for descriptor in stopped]}))
    elif not stopping:
        print("No live daemons.")
    if failures:
        raise WarmkernelError("daemon_error", "\n".join(failures))
    return EXIT_OK


def _stop_kernel(args: argparse.Namespace) -> int:
    """`stop --kernel NAME`: `stop-kernel NAME` (on a live daemon: none is started for it)."""
    tool = TOOLS_BY_NAME["stop_python_kernel"]
    return run_tool_verb(
        argparse.Namespace(**vars(args), tool=tool, tool_verb=tool.verbs[0], name=args.kernel)
    )


def forget(args: argparse.Namespace) -> int:
    """Delete this workspace's journal (or that of the workspace --daemon serves) with its
    records and their output; refused while its daemon runs, unless --stop stops it first."""
    from warmkernel.session import journal  # here: other verbs load no journal code

    if args.daemon is not None:
        descriptor: Descriptor | None = chosen_daemon(args, start=False)
        workspace = Path(descriptor.workspace)
    else:
        workspace = workspace_of(args).path
        descriptor = find_daemon(workspace)
    if descriptor is not None:
        if not args.stop:
            raise WarmkernelError(
                "daemon_error",
                f"daemon {descriptor.id} (pid {descriptor.pid}) runs on this journal; "
                f"`warmkernel forget{'' if args.daemon is None else f' --daemon {descriptor.id}'} --stop` "
                "stops it first",
            )
        stop_daemon(descriptor)
        if not args.json:
            print(f"stopped {descriptor.describe()}")
    forgotten = journal.forget(workspace, state_dir_of(args))
    if args.json:
        stopped = descriptor.id if descriptor is not None else None
        print(json.dumps({"forgotten": forgotten, "workspace": str(workspace), "stopped": stopped}))
    else:
        print(f"forgot the records of {workspace}" if forgotten else f"no records were kept for {workspace}")
    return EXIT_OK


def view(args: argparse.Namespace) -> int:
    """Print (and open in a browser, if there is one) a link to the daemon's console page."""
    descriptor = chosen_daemon(args)
    endpoint = {"host": args.host, "port": args.port, "allowed_hosts": args.allowed_host}
    sock, answer = open_socket(descriptor, "view", view=endpoint)
    sock.close()
    url = answer.get("url")
    if url is None:  # a daemon older than the console page took us for an MCP client
        raise WarmkernelError(
            "daemon_error",
            f"daemon {descriptor.id} runs warmkernel {answer.get('version', 'of an unknown version')}, "
            "which serves no console page; `warmkernel stop` it (its records are kept) and run "
            "`warmkernel view` again",
        )
    opened = not args.no_open and _open_browser(url)
    if args.json:
        print(json.dumps({"url": url, "opened": opened, "daemon": descriptor.id}))
        return EXIT_OK
    print(url)
    if opened:
        said = "opened in your browser"
    elif args.no_open:
        said = "open it in a browser"
    else:
        said = "no browser to open it here (no $BROWSER or display): open it in one"
    print(f"warmkernel: {said}; the link works once (`warmkernel view` prints another)", file=sys.stderr)
    return EXIT_OK


def _open_browser(url: str) -> bool:
    """Open `url` where a graphical browser can be (or $BROWSER names one); False where none can."""
    graphical = sys.platform == "darwin" or any(
        os.environ.get(name) for name in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")
    )
    if not graphical:  # a text browser would take over this terminal
        return False
    import webbrowser  # here: only `view` opens a browser, and every verb imports this module

    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


def init(args: argparse.Namespace) -> int:
    """Set the project up; exit 1 when a file was skipped (left untouched: it cannot be read)."""
    from warmkernel.cli.scaffold import init_project, server_command  # only `init` writes project files

    changes, snippets = init_project(Path.cwd(), server_command(sys.argv[0]))
    if args.json:
        print(json.dumps({"changes": changes, "snippets": snippets}, indent=2))
    else:
        print("\n".join([*changes, *(["", snippets] if snippets else [])]))
    return EXIT_ERROR if any(change.startswith("skipped") for change in changes) else EXIT_OK


def notebook_path(given: str) -> str:
    """An absolute path: the tools resolve relative paths against the workspace, not this directory."""
    return str(Path.cwd() / given)


LOCAL_VERBS: dict[str, Callable[[argparse.Namespace], int]] = {
    "config": config,
    "sessions": sessions,
    "start": start,
    "stop": stop,
    "forget": forget,
    "view": view,
    "init": init,
    "completion": completion,
}
