"""Floods of connections end connections, never the daemon: another local user flooding the
console page's loopback port, descriptors running out under the daemon, idle connections and
too many clients on its Unix socket. Meanwhile the owner's calls answer, over a host's session
that was already connected and over new CLI verbs.

Every flood is bounded in count and time, and goes to 127.0.0.1 or the test's own socket only.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client

from tests.cli.conftest import Cli
from tests.conftest import gone
from tests.mcp.calls import run
from tests.mcp.conftest import stdio_parameters
from warmkernel.faces.listening import CONSOLE_CONNECTIONS, SOCKET_CONNECTIONS, SOCKET_HELLOS

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="prlimit (util-linux) is missing")

LIMIT = 256
"""The open-files limit of a flooded test daemon: its caps are that small, so its floods are short."""
WAIT_S = 60

FLOODER = """
import select, socket, sys, time

def closed(sock, wait_ms=0):
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    return bool(poll.poll(wait_ms))

port, most = int(sys.argv[1]), int(sys.argv[2])
told = select.poll()
told.register(0, select.POLLIN)
held, made, until = [], 0, time.monotonic() + 60
while made < most and time.monotonic() < until and not told.poll(0):
    made += 1
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        continue
    time.sleep(0.001)
    if made % 100 == 0:
        held = [each for each in held if not closed(each)]
        if made == 100:
            print("flooding", flush=True)
until = time.monotonic() + 30
while held and time.monotonic() < until:
    held = [each for each in held if not closed(each, 100)]
print(made, len(held), flush=True)
"""
"""Opens connections to 127.0.0.1:PORT and holds them, at most MOST in 60 s, until told on stdin;
then waits (30 s at most) for the daemon to close them, and says how many it made and how many
are still open."""


def descriptor_of(cli: Cli) -> dict[str, Any]:
    (path,) = (cli.runtime / "daemons").glob("*.json")
    return json.loads(path.read_text())


def start_limited(cli: Cli, limit: int = LIMIT, soft: int | None = None) -> dict[str, Any]:
    """Start the workspace's daemon under this open-files limit (the hard one; the soft one is the
    same unless given)."""
    done = subprocess.run(
        ["prlimit", f"--nofile={soft or limit}:{limit}", sys.executable, "-m", "warmkernel", "start"],
        cwd=cli.workspace,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    return descriptor_of(cli)


def set_soft_limit(pid: int, soft: int) -> None:
    """Set the open-files limit a live process has (lowering it needs no privilege)."""
    done = subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={soft}:"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def soft_limit(pid: int) -> int:
    (line,) = [line for line in Path(f"/proc/{pid}/limits").read_text().splitlines() if "open files" in line]
    return int(line.split()[3])


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def daemon_log(cli: Cli) -> str:
    return "".join(path.read_text(errors="replace") for path in cli.runtime.glob("daemon-*.log"))


def console_port(cli: Cli) -> int:
    done = cli("view", "--no-open")
    assert done.returncode == 0, done.stderr
    found = re.match(r"http://127\.0\.0\.1:(\d+)/", done.stdout)
    assert found, done.stdout
    return int(found[1])


def answer_of(sock: socket.socket) -> dict[str, Any]:
    """The daemon's one line to a connection (a refusal ends it)."""
    return json.loads(sock.makefile("rb").readline())


async def line_of(stream: BufferedByteReceiveStream) -> str:
    with anyio.fail_after(WAIT_S):
        return (await stream.receive_until(b"\n", 1000)).decode()


async def log_says(cli: Cli, text: str) -> None:
    """Wait, boundedly, until the daemon's log has `text`."""
    with anyio.fail_after(WAIT_S):
        while text not in daemon_log(cli):  # noqa: ASYNC110 (another process writes it)
            await anyio.sleep(0.05)


@pytest.fixture
def other_user() -> Iterator[tuple[int, int]]:
    """A throwaway local user (uid, gid), removed afterwards."""
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("needs root, useradd and setpriv to act as a second local user")
    name = f"wkflood{os.getpid()}"
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def test_another_user_flooding_the_console_port_leaves_the_daemon_and_the_owners_calls(
    cli: Cli, other_user: tuple[int, int]
) -> None:
    pid = start_limited(cli)["pid"]
    port = console_port(cli)
    cap = CONSOLE_CONNECTIONS.of(LIMIT)
    uid, gid = other_user
    as_other_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    flooder = [*as_other_user, "/usr/bin/python3", "-I", "-S", "-c", FLOODER, str(port), "10000"]

    async def flood_while_the_owner_works() -> tuple[int, int, list[str]]:
        async with Client(stdio_parameters(cli.workspace, env=cli.env)) as owner:
            await run(owner, "x = 41")
            before = open_descriptors(pid)
            async with await anyio.open_process(flooder, cwd="/", env={"PATH": "/usr/bin:/bin"}) as process:
                assert process.stdin is not None and process.stdout is not None
                lines = BufferedByteReceiveStream(process.stdout)
                assert await line_of(lines) == "flooding"
                replies = [(await run(owner, "x + 1"))[1]]
                verb = await anyio.to_thread.run_sync(lambda: cli("run", "x * 2"))
                assert verb.returncode == 0, verb.stderr
                replies.append(verb.stdout)
                held = open_descriptors(pid) - before
                await process.stdin.send(b"stop\n")
                made, left = map(int, (await line_of(lines)).split())
                assert made > cap
            replies.append((await run(owner, "x"))[1])
        return held, left, replies

    held, left, replies = anyio.run(flood_while_the_owner_works)
    assert [reply.splitlines()[-1].split(": ")[-1] for reply in replies] == ["42", "82", "41"]
    # the cap, and a few the owner's calls and the daemon's own work hold meanwhile (more under load)
    assert held <= cap + 16, f"the flood held {held} of the daemon's descriptors, its cap is {cap}"
    assert left == 0, "a connection that never sends a request is closed"
    assert not gone(pid)
    assert f"the console page on port {port} holds {cap} connections, its cap" in daemon_log(cli)


