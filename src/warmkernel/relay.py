"""`warmkernel mcp`: what an MCP host launches, a relay between the host's stdio and the daemon.

After its hello the relay copies bytes both ways and parses nothing: MCP over stdio and over the
daemon's socket are framed alike (one JSON-RPC message a line), so progress notifications and
cancellations pass through to and from the right client untouched. To stay small for the whole
conversation, the process replaces itself with `relay_pump.py` on a bare interpreter once the
daemon has answered. When the host closes stdin, or ends the relay with a signal or a kill of its
process group, the daemon and its kernel stay: the daemon runs in a session of its own
(`discovery.start_daemon`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from warmkernel.client import open_socket
from warmkernel.discovery import Descriptor

PUMP = Path(__file__).with_name("relay_pump.py")


def relay(descriptor: Descriptor, options: Mapping[str, Any]) -> NoReturn:
    """Say hello to the daemon, then become the byte pump on the connected socket (never returns)."""
    sock, _ = open_socket(descriptor, "relay", options=dict(options))
    fd = sock.detach()
    os.set_inheritable(fd, True)
    os.execv(sys.executable, [sys.executable, "-S", "-I", str(PUMP), str(fd)])
