"""The Jupyter Server warmkernel owns for IDE attach: loopback, token-only, gone with its kernels at exit."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import psutil
import pytest

from warmkernel.daemon.jupyter_host import owned_jupyter_server
from warmkernel.errors import WarmkernelError

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_server_answers_only_with_its_token_and_leaves_nothing_running(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with owned_jupyter_server(tmp_path) as host:
            assert host.url.startswith("http://127.0.0.1:") and host.url.endswith("/")
            assert host.server_url == f"{host.url}?token={host.token}"
            command = psutil.Process(host.pid).cmdline()
            assert host.token not in " ".join(command)
            assert command[1] == "-c" and "\n" not in command[2], "a short program text in ps"
            auth = {"Authorization": f"token {host.token}"}
            # Separate clients: an authenticated reply sets a login cookie the other must not send.
            async with httpx2.AsyncClient(trust_env=False, timeout=30) as anonymous:
                assert (await anonymous.get(f"{host.url}api/status")).status_code == 403
                assert (await anonymous.get(f"{host.url}api/kernels")).status_code == 403
            async with httpx2.AsyncClient(headers=auth, trust_env=False, timeout=30) as http:
                assert (await http.get(f"{host.url}api/status")).status_code == 200
                assert (await http.get(f"{host.url}api/contents")).json()["path"] == ""
                created = await http.post(f"{host.url}api/kernels", json={"name": "python3"})
                assert created.status_code == 201, created.text
                listed = (await http.get(f"{host.url}api/kernels")).json()
                assert [kernel["id"] for kernel in listed] == [created.json()["id"]]
            tree = [host.pid, *(p.pid for p in psutil.Process(host.pid).children(recursive=True))]
            assert len(tree) >= 2  # the server and the kernel it started
    assert all(_gone(pid) for pid in tree)


async def test_server_that_exits_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    with anyio.fail_after(90), pytest.raises(WarmkernelError) as caught:
        async with owned_jupyter_server(tmp_path / "missing"):
            pytest.fail("a server whose root directory does not exist must not start")
    assert caught.value.code == "jupyter_server_failed"
    assert "exited with code" in caught.value.message
    assert "missing" in caught.value.message.partition("its log ends:")[2]
