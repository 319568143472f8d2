"""A host's side of the daemon in tests: `warmkernel mcp` launched as an MCP host launches it (the
SDK's stdio client), and the daemon it reaches, found and watched from outside."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import psutil
from mcp import Client

from tests.cli.conftest import Cli
from tests.mcp.conftest import stdio_parameters


def mcp_host(cli: Cli, *args: str, name: str = "test-host", **kwargs: Any) -> Client:
    """An MCP host's connection: `warmkernel mcp` over stdio, in the CLI's workspace."""
    info = types.Implementation(name=name, version="1")
    return Client(stdio_parameters(cli.workspace, *args, env=cli.env), client_info=info, **kwargs)


def live_daemon(cli: Cli) -> dict[str, Any]:
    """The workspace's one live daemon, as `sessions --json` describes it."""
    (daemon,) = json.loads(cli("sessions", "--json").stdout)
    return daemon


def gone(pid: int, timeout_s: float = 20.0) -> bool:
    """Whether the process ends within the timeout (a zombie counts as ended)."""
    try:
        psutil.Process(pid).wait(timeout_s)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    return True
