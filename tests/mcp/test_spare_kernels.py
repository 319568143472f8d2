"""Spare kernels: a reset swaps in a kernel started ahead, unless the environment changed since."""

from __future__ import annotations

import os
import re
import signal
import site
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client

from tests.mcp.calls import body, call, run
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MARK = "import os; os.environ['WK_SPARE_MARK'] = '1'\n"


def gone(pid: int) -> bool:
    """Dead or a zombie (some machines' PID 1 does not reap orphans)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kernels_in(root: str) -> set[int]:
    """Live kernel processes of this test process whose connection file lies in the runtime root."""
    pids = set()
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and any(
                arg.startswith(root) for arg in process.cmdline()
            ):
                pids.add(process.pid)
        except psutil.Error:
            pass
    return pids


class Kernels:
    """The current kernel and the spares waiting beside it, as python_status and psutil see them."""

    def __init__(self, status: str) -> None:
        current = re.search(r"^kernel: ready, generation (\d+), pid (\d+)$", status, re.MULTILINE)
        connection = re.search(r"^connection file: (\S+)", status, re.MULTILINE)
        assert current and connection, status
        self.generation, self.pid = int(current.group(1)), int(current.group(2))
        self.root = str(Path(connection.group(1)).parent) + os.sep
        self.spares = kernels_in(self.root) - {self.pid}


async def spares_ready(client: Client, count: int = 1) -> Kernels:
    """Once `count` spares are ready: the current kernel and the spares' pids."""
    with anyio.fail_after(60):
        while True:
            status = await call(client, "python_status")
            if f"spare kernels: {count} of {count} ready" in status:
                kernels = Kernels(status)
                if len(kernels.spares) == count:
                    return kernels
            await anyio.sleep(0.05)


async def after_reset(client: Client) -> Kernels:
    await call(client, "reset_python")
    return Kernels(await call(client, "python_status"))


async def test_reset_swaps_in_the_waiting_spare_twice_in_a_row(fresh_client: FreshClient) -> None:
    async with fresh_client(spare_kernels=1) as client:
        await run(client, "lost = 1")
        for generation, number in ((2, 2), (3, 4)):
            before = await spares_ready(client)
            now = await after_reset(client)
            assert now.generation == generation
            assert now.pid in before.spares  # already running before the reset
            assert gone(before.pid)
            found, text = await run(client, "lost")
            assert found == number and "NameError" in text
            assert (await run(client, "lost = 1"))[0] == number + 1


async def test_python_status_counts_the_ready_spares(fresh_client: FreshClient) -> None:
    async with fresh_client(spare_kernels=2) as client:
        await spares_ready(client, 2)
        status = await call(client, "python_status")
        assert "spare kernels: 2 of 2 ready" in status
    async with fresh_client() as client:
        await run(client, "pass")
        assert "spare kernels" not in await call(client, "python_status")


async def test_shutdown_kills_every_spare_also_one_still_starting(fresh_client: FreshClient) -> None:
    async with fresh_client(spare_kernels=2) as client:
        kernels = await spares_ready(client, 2)
        await call(client, "reset_python")  # its replacement spare is starting as the server closes
        assert kernels_in(kernels.root)
    assert all(gone(pid) for pid in {kernels.pid, *kernels.spares})
    assert not kernels_in(kernels.root)


async def test_a_spare_that_dies_while_waiting_is_replaced(fresh_client: FreshClient) -> None:
    async with fresh_client(spare_kernels=1) as client:
        await run(client, "pass")
        (dead,) = (await spares_ready(client)).spares
        os.kill(dead, signal.SIGKILL)
        with anyio.fail_after(60):
            while not gone(dead):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        (replacement,) = (await spares_ready(client)).spares
        assert replacement != dead
        assert (await after_reset(client)).pid == replacement
        assert (await run(client, "1 + 1"))[1].endswith("Out[2]: 2")


async def venv_with_ipykernel(directory: Path) -> tuple[Path, Path]:
    """A bare venv (no pip) that imports ipykernel from this one through a `.pth`; its python and site dir."""
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(directory)])
    python = directory / "bin" / "python"
    probe = await anyio.run_process([str(python), "-c", "import site; print(site.getsitepackages()[0])"])
    site_packages = Path(probe.stdout.decode().strip())
    (site_packages / "dev.pth").write_text("".join(f"{path}\n" for path in site.getsitepackages()))
    return python, site_packages


async def test_a_spare_started_before_a_pth_file_appeared_is_replaced(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    python, site_packages = await venv_with_ipykernel(tmp_path / "venv")
    async with fresh_client(python=str(python), spare_kernels=1) as client:
        await run(client, "pass")
        stale = await spares_ready(client)
        (site_packages / "marker.pth").write_text(MARK)
        now = await after_reset(client)
        assert now.pid not in stale.spares
        _, text = await run(client, "import os; os.environ.get('WK_SPARE_MARK')")
        assert body(text) == ["Out[2]: '1'"]
        with anyio.fail_after(30):
            while not all(gone(pid) for pid in stale.spares):  # noqa: ASYNC110
                await anyio.sleep(0.05)

        # The replacement started after the change: the next reset swaps it in.
        fresh = await spares_ready(client)
        assert (await after_reset(client)).pid in fresh.spares
        _, text = await run(client, "import os; os.environ.get('WK_SPARE_MARK')")
        assert body(text) == ["Out[3]: '1'"]
