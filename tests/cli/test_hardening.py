"""The command line under hostile conditions: closed pipes, odd files, planted or racing
descriptors, a runtime directory that is not ours."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.cli.conftest import Cli
from tests.conftest import gone, needs_cgroups, unmarked_grandchild_cell
from warmkernel.cli.tool_verbs import MAX_CELL_BYTES
from warmkernel.daemon.discovery import RUNTIME_DIR_ENV, runtime_dir


def one_line(stderr: str, code: str) -> None:
    assert stderr.count("\n") == 1 and stderr.startswith(f"warmkernel: {code}: "), stderr
    assert "Traceback" not in stderr


def test_a_non_utf8_cell_file_is_invalid_arguments_naming_the_byte(cli: Cli) -> None:
    (cli.workspace / "cell.py").write_bytes(b"x = '\xff'\n")
    done = cli("run", "-f", "cell.py")
    assert done.returncode == 2
    one_line(done.stderr, "invalid_arguments")
    assert "not UTF-8 text (byte 0xff at offset 5)" in done.stderr


def test_a_cell_file_past_the_limit_is_invalid_arguments(cli: Cli) -> None:
    with open(cli.workspace / "huge.py", "wb") as handle:
        handle.truncate(MAX_CELL_BYTES + 1)
    done = cli("run", "-f", "huge.py")
    assert done.returncode == 2
    one_line(done.stderr, "invalid_arguments")


@pytest.mark.parametrize(
    ("words", "unbuffered"),
    [
        (("run", "print('x\\n' * 200_000)"), "1"),
        (("--version",), "1"),
        (("--version",), ""),
        (("run", "--help"), ""),  # unbuffered, argparse's own write ignores the closed pipe
    ],
    ids=["a reply", "--version", "--version, buffered", "--help, buffered"],
)
def test_a_reader_that_leaves_early_ends_the_verb_quietly_as_sigpipe_would(
    cli: Cli, words: tuple[str, ...], unbuffered: str
) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "warmkernel", *words],
        cwd=cli.workspace,
        env=cli.env | {"PYTHONUNBUFFERED": unbuffered},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the reply is written
        stderr = process.stderr.read()
        assert process.wait(timeout=90) == 141
    assert stderr == ""


def test_a_live_daemon_whose_socket_is_gone_is_daemon_error_in_one_line(cli: Cli) -> None:
    assert cli("start").returncode == 0
    (descriptor,) = (cli.runtime / "daemons").glob("*.json")
    Path(json.loads(descriptor.read_text())["socket"]).unlink()
    done = cli("run", "1")
    assert done.returncode == 1
    one_line(done.stderr, "daemon_error")


def _planted(cli: Cli, name: str, **fields: object) -> Path:
    """A descriptor for a live process (this test's), as a daemon would write it."""
    directory = cli.runtime / "daemons"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / name
    entry = {
        "id": "0badcafe",
        "pid": os.getpid(),
        "workspace": str(cli.workspace),
        "socket": "/nonexistent/sock",
        "started_at": time.time(),
        **fields,
    }
    path.write_text(json.dumps(entry))
    return path


def test_a_daemon_stays_found_when_the_wall_clock_is_stepped_forward(cli: Cli) -> None:
    # psutil derives start times from the boot time the wall clock implies now: after a step of an
    # hour forward, the daemon looks an hour younger than the descriptor it wrote.
    assert cli("start").returncode == 0
    (path,) = (cli.runtime / "daemons").glob("*.json")
    descriptor = json.loads(path.read_text())
    path.write_text(json.dumps(descriptor | {"started_at": descriptor["started_at"] - 3600}))
    done = cli("status")
    assert done.returncode == 0, done.stderr
    assert path.exists()


def test_a_daemon_run_in_the_foreground_stays_found_when_the_wall_clock_is_stepped(cli: Cli) -> None:
    # As a service manager runs it: not forked by a client, so it names itself.
    daemon = subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "daemon"],
        cwd=cli.workspace,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not list((cli.runtime / "daemons").glob("*.json")):
            assert daemon.poll() is None and time.monotonic() < deadline, "the daemon never became ready"
            time.sleep(0.1)
        (path,) = (cli.runtime / "daemons").glob("*.json")
        descriptor = json.loads(path.read_text())
        path.write_text(json.dumps(descriptor | {"started_at": descriptor["started_at"] - 3600}))
        assert cli("status").returncode == 0
        assert path.exists()
        assert cli("stop").returncode == 0
        assert daemon.wait(30) == 0
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(30)


