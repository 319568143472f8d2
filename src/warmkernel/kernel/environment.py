"""Which Python runs the kernel: `--python auto` finds the project's own environment.

An agent's `import pandas` must see the packages of the project it works on, not those of the
environment warmkernel happens to be installed in (a `uv tool`, `pipx` or `uvx` one). Looked for,
in this order: `$VIRTUAL_ENV`; a `.venv` or `venv` in the workspace or a parent up to the
repository root (run through `uv run --with ipykernel` when that directory is a uv project and uv
is installed); a uv project without one; `$CONDA_PREFIX`; a Poetry or Pixi project when its tool
is installed; else the server's own interpreter. An environment without ipykernel is never
changed silently: the error names the one command that adds it, which `add_ipykernel` runs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warmkernel.errors import WarmkernelError

AUTO = "auto"

_PROBE_TIMEOUT_S = 300.0
"""A first `uv run --with ipykernel` downloads ipykernel: minutes on a slow network, not hours."""
_INSTALL_TIMEOUT_S = 600.0

Which = Callable[[str], str | None]


@dataclass(frozen=True)
class Environment:
    """A Python environment the kernel can run in, and why it was chosen."""

    kind: str
    """`virtualenv`, `venv`, `uv project`, `conda`, `poetry`, `pixi`, `given` or `server`."""
    command: tuple[str, ...]
    """What runs its Python: the interpreter, or a tool that runs it (`uv run ... python`)."""
    why: str
    home: Path | None = None
    """The project directory tools run in (`uv add`, `poetry add`); None: any directory."""
    install: tuple[str, ...] = ()
    """The one command that adds ipykernel to it; empty when it cannot lack ipykernel."""

    def describe(self) -> str:
        return f"{shlex.join(self.command)} ({self.why})"

    def variables(self, environ: Mapping[str, str]) -> dict[str, str]:
        """What the kernel's environment needs so that `!pip` and `!python` in a cell reach this
        environment, as its activation would do (tools that run Python set them themselves)."""
        if self.kind in ("server", "uv project", "pixi") or len(self.command) != 1:
            return {}
        bin_directory = Path(self.command[0]).parent
        found = {"PATH": os.pathsep.join(filter(None, [str(bin_directory), environ.get("PATH", "")]))}
        if (bin_directory.parent / "pyvenv.cfg").is_file():
            found["VIRTUAL_ENV"] = str(bin_directory.parent)
        return found


def find_environment(
    python: str, workspace: Path, environ: Mapping[str, str] = os.environ, which: Which = shutil.which
) -> Environment:
    """The environment `python` (a path, or `auto`) names for a kernel working in `workspace`."""
    if python != AUTO:
        return Environment("given", (python,), "given by --python", install=_pip_install(Path(python), which))
    for find in (_virtual_env, _project_directory, _conda, _poetry_or_pixi):
        found = find(workspace, environ, which)
        if found is not None:
            return found
    top = search_directories(workspace)[-1]
    where = "the workspace" if top == workspace else f"the workspace or its parents up to {top}"
    why = f"warmkernel's own: no project environment found in {where}"
    return Environment("server", (sys.executable,), why)


def search_directories(workspace: Path) -> list[Path]:
    """The workspace and its parents up to the repository root (the first with `.git`); only the
    workspace when it is in no repository (a home directory's `.venv` is not the project's)."""
    chain = [workspace, *workspace.parents]
    for index, directory in enumerate(chain):
        if (directory / ".git").exists():
            return chain[: index + 1]
    return [workspace]


def _virtual_env(workspace: Path, environ: Mapping[str, str], which: Which) -> Environment | None:
    prefix = environ.get("VIRTUAL_ENV")
    if not prefix or (python := _venv_python(Path(prefix))) is None:
        return None
    return Environment(
        "virtualenv",
        (str(python),),
        "the active virtual environment, $VIRTUAL_ENV",
        install=_pip_install(python, which),
    )


def _project_directory(workspace: Path, environ: Mapping[str, str], which: Which) -> Environment | None:
    """The nearest directory with a virtual environment or a uv project."""
    uv = which("uv")
    for directory in search_directories(workspace):
        is_uv_project = (directory / "uv.lock").is_file() or "uv" in _pyproject_tools(directory)
        for name in (".venv", "venv"):
            python = _venv_python(directory / name)
            if python is None:
                continue
            if is_uv_project and uv:
                return _uv_project(
                    directory, f"{name} of the uv project {directory}, with ipykernel added by uv"
                )
            return Environment(
                "venv",
                (str(python),),
                f"the project's {name} in {directory}",
                directory,
                _pip_install(python, which),
            )
        if is_uv_project and uv:
            return _uv_project(directory, f"the uv project {directory}, with ipykernel added by uv")
    return None


def _uv_project(directory: Path, why: str) -> Environment:
    """The project's environment plus ipykernel, which `uv run --with` adds without changing it."""
    command = ("uv", "run", "--project", str(directory), "--with", "ipykernel", "python")
    return Environment("uv project", command, why, directory)


