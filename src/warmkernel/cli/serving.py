"""The serving verbs: `mcp` (a relay to the workspace's daemon, or `--ephemeral`), `serve` (the
daemon's tools on a public Streamable HTTP endpoint), and `daemon`, which `discovery.start_daemon`
runs detached.

Server-side modules (the session, the kernel, the MCP SDK, uvicorn) are imported inside the verbs
that run them: the relay is a small process, and client verbs never load them.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from warmkernel.cli.configured import workspace_of
from warmkernel.cli.exits import EXIT_OK
from warmkernel.cli.options import (
    kernel_options_of,
    reply_options,
    settings_from,
    state_dir_of,
    workspace_daemon,
)
from warmkernel.daemon.client import open_socket
from warmkernel.daemon.discovery import daemon_title, retitle
from warmkernel.errors import WarmkernelError
from warmkernel.settings.model import Settings
from warmkernel.workspace import Workspace

TOKEN_VARIABLE = "WARMKERNEL_TOKEN"
TOKEN_FILE_MAX_BYTES = 4096
"""A token file holds one token: a bigger one is refused, never read whole."""


def mcp(args: argparse.Namespace) -> int:
    """Relay stdio to the workspace's daemon (started if need be); `--ephemeral`: own a kernel."""
    if args.ephemeral:
        from warmkernel.faces.mcp_server import serve_stdio
        from warmkernel.session.kernels import Kernels

        async def own_kernel(settings: Settings, workspace: Workspace) -> None:
            async with Kernels.open(settings, workspace) as kernels:
                await serve_stdio(kernels)

        _configure_logging(args.log_level)
        workspace = workspace_of(args)
        _run_until_signalled(own_kernel, _settings(args), workspace)
        return EXIT_OK
    from warmkernel.daemon.relay import relay

    relay(lambda: workspace_daemon(args)[0], reply_options(args))  # becomes the pump: never returns