def test_a_reused_pid_is_not_taken_for_the_daemon(cli: Cli) -> None:
    # This test's process is live, but it started after the descriptor and bears no daemon's title.
    path = _planted(cli, "0badcafe.json", started_at=psutil.Process().create_time() - 3600)
    assert cli("sessions").stdout.strip() == "No live daemons."
    assert not path.exists()


@pytest.mark.parametrize(
    "words",
    [
        ("view", "--no-open", "--port", "70000"),
        ("serve", "--port", "-1"),
        ("start", "--serve", "--server-port", "99999"),
    ],
)
def test_a_port_that_does_not_exist_is_refused_before_any_daemon(cli: Cli, words: tuple[str, ...]) -> None:
    done = cli(*words)
    assert done.returncode == 2
    assert "is not a port: give 1 to 65535, or 0 for a free one" in done.stderr.splitlines()[-1]
    assert cli("sessions").stdout.strip() == "No live daemons."


def _hello(cli: Cli, hello: dict[str, object]) -> dict[str, object]:
    """The daemon's answer to one hello on its socket, as any client (of any version) may send."""
    (path,) = (cli.runtime / "daemons").glob("*.json")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(json.loads(path.read_text())["socket"])
        sock.sendall(json.dumps(hello).encode() + b"\n")
        return json.loads(sock.makefile("rb").readline())


def test_a_hello_the_daemon_cannot_serve_is_answered_and_the_kernel_stays(cli: Cli) -> None:
    assert cli("run", "kept = 41").returncode == 0
    out_of_range = _hello(cli, {"client": "view", "view": {"port": 70000}})
    assert out_of_range["error"] == {
        "code": "invalid_arguments",
        "message": "--port 70000 is not a port: give 1 to 65535, or 0 for a free one",
    }
    # A port no socket call takes: refused by the hello's own check, before any socket call.
    not_a_number = _hello(cli, {"client": "view", "view": {"port": float("inf")}})
    assert not_a_number["error"] == {
        "code": "invalid_arguments",
        "message": 'the hello\'s "view.port" must be a whole number, not Infinity',
    }
    assert cli("run", "kept + 1").stdout.splitlines()[-1] == "Out[2]: 42"


