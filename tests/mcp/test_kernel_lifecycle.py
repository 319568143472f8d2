"""The kernel's life: death and recovery, reset of the whole process tree, start failures."""

from __future__ import annotations

import logging
import os
import re
import signal
import stat
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from jupyter_client.asynchronous.client import AsyncKernelClient
from mcp import Client

from tests.conftest import gone, needs_cgroups, unmarked_grandchild_cell
from tests.gates import Gate
from tests.mcp.calls import body, call, call_error, run
from tests.mcp.conftest import FreshClient
from warmkernel.kernel import cgroup
from warmkernel.kernel.launch import KERNEL_MARK_ENV

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


async def kernel_pid(client: Client) -> int:
    """The current kernel's pid, once it is ready."""
    await run(client, "pass")
    match = re.search(r"pid (\d+)", await call(client, "python_status"))
    assert match
    return int(match.group(1))


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        pytest.param("import os; os._exit(3)", "exit code 3", id="os-exit"),
        pytest.param("import ctypes; ctypes.string_at(0)", "signal SIGSEGV", id="segfault"),
    ],
)
async def test_kernel_death_marks_the_record_died_and_a_fresh_kernel_starts(
    fresh_client: FreshClient, code: str, reason: str
) -> None:
    async with fresh_client() as client:
        await run(client, "survivor = 1")
        number, text = await run(client, code)
        assert number == 2
        header = text.splitlines()
        assert f"died ({reason})" in text
        assert "generation 2" in header[0]  # the one-time notice
        status = await call(client, "python_execution_status", execution=2)
        assert "execution 2: died" in status and f"reason: {reason}" in status
        number, text = await run(client, "survivor")
        assert number == 3 and "NameError" in text
        assert "died" not in text  # the notice is said once
        assert "generation 2" in await call(client, "python_status")


async def test_sigkill_from_outside_while_running_is_a_death(fresh_client: FreshClient, gate: Gate) -> None:
    async with fresh_client() as client:
        pid = await kernel_pid(client)
        number, _ = await run(client, f"# warmkernel: --wait 0.1\n{gate.wait}")
        os.kill(pid, signal.SIGKILL)
        text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert "died (signal SIGKILL)" in text
        assert (await run(client, "1 + 1"))[1].endswith(f"Out[{number + 1}]: 2")


async def test_death_while_idle_is_reported_once_on_the_next_reply(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        await run(client, "1")
        os.kill(await kernel_pid(client), signal.SIGKILL)
        with anyio.fail_after(30):
            # The server notices the death by itself; the test can only ask until it has.
            while "generation 2" not in (status := await call(client, "python_status")):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert status.startswith("note: the kernel (generation 1) died (signal SIGKILL)")
        assert not (await call(client, "python_status")).startswith("note:")


CHILD = (
    "import subprocess, time\n"
    "grandchild = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
    "print(grandchild.pid, flush=True)\n"
    "time.sleep(300)\n"
)


async def test_reset_kills_a_setsid_grandchild(fresh_client: FreshClient) -> None:
    spawn = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {CHILD!r}], stdout=subprocess.PIPE, text=True)\n"
        "child.pid, int(child.stdout.readline())"
    )
    async with fresh_client() as client:
        _, text = await run(client, spawn)
        child, grandchild = (int(pid) for pid in re.findall(r"\d+", body(text)[0].split(":", 1)[1]))
        assert os.getsid(grandchild) != os.getsid(child)
        kernel = await kernel_pid(client)
        await call(client, "reset_python")
        assert gone(kernel)
        assert gone(child)
        assert gone(grandchild)


# A child that starts a grandchild in a session of its own and exits: the grandchild is adopted
# by init (or a subreaper), so it is no longer in the kernel's process tree.
DOUBLE_FORK = (
    "import subprocess, sys\n"
    "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
    "start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
    "stderr=subprocess.DEVNULL)\n"
    "print(grandchild.pid)"
)


