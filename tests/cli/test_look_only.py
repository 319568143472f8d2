"""Verbs that only look start nothing: without a live daemon they say so in one line."""

from __future__ import annotations

import json

from tests.cli.conftest import Cli

LOOKING = [
    ("status",),
    ("history",),
    ("show",),
    ("state",),
    ("wait",),
    ("read", "--lines", "-5:"),
    ("search", "x"),
    ("vars",),
    ("inspect", "x"),
    ("kernels",),
    ("interrupt",),
    ("stop-kernel", "train"),
    ("nb", "status", "nb.ipynb"),
]


def test_look_only_verbs_start_no_daemon(cli: Cli) -> None:
    assert "nothing to show" in cli("history").stderr, "no journal yet"
    assert cli("run", "x = 1").returncode == 0
    assert cli("run", "y = 2").returncode == 0
    assert cli("stop").returncode == 0
    for verb in LOOKING:
        done = cli(*verb)
        assert done.returncode == 2, (verb, done.stdout, done.stderr)
        assert done.stderr.startswith("warmkernel: daemon_not_found: no daemon serves"), (verb, done.stderr)
        assert "its journal keeps executions (2 of kernel main), which a new daemon shows" in done.stderr
        assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
    assert json.loads(cli("sessions", "--json").stdout) == []
    # the verbs that act start one, as before
    assert cli("run", "x = 2").returncode == 0
    assert cli("status").returncode == 0
