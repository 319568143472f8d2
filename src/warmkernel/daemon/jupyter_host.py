"""A Jupyter Server owned by warmkernel: started on loopback with a fresh token, stopped with its kernels.

The session runs its kernel there, so a person can open the very same kernel in JupyterLab or
VS Code. The server sees no user configuration (its config, data and runtime directories are
private and removed at exit) and drops no output (IOPub rate limits are off).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import anyio
import anyio.abc
import httpx2
import psutil

from warmkernel.errors import WarmkernelError
from warmkernel.kernel import inside
from warmkernel.kernel.launch import RuntimeRoot, kernel_command, kernel_environment
from warmkernel.kernel.local import kill_process_tree

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0
"""How long the server gets to shut its kernels down after SIGTERM before its tree is killed."""
_LOG_TAIL_LINES = 10
_TOKEN_FILE = "server-token"


@dataclass(frozen=True)
class JupyterHost:
    """A running Jupyter Server: where it answers and the token it wants."""

    url: str
    """The base URL, ending in `/`: `http://127.0.0.1:PORT/`."""
    token: str = field(repr=False)
    pid: int
    lab: bool
    """JupyterLab answers at `{url}lab`."""
    kernel_name: str = "python3"
    """The kernelspec it starts."""

    @property
    def server_url(self) -> str:
        """The URL with its token, as VS Code's "Connect to existing Jupyter Server" takes it."""
        return f"{self.url}?token={self.token}"

    def lab_url(self, notebook: str | None = None) -> str | None:
        """The JupyterLab page (of `notebook`, a path relative to the root) to open in a browser."""
        if not self.lab:
            return None
        page = f"lab/tree/{quote(notebook)}" if notebook else "lab"
        return f"{self.url}{page}?token={self.token}"


def check_available() -> None:
    """Fail with the fix when this environment cannot run a Jupyter Server."""
    if importlib.util.find_spec("jupyter_server") is None:
        raise WarmkernelError(
            "serve_unavailable",
            f"serving the kernel to an IDE needs jupyter_server, which {sys.executable} lacks; "
            "install it with `pip install 'warmkernel[serve]'`",
        )


@dataclass(frozen=True)
class Kernelspec:
    """The kernelspec the owned server offers: under the name and display name the notebook
    already has, so an IDE opening it neither marks it changed nor rewrites its metadata."""

    name: str = "python3"
    display_name: str = "Python 3 (ipykernel)"

    @classmethod
    def of_notebook(cls, path: Path | None) -> Kernelspec:
        """The notebook's own (`metadata.kernelspec`), else ipykernel's default."""
        try:
            metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]["kernelspec"] if path else {}
            name, display_name = str(metadata["name"]), str(metadata["display_name"])
        except (OSError, ValueError, KeyError, TypeError):
            return cls()
        return cls(name, display_name) if _SPEC_NAME.fullmatch(name) else cls()


