"""`--python auto` end to end: the kernel imports what the project's environment has, the reply
and `status` say which environment and why, and a missing ipykernel is named with its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.cli.conftest import Cli
from tests.mcp.calls import call
from tests.mcp.conftest import stdio_parameters


def make_venv(prefix: Path, *, ipykernel: bool, marker: str | None = None) -> Path:
    """A real virtual environment (without pip); with `ipykernel`, it sees the suite's packages
    through a .pth file; `marker` is a module only it has."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    python = prefix / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    if ipykernel:
        (site / "suite.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    if marker is not None:
        (site / f"{marker}.py").write_text(f"WHERE = {str(prefix)!r}\n")
    return python


def with_uv(cli: Cli) -> Cli:
    """The same CLI, with the suite's `uv` on the daemon's PATH (the dev group installs it)."""
    tools = str(Path(sys.executable).parent)
    env = {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}", "UV_PYTHON": sys.executable}
    return Cli(cli.workspace, cli.root, env)


def without_uv(cli: Cli) -> Cli:
    """The same CLI with no `uv` on the daemon's PATH (an activated dev environment has one)."""
    path = [d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "uv").exists()]
    return Cli(cli.workspace, cli.root, {"PATH": os.pathsep.join(path)})


def test_the_kernel_runs_in_the_dot_venv_of_a_parent_and_says_so(cli: Cli) -> None:
    repo = cli.workspace
    (repo / ".git").mkdir()
    python = make_venv(repo / ".venv", ipykernel=True, marker="only_in_the_project")
    (repo / "src" / "pkg").mkdir(parents=True)
    below = Cli(repo / "src" / "pkg", cli.root, cli.extra_env)
    done = below("run", "import only_in_the_project, sys; print(only_in_the_project.WHERE, sys.prefix)")
    assert done.returncode == 0, done.stderr
    note = f"note: the kernel runs in the project's environment, {python} (the project's .venv in {repo})"
    assert done.stdout.startswith(note + "\n")
    assert f"{repo / '.venv'} {repo / '.venv'}" in done.stdout
    assert "note:" not in below("run", "1").stdout, "said once"

    async def a_host_that_comes_later() -> str:
        async with Client(stdio_parameters(below.workspace, env=below.env)) as host:
            return await call(host, "python_status")

    assert note in anyio.run(a_host_that_comes_later), "an MCP client that comes later is told too"
    shell = below("run", "import os, shutil; print(shutil.which('python'), os.environ['VIRTUAL_ENV'])")
    assert shell.stdout.splitlines()[-1] == f"{python} {repo / '.venv'}", "`!pip` reaches the project's"
    status = below("status")
    assert f"interpreter: {python} (the project's .venv in {repo})" in status.stdout
    assert (
        json.loads(below("status", "--json").stdout)["environment"]
        == f"{python} (the project's .venv in {repo})"
    )


def test_an_environment_without_ipykernel_is_named_with_the_command_that_adds_it(cli: Cli) -> None:
    python = make_venv(cli.workspace / ".venv", ipykernel=False)
    done = without_uv(cli)("run", "1")
    assert done.returncode == 1
    message = done.stderr.strip()
    assert message.startswith(
        f"warmkernel: python_not_usable: {python} has no ipykernel (the project's .venv"
    )
    assert f"add it with `{python} -m pip install ipykernel`" in message
    assert "--add-ipykernel" in message
    untouched = subprocess.run([str(python), "-c", "import ipykernel"], capture_output=True)
    assert untouched.returncode != 0, "the environment is left as it was"


@pytest.mark.slow
def test_add_ipykernel_installs_it_with_that_command(cli: Cli) -> None:
    uv_cli = with_uv(cli)
    python = make_venv(cli.workspace / ".venv", ipykernel=False, marker="only_in_the_project")
    refused = uv_cli("run", "1")
    assert f"add it with `uv pip install ipykernel --python {python}`" in refused.stderr
    assert uv_cli("stop").returncode == 0
    done = uv_cli("start", "--add-ipykernel", timeout=300)
    assert done.returncode == 0, done.stderr
    ran = uv_cli("run", "import only_in_the_project, ipykernel, sys; print(sys.prefix)", timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.rstrip().endswith(str(cli.workspace / ".venv"))


@pytest.mark.slow
def test_a_uv_project_gets_ipykernel_from_uv_without_being_changed(cli: Cli) -> None:
    uv_cli = with_uv(cli)
    pyproject = (
        '[project]\nname = "demo"\nversion = "0"\ndependencies = ["toolz"]\n[tool.uv]\npackage = false\n'
    )
    (cli.workspace / "pyproject.toml").write_text(pyproject)
    done = uv_cli("run", "import toolz, ipykernel, sys; print(sys.prefix != sys.base_prefix)", timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("note: the kernel runs in the project's environment, uv run --project ")
    assert "with ipykernel added by uv" in done.stdout and done.stdout.rstrip().endswith("True")
    assert (cli.workspace / "pyproject.toml").read_text() == pyproject
    assert "ipykernel" not in (cli.workspace / "uv.lock").read_text()


@pytest.mark.slow
def test_a_uv_project_uv_cannot_run_is_refused_with_uvs_words(cli: Cli) -> None:
    pyproject = '[project]\nname = "demo"\nversion = "0"\ndependencies = ["no-such-package-of-warmkernel"]\n'
    (cli.workspace / "pyproject.toml").write_text(pyproject + "[tool.uv]\npackage = false\n")
    done = with_uv(cli)("run", "1", timeout=300)
    assert done.returncode == 1
    assert done.stderr.startswith("warmkernel: python_not_usable: uv run --project ")
    assert "cannot run ipykernel:\n" in done.stderr and "no-such-package-of-warmkernel" in done.stderr