def test_descriptors_running_out_fail_accepts_for_a_while_never_the_daemon(cli: Cli) -> None:
    pid = start_limited(cli, 4096, soft=256)["pid"]
    assert soft_limit(pid) == 4096, "the daemon raises its soft limit to the hard one"
    port = console_port(cli)

    replies: list[str] = []

    async def verb() -> None:
        done = await anyio.to_thread.run_sync(lambda: cli("run", "x * 2"))
        assert done.returncode == 0, done.stderr
        replies.append(done.stdout)

    async def exhaust_then_free() -> None:
        async with (
            Client(stdio_parameters(cli.workspace, env=cli.env)) as owner,
            anyio.create_task_group() as tg,
        ):
            await run(owner, "x = 41")
            soft = open_descriptors(pid)  # not one more
            await anyio.to_thread.run_sync(set_soft_limit, pid, soft)
            with ExitStack() as flood:
                for _ in range(16):
                    flood.enter_context(socket.create_connection(("127.0.0.1", port), timeout=30))
                await log_says(cli, "accept() found no free descriptor; the HTTP listener retries")
                replies.append((await run(owner, "x + 1"))[1])  # a connected host needs no new descriptor
                tg.start_soon(verb)  # its connection waits in the socket's queue meanwhile
                await log_says(cli, "the socket's accept() failed; it retries after a pause")
            await anyio.to_thread.run_sync(set_soft_limit, pid, soft + 64)

    anyio.run(exhaust_then_free)
    assert [reply.splitlines()[-1] for reply in replies] == ["Out[2]: 42", "Out[3]: 82"]
    assert "Too many open files" in daemon_log(cli) and not gone(pid)


def test_idle_connections_past_the_sockets_cap_are_closed_and_the_owners_calls_answer(cli: Cli) -> None:
    path = start_limited(cli, 4096)["socket"]  # room for every idle one: only the hellos' cap acts
    cap = SOCKET_HELLOS.of(4096)
    idle = 5 * cap
    with ExitStack() as stack:
        connections = [stack.enter_context(socket.socket(socket.AF_UNIX)) for _ in range(idle)]
        for sock in connections:
            sock.settimeout(WAIT_S)
            sock.connect(path)
        done = cli("run", "1 + 1")
        assert done.stdout.splitlines()[-1] == "Out[1]: 2", done.stderr
        answers = [answer_of(sock)["error"] for sock in connections]
    pushed_out = [a for a in answers if a["message"].startswith(f"closed before its hello: {cap} newer")]
    timed_out = [a for a in answers if a["message"].startswith("no hello within 5 s")]
    assert len(pushed_out) + len(timed_out) == idle
    assert len(timed_out) <= cap, "past the cap, the oldest silent connection is closed at once"
    assert {a["code"] for a in timed_out} <= {"invalid_arguments"}


def test_clients_past_the_sockets_cap_are_refused_and_the_connected_ones_answer(cli: Cli) -> None:
    path = start_limited(cli)["socket"]
    cap = SOCKET_CONNECTIONS.of(LIMIT)

    async def fill_the_socket() -> tuple[list[dict[str, Any]], str]:
        async with Client(stdio_parameters(cli.workspace, env=cli.env)) as owner:  # one of the cap
            await run(owner, "x = 41")
            with ExitStack() as stack:
                answers = []
                for _ in range(cap + 5):
                    sock = stack.enter_context(socket.socket(socket.AF_UNIX))
                    sock.settimeout(WAIT_S)
                    sock.connect(path)
                    # Past the cap the daemon may answer and close before the hello is sent.
                    with suppress(BrokenPipeError):
                        sock.sendall(b'{"client": "cli"}\n')
                    answers.append(answer_of(sock))
                refused = cli("run", "x")
                reply = (await run(owner, "x + 1"))[1]
            assert (
                refused.returncode == 1
                and f"holds {cap} connections on its socket, its cap" in refused.stderr
            )
        return answers, reply

    answers, reply = anyio.run(fill_the_socket)
    assert [answer["ok"] for answer in answers] == [True] * (cap - 1) + [False] * 6
    assert answers[-1]["error"]["code"] == "daemon_error"
    assert reply.splitlines()[-1] == "Out[2]: 42"
    assert cli("run", "x").stdout.splitlines()[-1] == "Out[3]: 41"