async def test_reset_kills_a_double_forked_grandchild(fresh_client: FreshClient) -> None:
    spawn = (
        "import subprocess, sys\n"
        f"int(subprocess.run([sys.executable, '-c', {DOUBLE_FORK!r}], capture_output=True, text=True).stdout)"
    )
    async with fresh_client() as client:
        _, text = await run(client, spawn)
        grandchild = int(body(text)[0].split(":", 1)[1])
        kernel = await kernel_pid(client)
        assert grandchild not in {proc.pid for proc in psutil.Process(kernel).children(recursive=True)}
        await call(client, "reset_python")
        assert gone(grandchild)


async def kernel_cgroup(client: Client) -> Path:
    match = re.search(r"^process tracking: cgroup (\S+)", await call(client, "python_status"), re.MULTILINE)
    assert match
    return Path(match.group(1))


@needs_cgroups
@pytest.mark.parametrize("end", ["reset_python", "stop_python_kernel"])
async def test_reset_and_stop_kill_an_unmarked_double_forked_grandchild(
    fresh_client: FreshClient, end: str
) -> None:
    async with fresh_client() as client:
        _, text = await run(client, unmarked_grandchild_cell())
        grandchild = psutil.Process(int(body(text)[0].split(":", 1)[1]))
        assert KERNEL_MARK_ENV not in grandchild.environ()
        assert os.getsid(grandchild.pid) != os.getsid(await kernel_pid(client))
        group = await kernel_cgroup(client)
        assert str(grandchild.pid) in (group / "cgroup.procs").read_text().split()
        await call(client, end, **({"name": "main"} if end == "stop_python_kernel" else {}))
        assert gone(grandchild.pid)
        assert not group.exists()


