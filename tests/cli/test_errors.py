"""A CLI failure is one line naming its code, with the documented exit status."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.conftest import Cli
from tests.gates import Gate


def test_an_unknown_verb_is_named_with_the_nearest_one_and_the_verbs_people_use(cli: Cli) -> None:
    done = cli("stauts")
    assert done.returncode == 2
    message = done.stderr.splitlines()[-1]
    assert message.startswith("warmkernel: error: unknown verb 'stauts'; did you mean status? (the verbs: ")
    assert "daemon" not in message, "the daemon's own verb is not offered"
    assert "did you mean" not in cli("xyzzy").stderr


def test_stop_without_a_daemon_is_daemon_not_found(cli: Cli) -> None:
    done = cli("stop")
    assert done.returncode == 2
    assert done.stderr.startswith("warmkernel: daemon_not_found: no live daemon serves ")


def test_a_daemon_id_that_is_not_live_is_daemon_not_found_and_lists_the_live_ones(cli: Cli) -> None:
    done = cli("status", "--daemon", "deadbeef")
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "warmkernel: daemon_not_found: no live daemon 'deadbeef'; live daemons: none"
    )


def test_two_live_daemons_for_one_workspace_are_ambiguous_and_one_can_be_chosen(cli: Cli) -> None:
    assert cli("start").returncode == 0
    (descriptor,) = (cli.runtime / "daemons").glob("*.json")
    # The start lock keeps this from happening; a descriptor copied under another id stands in.
    twin = json.loads(descriptor.read_text()) | {"id": "0badcafe"}
    (cli.runtime / "daemons" / "0badcafe.json").write_text(json.dumps(twin))
    done = cli("status")
    assert done.returncode == 2
    assert done.stderr.startswith("warmkernel: ambiguous_daemon: 2 live daemons serve ")
    assert "0badcafe" in done.stderr and "--daemon ID" in done.stderr
    assert cli("status", "--daemon", "0badcafe").returncode == 0
    (cli.runtime / "daemons" / "0badcafe.json").unlink()


def test_a_verb_in_a_subdirectory_reaches_the_daemon_of_the_workspace_above(cli: Cli) -> None:
    inner = cli.workspace / "inner"
    inner.mkdir()
    assert cli("run", "where = 'outer'").returncode == 0
    assert Cli(inner, cli.root)("run", "where").stdout.splitlines()[-1] == "Out[2]: 'outer'"
    assert len(json.loads(cli("sessions", "--json").stdout)) == 1


def test_run_refuses_a_bad_timeout_as_its_flag_not_as_a_line_of_the_cell(cli: Cli) -> None:
    for flag, value in (("--timeout", "-5"), ("--silence", "0"), ("--timeout", "inf")):
        done = cli("run", "1", flag, value)
        assert done.returncode == 2, done
        refusal = f"warmkernel: invalid_timeout: {flag} {float(value):g} is not valid"
        assert done.stderr.startswith(refusal), done
        assert "line" not in done.stderr
    assert cli("sessions").stdout.strip() == "No live daemons."  # refused before a daemon was started
    done = cli("run", "1", "--timeout", "1e3")
    assert done.returncode == 0, done.stderr


def test_run_timeout_and_silence_change_the_wait_and_leave_the_cell_as_written(cli: Cli, gate: Gate) -> None:
    waited = cli("run", "--timeout", "0.5", gate.wait)
    assert waited.returncode == 3 and "Still running" in waited.stdout, waited.stdout
    assert cli("interrupt").returncode == 0
    quiet = cli("run", "--silence", "0.5", f"print('started', flush=True)\n{gate.wait}")
    assert quiet.returncode == 3 and "started" in quiet.stdout, quiet.stdout
    assert cli("interrupt").returncode == 0
    script = cli("export", "--format", "py").stdout
    assert "warmkernel:" not in script.replace("# %% In [", ""), script  # no directive line was added


def test_run_refuses_a_bad_directive_before_starting_a_daemon(cli: Cli) -> None:
    done = cli("run", "# warmkernel: --bogus\n1")
    assert done.returncode == 2
    assert done.stderr.startswith('warmkernel: invalid_directive: line 1: unknown option "--bogus"'), done
    assert cli("sessions").stdout.strip() == "No live daemons."


def test_run_reads_a_cells_own_directive_as_the_daemon_does_after_a_patch_literal(cli: Cli) -> None:
    # Read as Python, the patch's embedded quotes would hide the directive inside a string.
    patch = '*** Begin Patch\n*** Add File: a.py\n+x = """\n*** End Patch\n'
    cell = f'p = r"""\n{patch}"""\n# warmkernel: --wait 5'
    done = cli("run", cell, "--timeout", "7")  # the cell's own --wait stands; no second one is added
    assert done.returncode == 0, done.stderr
    assert cli("export", "--format", "py").stdout.rstrip().endswith("# warmkernel: --wait 5")


def test_an_empty_word_is_an_argument_like_any_other(cli: Cli) -> None:
    assert cli("run", "print('5')").returncode == 0
    done = cli("search", "", "1")  # not a search for '5'
    assert done.returncode == 2
    assert done.stderr.startswith("warmkernel: invalid_query: query is empty"), done.stderr
    assert cli("read", "1", "--lines", "-1:").stdout.strip().endswith("5"), "a dash value still reads"


def test_stop_all_with_nothing_live_says_so(cli: Cli) -> None:
    done = cli("stop", "--all")
    assert (done.returncode, done.stdout) == (0, "No live daemons.\n")


@pytest.mark.parametrize("narrowed", [("--daemon", "0badcafe"), ("--kernel", "train")])
def test_stop_all_narrowed_to_one_daemon_or_kernel_is_refused_and_stops_nothing(
    cli: Cli, narrowed: tuple[str, str]
) -> None:
    assert cli("start").returncode == 0
    done = cli("stop", "--all", *narrowed)
    assert done.returncode == 2
    assert done.stderr == (
        "warmkernel: invalid_arguments: --all stops every daemon of this user: "
        "give it without --daemon and --kernel\n"
    )
    assert len(json.loads(cli("sessions", "--json").stdout)) == 1


def test_ctrl_c_on_a_waiting_run_leaves_the_cell_running_and_says_how_to_follow_it(
    cli: Cli, gate: Gate
) -> None:
    assert cli("start").returncode == 0
    waiting = subprocess.Popen(
        [sys.executable, "-m", "warmkernel", "run", gate.wait],
        cwd=cli.workspace,
        env=cli.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while "busy: execution 1 running" not in cli("status").stdout:
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.1)
    waiting.send_signal(signal.SIGINT)
    _, stderr = waiting.communicate(timeout=30)
    assert waiting.returncode == 130
    assert stderr == (
        "warmkernel: stopped waiting; the cell goes on in the kernel: `warmkernel wait` follows it, "
        "`warmkernel interrupt` stops it\n"
    )
    assert "busy: execution 1 running" in cli("status").stdout
    assert cli("interrupt").returncode == 0
