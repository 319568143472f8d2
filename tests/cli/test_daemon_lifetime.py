"""The kernel outlives its clients: one daemon per workspace, every face its client.

Hosts are `warmkernel mcp` relays started as an MCP host starts them (the SDK's stdio client);
the CLI runs as a subprocess. Each test's daemons live in its own directories (`cli` fixture).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import psutil
import pytest

from tests.cli.conftest import Cli
from tests.cli.hosts import gone, live_daemon, mcp_host
from tests.gates import Gate
from tests.mcp.calls import call, call_error, run, text_of
from tests.mcp.conftest import connect
from warmkernel import __version__
from warmkernel.daemon.relay import PUMP

pytestmark = [pytest.mark.timeout(120)]


def test_a_new_host_finds_the_namespace_and_is_told_what_is_there(cli: Cli) -> None:
    async def two_conversations() -> str:
        async with mcp_host(cli) as first:
            await run(first, "import math\nx = 41")
        async with mcp_host(cli) as second:
            _, text = await run(second, "x + 1")
            return text

    text = anyio.run(two_conversations)
    assert text.splitlines()[-1] == "Out[2]: 42"
    assert "you joined a live kernel" in text and "1 execution in its namespace" in text
    assert "x (int)" in text and "math" not in text.split("variables:")[1]
    assert live_daemon(cli)["clients"] == 0  # both hosts are gone; the daemon stays


def test_a_new_host_whose_first_cell_is_refused_is_told_with_its_next_reply(cli: Cli) -> None:
    cli("run", "x = 41")

    async def join() -> tuple[str, str]:
        async with mcp_host(cli) as host:
            refused = await host.call_tool("run_python", {"freeform": "# warmkernel: --wait -1\nx"})
            assert refused.is_error
            return text_of(refused), (await run(host, "x + 1"))[1]

    refused, text = anyio.run(join)
    assert "invalid_directive" in refused and "you joined" not in refused
    assert "you joined a live kernel" in text and text.splitlines()[-1] == "Out[2]: 42"


def test_a_new_host_counts_only_the_cells_of_the_kernel_it_joins(cli: Cli) -> None:
    for code in ("a = 1", "b = 2"):
        cli("run", code)
    cli("reset")
    cli("run", "c = 3")

    async def join() -> str:
        async with mcp_host(cli) as host:
            return (await run(host, "c"))[1]

    text = anyio.run(join)
    assert "(generation 2" in text and "1 execution in its namespace, 3 kept in all" in text


@pytest.mark.parametrize("how", ["sigterm", "group-kill"])
def test_a_host_that_ends_its_relay_leaves_the_daemon_and_kernel(cli: Cli, how: str) -> None:
    relay = subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "mcp"],
        cwd=cli.workspace,
        env=cli.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a process group of its own, as a host's child
    )
    assert relay.stdin is not None and relay.stdout is not None
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _initialize()},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": _run("kept = 'yes'")},
    ):
        relay.stdin.write(json.dumps(message).encode() + b"\n")
        relay.stdin.flush()
    answers = [json.loads(relay.stdout.readline()) for _ in range(2)]
    assert answers[1]["result"]["content"][0]["text"].startswith("In [1]")
    assert str(PUMP) in psutil.Process(relay.pid).cmdline()  # the relay became its pump
    if how == "sigterm":
        relay.send_signal(signal.SIGTERM)
    else:
        os.killpg(relay.pid, signal.SIGKILL)
    relay.wait(30)
    assert relay.stdout.read() == b""  # nothing else holds the host's stdout
    relay.stdin.close()
    relay.stdout.close()
    assert cli("run", "kept").stdout.splitlines()[-1] == "Out[2]: 'yes'"


def test_messages_larger_than_a_pipe_pass_both_ways_through_the_hosts_pipes(cli: Cli) -> None:
    """The daemon reads and writes the host's pipes itself: a 1 MB cell in, a 300,000-character reply out."""

    async def conversation() -> str:
        async with mcp_host(cli, "--inline-chars", "400000") as host:
            _, text = await run(host, f"s = {'x' * 1_000_000!r}\nprint(len(s))\nprint('y' * 300_000)")
            return text

    text = anyio.run(conversation)
    assert "1000000" in text
    assert "y" * 300_000 in text