def serve(args: argparse.Namespace) -> int:
    """Open the daemon's public endpoint and keep it open until a signal (or the daemon's end)."""
    from warmkernel.faces.http_server import check_bind, new_token

    workspace = workspace_of(args)
    # First, before a daemon is forked from this process: `--token T` leaves the process list.
    renamed = retitle(f"warmkernel serve {workspace.path}")
    check_bind(args.host, args.port, args.allowed_host)  # before a daemon is started for nothing
    given = _given_token(args)
    token = given or new_token()
    descriptor, _ = workspace_daemon(args)
    endpoint = {
        "host": args.host,
        "port": args.port,
        "path": args.path,
        "token": token,
        "allowed_hosts": args.allowed_host,
    }
    sock, answer = open_socket(descriptor, "serve", options=reply_options(args), serve=endpoint)
    with sock:
        # stderr: stdout stays free for scripts. A generated token is not printed (logs keep
        # stderr); it is where only this user reads it.
        where = "" if given else "; its bearer token is the public_token of `warmkernel sessions --json`"
        print(
            f"warmkernel: serving MCP at {answer['url']} (daemon {descriptor.id}){where}",
            file=sys.stderr,
            flush=True,
        )
        if _typed("--token"):
            print(_token_flag_warning(renamed), file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        signal.signal(signal.SIGHUP, lambda *_: sys.exit(0))
        try:
            while sock.recv(4096):  # the daemon says nothing more; it closes when it stops
                pass
        except KeyboardInterrupt:
            return EXIT_OK
    print(f"warmkernel: daemon {descriptor.id} stopped, and its MCP endpoint with it", file=sys.stderr)
    return EXIT_OK


def _given_token(args: argparse.Namespace) -> str | None:
    """The bearer token `serve` was given (--token, --token-file, else the variable), checked;
    None when none was, and one is generated."""
    from warmkernel.faces.http_server import check_token

    if args.token is not None and args.token_file is not None:
        raise WarmkernelError("invalid_arguments", "give --token or --token-file, not both")
    if args.token_file is not None:
        token, origin = _read_token_file(Path(args.token_file)), f"--token-file {args.token_file}"
    elif args.token is not None:  # the flag, else the variable or a configuration file (`configured`)
        token, origin = args.token, "--token" if _typed("--token") else f"${TOKEN_VARIABLE}"
    elif TOKEN_VARIABLE in os.environ:  # set, but to nothing the configuration takes: refused below
        token, origin = os.environ[TOKEN_VARIABLE], f"${TOKEN_VARIABLE}"
    else:
        return None
    check_token(token, origin)
    return token


def _typed(flag: str) -> bool:
    """Whether `flag` is on this process's command line (as `--flag VALUE` or `--flag=VALUE`)."""
    return any(word == flag or word.startswith(f"{flag}=") for word in sys.argv[1:])


def _read_token_file(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(TOKEN_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise WarmkernelError("invalid_arguments", f"--token-file {path}: {exc.strerror}") from exc
    if len(data) > TOKEN_FILE_MAX_BYTES:
        raise WarmkernelError(
            "invalid_arguments",
            f"--token-file {path} holds over {TOKEN_FILE_MAX_BYTES} bytes; it must hold the token alone",
        )
    try:
        return data.decode().strip()
    except UnicodeDecodeError as exc:
        raise WarmkernelError("invalid_arguments", f"--token-file {path} is not UTF-8 text ({exc})") from exc


def _token_flag_warning(renamed: bool) -> str:
    """What `serve --token T` is told: every local user could read T, and run code with it."""
    shown = (
        "until this process renamed itself"
        if renamed
        else "for as long as this process runs (it could not rename itself)"
    )
    return (
        f"warmkernel: warning: --token is readable by every local user in the process list {shown}; "
        f"give the token with --token-file PATH or ${TOKEN_VARIABLE} instead"
    )


def daemon(args: argparse.Namespace) -> int:
    """The workspace's daemon, in the foreground (`discovery.start_daemon` runs it detached)."""
    from warmkernel.daemon.daemon import DaemonOptions, run_daemon

    _configure_logging(args.log_level)
    workspace = workspace_of(args)
    retitle(daemon_title(workspace.path))  # what `ps` shows, and how clients know it is alive
    settings = _settings(args)
    options = DaemonOptions(
        idle_stop_s=args.idle_stop,
        idle_stop_unused_s=args.idle_stop_unused,
        state_dir=state_dir_of(args),
        ready_fd=args.ready_fd,
        jupyter=args.jupyter_server,
        jupyter_port=args.jupyter_port,
        jupyter_notebook=args.jupyter_notebook,
        kernel_options=kernel_options_of(settings),
    )
    _run_until_signalled(lambda s, w: run_daemon(s, w, options), settings, workspace)
    return EXIT_OK


def _settings(args: argparse.Namespace) -> Settings:
    """The command line's settings, and the project's configuration for what it does not give."""
    configuration = args.configuration
    files = tuple(str(path) for path in configuration.files)
    return replace(settings_from(args), summarizers=configuration.summarizers, config_files=files)


def _configure_logging(level: str) -> None:
    import logging  # here: only a server logs, and every verb imports this module

    logging.basicConfig(level=level, stream=sys.stderr, format="warmkernel %(levelname)s %(message)s")


def _run_until_signalled(
    serve: Callable[[Settings, Workspace], Awaitable[None]], settings: Settings, workspace: Workspace
) -> None:
    """Run `serve` until it returns or a signal asks us to stop; clean up either way."""
    import anyio

    async def main() -> None:
        failure: WarmkernelError | None = None
        async with anyio.create_task_group() as tg:

            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(stop_on_signal)
            try:
                await serve(settings, workspace)
            except WarmkernelError as exc:
                failure = exc  # raised as itself below, not inside the task group's ExceptionGroup
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    anyio.run(main)


SERVING_VERBS: dict[str, Callable[[argparse.Namespace], int]] = {"mcp": mcp, "serve": serve, "daemon": daemon}
