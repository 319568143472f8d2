"""The `warmkernel` command line: verbs, exit statuses, sessions, daemons and `init`."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client

from tests.cli.conftest import Cli
from tests.gates import Gate
from tests.mcp.calls import call, run
from tests.mcp.conftest import stdio_parameters


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param("1 + 1", 0, id="completed"),
        pytest.param("1/0", 1, id="error"),
        pytest.param("# warmkernel: --wait 0.2\n{gate}", 3, id="still-running"),
        pytest.param("import os; os._exit(1)", 4, id="died"),
    ],
)
def test_run_exit_status_follows_the_execution_state(
    daemon_cli: Cli, gate: Gate, code: str, status: int
) -> None:
    done = daemon_cli("run", code.format(gate=gate.wait))
    assert done.returncode == status, done.stdout + done.stderr
    if status == 3:
        gate.open()
        assert daemon_cli("wait", "--timeout", "30").returncode == 0


def test_run_timeout_bounds_the_wait_unless_the_cell_sets_its_own(daemon_cli: Cli, gate: Gate) -> None:
    short = daemon_cli("run", "--timeout", "0.3", gate.wait)
    assert short.returncode == 3, short.stdout
    gate.open()
    assert daemon_cli("wait", "--timeout", "30").returncode == 0
    own = daemon_cli("run", "--timeout", "0.3", "# warmkernel: --wait 30\nimport time; time.sleep(1)")
    assert own.returncode == 0, own.stdout


def test_a_short_run_timeout_is_for_the_cell_not_for_a_kernel_start(cli: Cli) -> None:
    assert cli("start").returncode == 0 and cli("stop-kernel", "main").returncode == 0
    done = cli("run", "--timeout", "0.3", "6 * 7")  # the kernel starts again for it: about a second
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith(": 42")


def test_run_timeout_on_a_cell_magic_leaves_its_body_as_written(daemon_cli: Cli) -> None:
    ran = daemon_cli("run", "--timeout", "30", "%%writefile magic.txt\nhello")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (daemon_cli.workspace / "magic.txt").read_text() == "hello\n", "no directive line written"
    number = ran.stdout.split("]")[0].removeprefix("In [")
    exported = daemon_cli("export", "--executions", number, "--format", "py").stdout
    assert exported.rstrip().endswith("%%writefile magic.txt\nhello"), "as Jupyter would run it again"


def test_usage_errors_exit_2(daemon_cli: Cli) -> None:
    assert daemon_cli("run", "1").returncode == 0
    done = daemon_cli("read", "--lines", "1-3")
    assert done.returncode == 2
    assert done.stderr.startswith("warmkernel: invalid_line_range:")
    assert daemon_cli("run").returncode == 2
    assert daemon_cli("bogus-verb").returncode == 2


def test_interrupted_run_exits_4(daemon_cli: Cli, gate: Gate) -> None:
    assert daemon_cli("run", f"# warmkernel: --wait 0.1\n{gate.wait}").returncode == 3
    assert daemon_cli("interrupt").stdout.startswith("interrupt_sent")
    done = daemon_cli("wait", "--timeout", "30")
    assert done.returncode == 4
    assert "interrupted" in done.stdout.splitlines()[0]


def test_run_reads_a_file_and_stdin(daemon_cli: Cli) -> None:
    (daemon_cli.workspace / "cell.py").write_text("from_file = 'f'\nfrom_file * 3")
    assert daemon_cli("run", "-f", "cell.py").stdout.splitlines()[-1].endswith("'fff'")
    assert daemon_cli("run", "-", stdin="print('from stdin')").stdout.splitlines()[-1] == "from stdin"


def test_verbs_print_what_the_model_reads(daemon_cli: Cli) -> None:
    assert daemon_cli("run", "pass").returncode == 0  # an older execution for `history` to count
    first = daemon_cli("run", "for i in range(1, 6): print(f'line {i}')").stdout
    number = int(first.split("]")[0].removeprefix("In ["))
    assert daemon_cli("read", str(number), "--lines", "2:3").stdout.splitlines()[1:] == ["line 2", "line 3"]
    search = daemon_cli("search", "line [45]", str(number), "--regex").stdout.splitlines()
    assert search[1:] == ["M 4 | line 4", "M 5 | line 5"]
    assert daemon_cli("show", str(number)).stdout == first
    history = daemon_cli("history", "--limit", "1").stdout
    assert history.split()[0] == str(number)
    assert history.endswith(
        f" older execution{'s' if number > 2 else ''}; warmkernel history --limit {number} lists them all)\n"
    )
    assert "kernel: ready" in daemon_cli("status").stdout


def test_vars_and_inspect_read_the_namespace_without_running_a_cell(daemon_cli: Cli) -> None:
    assert daemon_cli("run", "settings = {'depth': 3, 'name': 'x'}").returncode == 0
    history = daemon_cli("history", "--limit", "1").stdout
    assert "settings" in daemon_cli("vars").stdout
    summary = json.loads(daemon_cli("inspect", "settings", "--json").stdout)
    assert (summary["name"], summary["type"], summary["length"]) == ("settings", "dict", 2)
    assert daemon_cli("inspect", "no_such_name").returncode == 2
    assert daemon_cli("history", "--limit", "1").stdout == history  # nothing was numbered


def test_json_prints_the_structured_result(daemon_cli: Cli) -> None:
    data = json.loads(daemon_cli("run", "--json", "print('j')").stdout)
    assert (data["state"], data["output"]) == ("completed", "j")
    error = json.loads(daemon_cli("read", "--json", "--lines", "x").stdout)
    assert error["error"]["code"] == "invalid_line_range"


def test_cli_reaches_the_kernel_an_agent_is_using(cli: Cli) -> None:
    async def agent_then_cli() -> str:
        async with Client(stdio_parameters(cli.workspace, env=cli.env)) as agent:
            await run(agent, "x = 'set by the agent'")
            done = await anyio.to_thread.run_sync(lambda: cli("run", "x"))
            assert done.returncode == 0, done.stderr
            listing = await call(agent, "list_python_executions")
            assert listing.splitlines()[0].split()[0] == "2"  # the CLI's cell took the next number
            return done.stdout

    assert anyio.run(agent_then_cli).splitlines()[-1] == "Out[2]: 'set by the agent'"


def test_descriptor_and_runtime_directory_are_private(daemon_cli: Cli) -> None:
    sessions = daemon_cli.runtime / "daemons"
    assert stat.S_IMODE(daemon_cli.runtime.stat().st_mode) == 0o700
    assert stat.S_IMODE(sessions.stat().st_mode) == 0o700
    (descriptor,) = sessions.glob("*.json")
    assert stat.S_IMODE(descriptor.stat().st_mode) == 0o600
    data = json.loads(descriptor.read_text())
    assert set(data) >= {"id", "pid", "workspace", "socket", "started_at", "version", "kernel_options"}
    assert data["workspace"] == str(daemon_cli.workspace)
    socket = Path(data["socket"])
    assert stat.S_ISSOCK(socket.stat().st_mode) and stat.S_IMODE(socket.parent.stat().st_mode) == 0o700


def test_stale_descriptor_is_ignored_and_removed(cli: Cli) -> None:
    sessions = cli.runtime / "daemons"
    sessions.mkdir(parents=True)
    stale = sessions / "deadbeef.json"
    dead = psutil.Popen(["true"])
    dead.wait()
    stale.write_text(
        json.dumps(
            {
                "id": "deadbeef",
                "pid": dead.pid,
                "workspace": str(cli.workspace),
                "socket": "/nonexistent/mcp.sock",
                "started_at": time.time(),
                "field_of_a_newer_version": 1,
            }
        )
    )
    assert cli("sessions").stdout.strip() == "No live daemons."
    assert not stale.exists()


def test_two_hosts_and_the_cli_share_one_daemon(cli: Cli) -> None:
    async def two_agents() -> None:
        async with (
            Client(stdio_parameters(cli.workspace, env=cli.env)) as first,
            Client(stdio_parameters(cli.workspace, env=cli.env)) as second,
        ):
            await run(first, "shared = 'by the first host'")
            assert (await run(second, "shared"))[1].endswith("'by the first host'")
            (line, _) = cli("sessions").stdout.splitlines()  # one daemon, described on two lines
            assert "clients 2" in cli("sessions").stdout, line

    anyio.run(two_agents)


def test_auto_start_then_stop(cli: Cli) -> None:
    assert cli("sessions").stdout.strip() == "No live daemons."
    assert cli("run", "1").returncode == 0
    (line, _) = cli("sessions").stdout.splitlines()
    pid = int(line.split("pid")[1].split()[0])
    stopped = cli("stop")
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped ")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert cli("sessions").stdout.strip() == "No live daemons."
    assert cli("stop").returncode == 2


def test_sessions_counts_a_kernels_memory_as_the_kernels_not_the_daemons(cli: Cli) -> None:
    assert cli("run", "held = b'x' * (200 << 20)").returncode == 0
    (row,) = json.loads(cli("sessions", "--json").stdout)
    memory = row["memory_bytes"]
    assert memory["kernels"] > 200 << 20, memory
    assert 10 << 20 < memory["daemon"] < 200 << 20, memory  # the daemon's own, not its kernel's too
    line = cli("sessions").stdout.splitlines()[1]
    assert re.search(r", 1 execution, memory daemon \d+ MiB, kernels \d+ MiB, idle ", line), line


def test_a_daemon_started_by_a_verb_shows_as_itself_not_as_the_verb(cli: Cli) -> None:
    assert cli("run", "secret = 'hunter2'").returncode == 0
    (row,) = json.loads(cli("sessions", "--json").stdout)
    title = " ".join(psutil.Process(row["pid"]).cmdline()).strip()
    assert title == f"warmkernel daemon {cli.workspace}"  # the cell's source is not in `ps`


def test_start_passes_output_limits_to_the_daemon(cli: Cli) -> None:
    assert cli("start", "--max-output-bytes", "3000", "--spill-threshold-bytes", "1000").returncode == 0
    assert cli("run", "print('x' * 2500)").returncode == 0
    assert cli("run", "print('y' * 2500)").returncode == 0
    assert "output of execution 1 was dropped to stay under the output limit" in cli("read", "1").stdout


@pytest.mark.parametrize(
    "verb",
    [
        "run",
        "wait",
        "status",
        "show",
        "read",
        "search",
        "history",
        "vars",
        "inspect",
        "interrupt",
        "reset",
        "sessions",
        "start",
        "stop",
        "mcp",
        "serve",
        "init",
    ],
)
def test_every_verb_has_help(cli: Cli, verb: str) -> None:
    done = cli(verb, "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: warmkernel " + verb)


LIVE_STEP = r"\r\x1b\[KIn \[1\] running for [\d.]+ m?s: step \d"
"""The live line once it shows the cell's latest output."""


