"""The `warmkernel mcp` entry point as a host launches it: a stdio subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.mcp.calls import body, call, run, text_of
from tests.mcp.conftest import Host

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

HOSTILE = "open({marker!r}, 'w').write('ran')\n"


async def test_stdout_stays_clean_when_a_cell_writes_to_fd_1(stdio_client: Client) -> None:
    code = (
        "import os, subprocess, sys\n"
        "os.write(1, b'raw fd write\\n')\n"
        "subprocess.run(['echo', 'child says hi'], check=True)\n"
        "subprocess.run([sys.executable, '-c', 'import os; os.write(1, b\"grandchild\\\\n\")'], check=True)\n"
        "print('printed')"
    )
    _, text = await run(stdio_client, code)
    assert "printed" in text
    # The server is still speaking clean MCP after all of that.
    assert (await run(stdio_client, "6 * 7"))[1].endswith("42")
    assert "kernel: ready" in await call(stdio_client, "python_status")


async def test_hostile_profile_startup_and_pythonstartup_never_run(tmp_path: Path, host: Host) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    workspace.mkdir()
    markers = {
        name: tmp_path / f"{name}.ran" for name in ("profile", "ipythondir", "pythonstartup", "config")
    }
    profile_startup = home / ".ipython" / "profile_default" / "startup"
    profile_startup.mkdir(parents=True)
    (profile_startup / "00-hostile.py").write_text(HOSTILE.format(marker=str(markers["profile"])))
    ipythondir_startup = tmp_path / "ipythondir" / "profile_default" / "startup"
    ipythondir_startup.mkdir(parents=True)
    (ipythondir_startup / "00-hostile.py").write_text(HOSTILE.format(marker=str(markers["ipythondir"])))
    (tmp_path / "startup.py").write_text(HOSTILE.format(marker=str(markers["pythonstartup"])))
    config_dir = home / ".jupyter"
    config_dir.mkdir()
    (config_dir / "ipython_kernel_config.py").write_text(HOSTILE.format(marker=str(markers["config"])))
    env = {
        "HOME": str(home),
        "IPYTHONDIR": str(tmp_path / "ipythondir"),
        "PYTHONSTARTUP": str(tmp_path / "startup.py"),
        "FORCE_COLOR": "1",
    }
    async with host(workspace, env=env) as client:
        _, text = await run(client, "import os; os.environ.get('PYTHONSTARTUP'), os.environ.get('NO_COLOR')")
        assert body(text)[0].endswith("(None, '1')")
        _, text = await run(client, "1/0")
        assert "\x1b" not in text
    assert not [name for name, marker in markers.items() if marker.exists()]


async def test_explicit_workspace_resolver_sets_workspace_and_kernel_cwd(tmp_path: Path, host: Host) -> None:
    (tmp_path / "project").mkdir()
    resolver = tmp_path / "resolver.py"
    resolver.write_text("def resolve_workspace(launch_cwd):\n    return launch_cwd / 'project'\n")
    async with host(tmp_path, env={"WARMKERNEL_WORKSPACE_CONFIG": str(resolver)}) as client:
        _, text = await run(client, "import os; os.getcwd()")
        assert body(text)[0].endswith(repr(str(tmp_path / "project")))
        status = await call(client, "python_status")
        assert f"workspace: {tmp_path / 'project'}" in status
        assert f"workspace resolution: explicit_config ({resolver})" in status


@pytest.mark.parametrize(
    ("resolver_source", "message"),
    [
        pytest.param(
            "def resolve_workspace(cwd):\n    raise RuntimeError('no project here')\n",
            "raised RuntimeError: no project here",
            id="raises",
        ),
        pytest.param("x = 1\n", "does not define resolve_workspace", id="no-function"),
        pytest.param(
            "def resolve_workspace(cwd):\n    return 'missing-dir'\n",
            "which is not a directory",
            id="bad-dir",
        ),
    ],
)
def test_resolver_failure_stops_start_up_with_a_clear_code(
    tmp_path: Path, resolver_source: str, message: str
) -> None:
    resolver = tmp_path / "resolver.py"
    resolver.write_text(resolver_source)
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "mcp"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "WARMKERNEL_WORKSPACE_CONFIG": str(resolver)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "workspace_config_failed" in done.stderr and message in done.stderr


def test_relative_resolver_path_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "mcp"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "WARMKERNEL_WORKSPACE_CONFIG": "resolver.py"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "must be an absolute path" in done.stderr


async def test_initialize_does_not_wait_for_the_kernel(tmp_path: Path, host: Host) -> None:
    # A kernel that can never start still lets the host connect and list tools.
    async with host(tmp_path, "--python", "/nonexistent/python3") as client:
        tools = await client.list_tools()
        assert "run_python" in {tool.name for tool in tools.tools}
        result = await client.call_tool("run_python", {"freeform": "1"})
        assert result.is_error
        assert text_of(result).startswith("python_not_usable: ")
