"""A CLI failure is one line naming its code, with the documented exit status."""

from __future__ import annotations

from tests.cli.conftest import Cli


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