def stderr_until(
    process: subprocess.Popen[bytes], pattern: re.Pattern[bytes], timeout_s: float = 60
) -> bytes:
    """What `process` wrote to its stderr until `pattern` appeared there (within `timeout_s`)."""
    assert process.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout_s
    while not pattern.search(seen):
        remaining = deadline - time.monotonic()
        assert remaining > 0 and select.select([process.stderr], [], [], remaining)[0], (
            f"no {pattern}: {seen!r}"
        )
        chunk = os.read(process.stderr.fileno(), 4096)
        assert chunk, f"stderr ended before {pattern}: {seen!r}"
        seen += chunk
    return seen


def test_run_on_a_terminal_shows_a_live_line_of_the_time_then_of_the_cells_latest_output(
    cli: Cli, gate: Gate
) -> None:
    cell = f"print('step 0', flush=True)\n{gate.wait}\nprint('done')"
    controller, terminal = pty.openpty()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "warmkernel", "run", cell],
            cwd=cli.workspace,
            env=cli.env,
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=subprocess.PIPE,
        ) as done:
            assert done.stderr is not None
            live = stderr_until(
                done, re.compile(LIVE_STEP.encode())
            )  # the cell waits on its gate until its line is shown
            gate.open()
            live += done.stderr.read()
            done.wait(90)
        shown = os.read(controller, 4096).decode()
    finally:
        os.close(controller)
        os.close(terminal)
    assert done.returncode == 0
    assert "done" in shown
    stderr = live.decode()  # bytes: text mode would turn each \r into \n
    assert re.search(r"\r\x1b\[Krunning \d+\.\d s", stderr)
    assert re.search(LIVE_STEP, stderr), stderr
    assert stderr.endswith("\r\x1b[K")  # the line is cleared before the reply is printed


