"""How a kernel process is launched: interpreter, argv, isolated environment, private runtime root.

The kernel must not see the user's IPython profile, startup files, PYTHONSTARTUP, history
database, Jupyter config or kernelspecs, and must not colour its output. Everything it writes
outside the workspace (connection file, IPC sockets, its own log) lives in a private runtime
root that is removed at exit.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.connect import write_connection_file

from warmkernel.kernel import leftovers

# Questions that would let the user's environment reach into the kernel or colour its text.
_DROPPED_ENV = ("PYTHONSTARTUP", "FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS", "JUPYTER_CONFIG_PATH")
SECRET_ENV = ("WARMKERNEL_TOKEN", "WARMKERNEL_JUPYTER_TOKEN", "JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE")
"""The tokens warmkernel holds (its own, a Jupyter server's it talks to, the owned server's):
a cell can read its environment, so the kernel never inherits them."""

KERNEL_MARK_ENV = "WARMKERNEL_KERNEL_MARK"
"""Names the kernel in its environment: a process that left its tree (double fork, setsid) is
still found by it when the kernel is killed."""

_KERNEL_FLAGS = (
    "--IPKernelApp.exec_PYTHONSTARTUP=False",
    "--IPKernelApp.exec_files=[]",
    "--IPKernelApp.exec_lines=[]",
    "--IPKernelApp.extensions=[]",
    # History in memory, as nbclient runs kernels: `%history` and `In` work, nothing goes to disk.
    "--HistoryManager.hist_file=:memory:",
    "--InteractiveShell.colors=nocolor",
)


class RuntimeRoot:
    """A private (0700) directory outside the workspace for one server process.

    It is created directly under the system temp dir because Unix socket paths are limited
    to about 107 bytes.
    """

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=leftovers.ROOT_PREFIX))
        os.chmod(self.path, 0o700)
        leftovers.write_owner(self.path)  # a killed server's root is swept by the next one

    def subdirectory(self, name: str) -> Path:
        """A private (0700) directory inside the root, created on first use; removed with it."""
        path = self.path / name
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one kernel."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    connection_file: Path
    connection_info: dict[str, object]
    log_file: Path
    mark: str
    """The value of `KERNEL_MARK_ENV` in the kernel's environment, which its descendants inherit;
    also its cgroup's name (`kernel.cgroup`). It starts with the root's name, unique on the machine."""


def kernel_environment(root: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: the server's, minus the user's startup hooks, plus isolation."""
    env = dict(os.environ if base is None else base)
    for name in (*_DROPPED_ENV, *SECRET_ENV):
        env.pop(name, None)
    private = root / "home"
    for name in ("ipython", "jupyter-config", "jupyter-data", "jupyter-runtime"):
        # Existing and writable, or IPython falls back to a temp dir it never removes.
        (private / name).mkdir(mode=0o700, parents=True, exist_ok=True)
    env.update(
        IPYTHONDIR=str(private / "ipython"),
        JUPYTER_CONFIG_DIR=str(private / "jupyter-config"),
        JUPYTER_DATA_DIR=str(private / "jupyter-data"),
        JUPYTER_RUNTIME_DIR=str(private / "jupyter-runtime"),
        JUPYTER_PATH=str(private / "jupyter-data"),
        JUPYTER_NO_CONFIG="1",
        NO_COLOR="1",
        TERM="dumb",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    return env


def kernel_command(python: Sequence[str], connection_file: str) -> list[str]:
    """The command line of an isolated IPython kernel (`{connection_file}` in a kernelspec);
    `python` runs the interpreter (`Environment.command`)."""
    return [*python, "-m", "ipykernel_launcher", "-f", connection_file, *_KERNEL_FLAGS]


def prepare_launch(
    root: RuntimeRoot, python: Sequence[str], cwd: Path, name: str, variables: Mapping[str, str] | None = None
) -> LaunchSpec:
    """Write the connection file for one kernel and build its command line.

    `name` keeps the kernel's files in the root apart from every other kernel's: its generation,
    or a spare kernel's own name (a spare gets its generation only when it is handed out).
    `variables` are set in its environment (`Environment.variables`).
    """
    connection_file = root.path / f"kernel-{name}.json"
    transport = "tcp" if sys.platform == "win32" else "ipc"
    ip = "127.0.0.1" if transport == "tcp" else str(root.path / f"k{name}")
    _, info = write_connection_file(str(connection_file), transport=transport, ip=ip)
    os.chmod(connection_file, 0o600)
    argv = kernel_command(python, str(connection_file))
    # The kernel exits by itself if this server dies without cleaning up.
    argv.append(f"--IPKernelApp.parent_handle={os.getpid()}")
    mark = f"{root.path.name}-{name}"
    return LaunchSpec(
        argv=argv,
        env={**kernel_environment(root.path), **dict(variables or {}), KERNEL_MARK_ENV: mark},
        cwd=cwd,
        connection_file=connection_file,
        connection_info=dict(info),
        log_file=root.path / f"kernel-{name}.log",
        mark=mark,
    )
