"""CLI verbs made from the tool declarations: every parameter is spelled, every verb has an
example, new flags reach the tools, and a client verb loads nothing of the server."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.cli.test_nb import write_notebook
from tests.gates import Gate
from warmkernel.cli.parser import build_parser
from warmkernel.tools.catalog import TOOLS

ONE_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
TOOL_VERBS = [verb.words for tool in TOOLS for verb in tool.verbs]
LOCAL_VERBS = [
    ("sessions",),
    ("start",),
    ("stop",),
    ("mcp",),
    ("serve",),
    ("view",),
    ("init",),
    ("nb",),
    ("completion",),
]
SERVER_MODULES = (
    "warmkernel.process",
    "warmkernel.faces.mcp_server",
    "warmkernel.session.session",
    "warmkernel.kernel",
    "warmkernel.faces.http_server",
    "warmkernel.daemon.jupyter_host",
    "IPython",
    "jupyter_client",
    "uvicorn",
    "starlette",
)


def _subparser(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> argparse.ArgumentParser:
    for word in words:
        (choices,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = choices.choices[word]
    return parser


def test_every_tool_parameter_has_a_cli_spelling() -> None:
    parser = build_parser()
    unspelled = []
    for tool in TOOLS:
        assert tool.verbs, f"{tool.name} has no verb"
        spelled: set[str] = set()
        for verb in tool.verbs:
            dests = {action.dest for action in _subparser(parser, verb.words)._actions}
            spelled |= {param.name for param in tool.params if param.name in dests}
            assert {p.name for p in tool.params if p.name not in verb.fixed} <= dests, verb.name
        unspelled += [f"{tool.name}.{param.name}" for param in tool.params if param.name not in spelled]
    assert unspelled == []


@pytest.mark.parametrize("words", TOOL_VERBS + LOCAL_VERBS, ids=" ".join)
def test_every_verb_help_shows_an_example(cli: Cli, words: tuple[str, ...]) -> None:
    done = cli(*words, "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: warmkernel " + " ".join(words))
    example = done.stdout.split("example:\n", 1)[1]
    assert example.startswith("  warmkernel " + " ".join(words))
    assert "(default: None)" not in done.stdout and "(default: False)" not in done.stdout
    # The tools' words that mean nothing here: JSON's null, and paths the CLI takes from the
    # current directory.
    words_of_the_tools = ("null:", "Null:", "relative to the workspace")
    assert [word for word in words_of_the_tools if word in done.stdout] == []


def test_a_flag_that_turns_a_default_off_says_what_it_does(cli: Cli) -> None:
    shown = " ".join(cli("nb", "run", "--help").stdout.split())
    assert "--no-stop-on-error go on past cells that raise (default: stop at one)" in shown


def test_read_takes_a_line_range_that_starts_with_a_dash(daemon_cli: Cli) -> None:
    first = daemon_cli("run", "for i in range(1, 6): print(f'line {i}')").stdout
    number = first.split("]")[0].removeprefix("In [")
    done = daemon_cli("read", number, "--lines", "-2:")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["line 4", "line 5"]
    assert daemon_cli("read", number, "--lines=-1:").stdout.splitlines()[1:] == ["line 5"]


def test_search_clips_lines_to_max_chars(daemon_cli: Cli) -> None:
    daemon_cli("run", "print('needle ' + 'x' * 50)")
    found = daemon_cli("search", "needle", "--max-chars", "10").stdout.splitlines()
    assert found[1].startswith("M 1 | needle xxx") and "chars omitted" in found[1]


def test_read_images_names_each_image(daemon_cli: Cli, tmp_path: Path) -> None:
    cell = (
        "from IPython.display import Image, display\nimport base64\n"
        f"display(Image(base64.b64decode({ONE_PIXEL!r})))"
    )
    assert daemon_cli("run", cell, "-o", str(tmp_path)).returncode == 0
    done = daemon_cli("read", "--stream", "images", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total_images"] == 1


def test_run_and_wait_return_after_silence(daemon_cli: Cli, gate: Gate) -> None:
    # Only the silence can end these waits early: the cell waits on its gate, the timeouts are long.
    cell = f"print('started', flush=True)\n{gate.wait}"
    ran = daemon_cli("run", "--silence", "0.3", "--timeout", "60", cell)
    assert ran.returncode == 3 and "started" in ran.stdout, ran.stdout + ran.stderr
    waited = daemon_cli("wait", "--silence", "0.3", "--timeout", "60")
    assert waited.returncode == 3 and "silent for" in waited.stdout, waited.stdout
    assert daemon_cli("interrupt").returncode == 0
    assert daemon_cli("wait", "--timeout", "30").returncode == 4


def test_bad_values_are_refused_with_the_tools_codes_before_any_daemon_starts(cli: Cli) -> None:
    done = cli("search", "x", "--max-chars", "0")
    assert done.returncode == 2 and done.stderr.startswith("warmkernel: invalid_max_chars: max_chars=0")
    assert cli("sessions").stdout.strip() == "No live daemons."


def test_nb_run_can_go_on_past_errors(cli: Cli) -> None:
    write_notebook(cli.workspace / "nb.ipynb", [("bad", "1/0"), ("good", "print('reached')")])
    stopped = cli("nb", "run", "nb.ipynb", "--cells", "all")
    assert stopped.returncode == 1 and "reached" not in stopped.stdout
    past = cli("nb", "run", "nb.ipynb", "--cells", "all", "--no-stop-on-error")
    assert "reached" in past.stdout, past.stdout + past.stderr


def test_a_client_verb_loads_no_server_module(daemon_cli: Cli) -> None:
    script = (
        "import json, sys\n"
        "from warmkernel.cli import main\n"
        "status = main(['status'])\n"
        "print(json.dumps({'status': status, 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=daemon_cli.workspace,
        env=daemon_cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    facts = json.loads(done.stdout.splitlines()[-1])
    assert facts["status"] == 0, done.stdout + done.stderr
    loaded = [name for name in facts["modules"] if name.startswith(SERVER_MODULES)]
    assert loaded == []
