"""A CLI failure is one line naming its code, with the documented exit status."""

from __future__ import annotations

import json

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
