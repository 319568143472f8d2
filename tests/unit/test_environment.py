"""`--python auto`: which environment is found, in which order, and the command that adds ipykernel.

Directories and `pyvenv.cfg` files are real; which tools are installed is given (`which`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from warmkernel.kernel.environment import Environment, Which, find_environment, search_directories


def fake_venv(prefix: Path, *, pip: bool = True) -> Path:
    """Enough of a virtual environment to be recognised: pyvenv.cfg and bin/python (and pip)."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (prefix / "bin" / "python").touch()
    if pip:
        (prefix / "bin" / "pip").touch()
    return prefix / "bin" / "python"


def no_tools(name: str) -> str | None:
    return None


def uv_only(name: str) -> str | None:
    return "/usr/local/bin/uv" if name == "uv" else None


def find(workspace: Path, environ: dict[str, str] | None = None, which: Which = no_tools) -> Environment:
    return find_environment("auto", workspace, environ or {}, which)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a workspace two levels down."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / "ws").mkdir(parents=True)
    return tmp_path / "repo"


def test_a_venv_in_a_parent_up_to_the_repository_root_is_found(repo: Path) -> None:
    python = fake_venv(repo / ".venv")
    found = find(repo / "pkg" / "ws")
    assert (found.kind, found.command) == ("venv", (str(python),))
    assert found.why == f"the project's .venv in {repo}"
    assert found.install == (str(python), "-m", "pip", "install", "ipykernel")


def test_the_nearest_environment_wins_and_venv_is_looked_for_too(repo: Path) -> None:
    fake_venv(repo / ".venv")
    nearer = fake_venv(repo / "pkg" / "venv")
    assert find(repo / "pkg" / "ws").command == (str(nearer),)


def test_the_search_stops_at_the_repository_root(tmp_path: Path, repo: Path) -> None:
    fake_venv(tmp_path / ".venv")  # above the repository: another project's
    found = find(repo / "pkg" / "ws")
    assert (found.kind, found.command) == ("server", (sys.executable,))
    assert (
        found.why
        == f"warmkernel's own: no project environment found in the workspace or its parents up to {repo}"
    )
    assert search_directories(repo / "pkg" / "ws") == [repo / "pkg" / "ws", repo / "pkg", repo]


def test_outside_a_repository_only_the_workspace_is_searched(tmp_path: Path) -> None:
    fake_venv(tmp_path / ".venv")
    (tmp_path / "ws").mkdir()
    assert find(tmp_path / "ws").kind == "server"
    assert search_directories(tmp_path / "ws") == [tmp_path / "ws"]


def test_an_active_virtual_environment_comes_first(tmp_path: Path, repo: Path) -> None:
    fake_venv(repo / ".venv")
    active = fake_venv(tmp_path / "active")
    found = find(repo / "pkg" / "ws", {"VIRTUAL_ENV": str(tmp_path / "active"), "CONDA_PREFIX": "/opt/conda"})
    assert (found.kind, found.command) == ("virtualenv", (str(active),))
    assert "$VIRTUAL_ENV" in found.why


def test_a_directory_that_is_not_a_virtual_environment_is_ignored(repo: Path) -> None:
    (repo / ".venv" / "bin").mkdir(parents=True)  # no pyvenv.cfg
    assert find(repo / "pkg" / "ws").kind == "server"


def test_a_venv_without_pip_is_given_uvs_pip(repo: Path) -> None:
    python = fake_venv(repo / ".venv", pip=False)
    assert find(repo, which=uv_only).install == ("uv", "pip", "install", "ipykernel", "--python", str(python))
    assert find(repo).install == (str(python), "-m", "pip", "install", "ipykernel")


@pytest.mark.parametrize(
    "marker",
    [("uv.lock", ""), ("pyproject.toml", "[project]\nname = 'p'\n[tool.uv]\npackage = false\n")],
)
def test_a_uv_project_runs_through_uv_run_with_ipykernel(repo: Path, marker: tuple[str, str]) -> None:
    (repo / marker[0]).write_text(marker[1])
    found = find(repo / "pkg" / "ws", which=uv_only)
    assert found.kind == "uv project"
    assert found.command == ("uv", "run", "--project", str(repo), "--with", "ipykernel", "python")
    assert found.install == ()  # uv adds ipykernel without changing the project
    assert find(repo / "pkg" / "ws").kind == "server", "without uv, a uv project is not usable"


def test_a_uv_projects_own_venv_is_used_through_uv(repo: Path) -> None:
    fake_venv(repo / ".venv")
    (repo / "uv.lock").write_text("")
    assert find(repo, which=uv_only).kind == "uv project"
    assert find(repo).kind == "venv", "without uv, the .venv itself"


def test_a_pyproject_without_tool_uv_is_no_uv_project(repo: Path) -> None:
    (repo / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    assert find(repo, which=uv_only).kind == "server"
    (repo / "pyproject.toml").write_text("not toml [")
    assert find(repo, which=uv_only).kind == "server"


def test_a_conda_environment_comes_after_the_projects_own(tmp_path: Path, repo: Path) -> None:
    conda = tmp_path / "conda"
    (conda / "bin").mkdir(parents=True)
    (conda / "bin" / "python").touch()
    found = find(repo, {"CONDA_PREFIX": str(conda)})
    assert (found.kind, found.command) == ("conda", (str(conda / "bin" / "python"),))
    assert found.install == ("conda", "install", "--yes", "--prefix", str(conda), "ipykernel")
    fake_venv(repo / ".venv")
    assert find(repo, {"CONDA_PREFIX": str(conda)}).kind == "venv"


def test_a_pixi_project_runs_through_pixi_when_pixi_is_installed(repo: Path) -> None:
    (repo / "pixi.toml").write_text("[workspace]\nname = 'p'\n")
    assert find(repo).kind == "server"
    found = find(repo, which=lambda name: "/usr/bin/pixi" if name == "pixi" else None)
    assert found.command == ("pixi", "run", "--manifest-path", str(repo / "pixi.toml"), "python")
    assert found.install == ("pixi", "add", "ipykernel")


def test_a_given_interpreter_is_used_as_given(tmp_path: Path) -> None:
    found = find_environment("/opt/py/bin/python", tmp_path, {"VIRTUAL_ENV": "/elsewhere"}, no_tools)
    assert (found.kind, found.command) == ("given", ("/opt/py/bin/python",))
    assert found.describe() == "/opt/py/bin/python (given by --python)"


def test_a_kernel_in_a_venv_finds_its_tools_first_as_an_activated_one_would(repo: Path) -> None:
    python = fake_venv(repo / ".venv")
    variables = find(repo).variables({"PATH": "/usr/bin"})
    assert variables == {"PATH": f"{python.parent}:/usr/bin", "VIRTUAL_ENV": str(repo / ".venv")}
    (repo.parent / "elsewhere").mkdir()
    assert find(repo.parent / "elsewhere").variables({"PATH": "/usr/bin"}) == {}, "warmkernel's own: as it is"
    (repo / "uv.lock").write_text("")
    assert find(repo, which=uv_only).variables({"PATH": "/usr/bin"}) == {}, "uv sets them itself"