_SPEC_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A kernelspec name Jupyter accepts as a directory name."""


@asynccontextmanager
async def owned_jupyter_server(
    root_dir: Path,
    python: Sequence[str] = (sys.executable,),
    kernelspec: Kernelspec = Kernelspec(),
    port: int | None = None,
) -> AsyncIterator[JupyterHost]:
    """A Jupyter Server serving `root_dir` on loopback `port` (None: a free one), once it answers;
    on exit it is stopped with its kernels.

    Its one kernelspec, `kernelspec`, runs `python` (an `Environment.command`) with the isolation
    of a local warmkernel kernel.
    """
    check_available()
    runtime = RuntimeRoot()
    try:
        token = secrets.token_urlsafe(32)
        port = port or _free_loopback_port()
        url = f"http://127.0.0.1:{port}/"
        log_file = runtime.path / "jupyter-server.log"
        with open(log_file, "ab") as log:  # noqa: ASYNC230 (a new file in our private root)
            try:
                process = await anyio.open_process(
                    _argv(root_dir, port, kernelspec.name),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=_environment(runtime.path, token, python, kernelspec),
                    start_new_session=True,  # a Ctrl-C in the user's terminal must not reach it
                )
            except OSError as exc:
                raise WarmkernelError(
                    "jupyter_server_failed", f"could not run {sys.executable} -m jupyter_server: {exc}"
                ) from exc
        try:
            try:
                lab = await _until_ready(process, url, token, log_file)
            finally:
                (runtime.path / _TOKEN_FILE).unlink(missing_ok=True)  # read at the server's start
            yield JupyterHost(url, token, process.pid, lab, kernelspec.name)
        finally:
            with anyio.CancelScope(shield=True):
                await stop_server(process)
    finally:
        runtime.remove()


def _argv(root_dir: Path, port: int, kernel_name: str) -> list[str]:
    """`python -m jupyter_server`, run by the parent watch: the server stops once we are gone."""
    argv = [
        sys.executable,
        "-c",
        inside.run_by_path("parent_watch"),
        "jupyter_server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root_dir}",
        f"--MultiKernelManager.default_kernel_name={kernel_name}",
        # Jupyter drops IOPub messages past these rates; warmkernel must see every line.
        "--ZMQChannelsWebsocketConnection.iopub_msg_rate_limit=0",
        "--ZMQChannelsWebsocketConnection.iopub_data_rate_limit=0",
    ]
    if os.geteuid() == 0:
        argv.append("--allow-root")  # containers run as root; the server refuses otherwise
    return argv


def _environment(root: Path, token: str, python: Sequence[str], kernelspec: Kernelspec) -> dict[str, str]:
    """The kernels' isolation, with system-wide Jupyter config kept so extensions like JupyterLab load.

    The token travels in a private file named by the environment, removed once the server
    answers: a command line is visible to every user, and the server's kernels inherit its
    environment (a cell could read a token there). The private data directory comes first on the
    kernelspec path, so its kernelspec is the one started.
    """
    env = kernel_environment(root)
    spec = Path(env["JUPYTER_DATA_DIR"]) / "kernels" / kernelspec.name / "kernel.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(
        json.dumps(
            {
                "argv": kernel_command(python, "{connection_file}"),
                "display_name": kernelspec.display_name,
                "language": "python",
                "metadata": {"debugger": False},
            }
        )
    )
    env.pop("JUPYTER_NO_CONFIG", None)
    token_file = root / _TOKEN_FILE
    token_file.touch(mode=0o600)
    token_file.write_text(token)
    env["JUPYTER_TOKEN_FILE"] = str(token_file)
    return env


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _until_ready(process: anyio.abc.Process, url: str, token: str, log_file: Path) -> bool:
    """Wait until the server answers `api/status` with the token; whether JupyterLab is there too.

    The server signals readiness only by answering, so this asks until it does, it exits, or
    the start timeout passes.
    """
    headers = {"Authorization": f"token {token}"}
    # trust_env=False: a proxy from the environment must not see a loopback request and its token.
    async with httpx2.AsyncClient(headers=headers, timeout=5.0, trust_env=False) as http:
        delay = 0.05
        with anyio.move_on_after(START_TIMEOUT_S):
            while process.returncode is None:
                with contextlib.suppress(httpx2.TransportError):
                    if (await http.get(f"{url}api/status")).status_code == 200:
                        return (await http.get(f"{url}lab")).status_code == 200
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.5)
    if process.returncode is not None:
        what = f"the Jupyter server exited with code {process.returncode} before answering"
    else:
        what = f"the Jupyter server did not answer at {url} within {START_TIMEOUT_S:.0f} s"
    raise WarmkernelError("jupyter_server_failed", f"{what}; {_log_tail(log_file)}")


def _log_tail(log_file: Path) -> str:
    try:
        lines = log_file.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError:
        return "it left no log"
    return "its log ends:\n" + "\n".join(lines) if lines else "its log is empty"


async def stop_server(process: anyio.abc.Process) -> None:
    """SIGTERM (the server shuts its kernels down), then SIGKILL to whatever of its tree is left."""
    if process.returncode is None:
        try:
            # Read before the server exits: its kernels are found through it, and outlive it if missed.
            descendants = psutil.Process(process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            descendants = []
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            await process.wait()
        if process.returncode is None:
            await anyio.to_thread.run_sync(kill_process_tree, process.pid)
        await anyio.to_thread.run_sync(_kill_survivors, descendants)
    with anyio.move_on_after(STOP_TIMEOUT_S):
        await process.wait()


def _kill_survivors(processes: list[psutil.Process]) -> None:
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
