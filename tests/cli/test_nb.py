"""Notebook mode on the command line: `nb status`, `nb run`, `nb watch` and `start NB`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from tests.cli.conftest import Cli


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> None:
    notebook = new_notebook(cells=[new_code_cell(source, id=cell_id) for cell_id, source in cells])
    path.write_text(nbformat.writes(notebook), encoding="utf-8")


def status(cli: Cli, notebook: str = "nb.ipynb") -> dict[str, Any]:
    done = cli("nb", "status", notebook, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def not_fresh(facts: dict[str, Any]) -> dict[str, list[str]]:
    return {cell["id"]: cell["reasons"] for cell in facts["cells"] if cell["state"] != "fresh"}


def test_status_run_and_watch_from_a_subdirectory(cli: Cli) -> None:
    (cli.workspace / "data.txt").write_text("3")
    (cli.workspace / "lib.so").write_bytes(b"v1")
    (cli.workspace / "notes").mkdir()
    write_notebook(
        cli.workspace / "notes" / "nb.ipynb",
        [
            ("load", "n = int(open('data.txt').read())"),
            ("square", "sq = n * n\nprint(sq)"),
            ("other", "o = 1"),
        ],
    )
    assert cli("start").returncode == 0
    sub = Cli(cli.workspace / "notes", cli.root)
    first = sub("nb", "status", "nb.ipynb")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("notebook notes/nb.ipynb · 3 code cells: 3 never run")
    ran = sub("nb", "run", "nb.ipynb")
    assert ran.returncode == 0, ran.stderr
    assert "[cell 1 · square]" in ran.stdout and "\n9\n" in ran.stdout
    assert ran.stdout.endswith("every cell is fresh\n")
    (cli.workspace / "data.txt").write_text("4")
    assert not_fresh(status(sub)) == {"load": ["file_changed"], "square": ["upstream_stale"]}
    assert sub("nb", "run", "nb.ipynb", "--cells", "load,1").returncode == 0
    assert not_fresh(status(sub)) == {}
    assert sub("nb", "watch", "nb.ipynb", "../lib.so", "--cell", "other").returncode == 0
    (cli.workspace / "lib.so").write_bytes(b"v2")
    assert not_fresh(status(sub)) == {"other": ["file_changed"]}
    sessions = json.loads(cli("sessions", "--json").stdout)
    assert [session["notebook"] for session in sessions] == [str(cli.workspace / "notes" / "nb.ipynb")]
    missing = sub("nb", "status", "gone.ipynb")
    assert missing.returncode == 2 and missing.stderr.startswith("warmkernel: notebook_not_found:")


def test_run_that_stops_at_an_error_exits_1(cli: Cli) -> None:
    write_notebook(cli.workspace / "nb.ipynb", [("a", "1 / 0"), ("b", "b = 1")])
    done = cli("nb", "run", "nb.ipynb")
    assert done.returncode == 1
    assert "stopped after cell a (error); not run: b" in done.stdout


def test_start_with_a_notebook_runs_every_cell_once_past_errors(cli: Cli) -> None:
    path = cli.workspace / "nb.ipynb"
    write_notebook(path, [("a", "x = 1"), ("b", "1 / 0"), ("c", "y = x + 1")])
    before = path.read_bytes()
    started = cli("start", "nb.ipynb", "--no-save-outputs")
    assert started.returncode == 1, started.stdout + started.stderr  # a cell raised
    assert started.stdout.startswith("started ")
    assert "[cell 2 · c]" in started.stdout
    assert not_fresh(status(cli)) == {"b": ["errored"]}
    assert path.read_bytes() == before
    again = cli("start", "nb.ipynb", "--json")
    facts = json.loads(again.stdout)
    assert facts["started"] is False and [cell["id"] for cell in facts["run"]["cells"]] == ["b"]


def test_start_honours_the_skip_and_raises_tags(cli: Cli) -> None:
    notebook = new_notebook(
        cells=[
            new_code_cell("x = 1", id="a"),
            new_code_cell("print('must not run')", id="skip", metadata={"tags": ["skip-execution"]}),
            new_code_cell("", id="empty"),
            new_code_cell("raise ValueError('meant')", id="raises", metadata={"tags": ["raises-exception"]}),
            new_code_cell("print('reached', x)", id="c"),
        ]
    )
    (cli.workspace / "nb.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")
    started = cli("start", "nb.ipynb")
    assert started.returncode == 0, started.stdout + started.stderr  # the one error was expected
    assert "reached 1" in started.stdout and "must not run" not in started.stdout
    assert started.stdout.endswith("every cell is fresh\n"), "a skipped cell is not stale"
    facts = status(cli)
    assert {cell["id"]: cell["state"] for cell in facts["cells"]} == {
        "a": "fresh",
        "skip": "skipped",
        "empty": "skipped",
        "raises": "fresh",
        "c": "fresh",
    }
    saved = {cell.id: cell for cell in nbformat.read(cli.workspace / "nb.ipynb", as_version=4).cells}
    assert saved["skip"].execution_count is None and saved["skip"].outputs == []
    assert saved["raises"].outputs[0]["ename"] == "ValueError"


def test_a_missing_notebook_or_none_is_named_in_the_clis_words(cli: Cli) -> None:
    started = cli("start", "missing.ipynb")
    assert started.returncode == 2
    missing = cli.workspace / "missing.ipynb"
    assert started.stderr == f"warmkernel: notebook_not_found: {missing} does not exist\n"
    assert cli("sessions").stdout.strip() == "No live daemons.", "no daemon started for it"
    assert cli("start").returncode == 0
    unnamed = cli("nb", "status")
    assert unnamed.returncode == 2
    assert "which notebook? warmkernel nb status NAME.ipynb names one" in unnamed.stderr
