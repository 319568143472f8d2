"""The built wheel as users install it: its metadata, every module importable with only the declared
dependencies (uv's isolated tool environment), and `uvx warmkernel mcp` in a project whose `.venv`
has a package the tool environment lacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.cli.conftest import Cli
from tests.cli.test_environment import make_venv
from tests.mcp.calls import call, run

ROOT = Path(__file__).parents[2]
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(UV is None, reason="uv is part of the dev dependency group"),
]


@dataclass(frozen=True)
class Installed:
    wheel: Path
    tool_python: Path
    """The interpreter of the isolated environment `uv tool install` made for the wheel."""
    env: dict[str, str]
    """uv's variables that keep its tools and cache of this test module apart."""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    assert UV is not None
    root = tmp_path_factory.mktemp("install")
    outside = {n: v for n, v in os.environ.items() if n not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env = {  # the runner's active environment must not be the one `--python auto` finds
        **outside,
        "UV_TOOL_DIR": str(root / "tools"),
        "UV_TOOL_BIN_DIR": str(root / "bin"),
        "UV_PYTHON": sys.executable,
        "UV_NO_CONFIG": "1",
    }
    subprocess.run(
        [UV, "build", "--wheel", "--out-dir", str(root / "dist"), str(ROOT)],
        env=env,
        check=True,
        capture_output=True,
    )
    (wheel,) = (root / "dist").glob("warmkernel-*.whl")
    subprocess.run([UV, "tool", "install", str(wheel)], env=env, check=True, capture_output=True)
    return Installed(wheel, root / "tools" / "warmkernel" / "bin" / "python", env)


def test_the_wheel_declares_its_license_types_and_urls(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = wheel.read(metadata_name).decode()
    assert "warmkernel/py.typed" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    headers = [line for line in metadata.split("\n\n")[0].splitlines()]
    assert "License-Expression: MIT" in headers and "License-File: LICENSE" in headers
    assert "Requires-Python: >=3.11" in headers
    assert {line.split(",")[0] for line in headers if line.startswith("Project-URL: ")} >= {
        "Project-URL: Homepage",
        "Project-URL: Repository",
        "Project-URL: Issues",
    }


def test_every_module_imports_with_only_the_declared_dependencies(installed: Installed) -> None:
    script = """
import importlib, pkgutil, warmkernel
modules = pkgutil.walk_packages(warmkernel.__path__, "warmkernel.")
names = [module.name for module in modules if module.name != "warmkernel.__main__"]
for name in names:
    importlib.import_module(name)
print(len(names))
"""
    done = subprocess.run([str(installed.tool_python), "-c", script], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 60
    version = subprocess.run(
        [str(installed.tool_python), "-m", "warmkernel", "--version"], capture_output=True, text=True
    )
    assert version.stdout.startswith("warmkernel 0.1.0\n")


def test_uvx_warmkernel_mcp_runs_the_kernel_in_the_projects_venv(
    installed: Installed, cli: Cli, private_daemons: Path
) -> None:
    make_venv(cli.workspace / ".venv", ipykernel=True, marker="only_in_the_project")
    lacks = subprocess.run(
        [str(installed.tool_python), "-c", "import only_in_the_project"], capture_output=True
    )
    assert lacks.returncode != 0, "the tool environment must lack the project's package"
    uvx = shutil.which("uvx", path=str(Path(UV or "").parent))
    assert uvx is not None
    env = {**installed.env, **cli.env}
    server = StdioServerParameters(
        command=uvx, args=["--from", str(installed.wheel), "warmkernel", "mcp"], cwd=cli.workspace, env=env
    )

    async def session() -> tuple[str, str]:
        async with Client(server) as client:
            _, reply = await run(client, "import only_in_the_project; print(only_in_the_project.WHERE)")
            return reply, await call(client, "python_status")

    reply, status = anyio.run(session)
    assert f"the project's .venv in {cli.workspace}" in reply and reply.rstrip().endswith(
        str(cli.workspace / ".venv")
    )
    assert f"interpreter: {cli.workspace / '.venv' / 'bin' / 'python'}" in status

    init = subprocess.run(
        [uvx, "--from", str(installed.wheel), "warmkernel", "init", "--json"],
        cwd=cli.workspace,
        env=env,
        capture_output=True,
        text=True,
    )
    assert init.returncode == 0, init.stderr
    entry = json.loads((cli.workspace / ".mcp.json").read_text())["mcpServers"]["warmkernel"]
    assert entry == {"command": "uvx", "args": ["--from", str(installed.wheel), "warmkernel", "mcp"]}
