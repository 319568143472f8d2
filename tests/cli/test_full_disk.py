"""A full state directory degrades, never ends anything: the flooding cell finishes and says what
it could not keep, the daemon and its kernel serve on, what is kept stays readable, a cell whose
start cannot be journaled is refused and numbered nothing, and after a restart the numbers go on
after the last one ever given out."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.conftest import daemon_env
from tests.tmpfs import fill, grow, needs_root, small_tmpfs
from warmkernel.session.journal import STATE_DIR_ENV

pytestmark = [needs_root, pytest.mark.timeout(240)]

LINES = 100_000
FLOOD = f"kept = 'namespace'\nfor i in range({LINES}): print(f'line {{i:07d}} ' + 'x' * 40)"
"""About 5 MB of output, for a state directory of 2 MB."""
NO_ROOM = "has no room: the disk is full"


@pytest.fixture
def full_cli(cli: Cli) -> Iterator[tuple[Cli, Path]]:
    """The CLI of a workspace whose state directory is a 2 MB tmpfs; its daemon is stopped before
    the tmpfs goes."""
    with small_tmpfs(Path(daemon_env(cli.root)[STATE_DIR_ENV]), "2m") as state:
        try:
            yield cli, state
        finally:
            cli("stop", "--all")


def _not_kept(state_reply: str) -> int:
    found = re.search(r"reason: ([\d,]+) bytes of output not kept: the disk is full", state_reply)
    assert found is not None, state_reply
    return int(found.group(1).replace(",", ""))


def test_a_flood_on_a_full_state_directory_finishes_and_numbers_go_on_after_a_restart(
    full_cli: tuple[Cli, Path],
) -> None:
    cli, state = full_cli
    flood = cli("run", "--timeout", "120", FLOOD)
    assert flood.returncode == 0, flood.stdout + flood.stderr
    first, header = flood.stdout.splitlines()[:2]
    assert first.startswith("note: the state directory ") and NO_ROOM in first
    assert header.startswith("In [1] · ")

    status = cli("state", "1").stdout
    assert "execution 1: completed" in status and NO_ROOM not in status  # said once
    assert _not_kept(status) > 0
    counted = re.search(r"combined (\d+)", status)
    assert counted is not None, status
    kept = int(counted.group(1))
    assert 0 < kept < LINES
    head = cli("read", "1", "--lines", "1:1").stdout.splitlines()[1:]
    tail = cli("read", "1", "--lines", "-1:").stdout.splitlines()[1:]
    assert head == ["line 0000000 " + "x" * 40]
    assert tail == [f"line {kept - 1:07d} " + "x" * 40]  # every line kept reads back, in order

    filler = fill(state)  # whatever room the flood's last failed write gave back is taken too
    refused = cli("run", "y = 1  # " + "y" * 8000)  # its start needs room in the journal
    assert refused.returncode == 1
    assert "journal_unavailable" in refused.stderr and "got no number" in refused.stderr
    assert cli("read", "1", "--lines", "-1:").stdout.splitlines()[1:] == tail

    filler.unlink()
    grow(state, "64m")
    again = cli("run", "kept").stdout.splitlines()  # the same daemon and kernel: no restart notice
    assert again[0].startswith("In [2] · ") and again[1:] == ["Out[2]: 'namespace'"]

    assert cli("stop").returncode == 0
    after = cli("run", "print('after a restart')").stdout.splitlines()
    assert after[0].startswith("note: warmkernel restarted; executions 1-2 are kept")
    assert after[1].startswith("In [3] · ")
    assert _not_kept(cli("state", "1").stdout) > 0
    assert cli("read", "1", "--lines", "-1:").stdout.splitlines()[1:] == tail