def test_no_elapsed_time_line_when_stdout_is_not_a_terminal(daemon_cli: Cli) -> None:
    done = daemon_cli("run", "import time; time.sleep(0.5)")
    assert done.returncode == 0 and done.stderr == ""


def test_top_level_help_shows_examples(cli: Cli) -> None:
    assert "examples:" in cli("--help").stdout


def test_no_daemon_is_left_behind(cli: Cli) -> None:
    assert cli("run", "1").returncode == 0
    pid = int(cli("sessions").stdout.split("pid")[1].split()[0])
    assert os.getpgid(pid) == pid  # detached: its own session and process group


def test_summarizers_configured_in_pyproject_reach_the_kernel(cli: Cli) -> None:
    (cli.workspace / "pyproject.toml").write_text(
        '[tool.warmkernel.inspection]\nsummarizers = ["team_summaries:tagged"]\n'
    )
    (cli.workspace / "team_summaries.py").write_text(
        "def tagged(obj):\n    return {'kind': 'tagged'} if hasattr(obj, 'tag') else None\n"
    )
    assert cli("run", "class T:\n    tag = 'blue'\nt = T()").returncode == 0
    summary = json.loads(cli("inspect", "t", "--json").stdout)
    assert (summary["kind"], summary["summarizer"]) == ("tagged", "team_summaries:tagged")


