"""Verbs about daemons rather than tool calls: list, start, stop, serve, and `init`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from warmkernel.cli.exits import EXIT_OK, exit_status
from warmkernel.cli.options import kernel_environment, kernel_flags, settings_from
from warmkernel.client import ToolOutcome, open_daemon
from warmkernel.config import Settings, load_summarizers
from warmkernel.discovery import Descriptor, find_daemon, live_descriptors, start_daemon, stop_daemon
from warmkernel.errors import WarmkernelError
from warmkernel.scaffold import SNIPPETS, init_project
from warmkernel.workspace import Workspace, resolve_workspace

if TYPE_CHECKING:
    from warmkernel.process import Face

# Server-side modules (the process, the session, the kernel, uvicorn) are imported inside the
# serving verbs only: a client verb is a short-lived process that should load none of them.


def serve(args: argparse.Namespace) -> int:
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
    settings = replace(settings_from(args), summarizers=load_summarizers(workspace.path))
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


def sessions(args: argparse.Namespace) -> int:
    daemons = live_descriptors()
    if args.json:
        print(json.dumps([vars(d) for d in daemons], indent=2))
    elif not daemons:
        print("No live daemons.")
    else:
        for descriptor in daemons:
            print(descriptor.describe())
    return EXIT_OK


def start(args: argparse.Namespace) -> int:
    descriptor = find_daemon(Path.cwd(), args.daemon)
    started = descriptor is None
    serving = _serve_flags(args, descriptor) if args.serve else []
    if descriptor is None:
        descriptor = start_daemon(Path.cwd(), [*kernel_flags(args), *serving], kernel_environment(args))
    outcome = anyio.run(_warm_start, args, descriptor) if args.notebook else None
    if args.json:
        run = {"run": outcome.data} if outcome is not None else {}
        print(json.dumps(vars(descriptor) | {"started": started} | run, indent=2))
    else:
        print(("started " if started else "already running: ") + descriptor.describe())
        for line in descriptor.jupyter_lines():
            print(line)
        if outcome is not None:
            print(outcome.text, file=sys.stderr if outcome.error_code else sys.stdout)
    return exit_status("nb run", outcome) if outcome is not None else EXIT_OK


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
        raise WarmkernelError("notebook_not_found", f"{notebook_path(args.notebook)} does not exist")
    return ["--jupyter-server", "--jupyter-notebook", notebook_path(args.notebook)]


async def _warm_start(args: argparse.Namespace, descriptor: Descriptor) -> ToolOutcome:
    """Run the notebook's cells that are not fresh (all of them in a new daemon), past errors."""
    arguments = {
        "path": notebook_path(args.notebook),
        "cells": "stale",
        "stop_on_error": False,
        "timeout_seconds": args.timeout,
    }
    async with open_daemon(descriptor.url, descriptor.token) as client:
        return await client.call_tool("run_notebook_cells", arguments)


def stop(args: argparse.Namespace) -> int:
    descriptor = find_daemon(Path.cwd(), args.daemon)
    if descriptor is None:
        raise WarmkernelError("daemon_not_found", f"no live daemon serves {Path.cwd()}")
    stop_daemon(descriptor)
    print(json.dumps({"stopped": descriptor.id}) if args.json else f"stopped {descriptor.describe()}")
    return EXIT_OK


def init(args: argparse.Namespace) -> int:
    changes = init_project(Path.cwd())
    if args.json:
        print(json.dumps({"changes": changes, "snippets": SNIPPETS}, indent=2))
    else:
        print("\n".join([*changes, "", SNIPPETS]))
    return EXIT_OK


def notebook_path(given: str) -> str:
    """An absolute path: the tools resolve relative paths against the workspace, not this directory."""
    return str(Path.cwd() / given)


LOCAL_VERBS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sessions": sessions,
    "start": start,
    "stop": stop,
    "init": init,
}