@needs_cgroups
async def test_a_kernel_that_dies_takes_what_it_started_and_its_cgroup(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        _, text = await run(client, unmarked_grandchild_cell())
        grandchild = int(body(text)[0].split(":", 1)[1])
        group = await kernel_cgroup(client)
        assert "died (exit code 3)" in (await run(client, "import os; os._exit(3)"))[1]
        with anyio.fail_after(30):
            while not gone(grandchild) or group.exists():  # noqa: ASYNC110 (the server acts on its own)
                await anyio.sleep(0.05)


async def test_where_no_cgroup_can_be_made_kernels_start_and_are_tracked_by_session_and_marker(
    fresh_client: FreshClient,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As where this user may not create cgroups: making one fails with an OSError.
    monkeypatch.setattr(cgroup, "_parent", lambda: tmp_path / "no-such-cgroup")
    spawn = (
        "import subprocess, sys\n"
        f"int(subprocess.run([sys.executable, '-c', {DOUBLE_FORK!r}], capture_output=True, text=True).stdout)"
    )
    caplog.set_level(logging.INFO, logger=cgroup.__name__)
    async with fresh_client() as client:
        _, text = await run(client, spawn)
        grandchild = int(body(text)[0].split(":", 1)[1])
        assert "process tracking: session scan and environment marker" in await call(client, "python_status")
        await call(client, "reset_python")
        assert gone(grandchild)
        assert "Out[2]: 2" in (await run(client, "1 + 1"))[1]
    said = [record.getMessage() for record in caplog.records if record.name == cgroup.__name__]
    assert len(said) == 1 and "tracked by session and environment marker" in said[0], said


async def test_the_kernel_environment_holds_no_token_of_warmkernel(
    fresh_client: FreshClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ("WARMKERNEL_TOKEN", "WARMKERNEL_JUPYTER_TOKEN", "JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE")
    for name in names:
        monkeypatch.setenv(name, "secret-value")
    async with fresh_client() as client:
        _, text = await run(client, "import os; sorted(v for v in os.environ.values() if 'secret' in v)")
        assert body(text) == ["Out[1]: []"]


async def test_records_stay_readable_after_reset(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        await run(client, "print('kept')")
        await call(client, "reset_python")
        assert (await call(client, "read_python_output", execution=1)).splitlines()[1:] == ["kept"]
        assert "kernel generation: 1" in await call(client, "python_execution_status", execution=1)


async def test_a_missing_interpreter_fails_every_call_until_it_is_there(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    python = tmp_path / "later" / "python3"
    async with fresh_client(python=str(python)) as client:
        for _ in range(2):
            code, message = await call_error(client, "run_python", freeform="1")
            assert code == "python_not_usable"
            assert message == f"{python} does not exist or is not executable"
        assert "kernel: failed" in await call(client, "python_status")
        python.parent.mkdir()  # fixed: the next call starts a kernel
        python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        python.chmod(0o755)
        assert (await run(client, "6 * 7"))[1].endswith("42")


async def test_interpreter_without_ipykernel_is_named_with_the_fix(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")])
    python = str(tmp_path / "bare" / "bin" / "python")
    async with fresh_client(python=python) as client:
        code, message = await call_error(client, "run_python", freeform="1")
        assert code == "python_not_usable"
        assert f"{python} has no ipykernel" in message and "pip install ipykernel" in message


async def test_a_kernel_that_exits_during_start_is_kernel_start_failed_with_its_exit(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    # An interpreter that has ipykernel as far as the check can tell, but whose kernel exits at once.
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\n[ "$2" = "import ipykernel" ] && exit 0\necho no kernel >&2\nexit 3\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    async with fresh_client(python=str(python)) as client:
        code, message = await call_error(client, "run_python", freeform="1")
    assert code == "kernel_start_failed"
    assert "the kernel exited during start" in message and "3" in message


async def test_python_status_reports_workspace_interpreter_and_kernel(client: Client) -> None:
    await run(client, "pass")
    status = await call(client, "python_status")
    assert re.search(r"^workspace: /.+ws", status, re.MULTILINE)
    assert "workspace resolution: launch_cwd" in status
    assert f"interpreter: {sys.executable}" in status
    assert re.search(r"^kernel: ready, generation \d+, pid \d+$", status, re.MULTILINE)


async def test_kernel_runs_in_the_workspace(client: Client) -> None:
    status = await call(client, "python_status")
    workspace = re.search(r"^workspace: (.+)$", status, re.MULTILINE)
    assert workspace
    _, text = await run(client, "import os; os.getcwd()")
    assert body(text)[0].endswith(repr(workspace.group(1)))


async def test_connection_file_lets_another_client_attach_to_the_same_kernel(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client() as client:
        await run(client, "shared = 'from the agent'")
        match = re.search(r"^connection file: (\S+)", await call(client, "python_status"), re.MULTILINE)
        assert match
        path = match.group(1)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        attached = AsyncKernelClient()
        attached.load_connection_file(path)
        attached.start_channels()
        try:
            with anyio.fail_after(30):
                await attached.wait_for_ready(timeout=30)
                reply = await attached.execute_interactive(
                    "", user_expressions={"value": "shared"}, store_history=False, timeout=30
                )
        finally:
            attached.stop_channels()
        assert reply["content"]["user_expressions"]["value"]["data"]["text/plain"] == "'from the agent'"


async def test_cells_sent_during_a_reset_or_a_stop_never_reach_the_dying_kernel(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client() as client:
        await run(client, "pass")
        for end in (("reset_python", {}), ("stop_python_kernel", {"name": "main"})):
            replies = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, *end)
                replies = [await client.call_tool("run_python", {"freeform": "'after'"}) for _ in range(3)]
            # each ran (or was killed) in the old kernel, or ran in the fresh one: none is left running
            for reply in replies:
                text = "\n".join(getattr(block, "text", "") for block in reply.content)
                assert not reply.is_error, text
                header = text.splitlines()[0]
                assert text.rstrip().endswith("'after'") or ": killed (" in header, text