def _conda(workspace: Path, environ: Mapping[str, str], which: Which) -> Environment | None:
    prefix = environ.get("CONDA_PREFIX")
    if not prefix:
        return None
    python = Path(prefix) / ("python.exe" if sys.platform == "win32" else "bin/python")
    if not python.is_file():
        return None
    install = ("conda", "install", "--yes", "--prefix", prefix, "ipykernel")
    return Environment(
        "conda", (str(python),), "the active conda environment, $CONDA_PREFIX", install=install
    )


def _poetry_or_pixi(workspace: Path, environ: Mapping[str, str], which: Which) -> Environment | None:
    for directory in search_directories(workspace):
        tools = _pyproject_tools(directory)
        if "poetry" in tools and which("poetry"):
            asked = _ask(["poetry", "env", "info", "--executable"], directory)
            if asked:
                install = ("poetry", "add", "--group", "dev", "ipykernel")
                return Environment("poetry", (asked,), f"the Poetry project {directory}", directory, install)
        manifest = directory / "pixi.toml"
        if (manifest.is_file() or "pixi" in tools) and which("pixi"):
            if not manifest.is_file():
                manifest = directory / "pyproject.toml"
            command = ("pixi", "run", "--manifest-path", str(manifest), "python")
            return Environment(
                "pixi", command, f"the Pixi project {manifest}", directory, ("pixi", "add", "ipykernel")
            )
    return None


def _pyproject_tools(directory: Path) -> dict[str, Any]:
    """The `[tool]` table of the directory's `pyproject.toml`; empty when there is none (or it is
    not valid TOML: the project's own tools report that)."""
    try:
        tools = tomllib.loads((directory / "pyproject.toml").read_text(encoding="utf-8")).get("tool")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return tools if isinstance(tools, dict) else {}


def _venv_python(prefix: Path) -> Path | None:
    """The interpreter of the virtual environment at `prefix`; None when it is not one."""
    if not (prefix / "pyvenv.cfg").is_file():
        return None
    python = prefix / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    return python if python.exists() else None


def _pip_install(python: Path, which: Which) -> tuple[str, ...]:
    """pip when the environment has it; else uv's pip (uv makes environments without pip)."""
    has_pip = any((python.parent / name).exists() for name in ("pip", "pip.exe"))
    if not has_pip and which("uv"):
        return ("uv", "pip", "install", "ipykernel", "--python", str(python))
    return (str(python), "-m", "pip", "install", "ipykernel")


def _ask(argv: Sequence[str], cwd: Path) -> str:
    """A tool's one-line answer, or "" when it has none."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def prepare_environment(python: str, workspace: Path, *, add_ipykernel: bool = False) -> Environment:
    """The kernel's environment, checked to run ipykernel (installed first when allowed)."""
    environment = find_environment(python, workspace)
    if environment.command == (sys.executable,):
        return environment  # warmkernel's own interpreter has ipykernel: it depends on it
    failure = _ipykernel_failure(environment, workspace)
    if failure is None:
        return environment
    if not environment.install:  # a tool that runs Python with ipykernel failed: its words say why
        raise WarmkernelError(
            "python_not_usable", f"{environment.describe()} cannot run ipykernel:\n{failure}"
        )
    install = shlex.join(environment.install)
    if not add_ipykernel:
        raise WarmkernelError(
            "python_not_usable",
            f"{shlex.join(environment.command)} has no ipykernel ({environment.why}); add it with "
            f"`{install}`"
            + (f" (in {environment.home})" if environment.home else "")
            + " and call again, or let warmkernel run that command: --add-ipykernel (or "
            "add_ipykernel = true in warmkernel.toml), then `warmkernel stop` and start again",
        )
    _install_ipykernel(environment, workspace)
    if _ipykernel_failure(environment, workspace) is not None:
        raise WarmkernelError(
            "python_not_usable", f"`{install}` ran, but {environment.describe()} still lacks ipykernel"
        )
    return environment


def _ipykernel_failure(environment: Environment, workspace: Path) -> str | None:
    """None when the environment imports ipykernel; else the last lines of what it said."""
    command = environment.command[0]
    if shutil.which(command) is None and not Path(command).is_file():
        found = "" if environment.kind == "given" else f" ({environment.why})"
        raise WarmkernelError("python_not_usable", f"{command}{found} does not exist or is not executable")
    try:
        probe = subprocess.run(
            [*environment.command, "-c", "import ipykernel"],
            cwd=environment.home or workspace,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WarmkernelError(
            "python_not_usable", f"{environment.describe()} could not be run: {exc}"
        ) from exc
    return None if probe.returncode == 0 else _tail(probe.stderr or probe.stdout)


def _install_ipykernel(environment: Environment, workspace: Path) -> None:
    install = shlex.join(environment.install)
    try:
        done = subprocess.run(
            environment.install,
            cwd=environment.home or workspace,
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WarmkernelError("python_not_usable", f"`{install}` could not be run: {exc}") from exc
    if done.returncode != 0:
        raise WarmkernelError(
            "python_not_usable",
            f"`{install}` failed (exit code {done.returncode}):\n{_tail(done.stderr or done.stdout)}",
        )


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-10:])
