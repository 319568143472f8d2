"""Named kernels on the command line: `--kernel` on the verbs, `kernels`, `stop-kernel`, `stop --kernel`."""

from __future__ import annotations

import json

from tests.cli.conftest import Cli


def test_kernels_from_the_command_line(cli: Cli) -> None:
    assert cli("run", "x = 'main'").returncode == 0
    ran = cli("run", "--kernel", "train", "x = 'train'; x")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("In [1] · train ·") and ran.stdout.rstrip().endswith("'train'")
    assert cli("run", "x").stdout.rstrip().endswith("'main'")

    listing = cli("kernels")
    assert listing.returncode == 0, listing.stderr
    names = [line.split()[0] for line in listing.stdout.splitlines()[1:-1]]
    assert names == ["main", "train"]
    facts = json.loads(cli("kernels", "--json").stdout)
    assert [(k["name"], k["state"], k["executions"]) for k in facts["kernels"]] == [
        ("main", "ready", 2),
        ("train", "ready", 1),
    ]
    history = cli("history", "--kernel", "train")
    assert "x = 'train'" in history.stdout and "x = 'main'" not in history.stdout

    stopped = cli("stop-kernel", "train")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith("stopped: kernel train; no execution was running. Its record stays")
    listing = cli("kernels").stdout
    assert "warmkernel run ... --kernel NAME runs a cell in kernel NAME" in listing
    assert "kernel=" not in listing
    assert cli("read", "1", "--kernel", "train").stdout.rstrip().endswith("'train'")
    assert cli("run", "--kernel", "side", "1").returncode == 0
    assert cli("stop", "--kernel", "side").stdout.startswith("stopped: kernel side")
    states = {k["name"]: k["state"] for k in json.loads(cli("kernels", "--json").stdout)["kernels"]}
    assert states == {"main": "ready", "train": "stopped", "side": "stopped"}

    bad = cli("run", "--kernel", "Bad Name", "1")
    assert bad.returncode == 2
    assert "invalid_kernel" in bad.stderr and "Traceback" not in bad.stderr
    missing = cli("read", "--kernel", "nothere")
    assert missing.returncode == 2 and "kernel_not_found" in missing.stderr
    assert "--kernel" in cli("run", "--help").stdout


def test_named_kernels_records_outlive_the_daemon(cli: Cli) -> None:
    assert cli("run", "--kernel", "train", "print('epoch 1')").returncode == 0
    assert cli("stop").returncode == 0
    assert cli("start").returncode == 0
    listing = json.loads(cli("kernels", "--json").stdout)  # a new daemon, with the journal's kernels
    assert [(k["name"], k["state"], k["executions"]) for k in listing["kernels"]] == [
        ("main", "ready", 0),
        ("train", "stopped", 1),
    ]
    read = cli("read", "1", "--kernel", "train").stdout
    assert read.startswith("note: warmkernel restarted; execution 1 is kept") and "epoch 1" in read
    again = cli("run", "--kernel", "train", "'fresh'")
    assert again.stdout.startswith("In [2] · train ·"), again.stdout + again.stderr