def test_a_relay_whose_stdout_is_a_file_copies_the_conversation(cli: Cli, tmp_path: Path) -> None:
    """Stdio that no event loop can wait on (here a file) is copied as a host's pipes are."""
    replies = tmp_path / "replies.jsonl"
    with (
        replies.open("wb") as stdout,
        subprocess.Popen(
            [sys.executable, "-m", "warmkernel", "mcp"],
            cwd=cli.workspace,
            env=cli.env,
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
        ) as relay,
    ):
        assert relay.stdin is not None
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _initialize()},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": _run("40 + 2")},
        ):
            relay.stdin.write(json.dumps(message).encode() + b"\n")
            relay.stdin.flush()
        deadline = time.monotonic() + 60
        while len(replies.read_bytes().splitlines()) < 2:
            assert relay.poll() is None, "the relay ended before it answered"
            assert time.monotonic() < deadline, "the relay never answered"
            time.sleep(0.05)
        assert str(PUMP) in psutil.Process(relay.pid).cmdline()
        relay.stdin.close()  # the relay ends with its host's stdin
    answers = [json.loads(line) for line in replies.read_bytes().splitlines()]
    assert answers[1]["result"]["content"][0]["text"].splitlines()[-1] == "Out[1]: 42"
    assert relay.returncode == 0


def test_a_cancelled_call_ends_through_the_relay_and_the_cell_runs_on(cli: Cli, gate: Gate) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "mcp"],
        cwd=cli.workspace,
        env=cli.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as relay:
        assert relay.stdin is not None and relay.stdout is not None

        def send(message: dict[str, Any]) -> None:
            assert relay.stdin is not None
            relay.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
            relay.stdin.flush()

        def answer(number: int) -> dict[str, Any]:
            assert relay.stdout is not None
            while (message := json.loads(relay.stdout.readline())).get("id") != number:
                assert message.get("id") is None, f"an answer to a request that was cancelled: {message}"
            return message

        send({"id": 1, "method": "initialize", "params": _initialize()})
        answer(1)
        send({"method": "notifications/initialized"})
        slow = f"# warmkernel: --wait 60\n{gate.wait}\nprint('ran on')"
        send({"id": 2, "method": "tools/call", "params": _run(slow)})
        for number in range(3, 100):  # until the cell runs (the call that sent it waits on)
            send({"id": number, "method": "tools/call", "params": _status()})
            if answer(number)["result"]["content"][0]["text"].startswith("execution 1: running"):
                break
            time.sleep(0.2)  # a new daemon's kernel may take seconds to start
        else:
            raise AssertionError("the cell never started running")
        send({"method": "notifications/cancelled", "params": {"requestId": 2, "reason": "the user moved on"}})
        send({"id": 100, "method": "tools/call", "params": _status()})
        answer(100)  # read after the cancel: the cell may end now
        gate.open()
        wait = {"name": "wait_python", "arguments": {"timeout_seconds": 30}}
        send({"id": 101, "method": "tools/call", "params": wait})
        assert answer(101)["result"]["content"][0]["text"].endswith("ran on")
        send({"id": 102, "method": "tools/call", "params": _status()})
        answer(102)  # an answer to the cancelled call, had one been sent, would have come by now
        relay.stdin.close()


def test_a_daemon_killed_mid_cell_leaves_its_records_and_numbering(cli: Cli, gate: Gate) -> None:
    assert cli("run", "print('before')").returncode == 0
    # Running past a second, the cell's output goes to the journal as it comes.
    cell = f"import time\nprint('early', flush=True)\ntime.sleep(2.5)\nprint('late', flush=True)\n{gate.wait}"
    running = cli("run", cell, "--timeout", "3")
    assert running.returncode == 3 and "late" in running.stdout, running.stdout
    daemon = live_daemon(cli)
    os.kill(daemon["pid"], signal.SIGKILL)
    assert gone(daemon["pid"])
    assert gone(daemon["kernel"]["pid"]), "the kernel of a killed daemon does not outlive it"
    restarted = cli("run", "'after'")
    assert restarted.returncode == 0, restarted.stderr
    assert "warmkernel restarted; executions 1-2 are kept" in restarted.stdout
    assert "In [3]" in restarted.stdout
    assert not Path(daemon["socket"]).parent.exists(), "the killed daemon's socket directory is swept"
    assert cli("read", "1").stdout.splitlines()[-1] == "before"
    state = cli("state", "2", "--json")
    facts = json.loads(state.stdout)
    assert facts["state"] == "died" and f"pid {daemon['pid']}" in facts["end_reason"]
    assert "the output it had written until then is kept" in facts["end_reason"]
    assert facts["elapsed_s"] >= 1, "it ran until the daemon's end, as far as the journal knows"
    assert cli("read", "2").stdout.splitlines()[-2:] == ["early", "late"]


