"""IDE attach: `start --serve` runs the kernel on a Jupyter Server that JupyterLab or VS Code opens."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import psutil
import pytest

from tests.cli.conftest import Cli
from tests.cli.test_nb import write_notebook

# Each test starts a daemon, a Jupyter Server and a kernel through several CLI subprocesses.
pytestmark = pytest.mark.timeout(240)


def _descriptor(cli: Cli) -> dict[str, Any]:
    done = cli("sessions", "--json")
    assert done.returncode == 0, done.stderr
    (descriptor,) = json.loads(done.stdout)
    return descriptor


def _rest(jupyter_url: str) -> httpx2.Client:
    """A client of the Jupyter Server's REST API, authenticated with the token in its URL."""
    parts = urlsplit(jupyter_url)
    (token,) = parse_qs(parts.query)["token"]
    return httpx2.Client(
        base_url=f"{parts.scheme}://{parts.netloc}{parts.path}",
        headers={"Authorization": f"token {token}"},
        trust_env=False,
        timeout=30,
    )


def _server_pid(daemon_pid: int) -> int:
    (server,) = [
        child
        for child in psutil.Process(daemon_pid).children()
        if "jupyter_server" in " ".join(child.cmdline())
    ]
    return server.pid


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_start_serve_with_a_notebook_runs_its_kernel_in_the_notebooks_server_session(cli: Cli) -> None:
    write_notebook(cli.workspace / "nb.ipynb", [("a", "x = 40"), ("b", "y = x + 2\nprint(y)")])
    started = cli("start", "--serve", "nb.ipynb", "--no-save-outputs")
    assert started.returncode == 0, started.stdout + started.stderr
    descriptor = _descriptor(cli)
    jupyter_url = descriptor["jupyter_url"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=\S+", jupyter_url)
    assert f"Jupyter Server: {jupyter_url}" in started.stdout
    assert "[cell 1 · b]" in started.stdout and "\n42\n" in started.stdout

    with _rest(jupyter_url) as rest:
        (kernel,) = rest.get("api/kernels").json()
        (session,) = rest.get("api/sessions").json()
        assert session["path"] == "nb.ipynb" and session["type"] == "notebook"
        assert session["kernel"]["id"] == kernel["id"]

        ran = cli("run", "import os; print(os.getpid()); y")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert [k["id"] for k in rest.get("api/kernels").json()] == [kernel["id"]]
    *_, printed, result = ran.stdout.splitlines()
    assert result.endswith(": 42")  # the notebook's cells ran in this kernel
    # It runs warmkernel's interpreter with warmkernel's isolation (history in memory, no database).
    isolated = cli("run", "import sys; sys.executable, get_ipython().history_manager.hist_file")
    assert isolated.stdout.splitlines()[-1].endswith(f": ({sys.executable!r}, ':memory:')"), isolated.stdout
    # and that kernel is a child of the Jupyter Server, not of the daemon.
    server_pid = _server_pid(descriptor["pid"])
    kernel_pid = int(printed)
    assert kernel_pid in [p.pid for p in psutil.Process(server_pid).children(recursive=True)]

    # A reset gives the notebook's server session a new kernel: an IDE showing the session follows
    # it. No other kernel is left behind.
    assert cli("reset").returncode == 0
    with _rest(jupyter_url) as rest:
        (new_kernel,) = rest.get("api/kernels").json()
        (same_session,) = rest.get("api/sessions").json()
    assert same_session["id"] == session["id"] and new_kernel["id"] != kernel["id"]
    assert same_session["kernel"]["id"] == new_kernel["id"]
    assert "NameError" in cli("run", "y").stdout

    status = cli("status")
    assert status.returncode == 0, status.stderr
    assert f"Jupyter Server: {jupyter_url}" in status.stdout
    assert json.loads(cli("status", "--json").stdout)["jupyter_url"] == jupyter_url

    stopped = cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert all(_gone(pid) for pid in (descriptor["pid"], server_pid, kernel_pid))


def test_start_serve_without_a_notebook_runs_a_kernel_outside_any_server_session(cli: Cli) -> None:
    started = cli("start", "--serve")
    assert started.returncode == 0, started.stdout + started.stderr
    descriptor = _descriptor(cli)
    assert cli("run", "x = 1").returncode == 0
    with _rest(descriptor["jupyter_url"]) as rest:
        assert len(rest.get("api/kernels").json()) == 1
        assert rest.get("api/sessions").json() == []
    server_pid = _server_pid(descriptor["pid"])
    assert cli("stop").returncode == 0
    assert _gone(descriptor["pid"]) and _gone(server_pid)


def test_a_killed_daemon_takes_its_jupyter_server_and_kernel_with_it(cli: Cli) -> None:
    assert cli("start", "--serve").returncode == 0
    descriptor = _descriptor(cli)
    assert cli("run", "1").returncode == 0
    server_pid = _server_pid(descriptor["pid"])
    kernels = [child.pid for child in psutil.Process(server_pid).children(recursive=True)]
    assert kernels
    os.kill(descriptor["pid"], signal.SIGKILL)  # no chance to stop anything itself
    deadline = time.monotonic() + 60
    while not all(_gone(pid) for pid in (server_pid, *kernels)):
        assert time.monotonic() < deadline, "the orphaned Jupyter Server kept running"
        time.sleep(0.2)


def test_start_serve_refuses_a_live_session_that_has_no_jupyter_server(cli: Cli) -> None:
    assert cli("start").returncode == 0
    refused = cli("start", "--serve")
    assert refused.returncode == 1
    assert refused.stderr.startswith("warmkernel: daemon_error: daemon ")
    assert "`warmkernel stop` it, then `warmkernel start --serve` again" in refused.stderr


def test_start_serve_refuses_a_notebook_outside_the_workspace(cli: Cli) -> None:
    write_notebook(cli.workspace.parent / "outside.ipynb", [("a", "x = 1")])
    refused = cli("start", "--serve", "../outside.ipynb")
    assert refused.returncode == 1
    assert "invalid_notebook:" in refused.stderr and "is outside the workspace" in refused.stderr
    assert cli("sessions", "--json").stdout.strip() == "[]"


def test_start_serve_without_jupyter_server_says_how_to_install_it(cli: Cli) -> None:
    # The interpreter as it is where the `serve` extra is not installed.
    script = (
        "import sys; sys.modules['jupyter_server'] = None\n"
        "from warmkernel.cli import main; sys.exit(main(['start', '--serve']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cli.workspace,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("warmkernel: serve_unavailable: ")
    assert "pip install 'warmkernel[serve]'" in done.stderr
    assert cli("sessions", "--json").stdout.strip() == "[]"


def test_the_notebook_keeps_its_kernelspec_and_bytes_when_an_ide_opens_and_saves_it(cli: Cli) -> None:
    path = cli.workspace / "nb.ipynb"
    write_notebook(path, [("a", "x = 1")])
    notebook = json.loads(path.read_text())
    notebook["metadata"]["kernelspec"] = {"name": "myenv", "display_name": "My Env", "language": "python"}
    path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    started = cli("start", "--serve", "nb.ipynb")
    assert started.returncode == 0, started.stdout + started.stderr
    before = path.read_bytes()
    with _rest(_descriptor(cli)["jupyter_url"]) as rest:
        specs = rest.get("api/kernelspecs").json()
        assert specs["default"] == "myenv"
        assert specs["kernelspecs"]["myenv"]["spec"]["display_name"] == "My Env"
        (session,) = rest.get("api/sessions").json()
        assert session["kernel"]["name"] == "myenv"
        # what an IDE does on open and save: read the model and write it back
        model = rest.get("api/contents/nb.ipynb", params={"content": 1}).json()
        saved = rest.put("api/contents/nb.ipynb", json={"type": "notebook", "content": model["content"]})
        assert saved.status_code == 200, saved.text
    assert path.read_bytes() == before
    assert cli("stop").returncode == 0
