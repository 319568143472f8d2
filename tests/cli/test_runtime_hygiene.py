"""The runtime directory and its descriptors: another user's directory is refused with the way
out, and cleaning up after a dead daemon never takes what a live one uses."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.conftest import private_root
from warmkernel.daemon.discovery import RUNTIME_DIR_ENV, SOCKET_DIR_PREFIX

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root makes a user and gives it a directory")


@pytest.fixture
def other_user() -> Iterator[str]:
    """A throwaway local user, removed afterwards."""
    name = f"wkt{secrets.token_hex(4)}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=True, capture_output=True, timeout=60)


def _refusal(stderr: str, path: Path | str, user: str) -> None:
    assert stderr.count("\n") == 1 and stderr.startswith(
        f"warmkernel: daemon_error: {path} belongs to user "
    ), stderr
    assert f"user {user} (uid " in stderr
    assert stderr.rstrip().endswith(
        f"point {RUNTIME_DIR_ENV} at a directory of your own (or have it removed)"
    )


@as_root
def test_a_runtime_directory_the_variable_names_that_another_user_owns_is_refused(
    cli: Cli, other_user: str
) -> None:
    cli.runtime.mkdir(mode=0o700, parents=True)
    os.chown(cli.runtime, pwd.getpwnam(other_user).pw_uid, -1)
    try:
        done = cli("run", "1")
    finally:
        os.chown(cli.runtime, os.getuid(), -1)  # for the fixtures' own look at it
    assert done.returncode == 1
    _refusal(done.stderr, cli.runtime, other_user)


@as_root
@pytest.mark.skipif(Path(f"/run/user/{os.getuid()}").is_dir(), reason="the default is in /run/user here")
@pytest.mark.skipif(
    any(Path(where).resolve().is_relative_to("/tmp") for where in (sys.prefix, __file__)),
    reason="the test mounts a private /tmp, which would hide this interpreter or checkout",
)
def test_the_default_runtime_directory_another_user_made_in_tmp_is_refused_naming_the_variable(
    cli: Cli, other_user: str
) -> None:
    # In a mount namespace of its own, over a private /tmp: the machine's /tmp is never touched.
    default = f"/tmp/warmkernel-{os.getuid()}"
    run = shlex.join([sys.executable, "-m", "warmkernel", "run", "1"])
    script = (
        "mount -t tmpfs -o size=1m,mode=1777 wkt /tmp"
        f" && mkdir -m 0777 {default} && chown {other_user} {default}"
        f" && mkdir /tmp/ws && cd /tmp/ws && exec {run}"
    )
    env = {name: value for name, value in cli.env.items() if name != RUNTIME_DIR_ENV}
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 1
    _refusal(done.stderr, default, other_user)


def _dead_pid() -> int:
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


def _stale_copy(live: Path, directory: Path, **fields: object) -> Path:
    """A descriptor like `live`'s, of a daemon that is gone (as a crashed one leaves it)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    stale = directory / "0badcafe.json"
    stale.write_text(
        json.dumps(json.loads(live.read_text()) | {"id": "0badcafe", "pid": _dead_pid()} | fields)
    )
    return stale


@pytest.mark.parametrize("where", ["beside-its-descriptor", "in-another-runtime-directory"])
def test_a_stale_descriptor_naming_a_live_daemons_socket_goes_and_the_socket_stays(
    cli: Cli, where: str
) -> None:
    assert cli("run", "kept = 41").returncode == 0
    (live,) = (cli.runtime / "daemons").glob("*.json")
    sock = Path(json.loads(live.read_text())["socket"])
    other = replace(cli, root=private_root())  # a daemon listed in one runtime directory, not in this
    try:
        cleaner = cli if where == "beside-its-descriptor" else other
        stale = _stale_copy(live, cleaner.runtime / "daemons")
        assert "0badcafe" not in cleaner("sessions").stdout
        assert not stale.exists()
    finally:
        shutil.rmtree(other.root)
    assert sock.exists()
    assert cli("run", "kept + 1").stdout.splitlines()[-1] == "Out[2]: 42"


def test_a_stale_descriptors_socket_directory_that_nothing_listens_on_is_removed(cli: Cli) -> None:
    directory = Path(tempfile.mkdtemp(prefix=SOCKET_DIR_PREFIX))
    try:
        with socket.socket(socket.AF_UNIX) as bound:  # bound, never listening: as a killed daemon leaves it
            bound.bind(str(directory / "mcp.sock"))
        assert cli("run", "1").returncode == 0
        (live,) = (cli.runtime / "daemons").glob("*.json")
        stale = _stale_copy(live, cli.runtime / "daemons", socket=str(directory / "mcp.sock"))
        assert "0badcafe" not in cli("sessions").stdout
        assert not stale.exists() and not directory.exists()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
