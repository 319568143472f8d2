"""Project and user configuration on the command line: `warmkernel config`, a bad file stopping
start-up, and configured values acting exactly as their flags (the notebook default, kernel
options a live daemon is compared with, the files python_status names)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.cli.test_nb import write_notebook
from tests.cli.test_serve_attach import _descriptor, _rest  # pyright: ignore[reportPrivateUsage]


def _user_file(cli: Cli) -> Path:
    path = Path(cli.env["XDG_CONFIG_HOME"]) / "warmkernel" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_config_shows_each_setting_with_its_value_and_source(cli: Cli) -> None:
    _user_file(cli).write_text("max_images = 2\ninline_lines = 100\n")
    (cli.workspace / "pyproject.toml").write_text(
        "[tool.warmkernel]\ninline_lines = 200\ninline_chars = 8000\n"
    )
    done = cli("config", "--json", "--inline-chars", "9000")
    assert done.returncode == 0, done.stderr
    settings = json.loads(done.stdout)["settings"]
    project = str(cli.workspace / "pyproject.toml")
    assert settings["inline_chars"] == {"value": 9000, "source": "flag", "where": "--inline-chars"}
    assert settings["inline_lines"] == {"value": 200, "source": "project", "where": f"{project}:2"}
    assert settings["max_images"] == {"value": 2, "source": "user", "where": f"{_user_file(cli)}:1"}
    assert settings["state_dir"]["source"] == "environment"  # the tests' own WARMKERNEL_STATE_DIR
    assert settings["wait"] == {"value": 10.0, "source": "default", "where": None}
    text = cli("config").stdout
    assert any(line.split()[:3] == ["inline_lines", "200", "project"] for line in text.splitlines())
    assert f"  {project}\n" in text and f"  {cli.workspace / 'warmkernel.toml'}  (not used)" in text


def test_a_bad_configuration_stops_start_up_in_one_line(cli: Cli) -> None:
    (cli.workspace / "warmkernel.toml").write_text("inline_chars = 8000\nmax_kernel = 2\n")
    done = cli("mcp")
    assert done.returncode == 2
    assert done.stderr == (
        f"warmkernel: invalid_config: {cli.workspace / 'warmkernel.toml'}:2: max_kernel = 2: "
        "unknown setting; did you mean max_kernels?\n"
    )
    assert cli("stop").returncode == 2  # stop still works (there is nothing to stop)
    assert "invalid_config" not in cli("stop").stderr


def test_configured_options_act_as_their_flags(cli: Cli) -> None:
    write_notebook(cli.workspace / "sales.ipynb", [("load", "total = 40 + 2"), ("show", "print(total)")])
    (cli.workspace / "warmkernel.toml").write_text('notebook = "sales.ipynb"\nmax_kernels = 3\n')
    started = cli("start")  # warms the configured notebook
    assert started.returncode == 0, started.stdout + started.stderr
    status = cli("nb", "status", "--json")
    assert status.returncode == 0, status.stderr
    facts = json.loads(status.stdout)
    assert facts["notebook"].endswith("sales.ipynb")
    assert [cell["state"] for cell in facts["cells"]] == ["fresh", "fresh"]
    python = cli("status").stdout
    assert f"configuration: {cli.workspace / 'warmkernel.toml'}" in python
    # A configured kernel option is compared with the live daemon's, as the flag would be.
    (cli.workspace / "warmkernel.toml").write_text('notebook = "sales.ipynb"\nmax_kernels = 2\n')
    refused = cli("run", "1")
    assert refused.returncode == 2
    assert "kernel_options_differ" in refused.stderr
    where = f"{cli.workspace / 'warmkernel.toml'}:2"
    assert f"--max-kernels 3 (you asked for --max-kernels 2, set in project {where})" in refused.stderr


@pytest.mark.timeout(240)
def test_start_serves_for_an_ide_on_the_configured_port(cli: Cli) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (cli.workspace / "pyproject.toml").write_text(f"[tool.warmkernel]\nserve = true\nserver_port = {port}\n")
    started = cli("start")
    assert started.returncode == 0, started.stdout + started.stderr
    jupyter_url = _descriptor(cli)["jupyter_url"]
    assert jupyter_url.startswith(f"http://127.0.0.1:{port}/")
    with _rest(jupyter_url) as rest:
        assert rest.get("api/kernels").status_code == 200
    assert cli("stop").returncode == 0