def test_the_runtime_directory_is_the_same_whatever_environment_a_host_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The MCP SDK's stdio clients pass a server HOME, PATH and a few more, unless told otherwise.
    monkeypatch.delenv(RUNTIME_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    from_a_shell = runtime_dir()
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.delenv("TMPDIR")
    assert runtime_dir() == from_a_shell
    assert from_a_shell.name in ("warmkernel", f"warmkernel-{os.getuid()}")


def test_a_half_written_descriptor_is_neither_read_nor_deleted(cli: Cli) -> None:
    cli.runtime.mkdir(mode=0o700, parents=True)
    partial = cli.runtime / "daemons" / ".tmp-x.json"
    partial.parent.mkdir(mode=0o700)
    partial.write_text("")
    done = cli("sessions")
    assert done.returncode == 0 and partial.exists()


def test_a_descriptor_with_a_field_this_version_does_not_know_is_kept(cli: Cli) -> None:
    # An older CLI deleted it as unreadable; unknown fields are ignored since the daemon moved.
    path = _planted(cli, "0badcafe.json", added_by_a_newer_version=True)
    done = cli("sessions")
    assert "0badcafe" in done.stdout and path.exists()
    path.unlink()


def test_a_descriptor_owned_by_another_user_is_not_trusted(cli: Cli) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can give a file to another user")
    path = _planted(cli, "0badcafe.json")
    os.chown(path, 1000, 1000)
    done = cli("sessions")
    assert done.returncode == 0 and "0badcafe" not in done.stdout


def test_a_runtime_directory_that_is_a_symlink_is_refused_and_its_target_left_alone(
    cli: Cli, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    cli.runtime.parent.mkdir(parents=True, exist_ok=True)
    cli.runtime.symlink_to(target)
    done = cli("sessions")
    assert done.returncode == 1
    one_line(done.stderr, "daemon_error")
    assert "symbolic link" in done.stderr
    assert target.stat().st_mode & 0o777 == 0o755
    cli.runtime.unlink()


def test_a_starting_daemon_sweeps_the_runtime_roots_of_servers_that_are_gone(cli: Cli) -> None:
    me = psutil.Process()
    since_boot = me.create_time() - psutil.boot_time()

    def root(owner: str | None) -> Path:
        made = Path(tempfile.mkdtemp(prefix="wk-"))
        if owner is not None:
            (made / "owner").write_text(owner)
        return made

    gone_owner = root("999999999 since-boot 1.0")  # no such process
    (gone_owner / "kernel-1.log").write_text("left behind")
    reused_pid = root(f"{me.pid} since-boot {since_boot - 3600}")  # this pid, but not this process
    alive = root(f"{me.pid} since-boot {since_boot}")
    # An older version's owner file: an epoch start time, an hour off as after a step of the wall
    # clock; its root is kept while a process of that pid runs.
    older_version = root(f"{me.pid} {me.create_time() - 3600}")
    older_version_gone = root("999999999 1.0")
    unnamed = root(None)  # an even older version's root: its owner is unknown
    young = root(None)  # just made: its owner file may be on the way
    swept = (gone_owner, reused_pid, older_version_gone)
    kept = (alive, older_version, unnamed)
    an_hour_ago = time.time() - 3600
    for old in (*swept, *kept):
        os.utime(old, (an_hour_ago, an_hour_ago))
    try:
        assert cli("start").returncode == 0
        assert [path.exists() for path in swept] == [False] * len(swept)
        assert [path.exists() for path in (*kept, young)] == [True] * (len(kept) + 1)
    finally:
        for made in (*swept, *kept, young):
            shutil.rmtree(made, ignore_errors=True)


def test_a_servers_root_names_its_owner_by_its_start_since_boot(cli: Cli) -> None:
    assert cli("start").returncode == 0
    status = json.loads(cli("status", "--json").stdout)
    owner = (Path(str(status["connection_file"])).parent / "owner").read_text().split()
    daemon = psutil.Process(int(owner[0]))
    assert owner[1] == "since-boot"
    assert abs(float(owner[2]) - (daemon.create_time() - psutil.boot_time())) < 1
    assert " ".join(daemon.cmdline()).startswith("warmkernel daemon")


def _unmarked_grandchild(cli: Cli) -> tuple[int, dict[str, object]]:
    """Starts a grandchild only the kernel's cgroup holds; its pid, and the kernel's status."""
    ran = cli("run", unmarked_grandchild_cell())
    assert ran.returncode == 0, ran.stderr
    grandchild = int(ran.stdout.splitlines()[-1].rpartition(" ")[2])
    status = json.loads(cli("status", "--json").stdout)
    assert str(status["process_tracking"]).startswith("cgroup ")
    return grandchild, status


@needs_cgroups
def test_stop_kills_a_kernels_unmarked_double_forked_grandchild_and_removes_its_cgroup(cli: Cli) -> None:
    grandchild, status = _unmarked_grandchild(cli)
    cgroup = Path(str(status["process_tracking"]).removeprefix("cgroup "))
    assert cgroup.is_dir()
    assert cli("stop").returncode == 0
    assert gone(grandchild)
    assert not cgroup.exists()


@needs_cgroups
def test_a_starting_daemon_kills_what_a_killed_daemons_kernels_left_in_their_cgroups(cli: Cli) -> None:
    grandchild, status = _unmarked_grandchild(cli)
    cgroup = Path(str(status["process_tracking"]).removeprefix("cgroup "))
    root = Path(str(status["connection_file"])).parent
    (descriptor,) = (cli.runtime / "daemons").glob("*.json")
    os.kill(json.loads(descriptor.read_text())["pid"], signal.SIGKILL)  # no chance to clean up
    deadline = time.monotonic() + 30
    while not gone(int(str(status["kernel_pid"]))):  # it follows its daemon by itself
        assert time.monotonic() < deadline, "the kernel outlived its daemon"
        time.sleep(0.1)
    assert not gone(grandchild) and cgroup.is_dir()
    an_hour_ago = time.time() - 3600
    os.utime(root, (an_hour_ago, an_hour_ago))  # old enough for the sweep
    assert cli("start").returncode == 0
    assert gone(grandchild)
    assert not cgroup.exists() and not root.exists()


def test_daemon_logs_rotate_keeping_the_last_five(cli: Cli) -> None:
    cli.runtime.mkdir(mode=0o700, parents=True)
    for n in range(8):
        old = cli.runtime / f"daemon-{1000 + n}-1.log"
        old.write_text("old")
        os.utime(old, (1000 + n, 1000 + n))
    assert cli("start").returncode == 0
    logs = sorted(path.name for path in cli.runtime.glob("daemon-*.log"))
    assert len(logs) == 5
    assert logs[:4] == [f"daemon-{1000 + n}-1.log" for n in range(4, 8)]


def test_the_cli_never_sends_anything_to_the_environments_proxy(cli: Cli) -> None:
    # Since the CLI speaks to its daemon over a Unix socket, a proxy has nothing to intercept.
    with socket.socket() as trap:
        trap.bind(("127.0.0.1", 0))
        trap.listen()
        trap.setblocking(False)
        proxy = f"http://127.0.0.1:{trap.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, "-m", "warmkernel", "run", "6 * 7"],
            cwd=cli.workspace,
            env={**cli.env, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "ALL_PROXY": proxy, "NO_PROXY": ""},
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == 0 and "Out[1]: 42" in done.stdout, done.stderr
        with pytest.raises(BlockingIOError):
            trap.accept()


def test_a_size_that_is_not_one_is_refused_with_the_valid_forms(cli: Cli) -> None:
    done = cli("start", "--max-kernel-memory", "8X")
    assert done.returncode == 2
    assert "'8X' is not a size; give a number of bytes, or one with K, M, G or T" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--wait", "-1", "must be a finite number of seconds more than 0, not -1"),
        ("--wait", "1e400", "must be a finite number of seconds more than 0, not 1e400"),
        ("--inline-chars", "-5", "must be 1 or more, not -5"),
        ("--inline-lines", "0", "must be 1 or more, not 0"),
        ("--max-kernels", "0", "must be 1 or more, not 0"),
        ("--max-images", "-1", "must be 0 or more, not -1"),
    ],
)
def test_a_number_out_of_its_range_is_refused_before_anything_starts(
    cli: Cli, flag: str, value: str, why: str
) -> None:
    done = cli("mcp", flag, value)
    assert done.returncode == 2
    assert f"argument {flag}: {why}" in done.stderr
    assert cli("sessions").stdout.strip() == "No live daemons."


def test_the_guards_are_kernel_options_of_the_daemon(cli: Cli) -> None:
    assert cli("start", "--max-kernel-memory", "8G", "--max-cell-output-bytes", "1M").returncode == 0
    (descriptor,) = (cli.runtime / "daemons").glob("*.json")
    options = json.loads(descriptor.read_text())["kernel_options"]
    assert (options["max_kernel_memory_bytes"], options["max_cell_output_bytes"]) == (8 << 30, 1 << 20)
    done = cli("start", "--max-kernel-memory", "4G")
    assert done.returncode == 2 and "kernel_options_differ" in done.stderr
    assert "runs with --max-kernel-memory 8G (you asked for --max-kernel-memory 4G)" in done.stderr
    done = cli("start", "--no-save-outputs")
    assert "runs with no --no-save-outputs (you asked for --no-save-outputs)" in done.stderr