def test_bad_summarizer_config_stops_the_server_with_a_clear_code(cli: Cli) -> None:
    (cli.workspace / "warmkernel.toml").write_text("[inspection]\nsummarizers = ['not a reference']\n")
    done = cli("mcp")
    assert done.returncode == 2
    assert "invalid_config" in done.stderr and "warmkernel.toml" in done.stderr


def test_input_answers_a_waiting_cell_and_waits_for_it(daemon_cli: Cli) -> None:
    asked = daemon_cli("run", "name = input('name? ')\nprint('hello', name)")
    assert asked.returncode == 3 and "name?" in asked.stdout
    answered = daemon_cli("input", "Ada")
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert answered.stdout.splitlines()[-2:] == ["name? Ada", "hello Ada"]
    refused = daemon_cli("input", "again")
    assert refused.returncode == 1 and refused.stderr.startswith("warmkernel: not_awaiting_input:")


def test_input_dash_reads_the_answer_from_standard_input(daemon_cli: Cli) -> None:
    asked = daemon_cli("run", "import getpass\nsecret = getpass.getpass('token? ')\nprint(len(secret))")
    assert asked.returncode == 3 and "token?" in asked.stdout
    nothing = daemon_cli("input", "-", stdin="")
    assert nothing.returncode == 2 and "standard input gave no line" in nothing.stderr
    answered = daemon_cli("input", "-", stdin="s3cr3t\r\nmore\n")  # one line, its line end off
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert answered.stdout.splitlines()[-1] == "6" and "s3cr3t" not in answered.stdout


def test_run_waiting_for_input_exits_3_like_a_running_cell(daemon_cli: Cli) -> None:
    done = daemon_cli("run", "answer = input('name? ')")
    assert done.returncode == 3
    assert "name?" in done.stdout
    assert daemon_cli("interrupt").stdout.startswith("interrupt_sent")
    assert daemon_cli("wait", "--timeout", "30").returncode == 4


def test_the_smoke_example_runs_its_cells_in_this_shells_daemon(cli: Cli) -> None:
    example = Path(__file__).parents[2] / "examples" / "smoke.py"
    command = [sys.executable, str(example)]
    done = subprocess.run(command, cwd=cli.workspace, env=cli.env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "Out[2]: 42" in done.stdout and "ZeroDivisionError" in done.stdout
    # The daemon it started is the one this shell's `warmkernel` reaches (the same runtime directory).
    assert cli("run", "answer").stdout.splitlines()[-1] == "Out[5]: 42"