def test_a_stuck_daemon_is_named_with_the_way_to_end_it_and_stop_all_stops_the_others(
    cli: Cli, tmp_path: Path
) -> None:
    other = replace(cli, workspace=tmp_path / "other")
    other.workspace.mkdir()
    assert cli("start").returncode == 0 and other("start").returncode == 0
    daemons = {row["workspace"]: row for row in json.loads(cli("sessions", "--json").stdout)}
    stuck, healthy = daemons[str(cli.workspace)], daemons[str(other.workspace)]
    os.kill(stuck["pid"], signal.SIGSTOP)  # as a daemon whose event loop never yields
    stopping = cli("stop", "--all")
    assert stopping.returncode == 1
    assert f"(pid {stuck['pid']}) did not stop within 15 s" in stopping.stderr
    assert f"`kill -KILL {stuck['pid']}` ends it and its kernels" in stopping.stderr
    assert f"stopped {healthy['id']}" in stopping.stdout and gone(healthy["pid"])
    os.kill(stuck["pid"], signal.SIGKILL)
    assert gone(stuck["pid"]) and gone(stuck["kernel"]["pid"])


def test_ten_concurrent_first_calls_start_one_daemon(cli: Cli) -> None:
    with ThreadPoolExecutor(10) as pool:
        done = list(pool.map(lambda _: cli("run", "pass", "--json"), range(10)))
    # each cell ran, or was busy behind another (exit 3); all in one kernel of one daemon
    assert {d.returncode for d in done} <= {0, 3} and 0 in {d.returncode for d in done}
    assert {json.loads(d.stdout).get("generation", 1) for d in done} == {1}
    assert len(json.loads(cli("sessions", "--json").stdout)) == 1


def test_a_client_asking_for_another_interpreter_is_refused_with_the_difference(cli: Cli) -> None:
    assert cli("start").returncode == 0
    other = "/usr/bin/python3"
    for verb in (["start"], ["mcp"]):
        done = cli(*verb, "--python", other)
        assert done.returncode == 2
        message = done.stderr.strip()
        assert message.startswith("warmkernel: kernel_options_differ: ")
        assert f"--python auto (you asked for --python {other})" in message
        assert "`warmkernel stop`" in message


def test_a_host_refused_for_its_kernel_options_is_told_why_in_its_initialize(cli: Cli) -> None:
    assert cli("start", "--max-kernels", "3").returncode == 0

    async def connect() -> str:
        try:
            async with mcp_host(cli, "--max-kernels", "2"):
                return "connected"
        except BaseException as exc:  # the SDK's task groups wrap the MCPError of its initialize
            return "".join(traceback.format_exception(exc))

    message = anyio.run(connect)
    assert "kernel_options_differ: the daemon of" in message
    assert "--max-kernels 3 (you asked for --max-kernels 2)" in message


def test_busy_names_the_client_whose_cell_runs(cli: Cli, gate: Gate) -> None:
    async def host_then_cli() -> subprocess.CompletedProcess[str]:
        async with mcp_host(cli, name="host-a") as host:
            await run(host, f"# warmkernel: --wait 0.2\n{gate.wait}")
            refused = await anyio.to_thread.run_sync(lambda: cli("run", "1"))
            await call(host, "interrupt_python")
            return refused

    refused = anyio.run(host_then_cli)
    assert refused.returncode == 3
    assert "(sent by host-a) is still running; this cell was not run" in refused.stderr
    assert cli("wait", "--timeout", "30").returncode in (0, 4)  # the host's interrupted cell has ended
    held = cli("run", "--timeout", "0.2", gate.wait)
    assert held.returncode == 3 and "running for" in held.stdout, held.stdout + held.stderr
    second = cli("run", "1")
    assert "(sent by cli) is still running" in second.stderr, "another CLI command is named too"
    cli("interrupt")


