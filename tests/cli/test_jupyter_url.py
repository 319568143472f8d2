"""`--jupyter-url` from the command line: the daemon's kernel lives on that server; its token stays secret."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import psutil
import pytest

from tests.cli.conftest import Cli
from tests.jupyter_servers import enterprise_gateway
from warmkernel.daemon.jupyter_host import owned_jupyter_server

pytestmark = pytest.mark.timeout(300)  # Enterprise Gateway's venv is built on a machine's first run


def test_start_with_a_jupyter_url_runs_there_and_keeps_the_token_off_command_lines(cli: Cli) -> None:
    async def body() -> None:
        async with owned_jupyter_server(cli.workspace) as host:
            started = await anyio.to_thread.run_sync(
                lambda: cli("start", "--jupyter-url", host.url, "--jupyter-token", host.token)
            )
            assert started.returncode == 0, started.stdout + started.stderr
            (descriptor,) = json.loads(cli("sessions", "--json").stdout)
            assert host.token not in " ".join(psutil.Process(descriptor["pid"]).cmdline())

            ran = await anyio.to_thread.run_sync(lambda: cli("run", "import os; os.getpid()"))
            assert ran.returncode == 0, ran.stdout + ran.stderr
            kernel_pid = int(ran.stdout.splitlines()[-1].rpartition(" ")[2])
            assert kernel_pid in [p.pid for p in psutil.Process(host.pid).children(recursive=True)]
            headers = {"Authorization": f"token {host.token}"}
            with httpx2.Client(base_url=host.url, headers=headers, trust_env=False) as rest:
                assert len(rest.get("api/kernels").json()) == 1
                assert (await anyio.to_thread.run_sync(lambda: cli("stop"))).returncode == 0
                assert rest.get("api/kernels").json() == []  # the daemon deleted its kernel

    anyio.run(body)


def test_enterprise_gateway_from_the_command_line_gets_the_user_and_every_kernel_variable(
    cli: Cli, tmp_path: Path
) -> None:
    async def body() -> None:
        root = tmp_path / "eg-root"
        root.mkdir()
        async with enterprise_gateway(root) as eg:
            given = ["--jupyter-url", eg.url, "--jupyter-token", eg.token, "--kernel-launch-timeout", "60"]
            given += [
                "--kernel-username",
                "agent",
                "--kernel-env",
                "KERNEL_A=1",
                "--kernel-env",
                "KERNEL_B=x=y",
            ]
            started = await anyio.to_thread.run_sync(lambda: cli("start", *given))
            assert started.returncode == 0, started.stdout + started.stderr
            code = "import os; [os.environ[n] for n in ('KERNEL_USERNAME', 'KERNEL_A', 'KERNEL_B')]"
            ran = await anyio.to_thread.run_sync(lambda: cli("run", code))
            assert ran.returncode == 0, ran.stdout + ran.stderr
            assert "['agent', '1', 'x=y']" in ran.stdout
            # Repeated flags compare as given: the same ones reach the daemon, others are refused.
            assert (await anyio.to_thread.run_sync(lambda: cli("start", *given))).returncode == 0
            other = [*given[:-1], "KERNEL_B=z"]
            refused = await anyio.to_thread.run_sync(lambda: cli("start", *other))
            assert refused.returncode == 2 and "kernel_options_differ" in refused.stdout + refused.stderr
            assert (await anyio.to_thread.run_sync(lambda: cli("stop"))).returncode == 0

    anyio.run(body)


def test_a_kernel_variable_without_a_name_is_a_usage_error(cli: Cli) -> None:
    refused = cli("start", "--jupyter-url", "http://127.0.0.1:1/", "--kernel-env", "NOEQUALS")
    assert refused.returncode == 2
    assert "--kernel-env: expected NAME=VALUE, not 'NOEQUALS'" in refused.stderr


def test_another_token_for_the_live_daemons_server_is_refused_without_showing_either(cli: Cli) -> None:
    server = ["--jupyter-url", "http://127.0.0.1:1/"]  # nothing answers: the daemon starts all the same
    assert cli("start", *server, "--jupyter-token", "first-secret").returncode == 0
    refused = cli("start", *server, "--jupyter-token", "second-secret")
    assert refused.returncode == 2
    message = refused.stderr
    assert "kernel_options_differ" in message and "--jupyter-token (sha256 " in message
    assert "first-secret" not in message and "second-secret" not in message
    assert cli("start", *server, "--jupyter-token", "first-secret").returncode == 0, "the same token"
    cli.extra_env["WARMKERNEL_JUPYTER_TOKEN"] = "for-another-server"
    ran = cli("run", "1")  # fails: nothing answers at that URL; but not for the token
    assert "kernel_options_differ" not in ran.stderr, "a token in the environment names no server"
    assert cli("stop").returncode == 0
