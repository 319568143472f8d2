"""Secrets never reach the process list: `serve --token`, a Jupyter token in the environment and a
cell's source stay out of every process title, and a token that would let anyone in is refused."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from tests.cli.conftest import Cli
from tests.mcp.calls import run
from tests.mcp.conftest import connect
from warmkernel.daemon.client import open_socket
from warmkernel.daemon.discovery import daemon_title, find_daemon
from warmkernel.errors import WarmkernelError

TOKEN = "s3cret-t0ken"
CELL = 'password = "hunter2-in-a-cell"'


def _title(pid: int) -> str:
    """What every local user reads for `pid` in the process list."""
    return subprocess.run(
        ["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True, text=True
    ).stdout.strip()


def _daemon_pid(cli: Cli) -> int:
    (row,) = json.loads(cli("sessions", "--json").stdout)
    return int(row["pid"])


@contextmanager
def _serve(cli: Cli, *flags: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`warmkernel serve --port 0 FLAGS` once it serves, and what it said on stderr: its first line,
    then, once the block ends (SIGTERM, which it exits 0 on), the rest."""
    server = subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "serve", "--port", "0", *flags],
        cwd=cli.workspace,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    said = [server.stderr.readline()]
    try:
        assert "serving MCP at" in said[0]
        yield server, said
    finally:
        server.send_signal(signal.SIGTERM)
        with server.stderr:
            said += server.stderr.readlines()  # to its end, as it exits
    assert server.wait(30) == 0


def test_serve_with_a_token_flag_warns_and_no_process_title_shows_the_token(cli: Cli) -> None:
    with _serve(cli, "--token", TOKEN) as (server, said):
        assert _title(server.pid) == f"warmkernel serve {cli.workspace}"
        assert _title(_daemon_pid(cli)) == daemon_title(cli.workspace)  # forked from `serve`
    (_, warning) = said
    assert warning.startswith("warmkernel: warning: --token is readable by every local user in the process")
    assert "give the token with --token-file PATH or $WARMKERNEL_TOKEN instead" in warning


def test_serve_takes_its_token_from_a_file_and_warns_of_nothing(cli: Cli, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    token_file.chmod(0o600)
    with _serve(cli, "--token-file", str(token_file)) as (server, said):
        url = json.loads(cli("sessions", "--json").stdout)[0]["public_url"]

        async def http_client() -> None:
            async with connect(url, TOKEN) as client:
                number, _ = await run(client, "over_http = 1")
                assert number == 1

        anyio.run(http_client)
        assert TOKEN not in _title(server.pid)
    assert len(said) == 1 and "public_token" not in said[0]  # given: neither pointed at nor warned of


@pytest.mark.parametrize(
    "starter",
    [
        pytest.param([], id="run-with-the-jupyter-token-first-in-its-environment"),
        # A program that set its first variable again before starting the daemon: setproctitle
        # cannot rename a process forked from it.
        pytest.param(
            [
                "-c",
                "import os, sys; os.environ[next(iter(os.environ))] += ' '; from warmkernel.cli import main; "
                "sys.exit(main())",
            ],
            id="run-from-a-process-whose-environment-changed",
        ),
    ],
)
def test_a_daemon_shows_its_title_whatever_the_environment_it_was_started_from(
    cli: Cli, starter: list[str]
) -> None:
    # First in the environment: setting it in the forked daemon moved the variable setproctitle
    # finds the command line by, and the daemon showed `warmkernel run password = ...` for its life.
    env = {"WARMKERNEL_JUPYTER_TOKEN": TOKEN, **cli.env}
    done = subprocess.run(
        [sys.executable, *(starter or ["-m", "warmkernel"]), "run", CELL],
        cwd=cli.workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    title = _title(_daemon_pid(cli))
    assert title == daemon_title(cli.workspace)
    assert TOKEN not in title and "hunter2" not in title


EMPTY = "gives an empty bearer token, which would let in a request with no token; give a token, or none"


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        pytest.param(["--token", ""], {}, f"--token {EMPTY}", id="empty-flag"),
        pytest.param(["--token-file", "{file}"], {}, f"--token-file {{file}} {EMPTY}", id="empty-file"),
        pytest.param([], {"WARMKERNEL_TOKEN": ""}, f"$WARMKERNEL_TOKEN {EMPTY}", id="empty-variable"),
        pytest.param(["--token", " "], {}, f"--token {EMPTY}", id="only-whitespace"),
        pytest.param(["--token", " padded"], {}, "whitespace at an end or a control character", id="padded"),
        pytest.param(
            ["--token", "a", "--token-file", "{file}"], {}, "give --token or --token-file, not", id="both"
        ),
        pytest.param(
            ["--token-file", "/nonexistent/t"], {}, "/nonexistent/t: No such file", id="missing-file"
        ),
    ],
)
def test_an_empty_or_unsendable_token_is_refused_with_exit_2_before_any_daemon_starts(
    cli: Cli, tmp_path: Path, flags: list[str], env: dict[str, str], message: str
) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "serve", "--port", "0", *[f.format(file=empty) for f in flags]],
        cwd=cli.workspace,
        env=cli.env | env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("warmkernel: invalid_arguments: ") and done.stderr.count("\n") == 1
    assert message.format(file=empty) in done.stderr
    assert not list((cli.runtime / "daemons").glob("*.json")), "refused before a daemon was started"


def test_a_serve_hello_with_an_empty_token_is_refused_and_the_daemon_stays(cli: Cli) -> None:
    assert cli("run", "kept = 41").returncode == 0
    descriptor = find_daemon(cli.workspace)
    assert descriptor is not None
    endpoint = {"host": "127.0.0.1", "port": 0, "path": "/mcp", "token": "", "allowed_hosts": []}
    with pytest.raises(WarmkernelError) as refused:
        open_socket(descriptor, "serve", serve=endpoint)
    assert refused.value.code == "invalid_arguments"
    assert refused.value.message.startswith("the serve hello gives an empty bearer token")
    assert cli("run", "kept + 1").stdout.splitlines()[-1] == "Out[2]: 42"