def test_progress_reaches_only_the_client_that_waits(cli: Cli, gate: Gate) -> None:
    seen: list[object] = []
    reported: list[float] = []

    async def record(message: object) -> None:
        seen.append(message)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)
        gate.open()

    async def two_hosts() -> None:
        cell = {"freeform": f"# warmkernel: --wait 30\n{gate.wait}"}
        ended = anyio.Event()

        async def waits() -> None:
            await waiter.call_tool("run_python", cell, progress_callback=on_progress)
            ended.set()

        async with (
            mcp_host(cli, name="waiter") as waiter,
            mcp_host(cli, name="other", message_handler=record) as other,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(waits)
            with anyio.fail_after(60):
                while not ended.is_set():  # the other client keeps talking to the daemon meanwhile
                    await call(other, "list_python_executions")
                    with anyio.move_on_after(0.5):
                        await ended.wait()

    anyio.run(two_hosts)
    assert reported, "the waiting client got progress notifications"
    assert not [m for m in seen if isinstance(m, types.ServerNotification)], seen


def test_ephemeral_owns_its_kernel_and_leaves_nothing(cli: Cli) -> None:
    async def ephemeral() -> str:
        async with mcp_host(cli, "--ephemeral") as host:
            assert cli("sessions").stdout.strip() == "No live daemons."
            return (await run(host, "21 * 2"))[1]

    assert anyio.run(ephemeral).endswith("Out[1]: 42")
    state = Path(cli.env["WARMKERNEL_STATE_DIR"])
    assert not state.exists() or not any(state.rglob("journal.jsonl"))


def test_an_idle_daemon_stops_by_itself(cli: Cli) -> None:
    started = cli("start", "--idle-stop", "1", "--json")  # its answer: it may be gone a second later
    assert started.returncode == 0, started.stderr
    daemon = json.loads(started.stdout)
    assert daemon["started"] and daemon["idle_stop_s"] == 1
    assert gone(daemon["pid"])
    assert cli("sessions").stdout.strip() == "No live daemons."


def test_a_daemon_that_ran_no_cell_stops_soon_after_its_last_client_and_one_that_ran_a_cell_stays(
    cli: Cli,
) -> None:
    started = cli("start", "--idle-stop-unused", "1", "--json")
    assert started.returncode == 0, started.stderr
    assert gone(json.loads(started.stdout)["pid"])  # a host that only listed its servers, say
    (cli.workspace / "warmkernel.toml").write_text("idle_stop_unused = 1\n")  # for the daemon `run` starts
    ran = cli("run", "40 + 2")
    assert ran.returncode == 0 and "Out[1]: 42" in ran.stdout, ran.stderr
    (daemon,) = json.loads(cli("sessions", "--json").stdout)
    assert not gone(daemon["pid"], timeout_s=3)  # past its unused stop: it ran a cell, so 12 h hold


def test_idle_stop_and_the_state_directory_come_from_the_project_configuration(cli: Cli) -> None:
    (cli.workspace / "pyproject.toml").write_text('[tool.warmkernel]\nidle_stop = 3600\nstate_dir = "kept"\n')
    environment = {name: value for name, value in cli.env.items() if name != "WARMKERNEL_STATE_DIR"}
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "run", "1"],
        cwd=cli.workspace,
        env=environment,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert live_daemon(cli)["idle_stop_s"] == 3600
    assert list((cli.workspace / "kept").rglob("journal.jsonl"))
    assert cli("start", "--idle-stop", "5").returncode == 0  # a live daemon: its own lifetime stands
    (cli.workspace / "pyproject.toml").write_text("[tool.warmkernel]\nidle_stop = -1\n")
    refused = cli("run", "1")
    assert refused.returncode == 2
    assert "pyproject.toml:2: tool.warmkernel.idle_stop = -1: must be a finite number of" in refused.stderr


def test_forget_deletes_the_journal_only_when_no_daemon_runs_on_it(cli: Cli) -> None:
    assert cli("run", "1").returncode == 0
    refused = cli("forget")
    assert refused.returncode == 1 and "forget --stop" in refused.stderr
    stopped, forgot = cli("forget", "--stop").stdout.splitlines()
    assert stopped.startswith("stopped ") and forgot == f"forgot the records of {cli.workspace}"
    assert cli("sessions").stdout.strip() == "No live daemons."
    fresh = cli("run", "2")
    assert "In [1]" in fresh.stdout and "restarted" not in fresh.stdout


