"""`--jupyter-url` from the command line: the daemon's kernel lives on that server; its token stays secret."""

from __future__ import annotations

import json

import anyio
import httpx2
import psutil
import pytest

from tests.cli.conftest import Cli
from warmkernel.jupyter_host import owned_jupyter_server

pytestmark = pytest.mark.timeout(180)


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
