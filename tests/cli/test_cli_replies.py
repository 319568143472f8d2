"""The CLI speaks CLI: the calls its replies suggest are `warmkernel` commands that work as
written, images come as files, and a reader that leaves early ends the verb quietly."""

from __future__ import annotations

import base64
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import Cli
from tests.cli.test_tool_verbs import ONE_PIXEL
from tests.gates import Gate

PNG = base64.b64decode(ONE_PIXEL)


def number_of(stdout: str) -> str:
    found = re.search(r"^In \[(\d+)\]", stdout, re.MULTILINE)
    assert found, stdout
    return found.group(1)


def hinted(stdout: str) -> list[list[str]]:
    """Every `warmkernel ...` command a reply suggests, as argv words (up to the word `to`,
    `shows`, `lists`, ... that follows it, or the closing bracket)."""
    commands = re.findall(r"warmkernel ([^\]\n]+?)(?= to | shows | lists | summarizes |\]|\.|$)", stdout)
    return [shlex.split(command) for command in commands]


def test_a_running_cell_names_commands_that_work(daemon_cli: Cli, gate: Gate) -> None:
    ran = daemon_cli("run", "--timeout", "0.5", f"print('begun', flush=True)\n{gate.wait}")
    number = number_of(ran.stdout)
    assert ran.returncode == 3
    assert ran.stdout.splitlines()[-1] == (
        f"Still running. Next: warmkernel wait {number} to keep waiting, warmkernel read {number} to read "
        "the output, or warmkernel interrupt to stop it."
    )
    assert "wait_python" not in ran.stdout and "(" not in ran.stdout.splitlines()[-1]
    assert hinted(ran.stdout)[:2] == [["wait", number], ["read", number]]
    gate.open()
    waited = daemon_cli(*hinted(ran.stdout)[0], "--timeout", "30")
    assert waited.returncode == 0 and "begun" in waited.stdout, waited.stdout + waited.stderr


def test_an_over_budget_reply_and_a_traceback_name_commands_that_work(daemon_cli: Cli) -> None:
    ran = daemon_cli("run", "for i in range(1000): print(f'row {i}')")
    (omitted,) = [line for line in ran.stdout.splitlines() if "omitted" in line]
    (command,) = hinted(omitted)
    assert command[:3] == ["read", number_of(ran.stdout), "--lines"]
    read = daemon_cli(*command)
    first, last = (int(n) for n in command[3].split(":"))
    assert read.returncode == 0 and read.stdout.splitlines()[1] == f"row {first - 1}", read.stdout
    assert read.stdout.splitlines()[-1] == f"row {last - 1}"

    failed = daemon_cli("run", "import json\njson.loads('{')")
    assert failed.returncode == 1
    (frames,) = [line for line in failed.stdout.splitlines() if "library frames" in line]
    (command,) = hinted(frames)
    assert command == ["read", number_of(failed.stdout), "--stream", "traceback"]
    whole = daemon_cli(*command).stdout
    assert "decoder.py" in whole and len(whole.splitlines()) > len(failed.stdout.splitlines())


def test_refusals_name_commands(daemon_cli: Cli, gate: Gate) -> None:
    ran = daemon_cli("run", "--timeout", "0.2", gate.wait)
    number = number_of(ran.stdout)
    busy = daemon_cli("run", "1")
    assert busy.returncode == 3
    assert f"Call warmkernel wait {number} to wait for it, or warmkernel interrupt to stop it." in busy.stderr
    gate.open()
    assert daemon_cli("wait", number, "--timeout", "30").returncode == 0
    missing = daemon_cli("inspect", "no_such_name")
    assert missing.stderr.rstrip().endswith("warmkernel vars lists the names"), missing.stderr


def test_images_are_written_to_files_and_their_paths_printed(daemon_cli: Cli, tmp_path: Path) -> None:
    cell = (
        "from IPython.display import Image, display\nimport base64\n"
        f"for _ in range(2): display(Image(base64.b64decode({ONE_PIXEL!r})))"
    )
    ran = daemon_cli("run", cell)
    number = number_of(ran.stdout)
    saved = re.findall(r"^\[image (\d) saved: (.+)\]$", ran.stdout, re.MULTILINE)
    assert [ordinal for ordinal, _ in saved] == ["1", "2"], ran.stdout
    folder = Path(saved[0][1]).parent
    assert folder.parent == daemon_cli.runtime / "images"  # private: the daemon's own folder there
    assert (folder.parent.stat().st_mode & 0o777, folder.stat().st_mode & 0o777) == (0o700, 0o700)
    # Kernels share the folder and each numbers its own executions: the image's digest ends the name.
    assert all(re.search(rf"/execution-{number}-image-\d-[0-9a-f]{{8}}\.png$", path) for _, path in saved)
    assert all(Path(path).read_bytes() == PNG for _, path in saved)
    shown_again = daemon_cli("show", number)
    assert re.findall(r"saved: (.+)\]$", shown_again.stdout, re.MULTILINE) == [path for _, path in saved]
    assert len(list(folder.iterdir())) == 2, "showing an image again writes the same file"

    chosen = tmp_path / "plots"
    read = daemon_cli("read", number, "--stream", "images", "--lines", "-1:", "-o", str(chosen))
    assert read.returncode == 0, read.stderr
    lines = read.stdout.splitlines()
    assert lines[1:] == [
        "[image 2: image/png 1x1, 70 bytes]",
        f"[image 2 saved: {chosen / f'execution-{number}-image-2.png'}]",
    ]
    assert [p.name for p in chosen.iterdir()] == [f"execution-{number}-image-2.png"]


def test_a_reader_that_leaves_early_ends_the_verb_quietly(daemon_cli: Cli) -> None:
    ran = daemon_cli("run", "# warmkernel: --full-output\nfor i in range(40_000): print('x' * 20)")
    number = number_of(ran.stdout)
    with subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "read", number],
        cwd=daemon_cli.workspace,
        env=daemon_cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        assert reader.stdout.readline().startswith(f"execution {number}".encode())
        reader.stdout.close()  # as `| head -1` does
        assert reader.wait(timeout=60) == 141
        assert reader.stderr.read() == b""