def test_sessions_and_forget_act_on_the_daemon_that_daemon_names(cli: Cli, tmp_path: Path) -> None:
    other = replace(cli, workspace=tmp_path / "other")
    other.workspace.mkdir()
    assert cli("run", "1").returncode == 0 and other("start").returncode == 0
    rows = json.loads(cli("sessions", "--json").stdout)
    (row,) = [row for row in rows if row["workspace"] == str(other.workspace)]
    listed = json.loads(cli("sessions", "--daemon", row["id"], "--json").stdout)
    assert [each["id"] for each in listed] == [row["id"]]
    refused = cli("forget", "--daemon", row["id"])
    assert refused.returncode == 1 and f"`warmkernel forget --daemon {row['id']} --stop`" in refused.stderr
    stopped, forgot = cli("forget", "--daemon", row["id"], "--stop").stdout.splitlines()
    assert stopped.startswith(f"stopped {row['id']}") and forgot.endswith(str(other.workspace))
    assert "In [2]" in cli("run", "2").stdout, "this workspace's daemon and journal are untouched"


def test_a_client_of_another_version_says_so_and_keeps_working(cli: Cli) -> None:
    assert cli("start").returncode == 0
    (descriptor,) = (cli.runtime / "daemons").glob("*.json")
    descriptor.write_text(json.dumps(json.loads(descriptor.read_text()) | {"version": "0.0.1"}))
    done = cli("status")
    assert done.returncode == 0
    assert f"note: this client is warmkernel {__version__}, and the daemon" in done.stdout
    assert "runs warmkernel 0.0.1" in done.stdout


def _serve(cli: Cli, *flags: str) -> subprocess.Popen[str]:
    """`warmkernel serve --port 0 FLAGS`, its stderr read by the test."""
    return subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "serve", "--port", "0", *flags],
        cwd=cli.workspace,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextmanager
def _serving(cli: Cli, *flags: str) -> Iterator[str]:
    """`warmkernel serve --port 0 FLAGS` until the block ends (SIGTERM, which it exits 0 on); its
    first line on stderr."""
    server = _serve(cli, *flags)
    assert server.stderr is not None
    with server.stderr:
        try:
            yield server.stderr.readline()
        finally:
            server.send_signal(signal.SIGTERM)
    assert server.wait(30) == 0


def test_serve_shares_the_daemon_with_http_clients_and_ends_without_it(cli: Cli) -> None:
    with _serving(cli, "--token", "secret") as line:
        url = line.split("serving MCP at ")[1].split()[0]

        async def http_client() -> None:
            async with connect(url, "secret") as client:
                await run(client, "over_http = 'hi'")
                assert "public" not in text_of(await client.call_tool("python_status", {}))
                code, _ = await call_error(client, "read_python_output", line_range="x")
                assert code == "invalid_line_range"

        anyio.run(http_client)
        assert live_daemon(cli)["public_url"] == url
        assert cli("run", "over_http").stdout.splitlines()[-1] == "Out[2]: 'hi'"
    assert live_daemon(cli)["public_url"] is None  # the daemon closed the endpoint and stays
    assert "public_token" not in line  # the caller gave the token
    with _serving(cli) as line:
        token = live_daemon(cli)["public_token"]
        assert line.rstrip().endswith("its bearer token is the public_token of `warmkernel sessions --json`")
        assert token and token not in line


def test_serve_ends_with_its_daemon_and_says_so(cli: Cli) -> None:
    server = _serve(cli)
    assert server.stderr is not None
    with server.stderr:
        assert "serving MCP at" in server.stderr.readline()
        daemon = live_daemon(cli)["id"]
        assert cli("stop").returncode == 0
        assert server.wait(30) == 0
        assert server.stderr.read() == f"warmkernel: daemon {daemon} stopped, and its MCP endpoint with it\n"


def _initialize() -> dict[str, Any]:
    return {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-host", "version": "1"},
    }


def _status() -> dict[str, Any]:
    return {"name": "python_execution_status", "arguments": {}}


def _run(code: str) -> dict[str, Any]:
    return {"name": "run_python", "arguments": {"freeform": code}}


def test_a_daemon_whose_starter_is_gone_before_it_is_ready_stays(cli: Cli) -> None:
    # As when the command that starts it is interrupted: no one reads its ready line.
    read, write = os.pipe()
    os.close(read)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "daemon", "--ready-fd", str(write)],
        cwd=cli.workspace,
        env=cli.env,
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    deadline = time.monotonic() + 60
    while not json.loads(cli("sessions", "--json").stdout):
        assert daemon.poll() is None, daemon.communicate()[1]
        assert time.monotonic() < deadline, "the daemon never became ready"
        time.sleep(0.2)
    assert cli("run", "1 + 1").stdout.splitlines()[-1] == "Out[1]: 2"
    assert cli("stop").returncode == 0
    assert daemon.wait(30) == 0
    assert daemon.stderr is not None
    daemon.stderr.close()
