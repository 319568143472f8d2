"""What the daemon's listeners share against floods of connections: each holds at most its share
of the open-files limit (the rest stays for the other listeners, the kernels and the files), a
new connection has a few seconds to say what it wants, and an accept that fails for lack of
descriptors is logged, at most once a minute, and retried: never the end of a listener."""

from __future__ import annotations

import asyncio
import logging
import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

FIRST_WORDS_S = 5.0
"""How long a new connection may take to say what it wants: its hello on the socket, its
request's headers over HTTP. Every client of ours says it at once."""
BACKLOG = 128
"""Connections the system queues for a listener until it accepts them; they hold none of ours."""
REPORT_EVERY_S = 60.0
_MACOS_OPEN_MAX = 10_240
"""macOS gives an unlimited hard limit but refuses a soft one past this."""


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one, so a flood finds the most descriptors we may
    have; the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _MACOS_OPEN_MAX if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as exc:
            log.warning("the open-files limit stays %d (raising it to %d failed: %s)", soft, wanted, exc)
    return open_files_limit()


def open_files_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


@dataclass(frozen=True)
class Share:
    """A listener's part of the open-files limit, and the most it needs however high that is."""

    fraction: float
    ceiling: int

    def of(self, limit: int) -> int:
        return max(1, min(self.ceiling, int(limit * self.fraction)))

    def now(self) -> int:
        return self.of(open_files_limit())


SOCKET_CONNECTIONS = Share(1 / 8, 1024)
"""The Unix socket's clients; a host's relay holds three descriptors (the socket and its pipes)."""
SOCKET_HELLOS = Share(1 / 32, 64)
"""Of those, the connections that have not said their hello yet."""
CONSOLE_CONNECTIONS = Share(1 / 16, 64)
"""The console page's browsers; any local user can reach its loopback port."""
SERVE_CONNECTIONS = Share(1 / 8, 256)
"""The clients of `serve`'s Streamable HTTP endpoint."""


@dataclass
class Episodes:
    """A condition that can come thousands of times a second (a refused connection, a failed
    accept): in the log at most once a `REPORT_EVERY_S`, with how often it came meanwhile."""

    what: str
    count: int = 0
    logged_at: float = -math.inf

    def happened(self, detail: object = None) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.logged_at < REPORT_EVERY_S:
            return
        said = f"{self.what}: {detail}" if detail is not None else self.what
        log.warning("%s (%d time(s) since this was last logged)", said, self.count)
        self.logged_at, self.count = now, 0


@dataclass
class Slots:
    """The connections one listener holds, at most `cap`; one past it is refused, and logged."""

    cap: int
    refused: Episodes
    held: int = 0

    @classmethod
    def of(cls, listener: str, share: Share) -> Slots:
        cap = share.now()
        return cls(cap, Episodes(f"{listener} holds {cap} connections, its cap; a new one is closed at once"))

    def take(self) -> bool:
        if self.held >= self.cap:
            self.refused.happened()
            return False
        self.held += 1
        return True

    def give(self) -> None:
        self.held -= 1


_ACCEPT_OUT_OF_RESOURCES = "socket.accept() out of system resource"
Handler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio's own listeners (uvicorn's) wait a second and retry when accept() runs out of
    descriptors, and log it with a traceback, in Python 3.11 once per backlog slot each time:
    make that one line a minute. Every other report of the loop goes where it went."""
    failed = Episodes("accept() found no free descriptor; the HTTP listener retries in a second")
    before: Handler | None = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == _ACCEPT_OUT_OF_RESOURCES:
            failed.happened(context.get("exception"))
        elif before is not None:
            before(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
