"""`warmkernel export` and `warmkernel nb add` as a subprocess: files written where the person
says, documents on standard output, refusals with their codes and exit statuses."""

from __future__ import annotations

import json

import nbformat

from tests.cli.conftest import Cli
from tests.cli.test_nb import write_notebook


def test_export_writes_files_from_the_current_directory_or_prints_the_document(cli: Cli) -> None:
    assert cli("run", "print('one')").returncode == 0
    assert cli("run", "2 + 2").returncode == 0
    done = cli("export", "-o", "session.ipynb")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "exported executions 1-2 (2 cells) as ipynb to session.ipynb (" + (
        f"{(cli.workspace / 'session.ipynb').stat().st_size:,} bytes)\n"
    )
    notebook = nbformat.read(cli.workspace / "session.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert [cell.outputs[0].get("text") or cell.outputs[0].data["text/plain"] for cell in notebook.cells] == [
        "one\n",
        "4",
    ]

    (cli.workspace / "notes").mkdir()
    sub = Cli(cli.workspace / "notes", cli.root)
    done = sub("export", "--executions", "2", "-o", "page.html")
    assert done.returncode == 0 and "as html to notes/page.html" in done.stdout, done.stdout + done.stderr
    assert (cli.workspace / "notes" / "page.html").read_text().startswith("<!DOCTYPE html>")

    script = cli("export", "--format", "py")
    assert script.returncode == 0
    assert script.stdout.startswith("# %% In [1] · completed · ") and script.stdout.endswith("2 + 2\n")
    facts = json.loads(cli("export", "--executions", "1", "--format", "md", "--json").stdout)
    assert (facts["executions"], facts["format"], facts["path"]) == ([1], "md", None)


def test_export_refusals_exit_with_usage_status_and_the_tools_codes(cli: Cli) -> None:
    bad = cli("export", "--executions", "2-x")
    assert bad.returncode == 2 and bad.stderr.startswith('warmkernel: invalid_executions: executions="2-x"')
    assert cli("sessions").stdout.strip() == "No live daemons."  # refused before any daemon started
    assert cli("run", "1").returncode == 0
    missing = cli("export", "--executions", "1-3")
    assert missing.returncode == 2
    assert missing.stderr == (
        "warmkernel: execution_not_found: execution 2 does not exist in kernel main; executions 1-1 exist\n"
    )
    outside = cli("export", "-o", "../elsewhere.ipynb")
    assert outside.returncode == 2 and "path_outside_workspace" in outside.stderr
    assert str(cli.workspace) in outside.stderr
    assert not (cli.workspace.parent / "elsewhere.ipynb").exists()


def test_nb_add_puts_executions_after_a_cell(cli: Cli) -> None:
    write_notebook(cli.workspace / "nb.ipynb", [("load", "n = 3"), ("show", "print(n)")])
    assert cli("run", "print('explored')").returncode == 0
    done = cli("nb", "add", "nb.ipynb", "--executions", "1", "--after", "load")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "added 1 code cell to nb.ipynb after cell load (index 1 among all its cells, markdown too): "
        "execution-1"
    )
    notebook = nbformat.read(cli.workspace / "nb.ipynb", as_version=4)
    assert [cell.id for cell in notebook.cells] == ["load", "execution-1", "show"]
    assert notebook.cells[1].outputs[0].text == "explored\n"
    # Each kernel numbers its own executions: the refusal names the kernel it looked in.
    assert cli("run", "--kernel", "side", "1").returncode == 0
    elsewhere = cli("nb", "add", "nb.ipynb", "--executions", "2", "--kernel", "side")
    assert elsewhere.returncode == 2
    assert "execution 2 does not exist in kernel side; executions 1-1 exist" in elsewhere.stderr


def test_a_document_on_standard_output_carries_no_notice_the_next_reply_says_it(cli: Cli) -> None:
    assert cli("run", "print('kept')").returncode == 0
    assert cli("stop").returncode == 0
    script = cli("export", "--format", "py")  # a new daemon, with the journal's records
    assert script.returncode == 0, script.stderr
    assert script.stdout == script.stdout.split("\n", 1)[0] + "\nprint('kept')\n"
    assert script.stdout.startswith("# %% In [1] · completed · ")
    assert cli("status").stdout.startswith("note: warmkernel restarted; execution 1 is kept")
